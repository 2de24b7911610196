//! Contraction patterns (seed 001 §5.1): a `reduce(sum)` whose body is a `mul` of two
//! (possibly cast, possibly `select`-guarded) reads is a `matmul` when every operand index is a
//! single loop variable, a `conv` when some index is an affine combination `a*x + b*y + c`.

use super::aff::{Aff, Atom};
use crate::ir::axis::AxisExpr;
use crate::ir::region::{BinaryFn, Expr};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// `matmul` or `conv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternKind {
    /// Every operand index is a single loop variable.
    Matmul,
    /// Some operand index is an affine combination of loop variables (strides, offsets).
    Conv,
}

/// One detected contraction.
#[derive(Clone, Debug, PartialEq)]
pub struct Pattern {
    /// `matmul` or `conv`.
    pub kind: PatternKind,
    /// Left operand: tensor and index.
    pub lhs: (String, Vec<Aff>),
    /// Right operand: tensor and index.
    pub rhs: (String, Vec<Aff>),
    /// The output (free) dimensions.
    pub out_idx: Vec<String>,
    /// The reduce dimensions.
    pub reduce_idx: Vec<String>,
}

/// An operand of the product: a read, seen through casts, views, pointwise lets and a pad
/// `select(pred, read, 0)`.
fn operand<'e>(e: &'e Expr, lets: &BTreeMap<&str, &'e Expr>) -> Option<(&'e str, &'e [AxisExpr])> {
    match e {
        Expr::Read { tensor, map } => Some((tensor, map)),
        Expr::Cast { x, .. } => operand(x, lets),
        Expr::BroadcastInDim { operand: x, .. } | Expr::Transpose { operand: x, .. } => {
            operand(x, lets)
        }
        Expr::Select {
            then, otherwise, ..
        } if matches!(**otherwise, Expr::Const(c) if c == 0.0) => operand(then, lets),
        Expr::Let(n) => match lets.get(n.as_str()) {
            Some(Expr::Reduce(_)) | None => None,
            Some(x) => operand(x, lets),
        },
        _ => None,
    }
}

/// The pattern of `sum(body)` over `reduce_idx`, if any. `index` maps a read's map to its
/// affine index over the statement's dimensions.
pub fn detect(
    body: &Expr,
    lets: &BTreeMap<&str, &Expr>,
    index: &dyn Fn(&[AxisExpr]) -> Option<Vec<Aff>>,
    out_idx: &[String],
    reduce_idx: &[String],
) -> Option<Pattern> {
    let body = match body {
        Expr::Cast { x, .. } => x,
        b => b,
    };
    let Expr::Binary(BinaryFn::Mul, a, b) = body else {
        return None;
    };
    let (ta, ma) = operand(a, lets)?;
    let (tb, mb) = operand(b, lets)?;
    let (ia, ib) = (index(ma)?, index(mb)?);
    let all: Vec<&Aff> = ia.iter().chain(ib.iter()).collect();
    let single = all.iter().all(|x| x.as_var().is_some());
    let affine = all
        .iter()
        .all(|x| x.terms.keys().all(|t| matches!(t, Atom::Var(_))) && !x.terms.is_empty());
    let kind = if single {
        PatternKind::Matmul
    } else if affine {
        PatternKind::Conv
    } else {
        return None;
    };
    Some(Pattern {
        kind,
        lhs: (ta.to_string(), ia),
        rhs: (tb.to_string(), ib),
        out_idx: out_idx.to_vec(),
        reduce_idx: reduce_idx.to_vec(),
    })
}

impl Pattern {
    /// The seed 001 §5.2 `attrs`: `pattern`, `lhs_idx`, `rhs_idx`, `out_idx`, `reduce_idx` and
    /// `affine_offsets` (per operand tensor, each compound index dimension with its stride per
    /// variable and its offset; `{}` for a matmul). `order` orders the terms.
    pub fn attrs(&self, order: &[String]) -> Value {
        let idx = |v: &[Aff]| -> Vec<String> { v.iter().map(|a| a.isl(order)).collect() };
        let mut offsets = serde_json::Map::new();
        for (t, ix) in [&self.lhs, &self.rhs] {
            let dims: Vec<Value> = ix
                .iter()
                .enumerate()
                .filter(|(_, a)| a.as_var().is_none())
                .map(|(j, a)| {
                    let mut strides = serde_json::Map::new();
                    let mut vars: Vec<(&String, i64)> = a
                        .terms
                        .iter()
                        .filter_map(|(t, c)| match t {
                            Atom::Var(v) => Some((v, *c)),
                            _ => None,
                        })
                        .collect();
                    vars.sort_by_key(|(v, _)| order.iter().position(|o| o == *v));
                    for (v, c) in vars {
                        strides.insert(v.clone(), json!(c));
                    }
                    json!({"dim": j, "index": a.isl(order), "strides": strides,
                           "offset": a.konst})
                })
                .collect();
            if !dims.is_empty() {
                offsets.insert(t.clone(), Value::Array(dims));
            }
        }
        json!({
            "pattern": match self.kind {
                PatternKind::Matmul => "matmul",
                PatternKind::Conv => "conv",
            },
            "lhs_idx": idx(&self.lhs.1),
            "rhs_idx": idx(&self.rhs.1),
            "out_idx": self.out_idx,
            "reduce_idx": self.reduce_idx,
            "affine_offsets": offsets,
        })
    }
}
