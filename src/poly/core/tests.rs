//! Unit tests of Poly Core on hand-written regions.

use super::{build, compute_at};
use crate::ir::region::program::{RegionProgram, Step};
use crate::ir::region::Region;
use crate::poly::view;
use crate::target::Arch;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn memref(shape: Value) -> Value {
    json!({"shape": shape, "alignment": 16, "noalias": true, "layout": {"kind": "row_major"}})
}

/// A one-output fp32 region yielding its last let.
fn region(
    name: &str,
    iters: &[(&str, Value)],
    inputs: &[(&str, Value)],
    output: (&str, Value),
    lets: &[(&str, Value)],
) -> Region {
    let v = json!({"region": {
        "name": name,
        "iters": iters.iter().map(|(n, s)| json!({"name": n, "size": s})).collect::<Vec<_>>(),
        "inputs": inputs.iter()
            .map(|(n, s)| json!({"name": n, "dtype": "fp32", "memref": memref(s.clone())}))
            .collect::<Vec<_>>(),
        "outputs": [{"name": output.0, "dtype": "fp32", "memref": memref(output.1),
                     "materialize": "gmem"}],
        "lets": lets.iter().map(|(n, e)| json!({"let": n, "expr": e})).collect::<Vec<_>>(),
        "yield": [{"from": lets.last().expect("a let").0, "to": output.0}],
    }});
    Region::from_json_value(v).expect("region parses")
}

fn program(regions: Vec<Region>) -> RegionProgram {
    RegionProgram {
        inputs: Vec::new(),
        steps: regions.into_iter().map(Step::Region).collect(),
        outputs: Vec::new(),
        derived: Vec::new(),
    }
}

/// Seven stacked pads, one per dimension, whose fill branch reads `F`: `F`'s guard is the
/// conjunction of seven negated in-bounds checks, `2^7 = 128` pieces, over the budget.
fn pad_chain() -> Region {
    let dims: Vec<String> = (0..7).map(|k| format!("i{k}")).collect();
    let shape = json!(vec![4; 7]);
    let map: Vec<Value> = dims.iter().map(|d| json!(d)).collect();
    let mut e = json!({"read": {"tensor": "F", "map": map}});
    for d in dims.iter().rev() {
        let inside = json!({"and": [{"ge": [d, 1]}, {"lt": [d, 3]}]});
        e = json!({"select": {"pred": inside,
            "then": {"read": {"tensor": "X", "map": map}}, "else": e}});
    }
    let iters: Vec<(&str, Value)> = dims.iter().map(|d| (d.as_str(), json!(4))).collect();
    region(
        "chain",
        &iters,
        &[("X", shape.clone()), ("F", shape.clone())],
        ("Y", shape),
        &[("y", e)],
    )
}

#[test]
fn excessive_piecewise_guard_raises_w2101() {
    let v = view::build_region(&pad_chain());
    let w: Vec<_> = v.diagnostics.iter().filter(|d| d.code == "W2101").collect();
    assert_eq!(w.len(), 1, "{:?}", v.diagnostics);
    assert_eq!(w[0].kind, "ExcessivePiecewise");
    assert_eq!(w[0].severity, crate::diag::Severity::Warning);
    assert_eq!(
        w[0].details["at_value"], "Y",
        "the value the guarded statement writes"
    );
    assert!(w[0].why.contains("128 pieces"), "{}", w[0].why);
    let core = build(&program(vec![pad_chain()]), &BTreeMap::new(), Arch::Sm90);
    let j = core.to_json();
    let diags = j["poly_core"]["diagnostics"]
        .as_array()
        .expect("diagnostics");
    assert!(diags.iter().any(|d| d["code"] == "W2101"), "{diags:?}");
    assert_eq!(
        j["poly_core"]["regions"][0]["analysis"]["affine_closed"],
        false
    );
}

fn conv() -> Region {
    region(
        "conv",
        &[
            ("n", json!(2)),
            ("o", json!(8)),
            ("h", json!(16)),
            ("w", json!(16)),
        ],
        &[("X", json!([2, 4, 18, 18])), ("W", json!([8, 4, 3, 3]))],
        ("C", json!([2, 8, 16, 16])),
        &[(
            "acc",
            json!({"reduce": {"op": "sum", "axes": ["c", "kh", "kw"], "dtype": "fp32",
                "body": {"mul": [
                    {"read": {"tensor": "X", "map": ["n", "c", {"add": ["h", "kh"]},
                                                     {"add": ["w", "kw"]}]}},
                    {"read": {"tensor": "W", "map": ["o", "c", "kh", "kw"]}}]}}}),
        )],
    )
}

