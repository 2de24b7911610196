//! Convolutions read in place from a zero-padded copy (`src/cpu/direct.rs`) in the forms a
//! batch-1 ResNet-18 import writes them: windows with stride 2 along both image axes (its 7×7
//! stem and the 3×3 convolutions that halve the image: position `w` reads `x + 2·w + koff`),
//! and a 3×3 convolution whose image is the previous convolution's un-biased output under the
//! prologue `relu(t[0, 0, k, ·, ·] + bias[k])` (a second read indexed by one of the image's
//! axes). Each must take the channel-vector direct path and match the reference playback,
//! with row lengths that leave every tile tail (odd and even, shorter than one tile).

mod common;

use common::native::{check_region, region_input as input, region_program};

/// `i·s + k − p` as region JSON.
fn tap(k: &str, i: &str, s: u64, p: u64) -> String {
    let p = -(p as i64);
    format!(r#"{{"add": ["{k}", {{"mul": [{s}, "{i}"]}}, {p}]}}"#)
}

/// A convolution of `X[1, 1, C, H, H]` by `Wt[O, C, R, R]`, stride `s`, padding `p`, plus a
/// per-output-channel bias `b2`; with `prologue`, the image is `relu(X + b1[k])` (k the input
/// channel) as in ResNet-18's k11, else `X` itself.
fn conv(c: u64, o: u64, h: u64, r: u64, s: u64, p: u64, prologue: bool) -> String {
    let ho = (h + 2 * p - r) / s + 1;
    let (kh, kw) = (tap("k1", "m", s, p), tap("k2", "n", s, p));
    let x = format!(r#"{{"read": {{"tensor": "X", "map": [0, 0, "k", {kh}, {kw}]}}}}"#);
    let image = if prologue {
        format!(r#"{{"relu": [{{"add": [{x}, {{"read": {{"tensor": "b1", "map": ["k"]}}}}]}}]}}"#)
    } else {
        x
    };
    let bound = |e: &str| format!(r#"{{"ge": [{e}, 0]}}, {{"lt": [{e}, {h}]}}"#);
    format!(
        r#"{{"region": {{"name": "cv", "iters": [{{"name": "b", "size": 1}}, {{"name": "h", "size": {o}}}, {{"name": "m", "size": {ho}}}, {{"name": "n", "size": {ho}}}],
  "inputs": [{}, {}, {}, {}],
  "outputs": [{{"name": "Y", "dtype": "fp32", "memref": {{"shape": [1, {o}, {ho}, {ho}], "alignment": 128, "noalias": true, "layout": {{"kind": "row_major"}}}}, "materialize": "deferred"}}],
  "lets": [{{"let": "acc", "expr": {{"reduce": {{"op": "sum", "axes": ["k", "k1", "k2"], "init": 0.0, "dtype": "fp32", "body": {{"mul": [
    {{"select": {{"pred": {{"and": [{}, {}]}}, "then": {image}, "else": 0.0}}}},
    {{"read": {{"tensor": "Wt", "map": ["h", "k", "k1", "k2"]}}}}]}}}}}}}},
    {{"let": "c1", "expr": {{"add": ["acc", {{"read": {{"tensor": "b2", "map": ["h"]}}}}]}}}}],
  "yield": [{{"from": "c1", "to": "Y"}}]}}}}"#,
        input("X", &[1, 1, c, h, h]),
        input("b1", &[c]),
        input("Wt", &[o, c, r, r]),
        input("b2", &[o]),
        bound(&kh),
        bound(&kw),
    )
}

/// Runs the convolution natively (2 threads; the weights and biases are `role: param` inputs,
/// as in an imported model) and by the reference playback; returns the kernel's notes.
fn check(
    c: usize,
    o: usize,
    h: usize,
    r: usize,
    s: usize,
    p: usize,
    prologue: bool,
) -> Vec<String> {
    let what = format!("{c}->{o} {h}^2 {r}x{r} stride {s} pad {p} prologue {prologue}");
    let ins = [
        ("X", vec![1, 1, c, h, h]),
        ("b1", vec![c]),
        ("Wt", vec![o, c, r, r]),
        ("b2", vec![o]),
    ];
    let u = |x: usize| x as u64;
    let prog = region_program(
        &conv(u(c), u(o), u(h), u(r), u(s), u(p), prologue),
        &ins,
        "y",
        "Y",
    );
    let notes = check_region(&prog, &ins, &["b1", "Wt", "b2"], 11, &what);
    assert!(
        notes.iter().any(|n| n.starts_with("direct convolution")),
        "{what}: {notes:?}"
    );
    notes
}

#[test]
fn stride_two_convolutions_read_their_image_in_place() {
    // ResNet-18's shapes scaled down: the 3×3 halving convolutions (even and odd images, rows
    // of 1 to 8 positions: shorter than a tile, a half tile, a tile and a tail) and the 7×7 stem
    for (c, o, h) in [(8, 16, 16), (5, 20, 9), (3, 33, 2), (4, 16, 1), (6, 18, 15)] {
        check(c, o, h, 3, 2, 1, false);
    }
    for (c, o, h) in [(3, 16, 32), (3, 24, 13)] {
        check(c, o, h, 7, 2, 3, false);
    }
    // a strided window without padding (no guard)
    check(4, 16, 11, 3, 2, 0, false);
}

#[test]
fn a_biased_relu_prologue_is_evaluated_by_the_padded_copy() {
    for (c, o, h, s) in [(12, 16, 14, 1), (7, 21, 7, 1), (9, 16, 10, 2)] {
        check(c, o, h, 3, s, 1, true);
    }
}
