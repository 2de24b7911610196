//! End-to-end tests of the `dlc-egg` binary: exit statuses, JSON diagnostics on stderr and the
//! files `run` writes.

use dlc_egg::ir::dtype::DType;
use dlc_egg::npy::{read_array, to_tensor, write_tensor};
use dlc_egg::tensor::Tensor;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_dlc-egg");

/// `Y[M,2] = relu(X[M,3] · W[3,2] + b[2])` in fp32, M = 4 by default.
const GEMM_BIAS_RELU: &str = r#"{
  "signature": {
    "inputs": [{"tensor": "X"}, {"tensor": "W", "role": "param"}, {"tensor": "b", "role": "param"}],
    "outputs": [{"tensor": "Y"}]
  },
  "symbols": {"M": 4},
  "tensors": {
    "X": {"dtype": "fp32", "shape": ["M", 3]},
    "W": {"dtype": "fp32", "shape": [3, 2]},
    "b": {"dtype": "fp32", "shape": [2]},
    "Y": {"dtype": "fp32", "shape": ["M", 2]}
  },
  "graph": [
    {"op": "MatMul", "name": "mm", "inputs": ["X", "W"], "outputs": ["H"], "attrs": {}},
    {"op": "Elementwise", "name": "add", "inputs": ["H", "b"], "outputs": ["Z"], "attrs": {"fn": "add"}},
    {"op": "Elementwise", "name": "relu", "inputs": ["Z"], "outputs": ["Y"], "attrs": {"fn": "relu"}}
  ]
}"#;

/// `Y = gather(X[3,5] (fp16), I[3,2] (i32), axis 1)`.
const GATHER: &str = r#"{
  "signature": {"inputs": [{"tensor": "X"}, {"tensor": "I"}], "outputs": [{"tensor": "Y"}]},
  "tensors": {
    "X": {"dtype": "fp16", "shape": [3, 5]},
    "I": {"dtype": "i32", "shape": [3, 2]},
    "Y": {"dtype": "fp16", "shape": [3, 2]}
  },
  "graph": [{"op": "Gather", "name": "g", "inputs": ["X", "I"], "outputs": ["Y"], "attrs": {"axis": 1}}]
}"#;

struct Ctx {
    dir: tempfile::TempDir,
}

impl Ctx {
    fn new() -> Ctx {
        Ctx {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).expect("write");
        p
    }

    fn tensor(&self, name: &str, t: &Tensor) -> PathBuf {
        let p = self.path(name);
        write_tensor(&p, t).expect("write npy");
        p
    }

    /// Runs the binary with the temp dir as working directory.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("spawn dlc-egg")
    }
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Asserts exit status 2 and returns the JSON diagnostics printed on stderr.
fn json_failure(out: &Output) -> Vec<Value> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    let v: Value = serde_json::from_str(&stderr).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let diags = v["diagnostics"]
        .as_array()
        .expect("diagnostics array")
        .clone();
    assert!(!diags.is_empty());
    for d in &diags {
        for key in ["code", "kind", "at", "why", "suggestion"] {
            assert!(d.get(key).is_some(), "{key} missing in {d}");
        }
    }
    diags
}

fn codes(diags: &[Value]) -> Vec<String> {
    diags
        .iter()
        .map(|d| d["code"].as_str().unwrap_or("").to_string())
        .collect()
}

fn f32_tensor(shape: Vec<usize>, values: &[f64]) -> Tensor {
    Tensor::from_f64(DType::F32, shape, values)
}

// ---------------------------------------------------------------------------------------------
// Tests that only need the CLI layer.

