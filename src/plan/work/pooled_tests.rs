//! The pooled tile ([`super::PoolTile`]): a window reduction over a contraction whose window
//! axes index only the contraction's rows is also a tile (its window the innermost `M` axes);
//! a window over the columns, or taller than any tile, is the compute-at nest only.

use super::{analyze, Shape, Sizes};
use crate::ir::dim::Dim;
use crate::ir::region::Region;

/// Every symbol at 2.
struct At2;

impl Sizes for At2 {
    fn numel(&self, shape: &[Dim]) -> u64 {
        shape
            .iter()
            .map(|d| d.as_int().unwrap_or(2) as u64)
            .product()
    }
}

/// `Y[b, n] = Σ_(w < W) relu(Σ_k A[b, w_a, k]·B[k, n_b])`: the window `w` of extent `W` over
/// the product, `A` read at `w_a` (a map entry), `B` at column `n_b`.
fn pooled(window: i64, w_a: &str, n_b: &str) -> Region {
    let input = |name: &str, shape: &str| {
        format!(
            r#"{{"name":"{name}","dtype":"fp32","memref":{{"shape":{shape},"alignment":128,"noalias":true,"layout":{{"kind":"row_major"}}}}}}"#
        )
    };
    let text = format!(
        r#"{{"region": {{
  "name": "pooled",
  "iters": [{{"name":"b","size":"N"}},{{"name":"n","size":64}}],
  "inputs": [{a}, {b}],
  "outputs": [{{"name":"Y","dtype":"fp32","memref":{{"shape":["N",64],"alignment":128,"noalias":true,"layout":{{"kind":"row_major"}}}},"materialize":"gmem"}}],
  "lets": [
    {{"let":"p","expr":{{"reduce":{{"op":"sum","axes":["w"],"extents":{{"w":{window}}},"dtype":"fp32","body":{{"relu":[
      {{"reduce":{{"op":"sum","axes":["k"],"extents":{{"k":96}},"dtype":"fp32","body":{{"mul":[
        {{"read":{{"tensor":"A","map":["b",{w_a},"k"]}}}}, {{"read":{{"tensor":"B","map":["k",{n_b}]}}}}]}}}}}}]}}}}}}}},
    {{"let":"y","expr":{{"div":["p",{window}.0]}}}}
  ],
  "yield": [{{"from":"y","to":"Y"}}]
}}}}"#,
        a = input("A", &format!(r#"["N",{},96]"#, window.max(64))),
        b = input("B", r#"[96,64]"#),
    );
    Region::from_json_str(&text).expect("the region parses")
}

#[test]
fn a_window_over_the_rows_is_a_pooled_tile() {
    let r = pooled(49, r#""w""#, r#""n""#);
    let w = analyze(&r, &At2).expect("analyzes");
    let Shape::ComputeAt(ca) = &w.shape else {
        panic!("{:?}", w.shape)
    };
    let tiled = ca.tiled.as_deref().expect("a pooled tile");
    let Shape::Contraction(g) = &tiled.shape else {
        panic!("{:?}", tiled.shape)
    };
    let pool = g.pool.as_ref().expect("the window");
    assert_eq!(
        (pool.window, pool.axes.as_slice()),
        (49, &["w".to_string()][..])
    );
    assert_eq!(g.axes.m, ["b", "w"], "the window is the innermost row axis");
    assert_eq!((g.m, g.n, g.k), (98.0, 64.0, 96.0));
    assert_eq!((g.rows_per_tile(64), g.rows_per_tile(128)), (49, 98));
    assert_eq!(
        g.rows_per_tile(32),
        0,
        "a 32-row tile holds no 49-row window"
    );
    assert!(!g.tensor_cores);
    assert_eq!(tiled.out_elems, 128.0, "one output per window and column");
}

#[test]
fn a_window_over_the_columns_is_not() {
    // `B[k, w]`: the window walks the product's columns.
    let r = pooled(4, r#""n""#, r#""w""#);
    let w = analyze(&r, &At2).expect("analyzes");
    let Shape::ComputeAt(ca) = &w.shape else {
        panic!("{:?}", w.shape)
    };
    assert!(ca.tiled.is_none(), "{:?}", ca.tiled);
}

#[test]
fn a_window_taller_than_any_tile_is_not() {
    let r = pooled(144, r#""w""#, r#""n""#);
    let w = analyze(&r, &At2).expect("analyzes");
    let Shape::ComputeAt(ca) = &w.shape else {
        panic!("{:?}", w.shape)
    };
    assert!(ca.tiled.is_none(), "144 rows > {}", super::MAX_WINDOW);
}
