//! The second contraction a tile sums ([`super::Gemm::second`]): found where its operands
//! read the main contraction's `M` and `N` axes, not where they are swapped; priced and
//! planned on SIMT with `K` the sum of both.

use super::{analyze, Shape, Sizes};
use crate::ir::dim::Dim;
use crate::ir::region::Region;

/// Every symbol at 64.
struct At64;

impl Sizes for At64 {
    fn numel(&self, shape: &[Dim]) -> u64 {
        shape
            .iter()
            .map(|d| d.as_int().unwrap_or(64) as u64)
            .product()
    }
}

/// `Y[m, n] = Σ_k A[m, k]·B[k, n] + Σ_j C[·]·D[·]` (fp16 inputs, fp32 sums), the second
/// product's reads given as `c_map`, `d_map`.
fn two_products(c_map: &str, d_map: &str) -> Region {
    let input = |name: &str, shape: &str| {
        format!(
            r#"{{"name":"{name}","dtype":"fp16","memref":{{"shape":{shape},"alignment":128,"noalias":true,"layout":{{"kind":"row_major"}}}}}}"#
        )
    };
    let text = format!(
        r#"{{"region": {{
  "name": "summed",
  "iters": [{{"name":"m","size":"M"}},{{"name":"n","size":"N"}}],
  "inputs": [{a}, {b}, {c}, {d}],
  "outputs": [{{"name":"Y","dtype":"fp32","memref":{{"shape":["M","N"],"alignment":128,"noalias":true,"layout":{{"kind":"row_major"}}}},"materialize":"gmem"}}],
  "lets": [
    {{"let":"p","expr":{{"reduce":{{"op":"sum","axes":["k"],"dtype":"fp32","body":{{"mul":[
      {{"read":{{"tensor":"A","map":["m","k"]}}}}, {{"read":{{"tensor":"B","map":["k","n"]}}}}]}}}}}}}},
    {{"let":"q","expr":{{"reduce":{{"op":"sum","axes":["j"],"extents":{{"j":"J"}},"dtype":"fp32","body":{{"mul":[
      {{"read":{{"tensor":"C","map":{c_map}}}}}, {{"read":{{"tensor":"D","map":{d_map}}}}}]}}}}}}}},
    {{"let":"y","expr":{{"add":["p","q"]}}}}
  ],
  "yield": [{{"from":"y","to":"Y"}}]
}}}}"#,
        a = input("A", r#"["M","K"]"#),
        b = input("B", r#"["K","N"]"#),
        c = input("C", r#"["M","J"]"#),
        d = input("D", r#"["J","N"]"#),
    );
    Region::from_json_str(&text).expect("the region parses")
}

#[test]
fn a_second_product_over_the_same_rows_and_columns_is_summed_by_the_tile() {
    let r = two_products(r#"["m","j"]"#, r#"["j","n"]"#);
    let w = analyze(&r, &At64).expect("analyzes");
    let Shape::Contraction(g) = &w.shape else {
        panic!("{:?}", w.shape)
    };
    assert_eq!(g.second.as_deref(), Some("q"));
    assert_eq!((g.k, g.k_second), (128.0, 64.0), "K is both sums'");
    assert!(!g.tensor_cores, "the summed tile runs on SIMT");
    assert!(w.pointwise_refolds.lane.loads == 0.0 && w.pointwise_refolds.thread.loads == 0.0);
}

#[test]
fn a_second_product_with_rows_and_columns_swapped_is_not() {
    // `C[n, j]·D[j, m]`: its left operand walks the main product's columns.
    let r = two_products(r#"["n","j"]"#, r#"["j","m"]"#);
    let w = analyze(&r, &At64).expect("analyzes");
    let Shape::Contraction(g) = &w.shape else {
        panic!("{:?}", w.shape)
    };
    assert_eq!(g.second, None);
    assert_eq!((g.k, g.k_second), (64.0, 0.0));
    assert!(
        w.pointwise_refolds.lane.loads + w.pointwise_refolds.thread.loads > 0.0,
        "the other product is folded at every output point"
    );
}
