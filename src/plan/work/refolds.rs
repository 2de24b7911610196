//! What the pointwise template adds when it runs a contraction region ([`Refolds`]): the
//! reduce lets other than the contractions a tile sums, folded again at every output point.

use super::{Cx, LetInfo, WorkError};
use crate::ir::region::verify::children;
use crate::ir::region::Expr;
use serde::Serialize;

/// The reduce lets of a contraction region other than the main one, as the pointwise template
/// computes them: no value is shared between threads, and a thread computes `lanes` output
/// points along the fastest output axis — a let that depends on that axis once per point
/// (`lane`), one that does not once per thread (`thread`: counted here per output point, divided
/// by the plan's lanes where they are known, `cost::roofline`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Refolds {
    /// Lets that depend on the fastest output axis.
    pub lane: Refold,
    /// Lets that do not (a normalization's row sums, a softmax's max and sum along the keys).
    pub thread: Refold,
}

/// One part of [`Refolds`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Refold {
    /// Operations beyond those [`super::KernelWork::ops`] counts (each let's fold times the output
    /// points it was not counted at).
    pub ops: f64,
    /// Folded elements, nested folds multiplied out, at every output point: each a load.
    pub loads: f64,
}

impl Refold {
    /// Adds `o`'s operations and loads.
    pub fn add(&mut self, o: &Refold) {
        self.ops += o.ops;
        self.loads += o.loads;
    }
}

impl Refolds {
    /// Adds `o`'s parts to this one's.
    pub fn add(&mut self, o: &Refolds) {
        self.lane.add(&o.lane);
        self.thread.add(&o.thread);
    }
}

impl<'a> Cx<'a> {
    /// [`Refolds`] of every reduce let but the contractions the tile sums (`summed`: the main
    /// one and its [`Gemm::second`]), at `out_elems` output points; `fast` is the fastest
    /// output axis.
    pub(super) fn refolds(
        &self,
        summed: &[String],
        out_elems: f64,
        fast: Option<&str>,
    ) -> Result<Refolds, WorkError> {
        let mut r = Refolds::default();
        for l in &self.r.lets {
            if summed.contains(&l.name) || !matches!(l.expr, Expr::Reduce(_)) {
                continue;
            }
            let info = &self.lets[&l.name];
            let part = match fast {
                Some(f) if !info.free.contains(f) => &mut r.thread,
                _ => &mut r.lane,
            };
            let again = (out_elems - info.evals).max(0.0);
            part.ops += self.expr_ops(&l.expr, &l.name, Some(&[]))?.total() * again;
            part.loads += self.fold_elems(&l.expr, &l.name, &[])? * out_elems;
        }
        Ok(r)
    }

    /// Innermost evaluations of one evaluation of `e` folded at an output point: the product of
    /// the extents of nested reductions (`Σ_n Σ_k`: N·K), summed over sibling folds, through
    /// the lets [`Self::refolded_let`] recomputes; 0 without a reduction.
    pub(super) fn fold_elems(
        &self,
        e: &Expr,
        at: &str,
        folds: &[String],
    ) -> Result<f64, WorkError> {
        if let Expr::Reduce(red) = e {
            let n: f64 = self.extents(red, at)?.iter().product();
            let inner = [folds, &red.axes].concat();
            return Ok(n * self.fold_elems(&red.body, at, &inner)?.max(1.0));
        }
        if let Some((name, l)) = self.refolded_let(e, Some(folds)) {
            return self.fold_elems(l.expr, name, folds);
        }
        let mut s = 0.0;
        for c in children(e) {
            s += self.fold_elems(c, at, folds)?;
        }
        Ok(s)
    }

    /// The let `e` reads when a fold over `folds` (the axes of the reductions around `e`)
    /// recomputes it at every step: the pointwise template shares nothing between the steps of
    /// a fold, so a let that varies along a folded axis — the `Σ_k a·w` of every `n` a
    /// LayerNorm's variance `Σ_n (h − mean)²` reads — is evaluated again at each. `None` for
    /// any other expression, or without `folds` (the let is counted once per point of its
    /// free iters).
    pub(super) fn refolded_let<'e>(
        &'e self,
        e: &'e Expr,
        folds: Option<&[String]>,
    ) -> Option<(&'e str, &'e LetInfo<'a>)> {
        let (Expr::Let(name), Some(folds)) = (e, folds) else {
            return None;
        };
        let l = self.lets.get(name)?;
        folds
            .iter()
            .any(|f| l.free.contains(f))
            .then_some((name.as_str(), l))
    }
}
