//! Unit tests of region playback: value kinds (i32 arithmetic is exact, not rounded through
//! fp32), empty iteration spaces, and `min`/`max` offsets in read maps.

use super::evaluate_region;
use crate::ir::dtype::DType;
use crate::ir::region::Region;
use crate::tensor::Tensor;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn memref(shape: Value) -> Value {
    json!({"shape": shape, "alignment": 16, "noalias": true, "layout": {"kind": "row_major"}})
}

/// `Y[i] = expr` over `i < n`, reading `X` (`dtype`, `[m]`); `Y` has dtype `out`.
fn run(dtype: &str, x: &[f64], n: Value, out: &str, expr: Value, b: &[(&str, i64)]) -> Vec<f64> {
    let xdt = DType::parse(dtype).expect("dtype");
    let r = Region::from_json_value(json!({"region": {
        "name": "t",
        "iters": [{"name": "i", "size": n}],
        "inputs": [{"name": "X", "dtype": dtype, "memref": memref(json!([x.len()]))}],
        "outputs": [{"name": "Y", "dtype": out, "memref": memref(json!([n])), "materialize": "gmem"}],
        "lets": [{"let": "a", "expr": expr}],
        "yield": [{"from": "a", "to": "Y", "cast": out}]
    }}))
    .unwrap_or_else(|e| panic!("{e}"));
    let ins = [("X".to_string(), Tensor::from_f64(xdt, vec![x.len()], x))].into();
    let b: BTreeMap<String, i64> = b.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let out = evaluate_region(&r, &b, &ins).unwrap_or_else(|d| panic!("{d}"));
    out["Y"].to_f64()
}

fn x() -> Value {
    json!({"read": {"tensor": "X", "map": ["i"]}})
}

const MAX: f64 = i32::MAX as f64;

#[test]
fn i32_arithmetic_is_exact() {
    let big = [MAX, 16_777_217.0];
    // Adding 0 (a pad's fill in a concat) keeps i32::MAX; f32 would give 2^31, wrapping to MIN.
    assert_eq!(
        run(
            "i32",
            &big,
            json!(2),
            "i32",
            json!({"add": [x(), 0.0]}),
            &[]
        ),
        big
    );
    // -1 · x, as Tiny's exact i32 product.
    assert_eq!(
        run(
            "i32",
            &big,
            json!(2),
            "i32",
            json!({"mul": [-1.0, x()]}),
            &[]
        ),
        [-MAX, -16_777_217.0]
    );
    // An i32 product wraps exactly (65537² = 2³² + 2·65536 + 1).
    assert_eq!(
        run(
            "i32",
            &[65537.0],
            json!(1),
            "i32",
            json!({"mul": [x(), x()]}),
            &[]
        ),
        [131073.0]
    );
    // The constant i32::MAX is exact (the identity of an i32 `min`).
    let m = json!({"min": [x(), MAX]});
    assert_eq!(run("i32", &big, json!(2), "i32", m, &[]), big);
}

#[test]
fn a_cast_to_fp32_makes_the_op_a_float_op() {
    let f = json!({"cast": {"to": "fp32", "x": x()}});
    let sq = json!({"mul": [f.clone(), f]});
    assert_eq!(
        run("i32", &[65537.0], json!(1), "fp32", sq, &[]),
        [(65537.0f64 * 65537.0) as f32 as f64]
    );
}

#[test]
fn reductions_fold_in_their_dtype() {
    let xs = [65537.0, 65537.0, 3.0];
    let red = |op: &str, init: Option<f64>| {
        let mut r = json!({"reduce": {"op": op, "axes": ["k"], "dtype": "i32",
            "body": {"read": {"tensor": "X", "map": ["k"]}}}});
        if let Some(v) = init {
            r["reduce"]["init"] = json!(v);
        }
        run("i32", &xs, json!(1), "i32", r, &[])
    };
    // Exact i32 product: 65537² wraps to 131073, times 3.
    assert_eq!(red("prod", None), [393219.0]);
    // The min of nothing but the identity would be i32::MAX; with the values, 3.
    assert_eq!(red("min", Some(MAX)), [3.0]);
    // Bool: a cumulative min over bool accumulates in i32 from i32::MAX, then `0 < y`.
    let any = json!({"cmplt": [0.0, {"reduce": {"op": "min", "axes": ["k"], "extents": {"k": 0},
        "dtype": "i32", "body": 0.0}}]});
    assert_eq!(run("bool", &[1.0], json!(1), "bool", any, &[]), [1.0]);
}

#[test]
fn an_empty_iteration_space_evaluates_nothing() {
    // X[i + 9] is outside X, but with no i nothing is read.
    let far = json!({"read": {"tensor": "X", "map": [{"add": ["i", 9]}]}});
    assert!(run("fp32", &[1.0, 2.0], json!("T"), "fp32", far, &[("T", 0)]).is_empty());
}

#[test]
fn read_maps_take_min_max_offsets() {
    // A slice start clamped to the symbolic size: X[i + min(1, S)].
    let e = json!({"read": {"tensor": "X", "map": [{"add": ["i", {"min": [1, "S"]}]}]}});
    let xs = [1.0, 2.0, 3.0];
    assert_eq!(
        run("fp32", &xs, json!(2), "fp32", e, &[("S", 3)]),
        [2.0, 3.0]
    );
    let e = json!({"read": {"tensor": "X", "map": [{"max": [0, {"add": ["S", -3]}]}]}});
    assert_eq!(run("fp32", &xs, json!(1), "fp32", e, &[("S", 5)]), [3.0]);
}

