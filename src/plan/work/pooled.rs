//! The pooled tile (issue 23): a compute-at region whose consumer folds a window of a
//! pointwise function of one contraction, `pool_w f(Σ_k a·b)` — the global average pool over a
//! network's last convolution, its bias, residual and ReLU — run as a tiled contraction whose
//! rows are the window points. The consumer's window axes are the innermost `M` axes, a tile
//! holds `⌊BM / W⌋` whole windows, and its epilogue folds each window of the epilogue values in
//! window order (exactly the reference's order) and stores one value per window and column
//! (`codegen::templates::contraction_simt`). [`super::analyze`] keeps it beside the compute-at
//! nest ([`super::ComputeAtWork::tiled`]); the cost model prices both.

use super::exprs::product_operands;
use super::{Cx, MainContraction, WorkError};
use crate::ir::dtype::DType;
use crate::ir::region::verify::{first_reduce, reduce_extents, reduces_in};
use crate::ir::region::Expr;
use crate::ir::tiny::ReduceOp;
use serde::Serialize;

/// The window a pooled tile folds ([`super::Gemm::pool`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PoolTile {
    /// The consumer's reduce let (its value: the folded window).
    pub consumer: String,
    /// The window axes (the consumer reduction's), outermost first: the innermost `M` axes.
    pub axes: Vec<String>,
    /// Window points: the product of the window's extents (known numbers).
    pub window: u64,
}

/// The rows of a `bm`-row tile that hold whole `window`-row windows (0: the window is taller
/// than the tile).
pub fn whole_window_rows(bm: u64, window: u64) -> u64 {
    bm / window.max(1) * window.max(1)
}

/// The tallest window a pooled tile holds: the SIMT template's tallest tile.
pub const MAX_WINDOW: u64 = 128;

/// A pooled contraction found in a region ([`Cx::pooled_contraction`]).
pub(super) struct Pooled<'a> {
    /// The contraction (its let: the consumer's).
    pub mc: MainContraction<'a>,
    /// The window.
    pub pool: PoolTile,
    /// The window axes with their extents.
    pub extents: Vec<(String, f64)>,
}

impl<'a> Cx<'a> {
    /// The pooled contraction of the region: its only two reductions are a top-level fp32 sum
    /// or max over a window of at most [`MAX_WINDOW`] points (known extents) and, inside that
    /// window's body, a `Σ a·b` over inputs. Whether the window axes are the tile's innermost
    /// `M` axes is the caller's test, on the GEMM view.
    pub(super) fn pooled_contraction(&self) -> Result<Option<Pooled<'a>>, WorkError> {
        let reduces: usize = self.r.lets.iter().map(|l| reduces_in(&l.expr)).sum();
        if reduces != 2 {
            return Ok(None);
        }
        for l in &self.r.lets {
            let Expr::Reduce(pool) = &l.expr else {
                continue;
            };
            let Some(inner) = first_reduce(&pool.body) else {
                continue;
            };
            let Some((a, b)) = product_operands(inner) else {
                return Ok(None);
            };
            let exact = matches!(pool.op, ReduceOp::Sum | ReduceOp::Max)
                && pool.dtype.unwrap_or(DType::F32) == DType::F32;
            if !exact || !self.reads_input(a) || !self.reads_input(b) {
                return Ok(None);
            }
            let dims = reduce_extents(self.r, pool, self.iter_sizes, &l.name)
                .map_err(|e| WorkError::Invalid(e.to_string()))?;
            let Some(sizes) = dims
                .iter()
                .map(|d| d.as_int())
                .collect::<Option<Vec<i64>>>()
            else {
                return Ok(None);
            };
            let window: i64 = sizes.iter().product();
            if window < 1 || window as u64 > MAX_WINDOW {
                return Ok(None);
            }
            return Ok(Some(Pooled {
                mc: MainContraction {
                    name: l.name.clone(),
                    red: inner,
                    a,
                    b,
                },
                pool: PoolTile {
                    consumer: l.name.clone(),
                    axes: pool.axes.clone(),
                    window: window as u64,
                },
                extents: pool
                    .axes
                    .iter()
                    .cloned()
                    .zip(sizes.iter().map(|s| *s as f64))
                    .collect(),
            }));
        }
        Ok(None)
    }
}
