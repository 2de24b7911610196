//! The seed 001 §11 roofline of one kernel under one plan:
//!
//! `time = max(FLOPs / (peak · occ · eff), Bytes / (BW · occ)) + T_epilogue − overlap_gain + launch`
//!
//! - **FLOPs** per execution unit: the main contraction on tensor cores (`mma_sync`, `wgmma`)
//!   or CUDA cores (`simt`), padded to whole tiles (*tail waste*) and repeated per pass of a
//!   non-resident row epilogue; prologue ops recomputed at every reload of an operand tile
//!   (*tile reuse*: `A` is loaded `⌈N/BN⌉` times, `B` `⌈M/BM⌉` times); everything else on CUDA
//!   cores and the SFU. The compute time is the sum of the units' times.
//! - **Bytes**: DRAM serves each input and output once, and the reloads that miss L2: none
//!   while one wave's operand panels (the templates' grouped block order: [`RASTER_GROUP`]
//!   tile rows, walked column by column) fit in half of L2; L2 serves every tile load. The memory time is the larger of the two.
//!   Inputs read against their layout pay the *layout penalty* (§11: staged through shared memory;
//!   a contraction operand only the small `ldmatrix.trans` cost).
//! - **occ** = busy SMs / SMs × latency hiding (resident warps per SM / [`WARPS_TO_HIDE`], at
//!   most 1) × the last wave's fill (*wave quantization*).
//! - **eff** (pipeline efficiency) = the multiply's share of the k-loop's cycles
//!   `iters · c / (L + iters · max(c / a + B, L / ahead))` for k-iterations of `c` cycles at
//!   peak (the SM's resident blocks), the algorithm's reachable fraction `a` of the peak
//!   ([`algo_efficiency`]; for `simt` times the share its shared-memory reads leave the FMA pipe,
//!   [`simt_smem_share`]), the barrier `B` ([`BARRIER_CYCLES`]) and the load latency `L`
//!   ([`LOAD_LATENCY_CYCLES`]): the first tile waits `L`, then `ahead` tiles are in flight
//!   (`stages − 1` asynchronous, one for synchronous register prefetch). For a `wgmma` GEMM
//!   fed by TMA (not a conv's gather) the reachable fraction is [`WGMMA_TMA_EFFICIENCY`], the
//!   latency is the TMA ring's under load ([`TMA_LATENCY_CYCLES`], measured) and the k-iteration the
//!   [`soft_max`] of the multiply and the exposed latency (a deeper ring waits less), and the
//!   body the soft maximum of the compute and memory times.
//! - **T_epilogue**: writing the output; with `async.epilogue_overlap` the
//!   `overlap_gain = min(T_load, T_epilogue)` is subtracted (§11 "非同期の効果").
//! - **launch**: [`Target::launch_s`] per kernel.

use super::work::{ComputeAtWork, Gemm, KernelWork, Pattern, Role, Shape};
use crate::plan::regs::simt_micro_tile;
use crate::plan::space::{Algo, Knobs, Resources, RASTER_GROUP};
use crate::target::{Arch, Target};

/// Resident warps per SM that hide memory and pipeline latency (two per scheduler).
pub const WARPS_TO_HIDE: f64 = 8.0;
/// Cycles from issuing a tile's global loads to their data in shared memory (an L2 hit with
/// queueing under a full GEMM's traffic): a pipeline hides it when the iterations in flight
/// take as long.
pub const LOAD_LATENCY_CYCLES: f64 = 700.0;
/// Cycles of a k-iteration's barrier and wait.
pub const BARRIER_CYCLES: f64 = 40.0;
/// Cycles from a `wgmma` kernel's producer issuing a stage's TMA loads to the consumers'
/// `full` barrier completing when every SM streams (an L2 hit queued behind a full GEMM's
/// traffic, ≈ 1.15 µs at 1.83 GHz; a grid on fewer SMs waits in proportion, down to
/// [`LOAD_LATENCY_CYCLES`]).
/// *Measured*: the 2-stage `[128,256,64]` plan of the fp16 4096³ GEMM ran in 0.308 ms on an
/// H100 SXM (bench/results/gpu-h100-2026-11-26/call1-gpu-native.md): 4 waves of 64 k-tiles,
/// ≈ 2200 cycles a k-tile against 1024 of multiply at peak, with one stage in flight while the
/// other is multiplied: the load latency, not the multiply, sets the pace.
pub const TMA_LATENCY_CYCLES: f64 = 2100.0;
/// The exponent of [`soft_max`]: how sharply a pipeline turns from latency- to throughput-bound.
pub const SOFT_MAX_P: f64 = 4.0;

