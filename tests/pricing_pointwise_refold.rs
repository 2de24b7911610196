//! What the cost model prices is what codegen emits (issue 15): the pointwise template folds every
//! reduction at every output point that reads it — nothing is shared between threads. A GEMM
//! with bias, residual and the LayerNorm's mean subtraction fused into one pointwise kernel folds
//! the mean `Σ_n Σ_k A[m,k]·W[k,n]` (a whole GEMM row) at every element; the model priced it once
//! per row, chose that cover for a BERT-base layer, and the kernel ran ~740× slower than priced on
//! an H200 (bench/results/gpu-h200-2026-11-28). Priced as emitted, the cover is the GEMM with its
//! epilogue and the LayerNorm's row kernel.

mod common;

use common::host::{kernel_templates, optimized_for};
use serde_json::json;

/// `Y = LayerNorm(A·W + b + X)`, fp32, `[128, d]` activations, a `[d, d]` weight.
fn gemm_residual_layernorm(d: u32) -> String {
    let act = json!({"dtype": "fp32", "shape": [128, d]});
    let vec = json!({"dtype": "fp32", "shape": [d]});
    let param = |t: &str| json!({"tensor": t, "role": "param", "storage": "const_pool"});
    json!({
        "signature": {
            "inputs": [{"tensor": "A"}, {"tensor": "X"}, param("W"), param("b"), param("gamma"),
                       param("beta")],
            "outputs": [{"tensor": "Y"}]
        },
        "tensors": {"A": act, "X": act, "H": act, "Hb": act, "Hr": act, "Y": act,
                    "W": {"dtype": "fp32", "shape": [d, d]}, "b": vec, "gamma": vec, "beta": vec},
        "graph": [
            {"op": "MatMul", "name": "mm", "inputs": ["A", "W"], "outputs": ["H"], "attrs": {}},
            {"op": "Elementwise", "name": "bias", "inputs": ["H", "b"], "outputs": ["Hb"],
             "attrs": {"fn": "add"}},
            {"op": "Elementwise", "name": "res", "inputs": ["Hb", "X"], "outputs": ["Hr"],
             "attrs": {"fn": "add"}},
            {"op": "LayerNorm", "name": "ln", "inputs": ["Hr", "gamma", "beta"], "outputs": ["Y"],
             "attrs": {"axis": -1, "eps": 1e-12}}
        ]
    })
    .to_string()
}

#[test]
fn a_gemm_is_not_refolded_per_element_under_a_layernorm() {
    for arch in [dlc_egg::target::Arch::Sm90, dlc_egg::target::Arch::Sm80] {
        let (_, o) = optimized_for(&gemm_residual_layernorm(768), arch);
        let kernels = kernel_templates(&o);
        let gemm: Vec<_> = kernels
            .iter()
            .filter(|(_, _, covers)| covers.iter().any(|c| c == "mm"))
            .collect();
        assert_eq!(
            gemm.len(),
            1,
            "{arch:?}: the MatMul in one kernel: {kernels:?}"
        );
        assert_eq!(
            gemm[0].1, "contraction",
            "{arch:?}: the MatMul runs on a contraction template, not folded per element: {kernels:?}"
        );
        assert!(
            kernels
                .iter()
                .any(|(_, t, covers)| *t == "reduction" && covers.iter().any(|c| c == "ln")),
            "{arch:?}: the LayerNorm's row kernel: {kernels:?}"
        );
    }
}
