//! The plan space of a kernel (seed 001 §10 step 6, §11 "探索空間" and "STOP 条件"; seed 000
//! §5.2): per template a small grid of candidates, each with its resource estimate (threads,
//! registers per thread, shared memory, resident CTAs per SM) and, when a STOP condition
//! rejects it, the reason.
//!
//! Grids (the seed's `tile × stages × warp_tile × vec × algo × async`):
//! - contraction: 4 tiles `[BM,BN,BK]` per algorithm × pipelines {2, 3 and 4 stages async,
//!   2 buffers synchronous} (`simt`: synchronous only; `wgmma`: 2, 3 and 4 stages) × 2 warp tiles
//!   × vector widths {16,8,4} B (the STOP on vector widths leaves one: 32 `mma_sync` points
//!   before the resource STOPs; shared memory stops the deep pipelines of the large tiles). Algorithms: `simt` (CUDA cores, any dtype), `mma_sync`
//!   (SM80 `ldmatrix` + `mma.sync.m16n8k16`, fp16/bf16, also on SM90) and on SM90 `wgmma`
//!   (TMA + `wgmma.mma_async`, always asynchronous). A contraction whose epilogue reduces over
//!   its rows also gets the *row-resident* tile (`BN` = the row, rounded up to 16) beside the
//!   multi-pass ones, for rows up to [`max_tile_extent`].
//! - reduction: threads per row {32 (a warp per row, 4 rows per block), 128, 256, 512} ×
//!   vector widths.
//! - elementwise: block {128, 256} threads × items per thread {1, 4} × vector widths.
//!
//! STOP conditions (§11), in the order they are checked:
//! 1. **Sm90Shape** — a `wgmma` tile outside wgmma/TMA's requirements: `BM` a multiple of 64 (one
//!    warpgroup per 64 rows), `BN` a multiple of 8 up to 256, `BK` rows of 128 bytes (the TMA
//!    128-byte swizzle), asynchronous.
//! 2. **Misaligned** / **VectorShrinks** — a vector width the fastest extent's bytes cannot be
//!    split into is misaligned; one narrower than the widest aligned width (16 → 8/4) shrinks the
//!    vector and stops.
//! 3. **SmemOver** — shared memory above 80 % of the per-block limit (the register-staged
//!    templates' margin for their epilogue and static arrays); a `wgmma` TMA ring may use the
//!    whole per-block limit less its mbarriers and 1024-byte alignment ([`WGMMA_RING_OVERHEAD`]:
//!    its epilogue reuses the ring, as CUTLASS's SM90 kernels run ~200 KB rings).
//! 4. **RegisterSpill** — more registers per thread than the architecture allows.
//! 5. **OneCtaPerSm** — register pressure leaves one CTA per SM (not for `wgmma`, whose
//!    warp-specialized kernel is built for one CTA per SM).
//!
//! Register estimates: per template a formula over the knobs, calibrated against ptxas
//! ([`super::regs`]); `wgmma` reads its operands from shared memory (accumulators, descriptors
//! and [`BASE_REGS`]).

mod fit;
mod gemv;

use super::regs;
pub use super::regs::{held_regs, BASE_REGS, REG_HELD_MAX, SIMT_PER_LOADED};
use crate::plan::work::{Gemm, KernelWork, Shape};
use crate::plan::{AsyncPlan, Cache, LocalEdge, Plan, Vectorize};
use crate::target::{Arch, Target};
use fit::{check, vector_extent};
pub use fit::{
    resources, vector_cap, widest_vector, widest_vector_of, widest_vector_upto, RESIDENT_PER_THREAD,
};
use gemv::gemv_grid;
pub use gemv::{GemvBlock, GEMV_BLOCKS, GEMV_MAX_ROWS, GEMV_UNROLL};
use serde::Serialize;
use std::collections::BTreeMap;

/// Fraction of the per-block shared memory a plan may use (§11: "~80 %").
pub const SMEM_FRACTION: f64 = 0.8;

/// Shared memory a `wgmma` kernel needs beyond its TMA ring, bytes: the 1024-byte alignment
/// of the swizzled stages and up to 8 stages' `full`/`empty` mbarriers (16 bytes a stage;
/// `codegen::templates::sm90`).
pub const WGMMA_RING_OVERHEAD: u64 = 1024 + 16 * 8;

