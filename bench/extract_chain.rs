//! The fast extractor on long chain e-graphs (issue 19): class i holds a leaf (cost 10) and
//! `f(class i-1)` (cost 1), 5k and 50k classes. Phase 1 was quadratic in the chain length (its
//! term-graph sets grew with the depth: 12.7 s at 50k); with the sharing window it is linear,
//! and the 50k chain extracts in well under a second. Prints the untimed time and phase 1's work
//! count per size, then criterion times both.
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use dlc_egg::extract::dag::{fast, DagExtractor, ExtractOptions, FastExtractor, Problem};
use std::hint::black_box;
use std::time::Instant;

fn chain(n: usize) -> Problem {
    let mut p = Problem::new();
    let mut prev = None;
    for i in 0..n {
        let c = p.add_class(format!("c{i}")).expect("class");
        p.add_node(c, "leaf", 10.0, &[]).expect("leaf");
        if let Some(d) = prev {
            p.add_node(c, "f", 1.0, &[d]).expect("f");
        }
        prev = Some(c);
    }
    p.add_root(prev.expect("root")).expect("root");
    p
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("extract_chain");
    group.sample_size(10);
    for n in [5_000usize, 50_000] {
        let p = chain(n);
        let t = Instant::now();
        FastExtractor::default()
            .extract(&p, &ExtractOptions::default())
            .expect("extract");
        println!(
            "chain {n}: fast extractor {:.3} s, phase-1 work {}",
            t.elapsed().as_secs_f64(),
            fast::greedy_work(&p)
        );
        group.bench_with_input(BenchmarkId::new("fast", n), &p, |b, p| {
            b.iter(|| {
                FastExtractor::default()
                    .extract(black_box(p), &ExtractOptions::default())
                    .expect("extract")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
