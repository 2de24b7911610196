//! `Pow` of an integer base by an integer exponent tensor, exact in i32.

use super::import::{unsupported, Importer, NResult, Opnd};
use super::proto::NodeProto;
use super::value::{et, CTensor, TInfo};
use crate::ir::dtype::DType;

/// Value bits of a non-negative i32 exponent.
const EXP_BITS: usize = 31;

/// `x^e` for i32 tensors by square-and-multiply over the 31 value bits of `|e|` (bit `b` is
/// `h - 2·(h/2)` of `h = |e| / 2^b`): products wrap modulo 2^32 like numpy's. A negative
/// exponent gives `trunc(x^e)` as onnxruntime does: `x^|e|` where `|x| = 1`, else 0. A float
/// exponent is refused: an i32 base converted to f32 is inexact past 2^24, and ONNX truncates a
/// double-precision power that graph.json cannot compute.
pub(super) fn int_pow(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    ops: &[Opnd],
    out: &str,
) -> NResult<TInfo> {
    // An integer constant exponent (a scalar operand) as a one-element i32 tensor.
    let int_const = match (ops.get(1), node.input.get(1)) {
        (Some(Opnd::S(_)), Some(name)) => imp
            .konst(name)?
            .filter(|c| matches!(c.elem, et::INT32 | et::INT64) && c.numel() == 1),
        _ => None,
    };
    let (x, e) =
        match ops {
            [Opnd::T(x), Opnd::T(e)] if x.dtype == DType::I32 && e.dtype == DType::I32 => {
                (x.clone(), e.clone())
            }
            [Opnd::T(x), Opnd::S(v)] if x.dtype == DType::I32 && int_const.is_some() => {
                let name = imp.fresh(&format!("{out}_exponent"));
                let e = imp.materialize(&name, &CTensor::scalar(et::INT32, *v))?;
                (x.clone(), e)
            }
            _ => return Err(unsupported(
                "Pow of an integer base by a float exponent: ONNX truncates a double-precision \
                 power (graph.json's float pow is single precision, and an i32 base past 2^24 \
                 is inexact in float32), so no exact form",
            )),
        };
    let mut h = imp.ew(node, "abs", &[Opnd::T(e.clone())], out)?;
    let mut p = x.clone();
    let mut r: Option<TInfo> = None;
    for b in 0..EXP_BITS {
        let half = imp.ew(node, "div", &[Opnd::T(h.clone()), Opnd::S(2.0)], out)?;
        let twice = imp.ew(node, "mul", &[Opnd::T(half.clone()), Opnd::S(2.0)], out)?;
        let bit = imp.ew(node, "sub", &[Opnd::T(h), Opnd::T(twice)], out)?;
        let set = imp.ew(node, "ne", &[Opnd::T(bit), Opnd::S(0.0)], out)?;
        r = Some(match r {
            // First bit: p where set, else 1.
            None => imp.ew(
                node,
                "where",
                &[Opnd::T(set), Opnd::T(p.clone()), Opnd::S(1.0)],
                out,
            )?,
            Some(r) => {
                let rp = imp.ew(node, "mul", &[Opnd::T(r.clone()), Opnd::T(p.clone())], out)?;
                imp.ew(node, "where", &[Opnd::T(set), Opnd::T(rp), Opnd::T(r)], out)?
            }
        });
        if b + 1 < EXP_BITS {
            p = imp.ew(node, "mul", &[Opnd::T(p.clone()), Opnd::T(p)], out)?;
        }
        h = half;
    }
    let r = r.ok_or_else(|| unsupported("Pow with no exponent bits"))?;
    let ax = imp.ew(node, "abs", &[Opnd::T(x)], out)?;
    let unit = imp.ew(node, "eq", &[Opnd::T(ax), Opnd::S(1.0)], out)?;
    let neg = imp.ew(
        node,
        "where",
        &[Opnd::T(unit), Opnd::T(r.clone()), Opnd::S(0.0)],
        out,
    )?;
    let eneg = imp.ew(node, "lt", &[Opnd::T(e), Opnd::S(0.0)], out)?;
    imp.ew(
        node,
        "where",
        &[Opnd::T(eneg), Opnd::T(neg), Opnd::T(r)],
        out,
    )
}
