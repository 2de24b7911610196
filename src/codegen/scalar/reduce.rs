//! Reductions as serial loop nests: the accumulator's initial value, the fold of one element in
//! the reduction's dtype, and the unrolling of a fold nest ([`FOLD_UNROLL`]).

use super::{convert, ctype, CodegenError, Emitter, Val};
use crate::codegen::cexpr;
use crate::codegen::gpu::{Div, Stmt, Unroll};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::kind::Kind;
use crate::ir::region::verify::children;
use crate::ir::region::verify::reduce_extents;
use crate::ir::region::{Expr, Reduce};
use crate::ir::tiny::ReduceOp;

impl Emitter<'_> {
    /// The extents of `r`'s axes as C sizes.
    pub fn reduce_extents(&self, r: &Reduce) -> Result<Vec<Dim>, CodegenError> {
        reduce_extents(self.region, r, &self.iter_sizes, &self.region.name)
            .map_err(|e| self.err(e.to_string()))
    }

    /// The accumulator's initial value and kind.
    pub fn reduce_init(r: &Reduce) -> (String, Kind) {
        let dt = r.dtype.unwrap_or(DType::F32);
        let k = Kind::of(dt);
        let init = r.init.unwrap_or_else(|| identity(r.op, dt));
        (Self::constant(init, k), k)
    }

    /// `acc ⊕ v` in `r`'s dtype (value and result rounded to it).
    pub fn fold(r: &Reduce, acc: &str, v: &Val) -> String {
        let dt = r.dtype.unwrap_or(DType::F32);
        let k = Kind::of(dt);
        let x = round_to(dt, &convert(v, k));
        let combined = match (r.op, k) {
            (ReduceOp::Sum, Kind::Float) => format!("{acc} + {x}"),
            (ReduceOp::Prod, Kind::Float) => format!("{acc} * {x}"),
            (ReduceOp::Max, Kind::Float) => format!("dlc_max({acc}, {x})"),
            (ReduceOp::Min, Kind::Float) => format!("dlc_min({acc}, {x})"),
            (ReduceOp::Sum, Kind::I32) => format!("dlc_iadd({acc}, {x})"),
            (ReduceOp::Prod, Kind::I32) => format!("dlc_imul({acc}, {x})"),
            (ReduceOp::Max, _) => format!("({x} > {acc} ? {x} : {acc})"),
            (ReduceOp::Min, _) => format!("({x} < {acc} ? {x} : {acc})"),
            (ReduceOp::Sum, Kind::Bool) => format!("({acc} || {x})"),
            (ReduceOp::Prod, Kind::Bool) => format!("({acc} && {x})"),
        };
        round_to(dt, &combined)
    }

    /// A reduction as nested loops at the current point.
    pub(super) fn reduce(&mut self, r: &Reduce) -> Result<Val, CodegenError> {
        let (init, k) = Self::reduce_init(r);
        let acc = self.fresh("acc");
        self.emit(Stmt::Let {
            ty: ctype(k),
            name: acc.clone(),
            value: init,
            mutable: true,
        });
        let dims = self.reduce_extents(r)?;
        let unrolls = fold_unrolls(&dims, fold_budget(&r.body));
        let extents: Vec<String> = dims.iter().map(cexpr::dim).collect();
        let vars: Vec<String> = r.axes.iter().map(|a| self.fresh(a)).collect();
        self.open();
        self.push_scope();
        for (a, v) in r.axes.iter().zip(&vars) {
            self.bind(a, v.clone());
        }
        let v = self.value(&r.body);
        self.pop_scope();
        let v = v?;
        self.emit(Stmt::Assign {
            place: acc.clone(),
            value: Self::fold(r, &acc, &v),
        });
        let mut body = self.close();
        for ((v, e), unroll) in vars.iter().zip(&extents).zip(unrolls).rev() {
            body = vec![Stmt::For {
                var: v.clone(),
                start: "0".into(),
                end: e.clone(),
                step: "1".into(),
                unroll,
                div: Div::Block,
                body,
            }];
        }
        for s in body {
            self.emit(s);
        }
        Ok(Val { code: acc, kind: k })
    }
}

