//! A LayerNorm after a projection inside an encoder, `LN(LN0(z)·W + b + LN0(z))`, is one kernel
//! over the materialized residual sum (issue 23): the mean's class also has SRNF's distributed
//! spelling `Σ(h) + Σ(b) + Σ(r)`, and growth that took that spelling left the LayerNorm over `x`
//! out of the e-graph (three kernels: the GEMM, a lone row sum, the rest). Rank 2 (`[S, 64]`) and
//! rank 3 (`[2, S, 64]`); the optimized program computes what the reference evaluator computes.

mod common;

use common::{compare_output, rand_tensor};
use dlc_egg::eval::evaluate;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend::{load_str, resolve_symbols};
use dlc_egg::ir::region::program::evaluate_program;
use dlc_egg::lower::lower;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::tensor::Tensor;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The graph `Y = LN(LN0(Z)·W + b + LN0(Z))` with activations of shape `rows ++ [64]`.
fn ln_after_projection(rows: &[Value]) -> String {
    let act = |v: &[Value]| {
        let mut s = v.to_vec();
        s.push(json!(64));
        json!({"dtype": "fp32", "shape": s})
    };
    let vec64 = json!({"dtype": "fp32", "shape": [64]});
    let param = |t: &str| json!({"tensor": t, "role": "param", "storage": "const_pool"});
    json!({
        "signature": {
            "inputs": [{"tensor": "Z"}, param("W"), param("b"), param("g0"), param("b0"),
                       param("gamma"), param("beta")],
            "outputs": [{"tensor": "Y"}]
        },
        "symbols": {"S": 128},
        "tensors": {
            "Z": act(rows), "R": act(rows), "H": act(rows), "Hb": act(rows), "Hr": act(rows),
            "Y": act(rows), "W": {"dtype": "fp32", "shape": [64, 64]}, "b": vec64,
            "g0": vec64, "b0": vec64, "gamma": vec64, "beta": vec64
        },
        "graph": [
            {"op": "LayerNorm", "name": "ln0", "inputs": ["Z", "g0", "b0"], "outputs": ["R"],
             "attrs": {"axis": -1, "eps": 1e-05}},
            {"op": "MatMul", "name": "mm", "inputs": ["R", "W"], "outputs": ["H"], "attrs": {}},
            {"op": "Elementwise", "name": "bias", "inputs": ["H", "b"], "outputs": ["Hb"],
             "attrs": {"fn": "add"}},
            {"op": "Elementwise", "name": "res", "inputs": ["Hb", "R"], "outputs": ["Hr"],
             "attrs": {"fn": "add"}},
            {"op": "LayerNorm", "name": "ln", "inputs": ["Hr", "gamma", "beta"], "outputs": ["Y"],
             "attrs": {"axis": -1, "eps": 1e-05}}
        ]
    })
    .to_string()
}

/// Optimizes the graph: two kernels (the GEMM with its prologue and epilogues, the LayerNorm),
/// the LayerNorm `ln` in exactly one; then plays the program back on `z_shape` inputs against
/// the reference evaluator.
fn check(rows: &[Value], z_shape: &[usize]) {
    let doc = ln_after_projection(rows);
    let g = load_str(&doc, "ln.json").unwrap_or_else(|d| panic!("{d}"));
    let prog = lower(&g).unwrap_or_else(|d| panic!("{d}"));
    let o = optimize(&prog, &OptimizeOptions::default()).expect("optimizes");
    let covers: Vec<(&str, &Vec<String>)> = o
        .kernels
        .iter()
        .map(|k| (k.name.as_str(), &k.covers))
        .collect();
    let ln = o
        .kernels
        .iter()
        .filter(|k| k.covers.iter().any(|c| c == "ln"))
        .count();
    assert_eq!(ln, 1, "the LayerNorm spreads over {ln} kernels: {covers:?}");
    assert_eq!(o.kernels.len(), 2, "{covers:?}");

    let v64 = |seed| rand_tensor(seed, DType::F32, &[64]);
    let inputs: BTreeMap<String, Tensor> = [
        ("Z", rand_tensor(1, DType::F32, z_shape)),
        ("W", rand_tensor(2, DType::F32, &[64, 64])),
        ("b", v64(3)),
        ("g0", v64(4)),
        ("b0", v64(5)),
        ("gamma", v64(6)),
        ("beta", v64(7)),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_string(), t))
    .collect();
    let arrays = inputs
        .iter()
        .map(|(n, t)| (n.clone(), t.shape.clone()))
        .collect();
    let bindings = resolve_symbols(&g, &BTreeMap::new(), &arrays).unwrap_or_else(|d| panic!("{d}"));
    let want = evaluate(&prog, &bindings, &inputs).unwrap_or_else(|d| panic!("reference: {d}"));
    let got = evaluate_program(&o.program, &bindings, &inputs)
        .unwrap_or_else(|d| panic!("the optimized program fails: {d}"));
    compare_output("Y", &got["Y"], &want["Y"], "the reference").unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn layernorm_after_a_projection_is_one_kernel() {
    check(&[json!("S")], &[16, 64]);
}

#[test]
fn layernorm_after_a_batched_projection_is_one_kernel() {
    check(&[json!(2), json!("S")], &[2, 16, 64]);
}