/// How a contraction multiplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Algo {
    /// CUDA-core FMAs.
    Simt,
    /// Tensor cores through `mma.sync` (sm_80 and later).
    MmaSync,
    /// Tensor cores through warpgroup `wgmma` (sm_90a).
    Wgmma,
    /// A block of warps over output columns and `K`-slices, for `M ≤ 8`
    /// (`codegen::templates::gemv`): `bm` rows, the lanes of a warp over `bn / warps_n`
    /// columns × the rest along `K`, `warps_m` slices ([`GemvBlock`]).
    Gemv,
}

impl Algo {
    /// The name plans and `--explain` use (`simt`, `mma_sync`, `wgmma`).
    pub fn name(self) -> &'static str {
        match self {
            Algo::Simt => "simt",
            Algo::MmaSync => "mma_sync",
            Algo::Wgmma => "wgmma",
            Algo::Gemv => "gemv",
        }
    }
}

/// The knobs of a candidate, by template (what the roofline reads).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "template", rename_all = "snake_case")]
pub enum Knobs {
    /// A tiled contraction.
    Contraction {
        /// How the tile is multiplied.
        algo: Algo,
        /// Block tile rows (`M`).
        bm: u64,
        /// Block tile columns (`N`).
        bn: u64,
        /// K-slice per iteration.
        bk: u64,
        /// Pipeline stages (tiles of the operands in shared memory).
        stages: u32,
        /// Warps along `M`.
        warps_m: u64,
        /// Warps along `N`.
        warps_n: u64,
        /// Global-access vector width, bytes.
        vec_bytes: u64,
        /// Operand tiles loaded with asynchronous copies.
        async_: bool,
        /// The tile holds whole rows of a row epilogue (one pass).
        row_resident: bool,
        /// CTAs sharing one output tile, each over its own share of the `K` steps (split-K;
        /// 1: none). The partial tiles meet in a global workspace; the last CTA of a tile to
        /// finish sums them in split order and runs the epilogue (`split_k_grid`).
        splits: u64,
    },
    /// A cooperative row reduction.
    Reduction {
        /// Threads cooperating on one row.
        threads_per_row: u64,
        /// Rows per block.
        rows_per_block: u64,
        /// Global-access vector width, bytes.
        vec_bytes: u64,
    },
    /// One thread per output element (or `items` of them).
    Elementwise {
        /// Threads per block.
        block: u64,
        /// Output elements per thread.
        items: u64,
        /// Global-access vector width, bytes.
        vec_bytes: u64,
    },
}

impl Knobs {
    /// The global-access vector width, in bytes.
    pub fn vec_bytes(&self) -> u64 {
        match *self {
            Knobs::Contraction { vec_bytes, .. }
            | Knobs::Reduction { vec_bytes, .. }
            | Knobs::Elementwise { vec_bytes, .. } => vec_bytes,
        }
    }

    /// Threads per block.
    pub fn threads(&self) -> u64 {
        match *self {
            // `wgmma`: the consumer warpgroups plus the TMA producer warpgroup.
            Knobs::Contraction {
                algo: Algo::Wgmma,
                warps_m,
                warps_n,
                ..
            } => (warps_m * warps_n).div_ceil(4) * 128 + 128,
            Knobs::Contraction {
                warps_m, warps_n, ..
            } => warps_m * warps_n * 32,
            Knobs::Reduction {
                threads_per_row,
                rows_per_block,
                ..
            } => threads_per_row * rows_per_block,
            Knobs::Elementwise { block, .. } => block,
        }
    }

    /// Whether the plan loads asynchronously (a contraction with `async_`).
    pub fn async_enabled(&self) -> bool {
        matches!(self, Knobs::Contraction { async_: true, .. })
    }
}

/// Resource estimate of a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Resources {
    /// Threads per block.
    pub threads: u32,
    /// Registers per thread (estimated).
    pub regs_per_thread: u32,
    /// Shared memory per block, bytes.
    pub smem_bytes: u32,
    /// Resident CTAs per SM (at least 1 when the plan fits at all).
    pub ctas_per_sm: u32,
    /// What bounds `ctas_per_sm`: `registers`, `smem`, `threads` or `blocks`.
    pub limited_by: &'static str,
}

