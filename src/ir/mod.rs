//! The IR layers, bottom floor of the crate: nothing here imports `rules`, `extract` or `codegen`.
//!
//! - [`frontend`]: `graph.json` loading, validation and shape/dtype inference.
//! - [`tiny`]: Tiny IR (seed 002), its typing rules, verifier and JSON dump.
//! - [`lower`]: frontend graph → Tiny IR, the naive tinygrad-style way.
//! - [`egraph`]: the e-graph language over Tiny IR and its IndexBook analysis.

pub use crate::dtype;
pub use crate::index::{axis, dim, num};
pub mod egraph;
pub mod frontend;
pub mod indexbook;
pub mod lower;
pub mod region;
pub mod tiny;

pub use dim::{Dim, Shape};
pub use dtype::DType;
