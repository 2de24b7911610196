//! C spellings of region values: storage types, kind conversions, loads and stores, constants,
//! accumulator steps and elementwise ops, each rounded as the reference rounds it.

use crate::codegen::cexpr;
use crate::ir::dtype::DType;
use crate::ir::region::kind::{const_value, Kind};
use crate::ir::region::{BinaryFn, UnaryFn};
use crate::ir::tiny::ReduceOp;

/// The C element type of a tensor of `dt`.
pub fn storage_type(dt: DType) -> &'static str {
    match dt {
        DType::F32 => "float",
        DType::F16 => "dlc_f16",
        DType::BF16 => "uint16_t",
        DType::I32 => "int32_t",
        DType::Bool => "uint8_t",
    }
}

pub(super) fn kind_type(k: Kind) -> &'static str {
    match k {
        Kind::Float => "float",
        _ => "int32_t",
    }
}

/// `x` (a C value of kind `k`) as kind `to` (a widening: bool → i32 → fp32).
pub(super) fn widen(x: &str, k: Kind, to: Kind) -> String {
    if k == to || to != Kind::Float {
        x.to_string()
    } else {
        format!("((float)({x}))")
    }
}

/// `x` (kind `k`) rounded to dtype `d`, as a value of `d`'s kind.
pub(super) fn to_dtype(x: &str, k: Kind, d: DType) -> String {
    match (d, k) {
        (DType::F32, Kind::Float) => x.to_string(),
        (DType::F32, _) => format!("((float)({x}))"),
        (DType::F16, _) => format!("dlc_round_f16({})", widen(x, k, Kind::Float)),
        (DType::BF16, _) => format!("dlc_round_bf16({})", widen(x, k, Kind::Float)),
        (DType::I32, Kind::Float) => format!("dlc_wrap_i32((double)({x}))"),
        (DType::I32, _) => x.to_string(),
        (DType::Bool, _) => format!("((int32_t)(({x}) != 0))"),
    }
}

/// `x` (kind `k`) converted for a store into a tensor of `d`.
pub(super) fn store(x: &str, k: Kind, d: DType) -> String {
    match d {
        DType::F16 => format!("dlc_st_f16({})", widen(x, k, Kind::Float)),
        DType::BF16 => format!("dlc_st_bf16({})", widen(x, k, Kind::Float)),
        DType::Bool => format!("((uint8_t)(({x}) != 0))"),
        _ => to_dtype(x, k, d),
    }
}

pub(super) fn load(x: String, d: DType) -> String {
    match d {
        DType::F16 => format!("dlc_ld_f16({x})"),
        DType::BF16 => format!("dlc_ld_bf16({x})"),
        DType::Bool => format!("((int32_t)({x}))"),
        _ => x,
    }
}

/// A constant as a C value of kind `k` (`Float`: fp32; else an exact `double`).
pub(super) fn constant(c: f64, k: Kind) -> String {
    let v = const_value(c);
    match k {
        Kind::Float => cexpr::float(v),
        _ => double_lit(v),
    }
}

pub(super) fn double_lit(v: f64) -> String {
    if v.is_nan() {
        "((double)dlc_nan())".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "((double)dlc_inf())"
        } else {
            "(-(double)dlc_inf())"
        }
        .into()
    } else {
        format!("({v:?})")
    }
}

pub(super) fn acc_type(d: DType) -> &'static str {
    kind_type(Kind::of(d))
}

pub(super) fn init_lit(op: ReduceOp, init: Option<f64>, d: DType) -> String {
    let v = d.round(init.unwrap_or_else(|| op.identity(d)));
    match Kind::of(d) {
        Kind::Float => cexpr::float(v),
        _ if v == i32::MIN as f64 => "(-2147483647 - 1)".into(),
        _ => format!("{}", v as i64),
    }
}

/// One accumulation step `acc ∘ v` in dtype `d` (both already values of `d`).
pub(super) fn fold(op: ReduceOp, d: DType, acc: &str, v: &str) -> String {
    let raw = match (Kind::of(d), op) {
        (Kind::Float, ReduceOp::Sum) => format!("({acc} + {v})"),
        (Kind::Float, ReduceOp::Prod) => format!("({acc} * {v})"),
        (Kind::Float, ReduceOp::Max) => format!("dlc_fmax_acc({acc}, {v})"),
        (Kind::Float, ReduceOp::Min) => format!("dlc_fmin_acc({acc}, {v})"),
        (Kind::I32, ReduceOp::Sum) => format!("dlc_iadd({acc}, {v})"),
        (Kind::I32, ReduceOp::Prod) => format!("dlc_imul({acc}, {v})"),
        (Kind::Bool, ReduceOp::Sum) => format!("((int32_t)(({acc} | {v}) != 0))"),
        (Kind::Bool, ReduceOp::Prod) => format!("((int32_t)({acc} && {v}))"),
        (_, ReduceOp::Max) => format!("dlc_smax({acc}, {v})"),
        (_, ReduceOp::Min) => format!("dlc_smin({acc}, {v})"),
    };
    match d {
        DType::F16 => format!("dlc_round_f16({raw})"),
        DType::BF16 => format!("dlc_round_bf16({raw})"),
        _ => raw,
    }
}