#[test]
fn help_documents_every_flag() {
    let ctx = Ctx::new();
    let out = ctx.run(&["run", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--input",
        "--bind",
        "--out-dir",
        "--device",
        "--random",
        "--repeat",
        "--diagnostics",
    ] {
        assert!(help.contains(flag), "{flag} in {help}");
    }
    let out = ctx.run(&["lower", "--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("--dump"));
    let out = ctx.run(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for cmd in ["run", "lower", "check"] {
        assert!(help.contains(cmd), "{cmd}");
    }
}

#[test]
fn bad_bind_is_e0306() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    for bind in ["M", "M=abc", "M=1.5", "=4"] {
        let out = ctx.run(&["--diagnostics", "json", "run", s(&g), "--bind", bind]);
        assert_eq!(codes(&json_failure(&out)), vec!["E0311"], "{bind}");
    }
}

#[test]
fn bad_input_syntax_is_e0305() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let out = ctx.run(&["run", s(&g), "--input", "X", "--diagnostics=json"]);
    assert_eq!(codes(&json_failure(&out)), vec!["E0310"]);
}

#[test]
fn device_cuda_without_a_gpu_is_e0400_saying_why() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let out = ctx.run(&["run", s(&g), "--device", "cuda", "--diagnostics", "json"]);
    let Err(here) = dlc_egg::run::check_cuda() else {
        // A GPU, its driver and NVRTC are here: tests/cuda_run.rs runs --device cuda.
        eprintln!("a usable GPU is here; E0400 cannot be observed");
        return;
    };
    let diags = json_failure(&out);
    assert_eq!(codes(&diags), vec!["E0400"]);
    assert_eq!(diags[0]["kind"], "DeviceUnavailable");
    let why = diags[0]["why"].as_str().unwrap_or("");
    assert_eq!(
        why, here.diagnostics.0[0].why,
        "the binary and the library agree"
    );
    assert!(
        [
            "no CUDA driver library",
            "found no GPU",
            "NVRTC is not available",
            "lacks `cu"
        ]
        .iter()
        .any(|reason| why.contains(reason)),
        "a precise reason: {why}"
    );
    assert!(diags[0]["suggestion"]
        .as_str()
        .unwrap_or("")
        .contains("--device cpu"));
    assert!(!ctx.path("out").exists(), "nothing is written");
}

#[test]
fn repeat_needs_device_cuda() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let out = ctx.run(&[
        "run",
        s(&g),
        "--random",
        "1",
        "--repeat",
        "3",
        "--diagnostics",
        "json",
    ]);
    let diags = json_failure(&out);
    assert_eq!(codes(&diags), vec!["E0313"]);
    assert!(diags[0]["suggestion"]
        .as_str()
        .unwrap_or("")
        .contains("--device cuda"));
}

#[test]
fn arch_needs_device_cuda() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    for device in ["reference", "cpu"] {
        let out = ctx.run(&[
            "run",
            s(&g),
            "--random",
            "1",
            "--device",
            device,
            "--arch",
            "sm80",
            "--diagnostics",
            "json",
        ]);
        let diags = json_failure(&out);
        assert_eq!(codes(&diags), vec!["E0313"], "{device}");
        assert_eq!(diags[0]["at"]["argument"], "--arch", "{device}");
    }
}

#[test]
fn malformed_command_lines_are_diagnostics() {
    let ctx = Ctx::new();
    for args in [
        vec!["--diagnostics", "json", "frobnicate"],
        vec!["--diagnostics", "json", "run"],
        vec!["--diagnostics", "json", "run", "g.json", "--random", "x"],
        vec!["--diagnostics", "json", "run", "g.json", "--device", "tpu"],
        vec!["--diagnostics", "json"],
    ] {
        let out = ctx.run(&args);
        assert_eq!(codes(&json_failure(&out)), vec!["E0313"], "{args:?}");
    }
}

#[test]
fn text_diagnostics_are_the_default() {
    let ctx = Ctx::new();
    let out = ctx.run(&["run", "g.json", "--bind", "M"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error[E0311] InvalidBindArgument"),
        "{stderr}"
    );
    assert!(stderr.contains("help:"), "{stderr}");
}

#[test]
fn missing_graph_file_is_a_diagnostic() {
    let ctx = Ctx::new();
    for cmd in ["run", "lower", "check"] {
        let out = ctx.run(&["--diagnostics", "json", cmd, "does-not-exist.json"]);
        let diags = json_failure(&out);
        assert_eq!(codes(&diags).len(), 1, "{cmd}");
    }
}

#[test]
fn lower_dump_is_deterministic_json() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let a = ctx.run(&["lower", s(&g), "--dump", "tiny"]);
    let b = ctx.run(&["lower", s(&g), "--dump", "tiny"]);
    assert_eq!(
        a.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&a.stderr)
    );
    assert_eq!(a.stdout, b.stdout);
    let v: Value = serde_json::from_slice(&a.stdout).expect("json");
    assert!(v.get("uops").is_some(), "{v}");
    let both = ctx.run(&["lower", s(&g), "--dump", "tiny,frontend"]);
    let v: Value = serde_json::from_slice(&both.stdout).expect("json");
    assert!(v["tiny"].get("uops").is_some(), "{v}");
    assert!(v["frontend"].get("signature").is_some(), "{v}");
}

#[test]
fn lower_rejects_unknown_dump_layers() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let out = ctx.run(&["--diagnostics", "json", "lower", s(&g), "--dump", "tiny,cu"]);
    assert_eq!(codes(&json_failure(&out)), vec!["E0313"]);
}

#[test]
fn check_prints_ok() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let out = ctx.run(&["check", s(&g)]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("ok"));
}

