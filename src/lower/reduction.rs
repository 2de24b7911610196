//! Reductions: `Reduce`, `Softmax`, `LayerNorm`, `RMSNorm` (REDUCE + elementwise in fp32) and
//! `Cumulative`, lowered to one SCAN (seed 004's parallel scan: linear work, seen as a scan by
//! the e-graph, the cost model and the templates). The naive form tinygrad uses — a REDUCE over a
//! triangular window, `y[i] = op_j WHERE(j ≤ i, x[j], identity)` with the triangle from RANGE +
//! CMPLE, O(n²) — is kept as [`cumulative_window`], the form the scan is tested against.

use super::util::{add_imm, bcast, bin, count, div_count, exp, keepdim_shape};
use super::{LResult, LowerError, Lowerer};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::frontend::{CumFn, Node, Op, ReduceFn};
use crate::ir::tiny::{BinaryOp, Builder, NodeId, ReduceOp, ScanSpec, Src, UnaryOp};

/// Numerically stable softmax over `axis` of `x` (already in its compute dtype). With `guard`,
/// rows that are entirely −∞ give zeros instead of NaN.
pub fn softmax_axis(b: &mut Builder, x: NodeId, axis: usize, guard: bool) -> LResult<NodeId> {
    let dt = b.dtype(x);
    let shape = b.shape(x).clone();
    let mx = b.reduce(ReduceOp::Max, x, vec![axis], dt)?;
    let mx = if guard {
        let empty = b.binary(BinaryOp::CmpEq, mx.into(), Src::Imm(f64::NEG_INFINITY))?;
        b.where_(empty, Src::Imm(0.0), mx.into())?
    } else {
        mx
    };
    let mx = b.reshape(mx, keepdim_shape(&shape, &[axis]))?;
    let mx = b.expand(mx, shape.clone())?;
    let centered = bin(b, BinaryOp::Sub, x, mx)?;
    let e = exp(b, centered)?;
    let z = b.reduce(ReduceOp::Sum, e, vec![axis], dt)?;
    let z = if guard {
        let zero = b.binary(BinaryOp::CmpEq, z.into(), Src::Imm(0.0))?;
        b.where_(zero, Src::Imm(1.0), z.into())?
    } else {
        z
    };
    let z = b.reshape(z, keepdim_shape(&shape, &[axis]))?;
    let z = b.expand(z, shape)?;
    bin(b, BinaryOp::Fdiv, e, z)
}

/// `Softmax(axis)` computed in `acc`.
pub fn softmax(lw: &mut Lowerer, node: &Node, axis: usize, acc: DType) -> LResult<NodeId> {
    let x = lw.input(node, 0)?;
    let x = lw.b.cast(x, acc)?;
    softmax_axis(&mut lw.b, x, axis, false)
}

/// `Reduce`: accumulate in `acc_dtype` (i32 inputs accumulate in i32, bool inputs as i32), `mean`
/// divides the sum by the (possibly symbolic) count, `keepdim` reshapes back to rank.
pub fn reduce(lw: &mut Lowerer, node: &Node) -> LResult<NodeId> {
    let Op::Reduce {
        func,
        ref axes,
        keepdim,
        acc,
    } = node.op
    else {
        return Err(LowerError::Unsupported("not a Reduce".into()));
    };
    let x = lw.input(node, 0)?;
    let b = &mut lw.b;
    let shape = b.shape(x).clone();
    let acc = match b.dtype(x) {
        DType::I32 | DType::Bool => DType::I32,
        _ => acc,
    };
    let xa = b.cast(x, acc)?;
    let op = match func {
        ReduceFn::Sum | ReduceFn::Mean => ReduceOp::Sum,
        ReduceFn::Max => ReduceOp::Max,
        ReduceFn::Min => ReduceOp::Min,
        ReduceFn::Prod => ReduceOp::Prod,
    };
    let mut y = b.reduce(op, xa, axes.clone(), acc)?;
    if b.dtype(x) == DType::Bool {
        y = bool_of_i32(b, y)?;
    }
    if func == ReduceFn::Mean {
        let y_f = b.cast(y, if acc.is_float() { acc } else { DType::F32 })?;
        let n = count(b, &shape, axes)?;
        y = div_count(b, y_f, n)?;
    }
    if keepdim {
        y = b.reshape(y, keepdim_shape(&shape, axes))?;
    }
    Ok(y)
}

