//! Minimized failures of `tests/pipeline_fuzz.rs`: valid graphs that lowering or the evaluator
//! rejected, or evaluated wrongly. One test per bug, each deterministic.

mod common;
use common::{names, one_op, run, run_y};

use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend::load_str;
use dlc_egg::tensor::{Tensor, TensorData};
use serde_json::json;

fn bools(shape: &[usize], v: &[bool]) -> Tensor {
    Tensor {
        dtype: DType::Bool,
        shape: shape.to_vec(),
        data: TensorData::Bool(v.to_vec()),
    }
}

fn f32s(shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_f64(DType::F32, shape.to_vec(), v)
}

/// `lt`/`le`/`gt`/`ge` on bool operands (false < true) lowered to CMPLT/CMPLE on bool, which Tiny
/// IR does not define (E1006). A scalar operand adopts bool first (0.5 is true).
#[test]
fn ordering_comparisons_on_bool() {
    let a = bools(&[4], &[false, false, true, true]);
    let b = bools(&[4], &[false, true, false, true]);
    for (f, want) in [
        ("lt", [0.0, 1.0, 0.0, 0.0]),
        ("le", [1.0, 1.0, 0.0, 1.0]),
        ("gt", [0.0, 0.0, 1.0, 0.0]),
        ("ge", [1.0, 0.0, 1.0, 1.0]),
    ] {
        let g = one_op(
            "Elementwise",
            json!({"fn": f}),
            &[("A", "bool", vec![4]), ("B", "bool", vec![4])],
            names(&["A", "B"]),
        );
        let y = run_y(&g, vec![("A", a.clone()), ("B", b.clone())]);
        assert_eq!(y.dtype, DType::Bool);
        assert_eq!(y.to_f64(), want, "{f}");
    }
    let g = one_op(
        "Elementwise",
        json!({"fn": "lt"}),
        &[("A", "bool", vec![4])],
        vec![json!("A"), json!(0.5)],
    );
    let y = run_y(&g, vec![("A", a)]);
    assert_eq!(y.to_f64(), [1.0, 1.0, 0.0, 0.0]);
}

/// `Pad [-2, 2]` on an axis of 1 crops past the whole axis on one side and pads the other: the
/// output is all padding. Lowered as SHRINK then PAD, the SHRINK was out of bounds (E1008).
#[test]
fn pad_cropping_past_the_axis() {
    let g = one_op(
        "Pad",
        json!({"pad": [[-2, 2], [0, 0]], "value": 7}),
        &[("X", "fp32", vec![1, 2])],
        names(&["X"]),
    );
    let y = run_y(&g, vec![("X", f32s(&[1, 2], &[1.0, 2.0]))]);
    assert_eq!(y.shape, [1, 2]);
    assert_eq!(y.to_f64(), [7.0, 7.0]);
    // [-1, 3] on an axis of 2: one element kept, then padding.
    let g = one_op(
        "Pad",
        json!({"pad": [[-1, 3]]}),
        &[("X", "fp32", vec![2])],
        names(&["X"]),
    );
    let y = run_y(&g, vec![("X", f32s(&[2], &[1.0, 2.0]))]);
    assert_eq!(y.to_f64(), [2.0, 0.0, 0.0, 0.0]);
}

/// A symbolic `Pad` (negative crop past a symbolic axis size) also evaluates.
#[test]
fn pad_cropping_past_a_symbolic_axis() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {"X": {"dtype": "fp32", "shape": ["S"]}, "Y": {"dtype": "fp32", "shape": ["S"]}},
        "graph": [{"op": "Pad", "name": "p", "inputs": ["X"], "outputs": ["Y"],
                   "attrs": {"pad": [[3, -3]], "value": 1}}]
    });
    let y = run_y(&doc.to_string(), vec![("X", f32s(&[2], &[5.0, 6.0]))]);
    assert_eq!(y.to_f64(), [1.0, 1.0]);
}

