//! The main contraction of a kernel ([`super::analyze`]): which `reduce(sum, K, mul(a, b))` it
//! is and its GEMM view (`M`/`N`/batch/`K` axes from the operands' index maps, prologue and
//! epilogue, the fill of a guarded operand, bytes per operand).

use super::exprs::*;
use super::{Cx, Fill, Gemm, GemmAxes, MainContraction, Ops, Pattern, Refolds, WorkError};
use crate::ir::region::verify::reduces_in;
use crate::ir::region::{Expr, Reduce};
use std::collections::{BTreeMap, BTreeSet};

impl<'a> Cx<'a> {
    /// The largest `reduce(sum, K, mul(a, b))` whose operands both read inputs.
    pub(super) fn main_contraction(&self) -> Result<Option<MainContraction<'a>>, WorkError> {
        let mut best: Option<(f64, MainContraction<'a>)> = None;
        for l in &self.r.lets {
            let Expr::Reduce(red) = &l.expr else { continue };
            let Some((a, b)) = product_operands(red) else {
                continue;
            };
            if !self.reads_input(a) || !self.reads_input(b) || self.is_batched_dot(red, a, b) {
                continue;
            }
            let work =
                self.lets[&l.name].evals * self.extents(red, &l.name)?.iter().product::<f64>();
            if best.as_ref().is_none_or(|(w, _)| work > *w) {
                best = Some((
                    work,
                    MainContraction {
                        name: l.name.clone(),
                        red,
                        a,
                        b,
                    },
                ));
            }
        }
        if let Some((_, mc)) = &best {
            for side in [mc.a, mc.b] {
                if self.contains_contraction(side, &mut BTreeSet::new()) {
                    return Err(WorkError::NestedContraction);
                }
            }
        }
        Ok(best.map(|(_, mc)| mc))
    }

    /// Input reads of one evaluation of `e`, through the lets it reads that are not reductions
    /// (each once: `seen`); a reduction's reads are its own evaluations', not counted here.
    fn reads_per_eval(&self, e: &Expr, seen: &mut BTreeSet<String>) -> f64 {
        match e {
            Expr::Read { .. } => 1.0,
            Expr::Reduce(_) => 0.0,
            Expr::Let(n) => match self.lets.get(n) {
                Some(l) if !matches!(l.expr, Expr::Reduce(_)) && seen.insert(n.clone()) => {
                    self.reads_per_eval(l.expr, seen)
                }
                _ => 0.0,
            },
            _ => crate::ir::region::verify::children(e)
                .map(|c| self.reads_per_eval(c, seen))
                .sum(),
        }
    }

    /// Whether `Σ a·b` has no M and no N axis: every free iter either operand walks, both
    /// walk (RMSNorm's `Σ_n x[m,n]·x[m,n]`, a dot product per batch point). That is a row
    /// reduction, not a matrix product: no tile of a contraction template has two sides.
    fn is_batched_dot(&self, red: &Reduce, a: &Expr, b: &Expr) -> bool {
        let (mut a_ax, mut b_ax) = (BTreeSet::new(), BTreeSet::new());
        self.axes_of(a, &red.axes, &mut a_ax);
        self.axes_of(b, &red.axes, &mut b_ax);
        let free = |s: &BTreeSet<String>| {
            s.iter()
                .filter(|n| !red.axes.contains(n))
                .cloned()
                .collect::<BTreeSet<_>>()
        };
        free(&a_ax) == free(&b_ax)
    }

