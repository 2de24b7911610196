//! `--device cuda` on a real GPU (sm_80 or sm_90): every example against the reference
//! evaluator, `--repeat`, and `run_manifest` on a hand-written program. Those need a GPU, its
//! driver and NVRTC (`scripts/install-cuda-wheels.sh`), so they are ignored by default:
//! `cargo test --test cuda_run -- --ignored`. Two more check what happens before (and without)
//! a GPU and run everywhere.

mod common;

use dlc_egg::codegen::manifest::Manifest;
use dlc_egg::codegen::Emitted;
use dlc_egg::cuda::{run_manifest, CudaError, RunCudaOptions};
use dlc_egg::ir::dtype::DType;
use dlc_egg::npy::{read_array, to_tensor};
use dlc_egg::rules::testing::{compare_tensor, Compare};
use dlc_egg::run::{self, Device, RunOptions};
use dlc_egg::tensor::Tensor;
use dlc_egg::{ir::frontend, lower};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `got` within the numerics contract of fusion (docs/numerics.md; as
/// `tests/optimize_examples.rs` compares the optimized program): graph-json's tolerance plus
/// κ·u·max|want|, since the kernels keep fp32 intermediates where the reference rounds each one
/// to the dtype.
fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    if let Err(e) = compare_tensor(what, got, want, Compare::Fused) {
        panic!("{what}: GPU against the reference: {e}");
    }
}

#[test]
#[ignore = "needs a GPU (sm_80 or sm_90), its driver and NVRTC"]
fn every_example_on_the_gpu_matches_the_reference() {
    let device = run::check_cuda().unwrap_or_else(|f| panic!("{:?}", f.diagnostics));
    eprintln!("device: {} ({:?})", device.name, device.arch);
    for (k, path) in common::example_paths().into_iter().enumerate() {
        let seed = 11 + k as u64;
        let graph = frontend::load_file(&path).unwrap_or_else(|d| panic!("{path:?}: {d:?}"));
        let prepared = run::prepare_inputs(&graph, &[], &BTreeMap::new(), Some(seed))
            .unwrap_or_else(|f| panic!("{path:?}: {:?}", f.diagnostics));
        let prog = lower::lower(&graph).unwrap_or_else(|d| panic!("{path:?}: {d:?}"));
        let want = dlc_egg::eval::evaluate(&prog, &prepared.bindings, &prepared.tensors)
            .unwrap_or_else(|d| panic!("{path:?}: {d:?}"));
        let dir = tempfile::tempdir().expect("temp dir");
        let opts = RunOptions {
            graph: path.clone(),
            out_dir: dir.path().to_path_buf(),
            device: Device::Cuda,
            random: Some(seed),
            ..RunOptions::default()
        };
        let written = run::run_graph(&graph, &opts)
            .unwrap_or_else(|f| panic!("{path:?}: {:?}", f.diagnostics));
        assert_eq!(written.len(), graph.signature.outputs.len(), "{path:?}");
        for w in written {
            let array = read_array(&w.path).unwrap_or_else(|d| panic!("{d:?}"));
            let got = to_tensor(array, &w.tensor, w.dtype).unwrap_or_else(|d| panic!("{d:?}"));
            let what = format!("{}: {}", path.display(), w.tensor);
            assert_close(&what, &got, &want[&w.tensor]);
        }
    }
}

#[test]
#[ignore = "needs a GPU (sm_80 or sm_90), its driver and NVRTC"]
fn repeat_writes_timing_json() {
    let dir = tempfile::tempdir().expect("temp dir");
    let opts = RunOptions {
        graph: PathBuf::from("examples/gemm_bias_relu.json"),
        out_dir: dir.path().to_path_buf(),
        device: Device::Cuda,
        random: Some(3),
        repeat: 5,
        ..RunOptions::default()
    };
    let report = run::run_report(&opts).unwrap_or_else(|f| panic!("{:?}", f.diagnostics));
    let (t, path) = report.timings.expect("timings with --repeat");
    assert_eq!(path, dir.path().join("timing.json"));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("timing.json")).expect("json");
    assert_eq!(v["repeat"], 5);
    assert!(v["total_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{v}");
    let kernels = v["kernels"].as_array().expect("kernels");
    assert_eq!(kernels.len(), t.kernels.len());
    assert!(kernels
        .iter()
        .all(|k| k["name"].is_string() && k["ms"].as_f64().is_some_and(|ms| ms >= 0.0)));
}

