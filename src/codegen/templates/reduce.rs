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
//! A compute-at region (seed 003) whose consumer is such a reduction runs here too: a global
//! average pool over a convolution (`mean_hw relu(conv(X) + b + S)`, [`nests_fold`]). The
//! threads of an output point split the pooling window; each window point's producer fold
//! (the convolution's `C·k·k` sum) is a loop in its thread, and the walk is scalar (the
//! producer's reads are not along the row). The plan space offers it beside the
//! thread-per-output nest (`plan::space`, `cost::roofline::compute_at_window`): a 7×7 pool of
//! 512 channels is 512 outputs, too few threads for the nest.
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
/// fp32) over the same axes, none of them an iter, each read of their bodies outside nested
/// reductions indexed by the innermost reduced axis in its last dimension (or, with a nested
/// reduction, by no reduced axis at all), no scan in them, and no other let folds anything.
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
        if !op_ok || red.dtype.unwrap_or(DType::F32) != DType::F32 || scans(&red.body) {
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
        if !reads_along(&red.body, (inner, &red.axes), folds(&red.body)) {
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

/// Whether `e` contains a `scan`.
fn scans(e: &Expr) -> bool {
    let mut any = false;
    walk(e, &mut |x| any |= matches!(x, Expr::Scan(_)));
    any
}

/// Whether a reduce let of the plain reduction `r` nests another reduction in its body: a
/// compute-at region (a convolution's fold recomputed at every point of a pooling window,
/// `plan::work::ComputeAtWork`), whose threads of a row split the window and run the nested
/// fold each in its own loop. Its walk is scalar (the nested fold's reads are not along the
/// row).
pub fn nests_fold(r: &Region) -> bool {
    r.lets.iter().any(|l| match &l.expr {
        Expr::Reduce(red) => folds(&red.body),
        _ => false,
    })
}

fn walk(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    for c in crate::ir::region::verify::children(e) {
        walk(c, f);
    }
}

/// Whether every read and gather of `e` outside its nested reductions is indexed by `inner`
/// alone in its last dimension (consecutive threads of a row read consecutive elements), and
/// `e` reads something there. When `nested` (a reduction in `e`: its folds read in a thread's
/// own loop over a producer's fold, priced per load by `cost::roofline`; the walk is scalar),
/// a read that no reduced axis (`axes`) indexes is one value for the whole row (a bias) too,
/// and `e` may read nothing outside its nested folds.
fn reads_along(e: &Expr, (inner, axes): (&str, &[String]), nested: bool) -> bool {
    let (mut reads, mut all) = (0, true);
    walk_outer(e, &mut |x| {
        if let Expr::Read { map, .. } | Expr::Gather { map, .. } = x {
            reads += 1;
            let along = matches!(map.last(), Some(AxisExpr::Name(n)) if n == inner);
            let invariant = || {
                let mut hit = false;
                map.iter()
                    .for_each(|a| a.for_each_name(&mut |n| hit |= axes.iter().any(|x| x == n)));
                !hit
            };
            all &= along || (nested && invariant());
        }
    });
    (reads > 0 || nested) && all
}

/// [`walk`], not entering nested reductions.
fn walk_outer(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    if matches!(e, Expr::Reduce(_)) {
        return;
    }
    for c in crate::ir::region::verify::children(e) {
        walk_outer(c, f);
    }
}

/// The lanes of the walk of `r` under a plan of `want`: `want` cut to what provably divides the
/// innermost reduced extent (1 when `r` is no plain reduction).
pub fn lanes(r: &Region, want: u32) -> u32 {
    let Some((_, extents, _)) = plain(r) else {
        return 1;
    };
    if nests_fold(r) {
        return 1;
    }
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
    let mut lanes = if nests_fold(r) {
        1
    } else {
        vector::lanes(&extents, lanes)
    };
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
