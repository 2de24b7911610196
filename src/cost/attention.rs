//! The plan of the fused attention kernel (`codegen::templates::attention`): its knobs chosen
//! and priced here, so that what is priced is what is emitted.
//!
//! **Space.** 4 warps of 16 or 32 query rows ([`ROWS`]: `BM` = 64 or 128), `BN` ∈ {32, 64,
//! 128} keys per tile (and 16 at 16 rows where no wider tile fits: [`space_for`]), 2 stages, `cp.async` for plain operands, `Q` in registers or re-read
//! from shared memory. A point is *stopped* when its registers ([`registers`]: fragments + a measured
//! overhead) exceed the thread's 255, or its shared memory the block's opt-in limit.
//!
//! **Price** (assumptions stated): FLOPs as executed are `4·B·H·M·N·D` padded to whole tiles
//! (`D`, `DV` to 16, `M` to `BM`, `N` to `BN`), counting only the key tiles a block visits (a
//! causal mask skips about half). The kernel is bound by its *instruction issue*, not by the
//! tensor pipe (Nsight Compute on an H100, d = 64 causal: issue slots 62 % busy, IPC 2.52, tensor
//! pipe 37 %): [`tile_instructions`] counts what one warp issues per visited key tile (the MMAs,
//! the `ldmatrix`es, [`OPS_PER_SCORE`] per score element, the rescale of the `O` accumulators and a
//! fixed part, each read off the SASS), and the SM's four schedulers issue them at
//! [`issue_efficiency`] of one per cycle, which falls with fewer resident warps (the dependent
//! chain MMA → softmax → MMA of each warp stalls unless another warp is ready). Compute time is
//! the larger of that issue time and the tensor time at [`algo_efficiency`] of the peak.
//! Resident blocks per SM are counted at the registers ptxas allocates ([`registers`] less
//! [`REG_SLACK`]). DRAM bytes: `Q` and `O` once; `K` and `V` once per batch point when the
//! key/value panels of the batch points in flight (one wave of blocks) fit in half of L2, else the
//! visited tiles' share that misses the L2 ([`L2_REUSE`]); L2 → SM bytes: every
//! visited key tile per block. Calibrated against the H100 measurements of 2026-11-26
//! (`bench/results/gpu-h100-2026-11-26/`: causal B=8 H=16 S=2048, d = 64 0.302 ms, d = 128
//! 0.635 ms; `the_attention_price_matches_the_h100_measurements` in tests/codegen_attention.rs).

use super::roofline::{algo_efficiency, Bound, Estimate};
use super::work::{analyze, KernelWork};
use super::CostModel;
use super::{PlanChoice, PlanError, Priced, Rejected, Time};
pub use crate::codegen::templates::attention::{bns, q_in_regs, BNS, NARROW_BN, ROWS, WARPS};
use crate::codegen::templates::attention::{
    copies_async, fold_scale, heaviest_first, pad16, store_lanes, AttentionPair, AttentionPlan,
    Mask,
};
use crate::ir::dim::Dim;
use crate::plan::space::{plan_of, Algo, Resources};
use crate::plan::{Cache, Plan};
use crate::target::Target;

