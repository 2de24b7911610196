//! The row shapes of a kernel without a contraction ([`super::analyze`]): a scan's lines, a
//! reduction's rows, length and passes.

use super::exprs::*;
use super::{Cx, Shape};
use crate::ir::region::Expr;
use std::collections::{BTreeMap, BTreeSet};

impl Cx<'_> {
    /// The scan shape of a region with a `scan` let: lines × the scanned iter's extent.
    pub(super) fn scan_shape(&self, iters: &[(String, f64)], out_elems: f64) -> Option<Shape> {
        let axis = self.r.lets.iter().find_map(|l| match &l.expr {
            Expr::Scan(sc) => Some(sc.axis.clone()),
            _ => None,
        })?;
        let len = iters.iter().find(|(n, _)| *n == axis)?.1;
        Some(Shape::Scan {
            lines: if len > 0.0 { out_elems / len } else { 0.0 },
            len,
        })
    }

    /// A reduction kernel: the reduce let folding the most elements, with the passes its chain
    /// of dependent reductions takes.
    pub(super) fn reduction_shape(&self) -> Option<Shape> {
        let mut best: Option<(f64, f64, bool)> = None;
        let mut depth: BTreeMap<String, u32> = BTreeMap::new();
        for l in &self.r.lets {
            let mut deps = BTreeSet::new();
            self.let_deps(&l.expr, &mut deps);
            let mut d = chain_depth(&deps, &depth);
            if let Expr::Reduce(red) = &l.expr {
                d += 1;
                let len: f64 = self.extents(red, &l.name).ok()?.iter().product();
                let rows = self.lets[&l.name].evals;
                let mut body_axes = BTreeSet::new();
                self.axes_of(&red.body, &red.axes, &mut body_axes);
                let window = red.axes.iter().all(|a| {
                    body_axes.contains(a)
                        && mixes_axes(&red.body, std::slice::from_ref(a), &self.r.iters)
                });
                if best.is_none_or(|(r, n, _)| rows * len > r * n) {
                    best = Some((rows, len, window));
                }
            }
            depth.insert(l.name.clone(), d);
        }
        let passes = 1 + depth.values().copied().max().unwrap_or(0);
        best.map(|(rows, len, window)| Shape::Reduction {
            rows,
            len,
            passes,
            window,
            vec_cap: 16,
            plain: false,
        })
    }

    /// The last axis of the last reduce let (a reduction's fastest reduce axis).
    pub(super) fn last_reduce_axis(&self) -> Option<String> {
        self.r.lets.iter().rev().find_map(|l| match &l.expr {
            Expr::Reduce(red) => red.axes.last().cloned(),
            _ => None,
        })
    }
}
