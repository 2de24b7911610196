//! Issue 23: `optimize` of a 12-layer BERT-base (the synthetic encoder of
//! `bench/common/bench_graphs.rs`: hidden 768, 12 heads, MLP 3072, symbolic S; the real
//! torch export is 435 MB of weights and is not committed) under 3 s on 2 cores.
//!
//! Before timing, prints one untimed run's step times (`Optimized::steps`: wall and process
//! CPU per step, what `dlc-egg optimize --timings` prints), then criterion measures the whole
//! `optimize` call. `OPTIMIZE_SPEED_LAYERS=N` changes the layer count (default 12; 3 in
//! criterion's test mode, which `cargo test --all-targets` runs in CI: the first layer, a
//! middle one and the last, so recorded growths are replayed as in the full model).
//! Results: `bench/results/optimize-speed-2026-11-26.md`. The CI smoke is
//! `tests/optimize_speed.rs` (one layer).
#[path = "common/bench_graphs.rs"]
mod bench_graphs;
use bench_graphs::{transformer_encoder, EncoderConfig};
use criterion::{criterion_group, criterion_main, Criterion};
use dlc_egg::ir::tiny::Program;
use dlc_egg::ir::{frontend, lower};
use dlc_egg::optimize::{explain, optimize, OptimizeOptions};
use std::hint::black_box;

fn lowered(layers: usize) -> Program {
    let doc = transformer_encoder(&EncoderConfig::bert_base(layers));
    let g = frontend::load_str(&doc.to_string(), "encoder.json").expect("encoder loads");
    lower::lower(&g).expect("encoder lowers")
}

fn bench(c: &mut Criterion) {
    let layers: usize = std::env::var("OPTIMIZE_SPEED_LAYERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if timed() { 12 } else { 3 });
    let p = lowered(layers);
    let o = optimize(&p, &OptimizeOptions::default()).expect("the encoder optimizes");
    println!(
        "{layers}-layer encoder: {} kernels, {} e-nodes{}",
        o.kernels.len(),
        o.egraph.total_number_of_nodes(),
        explain::render_steps(&o.steps)
    );
    let mut g = c.benchmark_group("optimize_speed");
    g.sample_size(10);
    g.bench_function(format!("bert_base_{layers}_layers"), |b| {
        b.iter(|| {
            optimize(black_box(&p), &OptimizeOptions::default())
                .expect("the encoder optimizes")
                .kernels
                .len()
        })
    });
    g.finish();
}

/// Whether criterion times (`cargo bench` passes `--bench`) rather than runs each benchmark
/// once (test mode).
fn timed() -> bool {
    std::env::args().any(|a| a == "--bench")
}

criterion_group!(benches, bench);
criterion_main!(benches);
