//! Minimized failures of `optimize_fuzz`: small valid documents whose optimized program
//! (`optimize` with the default options, played back by `evaluate_program`) must compute what the
//! reference evaluator computes.

mod common;

use common::{names, one_op, rand_tensor};
use dlc_egg::eval::evaluate;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend::{load_str, resolve_symbols};
use dlc_egg::ir::lower::lower;
use dlc_egg::ir::region::program::evaluate_program;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::tensor::Tensor;
use serde_json::json;
use std::collections::BTreeMap;

/// load → bind (from the arrays) → lower → reference evaluation, then optimize → play back; every
/// output must match (same dtype and shape; exact for i32/bool, graph-json's tolerances for
/// floats, non-finite values exactly).
fn check_optimized(doc: &str, inputs: Vec<(&str, Tensor)>) {
    let g = load_str(doc, "test.json").unwrap_or_else(|d| panic!("{d}"));
    let arrays: BTreeMap<String, Vec<usize>> = inputs
        .iter()
        .map(|(n, t)| (n.to_string(), t.shape.clone()))
        .collect();
    let bindings = resolve_symbols(&g, &BTreeMap::new(), &arrays).unwrap_or_else(|d| panic!("{d}"));
    let prog = lower(&g).unwrap_or_else(|d| panic!("{d}"));
    let ins: BTreeMap<String, Tensor> = inputs
        .into_iter()
        .map(|(n, t)| (n.to_string(), t))
        .collect();
    let want = evaluate(&prog, &bindings, &ins).unwrap_or_else(|d| panic!("reference: {d}"));
    let o = optimize(&prog, &OptimizeOptions::default())
        .unwrap_or_else(|e| panic!("optimize fails: {e}\n{doc}"));
    let got = evaluate_program(&o.program, &bindings, &ins)
        .unwrap_or_else(|d| panic!("the optimized program fails: {d}\n{doc}"));
    for (name, w) in &want {
        let t = got
            .get(name)
            .unwrap_or_else(|| panic!("output {name} missing"));
        assert_eq!(
            (t.dtype, &t.shape),
            (w.dtype, &w.shape),
            "output {name}: dtype/shape"
        );
        let tol = match w.dtype {
            DType::F32 => 1e-3,
            DType::F16 | DType::BF16 => 1e-2,
            _ => 0.0,
        };
        let (g, wv) = (t.to_f64(), w.to_f64());
        for (k, (a, b)) in g.iter().zip(&wv).enumerate() {
            let ok = if b.is_finite() {
                (a - b).abs() <= tol + tol * b.abs()
            } else {
                a == b || (a.is_nan() && b.is_nan())
            };
            assert!(
                ok,
                "output {name}: element {k} is {a}, the reference says {b}\n  got  {g:?}\n  want {wv:?}"
            );
        }
    }
}

fn i32_tensor(shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_f64(DType::I32, shape.to_vec(), v)
}

// ---------------------------------------------------------------------------------------------
// Empty iteration domains: a kernel whose output has a zero-size axis.

/// A Slice whose start is past the end gives `[4, 0]`; its copy kernel must not be rejected for
/// reads "outside" the source when no element is read at all.
#[test]
fn slice_to_empty_optimizes() {
    let doc = one_op(
        "Slice",
        json!({"starts": [4], "ends": [i64::MAX], "axes": [1]}),
        &[("X", "fp16", vec![4, 3])],
        names(&["X"]),
    );
    check_optimized(&doc, vec![("X", rand_tensor(1, DType::F16, &[4, 3]))]);
}

/// Expand of a tensor with a zero-size axis.
#[test]
fn expand_of_empty_optimizes() {
    let doc = one_op(
        "Expand",
        json!({"shape": [3, 3, 0]}),
        &[("X", "bool", vec![3, 0])],
        names(&["X"]),
    );
    check_optimized(&doc, vec![("X", rand_tensor(2, DType::Bool, &[3, 0]))]);
}

/// A symbol bound to 0 at run time: the program verifies symbolically, and playing it back with
/// `T = 0` must not report an unguarded read.
#[test]
fn softmax_with_symbol_bound_to_zero() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {
            "X": {"dtype": "fp32", "shape": ["T", 3]},
            "Y": {"dtype": "fp32", "shape": ["T", 3]}
        },
        "graph": [{"op": "Softmax", "name": "n", "inputs": ["X"], "outputs": ["Y"]}]
    });
    check_optimized(
        &doc.to_string(),
        vec![("X", rand_tensor(3, DType::F32, &[0, 3]))],
    );
}

// ---------------------------------------------------------------------------------------------
// Slices clamped against a symbolic size.

/// `starts: [1000]` on an axis of size `S` gives the start `min(1000, S)`: the copy kernel must be
/// writable as a region (the slice is summed: its size cannot be declared).
#[test]
fn slice_with_clamped_start_on_symbolic_axis() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {
            "X": {"dtype": "i32", "shape": ["S"]},
            "Y": {"dtype": "i32", "shape": []}
        },
        "graph": [{"op": "Slice", "name": "n", "inputs": ["X"], "outputs": ["A"],
                   "attrs": {"starts": [1000], "ends": [i64::MAX], "axes": [0]}},
                  {"op": "Reduce", "name": "r", "inputs": ["A"], "outputs": ["Y"],
                   "attrs": {"fn": "sum", "axes": [0]}}]
    });
    check_optimized(
        &doc.to_string(),
        vec![("X", i32_tensor(&[4], &[1.0, 2.0, 3.0, 4.0]))],
    );
}

