//! Compute-at fusion (seed 003, issue 6): Conv → ReLU → Pool as one kernel whose intermediate
//! never reaches global memory, `--explain`'s legality argument (pre-image, halo, footprint) and
//! profitability, the variants that stay two kernels with the reason, and the fused program's
//! values against the reference evaluator.

use dlc_egg::eval::evaluate;
use dlc_egg::ir::region::program::{evaluate_program, Step};
use dlc_egg::ir::tiny::Program;
use dlc_egg::optimize::explain::render;
use dlc_egg::optimize::{optimize, OptimizeOptions, Optimized};
use dlc_egg::rules::testing::random_inputs;
use dlc_egg::{ir::frontend, lower};
use std::collections::BTreeMap;
use std::path::Path;

fn lowered(path: &str) -> Program {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let g = frontend::load_file(&p).unwrap_or_else(|d| panic!("{d}"));
    lower::lower(&g).unwrap_or_else(|d| panic!("{d}"))
}

fn explained(p: &Program, compute_at: bool) -> (Optimized, String) {
    let opts = OptimizeOptions {
        explain: true,
        compute_at,
        ..OptimizeOptions::default()
    };
    let o = optimize(p, &opts).expect("optimizes");
    let text = render(&o.report(), false);
    (o, text)
}

/// The optimized program against the reference at `bindings`, within fp32 tolerances.
fn matches_reference(p: &Program, o: &Optimized, bindings: &BTreeMap<String, i64>, seed: u64) {
    let ins = random_inputs(p, bindings, seed).expect("inputs");
    let want = evaluate(p, bindings, &ins).expect("reference");
    let got = evaluate_program(&o.program, bindings, &ins).unwrap_or_else(|d| panic!("{d}"));
    for (name, w) in &want {
        let g = &got[name];
        assert_eq!(g.shape, w.shape, "{name}");
        for (k, (a, e)) in g.to_f64().iter().zip(w.to_f64()).enumerate() {
            assert!(
                (a - e).abs() <= 1e-3 + 1e-3 * e.abs(),
                "{name}[{k}]: optimized {a}, reference {e}"
            );
        }
    }
}

#[test]
fn conv_relu_maxpool_is_one_kernel_with_its_legality_and_price() {
    let p = lowered("examples/conv_relu_pool.json");
    let (o, text) = explained(&p, true);
    assert_eq!(o.kernels.len(), 1, "{text}");
    let k = &o.kernels[0];
    assert!(k.embeds);
    assert_eq!(k.covers, vec!["conv", "relu", "pool"], "{text}");
    // No intermediate buffer: the one region reads the graph inputs and writes Y.
    let regions: Vec<_> = o
        .program
        .steps
        .iter()
        .filter(|s| matches!(s, Step::Region(_)))
        .collect();
    assert_eq!(regions.len(), 1);
    assert_eq!(k.inputs, vec!["X", "W", "bias"]);
    // Pool 2×2 stride 2: the pre-image of a pooled point is 2×2 conv points, halo 0 = 2 − 2;
    // the conv's 3×3 window widens the input footprint to 2 + 3 − 1 = 4 rows and columns.
    assert!(
        text.contains("[2*m, 2*m + 1]") && text.contains("[2*n, 2*n + 1]"),
        "{text}"
    );
    assert!(
        text.contains("along m: 0 (window span 2 − stride 2)")
            && text.contains("along n: 0 (window span 2 − stride 2)"),
        "{text}"
    );
    assert!(text.contains("recompute 1.00×"), "{text}");
    assert!(text.contains("X 1 × 16 × 4 × 4"), "{text}");
    assert!(text.contains("dependence distance 0"), "{text}");
    assert!(
        text.contains("in 1 kernel(s)") && text.contains("in 2 kernel(s)") && text.contains("pays"),
        "{text}"
    );
    // The fused region runs as a pooled contraction tile (each 2×2 window's points are rows of
    // the convolution's tile, folded by its epilogue), priced below the compute-at nest.
    let plan = k.plan.as_ref().expect("a plan");
    assert_eq!(plan.plan.template, "contraction", "{text}");
    assert!(
        plan.plan
            .algo_choice
            .values()
            .any(|a| a.ends_with("_pooled4")),
        "{:?}",
        plan.plan.algo_choice
    );
    // The kernel's values equal the reference at two batch sizes.
    for (n, seed) in [(1, 3), (3, 4)] {
        let b: BTreeMap<String, i64> = [("N".to_string(), n)].into_iter().collect();
        matches_reference(&p, &o, &b, seed);
    }
}

