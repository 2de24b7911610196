//! Minimized failures of `optimize_fuzz`: small valid documents whose optimized program
//! (`optimize` with the default options, played back by `evaluate_program`) must compute what the
//! reference evaluator computes.

mod common;

use common::{compare_output, names, one_op, rand_tensor};
use dlc_egg::eval::evaluate;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend::{load_str, resolve_symbols};
use dlc_egg::ir::region::program::evaluate_program;
use dlc_egg::lower::lower;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::tensor::Tensor;
use serde_json::json;
use std::collections::BTreeMap;

/// load → bind (from the arrays) → lower → reference evaluation, then optimize → play back; every
/// output must match (same dtype and shape; exact for i32/bool, graph-json's tolerances for
/// floats, non-finite values exactly).
fn check_optimized(doc: &str, inputs: Vec<(&str, Tensor)>) {
    let (want, got) = reference_and_optimized(doc, inputs);
    for (name, w) in &want {
        let t = got
            .get(name)
            .unwrap_or_else(|| panic!("output {name} missing"));
        if let Err(why) = compare_output(name, t, w, "the reference") {
            panic!("{why}");
        }
    }
}

type Outputs = BTreeMap<String, Tensor>;

/// The reference evaluator's outputs and the optimized program's.
fn reference_and_optimized(doc: &str, inputs: Vec<(&str, Tensor)>) -> (Outputs, Outputs) {
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
    (want, got)
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

/// A Pad that crops more than the axis holds and pads the rest: every output element is the fill,
/// and the read under the never-true guard must not be rejected (found by `optimize_fuzz`).
#[test]
fn pad_whose_output_is_all_fill() {
    let doc = one_op(
        "Pad",
        json!({"pad": [[-5, 6]], "value": 1.5}),
        &[("X", "fp32", vec![4])],
        names(&["X"]),
    );
    check_optimized(&doc, vec![("X", rand_tensor(6, DType::F32, &[4]))]);
}

/// A strided slice to empty, then repeated: the read's index no longer mentions the empty axis
/// (it is the constant start), but the iteration space is empty (found by `optimize_fuzz`).
#[test]
fn repeat_of_an_empty_strided_slice() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {"X": {"dtype": "i32", "shape": [4, 2]}, "Y": {"dtype": "i32", "shape": [3, 3, 0]}},
        "graph": [{"op": "Slice", "name": "s", "inputs": ["X"], "outputs": ["A"],
                   "attrs": {"starts": [-1, 1000], "ends": [4, 1000], "axes": [0, -1], "steps": [3, 3]}},
                  {"op": "Repeat", "name": "r", "inputs": ["A"], "outputs": ["Y"],
                   "attrs": {"repeats": [3, 3, 3]}}]
    });
    check_optimized(
        &doc.to_string(),
        vec![(
            "X",
            i32_tensor(&[4, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]),
        )],
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

/// The sum of a softmax over a slice that is empty at run time (`T - min(1000, T)` = 0): the sum
/// is 0, but hoisting the normalization out of it (`Σ e/Z = (Σ e)/Z`) gives 0/0 = NaN, so the sum
/// hoists need a provably nonempty extent (found by `optimize_fuzz`).
#[test]
fn sum_of_a_softmax_over_an_empty_slice() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {
            "X": {"dtype": "fp32", "shape": ["T"]},
            "Y": {"dtype": "fp32", "shape": []}
        },
        "graph": [{"op": "Slice", "name": "s", "inputs": ["X"], "outputs": ["A"],
                   "attrs": {"starts": [1000], "ends": [9223372036854775807i64]}},
                  {"op": "Softmax", "name": "p", "inputs": ["A"], "outputs": ["P"], "attrs": {}},
                  {"op": "Reduce", "name": "r", "inputs": ["P"], "outputs": ["Y"],
                   "attrs": {"fn": "sum", "axes": [0], "keepdim": false}}]
    });
    check_optimized(
        &doc.to_string(),
        vec![("X", rand_tensor(5, DType::F32, &[1]))],
    );
}