/// The algorithm name of the plan (`algo_choice["attention"]`).
pub const ALGO: &str = "mma_sync_flash";
/// Registers per thread beyond the fragments (addresses, loop state, softmax rows; 68 since
/// the exponent's factor and the rows' `m·c` are live across the key loop: d = 256 causal takes
/// 250 registers on sm_90a against 248 at 64).
pub const REG_OVERHEAD: u64 = 68;
/// Registers per thread the [`registers`] bound lies above ptxas on the measured points
/// (NVRTC 13, sm_90a, S = 2048 causal: d = 64 `BN = 64` 161 vs 196, d = 128 `BN = 32` 190 vs
/// 228): the occupancy is counted at `registers − REG_SLACK` (the stop at 255 keeps the bound).
pub const REG_SLACK: u64 = 36;
/// Instructions per score element and lane of the kernel's kept (unmasked) key tiles: the
/// scale `FMUL`, the row max `FMNMX`, the exponent's `FFMA` (`s·c − m·c`), one `MUFU.EX2`
/// (`ex2.approx.ftz`), the row sum `FADD`, half an `F2FP` pack (SASS of sm_90a, NVRTC 13).
pub const OPS_PER_SCORE: f64 = 5.5;
/// Instructions per score element and lane of `p`'s kernel: [`OPS_PER_SCORE`], one fewer when
/// the score is the dot product times a positive constant (`templates::attention::fold_scale`:
/// the scale is folded into the exponent's `FFMA`, no scale `FMUL`).
pub fn ops_per_score(p: &AttentionPair) -> f64 {
    if fold_scale(&p.score, &p.acc).is_some() {
        OPS_PER_SCORE - 1.0
    } else {
        OPS_PER_SCORE
    }
}
/// [`OPS_PER_SCORE`] of the kernel measured on 2026-11-26 (the exponent as `(s − m)·c` and
/// `exp2f` with its denormal range fix-up: `FADD`, `FMUL`, `FSETP`, two predicated `FMUL`s
/// around the `MUFU.EX2`; 592 instructions per kept tile at d = 64 and 521 at d = 128 against 458
/// and 450 now).
pub const MEASURED_OPS_PER_SCORE: f64 = 9.75;
/// Fixed instructions per warp and key tile (the wait and barrier, the `cp.async` addresses of
/// the next tile, the `ldmatrix` addresses, the quad shuffles of the row max): `106 + 3/8 ·
/// (D + DV)`, fitted to the SASS of d = 64 (`BN = 64`: 154) and d = 128 (`BN = 32`: 202).
pub fn tile_fixed(dp: u64, dvp: u64) -> f64 {
    106.0 + 0.375 * (dp + dvp) as f64
}
/// Latency of the issue, in warps per scheduler: a scheduler with `w` resident warps issues on
/// `w / (w + ISSUE_LATENCY_WARPS)` of its cycles ([`issue_efficiency`]). Fitted to the H100
/// measurements: d = 64 (3 warps per scheduler, 0.302 ms) and d = 128 (2 warps, 0.635 ms).
pub const ISSUE_LATENCY_WARPS: f64 = 2.1;
/// The share of L2 holding key/value panels that later query blocks re-read, when the panels
/// in flight do not fit: a visited tile hits with probability `L2_REUSE · L2 / panels in flight`
/// (at most 1). Fitted between the two Nsight Compute reports (causal S = 2048): d = 64 reads
/// 494 MB from DRAM (model 0.31 GB) and d = 128 1.22 GB (model 1.47 GB).
pub const L2_REUSE: f64 = 1.0;
/// Warp schedulers per SM (sm_80 and sm_90).
const SCHEDULERS: f64 = 4.0;

/// Instructions one warp issues per visited key tile of `plan` at head/value dims `d`, `dv`,
/// with `issue`'s instructions per score element and lane (module doc), `F` the warp's
/// `m16` fragments (`rows / 16`): the `QKᵀ` and `P·V` MMAs of every fragment, the `ldmatrix`es
/// of `K` and `V` (once per warp: each feeds the `F` fragments' MMAs) and `Q`'s when it is
/// re-read from shared memory (per fragment), the softmax of the warp's `rows × BN` scores
/// (`F · BN / 2` per lane), the warp's vote on the rescale ([`RESCALE_VOTE`]; the rescale of
/// its `F · DV / 2` accumulators per lane runs when a row's max grows by more than `2^8`,
/// after the first tiles rarely, and is left out), and [`tile_fixed`] plus [`ROW_FIXED`] per
/// further fragment's rows.
pub fn tile_instructions(plan: &AttentionPlan, d: u64, dv: u64, issue: Issue) -> f64 {
    let (dp, dvp, bn, f) = (pad16(d), pad16(dv), plan.bn, plan.frags());
    let hmma = f * (bn / 8 * (dp / 16) + dvp / 8 * (bn / 16));
    let q_ldsm = if plan.q_in_regs { 0 } else { f * dp / 16 };
    let ldsm = bn / 16 * (dp / 16) + dvp / 16 * (bn / 16) + q_ldsm;
    (hmma + ldsm) as f64
        + issue.ops_per_score * (f * bn / 2) as f64
        + if issue.rescale_every_tile {
            (f * dvp / 2) as f64
        } else {
            RESCALE_VOTE
        }
        + tile_fixed(dp, dvp)
        + ROW_FIXED * (f - 1) as f64
}

/// What a kernel issues per score element and key tile besides its MMAs and loads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Issue {
    /// Instructions per score element and lane.
    pub ops_per_score: f64,
    /// Whether `O` is rescaled on every key tile (the kernel measured on 2026-11-26) rather
    /// than only when the warp's vote asks for it.
    pub rescale_every_tile: bool,
}

