//! Window reduces in rows form whose image rows are staged once per row
//! (`src/cpu/emit_stencil.rs`): depthwise convolutions with strides 1–3, dilation, padding 0–2,
//! windows of 1–9 taps, pooling windows (max, min, sum: the window is the whole body, padded
//! with its own value), a ReLU6 prologue over a per-channel bias or a bare read, the window as
//! either factor of the product, a window walking the row backwards, and a 1-D window without
//! row taps; output rows of 1 to 37 positions (every vector tail). Each must match the region
//! program's reference playback, and take the staged path exactly where it pays (a stride above
//! 1, a prologue or padding).

mod common;

use common::native::{check_region, region_input as input, region_program};

const NOTE: &str = "image rows staged";

/// A depthwise window reduce over `Y[1, C, H, W]` (see [`Dw::region`]).
#[derive(Clone, Copy, Debug)]
struct Dw {
    c: u64,
    h: u64,
    w: u64,
    /// Window rows and columns.
    kh: u64,
    kw: u64,
    stride: u64,
    pad: u64,
    dilation: u64,
    /// The image under `min(max(Y + bias[c], 0), 6)`, else `Y` itself.
    prologue: bool,
    /// The window is the product's left factor.
    window_first: bool,
    /// The column tap walks the row backwards (`s·n − d·k1 + d·(kw − 1) − p`).
    flip: bool,
    /// A pooling window (`max`, `min` or `sum` of the window itself, padded with −∞, +∞ or 0)
    /// instead of the convolution `Σ x · Wd`.
    pool: Option<&'static str>,
}

impl Dw {
    fn out(&self, x: u64, k: u64) -> u64 {
        (x + 2 * self.pad - self.dilation * (k - 1) - 1) / self.stride + 1
    }

