//! The optimizer's kernel cover comes from a DAG-aware extractor: a kernel read by several
//! consumers is paid once, so fusion follows the byte cost — a contraction whose inputs are much
//! larger than its output stays its own kernel when two consumers need it, and is recomputed in
//! each consumer when its inputs are small. The exact extractor is the yardstick of the fast one.

use dlc_egg::extract::dag::Status;
use dlc_egg::optimize::{optimize, ExtractorKind, OptimizeOptions, Optimized};
use dlc_egg::{
    ir::{frontend, tiny::Program},
    lower,
};
use std::path::Path;

/// `C = A·B` (`[M,K]·[K,N]`) read by two elementwise consumers: `Y1 = relu(C)`, `Y2 = exp(C)`.
fn shared_matmul(m: usize, k: usize, n: usize) -> Program {
    let doc = format!(
        r#"{{
  "signature": {{
    "inputs": [{{"tensor": "A", "role": "data"}}, {{"tensor": "B", "role": "data"}}],
    "outputs": [{{"tensor": "Y1"}}, {{"tensor": "Y2"}}]
  }},
  "tensors": {{
    "A": {{"dtype": "fp16", "shape": [{m}, {k}]}},
    "B": {{"dtype": "fp16", "shape": [{k}, {n}]}},
    "Y1": {{"dtype": "fp16", "shape": [{m}, {n}]}},
    "Y2": {{"dtype": "fp16", "shape": [{m}, {n}]}}
  }},
  "graph": [
    {{"op": "MatMul", "name": "mm", "inputs": ["A", "B"], "outputs": ["C"], "attrs": {{"acc_dtype": "fp32"}}}},
    {{"op": "Elementwise", "name": "r", "inputs": ["C"], "outputs": ["Y1"], "attrs": {{"fn": "relu"}}}},
    {{"op": "Elementwise", "name": "e", "inputs": ["C"], "outputs": ["Y2"], "attrs": {{"fn": "exp"}}}}
  ]
}}"#
    );
    let g = frontend::load_str(&doc, "shared_matmul.json").unwrap_or_else(|d| panic!("{d}"));
    lower::lower(&g).unwrap_or_else(|d| panic!("{d}"))
}

fn run(p: &Program, extractor: ExtractorKind) -> Optimized {
    let opts = OptimizeOptions {
        extractor,
        ..OptimizeOptions::default()
    };
    optimize(p, &opts).unwrap_or_else(|e| panic!("{e}"))
}

/// Kernels whose body contains a contraction (a `reduce`).
fn contractions(o: &Optimized) -> usize {
    o.kernels
        .iter()
        .filter(|k| k.body.contains("reduce"))
        .count()
}

#[test]
fn large_shared_contraction_stays_its_own_kernel() {
    // A and B: 2·256·4096 fp16 = 4 MiB; C: 256·256 = 128 KiB. Recomputing C in both consumers
    // would read A and B twice.
    let o = run(&shared_matmul(256, 4096, 256), ExtractorKind::Fast);
    assert_eq!(contractions(&o), 1, "{:#?}", o.kernels);
    assert_eq!(o.kernels.len(), 3, "{:#?}", o.kernels);
}

#[test]
fn small_shared_contraction_is_fused_into_both_consumers() {
    // K = 4: A and B are 4 KiB together, C is 128 KiB — writing and reading C back costs more
    // than computing it twice.
    let o = run(&shared_matmul(256, 4, 256), ExtractorKind::Fast);
    assert_eq!(o.kernels.len(), 2, "{:#?}", o.kernels);
    assert_eq!(contractions(&o), 2, "{:#?}", o.kernels);
}

#[test]
fn fast_matches_the_exact_optimum_on_the_examples() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    for path in names {
        let g = frontend::load_file(&path).unwrap_or_else(|d| panic!("{d}"));
        let p = lower::lower(&g).unwrap_or_else(|d| panic!("{d}"));
        let fast = run(&p, ExtractorKind::Fast);
        let exact = run(&p, ExtractorKind::Exact);
        assert_eq!(
            exact.extraction.status,
            Status::Optimal,
            "{}",
            path.display()
        );
        assert_eq!(fast.extraction.status, Status::Heuristic);
        assert!(
            fast.extraction.price <= exact.extraction.price * 1.01,
            "{}: fast {} vs exact {}",
            path.display(),
            fast.extraction.price,
            exact.extraction.price
        );
        assert!(exact.extraction.price <= fast.extraction.price);
    }
}
