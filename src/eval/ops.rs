//! Elementwise row kernels: every op computes in `f64` and rounds to the node dtype once per
//! element, exactly as `DType::round` does. Dispatch on op and dtype happens once per row; the
//! per-element loops are monomorphized closures the compiler can vectorize.

use crate::ir::dtype::{wrap_i32, DType};
use crate::ir::tiny::{BinaryOp, ReduceOp, UnaryOp};

/// An operand row: uniform scalar or a slice of per-element values.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'r> {
    S(f64),
    R(&'r [f64]),
}

/// What an op wrote: a uniform scalar (output buffer untouched) or the output row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Scalar(f64),
    Row,
}

#[inline(always)]
fn r_f32(x: f64) -> f64 {
    x as f32 as f64
}
#[inline(always)]
fn r_f16(x: f64) -> f64 {
    half::f16::from_f64(x).to_f64()
}
#[inline(always)]
fn r_bf16(x: f64) -> f64 {
    half::bf16::from_f64(x).to_f64()
}
#[inline(always)]
fn r_i32(x: f64) -> f64 {
    wrap_i32(x) as f64
}
#[inline(always)]
fn r_bool(x: f64) -> f64 {
    if x != 0.0 {
        1.0
    } else {
        0.0
    }
}

/// Runs `$body` with `$r` bound to the rounding function of `$dt` (monomorphized per dtype).
macro_rules! with_round {
    ($dt:expr, $r:ident => $body:expr) => {
        match $dt {
            DType::F32 => {
                let $r = r_f32;
                $body
            }
            DType::F16 => {
                let $r = r_f16;
                $body
            }
            DType::BF16 => {
                let $r = r_bf16;
                $body
            }
            DType::I32 => {
                let $r = r_i32;
                $body
            }
            DType::Bool => {
                let $r = r_bool;
                $body
            }
        }
    };
}

/// NaN-propagating maximum (as `torch.maximum`).
#[inline(always)]
pub fn fmax(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x >= y {
        x
    } else {
        y
    }
}

/// NaN-propagating minimum (as `torch.minimum`).
#[inline(always)]
pub fn fmin(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x <= y {
        x
    } else {
        y
    }
}

/// i32 product without f64 precision loss (wraps like `DType::round`).
#[inline(always)]
fn imul(x: f64, y: f64) -> f64 {
    ((x as i64).wrapping_mul(y as i64)) as i32 as f64
}

#[inline(always)]
fn map1(x: Operand, out: &mut [f64], f: impl Fn(f64) -> f64) -> Kind {
    match x {
        Operand::S(v) => Kind::Scalar(f(v)),
        Operand::R(a) => {
            for (o, v) in out.iter_mut().zip(a) {
                *o = f(*v);
            }
            Kind::Row
        }
    }
}

#[inline(always)]
fn map2(a: Operand, b: Operand, out: &mut [f64], f: impl Fn(f64, f64) -> f64) -> Kind {
    match (a, b) {
        (Operand::S(x), Operand::S(y)) => Kind::Scalar(f(x, y)),
        (Operand::R(x), Operand::S(y)) => {
            for (o, v) in out.iter_mut().zip(x) {
                *o = f(*v, y);
            }
            Kind::Row
        }
        (Operand::S(x), Operand::R(y)) => {
            for (o, v) in out.iter_mut().zip(y) {
                *o = f(x, *v);
            }
            Kind::Row
        }
        (Operand::R(x), Operand::R(y)) => {
            for ((o, u), v) in out.iter_mut().zip(x).zip(y) {
                *o = f(*u, *v);
            }
            Kind::Row
        }
    }
}

/// A unary op on a row of `dt` values (the result is `dt` too).
pub fn unary(op: UnaryOp, dt: DType, x: Operand, out: &mut [f64]) -> Kind {
    with_round!(dt, r => match op {
        UnaryOp::Neg => map1(x, out, |v| r(-v)),
        UnaryOp::Exp2 => map1(x, out, |v| r(v.exp2())),
        UnaryOp::Log2 => map1(x, out, |v| r(v.log2())),
        UnaryOp::Sqrt => map1(x, out, |v| r(v.sqrt())),
        UnaryOp::Rsqrt => map1(x, out, |v| r(1.0 / v.sqrt())),
        UnaryOp::Recip => map1(x, out, |v| r(1.0 / v)),
        UnaryOp::Relu => map1(x, out, |v| r(if v < 0.0 { 0.0 } else { v })),
        UnaryOp::Abs => map1(x, out, |v| r(v.abs())),
        UnaryOp::Erf => map1(x, out, |v| r(libm::erf(v))),
    })
}

/// CAST to `to`.
pub fn cast(to: DType, x: Operand, out: &mut [f64]) -> Kind {
    with_round!(to, r => map1(x, out, r))
}

