//! Windowed ops: `Conv`, `ConvTranspose`, `Pool` (PyTorch output-size formulas, N-d).

use super::{same_size, Ctx, Inferred};
use crate::diag::codes;
use crate::diag::Diagnostic;
use crate::ir::dim::{fmt_shape, Dim};
use crate::ir::dtype::DType;
use crate::ir::frontend::{ConvAttrs, Op, PoolAttrs, PoolMode, TensorInfo};

/// Checks X is `[N, C, *spatial]` with at least one spatial dim; returns the spatial rank.
fn spatial_rank(cx: &Ctx, name: &str, x: &TensorInfo) -> Result<usize, Diagnostic> {
    if x.shape.len() < 3 {
        return Err(cx
            .err(
                codes::RANK_MISMATCH,
                format!(
                    "{} input `{name}` has rank {}; it must be [N, C, *spatial] with at least one spatial dim",
                    cx.node.op,
                    x.shape.len()
                ),
                "Reshape the input to [N, C, spatial…] (add a batch axis of 1 if needed)",
            )
            .with("shape", fmt_shape(&x.shape)));
    }
    Ok(x.shape.len() - 2)
}

/// Rejects a constant output size below `min`.
fn check_out(cx: &Ctx, i: usize, out: &Dim, input: &Dim, min: i64) -> Result<(), Diagnostic> {
    match out.as_int() {
        Some(v) if v < min => Err(cx
            .err(
                codes::AXIS_SIZE_MISMATCH,
                format!(
                    "{}: spatial dim {i} of size {input} gives an output size of {v}; the (dilated) kernel is larger than the padded input",
                    cx.node.op
                ),
                "use a smaller kernel or dilation, or more padding",
            )
            .with("input_size", input)
            .with("output_size", v)),
        _ => Ok(()),
    }
}

/// Checks W's rank and the dtypes, and the optional bias `[Cout]`.
fn check_weights_bias(cx: &Ctx, cout: &Dim) -> Result<(), Diagnostic> {
    if cx.ins.len() == 3 {
        let (bn, b) = cx.t(2)?;
        if b.shape.len() != 1 || b.shape.first() != Some(cout) {
            return Err(cx
                .err(
                    codes::AXIS_SIZE_MISMATCH,
                    format!(
                        "{} bias `{bn}` has shape {} but must be [Cout] = [{cout}]",
                        cx.node.op,
                        fmt_shape(&b.shape)
                    ),
                    "give the bias one value per output channel",
                )
                .with("bias_shape", fmt_shape(&b.shape))
                .with("cout", cout));
        }
    }
    Ok(())
}

fn weights<'a>(cx: &Ctx<'a>, rank: usize) -> Result<(&'a str, &'a TensorInfo), Diagnostic> {
    let (wn, w) = cx.t(1)?;
    if w.shape.len() != rank {
        return Err(cx
            .err(
                codes::RANK_MISMATCH,
                format!(
                    "{} weights `{wn}` have rank {} but the input has rank {rank}",
                    cx.node.op,
                    w.shape.len()
                ),
                if cx.node.op == "Conv" {
                    "W must be [Cout, C/groups, *kernel]"
                } else {
                    "W must be [C, Cout/groups, *kernel]"
                },
            )
            .with("weight_shape", fmt_shape(&w.shape)));
    }
    Ok((wn, w))
}

fn groups(cx: &Ctx) -> Result<i64, Diagnostic> {
    let g = cx.node.attrs.int("groups").unwrap_or(1);
    if g < 1 {
        return Err(cx.err(
            codes::INVALID_FIELD,
            format!("`groups` must be >= 1, found {g}"),
            "use groups = 1 for a dense convolution",
        ));
    }
    Ok(g)
}

