//! Value kinds of region expressions (see "Semantics" in the `region` module doc): every value is
//! an fp32, i32 or bool value, and an elementwise op computes in the kind of its operands, as
//! Tiny's ops compute in their dtype. Without kinds, i32 arithmetic would be rounded through fp32
//! (`i32::MAX + 0` would come back as `i32::MIN`).

use super::Expr;
use crate::ir::dtype::{wrap_i32, DType};

/// What an expression's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// 0.0 or 1.0.
    Bool,
    /// An integer in the i32 range.
    I32,
    /// A float (fp16 and bf16 values are fp32 values).
    Float,
}

impl Kind {
    /// The kind of a dtype's values.
    pub fn of(dt: DType) -> Kind {
        match dt {
            DType::Bool => Kind::Bool,
            DType::I32 => Kind::I32,
            DType::F16 | DType::BF16 | DType::F32 => Kind::Float,
        }
    }

    /// The kind two operands are combined in: float wins over i32, i32 over bool.
    pub fn join(self, o: Kind) -> Kind {
        self.max(o)
    }

    /// The dtype an op of this kind rounds its result to.
    pub fn dtype(self) -> DType {
        match self {
            Kind::Bool => DType::Bool,
            Kind::I32 => DType::I32,
            Kind::Float => DType::F32,
        }
    }

    /// Rounds a computed value to this kind (fp32; i32 wrapping; bool: non-zero is true).
    pub fn round(self, x: f64) -> f64 {
        self.dtype().round(x)
    }
}

/// The kind of a constant on its own: an integer in the i32 range is exact (`i32::MAX`, the
/// identity of an i32 `min`), any other number is fp32.
pub fn const_kind(c: f64) -> Kind {
    if c.fract() == 0.0 && c >= i32::MIN as f64 && c <= i32::MAX as f64 {
        Kind::I32
    } else {
        Kind::Float
    }
}

/// The value a constant denotes: exact for i32-range integers, else rounded to fp32.
pub fn const_value(c: f64) -> f64 {
    match const_kind(c) {
        Kind::Float => DType::F32.round(c),
        _ => c,
    }
}

/// The kind operands combine in: constants are weak (they adopt the kind of the other operands,
/// as Tiny's immediates adopt their node's dtype); only when every operand is a constant do the
/// constants' own kinds decide.
pub fn operands_kind(ops: &[(Kind, bool)]) -> Kind {
    let strong = ops.iter().filter(|(_, weak)| !weak).map(|(k, _)| *k);
    let all = ops.iter().map(|(k, _)| *k);
    strong
        .clone()
        .reduce(Kind::join)
        .or_else(|| all.reduce(Kind::join))
        .unwrap_or(Kind::Float)
}

/// Statically typed expressions: the kind of `e`, with the dtypes of region inputs and the kinds
/// of earlier lets looked up by name (unknown names count as fp32).
pub struct Kinds<'a> {
    /// The dtype of an input.
    pub input: &'a dyn Fn(&str) -> Option<DType>,
    /// The kind of a let.
    pub let_kind: &'a dyn Fn(&str) -> Option<Kind>,
}

impl Kinds<'_> {
    /// The kind of `e`'s value.
    pub fn of(&self, e: &Expr) -> Kind {
        match e {
            Expr::Const(c) => const_kind(*c),
            Expr::Let(n) => (self.let_kind)(n).unwrap_or(Kind::Float),
            Expr::Read { tensor, .. } | Expr::Gather { tensor, .. } => {
                (self.input)(tensor).map_or(Kind::Float, Kind::of)
            }
            Expr::Index(_) => Kind::I32,
            Expr::Cast { to, .. } => Kind::of(*to),
            Expr::Reduce(r) => r.dtype.map_or(Kind::Float, Kind::of),
            Expr::Scan(s) => Kind::of(s.dtype),
            Expr::Unary(_, x) => self.of(x),
            Expr::Binary(f, _, _) if f.is_comparison() => Kind::Bool,
            Expr::Binary(_, a, b) => self.operands(&[a, b]),
            Expr::Where(_, a, b) => self.operands(&[a, b]),
            Expr::Select {
                then, otherwise, ..
            } => self.operands(&[then, otherwise]),
            Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => {
                self.of(operand)
            }
        }
    }

    /// The kind the operands `es` of one op combine in ([`operands_kind`]).
    pub fn operands(&self, es: &[&Expr]) -> Kind {
        let ks: Vec<(Kind, bool)> = es
            .iter()
            .map(|e| (self.of(e), matches!(e, Expr::Const(_))))
            .collect();
        operands_kind(&ks)
    }
}

/// `a * b` for i32 values, exact and wrapping (an f64 product of two i32 values can lose bits).
pub fn imul(a: f64, b: f64) -> f64 {
    (wrap_i32(a) as i64).wrapping_mul(wrap_i32(b) as i64) as i32 as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_are_exact_i32_or_fp32() {
        assert_eq!(const_kind(i32::MAX as f64), Kind::I32);
        assert_eq!(const_value(i32::MAX as f64), i32::MAX as f64);
        assert_eq!(const_kind(2147483648.0), Kind::Float);
        assert_eq!(const_kind(0.5), Kind::Float);
        assert_eq!(const_value(0.1), 0.1f32 as f64);
    }

    #[test]
    fn constants_adopt_the_other_operand() {
        assert_eq!(
            operands_kind(&[(Kind::Bool, false), (Kind::I32, true)]),
            Kind::Bool
        );
        assert_eq!(
            operands_kind(&[(Kind::I32, true), (Kind::Float, true)]),
            Kind::Float
        );
        assert_eq!(
            operands_kind(&[(Kind::I32, false), (Kind::Float, false)]),
            Kind::Float
        );
        assert_eq!(operands_kind(&[(Kind::I32, true)]), Kind::I32);
    }

    #[test]
    fn i32_products_are_exact() {
        assert_eq!(imul(-1.0, i32::MAX as f64), -(i32::MAX as f64));
        assert_eq!(imul(65537.0, 65537.0), 131073.0);
    }
}
