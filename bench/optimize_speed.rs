//! Issue 23: `optimize` of a 12-layer BERT-base (the synthetic encoder of
//! `bench/common/bench_graphs.rs`: hidden 768, 12 heads, MLP 3072, symbolic S; the real
//! torch export is 435 MB of weights and is not committed) under 3 s on 2 cores.
//!
//! Before timing, prints one untimed run's step times (`Optimized::steps`: wall and process
//! CPU per step, what `dlc-egg optimize --timings` prints), then criterion measures the whole
//! `optimize` call. `OPTIMIZE_SPEED_LAYERS=N` changes the layer count (default 12; 3 in
//! criterion's test mode, which `cargo test --all-targets` runs in CI: the first layer, a
//! middle one and the last, so recorded growths are replayed as in the full model).
//!
//! `OPTIMIZE_SPEED_MODEL=path/to/bert.onnx` (any model file `dlc-egg optimize` reads) adds
//! that model as a second case, e.g. the real 12-layer BERT-base export
//! (`scripts/export-real-models.py`; not committed, so the case is optional and CI never runs
//! it). The benchmark uses the `dlc-egg` binary's allocator (mimalloc with `--features
//! mimalloc`, else the system's), so its times are the command's. Results: `bench/results/optimize-speed-2026-11-27.md`. The CI smoke is
//! `tests/optimize_speed.rs` (one layer).
#[path = "common/bench_graphs.rs"]
mod bench_graphs;
use bench_graphs::{transformer_encoder, EncoderConfig};
use criterion::{criterion_group, criterion_main, Criterion};
use dlc_egg::ir::tiny::Program;
use dlc_egg::optimize::{explain, optimize, OptimizeOptions};
use dlc_egg::{ir::frontend, lower};
use std::hint::black_box;

/// The allocator of the `dlc-egg` binary (src/main.rs).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn lowered(layers: usize) -> Program {
    let doc = transformer_encoder(&EncoderConfig::bert_base(layers));
    let g = frontend::load_str(&doc.to_string(), "encoder.json").expect("encoder loads");
    lower::lower(&g).expect("encoder lowers")
}

/// The model named by `OPTIMIZE_SPEED_MODEL`, loaded and lowered as `dlc-egg optimize` does.
fn model() -> Option<(String, Program)> {
    let path = std::env::var("OPTIMIZE_SPEED_MODEL").ok()?;
    let g = dlc_egg::pipeline::load_file(path.as_ref()).expect("OPTIMIZE_SPEED_MODEL loads");
    let p = dlc_egg::run::lower_and_verify(&g).expect("OPTIMIZE_SPEED_MODEL lowers");
    let name = std::path::Path::new(&path)
        .file_stem()
        .map_or("model".into(), |s| s.to_string_lossy().replace('.', "_"));
    Some((name, p))
}

fn bench(c: &mut Criterion) {
    let layers: usize = std::env::var("OPTIMIZE_SPEED_LAYERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if timed() { 12 } else { 3 });
    let mut cases = vec![(format!("bert_base_{layers}_layers"), lowered(layers))];
    cases.extend(model());
    let mut g = c.benchmark_group("optimize_speed");
    g.sample_size(10);
    for (name, p) in &cases {
        let o = optimize(p, &OptimizeOptions::default()).expect("the model optimizes");
        println!(
            "{name}: {} kernels, {} e-nodes{}",
            o.kernels.len(),
            o.egraph.total_number_of_nodes(),
            explain::render_steps(&o.steps)
        );
        g.bench_function(name.as_str(), |b| {
            b.iter(|| {
                optimize(black_box(p), &OptimizeOptions::default())
                    .expect("the model optimizes")
                    .kernels
                    .len()
            })
        });
    }
    g.finish();
}

/// Whether criterion times (`cargo bench` passes `--bench`) rather than runs each benchmark
/// once (test mode).
fn timed() -> bool {
    std::env::args().any(|a| a == "--bench")
}

criterion_group!(benches, bench);
criterion_main!(benches);
