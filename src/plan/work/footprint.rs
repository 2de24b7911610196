//! The part of an input a kernel's reads touch (issue 23): a consumer that reads a slice of a
//! larger tensor (the Q columns of a merged Q‖K‖V GEMM's output, a `shrink` absorbed into the
//! kernel) loads that slice from DRAM, not the whole tensor.
//!
//! Per input dimension the hull of the index intervals of every read of the input — each index
//! expression evaluated over the box of the iters and the enclosing reduce axes — clamped to
//! the dimension: `footprint = Π_d |[lo_d, hi_d] ∩ [0, n_d − 1]|`. The hull over-approximates
//! (a strided read counts its gaps), so the footprint never exceeds the whole input. A read the
//! intervals cannot bound (a data-dependent `gather`, a read under a broadcast or transpose
//! view, whose operand is indexed in another space) counts the whole input.

use super::{children, Cx};
use crate::ir::axis::AxisExpr;
use crate::ir::dim::Dim;
use crate::ir::region::Expr;
use std::collections::BTreeMap;

/// Per input dimension the hull `[lo, hi]` of the indices read so far (`None`: not bounded,
/// the whole input counts).
type Hull = Option<Vec<(i64, i64)>>;

impl Cx<'_> {
    /// Elements of `input` (of shape `shape`) the region's reads touch, at most its size.
    pub(super) fn footprint(&self, input: &str, shape: &[Dim]) -> f64 {
        let whole = self.sizes.numel(shape) as f64;
        let mut hull: Hull = Some(Vec::new());
        let mut env: BTreeMap<String, i64> = self
            .r
            .iters
            .iter()
            .zip(self.iter_sizes)
            .map(|(i, d)| (i.name.clone(), self.size(d) as i64))
            .collect();
        for l in &self.r.lets {
            self.hull_reads(&l.expr, input, &l.name, &mut env, &mut hull);
            if hull.is_none() {
                return whole;
            }
        }
        let Some(h) = hull else { return whole };
        if h.is_empty() {
            return whole; // not read by any let (an output alias): priced as before
        }
        let mut elems = 1.0;
        for ((lo, hi), d) in h.iter().zip(shape) {
            let n = self.size(d) as i64;
            let (lo, hi) = ((*lo).max(0), (*hi).min(n - 1));
            elems *= (hi - lo + 1).max(0) as f64;
        }
        elems.min(whole)
    }

    fn hull_reads(
        &self,
        e: &Expr,
        input: &str,
        at: &str,
        env: &mut BTreeMap<String, i64>,
        hull: &mut Hull,
    ) {
        if hull.is_none() {
            return;
        }
        match e {
            Expr::Read { tensor, map } if tensor == input => {
                let iv: Option<Vec<(i64, i64)>> =
                    map.iter().map(|x| self.interval(x, env)).collect();
                *hull = match (hull.take(), iv) {
                    (Some(h), Some(iv)) if h.is_empty() => Some(iv),
                    (Some(h), Some(iv)) if h.len() == iv.len() => Some(
                        h.iter()
                            .zip(&iv)
                            .map(|(a, b)| (a.0.min(b.0), a.1.max(b.1)))
                            .collect(),
                    ),
                    _ => None,
                };
                return;
            }
            Expr::Gather { tensor, .. } if tensor == input => {
                *hull = None;
                return;
            }
            Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => {
                if self.reads(operand, input) {
                    *hull = None;
                }
                return;
            }
            Expr::Reduce(red) => {
                let Ok(ext) = self.extents(red, at) else {
                    *hull = None;
                    return;
                };
                let saved: Vec<_> = red.axes.iter().map(|a| (a, env.get(a).copied())).collect();
                for (a, n) in red.axes.iter().zip(ext) {
                    env.insert(a.clone(), n as i64);
                }
                self.hull_reads(&red.body, input, at, env, hull);
                for (a, old) in saved {
                    match old {
                        Some(v) => env.insert(a.clone(), v),
                        None => env.remove(a),
                    };
                }
                return;
            }
            _ => {}
        }
        for c in children(e) {
            self.hull_reads(c, input, at, env, hull);
        }
    }

    /// Whether `e` reads `input` (directly, not through a let).
    fn reads(&self, e: &Expr, input: &str) -> bool {
        match e {
            Expr::Read { tensor, .. } | Expr::Gather { tensor, .. } if tensor == input => true,
            _ => children(e).into_iter().any(|c| self.reads(c, input)),
        }
    }

    /// The interval of `x` over the box `env` (axis → extent; any other name is a symbol of
    /// the priced sizes).
    fn interval(&self, x: &AxisExpr, env: &BTreeMap<String, i64>) -> Option<(i64, i64)> {
        interval(x, &|n: &str| match env.get(n) {
            Some(ext) if *ext >= 1 => Some((0, ext - 1)),
            Some(_) => None,
            None => {
                let v = i64::try_from(self.sizes.numel(&[Dim::sym(n)])).ok()?;
                Some((v, v))
            }
        })
    }
}

/// The interval of `x` when each name ranges over `name`'s interval (`None`: unbounded).
pub(super) fn interval(
    x: &AxisExpr,
    name: &dyn Fn(&str) -> Option<(i64, i64)>,
) -> Option<(i64, i64)> {
    Some(match x {
        AxisExpr::Const(c) => (*c, *c),
        AxisExpr::Name(n) => name(n)?,
        AxisExpr::Add(ts) => ts.iter().try_fold((0i64, 0i64), |(a, b), t| {
            let (lo, hi) = interval(t, name)?;
            Some((a.checked_add(lo)?, b.checked_add(hi)?))
        })?,
        AxisExpr::Mul(a, b) => {
            let (a, b) = (interval(a, name)?, interval(b, name)?);
            let ps = [
                a.0.checked_mul(b.0)?,
                a.0.checked_mul(b.1)?,
                a.1.checked_mul(b.0)?,
                a.1.checked_mul(b.1)?,
            ];
            (*ps.iter().min()?, *ps.iter().max()?)
        }
        AxisExpr::FloorDiv(a, c) if *c > 0 => {
            let (lo, hi) = interval(a, name)?;
            (lo.div_euclid(*c), hi.div_euclid(*c))
        }
        AxisExpr::FloorDiv(..) => return None,
        AxisExpr::Min(a, b) | AxisExpr::Max(a, b) => {
            let (a, b) = (interval(a, name)?, interval(b, name)?);
            match x {
                AxisExpr::Min(..) => (a.0.min(b.0), a.1.min(b.1)),
                _ => (a.0.max(b.0), a.1.max(b.1)),
            }
        }
    })
}
