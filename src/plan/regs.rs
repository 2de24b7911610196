//! Registers per thread of the plan space's templates (issue 15: the estimate must hold, i.e.
//! stay at or above what ptxas allocates, so that a plan the planner keeps does not spill and
//! its occupancy is what it was priced at). Each estimate is a formula over the plan's knobs,
//! term by term what the emitted kernel keeps live across its main loop, calibrated against
//! ptxas (NVRTC 13, sm_80 and sm_90a) on the realistic set of `tests/static_perf.rs` and
//! checked on other shapes by `tests/plan_registers.rs`:
//!
//! - `mma_sync` contraction ([`mma_sync`]): accumulators, the `A`/`B` fragments of two k-steps
//!   in flight, per operand its fill (one offset per `cp.async` chunk; a register-staged
//!   operand's packed pairs with their two fp32 values and address; a conv gather's held tile
//!   and hoisted row data), the stage base addresses, and [`BASE_REGS`].
//! - `wgmma` contraction ([`wgmma`]): the larger of a consumer thread's (accumulators,
//!   descriptors, [`BASE_REGS`]) and, for a conv whose image the producer warpgroup gathers,
//!   a producer thread's (its 8 rows' hoisted data, the packed words of a tile's loads, one
//!   row's temporaries, [`BASE_REGS`]): one kernel holds both branches.
//! - SIMT contraction ([`simt`]): accumulators, a micro-tile row and column per k-step
//!   (double-buffered), the next tile's elements *with their addresses and bounds* (loaded one
//!   k-step ahead, [`SIMT_PER_LOADED`] each), [`BASE_REGS`].
//! - compute-at nest ([`compute_at`]): one accumulator per window point, the producer fold's
//!   loop state ([`FOLD_REGS`]).

use crate::plan::work::{ComputeAtWork, Fill};

/// Registers for addresses, indices and loop state, per thread.
pub const BASE_REGS: u32 = 40;

/// Registers per thread of the row template (`codegen::templates::row`): its walk's loads in
/// flight ([`crate::plan::space::RESIDENT_PER_THREAD`]) and [`BASE_REGS`]. The template caps
/// ptxas at this count (`__maxnreg__`): left to the block size's bound alone, ptxas unrolled
/// the walk of a short fp32 row (300 scores of a query-length-1 attention, 75 chunks of 16 bytes
/// over a warp) past the eight chunks in flight, to 78 registers on sm_80 and 80 on sm_90a
/// (NVRTC 13), where the plan priced the occupancy of 72; capped, 72 without spills.
pub const ROW: u32 = BASE_REGS + crate::plan::space::RESIDENT_PER_THREAD as u32;

/// Registers a run-time-checked `cp.async` operand ([`Fill::CpAsyncChecked`]) adds to the
/// heavier of its two paths: the uniform branch's alignment test, index and bound (fitted: 11;
/// the symbolic `M×4096×N` GEMM priced at `M = 1000`, `N = 3000` — one checked operand — takes
/// 214 registers on sm_90a against 213 estimated, a known miss in tests/static_perf.rs: 12 would
/// cover it but puts the `64×64×32` checked tile 41 above its ptxas count).
pub const CHECKED_ELEMENT_PATH: u64 = 11;

/// The most 4-byte registers per thread the `mma_sync` template holds one register-staged
/// operand tile in across a k-step's fragment loop; a larger tile is stored to shared memory
/// pair by pair as it is loaded (`codegen::templates::contraction_mma`).
pub const REG_HELD_MAX: u64 = 8;

/// Runs of a register-staged tile too large to hold ([`REG_HELD_MAX`]) that the `mma_sync`
/// template loads together before storing them (its `DIRECT_UNROLL`).
pub const DIRECT_RUNS: u64 = 4;

