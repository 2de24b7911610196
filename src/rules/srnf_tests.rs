//! Per-rule tests of the SRNF rules: a positive case (the rule fires and the program extracted by
//! elementwise work evaluates like the original) and a near-miss (the rule must not fire) for every
//! rule, plus the seed's R4 barriers (softmax's max → exp2 → sum never merges).

use super::{rules, RULE_NAMES};
use crate::ir::dim::{Dim, Shape};
use crate::ir::dtype::DType;
use crate::ir::tiny::{BinaryOp, Builder, NodeId, Program, ReduceOp, Src, TinyError, UOp, UnaryOp};
use crate::rules::testing::{
    assert_fired, assert_not_fired, check_sound, check_work, proves, Compare, Outcome,
};
use std::collections::BTreeMap;

type Body = fn(&mut Builder, NodeId, NodeId) -> Result<NodeId, TinyError>;

fn m() -> Dim {
    Dim::int(3)
}

fn n() -> Dim {
    Dim::sym("N")
}

/// M and K, the reduced extents of most cases, are constants: the sum hoists need them provably
/// nonempty. N stays symbolic.
fn k() -> Dim {
    Dim::int(5)
}

fn one() -> Dim {
    Dim::int(1)
}

/// `y = f(x, g)` for inputs `x: [M,N,K]` and `g: g_shape`, both `dtype`.
fn prog2(dtype: DType, g_shape: Shape, f: Body) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", dtype, vec![m(), n(), k()]).expect("input");
    let g = b.input("g", dtype, g_shape).expect("input");
    let y = f(&mut b, x, g).expect("well-typed test program");
    b.output("y", y);
    b.finish()
}

fn f32p(g_shape: Shape, f: Body) -> Program {
    prog2(DType::F32, g_shape, f)
}

fn bcast(b: &mut Builder, g: NodeId) -> Result<NodeId, TinyError> {
    b.expand(g, vec![m(), n(), k()])
}

fn red(b: &mut Builder, op: ReduceOp, x: NodeId, axes: &[usize]) -> Result<NodeId, TinyError> {
    b.reduce(op, x, axes.to_vec(), DType::F32)
}

fn bin(b: &mut Builder, op: BinaryOp, x: NodeId, y: NodeId) -> Result<NodeId, TinyError> {
    b.binary(op, x.into(), y.into())
}

/// Exact only where the module doc says so; the rest agree to fp32 reassociation error.
const CLOSE: Compare = Compare::Close {
    rtol: 1e-5,
    atol: 1e-5,
};

fn positive_cases() -> Vec<(&'static str, Compare, Program)> {
    vec![
        // sum_N sum_K x = sum_{N,K} x: outer axis 1 of [M,N] is axis 1 of x.
        (
            "reduce-merge",
            CLOSE,
            f32p(vec![one()], |b, x, _| {
                let y = red(b, ReduceOp::Sum, x, &[2])?;
                red(b, ReduceOp::Sum, y, &[1])
            }),
        ),
        // max_M max_N x: outer axis 0 of [M,K] is axis 0 of x (after dropping N).
        (
            "reduce-merge",
            Compare::BitExact,
            f32p(vec![one()], |b, x, _| {
                let y = red(b, ReduceOp::Max, x, &[1])?;
                red(b, ReduceOp::Max, y, &[0])
            }),
        ),
        (
            "reduce-of-unit-axes",
            Compare::BitExact,
            prog2(DType::F16, vec![m(), one(), k()], |b, _, g| {
                b.reduce(ReduceOp::Max, g, vec![1], DType::F32)
            }),
        ),
        (
            "reduce-hoist-invariant-mul",
            CLOSE,
            f32p(vec![m(), n(), one()], |b, x, g| {
                let e = bcast(b, g)?;
                let p = bin(b, BinaryOp::Mul, x, e)?;
                red(b, ReduceOp::Sum, p, &[2])
            }),
        ),
        // fp16 body, fp32 accumulator: the factor is cast to fp32 outside.
        (
            "reduce-hoist-invariant-mul-left",
            Compare::Close {
                rtol: 1e-2,
                atol: 1e-2,
            },
            prog2(DType::F16, vec![one(), n(), one()], |b, x, g| {
                let e = bcast(b, g)?;
                let p = bin(b, BinaryOp::Mul, e, x)?;
                b.reduce(ReduceOp::Sum, p, vec![0, 2], DType::F32)
            }),
        ),
        (
            "reduce-hoist-scalar-mul",
            CLOSE,
            f32p(vec![one()], |b, x, _| {
                let p = b.binary(BinaryOp::Mul, x.into(), Src::Imm(0.125))?;
                red(b, ReduceOp::Sum, p, &[2])
            }),
        ),
        (
            "reduce-hoist-invariant-div",
            CLOSE,
            f32p(vec![m(), n(), one()], |b, x, g| {
                let g = b.unary(UnaryOp::Abs, g)?;
                let g = b.binary(BinaryOp::Add, g.into(), Src::Imm(1.0))?;
                let e = bcast(b, g)?;
                let p = bin(b, BinaryOp::Fdiv, x, e)?;
                red(b, ReduceOp::Sum, p, &[2])
            }),
        ),
        (
            "reduce-hoist-invariant-add",
            Compare::BitExact,
            f32p(vec![m(), one(), k()], |b, x, g| {
                let e = bcast(b, g)?;
                let p = bin(b, BinaryOp::Add, x, e)?;
                red(b, ReduceOp::Max, p, &[1])
            }),
        ),
        // Softmax's stabilisation: min_K (x - max_K x) = min_K x - max_K x.
        (
            "reduce-hoist-invariant-sub",
            Compare::BitExact,
            f32p(vec![one()], |b, x, _| {
                let mx = red(b, ReduceOp::Max, x, &[2])?;
                let mx = b.reshape(mx, vec![m(), n(), one()])?;
                let e = bcast(b, mx)?;
                let p = bin(b, BinaryOp::Sub, x, e)?;
                red(b, ReduceOp::Min, p, &[2])
            }),
        ),
    ]
}

