//! The pointwise template's folds are priced with the bytes they load through L2 (issue 15,
//! `plan::work::FoldTraffic`). A ViT-B/16 block's attention out-projection and MLP
//! down-projection, both feeding one residual sum, were fused into one pointwise kernel that
//! folds both GEMMs per output element: priced 67.8 µs "compute-bound" on sm90 (the FP32 peak,
//! loads as issue slots only), while every element streams a 768 + 3072 weight column from L2
//! (≈ 2.3 GB, ≈ 250 µs at H100's L2 bandwidth). Priced with that traffic, the down-projection
//! runs on a tiled contraction kernel.

mod common;

use common::host::{kernel_templates, optimized_for};
use dlc_egg::cost::work::analyze;
use dlc_egg::extract::kernels::CostModel;
use dlc_egg::ir::region::Region;
use dlc_egg::target::{Arch, Target};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// `Y = (P·Wo + bo + R) + (G·W2 + b2)`, fp32: ViT-B/16's shapes (197 tokens, d = 768, MLP 3072).
fn two_projections() -> String {
    let t = |shape: Value| json!({"dtype": "fp32", "shape": shape});
    let param = |n: &str| json!({"tensor": n, "role": "param", "storage": "const_pool"});
    let act = t(json!([197, 768]));
    json!({
        "signature": {
            "inputs": [{"tensor": "P"}, {"tensor": "G"}, {"tensor": "R"}, param("Wo"), param("bo"),
                       param("W2"), param("b2")],
            "outputs": [{"tensor": "Y"}]
        },
        "tensors": {
            "P": act, "G": t(json!([197, 3072])), "R": act, "Wo": t(json!([768, 768])),
            "bo": t(json!([768])), "W2": t(json!([3072, 768])), "b2": t(json!([768])),
            "A": act, "Ab": act, "H": act, "M": act, "Mb": act, "Y": act
        },
        "graph": [
            {"op": "MatMul", "name": "out_proj", "inputs": ["P", "Wo"], "outputs": ["A"], "attrs": {}},
            {"op": "Elementwise", "name": "bias_o", "inputs": ["A", "bo"], "outputs": ["Ab"],
             "attrs": {"fn": "add"}},
            {"op": "Elementwise", "name": "res1", "inputs": ["Ab", "R"], "outputs": ["H"],
             "attrs": {"fn": "add"}},
            {"op": "MatMul", "name": "down", "inputs": ["G", "W2"], "outputs": ["M"], "attrs": {}},
            {"op": "Elementwise", "name": "bias_2", "inputs": ["M", "b2"], "outputs": ["Mb"],
             "attrs": {"fn": "add"}},
            {"op": "Elementwise", "name": "res2", "inputs": ["Mb", "H"], "outputs": ["Y"],
             "attrs": {"fn": "add"}}
        ]
    })
    .to_string()
}

/// On sm90 the down-projection (1.2 GFLOP, a 9.4 MB weight) is a tiled contraction kernel, not
/// a per-element fold. (On sm80 the fold stays: its FP32 peak is a third of sm90's, so the
/// fold is compute-bound at ≈ 229 µs either way and the L2 term does not decide.)
#[test]
fn a_whole_gemm_is_not_folded_per_element_on_sm90() {
    let (_, o) = optimized_for(&two_projections(), Arch::Sm90);
    let kernels = kernel_templates(&o);
    let down: Vec<_> = kernels
        .iter()
        .filter(|(_, _, covers)| covers.iter().any(|c| c == "down"))
        .collect();
    assert_eq!(down.len(), 1, "{kernels:?}");
    assert_eq!(down[0].1, "contraction", "{kernels:?}");
}

fn memref(shape: Value) -> Value {
    json!({"shape": shape, "alignment": 16, "noalias": true, "layout": {"kind": "row_major"}})
}

/// A row's mean under every element of the row, `Y[m, n] = X[m, n] − Σ_n X[m, n] / 64`, whose
/// reduce axis is named like the iter `n` it shadows, as SRNF names them.
fn mean_subtracted() -> Region {
    let x = |col: &str| json!({"read": {"tensor": "X", "map": ["m", col]}});
    let v = json!({"region": {
        "name": "t",
        "iters": [{"name": "m", "size": 128}, {"name": "n", "size": 64}],
        "inputs": [{"name": "X", "dtype": "fp32", "memref": memref(json!([128, 64]))}],
        "outputs": [{"name": "Y", "dtype": "fp32", "memref": memref(json!([128, 64])), "materialize": "gmem"}],
        "lets": [
            {"let": "s", "expr": {"reduce": {"op": "sum", "axes": ["n"], "init": 0.0, "dtype": "fp32",
                                             "body": x("n")}}},
            {"let": "y", "expr": {"sub": [x("n"), {"div": ["s", 64.0]}]}}
        ],
        "yield": [{"from": "y", "to": "Y"}]
    }});
    Region::from_json_value(v).unwrap_or_else(|e| panic!("{e}"))
}

/// The fold's read depends on the row alone: a CTA of 512 consecutive points (8 rows) loads 8
/// distinct elements per step, not 512 (the reduce axis `n` is not the iter `n`).
#[test]
fn a_fold_read_along_a_shadowing_reduce_axis_is_a_broadcast() {
    let model = CostModel {
        bindings: BTreeMap::new(),
        default_size: 1024,
        target: Target::h100_sxm5(),
        regions: None,
    };
    let w = analyze(&mean_subtracted(), &model).expect("work");
    let reads = &w.fold_traffic.reads;
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!(reads[0].varies, vec![true, false]);
    assert_eq!(reads[0].per_point, 64.0);
    let points = 128.0 * 64.0;
    assert_eq!(
        w.fold_traffic.l2_bytes(points, 512.0),
        points * 64.0 * 4.0 * 8.0 / 512.0
    );
}
