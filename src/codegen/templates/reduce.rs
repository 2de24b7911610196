//! The plain-reduction template (issue 15): a region whose reductions fold axes that are *not*
//! its iters (a graph `Reduce`, a mean: the output lacks the reduced axes), read along the
//! innermost reduced axis. Every output point is a row of the reduced extent; a row is owned by
//! `threads_per_row` threads exactly as in the row template ([`super::row`]): a strided share
//! per thread (chunks of `lanes` consecutive elements loaded as one vector where alignment is
//! proved), a warp shuffle butterfly, the warps' partials through shared memory in a fixed
//! order (deterministic, no atomics), fp32 accumulation. Then one thread of the row evaluates
//! the yields (the epilogue: `mean`'s `· 1/n`, a cast) and stores the row's single output.
//! Rows past the end compute on a clamped row and store nothing, so every thread reaches every
//! barrier.
//!
//! Reductions whose reduced axis is not the innermost of their reads (a reduce over columns)
//! and products stay on the pointwise template. TODO(issue 15): a split across CTAs with a
//! second pass for too few outputs to fill the GPU (one output of 4M elements runs on one CTA).

use super::super::cexpr;
use super::super::gpu::{Div, Kernel, Stmt};
use super::super::scalar::Emitter;
use super::super::CodegenError;
use super::row::{fold_let, Walk};
use super::{bind_flat, store_yields, vector};
use crate::index::axis::AxisExpr;
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::{Expr, Region};
use crate::ir::tiny::ReduceOp;
use crate::target::Arch;

/// The reduced axes (outermost first), their extents and the reduce lets of `r` when `r` is a
/// plain reduction this template emits: every `reduce` is a top-level let (sum, max or min in
/// fp32) over the same axes, none of them an iter, each read of their bodies indexed by the
/// innermost reduced axis in its last dimension, and no other let folds anything.
pub fn plain(r: &Region) -> Option<(Vec<String>, Vec<Dim>, Vec<usize>)> {
    let em = Emitter::new(r, "").ok()?;
    let mut found: Option<(Vec<String>, Vec<Dim>)> = None;
    let mut lets = Vec::new();
    for (i, l) in r.lets.iter().enumerate() {
        let Expr::Reduce(red) = &l.expr else {
            if folds(&l.expr) {
                return None;
            }
            continue;
        };
        let op_ok = matches!(red.op, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min);
        if !op_ok || red.dtype.unwrap_or(DType::F32) != DType::F32 || folds(&red.body) {
            return None;
        }
        if red.axes.is_empty()
            || red
                .axes
                .iter()
                .any(|a| r.iters.iter().any(|i| i.name == *a))
        {
            return None;
        }
        let inner = red.axes.last()?;
        if !reads_along(&red.body, inner) {
            return None;
        }
        let extents = em.reduce_extents(red).ok()?;
        match &found {
            None => found = Some((red.axes.clone(), extents)),
            Some((a, e)) if *a == red.axes && *e == extents => {}
            Some(_) => return None,
        }
        lets.push(i);
    }
    found.map(|(a, e)| (a, e, lets))
}

/// Whether `e` contains a `reduce` or `scan`.
fn folds(e: &Expr) -> bool {
    let mut any = false;
    walk(e, &mut |x| {
        any |= matches!(x, Expr::Reduce(_) | Expr::Scan(_))
    });
    any
}

fn walk(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    for c in crate::ir::region::verify::children(e) {
        walk(c, f);
    }
}

/// Whether `e` reads something, and every read and gather is indexed by `inner` alone in its
/// last dimension (consecutive threads of a row read consecutive elements).
fn reads_along(e: &Expr, inner: &str) -> bool {
    let (mut reads, mut all) = (0, true);
    walk(e, &mut |x| {
        if let Expr::Read { map, .. } | Expr::Gather { map, .. } = x {
            reads += 1;
            all &= matches!(map.last(), Some(AxisExpr::Name(n)) if n == inner);
        }
    });
    reads > 0 && all
}