/// IDIV's divisor contains a zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DivByZero;

fn has_zero(x: Operand) -> bool {
    match x {
        Operand::S(v) => v == 0.0,
        Operand::R(a) => a.contains(&0.0),
    }
}

/// A binary op: operands are `operand_dt`, the result `out_dt` (bool for comparisons).
pub fn binary(
    op: BinaryOp,
    operand_dt: DType,
    out_dt: DType,
    a: Operand,
    b: Operand,
    out: &mut [f64],
) -> Result<Kind, DivByZero> {
    let int = operand_dt == DType::I32;
    let b01 = |c: bool| if c { 1.0 } else { 0.0 };
    Ok(with_round!(out_dt, r => match op {
        BinaryOp::Add => map2(a, b, out, |x, y| r(x + y)),
        BinaryOp::Sub => map2(a, b, out, |x, y| r(x - y)),
        BinaryOp::Mul if int => map2(a, b, out, |x, y| r(imul(x, y))),
        BinaryOp::Mul => map2(a, b, out, |x, y| r(x * y)),
        BinaryOp::Fdiv => map2(a, b, out, |x, y| r(x / y)),
        BinaryOp::Idiv => {
            if has_zero(b) {
                return Err(DivByZero);
            }
            map2(a, b, out, |x, y| r((x as i32).wrapping_div(y as i32) as f64))
        }
        BinaryOp::Max => map2(a, b, out, |x, y| r(fmax(x, y))),
        BinaryOp::Min => map2(a, b, out, |x, y| r(fmin(x, y))),
        BinaryOp::Pow => map2(a, b, out, |x, y| r(x.powf(y))),
        BinaryOp::CmpLt => map2(a, b, out, |x, y| b01(x < y)),
        BinaryOp::CmpLe => map2(a, b, out, |x, y| b01(x <= y)),
        BinaryOp::CmpEq => map2(a, b, out, |x, y| b01(x == y)),
        BinaryOp::CmpNe => map2(a, b, out, |x, y| b01(x != y)),
    }))
}

/// `WHERE(c, a, b)` with result dtype `dt`.
pub fn select(dt: DType, c: Operand, a: Operand, b: Operand, out: &mut [f64]) -> Kind {
    if let Operand::S(cv) = c {
        let pick = if cv != 0.0 { a } else { b };
        return with_round!(dt, r => map1(pick, out, r));
    }
    let Operand::R(cr) = c else {
        return Kind::Scalar(0.0);
    };
    with_round!(dt, r => {
        for (i, (o, cv)) in out.iter_mut().zip(cr).enumerate() {
            let v = if *cv != 0.0 { a } else { b };
            *o = r(match v {
                Operand::S(s) => s,
                Operand::R(row) => row[i],
            });
        }
        Kind::Row
    })
}

/// Runs `$body` with `$f` bound to the (unrounded) reduction step of `$op` on `$dt`.
macro_rules! with_combine {
    ($op:expr, $dt:expr, $f:ident => $body:expr) => {
        match $op {
            ReduceOp::Sum => {
                let $f = |a: f64, x: f64| a + x;
                $body
            }
            ReduceOp::Prod if $dt == DType::I32 => {
                let $f = imul;
                $body
            }
            ReduceOp::Prod => {
                let $f = |a: f64, x: f64| a * x;
                $body
            }
            ReduceOp::Max => {
                let $f = fmax;
                $body
            }
            ReduceOp::Min => {
                let $f = fmin;
                $body
            }
        }
    };
}

/// `acc[i] = round(acc[i] ⊕ round(x[i]))` for every `i` (one accumulation step per element).
pub fn accumulate_rows(op: ReduceOp, dt: DType, acc: &mut [f64], x: Operand) {
    with_round!(dt, r => with_combine!(op, dt, f => match x {
        Operand::S(v) => {
            let v = r(v);
            for a in acc.iter_mut() {
                *a = r(f(*a, v));
            }
        }
        Operand::R(row) => {
            for (a, v) in acc.iter_mut().zip(row) {
                *a = r(f(*a, r(*v)));
            }
        }
    }))
}

