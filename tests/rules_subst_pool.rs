//! `matmul-absorb-sum-pool` (`src/rules/subst_pool.rs`, issue 23): a global average (or sum)
//! pool followed by a classifier becomes one contraction over channels and pixels. It fires on
//! the pool → Flatten → GEMM tail of a convnet, is sound within fp32 reassociation, does not fire
//! through a nonlinearity, on a max pool or on fp16, runs only under fast-math, and the
//! extractor prices the merged kernel and leaves it while it is dearer (ResNet-18's 7×7×512 →
//! 1000 tail, and today even a 3×3×8 → 5 one).

use dlc_egg::ir::egraph::{add_program, extract_program, TensorGraph, TensorLang};
use dlc_egg::ir::tiny::Program;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::rules::testing::{
    assert_fired, assert_not_fired, check_optimized, check_sound, Compare,
};
use dlc_egg::rules::{run_phase, subst, Budget, PhaseStats};
use dlc_egg::{ir::frontend, lower};
use egg::{CostFunction, Extractor, Id, Language};
use serde_json::json;
use std::collections::BTreeMap;

/// What sits between the pool and the classifier.
#[derive(Clone, Copy, PartialEq)]
enum Tail {
    /// `GlobalAveragePool → Flatten → GEMM(+bias)`, as the ONNX exports spell it.
    Mean,
    /// A sum pool (ReduceSum) instead of the mean.
    Sum,
    /// A max pool: not linear, never merged.
    Max,
    /// `relu` between the pool and the GEMM: not linear, never merged.
    Relu,
}

/// `relu(X: [b, c, h, h]) → pool → Flatten → GEMM(W: [n, c], bias)`, dtype `dt`.
fn tail(b: i64, c: i64, h: i64, n: i64, dt: &str, kind: Tail) -> Program {
    let t = |s: Vec<i64>| json!({"dtype": dt, "shape": s});
    let mut tensors = serde_json::Map::new();
    for (name, s) in [
        ("X", vec![b, c, h, h]),
        ("R", vec![b, c, h, h]),
        ("P", vec![b, c, 1, 1]),
        ("F", vec![b, c]),
        ("W", vec![n, c]),
        ("bias", vec![n]),
        ("Y", vec![b, n]),
    ] {
        tensors.insert(name.into(), t(s));
    }
    let pool = match kind {
        Tail::Sum => "sum",
        Tail::Max => "max",
        Tail::Mean | Tail::Relu => "mean",
    };
    let mut graph = vec![
        json!({"op": "Elementwise", "name": "relu", "inputs": ["X"], "outputs": ["R"],
               "attrs": {"fn": "relu"}}),
        json!({"op": "Reduce", "name": "pool", "inputs": ["R"], "outputs": ["P"],
               "attrs": {"fn": pool, "axes": [2, 3], "keepdim": true}}),
        json!({"op": "Reshape", "name": "flat", "inputs": ["P"], "outputs": ["F"],
               "attrs": {"shape": [b, c]}}),
    ];
    if kind == Tail::Relu {
        tensors.insert("G".into(), t(vec![b, c]));
    }
    let fc_in = if kind == Tail::Relu {
        graph.push(json!({"op": "Elementwise", "name": "act", "inputs": ["F"],
                          "outputs": ["G"], "attrs": {"fn": "relu"}}));
        "G"
    } else {
        "F"
    };
    graph.push(
        json!({"op": "GEMM", "name": "fc", "inputs": [fc_in, "W", "bias"],
        "outputs": ["Y"], "attrs": {"trans_a": false, "trans_b": true, "alpha": 1.0, "beta": 1.0}}),
    );
    let doc = json!({
        "signature": {
            "inputs": [{"tensor": "X"}, {"tensor": "W", "role": "param"},
                       {"tensor": "bias", "role": "param"}],
            "outputs": [{"tensor": "Y"}]
        },
        "tensors": tensors,
        "graph": graph,
    });
    let g = frontend::load_str(&doc.to_string(), "tail.json").unwrap_or_else(|d| panic!("{d}"));
    lower::lower(&g).unwrap_or_else(|d| panic!("{d}"))
}

/// Extraction cost: fewest REDUCE nodes first (the merged form), then the smallest tree.
struct FewestReduces;

impl CostFunction<TensorLang> for FewestReduces {
    type Cost = (usize, usize);

    fn cost<C>(&mut self, enode: &TensorLang, mut costs: C) -> (usize, usize)
    where
        C: FnMut(Id) -> (usize, usize),
    {
        let own = (usize::from(matches!(enode, TensorLang::Reduce(_))), 1);
        enode.fold(own, |(r, s), id| {
            let (cr, cs) = costs(id);
            (r + cr, s + cs)
        })
    }
}

/// Runs the subst phase (all rules, fast-math ones included) and extracts the form with the
/// fewest reductions; returns it, the stats and its REDUCE count.
fn substituted(prog: &Program) -> (Program, PhaseStats, usize) {
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, prog);
    let (eg, stats) = run_phase(eg, "subst", &subst::rules(), &Budget::default());
    assert!(stats.saturated(), "{stats:?}");
    let ex = Extractor::new(&eg, FewestReduces);
    let q = extract_program(&eg, prog, &class, &|c| ex.find_best_node(c).clone())
        .unwrap_or_else(|e| panic!("{e}"));
    let reduces = q.nodes.iter().filter(|n| n.uop.name() == "REDUCE").count();
    (q, stats, reduces)
}