/// `starts: [3]` on an axis of size `S = 2` (the start `min(3, S)`).
#[test]
fn slice_with_small_clamped_start_on_symbolic_axis() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {
            "X": {"dtype": "fp32", "shape": ["S", 4]},
            "Y": {"dtype": "fp32", "shape": [4]}
        },
        "graph": [{"op": "Slice", "name": "n", "inputs": ["X"], "outputs": ["A"],
                   "attrs": {"starts": [3], "ends": [0], "axes": [0]}},
                  {"op": "Reduce", "name": "r", "inputs": ["A"], "outputs": ["Y"],
                   "attrs": {"fn": "sum", "axes": [0]}}]
    });
    check_optimized(
        &doc.to_string(),
        vec![("X", rand_tensor(4, DType::F32, &[2, 4]))],
    );
}

// ---------------------------------------------------------------------------------------------
// i32 values beyond fp32's exact range.

/// Concat moves i32 values unchanged (`i32::MAX` included).
#[test]
fn concat_keeps_i32_max() {
    let doc = one_op(
        "Concat",
        json!({"axis": 0}),
        &[("A", "i32", vec![1]), ("B", "i32", vec![2])],
        names(&["A", "B"]),
    );
    check_optimized(
        &doc,
        vec![
            ("A", i32_tensor(&[1], &[i32::MAX as f64])),
            ("B", i32_tensor(&[2], &[i32::MIN as f64, 16_777_217.0])),
        ],
    );
}

/// An exclusive cumulative min over i32 starts from the identity `i32::MAX`.
#[test]
fn exclusive_cumulative_min_i32_identity() {
    let doc = one_op(
        "Cumulative",
        json!({"fn": "min", "axis": 0, "exclusive": true}),
        &[("X", "i32", vec![3])],
        names(&["X"]),
    );
    check_optimized(&doc, vec![("X", i32_tensor(&[3], &[5.0, -2.0, 7.0]))]);
}

/// i32 multiplication by a scalar is exact (`-1 · i32::MAX`).
#[test]
fn i32_mul_by_scalar_is_exact() {
    let doc = one_op(
        "Elementwise",
        json!({"fn": "mul"}),
        &[("X", "i32", vec![2])],
        vec![json!(-1.0), json!("X")],
    );
    check_optimized(
        &doc,
        vec![("X", i32_tensor(&[2], &[i32::MAX as f64, 16_777_217.0]))],
    );
}

// ---------------------------------------------------------------------------------------------
// Other classes.

/// A Cast to bf16 feeding a cumulative product: the output must have a finite-cost kernel cover.
#[test]
fn cast_then_cumulative_prod_has_a_cover() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {"X": {"dtype": "fp16", "shape": [1, 1]}, "Y": {"dtype": "bf16", "shape": [1, 1]}},
        "graph": [{"op": "Cast", "name": "c", "inputs": ["X"], "outputs": ["A"], "attrs": {"to": "bf16"}},
                  {"op": "Cumulative", "name": "n", "inputs": ["A"], "outputs": ["Y"], "attrs": {"fn": "prod", "axis": 0}}]
    });
    check_optimized(
        &doc.to_string(),
        vec![("X", rand_tensor(5, DType::F16, &[1, 1]))],
    );
}

/// ConvTranspose (stride 3, dilation 2, groups 2) over an input whose height is the symbol `S`
/// (bound to 1), summed over the height: the played-back program must pass its bounds check.
#[test]
fn conv_transpose_over_symbolic_spatial_size() {
    let doc = r#"{"signature":{"inputs":[{"tensor":"in0"},{"tensor":"in2"}],"outputs":[{"tensor":"t2"}]},"tensors":{"in0":{"dtype":"fp32","shape":[1,4,"S",2]},"in2":{"dtype":"fp32","shape":[4,1,3,1]},"t2":{"dtype":"fp32","shape":[1,2,1,6]}},"graph":[{"op":"Reduce","name":"n2","inputs":["t1"],"outputs":["t2"],"attrs":{"fn":"sum","axes":[2],"keepdim":true}},{"op":"ConvTranspose","name":"n1","inputs":["in0","in2"],"outputs":["t1"],"attrs":{"stride":[3,3],"dilation":[1,2],"output_padding":[2,2],"groups":2}}]}"#;
    check_optimized(
        doc,
        vec![
            ("in0", rand_tensor(1, DType::F32, &[1, 4, 1, 2])),
            ("in2", rand_tensor(3, DType::F32, &[4, 1, 3, 1])),
        ],
    );
}

/// Cumulative min over bool starts from `true`.
#[test]
fn cumulative_min_over_bool() {
    let doc = one_op(
        "Cumulative",
        json!({"fn": "min", "axis": 0}),
        &[("X", "bool", vec![4])],
        names(&["X"]),
    );
    check_optimized(
        &doc,
        vec![(
            "X",
            Tensor::from_f64(DType::Bool, vec![4], &[1.0, 0.0, 1.0, 1.0]),
        )],
    );
}
