//! The movement phase end to end: soundness on random movement chains (proptest), determinism, and
//! every example graph (within budget, outputs bit-identical). Per-rule positive and near-miss
//! tests live in `src/rules/movement_tests.rs`.

mod common;

use common::movement_chains::{chain, examples};
use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::tiny::Builder;
use dlc_egg::rules::testing::{check, check_sound, optimize, Compare};
use dlc_egg::rules::{all_phases, movement, Budget, PhaseStats};
use proptest::prelude::*;
use std::collections::BTreeMap;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_movement_chains_keep_their_outputs(
        shape in prop::collection::vec(1i64..=5, 1..=4),
        ops in prop::collection::vec((0u8..8, any::<u64>()), 1..8),
        mid in 0usize..8,
    ) {
        let p = chain(&shape, &ops, mid);
        let o = check(&p, &movement::rules(), &BTreeMap::new(), Compare::BitExact);
        prop_assert!(o.stats.saturated(), "{:?}", o.stats);
        prop_assert!(o.rewritten.nodes.len() <= p.nodes.len());
    }
}

fn movement_phase() -> Vec<dlc_egg::rules::Rule> {
    all_phases()
        .into_iter()
        .find(|(n, _)| *n == "movement")
        .map(|(_, r)| r)
        .expect("movement phase")
}

#[test]
fn examples_stay_within_budget_and_keep_outputs() {
    let rules = movement_phase();
    let budget = Budget::default();
    for (name, p) in examples() {
        let (q, stats) =
            optimize(&p, "movement", &rules, &budget).unwrap_or_else(|e| panic!("{e}"));
        println!(
            "{name}: tiny {} -> {} nodes; e-graph {} -> {} e-nodes, {} classes; {} iterations, \
             {}; applied {:?}",
            p.nodes.len(),
            q.nodes.len(),
            stats.egraph_nodes_before,
            stats.egraph_nodes,
            stats.egraph_classes,
            stats.iterations,
            stats.stop_reason,
            stats.applied
        );
        assert!(stats.saturated(), "{name}: {stats:?}");
        assert!(stats.iterations <= budget.iter_limit);
        assert!(stats.egraph_nodes <= budget.node_limit);
        assert!(q.nodes.len() <= p.nodes.len(), "{name}");
        check_sound(&p, &q, &BTreeMap::new(), &[7], Compare::BitExact)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// The stats as JSON with the wall-clock time removed.
fn stable(s: &PhaseStats) -> String {
    let mut v = serde_json::to_value(s).expect("stats serialize");
    v["time"] = serde_json::Value::Null;
    v.to_string()
}

#[test]
fn running_twice_gives_identical_programs_and_stats() {
    let rules = movement::rules();
    let mut cases = examples();
    cases.push((
        "chain".into(),
        chain(
            &[2, 1, 3],
            &[(1, 5), (7, 9), (0, 3), (7, 4), (5, 1), (7, 2), (3, 8)],
            2,
        ),
    ));
    for (name, p) in cases {
        let (q1, s1) = optimize(&p, "movement", &rules, &Budget::default()).expect("first");
        let (q2, s2) = optimize(&p, "movement", &rules, &Budget::default()).expect("second");
        assert_eq!(q1, q2, "{name}: extracted programs differ");
        assert_eq!(stable(&s1), stable(&s2), "{name}: stats differ");
    }
}

#[test]
fn a_tiny_budget_stops_early_and_says_why() {
    let p = chain(&[2, 3], &[(0, 1), (7, 2), (7, 3), (7, 4), (7, 5)], 0);
    let budget = Budget {
        iter_limit: 1,
        ..Budget::default()
    };
    let (q, stats) = optimize(&p, "movement", &movement::rules(), &budget).expect("extract");
    assert_eq!(stats.iterations, 1);
    assert_eq!(stats.stop_reason, "IterationLimit(1)");
    check_sound(&p, &q, &BTreeMap::new(), &[1], Compare::BitExact).expect("sound");
}

#[test]
fn library_users_can_extend_the_rule_set() {
    // A user rule next to the built-in ones: relu(relu(x)) = relu(x).
    let mut rules = movement::rules();
    rules.push(egg::rewrite!("relu-relu"; "(relu (relu ?x))" => "(relu ?x)"));
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, vec![Dim::int(4)]).expect("input");
    let y = b.flip(x, vec![0]).expect("flip");
    let y = b.flip(y, vec![0]).expect("flip");
    let y = b.unary(dlc_egg::ir::tiny::UnaryOp::Relu, y).expect("relu");
    let y = b.unary(dlc_egg::ir::tiny::UnaryOp::Relu, y).expect("relu");
    b.output("y", y);
    let p = b.finish();
    let o = check(&p, &rules, &BTreeMap::new(), Compare::BitExact);
    assert!(o.stats.fired("relu-relu") && o.stats.fired("flip-flip"));
    assert_eq!(o.rewritten.nodes.len(), 2);
}

#[test]
fn attention_k_path_collapses_to_a_reshape() {
    // tinygrad lowers QKᵀ with K → PERMUTE → RESHAPE (insert 1) → PERMUTE; after the movement phase
    // K is read through one RESHAPE, as seed 001 §6.8.3 reads `K[b,h,n,d]` (no transpose). Only
    // PV's genuine transpose of V remains.
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/attention_causal.json");
    let g = dlc_egg::ir::frontend::load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    let p = dlc_egg::lower::lower(&g).unwrap_or_else(|d| panic!("{d}"));
    let permutes = |p: &dlc_egg::ir::tiny::Program| {
        p.nodes.iter().filter(|n| n.uop.name() == "PERMUTE").count()
    };
    let rules = dlc_egg::rules::movement::rules();
    let (q, stats) = dlc_egg::rules::testing::optimize(
        &p,
        "movement",
        &rules,
        &dlc_egg::rules::Budget::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (permutes(&p), permutes(&q)),
        (3, 1),
        "applied: {:?}",
        stats.applied
    );
    assert!(stats.fired("unsqueeze-past-permute") && stats.fired("permute-moving-ones"));
    let b = p.symbols.clone();
    dlc_egg::rules::testing::check_sound(
        &p,
        &q,
        &b,
        &[1, 2],
        dlc_egg::rules::testing::Compare::BitExact,
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
