//! How every command reads its graph file: graph.json, a `.graph` DSL program or an ONNX model,
//! within the load budgets its flags set.

use dlc_egg::ir::frontend::Graph;
use dlc_egg::run::Failure;

/// How the graph file of a command is read: graph.json, or a `.graph` DSL program.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct GraphInputArgs {
    /// For `.graph` programs: the deepest nesting of subgraph calls inlined (`main` is depth 0);
    /// deeper calls (endless recursion) are E0707.
    #[arg(long, value_name = "N", default_value_t = dlc_egg::dsl::DEFAULT_MAX_DEPTH)]
    pub max_depth: usize,

    /// Budget: the largest graph file (and `.npy` input of `run`) read, in bytes (suffixes K, M,
    /// G, T); a larger file is E1400 before it is read whole.
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = dlc_egg::budget::parse_bytes)]
    pub max_file_bytes: u64,

    /// Budget: the most nodes a graph may have (E1401 above it).
    #[arg(long, value_name = "N", default_value_t = dlc_egg::budget::LoadBudgets::default().max_nodes)]
    pub max_nodes: usize,

    /// Budget: the most inputs one Concat may have (E1402 above it).
    #[arg(long, value_name = "N", default_value_t = dlc_egg::budget::LoadBudgets::default().max_concat_inputs)]
    pub max_concat_inputs: usize,

    /// Budget: the largest rank of a tensor (E1403 above it).
    #[arg(long, value_name = "N", default_value_t = dlc_egg::budget::LoadBudgets::default().max_rank)]
    pub max_rank: usize,
}

impl GraphInputArgs {
    /// The load budgets these flags set.
    pub fn budgets(&self) -> dlc_egg::budget::LoadBudgets {
        dlc_egg::budget::LoadBudgets {
            max_file_bytes: self.max_file_bytes,
            max_nodes: self.max_nodes,
            max_concat_inputs: self.max_concat_inputs,
            max_rank: self.max_rank,
        }
    }

    /// Loads `path`: `.graph` as the DSL (seed 004), `.onnx` as ONNX, anything else as
    /// graph.json; the file is read within `--max-file-bytes` and the graph checked against the
    /// node, Concat and rank budgets (`dlc_egg::budget`).
    pub fn load(&self, path: &std::path::Path) -> Result<Graph, Failure> {
        let opts = dlc_egg::pipeline::LoadOptions {
            budgets: self.budgets(),
            dsl: dlc_egg::dsl::Options {
                max_depth: self.max_depth,
            },
        };
        dlc_egg::pipeline::load_with(path, &opts)
    }
}