/// The fraction of the tensor peak a `wgmma` GEMM whose operands both come by TMA reaches at
/// best: cuBLAS's fp16 4096³ GEMM runs at 742 of the 989 dense TFLOP/s on an H100 SXM (0.75
/// with its waves and prologue; bench/results/gpu-h100-2026-11-26/call1-gpu-native.md).
pub const WGMMA_TMA_EFFICIENCY: f64 = 0.8;

/// The `p`-norm ([`SOFT_MAX_P`]) of two times: the larger, plus what the smaller adds as it
/// approaches it (a pipeline whose latency cover barely exceeds its latency still waits at
/// times, the latency varying; a deeper ring waits less). Used for the TMA-fed `wgmma` GEMM
/// only.
pub fn soft_max(a: f64, b: f64) -> f64 {
    let hi = a.max(b);
    if hi <= 0.0 {
        return 0.0;
    }
    hi * (1.0 + (a.min(b) / hi).powf(SOFT_MAX_P)).powf(1.0 / SOFT_MAX_P)
}
/// Extra cost of reading an input against its layout, as a fraction of its bytes' time:
/// staged through shared memory (elementwise and reduction kernels)...
pub const LAYOUT_STAGED: f64 = 0.25;
/// ...or transposed by `ldmatrix.trans` / the TMA descriptor (contraction operands).
pub const LAYOUT_VIEW: f64 = 0.02;

/// The fraction of the unit's peak an algorithm reaches at best: `mma.sync` 0.9 of A100's
/// tensor peak but about 0.62 of H100's (its dense rate needs `wgmma`; CUTLASS's SM80 kernels
/// on H100 measure about 60–65 %), `wgmma` 0.9 (a TMA-fed GEMM: [`WGMMA_TMA_EFFICIENCY`]),
/// SIMT FMA from shared memory 0.75.
pub fn algo_efficiency(algo: Algo, arch: Arch) -> f64 {
    match (algo, arch) {
        (Algo::MmaSync, Arch::Sm80) => 0.9,
        (Algo::MmaSync, Arch::Sm90) => 0.62,
        (Algo::Wgmma, _) => 0.9,
        (Algo::Simt, _) => 0.75,
        // The GEMV walk issues one FMA per loaded element: bound by its loads, not its pipe.
        (Algo::Gemv, _) => 1.0,
    }
}

/// Shared-memory wavefronts an SM serves per cycle (32 banks of 4 bytes: one warp read of 4-byte
/// values that hits distinct banks or broadcasts).
pub const SMEM_WAVEFRONTS_PER_CLOCK: f64 = 1.0;

/// The share of the FMA pipe the SIMT template's inner step can keep busy, at most 1: per `K`
/// element each thread reads its `TM + TN` fragment values from shared memory (each warp read
/// one wavefront: the template's strided micro-tile makes them broadcasts or distinct banks) for
/// `TM·TN` FMAs ([`simt_micro_tile`] of `bm·bn / threads`). A small micro-tile is bound by its
/// shared-memory reads, not its FMAs: `32×32` over 128 threads (`4×2`) keeps a third of an H100
/// SM's FMA lanes busy, `128×128` over 256 (`8×8`) nearly all.
pub fn simt_smem_share(bm: u64, bn: u64, threads: u64, target: &Target) -> f64 {
    let threads = threads.max(1);
    let (tm, tn) = simt_micro_tile((bm * bn / threads).max(1));
    let fma_per_clock = target.fp32_flops / 2.0 / (target.sms as f64 * target.clock_ghz * 1e9);
    let fma_cycles = (threads * tm * tn) as f64 / fma_per_clock;
    let read_cycles = (threads as f64 / 32.0).ceil() * (tm + tn) as f64 / SMEM_WAVEFRONTS_PER_CLOCK;
    (fma_cycles / read_cycles.max(1e-9)).min(1.0)
}

pub use crate::plan::priced::{Bound, Estimate};

/// Prices `work` under the plan `knobs` with `res` on `target`.
pub fn estimate(work: &KernelWork, knobs: &Knobs, res: &Resources, target: &Target) -> Estimate {
    match (&work.shape, knobs) {
        (
            Shape::Contraction(g),
            Knobs::Contraction {
                algo: Algo::Gemv, ..
            },
        ) => super::gemv::estimate(work, g, knobs, res, target),
        (Shape::Contraction(g), Knobs::Contraction { .. }) => {
            contraction(work, g, knobs, res, target)
        }
        (
            Shape::Reduction {
                rows, len, passes, ..
            },
            Knobs::Reduction { .. },
        ) => reduction(work, *rows, *len, *passes, knobs, res, target),
        (Shape::ComputeAt(ca), Knobs::Elementwise { .. }) => {
            compute_at(work, ca, knobs, res, target)
        }
        (Shape::ComputeAt(ca), Knobs::Reduction { .. }) => {
            compute_at_window(work, ca, knobs, res, target)
        }
        (Shape::Scan { lines, len }, Knobs::Elementwise { .. }) => {
            scan(work, *lines, *len, knobs, res, target)
        }
        _ => elementwise(work, knobs, res, target),
    }
}

