//! `Mod` with `fmod=1` of floating-point tensors, exact: C's `fmod(x, y)` (the remainder of the
//! quotient truncated toward zero, with the sign of `x`) by binary long division on `|x|`.
//!
//! graph.json has no `trunc`, and `x − trunc(x / y) · y` is not exact in floating point (the
//! quotient rounds, and `q · y` needs up to twice the mantissa bits). Long division is: with
//! `b_k = |y| · 2^k` (exact: a power-of-two scaling, or ∞), from the largest `k` down to 0,
//! `r ← r − b_k` where `r ≥ b_k`. Every such step has `b_k ≤ r < 2 · b_k` (the larger steps
//! already ran), so the subtraction is exact by Sterbenz's lemma, and the final `r < |y|` is
//! `fmod(|x|, |y|)` exactly. `k` runs over the whole exponent range of the dtype (277 steps for
//! float32, 261 for bfloat16, 40 for float16) since the quotient is not known at import.
//! `fmod(x, 0)`, `fmod(±∞, y)` and a NaN `y` are NaN; `fmod(x, ±∞) = x`. A zero result has
//! the sign `+` (C gives `x`'s sign; the two zeros compare equal).

use super::import::{unsupported, Importer, NResult, Opnd};
use super::proto::NodeProto;
use super::value::{et, CTensor, TInfo};
use crate::ir::dtype::DType;

/// `(steps, largest finite value)` of a float dtype: `steps` covers every quotient
/// `|x| / |y|` < 2^(emax + 1 − emin_subnormal).
fn range(dtype: DType) -> Option<(i32, f64)> {
    match dtype {
        DType::F32 => Some((128 + 149, f64::from(f32::MAX))),
        DType::BF16 => Some((128 + 133, f64::from(half::bf16::MAX.to_f32()))),
        DType::F16 => Some((16 + 24, f64::from(half::f16::MAX.to_f32()))),
        _ => None,
    }
}

/// `fmod(a, b)` of float operands (`ops` = `[a, b]`, at least one a tensor of `dtype`).
pub(super) fn float_fmod(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    ops: &[Opnd],
    dtype: DType,
    out: &str,
) -> NResult<TInfo> {
    let (steps, max) = range(dtype)
        .ok_or_else(|| unsupported(format!("Mod of {dtype} tensors")))?;
    let abs = |imp: &mut Importer<'_>, o: &Opnd| -> NResult<Opnd> {
        Ok(match o {
            Opnd::T(t) => Opnd::T(imp.ew(node, "abs", &[Opnd::T(t.clone())], out)?),
            Opnd::S(v) => Opnd::S(v.abs()),
        })
    };
    let ax = abs(imp, &ops[0])?;
    let ay = abs(imp, &ops[1])?;
    // b_k = |y| · 2^k for k in 0..steps (a constant divisor: the finite ones at import).
    let mut b: Vec<Opnd> = vec![ay.clone()];
    for _ in 1..steps {
        let next = match b.last() {
            Some(Opnd::S(v)) if v * 2.0 <= max => Opnd::S(v * 2.0),
            Some(Opnd::S(_)) => break,
            Some(t) => Opnd::T(imp.ew(node, "mul", &[t.clone(), Opnd::S(2.0)], out)?),
            None => break,
        };
        b.push(next);
    }
    let mut r = ax.clone();
    for bk in b.iter().rev() {
        let ge = imp.ew(node, "ge", &[r.clone(), bk.clone()], out)?;
        let d = imp.ew(node, "sub", &[r.clone(), bk.clone()], out)?;
        r = Opnd::T(imp.ew(node, "where", &[Opnd::T(ge), Opnd::T(d), r], out)?);
    }
    let neg_r = imp.ew(node, "neg", &[r.clone()], out)?;
    let x_neg = imp.ew(node, "lt", &[ops[0].clone(), Opnd::S(0.0)], out)?;
    let signed = imp.ew(node, "where", &[Opnd::T(x_neg), Opnd::T(neg_r), r], out)?;
    // NaN where y = 0, y is NaN or x = ±∞.
    let mut bad: Vec<TInfo> = Vec::new();
    if let Opnd::T(_) = &ops[0] {
        bad.push(imp.ew(node, "gt", &[ax, Opnd::S(max)], out)?);
    }
    match &ops[1] {
        Opnd::T(y) => {
            bad.push(imp.ew(node, "eq", &[ay, Opnd::S(0.0)], out)?);
            let y = Opnd::T(y.clone());
            bad.push(imp.ew(node, "ne", &[y.clone(), y], out)?);
        }
        Opnd::S(v) if *v == 0.0 => {
            return Err(unsupported("Mod by a constant zero (NaN everywhere)"));
        }
        Opnd::S(_) => {}
    }
    let Some(mut any) = bad.pop() else {
        return Ok(signed);
    };
    for m in bad {
        any = imp.ew(node, "where", &[Opnd::T(m.clone()), Opnd::T(m), Opnd::T(any)], out)?;
    }
    let elem = match dtype {
        DType::F16 => et::FLOAT16,
        DType::BF16 => et::BFLOAT16,
        _ => et::FLOAT,
    };
    let name = imp.fresh(&format!("{out}_nan"));
    let nan = imp.materialize(&name, &CTensor::scalar(elem, f64::NAN))?;
    imp.ew(
        node,
        "where",
        &[Opnd::T(any), Opnd::T(nan), Opnd::T(signed)],
        out,
    )
}
