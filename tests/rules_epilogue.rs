//! The epilogue phase on random post-reduce elementwise chains (per-rule tests live in
//! `src/rules/epilogue_tests.rs`): a fp32 value is cast to fp16 or bf16, then unary, binary (with
//! a narrow tensor or an immediate, on either side) and WHERE ops follow; the extracted program,
//! with narrow arithmetic priced 4×, agrees with the original within a few narrow ulps.

use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::tiny::{BinaryOp, Builder, Program, Src, UnaryOp};
use dlc_egg::rules::epilogue;
use dlc_egg::rules::testing::{check_work, Compare};
use proptest::prelude::*;
use std::collections::BTreeMap;

const UNARY: [UnaryOp; 5] = [
    UnaryOp::Relu,
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Exp2,
    UnaryOp::Erf,
];
const BINARY: [BinaryOp; 5] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Max,
    BinaryOp::Min,
];

fn chain(bf16: bool, ops: &[(u8, u8, bool)]) -> Program {
    let lo = if bf16 { DType::BF16 } else { DType::F16 };
    let shape = vec![Dim::int(4), Dim::int(3)];
    let mut b = Builder::new();
    let x = b.input("acc", DType::F32, shape.clone()).expect("input");
    let h = b.input("h", lo, shape).expect("input");
    let mut y = b.cast(x, lo).expect("cast");
    for (kind, which, flip) in ops {
        y = match kind % 4 {
            0 => b
                .unary(UNARY[*which as usize % UNARY.len()], y)
                .expect("unary"),
            1 | 2 => {
                let op = BINARY[*which as usize % BINARY.len()];
                let other = if *kind == 1 {
                    Src::Node(h)
                } else {
                    Src::Imm(0.375)
                };
                let (l, r) = if *flip {
                    (other, y.into())
                } else {
                    (y.into(), other)
                };
                b.binary(op, l, r).expect("binary")
            }
            _ => {
                let c = b
                    .binary(BinaryOp::CmpLt, h.into(), Src::Imm(0.0))
                    .expect("cmp");
                let (l, r) = if *flip {
                    (h.into(), y.into())
                } else {
                    (y.into(), h.into())
                };
                b.where_(c, l, r).expect("where")
            }
        };
    }
    b.output("y", y);
    b.finish()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn random_epilogues_keep_their_outputs(
        bf16 in any::<bool>(),
        ops in prop::collection::vec((any::<u8>(), any::<u8>(), any::<bool>()), 1..5),
    ) {
        let p = chain(bf16, &ops);
        let how = Compare::Close { rtol: 3e-2, atol: 3e-2 };
        let o = check_work(&p, &epilogue::rules(), &BTreeMap::new(), how, 4.0);
        prop_assert!(o.stats.saturated(), "{:?}", o.stats);
    }
}
