//! An interchanged reduce's vector loop split at its padding border.
//!
//! A strided window (a depthwise convolution with stride 2 and padding) reads its image under
//! a guard `0 ≤ 2n + k1 − 1 < W ? x[…] : 0` that depends on the vector loop's iter `n`. Without
//! AVX-512's masks GCC vectorizes the guarded strided load as a masked gather (`vgatherdps`):
//! MobileNetV2's stride-2 depthwise convolutions ran at ~3 ns per multiply-add, 10× the
//! stride-1 ones. The guard's conjuncts that mention `n` hold on one interval of `n` (each
//! compares a monotone function of `n`, where `n` occurs once, with the rest), so the loop runs
//! as three: the border points before the interval and after it with the guarded body, the
//! interval with those conjuncts dropped (a plain strided load, vectorized with permutes). The
//! interval's ends are found by walking in from both ends to the first point where the
//! conjuncts hold (one or two steps per window point). Same operations, same order: the
//! results are bit-identical.

use super::emit::{Emitter, Scope};
use super::CpuError;
use crate::ir::axis::AxisExpr;
use crate::ir::region::{Expr, Pred, Reduce};

/// The interval's conjuncts and the body with them dropped.
pub(super) struct Border {
    /// The dropped conjuncts (all mention the vector iter).
    pub pred: Pred,
    /// The reduce body inside the interval.
    pub interior: Expr,
}

/// Whether `p` is a comparison in which `v` occurs exactly once.
fn single(p: &Pred, v: &str) -> bool {
    let Pred::Cmp(_, a, b) = p else {
        return false;
    };
    let mut n = 0;
    let mut count = |e: &AxisExpr| e.for_each_name(&mut |x| n += usize::from(x == v));
    count(a);
    count(b);
    n == 1
}

fn mentions(p: &Pred, v: &str) -> bool {
    let mut hit = false;
    p.for_each_expr(&mut |e| e.for_each_name(&mut |x| hit |= x == v));
    hit
}

fn conjuncts(p: &Pred, out: &mut Vec<Pred>) {
    match p {
        Pred::And(ps) => ps.iter().for_each(|q| conjuncts(q, out)),
        _ => out.push(p.clone()),
    }
}

/// `e` with the conjuncts over `v` of its guards dropped (collected in `taken`); nested
/// reduces and scans are left whole (their guards may read their own axes).
fn drop_guards(e: &Expr, v: &str, taken: &mut Vec<Pred>) -> Expr {
    let bx = |x: &Expr, taken: &mut Vec<Pred>| Box::new(drop_guards(x, v, taken));
    match e {
        Expr::Select {
            pred,
            then,
            otherwise,
        } => {
            let mut cs = Vec::new();
            conjuncts(pred, &mut cs);
            let (over_v, rest): (Vec<Pred>, Vec<Pred>) =
                cs.into_iter().partition(|c| mentions(c, v));
            if over_v.is_empty() || !over_v.iter().all(|c| single(c, v)) {
                return Expr::Select {
                    pred: pred.clone(),
                    then: bx(then, taken),
                    otherwise: bx(otherwise, taken),
                };
            }
            taken.extend(over_v);
            let then = drop_guards(then, v, taken);
            if rest.is_empty() {
                return then;
            }
            Expr::Select {
                pred: Pred::And(rest),
                then: Box::new(then),
                otherwise: bx(otherwise, taken),
            }
        }
        Expr::Unary(f, x) => Expr::Unary(*f, bx(x, taken)),
        Expr::Cast { to, x } => Expr::Cast {
            to: *to,
            x: bx(x, taken),
        },
        Expr::Binary(f, a, b) => {
            let a = bx(a, taken);
            Expr::Binary(*f, a, bx(b, taken))
        }
        _ => e.clone(),
    }
}

/// The border split of `body` along the vector iter `v`, when some guard has conjuncts over it.
pub(super) fn split(body: &Expr, v: &str) -> Option<Border> {
    let mut taken = Vec::new();
    let interior = drop_guards(body, v, &mut taken);
    if taken.is_empty() {
        return None;
    }
    Some(Border {
        pred: Pred::And(taken),
        interior,
    })
}

impl Emitter<'_> {
    /// The vector loop over iter `vi` of an interchanged reduce let `li` as three loops split at
    /// `b`'s interval (see the module doc); `scope` binds the reduce axes.
    pub(super) fn emit_border_loops(
        &mut self,
        li: usize,
        red: &Reduce,
        vi: usize,
        b: &Border,
        scope: &mut Scope,
    ) -> Result<(), CpuError> {
        let (v, z) = (Self::iter_var(vi), Self::size_var(vi));
        let p = self.pred(&b.pred, scope);
        self.line("{");
        self.indent += 1;
        self.line(&format!("int64_t dlc_lo = {z}, dlc_hi;"));
        self.line(&format!(
            "for (int64_t {v} = 0; {v} < {z}; {v}++) if ({p}) {{ dlc_lo = {v}; break; }}"
        ));
        self.line("dlc_hi = dlc_lo;");
        self.line(&format!(
            "for (int64_t {v} = {z} - 1; {v} >= dlc_lo; {v}--) if ({p}) {{ dlc_hi = {v} + 1; break; }}"
        ));
        let parts = [
            ("0".to_string(), "dlc_lo".to_string(), &red.body),
            ("dlc_lo".into(), "dlc_hi".into(), &b.interior),
            ("dlc_hi".into(), z.clone(), &red.body),
        ];
        for (lo, hi, body) in parts {
            if !self.has_gather {
                self.line("#pragma omp simd");
            }
            self.line(&format!("for (int64_t {v} = {lo}; {v} < {hi}; {v}++) {{"));
            self.indent += 1;
            self.emit_fold_stmt(li, red, body, scope)?;
            self.close_loops(1);
        }
        self.indent -= 1;
        self.line("}");
        self.note("the vector loop split at the padding border: guards over it dropped inside");
        Ok(())
    }
}
