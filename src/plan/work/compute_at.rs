//! The work of a compute-at kernel (seed 003): a consumer window reduction (a pooling window)
//! whose body embeds a producer reduction (a convolution) computed at every window point
//! (`crate::synth` embeds it; `crate::poly::compute_at` states the legality).
//!
//! The templates: the seed's consumer-driven loop nest (the pointwise template: one thread per
//! consumer point, the window and the producer's fold as loops), and where the consumer is a
//! plain reduction the cooperative window (the reduce template: the threads of a consumer
//! point split its window, [`ComputeAtWork::cooperative`]). What it executes is counted
//! exactly, recomputation included: the producer's fold runs `points × window` times, so
//! overlapping windows (stride < kernel) pay their recomputation in ops and loads. Every read
//! inside the nest is a load instruction ([`ComputeAtWork::loads`]); DRAM serves each input
//! once (neighbouring threads share the producer's inputs and weights through L1/L2).

use super::{children, Cx, WorkError};
use crate::ir::region::Expr;
use serde::Serialize;

/// Sizes of a compute-at kernel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ComputeAtWork {
    /// Consumer points (the kernel's threads' work items).
    pub points: f64,
    /// Window points per consumer point (the consumer reduction's extents).
    pub window: f64,
    /// Fold steps of one producer evaluation (its reduction's extents).
    pub producer_len: f64,
    /// Producer evaluations: `points × window` (each window point recomputes its producer
    /// point; overlapping windows recompute shared points).
    pub producer_evals: f64,
    /// Global-memory load instructions the whole kernel issues (per thread, summed).
    pub loads: f64,
    /// The consumer let's name.
    pub consumer: String,
    /// Whether the plain-reduction template runs it (`codegen::templates::reduce`, set by
    /// `applicability::as_emitted`): the threads of a consumer point split its window, each
    /// window point's producer fold a loop in its thread, the partials combined by warp
    /// shuffles (and shared memory across warps). Otherwise only the thread-per-point nest.
    pub cooperative: bool,
    /// The same region as a pooled tile (`super::pooled`), when it is one: a contraction
    /// tile whose epilogue folds the windows, priced beside the nest (`crate::cost`).
    pub tiled: Option<Box<super::KernelWork>>,
}

impl<'a> Cx<'a> {
    /// The compute-at shape of the region: the top-level reduce let with the most work among
    /// those whose body contains another reduction; `None` when there is none.
    pub(super) fn compute_at_shape(&self) -> Result<Option<ComputeAtWork>, WorkError> {
        let mut best: Option<ComputeAtWork> = None;
        for l in &self.r.lets {
            let Expr::Reduce(red) = &l.expr else { continue };
            let Some(inner) = self.largest_nested(&red.body, &l.name)? else {
                continue;
            };
            let points = self.lets[&l.name].evals;
            let window: f64 = self.extents(red, &l.name)?.iter().product();
            let producer_len: f64 = self.extents(inner, &l.name)?.iter().product();
            let loads = points * self.loads(&l.expr, &l.name)?;
            let w = ComputeAtWork {
                points,
                window,
                producer_len,
                producer_evals: points * window,
                loads,
                consumer: l.name.clone(),
                cooperative: false,
                tiled: None,
            };
            if best.as_ref().is_none_or(|b| {
                w.producer_evals * w.producer_len > b.producer_evals * b.producer_len
            }) {
                best = Some(w);
            }
        }
        Ok(best)
    }

    /// The nested reduction of `e` (not `e` itself) folding the most elements.
    fn largest_nested(
        &self,
        e: &'a Expr,
        at: &str,
    ) -> Result<Option<&'a crate::ir::region::Reduce>, WorkError> {
        let mut best: Option<(f64, &'a crate::ir::region::Reduce)> = None;
        let mut stack = vec![e];
        while let Some(x) = stack.pop() {
            if let Expr::Reduce(r) = x {
                let n: f64 = self.extents(r, at)?.iter().product();
                if best.is_none_or(|(b, _)| n > b) {
                    best = Some((n, r));
                }
                stack.push(&r.body);
                continue;
            }
            stack.extend(children(x));
        }
        Ok(best.map(|(_, r)| r))
    }

    /// Loads one evaluation of `e` issues: each read once per evaluation of its enclosing
    /// reductions' folds.
    fn loads(&self, e: &Expr, at: &str) -> Result<f64, WorkError> {
        Ok(match e {
            Expr::Read { .. } | Expr::Gather { .. } => 1.0,
            Expr::Reduce(r) => {
                let n: f64 = self.extents(r, at)?.iter().product();
                n * self.loads(&r.body, at)?
            }
            _ => {
                let mut s = 0.0;
                for c in children(e) {
                    s += self.loads(c, at)?;
                }
                s
            }
        })
    }
}