/// The kernel measured on 2026-11-26 ([`MEASURED_OPS_PER_SCORE`], a rescale every tile).
pub const MEASURED: Issue = Issue {
    ops_per_score: MEASURED_OPS_PER_SCORE,
    rescale_every_tile: true,
};

/// What `p`'s kernel issues now ([`ops_per_score`], the voted rescale).
pub fn issue(p: &AttentionPair) -> Issue {
    Issue {
        ops_per_score: ops_per_score(p),
        rescale_every_tile: false,
    }
}

/// Instructions per warp and key tile of the rescale vote (`dlc_warp_max` of the lanes' flags:
/// five shuffles and NaN-propagating maxima) and the branch around the rescale.
pub const RESCALE_VOTE: f64 = 24.0;

/// Instructions per warp and key tile for the two rows per lane of each further `m16` fragment
/// (their quad shuffles of the row max, `alpha`, `m·c`, the `l_i` rescale).
pub const ROW_FIXED: f64 = 16.0;

/// How many warps' worth of latency hiding one warp of `plan` offers its scheduler: 1 for one
/// `m16` fragment, [`FRAG_ILP`] more per further fragment (the fragments' chains `QKᵀ` →
/// softmax → `P·V` share the warp's instruction stream, its `K`/`V` fragment loads and the
/// tile's barrier; measured: less than one warp in all).
pub fn frag_ilp(plan: &AttentionPlan) -> f64 {
    1.0 + FRAG_ILP * (plan.frags() - 1) as f64
}

/// Warps' worth of latency hiding per further `m16` fragment of a warp ([`frag_ilp`]): fitted
/// to the H200 measurements of the 32-row layout (`bench/results/gpu-h200-2026-11-28/`, causal
/// B=8 H=16 S=2048 fp16: d = 64 `BN = 64` 0.2758 ms, d = 128 `BN = 32` 0.5115 ms, d = 32 0.1871
/// ms, and non-causal d = 64 0.4800 ms; an H200 has the H100's SMs and clocks, and these kernels
/// are compute-bound). Negative: a warp of two fragments hides *less* latency than a warp of
/// one — its two chains run in one instruction stream, one after the other, at a register bound
/// near 255 — so it is worth `1 − 0.35` warps, not the `1.5` assumed before the measurement
/// (which priced those kernels at 0.56–0.73× their time). With it the 32-row prices are
/// 0.86–1.13× the measured times (`the_32_row_layout_price_matches_the_h200_measurements`,
/// tests/codegen_attention/plans.rs).
pub const FRAG_ILP: f64 = -0.35;

/// The fraction of a scheduler's cycles that issue with `warps` resident warps per scheduler
/// (module doc).
pub fn issue_efficiency(warps: f64) -> f64 {
    warps / (warps + ISSUE_LATENCY_WARPS)
}

/// Registers per thread of `plan` at head/value dims `d`, `dv`: a formula over the knobs,
/// term by term what the kernel keeps live in its key loop, calibrated against ptxas (sm_80 and
/// sm_90a, NVRTC 13; `every_unstopped_plan_compiles_without_spills` in
/// tests/codegen_attention.rs checks every point of [`space`] at D = DV ∈ {32, 64, 80, 96,
/// 128, 256}, causal or not, and tests/static_perf.rs the chosen ones):
/// - the `O` accumulators, `F · DV/2` (`F = rows / 16` fragments of 16 rows × `DV` fp32 per
///   warp);
/// - per key: the score accumulators (`F · BN/2`), their fp16 copy as `P` fragments
///   (`F · BN/4`) and the `K` fragments of one k-step (`BN/4`, shared by the fragments),
///   `BN` in all at `F = 1`; when `Q` is re-read from shared memory, ptxas keeps the `K`
///   fragments of two more k-steps in flight (`BN/2` more);
/// - `Q`: all its fragments when kept in registers (`F · D/2`), else the two `Q` fragments of
///   the k-steps in flight (`8 F`);
/// - [`REG_OVERHEAD`]: addresses, the softmax row state, loop state.
///
/// At or above ptxas on every measured point; the points ptxas squeezes near 255 (D = 80 and
/// 96 with `BN = 128` and `Q` in shared memory) and the ones that spill are over 255, stopped.
pub fn registers(plan: &AttentionPlan, d: u64, dv: u64) -> u64 {
    let f = plan.frags();
    let (q, k_in_flight) = if plan.q_in_regs {
        (f * pad16(d) / 2, 0)
    } else {
        (8 * f, plan.bn / 2)
    };
    let per_key = if f == 1 {
        plan.bn
    } else {
        plan.bn * (f + 1) / 2
    };
    let overhead = if f == 1 { REG_OVERHEAD } else { REG_OVERHEAD_2 };
    let mid = if f > 1 && !plan.q_in_regs && (65..128).contains(&d.max(dv)) {
        REG_MID_D_2
    } else {
        0
    };
    f * pad16(dv) / 2 + per_key + k_in_flight + q + overhead + mid
}

