//! Regions as the ONNX import of a batch-1 MobileNetV2 writes them: reduce axes named like
//! the iters of size 1 beside them (a 1×1 convolution over `[i0, i1, i2, i3, i4]` reducing over
//! `[k, i0, i1]`; a depthwise one over `[b, h, m, n]` reducing over `[b, k, k1]`; a 1×1
//! convolution nested in a global average pool reducing over `[k2, m, k3]` inside the iter
//! `m`). The native backend renames those axes apart (`src/cpu/unshadow.rs`), so the 1×1
//! convolution is a packed GEMM, the depthwise one an interchanged reduce vectorized over the
//! output row (its image rows staged once per row: `src/cpu/emit_stencil.rs`), and the pooled one folds its 320-long channel axis in lanes; every output must
//! still match the region program's reference playback.

mod common;

use common::native::{check_region, region_input as input, region_program};
use dlc_egg::ir::region::program::RegionProgram;

/// The 1×1 convolution `X[1, C, H, W] · Wt[O, C, 1, 1]` into `[1, 1, O, H, W]` (k3 of the export).
fn pointwise(c: u64, o: u64, h: u64, w: u64) -> String {
    format!(
        r#"{{"region": {{"name": "pw", "iters": [{{"name": "i0", "size": 1}}, {{"name": "i1", "size": 1}}, {{"name": "i2", "size": {o}}}, {{"name": "i3", "size": {h}}}, {{"name": "i4", "size": {w}}}],
  "inputs": [{}, {}],
  "outputs": [{{"name": "Y", "dtype": "fp32", "memref": {{"shape": [1, 1, {o}, {h}, {w}], "alignment": 128, "noalias": true, "layout": {{"kind": "row_major"}}}}, "materialize": "deferred"}}],
  "lets": [{{"let": "acc", "expr": {{"reduce": {{"op": "sum", "axes": ["k", "i0", "i1"], "init": 0.0, "dtype": "fp32", "body": {{"mul": [
    {{"read": {{"tensor": "X", "map": [0, "k", "i3", "i4"]}}}},
    {{"read": {{"tensor": "Wt", "map": ["i2", "k", 0, 0]}}}}]}}}}}}}}],
  "yield": [{{"from": "acc", "to": "Y"}}]}}}}"#,
        input("X", &[1, c, h, w]),
        input("Wt", &[o, c, 1, 1])
    )
}

/// A 3×3 depthwise convolution, stride 2, pad 1, with ReLU6(`Y + bias`) as its prologue (k4).
fn depthwise(c: u64, h: u64) -> String {
    let ho = h.div_ceil(2);
    format!(
        r#"{{"region": {{"name": "dw", "iters": [{{"name": "b", "size": 1}}, {{"name": "h", "size": {c}}}, {{"name": "m", "size": {ho}}}, {{"name": "n", "size": {ho}}}],
  "inputs": [{}, {}, {}],
  "outputs": [{{"name": "Z", "dtype": "fp32", "memref": {{"shape": [1, {c}, {ho}, {ho}], "alignment": 128, "noalias": true, "layout": {{"kind": "row_major"}}}}, "materialize": "deferred"}}],
  "lets": [{{"let": "acc", "expr": {{"reduce": {{"op": "sum", "axes": ["b", "k", "k1"], "init": 0.0, "dtype": "fp32", "body": {{"mul": [
    {{"select": {{"pred": {{"and": [{{"ge": [{{"add": ["k", {{"mul": [2, "m"]}}]}}, 1]}}, {{"lt": [{{"add": ["k", {{"mul": [2, "m"]}}]}}, {h1}]}},
                                {{"ge": [{{"add": ["k1", {{"mul": [2, "n"]}}]}}, 1]}}, {{"lt": [{{"add": ["k1", {{"mul": [2, "n"]}}]}}, {h1}]}}]}},
      "then": {{"min": [{{"max": [{{"add": [{{"read": {{"tensor": "Y", "map": [0, 0, "h", {{"add": ["k", {{"mul": [2, "m"]}}, -1]}}, {{"add": ["k1", {{"mul": [2, "n"]}}, -1]}}]}}}}, {{"read": {{"tensor": "bias", "map": ["h"]}}}}]}}, 0.0]}}, 6.0]}},
      "else": 0.0}}}},
    {{"read": {{"tensor": "Wd", "map": ["h", 0, "k", "k1"]}}}}]}}}}}}}}],
  "yield": [{{"from": "acc", "to": "Z"}}]}}}}"#,
        input("Y", &[1, 1, c, h, h]),
        input("bias", &[c]),
        input("Wd", &[c, 1, 3, 3]),
        h1 = h + 1
    )
}

