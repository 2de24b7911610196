//! Region synthesis on hand-built Tiny programs: every error of `SynthError` (and what it must not
//! reject), and whole-program regions over many shapes — sizes 1 and odd sizes included — checked
//! against the Tiny reference evaluator.

use dlc_egg::eval::evaluate;
use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::egraph::TensorLang;
use dlc_egg::ir::region::program::{
    evaluate_program, verify_program, Buffer, ProgramError, RegionProgram, Step,
};
use dlc_egg::ir::region::{evaluate_region, Materialize, Region};
use dlc_egg::ir::tiny::{BinaryOp, Builder, NodeId, Program, ReduceOp, Src, UnaryOp};
use dlc_egg::rules::testing::random_inputs;
use dlc_egg::synth::{body_from_program, synthesize, SynthArg, SynthError};
use dlc_egg::tensor::Tensor;
use egg::RecExpr;
use std::collections::BTreeMap;

mod synth_common;
use synth_common::*;

fn d(v: &[i64]) -> Vec<Dim> {
    v.iter().map(|x| Dim::int(*x)).collect()
}

/// The whole program (output 0) as one region.
fn whole(p: &Program) -> Result<Region, SynthError> {
    let (body, args) = body_from_program(p, p.outputs[0].node, &|_| false);
    synthesize(
        "whole",
        &body,
        &synth_args(p, &args),
        "OUT",
        Materialize::Gmem,
    )
}

/// Synthesizes the whole program and compares its playback with the evaluator.
fn check_whole(p: &Program, inputs: &BTreeMap<String, Tensor>) -> Region {
    let r = whole(p).unwrap_or_else(|e| panic!("{e}"));
    let want = evaluate_node(p, p.outputs[0].node, inputs);
    let got = evaluate_region(&r, &p.symbols, inputs)
        .unwrap_or_else(|e| panic!("{e}\n{}", r.to_json_string()));
    assert_close("whole", &got["OUT"], &want);
    r
}

fn check_random(p: &Program) -> Region {
    let inputs = random_inputs(p, &BTreeMap::new(), 11).expect("inputs");
    check_whole(p, &inputs)
}

/// `relu(x @ w + bias)` with an fp32 accumulator, in dtype `dt`.
fn gemm(m: i64, k: i64, n: i64, dt: DType) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", dt, d(&[m, k])).expect("x");
    let w = b.input("w", dt, d(&[k, n])).expect("w");
    let bias = b.input("bias", dt, d(&[n])).expect("bias");
    let xe = b.reshape(x, d(&[m, k, 1])).expect("r");
    let xe = b.expand(xe, d(&[m, k, n])).expect("e");
    let we = b.reshape(w, d(&[1, k, n])).expect("r");
    let we = b.expand(we, d(&[m, k, n])).expect("e");
    let xc = b.cast(xe, DType::F32).expect("c");
    let wc = b.cast(we, DType::F32).expect("c");
    let prod = b.binary(BinaryOp::Mul, xc.into(), wc.into()).expect("mul");
    let acc = b
        .reduce(ReduceOp::Sum, prod, vec![1], DType::F32)
        .expect("sum");
    let acc = b.cast(acc, dt).expect("c");
    let be = b.reshape(bias, d(&[1, n])).expect("r");
    let be = b.expand(be, d(&[m, n])).expect("e");
    let y = b.binary(BinaryOp::Add, acc.into(), be.into()).expect("add");
    let y = b.unary(UnaryOp::Relu, y).expect("relu");
    b.output("y", y);
    b.finish()
}

/// Row softmax of `[r, c]` (max-subtracted, exp2-based like the lowering).
fn softmax(r: i64, c: i64) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, d(&[r, c])).expect("x");
    let mx = b
        .reduce(ReduceOp::Max, x, vec![1], DType::F32)
        .expect("max");
    let mx = b.reshape(mx, d(&[r, 1])).expect("r");
    let mx = b.expand(mx, d(&[r, c])).expect("e");
    let s = b.binary(BinaryOp::Sub, x.into(), mx.into()).expect("sub");
    let s = b
        .binary(BinaryOp::Mul, s.into(), Src::Imm(std::f64::consts::LOG2_E))
        .expect("mul");
    let e = b.unary(UnaryOp::Exp2, s).expect("exp2");
    let z = b
        .reduce(ReduceOp::Sum, e, vec![1], DType::F32)
        .expect("sum");
    let z = b.reshape(z, d(&[r, 1])).expect("r");
    let z = b.expand(z, d(&[r, c])).expect("e");
    let y = b.binary(BinaryOp::Fdiv, e.into(), z.into()).expect("div");
    b.output("y", y);
    b.finish()
}

const SIZES: [i64; 5] = [1, 2, 3, 5, 7];

