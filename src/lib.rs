//! dlc-egg: a deep-learning compiler built on egg e-graphs.
//!
//! Pipeline (seed 001 §10, `DESIGN.md`): `graph.json` → [`ir::frontend`] (validate, infer) →
//! [`ir::tiny`] (via [`ir::lower`]) → e-graph ([`rules`]) → kernels ([`extract`], [`optimize`]) →
//! CUDA ([`codegen`]), compiled with NVRTC and run on a GPU ([`cuda`]). [`eval`] is the reference evaluator (CPU playback) of Tiny IR, the semantic
//! oracle of every test.

pub mod bench_graphs;
pub mod budget;
pub mod cli;
pub mod codegen;
pub mod cost;
pub mod cpu;
pub mod cuda;
pub mod diag;
pub mod dsl;
pub mod eval;
pub mod extract;
pub mod fuzz_target;
pub mod ir;
pub mod npy;
pub mod onnx;
pub mod optimize;
pub mod plan;
pub mod poly;
pub mod rules;
pub mod run;
pub mod shapes;
pub mod target;
pub mod tensor;
pub mod viz;

pub use diag::{Diagnostic, Diagnostics};
