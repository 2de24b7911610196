//! The srnf phase end to end (per-rule tests live in `src/rules/srnf_tests.rs`): soundness on
//! random nested reductions of hoistable bodies (proptest), and every built-in phase saturating on
//! every example and on the transformer encoder within its default budget.

#[path = "../bench/common/bench_graphs.rs"]
mod bench_graphs;
mod common;

use bench_graphs::{transformer_encoder, EncoderConfig};
use common::SEED_EXAMPLES;
use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::egraph::{add_program, TensorGraph};
use dlc_egg::ir::tiny::{BinaryOp, Builder, Program, ReduceOp, Src, UnaryOp};
use dlc_egg::rules::testing::{check_work, Compare};
use dlc_egg::rules::{all_phases, run_phase, srnf, Budget};
use dlc_egg::{ir::frontend, lower};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn dims(v: &[i64]) -> Vec<Dim> {
    v.iter().map(|x| Dim::int(*x)).collect()
}

const OPS: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min];
const BINS: [BinaryOp; 4] = [BinaryOp::Mul, BinaryOp::Add, BinaryOp::Sub, BinaryOp::Fdiv];

/// `y = reduce(op2, k2, reduce(op1, k1, x ∘ expand(g)))`: `g` has size 1 on the axes in
/// `ones` (a bit mask); the divisor of FDIV is kept away from zero.
fn nested(
    shape: &[i64],
    ones: u8,
    bin: usize,
    left: bool,
    op1: usize,
    mask1: u8,
    op2: Option<(usize, u8)>,
) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, dims(shape)).expect("input");
    let gs: Vec<i64> = shape
        .iter()
        .enumerate()
        .map(|(i, d)| if ones >> i & 1 == 1 { 1 } else { *d })
        .collect();
    let g = b.input("g", DType::F32, dims(&gs)).expect("input");
    let bin = BINS[bin % BINS.len()];
    let g = if bin == BinaryOp::Fdiv {
        let a = b.unary(UnaryOp::Abs, g).expect("abs");
        b.binary(BinaryOp::Add, a.into(), Src::Imm(1.0))
            .expect("add")
    } else {
        g
    };
    let e = b.expand(g, dims(shape)).expect("expand");
    let (l, r) = if left && bin != BinaryOp::Fdiv {
        (e, x)
    } else {
        (x, e)
    };
    let body = b.binary(bin, l.into(), r.into()).expect("binary");
    let rank = shape.len();
    let axes = |mask: u8, rank: usize| -> Vec<usize> {
        let v: Vec<usize> = (0..rank).filter(|a| mask >> a & 1 == 1).collect();
        if v.is_empty() {
            vec![rank - 1]
        } else {
            v
        }
    };
    let k1 = axes(mask1, rank);
    let mut y = b
        .reduce(OPS[op1 % 3], body, k1.clone(), DType::F32)
        .expect("reduce");
    if let Some((op2, mask2)) = op2 {
        let left = rank - k1.len();
        if left > 0 {
            y = b
                .reduce(OPS[op2 % 3], y, axes(mask2, left), DType::F32)
                .expect("reduce");
        }
    }
    b.output("y", y);
    b.finish()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn random_nested_reductions_keep_their_outputs(
        shape in prop::collection::vec(1i64..=4, 1..=4),
        ones in any::<u8>(),
        bin in 0usize..4,
        left in any::<bool>(),
        op1 in 0usize..3,
        mask1 in any::<u8>(),
        op2 in prop::option::of((0usize..3, any::<u8>())),
    ) {
        let p = nested(&shape, ones, bin, left, op1, mask1, op2);
        let how = Compare::Close { rtol: 1e-5, atol: 1e-5 };
        let o = check_work(&p, &srnf::rules(), &BTreeMap::new(), how, 1.0);
        prop_assert!(o.stats.saturated(), "{:?}", o.stats);
    }
}

fn example(name: &str) -> Program {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(format!("{name}.json"));
    let g = frontend::load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    lower::lower(&g).unwrap_or_else(|d| panic!("{d}"))
}

fn encoder() -> Program {
    let doc = transformer_encoder(&EncoderConfig::bert_base(1));
    let g = frontend::load_str(&doc.to_string(), "encoder.json").unwrap_or_else(|d| panic!("{d}"));
    lower::lower(&g).unwrap_or_else(|d| panic!("{d}"))
}

/// Runs every built-in phase in order; each must stop by saturation within its default budget.
fn all_phases_saturate(name: &str, p: &Program) -> BTreeMap<String, usize> {
    let mut eg = TensorGraph::default();
    add_program(&mut eg, p);
    let budget = Budget::default();
    let mut fired = BTreeMap::new();
    for (phase, rules) in all_phases() {
        let (next, stats) = run_phase(eg, phase, &rules, &budget);
        println!(
            "{name}/{phase}: {} -> {} e-nodes, {} iterations, {}; applied {:?}",
            stats.egraph_nodes_before,
            stats.egraph_nodes,
            stats.iterations,
            stats.stop_reason,
            stats.applied
        );
        assert!(stats.saturated(), "{name}/{phase}: {stats:?}");
        for (r, n) in stats.applied {
            *fired.entry(r).or_insert(0) += n;
        }
        eg = next;
    }
    fired
}

#[test]
fn every_phase_saturates_on_every_example() {
    for name in SEED_EXAMPLES {
        all_phases_saturate(name, &example(name));
    }
}

#[test]
fn every_phase_saturates_on_the_transformer_encoder() {
    let fired = all_phases_saturate("encoder", &encoder());
    // The encoder's epilogues (bias adds after fp16 casts of accumulators) get sunk casts.
    assert!(fired.contains_key("cast-sink-binary"), "{fired:?}");
}