fn negative_cases() -> Vec<(&'static str, Program)> {
    vec![
        // R4: a sum of maxima is not one reduce.
        (
            "reduce-merge",
            f32p(vec![one()], |b, x, _| {
                let y = red(b, ReduceOp::Max, x, &[2])?;
                red(b, ReduceOp::Sum, y, &[1])
            }),
        ),
        // Same op, different accumulation dtypes.
        (
            "reduce-merge",
            f32p(vec![one()], |b, x, _| {
                let y = b.reduce(ReduceOp::Sum, x, vec![2], DType::F16)?;
                red(b, ReduceOp::Sum, y, &[1])
            }),
        ),
        // N may be bound to 1 but is not the constant 1.
        (
            "reduce-of-unit-axes",
            f32p(vec![one()], |b, x, _| red(b, ReduceOp::Sum, x, &[1])),
        ),
        // g varies along the reduced axis K.
        (
            "reduce-hoist-invariant-mul",
            f32p(vec![m(), one(), k()], |b, x, g| {
                let e = bcast(b, g)?;
                let p = bin(b, BinaryOp::Mul, x, e)?;
                red(b, ReduceOp::Sum, p, &[2])
            }),
        ),
        // max(g·x) is not g·max(x) (g may be negative).
        (
            "reduce-hoist-invariant-mul-left",
            f32p(vec![m(), n(), one()], |b, x, g| {
                let e = bcast(b, g)?;
                let p = bin(b, BinaryOp::Mul, e, x)?;
                red(b, ReduceOp::Max, p, &[2])
            }),
        ),
        // The scalar is a tensor operand, not an immediate.
        (
            "reduce-hoist-scalar-mul",
            f32p(vec![m(), n(), k()], |b, x, g| {
                let p = bin(b, BinaryOp::Mul, x, g)?;
                red(b, ReduceOp::Sum, p, &[2])
            }),
        ),
        // N is symbolic and may be bound to 0: Σ_∅ x/g = 0 but (Σ_∅ x)/g is NaN for g = 0.
        (
            "reduce-hoist-invariant-div",
            f32p(vec![m(), one(), k()], |b, x, g| {
                let e = bcast(b, g)?;
                let p = bin(b, BinaryOp::Fdiv, x, e)?;
                red(b, ReduceOp::Sum, p, &[1])
            }),
        ),
        // An infinite immediate: (Σ_∅ x)·inf is NaN where Σ_∅ x·inf is 0.
        (
            "reduce-hoist-scalar-mul",
            f32p(vec![one()], |b, x, _| {
                let p = b.binary(BinaryOp::Mul, x.into(), Src::Imm(f64::INFINITY))?;
                red(b, ReduceOp::Sum, p, &[2])
            }),
        ),
        // sum(g / x) ≠ g / sum(x): only the divisor may be hoisted.
        (
            "reduce-hoist-invariant-div",
            f32p(vec![m(), n(), one()], |b, x, g| {
                let e = bcast(b, g)?;
                let p = bin(b, BinaryOp::Fdiv, e, x)?;
                red(b, ReduceOp::Sum, p, &[2])
            }),
        ),
        // sum(x + g) = sum(x) + |K|·g, not sum(x) + g.
        (
            "reduce-hoist-invariant-add",
            f32p(vec![m(), n(), one()], |b, x, g| {
                let e = bcast(b, g)?;
                let p = bin(b, BinaryOp::Add, x, e)?;
                red(b, ReduceOp::Sum, p, &[2])
            }),
        ),
        // g varies along the reduced axis.
        (
            "reduce-hoist-invariant-sub",
            f32p(vec![one(), one(), k()], |b, x, g| {
                let e = bcast(b, g)?;
                let p = bin(b, BinaryOp::Sub, x, e)?;
                red(b, ReduceOp::Max, p, &[2])
            }),
        ),
        // max does not distribute over +.
        (
            "reduce-distribute-add",
            f32p(vec![m(), n(), k()], |b, x, g| {
                let p = bin(b, BinaryOp::Add, x, g)?;
                red(b, ReduceOp::Max, p, &[2])
            }),
        ),
    ]
}

