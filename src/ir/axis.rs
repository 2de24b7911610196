//! Index expressions shared by the layers that address tensors by named axes: RB-SSA regions
//! (`read` maps and `select` predicates, seed 001 §6.3) and the e-graph's `read` node
//! ([`AccessMap`]). Affine in axes with axis-free coefficients, plus `floordiv` by a positive
//! constant (seed 001 §4.3 invariant 1); JSON forms live in `crate::ir::region::json`.

use crate::ir::dim::Dim;
use ordered_float::OrderedFloat;

/// An index expression: affine in axes (with axis-free coefficients) plus floordiv.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AxisExpr {
    /// An integer.
    Const(i64),
    /// An axis in scope, else a symbol.
    Name(String),
    /// A sum of two or more terms.
    Add(Vec<AxisExpr>),
    /// A product; one side must be free of axes.
    Mul(Box<AxisExpr>, Box<AxisExpr>),
    /// `floor(e / c)`, `c > 0`.
    FloorDiv(Box<AxisExpr>, i64),
}

/// Comparison operators of predicates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CmpOp {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
}

/// A predicate over axes and symbols.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pred {
    /// Conjunction.
    And(Vec<Pred>),
    /// Disjunction.
    Or(Vec<Pred>),
    /// `a op b`.
    Cmp(CmpOp, AxisExpr, AxisExpr),
}

/// The access of a `read` e-node (seed 001 §6.5: a movement chain folded into one map):
/// `out[i] = guard(i) ? x[index(i)] : fill`. Output axes are the names `i0`, `i1`, … (one per
/// entry of `shape`); every other name in `index` / `guard` is a size symbol.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccessMap {
    /// Shape of the result.
    pub shape: Vec<Dim>,
    /// One index expression per dimension of the operand.
    pub index: Vec<AxisExpr>,
    /// Where the read is valid; `None` means everywhere.
    pub guard: Option<Pred>,
    /// Value outside the guard (PAD's value).
    pub fill: OrderedFloat<f64>,
}

/// The name of output axis `k` in an [`AccessMap`].
pub fn axis_name(k: usize) -> String {
    format!("i{k}")
}

impl std::fmt::Display for AxisExpr {
    /// Compact infix form (`2*i0+i1+-1`, `(i0+i1)//4`), used in printed e-nodes and messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AxisExpr::Const(c) => write!(f, "{c}"),
            AxisExpr::Name(n) => f.write_str(n),
            AxisExpr::Add(ts) => {
                for (k, t) in ts.iter().enumerate() {
                    if k > 0 {
                        f.write_str("+")?;
                    }
                    write!(f, "{t}")?;
                }
                Ok(())
            }
            AxisExpr::Mul(a, b) => {
                let wrap = |e: &AxisExpr| match e {
                    AxisExpr::Add(_) => format!("({e})"),
                    _ => e.to_string(),
                };
                write!(f, "{}*{}", wrap(a), wrap(b))
            }
            AxisExpr::FloorDiv(e, c) => match **e {
                AxisExpr::Const(_) | AxisExpr::Name(_) => write!(f, "{e}//{c}"),
                _ => write!(f, "({e})//{c}"),
            },
        }
    }
}

impl std::fmt::Display for CmpOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CmpOp::Ge => ">=",
            CmpOp::Gt => ">",
            CmpOp::Le => "<=",
            CmpOp::Lt => "<",
            CmpOp::Eq => "==",
        })
    }
}

impl std::fmt::Display for Pred {
    /// `(a>=0&a<H)`, `(p|q)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |f: &mut std::fmt::Formatter<'_>, ps: &[Pred], sep: &str| {
            f.write_str("(")?;
            for (k, p) in ps.iter().enumerate() {
                if k > 0 {
                    f.write_str(sep)?;
                }
                write!(f, "{p}")?;
            }
            f.write_str(")")
        };
        match self {
            Pred::And(ps) => list(f, ps, "&"),
            Pred::Or(ps) => list(f, ps, "|"),
            Pred::Cmp(op, a, b) => write!(f, "{a}{op}{b}"),
        }
    }
}
