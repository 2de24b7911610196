//! The work of a region run as the *pointwise fold* (`codegen::templates::pointwise`: one
//! thread per chunk of output points, every reduce folded serially by the thread), counted as
//! the scalar emitter (`codegen::scalar::Emitter`) executes it: a let is computed in the
//! innermost scope that binds one of its free iters and reused there; a reduce that rebinds a
//! free iter of a let recomputes that let at each step. So a softmax whose scores are a
//! contraction (`s = Σ_k q·k`, then `max_n s` and `Σ_n exp(s − max)`) recomputes the scores'
//! `K`-fold at every key of each row reduction, per thread: `2N + 1` folds of `D` per output
//! point, where the work analysis (`super::analyze`) counts each let once per point of its free
//! iters (one fold of `D` per score).
//!
//! A thread's `lanes` output points along the innermost iter share what does not depend on it
//! (the emitter hoists those lets out of the lane loop): [`FoldOps::per_point`].

use super::exprs::{binary_cost, pred_atoms, unary_cost};
use super::{Cx, Ops, WorkError};
use crate::ir::region::verify::children;
use crate::ir::region::Expr;
use std::collections::BTreeSet;

/// Executed arithmetic and loads of one thread of the pointwise fold: the part its lanes share
/// and the part each lane runs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FoldOps {
    /// Arithmetic that does not depend on the innermost iter (once per thread).
    pub shared: Ops,
    /// Element loads that do not depend on the innermost iter.
    pub shared_loads: f64,
    /// Arithmetic per lane (output point).
    pub lane: Ops,
    /// Element loads per lane.
    pub lane_loads: f64,
}

impl FoldOps {
    /// Arithmetic and loads per output point when a thread computes `lanes` points.
    pub fn per_point(&self, lanes: f64) -> (Ops, f64) {
        let l = lanes.max(1.0);
        let ops = Ops {
            tensor: 0.0,
            simt: self.shared.simt / l + self.lane.simt,
            sfu: self.shared.sfu / l + self.lane.sfu,
        };
        (ops, self.shared_loads / l + self.lane_loads)
    }
}

/// One scope of the walk: the iters it binds, its iterations per thread, the lets computed in it.
struct Scope {
    axes: BTreeSet<String>,
    mult: f64,
    memo: BTreeSet<String>,
}

struct Walk<'c, 'a> {
    cx: &'c Cx<'a>,
    scopes: Vec<Scope>,
    ops: Ops,
    loads: f64,
}

impl Walk<'_, '_> {
    fn mult(&self) -> f64 {
        self.scopes.last().map_or(1.0, |s| s.mult)
    }

    /// The let `name` as the emitter's `let_value`: memoized unless an inner scope rebinds one
    /// of its free iters; else computed in the innermost scope binding one of them.
    fn let_value(&mut self, name: &str) -> Result<(), WorkError> {
        let cx = self.cx;
        let Some(info) = cx.lets.get(name) else {
            return Ok(());
        };
        let mut rebound = false;
        for s in self.scopes.iter().rev() {
            if s.memo.contains(name) && !rebound {
                return Ok(());
            }
            if s.axes.iter().any(|a| info.free.contains(a)) {
                rebound = true;
            }
        }
        let t = (0..self.scopes.len())
            .rev()
            .find(|&i| self.scopes[i].axes.iter().any(|a| info.free.contains(a)))
            .unwrap_or(0);
        let inner = self.scopes.split_off(t + 1);
        let r = self.expr(info.expr, name);
        self.scopes[t].memo.insert(name.to_string());
        self.scopes.extend(inner);
        r
    }

    fn expr(&mut self, e: &Expr, at: &str) -> Result<(), WorkError> {
        let m = self.mult();
        match e {
            Expr::Let(n) => return self.let_value(n),
            Expr::Reduce(red) => {
                let n: f64 = self.cx.extents(red, at)?.iter().product();
                self.scopes.push(Scope {
                    axes: red.axes.iter().cloned().collect(),
                    mult: m * n,
                    memo: BTreeSet::new(),
                });
                let r = self.expr(&red.body, at);
                self.ops.simt += m * n; // the accumulation
                self.scopes.pop();
                return r;
            }
            Expr::Read { .. } | Expr::Gather { .. } => self.loads += m,
            Expr::Unary(f, _) => {
                let (simt, sfu) = unary_cost(*f);
                self.ops.simt += simt * m;
                self.ops.sfu += sfu * m;
            }
            Expr::Binary(f, _, _) => {
                let (simt, sfu) = binary_cost(*f);
                self.ops.simt += simt * m;
                self.ops.sfu += sfu * m;
            }
            Expr::Select { pred, .. } => self.ops.simt += (1 + pred_atoms(pred)) as f64 * m,
            _ => {}
        }
        if matches!(e, Expr::Where(..) | Expr::Cast { .. } | Expr::Gather { .. }) {
            self.ops.simt += m;
        }
        for c in children(e) {
            self.expr(c, at)?;
        }
        Ok(())
    }
}

/// [`FoldOps`] of the region of `cx` (its yields evaluated at one output point, the innermost
/// iter bound in a lane scope of its own).
pub(super) fn fold_ops(cx: &Cx) -> Result<FoldOps, WorkError> {
    let iters: Vec<String> = cx.r.iters.iter().map(|i| i.name.clone()).collect();
    let Some((inner, outer)) = iters.split_last() else {
        return Ok(FoldOps::default());
    };
    let mut w = Walk {
        cx,
        scopes: vec![Scope {
            axes: outer.iter().cloned().collect(),
            mult: 1.0,
            memo: BTreeSet::new(),
        }],
        ops: Ops::default(),
        loads: 0.0,
    };
    // The shared part: every let the yields reach that is free of the innermost iter, computed
    // first in the outer scope (the walk below then finds them memoized).
    w.scopes.push(Scope {
        axes: [inner.clone()].into_iter().collect(),
        mult: 1.0,
        memo: BTreeSet::new(),
    });
    for y in &cx.r.yields {
        w.let_value(&y.from)?;
    }
    let total = (w.ops, w.loads);
    // What went to the outer scope's memo was computed there, once per thread; the rest once
    // per lane: the outer lets walked alone are the shared part.
    let outer_lets: Vec<String> = w.scopes[0].memo.iter().cloned().collect();
    let mut o = Walk {
        cx,
        scopes: vec![Scope {
            axes: outer.iter().cloned().collect(),
            mult: 1.0,
            memo: BTreeSet::new(),
        }],
        ops: Ops::default(),
        loads: 0.0,
    };
    for l in &outer_lets {
        o.let_value(l)?;
    }
    let (shared, shared_loads) = (o.ops, o.loads);
    Ok(FoldOps {
        shared,
        shared_loads,
        lane: Ops {
            tensor: 0.0,
            simt: (total.0.simt - shared.simt).max(0.0),
            sfu: (total.0.sfu - shared.sfu).max(0.0),
        },
        lane_loads: (total.1 - shared_loads).max(0.0),
    })
}