fn bindings() -> BTreeMap<String, i64> {
    [("M", 3), ("N", 4), ("K", 5)]
        .into_iter()
        .map(|(s, v)| (s.to_string(), v))
        .collect()
}

fn run(p: &Program, how: Compare) -> Outcome {
    check_work(p, &rules(), &bindings(), how, 1.0)
}

fn positive(rule: &str) {
    if rule == "reduce-distribute-add" {
        return distribute_add_is_proved();
    }
    let cases: Vec<_> = positive_cases()
        .into_iter()
        .filter(|c| c.0 == rule)
        .collect();
    assert!(!cases.is_empty(), "no positive case for `{rule}`");
    for (_, how, p) in cases {
        let o = run(&p, how);
        assert_fired(&o.stats, rule);
        assert!(o.stats.saturated(), "{rule}: {:?}", o.stats);
        assert_ne!(
            o.rewritten, o.original,
            "{rule}: nothing extracted differently"
        );
    }
}

/// A sum over unit axes is `x + 0` (so `sum([-0.0])` is `+0.0`, as the reference computes it),
/// not `x`; both are proved equal to the reduce.
#[test]
fn unit_sum_is_x_plus_zero() {
    let p = f32p(vec![m(), one(), k()], |b, _, g| {
        red(b, ReduceOp::Sum, g, &[1])
    });
    let want = f32p(vec![m(), one(), k()], |b, _, g| {
        let z = b.binary(BinaryOp::Add, g.into(), Src::Imm(0.0))?;
        b.reshape(z, vec![m(), k()])
    });
    assert!(proves(&p, &want, &rules()));
    let ins: BTreeMap<String, crate::tensor::Tensor> = [("x", vec![3, 4, 5]), ("g", vec![3, 1, 5])]
        .into_iter()
        .map(|(n, s)| {
            let len = s.iter().product();
            (
                n.to_string(),
                crate::tensor::Tensor::from_f64(DType::F32, s, &vec![-0.0; len]),
            )
        })
        .collect();
    for q in [&p, &want] {
        let y = crate::eval::evaluate(q, &bindings(), &ins).expect("evaluates");
        assert!(y["y"]
            .to_f64()
            .iter()
            .all(|v| v.to_bits() == 0.0f64.to_bits()));
    }
}

/// A sum hoist is `(Σ x)·g + 0`, not `(Σ x)·g`: with `x = +0` and `g = -1` the reference sums
/// `+0 + (-0) = +0`, while `(Σ x)·g` alone is `-0` (which `rsqrt` turns into `-inf`). Both forms
/// are proved equal to the reduce; only the one the rule builds keeps the sign.
#[test]
fn sum_hoist_keeps_positive_zero() {
    let g_shape = vec![m(), n(), one()];
    let p = f32p(g_shape.clone(), |b, x, g| {
        let e = bcast(b, g)?;
        let y = bin(b, BinaryOp::Mul, x, e)?;
        red(b, ReduceOp::Sum, y, &[2])
    });
    fn hoisted(b: &mut Builder, x: NodeId, g: NodeId) -> Result<NodeId, TinyError> {
        let s = red(b, ReduceOp::Sum, x, &[2])?;
        let g = b.reshape(g, vec![m(), n()])?;
        bin(b, BinaryOp::Mul, s, g)
    }
    let want = f32p(g_shape.clone(), |b, x, g| {
        let y = hoisted(b, x, g)?;
        b.binary(BinaryOp::Add, y.into(), Src::Imm(0.0))
    });
    let bare = f32p(g_shape, hoisted);
    assert!(proves(&p, &want, &rules()));
    let ins: BTreeMap<String, crate::tensor::Tensor> =
        [("x", (vec![3, 4, 5], 0.0)), ("g", (vec![3, 4, 1], -1.0))]
            .into_iter()
            .map(|(n, (s, v))| {
                let len = s.iter().product();
                (
                    n.to_string(),
                    crate::tensor::Tensor::from_f64(DType::F32, s, &vec![v; len]),
                )
            })
            .collect();
    let signs = |q: &Program| -> Vec<bool> {
        let y = crate::eval::evaluate(q, &bindings(), &ins).expect("evaluates");
        y["y"]
            .to_f64()
            .iter()
            .map(|v| v.is_sign_negative())
            .collect()
    };
    assert!(signs(&p).iter().all(|neg| !neg), "the reference sum is +0");
    assert!(signs(&want).iter().all(|neg| !neg), "the hoist keeps +0");
    assert!(
        signs(&bare).iter().all(|neg| *neg),
        "without + 0 the hoist gives -0"
    );
}

