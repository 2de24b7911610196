//! The C spelling of loads, offsets and elementwise ops on [`Val`]s.

use super::{convert, Val};
use crate::ir::dtype::DType;
use crate::ir::region::kind::Kind;
use crate::ir::region::{BinaryFn, UnaryFn};

/// An element of input `param` (dtype `dt`) at offset `off`, as its value kind.
pub fn load(param: &str, dt: DType, off: &str) -> Val {
    element(format!("{param}[{off}]"), dt)
}

/// An element `e` (C) of dtype `dt`, as its value kind.
pub(super) fn element(e: String, dt: DType) -> Val {
    match dt {
        DType::I32 => Val {
            code: e,
            kind: Kind::I32,
        },
        DType::Bool => Val {
            code: e,
            kind: Kind::Bool,
        },
        _ => Val {
            code: format!("dlc_f32({e})"),
            kind: Kind::Float,
        },
    }
}

/// `((i0 * s1 + i1) * s2 + i2)`: the row-major offset of `idx` in `shape`.
pub fn horner(idx: &[String], shape: &[String]) -> String {
    let mut acc = String::new();
    for (d, i) in idx.iter().enumerate() {
        if d == 0 || acc == "0" {
            acc = i.clone();
        } else {
            acc = format!("({acc} * {} + {i})", shape[d]);
        }
    }
    if acc.is_empty() {
        "0".into()
    } else {
        acc
    }
}

pub(super) fn is_atom(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        || s.parse::<f64>().is_ok()
}

pub(super) fn unary(f: UnaryFn, v: &Val) -> Val {
    let x = &v.code;
    match v.kind {
        Kind::Float => {
            let code = match f {
                UnaryFn::Neg => format!("(-{x})"),
                UnaryFn::Exp => format!("dlc_exp({x})"),
                UnaryFn::Exp2 => format!("dlc_exp2({x})"),
                UnaryFn::Log => format!("dlc_log({x})"),
                UnaryFn::Log2 => format!("dlc_log2({x})"),
                UnaryFn::Sqrt => format!("dlc_sqrt({x})"),
                UnaryFn::Rsqrt => format!("dlc_rsqrt({x})"),
                UnaryFn::Recip => format!("dlc_recip({x})"),
                UnaryFn::Relu => format!("dlc_relu({x})"),
                UnaryFn::Abs => format!("dlc_abs({x})"),
                UnaryFn::Erf => format!("dlc_erf({x})"),
                UnaryFn::Sigmoid => format!("dlc_sigmoid({x})"),
                UnaryFn::Tanh => format!("dlc_tanh({x})"),
            };
            Val {
                code,
                kind: Kind::Float,
            }
        }
        Kind::I32 => {
            let code = match f {
                UnaryFn::Neg => format!("dlc_isub(0, {x})"),
                UnaryFn::Abs => format!("({x} < 0 ? dlc_isub(0, {x}) : {x})"),
                UnaryFn::Relu => format!("({x} > 0 ? {x} : 0)"),
                _ => {
                    let fv = unary(
                        f,
                        &Val {
                            code: format!("((float){x})"),
                            kind: Kind::Float,
                        },
                    );
                    format!("dlc_cvt<int>({})", fv.code)
                }
            };
            Val {
                code,
                kind: Kind::I32,
            }
        }
        Kind::Bool => {
            let fv = unary(
                f,
                &Val {
                    code: format!("({x} ? 1.0f : 0.0f)"),
                    kind: Kind::Float,
                },
            );
            Val {
                code: format!("({} != 0.0f)", fv.code),
                kind: Kind::Bool,
            }
        }
    }
}

pub(super) fn binary(f: BinaryFn, k: Kind, a: &Val, b: &Val) -> Val {
    if f.is_comparison() {
        // Compared in the join of the operands' kinds.
        let ck = a.kind.join(b.kind);
        let (x, y) = (convert(a, ck), convert(b, ck));
        let op = match f {
            BinaryFn::Cmplt => "<",
            BinaryFn::Cmple => "<=",
            BinaryFn::Cmpeq => "==",
            _ => "!=",
        };
        return Val {
            code: format!("({x} {op} {y})"),
            kind: Kind::Bool,
        };
    }
    let (x, y) = (convert(a, k), convert(b, k));
    let code = match k {
        Kind::Float => match f {
            BinaryFn::Add => format!("({x} + {y})"),
            BinaryFn::Sub => format!("({x} - {y})"),
            BinaryFn::Mul => format!("({x} * {y})"),
            BinaryFn::Div => format!("({x} / {y})"),
            BinaryFn::Idiv => format!("truncf({x} / {y})"),
            BinaryFn::Max => format!("dlc_max({x}, {y})"),
            BinaryFn::Min => format!("dlc_min({x}, {y})"),
            _ => format!("dlc_pow({x}, {y})"),
        },
        Kind::I32 => match f {
            BinaryFn::Add => format!("dlc_iadd({x}, {y})"),
            BinaryFn::Sub => format!("dlc_isub({x}, {y})"),
            BinaryFn::Mul => format!("dlc_imul({x}, {y})"),
            BinaryFn::Div | BinaryFn::Idiv => format!("dlc_idiv({x}, {y})"),
            BinaryFn::Max => format!("({x} > {y} ? {x} : {y})"),
            BinaryFn::Min => format!("({x} < {y} ? {x} : {y})"),
            _ => format!("dlc_cvt<int>(dlc_pow((float){x}, (float){y}))"),
        },
        Kind::Bool => match f {
            BinaryFn::Add | BinaryFn::Max => format!("({x} || {y})"),
            BinaryFn::Mul | BinaryFn::Min => format!("({x} && {y})"),
            BinaryFn::Sub => format!("({x} != {y})"),
            _ => {
                let fx = convert(a, Kind::Float);
                let fy = convert(b, Kind::Float);
                format!("(dlc_pow({fx}, {fy}) != 0.0f)")
            }
        },
    };
    Val { code, kind: k }
}
