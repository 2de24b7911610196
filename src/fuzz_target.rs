//! The fuzz target of issue 19: one input of arbitrary bytes through the pipeline a user's file
//! takes (load → check → optimize → run), asserting the promise of the CLI: every failure is a
//! coded user diagnostic, never a panic or an internal error. `fuzz/` drives it with libFuzzer
//! (`cargo +nightly fuzz run pipeline`), `tests/robustness_fuzz.rs` with a seeded mutation loop
//! on stable (the CI smoke run).
//!
//! The first byte picks the format of the rest:
//!
//! | `data[0] % 3` | input | path |
//! | --- | --- | --- |
//! | 0 | graph.json text | load (small [`LoadBudgets`]) → lower + verify → target-size and memory checks → `optimize` → `run` (reference and optimized program, seeded random inputs) |
//! | 1 | `.npy` bytes | decode → convert to every dtype → encode → decode again (round trip) |
//! | 2 | egraph-serialize JSON | problem → fast extractor (and the exact one on small problems) → validation |
//!
//! Work per input is bounded so that a campaign keeps its pace: graphs beyond the fuzz budgets
//! ([`FUZZ_LOAD`], [`FUZZ_MAX_ELEMENTS`] elements per tensor, [`FUZZ_MAX_TINY_NODES`] Tiny IR
//! nodes) stop after the checks, as do `.npy` arrays over [`FUZZ_MAX_ELEMENTS`] elements and
//! e-graphs over [`FUZZ_MAX_ENODES`] e-nodes.

use crate::budget::{self, LoadBudgets, RunBudgets};
use crate::diag::{codes, Diagnostics};
use crate::extract::dag::{self, DagExtractor, ExtractOptions, Problem};
use crate::ir::dtype::DType;
use crate::ir::frontend;
use crate::run;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Load budgets of a fuzzed graph (small, so that one input stays fast).
pub const FUZZ_LOAD: LoadBudgets = LoadBudgets {
    max_file_bytes: 1 << 20,
    max_nodes: 12,
    max_concat_inputs: 8,
    max_rank: 6,
};
/// Largest tensor (elements) a fuzzed graph is optimized and run with, and a fuzzed `.npy` array
/// is converted with.
pub const FUZZ_MAX_ELEMENTS: u128 = 1 << 12;
/// Largest Tiny IR program a fuzzed graph is optimized with.
pub const FUZZ_MAX_TINY_NODES: usize = 64;
/// Largest e-graph (e-nodes) a fuzzed egraph-serialize document is extracted from.
pub const FUZZ_MAX_ENODES: usize = 4096;

/// How far an input got; every stage ends without an internal error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reached {
    /// Rejected with a coded user diagnostic (or not decodable as the format at all).
    Rejected,
    /// Accepted by the checks, not optimized (over the fuzz work budgets).
    Checked,
    /// Optimized (graphs), converted (`.npy`) or extracted (e-graphs).
    Processed,
    /// Optimized and run, the reference and the optimized program (graphs only).
    Ran,
}

/// Runs one input (see the module documentation). `Err` describes a broken promise: an internal
/// error where a user diagnostic or success was due. Panics are not caught here (the fuzzer
/// reports them as crashes).
pub fn fuzz_one(data: &[u8]) -> Result<Reached, String> {
    let Some((&mode, rest)) = data.split_first() else {
        return Ok(Reached::Rejected);
    };
    match mode % 3 {
        0 => graph_input(rest),
        1 => npy_input(rest),
        _ => egraph_input(rest),
    }
}

fn internal(stage: &str, d: &Diagnostics) -> String {
    format!("{stage}: internal error on an accepted input:\n{d}")
}