#[test]
fn gemm_over_many_shapes() {
    for (i, m) in SIZES.iter().enumerate() {
        for k in &SIZES[i % 3..] {
            for n in [1, 3, 4] {
                for dt in [DType::F32, DType::F16] {
                    check_random(&gemm(*m, *k, n, dt));
                }
            }
        }
    }
}

#[test]
fn softmax_over_many_shapes() {
    for r in SIZES {
        for c in SIZES {
            let reg = check_random(&softmax(r, c));
            let reduces = reg
                .lets
                .iter()
                .filter(|l| matches!(l.expr, dlc_egg::ir::region::Expr::Reduce(_)))
                .count();
            assert_eq!(reduces, 2, "{}", reg.to_json_string());
        }
    }
}

/// permute → merge (constant reshape) → pad → shrink → flip → relu, and a split back.
fn movement_chain(a: i64, b_: i64, c: i64) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", DType::F16, d(&[a, b_, c])).expect("x");
    let p = b.permute(x, vec![2, 0, 1]).expect("perm");
    let m = b.reshape(p, d(&[c, a * b_])).expect("merge");
    let pd = b.pad(m, vec![(1, 2), (0, 1)], -0.5).expect("pad");
    let sh = b
        .shrink(pd, d(&[1, 0]), d(&[c + 3, a * b_ + 1]), vec![2, 1])
        .expect("shrink");
    let f = b.flip(sh, vec![1]).expect("flip");
    let r = b.unary(UnaryOp::Neg, f).expect("neg");
    let rows = (c + 2 + 1) / 2;
    let s = b.reshape(r, d(&[rows, 1, a * b_ + 1])).expect("split");
    b.output("y", s);
    b.finish()
}

#[test]
fn movement_chains_over_many_shapes() {
    for a in SIZES {
        for b_ in [1, 2, 3] {
            for c in [1, 4, 5] {
                check_random(&movement_chain(a, b_, c));
            }
        }
    }
}

#[test]
fn reduce_over_the_first_axis_keeps_unit_dims() {
    for (r, c) in [(1, 1), (1, 5), (5, 1), (3, 7)] {
        let mut b = Builder::new();
        let x = b.input("x", DType::F32, d(&[r, 1, c])).expect("x");
        let s = b
            .reduce(ReduceOp::Sum, x, vec![0], DType::F32)
            .expect("sum");
        let s = b.unary(UnaryOp::Sqrt, s).expect("sqrt");
        let y = b
            .binary(BinaryOp::Mul, s.into(), Src::Imm(2.0))
            .expect("mul");
        b.output("y", y);
        check_random(&b.finish());
    }
}

#[test]
fn causal_mask_and_gather() {
    // where(range_col <= range_row, x, -inf) and a gather along axis 1.
    let (n, c) = (5i64, 3i64);
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, d(&[n, n])).expect("x");
    let idx = b.input("idx", DType::I32, d(&[n, c])).expect("idx");
    let col = b.range(Dim::int(n)).expect("range");
    let col = b.reshape(col, d(&[1, n])).expect("r");
    let col = b.expand(col, d(&[n, n])).expect("e");
    let row = b.range(Dim::int(n)).expect("range");
    let row = b.reshape(row, d(&[n, 1])).expect("r");
    let row = b.expand(row, d(&[n, n])).expect("e");
    let mask = b
        .binary(BinaryOp::CmpLe, col.into(), row.into())
        .expect("le");
    let w = b.where_(mask, x.into(), Src::Imm(-1.5)).expect("where");
    let g = b.gather(w, idx, 1).expect("gather");
    b.output("y", w);
    let mut p = b.finish();
    let vals: Vec<f64> = (0..n * c).map(|i| ((i * 7) % n) as f64).collect();
    let mut inputs = random_inputs(&p, &BTreeMap::new(), 5).expect("inputs");
    inputs.insert(
        "idx".into(),
        Tensor::from_f64(DType::I32, vec![n as usize, c as usize], &vals),
    );
    let r = check_whole(&p, &inputs);
    assert!(r.to_json_string().contains("\"where\""));
    assert!(r.to_json_string().contains("\"index\""));
    // Gather from a computed value is not one region; from an input it is.
    p.outputs[0].node = g;
    assert!(matches!(whole(&p), Err(SynthError::Unsupported { .. })));
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, d(&[n, n])).expect("x");
    let idx = b.input("idx", DType::I32, d(&[n, c])).expect("idx");
    let g = b.gather(x, idx, 1).expect("gather");
    let y = b.unary(UnaryOp::Abs, g).expect("abs");
    b.output("y", y);
    let q = b.finish();
    let r = check_whole(&q, &inputs);
    assert!(r.to_json_string().contains("\"gather\""));
}