/// Registers per thread a score epilogue that reads a tensor (a bool or additive mask, a bias)
/// keeps beyond [`registers`]: the tensor's row base and the key offsets of the tile's elements
/// across the QKᵀ MMAs. ptxas (NVRTC 13, sm_80): d = 256 with a `[B,1,1,N]` bool mask, `BN =
/// 32`, `Q` in shared memory, spills 24 B at a bound of 252; this term stops that point. At
/// `BN = 16` (sm_90a, an additive bf16 `[B,1,1,N]` mask, B = 2, H = 12, S = 200) ptxas takes
/// 241 against 228 + 12: 14.
pub const MASK_REGS: u64 = 14;

/// Whether `p`'s score epilogue reads a tensor (a mask or bias: [`MASK_REGS`] more registers).
pub fn score_reads(p: &AttentionPair) -> bool {
    let mut found = false;
    fn walk(e: &crate::ir::region::Expr, found: &mut bool) {
        use crate::ir::region::Expr;
        if matches!(e, Expr::Read { .. } | Expr::Gather { .. }) {
            *found = true;
            return;
        }
        for c in crate::ir::region::verify::children(e) {
            walk(c, found);
        }
    }
    walk(&p.score, &mut found);
    found
}

/// Registers per thread the 32-row layout keeps beyond [`registers`] when its query or key
/// length is symbolic: the lengths as kernel parameters and the bounds derived from them (key
/// tile count, tail predicates) live across the key loop. ptxas (NVRTC 13, sm_90a): d = 32, `S`
/// symbolic, B = 4, H = 8, 32 rows per warp, `BN = 64`, `Q` in registers: 205 against the 200
/// of [`registers`] (the same plan at concrete lengths: 175). The 16-row layout's bound lies
/// [`REG_SLACK`] above ptxas and holds its symbolic lengths (the sweeps' `SxS` graphs at d = 32,
/// 64, 96 and 256 on sm_80 and sm_90a), so the term is the 32-row layout's only: added there it
/// would stop d = 256's one unstopped tile (`BN = 32`, `Q` in shared memory: 252 + 8 > 255).
pub const SYMBOLIC_REGS: u64 = 8;

/// Whether `p`'s query or key length is symbolic ([`SYMBOLIC_REGS`]).
pub fn symbolic_lengths(p: &AttentionPair) -> bool {
    let Ok(checked) = crate::ir::region::verify::verify(p.first) else {
        return false;
    };
    p.first
        .iters
        .iter()
        .zip(&checked.iter_sizes)
        .any(|(i, d)| (i.name == p.query || i.name == p.key) && d.as_int().is_none())
}

/// Registers per thread of `plan` for the pair `p`: [`registers`] at its head and value dims,
/// plus [`MASK_REGS`] when its score epilogue reads a tensor ([`score_reads`]) and, on the
/// 32-row layout, [`SYMBOLIC_REGS`] when its query or key length is symbolic
/// ([`symbolic_lengths`]).
pub fn pair_registers(plan: &AttentionPlan, p: &AttentionPair) -> u64 {
    let symbolic = plan.frags() > 1 && symbolic_lengths(p);
    registers(plan, p.head_dim, p.value_dim)
        + if score_reads(p) { MASK_REGS } else { 0 }
        + if symbolic { SYMBOLIC_REGS } else { 0 }
}

