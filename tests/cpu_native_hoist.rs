//! An interchanged reduce whose factor does not depend on the vector loop computes that factor
//! in one SIMD pre-pass over the reduce axis (`src/cpu/emit_hoist.rs`): attention's `P·V` with
//! the softmax's exponential and normalization inlined into the reduce. The native program must
//! still match the reference (the same operations in the same order), and the pre-pass must
//! not be taken where the factor is a bare read or where the reduce axis is symbolic.

mod common;

use common::native::{check_graph, graph_notes};

/// Softmax over the last axis of `[3, 5, N]`, then `P·V` with `V: [3, N, 20]`.
const SOFTMAX_PV: &str = r#"{
  "signature": {"inputs": [{"tensor": "X"}, {"tensor": "V"}], "outputs": [{"tensor": "O"}]},
  "tensors": {
    "X": {"dtype": "fp32", "shape": [3, 5, NN]}, "V": {"dtype": "fp32", "shape": [3, NN, 20]},
    "P": {"dtype": "fp32", "shape": [3, 5, NN]}, "O": {"dtype": "fp32", "shape": [3, 5, 20]}
  },
  "graph": [
    {"op": "Softmax", "name": "sm", "inputs": ["X"], "outputs": ["P"], "attrs": {"axis": -1}},
    {"op": "MatMul", "name": "pv", "inputs": ["P", "V"], "outputs": ["O"], "attrs": {"acc_dtype": "fp32"}}
  ]
}"#;

const NOTE: &str = "SIMD pre-pass";

/// Whether any kernel `text` emits notes the pre-pass.
fn has_prepass(text: &str) -> bool {
    graph_notes(text).iter().any(|n| n.contains(NOTE))
}

#[test]
fn attention_pv_stages_its_softmax_factor_and_matches_the_reference() {
    // fewer than a vector, a vector tail (N = 1 folds the softmax away); at N = 130 the default
    // (GPU-priced) cover differs, the output must match all the same
    for n in [2, 7, 37, 130] {
        let g = SOFTMAX_PV.replace("NN", &n.to_string());
        assert!(n > 64 || has_prepass(&g), "N = {n}: no pre-pass");
        check_graph(&g, &[], &format!("softmax·V, N = {n}")).unwrap();
    }
}

#[test]
fn no_prepass_for_a_bare_read_or_a_symbolic_reduce_axis() {
    // P an input: the factor is a bare read, nothing to stage (a packed GEMM in any case)
    let bare = r#"{
      "signature": {"inputs": [{"tensor": "P"}, {"tensor": "V"}], "outputs": [{"tensor": "O"}]},
      "tensors": {
        "P": {"dtype": "fp32", "shape": [3, 5, 37]}, "V": {"dtype": "fp32", "shape": [3, 37, 20]},
        "O": {"dtype": "fp32", "shape": [3, 5, 20]}
      },
      "graph": [
        {"op": "MatMul", "name": "pv", "inputs": ["P", "V"], "outputs": ["O"], "attrs": {"acc_dtype": "fp32"}}
      ]
    }"#;
    assert!(!has_prepass(bare));
    check_graph(bare, &[], "P·V").unwrap();
    // the reduce axis symbolic: no stack array of unknown length
    let sym = SOFTMAX_PV
        .replace("\"tensors\"", "\"symbols\": {\"N\": 37},\n  \"tensors\"")
        .replace("NN", "\"N\"");
    assert!(!has_prepass(&sym));
    check_graph(&sym, &[("N", 37)], "softmax·V, symbolic N").unwrap();
}
