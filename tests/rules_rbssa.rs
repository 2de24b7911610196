//! The rbssa phase end to end: soundness on random movement chains (proptest, every chain folded
//! into READs and compared bit for bit), and every example graph (saturates, outputs identical; the
//! GEMM's operands are each one READ of an INPUT). Per-rule tests live in `src/rules/rbssa_tests.rs`.

mod common;

use common::movement_chains::{chain, examples};
use dlc_egg::ir::axis::AccessMap;
use dlc_egg::ir::tiny::{NodeId, Program, UOp};
use dlc_egg::rules::rbssa::fold_reads;
use dlc_egg::rules::testing::{check_sound, Compare};
use dlc_egg::rules::{all_phases, Budget};
use proptest::prelude::*;
use std::collections::BTreeMap;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_movement_chains_fold_into_reads(
        shape in prop::collection::vec(1i64..=5, 1..=4),
        ops in prop::collection::vec((0u8..8, any::<u64>()), 1..8),
        mid in 0usize..8,
    ) {
        let p = chain(&shape, &ops, mid);
        let (q, stats) = fold_reads(&p, &Budget::default()).map_err(TestCaseError::fail)?;
        prop_assert!(stats.saturated(), "{:?}", stats);
        check_sound(&p, &q, &BTreeMap::new(), &[1, 2], Compare::BitExact)
            .map_err(TestCaseError::fail)?;
        // Concrete shapes always fold unless two PADs have different fills (then the outer PAD
        // and what follows it stay); every READ reads the INPUT or a CAST (a compute op).
        let fills: std::collections::BTreeSet<u64> = p
            .nodes
            .iter()
            .filter_map(|n| match n.uop {
                UOp::Pad { value, .. } => Some(value.to_bits()),
                _ => None,
            })
            .collect();
        for n in &q.nodes {
            let view = n.uop.is_movement() && !matches!(n.uop, UOp::Read { .. });
            prop_assert!(!view || fills.len() > 1, "{:#?}", q);
            if matches!(n.uop, UOp::Read { .. }) {
                let src = match n.src[0] {
                    dlc_egg::ir::tiny::Src::Node(s) => s,
                    _ => unreachable!(),
                };
                prop_assert!(!q.node(src).uop.is_movement(), "{:#?}", q);
            }
        }
    }
}

#[test]
fn rbssa_is_a_phase_after_movement() {
    let names: Vec<&str> = all_phases().iter().map(|(n, _)| *n).collect();
    let at = |n: &str| names.iter().position(|x| *x == n);
    assert!(
        at("movement").is_some() && at("rbssa") > at("movement"),
        "{names:?}"
    );
}

#[test]
fn examples_saturate_and_keep_outputs() {
    let budget = Budget::default();
    for (name, p) in examples() {
        let (q, stats) = fold_reads(&p, &budget).unwrap_or_else(|e| panic!("{name}: {e}"));
        let views = |p: &Program| {
            p.nodes
                .iter()
                .filter(|n| n.uop.is_movement() && !matches!(n.uop, UOp::Read { .. }))
                .count()
        };
        println!(
            "{name}: tiny {} -> {} nodes, views {} -> {}; e-graph {} -> {} e-nodes; {} iterations, {}; applied {:?}",
            p.nodes.len(),
            q.nodes.len(),
            views(&p),
            views(&q),
            stats.egraph_nodes_before,
            stats.egraph_nodes,
            stats.iterations,
            stats.stop_reason,
            stats.applied
        );
        assert!(stats.saturated(), "{name}: {stats:?}");
        let b = p.symbols.clone();
        check_sound(&p, &q, &b, &[7], Compare::BitExact).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn gemm_operands_are_one_read_each() {
    let (_, p) = examples()
        .into_iter()
        .find(|(n, _)| n == "gemm_bias_relu")
        .expect("gemm example");
    let (q, _) = fold_reads(&p, &Budget::default()).unwrap_or_else(|e| panic!("{e}"));
    let input_of = |name: &str| {
        q.inputs
            .iter()
            .find(|i| i.tensor == name)
            .map(|i| i.node)
            .expect("input")
    };
    let reads_of = |x: NodeId| -> Vec<AccessMap> {
        q.nodes
            .iter()
            .filter_map(|n| match (&n.uop, n.src.first()) {
                (UOp::Read { access }, Some(dlc_egg::ir::tiny::Src::Node(s))) if *s == x => {
                    Some(access.clone())
                }
                _ => None,
            })
            .collect()
    };
    let text = |a: &AccessMap| -> Vec<String> { a.index.iter().map(|e| e.to_string()).collect() };
    let (a, b) = (reads_of(input_of("A")), reads_of(input_of("B")));
    assert_eq!(a.len(), 1, "{q:#?}");
    assert_eq!(b.len(), 1, "{q:#?}");
    // out[m, n, k] = A[m, k] * B[k, n]: A is read at [i0, i2], B at [i2, i1]; no guards.
    assert_eq!(text(&a[0]), ["i0", "i2"]);
    assert_eq!(text(&b[0]), ["i2", "i1"]);
    assert!(a[0].guard.is_none() && b[0].guard.is_none());
    let views = q
        .nodes
        .iter()
        .filter(|n| n.uop.is_movement() && !matches!(n.uop, UOp::Read { .. }))
        .count();
    assert_eq!(views, 0, "{q:#?}");
}