/// Why `plan` is stopped for `p` on `target` (a plan-space key and a sentence), or `None`: its
/// registers ([`pair_registers`]) over the thread's limit, or its shared memory over the
/// block's. The one test of whether an attention plan exists, for the extractor's pair pricing
/// ([`choose_attention_plan`]) and code generation's pairing ([`has_plan`]).
pub fn stop(
    plan: &AttentionPlan,
    p: &AttentionPair,
    target: &Target,
) -> Option<(&'static str, String)> {
    let regs = pair_registers(plan, p);
    let smem = plan.smem_bytes(p.head_dim, p.value_dim);
    if regs > u64::from(target.regs_per_thread) {
        Some((
            "register_spill",
            format!("{regs} registers per thread > {}", target.regs_per_thread),
        ))
    } else if smem > u64::from(target.smem_per_block) {
        Some((
            "smem_over",
            format!("{smem} B of shared memory > {}", target.smem_per_block),
        ))
    } else {
        None
    }
}

/// Whether some point of `p`'s plan space is not stopped on `target` ([`stop`]): the fused
/// kernel exists. Code generation fuses a pair only then (`crate::cost::program::find_pairs`),
/// and the extractor prices it only then ([`choose_attention_plan`] fails otherwise).
pub fn has_plan(p: &AttentionPair, target: &Target) -> bool {
    space_for(p, target)
        .iter()
        .any(|plan| stop(plan, p, target).is_none())
}

/// The points of `p`'s plan space on `target`: [`space`], without the 16-key tile
/// ([`NARROW_BN`]) when a wider tile is not stopped ([`stop`]).
pub fn space_for(p: &AttentionPair, target: &Target) -> Vec<AttentionPlan> {
    let all = space(copies_async(p));
    let wide_fits = all
        .iter()
        .any(|plan| plan.bn > NARROW_BN && stop(plan, p, target).is_none());
    all.into_iter()
        .filter(|plan| plan.bn > NARROW_BN || !wide_fits)
        .collect()
}

/// [`REG_OVERHEAD`] of the 32-row layout, and its score, `P` and `K` fragments `BN · (F + 1) / 2`
/// (not `F` times the 16-row layout's `BN`: ptxas overlaps the fragments' `P` packing with the
/// `P·V` MMAs): fitted above ptxas (NVRTC 13, sm_80 and sm_90a, causal and full) at D = 32 and
/// 64 (`BN` 32 and 64), D = 128 (`BN = 32`, `Q` in shared memory: 247 against 248); the points
/// that spill (D = 64 `BN = 128`, D ≥ 80 `BN = 64`, D = 128 with `Q` in registers) are over
/// 255, stopped. D = 80 and 96 with `Q` in shared memory take up to [`REG_MID_D_2`] more.
pub const REG_OVERHEAD_2: u64 = 40;
/// Registers the 32-row layout with `Q` in shared memory takes beyond [`REG_OVERHEAD_2`]'s
/// bound at head or value dims strictly between 64 and 128 (D = 80, 96: ptxas is not linear in
/// D near 255; sm_80, NVRTC 13, D = 96 `BN = 32` with a bool mask: 242 against 216 + [`MASK_REGS`]).
pub const REG_MID_D_2: u64 = 14;
/// [`REG_SLACK`] of the 32-row layout (its bound lies close to ptxas).
pub const REG_SLACK_2: u64 = 8;

/// The points of the plan space; `async_` when the kernel can copy an operand with
/// `cp.async` (`templates::attention::copies_async`), else every point is synchronous.
pub fn space(async_: bool) -> Vec<AttentionPlan> {
    let mut out = Vec::new();
    for rows in ROWS {
        for q_in_regs in [true, false] {
            for bn in bns(rows) {
                out.push(AttentionPlan {
                    bm: WARPS * rows,
                    rows,
                    bn,
                    stages: 2,
                    async_,
                    q_in_regs,
                });
            }
        }
    }
    out
}

/// The sizes the model prices at: query rows, keys, batch points.
struct Sizes {
    m: u64,
    n: u64,
    nb: u64,
}

fn sizes(p: &AttentionPair, model: &CostModel) -> Result<Sizes, PlanError> {
    let r = p.first;
    let checked = crate::ir::region::verify::verify(r)
        .map_err(|e| PlanError::Work(super::work::WorkError::Invalid(e.to_string())))?;
    let size = |n: &str| -> u64 {
        let d = r
            .iters
            .iter()
            .position(|i| i.name == n)
            .map(|i| checked.iter_sizes[i].clone())
            .unwrap_or(Dim::int(1));
        model.numel(std::slice::from_ref(&d))
    };
    Ok(Sizes {
        m: size(&p.query),
        n: size(&p.key),
        nb: p
            .batch
            .iter()
            .map(|b| size(b))
            .fold(1u64, u64::saturating_mul),
    })
}