/// Per tile of a line, the scan template's serial step: two block barriers, a warp-shuffle scan
/// and the carry broadcast through shared memory, which the block cannot overlap with its next
/// tile's loads (seconds; ~2 µs-class latency chains at ~1.7 GHz, a planning figure).
const SCAN_TILE_S: f64 = 1.0e-6;

/// The scan template (`codegen::templates::scan`): one CTA per line walking it in tiles of
/// `block × items` elements with a running carry. Work and bytes are linear (inputs + outputs
/// once); few lines leave SMs idle (`occupancy` of `lines` CTAs) and a long line pays
/// [`SCAN_TILE_S`] per tile in sequence.
fn scan(
    work: &KernelWork,
    lines: f64,
    len: f64,
    knobs: &Knobs,
    res: &Resources,
    target: &Target,
) -> Estimate {
    let Knobs::Elementwise { block, items, .. } = *knobs else {
        unreachable!("elementwise knobs")
    };
    let tile = (block * items) as f64;
    let tiles = (len / tile).ceil().max(1.0);
    let ctas = lines.max(1.0);
    let (occ, waves) = occupancy(ctas, res.threads as f64 / 32.0, res, target);
    let waste = tiles * tile / len.max(1.0);
    let compute_s = unit_time(work.ops.simt * waste, work.ops.sfu, target, occ);
    let serial_s = tiles * waves * SCAN_TILE_S;
    finish_read_once(
        work,
        compute_s.max(serial_s),
        waste,
        occ,
        (waves, ctas),
        target,
    )
}

/// [`finish`] for a kernel that reads its inputs once and stores its output at occupancy
/// `occ`, without overlap: `compute_s` against the memory and epilogue times of `work`'s
/// bytes; its FLOPs are the work's ops times `waste` (the idle lanes that issue).
fn finish_read_once(
    work: &KernelWork,
    compute_s: f64,
    waste: f64,
    occ: f64,
    (waves, ctas): (f64, f64),
    target: &Target,
) -> Estimate {
    let dram = work.in_bytes();
    let memory_s = dram / (target.dram_bw * occ.max(1e-9));
    let epilogue_s = work.out_bytes / (target.dram_bw * occ.max(1e-9));
    finish(
        compute_s,
        memory_s,
        epilogue_s,
        0.0,
        (work.ops.simt + work.ops.sfu) * waste,
        dram + work.out_bytes,
        dram + work.out_bytes,
        occ,
        waves,
        1.0,
        ctas,
        target,
    )
}

/// `occ`: busy SMs × latency hiding × last-wave fill, and the number of waves.
pub(super) fn occupancy(
    ctas: f64,
    warps_per_cta: f64,
    res: &Resources,
    target: &Target,
) -> (f64, f64) {
    let sms = target.sms as f64;
    let per_sm = res.ctas_per_sm.max(1) as f64;
    let slots = sms * per_sm;
    let waves = (ctas / slots).ceil().max(1.0);
    let resident = ctas.min(slots);
    let busy = ctas.min(sms);
    let warps_per_sm = (resident / busy.max(1.0)).ceil() * warps_per_cta;
    let hide = (warps_per_sm / WARPS_TO_HIDE).min(1.0);
    let fill = ctas / (waves * resident.max(1.0));
    ((busy / sms) * hide * fill, waves)
}

/// The share of re-reads that miss L2 when a wave's working set is `ws` bytes: none while it fits
/// in half of L2 (the other half holds outputs and other streams), then growing to all.
fn l2_spill(ws: f64, target: &Target) -> f64 {
    let half = target.l2_bytes as f64 / 2.0;
    ((ws - half) / ws.max(1.0)).clamp(0.0, 1.0)
}

/// CUDA-core and SFU time of `simt` and `sfu` operations at occupancy `occ`.
pub(super) fn unit_time(simt: f64, sfu: f64, target: &Target, occ: f64) -> f64 {
    (simt / target.fp32_flops + sfu / target.sfu_ops()) / occ.max(1e-9)
}