/// Plays `lets` (the last yielded to `Y`, fp32 `[4, 9]` over iters `i`, `j`) back row by row
/// and point by point over `X` (fp32 `[5, 7]`) and `I` (i32 `[9]`, values `idx`): both give the
/// same bits, or both the same error.
fn rows_match_points(lets: Value, idx: &[f64]) -> Result<Vec<f64>, String> {
    let xs: Vec<f64> = (0..35)
        .map(|v| ((v * 37 % 11) as f64 - 5.0) * 0.37)
        .collect();
    let nlets = lets.as_array().map_or(0, |l| l.len());
    let r = Region::from_json_value(json!({"region": {
        "name": "t",
        "iters": [{"name": "i", "size": 4}, {"name": "j", "size": 9}],
        "inputs": [
            {"name": "X", "dtype": "fp32", "memref": memref(json!([5, 7]))},
            {"name": "I", "dtype": "i32", "memref": memref(json!([9]))}
        ],
        "outputs": [{"name": "Y", "dtype": "fp32", "memref": memref(json!([4, 9])),
            "materialize": "gmem"}],
        "lets": lets,
        "yield": [{"from": format!("l{}", nlets - 1), "to": "Y"}]
    }}))
    .map_err(|e| e.to_string())?;
    let ins: BTreeMap<String, Tensor> = [
        (
            "X".to_string(),
            Tensor::from_f64(DType::F32, vec![5, 7], &xs),
        ),
        ("I".to_string(), Tensor::from_f64(DType::I32, vec![9], idx)),
    ]
    .into();
    let b = BTreeMap::new();
    let rows = evaluate_region(&r, &b, &ins).map(|o| o["Y"].to_f64());
    let points = super::evaluate_region_points(&r, &b, &ins).map(|o| o["Y"].to_f64());
    match (rows, points) {
        (Ok(a), Ok(p)) => {
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a), bits(&p), "rows and points differ");
            Ok(a)
        }
        (Err(a), Err(p)) => {
            assert_eq!(a.to_string(), p.to_string());
            Err(a.to_string())
        }
        (a, p) => panic!("rows {a:?} vs points {p:?}"),
    }
}

fn lets(exprs: &[Value]) -> Value {
    let l: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(n, e)| json!({"let": format!("l{n}"), "expr": e}))
        .collect();
    json!(l)
}

fn xr(a: Value, b: Value) -> Value {
    json!({"read": {"tensor": "X", "map": [a, b]}})
}

#[test]
fn row_playback_matches_point_playback() {
    let idx = [0.0, 6.0, 3.0, 1.0, 2.0, 5.0, 4.0, 0.0, 100.0];
    let jk = json!({"add": ["j", "k", -1]});
    let cases = [
        // A padded 1-D convolution: guards cut the row into spans.
        json!({"reduce": {"op": "sum", "axes": ["k"], "extents": {"k": 3}, "dtype": "fp32",
            "body": {"mul": [{"select": {"pred": {"and": [{"ge": [jk, 0]}, {"lt": [jk, 7]}]},
                "then": xr(json!("i"), jk), "else": 0.0}}, xr(json!(4), json!("k"))]}}}),
        // Stride 2 and a floordiv map (lane by lane).
        json!({"select": {"pred": {"lt": [{"mul": [2, "j"]}, 7]},
            "then": xr(json!("i"), json!({"mul": [2, "j"]})), "else": -2.5}}),
        json!({"add": [xr(json!("i"), json!({"floordiv": ["j", 2]})), {"index": {"add": [{"mul": [2, "j"]}, "i", -3]}}]}),
        // Or and eq predicates (masks and single lanes), a floordiv map.
        json!({"select": {"pred": {"or": [{"lt": ["j", 2]}, {"ge": ["j", 7]}]},
            "then": xr(json!("i"), json!({"floordiv": ["j", 2]})), "else": {"select": {"pred":
            {"eq": ["j", 3]}, "then": xr(json!("i"), json!("j")), "else": "NAN"}}}}),
        // Value where around a gather: the untaken lane's index 100 is never read.
        json!({"where": [{"cmplt": [{"index": "j"}, 8.0]},
            {"gather": {"tensor": "X", "map": ["i", 0], "axis": 1,
                "index": {"read": {"tensor": "I", "map": ["j"]}}}}, {"exp": [xr(json!(0), json!(0))]}]}),
        // A max reduce over i (uniform along j) and a product of two row values.
        json!({"mul": [{"reduce": {"op": "max", "axes": ["r"], "extents": {"r": 5}, "dtype": "fp32",
            "body": xr(json!("r"), json!(3))}}, {"relu": [xr(json!("i"), json!({"floordiv": ["j", 2]}))]}]}),
    ];
    for c in &cases {
        rows_match_points(lets(std::slice::from_ref(c)), &idx).unwrap_or_else(|e| panic!("{e}"));
    }
    // A let read back over a reduce that rebinds its row iter (dynamic scoping), broadcast.
    let a = xr(json!("i"), json!({"floordiv": ["j", 2]}));
    let b = json!({"reduce": {"op": "sum", "axes": ["j"], "extents": {"j": 9}, "dtype": "fp32",
        "body": "l0"}});
    let c = json!({"sub": ["l0", "l1"]});
    rows_match_points(lets(&[a, b, c]), &idx).unwrap_or_else(|e| panic!("{e}"));
    // An out-of-range gather index on a taken lane is the same error both ways.
    let g = json!({"gather": {"tensor": "X", "map": ["i", 0], "axis": 1,
        "index": {"read": {"tensor": "I", "map": ["j"]}}}});
    let e = rows_match_points(lets(&[g]), &idx).expect_err("index 100 is out of range");
    assert!(e.contains("E1220"), "{e}");
}
