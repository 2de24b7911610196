//! Unit tests of synthesis details: value kinds (a CAST to fp32 of an i32 value stays, integral
//! fp32 constants compute in fp32) and slices whose start is clamped against a symbolic size.
//! Each region is played back against the Tiny reference evaluator (an integration test, so
//! that `ir` does not depend on `eval`: no module cycle, issue 20).

use dlc_egg::eval::evaluate;
use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::region::{evaluate_region, Materialize, Region};
use dlc_egg::ir::tiny::{BinaryOp, Builder, NodeId, Program, Src, TinyError};
use dlc_egg::synth::{body_from_program, synthesize, SynthArg};
use dlc_egg::tensor::Tensor;
use std::collections::BTreeMap;

/// The whole program (one output) as one region, inputs named as the program's.
fn whole(p: &Program) -> Region {
    let root = p.outputs[0].node;
    let (body, ins) = body_from_program(p, root, &|_| false);
    let args: Vec<SynthArg> = ins
        .iter()
        .map(|n| {
            let node = p.node(*n);
            let name = p
                .inputs
                .iter()
                .find(|i| i.node == *n)
                .map(|i| i.tensor.clone())
                .unwrap_or_default();
            SynthArg {
                name,
                dtype: node.dtype,
                shape: node.shape.clone(),
            }
        })
        .collect();
    synthesize("t", &body, &args, "y", Materialize::Gmem).unwrap_or_else(|e| panic!("{e}"))
}

/// Region playback and the reference evaluator agree exactly on `x`.
fn agree(p: &Program, x: Tensor, b: &[(&str, i64)]) -> Vec<f64> {
    let b: BTreeMap<String, i64> = b.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let ins: BTreeMap<String, Tensor> = [("x".to_string(), x)].into();
    let want = evaluate(p, &b, &ins).unwrap_or_else(|d| panic!("{d}"));
    let r = whole(p);
    let got = evaluate_region(&r, &b, &ins).unwrap_or_else(|d| panic!("{d}"));
    let (g, w) = (got["y"].to_f64(), want["y"].to_f64());
    assert_eq!(g, w, "{}", r.to_json_string());
    g
}

fn prog(
    dt: DType,
    shape: Vec<Dim>,
    f: impl Fn(&mut Builder, NodeId) -> Result<NodeId, TinyError>,
) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", dt, shape).expect("input");
    let y = f(&mut b, x).expect("well-typed");
    b.output("y", y);
    b.finish()
}

#[test]
fn a_cast_of_i32_to_fp32_is_kept() {
    // fp32(x)·fp32(x) rounds to fp32; without the cast the product would be an exact i32 one.
    let p = prog(DType::I32, vec![Dim::int(2)], |b, x| {
        let f = b.cast(x, DType::F32)?;
        b.binary(BinaryOp::Mul, f.into(), f.into())
    });
    let x = Tensor::from_f64(DType::I32, vec![2], &[65537.0, 3.0]);
    assert_eq!(agree(&p, x, &[]), [4295098368.0, 9.0]);
    assert!(whole(&p).to_json_string().contains("\"cast\""));
}

#[test]
fn integral_fp32_constants_compute_in_fp32() {
    // where(x, 65537.0, 0.0) is an fp32 value of two integral constants: squared in fp32.
    let p = prog(DType::Bool, vec![Dim::int(2)], |b, x| {
        let w = b.where_(x, Src::Imm(65537.0), Src::Imm(0.0))?;
        b.binary(BinaryOp::Mul, w.into(), w.into())
    });
    let x = Tensor::from_f64(DType::Bool, vec![2], &[1.0, 0.0]);
    assert_eq!(agree(&p, x, &[]), [4295098368.0, 0.0]);
}

#[test]
fn i32_ops_stay_exact() {
    // x + 0 and -1·x on i32::MAX (a concat's padded add; a negation by a scalar).
    let p = prog(DType::I32, vec![Dim::int(2)], |b, x| {
        let s = b.binary(BinaryOp::Add, x.into(), Src::Imm(0.0))?;
        b.binary(BinaryOp::Mul, Src::Imm(-1.0), s.into())
    });
    let x = Tensor::from_f64(DType::I32, vec![2], &[i32::MAX as f64, 16_777_217.0]);
    assert_eq!(agree(&p, x, &[]), [-(i32::MAX as f64), -16_777_217.0]);
}

#[test]
fn a_start_clamped_to_a_symbolic_size_is_a_min_offset() {
    // x[min(2, S):] of an axis of size S.
    let s = Dim::sym("S");
    let lo = Dim::int(2).min_of(&s);
    let p = prog(DType::F32, vec![s.clone()], |b, x| {
        b.shrink(x, vec![lo.clone()], vec![s.clone()], vec![1])
    });
    assert!(whole(&p).to_json_string().contains("\"min\""));
    let x = Tensor::from_f64(DType::F32, vec![4], &[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(agree(&p, x, &[("S", 4)]), [3.0, 4.0]);
    let x = Tensor::from_f64(DType::F32, vec![1], &[1.0]);
    assert!(agree(&p, x, &[("S", 1)]).is_empty());
}
