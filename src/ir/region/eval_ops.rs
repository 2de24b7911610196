//! Scalar value operations of region playback: unary and binary ops in a value kind, and one
//! accumulation step of a reduce or scan (shared by the point and row evaluators).

use super::super::kind::{imul, Kind};
use super::super::{BinaryFn, UnaryFn};
use crate::ir::dtype::{wrap_i32, DType};
use crate::ir::tiny::ReduceOp;

#[inline]
pub(super) fn unary(f: UnaryFn, x: f64) -> f64 {
    match f {
        UnaryFn::Neg => -x,
        UnaryFn::Exp => x.exp(),
        UnaryFn::Exp2 => x.exp2(),
        UnaryFn::Log => x.ln(),
        UnaryFn::Log2 => x.log2(),
        UnaryFn::Sqrt => x.sqrt(),
        UnaryFn::Rsqrt => 1.0 / x.sqrt(),
        UnaryFn::Recip => 1.0 / x,
        UnaryFn::Relu => {
            if x.is_nan() {
                x
            } else {
                x.max(0.0)
            }
        }
        UnaryFn::Abs => x.abs(),
        UnaryFn::Erf => libm::erf(x),
        UnaryFn::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryFn::Tanh => x.tanh(),
    }
}

#[inline]
pub(super) fn nan_or(a: f64, b: f64, f: fn(f64, f64) -> f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        f(a, b)
    }
}

/// `a f b` computed in `kind` and rounded to it (comparisons give 0/1): i32 and bool products
/// are exact, integer division truncates (0 for a zero divisor, whose Tiny IDIV is an error).
#[inline]
pub(super) fn binary(f: BinaryFn, kind: Kind, a: f64, b: f64) -> f64 {
    if f.is_comparison() {
        return binary_f64(f, a, b);
    }
    match (kind, f) {
        // DType::F32.round, inline.
        (Kind::Float, _) => binary_f64(f, a, b) as f32 as f64,
        (_, BinaryFn::Mul) => kind.round(imul(a, b)),
        (_, BinaryFn::Idiv) => {
            let (x, y) = (wrap_i32(a), wrap_i32(b));
            kind.round(if y == 0 {
                0.0
            } else {
                x.wrapping_div(y) as f64
            })
        }
        _ => kind.round(binary_f64(f, a, b)),
    }
}

#[inline]
pub(super) fn binary_f64(f: BinaryFn, a: f64, b: f64) -> f64 {
    let t = |c: bool| if c { 1.0 } else { 0.0 };
    match f {
        BinaryFn::Add => a + b,
        BinaryFn::Sub => a - b,
        BinaryFn::Mul => a * b,
        BinaryFn::Div => a / b,
        BinaryFn::Idiv => (a / b).trunc(),
        BinaryFn::Max => nan_or(a, b, f64::max),
        BinaryFn::Min => nan_or(a, b, f64::min),
        BinaryFn::Pow => a.powf(b),
        BinaryFn::Cmplt => t(a < b),
        BinaryFn::Cmple => t(a <= b),
        BinaryFn::Cmpeq => t(a == b),
        BinaryFn::Cmpne => t(a != b),
    }
}

/// One accumulation step in `dtype` (an i32 product is exact).
#[inline]
pub(super) fn fold(op: ReduceOp, dtype: DType, acc: f64, v: f64) -> f64 {
    match op {
        ReduceOp::Sum => acc + v,
        ReduceOp::Prod if dtype == DType::I32 => imul(acc, v),
        ReduceOp::Prod => acc * v,
        ReduceOp::Max => nan_or(acc, v, f64::max),
        ReduceOp::Min => nan_or(acc, v, f64::min),
    }
}