/// fp32 reassociation: the pooled form sums `C·H·W` terms in another order.
const REASSOC: Compare = Compare::Close {
    rtol: 1e-5,
    atol: 1e-6,
};

#[test]
fn mean_pool_joins_the_classifier_contraction() {
    for (b, c, h, n) in [(2, 8, 3, 5), (1, 16, 7, 10)] {
        let p = tail(b, c, h, n, "fp32", Tail::Mean);
        let (q, stats, reduces) = substituted(&p);
        assert_fired(&stats, "matmul-absorb-sum-pool");
        assert_eq!(reduces, 1, "one reduction over (c, h, w): {q:#?}");
        check_sound(&p, &q, &BTreeMap::new(), &[1, 2, 3], REASSOC)
            .unwrap_or_else(|e| panic!("{b}x{c}x{h}x{h} -> {n}: {e}"));
    }
}

#[test]
fn sum_pool_joins_the_classifier_contraction() {
    let p = tail(2, 8, 3, 5, "fp32", Tail::Sum);
    let (q, stats, reduces) = substituted(&p);
    assert_fired(&stats, "matmul-absorb-sum-pool");
    assert_eq!(reduces, 1);
    check_sound(&p, &q, &BTreeMap::new(), &[4, 5], REASSOC).unwrap();
}

#[test]
fn no_merge_through_a_nonlinearity_a_max_pool_or_fp16() {
    for (kind, dt) in [
        (Tail::Relu, "fp32"),
        (Tail::Max, "fp32"),
        // TODO(issue 23): an fp16 pool rounds the pooled row to fp16 before the GEMM's fp32
        // accumulation; merging would skip that rounding (a Compare::Fused-class change): not
        // matched until a test bounds it.
        (Tail::Mean, "fp16"),
    ] {
        let p = tail(2, 8, 3, 5, dt, kind);
        let (_, stats, reduces) = substituted(&p);
        assert_not_fired(&stats, "matmul-absorb-sum-pool");
        assert_eq!(reduces, 2);
    }
}

#[test]
fn the_rule_is_fast_math_only() {
    let names = |fm: bool| -> Vec<String> {
        subst::rules_with(fm)
            .iter()
            .map(|r| r.name.to_string())
            .collect()
    };
    assert!(!names(false).contains(&"matmul-absorb-sum-pool".to_string()));
    assert!(names(true).contains(&"matmul-absorb-sum-pool".to_string()));
    assert!(names(false).contains(&"matmul-merge-shared-lhs".to_string()));
    assert_eq!(subst::RULE_NAMES.len(), subst::rules().len());
}

fn fast_math(on: bool) -> OptimizeOptions {
    OptimizeOptions {
        fast_math: on,
        ..OptimizeOptions::default()
    }
}

/// The pipeline under fast-math: the rule fires, the merged one-kernel form (pool, classifier
/// and bias in one contraction) is a kernel of the output's class, and the extractor, which
/// prices both covers, never returns a dearer one; outputs within the fused numerics contract.
/// Today the merged kernel is priced above the two kernels even at this size (the contraction
/// SIMT tile is 64 × 64 for `M = 2, N = 5`), so the cover keeps two kernels — TODO(issue 23):
/// a GEMV / split-K plan for small-`M` contractions is what makes it pay.
#[test]
fn small_pool_and_classifier_merged_kernel_is_priced_under_fast_math() {
    let p = tail(2, 8, 3, 5, "fp32", Tail::Mean);
    let plain = optimize(&p, &fast_math(false)).expect("optimizes");
    let fm = optimize(&p, &fast_math(true)).expect("optimizes");
    assert!(fm.phases.iter().any(|s| s.fired("matmul-absorb-sum-pool")));
    assert!(!plain
        .phases
        .iter()
        .any(|s| s.fired("matmul-absorb-sum-pool")));
    let root = fm.egraph.find(fm.roots[0]);
    let merged = dlc_egg::rules::fusion::kernel_nodes(&fm.egraph, root)
        .iter()
        .filter_map(|k| match k {
            TensorLang::Kernel(ch) => match fm.egraph[ch[0]].data.attr() {
                Some(dlc_egg::ir::egraph::Attr::Body(b)) => Some(b.text().to_string()),
                _ => None,
            },
            _ => None,
        })
        .filter(|b| b.contains("(relu $0)") && b.contains("#[2,3,4]") && b.starts_with("(add"))
        .count();
    assert!(merged >= 1, "the one-kernel merged form is in the e-graph");
    assert!(
        fm.cost.time <= plain.cost.time,
        "{:?} vs {:?}",
        fm.cost,
        plain.cost
    );
    check_optimized(&p, &fm, &BTreeMap::new(), &[1, 2]).unwrap();
}

/// ResNet-18's tail (7×7×512 → 1000): the merged GEMV has `K = 25 088` and recomputes each
/// product for every pixel; the extractor prices it above the pool kernel + GEMM and keeps
/// two kernels (the rule is in the e-graph, the cover does not change). TODO(issue 23): a
/// split-K / GEMV plan for `M = 1` contractions would make the merged form the cheaper one.
#[test]
fn resnet_tail_keeps_the_pool_kernel_while_the_merged_gemv_is_dearer() {
    let p = tail(1, 512, 7, 1000, "fp32", Tail::Mean);
    let plain = optimize(&p, &fast_math(false)).expect("optimizes");
    let fm = optimize(&p, &fast_math(true)).expect("optimizes");
    assert_eq!(plain.kernels.len(), 2);
    assert_eq!(fm.kernels.len(), 2);
    assert_eq!(fm.cost.time, plain.cost.time);
}