/// A max/min of bool values accumulated in i32, back to bool: `y > 0`. A CAST would turn the
/// identity of an empty max (`i32::MIN`) into `true`; `any` of nothing is `false` (`DType::lowest`).
fn bool_of_i32(b: &mut Builder, y: NodeId) -> LResult<NodeId> {
    Ok(b.binary(BinaryOp::CmpLt, Src::Imm(0.0), y.into())?)
}

/// The normalized axes `axis..rank` of a norm.
fn norm_axes(b: &Builder, x: NodeId, axis: usize) -> Vec<usize> {
    (axis..b.shape(x).len()).collect()
}

/// `mean over axes`, broadcast back to `x`'s shape.
fn mean_bcast(b: &mut Builder, x: NodeId, axes: &[usize]) -> LResult<NodeId> {
    let shape = b.shape(x).clone();
    let dt = b.dtype(x);
    let s = b.reduce(ReduceOp::Sum, x, axes.to_vec(), dt)?;
    let n = count(b, &shape, axes)?;
    let m = div_count(b, s, n)?;
    let m = b.reshape(m, keepdim_shape(&shape, axes))?;
    Ok(b.expand(m, shape)?)
}

/// Multiplies by `gamma` and adds `beta` (each broadcast over the normalized axes, fp32).
fn affine(
    b: &mut Builder,
    y: NodeId,
    gamma: Option<NodeId>,
    beta: Option<NodeId>,
) -> LResult<NodeId> {
    let shape = b.shape(y).clone();
    let dt = b.dtype(y);
    let mut y = y;
    if let Some(g) = gamma {
        let g = bcast(b, g, &shape)?;
        let g = b.cast(g, dt)?;
        y = bin(b, BinaryOp::Mul, y, g)?;
    }
    if let Some(be) = beta {
        let be = bcast(b, be, &shape)?;
        let be = b.cast(be, dt)?;
        y = bin(b, BinaryOp::Add, y, be)?;
    }
    Ok(y)
}

/// `LayerNorm`: `(x − mean) · rsqrt(var + eps) · gamma + beta` over `axis..rank`, in `acc`.
pub fn layer_norm(
    lw: &mut Lowerer,
    node: &Node,
    axis: usize,
    eps: f64,
    acc: DType,
) -> LResult<NodeId> {
    let x = lw.input(node, 0)?;
    let gamma = lw.opt_input(node, 1)?;
    let beta = lw.opt_input(node, 2)?;
    let b = &mut lw.b;
    let x = b.cast(x, acc)?;
    let axes = norm_axes(b, x, axis);
    let mean = mean_bcast(b, x, &axes)?;
    let xc = bin(b, BinaryOp::Sub, x, mean)?;
    let sq = bin(b, BinaryOp::Mul, xc, xc)?;
    let var = mean_bcast(b, sq, &axes)?;
    let ve = add_imm(b, var, eps)?;
    let rstd = b.unary(UnaryOp::Rsqrt, ve)?;
    let y = bin(b, BinaryOp::Mul, xc, rstd)?;
    affine(b, y, gamma, beta)
}

/// `RMSNorm`: `x · rsqrt(mean(x²) + eps) · gamma` over `axis..rank`, in `acc`.
pub fn rms_norm(
    lw: &mut Lowerer,
    node: &Node,
    axis: usize,
    eps: f64,
    acc: DType,
) -> LResult<NodeId> {
    let x = lw.input(node, 0)?;
    let gamma = lw.opt_input(node, 1)?;
    let b = &mut lw.b;
    let x = b.cast(x, acc)?;
    let axes = norm_axes(b, x, axis);
    let sq = bin(b, BinaryOp::Mul, x, x)?;
    let ms = mean_bcast(b, sq, &axes)?;
    let me = add_imm(b, ms, eps)?;
    let r = b.unary(UnaryOp::Rsqrt, me)?;
    let y = bin(b, BinaryOp::Mul, x, r)?;
    affine(b, y, gamma, None)
}