/// Registers per register-staged pair of the `mma_sync` template: the packed pair, its two
/// fp32 values (loaded and converted before the pack) and the element address, which ptxas
/// keeps for every pair of the tile because it hoists the loads of the tile ahead of the
/// fragment steps (fitted: the symbolic 4096³ GEMM's `64×64×32` synchronous tile takes 180 and
/// 183 registers on sm_80 and sm_90a).
pub const REGS_PER_STAGED_PAIR: u64 = 5;

/// Registers per held pair of a conv gather beyond the pair itself (the guard compare and the
/// predicated load's address), and [`GATHER_HOISTED`] for the row data hoisted out of the `K`
/// loop (offset, validity and guard parts of the thread's rows): fitted on the implicit-GEMM
/// convolutions (`128×64×32` over 4 warps: 200 to 224 registers by stages).
pub const GATHER_PER_PAIR: u64 = 3;
/// Registers of the row data a conv gather hoists out of the `K` loop.
pub const GATHER_HOISTED: u64 = 12;

/// Registers per element of the next k-step's tiles a SIMT thread loads ahead (fitted to ptxas,
/// NVRTC 13, sm_80 and sm_90a, on the fp32 graphs of the real exports — `tests/plan_registers.rs`
/// `simt_register_sweep`: BERT's feed-forward with its erf GELU and its attention products,
/// the MobileNetV2 and ResNet-18 stems' implicit GEMMs): the value, its 64-bit address and its
/// bound. Each point of the sweep is at most [`simt`]: `64×64×32` over 4 warps (32 elements
/// ahead) took 204–213 registers, over 8 warps (16 ahead) 118–128; `64×64×16` over 4 warps (16
/// ahead) 117–150, over 8 warps (8 ahead) 74–96; `128×64×32` over 8 warps 163–171. At 2 per
/// element (and 24 more registers of overhead) the estimate was 184 for the first, which
/// ptxas exceeded by up to 29.
pub const SIMT_PER_LOADED: u32 = 4;

/// Elements of padding at the end of each `K` row of the SIMT template's shared tiles
/// (`As[BK][BM + 1]`, `Bs[BK][BN + 1]`): an operand loaded `K` fastest (a row-major `A`, a
/// transposed `B`) is stored `K`-major, so a warp's 32 consecutive `K` elements land one row
/// apart; unpadded, the rows are a multiple of 32 banks apart and the stores serialise 16- to
/// 32-way, padded they fall in distinct banks.
pub const SIMT_ROW_PAD: u64 = 1;

/// Shared-memory bytes of the SIMT template's `BM×BN×BK` tile: one buffer of each operand, in
/// fp32 whatever the operands' type (the next step's tiles wait in registers), rows padded by
/// [`SIMT_ROW_PAD`].
pub fn simt_smem_bytes(bm: u64, bn: u64, bk: u64) -> u64 {
    4 * bk * (bm + bn + 2 * SIMT_ROW_PAD)
}

/// Shared memory of a pooled tile's epilogue values (`Ps[bm][bn + SIMT_ROW_PAD]` fp32, the
/// SIMT template's pooled epilogue).
pub fn pooled_smem_bytes(bm: u64, bn: u64) -> u64 {
    4 * bm * (bn + SIMT_ROW_PAD)
}

/// Registers per thread the SM allocates a warp's registers in (256 per warp).
pub const REG_ALLOC_UNIT: u32 = 8;

/// Registers of a compute-at nest's producer fold (its reduction counters, the decomposed
/// window point, the read addresses); fitted on `conv_relu_pool` (53 registers on sm_80 and
/// sm_90a at a 4-point window).
pub const FOLD_REGS: u32 = 12;

/// The 4-byte registers per thread the `mma_sync` template holds a register-staged
/// `outer × bk` operand tile (2-byte elements, in pairs) in: all of it up to [`REG_HELD_MAX`],
/// else none (stored as loaded).
pub fn held_regs(outer: u64, bk: u64, threads: u64) -> u64 {
    let all = (outer * bk / 2).div_ceil(threads.max(1));
    if all > REG_HELD_MAX {
        0
    } else {
        all
    }
}

