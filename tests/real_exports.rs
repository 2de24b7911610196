//! Real torch exports (issue 17): ResNet-18, MobileNetV2/V3, ViT-B/16, BERT-base and GPT-2
//! exported by `scripts/export-real-models.py` from the real torchvision/transformers code
//! (TorchScript exporter, opset 17), each imported from `.onnx`, written as graph.json with its
//! safetensors sidecar (what `dlc-egg import` writes) and loaded back (checked equal to the `.onnx`
//! import), optimized, run with the native CPU backend (`run --device cpu`: the reference
//! playback of these models takes too long) on the stored inputs, and compared with onnxruntime's
//! stored outputs within graph-json's tolerance (`|Δ| ≤ 1e-3 + 1e-3·|ref|` for fp32). BERT and
//! GPT-2 must import with a symbolic sequence length and run at two lengths.
//!
//! Needs torch and minutes (BERT's optimize alone takes minutes), so it is `#[ignore]`d (CI has no
//! torch). Where it looks:
//!
//! - the exports: `$REAL_EXPORTS_DIR` (default `out/real-exports/`, git-ignored), with the
//!   `manifest.json` the export script writes;
//! - the Python that exports missing models: `$REAL_EXPORTS_PYTHON`, else `.torchenv/bin/python`
//!   (`scripts/install-torch.sh` creates it). A required model missing from the manifest (or
//!   recorded there with an export error) is exported with it; with neither the exports nor a
//!   Python the test fails and says what to run. It never skips a model silently.
//!
//! ```sh
//! scripts/install-torch.sh                                   # .torchenv/ (once)
//! cargo test --release --test real_exports -- --ignored --nocapture
//! # or with exports made elsewhere:
//! REAL_EXPORTS_DIR=/work/exports17 REAL_EXPORTS_PYTHON=/work/torchenv/bin/python \
//!     cargo test --release --test real_exports -- --ignored --nocapture
//! ```
//!
//! Required: `resnet18`, `mobilenet_v2` or `mobilenet_v3_small`, `vit_b_16`, `bert`, `gpt2`
//! (every other model in the manifest is checked too); `REAL_EXPORTS_ONLY=bert,gpt2` requires and
//! checks only those. The test prints one table row per model and sequence length: ONNX nodes,
//! import / write graph.json / load graph.json times, optimize time (the plan cache's compile for
//! that shape cluster: a hit costs nothing), kernels, the run's time, and the largest error against
//! onnxruntime.

use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend::{self, Graph};
use dlc_egg::optimize::OptimizeOptions;
use dlc_egg::run::{lower_and_verify, prepare_inputs, run_report_loaded, Device, RunOptions};
use dlc_egg::shapes::{cache::graph_hash, PlanCache};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Models the test requires; each inner list is satisfied by any one of its names.
const REQUIRED: &[&[&str]] = &[
    &["resnet18"],
    &["mobilenet_v2", "mobilenet_v3_small"],
    &["vit_b_16"],
    &["bert"],
    &["gpt2"],
];

/// Models that must import with a symbolic sequence length and run at two lengths.
const SYMBOLIC_SEQUENCE: &[&str] = &["bert", "gpt2"];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn exports_dir() -> PathBuf {
    std::env::var_os("REAL_EXPORTS_DIR")
        .map_or_else(|| repo().join("out/real-exports"), PathBuf::from)
}

/// `$REAL_EXPORTS_PYTHON`, else `.torchenv/bin/python` when it exists.
fn python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("REAL_EXPORTS_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let venv = repo().join(".torchenv/bin/python");
    venv.exists().then_some(venv)
}

fn read_manifest(d: &Path) -> serde_json::Map<String, serde_json::Value> {
    let Ok(text) = std::fs::read_to_string(d.join("manifest.json")) else {
        return serde_json::Map::new();
    };
    match serde_json::from_str(&text) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => panic!("{}: not a JSON object", d.join("manifest.json").display()),
    }
}

/// The required models (one name per group) that the manifest lacks or records with an error.
fn missing(manifest: &serde_json::Map<String, serde_json::Value>, only: &[String]) -> Vec<String> {
    let ok = |n: &str| manifest.get(n).is_some_and(|i| i.get("error").is_none());
    if !only.is_empty() {
        return only.iter().filter(|n| !ok(n)).cloned().collect();
    }
    REQUIRED
        .iter()
        .filter(|group| !group.iter().any(|n| ok(n)))
        .map(|group| group[0].to_string())
        .collect()
}

