//! Helpers of the frontend inference tests: one-node documents and accessors of the loaded graph.

use super::probe_doc;
use dlc_egg::ir::dim::fmt_shape;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend::{load_str, Graph, Op};
use serde_json::{json, Value};

/// A document whose inputs are the given tensors and whose nodes are `nodes` (outputs inferred).
pub fn doc_with(inputs: &[(&str, &str, Value)], nodes: Value) -> String {
    probe_doc(inputs, nodes).to_string()
}

/// Loads a one-node document; panics with the diagnostics if it is rejected.
pub fn load(inputs: &[(&str, &str, Value)], node: Value) -> Graph {
    let text = doc_with(inputs, json!([node]));
    load_str(&text, "test.json").unwrap_or_else(|d| panic!("{d}\n{text}"))
}

/// A node named `n` with output `Y`.
pub fn node(op: &str, ins: Value, attrs: Value) -> Value {
    json!({"op": op, "name": "n", "inputs": ins, "outputs": ["Y"], "attrs": attrs})
}

/// A tensor's shape as printed (`[M, 64]`).
pub fn shape(g: &Graph, t: &str) -> String {
    fmt_shape(&g.tensor(t).expect("tensor").shape)
}

pub fn dtype(g: &Graph, t: &str) -> DType {
    g.tensor(t).expect("tensor").dtype
}

/// The op of the first node, in normal form.
pub fn op(g: &Graph) -> &Op {
    &g.nodes[0].op
}
