//! The GEMV points of the plan space (`Algo::Gemv`, `codegen::templates::gemv`, priced by
//! `cost::gemv`): contractions with at most 8 output rows.

use super::{Algo, Gemm, Knobs};

/// One GEMV block shape (`codegen::templates::gemv`): each warp spreads its 32 lanes over
/// `lanes_n` consecutive output columns × `32 / lanes_n` consecutive `K` indices; `warps_n`
/// warps side by side along `N` and `slices` warps splitting `K`. In the knobs: `bn` =
/// `lanes_n · warps_n` columns per block, `warps_m` = `slices`, `bk` = `(32 / lanes_n) · slices`
/// `K` indices per step of the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvBlock {
    /// Lanes of a warp along `N` (1, 8, 16 or 32); the other `32 / lanes_n` walk `K`.
    pub lanes_n: u64,
    /// Warps along `N`.
    pub warps_n: u64,
    /// Warps splitting `K` (their partial sums meet in shared memory).
    pub slices: u64,
}

impl GemvBlock {
    /// Lanes of a warp along `K`.
    pub fn lanes_k(self) -> u64 {
        32 / self.lanes_n
    }

    /// The knobs of this block with `bm` rows, loads of `elem` bytes.
    pub fn knobs(self, bm: u64, elem: u64) -> Knobs {
        Knobs::Contraction {
            algo: Algo::Gemv,
            bm,
            bn: self.lanes_n * self.warps_n,
            bk: self.lanes_k() * self.slices,
            stages: 1,
            warps_m: self.slices,
            warps_n: self.warps_n,
            vec_bytes: elem.max(1),
            async_: false,
            row_resident: false,
            splits: 1,
        }
    }

    /// The block of GEMV knobs (`bm`, the block), `None` for other knobs or an inconsistent one.
    pub fn of(k: &Knobs) -> Option<(u64, GemvBlock)> {
        let Knobs::Contraction {
            algo: Algo::Gemv,
            bm,
            bn,
            bk,
            warps_m,
            warps_n,
            ..
        } = *k
        else {
            return None;
        };
        let b = GemvBlock {
            lanes_n: bn.checked_div(warps_n)?,
            warps_n,
            slices: warps_m,
        };
        let ok = [1, 8, 16, 32].contains(&b.lanes_n)
            && b.lanes_n * warps_n == bn
            && b.lanes_k() * warps_m == bk;
        ok.then_some((bm, b))
    }
}

const fn gemv_block(lanes_n: u64, warps_n: u64, slices: u64) -> GemvBlock {
    GemvBlock {
        lanes_n,
        warps_n,
        slices,
    }
}

/// The GEMV block shapes planned: a warp per column walking `K` with its lanes (coalesced when
/// `K` is the weight's contiguous axis, `[N, K]`), 4 or 8 column warps or 4 and 8 warps
/// splitting `K` over 1 or 2 columns; 8 or 16 columns × 4 or 2 `K` indices per warp (a full
/// 32-byte sector of fp32 or fp16 columns per `K` index when `N` is contiguous, `[K, N]`), `K`
/// split over 2 to 16 warps (as many loads in flight as the first kind needs the warps of
/// 16-slice blocks for); and a lane per column (32 columns a warp, `K` split over 4 to 16
/// warps).
pub const GEMV_BLOCKS: [GemvBlock; 15] = [
    gemv_block(1, 4, 1),
    gemv_block(1, 8, 1),
    gemv_block(1, 2, 4),
    gemv_block(1, 1, 4),
    gemv_block(1, 1, 8),
    gemv_block(8, 4, 2),
    gemv_block(8, 2, 4),
    gemv_block(8, 1, 8),
    gemv_block(8, 1, 16),
    gemv_block(16, 1, 8),
    gemv_block(16, 1, 16),
    gemv_block(32, 1, 4),
    gemv_block(32, 1, 8),
    gemv_block(32, 1, 16),
    gemv_block(32, 2, 4),
];

/// The most output rows one GEMV block keeps accumulators for (the template's limit, here so
/// that the plan space does not depend on code generation).
pub const GEMV_MAX_ROWS: u64 = 8;

/// Iterations of the `K` walk the GEMV template unrolls: each lane's loads of that many steps
/// are in flight at once (what `cost::gemv` counts as one round of latency, and the registers
/// `plan::regs` reserves).
pub const GEMV_UNROLL: u64 = 4;

/// The GEMV points of a contraction with at most [`GEMV_MAX_ROWS`] output rows and no row
/// epilogue: `BM` the rows rounded up to a power of two, [`GEMV_BLOCKS`] for the warps.
pub(super) fn gemv_grid(g: &Gemm, elem: u64) -> Vec<Knobs> {
    let max = GEMV_MAX_ROWS;
    if g.row_extent.is_some()
        || g.second.is_some()
        || g.pool.is_some()
        || g.m < 1.0
        || g.m > max as f64
        || g.m.fract() != 0.0
    {
        return Vec::new();
    }
    let bm = (g.m as u64).next_power_of_two();
    GEMV_BLOCKS.iter().map(|b| b.knobs(bm, elem)).collect()
}
