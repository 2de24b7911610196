//! E-graph scaling on the transformer encoder (hidden 768, 12 heads, MLP 3072, symbolic S) with
//! 1, 2, 4, 8, 12 layers: lower → e-graph → every built-in rule phase. Issue 3's target for the
//! full optimizer: 12 layers under 5 s on 2 cores, under 500k e-nodes, time linear in layers.
//! Prints the e-node counts per size before timing (criterion measures the time).
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use dlc_egg::bench_graphs::{transformer_encoder, EncoderConfig};
use dlc_egg::ir::egraph::{add_program, TensorGraph};
use dlc_egg::ir::tiny::Program;
use dlc_egg::ir::{frontend, lower};
use dlc_egg::rules::{all_phases, run_phase, Budget};
use std::hint::black_box;

fn lowered(layers: usize) -> Program {
    let doc = transformer_encoder(&EncoderConfig::bert_base(layers));
    let g = frontend::load_str(&doc.to_string(), "encoder.json").expect("encoder loads");
    lower::lower(&g).expect("encoder lowers")
}

/// Builds the e-graph and runs every phase; returns (e-nodes, e-classes).
fn optimize(p: &Program) -> (usize, usize) {
    let mut eg = TensorGraph::default();
    add_program(&mut eg, p);
    eg.rebuild();
    let budget = Budget::default();
    for (name, rules) in all_phases() {
        eg = run_phase(eg, name, &rules, &budget).0;
    }
    (eg.total_number_of_nodes(), eg.number_of_classes())
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("egraph_encoder");
    g.sample_size(10);
    for layers in [1usize, 2, 4, 8, 12] {
        let p = lowered(layers);
        let (nodes, classes) = optimize(&p);
        eprintln!(
            "encoder {layers:>2} layers: {} Tiny nodes -> {nodes} e-nodes, {classes} e-classes",
            p.nodes.len()
        );
        g.bench_with_input(BenchmarkId::from_parameter(layers), &p, |b, p| {
            b.iter(|| black_box(optimize(p)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
