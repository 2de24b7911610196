//! Kernel extraction from the e-graph. Built on `ir`; takes rules and costs as parameters.
//!
//! Landed: [`serialize`], interchange with the public `egraph-serialize` format.
//! TODO(issue 4): cost model, schedule plans, the fast and exact DAG-aware extractors.

pub mod kernels;
pub mod serialize;