/// Why a candidate is not priced (§11 STOP conditions).
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[serde(tag = "stop", rename_all = "snake_case")]
pub enum Stop {
    #[error("SM90 tile outside wgmma/TMA requirements: {why}")]
    /// The tile breaks a wgmma/TMA shape rule on sm_90a.
    Sm90Shape {
        /// Which rule.
        why: String,
    },
    #[error("{width_bytes}-byte vectors do not divide the {extent_bytes}-byte fastest extent")]
    /// The vector width does not divide the fastest extent (a tail would be misaligned).
    Misaligned {
        /// Vector width, bytes.
        width_bytes: u64,
        /// Fastest extent, bytes.
        extent_bytes: u64,
    },
    #[error("vector width shrinks from {from_bytes} to {to_bytes} bytes")]
    /// The plan's vector is narrower than the widest the fastest extent allows (a dominated point).
    VectorShrinks {
        /// The widest legal width, bytes.
        from_bytes: u64,
        /// The plan's width, bytes.
        to_bytes: u64,
    },
    #[error("shared memory {smem_bytes} B is over the share plans may use of the {limit_bytes} B per block")]
    /// Shared memory over [`SMEM_FRACTION`] of the per-block limit (a `wgmma` ring: over the
    /// limit less [`WGMMA_RING_OVERHEAD`]).
    SmemOver {
        /// Shared memory the plan needs, bytes.
        smem_bytes: u64,
        /// The per-block limit, bytes.
        limit_bytes: u64,
    },
    #[error("{regs} registers per thread spill (limit {limit})")]
    /// More registers per thread than the hardware gives (ptxas would spill).
    RegisterSpill {
        /// Estimated registers per thread.
        regs: u32,
        /// The limit.
        limit: u32,
    },
    #[error("{regs} registers per thread leave 1 CTA per SM")]
    /// So many registers that only one block fits per SM (no latency hiding).
    OneCtaPerSm {
        /// Estimated registers per thread.
        regs: u32,
    },
}

/// One point of the plan space (its seed §8 [`Plan`] is built on demand by [`plan_of`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Candidate {
    /// The candidate's knobs.
    pub knobs: Knobs,
    /// Its estimated resources.
    pub resources: Resources,
    /// `Err` when a STOP condition rejects it.
    pub verdict: Result<(), Stop>,
}

/// The plan space of `work` on `target`: every grid point, checked.
pub fn candidates(work: &KernelWork, target: &Target) -> Vec<Candidate> {
    candidates_with(work, target, WGMMA_EMITTED)
}

/// [`candidates`], with or without the SM90 `wgmma` points (whatever [`WGMMA_EMITTED`] says).
pub fn candidates_with(work: &KernelWork, target: &Target, wgmma: bool) -> Vec<Candidate> {
    let knobs = match &work.shape {
        Shape::Contraction(g) => contraction_grid(g, target, wgmma),
        Shape::Reduction { len, .. } => reduction_grid(vector_extent(work).1, *len),
        Shape::Elementwise { .. } => elementwise_grid(work.out_elem_bytes, vector_cap(work)),
        // The consumer-driven nest is scalar (its reads sit in reduce bodies): no vector width;
        // a cooperative one also splits each consumer point's window over a warp or a block
        // (the reduce template's row shapes, scalar walk).
        Shape::ComputeAt(ca) => {
            let mut grid: Vec<Knobs> = elementwise_grid(work.out_elem_bytes, 16)
                .into_iter()
                .filter(|k| k.vec_bytes() == work.out_elem_bytes)
                .collect();
            if ca.cooperative {
                grid.extend(
                    reduction_grid(work.out_elem_bytes, ca.window)
                        .into_iter()
                        .filter(|k| k.vec_bytes() == work.out_elem_bytes),
                );
                // Two warps per point: a window of 33–64 points (a 7×7 pool) in one round
                // without a block's idle warps.
                if ca.window > 32.0 {
                    grid.push(Knobs::Reduction {
                        threads_per_row: 64,
                        rows_per_block: 2,
                        vec_bytes: work.out_elem_bytes,
                    });
                }
            }
            grid
        }
        // The scan template: one block per line, `block × items` elements per tile, scalar
        // loads (the scanned axis may be strided).
        Shape::Scan { .. } => elementwise_grid(work.out_elem_bytes, 16)
            .into_iter()
            .filter(|k| k.vec_bytes() == work.out_elem_bytes)
            .collect(),
    };
    knobs
        .into_iter()
        .map(|k| {
            let resources = resources(&k, work, target);
            let verdict = check(&k, &resources, work, target);
            Candidate {
                knobs: k,
                resources,
                verdict,
            }
        })
        .collect()
}

