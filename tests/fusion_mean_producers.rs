//! A mean's division over whichever kernel of its sum the cover takes (issue 23,
//! `MaxMode::EachProducer` in `rules::fusion`): the last basic block of a ResNet stage, whose
//! residual `A` (a 3×3 convolution plus a strided 1×1 projection) is a kernel of its own, ends in
//! `P = mean_hw relu(conv3x3(relu(conv3x3(A))) + b + A)`. The cheapest kernel of the pool's sum
//! is the cooperative compute-at window that reads `A`; the division's kernels absorbed only the
//! sum's largest kernels, which recompute `A`'s two convolutions, so the division by 49 ran as a
//! kernel of its own (ResNet-18: 20 kernels, then 19). Checked on the cover and, at 64 channels,
//! on the CPU emulation of the emitted CUDA.

mod common;

use common::host::kernel_covering;
use dlc_egg::codegen::generate;
use dlc_egg::target::Arch;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn conv(name: &str, [x, w, b, out]: [&str; 4], k: u32, stride: u32) -> Value {
    let p = k / 2;
    json!({"op": "Conv", "name": name, "inputs": [x, w, b], "outputs": [out],
           "attrs": {"stride": [stride, stride], "pad": [[p, p], [p, p]], "dilation": [1, 1],
                     "groups": 1}})
}

fn ew(name: &str, f: &str, inputs: &[&str], out: &str) -> Value {
    json!({"op": "Elementwise", "name": name, "inputs": inputs, "outputs": [out],
           "attrs": {"fn": f}})
}

/// The stage's last block with `c` channels at 7×7 (fp32, batch 1), then the pool and a
/// 10-way classifier.
fn last_block(c: i64) -> String {
    let t = |s: Value| json!({"dtype": "fp32", "shape": s});
    let act = t(json!([1, c, 7, 7]));
    let params = ["W0", "b0", "W1", "b1", "W2", "b2", "W3", "b3", "FW", "FB"];
    let mut inputs = vec![json!({"tensor": "X0"}), json!({"tensor": "X1"})];
    inputs.extend(params.iter().map(|p| json!({"tensor": p, "role": "param"})));
    json!({
        "signature": {"inputs": inputs, "outputs": [{"tensor": "Y"}]},
        "tensors": {
            "X0": act, "X1": t(json!([1, c / 2, 14, 14])),
            "W0": t(json!([c, c, 3, 3])), "b0": t(json!([c])),
            "W1": t(json!([c, c / 2, 1, 1])), "b1": t(json!([c])),
            "W2": t(json!([c, c, 3, 3])), "b2": t(json!([c])),
            "W3": t(json!([c, c, 3, 3])), "b3": t(json!([c])),
            "FW": t(json!([10, c])), "FB": t(json!([10])), "Y": t(json!([1, 10]))
        },
        "graph": [
            conv("conv0", ["X0", "W0", "b0", "C0"], 3, 1),
            conv("down", ["X1", "W1", "b1", "D"], 1, 2),
            ew("res0", "add", &["C0", "D"], "A0"),
            ew("relu0", "relu", &["A0"], "A"),
            conv("conv1", ["A", "W2", "b2", "B"], 3, 1),
            ew("relu1", "relu", &["B"], "Br"),
            conv("conv2", ["Br", "W3", "b3", "C2"], 3, 1),
            ew("res1", "add", &["C2", "A"], "S"),
            ew("relu2", "relu", &["S"], "R"),
            {"op": "Reduce", "name": "pool", "inputs": ["R"], "outputs": ["P"],
             "attrs": {"fn": "mean", "axes": [2, 3], "keepdim": true}},
            {"op": "Reshape", "name": "flatten", "inputs": ["P"], "outputs": ["F"],
             "attrs": {"shape": [1, c]}},
            {"op": "GEMM", "name": "fc", "inputs": ["F", "FW", "FB"], "outputs": ["Y"],
             "attrs": {"trans_a": false, "trans_b": true, "alpha": 1.0, "beta": 1.0}}
        ]
    })
    .to_string()
}

/// At 64 channels the residual `A` is one kernel summing `conv0` and the projection
/// (`plan::work::Gemm::second`), and the pool is a kernel of its own over `conv2`'s output
/// (predicted 18.9 µs against 19.1 µs for the cover whose pool was the cooperative window over
/// `conv2`, recomputing it, beside `A`'s two convolutions). At 512 channels the convolutions
/// run on split-K tiles (`plan::space::split_k_grid`: 32 tiles of 32×64 for 132 SMs, each split
/// 16 ways), and the pool folds in `conv2`'s, the pooled tile (`plan::work::PoolTile`: each
/// 7×7 window is 49 rows of the tile). Either way the pool's kernel divides.
#[test]
fn the_mean_divides_in_the_kernel_of_its_sum() {
    let (_, o) = common::host::optimized_for(&last_block(64), Arch::Sm90);
    let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
    let pool = kernel_covering(&o, "pool");
    assert_eq!(
        kernel_covering(&o, "down"),
        kernel_covering(&o, "conv0"),
        "{covers:?}"
    );
    assert!(
        o.kernels[pool].covers.iter().any(|c| c == "flatten"),
        "the division and the flatten in the pool's kernel: {covers:?}"
    );
    assert!(
        !o.kernels[pool].covers.iter().any(|c| c == "conv0"),
        "the pool's kernel reads the residual, not recomputes it: {covers:?}"
    );
    let (_, o) = common::host::optimized_for(&last_block(512), Arch::Sm90);
    let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
    let pool = kernel_covering(&o, "pool");
    assert_eq!(
        pool,
        kernel_covering(&o, "conv2"),
        "the pooled tile: {covers:?}"
    );
    for node in ["relu2", "flatten"] {
        assert!(
            o.kernels[pool].covers.iter().any(|c| c == node),
            "the pool's kernel applies {node}: {covers:?}"
        );
    }
    assert!(
        o.kernels.iter().all(|k| k.covers != ["pool"]),
        "no kernel only divides: {covers:?}"
    );
}

#[test]
fn the_fused_mean_matches_the_reference() {
    let (p, o) = common::host::optimized_for(&last_block(64), Arch::Sm90);
    let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
    let pool = kernel_covering(&o, "pool");
    assert!(
        o.kernels[pool].covers.iter().any(|c| c == "flatten"),
        "{covers:?}"
    );
    let generated = generate(&o).expect("generates");
    common::host::emulation_matches_reference(&p, &generated, &BTreeMap::new(), 3, 1e-4, "sm90");
}