/// The knobs of a tiled contraction the estimates read.
#[derive(Clone, Copy, Debug)]
pub struct Tile {
    /// Block tile rows.
    pub bm: u64,
    /// Block tile columns.
    pub bn: u64,
    /// K-slice per step.
    pub bk: u64,
    /// Shared-memory stages.
    pub stages: u32,
    /// Warps along `M`.
    pub warps_m: u64,
    /// Warps along `N`.
    pub warps_n: u64,
    /// Operands copied asynchronously when they can be.
    pub async_: bool,
}

impl Tile {
    fn threads(&self) -> u64 {
        self.warps_m * self.warps_n * 32
    }

    fn warp_tile(&self) -> (u64, u64) {
        (self.bm / self.warps_m.max(1), self.bn / self.warps_n.max(1))
    }
}

/// Registers per thread of the `mma_sync` template (module doc) under `t`, its `A` and `B`
/// tiles filled as `fill` says.
pub fn mma_sync(fill: [Fill; 2], t: &Tile) -> u32 {
    let (wm, wn) = t.warp_tile();
    let threads = t.threads();
    let acc = wm * wn / 32;
    // `ldmatrix.x4` A fragments (4 registers per 16 rows) and B fragments (4 per 16 columns)
    // of one k-step, two k-steps in flight (the next step's loads overlap this step's mma).
    let frags = 2 * (wm / 4 + wn / 4);
    // A register-staged operand's pairs: all of them held up to [`REG_HELD_MAX`], else the
    // [`DIRECT_RUNS`] loaded together before their stores.
    let staged = |pairs: u64| -> u64 {
        REGS_PER_STAGED_PAIR
            * if pairs > REG_HELD_MAX {
                DIRECT_RUNS
            } else {
                pairs
            }
    };
    let operand = |fill: Fill, outer: u64| -> u64 {
        let pairs = (outer * t.bk / 2).div_ceil(threads);
        match fill {
            // One 32-bit offset per 16-byte chunk the thread copies.
            Fill::CpAsync if t.async_ => (outer * t.bk / 8).div_ceil(threads),
            // Two paths under one uniform branch: ptxas allocates for the heavier (the copy
            // path's offsets, or the element path's pairs held as a register-staged operand
            // holds them) plus the branch's test, index and bound (the symbolic GEMM's
            // `64×64×32` 3-stage tile over 4 warps takes 173 registers on sm_90a, its
            // `128×64×32` 3-stage tile 212–214).
            Fill::CpAsyncChecked if t.async_ => {
                (outer * t.bk / 8).div_ceil(threads).max(staged(pairs)) + CHECKED_ELEMENT_PATH
            }
            Fill::Gather => (1 + GATHER_PER_PAIR) * pairs + GATHER_HOISTED,
            Fill::Registers | Fill::CpAsync | Fill::CpAsyncChecked => staged(pairs),
        }
    };
    let fills = operand(fill[0], t.bm) + operand(fill[1], t.bn);
    // The shared-memory base of each stage of `A` and `B`.
    let stages = 2 * u64::from(t.stages);
    (acc + frags + fills + stages) as u32 + BASE_REGS
}

/// Registers of a `wgmma` consumer thread beyond its accumulators: the two descriptors, the
/// stage and barrier addresses.
pub const WGMMA_CONSUMER: u32 = 8;

/// Registers a `wgmma` conv's consumer thread holds beyond a GEMM consumer's: without
/// `setmaxnreg` the consumers share one allocation with the gathering producer, whose hoisted
/// row state stays live across the role branch (fitted: the `128×128×64` tile with one consumer
/// warpgroup takes 204 registers on sm_90a, 128 of them accumulators).
pub const WGMMA_GATHER_CONSUMER: u32 = 28;

/// Registers of the row data a `wgmma` conv gather hoists per producer thread and row (one
/// row per 32 of the tile): an offset, a validity flag and the `M` parts of a padded 2-D
/// window's 4 guard comparisons.
pub const WGMMA_GATHER_HOISTED: u32 = 6;

