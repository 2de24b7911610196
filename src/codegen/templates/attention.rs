//! The attention template: the two regions the optimizer extracts for attention — scores and
//! softmax into a *deferred* buffer `P`, then `P·V` — as ONE streaming-softmax kernel
//! (FlashAttention's online softmax), so `P` never exists.
//!
//! # The pattern ([`pair`])
//!
//! `first` yields, as its only output, a deferred `P = e / sum_n(e)` where
//! `e = exp2((s − max_n(s))·c)` (`c > 0` a constant) or `e = exp(s − max_n(s))`, all three
//! reductions fp32 with their identity as init, over the same iter `n` (the *key* axis). The
//! *score* `s` contains exactly one reduce, `sum_k(a·b)` over an axis `k` that is no iter (the
//! *head* axis, of constant extent), and that reduce is a let of its own; everything else in `s`
//! (the scale, the mask, a bias) is the *score epilogue*, computed per element by the region's
//! own expressions through the `Emitter`. Of the operands, the query side `a` does not mention
//! `n` and the key side `b` mentions `n`; the iters other than `n` that `b` does not mention must
//! be exactly one, the *query* axis `m`, the rest are *batch* axes (read by the key side).
//!
//! `second` has exactly one reduce, `sum_k2(P[map]·v)` in fp32, whose one read of `P` maps
//! every iter of `first` to a plain axis of `second` (the key to the reduce axis `k2`, the other
//! iters to distinct iters of the same sizes), the `V` side `v` reads neither `P` nor the query
//! axis, and exactly one iter of `second` (the *column*, of constant extent) is not in the map.
//! The key extent of `k2` is `first`'s key size. Lets after the reduce are `second`'s epilogue.
//! `crate::cost::program::find_pairs` also checks the program: `P` is read by no other step and is no graph output.
//!
//! Matching is on inlined expressions (`pattern`), so how the optimizer split the chain into lets
//! does not matter; the values differ from the two-kernel reference only by floating-point
//! reassociation (the online softmax).
//!
//! # The kernel ([`build`], FlashAttention-2 on `mma.sync`)
//!
//! One block of `BM / rows` warps per `BM` query rows of one batch point (grid `x` = query
//! blocks × batch points, flattened, so no grid dimension limit binds); each warp owns `rows`
//! query rows (the plan's [`AttentionPlan::rows`]): 16, one `m16` fragment, or 32, two — as in
//! FlashAttention-2 (4 warps × 32 rows), so that every `K` and `V` fragment a warp reads from
//! shared memory (`ldmatrix`) feeds two MMAs, halving the shared-memory traffic and the fixed
//! instructions per FLOP. With `D`/`DV` the head and value dimensions rounded up to 16 (80 = 5 × 16):
//! - `Q` (`BM × D`) is staged once in shared memory and, when the plan keeps it in registers,
//!   loaded as `D/16` `A` fragments (`ldmatrix.x4`); otherwise it is re-read from shared memory
//!   per key tile (large head dims, to fit the registers);
//! - key tiles of `BN` keys: `K` (`BN × D`, rows along the head axis) and `V` (`BN × DV`) are
//!   double-buffered in shared memory (the tensor-core template's swizzled `contraction_mma::smem::Tile`
//!   layout): tile `t + 1` is prefetched into the other stage right after the step's barrier —
//!   with `cp.async` 16-byte chunks (zero-filled past the end) when the operand is a plain,
//!   16-byte aligned fp16/bf16 read, else computed element by element with the region's
//!   prologue and stored through registers;
//! - `S = Q·Kᵀ` by `mma.sync.m16n8k16` (fp32 accumulators, `K` fragments by `ldmatrix`); the
//!   score epilogue (scale, masks, biases) runs per accumulator element through the
//!   scalar `Emitter`, the query and key axes bound to the element's row and column (keys past the
//!   end are `-INF`; rows past the end compute on the last row and store nothing);
//! - the online softmax per row in fp32 (each lane holds two rows per fragment; the row max
//!   over the quad by shuffles; the running sum `l_i` per lane, summed over the quad at the
//!   end): the exponents are taken against a reference max `m_i` that moves (rescaling the
//!   output accumulators and `l_i` by `exp((m_old − m_new)…)`) only when some row of the warp
//!   exceeds it by more than `2^8` (a warp vote, FlashAttention-4's conditional rescaling: the
//!   quotient `O / l` does not depend on the reference), the probabilities replace the scores
//!   in the accumulator registers, are re-packed in the input precision as the `A` fragments of
//!   `O += P·V` (`V` fragments by `ldmatrix.trans`), so `P` never leaves the registers;
//! - a key tile is *skipped* (block-uniform) when the score's top-level mask
//!   (`where(cond, s, -INF)`, `select(pred, s, -INF)`) keeps a key only where
//!   `dn·n + dm·m + dc ≤ 0` (causal `n ≤ m`, `n < m + c`, sliding windows by their first affine
//!   conjunct) and that form is positive at the tile's most permissive corner for the block's
//!   rows — then every score of the tile is `-INF` and contributes exactly 0. The visited tiles
//!   are a contiguous range (the condition is monotone in the tile), and when later rows keep
//!   more keys (`dm < 0`, causal) the query blocks run in reverse order, heaviest first; a tile
//!   the mask (one affine comparison) keeps for every element and whose keys are all in range
//!   computes the kept score alone, without the per-element key bound, comparison and select
//!   (a block-uniform branch: only the diagonal and tail tiles run the masked code);
//! - at the end `o / l_i` is provided as `second`'s accumulator and `second`'s yields (epilogue,
//!   cast) are stored, predicated on the row and column bounds: staged per warp through shared
//!   memory and stored in 16-byte chunks when [`store_lanes`] allows (one yield, the value
//!   column innermost in the output, `DV` a multiple of the chunk), else element by element.
//!
//! The operands must be fp16 (or bf16) after their prologue — reads of fp16/bf16 inputs,
//! possibly widened to fp32 — else the pair is not fused (two kernels). `P` is rounded to that
//! precision for the `P·V` product (the reference rounds the deferred buffer to its type too).
//!
//! The lowering's safe softmax is accepted too: the max guarded as `where(max == -INF, 0, max)`
//! (what the kernel's running max does anyway) and the sum as `where(sum == 0, 1, sum)` (then
//! the kernel divides by 1 where `l_i = 0`): a row whose keys are all masked gives zeros, as in
//! the reference; unguarded, it gives `0/0` (NaN), as in the reference too.

