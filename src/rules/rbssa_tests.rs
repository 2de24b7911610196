//! Per-rule tests of the rbssa rules: a positive case (the rule fires, the phase saturates, the
//! chain is extracted as READs directly over INPUT and evaluates bit-identically) and a near-miss
//! (the chain's map is not expressible, or there is nothing to compose: the rule must not fire,
//! and the program still evaluates identically) for every rule, with symbolic shapes where a rule
//! reads shapes.

use super::{fold_reads, rules, RULE_NAMES};
use crate::ir::axis::{AccessMap, AxisExpr, CmpOp, Pred};
use crate::ir::dim::{Dim, Shape};
use crate::ir::dtype::DType;
use crate::ir::num::Num;
use crate::ir::tiny::{AffineIndex, Builder, NodeId, Program, TinyError, UOp};
use crate::rules::testing::{assert_fired, assert_not_fired, check_sound, Compare};
use crate::rules::{Budget, PhaseStats};
use std::collections::BTreeMap;

type Step = fn(&mut Builder, NodeId) -> Result<NodeId, TinyError>;

fn m() -> Dim {
    Dim::sym("M")
}

fn n() -> Dim {
    Dim::sym("N")
}

fn sh(v: &[i64]) -> Shape {
    v.iter().map(|x| Dim::int(*x)).collect()
}

/// `y = f(x)` for one fp32 input `x`.
fn prog(shape: Shape, f: Step) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, shape).expect("input");
    let y = f(&mut b, x).expect("well-typed test program");
    b.output("y", y);
    b.finish()
}

/// `[M, N] -> [M*N]`: merging needs floordiv by the symbolic `N`, so it never folds.
fn unfoldable(b: &mut Builder, x: NodeId) -> Result<NodeId, TinyError> {
    b.reshape(x, vec![m().mul(&n())])
}

fn ax(k: usize) -> AxisExpr {
    AxisExpr::Name(format!("i{k}"))
}

fn acc(shape: Shape, index: Vec<AxisExpr>, guard: Option<Pred>, fill: f64) -> AccessMap {
    AccessMap {
        shape,
        index,
        guard,
        fill: Num(fill),
    }
}

fn positive_cases() -> Vec<(&'static str, Program)> {
    vec![
        (
            "reshape-to-read",
            prog(sh(&[2, 3, 4]), |b, x| b.reshape(x, sh(&[6, 4]))),
        ),
        (
            "reshape-to-read",
            prog(vec![m().mul(&n())], |b, x| {
                b.reshape(x, vec![m(), Dim::int(1), n()])
            }),
        ),
        (
            "permute-to-read",
            prog(vec![m(), Dim::int(3), Dim::int(4)], |b, x| {
                b.permute(x, vec![2, 0, 1])
            }),
        ),
        (
            "expand-to-read",
            prog(sh(&[3, 1]), |b, x| b.expand(x, vec![Dim::int(3), m()])),
        ),
        (
            "pad-to-read",
            prog(vec![m(), Dim::int(4)], |b, x| {
                b.pad(x, vec![(1, 0), (2, 1)], 2.5)
            }),
        ),
        (
            "shrink-to-read",
            prog(vec![m(), Dim::int(7)], |b, x| {
                b.shrink(x, sh(&[1, 0]), vec![m(), Dim::int(7)], vec![1, 3])
            }),
        ),
        (
            "flip-to-read",
            prog(vec![m(), Dim::int(4)], |b, x| b.flip(x, vec![0, 1])),
        ),
        (
            "view-to-read",
            prog(sh(&[6]), |b, x| {
                let map = vec![AffineIndex::new(vec![(0, 1), (1, 1)], 0)];
                b.view(x, sh(&[4, 3]), map)
            }),
        ),
        (
            "read-of-read",
            prog(vec![m(), Dim::int(4)], |b, x| {
                let g = Pred::Cmp(CmpOp::Lt, ax(1), AxisExpr::Const(3));
                let a1 = acc(vec![Dim::int(4), m()], vec![ax(1), ax(0)], Some(g), 5.0);
                let y = b.read(x, a1)?;
                let flip = AxisExpr::Add(vec![
                    AxisExpr::Const(3),
                    AxisExpr::product(AxisExpr::Const(-1), ax(0)),
                ]);
                let a2 = acc(vec![Dim::int(4), m()], vec![flip, ax(1)], None, 0.0);
                b.read(y, a2)
            }),
        ),
        (
            // A chain through every movement op.
            "reshape-to-read",
            prog(vec![m(), Dim::int(6)], |b, x| {
                let y = b.reshape(x, vec![m(), Dim::int(2), Dim::int(3)])?;
                let y = b.permute(y, vec![2, 0, 1])?;
                let y = b.pad(y, vec![(1, 1), (0, 0), (0, 1)], -1.0)?;
                let y = b.flip(y, vec![1])?;
                let y = b.shrink(
                    y,
                    sh(&[0, 0, 1]),
                    vec![Dim::int(5), m(), Dim::int(3)],
                    vec![2, 1, 1],
                )?;
                let y = b.reshape(y, vec![Dim::int(3), m(), Dim::int(2), Dim::int(1)])?;
                b.expand(y, vec![Dim::int(3), m(), Dim::int(2), Dim::int(2)])
            }),
        ),
    ]
}

