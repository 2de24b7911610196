//! Unit tests of the Poly-View on hand-written regions.

use super::{build_region, isl};
use crate::ir::region::Region;
use serde_json::{json, Value};

fn memref(shape: Value) -> Value {
    json!({"shape": shape, "alignment": 16, "noalias": true, "layout": {"kind": "row_major"}})
}

/// A region from its parts: `iters` `[(name, size)]`, `inputs` / `outputs` `[(name, shape)]`
/// (fp32), `lets` `[(name, expr)]`, one yield of the last let to the first output.
fn region(
    iters: &[(&str, Value)],
    inputs: &[(&str, Value)],
    outputs: &[(&str, Value)],
    lets: &[(&str, Value)],
) -> Region {
    let v = json!({"region": {
        "name": "r",
        "iters": iters.iter().map(|(n, s)| json!({"name": n, "size": s})).collect::<Vec<_>>(),
        "inputs": inputs.iter()
            .map(|(n, s)| json!({"name": n, "dtype": "fp32", "memref": memref(s.clone())}))
            .collect::<Vec<_>>(),
        "outputs": outputs.iter()
            .map(|(n, s)| json!({"name": n, "dtype": "fp32", "memref": memref(s.clone()),
                                 "materialize": "gmem"}))
            .collect::<Vec<_>>(),
        "lets": lets.iter().map(|(n, e)| json!({"let": n, "expr": e})).collect::<Vec<_>>(),
        "yield": [{"from": lets.last().expect("a let").0, "to": outputs[0].0}],
    }});
    Region::from_json_value(v).expect("region parses")
}

fn gemm() -> Region {
    region(
        &[("m", json!("M")), ("n", json!("N"))],
        &[("A", json!(["M", "K"])), ("B", json!(["K", "N"]))],
        &[("C0", json!(["M", "N"]))],
        &[(
            "acc",
            json!({"reduce": {"op": "sum", "axes": ["k"], "dtype": "fp32",
                "body": {"mul": [{"read": {"tensor": "A", "map": ["m", "k"]}},
                                 {"read": {"tensor": "B", "map": ["k", "n"]}}]}}}),
        )],
    )
}

#[test]
fn matmul_attrs_equal_the_seed_gemm_dump() {
    // Seed 001 §5.2 (代表ダンプ GEMM): attrs of the contraction block.
    let v = build_region(&gemm());
    let j = v.to_json();
    let b = &j["poly_view"]["blocks"][0];
    assert_eq!(b["kind"], "contraction_pattern");
    assert_eq!(
        b["attrs"],
        json!({"pattern": "matmul", "lhs_idx": ["m", "k"], "rhs_idx": ["k", "n"],
               "out_idx": ["m", "n"], "reduce_idx": ["k"], "affine_offsets": {}})
    );
    // The seed's accesses, up to renaming (its domain is the 2-D output space, ours the 3-D
    // statement; the maps agree).
    let s = v.block("S_r_acc").expect("block");
    let seed = [
        "[M, N, K] -> { [m, n, k] -> A[m, k] }",
        "[M, N, K] -> { [m, n, k] -> B[k, n] }",
    ];
    let rn = [("", "S_r_acc")];
    assert_eq!(isl::same(seed[0], &s.access_isl(0), &rn), Ok(true));
    assert_eq!(isl::same(seed[1], &s.access_isl(1), &rn), Ok(true));
    assert!(v.diagnostics.is_empty(), "{:?}", v.diagnostics);
    assert_eq!(v.blocks.len(), 1, "no epilogue: the reduction writes C0");
}

