//! Region verifier: one negative test per error code, plus playback of the documented extensions
//! (explicit reduce `extents`, derived iter sizes) and error-not-panic behaviour.

mod common;
use common::*;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::region::{evaluate_region, verify, Region};
use dlc_egg::tensor::Tensor;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn memref(shape: Value) -> Value {
    json!({"shape": shape, "alignment": 16, "noalias": true, "layout": {"kind": "row_major"}})
}

/// `Y[i, j] = lets…` over iters `i < 4`, `j < 3`; inputs `X [4, 3]`, `v [3]`, output `Y [4, 3]`.
fn doc(lets: Value) -> Value {
    json!({"region": {
        "name": "t",
        "iters": [{"name": "i", "size": 4}, {"name": "j", "size": 3}],
        "inputs": [
            {"name": "X", "dtype": "fp32", "memref": memref(json!([4, 3]))},
            {"name": "v", "dtype": "fp32", "memref": memref(json!([3]))}
        ],
        "outputs": [{"name": "Y", "dtype": "fp32", "memref": memref(json!([4, 3])), "materialize": "gmem"}],
        "lets": lets,
        "yield": [{"from": "a", "to": "Y"}]
    }})
}

fn region(v: Value) -> Region {
    Region::from_json_value(v).unwrap_or_else(|e| panic!("{e}"))
}

fn code(v: Value) -> &'static str {
    let r = region(v);
    let e = verify(&r).expect_err("verifier error");
    // Every error converts into a diagnostic with the same code.
    assert_eq!(e.to_diagnostic().code, e.code().0);
    e.code().0
}

fn let_a(expr: Value) -> Value {
    doc(json!([{"let": "a", "expr": expr}]))
}

fn x(map: Value) -> Value {
    json!({"read": {"tensor": "X", "map": map}})
}

#[test]
fn the_base_region_verifies() {
    assert!(verify(&region(let_a(json!({"add": [x(json!(["i", "j"])), 1.0]})))).is_ok());
}

#[test]
fn e1200_invalid_json_form() {
    let bad = [
        let_a(json!({"frobnicate": [1.0]})),
        let_a(json!({"add": [1.0]})),
        let_a(x(json!([1.5, "j"]))),
        let_a(json!({"reduce": {"op": "mean", "axes": [], "dtype": "fp32", "body": 1.0}})),
    ];
    for v in bad {
        let e = Region::from_json_value(v).expect_err("rejected");
        assert_eq!(e.code().0, "E1200");
    }
    let mut v = let_a(json!(1.0));
    v["region"]["extra"] = json!(1);
    assert!(Region::from_json_value(v).is_err());
}

#[test]
fn e1201_duplicate_names() {
    let v = doc(json!([{"let": "a", "expr": 1.0}, {"let": "a", "expr": 2.0}]));
    assert_eq!(code(v), "E1201");
    let mut v = let_a(json!(1.0));
    v["region"]["iters"][1]["name"] = json!("i");
    assert_eq!(code(v), "E1201");
}

#[test]
fn e1202_undefined_let() {
    assert_eq!(code(let_a(json!({"add": ["b", 1.0]}))), "E1202");
    // Defined later is not defined before use.
    let v = doc(json!([{"let": "a", "expr": "b"}, {"let": "b", "expr": 1.0}]));
    assert_eq!(code(v), "E1202");
}

#[test]
fn e1217_unknown_tensor() {
    assert_eq!(
        code(let_a(json!({"read": {"tensor": "Z", "map": ["i"]}}))),
        "E1217"
    );
}

#[test]
fn e1204_read_rank_mismatch() {
    assert_eq!(code(let_a(x(json!(["i"])))), "E1204");
}

#[test]
fn e1205_unbound_axis() {
    assert_eq!(code(let_a(x(json!(["i", "q"])))), "E1205");
    // A reduce axis does not escape its reduce.
    let v = doc(json!([
        {"let": "s", "expr": {"reduce": {"op": "sum", "axes": ["k"], "extents": {"k": 2}, "dtype": "fp32", "body": 1.0}}},
        {"let": "a", "expr": x(json!(["i", "k"]))}
    ]));
    assert_eq!(code(v), "E1205");
}

#[test]
fn e1206_non_affine_map() {
    assert_eq!(code(let_a(x(json!([{"mul": ["i", "j"]}, "j"])))), "E1206");
    assert_eq!(
        code(let_a(x(json!([{"floordiv": ["i", 0]}, "j"])))),
        "E1206"
    );
}