/// The accumulation dtype and SCAN spec of a `Cumulative` node over `x`: floats accumulate in
/// fp32, i32 and bool (max/min) in i32.
fn cumulative_spec(b: &Builder, x: NodeId, node: &Node) -> LResult<(ScanSpec, DType)> {
    let Op::Cumulative {
        func,
        axis,
        reverse,
        exclusive,
    } = node.op
    else {
        return Err(LowerError::Unsupported("not a Cumulative".into()));
    };
    let acc = if b.dtype(x).is_float() {
        DType::F32
    } else {
        DType::I32
    };
    let op = match func {
        CumFn::Sum => ReduceOp::Sum,
        CumFn::Prod => ReduceOp::Prod,
        CumFn::Max => ReduceOp::Max,
        CumFn::Min => ReduceOp::Min,
    };
    let spec = ScanSpec {
        op,
        axis,
        exclusive,
        reverse,
    };
    Ok((spec, acc))
}

/// `Cumulative`: `y[i] = op_{j ∈ W(i)} x[j]` with `W(i)` = `j ≤ i` (inclusive), `j < i`
/// (exclusive), `j ≥ i` / `j > i` when `reverse`, as one SCAN. Floats accumulate in fp32, i32
/// in i32 (bool max/min as i32, then `y > 0`).
pub fn cumulative(lw: &mut Lowerer, node: &Node) -> LResult<NodeId> {
    let x = lw.input(node, 0)?;
    let b = &mut lw.b;
    let (spec, acc) = cumulative_spec(b, x, node)?;
    let is_bool = b.dtype(x) == DType::Bool;
    let xc = b.cast(x, acc)?;
    let y = b.scan(xc, spec, acc)?;
    if is_bool {
        return bool_of_i32(b, y);
    }
    Ok(y)
}

/// The O(n²) form of a SCAN of `x` (already in `acc`): a REDUCE over a triangular window (what
/// `Cumulative` lowered to before SCAN existed). It folds every window in ascending order, so
/// it agrees with SCAN bit for bit except for a `reverse` float sum or product, whose SCAN folds
/// descending (exact on integer-valued inputs). Kept for the tests comparing the two; the
/// error is the lowering error's message.
pub fn cumulative_window(b: &mut Builder, x: NodeId, spec: ScanSpec) -> Result<NodeId, String> {
    window_scan(b, x, spec).map_err(|e| e.to_string())
}

fn window_scan(b: &mut Builder, x: NodeId, spec: ScanSpec) -> LResult<NodeId> {
    let ScanSpec {
        op,
        axis,
        exclusive,
        reverse,
    } = spec;
    let acc = b.dtype(x);
    let shape = b.shape(x).clone();
    let r = shape.len();
    let n = shape[axis].clone();
    // Move the scanned axis last, then add the window axis j: xw[…, i, j] = x[…, j].
    let mut perm: Vec<usize> = (0..r).filter(|a| *a != axis).collect();
    perm.push(axis);
    let xt = b.permute(x, perm.clone())?;
    let mut win_shape = b.shape(xt).clone();
    win_shape.push(n.clone());
    let mut src_shape = b.shape(xt).clone();
    src_shape[r - 1] = Dim::int(1);
    src_shape.push(n.clone());
    let xw = b.reshape(xt, src_shape)?;
    let xw = b.expand(xw, win_shape.clone())?;
    // keep[i, j]: j ≤ i (or <, ≥, > per flags), broadcast over the leading axes.
    let nn = vec![n.clone(), n.clone()];
    let ri = b.range(n.clone())?;
    let ri = b.reshape(ri, vec![n.clone(), Dim::int(1)])?;
    let ri = b.expand(ri, nn.clone())?;
    let rj = b.range(n.clone())?;
    let rj = b.reshape(rj, vec![Dim::int(1), n.clone()])?;
    let rj = b.expand(rj, nn)?;
    let (cmp, l, rr) = match (reverse, exclusive) {
        (false, false) => (BinaryOp::CmpLe, rj, ri),
        (false, true) => (BinaryOp::CmpLt, rj, ri),
        (true, false) => (BinaryOp::CmpLe, ri, rj),
        (true, true) => (BinaryOp::CmpLt, ri, rj),
    };
    let keep = b.binary(cmp, l.into(), rr.into())?;
    let keep = bcast(b, keep, &win_shape)?;
    let masked = b.where_(keep, xw.into(), Src::Imm(op.identity(acc)))?;
    let y = b.reduce(op, masked, vec![r], acc)?;
    // Undo the permutation.
    let mut inv = vec![0usize; r];
    for (i, p) in perm.iter().enumerate() {
        inv[*p] = i;
    }
    Ok(b.permute(y, inv)?)
}
