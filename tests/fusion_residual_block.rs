//! A ResNet basic block whose input is the previous block's output, `s = relu(conv3x3(X) +
//! conv1x1(X))` (a downsampling block): the block's second
//! convolution carries the bias, the residual add and the closing `relu`, and reads the skip
//! value `s` that the first convolution reads too (issue 23). The closing `relu` is a
//! single-input seed over the residual add: its shared-kept growth absorbs the add's own
//! shared-kept growth (`rules::fusion::apply::Grow::grow_shared_kept`); before, its only
//! maximal growth recomputed `s` inside the kernel, and the cheaper cover left the add and the
//! `relu` to a kernel of their own (ResNet-18 21 → 20 kernels). The emitted CUDA (CPU
//! emulation) and the native program match the reference. The block's first two convolutions
//! of `X` (3×3 and the 1×1 projection) are one kernel summing both contractions.

mod common;

use dlc_egg::codegen::generate;
use std::collections::BTreeMap;

/// `s = relu(conv3x3(X) + b0 + conv1x1(X) + bd)`, `h = relu(conv3x3(s) + b1)`,
/// `Y = relu(conv3x3(h) + b2 + s)`, `C` channels at `H×W`.
fn basic_block(c: i64, hw: i64) -> String {
    let conv = |name: &str, ins: [&str; 3], out: &str, k: i64| {
        let p = k / 2;
        serde_json::json!({"op": "Conv", "name": name, "inputs": ins, "outputs": [out],
            "attrs": {"stride": [1, 1], "pad": [[p, p], [p, p]], "dilation": [1, 1],
            "groups": 1}})
    };
    let ew = |name: &str, f: &str, ins: serde_json::Value, out: &str| {
        serde_json::json!({"op": "Elementwise", "name": name, "inputs": ins, "outputs": [out],
            "attrs": {"fn": f}})
    };
    let param = |t: &str| serde_json::json!({"tensor": t, "role": "param"});
    let weight = serde_json::json!({"dtype": "fp32", "shape": [c, c, 3, 3]});
    let bias = serde_json::json!({"dtype": "fp32", "shape": [c]});
    let act = serde_json::json!({"dtype": "fp32", "shape": [1, c, hw, hw]});
    let doc = serde_json::json!({
        "signature": {
            "inputs": [{"tensor": "X"}, param("w0"), param("b0"), param("wd"), param("bd"),
                param("w1"), param("b1"), param("w2"), param("b2")],
            "outputs": [{"tensor": "Y"}]
        },
        "tensors": {
            "X": act, "w0": weight, "b0": bias, "bd": bias, "w1": weight, "b1": bias,
            "w2": weight, "b2": bias, "Y": act,
            "wd": {"dtype": "fp32", "shape": [c, c, 1, 1]}
        },
        "graph": [
            conv("stem", ["X", "w0", "b0"], "s0", 3),
            conv("down", ["X", "wd", "bd"], "s1", 1),
            ew("stem_add", "add", serde_json::json!(["s0", "s1"]), "s2"),
            ew("stem_relu", "relu", serde_json::json!(["s2"]), "s"),
            conv("conv_a", ["s", "w1", "b1"], "h0", 3),
            ew("relu_a", "relu", serde_json::json!(["h0"]), "h"),
            conv("conv_b", ["h", "w2", "b2"], "p", 3),
            ew("residual", "add", serde_json::json!(["p", "s"]), "r"),
            ew("out_relu", "relu", serde_json::json!(["r"]), "Y")
        ]
    });
    doc.to_string()
}

#[test]
fn the_second_convolution_closes_the_block_and_reads_the_skip_value() {
    let text = basic_block(128, 28);
    let (p, o) = common::host::optimized_for(&text, dlc_egg::target::Arch::Sm90);
    let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
    let last = o
        .kernels
        .iter()
        .find(|k| k.covers.iter().any(|c| c == "out_relu"))
        .expect("a kernel applies the closing relu");
    for node in ["conv_b", "residual"] {
        assert!(
            last.covers.iter().any(|c| c == node),
            "the closing relu's kernel holds {node}: {covers:?}"
        );
    }
    assert!(
        !last.covers.iter().any(|c| c == "stem" || c == "down"),
        "the skip value is read, not recomputed: {covers:?}"
    );
    // The downsampling block's two convolutions are one kernel: the SIMT tile sums the 3×3
    // and the 1×1 convolution of `X` in accumulators of their own, one `K` loop after the
    // other (`plan::work::Gemm::second`), and applies both biases, the add and the `relu` in
    // its epilogue; `s = relu(s0 + s1)` is recomputed where `conv_a` and `conv_b` read it.
    assert_eq!(
        o.kernels.len(),
        3,
        "stem with down, conv_a, conv_b: {covers:?}"
    );
    let pair = o
        .kernels
        .iter()
        .find(|k| k.covers.iter().any(|c| c == "down"))
        .expect("a kernel computes the 1x1 convolution");
    for node in ["stem", "stem_add", "stem_relu"] {
        assert!(
            pair.covers.iter().any(|c| c == node),
            "the projection's kernel holds {node}: {covers:?}"
        );
    }
    let g = generate(&o).expect("generates");
    // The split-K convolution sums its `K` shares in split order: compared at the output's
    // scale (its values reach hundreds; the closest to zero carry their sums' rounding).
    common::host::emulation_matches_reference_at_scale(&p, &g, &BTreeMap::new(), 5, 1e-4, "sm90");
}

#[test]
fn the_block_pair_runs_natively() {
    common::native::check_graph(&basic_block(16, 9), &[], "basic_block").unwrap();
}
