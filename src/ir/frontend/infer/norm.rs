//! Normalizations, reductions, scans and casts: `Softmax`, `LayerNorm`, `RMSNorm`, `Reduce`,
//! `Cumulative`, `Cast`.

use super::{Ctx, Inferred};
use crate::diag::codes;
use crate::diag::Diagnostic;
use crate::ir::dim::fmt_shape;
use crate::ir::dtype::DType;
use crate::ir::frontend::{CumFn, Op, ReduceFn, TensorInfo};

fn eps(cx: &Ctx, default: f64) -> Result<f64, Diagnostic> {
    let e = cx.node.attrs.num_or("eps", default);
    if e < 0.0 {
        return Err(cx.err(
            codes::INVALID_FIELD,
            format!("`eps` must be non-negative, found {e}"),
            format!("use a small positive value such as {default}"),
        ));
    }
    Ok(e)
}

/// `Softmax` over `axis` (default -1).
pub(super) fn softmax(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, 1, "X")?;
    let (_, x) = cx.t(0)?;
    cx.float_only(x.dtype, "Softmax")?;
    let acc = cx.acc(x.dtype)?;
    let axis = cx.axis(
        cx.node.attrs.int("axis").unwrap_or(-1),
        x.shape.len(),
        "axis",
    )?;
    Ok((Op::Softmax { axis, acc }, x.clone()))
}

/// Checks the optional affine parameters of a normalization against `X[axis..]`.
fn check_params(cx: &Ctx, x: &TensorInfo, axis: usize, names: &[&str]) -> Result<(), Diagnostic> {
    let normalized = x.shape.get(axis..).unwrap_or(&[]);
    for (i, what) in names
        .iter()
        .enumerate()
        .take(cx.ins.len().saturating_sub(1))
    {
        let (pn, p) = cx.t(i + 1)?;
        if p.shape != normalized {
            return Err(cx
                .err(
                    codes::AXIS_SIZE_MISMATCH,
                    format!(
                        "{} {what} `{pn}` has shape {} but the normalized axes of X are {}",
                        cx.node.op,
                        fmt_shape(&p.shape),
                        fmt_shape(normalized)
                    ),
                    format!("give `{pn}` the shape of X from `axis` to the end"),
                )
                .with("param_shape", fmt_shape(&p.shape))
                .with("normalized_shape", fmt_shape(normalized)));
        }
    }
    Ok(())
}

/// What a normalization over `axis..rank` shares: operands X and the affine parameters `params`
/// (all one float dtype, shaped like X's normalized axes), `axis`, `eps` and `acc_dtype`.
struct NormAttrs<'a> {
    x: &'a TensorInfo,
    axis: usize,
    eps: f64,
    acc: DType,
}

fn norm_attrs<'a>(
    cx: &'a Ctx,
    params: &[&str],
    default_eps: f64,
) -> Result<NormAttrs<'a>, Diagnostic> {
    let what = format!("X and optionally {}", params.join(", "));
    cx.count(1, 1 + params.len(), &what)?;
    let idx: Vec<usize> = (0..cx.ins.len()).collect();
    let dtype = cx.same_dtype(&idx)?;
    cx.float_only(dtype, cx.node.op)?;
    let acc = cx.acc(dtype)?;
    let (_, x) = cx.t(0)?;
    let axis = cx.axis(
        cx.node.attrs.int("axis").unwrap_or(-1),
        x.shape.len(),
        "axis",
    )?;
    check_params(cx, x, axis, params)?;
    let eps = eps(cx, default_eps)?;
    Ok(NormAttrs { x, axis, eps, acc })
}

/// `LayerNorm` over `axis..rank` with optional gamma and beta.
pub(super) fn layer_norm(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    let n = norm_attrs(cx, &["gamma", "beta"], 1e-5)?;
    Ok((
        Op::LayerNorm {
            axis: n.axis,
            eps: n.eps,
            acc: n.acc,
        },
        n.x.clone(),
    ))
}

