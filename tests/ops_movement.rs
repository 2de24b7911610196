//! Movement ops: Reshape, Permute, Expand, Pad, Slice, Flip, Concat, Repeat, Unfold, Gather.

mod common;
use common::*;
use dlc_egg::ir::dtype::DType;
use dlc_egg::tensor::Tensor;
use serde_json::json;

fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_f64(
        DType::F32,
        shape.to_vec(),
        &(0..n).map(|v| v as f64).collect::<Vec<_>>(),
    )
}

fn check(op: &str, attrs: serde_json::Value, shape: &[usize], want: &[f64], want_shape: &[usize]) {
    let g = one_op(
        op,
        attrs,
        &[("X", "fp32", shape.iter().map(|v| *v as i64).collect())],
        names(&["X"]),
    );
    let y = run_y(&g, vec![("X", iota(shape))]);
    assert_close(&y, want, want_shape, 0.0, 0.0);
}

#[test]
fn reshape_permute_expand() {
    check(
        "Reshape",
        json!({"shape": [3, -1]}),
        &[2, 3],
        &[0., 1., 2., 3., 4., 5.],
        &[3, 2],
    );
    check(
        "Permute",
        json!({"perm": [1, 0]}),
        &[2, 3],
        &[0., 3., 1., 4., 2., 5.],
        &[3, 2],
    );
    check(
        "Expand",
        json!({"shape": [2, -1, 2]}),
        &[3, 1],
        &[0., 0., 1., 1., 2., 2., 0., 0., 1., 1., 2., 2.],
        &[2, 3, 2],
    );
}

#[test]
fn pad_with_value_and_negative_crop() {
    check(
        "Pad",
        json!({"pad": [[1, 0], [-1, 2]], "value": 9}),
        &[2, 3],
        &[9., 9., 9., 9., 1., 2., 9., 9., 4., 5., 9., 9.],
        &[3, 4],
    );
}

#[test]
fn slice_numpy_semantics() {
    // x[::2, -2:] of a 3×4, then a negative-step-free clamp: ends beyond the dim clamp.
    check(
        "Slice",
        json!({"starts": [0, -2], "ends": [100, 4], "steps": [2, 1]}),
        &[3, 4],
        &[2., 3., 10., 11.],
        &[2, 2],
    );
    check(
        "Slice",
        json!({"starts": [1], "ends": [3], "axes": [1]}),
        &[2, 4],
        &[1., 2., 5., 6.],
        &[2, 2],
    );
    check(
        "Slice",
        json!({"starts": [3], "ends": [1], "axes": [0]}),
        &[4],
        &[],
        &[0],
    );
}

#[test]
fn flip_concat_repeat_unfold() {
    check(
        "Flip",
        json!({"axes": [0, -1]}),
        &[2, 3],
        &[5., 4., 3., 2., 1., 0.],
        &[2, 3],
    );
    check(
        "Repeat",
        json!({"repeats": [2, 1, 2]}),
        &[1, 2],
        &[0., 1., 0., 1., 0., 1., 0., 1.],
        &[2, 1, 4],
    );
    check(
        "Unfold",
        json!({"axis": 1, "size": 2, "step": 2}),
        &[2, 5],
        &[0., 1., 2., 3., 5., 6., 7., 8.],
        &[2, 2, 2],
    );
    let g = one_op(
        "Concat",
        json!({"axis": 1}),
        &[("A", "fp32", vec![2, 1]), ("B", "fp32", vec![2, 2])],
        names(&["A", "B", "A"]),
    );
    let y = run_y(&g, vec![("A", iota(&[2, 1])), ("B", iota(&[2, 2]))]);
    assert_close(&y, &[0., 0., 1., 0., 1., 2., 3., 1.], &[2, 4], 0.0, 0.0);
}

#[test]
fn gather_follows_torch_and_rejects_out_of_range() {
    let g = one_op(
        "Gather",
        json!({"axis": 1}),
        &[("X", "fp32", vec![2, 3]), ("I", "i32", vec![2, 2])],
        names(&["X", "I"]),
    );
    let idx = Tensor::from_f64(DType::I32, vec![2, 2], &[2., 0., 1., 1.]);
    let y = run_y(&g, vec![("X", iota(&[2, 3])), ("I", idx)]);
    assert_close(&y, &[2., 0., 4., 4.], &[2, 2], 0.0, 0.0);
    let bad = Tensor::from_f64(DType::I32, vec![2, 2], &[3., 0., 1., 1.]);
    let err = try_run(&g, vec![("X", iota(&[2, 3])), ("I", bad)]).unwrap_err();
    assert_eq!(err.first_code(), "E0304");
}
