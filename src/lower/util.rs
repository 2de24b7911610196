//! Building blocks shared by the op lowerings: right-aligned broadcast, keepdim reductions,
//! element counts that may be symbolic, fp32 compute casts.

use super::LResult;
use crate::ir::dim::{numel, Dim, Shape};
use crate::ir::dtype::DType;
use crate::ir::tiny::{BinaryOp, Builder, NodeId, ReduceOp, Src, UnaryOp};

/// log2(e): `exp(x) = exp2(x · log2 e)` (seed 002 §5.3).
pub const LOG2_E: f64 = std::f64::consts::LOG2_E;
/// ln(2): `ln(x) = log2(x) · ln 2`.
pub const LN_2: f64 = std::f64::consts::LN_2;

/// Right-aligned (numpy) broadcast of `x` to `shape`: RESHAPE adding leading 1s, then EXPAND.
pub fn bcast(b: &mut Builder, x: NodeId, shape: &[Dim]) -> LResult<NodeId> {
    let xs = b.shape(x).clone();
    let x = if xs.len() < shape.len() {
        let mut padded: Shape = vec![Dim::int(1); shape.len() - xs.len()];
        padded.extend(xs);
        b.reshape(x, padded)?
    } else {
        x
    };
    Ok(b.expand(x, shape.to_vec())?)
}

/// `shape` with the `axes` set to 1 (the keepdim shape of a reduction).
pub fn keepdim_shape(shape: &[Dim], axes: &[usize]) -> Shape {
    shape
        .iter()
        .enumerate()
        .map(|(i, d)| {
            if axes.contains(&i) {
                Dim::int(1)
            } else {
                d.clone()
            }
        })
        .collect()
}

/// The number of elements over `axes` of `shape`: an immediate when constant, otherwise a rank-0
/// fp32 node computed at run time (REDUCE(SUM) of an expanded 1).
pub fn count(b: &mut Builder, shape: &[Dim], axes: &[usize]) -> LResult<Src> {
    let dims: Shape = axes.iter().map(|a| shape[*a].clone()).collect();
    let n = numel(&dims);
    if let Some(v) = n.as_int() {
        return Ok(Src::Imm(v as f64));
    }
    let one = b.constant(1.0, DType::F32)?;
    let one = b.reshape(one, vec![Dim::int(1); dims.len()])?;
    let ones = b.expand(one, dims.clone())?;
    let all: Vec<usize> = (0..dims.len()).collect();
    Ok(Src::Node(b.reduce(ReduceOp::Sum, ones, all, DType::F32)?))
}

/// Divides `x` by a count (immediate or rank-0 node broadcast to `x`). A count node (fp32) is
/// cast to `x`'s dtype, as an immediate count adopts it (a `mean` accumulating in fp16).
pub fn div_count(b: &mut Builder, x: NodeId, n: Src) -> LResult<NodeId> {
    let n = match n {
        Src::Node(id) => {
            let s = b.shape(x).clone();
            let dt = b.dtype(x);
            let n = bcast(b, id, &s)?;
            Src::Node(b.cast(n, dt)?)
        }
        imm => imm,
    };
    Ok(b.binary(BinaryOp::Fdiv, x.into(), n)?)
}

/// The dtype arithmetic is done in: fp32 for fp16/bf16 (graph-json: "computed in fp32").
pub fn compute_dtype(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        other => other,
    }
}

/// `x · c` (skipped when `c == 1`).
pub fn mul_imm(b: &mut Builder, x: NodeId, c: f64) -> LResult<NodeId> {
    if c == 1.0 {
        return Ok(x);
    }
    Ok(b.binary(BinaryOp::Mul, x.into(), Src::Imm(c))?)
}

/// `x + c`.
pub fn add_imm(b: &mut Builder, x: NodeId, c: f64) -> LResult<NodeId> {
    Ok(b.binary(BinaryOp::Add, x.into(), Src::Imm(c))?)
}

/// `exp(x) = EXP2(x · log2 e)`.
pub fn exp(b: &mut Builder, x: NodeId) -> LResult<NodeId> {
    let s = mul_imm(b, x, LOG2_E)?;
    Ok(b.unary(UnaryOp::Exp2, s)?)
}

/// `a ∘ b` for two nodes.
pub fn bin(b: &mut Builder, op: BinaryOp, x: NodeId, y: NodeId) -> LResult<NodeId> {
    Ok(b.binary(op, x.into(), y.into())?)
}

/// Normalizes negative-or-positive pad pairs into SHRINK (negative parts crop) then PAD (positive
/// parts) on the listed axes of `x`.
///
/// A side may crop more than the axis holds when the other side pads (`[-2, 2]` on an axis of 1:
/// the output is all padding); SHRINK alone cannot express that, so such an axis is PADded first
/// (its positive side) and then cropped.
pub fn pad_signed(
    b: &mut Builder,
    x: NodeId,
    pads: &[(usize, i64, i64)],
    value: f64,
) -> LResult<NodeId> {
    let shape = b.shape(x).clone();
    let r = shape.len();
    let fits = |c: i64, d: &Dim| {
        let rest = d.add_int(c);
        rest.as_int().map_or(rest.is_nonneg(), |v| v >= 0)
    };
    let mut first = vec![(0i64, 0i64); r];
    let mut rest = Vec::with_capacity(pads.len());
    for &(axis, l, h) in pads {
        let d = &shape[axis];
        if l < 0 && h > 0 && !fits(l, d) {
            first[axis].1 = h;
            rest.push((axis, l, 0));
        } else if h < 0 && l > 0 && !fits(h, d) {
            first[axis].0 = l;
            rest.push((axis, 0, h));
        } else {
            rest.push((axis, l, h));
        }
    }
    let (x, shape) = if first.iter().any(|p| *p != (0, 0)) {
        let x = b.pad(x, first, value)?;
        (x, b.shape(x).clone())
    } else {
        (x, shape)
    };
    let mut lo: Vec<Dim> = vec![Dim::int(0); r];
    let mut hi: Shape = shape.clone();
    let mut pad = vec![(0i64, 0i64); r];
    for &(axis, l, h) in &rest {
        if l < 0 {
            lo[axis] = Dim::int(-l);
        } else {
            pad[axis].0 = l;
        }
        if h < 0 {
            hi[axis] = shape[axis].add_int(h);
        } else {
            pad[axis].1 = h;
        }
    }
    let steps = vec![1; r];
    let x = b.shrink(x, lo, hi, steps)?;
    Ok(b.pad(x, pad, value)?)
}
