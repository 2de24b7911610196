//! Per-rule tests of the movement rules: a positive case (the rule fires, the extracted program is
//! smaller and evaluates bit-identically) and a near-miss (the rule must not fire, and the program
//! still evaluates identically) for every rule, with symbolic shapes where a rule reads shapes.

use super::{rules, RULE_NAMES};
use crate::ir::dim::{Dim, Shape};
use crate::ir::dtype::DType;
use crate::ir::tiny::{Builder, NodeId, Program, TinyError, UOp};
use crate::rules::testing::{assert_fired, assert_not_fired, check, Compare, Outcome};
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

/// `y = f(x)` for one input `x`.
fn prog(dtype: DType, shape: Shape, f: Step) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", dtype, shape).expect("input");
    let y = f(&mut b, x).expect("well-typed test program");
    b.output("y", y);
    b.finish()
}

/// Pushes a node the [`Builder`]'s shortcuts would skip (identity views).
fn raw(b: &mut Builder, uop: UOp, x: NodeId, shape: Shape) -> Result<NodeId, TinyError> {
    let dt = b.dtype(x);
    b.push(uop, vec![x.into()], dt, shape)
}

fn perm(b: &mut Builder, x: NodeId, p: &[usize]) -> Result<NodeId, TinyError> {
    raw(b, UOp::Permute { perm: p.to_vec() }, x, vec![])
}

fn pad(b: &mut Builder, x: NodeId, p: &[(i64, i64)], value: f64) -> Result<NodeId, TinyError> {
    let pad = p.to_vec();
    raw(b, UOp::Pad { pad, value }, x, vec![])
}

fn f32p(shape: Shape, f: Step) -> Program {
    prog(DType::F32, shape, f)
}

fn positive_cases() -> Vec<(&'static str, Program)> {
    vec![
        (
            "permute-permute",
            f32p(sh(&[2, 3, 4]), |b, x| {
                let y = perm(b, x, &[1, 2, 0])?;
                perm(b, y, &[1, 0, 2])
            }),
        ),
        (
            "permute-permute",
            f32p(vec![m(), n(), Dim::int(4)], |b, x| {
                let y = perm(b, x, &[2, 0, 1])?;
                let y = perm(b, y, &[0, 2, 1])?;
                perm(b, y, &[2, 1, 0])
            }),
        ),
        (
            "permute-identity",
            f32p(vec![m(), Dim::int(3)], |b, x| perm(b, x, &[0, 1])),
        ),
        (
            "reshape-reshape",
            f32p(sh(&[2, 3, 4]), |b, x| {
                let y = b.reshape(x, sh(&[6, 4]))?;
                b.reshape(y, sh(&[4, 6]))
            }),
        ),
        (
            "reshape-reshape",
            f32p(vec![m(), n()], |b, x| {
                let y = b.reshape(x, vec![m().mul(&n())])?;
                b.reshape(y, vec![n(), m()])
            }),
        ),
        (
            "reshape-identity",
            f32p(vec![m(), Dim::int(3)], |b, x| {
                raw(b, UOp::Reshape, x, vec![m(), Dim::int(3)])
            }),
        ),
        (
            "reshape-identity",
            f32p(sh(&[2, 3]), |b, x| {
                let y = b.reshape(x, sh(&[6]))?;
                b.reshape(y, sh(&[2, 3]))
            }),
        ),
        (
            "expand-expand",
            f32p(sh(&[1, 1]), |b, x| {
                let y = b.expand(x, vec![m(), Dim::int(1)])?;
                b.expand(y, vec![m(), n()])
            }),
        ),
        (
            "expand-identity",
            f32p(vec![m(), Dim::int(1)], |b, x| {
                raw(b, UOp::Expand, x, vec![m(), Dim::int(1)])
            }),
        ),
        (
            "flip-flip",
            f32p(sh(&[2, 3, 4]), |b, x| {
                let y = b.flip(x, vec![0, 2])?;
                b.flip(y, vec![2, 0])
            }),
        ),
        (
            "flip-empty",
            f32p(sh(&[2, 3]), |b, x| {
                raw(b, UOp::Flip { axes: vec![] }, x, vec![])
            }),
        ),
        (
            "shrink-full",
            f32p(vec![m(), Dim::int(3)], |b, x| {
                let (lo, hi, step) = (sh(&[0, 0]), vec![m(), Dim::int(3)], vec![1, 1]);
                raw(b, UOp::Shrink { lo, hi, step }, x, vec![])
            }),
        ),
        (
            "pad-zero",
            f32p(vec![m(), Dim::int(3)], |b, x| {
                pad(b, x, &[(0, 0), (0, 0)], 1.5)
            }),
        ),
        (
            "pad-pad",
            f32p(vec![m(), Dim::int(3)], |b, x| {
                let y = pad(b, x, &[(1, 0), (0, 2)], 0.0)?;
                pad(b, y, &[(0, 1), (2, 0)], 0.0)
            }),
        ),
        (
            "cast-identity",
            f32p(sh(&[2, 3]), |b, x| {
                let sh = b.shape(x).clone();
                b.push(UOp::Cast, vec![x.into()], DType::F32, sh)
            }),
        ),
        (
            "cast-widen-narrow",
            prog(DType::F16, vec![m(), Dim::int(3)], |b, x| {
                let y = b.cast(x, DType::F32)?;
                b.cast(y, DType::F16)
            }),
        ),
        (
            "cast-widen-narrow",
            prog(DType::Bool, sh(&[4]), |b, x| {
                let y = b.cast(x, DType::I32)?;
                b.cast(y, DType::Bool)
            }),
        ),
        // Attention's K path in tinygrad order: permute → reshape (insert a 1) → permute collapses
        // to one reshape ([M,N] → [1,M,N] here): seed 001 §6.8.3 reads K without a transpose.
        (
            "unsqueeze-past-permute",
            f32p(vec![m(), n()], |b, x| {
                let y = perm(b, x, &[1, 0])?;
                let y = b.reshape(y, vec![Dim::int(1), n(), m()])?;
                perm(b, y, &[0, 2, 1])
            }),
        ),
        (
            "permute-moving-ones",
            f32p(vec![m(), Dim::int(1), n()], |b, x| {
                let y = perm(b, x, &[1, 0, 2])?;
                b.reshape(y, vec![m(), n()])
            }),
        ),
    ]
}