/// Whether code generation has a `wgmma` template (`codegen::templates::sm90`): SM90
/// contractions it accepts are planned on `wgmma` or `mma_sync`, whichever is priced faster
/// (`cost::choose_plan` drops the `wgmma` points of the others).
pub const WGMMA_EMITTED: bool = true;

/// Vector widths of the grid, in bytes (the seed's {16, 8, 4}, and the narrow ones odd
/// extents of narrow types need; widths below the element size are not tried).
const VEC_BYTES: [u64; 5] = [16, 8, 4, 2, 1];

fn vec_widths(elem: u64) -> impl Iterator<Item = u64> {
    VEC_BYTES.into_iter().filter(move |w| *w >= elem.max(1))
}

/// A pointwise kernel's vector widths up to `cap` bytes ([`vector_cap`]): the wider ones
/// (32, 64 bytes of output) where its narrowest input is narrower than its output, then
/// [`vec_widths`].
fn elementwise_widths(elem: u64, cap: u64) -> impl Iterator<Item = u64> {
    let wide = (0..3)
        .map(|i| 64u64 >> i)
        .filter(move |w| *w > 16 && *w <= cap);
    wide.chain(vec_widths(elem))
}

fn contraction_grid(g: &Gemm, target: &Target, wgmma: bool) -> Vec<Knobs> {
    let elem = g.a_elem.max(g.b_elem);
    let mut algos = vec![Algo::Simt];
    if g.tensor_cores {
        algos = vec![Algo::MmaSync];
        if target.arch == Arch::Sm90 && wgmma {
            algos.push(Algo::Wgmma);
        }
    }
    let mut out = gemv_grid(g, elem);
    for algo in algos {
        let mut tiles: Vec<[u64; 3]> = match algo {
            // The 128×128 SIMT tile keeps 64 accumulators per thread: a 16-deep K step leaves room
            // for the register double buffer (32 deep spills on sm_90a). The 32-row tiles give a
            // small-`M` GEMM (BERT's 128-token feed-forward: 24 CTAs of 64×64) four times the
            // CTAs, at the price of a micro-tile bound by its shared-memory reads
            // (`cost::roofline::simt_smem_share`).
            Algo::Simt => vec![
                [32, 32, 32],
                [32, 64, 32],
                [64, 64, 16],
                [64, 64, 32],
                [128, 64, 32],
                [128, 128, 16],
            ],
            Algo::MmaSync => MMA_SYNC_TILES.to_vec(),
            Algo::Gemv => unreachable!("the GEMV points come from gemv_grid"),
            // `[128, 64, 64]`: narrow `N` (a conv's 64 output channels) without a half-empty tile.
            Algo::Wgmma => vec![
                [64, 128, 64],
                [128, 64, 64],
                [128, 128, 64],
                [128, 256, 64],
                [64, 64, 32],
            ],
        };
        // The row-resident tile, when no standard tile covers the row and the row is no longer
        // than the block's shared memory in bytes (a longer tile no target can stage, and its
        // sizes would overflow the resource arithmetic).
        if let Some(row) = g
            .row_extent
            .filter(|r| *r <= max_tile_extent(target) as f64)
        {
            let bn = (row.max(1.0) as u64).div_ceil(16) * 16;
            let widest = tiles.iter().map(|t| t[1]).max().unwrap_or(0);
            if bn > widest {
                let bk = if algo == Algo::Wgmma {
                    128 / g.a_elem.max(1)
                } else {
                    32
                };
                tiles.push([64, bn, bk]);
            }
        }
        // Synchronous loads use two buffers; a deeper pipeline only pays with async copies,
        // and TMA (wgmma) is asynchronous.
        // The SIMT template stages through registers (two buffers, synchronous).
        let pipelines: &[(u32, bool)] = match algo {
            Algo::Wgmma => &[(2, true), (3, true), (4, true)],
            Algo::Simt => &[(2, false)],
            _ => &[(2, true), (3, true), (4, true), (2, false)],
        };
        // A pooled tile holds whole windows: only tiles at least one window tall, and for a
        // window of 33–64 rows (a 7×7 map) a narrower 64-row tile, which launches as many
        // CTAs as the 32×64 tile of the unpooled contraction.
        if g.pool.is_some() && algo == Algo::Simt {
            tiles.push([64, 32, 32]);
        }
        tiles.retain(|t| g.rows_per_tile(t[0]) > 0);
        for [bm, bn, bk] in tiles {
            for &(stages, async_) in pipelines {
                for (wm, wn) in warp_tiles(algo, bm, bn) {
                    // The SIMT template loads and stores one element at a time.
                    let widths: Vec<u64> = match algo {
                        Algo::Simt => vec![elem.max(1)],
                        _ => vec_widths(elem).collect(),
                    };
                    for vec_bytes in widths {
                        out.push(Knobs::Contraction {
                            algo,
                            bm,
                            bn,
                            bk,
                            stages,
                            warps_m: bm / wm,
                            warps_n: bn / wn,
                            vec_bytes,
                            async_,
                            row_resident: g.row_extent.is_some_and(|r| (bn as f64) >= r),
                            splits: 1,
                        });
                    }
                }
            }
        }
    }
    let split = split_k_grid(g, target, &out);
    out.extend(split);
    out
}