/// Registers of a gathered tile beyond the thread's raw 2-byte values (`BM / 2`, every load of
/// the tile issued before the stores) and packed words (`BM / 16` chunks of 4): the `K` parts
/// of the current `k` (fitted: the conv 3×3 benchmark's `128×64×64` tile reaches the 168
/// registers `__launch_bounds__(384, 1)` allows, without spills, on sm_90a, NVRTC 13.4).
pub const WGMMA_GATHER_TILE: u32 = 8;

/// Registers per thread of the SM90 template (`codegen::templates::sm90`, module doc) under
/// `t` (`warps_m / 4` consumer warpgroups), its `A` tile filled as `fill[0]` says (a conv
/// image is gathered by the producer warpgroup).
pub fn wgmma(fill: [Fill; 2], t: &Tile) -> u32 {
    let (wm, wn) = t.warp_tile();
    let gathered = matches!(fill[0], Fill::Gather);
    // Two consumer warpgroups on TMA operands move registers with `setmaxnreg`
    // (`codegen::templates::sm90`): the launch allocates the whole register file to one CTA.
    if !gathered && (t.warps_m * t.warps_n).div_ceil(4) == 2 {
        return SETMAXNREG_LAUNCH;
    }
    let consumer = (wm * wn / 32) as u32
        + WGMMA_CONSUMER
        + if gathered { WGMMA_GATHER_CONSUMER } else { 0 }
        + BASE_REGS;
    let producer = match fill[0] {
        // 128 producer threads, one row of each 32: `BM / 2` values of a 64-wide tile per
        // thread, packed into `BM / 16` 16-byte chunks of 4 words.
        Fill::Gather => {
            WGMMA_GATHER_HOISTED * t.bm.div_ceil(32) as u32
                + (t.bm / 2 + 4 * (t.bm / 16)) as u32
                + WGMMA_GATHER_TILE
                + BASE_REGS
        }
        _ => 0,
    };
    consumer.max(producer)
}

/// Registers per thread at launch of a wgmma kernel whose two consumer warpgroups take
/// registers from the producer (`setmaxnreg.inc 232` / `.dec 40`): under
/// `__launch_bounds__(384, 1)` ptxas allocates `65536 / 384` rounded down to 8 (168, reported
/// for every such kernel: the 4096³ GEMM's `128×256×64` and the `128×64×64` tiles alike), so
/// one CTA holds the register file.
pub const SETMAXNREG_LAUNCH: u32 = 168;

/// The SIMT template's micro-tile `TM×TN` of `e` accumulators per thread
/// (`codegen::templates::contraction_simt`; `cost::roofline` prices its shared-memory reads):
/// `TN` the largest power of two up to 8 with `TN² ≤ e`, `TM = e / TN`.
pub fn simt_micro_tile(e: u64) -> (u64, u64) {
    let mut tn = 1;
    while tn * 2 <= 8 && (tn * 2) * (tn * 2) <= e {
        tn *= 2;
    }
    (e / tn, tn)
}

/// Registers per thread of the SIMT template (module doc) under `t`. The template caps ptxas at
/// this count (`__maxnreg__`, `codegen::emit`): with a whole `K` in one tile (MobileNetV2's stem,
/// `K` = 27 under `BK` = 32) ptxas hoists every k-step's shared-memory reads of the straight-line
/// body and took all 255 registers the launch bounds allowed, against 128 to 184 estimated;
/// capped, it compiles without spills. An implicit-GEMM convolution (`gather`) holds one more
/// register per image element loaded ahead (its bounds predicate and offset), and the count is
/// rounded up to [`REG_ALLOC_UNIT`] (the SM allocates that many anyway). Measured (NVRTC 13.4,
/// uncapped): the fp16 conv's gather on `32×32×32` over 128 threads wants 128–138 registers
/// and spilled 20 bytes on sm_90a under a cap of 124; the GEMMs' 99–109.
pub fn simt(t: &Tile, gather: bool) -> u32 {
    simt_summing(t, gather, 1)
}