fn negative_cases() -> Vec<(&'static str, Program)> {
    vec![
        ("reshape-to-read", prog(vec![m(), n()], unfoldable)),
        (
            "permute-to-read",
            prog(vec![m(), n()], |b, x| {
                let y = b.reshape(x, vec![m().mul(&n()), Dim::int(1)])?;
                b.permute(y, vec![1, 0])
            }),
        ),
        (
            "expand-to-read",
            prog(vec![m(), n()], |b, x| {
                let y = b.reshape(x, vec![m().mul(&n()), Dim::int(1)])?;
                b.expand(y, vec![m().mul(&n()), Dim::int(2)])
            }),
        ),
        (
            "pad-to-read",
            prog(vec![m(), n()], |b, x| {
                let y = unfoldable(b, x)?;
                b.pad(y, vec![(1, 1)], 0.0)
            }),
        ),
        (
            "shrink-to-read",
            prog(vec![m(), n()], |b, x| {
                let y = unfoldable(b, x)?;
                b.shrink(y, sh(&[1]), vec![m().mul(&n())], vec![2])
            }),
        ),
        (
            "flip-to-read",
            prog(vec![m(), n()], |b, x| {
                let y = unfoldable(b, x)?;
                b.flip(y, vec![0])
            }),
        ),
        (
            "view-to-read",
            prog(vec![m(), n()], |b, x| {
                let y = unfoldable(b, x)?;
                let map = vec![AffineIndex::new(vec![(0, 1)], 0)];
                b.view(y, sh(&[2]), map)
            }),
        ),
        (
            // Two guards with different fills do not compose; a read over a base class has
            // nothing to compose with.
            "read-of-read",
            prog(sh(&[4]), |b, x| {
                let g1 = Pred::Cmp(CmpOp::Lt, ax(0), AxisExpr::Const(3));
                let y = b.read(x, acc(sh(&[4]), vec![ax(0)], Some(g1), 1.0))?;
                let g2 = Pred::Cmp(CmpOp::Ge, ax(0), AxisExpr::Const(1));
                b.read(y, acc(sh(&[4]), vec![ax(0)], Some(g2), 2.0))
            }),
        ),
    ]
}

fn bindings() -> BTreeMap<String, i64> {
    [("M".to_string(), 3), ("N".to_string(), 2)].into()
}

/// Folds `p`, checks soundness on three seeds, returns the rewritten program and stats.
fn run(p: &Program) -> (Program, PhaseStats) {
    let (q, stats) = fold_reads(p, &Budget::default()).unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = check_sound(p, &q, &bindings(), &[1, 2, 3], Compare::BitExact) {
        panic!("unsound rewrite: {e}\nstats: {stats:?}\noriginal: {p:#?}\nrewritten: {q:#?}");
    }
    (q, stats)
}

fn count(p: &Program, f: impl Fn(&UOp) -> bool) -> usize {
    p.nodes.iter().filter(|x| f(&x.uop)).count()
}

fn positive(rule: &str) {
    let cases: Vec<_> = positive_cases()
        .into_iter()
        .filter(|c| c.0 == rule)
        .collect();
    assert!(!cases.is_empty(), "no positive case for `{rule}`");
    for (_, p) in cases {
        let (q, stats) = run(&p);
        assert_fired(&stats, rule);
        assert!(stats.saturated(), "{rule}: {stats:?}");
        // One READ over the INPUT, nothing else.
        assert_eq!(q.nodes.len(), 2, "{rule}: {q:#?}");
        assert_eq!(count(&q, |u| matches!(u, UOp::Read { .. })), 1, "{rule}");
    }
}

fn negative(rule: &str) {
    let cases: Vec<_> = negative_cases()
        .into_iter()
        .filter(|c| c.0 == rule)
        .collect();
    assert!(!cases.is_empty(), "no negative case for `{rule}`");
    for (_, p) in cases {
        let (_, stats) = run(&p);
        assert_not_fired(&stats, rule);
        assert!(stats.saturated(), "{rule}: {stats:?}");
    }
}

rule_tests! {
    "reshape-to-read" => reshape_to_read_fires, reshape_to_read_near_miss;
    "permute-to-read" => permute_to_read_fires, permute_to_read_near_miss;
    "expand-to-read" => expand_to_read_fires, expand_to_read_near_miss;
    "pad-to-read" => pad_to_read_fires, pad_to_read_near_miss;
    "shrink-to-read" => shrink_to_read_fires, shrink_to_read_near_miss;
    "flip-to-read" => flip_to_read_fires, flip_to_read_near_miss;
    "view-to-read" => view_to_read_fires, view_to_read_near_miss;
    "read-of-read" => read_of_read_fires, read_of_read_near_miss;
}

