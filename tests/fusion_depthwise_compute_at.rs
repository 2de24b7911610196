//! A MobileNetV2 inverted-residual stage entry (issue 23):
//! `D = relu6(dwconv3x3/s(relu6(conv1x1(X) + b0)) + b1)`. The depthwise convolution is a window reduction over its 3×3 taps and its one
//! input channel per group; the expanding 1×1 convolution under it is a producer reduction it
//! can recompute at every tap (compute-at, seed 003). Two things kept that apart: synthesis
//! rejected the embedding because the producer's index did not use the group's channel axis,
//! which has extent 1 and recomputes nothing (`synth::compute_at`, rule 3); and the work
//! analysis took the depthwise product for a GEMM whose operand holds another contraction and
//! gave the region no plan (`plan::work::analyze`: it is the compute-at nest's). The price
//! decides: at stride 2 the taps overlap 9/4 times and the fused kernel saves the expanded
//! tensor's round trip (MobileNetV2 53 → 50 kernels, 196.953 → 188.866 µs); at stride 1 the
//! 9× recomputation does not pay and the two kernels stay. CPU emulation of the emitted CUDA,
//! NVRTC for sm_80 and sm_90a, and the native program are checked.

mod common;

use common::host::kernel_covering;
use dlc_egg::codegen::generate;
use dlc_egg::target::Arch;
use serde_json::json;
use std::collections::BTreeMap;

/// `X: [1, c, hw, hw]` expanded to `6c` channels by a 1×1 convolution + relu6, then a 3×3
/// depthwise convolution of stride `s` + relu6.
fn expand_depthwise(c: i64, hw: i64, s: i64) -> String {
    let e = 6 * c;
    let o = (hw + 2 - 3) / s + 1;
    let param = |t: &str| json!({"tensor": t, "role": "param"});
    let ew = |name: &str, f: &str, x: &str, k: f64, out: &str| {
        json!({"op": "Elementwise", "name": name, "inputs": [x, k], "outputs": [out],
            "attrs": {"fn": f}})
    };
    json!({
        "signature": {
            "inputs": [{"tensor": "X"}, param("W0"), param("b0"), param("W1"), param("b1")],
            "outputs": [{"tensor": "D"}]
        },
        "tensors": {
            "X": {"dtype": "fp32", "shape": [1, c, hw, hw]},
            "W0": {"dtype": "fp32", "shape": [e, c, 1, 1]},
            "b0": {"dtype": "fp32", "shape": [e]},
            "W1": {"dtype": "fp32", "shape": [e, 1, 3, 3]},
            "b1": {"dtype": "fp32", "shape": [e]},
            "D": {"dtype": "fp32", "shape": [1, e, o, o]}
        },
        "graph": [
            {"op": "Conv", "name": "expand", "inputs": ["X", "W0", "b0"], "outputs": ["E0"],
             "attrs": {"stride": [1, 1], "pad": [[0, 0], [0, 0]], "dilation": [1, 1],
                       "groups": 1}},
            ew("expand_max", "max", "E0", 0.0, "E1"),
            ew("expand_min", "min", "E1", 6.0, "E"),
            {"op": "Conv", "name": "depthwise", "inputs": ["E", "W1", "b1"], "outputs": ["D0"],
             "attrs": {"stride": [s, s], "pad": [[1, 1], [1, 1]], "dilation": [1, 1],
                       "groups": e}},
            ew("dw_max", "max", "D0", 0.0, "D1"),
            ew("dw_min", "min", "D1", 6.0, "D")
        ]
    })
    .to_string()
}

#[test]
fn at_stride_two_the_depthwise_convolution_recomputes_the_expansion() {
    // sm90 (the default target). On sm80 the price keeps the expansion apart at these sizes:
    // the depthwise kernel reads it, as before.
    let (_, o) = common::host::optimized_for(&expand_depthwise(24, 56, 2), Arch::Sm90);
    let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
    assert_eq!(o.kernels.len(), 1, "{covers:?}");
    let plan = o.kernels[0].plan.as_ref().expect("planned");
    assert_eq!(plan.template, "compute_at");
}

#[test]
fn at_stride_one_the_nine_fold_recomputation_does_not_pay() {
    let (_, o) = common::host::optimized_for(&expand_depthwise(24, 56, 1), Arch::Sm90);
    let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
    assert_ne!(
        kernel_covering(&o, "expand"),
        kernel_covering(&o, "depthwise"),
        "{covers:?}"
    );
}

#[test]
fn the_fused_kernel_computes_the_reference_on_the_cpu_emulation() {
    for (c, hw) in [(24, 56), (5, 9)] {
        let (p, o) = common::host::optimized_for(&expand_depthwise(c, hw, 2), Arch::Sm90);
        assert_eq!(
            kernel_covering(&o, "expand"),
            kernel_covering(&o, "depthwise"),
            "C = {c}"
        );
        let g = generate(&o).expect("generates");
        let what = format!("C = {c}, {hw}×{hw}");
        common::host::emulation_matches_reference(&p, &g, &BTreeMap::new(), 11, 1e-4, &what);
    }
}

#[test]
fn the_stage_entry_runs_natively() {
    for s in [1, 2] {
        common::native::check_graph(&expand_depthwise(4, 9, s), &[], "expand_depthwise").unwrap();
    }
}

#[test]
fn the_fused_program_compiles_with_nvrtc() {
    use dlc_egg::cuda::{compile, CompileOptions};
    if !crate::common::nvrtc_here() {
        return;
    }
    for arch in [Arch::Sm80, Arch::Sm90] {
        let (_, o) = common::host::optimized_for(&expand_depthwise(24, 56, 2), arch);
        let g = generate(&o).expect("generates");
        let compiled = compile(&g.emitted.source, arch, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{arch:?}: {e}"));
        for k in &compiled.kernels {
            assert_eq!(k.spill_bytes, 0, "{arch:?} {}", k.name);
        }
    }
}