/// The lanes of the walk of `r` under a plan of `want`: `want` cut to what provably divides the
/// innermost reduced extent (1 when `r` is no plain reduction).
pub fn lanes(r: &Region, want: u32) -> u32 {
    let Some((_, extents, _)) = plain(r) else {
        return 1;
    };
    let l = vector::lanes(&extents, want);
    if vector::chunk_sizes(&extents, l).is_some() {
        l
    } else {
        1
    }
}

/// The plain-reduction kernel of `r` (`plain(r)` must be `Some`): `threads_per_row` threads
/// (whole warps) per output point, `rows_per_block` points per block, up to `lanes` elements
/// per vector load.
pub fn build(
    r: &Region,
    arch: Arch,
    threads_per_row: u32,
    rows_per_block: u32,
    lanes: u32,
) -> Result<Kernel, CodegenError> {
    let unsupported = |why: &str| CodegenError::Unsupported {
        kernel: r.name.clone(),
        why: why.to_string(),
    };
    if plain(r).is_none() {
        return Err(unsupported("no plain reduction"));
    }
    if threads_per_row == 0 || !threads_per_row.is_multiple_of(32) || rows_per_block == 0 {
        return Err(unsupported("threads per row must be whole warps"));
    }
    let body = body(r, (threads_per_row, rows_per_block), lanes)?;
    let em = Emitter::new(r, "")?;
    let rows = Dim::product(&em.iter_sizes);
    Ok(super::row::rows_kernel(
        r,
        (arch, "reduce"),
        &rows,
        (threads_per_row, rows_per_block),
        body,
    ))
}

/// The body: the output point from the block and `threadIdx.y`, the folds of the reduce lets
/// over the row, then the yields stored by the row's first thread.
fn body(
    r: &Region,
    (threads_per_row, rows_per_block): (u32, u32),
    lanes: u32,
) -> Result<Vec<Stmt>, CodegenError> {
    let (axes, extents, coop) = plain(r).ok_or_else(|| CodegenError::Unsupported {
        kernel: r.name.clone(),
        why: "no plain reduction".into(),
    })?;
    let mut em = Emitter::new(r, "")?;
    let iter_sizes = em.iter_sizes.clone();
    let mut lanes = vector::lanes(&extents, lanes);
    let walk_sizes = vector::chunk_sizes(&extents, lanes).unwrap_or_else(|| {
        lanes = 1;
        extents.clone()
    });
    let walk = Walk {
        axes: &axes,
        sizes: walk_sizes.iter().map(cexpr::dim).collect(),
        lanes,
    };
    let rows = Dim::product(&iter_sizes);
    let (rows_c, len_c) = (cexpr::dim(&rows), cexpr::dim(&Dim::product(&walk_sizes)));
    super::row::open_row(&mut em, rows_per_block, &rows_c);
    let names: Vec<String> = r.iters.iter().map(|i| i.name.clone()).collect();
    let sizes_c: Vec<String> = iter_sizes.iter().map(cexpr::dim).collect();
    bind_flat(&mut em, &names, &sizes_c, "row", "i_");
    for li in coop {
        fold_let(
            &mut em,
            &walk,
            li,
            (&len_c, threads_per_row, threads_per_row / 32),
        )?;
    }
    em.open();
    let stored = store_yields(&mut em);
    let stores = em.close();
    stored?;
    em.emit(Stmt::If {
        cond: "valid && tx == 0".into(),
        div: Div::Thread,
        then: stores,
        otherwise: vec![],
    });
    em.pop_scope();
    let inner = em.close();
    // An empty output or an empty row set has nothing to clamp to.
    em.emit(Stmt::If {
        cond: format!("{rows_c} > 0"),
        div: Div::Block,
        then: inner,
        otherwise: vec![],
    });
    Ok(em.close())
}