mod kernel;
mod pattern;
mod stage;

pub use pattern::{body_may_be_first, fold_scale, inline, is_first, AttentionPair, Mask, Softmax};

use super::super::gpu::Kernel;
use super::super::CodegenError;
use super::symbols;
use crate::ir::dtype::DType;
use crate::ir::region::program::{RegionProgram, Step};
use crate::ir::region::{Input, Region};
use crate::plan::priced::Priced;
use crate::plan::space::Knobs;
use crate::plan::Plan;
use crate::target::Arch;
use std::collections::BTreeSet;

/// The largest head and value dimensions (the `O` accumulators of a warp's 16 rows take
/// `DV / 2` registers per lane, of 32 rows `DV`).
pub const MAX_DIM: u64 = 256;

/// Warps per block of the plan space (`crate::cost::attention` prices these shapes; the
/// template's geometry, so they live with the template).
pub const WARPS: u64 = 4;
/// Query rows per warp tried: 16 (one `m16` fragment, `BM = 64`) or 32 (two, `BM = 128`:
/// FlashAttention-2's layout, each `K`/`V` fragment read from shared memory feeds two MMAs).
pub const ROWS: [u64; 2] = [16, 32];
/// Key tile sizes tried ([`bns`]; the narrowest, [`NARROW_BN`], only as [`space_for`](crate::cost::attention::space_for) says).
pub const BNS: [u64; 4] = [16, 32, 64, 128];
/// The 16-key tile: what fits the registers of the large head dims whose score epilogue reads
/// a tensor (d = 256 with a mask: 252 + [`MASK_REGS`](crate::cost::attention::MASK_REGS) > 255 at `BN = 32`, 242 at 16). It is
/// offered only where no wider tile fits ([`space_for`](crate::cost::attention::space_for)): where one does, its half-empty score
/// fragments buy nothing, and ptxas takes 5 to 14 registers more than [`registers`](crate::cost::attention::registers) says on it
/// (d = 256 causal without a mask, sm_90a: 233 and 242 against 228).
pub const NARROW_BN: u64 = 16;

/// The key tile sizes of the plan space at `rows` query rows per warp: [`BNS`], but the
/// 16-key tile only at 16 rows (`BM = 64`): at 32 rows it would not fit either (the `O`
/// accumulators alone take `DV` registers), and its shared memory would be too small to stage
/// a 32-row block's fp32 output tile ([`store_lanes`]).
pub fn bns(rows: u64) -> impl Iterator<Item = u64> {
    BNS.into_iter()
        .filter(move |bn| *bn > NARROW_BN || rows == 16)
}