/// Query blocks whose visited key tiles `visited_tiles` counts one by one; beyond this many
/// it counts [`VISITED_SAMPLES`] evenly spaced blocks and scales (the count per block is
/// monotone in the block, so the estimate is within one block's tiles per sample gap).
pub const VISITED_EXACT_BLOCKS: u64 = 1 << 16;
/// Query blocks sampled by `visited_tiles` past [`VISITED_EXACT_BLOCKS`].
pub const VISITED_SAMPLES: u64 = 1 << 12;

/// Key tiles visited by each query block (the kernel's block-uniform skip), summed over the
/// blocks (saturating). Each block's count is closed-form: the mask's condition is linear in
/// the key tile.
fn visited_tiles(mask: Option<Mask>, s: &Sizes, bm: u64, bn: u64) -> u64 {
    let (mblocks, nt) = (s.m.div_ceil(bm), s.n.div_ceil(bn));
    let Some(m) = mask else {
        return mblocks.saturating_mul(nt);
    };
    let per_block = |b: u64| -> u64 {
        let m0 = i128::from(b) * i128::from(bm);
        let q = if m.dm <= 0 {
            m0 + i128::from(bm) - 1
        } else {
            m0
        };
        // Tile t visits when c0 + slope·t <= 0.
        let n_first = if m.dn >= 0 { 0 } else { i128::from(bn) - 1 };
        let c0 = i128::from(m.dn) * n_first + i128::from(m.dm) * q + i128::from(m.dc);
        let slope = i128::from(m.dn) * i128::from(bn);
        let nt = i128::from(nt);
        let count = match slope.cmp(&0) {
            std::cmp::Ordering::Equal => {
                if c0 <= 0 {
                    nt
                } else {
                    0
                }
            }
            // t <= floor(-c0 / slope)
            std::cmp::Ordering::Greater => (-c0).div_euclid(slope) + 1,
            // t >= ceil(c0 / -slope)
            std::cmp::Ordering::Less => nt - (c0 + (-slope) - 1).div_euclid(-slope),
        };
        count.clamp(0, nt) as u64
    };
    if mblocks <= VISITED_EXACT_BLOCKS {
        return (0..mblocks).map(per_block).fold(0, u64::saturating_add);
    }
    let sampled: f64 = (0..VISITED_SAMPLES)
        .map(|i| {
            let b = u128::from(i) * u128::from(mblocks - 1) / u128::from(VISITED_SAMPLES - 1);
            per_block(b as u64) as f64
        })
        .sum();
    let scaled = sampled / VISITED_SAMPLES as f64 * mblocks as f64;
    if scaled >= u64::MAX as f64 {
        u64::MAX
    } else {
        scaled as u64
    }
}

/// Threads, registers (the [`registers`] bound), shared memory and resident blocks per SM of
/// `plan` (by the registers ptxas allocates, [`REG_SLACK`] below the bound; by shared memory,
/// threads, blocks).
fn resources(p: &AttentionPair, plan: &AttentionPlan, target: &Target) -> Resources {
    let threads = plan.threads();
    let bound = pair_registers(plan, p);
    let regs = bound.min(255) as u32;
    let slack = if plan.frags() == 1 {
        REG_SLACK
    } else {
        REG_SLACK_2
    };
    let allocated = bound.saturating_sub(slack).min(255) as u32;
    let smem = plan.smem_bytes(p.head_dim, p.value_dim) as u32;
    let by_regs = target.regs_per_sm / (allocated.div_ceil(8) * 8 * threads as u32).max(1);
    let by_smem = target.smem_per_sm / smem.max(1);
    let by_threads = target.threads_per_sm / threads as u32;
    let ctas_per_sm = by_regs
        .min(by_smem)
        .min(by_threads)
        .min(target.blocks_per_sm)
        .max(1);
    let limited_by = if ctas_per_sm == by_regs {
        "registers"
    } else if ctas_per_sm == by_smem {
        "smem"
    } else if ctas_per_sm == by_threads {
        "threads"
    } else {
        "blocks"
    };
    Resources {
        threads: threads as u32,
        regs_per_thread: regs,
        smem_bytes: smem,
        ctas_per_sm,
        limited_by,
    }
}