/// R2 makes more work, so the work cost never extracts it: check the split form is proved equal
/// to the original and evaluates within tolerance of it.
fn distribute_add_is_proved() {
    let p = f32p(vec![m(), n(), k()], |b, x, g| {
        let s = bin(b, BinaryOp::Add, x, g)?;
        red(b, ReduceOp::Sum, s, &[2])
    });
    let want = f32p(vec![m(), n(), k()], |b, x, g| {
        let a = red(b, ReduceOp::Sum, x, &[2])?;
        let c = red(b, ReduceOp::Sum, g, &[2])?;
        bin(b, BinaryOp::Add, a, c)
    });
    let o = run(&p, CLOSE);
    assert_fired(&o.stats, "reduce-distribute-add");
    assert!(proves(&p, &want, &rules()));
    check_sound(&p, &want, &bindings(), &[1, 2, 3], CLOSE).expect("R2 within tolerance");
}

fn negative(rule: &str) {
    let cases: Vec<_> = negative_cases()
        .into_iter()
        .filter(|c| c.0 == rule)
        .collect();
    assert!(!cases.is_empty(), "no negative case for `{rule}`");
    for (_, p) in cases {
        let o = run(&p, CLOSE);
        assert_not_fired(&o.stats, rule);
    }
}

rule_tests! {
    "reduce-merge" => reduce_merge_fires, reduce_merge_near_miss;
    "reduce-of-unit-axes" => reduce_of_unit_axes_fires, reduce_of_unit_axes_near_miss;
    "reduce-hoist-invariant-mul" => hoist_mul_fires, hoist_mul_near_miss;
    "reduce-hoist-invariant-mul-left" => hoist_mul_left_fires, hoist_mul_left_near_miss;
    "reduce-hoist-scalar-mul" => hoist_scalar_mul_fires, hoist_scalar_mul_near_miss;
    "reduce-hoist-invariant-div" => hoist_div_fires, hoist_div_near_miss;
    "reduce-hoist-invariant-add" => hoist_add_fires, hoist_add_near_miss;
    "reduce-hoist-invariant-sub" => hoist_sub_fires, hoist_sub_near_miss;
    "reduce-distribute-add" => distribute_add_fires, distribute_add_near_miss;
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
fn merged_axes_are_mapped_back_to_the_inner_operand() {
    // max over axis 0 of max over axis 1 of [M,N,K]: one reduce over axes [0, 1].
    let o = run(&positive_cases()[1].2, Compare::BitExact);
    let axes: Vec<_> = o
        .rewritten
        .nodes
        .iter()
        .filter_map(|n| match &n.uop {
            UOp::Reduce { axes, .. } => Some(axes.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(axes, vec![vec![0, 1]]);
}

#[test]
fn softmax_reductions_never_merge() {
    // R4: max → sub → exp2 → sum stays two reductions of different ops.
    let p = f32p(vec![one()], |b, x, _| {
        let mx = red(b, ReduceOp::Max, x, &[2])?;
        let mx = b.reshape(mx, vec![m(), n(), one()])?;
        let e = bcast(b, mx)?;
        let d = bin(b, BinaryOp::Sub, x, e)?;
        let ex = b.unary(UnaryOp::Exp2, d)?;
        let s = red(b, ReduceOp::Sum, ex, &[2])?;
        red(b, ReduceOp::Max, s, &[1])
    });
    let o = run(&p, Compare::BitExact);
    assert_not_fired(&o.stats, "reduce-merge");
    let reduces = o
        .rewritten
        .nodes
        .iter()
        .filter(|n| matches!(n.uop, UOp::Reduce { .. }))
        .count();
    assert_eq!(reduces, 3);
}