/// Most CTAs one split-K tile is divided among.
pub const MAX_SPLITS: u64 = 16;

/// The split-K points of a contraction whose tiles leave SMs idle: for every SIMT or
/// `mma_sync` tile of `grid` (no row epilogue: its rows are reduced by the tile's own pass), the splits
/// `S ∈ {2, 4, 8, 16}` that keep at least two `K` steps per CTA and at most two waves of
/// CTAs (`batch · tiles · S ≤ 2 · SMs`), when the unsplit tiles fill less than the GPU
/// (ResNet-18's last stage: a 7×7 map with 512 channels is 16 tiles of 32×32 for 132 SMs, each
/// walking `K = 4608`). Each CTA walks `⌈⌈K/BK⌉/S⌉` steps; the partial tiles go through a
/// global workspace (`codegen::templates::contraction_simt`).
fn split_k_grid(g: &Gemm, target: &Target, grid: &[Knobs]) -> Vec<Knobs> {
    let sms = target.sms as f64;
    let mut out = Vec::new();
    if g.row_extent.is_some() {
        return out;
    }
    for k in grid {
        let Knobs::Contraction {
            algo, bm, bn, bk, ..
        } = *k
        else {
            continue;
        };
        if !matches!(algo, Algo::Simt | Algo::MmaSync) {
            continue;
        }
        let rows = g.rows_per_tile(bm).max(1) as f64;
        let ctas = g.batch * (g.m / rows).ceil() * (g.n / bn as f64).ceil();
        let steps = (g.k / bk as f64).ceil() as u64;
        if ctas >= sms {
            continue;
        }
        for splits in [2, 4, 8, MAX_SPLITS] {
            if steps < 2 * splits || ctas * splits as f64 > 2.0 * sms {
                break;
            }
            let mut split = *k;
            if let Knobs::Contraction { splits: s, .. } = &mut split {
                *s = splits;
            }
            out.push(split);
        }
    }
    out
}

/// The longest tile side planned on `target`: its per-block shared memory in bytes (a tile
/// side longer than that cannot be staged by any pipeline of the target).
pub fn max_tile_extent(target: &Target) -> u64 {
    u64::from(target.smem_per_block)
}

/// Tile rows of one group of the contraction templates' grouped block order: blocks are
/// numbered along `RASTER_GROUP` tile rows, column by column, so that the blocks running at
/// once share `A` rows and `B` columns in L2 (the roofline's wave working set).
pub const RASTER_GROUP: u64 = 8;

/// The standard `[BM, BN, BK]` tiles of `mma_sync` (the code generator's shared-memory swizzle
/// is tested conflict-free on each, and on the row-resident `64 × BN × 32` tiles).
pub const MMA_SYNC_TILES: [[u64; 3]; 4] =
    [[64, 64, 32], [128, 64, 32], [128, 128, 32], [128, 128, 64]];

