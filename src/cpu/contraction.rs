//! Contractions on the CPU: a region `let` that is `sum_R x·y` in fp32 (GEMM, batched GEMM,
//! a convolution as implicit GEMM: `x`, `y` any guarded reads of region inputs) is computed by
//! the packed, register-blocked micro-kernel of `gemm.h` instead of a loop nest. Its free iters
//! split into the iters only `x` reads (rows, `M`), only `y` reads (columns, `N`) and both
//! (batch); the reduce axes are `K`. Per batch point, `x` is packed into row panels and `y` into
//! column panels (an im2col for a convolution), and the micro-kernel writes the let's buffer
//! through per-row and per-column offsets, so any order of the free iters works.

use crate::ir::axis::AxisExpr;
use crate::ir::dtype::DType;
use crate::ir::region::{BinaryFn, Expr, Region};
use crate::ir::tiny::ReduceOp;
use std::collections::BTreeSet;

/// A let recognized as a contraction.
#[derive(Clone, Debug)]
pub struct Contraction {
    /// The row operand (reads only row iters and reduce axes).
    pub x: Expr,
    /// The column operand.
    pub y: Expr,
    /// Row iters (indices into the region's iters, ascending).
    pub rows: Vec<usize>,
    /// Column iters.
    pub cols: Vec<usize>,
    /// Batch iters (read by both operands).
    pub batch: Vec<usize>,
}

fn names(e: &Expr, out: &mut BTreeSet<String>, ok: &mut bool) {
    super::emit::visit_expr(e, &mut |x| match x {
        Expr::Read { map, .. } => map
            .iter()
            .for_each(|m| m.for_each_name(&mut |n| drop(out.insert(n.to_string())))),
        Expr::Select { pred, .. } => pred.for_each_expr(&mut |a: &AxisExpr| {
            a.for_each_name(&mut |n| drop(out.insert(n.to_string())))
        }),
        Expr::Index(a) => a.for_each_name(&mut |n| drop(out.insert(n.to_string()))),
        Expr::Let(_) | Expr::Reduce(_) | Expr::Gather { .. } => *ok = false,
        _ => {}
    });
}

/// `let li` of `r` as a contraction, when it is one: a top-level fp32 `sum` (identity init) of a
/// product of two float operands that read only region inputs (no lets, reduces or gathers),
/// whose reduce axes do not shadow iters. `float_kind(e)` says whether `e` is a float value.
pub fn recognize(
    r: &Region,
    li: usize,
    free: &[usize],
    float_kind: &dyn Fn(&Expr) -> bool,
) -> Option<Contraction> {
    let Expr::Reduce(red) = &r.lets[li].expr else {
        return None;
    };
    if red.op != ReduceOp::Sum || red.dtype != Some(DType::F32) {
        return None;
    }
    if red.init.is_some_and(|v| v != 0.0) {
        return None;
    }
    if red.axes.iter().any(|a| r.iters.iter().any(|i| &i.name == a)) {
        return None;
    }
    let Expr::Binary(BinaryFn::Mul, x, y) = &red.body else {
        return None;
    };
    if !float_kind(x) || !float_kind(y) {
        return None;
    }
    let (mut nx, mut ny, mut ok) = (BTreeSet::new(), BTreeSet::new(), true);
    names(x, &mut nx, &mut ok);
    names(y, &mut ny, &mut ok);
    if !ok {
        return None;
    }
    let mut c = Contraction {
        x: (**x).clone(),
        y: (**y).clone(),
        rows: Vec::new(),
        cols: Vec::new(),
        batch: Vec::new(),
    };
    for i in free {
        let n = &r.iters[*i].name;
        match (nx.contains(n), ny.contains(n)) {
            (true, true) => c.batch.push(*i),
            (true, false) => c.rows.push(*i),
            (false, true) => c.cols.push(*i),
            (false, false) => return None,
        }
    }
    Some(c)
}