    /// `s·i ± d·k − p` (+ `d·(kw − 1)` when flipped) as region JSON.
    fn tap(&self, k: &str, i: &str, flip: bool) -> String {
        let (s, d, p) = (self.stride, self.dilation as i64, self.pad as i64);
        let (kd, konst) = if flip {
            (-d, d * (self.kw as i64 - 1) - p)
        } else {
            (d, -p)
        };
        format!(r#"{{"add": [{{"mul": [{kd}, "{k}"]}}, {{"mul": [{s}, "{i}"]}}, {konst}]}}"#)
    }

    /// `Z[0, c, m, n] = Σ_{k, k1} x(c, tap(k, m), tap(k1, n)) · Wd[c, 0, k, k1]`, `x` zero
    /// outside the image.
    fn region(&self) -> String {
        let (ho, wo) = (self.out(self.h, self.kh), self.out(self.w, self.kw));
        let (row, col) = (self.tap("k", "m", false), self.tap("k1", "n", self.flip));
        let y = format!(r#"{{"read": {{"tensor": "Y", "map": [0, "c", {row}, {col}]}}}}"#);
        let image = if self.prologue {
            format!(
                r#"{{"min": [{{"max": [{{"add": [{y}, {{"read": {{"tensor": "bias", "map": ["c"]}}}}]}}, 0.0]}}, 6.0]}}"#
            )
        } else {
            y
        };
        let bound = |e: &str, n: u64| format!(r#"{{"ge": [{e}, 0]}}, {{"lt": [{e}, {n}]}}"#);
        let pad = match self.pool {
            Some("max") => r#""-INF""#,
            Some("min") => r#""INF""#,
            _ => "0.0",
        };
        let window = if self.pad > 0 {
            format!(
                r#"{{"select": {{"pred": {{"and": [{}, {}]}}, "then": {image}, "else": {pad}}}}}"#,
                bound(&row, self.h),
                bound(&col, self.w)
            )
        } else {
            image
        };
        let wd = r#"{"read": {"tensor": "Wd", "map": ["c", 0, "k", "k1"]}}"#;
        let body = match self.pool {
            Some(_) => window,
            None if self.window_first => format!(r#"{{"mul": [{window}, {wd}]}}"#),
            None => format!(r#"{{"mul": [{wd}, {window}]}}"#),
        };
        let op = self.pool.unwrap_or("sum");
        format!(
            r#"{{"region": {{"name": "dw", "iters": [{{"name": "b", "size": 1}}, {{"name": "c", "size": {c}}}, {{"name": "m", "size": {ho}}}, {{"name": "n", "size": {wo}}}],
  "inputs": [{}, {}, {}],
  "outputs": [{{"name": "Z", "dtype": "fp32", "memref": {{"shape": [1, {c}, {ho}, {wo}], "alignment": 128, "noalias": true, "layout": {{"kind": "row_major"}}}}, "materialize": "deferred"}}],
  "lets": [{{"let": "acc", "expr": {{"reduce": {{"op": "{op}", "axes": ["k", "k1"], "extents": {{"k": {kh}, "k1": {kw}}}, "dtype": "fp32", "body": {body}}}}}}}],
  "yield": [{{"from": "acc", "to": "Z"}}]}}}}"#,
            input("Y", &[1, self.c, self.h, self.w]),
            input("bias", &[self.c]),
            input("Wd", &[self.c, 1, self.kh, self.kw]),
            c = self.c,
            kh = self.kh,
            kw = self.kw,
        )
    }

    /// Runs it natively and by the reference; returns whether it was staged.
    fn staged(&self) -> bool {
        self.notes().iter().any(|n| n.contains(NOTE))
    }

    /// Runs it natively and by the reference; returns the kernel's notes.
    fn notes(&self) -> Vec<String> {
        let u = |x: u64| x as usize;
        let ins = [
            ("Y", vec![1, u(self.c), u(self.h), u(self.w)]),
            ("bias", vec![u(self.c)]),
            ("Wd", vec![u(self.c), 1, u(self.kh), u(self.kw)]),
        ];
        let p = region_program(&self.region(), &ins, "z", "Z");
        check_region(&p, &ins, &["bias", "Wd"], 5, &format!("{self:?}"))
    }
}

const BASE: Dw = Dw {
    c: 3,
    h: 9,
    w: 9,
    kh: 3,
    kw: 3,
    stride: 2,
    pad: 1,
    dilation: 1,
    prologue: true,
    window_first: true,
    flip: false,
    pool: None,
};

#[test]
fn strided_depthwise_windows_are_staged_and_match() {
    // output rows of 1, 2, 5, 17 and 37 positions; odd and even images
    for (h, w) in [(1, 2), (4, 3), (9, 10), (33, 34), (73, 74)] {
        for stride in [2, 3] {
            for pad in [0, 1, 2] {
                if w + 2 * pad < 3 || h + 2 * pad < 3 {
                    continue;
                }
                let d = Dw {
                    h,
                    w,
                    stride,
                    pad,
                    ..BASE
                };
                assert!(d.staged(), "{d:?}");
                assert!(
                    Dw {
                        prologue: false,
                        ..d
                    }
                    .staged(),
                    "{d:?} without a prologue"
                );
            }
        }
    }
}

#[test]
fn windows_of_every_width_dilation_and_direction_match() {
    for (kh, kw) in [(1, 1), (3, 3), (5, 5), (7, 7), (1, 7), (3, 1)] {
        for dilation in [1, 2] {
            for flip in [false, true] {
                let d = Dw {
                    h: 15,
                    w: 21,
                    kh,
                    kw,
                    dilation,
                    flip,
                    pad: 3,
                    window_first: !flip,
                    ..BASE
                };
                // a one-column window has nothing to share along the row
                assert_eq!(d.staged(), kw > 1, "{d:?}");
            }
        }
    }
}

#[test]
fn small_windows_fold_in_registers_and_large_ones_per_tap() {
    // 3×3 and 7×7 (49 points) in registers, 9×9 (81) one vector loop per tap; 40 channels of
    // 7×7 or 5×9 outputs: the work items are whole planes (rows shorter than 32)
    for (kh, kw, h, w, c) in [
        (3, 3, 9, 9, 40),
        (7, 7, 15, 9, 40),
        (9, 9, 15, 17, 3),
        (9, 9, 13, 13, 40),
    ] {
        let d = Dw {
            c,
            h,
            w,
            kh,
            kw,
            pad: 4,
            ..BASE
        };
        let notes = d.notes();
        let registers = notes.iter().any(|n| n.contains("folded in registers"));
        assert_eq!(registers, kh * kw <= 64, "{d:?}: {notes:?}");
        assert!(notes.iter().any(|n| n.contains(NOTE)), "{d:?}: {notes:?}");
    }
}

/// ResNet's max pool (3×3, stride 2, padding 1 with −∞, over `relu(t + b)`), a min pool and a
/// sum pool: the window is the whole body.
#[test]
fn pooling_windows_are_staged_with_their_padding_value() {
    for pool in ["max", "min", "sum"] {
        for (h, stride, pad) in [(9, 2, 1), (14, 2, 1), (40, 2, 0), (7, 1, 1), (33, 3, 2)] {
            let d = Dw {
                h,
                w: h + 1,
                stride,
                pad,
                pool: Some(pool),
                ..BASE
            };
            assert!(d.staged(), "{d:?}");
        }
    }
}

#[test]
fn stride_one_is_staged_under_a_prologue_or_padding() {
    for (w, pad) in [(1, 1), (16, 1), (17, 0), (56, 1), (40, 0)] {
        let d = Dw {
            h: 6,
            w,
            stride: 1,
            pad,
            ..BASE
        };
        assert!(d.staged(), "{d:?}");
        // a bare unguarded stride-1 read streams from the image already
        let bare = Dw {
            prologue: false,
            window_first: false,
            ..d
        };
        assert_eq!(bare.staged(), pad > 0, "{bare:?}");
    }
}

/// `Z[c, n] = Σ_k relu(X[c, 2n + k − 1] + b[c]) · W[c, k]`: a window with no row taps.
#[test]
fn a_one_dimensional_window_without_row_taps_is_staged() {
    for w in [1u64, 2, 15, 40] {
        let wo = (w + 2 - 3) / 2 + 1;
        let col = r#"{"add": ["k", {"mul": [2, "n"]}, -1]}"#;
        let step = format!(
            r#"{{"region": {{"name": "w1", "iters": [{{"name": "c", "size": 4}}, {{"name": "n", "size": {wo}}}],
  "inputs": [{}, {}, {}],
  "outputs": [{{"name": "Z", "dtype": "fp32", "memref": {{"shape": [4, {wo}], "alignment": 128, "noalias": true, "layout": {{"kind": "row_major"}}}}, "materialize": "deferred"}}],
  "lets": [{{"let": "acc", "expr": {{"reduce": {{"op": "sum", "axes": ["k"], "init": 0.0, "dtype": "fp32", "body": {{"mul": [
    {{"select": {{"pred": {{"and": [{{"ge": [{col}, 0]}}, {{"lt": [{col}, {w}]}}]}},
      "then": {{"relu": [{{"add": [{{"read": {{"tensor": "X", "map": ["c", {col}]}}}}, {{"read": {{"tensor": "b", "map": ["c"]}}}}]}}]}}, "else": 0.0}}}},
    {{"read": {{"tensor": "W", "map": ["c", "k"]}}}}]}}}}}}}}],
  "yield": [{{"from": "acc", "to": "Z"}}]}}}}"#,
            input("X", &[4, w]),
            input("b", &[4]),
            input("W", &[4, 3]),
        );
        let ins = [
            ("X", vec![4, w as usize]),
            ("b", vec![4]),
            ("W", vec![4, 3]),
        ];
        let p = region_program(&step, &ins, "z", "Z");
        let notes = check_region(&p, &ins, &["b", "W"], 3, &format!("1-D window over {w}"));
        assert!(notes.iter().any(|n| n.contains(NOTE)), "w = {w}: {notes:?}");
    }
}