/// [`simt`] of a tile that sums `sums` contractions, each in its own accumulators
/// (`crate::plan::work::Gemm::second`: 2).
pub fn simt_summing(t: &Tile, gather: bool, sums: u32) -> u32 {
    let (wm, wn) = t.warp_tile();
    let micro_elems = (wm * wn / 32) as u32;
    let acc = micro_elems * sums.max(1);
    // Micro-tile tm × tn = micro_elems per thread, tm ≈ tn.
    let tm = (micro_elems as f64).sqrt().ceil() as u32;
    let micro = 2 * (tm + micro_elems.div_ceil(tm.max(1)));
    // The next k-step's elements, loaded ahead.
    let next = SIMT_PER_LOADED * ((t.bm + t.bn) * t.bk).div_ceil(t.threads()) as u32;
    let gathered = if gather {
        (t.bm * t.bk).div_ceil(t.threads()) as u32
    } else {
        0
    };
    // A second contraction's unrolled multiply and loads keep their own fragments and
    // addressing live beside the main one's: its micro-tile's fragment registers again and one
    // register per element loaded a step (ptxas, NVRTC 13.4, uncapped, the summed ResNet-18
    // projection blocks: `32×64×32` 196 registers on sm_80 and 212 on sm_90a against this
    // estimate's 232; `64×64×16` at batch 8, 204 on sm_80, and 56 bytes of spills on sm_90a
    // under a cap of 216, none at 240).
    let second = (sums.max(1) - 1) * (micro + ((t.bm + t.bn) * t.bk).div_ceil(t.threads()) as u32);
    (acc + micro + next + gathered + second + BASE_REGS).next_multiple_of(REG_ALLOC_UNIT)
}

/// Registers per thread of the compute-at nest computing `lanes` outputs per thread.
pub fn compute_at(c: &ComputeAtWork, lanes: u64) -> u32 {
    let window = (c.window.max(1.0) as u64).min(64) as u32;
    BASE_REGS + lanes as u32 + window + FOLD_REGS
}

/// Registers per thread of the GEMV template (`codegen::templates::gemv`) with `bm` rows: the
/// accumulators, and per unrolled step of the walk its weight and row values in flight,
/// over [`BASE_REGS`] (ptxas: 20–24 registers at `bm = 1`, 48–60 at `bm = 8`).
pub fn gemv(bm: u64) -> u32 {
    let unroll = super::space::GEMV_UNROLL;
    (bm + unroll * (1 + bm)) as u32 + BASE_REGS
}

/// Registers the split-K fix-up adds to a `mma_sync` kernel (`codegen::templates::split_k`: the
/// tile's 64-bit workspace base, the split loop and the arrival test, live beside the
/// accumulators): one allocation unit. Measured: a bf16 `512×1000×1000` GEMM on `[64,64,32]`,
/// 4 stages, split 2 ways took 117 registers against the unsplit estimate's 116.
pub const SPLIT_K_REGS: u32 = 8;

#[cfg(test)]
mod tests {
    use super::*;
    use Fill::*;

    fn tile(bm: u64, bn: u64, bk: u64, stages: u32, w: [u64; 2], async_: bool) -> Tile {
        Tile {
            bm,
            bn,
            bk,
            stages,
            warps_m: w[0],
            warps_n: w[1],
            async_,
        }
    }