/// Whether `Q` stays in registers under the plan record `plan` (its `Q` cache level).
pub fn q_in_regs(plan: &Plan) -> bool {
    plan.cache
        .iter()
        .any(|c| c.tensor == "Q" && c.where_ == "reg")
}

/// `d` rounded up to a multiple of 16 (the mma `K` step and the `ldmatrix.x4` block).
pub fn pad16(d: u64) -> u64 {
    d.div_ceil(16) * 16
}

/// The knobs of the attention kernel (what `cost::attention::choose_attention_plan` prices).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionPlan {
    /// Query rows per block (`BM / rows` warps).
    pub bm: u64,
    /// Query rows per warp: 16 (one `m16` fragment) or 32 (two, FlashAttention-2's layout:
    /// every `K` and `V` fragment read from shared memory feeds two MMAs).
    pub rows: u64,
    /// Keys per tile.
    pub bn: u64,
    /// Shared-memory stages of the key tiles (2: double buffering).
    pub stages: u64,
    /// Plain aligned operands copied with `cp.async`.
    pub async_: bool,
    /// The `Q` fragments stay in registers (else re-read from shared memory per key tile).
    pub q_in_regs: bool,
}

impl AttentionPlan {
    /// Warps per block.
    pub fn warps(&self) -> u64 {
        self.bm / self.rows.max(16)
    }

    /// Threads per block.
    pub fn threads(&self) -> u64 {
        self.warps() * 32
    }

    /// The `m16` fragments of a warp's rows (`rows / 16`).
    pub fn frags(&self) -> u64 {
        self.rows / 16
    }

    /// The knobs as the plan records them: a contraction-shaped `mma_sync` tile
    /// `[BM, BN, D]` of `BM / rows × 1` warps, `vec_bytes` the width of the output stores
    /// ([`store_lanes`] elements of the output).
    pub fn knobs(&self, head_dim: u64, vec_bytes: u64) -> Knobs {
        Knobs::Contraction {
            algo: crate::plan::space::Algo::MmaSync,
            bm: self.bm,
            bn: self.bn,
            bk: pad16(head_dim),
            stages: self.stages as u32,
            warps_m: self.warps(),
            warps_n: 1,
            vec_bytes,
            async_: self.async_,
            row_resident: false,
            splits: 1,
        }
    }

    /// The kernel plan of a priced attention plan (its knobs, and `Q`'s cache level).
    pub fn of_priced(priced: &Priced) -> Option<AttentionPlan> {
        AttentionPlan::of(&priced.knobs, q_in_regs(&priced.plan))
    }

    /// The plan recorded by [`Self::knobs`] (and `Q`'s cache level, `reg` or `smem`).
    pub fn of(knobs: &Knobs, q_in_regs: bool) -> Option<AttentionPlan> {
        match *knobs {
            Knobs::Contraction {
                bm,
                bn,
                stages,
                async_,
                warps_m,
                ..
            } if warps_m > 0 && bm.is_multiple_of(warps_m) => Some(AttentionPlan {
                bm,
                rows: bm / warps_m,
                bn,
                stages: u64::from(stages),
                async_,
                q_in_regs,
            }),
            _ => None,
        }
    }

    /// Shared memory of the kernel, bytes (`Q`, and two stages of `K` and `V`, 2-byte elements).
    pub fn smem_bytes(&self, head_dim: u64, value_dim: u64) -> u64 {
        let (dp, dvp) = (pad16(head_dim), pad16(value_dim));
        2 * (self.bm * dp + self.stages * self.bn * (dp + dvp))
    }
}

