//! Real torch exports (issue 17): ResNet-18, MobileNetV2/V3, ViT-B/16, BERT-base and GPT-2
//! exported by `scripts/export-real-models.py` from the real torchvision/transformers code, each
//! imported from `.onnx`, optimized, run with the native CPU backend (`--device cpu`) on the
//! stored inputs and compared with onnxruntime's stored outputs within graph-json's tolerance
//! (`|Δ| ≤ 1e-3 + 1e-3·|ref|` for fp32); BERT and GPT-2 at two sequence lengths.
//!
//! Needs the torch venv and minutes, so it is `#[ignore]`d (CI has no torch):
//!
//! ```sh
//! scripts/install-torch.sh                                   # .torchenv/
//! .torchenv/bin/python scripts/export-real-models.py         # out/real-exports/
//! cargo test --release --test real_exports -- --ignored --nocapture
//! ```
//!
//! `REAL_EXPORTS_DIR` overrides the folder, `REAL_EXPORTS_ONLY=bert,gpt2` picks models. The test
//! prints one table row per model: ONNX nodes, import time, optimize time, kernels, and the
//! largest error against onnxruntime per sequence length.

use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::run::{lower_and_verify, run_graph, Device, RunOptions};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn dir() -> PathBuf {
    std::env::var_os("REAL_EXPORTS_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("out/real-exports"),
        PathBuf::from,
    )
}

/// The largest |got − want| and whether every element is within graph-json's fp32 tolerance.
fn compare(got: &Path, want: &Path) -> (f64, usize) {
    let read = |p: &Path| {
        let a = dlc_egg::npy::read_array(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        dlc_egg::npy::to_tensor(a, "out", DType::F32).expect("f32")
    };
    let (g, w) = (read(got), read(want));
    assert_eq!(g.shape, w.shape, "{}: shape", got.display());
    let mut max = 0.0f64;
    let mut beyond = 0;
    for (a, b) in g.to_f64().iter().zip(w.to_f64()) {
        let d = (a - b).abs();
        max = max.max(d);
        if d.is_nan() || d > 1e-3 + 1e-3 * b.abs() {
            beyond += 1;
        }
    }
    (max, beyond)
}

/// One model: import, optimize, run at every stored tag; returns the table row.
fn check_model(d: &Path, name: &str, info: &serde_json::Value) -> (String, usize) {
    let file = d.join(info["file"].as_str().expect("file"));
    let t = Instant::now();
    let graph = frontend::load_file(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
    let import_s = t.elapsed().as_secs_f64();
    let prog = lower_and_verify(&graph).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let t = Instant::now();
    let o = optimize(&prog, &OptimizeOptions::default()).expect("optimize");
    let optimize_s = t.elapsed().as_secs_f64();
    let inputs: Vec<String> = info["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .map(|v| v.as_str().expect("name").to_string())
        .collect();
    let mut errs = Vec::new();
    let mut failures = 0;
    for run in info["runs"].as_array().expect("runs") {
        let tag = run["tag"].as_str().expect("tag");
        let out_dir = std::env::temp_dir().join(format!("dlc-real-{name}-{tag}"));
        let opts = RunOptions {
            graph: file.clone(),
            inputs: inputs
                .iter()
                .map(|i| (i.clone(), d.join(format!("{name}.{tag}.in.{i}.npy"))))
                .collect(),
            out_dir: out_dir.clone(),
            device: Device::Cpu,
            ..RunOptions::default()
        };
        let written = run_graph(&graph, &opts).unwrap_or_else(|e| panic!("{name} {tag}: {e:?}"));
        let got = &written[0].path;
        let (max, beyond) = compare(got, &d.join(format!("{name}.{tag}.out.output.npy")));
        if beyond > 0 {
            eprintln!("{name} {tag}: {beyond} elements beyond graph-json's tolerance");
            failures += 1;
        }
        errs.push(format!("{tag}: {max:.2e}"));
    }
    let row = format!(
        "| {name} | {} | {import_s:.2} s | {optimize_s:.2} s | {} | {} |",
        info["nodes"],
        o.kernels.len(),
        errs.join(", ")
    );
    (row, failures)
}

/// Every exported model imports, optimizes and matches onnxruntime; prints the table.
#[test]
#[ignore = "needs scripts/install-torch.sh + scripts/export-real-models.py and minutes"]
fn real_exports_match_onnxruntime() {
    let d = dir();
    let text = std::fs::read_to_string(d.join("manifest.json")).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run scripts/export-real-models.py first)",
            d.display()
        )
    });
    let manifest: serde_json::Value = serde_json::from_str(&text).expect("manifest");
    let only = std::env::var("REAL_EXPORTS_ONLY").unwrap_or_default();
    let mut rows = vec![
        "| model | ONNX nodes | import | optimize | kernels | max abs error vs onnxruntime |"
            .to_string(),
        "| --- | --- | --- | --- | --- | --- |".to_string(),
    ];
    let mut failures = 0;
    for (name, info) in manifest.as_object().expect("object") {
        if info.get("error").is_some() || (!only.is_empty() && !only.split(',').any(|m| m == name))
        {
            continue;
        }
        let (row, f) = check_model(&d, name, info);
        eprintln!("{row}");
        rows.push(row);
        failures += f;
    }
    println!("{}", rows.join("\n"));
    assert_eq!(failures, 0, "runs beyond graph-json's tolerance");
}

