//! The IR layers, bottom floor of the crate: nothing here imports `rules`, `extract` or `codegen`.
//!
//! - [`frontend`]: `graph.json` loading, validation and shape/dtype inference.
//! - [`tiny`]: Tiny IR (seed 002), its typing rules, verifier and JSON dump.
//! - [`egraph`]: the e-graph language over Tiny IR and its IndexBook analysis.
//!
//! IR definitions and their verifiers only: the passes between them live at the top level —
//! [`crate::lower`] (frontend graph → Tiny IR) and [`crate::synth`] (kernel body → region).

pub use crate::dtype;
pub use crate::index::{axis, dim, num};
pub mod egraph;
pub mod frontend;
pub mod indexbook;
pub mod region;
pub mod tiny;

pub use dim::{Dim, Shape};
pub use dtype::DType;
