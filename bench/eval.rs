//! Criterion benchmarks of the reference evaluator (issue 2 targets, on 2 cores: 512³ fp32 matmul
//! under 0.5 s, 3×3 conv N=1 64→64 56×56 under 1 s).
//!
//! - `eval/*`: the hand-built Tiny programs of `eval::bench_programs` (evaluator alone);
//! - `pipeline/*`: `bench/graphs/*.json` loaded, lowered by `lower` and evaluated — exactly
//!   what `dlc-egg run` executes (load and lowering are outside the timed loop).
use criterion::{criterion_group, criterion_main, Criterion};
use dlc_egg::eval::bench_programs::{bench_programs, random_tensor};
use dlc_egg::eval::evaluate;
use dlc_egg::tensor::Tensor;
use dlc_egg::{ir::frontend, lower};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;

fn bench_tiny(c: &mut Criterion) {
    let progs = bench_programs().expect("benchmark programs build");
    let mut g = c.benchmark_group("eval");
    g.sample_size(10);
    for p in &progs {
        g.bench_function(p.name, |b| {
            b.iter(|| {
                black_box(evaluate(&p.program, &BTreeMap::new(), &p.inputs).expect("evaluates"))
            })
        });
    }
    g.finish();
}

fn bench_pipeline(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/graphs");
    let mut g = c.benchmark_group("pipeline");
    g.sample_size(10);
    for name in ["matmul_512_fp32", "conv3x3_64_56_fp32"] {
        let graph =
            frontend::load_file(&dir.join(format!("{name}.json"))).expect("bench graph loads");
        let prog = lower::lower(&graph).expect("bench graph lowers");
        let bindings =
            frontend::resolve_symbols(&graph, &BTreeMap::new(), &BTreeMap::new()).expect("binds");
        let inputs: BTreeMap<String, Tensor> = graph
            .signature
            .inputs
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let info = &graph.tensors[&s.tensor];
                let shape: Vec<usize> = info
                    .shape
                    .iter()
                    .map(|d| d.as_int().expect("concrete") as usize)
                    .collect();
                (
                    s.tensor.clone(),
                    random_tensor(info.dtype, &shape, i as u64),
                )
            })
            .collect();
        g.bench_function(name, |b| {
            b.iter(|| black_box(evaluate(&prog, &bindings, &inputs).expect("evaluates")))
        });
    }
    g.finish();
}

criterion_group!(benches, bench_tiny, bench_pipeline);
criterion_main!(benches);