/// The elements per 16-byte output store of `p`'s staged epilogue (`16 / size of the output
/// element`), when the kernel stages its output tile through shared memory: `second` yields
/// exactly one output, its innermost iter is the value column (so a chunk of columns is
/// contiguous in the output, row-major over `second`'s iters), the value dimension is a
/// multiple of the chunk (so every chunk starts 16-byte aligned and lies in one row), and the
/// block's `BM × DV` output tile fits in the kernel's smallest shared memory at every block
/// height of the plan space (the one of the smallest key tile, which the staging reuses after
/// the key loop). `None`: the output is stored element by element from the accumulator
/// registers.
pub fn store_lanes(p: &AttentionPair) -> Option<u64> {
    let [y] = p.second.yields.as_slice() else {
        return None;
    };
    let out = p.second.outputs.iter().find(|o| o.name == y.to)?;
    let elem = out.dtype.size_bytes();
    if elem == 0 || elem > 4 {
        return None;
    }
    let lanes = 16 / elem;
    let col_last = p.second.iters.last().is_some_and(|i| i.name == p.col);
    let fits = ROWS.into_iter().all(|rows| {
        let smallest = AttentionPlan {
            bm: WARPS * rows,
            rows,
            bn: bns(rows).min().unwrap_or(16),
            stages: 2,
            async_: false,
            q_in_regs: false,
        };
        smallest.bm * pad16(p.value_dim) * elem <= smallest.smem_bytes(p.head_dim, p.value_dim)
    });
    (col_last && p.value_dim.is_multiple_of(lanes) && fits).then_some(lanes)
}

/// Whether the query blocks run in reverse order: `mask` keeps more keys for later rows
/// (`dm < 0`, causal), so the last blocks are the heaviest and start first.
pub fn heaviest_first(mask: Option<Mask>) -> bool {
    mask.is_some_and(|m| m.dm < 0)
}

/// The tensor-core operand type of `p`: its query, key and value operands all fp16 or all
/// bf16 (reads of such inputs, possibly widened to fp32).
pub fn mma_dtype(p: &AttentionPair) -> Option<DType> {
    let q = stage::operand_dtype(p.first, &p.q_side)?;
    let k = stage::operand_dtype(p.first, &p.k_side)?;
    let v = stage::operand_dtype(p.second, &p.v_side)?;
    (q == k && k == v && matches!(q, DType::F16 | DType::BF16)).then_some(q)
}

/// Whether an asynchronous plan of `p` copies any operand with `cp.async` (a plain, 16-byte
/// aligned fp16/bf16 read, `stage::plain_read`); when none is, every tile is staged through
/// registers and the plan is recorded as synchronous (what the kernel does).
pub fn copies_async(p: &AttentionPair) -> bool {
    let Some(dtype) = mma_dtype(p) else {
        return false;
    };
    stage::plain_read(p.first, &p.q_side, &p.head_axis, p.head_dim, dtype).is_some()
        || stage::plain_read(p.first, &p.k_side, &p.head_axis, p.head_dim, dtype).is_some()
        || stage::plain_read(p.second, &p.v_side, &p.col, p.value_dim, dtype).is_some()
}

/// The two regions as one attention, when they are (see the module doc).
pub fn pair<'p>(first: &'p Region, second: &'p Region) -> Option<AttentionPair<'p>> {
    let p = pattern::pair(first, second)?;
    let dims_ok =
        p.head_dim > 0 && p.head_dim <= MAX_DIM && p.value_dim > 0 && p.value_dim <= MAX_DIM;
    (dims_ok && mma_dtype(&p).is_some()).then_some(p)
}

/// The two regions of the attention pair at steps `f` and `s` (`crate::cost::program::find_pairs` found it).
pub fn pair_at(program: &RegionProgram, f: usize, s: usize) -> Option<AttentionPair<'_>> {
    match (program.steps.get(f), program.steps.get(s)) {
        (Some(Step::Region(a)), Some(Step::Region(b))) => pair(a, b),
        _ => None,
    }
}

/// The kernel's inputs, in parameter order: `first`'s, then `second`'s others (not the
/// deferred buffer, not one `first` already has).
pub fn inputs<'p>(p: &AttentionPair<'p>) -> Vec<&'p Input> {
    let mut out: Vec<&Input> = p.first.inputs.iter().collect();
    for i in &p.second.inputs {
        if i.name != p.deferred && !out.iter().any(|o| o.name == i.name) {
            out.push(i);
        }
    }
    out
}

/// Every symbol the kernel takes, sorted (its parameters after the buffers).
pub fn kernel_symbols(p: &AttentionPair) -> BTreeSet<String> {
    let mut s = symbols(p.first);
    s.extend(symbols(p.second));
    s
}

/// The one kernel of `p` for `arch` under `plan` (see the module doc).
pub fn build(p: &AttentionPair, plan: &AttentionPlan, arch: Arch) -> Result<Kernel, CodegenError> {
    let dtype = mma_dtype(p).ok_or_else(|| CodegenError::Unsupported {
        kernel: format!("{}_{}", p.first.name, p.second.name),
        why: "the attention operands are not all fp16 or all bf16".into(),
    })?;
    kernel::build(p, plan, dtype, arch)
}