/// `acc ⊕ v` as [`fold`] computes it, spelled for a fold across values of one element (a
/// register folding a window's taps) rather than along a vectorized reduction loop: float max
/// and min as the prelude's branch-free `dlc_fmax` / `dlc_fmin` (the same values, NaN and ±0
/// included; `dlc_fmax_acc`'s `(a > b || a != a) ? a : b` is the spelling GCC vectorizes as a
/// reduction, and became scalar branches in an unrolled chain).
pub(super) fn fold_elementwise(op: ReduceOp, d: DType, acc: &str, v: &str) -> String {
    match (Kind::of(d), op) {
        (Kind::Float, ReduceOp::Max) if d == DType::F32 => format!("dlc_fmax({acc}, {v})"),
        (Kind::Float, ReduceOp::Min) if d == DType::F32 => format!("dlc_fmin({acc}, {v})"),
        _ => fold(op, d, acc, v),
    }
}

/// A float unary op. `exp`, `exp2`, `erf`, `tanh` and `sigmoid` are the prelude's fp32
/// approximations (a few ulp, docs/numerics.md: inside graph-json's tolerances; vectorized
/// inline, no libm call); `log`, `log2` and `rsqrt` compute in double and round to fp32, as
/// the reference does (libmvec's double variants keep them vectorized).
pub(super) fn unary_float(f: UnaryFn, x: &str) -> String {
    let d = |name: &str| format!("((float){name}((double)({x})))");
    match f {
        UnaryFn::Neg => format!("(-{x})"),
        UnaryFn::Exp => format!("dlc_expf({x})"),
        UnaryFn::Exp2 => format!("dlc_exp2f({x})"),
        UnaryFn::Log => d("log"),
        UnaryFn::Log2 => d("log2"),
        UnaryFn::Sqrt => format!("sqrtf({x})"),
        UnaryFn::Rsqrt => format!("((float)(1.0 / sqrt((double)({x}))))"),
        UnaryFn::Recip => format!("(1.0f / {x})"),
        UnaryFn::Relu => format!("dlc_relu({x})"),
        UnaryFn::Abs => format!("fabsf({x})"),
        UnaryFn::Erf => format!("dlc_erff({x})"),
        UnaryFn::Sigmoid => format!("dlc_sigmoidf({x})"),
        UnaryFn::Tanh => format!("dlc_tanhf({x})"),
    }
}

pub(super) fn unary_double(f: UnaryFn, x: &str) -> String {
    match f {
        UnaryFn::Neg => format!("(-{x})"),
        UnaryFn::Exp => format!("exp({x})"),
        UnaryFn::Exp2 => format!("exp2({x})"),
        UnaryFn::Log => format!("log({x})"),
        UnaryFn::Log2 => format!("log2({x})"),
        UnaryFn::Sqrt => format!("sqrt({x})"),
        UnaryFn::Rsqrt => format!("(1.0 / sqrt({x}))"),
        UnaryFn::Recip => format!("(1.0 / {x})"),
        UnaryFn::Relu => format!("({x} > 0.0 ? {x} : 0.0)"),
        UnaryFn::Abs => format!("fabs({x})"),
        UnaryFn::Erf => format!("erf({x})"),
        UnaryFn::Sigmoid => format!("(1.0 / (1.0 + exp(-{x})))"),
        UnaryFn::Tanh => format!("tanh({x})"),
    }
}

pub(super) fn binary_float(f: BinaryFn, a: &str, b: &str) -> String {
    match f {
        BinaryFn::Add => format!("({a} + {b})"),
        BinaryFn::Sub => format!("({a} - {b})"),
        BinaryFn::Mul => format!("({a} * {b})"),
        BinaryFn::Div => format!("({a} / {b})"),
        BinaryFn::Idiv => format!("((float)trunc((double)({a}) / (double)({b})))"),
        BinaryFn::Max => format!("dlc_fmax({a}, {b})"),
        BinaryFn::Min => format!("dlc_fmin({a}, {b})"),
        BinaryFn::Pow => format!("((float)pow((double)({a}), (double)({b})))"),
        BinaryFn::Cmplt => format!("((int32_t)({a} < {b}))"),
        BinaryFn::Cmple => format!("((int32_t)({a} <= {b}))"),
        BinaryFn::Cmpeq => format!("((int32_t)({a} == {b}))"),
        BinaryFn::Cmpne => format!("((int32_t)({a} != {b}))"),
    }
}

/// An i32 or bool op: operands are `double`s, the result rounded to `k` as the reference does.
pub(super) fn binary_int(f: BinaryFn, k: Kind, a: &str, b: &str) -> String {
    let round = |x: String| match k {
        Kind::Bool => format!("dlc_bool({x})"),
        _ => format!("dlc_wrap_i32({x})"),
    };
    match f {
        BinaryFn::Cmplt => format!("((int32_t)({a} < {b}))"),
        BinaryFn::Cmple => format!("((int32_t)({a} <= {b}))"),
        BinaryFn::Cmpeq => format!("((int32_t)({a} == {b}))"),
        BinaryFn::Cmpne => format!("((int32_t)({a} != {b}))"),
        BinaryFn::Mul => round(format!(
            "(double)dlc_imul(dlc_wrap_i32({a}), dlc_wrap_i32({b}))"
        )),
        BinaryFn::Idiv => round(format!(
            "(double)dlc_idiv(dlc_wrap_i32({a}), dlc_wrap_i32({b}))"
        )),
        BinaryFn::Add => round(format!("({a} + {b})")),
        BinaryFn::Sub => round(format!("({a} - {b})")),
        BinaryFn::Div => round(format!("({a} / {b})")),
        BinaryFn::Max => round(format!("fmax({a}, {b})")),
        BinaryFn::Min => round(format!("fmin({a}, {b})")),
        BinaryFn::Pow => round(format!("pow({a}, {b})")),
    }
}