    /// The calibration points (ptxas registers on sm_80 / sm_90a, NVRTC 13, the realistic set
    /// of tests/static_perf.rs): the estimate is at or above each, and at most 40 above.
    #[test]
    fn the_mma_sync_estimate_covers_its_calibration_points() {
        let points: [([Fill; 2], Tile, u32); 9] = [
            // gemm_fp16_4096: both operands by cp.async.
            ([CpAsync; 2], tile(128, 128, 64, 2, [2, 2], true), 244),
            // gemm_fp16_symbolic_bias_relu: synchronous, staged through registers.
            ([CpAsync; 2], tile(64, 64, 32, 2, [2, 2], false), 183),
            // gemm_fp16_symbolic_bias_relu on sm_90a: copies under a run-time alignment test.
            ([CpAsyncChecked; 2], tile(64, 64, 32, 3, [2, 2], true), 173),
            ([CpAsyncChecked; 2], tile(128, 64, 32, 3, [2, 2], true), 212),
            // gemm_bias_relu (K not a multiple of 8: register-staged).
            ([Registers; 2], tile(64, 64, 32, 2, [4, 2], false), 103),
            // The implicit-GEMM convolutions (X gathered, W by cp.async).
            ([Gather, CpAsync], tile(128, 64, 32, 4, [2, 2], true), 224),
            ([Gather, CpAsync], tile(128, 64, 32, 2, [2, 2], true), 200),
            ([Gather, CpAsync], tile(64, 64, 32, 3, [2, 2], true), 125),
            ([Gather, CpAsync], tile(64, 64, 32, 4, [4, 2], true), 94),
        ];
        for (fill, t, ptxas) in points {
            let est = mma_sync(fill, &t);
            assert!(
                (ptxas..=ptxas + 40).contains(&est),
                "{fill:?} {t:?}: estimate {est}, ptxas {ptxas}"
            );
        }
    }

    /// The terms grow with what the kernel holds: a larger warp tile, a register-staged
    /// operand, a deeper pipeline each cost registers.
    #[test]
    fn the_estimate_grows_with_what_the_kernel_holds() {
        let t = tile(64, 64, 32, 2, [2, 2], true);
        let wide = tile(128, 128, 32, 2, [2, 2], true);
        let deep = tile(64, 64, 32, 4, [2, 2], true);
        let sync = tile(64, 64, 32, 2, [2, 2], false);
        let base = mma_sync([CpAsync; 2], &t);
        assert!(mma_sync([CpAsync; 2], &wide) > base + 64);
        assert!(mma_sync([CpAsync; 2], &deep) > base);
        assert!(mma_sync([CpAsync; 2], &sync) > base);
        assert!(mma_sync([Gather, CpAsync], &t) > base);
        // The SIMT 128×64×32 tile over 4 warps spills (ptxas 255 and local memory): stopped.
        assert!(simt(&tile(128, 64, 32, 2, [2, 2], false), false) > 255);
        // matmul_1d_2d's 64×64×16 tile over 8 warps: 79 / 80 registers.
        assert!((80..=128).contains(&simt(&tile(64, 64, 16, 2, [4, 2], false), false)));
    }

    /// The SIMT calibration points (`tests/plan_registers.rs` `simt_register_sweep`, the most
    /// ptxas allocated on sm_80 or sm_90a over the fp32 graphs, uncapped): the estimate is at or
    /// above each, and at most 40 above.
    #[test]
    fn the_simt_estimate_covers_its_calibration_points() {
        let points = [
            (tile(64, 64, 32, 2, [2, 2], false), 213),
            (tile(64, 64, 32, 2, [4, 2], false), 128),
            (tile(64, 64, 16, 2, [2, 2], false), 150),
            (tile(64, 64, 16, 2, [4, 2], false), 96),
            (tile(128, 64, 32, 2, [4, 2], false), 171),
            // The 32-row tiles (the 2-byte GEMMs of `half_precision_simt_register_sweep`).
            (tile(32, 32, 32, 2, [2, 2], false), 109),
            (tile(32, 32, 32, 2, [4, 2], false), 83),
            (tile(32, 64, 32, 2, [4, 2], false), 103),
        ];
        for (t, ptxas) in points {
            let est = simt(&t, false);
            assert!(
                (ptxas..=ptxas + 40).contains(&est),
                "{t:?}: estimate {est}, ptxas {ptxas}"
            );
        }
    }
}
