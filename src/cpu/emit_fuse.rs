//! A row's pointwise pass and the fp32 reduction of it that follows, in one loop (rows form):
//! softmax's exponentials and their sum, LayerNorm's centred squares and their sum.
//!
//! Emitted apart, the pass stores the row to its buffer and the reduction reads it back from L1
//! in a second loop (softmax's row was read three times: exponentials, sum, division). Fused,
//! each strip of [`super::emit_loops::REDUCE_LANES`] elements computes the pass's lets, stores
//! them (the buffer stays: a later pass reads it), and folds the reduce body into its lane
//! accumulators while the values are in registers — the lane structure and the order of the
//! folds are those of the separate lane reduction, so the result is the same bit for bit. The
//! first such pass of a row also prefetches the next rows (`super::prefetch`), per strip.

use super::cvalue::{fold, init_lit};
use super::emit::{lookup, Emitter, Scope};
use super::emit_loops::{REDUCE_LANES, REDUCE_LANES_TAIL};
use super::CpuError;
use crate::ir::dtype::DType;
use crate::ir::region::verify::reduce_extents;
use crate::ir::region::Expr;

impl Emitter<'_> {
    /// The let at `nx` when it is an fp32 reduce to one scalar per outer point over exactly the
    /// single inner iter `iters` (its whole range) of the pointwise group just before it: it can
    /// fold the group's row in the group's loop.
    pub(super) fn fusable_reduce(&self, iters: &[usize], nx: usize, flat: bool) -> Option<usize> {
        if flat || self.has_gather || iters.len() != 1 || iters != self.inner_iters() {
            return None;
        }
        let info = self.lets.get(nx)?;
        if !info.has_reduce || info.gemm.is_some() || !info.inner.is_empty() {
            return None;
        }
        let Expr::Reduce(red) = &self.r.lets[nx].expr else {
            return None;
        };
        let it = iters[0];
        if red.dtype != Some(DType::F32) || red.axes != [self.r.iters[it].name.clone()] {
            return None;
        }
        let ext = reduce_extents(self.r, red, &self.checked.iter_sizes, "").ok()?;
        (ext == [self.checked.iter_sizes[it].clone()]).then_some(nx)
    }

    /// The pointwise `group` (its lets, the `fused` yields) and the reduce let `rl` in one
    /// strip-mined loop over the inner iter: [`REDUCE_LANES`] lanes, then
    /// [`REDUCE_LANES_TAIL`], then a scalar tail, the lanes folded pairwise into `L<rl>`.
    /// `strip`: the loop prefetches the next rows (the row's first pointwise pass).
    pub(super) fn emit_group_with_reduce(
        &mut self,
        group: &[usize],
        fused: &[usize],
        rl: usize,
        strip: bool,
    ) -> Result<(), CpuError> {
        let Expr::Reduce(red) = self.r.lets[rl].expr.clone() else {
            return Err(CpuError::Codegen {
                region: self.r.name.clone(),
                why: "a fused row reduction that is not a reduce".into(),
            });
        };
        let op = crate::ir::region::json::reduce_op_name(red.op);
        self.note(format!(
            "a row's pointwise pass and its fp32 {op} in one loop ({REDUCE_LANES} lane accumulators)"
        ));
        let it = self.inner_iters()[0];
        let name = self.r.iters[it].name.clone();
        let e = Self::size_var(it);
        let acc = self.fresh("acc");
        self.line(&format!("float L{rl};"));
        self.line(&format!(
            "float {acc} = {};",
            init_lit(red.op, red.init, DType::F32)
        ));
        let (accv, ln) = self.lane_accumulators(red.op, &acc);
        let v = self.fresh("r");
        self.line(&format!("int64_t {v} = 0;"));
        let mut scope = self.base_scope();
        for lanes in [REDUCE_LANES, REDUCE_LANES_TAIL] {
            self.line(&format!("for (; {v} + {lanes} <= {e}; {v} += {lanes}) {{"));
            self.indent += 1;
            if strip {
                self.prefetch_stretch(&v, lanes);
            }
            scope.push((name.clone(), format!("({v} + {ln})")));
            let slot = format!("{accv}[{ln}]");
            self.strip_group_and_fold((group, fused), &red, &slot, &mut scope, (lanes, &ln))?;
            scope.pop();
            self.close_loops(1);
        }
        self.line(&format!("for (; {v} < {e}; {v}++) {{"));
        self.indent += 1;
        scope.push((name, v.clone()));
        self.group_and_fold(group, fused, &red, &acc, &mut scope)?;
        scope.pop();
        self.close_loops(1);
        self.fold_lanes(red.op, &accv, &ln, &acc);
        self.line(&format!("L{rl} = {acc};"));
        Ok(())
    }

    /// At the point bound in `scope`: the group's lets and yields, then the reduce body folded
    /// into `slot`.
    pub(super) fn group_and_fold(
        &mut self,
        group: &[usize],
        fused: &[usize],
        red: &crate::ir::region::Reduce,
        slot: &str,
        scope: &mut Scope,
    ) -> Result<(), CpuError> {
        debug_assert!(lookup(scope, &red.axes[0]).is_some());
        self.emit_group_lets(group, fused, scope)?;
        let x = self.reduce_body_f32(red, scope)?;
        let f = fold(red.op, DType::F32, slot, &x);
        self.line(&format!("{slot} = {f};"));
        Ok(())
    }
}