/// Checks that a channel count is divisible by `groups`.
fn divisible(cx: &Ctx, c: &Dim, g: i64, what: &str) -> Result<(), Diagnostic> {
    if g == 1 {
        return Ok(());
    }
    let ok = match c.as_int() {
        Some(v) => v % g == 0,
        None => c.floordiv(g).mul_int(g) == *c,
    };
    if ok {
        return Ok(());
    }
    Err(cx
        .err(
            codes::AXIS_SIZE_MISMATCH,
            format!("{what} = {c} is not divisible by groups = {g}"),
            "choose groups dividing both the input and output channel counts",
        )
        .with("channels", c)
        .with("groups", g))
}

/// What Conv and ConvTranspose read first, in this order: two or three float operands of one
/// dtype (X, W, bias), `acc_dtype`, X's spatial rank, W, `groups`, `stride`, `dilation`.
struct ConvOperands<'a> {
    dtype: DType,
    acc: DType,
    xn: &'a str,
    x: &'a TensorInfo,
    nsp: usize,
    wn: &'a str,
    w: &'a TensorInfo,
    g: i64,
    stride: Vec<i64>,
    dilation: Vec<i64>,
}

fn conv_operands<'a>(cx: &'a Ctx) -> Result<ConvOperands<'a>, Diagnostic> {
    cx.count(2, 3, "X, W and optionally bias")?;
    let idx: Vec<usize> = (0..cx.ins.len()).collect();
    let dtype = cx.same_dtype(&idx)?;
    cx.float_only(dtype, cx.node.op)?;
    let acc = cx.acc(dtype)?;
    let (xn, x) = cx.t(0)?;
    let nsp = spatial_rank(cx, xn, x)?;
    let (wn, w) = weights(cx, x.shape.len())?;
    let g = groups(cx)?;
    let stride = cx.spatial("stride", nsp, Some(1), 1)?;
    let dilation = cx.spatial("dilation", nsp, Some(1), 1)?;
    Ok(ConvOperands {
        dtype,
        acc,
        xn,
        x,
        nsp,
        wn,
        w,
        g,
        stride,
        dilation,
    })
}

/// `Conv`: `out = floor((in + lo + hi - dilation·(k-1) - 1) / stride) + 1`.
pub(super) fn conv(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    let ConvOperands {
        dtype,
        acc,
        xn,
        x,
        nsp,
        wn,
        w,
        g,
        stride,
        dilation,
    } = conv_operands(cx)?;
    let pad = cx.spatial_pad(nsp)?;
    let cout = &w.shape[0];
    same_size(
        cx,
        &x.shape[1],
        &w.shape[1].mul_int(g),
        || {
            format!(
                "Conv input `{xn}` has C = {} channels but weights `{wn}` {} expect C/groups·groups = {}·{g}",
                x.shape[1],
                fmt_shape(&w.shape),
                w.shape[1]
            )
        },
        "W must be [Cout, C/groups, *kernel]: check the channel axis and `groups`",
    )?;
    divisible(cx, cout, g, "Cout")?;
    check_weights_bias(cx, cout)?;
    let mut shape = vec![x.shape[0].clone(), cout.clone()];
    for i in 0..nsp {
        let input = &x.shape[i + 2];
        let k = &w.shape[i + 2];
        let (lo, hi) = pad[i];
        let eff = k.add_int(-1).mul_int(dilation[i]);
        let out = input
            .add_int(lo.saturating_add(hi))
            .sub(&eff)
            .add_int(-1)
            .floordiv(stride[i])
            .add_int(1);
        check_out(cx, i, &out, input, 1)?;
        shape.push(out);
    }
    Ok((
        Op::Conv(ConvAttrs {
            stride,
            pad,
            dilation,
            groups: g,
            acc,
            output_padding: vec![0; nsp],
        }),
        TensorInfo { dtype, shape },
    ))
}