/// The manifest, after exporting what is missing with the torch venv (fails when there is none).
fn exports(d: &Path, only: &[String]) -> serde_json::Map<String, serde_json::Value> {
    let manifest = read_manifest(d);
    let need = missing(&manifest, only);
    if need.is_empty() {
        return manifest;
    }
    let Some(py) = python() else {
        panic!(
            "real exports missing from {}: {} — and no Python with torch to export them: run \
             scripts/install-torch.sh (creates .torchenv/) or set REAL_EXPORTS_PYTHON, or export \
             them yourself (scripts/export-real-models.py --out DIR) and set REAL_EXPORTS_DIR",
            d.display(),
            need.join(", ")
        )
    };
    eprintln!(
        "exporting {} into {} with {}",
        need.join(","),
        d.display(),
        py.display()
    );
    let status = std::process::Command::new(&py)
        .arg(repo().join("scripts/export-real-models.py"))
        .args(["--out".as_ref(), d.as_os_str()])
        .args(["--only", &need.join(",")])
        .status()
        .unwrap_or_else(|e| panic!("{}: {e}", py.display()));
    assert!(status.success(), "export-real-models.py failed: {status}");
    let manifest = read_manifest(d);
    let still = missing(&manifest, only);
    assert!(
        still.is_empty(),
        "export failed for {}: {:?}",
        still.join(", "),
        still.iter().map(|n| manifest.get(n)).collect::<Vec<_>>()
    );
    manifest
}

/// The largest |got − want| and how many elements lie beyond graph-json's fp32 tolerance.
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

/// What `dlc-egg import` does, timed: import the `.onnx`, write graph.json and its sidecar into
/// `work`, load graph.json back. Asserts the loaded graph equals the `.onnx` import.
/// Returns the graph, the graph.json path and the times (import, write, load).
fn import_roundtrip(name: &str, file: &Path, work: &Path) -> (Graph, PathBuf, [f64; 3]) {
    let t = Instant::now();
    let imported = dlc_egg::onnx::import_file(file).unwrap_or_else(|e| panic!("{name}: {e}"));
    let import_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let json = work.join(format!("{name}.json"));
    let sidecar = format!("{name}.safetensors");
    imported
        .write_sidecar(&work.join(&sidecar))
        .expect("sidecar");
    let doc = imported.document(&sidecar);
    std::fs::write(&json, serde_json::to_string_pretty(&doc).expect("json")).expect("write");
    let write_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let graph =
        dlc_egg::pipeline::load_file(&json).unwrap_or_else(|e| panic!("{name} graph.json: {e}"));
    let load_s = t.elapsed().as_secs_f64();
    let mut direct = frontend::load_str(&imported.doc.to_string(), &file.display().to_string())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    direct.constants = imported.constants;
    assert_eq!(
        graph.signature, direct.signature,
        "{name}: graph.json signature"
    );
    assert!(
        graph.nodes == direct.nodes,
        "{name}: graph.json nodes differ"
    );
    assert!(
        graph.tensors == direct.tensors,
        "{name}: graph.json tensors differ"
    );
    for (k, t) in &direct.constants {
        assert!(
            graph.constants.get(k) == Some(t),
            "{name}: constant {k} differs in graph.json"
        );
    }
    assert_eq!(
        graph.constants.len(),
        direct.constants.len(),
        "{name}: constants"
    );
    (graph, json, [import_s, write_s, load_s])
}