#[test]
fn recompute_second_matmul_over_a_reduced_value() {
    // (x @ w1) @ w2: the second contraction reads the first at a fresh reduce variable.
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, d(&[2, 3])).expect("x");
    let w1 = b.input("w1", DType::F32, d(&[3, 4])).expect("w1");
    let w2 = b.input("w2", DType::F32, d(&[4, 5])).expect("w2");
    let mm = |b: &mut Builder, a: NodeId, w: NodeId, m: i64, k: i64, n: i64| {
        let ae = b.reshape(a, d(&[m, k, 1])).expect("r");
        let ae = b.expand(ae, d(&[m, k, n])).expect("e");
        let we = b.reshape(w, d(&[1, k, n])).expect("r");
        let we = b.expand(we, d(&[m, k, n])).expect("e");
        let p = b.binary(BinaryOp::Mul, ae.into(), we.into()).expect("mul");
        b.reduce(ReduceOp::Sum, p, vec![1], DType::F32)
            .expect("sum")
    };
    let h = mm(&mut b, x, w1, 2, 3, 4);
    let h = b.unary(UnaryOp::Relu, h).expect("relu");
    let y = mm(&mut b, h, w2, 2, 4, 5);
    b.output("y", y);
    let p = b.finish();
    match whole(&p) {
        Err(e @ SynthError::Recompute { .. }) => assert!(e.to_string().contains("recomputed")),
        other => panic!("expected Recompute, got {other:?}"),
    }
    // Cut at the relu: legal, and the second region reads the cut as an input.
    let (body, args) = body_from_program(&p, y, &|id| id == h);
    assert_eq!(args, vec![h, w2]);
    synthesize("mm2", &body, &synth_args(&p, &args), "y", Materialize::Gmem).expect("cut");
}

#[test]
fn multi_env_reduce_is_rejected() {
    // s[m] + s[n] with s = row sums: one reduction needed at two environments.
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, d(&[4, 4])).expect("x");
    let s = b
        .reduce(ReduceOp::Sum, x, vec![1], DType::F32)
        .expect("sum");
    let a = b.reshape(s, d(&[4, 1])).expect("r");
    let a = b.expand(a, d(&[4, 4])).expect("e");
    let c = b.reshape(s, d(&[1, 4])).expect("r");
    let c = b.expand(c, d(&[4, 4])).expect("e");
    let y = b.binary(BinaryOp::Add, a.into(), c.into()).expect("add");
    b.output("y", y);
    assert!(matches!(
        whole(&b.finish()),
        Err(SynthError::MultiEnv { .. })
    ));
}

#[test]
fn reshape_merging_symbolic_dims_is_non_affine() {
    let mut b = Builder::new();
    let mn = Dim::sym("M").mul(&Dim::sym("N"));
    let x = b
        .input("x", DType::F32, vec![Dim::sym("M"), Dim::sym("N")])
        .expect("x");
    let r = b.reshape(x, vec![mn.clone()]).expect("merge");
    let y = b.unary(UnaryOp::Relu, r).expect("relu");
    b.output("y", y);
    assert!(matches!(
        whole(&b.finish()),
        Err(SynthError::NonAffine { .. })
    ));
    // Splitting a symbolic dim is affine.
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, vec![mn]).expect("x");
    let r = b
        .reshape(x, vec![Dim::sym("M"), Dim::sym("N")])
        .expect("split");
    let y = b.unary(UnaryOp::Relu, r).expect("relu");
    b.output("y", y);
    let mut p = b.finish();
    p.symbols = [("M".to_string(), 3), ("N".to_string(), 5)].into();
    let r = check_random(&p);
    assert!(r.to_json_string().contains("\"mul\""));
}

#[test]
fn typing_and_unsupported_errors() {
    let body: RecExpr<TensorLang> = "(relu $0)".parse().expect("body");
    let arg = |n: &str| SynthArg {
        name: n.into(),
        dtype: DType::F32,
        shape: d(&[3]),
    };
    let syn = |args: &[SynthArg], out: &str| synthesize("r", &body, args, out, Materialize::Gmem);
    assert!(matches!(syn(&[], "y"), Err(SynthError::Typing(_))));
    assert!(matches!(syn(&[arg("x")], "x"), Err(SynthError::Typing(_))));
    let two: RecExpr<TensorLang> = "(add $0 $1)".parse().expect("body");
    assert!(matches!(
        synthesize("r", &two, &[arg("x"), arg("x")], "y", Materialize::Gmem),
        Err(SynthError::Typing(_))
    ));
    let r = syn(&[arg("x")], "y").expect("relu");
    assert_eq!(r.lets.len(), 1);
    let input: RecExpr<TensorLang> = "(relu (input @x fp32 [3]))".parse().expect("body");
    assert!(matches!(
        synthesize("r", &input, &[], "y", Materialize::Gmem),
        Err(SynthError::Unsupported { .. })
    ));
}

