//! Per-rule tests of the epilogue cast-sinking rules: a positive case (the rule fires and the
//! program extracted with fp16 arithmetic priced 4× evaluates like the original) and a near-miss
//! for every rule, and the seed's gemm_bias_relu epilogue.

use super::{rules, RULE_NAMES};
use crate::ir::dim::{Dim, Shape};
use crate::ir::dtype::DType;
use crate::ir::egraph::{add_program, TensorGraph, TensorLang};
use crate::ir::tiny::{BinaryOp, Builder, NodeId, Program, Src, TinyError, UOp, UnaryOp};
use crate::rules::testing::{assert_fired, assert_not_fired, check_work, Compare, Outcome};
use crate::rules::{run_phase, Budget};
use std::collections::BTreeMap;

type Body = fn(&mut Builder, NodeId, NodeId) -> Result<NodeId, TinyError>;

fn shape() -> Shape {
    vec![Dim::sym("M"), Dim::int(3)]
}

/// `y = f(x, h)` for `x: [M,3]` of dtype `dx` and `h: [M,3]` of dtype `dh`.
fn prog(dx: DType, dh: DType, f: Body) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", dx, shape()).expect("input");
    let h = b.input("h", dh, shape()).expect("input");
    let y = f(&mut b, x, h).expect("well-typed test program");
    b.output("y", y);
    b.finish()
}

fn f32_f16(f: Body) -> Program {
    prog(DType::F32, DType::F16, f)
}

fn half(b: &mut Builder, x: NodeId) -> Result<NodeId, TinyError> {
    b.cast(x, DType::F16)
}

fn bin(b: &mut Builder, op: BinaryOp, x: NodeId, y: NodeId) -> Result<NodeId, TinyError> {
    b.binary(op, x.into(), y.into())
}

/// One fp16 rounding moved: results agree to about one fp16 ulp.
const HALF_ULP: Compare = Compare::Close {
    rtol: 2e-3,
    atol: 1e-3,
};

fn positive_cases() -> Vec<(&'static str, Compare, Program)> {
    vec![
        (
            "cast-sink-unary",
            Compare::BitExact,
            f32_f16(|b, x, _| {
                let c = half(b, x)?;
                b.unary(UnaryOp::Relu, c)
            }),
        ),
        (
            "cast-sink-unary",
            Compare::BitExact,
            prog(DType::F32, DType::BF16, |b, x, _| {
                let c = b.cast(x, DType::BF16)?;
                let c = b.unary(UnaryOp::Neg, c)?;
                b.unary(UnaryOp::Abs, c)
            }),
        ),
        (
            "cast-sink-unary-approx",
            HALF_ULP,
            f32_f16(|b, x, _| {
                let c = half(b, x)?;
                b.unary(UnaryOp::Exp2, c)
            }),
        ),
        (
            "cast-sink-binary",
            HALF_ULP,
            f32_f16(|b, x, h| {
                let c = half(b, x)?;
                bin(b, BinaryOp::Add, c, h)
            }),
        ),
        // max with an fp16 operand commutes with the rounding: exact.
        (
            "cast-sink-binary",
            Compare::BitExact,
            f32_f16(|b, x, h| {
                let c = half(b, x)?;
                bin(b, BinaryOp::Max, c, h)
            }),
        ),
        // An immediate counts as its fp16 value.
        (
            "cast-sink-binary",
            HALF_ULP,
            f32_f16(|b, x, _| {
                let c = half(b, x)?;
                b.binary(BinaryOp::Mul, c.into(), Src::Imm(0.1))
            }),
        ),
        (
            "cast-sink-binary-right",
            HALF_ULP,
            f32_f16(|b, x, h| {
                let c = half(b, x)?;
                bin(b, BinaryOp::Sub, h, c)
            }),
        ),
        (
            "where-cast-sink",
            Compare::BitExact,
            f32_f16(|b, x, h| {
                let c = half(b, x)?;
                let cond = b.binary(BinaryOp::CmpLt, h.into(), Src::Imm(0.0))?;
                b.where_(cond, h.into(), c.into())
            }),
        ),
    ]
}