/// One model: import (graph.json round trip), then per stored sequence length optimize (the plan
/// cache's compile), run with `--device cpu` and compare. Returns table rows and failures.
fn check_model(d: &Path, name: &str, info: &serde_json::Value) -> (Vec<String>, usize) {
    let file = d.join(info["file"].as_str().expect("file"));
    let work = std::env::temp_dir().join(format!("dlc-real-exports/{name}"));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("work dir");
    let (graph, json, [import_s, write_s, load_s]) = import_roundtrip(name, &file, &work);
    lower_and_verify(&graph).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let runs = info["runs"].as_array().expect("runs");
    let symbolic: Vec<String> = graph
        .signature
        .inputs
        .iter()
        .filter(|i| !graph.constants.contains_key(&i.tensor))
        .flat_map(|i| {
            graph.tensors[&i.tensor]
                .shape
                .iter()
                .flat_map(|d| d.symbols())
        })
        .collect();
    if SYMBOLIC_SEQUENCE.contains(&name) {
        assert!(
            !symbolic.is_empty(),
            "{name}: imported without a symbolic dimension"
        );
        let shapes: std::collections::BTreeSet<String> =
            runs.iter().map(|r| r["shape"].to_string()).collect();
        assert!(
            shapes.len() >= 2,
            "{name}: needs runs at two sequence lengths, has {shapes:?}"
        );
    }
    let inputs: Vec<String> = info["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .map(|v| v.as_str().expect("name").to_string())
        .collect();
    let hash = graph_hash(&std::fs::read(&json).expect("graph.json"));
    let plans = work.join("plans");
    let cache = PlanCache::on_disk(&plans);
    let (mut rows, mut failures) = (Vec::new(), 0);
    for run in runs {
        let tag = run["tag"].as_str().expect("tag");
        let given: Vec<(String, PathBuf)> = inputs
            .iter()
            .map(|i| (i.clone(), d.join(format!("{name}.{tag}.in.{i}.npy"))))
            .collect();
        let prepared = prepare_inputs(&graph, &given, &BTreeMap::new(), None)
            .unwrap_or_else(|e| panic!("{name} {tag}: {e:?}"));
        let t = Instant::now();
        let compiled = cache
            .compile(
                &graph,
                &hash,
                &prepared.bindings,
                &OptimizeOptions::default(),
            )
            .unwrap_or_else(|e| panic!("{name} {tag}: optimize: {e}"));
        let optimize_s = t.elapsed().as_secs_f64();
        drop(prepared);
        let opts = RunOptions {
            graph: json.clone(),
            inputs: given,
            out_dir: work.join(tag),
            device: Device::Cpu,
            plan_cache: Some(plans.clone()),
            ..RunOptions::default()
        };
        let t = Instant::now();
        let report = run_report_loaded(&graph, &opts, &hash)
            .unwrap_or_else(|e| panic!("{name} {tag}: {e:?}"));
        let run_s = t.elapsed().as_secs_f64();
        let got = &report.outputs[0].path;
        let (max, beyond) = compare(got, &d.join(format!("{name}.{tag}.out.output.npy")));
        if beyond > 0 {
            eprintln!("{name} {tag}: {beyond} elements beyond graph-json's tolerance");
            failures += 1;
        }
        let row = format!(
            "| {name} | {tag} ({}) | {} | {import_s:.2} / {write_s:.2} / {load_s:.2} s | {optimize_s:.1} s ({}) | {} | {run_s:.1} s | {max:.2e} ({} of {} beyond) | {:.3} |",
            run["shape"].as_array().map(|s| s.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("×")).unwrap_or_default(),
            info["nodes"],
            match compiled.outcome {
                dlc_egg::shapes::CacheOutcome::Hit(_) => "plan cache hit",
                dlc_egg::shapes::CacheOutcome::Miss(_) => "compiled",
            },
            compiled.plan.kernels.len(),
            beyond,
            report.outputs[0].shape.iter().product::<usize>(),
            run["max_abs"].as_f64().unwrap_or(f64::NAN),
        );
        eprintln!("{row}");
        rows.push(row);
    }
    (rows, failures)
}

/// Every exported model imports, round-trips through graph.json, optimizes and matches
/// onnxruntime; prints the table.
#[test]
#[ignore = "needs torch (scripts/install-torch.sh) or REAL_EXPORTS_DIR, and many minutes"]
fn real_exports_match_onnxruntime() {
    let d = exports_dir();
    let only: Vec<String> = std::env::var("REAL_EXPORTS_ONLY")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let manifest = exports(&d, &only);
    let mut rows = vec![
        "| model | run (output shape) | ONNX nodes | import / write / load graph.json | optimize | kernels | run `--device cpu` | max abs error vs onnxruntime | max \\|ref\\| |"
            .to_string(),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |".to_string(),
    ];
    let mut failures = 0;
    for (name, info) in &manifest {
        if !only.is_empty() && !only.contains(name) {
            continue;
        }
        if let Some(e) = info.get("error") {
            eprintln!("{name}: not checked, its export failed: {e}");
            continue;
        }
        let (r, f) = check_model(&d, name, info);
        rows.extend(r);
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
    let graph =
        dlc_egg::pipeline::load_file(&d.join("mask_idioms.onnx")).unwrap_or_else(|e| panic!("{e}"));
    let prog = lower_and_verify(&graph).expect("lower");
    for tag in ["s5", "s9"] {
        let mut tensors = graph.constants.to_map();
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