fn negative_cases() -> Vec<(&'static str, Program)> {
    vec![
        // Not adjacent: a RESHAPE sits between the two PERMUTEs.
        (
            "permute-permute",
            f32p(sh(&[2, 3, 4]), |b, x| {
                let y = perm(b, x, &[1, 0, 2])?;
                let y = b.reshape(y, sh(&[3, 4, 2]))?;
                perm(b, y, &[1, 0, 2])
            }),
        ),
        (
            "permute-identity",
            f32p(vec![m(), m()], |b, x| perm(b, x, &[1, 0])),
        ),
        (
            "reshape-reshape",
            f32p(sh(&[2, 3]), |b, x| {
                let y = b.reshape(x, sh(&[3, 2]))?;
                let y = b.flip(y, vec![0])?;
                b.reshape(y, sh(&[6]))
            }),
        ),
        // Same element count, different shape (also for symbolic sizes that might be equal).
        (
            "reshape-identity",
            f32p(vec![m(), n()], |b, x| b.reshape(x, vec![n(), m()])),
        ),
        (
            "expand-expand",
            f32p(sh(&[1, 1]), |b, x| {
                let y = b.expand(x, vec![m(), Dim::int(1)])?;
                let y = perm(b, y, &[1, 0])?;
                b.expand(y, vec![n(), m()])
            }),
        ),
        // M may be bound to 1, but shape(x) = [1, N] is not provably [M, N].
        (
            "expand-identity",
            f32p(vec![Dim::int(1), n()], |b, x| b.expand(x, vec![m(), n()])),
        ),
        (
            "flip-flip",
            f32p(sh(&[2, 3, 4]), |b, x| {
                let y = b.flip(x, vec![0])?;
                b.flip(y, vec![0, 1])
            }),
        ),
        ("flip-empty", f32p(sh(&[2, 3]), |b, x| b.flip(x, vec![1]))),
        (
            "shrink-full",
            f32p(vec![m(), Dim::int(3)], |b, x| {
                // Full range on both axes, but step 2 on the second.
                b.shrink(x, sh(&[0, 0]), vec![m(), Dim::int(3)], vec![1, 2])
            }),
        ),
        (
            "shrink-full",
            f32p(vec![m(), Dim::int(3)], |b, x| {
                b.shrink(x, sh(&[0, 1]), vec![m(), Dim::int(3)], vec![1, 1])
            }),
        ),
        (
            "pad-zero",
            f32p(vec![m(), Dim::int(3)], |b, x| {
                pad(b, x, &[(0, 1), (0, 0)], 0.0)
            }),
        ),
        // Different fill values.
        (
            "pad-pad",
            f32p(vec![m(), Dim::int(3)], |b, x| {
                let y = pad(b, x, &[(1, 0), (0, 2)], 0.0)?;
                pad(b, y, &[(0, 1), (2, 0)], 1.0)
            }),
        ),
        (
            "cast-identity",
            f32p(sh(&[2, 3]), |b, x| b.cast(x, DType::F16)),
        ),
        // fp32 → fp16 → fp32 rounds.
        (
            "cast-widen-narrow",
            f32p(sh(&[2, 3]), |b, x| {
                let y = b.cast(x, DType::F16)?;
                b.cast(y, DType::F32)
            }),
        ),
        // i32 → fp32 → i32 is not exact beyond 2^24.
        (
            "cast-widen-narrow",
            prog(DType::I32, sh(&[4]), |b, x| {
                let y = b.cast(x, DType::F32)?;
                b.cast(y, DType::I32)
            }),
        ),
        // The reshape merges axes instead of inserting ones.
        (
            "unsqueeze-past-permute",
            f32p(sh(&[2, 3]), |b, x| {
                let y = perm(b, x, &[1, 0])?;
                b.reshape(y, sh(&[6]))
            }),
        ),
        // A true transpose: M and N may both exceed 1.
        (
            "permute-moving-ones",
            f32p(vec![m(), n()], |b, x| perm(b, x, &[1, 0])),
        ),
    ]
}

