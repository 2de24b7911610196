//! Helpers of the region-synthesis tests: buffer names, kernel arguments, single-node reference
//! values and the tolerant comparison (graph-json.md tolerances, tightened).
#![allow(dead_code)]

use dlc_egg::eval::evaluate;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::tiny::{NodeId, Program, ProgramOutput, UOp};
use dlc_egg::synth::SynthArg;
use dlc_egg::tensor::Tensor;
use std::collections::BTreeMap;

/// The buffer holding node `id`: a graph input's name, else `t<id>`.
pub fn buffer_name(p: &Program, id: NodeId) -> String {
    match &p.node(id).uop {
        UOp::Input { tensor_id } => tensor_id.clone(),
        _ => format!("t{}", id.0),
    }
}

/// The kernel arguments of placeholder nodes `args`.
pub fn synth_args(p: &Program, args: &[NodeId]) -> Vec<SynthArg> {
    args.iter()
        .map(|a| SynthArg {
            name: buffer_name(p, *a),
            dtype: p.node(*a).dtype,
            shape: p.node(*a).shape.clone(),
        })
        .collect()
}

/// The reference value of node `root` (the program with `root` as its only output `OUT`).
pub fn evaluate_node(p: &Program, root: NodeId, inputs: &BTreeMap<String, Tensor>) -> Tensor {
    let mut q = p.clone();
    q.outputs = vec![ProgramOutput {
        tensor: "OUT".into(),
        node: root,
    }];
    let mut out = evaluate(&q, &BTreeMap::new(), inputs).unwrap_or_else(|d| panic!("{d}"));
    out.remove("OUT").expect("OUT")
}

/// `(rtol, atol)` by dtype: graph-json.md's 1e-3 / 1e-2 tightened tenfold; exact for integers.
pub fn tolerance(dt: DType) -> (f64, f64) {
    match dt {
        DType::F32 => (1e-4, 1e-4),
        DType::F16 | DType::BF16 => (1e-3, 1e-3),
        DType::I32 | DType::Bool => (0.0, 0.0),
    }
}

/// Asserts equal dtype and shape and elementwise `|got − want| <= atol + rtol·|want|` (NaN
/// matches NaN, infinities must match).
pub fn assert_close(name: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(
        (got.dtype, &got.shape),
        (want.dtype, &want.shape),
        "{name}: dtype/shape"
    );
    let (rtol, atol) = tolerance(want.dtype);
    let mut worst = 0.0f64;
    for i in 0..want.numel() {
        let (a, b) = (got.get_f64(i), want.get_f64(i));
        let ok = (a.is_nan() && b.is_nan())
            || (a.is_infinite() && a == b)
            || (a - b).abs() <= atol + rtol * b.abs();
        assert!(ok, "{name}: element {i}: got {a}, want {b}");
        if a.is_finite() && b.is_finite() {
            worst = worst.max((a - b).abs());
        }
    }
    let _ = worst;
}