/// Folds `len` elements of `x` into one accumulator, in order.
pub fn fold_row(op: ReduceOp, dt: DType, mut acc: f64, x: Operand, len: usize) -> f64 {
    with_round!(dt, r => with_combine!(op, dt, f => match x {
        Operand::S(v) => {
            let v = r(v);
            for _ in 0..len {
                acc = r(f(acc, v));
            }
            acc
        }
        Operand::R(row) => {
            for v in row.iter().take(len) {
                acc = r(f(acc, r(*v)));
            }
            acc
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(op: BinaryOp, dt: DType, a: &[f64], b: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; a.len()];
        let k = binary(op, dt, dt, Operand::R(a), Operand::R(b), &mut out).unwrap();
        assert_eq!(k, Kind::Row);
        out
    }

    #[test]
    fn i32_mul_is_exact_and_wraps() {
        let big = 65537.0 * 65537.0; // 4295098369 → wraps to 131073
        assert_eq!(
            row(BinaryOp::Mul, DType::I32, &[65537.0], &[65537.0]),
            [131073.0]
        );
        assert_ne!(big as i64 as i32 as f64, 0.0);
        assert_eq!(
            row(BinaryOp::Mul, DType::I32, &[46341.0], &[-46341.0]),
            [-2147488281i64 as i32 as f64]
        );
    }

    #[test]
    fn idiv_truncates_and_rejects_zero() {
        assert_eq!(
            row(BinaryOp::Idiv, DType::I32, &[-7.0, 7.0], &[2.0, -2.0]),
            [-3.0, -3.0]
        );
        let mut out = [0.0];
        let r = binary(
            BinaryOp::Idiv,
            DType::I32,
            DType::I32,
            Operand::R(&[1.0]),
            Operand::S(0.0),
            &mut out,
        );
        assert_eq!(r, Err(DivByZero));
    }

    #[test]
    fn f16_rounds_each_op() {
        // 2048 + 1 is not representable in fp16: ties to even give 2048.
        assert_eq!(row(BinaryOp::Add, DType::F16, &[2048.0], &[1.0]), [2048.0]);
        assert_eq!(row(BinaryOp::Add, DType::F32, &[2048.0], &[1.0]), [2049.0]);
    }

    #[test]
    fn comparisons_and_bool_max() {
        let mut out = [0.0; 2];
        let k = binary(
            BinaryOp::CmpLt,
            DType::F32,
            DType::Bool,
            Operand::R(&[1.0, 3.0]),
            Operand::S(2.0),
            &mut out,
        );
        assert_eq!((k, out), (Ok(Kind::Row), [1.0, 0.0]));
        assert_eq!(
            row(BinaryOp::Max, DType::Bool, &[0.0, 1.0], &[1.0, 0.0]),
            [1.0, 1.0]
        );
        assert_eq!(
            row(BinaryOp::Min, DType::Bool, &[0.0, 1.0], &[1.0, 1.0]),
            [0.0, 1.0]
        );
    }

    #[test]
    fn unary_ops() {
        let mut out = [0.0; 3];
        unary(
            UnaryOp::Relu,
            DType::F32,
            Operand::R(&[-1.0, 0.5, 2.0]),
            &mut out,
        );
        assert_eq!(out, [0.0, 0.5, 2.0]);
        assert_eq!(
            unary(UnaryOp::Rsqrt, DType::F32, Operand::S(4.0), &mut out),
            Kind::Scalar(0.5)
        );
        assert_eq!(
            unary(
                UnaryOp::Neg,
                DType::I32,
                Operand::S(i32::MIN as f64),
                &mut out
            ),
            Kind::Scalar(i32::MIN as f64)
        );
        let Kind::Scalar(e) = unary(UnaryOp::Erf, DType::F32, Operand::S(0.5), &mut out) else {
            panic!()
        };
        assert!((e - 0.520_499_877_813_046_5).abs() < 1e-7);
        assert_eq!(
            cast(DType::I32, Operand::S(-2.7), &mut out),
            Kind::Scalar(-2.0)
        );
        assert_eq!(
            cast(DType::Bool, Operand::S(-0.1), &mut out),
            Kind::Scalar(1.0)
        );
    }

    #[test]
    fn where_picks_by_condition() {
        let mut out = [0.0; 2];
        select(
            DType::F32,
            Operand::R(&[1.0, 0.0]),
            Operand::R(&[5.0, 6.0]),
            Operand::S(-1.0),
            &mut out,
        );
        assert_eq!(out, [5.0, -1.0]);
    }

    #[test]
    fn reductions_round_every_step() {
        // fp16 sum: 2048 + 1 + 1 stays 2048 step by step.
        assert_eq!(
            fold_row(
                ReduceOp::Sum,
                DType::F16,
                2048.0,
                Operand::R(&[1.0, 1.0]),
                2
            ),
            2048.0
        );
        assert_eq!(
            fold_row(ReduceOp::Prod, DType::F32, 1.0, Operand::S(2.0), 3),
            8.0
        );
        let mut acc = [f64::NEG_INFINITY, 0.0];
        accumulate_rows(
            ReduceOp::Max,
            DType::F32,
            &mut acc,
            Operand::R(&[1.0, -1.0]),
        );
        assert_eq!(acc, [1.0, 0.0]);
    }
}