fn bindings() -> BTreeMap<String, i64> {
    [("M".to_string(), 3), ("N".to_string(), 2)].into()
}

fn run(p: &Program) -> Outcome {
    check(p, &rules(), &bindings(), Compare::BitExact)
}

fn positive(rule: &str) {
    let cases: Vec<_> = positive_cases()
        .into_iter()
        .filter(|c| c.0 == rule)
        .collect();
    assert!(!cases.is_empty(), "no positive case for `{rule}`");
    for (_, p) in cases {
        let o = run(&p);
        assert_fired(&o.stats, rule);
        assert!(o.stats.saturated(), "{rule}: {:?}", o.stats);
        assert!(
            o.rewritten.nodes.len() < o.original.nodes.len(),
            "{rule}: {} nodes, not fewer than {}",
            o.rewritten.nodes.len(),
            o.original.nodes.len()
        );
    }
}

fn negative(rule: &str) {
    let cases: Vec<_> = negative_cases()
        .into_iter()
        .filter(|c| c.0 == rule)
        .collect();
    assert!(!cases.is_empty(), "no negative case for `{rule}`");
    for (_, p) in cases {
        let o = run(&p);
        assert_not_fired(&o.stats, rule);
    }
}

rule_tests! {
    "permute-permute" => permute_permute_fires, permute_permute_near_miss;
    "permute-identity" => permute_identity_fires, permute_identity_near_miss;
    "reshape-reshape" => reshape_reshape_fires, reshape_reshape_near_miss;
    "reshape-identity" => reshape_identity_fires, reshape_identity_near_miss;
    "expand-expand" => expand_expand_fires, expand_expand_near_miss;
    "expand-identity" => expand_identity_fires, expand_identity_near_miss;
    "flip-flip" => flip_flip_fires, flip_flip_near_miss;
    "flip-empty" => flip_empty_fires, flip_empty_near_miss;
    "shrink-full" => shrink_full_fires, shrink_full_near_miss;
    "pad-zero" => pad_zero_fires, pad_zero_near_miss;
    "pad-pad" => pad_pad_fires, pad_pad_near_miss;
    "cast-identity" => cast_identity_fires, cast_identity_near_miss;
    "cast-widen-narrow" => cast_widen_narrow_fires, cast_widen_narrow_near_miss;
    "unsqueeze-past-permute" => unsqueeze_past_permute_fires, unsqueeze_past_permute_near_miss;
    "permute-moving-ones" => permute_moving_ones_fires, permute_moving_ones_near_miss;
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

#[test]
fn every_rule_fires_somewhere_in_the_positive_cases() {
    let mut fired = std::collections::BTreeSet::new();
    for (_, p) in positive_cases() {
        fired.extend(run(&p).stats.applied.into_keys());
    }
    for r in RULE_NAMES {
        assert!(fired.contains(r), "`{r}` never fired");
    }
}

#[test]
fn composed_permutation_is_p_after_q() {
    // x:[2,3,4] →(1,2,0) [3,4,2] →(1,0,2) [4,3,2]: one PERMUTE (2,1,0) remains.
    let o = run(&positive_cases()[0].1);
    let perms: Vec<_> = o
        .rewritten
        .nodes
        .iter()
        .filter_map(|n| match &n.uop {
            UOp::Permute { perm } => Some(perm.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(perms, vec![vec![2, 1, 0]]);
}