/// Two warp tiles per block tile: 4 warps (2×2) and 8 warps (4×2); for `wgmma`, one
/// warpgroup (4 warps) per 64 rows, or one warpgroup for the whole tile.
pub fn warp_tiles(algo: Algo, bm: u64, bn: u64) -> Vec<(u64, u64)> {
    match algo {
        Algo::Wgmma => {
            let mut v = vec![(16, bn), ((bm / 4).max(16), bn)];
            v.dedup();
            v
        }
        _ => vec![(bm / 2, bn / 2), (bm / 4, bn / 2)],
    }
}

/// The longest row (elements) the row template runs one warp per row only: up to 8 16-byte
/// chunks of 2-byte elements per lane, folded without a barrier or a shared-memory round trip,
/// and no warp of the block idle (a block per row of 768 fp16 elements leaves one of its 4
/// warps without a chunk).
pub const WARP_ROW_MAX: f64 = 2048.0;

fn reduction_grid(elem: u64, len: f64) -> Vec<Knobs> {
    let mut out = Vec::new();
    // Both shapes for every row: the roofline's row price (`cost::roofline`) credits a warp per
    // row with its loads in flight, no barrier and no idle lane, and a block per row with more
    // blocks for a few rows (the encoder's 128-row LayerNorm).
    let shapes: &[(u64, u64)] = if len <= WARP_ROW_MAX {
        &[(32, 4), (128, 1), (256, 1)]
    } else {
        &[(32, 4), (128, 1), (256, 1), (512, 1)]
    };
    for &(threads_per_row, rows_per_block) in shapes {
        for vec_bytes in vec_widths(elem) {
            out.push(Knobs::Reduction {
                threads_per_row,
                rows_per_block,
                vec_bytes,
            });
        }
    }
    out
}

fn elementwise_grid(elem: u64, cap: u64) -> Vec<Knobs> {
    let mut out = Vec::new();
    for block in [128, 256] {
        for items in [1, 4] {
            for vec_bytes in elementwise_widths(elem, cap) {
                out.push(Knobs::Elementwise {
                    block,
                    items,
                    vec_bytes,
                });
            }
        }
    }
    out
}

/// The shared-memory swizzle of an algorithm's operand tiles (the plan's `A_swizzle` and
/// `B_swizzle` hints): `xor_128b` — 16-byte chunks XORed with the row index within 128-byte
/// bank lines, as the `mma_sync` template stores them (`codegen::templates::contraction_mma`)
/// and TMA's 128-byte swizzle would for `wgmma`; rows of 64 or 32 bytes take the same family's
/// narrower variant — or `none` (the SIMT template's tiles).
pub fn swizzle_hint(algo: Algo) -> &'static str {
    match algo {
        Algo::Simt | Algo::Gemv => "none",
        Algo::MmaSync | Algo::Wgmma => "xor_128b",
    }
}

