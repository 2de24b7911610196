//! Reduce, Softmax, LayerNorm, RMSNorm and Cumulative against hand values and loops.

mod common;
use common::*;
use dlc_egg::ir::dtype::DType;
use dlc_egg::tensor::Tensor;
use serde_json::json;

fn t(dtype: DType, shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_f64(dtype, shape.to_vec(), v)
}

#[test]
fn reduce_functions_keepdim_and_negative_axes() {
    let x = t(DType::F32, &[2, 3], &[1., 5., -2., 4., 0.5, 3.]);
    let cases = [
        ("sum", json!([1]), false, vec![4., 7.5], vec![2]),
        ("max", json!([0]), false, vec![4., 5., 3.], vec![3]),
        ("min", json!([-1]), true, vec![-2., 0.5], vec![2, 1]),
        ("mean", json!([0, 1]), false, vec![11.5 / 6.0], vec![]),
        ("prod", json!([1]), false, vec![-10., 6.], vec![2]),
    ];
    for (f, axes, keep, want, shape) in cases {
        let g = one_op(
            "Reduce",
            json!({"fn": f, "axes": axes, "keepdim": keep}),
            &[("X", "fp32", vec![2, 3])],
            names(&["X"]),
        );
        let y = run_y(&g, vec![("X", x.clone())]);
        assert_close(&y, &want, &shape, 1e-6, 1e-6);
    }
}

#[test]
fn softmax_by_hand_and_rows_sum_to_one() {
    let g = one_op(
        "Softmax",
        json!({}),
        &[("X", "fp32", vec![1, 3])],
        names(&["X"]),
    );
    let y = run_y(&g, vec![("X", t(DType::F32, &[1, 3], &[1., 2., 3.]))]);
    let z: f64 = [1f64, 2., 3.].iter().map(|v| v.exp()).sum();
    assert_close(
        &y,
        &[1f64.exp() / z, 2f64.exp() / z, 3f64.exp() / z],
        &[1, 3],
        1e-6,
        1e-6,
    );
    let g = one_op(
        "Softmax",
        json!({"axis": 0}),
        &[("X", "fp16", vec![4, 5])],
        names(&["X"]),
    );
    let y = run_y(&g, vec![("X", rand_tensor(71, DType::F16, &[4, 5]))]).to_f64();
    for c in 0..5 {
        let s: f64 = (0..4).map(|r| y[r * 5 + c]).sum();
        assert!((s - 1.0).abs() < 5e-3, "column {c} sums to {s}");
    }
}

#[test]
fn layer_norm_and_rms_norm_match_loops() {
    let (r, c) = (3, 8);
    let x = rand_tensor(72, DType::F32, &[r, c]);
    let gamma = rand_tensor(73, DType::F32, &[c]);
    let beta = rand_tensor(74, DType::F32, &[c]);
    let (xv, gv, bv) = (x.to_f64(), gamma.to_f64(), beta.to_f64());
    let mut ln = vec![];
    let mut rms = vec![];
    for i in 0..r {
        let row = &xv[i * c..(i + 1) * c];
        let mean = row.iter().sum::<f64>() / c as f64;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / c as f64;
        let ms = row.iter().map(|v| v * v).sum::<f64>() / c as f64;
        for j in 0..c {
            ln.push((row[j] - mean) / (var + 1e-5).sqrt() * gv[j] + bv[j]);
            rms.push(row[j] / (ms + 1e-6).sqrt() * gv[j]);
        }
    }
    let g = one_op(
        "LayerNorm",
        json!({}),
        &[
            ("X", "fp32", vec![3, 8]),
            ("G", "fp32", vec![8]),
            ("B", "fp32", vec![8]),
        ],
        names(&["X", "G", "B"]),
    );
    let y = run_y(
        &g,
        vec![("X", x.clone()), ("G", gamma.clone()), ("B", beta)],
    );
    assert_close(&y, &ln, &[r, c], 1e-5, 1e-5);
    let g = one_op(
        "RMSNorm",
        json!({}),
        &[("X", "fp32", vec![3, 8]), ("G", "fp32", vec![8])],
        names(&["X", "G"]),
    );
    let y = run_y(&g, vec![("X", x), ("G", gamma)]);
    assert_close(&y, &rms, &[r, c], 1e-5, 1e-5);
}