fn negative_cases() -> Vec<(&'static str, Program)> {
    vec![
        // A widening cast (fp16 → fp32) is not an epilogue cast.
        (
            "cast-sink-unary",
            prog(DType::F16, DType::F16, |b, x, _| {
                let c = b.cast(x, DType::F32)?;
                b.unary(UnaryOp::Relu, c)
            }),
        ),
        // The cast's source is bf16, not the fp32 accumulator.
        (
            "cast-sink-unary-approx",
            prog(DType::BF16, DType::F16, |b, x, _| {
                let c = half(b, x)?;
                b.unary(UnaryOp::Sqrt, c)
            }),
        ),
        // The cast is the right operand: only the mirrored rule applies.
        (
            "cast-sink-binary",
            f32_f16(|b, x, h| {
                let c = half(b, x)?;
                bin(b, BinaryOp::Add, h, c)
            }),
        ),
        // The cast is the left operand, and pow is not an epilogue op either.
        (
            "cast-sink-binary-right",
            f32_f16(|b, x, h| {
                let c = half(b, x)?;
                let p = bin(b, BinaryOp::Pow, h, c)?;
                bin(b, BinaryOp::Mul, c, p)
            }),
        ),
        // Both branches are fp16 values, neither a cast of an fp32 value.
        (
            "where-cast-sink",
            prog(DType::BF16, DType::F16, |b, x, h| {
                let c = half(b, x)?;
                let cond = b.binary(BinaryOp::CmpLt, h.into(), Src::Imm(0.0))?;
                b.where_(cond, h.into(), c.into())
            }),
        ),
    ]
}

fn bindings() -> BTreeMap<String, i64> {
    [("M".to_string(), 4)].into()
}

fn run(p: &Program, how: Compare) -> Outcome {
    check_work(p, &rules(), &bindings(), how, 4.0)
}

fn positive(rule: &str) {
    let cases: Vec<_> = positive_cases()
        .into_iter()
        .filter(|c| c.0 == rule)
        .collect();
    assert!(!cases.is_empty(), "no positive case for `{rule}`");
    for (_, how, p) in cases {
        let o = run(&p, how);
        assert_fired(&o.stats, rule);
        assert!(o.stats.saturated(), "{rule}: {:?}", o.stats);
        // The extracted program ends in the one narrowing cast.
        let root = o.rewritten.outputs[0].node;
        assert!(
            matches!(o.rewritten.node(root).uop, UOp::Cast),
            "{rule}: {:#?}",
            o.rewritten
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
        let o = run(&p, HALF_ULP);
        assert_not_fired(&o.stats, rule);
    }
}

rule_tests! {
    "cast-sink-unary" => cast_sink_unary_fires, cast_sink_unary_near_miss;
    "cast-sink-unary-approx" => cast_sink_unary_approx_fires, cast_sink_unary_approx_near_miss;
    "cast-sink-binary" => cast_sink_binary_fires, cast_sink_binary_near_miss;
    "cast-sink-binary-right" => cast_sink_binary_right_fires, cast_sink_binary_right_near_miss;
    "where-cast-sink" => where_cast_sink_fires, where_cast_sink_near_miss;
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
fn gemm_bias_relu_epilogue_runs_on_the_fp32_accumulator() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gemm_bias_relu.json");
    let g = crate::ir::frontend::load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    let p = crate::lower::lower(&g).unwrap_or_else(|d| panic!("{d}"));
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, &p);
    let (eg, stats) = run_phase(eg, "epilogue", &rules(), &Budget::default());
    assert!(stats.saturated(), "{stats:?}");
    let root = eg.find(class[p.outputs[0].node.index()]);
    let want: egg::Pattern<TensorLang> =
        "(cast (relu (add (reduce sum ?k fp32 ?body) (cast ?bias fp32))) fp16)"
            .parse()
            .expect("pattern");
    assert!(
        egg::Searcher::search_eclass(&want, &eg, root).is_some(),
        "applied: {:?}",
        stats.applied
    );
    let o = check_work(&p, &rules(), &p.symbols, HALF_ULP, 4.0);
    let root = o.rewritten.outputs[0].node;
    assert!(matches!(o.rewritten.node(root).uop, UOp::Cast));
}
