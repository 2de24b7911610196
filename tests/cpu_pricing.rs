//! The CPU cost model prices a contraction by its GEMM view only when the C backend runs it as
//! a packed GEMM. Attention's `softmax(S) · V` with the softmax fused into the row operand
//! (operands reading lets) runs as loop nests that evaluate the softmax once per output element:
//! priced by the GEMM view (one exp per score), BERT-base's fused kernel at sequence 128 was
//! predicted 0.76 ms and ran 1224 ms, and extraction kept it in one layer of twelve.

mod common;

use common::native::region_input as input;
use dlc_egg::cpu::calibrate::KernelFeatures;
use dlc_egg::cpu::emit::{emit_region, runs_packed_contraction};
use dlc_egg::ir::region::Region;
use std::collections::{BTreeMap, BTreeSet};

/// `O[h, m, n] = Σ_k body(k) · V[h, k, n]` over `h < H, m < S, n < D`, with `lets` before it.
fn attention(h: u64, s: u64, d: u64, lets: &str, body: &str) -> Region {
    let text = format!(
        r#"{{"region": {{"name": "att", "iters": [{{"name": "h", "size": {h}}}, {{"name": "m", "size": {s}}}, {{"name": "n", "size": {d}}}],
  "inputs": [{}, {}],
  "outputs": [{{"name": "O", "dtype": "fp32", "memref": {{"shape": [{h}, {s}, {d}], "alignment": 128, "noalias": true, "layout": {{"kind": "row_major"}}}}, "materialize": "deferred"}}],
  "lets": [{lets}{{"let": "acc", "expr": {{"reduce": {{"op": "sum", "axes": ["k"], "init": 0.0, "dtype": "fp32", "body": {{"mul": [
    {body}, {{"read": {{"tensor": "V", "map": ["h", "k", "n"]}}}}]}}}}}}}}],
  "yield": [{{"from": "acc", "to": "O"}}]}}}}"#,
        input("P", &[h, s, s]),
        input("V", &[h, s, d]),
    );
    Region::from_json_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn form(r: &Region) -> String {
    let mut syms = Vec::new();
    emit_region(r, "f", &mut syms, &BTreeSet::new())
        .expect("emit")
        .form
}

#[test]
fn a_plain_batched_gemm_is_priced_by_its_gemm_view() {
    let (h, s, d) = (2u64, 64u64, 32u64);
    let r = attention(
        h,
        s,
        d,
        "",
        r#"{"read": {"tensor": "P", "map": ["h", "m", "k"]}}"#,
    );
    assert!(runs_packed_contraction(&r));
    assert_eq!(form(&r), "gemm");
    let f = KernelFeatures::of(&r, &BTreeMap::new()).expect("features");
    let mnk = (h * s * d * s) as f64;
    assert!(f.flops >= 2.0 * mnk && f.flops < 2.5 * mnk, "{f:?}");
    assert_eq!(f.transcendentals, 0.0, "{f:?}");
}

#[test]
fn a_softmax_fused_into_the_operand_is_priced_per_output_element() {
    let (h, s, d) = (2u64, 64u64, 32u64);
    let score = |k: &str| format!(r#"{{"read": {{"tensor": "P", "map": ["h", "m", "{k}"]}}}}"#);
    let lets = format!(
        r#"{{"let": "mx", "expr": {{"reduce": {{"op": "max", "axes": ["k1"], "init": "-INF", "dtype": "fp32", "body": {}}}}}}},
  {{"let": "sm", "expr": {{"reduce": {{"op": "sum", "axes": ["k1"], "init": 0.0, "dtype": "fp32", "body": {{"exp": [{{"sub": [{}, "mx"]}}]}}}}}}}},
"#,
        score("k1"),
        score("k1")
    );
    let body = format!(
        r#"{{"div": [{{"exp": [{{"sub": [{}, "mx"]}}]}}, "sm"]}}"#,
        score("k")
    );
    let r = attention(h, s, d, &lets, &body);
    assert!(!runs_packed_contraction(&r));
    assert_ne!(form(&r), "gemm");
    let f = KernelFeatures::of(&r, &BTreeMap::new()).expect("features");
    // the C evaluates the operand's exp for every (h, m, n, k), not once per score (h, m, k)
    let per_point = (h * s * d * s) as f64;
    assert!(f.transcendentals >= per_point, "{f:?}");
    assert!(f.flops >= 2.0 * per_point, "{f:?}");
}

/// `O[c] = Σ_p relu(Σ_k X[k, p] · W[c, k])` over `c < C` (a 1×1 convolution fused into a
/// global pool, as in MobileNetV2's last kernel): the inner sum is nested below the top of its
/// let; `top`: the inner sum alone as the let (`O[c, p]`).
fn pooled_conv(c: u64, k: u64, p: u64, top: bool) -> Region {
    let conv = r#"{"reduce": {"op": "sum", "axes": ["k"], "init": 0.0, "dtype": "fp32", "body": {"mul": [
      {"read": {"tensor": "X", "map": ["k", "p"]}}, {"read": {"tensor": "W", "map": ["c", "k"]}}]}}}"#;
    let (iters, out, expr) = if top {
        (
            format!(r#"{{"name": "c", "size": {c}}}, {{"name": "p", "size": {p}}}"#),
            format!("[{c}, {p}]"),
            conv.to_string(),
        )
    } else {
        (
            format!(r#"{{"name": "c", "size": {c}}}"#),
            format!("[{c}]"),
            format!(
                r#"{{"reduce": {{"op": "sum", "axes": ["p"], "init": 0.0, "dtype": "fp32", "body": {{"relu": [{conv}]}}}}}}"#
            ),
        )
    };
    let text = format!(
        r#"{{"region": {{"name": "pool", "iters": [{iters}],
  "inputs": [{}, {}],
  "outputs": [{{"name": "O", "dtype": "fp32", "memref": {{"shape": {out}, "alignment": 128, "noalias": true, "layout": {{"kind": "row_major"}}}}, "materialize": "deferred"}}],
  "lets": [{{"let": "acc", "expr": {expr}}}],
  "yield": [{{"from": "acc", "to": "O"}}]}}}}"#,
        input("X", &[k, p]),
        input("W", &[c, k]),
    );
    Region::from_json_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// A reduce nested in a let is a scalar dependent chain in the C (a statement expression per
/// point, `cpu::work`): priced `SERIAL_CHAIN` times its operations. MobileNetV2's 1×1
/// convolution fused into the average pool this way was priced 0.61 ms and ran 31 ms.
#[test]
fn a_reduce_nested_in_a_let_is_priced_as_a_serial_chain() {
    use dlc_egg::cpu::work::SERIAL_CHAIN;
    let (c, k, p) = (64u64, 32u64, 49u64);
    let mac = (c * k * p) as f64;
    let nested = KernelFeatures::of(&pooled_conv(c, k, p, false), &BTreeMap::new()).unwrap();
    assert!(nested.flops >= SERIAL_CHAIN * 2.0 * mac, "{nested:?}");
    let top = KernelFeatures::of(&pooled_conv(c, k, p, true), &BTreeMap::new()).unwrap();
    assert!(top.flops < 3.0 * mac, "{top:?}");
}