#[test]
fn padded_read_has_a_piecewise_domain() {
    // Seed 001 §4.5 Conv: the in-bounds piece reads X, its complement (a union: ¬(a ∧ b) is
    // ¬a ∨ ¬b) reads the fill `F`.
    let pred = json!({"or": [
        {"and": [{"ge": [{"add": ["h", -1]}, 0]}, {"lt": [{"add": ["h", -1]}, "H"]}]},
        {"eq": ["h", 0]}]});
    let r = region(
        &[("h", json!("H+2"))],
        &[("X", json!(["H"])), ("F", json!(["H+2"]))],
        &[("Y", json!(["H+2"]))],
        &[(
            "y",
            json!({"select": {"pred": pred,
                "then": {"read": {"tensor": "X", "map": [{"add": ["h", -1]}]}},
                "else": {"read": {"tensor": "F", "map": ["h"]}}}}),
        )],
    );
    let v = build_region(&r);
    let s = &v.blocks[0];
    let x = s.accesses.iter().find(|a| a.tensor == "X").expect("X read");
    let f = s.accesses.iter().find(|a| a.tensor == "F").expect("F read");
    assert_eq!(
        x.guard.as_ref().map(Vec::len),
        Some(2),
        "a disjunction: two pieces"
    );
    // ¬(p ∨ q) = (h < 1 ∨ h >= H + 1) ∧ (h < 0 ∨ h > 0): `h < 1 ∧ h > 0` is dropped and
    // `h < 1 ∧ h < 0` is `h < 0`; pieces are not checked for emptiness against the box.
    assert_eq!(f.guard.as_ref().map(Vec::len), Some(3), "{:?}", f.guard);
    let j = v.to_json();
    let acc = &j["poly_view"]["blocks"][0]["accesses"][0];
    assert_eq!(acc["tensor"], "X");
    let dom = acc["domain"].as_str().expect("guarded domain");
    assert!(
        isl::same(
            dom,
            "[H] -> { S_r[h] : 0 <= h < H + 2 and 1 <= h < H + 1; S_r[h] : 0 <= h < H + 2 \
             and h = 0 }",
            &[]
        )
        .expect("reads back"),
        "{dom}"
    );
}

#[test]
fn gather_is_non_scop_and_a_boundary() {
    let r = region(
        &[("t", json!("T")), ("d", json!(64))],
        &[("E", json!([1000, 64])), ("ids", json!(["T"]))],
        &[("Y", json!(["T", 64]))],
        &[(
            "y",
            json!({"gather": {"tensor": "E", "map": [0, "d"], "axis": 0,
                "index": {"read": {"tensor": "ids", "map": ["t"]}}}}),
        )],
    );
    let v = build_region(&r);
    let s = &v.blocks[0];
    assert_eq!(s.non_scop.len(), 1, "{:?}", s.non_scop);
    let j = v.to_json();
    let b = &j["poly_view"]["blocks"][0];
    assert_eq!(b["non_scop"], true);
    assert!(b["boundary"]
        .as_str()
        .is_some_and(|w| w.contains("region boundary") && w.contains("gather")));
    let e = b["accesses"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["tensor"] == "E"))
        .expect("E");
    assert_eq!(e["opaque"], true);
    assert!(
        isl::same(
            e["map"].as_str().expect("map"),
            "[T] -> { S_r[t, d] -> E[x, d] : 0 <= x < 1000 }",
            &[]
        )
        .expect("reads back"),
        "{}",
        e["map"]
    );
    assert!(v.diagnostics.is_empty(), "a data index is no E1203");
}

#[test]
fn min_of_a_loop_variable_and_products_are_non_scop() {
    let r = region(
        &[("i", json!(8)), ("j", json!(8))],
        &[("X", json!([64]))],
        &[("Y", json!([8, 8]))],
        &[(
            "y",
            json!({"add": [{"read": {"tensor": "X", "map": [{"mul": ["i", "j"]}]}},
                           {"read": {"tensor": "X", "map": [{"min": ["i", 3]}]}}]}),
        )],
    );
    let v = build_region(&r);
    assert_eq!(v.blocks[0].non_scop.len(), 2, "{:?}", v.blocks[0].non_scop);
}