// ---------------------------------------------------------------------------------------------
// Tests through the whole pipeline (frontend, lowering, evaluator).

#[test]
fn bind_semantics_come_from_the_frontend() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let out = ctx.run(&[
        "--diagnostics",
        "json",
        "run",
        s(&g),
        "--random",
        "0",
        "--bind",
        "M=-3",
    ]);
    assert_eq!(codes(&json_failure(&out)), vec!["E0205"]);
    let out = ctx.run(&[
        "--diagnostics",
        "json",
        "run",
        s(&g),
        "--random",
        "0",
        "--bind",
        "Q=3",
    ]);
    assert_eq!(codes(&json_failure(&out)), vec!["E0204"]);
}

#[test]
fn gather_index_out_of_range_is_a_user_error() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GATHER);
    let i = ctx.tensor(
        "i.npy",
        &Tensor::from_f64(DType::I32, vec![3, 2], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
    );
    let out = ctx.run(&[
        "--diagnostics",
        "json",
        "run",
        s(&g),
        "--random",
        "0",
        "--input",
        &format!("I={}", s(&i)),
    ]);
    assert_eq!(json_failure(&out).len(), 1);
}

#[test]
fn lower_dump_frontend_shows_normalized_attrs() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GATHER);
    let out = ctx.run(&["lower", s(&g), "--dump", "frontend"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["graph"][0]["attrs"]["axis"], 1);
    assert_eq!(v["tensors"]["Y"]["dtype"], "fp16");
}

#[test]
fn malformed_json_is_exit_2_with_json_diagnostics() {
    let ctx = Ctx::new();
    let g = ctx.file("bad.json", "{\"signature\": {\"inputs\": [}");
    for cmd in ["run", "lower", "check"] {
        let out = ctx.run(&["--diagnostics", "json", cmd, s(&g)]);
        let diags = json_failure(&out);
        assert!(codes(&diags)[0].starts_with("E00"), "{diags:?}");
    }
}

#[test]
fn missing_input_is_e0303_naming_the_tensor() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let x = ctx.tensor("x.npy", &f32_tensor(vec![4, 3], &[0.0; 12]));
    let out = ctx.run(&[
        "--diagnostics",
        "json",
        "run",
        s(&g),
        "--input",
        &format!("X={}", s(&x)),
    ]);
    let diags = json_failure(&out);
    assert_eq!(codes(&diags), vec!["E0303", "E0303"]);
    assert_eq!(diags[0]["at"]["tensor"], "W");
    let suggestion = diags[0]["suggestion"].as_str().unwrap_or("");
    assert!(suggestion.contains("--input W="), "{suggestion}");
    assert!(suggestion.contains("--random"), "{suggestion}");
}

#[test]
fn unknown_input_is_e0304() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let x = ctx.tensor("x.npy", &f32_tensor(vec![4, 3], &[0.0; 12]));
    let out = ctx.run(&[
        "--diagnostics",
        "json",
        "run",
        s(&g),
        "--random",
        "0",
        "--input",
        &format!("Q={}", s(&x)),
    ]);
    assert_eq!(codes(&json_failure(&out)), vec!["E0309"]);
}

#[test]
fn wrong_npy_dtype_is_e0301() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let x = ctx.tensor(
        "x.npy",
        &Tensor::from_f64(DType::I32, vec![4, 3], &[0.0; 12]),
    );
    let out = ctx.run(&[
        "--diagnostics",
        "json",
        "run",
        s(&g),
        "--random",
        "0",
        "--input",
        &format!("X={}", s(&x)),
    ]);
    let diags = json_failure(&out);
    assert_eq!(codes(&diags), vec!["E0301"]);
    assert_eq!(diags[0]["at"]["tensor"], "X");
}

#[test]
fn wrong_npy_shape_is_e0302() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let w = ctx.tensor("w.npy", &f32_tensor(vec![2, 3], &[0.0; 6]));
    let out = ctx.run(&[
        "--diagnostics",
        "json",
        "run",
        s(&g),
        "--random",
        "0",
        "--input",
        &format!("W={}", s(&w)),
    ]);
    let diags = json_failure(&out);
    assert_eq!(codes(&diags), vec!["E0302"]);
    assert_eq!(diags[0]["at"]["tensor"], "W");
}

#[test]
fn corrupt_npy_is_e0300() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let x = ctx.file("x.npy", "not numpy");
    let out = ctx.run(&[
        "--diagnostics",
        "json",
        "run",
        s(&g),
        "--random",
        "0",
        "--input",
        &format!("X={}", s(&x)),
    ]);
    assert_eq!(codes(&json_failure(&out)), vec!["E0300"]);
}