fn contraction(
    work: &KernelWork,
    g: &Gemm,
    knobs: &Knobs,
    res: &Resources,
    target: &Target,
) -> Estimate {
    let Knobs::Contraction {
        algo,
        bm,
        bn,
        bk,
        stages,
        async_,
        row_resident,
        splits,
        ..
    } = *knobs
    else {
        unreachable!("contraction knobs")
    };
    let (bm, bn, bk) = (bm as f64, bn as f64, bk as f64);
    // `K` steps: a tile summing two contractions walks each one's steps (`Gemm::second`).
    let main_steps = ((g.k - g.k_second) / bk).ceil();
    let tk = main_steps + (g.k_second / bk).ceil();
    // A pooled tile computes `bm` rows but advances by its whole windows' rows.
    let rows = g.rows_per_tile(bm as u64).max(1) as f64;
    let (tm, tn) = ((g.m / rows).ceil(), (g.n / bn).ceil());
    let passes = if g.row_extent.is_some() && !row_resident {
        g.row_passes as f64
    } else {
        1.0
    };
    // Split-K: `splits` CTAs per tile, each over `⌈tk / splits⌉` of the `K` steps.
    let splits = splits.max(1) as f64;
    // The partial tiles the splits store: with a second contraction, each split stores only
    // the accumulator halves its steps touched (`templates::split_k::halves_written`).
    let written = if g.second.is_some() && splits > 1.0 {
        crate::codegen::templates::split_k::halves_written(
            splits as u64,
            tk as u64,
            main_steps as u64,
        ) as f64
    } else {
        splits
    };
    let tiles = g.batch * tm * tn;
    let ctas = tiles * splits;
    let (occ, waves) = occupancy(ctas, res.threads as f64 / 32.0, res, target);

    // Arithmetic.
    let core = 2.0 * g.batch * tm * bm * tn * bn * tk * bk * passes;
    let (reload_a, reload_b) = (tn * passes, tm * passes);
    let (elems_a, elems_b) = (g.batch * g.m * g.k, g.batch * g.n * g.k);
    let pro_simt = g.prologue[0].simt * elems_a * (reload_a - 1.0).max(0.0)
        + g.prologue[1].simt * elems_b * (reload_b - 1.0).max(0.0);
    let pro_sfu = g.prologue[0].sfu * elems_a * (reload_a - 1.0).max(0.0)
        + g.prologue[1].sfu * elems_b * (reload_b - 1.0).max(0.0);
    // A pooled tile's epilogue: each value stored to shared memory, then each window folded
    // from it (a load and an op per row and column).
    let pool_simt = if g.pool.is_some() {
        3.0 * g.batch * tm * tn * bm * bn
    } else {
        0.0
    };
    let simt = work.ops.simt + pro_simt + pool_simt;
    let sfu = work.ops.sfu + pro_sfu;
    let peak = match algo {
        Algo::Simt => target.fp32_flops,
        _ => target.tensor_flops,
    };
    let per_sm_clock = peak / (target.sms as f64 * target.clock_ghz * 1e9);
    let ctas_on_sm = (ctas / target.sms as f64)
        .min(res.ctas_per_sm.max(1) as f64)
        .max(1.0);
    let iter_cycles = 2.0 * bm * bn * bk / per_sm_clock * ctas_on_sm;
    // The first tile's latency, then each k-iteration as long as its multiply (at the
    // algorithm's reachable rate, and its barrier) or as the share of the load latency its
    // tiles in flight leave exposed.
    let ahead = if async_ { stages as f64 - 1.0 } else { 1.0 };
    // A GEMM on the TMA ring (a conv's gathered image is priced as the other pipelines).
    let tma_ring = algo == Algo::Wgmma && g.pattern != Pattern::Conv;
    let reach = match algo {
        _ if tma_ring => WGMMA_TMA_EFFICIENCY,
        Algo::Simt => {
            algo_efficiency(algo, target.arch)
                * simt_smem_share(bm as u64, bn as u64, res.threads as u64, target)
        }
        _ => algo_efficiency(algo, target.arch),
    };
    let busy = iter_cycles / reach + BARRIER_CYCLES;
    let (latency, per_iter) = if tma_ring {
        // The measured latency is that of every SM streaming; an idle GPU's is the plain one.
        let loaded = (ctas / target.sms as f64).min(1.0);
        let l = LOAD_LATENCY_CYCLES + (TMA_LATENCY_CYCLES - LOAD_LATENCY_CYCLES) * loaded;
        (l, soft_max(busy, l / ahead.max(1.0)))
    } else {
        (
            LOAD_LATENCY_CYCLES,
            busy.max(LOAD_LATENCY_CYCLES / ahead.max(1.0)),
        )
    };
    let steps = (tk / splits).ceil();
    let eff = steps * iter_cycles / (latency + steps * per_iter);
    let compute_s = core / (peak * occ.max(1e-9) * eff)
        + unit_time(simt, sfu, target, occ)
        + split_fixup_s(written, bm * bn, target);

    // Traffic.
    let bytes_of = |role: Role| -> f64 {
        work.inputs
            .iter()
            .filter(|i| i.role == role)
            .map(|i| i.bytes)
            .sum()
    };
    let (a_bytes, b_bytes) = (elems_a * g.a_elem as f64, elems_b * g.b_elem as f64);
    let load_l2 = a_bytes * reload_a + b_bytes * reload_b;
    let other = bytes_of(Role::Other);
    let unique = bytes_of(Role::A) + bytes_of(Role::B) + other;
    let operands = bytes_of(Role::A) + bytes_of(Role::B);
    // The operand panels one wave of CTAs reads, in the grouped block order.
    let wave = ctas.min(target.sms as f64 * res.ctas_per_sm.max(1) as f64);
    let panels_m = tm.min(RASTER_GROUP as f64).min(wave);
    let panels_n = tn.min((wave / panels_m).ceil());
    let working_set = panels_m * bm * g.k * g.a_elem as f64 + panels_n * bn * g.k * g.b_elem as f64;
    // Split-K's partial tiles: written once to the workspace (reaching DRAM eventually), read
    // back from L2 by each tile's last CTA.
    let partials = if splits > 1.0 {
        tiles * written * bm * bn * 4.0
    } else {
        0.0
    };
    let dram = unique
        + (load_l2 - operands).max(0.0) * l2_spill(working_set, target)
        + work.out_bytes
        + partials;
    let l2 = load_l2 + other + work.out_bytes + 2.0 * partials;
    let penalty: f64 = work
        .inputs
        .iter()
        .filter(|i| !i.contiguous)
        .map(|i| {
            i.bytes
                * if i.role == Role::Other {
                    LAYOUT_STAGED
                } else {
                    LAYOUT_VIEW
                }
        })
        .sum();
    let load_s = ((dram - work.out_bytes + penalty) / target.dram_bw).max(load_l2 / target.l2_bw)
        / occ.max(1e-9);
    // The tensor-core epilogue's stores fill whole sectors only when staged (`store_efficiency`).
    let store_eff = match algo {
        Algo::Simt | Algo::Gemv => 1.0,
        Algo::MmaSync | Algo::Wgmma => g.store_efficiency(work.out_elem_bytes),
    };
    let epilogue_s = work.out_bytes / (target.dram_bw * occ.max(1e-9) * store_eff);
    let memory_s = load_s;
    let overlap = if async_ { load_s.min(epilogue_s) } else { 0.0 };
    // The SM90 convolution's gather producer bounds its k-loop (`conv90`).
    let compute_s = compute_s.max(super::conv90::producer_s(
        g,
        knobs,
        res,
        target,
        super::conv90::EMITTED,
    ));
    // A TMA ring feeds the multiply and carries the L2 stream: near either roof its waits
    // add up (the multiply waits on stages the stream has not filled), so the body is the
    // soft maximum of the two, not the larger alone.
    // The larger keeps its name (the bound).
    let (compute_s, memory_s) = match tma_ring {
        true if compute_s >= memory_s => (soft_max(compute_s, memory_s), memory_s),
        true => (compute_s, soft_max(compute_s, memory_s)),
        false => (compute_s, memory_s),
    };
    finish(
        compute_s,
        memory_s,
        epilogue_s,
        overlap,
        core + simt + sfu,
        dram + penalty,
        l2,
        occ,
        waves,
        eff,
        ctas,
        target,
    )
}