/// The roofline of `plan` (module doc) and its resources.
fn price(
    p: &AttentionPair,
    plan: &AttentionPlan,
    s: &Sizes,
    out_bytes: u64,
    target: &Target,
    issue: Issue,
) -> (Estimate, Resources) {
    let (dp, dvp) = (pad16(p.head_dim) as f64, pad16(p.value_dim) as f64);
    let res = resources(p, plan, target);
    let ctas_per_sm = res.ctas_per_sm;
    let mblocks = s.m.div_ceil(plan.bm);
    let ctas = (mblocks as f64 * s.nb as f64).max(1.0);
    let tiles = visited_tiles(p.mask, s, plan.bm, plan.bn) as f64 * s.nb as f64;
    let tile_flops = (plan.bm * plan.bn) as f64 * 2.0 * (dp + dvp);
    let flops = tiles * tile_flops;
    let slots = (ctas_per_sm * target.sms) as f64;
    let waves = (ctas / slots).ceil().max(1.0);
    let fill = ctas / (waves * slots);
    let warps_per_sm = (ctas_per_sm as u64 * plan.warps()) as f64;
    let hide = (warps_per_sm / super::roofline::WARPS_TO_HIDE).min(1.0);
    let occupancy = fill * hide;
    let eff = algo_efficiency(Algo::MmaSync, target.arch);
    let tensor_s = flops / (target.tensor_flops * occupancy * eff);
    // Issue: every visited tile's instructions, per warp, on the SM's schedulers (module doc).
    let per_warp = tile_instructions(plan, p.head_dim, p.value_dim, issue);
    let instructions = tiles * plan.warps() as f64 * per_warp;
    let issue_rate = SCHEDULERS * target.sms as f64 * target.clock_ghz * 1e9 * fill;
    let ready = warps_per_sm / SCHEDULERS * frag_ilp(plan);
    let issue_s = instructions / (issue_rate * issue_efficiency(ready));
    let compute_s = tensor_s.max(issue_s);
    // DRAM: Q and O once; K and V once per batch point when the panels in flight fit in half
    // of L2 (the batch points of one wave of blocks), else the visited tiles' share that misses
    // the L2 (`L2_REUSE` of it holding panels for later blocks).
    let elem = 2.0;
    let (m, n, nb) = (s.m as f64, s.n as f64, s.nb as f64);
    let q_bytes = nb * m * p.head_dim as f64 * elem;
    let o_bytes = nb * m * p.value_dim as f64 * out_bytes as f64;
    let kv_panel = n * (p.head_dim + p.value_dim) as f64 * elem;
    let wave = slots.min(ctas);
    let in_flight = if heaviest_first(p.mask) {
        wave.min(nb)
    } else {
        (wave / mblocks as f64).ceil().min(nb)
    };
    let l2_bytes = tiles * plan.bn as f64 * (dp + dvp) * elem + q_bytes;
    let kv_bytes = if in_flight * kv_panel <= target.l2_bytes as f64 / 2.0 {
        nb * kv_panel
    } else {
        let hit = (L2_REUSE * target.l2_bytes as f64 / (in_flight * kv_panel)).min(1.0);
        (nb * kv_panel).max((l2_bytes - q_bytes) * (1.0 - hit))
    };
    let bytes = q_bytes + o_bytes + kv_bytes;
    let memory_s = (bytes / (target.dram_bw * fill)).max(l2_bytes / (target.l2_bw * fill));
    let launch_s = target.launch_s;
    let time_s = compute_s.max(memory_s) + launch_s;
    let est = Estimate {
        time_s,
        compute_s,
        memory_s,
        epilogue_s: 0.0,
        overlap_gain_s: 0.0,
        launch_s,
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
        efficiency: eff,
        ctas,
    };
    (est, res)
}

