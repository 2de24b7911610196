//! Per-rule tests of the contraction rules (positive: fires, the moved-cast form is proved equal
//! and evaluates bit-identically; near-miss: does not fire), and [`contraction_of`] on the lowered
//! gemm, mlp, attention and conv examples.

use super::{contraction_of, rules, ContractionKind, RULE_NAMES};
use crate::ir::dim::{Dim, Shape};
use crate::ir::dtype::DType;
use crate::ir::egraph::{add_program, TensorGraph};
use crate::ir::tiny::{AffineIndex, Builder, NodeId, Program, ReduceOp, TinyError, UOp};
use crate::rules::testing::{assert_fired, assert_not_fired, check, check_sound, proves, Compare};
use crate::rules::{all_phases, run_phase, Budget};
use std::collections::BTreeMap;

type Step = fn(&mut Builder, NodeId) -> Result<NodeId, TinyError>;

fn sh(v: &[i64]) -> Shape {
    v.iter().map(|x| Dim::int(*x)).collect()
}

/// `y = f(x)` for `x: fp32 [2,3]`.
fn prog(f: Step) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, sh(&[2, 3])).expect("input");
    let y = f(&mut b, x).expect("well-typed test program");
    b.output("y", y);
    b.finish()
}

fn half(b: &mut Builder, x: NodeId) -> Result<NodeId, TinyError> {
    b.cast(x, DType::F16)
}

fn window(b: &mut Builder, x: NodeId) -> Result<NodeId, TinyError> {
    // [2,3] → [2,2,2]: out[i,j,t] = x[i, j + t].
    let map = vec![
        AffineIndex::new(vec![(0, 1)], 0),
        AffineIndex::new(vec![(1, 1), (2, 1)], 0),
    ];
    b.view(x, sh(&[2, 2, 2]), map)
}

/// (rule, original, the same with the cast moved up).
fn positive_cases() -> Vec<(&'static str, Program, Program)> {
    vec![
        (
            "cast-past-reshape",
            prog(|b, x| {
                let c = half(b, x)?;
                b.reshape(c, sh(&[3, 2]))
            }),
            prog(|b, x| {
                let r = b.reshape(x, sh(&[3, 2]))?;
                half(b, r)
            }),
        ),
        (
            "cast-past-permute",
            prog(|b, x| {
                let c = half(b, x)?;
                b.permute(c, vec![1, 0])
            }),
            prog(|b, x| {
                let r = b.permute(x, vec![1, 0])?;
                half(b, r)
            }),
        ),
        (
            "cast-past-expand",
            prog(|b, x| {
                let c = half(b, x)?;
                let c = b.reshape(c, sh(&[2, 1, 3]))?;
                b.expand(c, sh(&[2, 4, 3]))
            }),
            prog(|b, x| {
                let r = b.reshape(x, sh(&[2, 1, 3]))?;
                let r = b.expand(r, sh(&[2, 4, 3]))?;
                half(b, r)
            }),
        ),
        (
            "cast-past-view",
            prog(|b, x| {
                let c = half(b, x)?;
                window(b, c)
            }),
            prog(|b, x| {
                let r = window(b, x)?;
                half(b, r)
            }),
        ),
        (
            "cast-past-pad",
            prog(|b, x| {
                let c = half(b, x)?;
                b.pad(c, vec![(1, 0), (0, 2)], 0.0)
            }),
            prog(|b, x| {
                let r = b.pad(x, vec![(1, 0), (0, 2)], 0.0)?;
                half(b, r)
            }),
        ),
    ]
}

fn negative_cases() -> Vec<(&'static str, Program)> {
    vec![
        // Already canonical: the cast is above the reshape; the rule never moves it back down.
        (
            "cast-past-reshape",
            prog(|b, x| {
                let r = b.reshape(x, sh(&[3, 2]))?;
                half(b, r)
            }),
        ),
        // A unary op, not a cast, under the permute.
        (
            "cast-past-permute",
            prog(|b, x| {
                let r = b.unary(crate::ir::tiny::UnaryOp::Neg, x)?;
                b.permute(r, vec![1, 0])
            }),
        ),
        (
            "cast-past-expand",
            prog(|b, x| {
                let r = b.reshape(x, sh(&[2, 1, 3]))?;
                let r = b.expand(r, sh(&[2, 4, 3]))?;
                half(b, r)
            }),
        ),
        (
            "cast-past-view",
            prog(|b, x| {
                let r = window(b, x)?;
                half(b, r)
            }),
        ),
        // The fill 0.1 is not exact in fp32: padding before the cast would round it differently.
        (
            "cast-past-pad",
            prog(|b, x| {
                let c = half(b, x)?;
                b.pad(c, vec![(1, 0), (0, 2)], 0.1)
            }),
        ),
    ]
}

fn positive(rule: &str) {
    let cases: Vec<_> = positive_cases()
        .into_iter()
        .filter(|c| c.0 == rule)
        .collect();
    assert!(!cases.is_empty(), "no positive case for `{rule}`");
    for (_, p, want) in cases {
        let o = check(&p, &rules(), &BTreeMap::new(), Compare::BitExact);
        assert_fired(&o.stats, rule);
        assert!(o.stats.saturated(), "{rule}: {:?}", o.stats);
        assert!(proves(&p, &want, &rules()), "{rule}: moved form not proved");
        check_sound(&p, &want, &BTreeMap::new(), &[1, 2, 3], Compare::BitExact)
            .unwrap_or_else(|e| panic!("{rule}: {e}"));
    }
}