/// The time split-K adds to a tile's critical path: its last CTA publishes its partial tile
/// (a fence and an atomic: one global round trip), then reads the `splits` partial tiles of
/// `tile` fp32 elements back from L2 (independent loads: one latency plus the bytes at the
/// SM's share of the L2 bandwidth). 0 without a split.
pub fn split_fixup_s(splits: f64, tile: f64, target: &Target) -> f64 {
    if splits <= 1.0 {
        return 0.0;
    }
    let round_trips = 2.0 * LOAD_LATENCY_CYCLES / (target.clock_ghz * 1e9);
    round_trips + splits * tile * 4.0 / (target.l2_bw / target.sms as f64)
}

/// The estimate of a body of `compute_s` and `memory_s` with its epilogue and launch.
#[allow(clippy::too_many_arguments)]
pub(super) fn finish(
    compute_s: f64,
    memory_s: f64,
    epilogue_s: f64,
    overlap_gain_s: f64,
    flops: f64,
    bytes: f64,
    l2_bytes: f64,
    occupancy: f64,
    waves: f64,
    efficiency: f64,
    ctas: f64,
    target: &Target,
) -> Estimate {
    let body = compute_s.max(memory_s);
    Estimate {
        time_s: body + epilogue_s - overlap_gain_s + target.launch_s,
        compute_s,
        memory_s,
        epilogue_s,
        overlap_gain_s,
        launch_s: target.launch_s,
        flops,
        bytes,
        l2_bytes,
        bound: if compute_s >= memory_s {
            Bound::Compute
        } else {
            Bound::Memory
        },
        occupancy,
        waves,
        efficiency,
        ctas,
    }
}