/// A 1×1 convolution padded on the right of a symbolic width, reading a softmax over that
/// width: the padded column must not evaluate the softmax's reads outside the input (found by
/// `optimize_fuzz`).
#[test]
fn padded_conv_of_a_softmax_over_a_symbolic_width() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}, {"tensor": "W"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {
            "X": {"dtype": "fp16", "shape": [1, 2, 2, "T"]},
            "W": {"dtype": "fp16", "shape": [1, 2, 1, 1]},
            "Y": {"dtype": "fp16", "shape": [1, 1, 1]}
        },
        "graph": [{"op": "Softmax", "name": "p", "inputs": ["X"], "outputs": ["P"], "attrs": {}},
                  {"op": "Conv", "name": "c", "inputs": ["P", "W"], "outputs": ["C"],
                   "attrs": {"stride": [2, 1], "pad": [[0, 0], [0, 1]]}},
                  {"op": "Reduce", "name": "r", "inputs": ["C"], "outputs": ["Y"],
                   "attrs": {"fn": "sum", "axes": [3], "keepdim": false}}]
    });
    check_optimized(
        &doc.to_string(),
        vec![
            ("X", rand_tensor(6, DType::F16, &[1, 2, 2, 2])),
            ("W", rand_tensor(7, DType::F16, &[1, 2, 1, 1])),
        ],
    );
}

/// Two pads of an empty tensor read through an unfold: the read of `X` sits at a constant index
/// under guards that never hold together, on an axis the index does not use (found by
/// `optimize_fuzz`).
#[test]
fn unfold_of_pads_of_an_empty_tensor() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {
            "X": {"dtype": "fp16", "shape": [0, 1, 1, 1]},
            "Y": {"dtype": "fp16", "shape": [3, 1]}
        },
        "graph": [{"op": "Reshape", "name": "r", "inputs": ["X"], "outputs": ["A"],
                   "attrs": {"shape": [-1]}},
                  {"op": "Pad", "name": "p", "inputs": ["A"], "outputs": ["B"],
                   "attrs": {"pad": [[0, 2]]}},
                  {"op": "Pad", "name": "q", "inputs": ["B"], "outputs": ["C"],
                   "attrs": {"pad": [[1, 0]]}},
                  {"op": "Unfold", "name": "u", "inputs": ["C"], "outputs": ["Y"],
                   "attrs": {"axis": 0, "size": 1, "step": 1}}]
    });
    check_optimized(
        &doc.to_string(),
        vec![("X", rand_tensor(8, DType::F16, &[0, 1, 1, 1]))],
    );
}

/// A slice of a slice of a symbolic axis: the second start `min(1000, (S - max(0, S-2) + 2)//3)`
/// clamps against a size with a floordiv (found by `optimize_fuzz`).
#[test]
fn slice_clamped_against_a_floordiv_size() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {
            "X": {"dtype": "i32", "shape": ["S", "S"]},
            "Y": {"dtype": "i32", "shape": [0, "S"]}
        },
        "graph": [{"op": "Slice", "name": "a", "inputs": ["X"], "outputs": ["A"],
                   "attrs": {"starts": [-2], "ends": [1000], "axes": [0], "steps": [3]}},
                  {"op": "Slice", "name": "b", "inputs": ["A"], "outputs": ["Y"],
                   "attrs": {"starts": [1000], "ends": [1000], "axes": [0]}}]
    });
    check_optimized(
        &doc.to_string(),
        vec![(
            "X",
            i32_tensor(&[3, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]),
        )],
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

/// A Cast to bf16 feeding a cumulative product (its permutes of unit axes are identities, which
/// leave cycles in the e-graph).
fn cast_then_cumulative_prod() -> serde_json::Value {
    json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {"X": {"dtype": "fp16", "shape": [1, 1]}, "Y": {"dtype": "bf16", "shape": [1, 1]}},
        "graph": [{"op": "Cast", "name": "c", "inputs": ["X"], "outputs": ["A"], "attrs": {"to": "bf16"}},
                  {"op": "Cumulative", "name": "n", "inputs": ["A"], "outputs": ["Y"], "attrs": {"fn": "prod", "axis": 0}}]
    })
}

