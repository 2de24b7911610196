//! Polyhedral analyses (seed 003, seed 001 §5 and §7): [`affine`] is the pure-Rust affine
//! engine (integer affine expressions with floordiv over loop variables and symbolic
//! parameters, piecewise domains, access maps, images and pre-images of boxes, symbolic bounds,
//! emptiness and containment, simplification); [`view`] is Poly-View, the SCoP domains and
//! access relations of every extracted region in ISL notation (`--dump poly_view`); [`core`]
//! is Poly Core, the dependence / parallelism / compute-at analyses on top of both
//! (`--dump poly_core`).

pub mod affine;
pub mod core;
pub mod view;