#[test]
fn e1207_reduce_extent_unknown() {
    let r = |body: Value| {
        let_a(json!({"reduce": {"op": "sum", "axes": ["k"], "dtype": "fp32", "body": body}}))
    };
    assert_eq!(code(r(json!(1.0))), "E1207");
    // Reads disagree: X's axis 0 has 4, v's axis 0 has 3.
    let body = json!({"mul": [x(json!(["k", "j"])), {"read": {"tensor": "v", "map": ["k"]}}]});
    assert_eq!(code(r(body)), "E1207");
    // An `extents` entry for an axis the reduce does not reduce.
    let v = let_a(
        json!({"reduce": {"op": "sum", "axes": ["k"], "extents": {"k": 3, "z": 1}, "dtype": "fp32", "body": 1.0}}),
    );
    assert_eq!(code(v), "E1207");
}

#[test]
fn e1208_acc_dtype_missing() {
    let v = let_a(json!({"reduce": {"op": "sum", "axes": ["j"], "body": x(json!(["i", "j"]))}}));
    assert_eq!(code(v), "E1208");
}

#[test]
fn e1209_unguarded_access() {
    assert_eq!(code(let_a(x(json!([{"add": ["i", 1]}, "j"])))), "E1209");
    assert_eq!(code(let_a(x(json!([{"add": ["i", -1]}, "j"])))), "E1209");
    // A guard that is too weak still fails; the right guard passes, in any equivalent form.
    let sel = |pred: Value| {
        let_a(
            json!({"select": {"pred": pred, "then": x(json!([{"add": ["i", -1]}, "j"])), "else": 0.0}}),
        )
    };
    assert_eq!(code(sel(json!({"ge": ["i", 0]}))), "E1209");
    assert!(verify(&region(sel(json!({"ge": ["i", 1]})))).is_ok());
    assert!(verify(&region(sel(json!({"and": [{"le": [1, "i"]}]})))).is_ok());
    assert!(verify(&region(sel(json!({"ge": [{"add": ["i", -1]}, 0]})))).is_ok());
    // Only the then-branch is guarded.
    let v = let_a(json!({"select": {"pred": {"ge": ["i", 1]}, "then": 0.0,
        "else": x(json!([{"add": ["i", -1]}, "j"]))}}));
    assert_eq!(code(v), "E1209");
}

#[test]
fn e1210_broadcast_mismatch() {
    let v = let_a(
        json!({"BroadcastInDim": {"operand": {"read": {"tensor": "v", "map": ["j"]}},
        "result_shape": [4, 4], "broadcast_dimensions": [1]}}),
    );
    assert_eq!(code(v), "E1210");
}

#[test]
fn e1211_axis_alignment_mismatch() {
    let b = |dims: Value| {
        let_a(
            json!({"BroadcastInDim": {"operand": {"read": {"tensor": "v", "map": ["j"]}},
            "result_shape": [4, 3], "broadcast_dimensions": dims}}),
        )
    };
    assert!(verify(&region(b(json!([1])))).is_ok());
    assert_eq!(code(b(json!([2]))), "E1211");
    assert_eq!(code(b(json!([0, 1]))), "E1211");
    let t = |perm: Value| {
        let_a(json!({"transpose": {"operand": x(json!(["i", "j"])), "permutation": perm}}))
    };
    assert!(verify(&region(t(json!([1, 0])))).is_ok());
    assert_eq!(code(t(json!([0, 0]))), "E1211");
}

#[test]
fn e1212_neutral_invalid() {
    let r = |op: &str, neutral: Value| {
        let_a(
            json!({"reduce": {"op": op, "axes": ["k"], "extents": {"k": 3}, "dtype": "fp32",
            "body": {"select": {"pred": {"lt": ["k", 2]}, "then": 1.0, "else": neutral}}}}),
        )
    };
    assert_eq!(code(r("max", json!(0.0))), "E1212");
    assert!(verify(&region(r("max", json!("-INF")))).is_ok());
    assert!(verify(&region(r("sum", json!(0.0)))).is_ok());
    assert_eq!(code(r("prod", json!(0.0))), "E1212");
}

#[test]
fn e1213_bad_yield() {
    let mut v = let_a(json!(1.0));
    v["region"]["yield"] = json!([{"from": "zz", "to": "Y"}]);
    assert_eq!(code(v.clone()), "E1213");
    v["region"]["yield"] = json!([]);
    assert_eq!(code(v.clone()), "E1213");
    v["region"]["yield"] = json!([{"from": "a", "to": "Y"}, {"from": "a", "to": "Q"}]);
    assert_eq!(code(v), "E1213");
}

