//! Issue 23: a kernel that reads a slice of a larger input (a `shrink` absorbed into the
//! kernel, the Q columns of a merged Q‖K‖V GEMM) is priced by the bytes of the slice it reads,
//! not by the whole input (`plan::work::analyze`, `InputUse::bytes`).

use dlc_egg::cost::work::analyze;
use dlc_egg::extract::kernels::CostModel;
use dlc_egg::ir::region::Region;
use dlc_egg::target::Target;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn memref(shape: Value) -> Value {
    json!({"shape": shape, "alignment": 16, "noalias": true, "layout": {"kind": "row_major"}})
}

/// `Y[i, j] = expr` over iters `i < 128`, `j < 768`; input `X [128, 2304]`.
fn region(expr: Value) -> Region {
    let v = json!({"region": {
        "name": "t",
        "iters": [{"name": "i", "size": 128}, {"name": "j", "size": 768}],
        "inputs": [{"name": "X", "dtype": "fp32", "memref": memref(json!([128, 2304]))}],
        "outputs": [{"name": "Y", "dtype": "fp32", "memref": memref(json!([128, 768])), "materialize": "gmem"}],
        "lets": [{"let": "a", "expr": expr}],
        "yield": [{"from": "a", "to": "Y"}]
    }});
    Region::from_json_value(v).unwrap_or_else(|e| panic!("{e}"))
}

fn x(map: Value) -> Value {
    json!({"read": {"tensor": "X", "map": map}})
}

fn in_bytes(r: &Region) -> f64 {
    let model = CostModel {
        bindings: BTreeMap::new(),
        default_size: 1024,
        target: Target::h100_sxm5(),
        regions: None,
    };
    analyze(r, &model).expect("work").in_bytes()
}

const WHOLE: f64 = 128.0 * 2304.0 * 4.0;
const SLICE: f64 = 128.0 * 768.0 * 4.0;

/// The K columns `X[:, 768:1536]` of a merged projection: a third of `X`.
#[test]
fn a_slice_is_priced_by_the_part_it_reads() {
    let r = region(json!({"add": [x(json!(["i", {"add": ["j", 768]}])), 1.0]}));
    assert_eq!(in_bytes(&r), SLICE);
    // Two reads of different slices: their hull (Q and K columns, two thirds).
    let two = json!({"add": [x(json!(["i", "j"])), x(json!(["i", {"add": ["j", 768]}]))]});
    assert_eq!(in_bytes(&region(two)), 2.0 * SLICE);
    // A read of every column (a reduction over all of `X`'s columns) is the whole input.
    let all = json!({"reduce": {"op": "sum", "axes": ["k"], "extents": {"k": 2304}, "dtype": "fp32",
                               "body": x(json!(["i", "k"]))}});
    assert_eq!(in_bytes(&region(all)), WHOLE);
    // A reduction over a slice of the columns reads that slice.
    let part = json!({"reduce": {"op": "sum", "axes": ["k"], "extents": {"k": 768}, "dtype": "fp32",
                                "body": x(json!(["i", {"add": ["k", 1536]}]))}});
    assert_eq!(in_bytes(&region(part)), SLICE);
}

/// Reads past the input's edges (padding under a guard) are clamped to the input: never more
/// than the whole input; a strided read counts its hull (the gaps are loaded by the sectors).
#[test]
fn the_footprint_is_clamped_and_a_hull() {
    let shifted = json!({"select": {"pred": {"ge": ["i", 1]}, "else": 0.0,
                         "then": x(json!([{"add": ["i", -1]}, {"add": ["j", 1536]}]))}});
    // rows 0..126 (row -1 clamped away), columns 1536..2303
    assert_eq!(in_bytes(&region(shifted)), 127.0 * 768.0 * 4.0);
    let strided = x(json!(["i", {"mul": [3, "j"]}]));
    // columns 0, 3, …, 2301: hull 0..2301
    assert_eq!(in_bytes(&region(strided)), 128.0 * 2302.0 * 4.0);
}
