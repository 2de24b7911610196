//! The factor of an interchanged reduce that does not depend on the vector loop, computed once
//! per reduce point in a vector pre-pass ([`Emitter::emit_interchanged`]).
//!
//! An interchanged reduce runs its reduce axis outside and a vector loop over the let's free
//! iters inside. When its body is `a · b` and `a` reads none of those inner iters (attention's
//! `P·V` without a materialized `P`: `Σ_n exp2(s[m, n]) / l[m] · V[n, d]`), the compiler hoists
//! `a` out of the vector loop but evaluates it once per reduce point in *scalar* code: a scalar
//! exponential per `n`, as much work as the 64-lane multiply-add it feeds. Here `a` is computed
//! for every reduce point first, in one SIMD loop, into a stack array; the main loop multiplies
//! by the array's element. The same operations in the same order: bit-identical results.

use super::emit::{visit_expr, Emitter, Scope};
use super::CpuError;
use crate::ir::axis::AxisExpr;
use crate::ir::region::kind::Kind;
use crate::ir::region::{BinaryFn, Expr, Reduce};
use std::collections::BTreeSet;

/// The longest reduce axis whose factor is staged (a stack array of this many floats).
const HOIST_MAX_POINTS: i64 = 4096;

/// A staged factor: the operand to stage and the other one.
pub(super) struct Hoist<'e> {
    /// Computed once per reduce point, in the pre-pass.
    pub staged: &'e Expr,
    /// Evaluated in the vector loop.
    pub other: &'e Expr,
    /// The reduce axis' extent (a constant).
    pub extent: i64,
    /// `staged` is the product's left operand.
    pub staged_first: bool,
}

impl Emitter<'_> {
    /// The iter and axis names `e` depends on, through its reads, selects, indices and the free
    /// iters of the lets it references; `None` when it holds anything else that could hide a
    /// dependence (a nested reduce, a gather, a scan, a view).
    fn depends_on(&self, e: &Expr) -> Option<BTreeSet<String>> {
        let mut out = BTreeSet::new();
        let mut ok = true;
        let add = |a: &AxisExpr, out: &mut BTreeSet<String>| {
            a.for_each_name(&mut |n| {
                out.insert(n.to_string());
            })
        };
        visit_expr(e, &mut |x| match x {
            Expr::Read { map, .. } => map.iter().for_each(|a| add(a, &mut out)),
            Expr::Select { pred, .. } => pred.for_each_expr(&mut |a| add(a, &mut out)),
            Expr::Index(a) => add(a, &mut out),
            Expr::Let(n) => match self.r.lets.iter().position(|l| &l.name == n) {
                Some(li) => {
                    for i in &self.checked.let_free[li] {
                        out.insert(self.r.iters[*i].name.clone());
                    }
                }
                None => ok = false,
            },
            Expr::Const(_)
            | Expr::Unary(..)
            | Expr::Binary(..)
            | Expr::Cast { .. }
            | Expr::Where(..) => {}
            _ => ok = false,
        });
        ok.then_some(out)
    }

    /// The factor of `red`'s body to stage, when there is one: an fp32 product `a · b` over
    /// one reduce axis of constant extent (at most [`HOIST_MAX_POINTS`]) whose operand `a` is
    /// arithmetic (not a bare read, constant or let) and reads none of `inner` (the vector
    /// loop's iters).
    pub(super) fn hoistable<'e>(&self, red: &'e Reduce, inner: &[usize]) -> Option<Hoist<'e>> {
        let [axis] = &red.axes[..] else {
            return None;
        };
        let Expr::Binary(BinaryFn::Mul, a, b) = &red.body else {
            return None;
        };
        if self.operands_kind(&[a, b]) != Kind::Float || inner.is_empty() {
            return None;
        }
        let extent = self.extents(red).ok()?.first()?.parse::<i64>().ok()?;
        if !(1..=HOIST_MAX_POINTS).contains(&extent) {
            return None;
        }
        let names: BTreeSet<String> = inner
            .iter()
            .map(|i| self.r.iters[*i].name.clone())
            .collect();
        let stageable = |e: &Expr| {
            !matches!(e, Expr::Read { .. } | Expr::Const(_) | Expr::Let(_))
                && self.kind_of(e) == Kind::Float
                && self
                    .depends_on(e)
                    .is_some_and(|d| d.contains(axis) && d.is_disjoint(&names))
        };
        let (staged, other, staged_first) = if stageable(a) {
            (&**a, &**b, true)
        } else if stageable(b) {
            (&**b, &**a, false)
        } else {
            return None;
        };
        Some(Hoist {
            staged,
            other,
            extent,
            staged_first,
        })
    }

    /// The pre-pass of `h` (a stack array `{buf}[extent]` over the reduce axis `axis`, loop var
    /// `v`); returns the array's name. `scope` is left as it was.
    pub(super) fn emit_hoist_prepass(
        &mut self,
        h: &Hoist<'_>,
        axis: &str,
        scope: &mut Scope,
    ) -> Result<String, CpuError> {
        let buf = self.fresh("chp");
        let v = self.fresh("r");
        self.note("a reduce's factor free of the vector loop computed for every reduce point in one SIMD pre-pass (not in scalar code per point)");
        self.line(&format!(
            "float {buf}[{}] __attribute__((aligned(64)));",
            h.extent
        ));
        self.line("#pragma omp simd");
        self.line(&format!(
            "for (int64_t {v} = 0; {v} < {}; {v}++) {{",
            h.extent
        ));
        self.indent += 1;
        scope.push((axis.to_string(), v.clone()));
        let x = self.operand(h.staged, Kind::Float, scope);
        scope.pop();
        let x = x?;
        self.line(&format!("{buf}[{v}] = {x};"));
        self.indent -= 1;
        self.line("}");
        Ok(buf)
    }
}