/// Slices whose length the frontend and lowering wrote differently (`max(0, e − s)` vs
/// `max(e, s) − s`; `S − 3` vs `max(S − 3, 0)` for an axis left alone): lowering's shape check
/// failed with E1100 although both are the same size.
#[test]
fn slice_lengths_agree_symbolically() {
    // start clamped to the end of a symbolic axis, end far before it: empty.
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {"X": {"dtype": "fp32", "shape": ["S", 2]}, "Y": {"dtype": "fp32", "shape": [2]}},
        "graph": [
            {"op": "Slice", "name": "s", "inputs": ["X"], "outputs": ["Z"],
             "attrs": {"starts": [i64::MAX], "ends": [-1000]}},
            {"op": "Reduce", "name": "r", "inputs": ["Z"], "outputs": ["Y"],
             "attrs": {"fn": "sum", "axes": [0]}}
        ]
    });
    let y = run_y(&doc.to_string(), vec![("X", f32s(&[3, 2], &[1.0; 6]))]);
    assert_eq!(y.to_f64(), [0.0, 0.0]);
    // An axis of size S − 3 left alone while another axis is sliced.
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {"X": {"dtype": "fp32", "shape": ["S", 2]}, "Y": {"dtype": "fp32", "shape": [1]}},
        "graph": [
            {"op": "Pad", "name": "p", "inputs": ["X"], "outputs": ["P"], "attrs": {"pad": [[0, -3], [0, 0]]}},
            {"op": "Slice", "name": "s", "inputs": ["P"], "outputs": ["Z"],
             "attrs": {"starts": [1], "ends": [2], "axes": [1]}},
            {"op": "Reduce", "name": "r", "inputs": ["Z"], "outputs": ["Y"],
             "attrs": {"fn": "sum", "axes": [0]}}
        ]
    });
    let x: Vec<f64> = (0..10).map(f64::from).collect();
    let y = run_y(&doc.to_string(), vec![("X", f32s(&[5, 2], &x))]);
    assert_eq!(y.to_f64(), [1.0 + 3.0]);
}

/// `Reduce mean` accumulating in fp16 over a symbolic axis divided the fp16 sum by an fp32 count
/// node (E1006 in lowering).
#[test]
fn mean_with_fp16_accumulation_over_a_symbolic_axis() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {"X": {"dtype": "fp16", "shape": ["S", 2]}, "Y": {"dtype": "fp16", "shape": [2]}},
        "graph": [{"op": "Reduce", "name": "m", "inputs": ["X"], "outputs": ["Y"],
                   "attrs": {"fn": "mean", "axes": [0], "acc_dtype": "fp16"}}]
    });
    let x = Tensor::from_f64(
        DType::F16,
        vec![4, 2],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
    );
    let y = run_y(&doc.to_string(), vec![("X", x)]);
    assert_eq!(y.dtype, DType::F16);
    assert_eq!(y.to_f64(), [4.0, 5.0]);
}

/// `where` with a scalar condition (accepted by the frontend) failed to lower (E1100).
#[test]
fn where_with_a_scalar_condition() {
    let a = f32s(&[2], &[1.0, 2.0]);
    for (c, want) in [(1.0, [1.0, 2.0]), (0.0, [9.0, 9.0])] {
        let g = one_op(
            "Elementwise",
            json!({"fn": "where"}),
            &[("A", "fp32", vec![2])],
            vec![json!(c), json!("A"), json!(9.0)],
        );
        assert_eq!(run_y(&g, vec![("A", a.clone())]).to_f64(), want);
    }
}

/// `max` over an empty set of bools is `false` (any of nothing), but the i32 accumulator's
/// identity (`i32::MIN`) was cast to `true`: an empty Reduce max and the first element of an
/// exclusive Cumulative max were wrong.
#[test]
fn bool_max_of_nothing_is_false() {
    let g = one_op(
        "Reduce",
        json!({"fn": "max", "axes": [0]}),
        &[("X", "bool", vec![0, 2])],
        names(&["X"]),
    );
    let y = run_y(&g, vec![("X", bools(&[0, 2], &[]))]);
    assert_eq!(y.to_f64(), [0.0, 0.0]);
    let g = one_op(
        "Reduce",
        json!({"fn": "min", "axes": [0]}),
        &[("X", "bool", vec![0, 2])],
        names(&["X"]),
    );
    let y = run_y(&g, vec![("X", bools(&[0, 2], &[]))]);
    assert_eq!(y.to_f64(), [1.0, 1.0]);
    let x = bools(&[3], &[true, false, false]);
    for (f, excl, rev, want) in [
        ("max", true, false, [0.0, 1.0, 1.0]),
        ("max", true, true, [0.0, 0.0, 0.0]),
        ("min", true, false, [1.0, 1.0, 0.0]),
        ("max", false, false, [1.0, 1.0, 1.0]),
    ] {
        let g = one_op(
            "Cumulative",
            json!({"fn": f, "exclusive": excl, "reverse": rev}),
            &[("X", "bool", vec![3])],
            names(&["X"]),
        );
        let y = run_y(&g, vec![("X", x.clone())]);
        assert_eq!(y.dtype, DType::Bool);
        assert_eq!(y.to_f64(), want, "{f} exclusive={excl} reverse={rev}");
    }
}

