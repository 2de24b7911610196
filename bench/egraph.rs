//! The full optimizer on the transformer encoder (hidden 768, 12 heads, MLP 3072, symbolic S) with
//! 1, 2, 4, 8, 12 layers: lower → e-graph → every rule phase → kernels phase → extraction →
//! region synthesis (`dlc_egg::optimize::optimize`). Issue 3's targets: 12 layers under 5 s on 2
//! cores, under 500k e-nodes, time growing no faster than linearly in layers.
//!
//! Before timing, prints per size: Tiny nodes, final e-nodes and e-classes, kernels, and the
//! seconds per layer of one untimed run (criterion then measures the time).
//! `ENCODER_DUMP=DIR` also writes each graph as `DIR/encoder_L.json` (for `dlc-egg optimize`).
#[path = "common/bench_graphs.rs"]
mod bench_graphs;
use bench_graphs::{transformer_encoder, EncoderConfig};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use dlc_egg::ir::tiny::Program;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::{ir::frontend, lower};
use std::hint::black_box;
use std::time::Instant;

fn lowered(layers: usize) -> Program {
    let doc = transformer_encoder(&EncoderConfig::bert_base(layers));
    if let Ok(dir) = std::env::var("ENCODER_DUMP") {
        let path = std::path::Path::new(&dir).join(format!("encoder_{layers}.json"));
        std::fs::create_dir_all(&dir).expect("ENCODER_DUMP is a writable directory");
        std::fs::write(&path, doc.to_string()).expect("ENCODER_DUMP is a writable directory");
    }
    let g = frontend::load_str(&doc.to_string(), "encoder.json").expect("encoder loads");
    lower::lower(&g).expect("encoder lowers")
}

/// Runs the optimizer; returns (e-nodes, e-classes, kernels).
fn run(p: &Program) -> (usize, usize, usize) {
    let o = optimize(p, &OptimizeOptions::default()).expect("the encoder optimizes");
    (
        o.egraph.total_number_of_nodes(),
        o.egraph.number_of_classes(),
        o.kernels.len(),
    )
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("optimize_encoder");
    g.sample_size(10);
    // `ENCODER_LAYERS=1,2` runs a subset. Without it, `cargo bench` (which passes `--bench`)
    // runs every size and `cargo test --all-targets` (which runs this binary without it, as a
    // smoke test) only 1 layer.
    let timed = std::env::args().any(|a| a == "--bench");
    let sizes: Vec<usize> = std::env::var("ENCODER_LAYERS")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| if timed { vec![1, 2, 4, 8, 12] } else { vec![1] });
    for layers in sizes {
        let p = lowered(layers);
        let t = Instant::now();
        let (nodes, classes, kernels) = run(&p);
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "encoder {layers:>2} layers: {} Tiny nodes -> {nodes} e-nodes, {classes} e-classes, \
             {kernels} kernels; one run {secs:.3} s ({:.3} s/layer)",
            p.nodes.len(),
            secs / layers as f64
        );
        g.bench_with_input(BenchmarkId::from_parameter(layers), &p, |b, p| {
            b.iter(|| black_box(run(p)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