fn staged_penalty(work: &KernelWork) -> f64 {
    work.inputs
        .iter()
        .filter(|i| !i.contiguous)
        .map(|i| i.bytes * LAYOUT_STAGED)
        .sum()
}

/// Cycles from a row's first loads to their data from DRAM (≈ 550–700 ns on A100 and H100:
/// *assumed*, a planning figure): the row template waits it once per round of loads.
pub const DRAM_LATENCY_CYCLES: f64 = 1000.0;
/// Cycles of one dependent warp-shuffle step of a row reduction's butterfly.
pub const SHUFFLE_CYCLES: f64 = 30.0;
/// Cycles of a shared-memory store or load on a reduction's critical path.
pub const SMEM_CYCLES: f64 = 30.0;
/// Cycles of an L1 hit: a pass that re-walks a row still in L1 waits it once.
pub const L1_HIT_CYCLES: f64 = 40.0;
/// 16-byte chunks per lane the row template's walk keeps in flight (its loads of one pass,
/// unrolled: 8 chunks of 2-byte elements are the [`crate::plan::space::WARP_ROW_MAX`] row).
pub const CHUNKS_IN_FLIGHT: f64 = 8.0;
/// Bytes per cycle one SM moves to or from L2 (A100 and H100: 64 B/clk per SM, *assumed*
/// from the whitepapers): few busy SMs cannot pull the whole DRAM bandwidth.
pub const SM_BYTES_PER_CYCLE: f64 = 64.0;

/// The share of a resource a grid of `ctas` blocks gets when `slots` run at once and `share`
/// says what `n` resident blocks get: full waves at `share(slots)`, the last, partial wave at
/// what its own blocks get (a streaming block is short: the last wave's blocks run at the
/// throughput they have, not at a full wave's time).
fn tail_share(ctas: f64, slots: f64, share: impl Fn(f64) -> f64) -> f64 {
    let ctas = ctas.max(1.0);
    let slots = slots.max(1.0);
    let full = (ctas / slots).floor();
    let rest = ctas - full * slots;
    let time = full / share(slots).max(1e-9)
        + if rest > 0.0 {
            (rest / slots) / share(rest).max(1e-9)
        } else {
            0.0
        };
    (ctas / slots) / time.max(1e-12)
}