/// `ConvTranspose`: `out = (in-1)·stride - lo - hi + dilation·(k-1) + output_padding + 1`.
pub(super) fn conv_transpose(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    let ConvOperands {
        dtype,
        acc,
        xn,
        x,
        nsp,
        wn,
        w,
        g,
        stride,
        dilation,
    } = conv_operands(cx)?;
    let output_padding = cx.spatial("output_padding", nsp, Some(0), 0)?;
    let pad = cx.spatial_pad(nsp)?;
    for i in 0..nsp {
        if output_padding[i] >= stride[i].max(dilation[i]) {
            return Err(cx.err(
                codes::INVALID_FIELD,
                format!(
                    "`output_padding` {} on spatial dim {i} must be smaller than stride ({}) or dilation ({})",
                    output_padding[i], stride[i], dilation[i]
                ),
                "output_padding only disambiguates strided output sizes: keep it below the stride",
            ));
        }
    }
    same_size(
        cx,
        &x.shape[1],
        &w.shape[0],
        || {
            format!(
                "ConvTranspose input `{xn}` has C = {} channels but weights `{wn}` {} have {} on axis 0",
                x.shape[1],
                fmt_shape(&w.shape),
                w.shape[0]
            )
        },
        "W must be [C, Cout/groups, *kernel]",
    )?;
    divisible(cx, &x.shape[1], g, "C")?;
    let cout = w.shape[1].mul_int(g);
    check_weights_bias(cx, &cout)?;
    let mut shape = vec![x.shape[0].clone(), cout];
    for i in 0..nsp {
        let input = &x.shape[i + 2];
        let k = &w.shape[i + 2];
        let (lo, hi) = pad[i];
        let out = input
            .add_int(-1)
            .mul_int(stride[i])
            .add_int(-(lo.saturating_add(hi)))
            .add(&k.add_int(-1).mul_int(dilation[i]))
            .add_int(output_padding[i].saturating_add(1));
        check_out(cx, i, &out, input, 1)?;
        shape.push(out);
    }
    Ok((
        Op::ConvTranspose(ConvAttrs {
            stride,
            pad,
            dilation,
            groups: g,
            acc,
            output_padding,
        }),
        TensorInfo { dtype, shape },
    ))
}

/// `Pool`: floor output sizes as `Conv`; `stride` defaults to `kernel`.
pub(super) fn pool(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, 1, "X")?;
    let (xn, x) = cx.t(0)?;
    let nsp = spatial_rank(cx, xn, x)?;
    let mode = match cx.node.attrs.name("mode") {
        Some("avg") => PoolMode::Avg,
        _ => PoolMode::Max,
    };
    match mode {
        PoolMode::Avg => cx.float_only(x.dtype, "average pooling")?,
        PoolMode::Max if x.dtype == crate::ir::dtype::DType::Bool => {
            cx.float_only(x.dtype, "max pooling")?
        }
        PoolMode::Max => {}
    }
    let kernel = cx.spatial("kernel", nsp, None, 1)?;
    let stride = match cx.node.attrs.ints("stride") {
        Some(_) => cx.spatial("stride", nsp, None, 1)?,
        None => kernel.clone(),
    };
    let dilation = cx.spatial("dilation", nsp, Some(1), 1)?;
    let pad = cx.spatial_pad(nsp)?;
    let mut shape = vec![x.shape[0].clone(), x.shape[1].clone()];
    for i in 0..nsp {
        let eff = (kernel[i] - 1)
            .saturating_mul(dilation[i])
            .saturating_add(1);
        let (lo, hi) = pad[i];
        if lo > eff / 2 || hi > eff / 2 {
            return Err(cx.err(
                codes::INVALID_FIELD,
                format!(
                    "Pool pad [{lo}, {hi}] on spatial dim {i} exceeds half the (dilated) kernel size {eff}"
                ),
                "use pad <= kernel/2 (as PyTorch requires): a window must overlap the input",
            ));
        }
        let input = &x.shape[i + 2];
        let out = input
            .add_int(lo.saturating_add(hi))
            .add_int(-eff)
            .floordiv(stride[i])
            .add_int(1);
        check_out(cx, i, &out, input, 1)?;
        shape.push(out);
    }
    Ok((
        Op::Pool(PoolAttrs {
            mode,
            kernel,
            stride,
            pad,
            dilation,
            count_include_pad: cx.node.attrs.bool_or("count_include_pad", true),
        }),
        TensorInfo {
            dtype: x.dtype,
            shape,
        },
    ))
}