#[test]
fn e1214_output_shape_mismatch() {
    let mut v = let_a(json!(1.0));
    v["region"]["outputs"][0]["memref"]["shape"] = json!([4, 4]);
    assert_eq!(code(v), "E1214");
}

#[test]
fn e1215_yield_dtype_mismatch() {
    let mut v = let_a(json!(1.0));
    v["region"]["yield"][0]["cast"] = json!("fp16");
    assert_eq!(code(v), "E1215");
}

#[test]
fn e1216_iter_size_missing() {
    let mut v = let_a(json!(1.0));
    v["region"]["iters"][0] = json!({"name": "i"});
    assert!(
        verify(&region(v.clone())).is_ok(),
        "size taken from the output"
    );
    v["region"]["outputs"] = json!([]);
    v["region"]["yield"] = json!([]);
    assert_eq!(code(v), "E1216");
}

fn tensors(kv: Vec<(&str, Tensor)>) -> BTreeMap<String, Tensor> {
    kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

#[test]
fn out_of_bounds_at_run_time_is_an_error_not_a_panic() {
    // An index the static check cannot bound (its arithmetic overflows) is caught at run time.
    let v = let_a(x(json!([{"mul": [4611686018427387904_i64, "i"]}, "j"])));
    let r = region(v);
    let ins = tensors(vec![
        ("X", rand_tensor(1, DType::F32, &[4, 3])),
        ("v", rand_tensor(2, DType::F32, &[3])),
    ]);
    let d = evaluate_region(&r, &BTreeMap::new(), &ins).expect_err("out of bounds");
    assert_eq!(d.first_code(), "E1220", "{d}");
    // Statically visible: E1209 before any evaluation.
    let r = region(let_a(x(json!([{"add": ["i", 1]}, "j"]))));
    let d = evaluate_region(&r, &BTreeMap::new(), &ins).expect_err("unguarded");
    assert_eq!(d.first_code(), "E1209");
}

#[test]
fn extents_extension_and_reduce_ops() {
    // a[i, j] = Σ_k X[i, k]·v[k] (explicit extent `K`) + min_k v[k] (extent from the read)
    //         + Π_j X[i, j] (a reduce axis shadowing iter j) − fp16(transpose view of X[i, j]).
    let lets = json!([
        {"let": "dot", "expr": {"reduce": {"op": "sum", "axes": ["k"], "extents": {"k": "K"}, "dtype": "fp32",
            "body": {"mul": [x(json!(["i", "k"])), {"read": {"tensor": "v", "map": ["k"]}}]}}}},
        {"let": "lo", "expr": {"reduce": {"op": "min", "axes": ["k"], "dtype": "fp32",
            "body": {"read": {"tensor": "v", "map": ["k"]}}}}},
        {"let": "pr", "expr": {"reduce": {"op": "prod", "axes": ["j"], "dtype": "fp32", "body": x(json!(["i", "j"]))}}},
        {"let": "t", "expr": {"transpose": {"operand": x(json!(["i", "j"])), "permutation": [1, 0]}}},
        {"let": "a", "expr": {"add": [{"add": ["dot", "lo"]}, {"sub": ["pr", {"cast": {"to": "fp16", "x": "t"}}]}]}}
    ]);
    let mut v = doc(lets);
    v["region"]["iters"][0]["size"] = json!("M");
    v["region"]["inputs"][0]["memref"]["shape"] = json!(["M", "K"]);
    v["region"]["outputs"][0]["memref"]["shape"] = json!(["M", 3]);
    let r = region(v);
    let xs = rand_tensor(1, DType::F32, &[5, 3]);
    let vs = rand_tensor(2, DType::F32, &[3]);
    let (xv, vv) = (xs.to_f64(), vs.to_f64());
    let b: BTreeMap<String, i64> = [("M".to_string(), 5), ("K".to_string(), 3)].into();
    let out = evaluate_region(&r, &b, &tensors(vec![("X", xs), ("v", vs)]))
        .unwrap_or_else(|d| panic!("{d}"));
    let f = |x: f64| DType::F32.round(x);
    let lo = vv.iter().cloned().fold(f64::INFINITY, f64::min);
    let mut want = Vec::new();
    for i in 0..5 {
        let dot = (0..3).fold(0.0, |s, k| f(s + f(xv[i * 3 + k] * vv[k])));
        let pr = (0..3).fold(1.0, |p, j| f(p * xv[i * 3 + j]));
        for j in 0..3 {
            let t = DType::F16.round(xv[i * 3 + j]);
            want.push(f(f(dot + lo) + f(pr - t)));
        }
    }
    assert_close(&out["Y"], &want, &[5, 3], 0.0, 0.0);
}