/// The seed §8 plan of a candidate's knobs.
pub fn plan_of(k: &Knobs, work: &KernelWork, target: &Target) -> Plan {
    let arch = target.arch;
    let mut bind = BTreeMap::new();
    let mut algo_choice = BTreeMap::new();
    let mut cache = Vec::new();
    let mut layout_hints = BTreeMap::new();
    let mut local_edges = Vec::new();
    let mut epilogue = Vec::new();
    let mut split_k = 1;
    let barrier_model;
    let (tile, stages, warp_tile, vectorize, predicate_tail, async_) = match (*k, &work.shape) {
        (
            Knobs::Contraction {
                algo,
                bm,
                bn,
                bk,
                stages,
                warps_m,
                warps_n,
                vec_bytes,
                async_,
                row_resident,
                splits,
            },
            Shape::Contraction(g),
        ) => {
            split_k = splits as u32;
            for (a, h) in [
                ("b", "block.z"),
                ("m.o", "block.y"),
                ("n.o", "block.x"),
                ("m.i.o", "warp.y"),
                ("n.i.o", "warp.x"),
            ] {
                if a != "b" || g.batch > 1.0 {
                    bind.insert(a.to_string(), h.to_string());
                }
            }
            let pattern = match g.pattern {
                crate::plan::work::Pattern::Conv => "conv",
                _ if g.row_extent.is_some() => "attention",
                _ => "matmul",
            };
            let impl_name = match (g.pattern, g.row_extent.is_some()) {
                (crate::plan::work::Pattern::Conv, _) => format!("implicit_gemm_{}", algo.name()),
                (_, true) if !row_resident => format!("{}_rows_{}pass", algo.name(), g.row_passes),
                _ => algo.name().to_string(),
            };
            // A pooled tile folds `W`-point windows of its rows in the epilogue.
            let impl_name = match &g.pool {
                Some(p) => format!("{impl_name}_pooled{}", p.window),
                None => impl_name,
            };
            algo_choice.insert(pattern.to_string(), impl_name);
            for t in work
                .inputs
                .iter()
                .filter(|i| i.role != crate::plan::work::Role::Other)
            {
                cache.push(Cache {
                    tensor: t.name.clone(),
                    // The GEMV walk loads its operands straight into registers.
                    where_: if algo == Algo::Gemv { "reg" } else { "smem" }.into(),
                    at: "k.i".into(),
                    pingpong: stages >= 2,
                });
            }
            let swz = swizzle_hint(algo);
            layout_hints.insert("A_swizzle".into(), serde_json::Value::from(swz));
            layout_hints.insert("B_swizzle".into(), serde_json::Value::from(swz));
            layout_hints.insert("C_stride".into(), serde_json::Value::from("row"));
            // The tensor-core epilogue stores element by element from the fragments when the
            // output's contiguous run is not a multiple of 16 bytes (no 16-byte stores).
            if algo != Algo::Simt && !g.staged_store {
                layout_hints.insert("C_store".into(), serde_json::Value::from("fragments"));
            }
            epilogue = g.epilogue.clone();
            if !epilogue.is_empty() {
                local_edges.push(LocalEdge {
                    from: "sum_k".into(),
                    to: epilogue[0].clone(),
                    buffer: "reg".into(),
                    depth: None,
                });
            }
            barrier_model = match (algo, async_) {
                (Algo::Wgmma, _) => "mbarrier",
                (_, true) => "cp_async_group",
                _ => "syncthreads",
            };
            let mut tails = Vec::new();
            for (ax, full, t) in [("m.i.i", g.m, bm), ("n.i.i", g.n, bn), ("k.i.i", g.k, bk)] {
                if !(full as u64).is_multiple_of(t) {
                    tails.push(ax.to_string());
                }
            }
            (
                vec![bm, bn, bk],
                stages,
                match GemvBlock::of(k) {
                    // A GEMV warp's lanes: columns × `K` indices.
                    Some((_, b)) => format!("{}x{}k", b.lanes_n, b.lanes_k()),
                    None => format!("{}x{}", bm / warps_m, bn / warps_n),
                },
                Vectorize {
                    axis: "k.i.i".into(),
                    width: (vec_bytes / g.a_elem.max(1)) as u32,
                },
                tails,
                AsyncPlan {
                    enable: async_,
                    prefetch_depth: if async_ { stages } else { 0 },
                    epilogue_overlap: async_,
                },
            )
        }
        (
            Knobs::Reduction {
                threads_per_row,
                rows_per_block,
                vec_bytes,
            },
            Shape::Reduction { len, rows, .. },
        ) => {
            bind_rows(
                (&mut bind, &mut algo_choice),
                ("reduce", ["warp_per_row", "block_per_row"]),
                [threads_per_row, rows_per_block],
            );
            barrier_model = "syncthreads";
            let elem = work.inputs.iter().map(|i| i.elem_bytes).max().unwrap_or(4);
            row_plan(
                [*len, *rows],
                [threads_per_row, rows_per_block],
                vec_bytes / elem.max(1),
            )
        }
        (
            Knobs::Reduction {
                threads_per_row,
                rows_per_block,
                ..
            },
            Shape::ComputeAt(ca),
        ) => {
            // The cooperative window: the threads of a consumer point split its window, each
            // window point's producer recomputed in its thread and handed over in a register.
            bind_rows(
                (&mut bind, &mut algo_choice),
                ("compute_at", ["window_per_warp", "window_per_block"]),
                [threads_per_row, rows_per_block],
            );
            local_edges.push(LocalEdge {
                from: "producer".into(),
                to: ca.consumer.clone(),
                buffer: "reg".into(),
                depth: None,
            });
            barrier_model = "syncthreads";
            row_plan([ca.window, ca.points], [threads_per_row, rows_per_block], 1)
        }
        (
            Knobs::Elementwise {
                block,
                items,
                vec_bytes,
            },
            _,
        ) => {
            bind.insert("i.o".into(), "block.x".into());
            bind.insert("i.i".into(), "thread.x".into());
            if let Shape::ComputeAt(ca) = &work.shape {
                // The seed 003 nest: a consumer point per thread, the producer recomputed at
                // each window point and handed over in a register.
                algo_choice.insert("compute_at".into(), "consumer_nest".into());
                local_edges.push(LocalEdge {
                    from: "producer".into(),
                    to: ca.consumer.clone(),
                    buffer: "reg".into(),
                    depth: None,
                });
            } else if matches!(work.shape, Shape::Scan { .. }) {
                // The scan template: one block per line, a chunked single-pass scan (items in
                // registers, warp shuffles, block totals through shared memory, a running carry).
                algo_choice.insert("scan".into(), "chunked_single_pass".into());
            } else {
                algo_choice.insert("elementwise".into(), "vectorized".into());
            }
            barrier_model = "syncthreads";
            let lanes = (vec_bytes / work.out_elem_bytes.max(1)).max(1);
            let per_block = block * items * lanes;
            let tails = if !(work.out_elems as u64).is_multiple_of(per_block) {
                vec!["i".to_string()]
            } else {
                Vec::new()
            };
            (
                vec![per_block],
                1,
                "-".into(),
                Vectorize {
                    axis: "i.i".into(),
                    width: lanes as u32,
                },
                tails,
                AsyncPlan::synchronous(),
            )
        }
        _ => unreachable!("knobs come from the grid of the work's own template"),
    };
    Plan {
        template: work.shape.template().to_string(),
        tile,
        stages,
        bind,
        warp_tile,
        cache,
        vectorize,
        predicate_tail,
        epilogue,
        arch,
        layout_hints,
        algo_choice,
        local_edges,
        async_,
        barrier_model: barrier_model.to_string(),
        split_k,
    }
}