/// `relu(X·W + b)` by hand.
fn gemm_bias_relu(x: &[f64], w: &[f64], b: &[f64], m: usize) -> Vec<f64> {
    let mut y = vec![0.0; m * 2];
    for i in 0..m {
        for j in 0..2 {
            let acc: f64 = (0..3).map(|k| x[i * 3 + k] * w[k * 2 + j]).sum::<f64>() + b[j];
            y[i * 2 + j] = (acc as f32 as f64).max(0.0);
        }
    }
    y
}

#[test]
fn gemm_bias_relu_matches_a_hand_computation() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let xv: Vec<f64> = (0..12).map(|i| i as f64 * 0.5 - 3.0).collect();
    let wv = [1.0, -1.0, 0.5, 2.0, -0.25, 0.0];
    let bv = [0.5, -1.0];
    let x = ctx.tensor("x.npy", &f32_tensor(vec![4, 3], &xv));
    let w = ctx.tensor("w.npy", &f32_tensor(vec![3, 2], &wv));
    let b = ctx.tensor("b.npy", &f32_tensor(vec![2], &bv));
    let out = ctx.run(&[
        "run",
        s(&g),
        "--input",
        &format!("X={}", s(&x)),
        "--input",
        &format!("W={}", s(&w)),
        "--input",
        &format!("b={}", s(&b)),
        "--out-dir",
        "res",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Y fp32 [4, 2]"), "{stdout}");
    let y = read_array(&ctx.path("res/Y.npy")).expect("Y.npy");
    assert_eq!(y.descr, "<f4");
    let y = to_tensor(y, "Y", DType::F32).expect("fp32");
    assert_eq!(y.shape, vec![4, 2]);
    let expected = gemm_bias_relu(&xv, &wv, &bv, 4);
    for (got, want) in y.to_f64().iter().zip(&expected) {
        assert!((got - want).abs() <= 1e-5, "{got} vs {want}");
    }
}

#[test]
fn bind_and_array_shapes_set_symbols() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    // M comes from --bind (over the default 4).
    let out = ctx.run(&["run", s(&g), "--random", "1", "--bind", "M=6"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let y = read_array(&ctx.path("out/Y.npy")).expect("Y.npy");
    assert_eq!(y.shape, vec![6, 2]);
    // M comes from X's array shape.
    let x = ctx.tensor("x.npy", &f32_tensor(vec![5, 3], &[1.0; 15]));
    let out = ctx.run(&[
        "run",
        s(&g),
        "--random",
        "1",
        "--input",
        &format!("X={}", s(&x)),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let y = read_array(&ctx.path("out/Y.npy")).expect("Y.npy");
    assert_eq!(y.shape, vec![5, 2]);
}

#[test]
fn random_runs_are_byte_identical_for_the_same_seed() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GEMM_BIAS_RELU);
    let run = |dir: &str, seed: &str| {
        let out = ctx.run(&["run", s(&g), "--random", seed, "--out-dir", dir]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read(ctx.path(&format!("{dir}/Y.npy"))).expect("Y.npy")
    };
    let a = run("a", "42");
    let b = run("b", "42");
    let c = run("c", "43");
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn random_gather_indices_are_in_range() {
    let ctx = Ctx::new();
    let g = ctx.file("g.json", GATHER);
    for seed in ["0", "1", "2", "3"] {
        let out = ctx.run(&["run", s(&g), "--random", seed]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let y = read_array(&ctx.path("out/Y.npy")).expect("Y.npy");
        assert_eq!((y.descr.as_str(), y.shape.clone()), ("<f2", vec![3, 2]));
    }
}

#[test]
fn example_gemm_bias_relu_runs_with_random_inputs() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gemm_bias_relu.json");
    let ctx = Ctx::new();
    let out = ctx.run(&["run", s(&example), "--random", "0", "--out-dir", "out"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.trim().is_empty());
    for line in stdout.lines() {
        let path = line.rsplit(" -> ").next().expect("path");
        assert!(ctx.path(path).exists(), "{line}");
    }
}

#[test]
fn lower_dump_egraph_is_egraph_serialize_json() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dlc-egg"))
        .args([
            "lower",
            concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gemm_bias_relu.json"),
            "--dump",
            "egraph",
        ])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let g: dlc_egg::extract::serialize::SerializedEGraph =
        serde_json::from_slice(&out.stdout).expect("egraph-serialize JSON");
    assert_eq!(g.root_eclasses.len(), 1);
    assert!(g.nodes.values().any(|n| n.op == "reduce"));
    let typ = g
        .class_data
        .get(&g.root_eclasses[0])
        .and_then(|d| d.typ.clone());
    assert_eq!(typ.as_deref(), Some("fp16[M,N]"));
}