#[test]
fn conv_relu_avgpool_fuses_too() {
    // The same graph with an average pool: the window sums and divides.
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/conv_relu_pool.json"),
    )
    .expect("example");
    let text = text.replace("\"mode\": \"max\"", "\"mode\": \"avg\"");
    let g = frontend::load_str(&text, "conv_relu_avgpool").expect("loads");
    let p = lower::lower(&g).expect("lowers");
    let (o, explain) = explained(&p, true);
    assert_eq!(o.kernels.len(), 1, "{explain}");
    assert!(o.kernels[0].embeds);
    let b: BTreeMap<String, i64> = [("N".to_string(), 2)].into_iter().collect();
    matches_reference(&p, &o, &b, 5);
}

#[test]
fn without_compute_at_the_seed_example_is_two_kernels() {
    let p = lowered("examples/conv_relu_pool.json");
    let (o, text) = explained(&p, false);
    assert_eq!(o.kernels.len(), 2, "{text}");
    assert!(o.kernels.iter().all(|k| !k.embeds));
}

#[test]
fn overlapping_windows_on_tensor_cores_stay_two_kernels_with_the_price() {
    // fp16, 64 channels, pool 3×3 stride 2: the fused nest recomputes 9/4 of the conv on CUDA
    // cores, while the split conv runs on tensor cores.
    let p = lowered("tests/data/conv_relu_pool_overlap.json");
    let (o, text) = explained(&p, true);
    assert_eq!(o.kernels.len(), 2, "{text}");
    let pool = &o.kernels[1];
    assert!(
        pool.compute_at
            .iter()
            .any(|l| l.contains("legal, but it does not pay")),
        "{text}"
    );
}

#[test]
fn a_global_pool_is_not_embedded_and_says_why() {
    // A 16×16 window: 256 points per pooled value, beyond the compute-at window limit.
    let p = lowered("tests/data/conv_relu_global_pool.json");
    let (o, text) = explained(&p, true);
    assert_eq!(o.kernels.len(), 2, "{text}");
    assert!(
        o.kernels[1]
            .compute_at
            .iter()
            .any(|l| l.contains("illegal") && l.contains("256 points, more than 64")),
        "{text}"
    );
    let b: BTreeMap<String, i64> = [("N".to_string(), 2)].into_iter().collect();
    matches_reference(&p, &o, &b, 6);
}

#[test]
fn overlapping_padded_avgpool_has_halo_one_and_recomputes_it() {
    // Pool 3×3 stride 2 pad 1 over a 3×3 conv: a pooled point needs 3×3 conv points, the
    // neighbour's start 2 further, so the halo is 3 − 2 = 1 per axis and 9/4 of the conv is
    // computed; the input footprint is 3 + 3 − 1 = 5 rows and columns.
    let p = lowered("tests/data/conv_relu_avgpool.json");
    let (o, text) = explained(&p, true);
    assert_eq!(o.kernels.len(), 1, "{text}");
    assert!(
        text.contains("along m: 1 (window span 3 − stride 2)")
            && text.contains("along n: 1 (window span 3 − stride 2)"),
        "{text}"
    );
    assert!(text.contains("[2*m - 1, 2*m + 1]"), "{text}");
    assert!(text.contains("recompute 2.25×"), "{text}");
    assert!(text.contains("X 1 × 4 × 5 × 5"), "{text}");
    for (n, seed) in [(1, 8), (2, 9)] {
        let b: BTreeMap<String, i64> = [("N".to_string(), n)].into_iter().collect();
        matches_reference(&p, &o, &b, seed);
    }
}