#[test]
fn e1203_for_an_index_computed_with_idiv() {
    let r = region(
        &[("t", json!(8))],
        &[("E", json!([4]))],
        &[("Y", json!([8]))],
        &[(
            "y",
            json!({"gather": {"tensor": "E", "map": [0], "axis": 0,
                "index": {"idiv": [{"index": "t"}, 2]}}}),
        )],
    );
    let v = build_region(&r);
    let codes: Vec<&str> = v.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["E1203"]);
    assert_eq!(v.diagnostics[0].kind, "MissingDivGuard");
    assert!(v.to_json()["poly_view"]["diagnostics"][0]["suggestion"]
        .as_str()
        .is_some_and(|s| s.contains("floordiv")));
}

#[test]
fn e1304_for_an_iter_size_or_an_unguarded_overrun() {
    let bad_iter = region(
        &[("i", json!(8))],
        &[("X", json!([16]))],
        &[("Y", json!([16]))],
        &[("y", json!({"read": {"tensor": "X", "map": ["i"]}}))],
    );
    let v = build_region(&bad_iter);
    assert_eq!(
        v.diagnostics.iter().map(|d| d.code).collect::<Vec<_>>(),
        ["E1304"]
    );
    assert_eq!(v.diagnostics[0].kind, "AxisAlignmentMismatch");
    let overrun = region(
        &[("i", json!("M"))],
        &[("X", json!(["M"]))],
        &[("Y", json!(["M"]))],
        &[(
            "y",
            json!({"read": {"tensor": "X", "map": [{"add": ["i", 1]}]}}),
        )],
    );
    let v = build_region(&overrun);
    assert_eq!(
        v.diagnostics.iter().map(|d| d.code).collect::<Vec<_>>(),
        ["E1304"]
    );
    assert!(
        v.diagnostics[0].why.contains("i + 1"),
        "{}",
        v.diagnostics[0]
    );
    // Guarded, the same read is fine.
    let guarded = region(
        &[("i", json!("M"))],
        &[("X", json!(["M"]))],
        &[("Y", json!(["M"]))],
        &[(
            "y",
            json!({"select": {"pred": {"lt": [{"add": ["i", 1]}, "M"]},
                "then": {"read": {"tensor": "X", "map": [{"add": ["i", 1]}]}}, "else": 0.0}}),
        )],
    );
    assert!(build_region(&guarded).diagnostics.is_empty());
}

#[test]
fn reductions_over_a_subset_of_iters_use_local_buffers() {
    // LayerNorm-like: mean over n, then a pointwise statement reading the local buffer.
    let r = region(
        &[("m", json!("T")), ("n", json!(768))],
        &[("X", json!(["T", 768]))],
        &[("Y", json!(["T", 768]))],
        &[
            (
                "s",
                json!({"reduce": {"op": "sum", "axes": ["n"], "dtype": "fp32",
                    "body": {"read": {"tensor": "X", "map": ["m", "n"]}}}}),
            ),
            (
                "y",
                json!({"sub": [{"read": {"tensor": "X", "map": ["m", "n"]}}, "s"]}),
            ),
        ],
    );
    let v = build_region(&r);
    assert_eq!(v.blocks.len(), 2);
    let red = &v.blocks[0];
    assert_eq!(red.dims, ["m", "n"]);
    assert_eq!(red.out_dims, 1);
    assert!(red
        .accesses
        .iter()
        .any(|a| a.local && a.write && a.tensor == "s"));
    assert!(isl::same(
        &red.domain_isl(),
        "[T] -> { S_r_s[m, n] : 0 <= m < T and 0 <= n < 768 }",
        &[]
    )
    .expect("reads back"));
    let pw = &v.blocks[1];
    assert!(pw
        .accesses
        .iter()
        .any(|a| a.local && !a.write && a.tensor == "s"));
    assert!(pw
        .accesses
        .iter()
        .any(|a| !a.local && a.write && a.tensor == "Y"));
}