/// The output must have a finite-cost kernel cover: moving casts past identity movements must not
/// grow the e-graph to its node limit before any kernel exists.
#[test]
fn cast_then_cumulative_prod_has_a_cover() {
    let doc = cast_then_cumulative_prod();
    check_optimized(
        &doc.to_string(),
        vec![("X", rand_tensor(5, DType::F16, &[1, 1]))],
    );
}

/// Kernel growth must not absorb identity movements (`x = permute(x)`): the kernels phase
/// saturates in a few iterations instead of growing bodies around the cycle to the body limit.
#[test]
fn kernel_growth_stops_at_identity_movements() {
    let g = load_str(&cast_then_cumulative_prod().to_string(), "test.json")
        .unwrap_or_else(|d| panic!("{d}"));
    let prog = lower(&g).unwrap_or_else(|d| panic!("{d}"));
    let o = optimize(&prog, &OptimizeOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let k = o
        .phases
        .iter()
        .find(|p| p.name == "kernels")
        .expect("a kernels phase");
    assert_eq!(k.stop_reason, "Saturated", "{k:?}");
    assert!(k.iterations <= 4, "{k:?}");
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

/// ConvTranspose (stride 2, dilation 2) over a symbolic height `T` (bound to 4), summed over the
/// height: its read `x[k + (m+1)//2 - 1]` is in bounds only through the guards on `m` and `k`,
/// which interval arithmetic cannot relate to the floordiv (found by `optimize_fuzz`).
#[test]
fn strided_conv_transpose_over_symbolic_height() {
    let doc = r#"{"signature":{"inputs":[{"tensor":"X"},{"tensor":"W"}],"outputs":[{"tensor":"Y"}]},"tensors":{"X":{"dtype":"bf16","shape":[3,4,"T",3]},"W":{"dtype":"bf16","shape":[4,1,2,3]},"Y":{"dtype":"bf16","shape":[3,1,1,3]}},"graph":[{"op":"ConvTranspose","name":"c","inputs":["X","W"],"outputs":["A"],"attrs":{"stride":[2,1],"dilation":[2,1],"pad":[[1,1],[0,2]]}},{"op":"Reduce","name":"r","inputs":["A"],"outputs":["Y"],"attrs":{"fn":"sum","axes":[2],"keepdim":true}}]}"#;
    check_optimized(
        doc,
        vec![
            ("X", rand_tensor(7, DType::BF16, &[3, 4, 4, 3])),
            ("W", rand_tensor(8, DType::BF16, &[4, 1, 2, 3])),
        ],
    );
}

/// Unfold, then a reshape that splits the windows: the read's floordiv/mod indices are in bounds,
/// which intervals cannot show (found by `optimize_fuzz`).
#[test]
fn reshape_of_unfolded_windows() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "symbols": {"T": 4},
        "tensors": {"X": {"dtype": "i32", "shape": ["T", 4]}, "Y": {"dtype": "i32", "shape": [6, "T", 1, 1]}},
        "graph": [{"op": "Unfold", "name": "u", "inputs": ["X"], "outputs": ["A"],
                   "attrs": {"axis": 1, "size": 3, "step": 1}},
                  {"op": "Reshape", "name": "r", "inputs": ["A"], "outputs": ["B"],
                   "attrs": {"shape": [6, -1, 1, 1]}},
                  {"op": "Cumulative", "name": "c", "inputs": ["B"], "outputs": ["Y"],
                   "attrs": {"fn": "max", "axis": 0}}]
    });
    let x: Vec<f64> = (0..12).map(|v| (v * 7 % 5) as f64 - 2.0).collect();
    check_optimized(&doc.to_string(), vec![("X", i32_tensor(&[3, 4], &x))]);
}