fn negative(rule: &str) {
    let cases: Vec<_> = negative_cases()
        .into_iter()
        .filter(|c| c.0 == rule)
        .collect();
    assert!(!cases.is_empty(), "no negative case for `{rule}`");
    for (_, p) in cases {
        let o = check(&p, &rules(), &BTreeMap::new(), Compare::BitExact);
        assert_not_fired(&o.stats, rule);
    }
}

rule_tests! {
    "cast-past-reshape" => cast_past_reshape_fires, cast_past_reshape_near_miss;
    "cast-past-permute" => cast_past_permute_fires, cast_past_permute_near_miss;
    "cast-past-expand" => cast_past_expand_fires, cast_past_expand_near_miss;
    "cast-past-view" => cast_past_view_fires, cast_past_view_near_miss;
    "cast-past-pad" => cast_past_pad_fires, cast_past_pad_near_miss;
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

/// Identity movements leave cycles in the e-graph (`c = permute(c)` for a permute of unit axes,
/// `r = reshape(reshape(r))` for a reshape round trip); moving a cast past them would add a new
/// class per iteration until the node limit. The phase must saturate.
#[test]
fn casts_do_not_move_around_movement_cycles() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F16, sh(&[1, 1])).expect("input");
    let c = b.cast(x, DType::BF16).expect("cast");
    let p = b.permute(c, vec![1, 0]).expect("permute of unit axes");
    let r = b.reshape(p, sh(&[1, 1, 1])).expect("reshape");
    let r = b.reshape(r, sh(&[1, 1])).expect("reshape back");
    let y = b.cast(r, DType::F32).expect("cast");
    b.output("y", y);
    let prog = b.finish();
    let mut eg = TensorGraph::default();
    add_program(&mut eg, &prog);
    for (name, rs) in all_phases() {
        let (e, st) = run_phase(eg, name, &rs, &Budget::default());
        eg = e;
        assert_eq!(st.stop_reason, "Saturated", "{name}: {st:?}");
        assert!(st.egraph_nodes < 200, "{name}: {st:?}");
    }
}

/// The contractions of an example after the movement and contraction phases, in Tiny order of
/// the sum-reductions (`None` for sums that are not contractions).
fn contractions(example: &str) -> Vec<Option<super::Contraction>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(format!("{example}.json"));
    let g = crate::ir::frontend::load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    let p = crate::lower::lower(&g).unwrap_or_else(|d| panic!("{d}"));
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, &p);
    for (name, rs) in all_phases() {
        if matches!(name, "movement" | "contraction") {
            eg = run_phase(eg, name, &rs, &Budget::default()).0;
        }
    }
    p.nodes
        .iter()
        .filter(|n| {
            matches!(
                n.uop,
                UOp::Reduce {
                    op: ReduceOp::Sum,
                    ..
                }
            )
        })
        .map(|n| contraction_of(&eg, class[n.id.index()]))
        .collect()
}

#[test]
fn gemm_and_mlp_are_matmuls_reading_fp16_inputs() {
    for (ex, count) in [("gemm_bias_relu", 1), ("mlp_gelu", 2), ("matmul_1d_2d", 1)] {
        let cs = contractions(ex);
        assert_eq!(cs.len(), count, "{ex}");
        for c in cs {
            let c = c.unwrap_or_else(|| panic!("{ex}: not a contraction"));
            assert_eq!(c.kind, ContractionKind::Matmul, "{ex}: {c:?}");
            assert_eq!(c.acc, DType::F32);
            assert_eq!(c.axes, vec![c.axes[0]]);
            for o in &c.operands {
                assert!(
                    o.chain.contains(&"expand") || ex == "matmul_1d_2d",
                    "{ex}: {o:?}"
                );
                let fp16 = ex != "matmul_1d_2d";
                assert_eq!(o.cast.is_some(), fp16, "{ex}: {o:?}");
            }
        }
    }
}

#[test]
fn attention_has_two_batched_contractions_and_a_plain_sum() {
    let cs = contractions("attention_causal");
    // QKᵀ, softmax's denominator (a sum of exp2, not a product), PV.
    assert_eq!(cs.len(), 3);
    let qk = cs[0].clone().expect("QK is a contraction");
    assert!(cs[1].is_none());
    let pv = cs[2].clone().expect("PV is a contraction");
    assert_eq!(
        (qk.kind, pv.kind),
        (ContractionKind::Batched, ContractionKind::Batched)
    );
    assert_eq!(qk.axes, vec![4]);
    assert!(qk.operands.iter().all(|o| o.cast == Some(DType::F32)));
    // PV: the fp32 probabilities are read without a cast, V through a cast to fp32.
    assert_eq!(pv.operands[0].cast, None);
    assert_eq!(pv.operands[1].cast, Some(DType::F32));
}

#[test]
fn convolutions_are_conv_like() {
    for ex in ["conv3x3_s2_p1_silu", "conv_relu_pool"] {
        let cs = contractions(ex);
        assert_eq!(cs.len(), 1, "{ex}");
        let c = cs[0].clone().expect("a contraction");
        assert_eq!(c.kind, ContractionKind::ConvLike, "{ex}");
        assert_eq!(c.axes, vec![5, 6, 7]);
        assert!(c.operands[0].chain.contains(&"view"), "{:?}", c.operands[0]);
    }
}