/// A 1×1 convolution `Z[1, C, S, S] → [O]` with ReLU6, averaged over the `S × S` window (k51).
fn pooled(c: u64, o: u64, s: u64) -> String {
    format!(
        r#"{{"region": {{"name": "pool", "iters": [{{"name": "m", "size": 1}}, {{"name": "n", "size": {o}}}],
  "inputs": [{}, {}],
  "outputs": [{{"name": "P", "dtype": "fp32", "memref": {{"shape": [1, {o}], "alignment": 128, "noalias": true, "layout": {{"kind": "row_major"}}}}, "materialize": "deferred"}}],
  "lets": [{{"let": "acc", "expr": {{"reduce": {{"op": "sum", "axes": ["k", "k1"], "init": 0.0, "dtype": "fp32", "body": {{"min": [{{"max": [
    {{"reduce": {{"op": "sum", "axes": ["k2", "m", "k3"], "extents": {{"k3": 1}}, "init": 0.0, "dtype": "fp32", "body": {{"mul": [
      {{"read": {{"tensor": "Z", "map": [0, "k2", "k", "k1"]}}}}, {{"read": {{"tensor": "Wp", "map": ["n", "k2", 0, 0]}}}}]}}}}}}, 0.0]}}, 6.0]}}}}}}}},
    {{"let": "c1", "expr": {{"div": ["acc", {area}.0]}}}}],
  "yield": [{{"from": "c1", "to": "P"}}]}}}}"#,
        input("Z", &[1, c, s, s]),
        input("Wp", &[o, c, 1, 1]),
        area = s * s
    )
}

fn program(step: &str, inputs: &[(&str, Vec<usize>)], out: &str, buf: &str) -> RegionProgram {
    region_program(step, inputs, out, buf)
}

/// Runs `p` natively (2 threads) and by the reference playback; returns the kernels' notes.
fn check(p: &RegionProgram, inputs: &[(&str, Vec<usize>)], what: &str) -> Vec<String> {
    check_region(p, inputs, &[], 7, what)
}

#[test]
fn a_pointwise_convolution_with_shadowing_axes_is_a_packed_gemm() {
    for (c, o, h) in [(16, 96, 14), (7, 13, 5)] {
        let ins = [("X", vec![1, c, h, h]), ("Wt", vec![o, c, 1, 1])];
        let p = program(
            &pointwise(c as u64, o as u64, h as u64, h as u64),
            &ins,
            "y",
            "Y",
        );
        let notes = check(&p, &ins, &format!("pointwise {c}->{o} {h}^2"));
        assert!(
            notes.iter().any(|n| n.starts_with("packed GEMM")),
            "{notes:?}"
        );
    }
}

#[test]
fn a_strided_depthwise_convolution_with_a_shadowing_axis_vectorizes_its_output_row() {
    // 1 and 2: a border on both sides of every output row, no interior at 1
    for (c, h) in [(8, 14), (3, 11), (2, 1), (5, 2), (4, 37)] {
        let ins = [
            ("Y", vec![1, 1, c, h, h]),
            ("bias", vec![c]),
            ("Wd", vec![c, 1, 3, 3]),
        ];
        let p = program(&depthwise(c as u64, h as u64), &ins, "z", "Z");
        let notes = check(&p, &ins, &format!("depthwise {c} {h}^2"));
        // the interchanged reduce: no lane accumulators of a 3-point window row
        assert!(
            !notes.iter().any(|n| n.contains("lane accumulators")),
            "{notes:?}"
        );
        // the image rows staged once per row, the taps unguarded (emit_stencil.rs)
        assert!(
            notes.iter().any(|n| n.contains("image rows staged")),
            "{notes:?}"
        );
    }
}

#[test]
fn a_pooled_pointwise_convolution_with_a_shadowing_axis_matches() {
    for (c, o, s) in [(40, 24, 7), (5, 3, 2)] {
        let ins = [("Z", vec![1, c, s, s]), ("Wp", vec![o, c, 1, 1])];
        let p = program(&pooled(c as u64, o as u64, s as u64), &ins, "p", "P");
        check(&p, &ins, &format!("pooled {c}->{o} {s}^2"));
    }
}