/// `recip(0.0)` is `+inf` even when the graph also pads with `-0.0` (Concat's additive identity):
/// the two constants must be distinct e-graph leaves (found by `optimize_fuzz`).
#[test]
fn signed_zero_constants_stay_distinct() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "A"}, {"tensor": "B"}],
                      "outputs": [{"tensor": "C"}, {"tensor": "R"}]},
        "tensors": {"A": {"dtype": "fp16", "shape": [1]}, "B": {"dtype": "fp16", "shape": [2]},
                    "C": {"dtype": "fp16", "shape": [3]}, "R": {"dtype": "fp32", "shape": []}},
        "graph": [{"op": "Concat", "name": "c", "inputs": ["A", "B"], "outputs": ["C"], "attrs": {"axis": 0}},
                  {"op": "Elementwise", "name": "r", "inputs": [0.0], "outputs": ["R"], "attrs": {"fn": "recip"}}]
    });
    check_optimized(
        &doc.to_string(),
        vec![
            ("A", rand_tensor(9, DType::F16, &[1])),
            ("B", rand_tensor(10, DType::F16, &[2])),
        ],
    );
}

/// A sum over a unit axis of `-0.0` is `+0.0` (the reference adds it to the identity 0), so its
/// reciprocal is `+inf`: dropping the reduce must keep that (found by `optimize_fuzz` through a
/// one-channel Conv).
#[test]
fn unit_axis_sum_of_negative_zero() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {"X": {"dtype": "fp32", "shape": [2, 1]}, "Y": {"dtype": "fp32", "shape": [2]}},
        "graph": [{"op": "Reduce", "name": "s", "inputs": ["X"], "outputs": ["S"],
                   "attrs": {"fn": "sum", "axes": [1]}},
                  {"op": "Elementwise", "name": "r", "inputs": ["S"], "outputs": ["Y"],
                   "attrs": {"fn": "recip"}}]
    });
    check_optimized(
        &doc.to_string(),
        vec![("X", Tensor::from_f64(DType::F32, vec![2, 1], &[-0.0, 2.0]))],
    );
}

/// A MatMul whose first operand is a scalar expanded along the contraction axis: hoisting it
/// (`Σ_k a·b_k = a·Σ_k b_k`) is exact for finite values only — with `a = inf` and
/// `b = [1, -1, 0.5]` the reference's terms `inf, -inf, inf` sum to NaN while `inf · 0.5` is
/// `inf`. The hoists are `--fast-math` rules (`srnf::FAST_MATH_RULES`), so the default
/// optimizer matches the reference on the infinite input too, whatever the cost model prefers.
#[test]
fn hoisted_scalar_factor_of_a_matmul() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "A"}, {"tensor": "B"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {"A": {"dtype": "fp32", "shape": []}, "B": {"dtype": "fp32", "shape": [3]},
                    "Y": {"dtype": "fp32", "shape": [2]}},
        "graph": [{"op": "Expand", "name": "e", "inputs": ["A"], "outputs": ["E"],
                   "attrs": {"shape": [2, 3]}},
                  {"op": "MatMul", "name": "m", "inputs": ["E", "B"], "outputs": ["Y"]}]
    });
    let doc = doc.to_string();
    let b = || Tensor::from_f64(DType::F32, vec![3], &[1.0, -1.0, 0.5]);
    let a = |v: f64| Tensor::from_f64(DType::F32, vec![], &[v]);
    check_optimized(&doc, vec![("A", a(3.0)), ("B", b())]);
    check_optimized(&doc, vec![("A", a(f64::INFINITY)), ("B", b())]);
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
