//! `Elementwise`: unary, binary and `where`, with numpy broadcasting and scalar constants.

use super::{broadcast, Ctx, In, Inferred};
use crate::diag::codes;
use crate::diag::Diagnostic;
use crate::ir::dim::Shape;
use crate::ir::dtype::DType;
use crate::ir::frontend::{EwFn, Op, TensorInfo};

/// Functions only defined on floating-point values. `pow` is among them: Tiny IR's POW is
/// float-only and an exact integer power has no lowering, so i32 operands must be Cast first.
fn float_only(f: EwFn) -> bool {
    use EwFn::*;
    matches!(
        f,
        Exp | Exp2 | Log | Sqrt | Rsqrt | Recip | Sigmoid | Tanh | Silu | Gelu | GeluTanh | Pow
    )
}

/// Arithmetic functions meaningless on `bool`.
fn not_bool(f: EwFn) -> bool {
    use EwFn::*;
    matches!(f, Neg | Abs | Relu | Add | Sub | Mul | Div | Pow)
}

/// The common dtype of the tensor operands among `idx`; `None` when all are scalars.
fn operand_dtype(cx: &Ctx, idx: &[usize]) -> Result<Option<DType>, Diagnostic> {
    let tensors: Vec<usize> = idx
        .iter()
        .copied()
        .filter(|i| matches!(cx.ins.get(*i), Some(In::Tensor(..))))
        .collect();
    if tensors.is_empty() {
        return Ok(None);
    }
    cx.same_dtype(&tensors).map(Some)
}

/// Infers an Elementwise node.
pub(super) fn elementwise(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    let Some(func) = cx.node.attrs.ew_fn() else {
        return Err(cx.err(
            codes::INVALID_FIELD,
            "Elementwise needs the attribute `fn`",
            "add `\"fn\"` (e.g. \"add\", \"relu\")",
        ));
    };
    let arity = func.arity();
    let operands = match arity {
        1 => "one operand".to_string(),
        2 => "two operands".to_string(),
        _ => "cond, a, b".to_string(),
    };
    cx.count(arity, arity, &format!("`{}` takes {operands}", func.name()))?;
    let dtype = if func == EwFn::Where {
        if let Some(In::Tensor(name, t)) = cx.ins.first() {
            if t.dtype != DType::Bool {
                return Err(cx
                    .err(
                        codes::DTYPE_MISMATCH,
                        format!(
                            "the condition `{name}` of `where` must be bool, found {}",
                            t.dtype
                        ),
                        format!("compare `{name}` (e.g. `ne` with 0) or Cast it to bool"),
                    )
                    .with("cond_dtype", t.dtype));
            }
        }
        operand_dtype(cx, &[1, 2])?.unwrap_or(DType::F32)
    } else {
        let all: Vec<usize> = (0..arity).collect();
        operand_dtype(cx, &all)?.unwrap_or(DType::F32)
    };
    if float_only(func) {
        cx.float_only(dtype, &format!("`{}`", func.name()))?;
    }
    if dtype == DType::Bool && not_bool(func) {
        return Err(cx
            .err(
                codes::UNSUPPORTED_DTYPE,
                format!("`{}` is not defined on bool tensors", func.name()),
                "Cast the operands to i32 or a float type first (max/min act as or/and)",
            )
            .with("dtype", dtype));
    }
    let mut shape: Shape = Vec::new();
    for i in cx.ins.iter() {
        if let In::Tensor(_, t) = i {
            shape = broadcast(cx, &shape, &t.shape, &format!("`{}` operands", func.name()))
                .map_err(|d| with_all_shapes(cx, d))?;
        }
    }
    let out = if func.is_comparison() {
        DType::Bool
    } else {
        dtype
    };
    Ok((Op::Elementwise { func }, TensorInfo { dtype: out, shape }))
}

/// Replaces the partial-broadcast shapes of a multi-operand mismatch by the operands' shapes.
fn with_all_shapes(cx: &Ctx, d: Diagnostic) -> Diagnostic {
    let shapes: Vec<&TensorInfo> = cx
        .ins
        .iter()
        .filter_map(|i| match i {
            In::Tensor(_, t) => Some(*t),
            In::Scalar => None,
        })
        .collect();
    if let [a, b] = shapes.as_slice() {
        d.with("lhs_shape", crate::ir::dim::fmt_shape(&a.shape))
            .with("rhs_shape", crate::ir::dim::fmt_shape(&b.shape))
    } else {
        d
    }
}