fn pool(kernel: i64, stride: i64, out: i64) -> Region {
    let ix = |v: &str, r: &str| json!({"add": [{"mul": [stride, v]}, r]});
    region(
        "pool",
        &[
            ("n", json!(2)),
            ("o", json!(8)),
            ("h", json!(out)),
            ("w", json!(out)),
        ],
        &[("C", json!([2, 8, 16, 16]))],
        ("P", json!([2, 8, out, out])),
        &[(
            "acc",
            json!({"reduce": {"op": "max", "axes": ["rh", "rw"], "extents": {"rh": kernel, "rw": kernel},
                "dtype": "fp32",
                "body": {"read": {"tensor": "C", "map": ["n", "o", ix("h", "rh"), ix("w", "rw")]}}}}),
        )],
    )
}

#[test]
fn a_normal_conv_raises_no_w2101() {
    let core = build(&program(vec![conv()]), &BTreeMap::new(), Arch::Sm80);
    assert!(core.diagnostics.is_empty(), "{:?}", core.diagnostics);
    let r = &core.regions[0];
    assert!(r.affine_closed);
    assert_eq!(r.parallel_axes, ["n", "o", "h", "w"]);
    assert_eq!(r.reduce_axes, ["c", "kh", "kw"]);
    // No plan: constant non-power-of-two extents (3x3 window) are tail axes.
    assert_eq!(r.tail_axes, ["kh", "kw"]);
    assert_eq!(r.barrier_hints["model"], "none");
}

#[test]
fn compute_at_halo_follows_window_and_stride() {
    for (k, s, out, halo, bytes) in [(2, 2, 8, 0, 0), (3, 2, 7, 1, 20), (3, 1, 14, 2, 32)] {
        let core = build(
            &program(vec![conv(), pool(k, s, out)]),
            &BTreeMap::new(),
            Arch::Sm90,
        );
        assert_eq!(core.pairs.len(), 1);
        let ca = &core.pairs[0].compute_at;
        assert!(ca.ok, "{}", ca.why);
        assert_eq!(ca.halo_per_axis["h"], halo, "k{k} s{s}");
        assert_eq!(ca.halo_per_axis["w"], halo, "k{k} s{s}");
        assert_eq!(ca.halo_per_axis["n"], 0);
        assert_eq!(ca.halo_bytes, bytes, "k{k} s{s}");
    }
}

#[test]
fn pointwise_consumer_needs_only_a_register() {
    let relu = region(
        "relu",
        &[
            ("n", json!(2)),
            ("o", json!(8)),
            ("h", json!(16)),
            ("w", json!(16)),
        ],
        &[("C", json!([2, 8, 16, 16]))],
        ("R", json!([2, 8, 16, 16])),
        &[(
            "y",
            json!({"relu": [{"read": {"tensor": "C", "map": ["n", "o", "h", "w"]}}]}),
        )],
    );
    let core = build(&program(vec![conv(), relu]), &BTreeMap::new(), Arch::Sm90);
    let pair = &core.pairs[0];
    assert!(pair.compute_at.one_to_one);
    assert_eq!(pair.min_buffer["buffer"], "reg");
}

#[test]
fn a_read_behind_the_consumer_point_is_a_negative_distance() {
    // A padded 3x3 window at `h - 1`: the first element read is one row behind.
    let v = view::build(&program(vec![conv(), conv_reading("C")]));
    let p = v.block("S_conv_acc").expect("producer");
    let c = v.block("S_conv2_acc").expect("consumer");
    let ca = compute_at(p, c, "C", 4);
    assert!(!ca.ok);
    assert!(
        ca.why.contains("negative dependence distance"),
        "{}",
        ca.why
    );
}

fn conv_reading(t: &str) -> Region {
    let guard = json!({"and": [{"ge": [{"add": ["h", "kh", -1]}, 0]},
                               {"lt": [{"add": ["h", "kh", -1]}, 16]}]});
    region(
        "conv2",
        &[
            ("n", json!(2)),
            ("o", json!(8)),
            ("h", json!(16)),
            ("w", json!(16)),
        ],
        &[(t, json!([2, 8, 16, 16])), ("V", json!([8, 8, 3]))],
        ("D", json!([2, 8, 16, 16])),
        &[(
            "acc",
            json!({"reduce": {"op": "sum", "axes": ["c", "kh"], "extents": {"c": 8, "kh": 3},
                "dtype": "fp32",
                "body": {"mul": [
                    {"select": {"pred": guard,
                        "then": {"read": {"tensor": t, "map": ["n", "c",
                            {"add": ["h", "kh", -1]}, "w"]}},
                        "else": 0.0}},
                    {"read": {"tensor": "V", "map": ["o", "c", "kh"]}}]}}}),
        )],
    )
}