fn graph_input(bytes: &[u8]) -> Result<Reached, String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(Reached::Rejected);
    };
    // Constants files are looked up in a folder that does not exist: fuzzing reads no file.
    let base = Path::new("/nonexistent/dlc-egg-fuzz");
    let Ok(graph) = frontend::load_str_in(text, "fuzz.json", base) else {
        return Ok(Reached::Rejected);
    };
    if budget::check_load(&graph, &FUZZ_LOAD).is_err() {
        return Ok(Reached::Rejected);
    }
    let prog = match crate::pipeline::lower_and_verify(&graph) {
        Ok(p) => p,
        Err(f) if f.internal => return Err(internal("lower", &f.diagnostics)),
        Err(_) => return Ok(Reached::Rejected),
    };
    let defaults = |s: &str| graph.symbols.get(s).copied();
    if run::check_device_memory(&graph).is_err()
        || budget::check_target_sizes(&graph, &defaults).is_err()
    {
        return Ok(Reached::Rejected);
    }
    let small = graph
        .tensors
        .values()
        .all(|t| budget::elements(&t.shape, &defaults).is_some_and(|n| n <= FUZZ_MAX_ELEMENTS));
    if !small || prog.nodes.len() > FUZZ_MAX_TINY_NODES {
        return Ok(Reached::Checked);
    }
    let opts = crate::optimize::OptimizeOptions::default();
    let o = crate::optimize::optimize(&prog, &opts)
        .map_err(|e| format!("optimize: internal error on an accepted graph: {e}"))?;
    if budget::check_axis_extents(&graph, &defaults).is_err() {
        return Ok(Reached::Processed); // `run --optimized` refuses it (E1408)
    }
    let budgets = RunBudgets {
        max_tensor_bytes: 1 << 20,
        max_memory: 1 << 24,
        max_file_bytes: 0,
    };
    let prepared = match run::prepare_inputs_budgeted(
        &graph,
        Some(&prog),
        &[],
        &BTreeMap::new(),
        Some(7),
        &budgets,
    ) {
        Ok(p) => p,
        Err(f) if f.internal => return Err(internal("prepare inputs", &f.diagnostics)),
        Err(_) => return Ok(Reached::Processed),
    };
    let reference = crate::eval::evaluate(&prog, &prepared.bindings, &prepared.tensors);
    let optimized = crate::ir::region::program::evaluate_program(
        &o.program,
        &prepared.bindings,
        &prepared.tensors,
    );
    match (reference, optimized) {
        (Ok(r), Ok(_)) => {
            run::check_outputs(&graph, &r, &prepared.bindings)
                .map_err(|f| internal("reference outputs", &f.diagnostics))?;
            Ok(Reached::Ran)
        }
        // A user error of the reference (an index out of range) may show as any error of the
        // optimized program: `run --optimized` reports the reference's.
        (Err(r), _) if r.0.iter().all(|d| codes::is_eval_user_error(d.code)) => {
            Ok(Reached::Processed)
        }
        (Err(r), _) => Err(internal("reference evaluator", &r)),
        (Ok(_), Err(e)) => Err(internal("optimized program", &e)),
    }
}

fn npy_input(bytes: &[u8]) -> Result<Reached, String> {
    let Ok(array) = crate::npy::parse_array(bytes, "fuzz.npy") else {
        return Ok(Reached::Rejected);
    };
    let n: u128 = array.shape.iter().map(|&d| d as u128).product();
    if n > FUZZ_MAX_ELEMENTS {
        return Ok(Reached::Checked);
    }
    let mut any = false;
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool] {
        let Ok(t) = crate::npy::to_tensor(array.clone(), "T", dtype) else {
            continue;
        };
        any = true;
        let encoded = crate::npy::encode_tensor(&t)
            .map_err(|e| format!("npy: cannot encode a decoded {dtype} array: {e}"))?;
        let back = crate::npy::parse_array(&encoded, "encoded.npy")
            .map_err(|d| format!("npy: cannot decode what was encoded: {d}"))?;
        if back.shape != t.shape {
            return Err(format!(
                "npy: round trip changed the shape {:?} to {:?}",
                t.shape, back.shape
            ));
        }
    }
    Ok(if any {
        Reached::Processed
    } else {
        Reached::Rejected
    })
}

fn egraph_input(bytes: &[u8]) -> Result<Reached, String> {
    let Ok(g) = serde_json::from_slice::<egraph_serialize::EGraph>(bytes) else {
        return Ok(Reached::Rejected);
    };
    let Ok(p) = Problem::from_serialized(&g) else {
        return Ok(Reached::Rejected);
    };
    if p.num_nodes() > FUZZ_MAX_ENODES {
        return Ok(Reached::Checked);
    }
    let fast = dag::FastExtractor::default().extract(&p, &ExtractOptions::default());
    let Ok(e) = fast else {
        return Ok(Reached::Processed); // no finite acyclic term: a coded diagnostic in the CLI
    };
    let fast_cost =
        dag::dag_cost(&p, &e).map_err(|v| format!("fast extractor: invalid extraction: {v}"))?;
    if p.num_nodes() <= 64 {
        let opts = ExtractOptions {
            time_limit: Some(Duration::from_millis(200)),
        };
        let exact = dag::ExactExtractor::default()
            .extract(&p, &opts)
            .map_err(|err| format!("exact extractor fails where fast succeeds: {err}"))?;
        let exact_cost = dag::dag_cost(&p, &exact)
            .map_err(|v| format!("exact extractor: invalid extraction: {v}"))?;
        if exact_cost > fast_cost * (1.0 + 1e-9) + 1e-9 {
            return Err(format!(
                "exact extractor ({exact_cost}) is worse than its warm start ({fast_cost})"
            ));
        }
    }
    Ok(Reached::Processed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_is_reached() {
        assert_eq!(fuzz_one(b""), Ok(Reached::Rejected));
        assert_eq!(fuzz_one(b"\x00{"), Ok(Reached::Rejected));
        let npy = crate::npy::encode_tensor(&crate::tensor::Tensor {
            dtype: DType::F32,
            shape: vec![2],
            data: crate::tensor::TensorData::F32(vec![1.0, 2.0]),
        })
        .expect("encode");
        let mut input = vec![1u8];
        input.extend(npy);
        assert_eq!(fuzz_one(&input), Ok(Reached::Processed));
        let eg = br#"{"nodes": {"a": {"op": "x", "children": [], "eclass": "c", "cost": 1.0}}, "root_eclasses": ["c"]}"#;
        let mut input = vec![2u8];
        input.extend_from_slice(eg);
        assert_eq!(fuzz_one(&input), Ok(Reached::Processed));
    }
}