/// The plan record of `plan` (template `attention`, `algo_choice {"attention": ALGO}`, tile
/// `[BM, BN, D]`, `Q`'s cache level `reg` or `smem`).
fn plan_record(
    p: &AttentionPair,
    plan: &AttentionPlan,
    work: &KernelWork,
    target: &Target,
) -> Plan {
    let mut rec = plan_of(&plan.knobs(p.head_dim, vec_bytes(p)), work, target);
    rec.template = "attention".into();
    rec.tile = vec![plan.bm, plan.bn, pad16(p.head_dim)];
    rec.stages = plan.stages as u32;
    rec.warp_tile = format!("{}x{}", plan.rows, plan.bn);
    rec.bind = [("(m.o, batch)".to_string(), "block.x".to_string())]
        .into_iter()
        .collect();
    rec.algo_choice = [("attention".to_string(), ALGO.to_string())]
        .into_iter()
        .collect();
    rec.cache = vec![
        Cache {
            tensor: "Q".into(),
            where_: if plan.q_in_regs { "reg" } else { "smem" }.into(),
            at: "m.o".into(),
            pingpong: false,
        },
        Cache {
            tensor: "K".into(),
            where_: "smem".into(),
            at: "n.o".into(),
            pingpong: true,
        },
        Cache {
            tensor: "V".into(),
            where_: "smem".into(),
            at: "n.o".into(),
            pingpong: true,
        },
    ];
    rec.vectorize.width = store_lanes(p).unwrap_or(1) as u32;
    rec.barrier_model = if plan.async_ {
        "cp_async_group"
    } else {
        "syncthreads"
    }
    .into();
    rec.async_.enable = plan.async_;
    rec.async_.prefetch_depth = plan.stages as u32 - 1;
    rec
}

/// The width of the kernel's output stores, bytes: 16 with the staged epilogue
/// ([`store_lanes`]), else one output element.
fn vec_bytes(p: &AttentionPair) -> u64 {
    let elem = p.second.outputs.first().map_or(2, |o| o.dtype.size_bytes());
    store_lanes(p).map_or(elem, |lanes| lanes * elem)
}

/// The price of `plan` for `p` on the model's target for a kernel issuing `issue` (the
/// kernel's [`issue`], or [`MEASURED`] to price the kernel measured on 2026-11-26), whether or
/// not the plan space stops it.
pub fn estimate(
    p: &AttentionPair,
    plan: &AttentionPlan,
    model: &CostModel,
    issue: Issue,
) -> Result<Estimate, PlanError> {
    let s = sizes(p, model)?;
    let out_bytes = out_bytes(p);
    Ok(price(p, plan, &s, out_bytes, &model.target, issue).0)
}

/// Bytes per element of `p`'s output (2 when it has none).
fn out_bytes(p: &AttentionPair) -> u64 {
    p.second
        .outputs
        .first()
        .map(|o| o.dtype.size_bytes())
        .unwrap_or(2)
}

/// The fastest attention plan of `p` on the model's target (module doc).
pub fn choose_attention_plan(
    p: &AttentionPair,
    model: &CostModel,
) -> Result<PlanChoice, PlanError> {
    let target = &model.target;
    let s = sizes(p, model)?;
    let work = analyze(p.first, model)?;
    let out_bytes = out_bytes(p);
    let all = space_for(p, target);
    let n_space = all.len();
    let mut priced: Vec<(Time, AttentionPlan, Estimate, Resources)> = Vec::new();
    let mut stopped: Vec<(String, usize)> = Vec::new();
    let mut stop_examples = Vec::new();
    for plan in all {
        if let Some((key, why)) = stop(&plan, p, target) {
            match stopped.iter_mut().find(|(k, _)| k == key) {
                Some((_, n)) => *n += 1,
                None => {
                    stopped.push((key.to_string(), 1));
                    stop_examples.push(Rejected {
                        plan: plan_record(p, &plan, &work, target).summary(),
                        reason: why,
                    });
                }
            }
            continue;
        }
        let (est, res) = price(p, &plan, &s, out_bytes, target, issue(p));
        priced.push((Time::from_secs(est.time_s), plan, est, res));
    }
    priced.sort_by_key(|(t, ..)| *t);
    if priced.is_empty() {
        return Err(PlanError::NoPlan {
            template: "attention",
            why: stop_examples
                .iter()
                .map(|r| r.reason.clone())
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    let kept: Vec<Priced> = priced
        .into_iter()
        .take(1 + super::KEEP_PRICED)
        .map(|(time, plan, estimate, resources)| Priced {
            plan: plan_record(p, &plan, &work, target),
            estimate,
            time,
            resources,
            knobs: plan.knobs(p.head_dim, vec_bytes(p)),
        })
        .collect();
    let mut kept = kept.into_iter();
    let best = kept.next().ok_or_else(|| PlanError::NoPlan {
        template: "attention",
        why: "no plan".into(),
    })?;
    Ok(PlanChoice {
        work,
        best,
        runners_up: kept.collect(),
        space: n_space,
        stopped,
        stop_examples,
    })
}