#[test]
fn cumulative_variants() {
    let x = t(DType::F32, &[2, 4], &[1., 2., 3., 4., 2., -1., 5., 0.5]);
    let cases = [
        ("sum", false, false, vec![1., 3., 6., 10., 2., 1., 6., 6.5]),
        (
            "sum",
            true,
            false,
            vec![10., 9., 7., 4., 6.5, 4.5, 5.5, 0.5],
        ),
        ("sum", false, true, vec![0., 1., 3., 6., 0., 2., 1., 6.]),
        (
            "prod",
            false,
            false,
            vec![1., 2., 6., 24., 2., -2., -10., -5.],
        ),
        (
            "max",
            false,
            true,
            vec![f64::NEG_INFINITY, 1., 2., 3., f64::NEG_INFINITY, 2., 2., 5.],
        ),
        ("min", true, false, vec![1., 2., 3., 4., -1., -1., 0.5, 0.5]),
    ];
    for (f, reverse, exclusive, want) in cases {
        let g = one_op(
            "Cumulative",
            json!({"fn": f, "reverse": reverse, "exclusive": exclusive}),
            &[("X", "fp32", vec![2, 4])],
            names(&["X"]),
        );
        let y = run_y(&g, vec![("X", x.clone())]);
        assert_close(&y, &want, &[2, 4], 1e-6, 1e-6);
    }
    // Along axis 0, and i32 exclusive max starts from i32::MIN.
    let g = one_op(
        "Cumulative",
        json!({"fn": "max", "axis": 0, "exclusive": true}),
        &[("X", "i32", vec![3, 1])],
        names(&["X"]),
    );
    let y = run_y(&g, vec![("X", t(DType::I32, &[3, 1], &[5., 2., 7.]))]);
    assert_close(&y, &[i32::MIN as f64, 5., 5.], &[3, 1], 0.0, 0.0);
}

#[test]
fn norm_acc_dtype_fp16_is_honoured_when_asked() {
    // graph-json: LayerNorm and Softmax accumulate in acc_dtype; fp16 only when asked explicitly.
    let x = rand_tensor(75, DType::F16, &[2, 64]);
    let g32 = one_op(
        "Softmax",
        json!({}),
        &[("X", "fp16", vec![2, 64])],
        names(&["X"]),
    );
    let g16 = one_op(
        "Softmax",
        json!({"acc_dtype": "fp16"}),
        &[("X", "fp16", vec![2, 64])],
        names(&["X"]),
    );
    let y32 = run_y(&g32, vec![("X", x.clone())]).to_f64();
    let y16 = run_y(&g16, vec![("X", x.clone())]);
    // Both are softmaxes within fp16 tolerance, but the fp16-accumulated one is computed differently.
    assert_close(&y16, &y32, &[2, 64], 1e-2, 1e-2);
    let prog = dlc_egg::lower::lower(&dlc_egg::ir::frontend::load_str(&g16, "g").expect("loads"))
        .expect("lowers");
    assert!(
        prog.nodes.iter().all(|n| n.dtype != DType::F32),
        "fp16 accumulation must not compute in fp32"
    );
    let gl = one_op(
        "LayerNorm",
        json!({"acc_dtype": "bf16"}),
        &[("X", "fp32", vec![2, 8])],
        names(&["X"]),
    );
    let prog = dlc_egg::lower::lower(&dlc_egg::ir::frontend::load_str(&gl, "g").expect("loads"))
        .expect("lowers");
    assert!(prog
        .nodes
        .iter()
        .any(|n| n.uop.name() == "REDUCE" && n.dtype == DType::BF16));
}
