//! Compute-at embedding (seed 003, "Tiled Fusion / Compute-at"): a reduction (the *producer*,
//! e.g. a convolution) evaluated inside another reduction's body (the *consumer*, e.g. a pooling
//! window) at an index environment that moves with the consumer's window variables. The
//! producer is then recomputed at every window point of every consumer point — the seed's fused
//! `Conv → ReLU → MaxPool` loop nest, whose intermediate never reaches memory.
//!
//! Legality (checked here, on the environment alone; `--explain` prints the pre-image and halo
//! of each [`Embedding`], `crate::optimize::compute_at`, and Poly Core computes the same for a
//! producer → consumer pair of regions, `crate::poly::core::compute_at`):
//! 1. every index is affine in axes in scope (no floordiv: the pre-image of a consumer point is a
//!    box, not a lattice);
//! 2. the enclosing reductions are *windows*: constant extents whose product is at most
//!    [`MAX_WINDOW`] — the recomputation per consumer point is bounded by a constant;
//! 3. every variable of the enclosing reductions of extent other than 1 appears in the
//!    environment — otherwise the same producer point is recomputed once per value of the
//!    missing variable (a depthwise convolution's one input channel per group is such an
//!    axis of extent 1: it recomputes nothing);
//! 4. every region iter of extent other than 1 appears in the environment — otherwise the
//!    producer is recomputed once per value of that iter (the MLP's second matmul reading
//!    `relu(matmul1)[m, k]` misses `n`: rejected, as before).
//!
//! Dependence distances are never negative here: the producer point is computed inside the
//! consumer iteration that reads it (a sequence node in the seed's schedule tree), so the only
//! cost is recomputation where windows overlap, which the cost model prices
//! (`crate::cost::work`).

use super::ix::Ix;
use super::Cx;
use crate::ir::axis::AxisExpr;
use crate::ir::dim::Dim;
use std::collections::BTreeSet;

/// One producer reduction embedded in a consumer window by compute-at, as synthesis placed it
/// (for `--explain` and the analyses: [`super::synthesize_traced`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding {
    /// The producer's REDUCE node in the kernel body.
    pub node: usize,
    /// The producer point computed at each (consumer point, window point): one index per
    /// dimension of the producer's value, over the region iters and the window axes.
    pub point: Vec<AxisExpr>,
    /// The enclosing window axes (name, extent), outermost first.
    pub window: Vec<(String, Dim)>,
    /// The region iters (name, extent).
    pub iters: Vec<(String, Dim)>,
    /// The producer's own reduce axes (name, extent).
    pub producer_axes: Vec<(String, Dim)>,
}

/// Most window points (product of the enclosing reductions' extents) at which a producer
/// reduction may be embedded. 64 covers every pooling window up to 8×8 (and 4×4×4 in 3-D);
/// beyond it, recomputing a contraction per window point is never cheaper than one round trip.
pub const MAX_WINDOW: i64 = 64;

impl Cx<'_> {
    /// Why a reduction evaluated at `env` (not aligned) cannot be embedded in the enclosing
    /// reductions; `Ok` when it can.
    pub(super) fn compute_at(&self, env: &[Ix]) -> Result<(), String> {
        let window = &self.scope[self.iters.len()..];
        if window.is_empty() {
            return Err(
                "it is not inside a window reduction (compute-at needs a consumer \
                        reduction to embed it in)"
                    .into(),
            );
        }
        if env.iter().any(Ix::has_div) {
            return Err("its index has a floordiv (the pre-image is not a box)".into());
        }
        let mut points: i64 = 1;
        for (name, ext) in window {
            let Some(e) = ext.as_int() else {
                return Err(format!(
                    "the enclosing reduction's axis `{name}` has the symbolic extent {ext} \
                     (compute-at needs a constant window)"
                ));
            };
            points = points.saturating_mul(e.max(1));
        }
        if points > MAX_WINDOW {
            return Err(format!(
                "the enclosing window has {points} points, more than {MAX_WINDOW} \
                 (recomputing a reduction per window point would not pay)"
            ));
        }
        let mut used = BTreeSet::new();
        env.iter().for_each(|e| e.vars(&mut used));
        for (name, ext) in window {
            if !ext.is_int(1) && !used.contains(name) {
                return Err(format!(
                    "its index does not use the window axis `{name}`: the same point would \
                     be recomputed for every `{name}`"
                ));
            }
        }
        for (name, ext) in &self.iters {
            if !ext.is_int(1) && !used.contains(name) {
                return Err(format!(
                    "its index does not use the iter `{name}`: the same point would be \
                     recomputed for every `{name}`"
                ));
            }
        }
        Ok(())
    }
}