/// `RMSNorm` over `axis..rank` with optional gamma.
pub(super) fn rms_norm(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    let n = norm_attrs(cx, &["gamma"], 1e-6)?;
    Ok((
        Op::RmsNorm {
            axis: n.axis,
            eps: n.eps,
            acc: n.acc,
        },
        n.x.clone(),
    ))
}

/// `Reduce` over `axes`. Float inputs accumulate in `acc_dtype` (fp32); `i32` inputs in `i32`;
/// `bool` inputs allow only `max`/`min` (any/all).
pub(super) fn reduce(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, 1, "X")?;
    let (_, x) = cx.t(0)?;
    let func = match cx.node.attrs.name("fn") {
        Some("sum") => ReduceFn::Sum,
        Some("max") => ReduceFn::Max,
        Some("min") => ReduceFn::Min,
        Some("mean") => ReduceFn::Mean,
        _ => ReduceFn::Prod,
    };
    let acc = match x.dtype {
        d if d.is_float() => cx.acc(d)?,
        DType::I32 => {
            if func == ReduceFn::Mean {
                cx.float_only(x.dtype, "Reduce mean")?;
            }
            match cx.node.attrs.dtype("acc_dtype") {
                None | Some(DType::I32) => DType::I32,
                Some(d) => {
                    return Err(cx.err(
                        codes::INVALID_FIELD,
                        format!("an i32 Reduce accumulates in i32, not {d}"),
                        "remove `acc_dtype`, or Cast the input to a float type first",
                    ))
                }
            }
        }
        _ => {
            if !matches!(func, ReduceFn::Max | ReduceFn::Min) {
                cx.float_only(x.dtype, "Reduce sum/mean/prod")?;
            }
            DType::Bool
        }
    };
    let (given, _) = cx.node.attrs.ints("axes").unwrap_or((&[], false));
    if given.is_empty() {
        return Err(cx.err(
            codes::INVALID_FIELD,
            "`axes` of Reduce is empty",
            "list the axes to reduce (all axes: [0, 1, …, rank-1])",
        ));
    }
    let axes = cx.axes(given, x.shape.len(), "axes")?;
    let keepdim = cx.node.attrs.bool_or("keepdim", false);
    let mut shape = Vec::with_capacity(x.shape.len());
    for (i, d) in x.shape.iter().enumerate() {
        if axes.contains(&i) {
            if keepdim {
                shape.push(crate::ir::dim::Dim::int(1));
            }
        } else {
            shape.push(d.clone());
        }
    }
    Ok((
        Op::Reduce {
            func,
            axes,
            keepdim,
            acc,
        },
        TensorInfo {
            dtype: x.dtype,
            shape,
        },
    ))
}

/// `Cumulative` scan along `axis` (default -1).
pub(super) fn cumulative(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, 1, "X")?;
    let (_, x) = cx.t(0)?;
    let func = match cx.node.attrs.name("fn") {
        Some("sum") => CumFn::Sum,
        Some("prod") => CumFn::Prod,
        Some("max") => CumFn::Max,
        _ => CumFn::Min,
    };
    if x.dtype == DType::Bool && matches!(func, CumFn::Sum | CumFn::Prod) {
        cx.float_only(x.dtype, "Cumulative sum/prod")?;
    }
    let axis = cx.axis(
        cx.node.attrs.int("axis").unwrap_or(-1),
        x.shape.len(),
        "axis",
    )?;
    Ok((
        Op::Cumulative {
            func,
            axis,
            reverse: cx.node.attrs.bool_or("reverse", false),
            exclusive: cx.node.attrs.bool_or("exclusive", false),
        },
        x.clone(),
    ))
}

/// `Cast` to `to`.
pub(super) fn cast(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, 1, "X")?;
    let (_, x) = cx.t(0)?;
    let Some(to) = cx.node.attrs.dtype("to") else {
        return Err(cx.err(
            codes::INVALID_FIELD,
            "Cast needs the attribute `to`",
            "add `\"to\": \"fp32\"` (or fp16, bf16, i32, bool)",
        ));
    };
    Ok((
        Op::Cast { to },
        TensorInfo {
            dtype: to,
            shape: x.shape.clone(),
        },
    ))
}
