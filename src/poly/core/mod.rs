//! Poly Core (seed 001 §7, seed 003 §3): polyhedral analyses of an optimized program's regions
//! on top of the Poly-View statements ([`crate::poly::view`]) and the affine engine
//! ([`crate::poly::affine`]) — `dlc-egg optimize --dump poly_core`.
//!
//! # Assumptions
//! * Dependences are memory-based (`W ; R⁻¹`, every writer, not the last one) and computed
//!   exactly by the engine from the view's access relations restricted to their domains
//!   ([`relation`]). Within a region the statements run in view order (reductions, then the
//!   pointwise epilogue), a statement may depend on itself (a reduction's accumulator).
//! * A free iter is parallel when no dependence inside its region relates instances with
//!   different values of it (an engine emptiness query; `Unknown` counts as carried). Reduce
//!   axes are the reduction statements' reduce dimensions. Tail axes follow [`hints`].
//! * Across regions, one entry per producer region → consumer region → buffer (the view's RAW
//!   edges): its dependences, the compute-at analysis ([`compute_at::compute_at`]) of the last
//!   producer statement writing the buffer at each consuming statement (the first illegal one
//!   is reported, else the one with the largest halo), and the minimal buffer. A read through
//!   a reshape alias keeps the view's relation (linearized index) and is not compute-at legal.
//! * Barrier and bank-conflict hints read the region's Schedule Plan (when the optimizer gave
//!   one) and the target architecture (`--arch`).
//! * `affine_closed`: every statement of the region is a SCoP and every engine operation stayed
//!   within [`crate::poly::affine::PIECEWISE_BUDGET`] (piecewise-affine after composition).
//!
//! # Dump
//! ```json
//! {"poly_core": {"arch": "sm90",
//!   "regions": [{"region", "statements": [..], "analysis": {"parallel_axes", "reduce_axes",
//!       "tail_axes", "affine_closed", "dependences": [{"kind": "RAW"|"WAR"|"WAW", "source",
//!       "sink", "tensor", "relation", "carried_by"}], "barrier_hints", "bank_conflict_hints"},
//!       "notes"?}],
//!   "pairs": [{"producer", "consumer", "tensor", "read_as"?, "dependences": [..],
//!       "analysis": {"compute_at": {"ok", "why", "halo": {"bytes", "per_axis"}, "preimage",
//!       "footprint"}, "min_buffer": {"buffer": "reg"|"smem_ring"|"gmem", "depth"}}}],
//!   "diagnostics"?: [W2101 …]}}
//! ```

pub mod compute_at;
pub mod hints;
pub mod relation;
mod report;

#[cfg(test)]
mod tests;

pub use compute_at::{compute_at, ComputeAt};
pub use relation::{DepKind, Dependence};
pub use report::{build, PairReport, PolyCore, RegionReport};

use crate::poly::affine::AffineError;

/// Errors of the Poly Core analyses (reported in the dump's `notes`, never a panic).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CoreError {
    /// The affine engine failed on an analysis.
    #[error("{what}: {source}")]
    Affine {
        /// The analysis.
        what: String,
        /// The engine's error.
        #[source]
        source: AffineError,
    },
}

impl CoreError {
    /// The engine ran over its piecewise budget (`W2101`).
    pub fn over_budget(&self) -> bool {
        matches!(
            self,
            CoreError::Affine {
                source: AffineError::PiecewiseOverBudget { .. },
                ..
            }
        )
    }
}
