//! dlc-egg: a deep-learning compiler built on egg e-graphs.
//!
//! Pipeline (seed 001 §10, `DESIGN.md`): `graph.json` → [`ir::frontend`] (validate, infer) →
//! [`ir::tiny`] (via [`lower`]) → e-graph ([`rules`]) → kernels ([`extract`], [`optimize`]) →
//! CUDA ([`codegen`]), compiled with NVRTC and run on a GPU ([`cuda`]). [`eval`] is the reference
//! evaluator (CPU playback) of Tiny IR, the semantic oracle of every test.
//!
//! # Quick start: a rule of your own inside the real pipeline
//!
//! Load a graph, add a rewrite rule to a phase, optimize, check the optimized program against
//! the reference evaluator and emit CUDA:
//!
//! ```
//! use dlc_egg::optimize::{optimize, OptimizeOptions};
//! use dlc_egg::rules::{testing::check_optimized, Rule};
//!
//! // 1. A graph (`graph-json.md`; `pipeline::load_file` reads one from disk, in any input format).
//! let json = r#"{
//!   "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
//!   "tensors": {"X": {"dtype": "fp16", "shape": [8, 64]}, "Y": {"dtype": "fp16", "shape": [8, 64]}},
//!   "graph": [
//!     {"op": "Elementwise", "name": "a", "inputs": ["X"], "outputs": ["H"], "attrs": {"fn": "relu"}},
//!     {"op": "Elementwise", "name": "b", "inputs": ["H"], "outputs": ["Y"], "attrs": {"fn": "relu"}}
//!   ]
//! }"#;
//! let graph = dlc_egg::ir::frontend::load_str(json, "quick.json")?;
//! let prog = dlc_egg::run::lower_and_verify(&graph)?;
//!
//! // 2. A rule (egg's `rewrite!` over the pattern vocabulary of `ir::egraph::TensorLang`).
//! let relu_idem: Rule = egg::rewrite!("relu-idem"; "(relu (relu ?x))" => "(relu ?x)");
//!
//! // 3. The CLI's pipeline plus the rule, with rewrite chains.
//! let opts = OptimizeOptions::default().with_rule("srnf", relu_idem).with_explain(true);
//! let o = optimize(&prog, &opts)?;
//! assert!(o.phases.iter().any(|p| p.fired("relu-idem")));
//! assert!(o.rewrites[0].rules.iter().any(|u| u.rule == "relu-idem"));
//! assert_eq!(o.kernels.len(), 1);
//!
//! // 4. The optimized program against the reference evaluator (seeded random inputs).
//! check_optimized(&prog, &o, &Default::default(), &[0])?;
//!
//! // 5. CUDA (`kernels.cu` and its manifest).
//! let cuda = dlc_egg::codegen::emit_program(&o)?;
//! assert!(cuda.source.contains("__global__"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Where to go next: [`optimize::OptimizeOptions`] (builder methods for rules, phases, a kernel
//! pricer and an extractor), [`rules::cond`] (side conditions), [`rules::testing`] (soundness
//! checks), [`extract::pricing::KernelPricer`] (cost models), `examples/custom_rule.rs` and
//! `examples/custom_cost.rs`, and `docs/numerics.md` (how close the optimized program is to the
//! reference).

#![warn(missing_docs)]

#[cfg(feature = "mimalloc")]
pub mod alloc;
pub mod budget;
pub mod codegen;
pub mod cost;
pub mod cpu;
pub mod cuda;
pub mod diag;
pub mod dsl;
pub mod dtype;
pub mod dump;
pub mod eval;
pub mod extract;
pub mod fuzz_target;
pub mod index;
pub mod ir;
pub mod lower;
pub mod mapped;
pub mod npy;
pub mod onnx;
pub mod optimize;
pub mod pipeline;
pub mod plan;
pub mod poly;
pub mod rules;
pub mod run;
pub mod shapes;
pub mod synth;
pub mod target;
pub mod tensor;
pub mod timing;
pub mod viz;

pub use diag::{Diagnostic, Diagnostics};
