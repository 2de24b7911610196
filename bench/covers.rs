//! Covers, not rules (issue 23): for every example, the realistic graphs, the ONNX models of
//! `tests/data/onnx` and the BERT-base encoder, the extracted cover's kernels, predicted time and
//! bytes to/from global memory with the graph substitutions (phase "subst") and without them
//! (`OptimizeOptions::substitutions = false`), side by side, and the optimize wall time.
//!
//! `cargo bench --bench covers` prints the table (markdown); `COVERS_ONLY=name,...` restricts
//! it to graphs whose name contains one of the words; `COVERS_LAYERS=1,12` chooses the encoder
//! sizes (default 1 and 12); `COVERS_ONNX=/path/a.onnx,/path/b.onnx` adds real exports (e.g. the
//! files of `scripts/export-real-models.py --out DIR`, kept out of the repo). Without `--bench`
//! (the `cargo test --all-targets` smoke run) it covers only `examples/gemm_bias_relu.json`.
#[path = "common/bench_graphs.rs"]
mod bench_graphs;
use bench_graphs::{transformer_encoder, EncoderConfig};
use dlc_egg::ir::frontend::Graph;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::{ir::frontend, lower};
use std::path::Path;
use std::time::Instant;

/// One cover's summary: kernels, predicted µs, bytes, optimize seconds.
struct Summary {
    kernels: usize,
    micros: f64,
    bytes: u64,
    secs: f64,
}

fn summarize(g: &Graph, substitutions: bool) -> Result<Summary, String> {
    let p = lower::lower(g).map_err(|d| d.to_string())?;
    let opts = OptimizeOptions {
        substitutions,
        ..OptimizeOptions::default()
    };
    let t = Instant::now();
    let o = optimize(&p, &opts).map_err(|e| e.to_string())?;
    Ok(Summary {
        kernels: o.kernels.len(),
        micros: o.cost.time.micros(),
        bytes: o.cost.bytes,
        secs: t.elapsed().as_secs_f64(),
    })
}

fn graphs(smoke: bool) -> Vec<(String, Result<Graph, String>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut json_dir = |dir: &str| {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        for f in files
            .into_iter()
            .filter(|f| f.extension().is_some_and(|e| e == "json"))
        {
            let name = format!(
                "{dir}/{}",
                f.file_name().unwrap_or_default().to_string_lossy()
            );
            let g = std::fs::read_to_string(&f)
                .map_err(|e| e.to_string())
                .and_then(|s| frontend::load_str(&s, &name).map_err(|d| d.to_string()));
            out.push((name, g));
        }
    };
    if smoke {
        json_dir("examples");
        out.retain(|(n, _)| n.ends_with("gemm_bias_relu.json"));
        return out;
    }
    json_dir("examples");
    json_dir("tests/data/realistic");
    for m in ["bert_tiny", "resnet_block"] {
        let path = root.join("tests/data/onnx").join(m).join("model.onnx");
        out.push((
            format!("onnx/{m}"),
            dlc_egg::onnx::load(&path).map_err(|d| d.to_string()),
        ));
    }
    for f in std::env::var("COVERS_ONNX")
        .ok()
        .into_iter()
        .flat_map(|v| v.split(',').map(str::to_string).collect::<Vec<_>>())
        .filter(|f| !f.trim().is_empty())
    {
        let path = Path::new(f.trim());
        let name = format!(
            "real/{}",
            path.file_name().unwrap_or_default().to_string_lossy()
        );
        out.push((name, dlc_egg::onnx::load(path).map_err(|d| d.to_string())));
    }
    let layers: Vec<usize> = std::env::var("COVERS_LAYERS")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 12]);
    for l in layers {
        let doc = transformer_encoder(&EncoderConfig::bert_base(l));
        let name = format!("bert-base encoder, {l} layer(s)");
        let g = frontend::load_str(&doc.to_string(), &name).map_err(|d| d.to_string());
        out.push((name, g));
    }
    out
}

fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let only: Option<Vec<String>> = std::env::var("COVERS_ONLY")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    println!(
        "| graph | kernels | predicted µs | bytes | optimize s | kernels (no subst) | \
         predicted µs (no subst) | bytes (no subst) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, g) in graphs(smoke) {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|w| name.contains(w.as_str())))
        {
            continue;
        }
        let g = match g {
            Ok(g) => g,
            Err(e) => {
                println!(
                    "| {name} | load failed: {} |",
                    e.lines().next().unwrap_or("")
                );
                continue;
            }
        };
        match (summarize(&g, true), summarize(&g, false)) {
            (Ok(a), Ok(b)) => println!(
                "| {name} | {} | {:.2} | {} | {:.2} | {} | {:.2} | {} |",
                a.kernels, a.micros, a.bytes, a.secs, b.kernels, b.micros, b.bytes
            ),
            (a, b) => println!(
                "| {name} | {} | | | | {} |",
                a.err().unwrap_or_default(),
                b.err().unwrap_or_default()
            ),
        }
    }
}