/// Iterations of a serial fold nest whose loads are in flight together: the innermost loops
/// of constant trip count are unrolled fully while their product stays within it, the next
/// one by what is left, the outer ones not at all. The compiler left alone unrolls a long
/// constant loop deeply (a 1×1 convolution's 256-step fold: 96 registers, 40 at 8) and fully
/// a window of taps (5×5: 64 registers, 29 with the outer loop kept), past the registers the
/// plan prices ([`crate::plan::space::BASE_REGS`] per thread for a pointwise kernel).
pub const FOLD_UNROLL: u64 = 8;

/// The loads of a fold nest in flight together: [`FOLD_UNROLL`] iterations of a body with two
/// reads (a convolution's image and weight). A body with more reads (a 1×1 convolution whose
/// image is the sum of three residual branches, with their per-channel biases: 7 reads) is
/// unrolled by fewer iterations ([`fold_budget`]): at 8 iterations MobileNetV2's folds took 48,
/// 72 and 94 registers (3, 5 and 7 reads, NVRTC 13, sm_80) against the plan's 41.
pub const FOLD_LOADS: u64 = 2 * FOLD_UNROLL;

/// The iterations of a fold of `body` unrolled together: [`FOLD_LOADS`] over its reads, a power
/// of two, at least 1 and at most [`FOLD_UNROLL`].
fn fold_budget(body: &Expr) -> u64 {
    let reads = reads_in(body).max(1);
    let by = (FOLD_LOADS / reads).clamp(1, FOLD_UNROLL);
    1 << by.ilog2()
}

/// The reads (and gathers) of `e`.
fn reads_in(e: &Expr) -> u64 {
    let own = u64::from(matches!(e, Expr::Read { .. } | Expr::Gather { .. }));
    own + children(e).map(reads_in).sum::<u64>()
}

/// The unroll of each loop of a fold nest over `extents` (trip counts, outermost first; a
/// symbolic one is not a constant trip count), `budget` iterations in flight.
fn fold_unrolls(extents: &[Dim], budget: u64) -> Vec<Unroll> {
    let mut left = budget;
    let mut out: Vec<Unroll> = extents
        .iter()
        .rev()
        .map(|e| match e.as_int().and_then(|t| u64::try_from(t).ok()) {
            Some(t) if t <= left => {
                left /= t.max(1);
                Unroll::Full
            }
            _ if left >= 2 => {
                let by = left as u32;
                left = 1;
                Unroll::By(by)
            }
            _ => Unroll::Never,
        })
        .collect();
    out.reverse();
    out
}

/// The neutral element of `op` in `dt`.
pub fn identity(op: ReduceOp, dt: DType) -> f64 {
    match (op, dt) {
        (ReduceOp::Sum, _) => 0.0,
        (ReduceOp::Prod, _) => 1.0,
        (ReduceOp::Max, DType::I32) => i32::MIN as f64,
        (ReduceOp::Min, DType::I32) => i32::MAX as f64,
        (ReduceOp::Max, DType::Bool) => 0.0,
        (ReduceOp::Min, DType::Bool) => 1.0,
        (ReduceOp::Max, _) => f64::NEG_INFINITY,
        (ReduceOp::Min, _) => f64::INFINITY,
    }
}

fn round_to(dt: DType, x: &str) -> String {
    match dt {
        DType::F16 => format!("dlc_round_f16({x})"),
        DType::BF16 => format!("dlc_round_bf16({x})"),
        _ => x.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unrolls(extents: &[&str]) -> Vec<Unroll> {
        let dims: Vec<Dim> = extents
            .iter()
            .map(|e| e.parse::<i64>().map_or_else(|_| Dim::sym(e), Dim::from))
            .collect();
        fold_unrolls(&dims, FOLD_UNROLL)
    }

    #[test]
    fn a_fold_nest_unrolls_a_bounded_number_of_iterations() {
        // A long channel fold: unrolled by the whole budget.
        assert_eq!(unrolls(&["256"]), [Unroll::By(8)]);
        // A 5×5 window: the inner taps fully, the rows kept a loop.
        assert_eq!(unrolls(&["5", "5"]), [Unroll::Never, Unroll::Full]);
        // A 3×3 convolution over 64 channels: taps 3, then rows by what is left (8 / 3 = 2).
        assert_eq!(
            unrolls(&["64", "3", "3"]),
            [Unroll::Never, Unroll::By(2), Unroll::Full]
        );
        // A 2×2 window and a symbolic extent.
        assert_eq!(unrolls(&["2", "2"]), [Unroll::Full, Unroll::Full]);
        assert_eq!(unrolls(&["K", "2"]), [Unroll::By(4), Unroll::Full]);
    }
}