#[test]
fn program_verifier_errors() {
    let body: RecExpr<TensorLang> = "(relu $0)".parse().expect("body");
    let arg = SynthArg {
        name: "x".into(),
        dtype: DType::F32,
        shape: d(&[3]),
    };
    let r = synthesize("k", &body, &[arg], "y", Materialize::Gmem).expect("relu");
    let buf = |n: &str, s: &[i64]| Buffer {
        name: n.into(),
        dtype: DType::F32,
        shape: d(s),
    };
    let alias = |name: &str, of: &str, s: &[i64]| Step::Alias {
        name: name.into(),
        of: of.into(),
        dtype: DType::F32,
        shape: d(s),
    };
    let prog = |inputs, steps| RegionProgram {
        inputs,
        steps,
        outputs: vec![("out".into(), "z".into())],
        derived: Vec::new(),
    };
    let ok = prog(
        vec![buf("x", &[3])],
        vec![Step::Region(r.clone()), alias("z", "y", &[1, 3])],
    );
    verify_program(&ok).expect("valid");
    let x = Tensor::from_f64(DType::F32, vec![3], &[-1.0, 0.5, 2.0]);
    let out =
        evaluate_program(&ok, &BTreeMap::new(), &[("x".to_string(), x)].into()).expect("runs");
    assert_eq!(out["out"].shape, vec![1, 3]);
    assert_eq!(out["out"].to_f64(), vec![0.0, 0.5, 2.0]);
    let bad = [
        prog(vec![], vec![Step::Region(r.clone())]),
        prog(vec![buf("x", &[4])], vec![Step::Region(r.clone())]),
        prog(
            vec![buf("x", &[3])],
            vec![Step::Region(r.clone()), alias("z", "y", &[2, 2])],
        ),
        prog(
            vec![buf("x", &[3])],
            vec![Step::Region(r.clone()), Step::Region(r.clone())],
        ),
    ];
    let codes: Vec<&str> = bad
        .iter()
        .map(|p| {
            let e: ProgramError = verify_program(p).expect_err("invalid");
            e.to_diagnostic().code
        })
        .collect();
    assert_eq!(codes, ["E1230", "E1232", "E1233", "E1231"]);
}

#[test]
fn single_op_bodies_of_the_builders_run_as_programs() {
    // The same per-op split the example test uses, on the hand-built programs.
    for p in [
        gemm(3, 5, 1, DType::F16),
        softmax(2, 7),
        movement_chain(3, 2, 5),
    ] {
        let (body, args) = body_from_program(&p, p.outputs[0].node, &|_| false);
        let r = synthesize("k", &body, &synth_args(&p, &args), "OUT", Materialize::Gmem)
            .expect("whole");
        let rp = RegionProgram {
            inputs: p
                .inputs
                .iter()
                .map(|i| Buffer {
                    name: i.tensor.clone(),
                    dtype: p.node(i.node).dtype,
                    shape: p.node(i.node).shape.clone(),
                })
                .collect(),
            steps: vec![Step::Region(r)],
            outputs: vec![(p.outputs[0].tensor.clone(), "OUT".into())],
            derived: Vec::new(),
        };
        let inputs = random_inputs(&p, &BTreeMap::new(), 2).expect("inputs");
        let want = evaluate(&p, &BTreeMap::new(), &inputs).expect("eval");
        let got = evaluate_program(&rp, &p.symbols, &inputs).expect("program");
        for (k, w) in &want {
            assert_close(k, &got[k], w);
        }
    }
}

#[test]
fn tiny_read_becomes_a_guarded_read() {
    use dlc_egg::ir::axis::{AccessMap, AxisExpr, CmpOp, Pred};
    // out[i] = i >= 1 ? x[2i - 1] : 0.25, over [4]; then exp2.
    let mut b = Builder::new();
    let x = b.input("x", DType::F16, d(&[7])).expect("x");
    let i0 = || AxisExpr::Name("i0".into());
    let access = AccessMap {
        shape: d(&[4]),
        index: vec![AxisExpr::Add(vec![
            AxisExpr::Mul(Box::new(AxisExpr::Const(2)), Box::new(i0())),
            AxisExpr::Const(-1),
        ])],
        guard: Some(Pred::Cmp(CmpOp::Ge, i0(), AxisExpr::Const(1))),
        fill: 0.25.into(),
    };
    let r = b.read(x, access).expect("read");
    let y = b.unary(UnaryOp::Exp2, r).expect("exp2");
    b.output("y", y);
    let reg = check_random(&b.finish());
    assert!(reg.to_json_string().contains("\"select\""));
}