/// The row template (`codegen::templates::row`): `threads_per_row` threads (a warp, or a block
/// of warps) per row, `rows_per_block` rows per block. Each dependent reduction walks the row
/// and combines it: a shuffle butterfly within a warp, and for several warps per row a partial
/// per warp through shared memory between two barriers (warps beyond the row's chunks idle);
/// the output pass walks the row again. The walks after the first re-read the row from L1 when
/// the rows resident on an SM fit there (else from L2, and from DRAM what a wave's rows spill).
///
/// - Compute: the work's ops, the load issue of every walk ([`LOAD_ISSUE`] per chunk) and the
///   shuffles, over the lanes that have chunks, at the SMs' share the blocks get.
/// - Memory (Little's law): a block keeps its rows' loads in flight ([`CHUNKS_IN_FLIGHT`] per
///   lane) and lives `rounds · L + serial` cycles: [`DRAM_LATENCY_CYCLES`] per round of loads,
///   then its serial steps (shuffles, and for several warps per row the shared-memory round
///   trip and two barriers per reduction, L1 re-walks). `n` resident blocks move
///   `n · bytes per block / lifetime`, at most the DRAM bandwidth and what their SMs can pull.
/// - Both shares are taken wave by wave ([`tail_share`]): the last wave's blocks run at what
///   they get, so a grid of short blocks pays no whole wave for a partial one.
fn reduction(
    work: &KernelWork,
    rows: f64,
    len: f64,
    passes: u32,
    knobs: &Knobs,
    res: &Resources,
    target: &Target,
) -> Estimate {
    let Knobs::Reduction {
        threads_per_row,
        rows_per_block,
        vec_bytes,
    } = *knobs
    else {
        unreachable!("reduction knobs")
    };
    let t = threads_per_row as f64;
    let rpb = rows_per_block as f64;
    let ctas = (rows / rpb).ceil().max(1.0);
    let sms = target.sms as f64;
    let per_sm = res.ctas_per_sm.max(1) as f64;
    let slots = sms * per_sm;
    let warps_per_cta = res.threads as f64 / 32.0;
    let clock = target.clock_ghz * 1e9;
    let elem = work.inputs.iter().map(|i| i.elem_bytes).max().unwrap_or(4) as f64;
    let inputs = work.in_bytes();
    let row_bytes = inputs / rows.max(1.0);
    // Walks over the row: one per dependent reduction, and the output pass.
    let walks = f64::from(passes.max(1));
    let reductions = (walks - 1.0).max(1.0);
    // Chunks of a row, and the share of the lanes that have one.
    let chunks = (len * elem / vec_bytes as f64).ceil().max(1.0);
    let lanes_used = (chunks / t).min(1.0);
    // Re-walks hit L1 when the rows resident on an SM fit in it (the shared-memory carve-out's
    // size stands for the unified L1 the row template leaves unused).
    let l1_rows = (target.smem_per_sm as f64 - per_sm * res.smem_bytes as f64).max(0.0);
    let in_l1 = per_sm * rpb * row_bytes <= l1_rows;
    let rereads = walks - 1.0;
    let wave_rows = ctas.min(slots) * rpb;
    let l2 = if in_l1 {
        inputs + work.out_bytes
    } else {
        inputs * walks + work.out_bytes
    };
    let spill = if in_l1 {
        0.0
    } else {
        l2_spill(row_bytes * wave_rows, target)
    };
    let dram = inputs + inputs * rereads * spill + staged_penalty(work);

    // Compute.
    let warps_per_row = (t / 32.0).ceil();
    let shuffles = rows * reductions * warps_per_row * 32.0 * 5.0;
    let load_issue = rows * chunks * walks * LOAD_ISSUE;
    let simt = (work.ops.simt + load_issue + shuffles) / lanes_used.max(1.0 / t);
    let sfu = work.ops.sfu / lanes_used.max(1.0 / t);
    let busy = |n: f64| n.min(sms);
    let compute_share = |n: f64| {
        let b = busy(n);
        let warps = (n / b.max(1.0)).ceil() * warps_per_cta;
        (b / sms) * (warps / WARPS_TO_HIDE).min(1.0)
    };
    let compute_occ = tail_share(ctas, slots, compute_share);
    let compute_s = unit_time(simt, sfu, target, compute_occ);

    // Memory.
    let cta_bytes = row_bytes * rpb;
    let in_flight = res.threads as f64 * CHUNKS_IN_FLIGHT * vec_bytes as f64;
    let rounds = (cta_bytes / in_flight.max(1.0)).ceil().max(1.0);
    let combine = if warps_per_row > 1.0 {
        2.0 * BARRIER_CYCLES + 2.0 * SMEM_CYCLES + warps_per_row * SHUFFLE_CYCLES / 5.0
    } else {
        0.0
    };
    let reread_wait = if in_l1 {
        L1_HIT_CYCLES
    } else {
        LOAD_LATENCY_CYCLES
    };
    let serial = reductions * (5.0 * SHUFFLE_CYCLES + combine) + rereads * reread_wait;
    let lifetime_s = (rounds * DRAM_LATENCY_CYCLES + serial) / clock;
    let sm_bw = SM_BYTES_PER_CYCLE * clock;
    let pull = |n: f64| (busy(n) * sm_bw / target.dram_bw).min(1.0);
    let memory_share = |n: f64| (n * cta_bytes / (lifetime_s * target.dram_bw)).min(pull(n));
    let memory_occ = tail_share(ctas, slots, memory_share);
    let memory_s = (dram / target.dram_bw).max(l2 / target.l2_bw) / memory_occ.max(1e-9);
    // Stores retire without waiting: bounded by what the busy SMs can push.
    let store_occ = tail_share(ctas, slots, pull);
    let epilogue_s = work.out_bytes / (target.dram_bw * store_occ.max(1e-9));
    let waves = (ctas / slots).ceil().max(1.0);
    finish(
        compute_s,
        memory_s,
        epilogue_s,
        0.0,
        simt + sfu,
        dram + work.out_bytes,
        l2,
        memory_occ.min(compute_occ),
        waves,
        1.0,
        ctas,
        target,
    )
}

pub use crate::target::LOAD_ISSUE;

/// The compute-at nest (seed 003): one thread per consumer point runs the window and the
/// producer's fold. Compute counts every executed op and load (recomputation of overlapping
/// windows included); DRAM serves every input once, since neighbouring threads share their
/// pre-images and the weights through L1/L2.
fn compute_at(
    work: &KernelWork,
    ca: &ComputeAtWork,
    knobs: &Knobs,
    res: &Resources,
    target: &Target,
) -> Estimate {
    let loads = ca.loads * LOAD_ISSUE;
    thread_per_point(
        work,
        knobs,
        res,
        target,
        ca.points,
        loads,
        work.in_bytes(),
        0.0,
    )
}

