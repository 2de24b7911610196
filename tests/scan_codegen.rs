//! The scan template's CUDA: one graph of several `Cumulative` nodes (every variant, the scanned
//! axis innermost and strided, fp16/bf16/fp32/i32, symbolic sizes bound to values that leave
//! tails in every tile) optimized, emitted, run on the CPU emulation (`codegen::host`) against
//! the optimized program's playback, and compiled by NVRTC for sm_80 and sm_90a (ptxas: no
//! spills) with the manifest's launches checked against the kernels' resources.

mod common;

use dlc_egg::codegen::host::{run_on_host, HostOptions};
use dlc_egg::codegen::{emit_program, generate};
use dlc_egg::cuda::{check_manifest_resources, compile, toolchain, CompileOptions};
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::region::program::evaluate_program;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::rules::testing::random_inputs;
use dlc_egg::target::Arch;
use dlc_egg::tensor::Tensor;
use dlc_egg::{ir::frontend, lower};
use serde_json::json;
use std::collections::BTreeMap;

/// `(fn, dtype, shape, axis, exclusive, reverse)` per node.
type Case = (
    &'static str,
    &'static str,
    [&'static str; 2],
    i64,
    bool,
    bool,
);

const CASES: [Case; 6] = [
    ("sum", "fp16", ["B", "N"], -1, false, false),
    ("sum", "fp32", ["N", "C"], 0, true, false),
    ("max", "i32", ["B", "N"], 1, false, true),
    ("min", "fp32", ["N", "C"], 0, true, true),
    ("sum", "i32", ["B", "N"], -1, true, true),
    ("prod", "bf16", ["B", "N"], 1, false, false),
];

fn doc() -> String {
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    let mut tensors = serde_json::Map::new();
    let mut graph = Vec::new();
    for (i, (f, dt, shape, axis, exclusive, reverse)) in CASES.iter().enumerate() {
        let (x, y) = (format!("X{i}"), format!("Y{i}"));
        inputs.push(json!({"tensor": x}));
        outputs.push(json!({"tensor": y}));
        tensors.insert(x.clone(), json!({"dtype": dt, "shape": shape}));
        tensors.insert(y.clone(), json!({"dtype": dt, "shape": shape}));
        graph.push(
            json!({"op": "Cumulative", "name": format!("c{i}"), "inputs": [x],
            "outputs": [y], "attrs": {"fn": f, "axis": axis, "exclusive": exclusive,
            "reverse": reverse}}),
        );
    }
    json!({
        "signature": {"inputs": inputs, "outputs": outputs},
        "symbols": {"B": 3, "N": 1100, "C": 5},
        "tensors": tensors,
        "graph": graph,
    })
    .to_string()
}

fn optimized(arch: Arch) -> (dlc_egg::ir::tiny::Program, dlc_egg::optimize::Optimized) {
    optimized_doc(&doc(), arch)
}

fn optimized_doc(
    doc: &str,
    arch: Arch,
) -> (dlc_egg::ir::tiny::Program, dlc_egg::optimize::Optimized) {
    let g = frontend::load_str(doc, "scans.json").unwrap_or_else(|d| panic!("{d}"));
    let p = lower::lower(&g).unwrap_or_else(|d| panic!("{d}"));
    let opts = OptimizeOptions {
        target: arch.target(),
        ..OptimizeOptions::default()
    };
    let o = optimize(&p, &opts).unwrap_or_else(|e| panic!("{e}"));
    (p, o)
}

/// The optimized program's playback and the emitted kernels on the CPU emulation, at `bindings`.
fn playback_and_host(
    o: &dlc_egg::optimize::Optimized,
    code: &dlc_egg::codegen::Generated,
    inputs: &BTreeMap<String, Tensor>,
    bindings: &BTreeMap<String, i64>,
    opts: &HostOptions,
) -> (BTreeMap<String, Tensor>, BTreeMap<String, Tensor>) {
    let want =
        evaluate_program(&o.program, bindings, inputs).unwrap_or_else(|d| panic!("playback: {d}"));
    let got = run_on_host(
        &code.emitted.source,
        &code.emitted.manifest,
        inputs,
        bindings,
        opts,
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", code.emitted.source));
    (want, got)
}

#[test]
fn scan_kernels_run_on_the_cpu_like_the_playback() {
    let (p, o) = optimized(Arch::Sm80);
    let code = generate(&o).unwrap_or_else(|e| panic!("{e}"));
    let templates: Vec<&str> = code
        .emitted
        .manifest
        .steps
        .iter()
        .filter_map(|s| match s {
            dlc_egg::codegen::manifest::ManifestStep::Launch(l) => Some(l.template.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        templates,
        vec!["scan"; CASES.len()],
        "one scan kernel per node"
    );
    // The plan names the scan template's algorithm (it said `elementwise: vectorized`).
    for s in &code.emitted.manifest.steps {
        if let dlc_egg::codegen::manifest::ManifestStep::Launch(l) = s {
            let algo = &l.plan.algo_choice;
            assert_eq!(
                algo.get("scan").map(String::as_str),
                Some("chunked_single_pass")
            );
            assert!(!algo.contains_key("elementwise"), "{algo:?}");
        }
    }
    // N = 1100: tails in tiles of 128, 256, 512 and 1024; 1 and 33 lines per kernel too.
    for (b, n, c) in [(3, 1100, 5), (1, 37, 33)] {
        let bindings = BTreeMap::from([
            ("B".to_string(), b),
            ("N".to_string(), n),
            ("C".to_string(), c),
        ]);
        let inputs = random_inputs(&p, &bindings, 5).unwrap_or_else(|e| panic!("{e}"));
        let opts = HostOptions {
            sanitize: std::env::var("SCAN_SANITIZE").is_ok(),
            ..HostOptions::default()
        };
        let (want, got) = playback_and_host(&o, &code, &inputs, &bindings, &opts);
        for (name, w) in &want {
            let gt = &got[name];
            assert_eq!((gt.dtype, &gt.shape), (w.dtype, &w.shape), "{name}");
            // The tile's tree order rounds differently from the sequential playback: graph-json's
            // tolerance plus 1e-4 of the output's magnitude, as for every other template.
            let (g, e) = (gt.to_f64(), w.to_f64());
            let tol = common::graph_json_tolerance(w.dtype);
            let scale = e
                .iter()
                .filter(|v| v.is_finite())
                .fold(0f64, |m, v| m.max(v.abs()));
            for (k, (a, x)) in g.iter().zip(&e).enumerate() {
                let ok = match tol {
                    Some(t) if x.is_finite() => (a - x).abs() <= t + 1e-4 * scale + t * x.abs(),
                    _ => a == x || (a.is_nan() && x.is_nan()),
                };
                assert!(
                    ok,
                    "{name} at {bindings:?}: element {k} is {a}, the playback says {x}"
                );
            }
        }
    }
}

#[test]
fn scan_kernels_compile_for_sm80_and_sm90a_without_spills() {
    if !crate::common::nvrtc_here() {
        return;
    }
    for arch in [Arch::Sm80, Arch::Sm90] {
        let (_, o) = optimized(arch);
        let emitted = emit_program(&o).unwrap_or_else(|e| panic!("{arch:?}: {e}"));
        let c = compile(&emitted.source, arch, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{arch:?}: {e}\n{}", emitted.source));
        assert_eq!(c.kernels.len(), CASES.len(), "{arch:?}");
        for k in &c.kernels {
            eprintln!(
                "{arch:?} {}: {} registers, {} spill bytes, {} B static smem",
                k.name, k.registers, k.spill_bytes, k.static_smem_bytes
            );
            assert_eq!(k.spill_bytes, 0, "{arch:?}: {k:?}");
        }
        check_manifest_resources(&c, &emitted.manifest).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Two `Range`s as ONNX import writes them (an exclusive cumulative sum of broadcast ones, over
/// `B` and over `N`) combined into `Y[b, n] = 37·b + n` — the attention-mask index of exported
/// BERT, which panicked with "a scan outside the scan template" for CUDA (E9000): kernel growth
/// fused both scans into one region and the scan template binds only one. Such a region has no
/// plan now, so the cover takes a scan kernel of its own for one of them.
const TWO_RANGES: &str = r#"{
 "signature": {"inputs": [{"tensor": "O"}], "outputs": [{"tensor": "Y"}]},
 "symbols": {"B": 3, "N": 37},
 "tensors": {"O": {"dtype": "i32", "shape": [1]}, "Y": {"dtype": "i32", "shape": ["B", "N"]}},
 "graph": [
  {"op": "Expand", "name": "e1", "inputs": ["O"], "outputs": ["E1"], "attrs": {"shape": ["B"]}},
  {"op": "Cumulative", "name": "c1", "inputs": ["E1"], "outputs": ["R1"],
   "attrs": {"fn": "sum", "axis": 0, "exclusive": true}},
  {"op": "Expand", "name": "e2", "inputs": ["O"], "outputs": ["E2"], "attrs": {"shape": ["N"]}},
  {"op": "Cumulative", "name": "c2", "inputs": ["E2"], "outputs": ["R2"],
   "attrs": {"fn": "sum", "axis": 0, "exclusive": true}},
  {"op": "Reshape", "name": "s1", "inputs": ["R1"], "outputs": ["S1"], "attrs": {"shape": ["B", 1]}},
  {"op": "Reshape", "name": "s2", "inputs": ["R2"], "outputs": ["S2"], "attrs": {"shape": [1, "N"]}},
  {"op": "Elementwise", "name": "m", "inputs": ["S1", 37], "outputs": ["M"], "attrs": {"fn": "mul"}},
  {"op": "Elementwise", "name": "a", "inputs": ["M", "S2"], "outputs": ["Y"], "attrs": {"fn": "add"}}
 ]
}"#;

#[test]
fn two_scans_fused_by_growth_still_emit_one_scan_per_kernel() {
    for arch in [Arch::Sm80, Arch::Sm90] {
        let (_, o) = optimized_doc(TWO_RANGES, arch);
        let code = generate(&o).unwrap_or_else(|e| panic!("{arch:?}: {e}"));
        for (b, n) in [(3, 37), (1, 1), (5, 1100)] {
            let bindings = BTreeMap::from([("B".to_string(), b), ("N".to_string(), n)]);
            // The ones the import's `Range` broadcasts.
            let inputs = BTreeMap::from([(
                "O".to_string(),
                Tensor::from_f64(DType::I32, vec![1], &[1.0]),
            )]);
            let (want, got) =
                playback_and_host(&o, &code, &inputs, &bindings, &HostOptions::default());
            let y: Vec<f64> = (0..b * n).map(|k| (37 * (k / n) + k % n) as f64).collect();
            assert_eq!(want["Y"].to_f64(), y, "playback at B={b} N={n}");
            assert_eq!(got["Y"].to_f64(), y, "{arch:?} at B={b} N={n}");
        }
        if toolchain().is_ok() {
            let c = compile(&code.emitted.source, arch, &CompileOptions::default())
                .unwrap_or_else(|e| panic!("{arch:?}: {e}\n{}", code.emitted.source));
            check_manifest_resources(&c, &code.emitted.manifest).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