/// A depthwise 3×3 convolution (padding 1) of `relu(X)` over symbolic `H × W`, and a 3×3 one
/// with stride 2 over a fixed image, in every dtype, through the whole pipeline.
const GRAPH: &str = r#"{
  "signature": {"inputs": [{"tensor": "X"}, {"tensor": "Wd", "role": "param"},
                           {"tensor": "X2"}, {"tensor": "W2", "role": "param"}],
                "outputs": [{"tensor": "Y"}, {"tensor": "Y2"}]},
  "symbols": {"H": 9, "W": 9},
  "tensors": {
    "X": {"dtype": "fp16", "shape": [1, 6, "H", "W"]}, "Wd": {"dtype": "fp16", "shape": [6, 1, 3, 3]},
    "Y": {"dtype": "fp16", "shape": [1, 6, "H", "W"]},
    "X2": {"dtype": "fp16", "shape": [1, 5, 19, 18]}, "W2": {"dtype": "fp16", "shape": [5, 1, 3, 3]},
    "Y2": {"dtype": "fp16", "shape": [1, 5, 10, 9]}
  },
  "graph": [
    {"op": "Elementwise", "name": "r", "inputs": ["X"], "outputs": ["R"], "attrs": {"fn": "relu"}},
    {"op": "Conv", "name": "dw", "inputs": ["R", "Wd"], "outputs": ["Y"],
     "attrs": {"pad": 1, "groups": 6, "acc_dtype": "fp32"}},
    {"op": "Elementwise", "name": "r2", "inputs": ["X2"], "outputs": ["R2"], "attrs": {"fn": "relu"}},
    {"op": "Conv", "name": "dw2", "inputs": ["R2", "W2"], "outputs": ["Y2"],
     "attrs": {"pad": 1, "stride": 2, "groups": 5, "acc_dtype": "fp32"}}
  ]
}"#;

#[test]
fn depthwise_convolutions_match_in_every_dtype_and_symbolic_sizes() {
    let staged = common::native::graph_notes(GRAPH)
        .iter()
        .filter(|n| n.contains(NOTE))
        .count();
    assert_eq!(
        staged, 2,
        "both convolutions staged, their ReLU as the prologue"
    );
    let mut failures = Vec::new();
    for dt in ["fp32", "fp16", "bf16"] {
        let g = GRAPH.replace("\"fp16\"", &format!("\"{dt}\""));
        for (h, w) in [(9, 9), (5, 7), (3, 17), (40, 33), (1, 1)] {
            let what = format!("depthwise as {dt}, H = {h}, W = {w}");
            if let Err(e) = common::native::check_graph(&g, &[("H", h), ("W", w)], &what) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