/// The cooperative compute-at window (the reduce template over a compute-at region, seed
/// 003): `threads_per_row` threads per consumer point split its window, each window point's
/// producer fold a loop in its thread, the partials combined by a shuffle butterfly (and
/// shared memory across warps). Compute counts every executed op and load as the nest does
/// ([`compute_at`]), issued by every lane of a round of the window (`⌈window / t⌉ · t` slots
/// for `window` points) and of the last block's clamped rows, plus the combine; DRAM serves
/// every input once.
fn compute_at_window(
    work: &KernelWork,
    ca: &ComputeAtWork,
    knobs: &Knobs,
    res: &Resources,
    target: &Target,
) -> Estimate {
    let Knobs::Reduction {
        threads_per_row,
        rows_per_block,
        ..
    } = *knobs
    else {
        unreachable!("reduction knobs")
    };
    let (t, rpb) = (threads_per_row as f64, rows_per_block as f64);
    let points = ca.points.max(1.0);
    let ctas = (points / rpb).ceil().max(1.0);
    let (occ, waves) = occupancy(ctas, res.threads as f64 / 32.0, res, target);
    let rounds = (ca.window / t).ceil().max(1.0);
    let waste = (rounds * t / ca.window.max(1.0)) * (ctas * rpb / points);
    let warps_per_row = (t / 32.0).ceil();
    let combine = points * warps_per_row * 32.0 * 5.0;
    let simt = (work.ops.simt + ca.loads * LOAD_ISSUE) * waste + combine;
    let compute_s = unit_time(simt, work.ops.sfu * waste, target, occ);
    finish_read_once(work, compute_s, waste, occ, (waves, ctas), target)
}

fn elementwise(work: &KernelWork, knobs: &Knobs, res: &Resources, target: &Target) -> Estimate {
    let dram = work.in_bytes() + staged_penalty(work);
    // Reductions a thread folds once for all its lanes (`KernelWork::pointwise_refolds`).
    let lanes = match *knobs {
        Knobs::Elementwise { vec_bytes, .. } => (vec_bytes / work.out_elem_bytes.max(1)).max(1),
        _ => 1,
    } as f64;
    let per_thread = work.pointwise_refolds.thread;
    let extra = (per_thread.ops + per_thread.loads * LOAD_ISSUE) / lanes;
    // Every point folds every reduce let: the folds' loads come through L2.
    let l2 = match *knobs {
        Knobs::Elementwise { block, items, .. } => work
            .fold_traffic
            .l2_bytes(work.out_elems, (block * items) as f64 * lanes),
        _ => 0.0,
    };
    thread_per_point(work, knobs, res, target, work.out_elems, extra, dram, l2)
}

/// A kernel of `points` thread work items (`items` per thread, vector lanes of the plan):
/// `work`'s ops plus `extra_simt` issue slots (before tail waste) against `dram` bytes read
/// and `l2` more bytes loaded through L2 (the folds' loads, [`KernelWork::fold_traffic`]).
#[allow(clippy::too_many_arguments)]
fn thread_per_point(
    work: &KernelWork,
    knobs: &Knobs,
    res: &Resources,
    target: &Target,
    points: f64,
    extra_simt: f64,
    dram: f64,
    l2: f64,
) -> Estimate {
    let Knobs::Elementwise {
        block,
        items,
        vec_bytes,
    } = *knobs
    else {
        unreachable!("elementwise knobs")
    };
    let lanes = (vec_bytes / work.out_elem_bytes.max(1)).max(1) as f64;
    let per_cta = (block * items) as f64 * lanes;
    let ctas = (points / per_cta).ceil().max(1.0);
    let (occ, waves) = occupancy(ctas, res.threads as f64 / 32.0, res, target);
    // Tail waste: the last block's idle lanes still issue.
    let waste = ctas * per_cta / points.max(1.0);
    let simt = (work.ops.simt + extra_simt) * waste;
    let compute_s = unit_time(simt, work.ops.sfu * waste, target, occ);
    let memory_s = (dram / target.dram_bw).max(l2 / target.l2_bw) / occ.max(1e-9);
    let epilogue_s = work.out_bytes / (target.dram_bw * occ.max(1e-9));
    finish(
        compute_s,
        memory_s,
        epilogue_s,
        0.0,
        (work.ops.simt + work.ops.sfu) * waste,
        dram + work.out_bytes,
        dram + work.out_bytes + l2,
        occ,
        waves,
        1.0,
        ctas,
        target,
    )
}