/// `pow` on i32 was accepted by the frontend but has no lowering (Tiny POW is float-only); it is
/// now a float-only function (E1013, Cast first).
#[test]
fn pow_on_i32_is_rejected_up_front() {
    let doc = common::probe_doc(
        &[("A", "i32", json!([2]))],
        json!([{"op": "Elementwise", "name": "p", "inputs": ["A", 2], "outputs": ["Y"],
                "attrs": {"fn": "pow"}}]),
    );
    let err = load_str(&doc.to_string(), "g.json").expect_err("pow on i32");
    assert_eq!(err.first_code(), "E1013", "{err}");
    // Float pow still works.
    let g = one_op(
        "Elementwise",
        json!({"fn": "pow"}),
        &[("A", "fp32", vec![2])],
        vec![json!("A"), json!(2)],
    );
    assert_eq!(
        run_y(&g, vec![("A", f32s(&[2], &[3.0, -2.0]))]).to_f64(),
        [9.0, 4.0]
    );
}

/// `ConvTranspose` of an empty spatial input (size 0; the PyTorch formula still gives an output
/// of size >= 1, all bias): zero insertion shrank to `(H−1)·s + 1 < 0` (E1008).
#[test]
fn conv_transpose_of_an_empty_input_is_bias() {
    let g = one_op(
        "ConvTranspose",
        json!({"stride": 3, "output_padding": 2}),
        &[
            ("X", "fp32", vec![1, 1, 0]),
            ("W", "fp32", vec![1, 2, 2]),
            ("B", "fp32", vec![2]),
        ],
        names(&["X", "W", "B"]),
    );
    let out = run(
        &g,
        vec![
            ("X", f32s(&[1, 1, 0], &[])),
            ("W", f32s(&[1, 2, 2], &[1.0; 4])),
            ("B", f32s(&[2], &[0.5, -1.0])),
        ],
    );
    // (0 − 1)·3 + (2 − 1) + 2 + 1 = 1
    let y = &out["Y"];
    assert_eq!(y.shape, [1, 2, 1]);
    assert_eq!(y.to_f64(), [0.5, -1.0]);
}

/// `Dim::is_nonneg` trusted every atom to be a size, but `(-2*S)//3` (from a Conv with a
/// symbolic kernel) is negative: a Pad cropping 3 off that axis of `(-2*S)//3+3` (= 2 at S = 1)
/// while padding 3 was judged to fit, lowered as SHRINK first, and the evaluator found a size of
/// -1 (E0206).
#[test]
fn crop_of_a_floordiv_size_is_not_assumed_to_fit() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}, {"tensor": "W"}], "outputs": [{"tensor": "Y"}]},
        "symbols": {"S": 1},
        "tensors": {
            "X": {"dtype": "fp32", "shape": [1, 1, 4]},
            "W": {"dtype": "fp32", "shape": [1, 1, "S"]},
            "Y": {"dtype": "fp32", "shape": [1, 1]}
        },
        "graph": [
            {"op": "Conv", "name": "c", "inputs": ["X", "W"], "outputs": ["C"],
             "attrs": {"stride": 3, "dilation": 2, "pad": [[0, 1]]}},
            {"op": "Pad", "name": "p", "inputs": ["C"], "outputs": ["P"],
             "attrs": {"pad": [[0, 0], [0, 0], [-3, 3]], "value": 1}},
            {"op": "Reduce", "name": "r", "inputs": ["P"], "outputs": ["Y"],
             "attrs": {"fn": "sum", "axes": [2]}}
        ]
    });
    let out = run(
        &doc.to_string(),
        vec![
            ("X", f32s(&[1, 1, 4], &[1.0, 2.0, 3.0, 4.0])),
            ("W", f32s(&[1, 1, 1], &[1.0])),
        ],
    );
    // The conv output has 2 elements: cropping 3 and padding 3 leaves 2 elements of padding.
    assert_eq!(out["Y"].to_f64(), [2.0]);
}

/// `Concat` is lowered as pad-with-zeros-and-add; `−0.0 + 0.0 = +0.0` turned a negative zero
/// into a positive one (visible downstream: `1 / x` gave +inf instead of −inf). Parts are now
/// padded with −0.0, which leaves every value exact.
#[test]
fn concat_keeps_negative_zeros() {
    for dt in ["fp32", "fp16", "bf16"] {
        let g = one_op(
            "Concat",
            json!({"axis": 0}),
            &[("A", dt, vec![2]), ("B", dt, vec![1])],
            names(&["A", "B"]),
        );
        let d = DType::parse(dt).expect("dtype");
        let y = run_y(
            &g,
            vec![
                ("A", Tensor::from_f64(d, vec![2], &[-0.0, 1.0])),
                ("B", Tensor::from_f64(d, vec![1], &[-0.0])),
            ],
        );
        let v = y.to_f64();
        assert_eq!(v, [0.0, 1.0, 0.0]);
        assert!(
            v[0].is_sign_negative() && v[2].is_sign_negative(),
            "{dt}: {v:?}"
        );
    }
}