/// The idioms of the real exports in a small model that CI runs (no torch):
/// `tests/data/real_exports/mask_idioms.onnx` from `scripts/export-real-models.py --idioms`.
/// A constant buffer sliced to the symbolic length, `Where(Equal(shape, -1), 1, shape)`,
/// `Gather(Flatten(mask), batch_idx·seq + kv_idx)` (the symbolic `seq` used as data), `And`, and
/// `IsNaN` zeroing a fully masked softmax row; run by the reference evaluator and the optimized
/// program at sequence lengths 5 and 9 against onnxruntime.
#[test]
fn mask_idioms_match_onnxruntime_at_two_lengths() {
    use dlc_egg::run::{evaluate_optimized, PreparedInputs};
    use std::collections::BTreeMap;
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real_exports");
    let graph = frontend::load_file(&d.join("mask_idioms.onnx")).unwrap_or_else(|e| panic!("{e}"));
    let prog = lower_and_verify(&graph).expect("lower");
    for tag in ["s5", "s9"] {
        let mut tensors = graph.constants.clone();
        for name in ["input_ids", "attention_mask"] {
            let info = graph.tensor(name).expect("input");
            let arr =
                dlc_egg::npy::read_array(&d.join(format!("{tag}.in.{name}.npy"))).expect("npy");
            tensors.insert(
                name.to_string(),
                dlc_egg::npy::to_tensor(arr, name, info.dtype).expect("dtype"),
            );
        }
        let shapes = tensors
            .iter()
            .map(|(k, t)| (k.clone(), t.shape.clone()))
            .collect();
        let bindings = frontend::resolve_symbols(&graph, &BTreeMap::new(), &shapes).expect("bind");
        let reference = dlc_egg::eval::evaluate(&prog, &bindings, &tensors).expect("evaluate");
        let prepared = PreparedInputs { bindings, tensors };
        let optimized = evaluate_optimized(&prog, &prepared).expect("optimized");
        let want = dlc_egg::npy::read_array(&d.join(format!("{tag}.out.npy"))).expect("npy");
        let want = dlc_egg::npy::to_tensor(want, "out", DType::F32).expect("f32");
        for (which, res) in [("reference", &reference), ("optimized", &optimized)] {
            let got = &res["output"];
            assert_eq!(got.shape, want.shape, "{tag} {which}: shape");
            for (i, (a, b)) in got.to_f64().iter().zip(want.to_f64()).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-3 + 1e-3 * b.abs(),
                    "{tag} {which}[{i}]: {a} vs onnxruntime {b}"
                );
            }
        }
    }
}
