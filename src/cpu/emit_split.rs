//! A strip's lane loop split at its exponentials (rows form, the fused pass of
//! [`super::emit_fuse`]): a let that is one fp32 `exp` / `exp2` of an fp32 value is evaluated for
//! the whole strip by the prelude's `dlc_expf_strip` / `dlc_exp2f_strip` between two `omp simd`
//! loops — the lets before it store its argument per lane, the lets after it read its value per
//! lane. With AVX-512 the strip function scales by 2^n with one `vscalefps` (the scalar
//! function, vectorized by the compiler, needs ~9 integer and float operations and a NaN
//! select for it); the compiler merges the pieces again and keeps the strip buffers in
//! registers. Same operations as the scalar functions: the results are bit-identical
//! (`bench/cpu/expf_check.c`).

use super::cvalue::kind_type;
use super::emit::{visit_expr, Emitter, Scope};
use super::CpuError;
use crate::ir::region::kind::Kind;
use crate::ir::region::{Expr, Reduce, UnaryFn};

/// One exponential let the strip splits at: the let, its argument, the prelude's strip function.
struct Split {
    at: usize,
    arg: Expr,
    fun: &'static str,
}

/// A local let read in a later segment than its own (`own`), up to segment `last`: stored per
/// lane in `buf` at the end of its segment, read back at the start of the later ones.
struct Carry {
    at: usize,
    own: usize,
    last: usize,
    buf: String,
}

/// How a strip's lane loop splits: the exponential lets, their strip buffers, the carried lets.
struct SplitPlan {
    splits: Vec<Split>,
    bufs: Vec<String>,
    carried: Vec<Carry>,
}

impl Emitter<'_> {
    /// The lets of `group` that are one fp32 `exp` / `exp2` of an fp32 value.
    fn exp_splits(&self, group: &[usize]) -> Vec<Split> {
        group
            .iter()
            .filter_map(|g| {
                let Expr::Unary(f, x) = &self.r.lets[*g].expr else {
                    return None;
                };
                let fun = match f {
                    UnaryFn::Exp => "dlc_expf_strip",
                    UnaryFn::Exp2 => "dlc_exp2f_strip",
                    _ => return None,
                };
                let float = self.lets[*g].kind == Kind::Float && self.kind_of(x) == Kind::Float;
                float.then(|| Split {
                    at: *g,
                    arg: (**x).clone(),
                    fun,
                })
            })
            .collect()
    }

    /// The lets read by `e` (indices).
    fn let_reads(&self, e: &Expr, out: &mut Vec<usize>) {
        visit_expr(e, &mut |x| {
            if let Expr::Let(n) = x {
                if let Some(i) = self.r.lets.iter().position(|l| &l.name == n) {
                    out.push(i);
                }
            }
        });
    }

    /// Where the strip's lane loop splits (None: no exponential let): the splits, their strip
    /// buffers and the carried locals, the buffers declared.
    fn plan_splits(
        &mut self,
        group: &[usize],
        fused: &[usize],
        red: &Reduce,
        lanes: usize,
    ) -> Option<SplitPlan> {
        let splits = self.exp_splits(group);
        if splits.is_empty() {
            return None;
        }
        // segment k: the split let k-1 (read back), the lets up to split k (its argument stored)
        let seg_of = |g: usize| splits.iter().filter(|s| s.at < g).count();
        let own = |g: usize| seg_of(g) + usize::from(splits.iter().any(|s| s.at == g));
        let mut last_read = vec![0usize; self.r.lets.len()];
        for g in group {
            let mut reads = Vec::new();
            self.let_reads(&self.r.lets[*g].expr, &mut reads);
            for h in reads {
                last_read[h] = last_read[h].max(seg_of(*g));
            }
        }
        let mut tail = Vec::new();
        self.let_reads(&red.body, &mut tail);
        for y in fused {
            let from = &self.r.yields[*y].from;
            tail.extend(self.r.lets.iter().position(|l| &l.name == from));
        }
        for h in tail {
            last_read[h] = splits.len();
        }
        // local lets read in a later segment than their own: carried in a lane array
        let mut carried = Vec::new();
        for g in group {
            if self.lets[*g].local && last_read[*g] > own(*g) {
                let buf = self.fresh("C");
                let t = kind_type(self.lets[*g].kind);
                self.line(&format!("{t} {buf}[{lanes}] __attribute__((aligned(64)));"));
                carried.push(Carry {
                    at: *g,
                    own: own(*g),
                    last: last_read[*g],
                    buf,
                });
            }
        }
        let bufs: Vec<String> = splits.iter().map(|_| self.fresh("X")).collect();
        for b in &bufs {
            self.line(&format!("float {b}[{lanes}] __attribute__((aligned(64)));"));
        }
        Some(SplitPlan {
            splits,
            bufs,
            carried,
        })
    }

    /// One strip (`lanes` lanes, lane variable `ln`; the strip's point bound in `scope` by the
    /// caller): the `group`'s lets and `fused` yields, then the reduce body folded into `slot`;
    /// the lane loop split at each exponential let ([`Self::exp_splits`]).
    pub(super) fn strip_group_and_fold(
        &mut self,
        (group, fused): (&[usize], &[usize]),
        red: &Reduce,
        slot: &str,
        scope: &mut Scope,
        (lanes, ln): (usize, &str),
    ) -> Result<(), CpuError> {
        let open = |em: &mut Self| {
            em.line("#pragma omp simd");
            em.line(&format!("for (int {ln} = 0; {ln} < {lanes}; {ln}++) {{"));
            em.indent += 1;
        };
        let Some(plan) = self.plan_splits(group, fused, red, lanes) else {
            open(self);
            self.group_and_fold(group, fused, red, slot, scope)?;
            self.close_loops(1);
            return Ok(());
        };
        self.note("a strip's exponentials by the prelude's vector strip function");
        let mut from = 0;
        for k in 0..=plan.splits.len() {
            open(self);
            for c in plan.carried.iter().filter(|c| c.own < k && c.last >= k) {
                let t = kind_type(self.lets[c.at].kind);
                self.line(&format!("const {t} L{} = {}[{ln}];", c.at, c.buf));
            }
            if k > 0 {
                let at = plan.splits[k - 1].at;
                let target = self.let_ref(at, scope);
                let decl = if self.lets[at].local {
                    "const float "
                } else {
                    ""
                };
                self.line(&format!("{decl}{target} = {}[{ln}];", plan.bufs[k - 1]));
            }
            let to = plan.splits.get(k).map_or(group.len(), |s| {
                group.iter().position(|g| *g == s.at).unwrap_or(group.len())
            });
            if let Some(s) = plan.splits.get(k) {
                self.emit_group_lets(&group[from..to], &[], scope)?;
                let x = self.expr(&s.arg, scope)?;
                self.line(&format!("{}[{ln}] = {x};", plan.bufs[k]));
            } else {
                self.group_and_fold(&group[from..to], fused, red, slot, scope)?;
            }
            for c in plan.carried.iter().filter(|c| c.own == k) {
                self.line(&format!("{}[{ln}] = L{};", c.buf, c.at));
            }
            self.close_loops(1);
            if let Some(s) = plan.splits.get(k) {
                self.line(&format!("{}({}, {lanes});", s.fun, plan.bufs[k]));
            }
            from = (to + 1).min(group.len());
        }
        Ok(())
    }
}