#[test]
fn rule_names_match_the_rule_set_and_all_are_tested() {
    let names: Vec<String> = rules().iter().map(|r| r.name.to_string()).collect();
    assert_eq!(names, RULE_NAMES);
    let mut tested = TESTED.to_vec();
    tested.sort_unstable();
    let mut all = RULE_NAMES.to_vec();
    all.sort_unstable();
    assert_eq!(tested, all);
}

/// The access map of the single READ of a folded program.
fn the_read(q: &Program) -> AccessMap {
    let reads: Vec<_> = q
        .nodes
        .iter()
        .filter_map(|x| match &x.uop {
            UOp::Read { access } => Some(access.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(reads.len(), 1, "{q:#?}");
    reads[0].clone()
}

fn index_text(a: &AccessMap) -> Vec<String> {
    a.index.iter().map(|e| e.to_string()).collect()
}

#[test]
fn split_then_merge_normalizes_to_the_identity_map() {
    // [2,3] -> [6] -> [2,3]: x[(3*i0+i1)//3, (3*i0+i1) mod 3] = x[i0, i1].
    let p = prog(sh(&[2, 3]), |b, x| {
        let y = b.reshape(x, sh(&[6]))?;
        b.reshape(y, sh(&[2, 3]))
    });
    let (q, _) = run(&p);
    assert_eq!(index_text(&the_read(&q)), ["i0", "i1"]);
    // Merge then split: [6] -> [2,3] -> [6] reads x[i0].
    let p = prog(sh(&[6]), |b, x| {
        let y = b.reshape(x, sh(&[2, 3]))?;
        b.reshape(y, sh(&[6]))
    });
    let (q, _) = run(&p);
    assert_eq!(index_text(&the_read(&q)), ["i0"]);
}

#[test]
fn maps_are_small_and_guards_minimal() {
    // Symbolic split: [M*N] -> [M, 1, N] reads x[N*i0 + i2].
    let (q, _) = run(&positive_cases()[1].1);
    assert_eq!(index_text(&the_read(&q)), ["N*i0+i2"]);
    // PAD keeps only the comparisons that can fail.
    let pad = positive_cases()
        .into_iter()
        .find(|c| c.0 == "pad-to-read")
        .map(|c| c.1)
        .expect("pad case");
    let (q, _) = run(&pad);
    let a = the_read(&q);
    assert_eq!(index_text(&a), ["i0+-1", "i1+-2"]);
    assert_eq!(
        a.guard.map(|g| g.to_string()).as_deref(),
        Some("(i0>=1&i1>=2&i1<6)")
    );
    assert_eq!(a.fill, Num(2.5));
    // Flip twice is the identity read.
    let p = prog(vec![m(), Dim::int(4)], |b, x| {
        let y = b.flip(x, vec![0])?;
        b.flip(y, vec![0])
    });
    let (q, _) = run(&p);
    assert_eq!(index_text(&the_read(&q)), ["i0", "i1"]);
}

#[test]
fn different_fills_keep_the_outer_pad() {
    let p = prog(sh(&[3]), |b, x| {
        let y = b.pad(x, vec![(1, 0)], 1.0)?;
        b.pad(y, vec![(0, 1)], 2.0)
    });
    let (q, stats) = run(&p);
    assert!(stats.fired("pad-to-read"));
    // The inner pad is a READ over x; the outer stays a PAD over it.
    assert_eq!(count(&q, |u| matches!(u, UOp::Pad { .. })), 1, "{q:#?}");
    assert_eq!(count(&q, |u| matches!(u, UOp::Read { .. })), 1, "{q:#?}");
    // Equal fills compose into one guarded READ.
    let p = prog(sh(&[3]), |b, x| {
        let y = b.pad(x, vec![(1, 0)], 1.0)?;
        b.pad(y, vec![(0, 1)], 1.0)
    });
    let (q, _) = run(&p);
    let a = the_read(&q);
    assert_eq!(
        a.guard.map(|g| g.to_string()).as_deref(),
        Some("(i0<4&i0>=1)")
    );
}

#[test]
fn reads_stay_over_compute_classes() {
    // relu(x) is a base class: the chain over it folds to one READ of the relu.
    let p = prog(sh(&[2, 3]), |b, x| {
        let r = b.unary(crate::ir::tiny::UnaryOp::Relu, x)?;
        let y = b.permute(r, vec![1, 0])?;
        let y = b.reshape(y, sh(&[6]))?;
        b.unary(crate::ir::tiny::UnaryOp::Neg, y)
    });
    let (q, stats) = run(&p);
    assert!(stats.saturated());
    assert_eq!(q.nodes.len(), 4, "{q:#?}");
    let a = the_read(&q);
    assert_eq!(index_text(&a), ["i0+-2*(i0//2)", "i0//2"]);
}
