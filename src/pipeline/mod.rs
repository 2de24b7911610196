//! The compiler's entry points wired in one place (issue 20, item 3): the module the CLI, `run`
//! and library users call, so no lower layer has to know every input format.
//!
//! It holds loading, lowering and the optimizer's entry for a graph:
//! - [`load_file`] / [`load_with`] read a model file of any supported format. The layers below
//!   each read one format only — [`crate::ir::frontend`] graph.json, [`crate::dsl`] the `.graph`
//!   DSL, [`crate::onnx`] ONNX models — and none of them imports another's loader.
//! - [`lower_and_verify`] lowers a graph to Tiny IR and runs its verifier (`dlc-egg optimize`,
//!   `run`, the ShapeSets' specializations and the fuzz target all take this one step).
//! - [`optimize_graph`] optimizes a lowered graph with the weights it binds at load time taken
//!   as constants (the CLI's `optimize`, the ShapeSets' clusters and so `run`'s compiled
//!   programs).
//!
//! - [`execute`] compiles a graph through the plan cache for what runs it ([`Executor`]: the
//!   GPU, native C on the CPU, the region program played back, or the reference evaluator),
//!   binds the derived constants and runs it (`dlc-egg run`, library users); [`cuda`] holds its
//!   GPU steps and their diagnostics.
//!
//! The composed steps live with the layer they compose — [`crate::lower::lower_and_verify`],
//! [`crate::optimize::optimize_graph`] — so that the ShapeSets' plan cache, which this module
//! calls, can call them without a dependency cycle; they are re-exported here.

// Diagnostics travel on the cold error path only; boxing them would buy nothing.
#![allow(clippy::result_large_err)]

use crate::budget::LoadBudgets;
use crate::diag::{Diagnostic, Diagnostics, Failure};
use crate::ir::frontend::{self, Graph};
use std::path::Path;

pub mod cuda;
mod execute;
pub use cuda::{
    check_cuda, check_device_memory, cuda_failure, evaluate_cuda, evaluate_cuda_plan, plan_and_emit,
};
pub use execute::{
    bind_derived, evaluate_optimized, execute, ExecuteOptions, Executed, Executor, PreparedInputs,
};

/// The input formats [`load_file`] recognizes, by file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `graph.json` (`graph-json.md`): any extension the others do not claim.
    GraphJson,
    /// An ONNX model (`.onnx`, with its external-data files beside it).
    Onnx,
    /// A program of the `.graph` DSL (seed 004).
    Dsl,
}

impl Format {
    /// The format a path names, by its extension (case-insensitive for `.onnx`).
    pub fn of(path: &Path) -> Format {
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
        {
            Format::Onnx
        } else if crate::dsl::is_dsl_path(path) {
            Format::Dsl
        } else {
            Format::GraphJson
        }
    }
}

/// Loads a model file: `graph.json`, an ONNX model (`.onnx`, imported by [`crate::onnx`]) or a
/// `.graph` DSL program (default [`crate::dsl::Options`]).
///
/// ```
/// let g = dlc_egg::pipeline::load_file("examples/bias_gelu_residual.json".as_ref()).unwrap();
/// assert!(!g.signature.outputs.is_empty());
/// ```
pub fn load_file(path: &Path) -> Result<Graph, Diagnostics> {
    match Format::of(path) {
        Format::Onnx => crate::onnx::load(path),
        Format::Dsl => crate::dsl::load_path(path, crate::dsl::Options::default()),
        Format::GraphJson => frontend::load_file(path),
    }
}

/// How [`load_with`] reads a model file: the load budgets and the DSL's options (the CLI's
/// `--max-file-bytes`, `--max-nodes`, `--max-concat-inputs`, `--max-rank`, `--max-depth`).
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadOptions {
    /// File size, node count, Concat fan-in and rank limits ([`crate::budget`]).
    pub budgets: LoadBudgets,
    /// Options of the `.graph` DSL (subgraph call depth).
    pub dsl: crate::dsl::Options,
}

/// Loads a model file of any format like [`load_file`], within `opts`' budgets: the file (and an
/// ONNX model's external data) is read within `max_file_bytes`, and the loaded graph is checked
/// against the node, Concat and rank budgets. What every command of the CLI does.
pub fn load_with(path: &Path, opts: &LoadOptions) -> Result<Graph, Failure> {
    let budgets = opts.budgets;
    // Mapped, not read: an ONNX model's weights (435 MB for a BERT-base export) are slices of
    // the map, decoded only when a value is asked for (`run`), never by `optimize`.
    let bytes = crate::budget::map_file_limited(path, budgets.max_file_bytes)?;
    let graph = match Format::of(path) {
        Format::Onnx => {
            crate::budget::set_external_data_budget(budgets.max_file_bytes);
            crate::onnx::load_shared(bytes, path)?
        }
        format => {
            let file = path.display().to_string();
            let text = std::str::from_utf8(&bytes).map_err(|e| {
                Diagnostic::unreadable_input(
                    path,
                    format!("cannot read the file: it is not UTF-8 text ({e})"),
                )
            })?;
            if format == Format::Dsl {
                crate::dsl::load_str(text, &file, opts.dsl)?
            } else {
                let base = path.parent().unwrap_or(Path::new(""));
                frontend::load_str_in(text, &file, base)?
            }
        }
    };
    crate::budget::check_load(&graph, &budgets).map_err(|d| Failure::user(Diagnostics(d)))?;
    Ok(graph)
}

pub use crate::lower::lower_and_verify;
pub use crate::optimize::optimize_graph;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_extension() {
        assert_eq!(Format::of(Path::new("m.onnx")), Format::Onnx);
        assert_eq!(Format::of(Path::new("m.ONNX")), Format::Onnx);
        assert_eq!(Format::of(Path::new("m.graph")), Format::Dsl);
        assert_eq!(Format::of(Path::new("m.json")), Format::GraphJson);
        assert_eq!(Format::of(Path::new("m")), Format::GraphJson);
    }

    #[test]
    fn the_graph_json_loader_points_onnx_models_here() {
        let err = frontend::load_file(Path::new("model.onnx")).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("pipeline::load_file"), "{text}");
    }
}
