//! Criterion benchmarks of the reference evaluator on its two target programs.
use criterion::{criterion_group, criterion_main, Criterion};
use dlc_egg::eval::{bench_programs::bench_programs, evaluate};
use std::collections::BTreeMap;
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let progs = bench_programs().expect("benchmark programs build");
    let mut g = c.benchmark_group("eval");
    g.sample_size(10);
    for p in &progs {
        g.bench_function(p.name, |b| {
            b.iter(|| {
                let out = evaluate(&p.program, &BTreeMap::new(), &p.inputs).expect("evaluates");
                black_box(out)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