    /// The contraction a tile sums beside `mc` ([`Gemm::second`]): in a region whose only
    /// reductions are `mc` and one other top-level `Σ_K' a'·b'` over inputs, that one, when
    /// neither reads the other (no operand holds a contraction). Whether its axes fit `mc`'s
    /// tile is [`Cx::gemm`]'s test.
    pub(super) fn second_contraction(
        &self,
        mc: &MainContraction<'a>,
    ) -> Result<Option<MainContraction<'a>>, WorkError> {
        let reduces: usize = self.r.lets.iter().map(|l| reduces_in(&l.expr)).sum();
        if reduces != 2 {
            return Ok(None);
        }
        for l in &self.r.lets {
            let Expr::Reduce(red) = &l.expr else { continue };
            let Some((a, b)) = product_operands(red) else {
                continue;
            };
            if l.name == mc.name
                || !self.reads_input(a)
                || !self.reads_input(b)
                || self.is_batched_dot(red, a, b)
            {
                continue;
            }
            let nested = [a, b]
                .iter()
                .any(|side| self.contains_contraction(side, &mut BTreeSet::new()));
            return Ok((!nested).then(|| MainContraction {
                name: l.name.clone(),
                red,
                a,
                b,
            }));
        }
        Ok(None)
    }

    /// Whether `part`'s operands read only `axes`' `M` (for `a`) and `N` (for `b`) axes
    /// besides the batch and their own `K`: a contraction the tile of `axes` can sum.
    fn fits_tile(&self, part: &MainContraction, axes: &GemmAxes) -> bool {
        [(part.a, &axes.m), (part.b, &axes.n)]
            .iter()
            .all(|(side, own)| {
                let mut ax = BTreeSet::new();
                self.axes_of(side, &part.red.axes, &mut ax);
                ax.iter()
                    .all(|a| part.red.axes.contains(a) || own.contains(a) || axes.batch.contains(a))
            })
    }

    pub(super) fn gemm(
        &self,
        mc: &MainContraction<'a>,
        second: Option<&MainContraction<'a>>,
        iters: &[(String, f64)],
        ops: &mut Ops,
    ) -> Result<Gemm, WorkError> {
        let k_axes = mc.red.axes.clone();
        let (mut a_ax, mut b_ax) = (BTreeSet::new(), BTreeSet::new());
        self.axes_of(mc.a, &k_axes, &mut a_ax);
        self.axes_of(mc.b, &k_axes, &mut b_ax);
        let size_of = |n: &str| iters.iter().find(|(i, _)| i == n).map(|(_, s)| *s);
        let mut axes = GemmAxes {
            k: k_axes.clone(),
            ..GemmAxes::default()
        };
        for (name, _) in iters {
            if k_axes.contains(name) {
                continue; // shadowed by the reduction
            }
            match (a_ax.contains(name), b_ax.contains(name)) {
                (true, true) => axes.batch.push(name.clone()),
                (true, false) => axes.m.push(name.clone()),
                (false, true) => axes.n.push(name.clone()),
                (false, false) => {}
            }
        }
        let second = second.filter(|s| self.fits_tile(s, &axes));
        let parts: Vec<&MainContraction> = std::iter::once(mc).chain(second).collect();
        let prod = |v: &[String]| v.iter().filter_map(|n| size_of(n)).product::<f64>();
        let mut ks = Vec::new();
        for p in &parts {
            ks.push(self.extents(p.red, &p.name)?.iter().product::<f64>());
        }
        let k: f64 = ks.iter().sum();
        let (batch, m, n) = (prod(&axes.batch), prod(&axes.m), prod(&axes.n));
        // A pooled tile's window axes index like iters (`7·oh + kh' + kh − 1`).
        let mut all_iters = self.r.iters.clone();
        all_iters.extend(self.window.iter().map(|n| crate::ir::region::Iter {
            name: n.clone(),
            size: None,
        }));
        let conv = parts.iter().any(|p| {
            [p.a, p.b]
                .iter()
                .any(|side| mixes_axes(side, &p.red.axes, &all_iters))
        });
        let pattern = if conv {
            Pattern::Conv
        } else if batch > 1.0 {
            Pattern::BatchedMatmul
        } else {
            Pattern::Matmul
        };
        let mut prologue = [Ops::default(), Ops::default()];
        let mut pointwise_prologue = Refolds::default();
        let mut adjusted = BTreeSet::new();
        for (p, kp) in parts.iter().zip(&ks) {
            let share = if k > 0.0 { kp / k } else { 1.0 };
            let pro = self.prologue(p, [batch, m, n, *kp], iters, &axes, ops, &mut adjusted)?;
            for (total, (per_elem, pointwise)) in prologue.iter_mut().zip(pro) {
                total.add(per_elem, share);
                pointwise_prologue.add(&pointwise);
            }
        }
        // The products themselves are the template's (priced per plan), not part of `ops`.
        let tensor_cores = second.is_none() && tensor_cores_of(self, mc);
        for (p, kp) in parts.iter().zip(&ks) {
            let macs = batch * m * n * kp;
            if half_pair(self, p.a, p.b) {
                ops.tensor -= 2.0 * macs;
            } else {
                ops.simt -= 2.0 * macs;
            }
        }
        let elem = |e: &Expr| operand_dtype(self, e).map_or(4, |d| d.size_bytes());
        let a_elem = parts.iter().map(|p| elem(p.a)).max().unwrap_or(4);
        let b_elem = parts.iter().map(|p| elem(p.b)).max().unwrap_or(4);
        // Epilogue: lets that read the accumulators, in order; reductions among them over M
        // or N make a row epilogue.
        let mut downstream: BTreeSet<String> = parts.iter().map(|p| p.name.clone()).collect();
        let mut depth: BTreeMap<String, u32> = BTreeMap::new();
        let mut epilogue = Vec::new();
        let mut row_extent = None;
        for l in &self.r.lets {
            if parts.iter().any(|p| p.name == l.name) {
                continue;
            }
            let mut deps = BTreeSet::new();
            self.let_deps(&l.expr, &mut deps);
            if deps.is_disjoint(&downstream) {
                continue;
            }
            downstream.insert(l.name.clone());
            let mut d = chain_depth(&deps, &depth);
            if let Expr::Reduce(red) = &l.expr {
                if red
                    .axes
                    .iter()
                    .any(|a| axes.n.contains(a) || axes.m.contains(a))
                {
                    d += 1;
                    let over_n = red.axes.iter().any(|a| axes.n.contains(a));
                    row_extent = Some(if over_n { n } else { m });
                }
            }
            depth.insert(l.name.clone(), d);
            op_names(&l.expr, &mut epilogue);
        }
        let row_passes = 1 + depth.values().copied().max().unwrap_or(0);
        Ok(Gemm {
            pattern,
            batch,
            m,
            n,
            k,
            a_elem,
            b_elem,
            tensor_cores,
            second: second.map(|p| p.name.clone()),
            k_second: ks.get(1).copied().unwrap_or(0.0),
            prologue,
            pointwise_prologue,
            row_passes,
            row_extent,
            axes,
            epilogue,
            fill: [Fill::CpAsync; 2],
            staged_store: true,
            pool: None,
        })
    }

    /// The prologue of contraction `p` (`[batch, m, n, k]` its sizes) on the tile of `axes`:
    /// per operand (`A`, `B`), its work per loaded element and what the pointwise template
    /// adds; corrects `ops`, which counted the inline operand ops per multiply-accumulate and
    /// the lets they read per output element (`adjusted`: the lets already corrected).
    fn prologue(
        &self,
        p: &MainContraction<'a>,
        [batch, m, n, k]: [f64; 4],
        iters: &[(String, f64)],
        axes: &GemmAxes,
        ops: &mut Ops,
        adjusted: &mut BTreeSet<String>,
    ) -> Result<[(Ops, Refolds); 2], WorkError> {
        // The pointwise template's extra operand work: per lane, or once per thread for an
        // operand that does not read the fastest output axis (`P` of `P·V` with the value
        // column fastest: the compiler shares it across a chunk's unrolled lanes).
        let fast = iters.last().map(|(name, _)| name.as_str());
        let invariant = |i: usize| {
            let other = if i == 0 { &axes.n } else { &axes.m };
            fast.is_some_and(|f| other.iter().any(|a| a == f))
        };
        let out_elems: f64 = iters.iter().map(|(_, s)| *s).product();
        let macs = batch * m * n * k;
        let mut out = [(Ops::default(), Refolds::default()); 2];
        for (i, side) in [p.a, p.b].into_iter().enumerate() {
            let elems = batch * if i == 0 { m } else { n } * k;
            let inline_ops = self.expr_ops(side, &p.name, None)?;
            // The inline operand ops were counted per multiply-accumulate; a tiled kernel
            // applies them per loaded element.
            ops.add(inline_ops, elems - macs);
            let mut pointwise = Refolds::default();
            let part = if invariant(i) {
                &mut pointwise.thread
            } else {
                &mut pointwise.lane
            };
            part.ops += inline_ops.total() * (macs - elems);
            // The pointwise fold reads the operand's inputs at every multiply-accumulate: one
            // read is the operand's own load (priced with the fold), the others (a prologue's
            // bias) are loads beyond it.
            part.loads += (self.reads_per_eval(side, &mut BTreeSet::new()) - 1.0).max(0.0) * macs;
            let mut inline = inline_ops;
            let mut seen = BTreeSet::new();
            self.let_deps(side, &mut seen);
            for l in &seen {
                let let_ops = self.expr_ops(self.lets[l].expr, l, None)?;
                let reduce = matches!(self.lets[l].expr, Expr::Reduce(_));
                let per_elem = if reduce {
                    self.lets[l].evals / elems.max(1.0)
                } else {
                    1.0
                };
                inline.add(let_ops, per_elem);
                // Computed once per operand element, not per output element.
                if !reduce && adjusted.insert(l.clone()) {
                    ops.add(let_ops, elems - out_elems);
                    pointwise.lane.ops += let_ops.total() * (out_elems - elems);
                }
            }
            out[i] = (inline, pointwise);
        }
        Ok(out)
    }
}