/// The thread binding of a row plan (a row per `block.x`, per warp `y` with several rows per
/// block, the row's threads on `thread.x`) and its algorithm under `key`: `names[0]` for a warp
/// per row, `names[1]` for a block.
fn bind_rows(
    (bind, algo_choice): (&mut BTreeMap<String, String>, &mut BTreeMap<String, String>),
    (key, names): (&str, [&str; 2]),
    [threads_per_row, rows_per_block]: [u64; 2],
) {
    bind.insert("row".into(), "block.x".into());
    bind.insert("r.i".into(), "thread.x".into());
    if rows_per_block > 1 {
        bind.insert("row.i".into(), "warp.y".into());
    }
    let name = if threads_per_row == 32 {
        names[0]
    } else {
        names[1]
    };
    algo_choice.insert(key.into(), name.into());
}

/// What [`row_plan`] returns: tile, stages, warp shape, vector, tails, async plan.
type RowPlan = (Vec<u64>, u32, String, Vectorize, Vec<String>, AsyncPlan);

/// The tile, stages, warp shape, vector, tails and async plan of a row plan: `rows` rows of
/// `len` elements walked `lanes` at a time by `threads_per_row` threads, `rows_per_block` rows
/// per block.
fn row_plan(
    [len, rows]: [f64; 2],
    [threads_per_row, rows_per_block]: [u64; 2],
    lanes: u64,
) -> RowPlan {
    let mut tails = Vec::new();
    if !(len as u64).is_multiple_of(threads_per_row * lanes.max(1)) {
        tails.push("r.i".into());
    }
    if !(rows as u64).is_multiple_of(rows_per_block) {
        tails.push("row".into());
    }
    (
        vec![rows_per_block, threads_per_row],
        1,
        "-".into(),
        Vectorize {
            axis: "r.i".into(),
            width: lanes as u32,
        },
        tails,
        AsyncPlan::synchronous(),
    )
}