fn rows_program() -> Emitted {
    let read = |f: &str| {
        std::fs::read_to_string(format!("tests/data/cuda/{f}")).unwrap_or_else(|e| panic!("{e}"))
    };
    let manifest: Manifest =
        serde_json::from_str(&read("rows.manifest.json")).expect("a valid manifest");
    Emitted {
        source: read("rows.cu"),
        manifest,
    }
}

/// Inputs of `tests/data/cuda/rows.cu` and the outputs it must produce, computed in the same
/// fp32 order (so the comparison is exact).
fn rows_case(m: usize) -> (BTreeMap<String, Tensor>, BTreeMap<String, Tensor>) {
    let xs: Vec<f64> = (0..m * 4)
        .map(|i| ((i * 37 % 101) as f64 - 50.0) / 16.0)
        .collect();
    let ss = [0.5, -1.25, 2.0, 0.75];
    let is: Vec<f64> = (0..m).map(|i| (i % 7) as f64 - 3.0).collect();
    let x = Tensor::from_f64(DType::F16, vec![m, 4], &xs);
    let s = Tensor::from_f64(DType::BF16, vec![4], &ss);
    let i = Tensor::from_f64(DType::I32, vec![m], &is);
    let (xv, sv) = (x.to_f64(), s.to_f64());
    let y: Vec<f32> = (0..m * 4)
        .map(|k| xv[k] as f32 * sv[k % 4] as f32)
        .collect();
    let mut z = Vec::new();
    let mut p = Vec::new();
    for r in 0..m {
        let mut acc = 0f32;
        for j in 0..4 {
            acc += y[r * 4 + j];
        }
        acc += is[r] as f32;
        z.push(f64::from(half::f16::from_f32(acc).to_f32()));
        p.push(if acc > 0.0 { 1.0 } else { 0.0 });
    }
    let y: Vec<f64> = y.iter().map(|v| f64::from(*v)).collect();
    let inputs = BTreeMap::from([("X".into(), x), ("S".into(), s), ("I".into(), i)]);
    let outputs = BTreeMap::from([
        ("Y".into(), Tensor::from_f64(DType::F32, vec![m, 4], &y)),
        ("Z".into(), Tensor::from_f64(DType::F16, vec![m], &z)),
        ("P".into(), Tensor::from_f64(DType::Bool, vec![m], &p)),
    ]);
    (inputs, outputs)
}

#[test]
#[ignore = "needs a GPU (sm_80 or sm_90), its driver and NVRTC"]
fn run_manifest_runs_a_hand_written_program_exactly() {
    let program = rows_program();
    for m in [300usize, 1, 0] {
        let (inputs, want) = rows_case(m);
        let bindings = BTreeMap::from([("M".to_string(), m as i64)]);
        let opts = RunCudaOptions {
            repeat: 3,
            ..RunCudaOptions::default()
        };
        let (got, timings) = run_manifest(&program, &inputs, &bindings, &opts)
            .unwrap_or_else(|e| panic!("M={m}: {e}"));
        assert_eq!(got, want, "M={m}");
        let names: Vec<&str> = timings.kernels.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["scale_rows", "sum_rows"], "M={m}");
        assert!(timings.total_ms >= 0.0, "M={m}: {timings:?}");
    }
}

// The two below need no GPU and run everywhere.

#[test]
fn run_manifest_checks_inputs_before_touching_the_gpu() {
    let program = rows_program();
    let (mut inputs, _) = rows_case(4);
    inputs.insert("I".into(), Tensor::from_f64(DType::I32, vec![5], &[0.0; 5]));
    let bindings = BTreeMap::from([("M".to_string(), 4)]);
    match run_manifest(&program, &inputs, &bindings, &RunCudaOptions::default()) {
        Err(CudaError::Input { name, why }) => {
            assert_eq!(name, "I");
            assert!(why.contains("[5]") && why.contains("[4]"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    let e = run_manifest(
        &program,
        &inputs,
        &BTreeMap::new(),
        &RunCudaOptions::default(),
    )
    .expect_err("M is unbound");
    assert!(matches!(e, CudaError::Manifest { .. }), "{e}");
}

#[test]
fn run_manifest_without_a_gpu_is_no_device() {
    let (inputs, want) = rows_case(8);
    let bindings = BTreeMap::from([("M".to_string(), 8)]);
    match run_manifest(
        &rows_program(),
        &inputs,
        &bindings,
        &RunCudaOptions::default(),
    ) {
        // A GPU is here: then the program must also be right.
        Ok((got, _)) => assert_eq!(got, want),
        Err(CudaError::NoDevice { why, suggestion }) => {
            assert!(!why.is_empty());
            assert!(suggestion.contains("--device cpu"), "{suggestion}");
        }
        Err(e) => panic!("{e}"),
    }
}
