//! The row template (softmax, layer/RMS norm, reductions over trailing axes): the region's
//! *cooperative* reductions — top-level `let`s that are a `reduce` (sum, max or min, fp32) over
//! iters — all fold the same *row axes*; every point of the other iters is a row. A row is
//! owned by `threads_per_row` threads: each folds a strided share of the row, a warp shuffle
//! butterfly combines a warp, and when a row spans several warps their partials meet in shared
//! memory (read back by every thread in the same order, so all threads hold the same value).
//! Then the threads walk the row again and store every output element, the reductions provided
//! as values. Rows past the end (the last block) compute on a clamped row and store nothing,
//! so every thread reaches every barrier.
//!
//! With vector lanes (the plan's width cut by [`vector::lanes`]; only when the row axes are the
//! trailing iters, so a row is contiguous in the output), the threads walk a row in chunks of
//! `lanes` consecutive elements: contiguous reads are one vector load per chunk (in the folds and
//! in the output pass), the lanes are an unrolled loop, and each output is one vector store per
//! chunk. A fold then visits a thread's elements chunk by chunk, lanes in order. When the row's
//! innermost size is symbolic (`c·S`), the lanes are taken under a uniform run-time test
//! `S % q == 0` with the element walk as the other branch ([`super::row_guard`]).

use super::super::cexpr;
use super::super::gpu::{CType, Div, Kernel, Launch, Smem, Stmt, Unroll, WarpOp};
use super::super::scalar::{Emitter, Val};
use super::super::CodegenError;
use super::row_guard::{self, VectorGuard};
use super::{bind_flat, params, store_yields, vector};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::kind::Kind;
use crate::ir::region::{Expr, Reduce, Region, Size};
use crate::ir::tiny::ReduceOp;
use crate::target::Arch;

/// The row axes (in iter order) and the cooperative lets of `r`, when it has any and they
/// agree on the axes.
pub fn cooperative(r: &Region) -> Option<(Vec<String>, Vec<usize>)> {
    let iters: Vec<&str> = r.iters.iter().map(|i| i.name.as_str()).collect();
    let mut axes: Option<Vec<String>> = None;
    let mut lets = Vec::new();
    for (i, l) in r.lets.iter().enumerate() {
        let Expr::Reduce(red) = &l.expr else { continue };
        if !red.axes.iter().all(|a| iters.contains(&a.as_str())) {
            continue;
        }
        if !matches!(red.op, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min)
            || red.dtype.unwrap_or(DType::F32) != DType::F32
        {
            return None;
        }
        let mut mine: Vec<String> = iters
            .iter()
            .filter(|n| red.axes.iter().any(|a| a == *n))
            .map(|s| s.to_string())
            .collect();
        mine.dedup();
        match &axes {
            None => axes = Some(mine),
            Some(a) if *a == mine => {}
            Some(_) => return None,
        }
        lets.push(i);
    }
    axes.map(|a| (a, lets))
}

fn warp_op(op: ReduceOp) -> WarpOp {
    match op {
        ReduceOp::Max => WarpOp::Max,
        ReduceOp::Min => WarpOp::Min,
        _ => WarpOp::Sum,
    }
}

fn combine(op: ReduceOp, a: &str, b: &str) -> String {
    match op {
        ReduceOp::Max => format!("dlc_max({a}, {b})"),
        ReduceOp::Min => format!("dlc_min({a}, {b})"),
        _ => format!("{a} + {b}"),
    }
}

/// Whether the row axes are the trailing iters of `r` (a row is contiguous in the output).
fn trailing(r: &Region, row_axes: &[String]) -> bool {
    r.iters.len() >= row_axes.len()
        && r.iters[r.iters.len() - row_axes.len()..]
            .iter()
            .map(|i| &i.name)
            .eq(row_axes.iter())
}

/// The lanes of the row kernel of `r` under a plan of `want` lanes: `want` cut by
/// [`vector::lanes`] to what provably divides the row's innermost size (1 when the row axes are
/// not the trailing iters, or `r` is no row region). The plan space's widest vector follows it
/// (`applicability::Emits::Row`), so a plan claims no vector the kernel does not load. A softmax
/// over a symbolic sequence length proves 1 here; its kernel adds a vector walk under a run-time
/// test ([`vector_guard`]), priced where the priced sizes take it.
pub fn lanes(r: &Region, want: u32) -> u32 {
    let Some((row_axes, _)) = cooperative(r) else {
        return 1;
    };
    let Ok(em) = Emitter::new(r, "") else {
        return 1;
    };
    if !trailing(r, &row_axes) {
        return 1;
    }
    let row_sizes: Vec<Dim> = r
        .iters
        .iter()
        .zip(&em.iter_sizes)
        .filter(|(it, _)| row_axes.contains(&it.name))
        .map(|(_, s)| s.clone())
        .collect();
    let l = vector::lanes(&row_sizes, want);
    if vector::chunk_sizes(&row_sizes, l).is_some() {
        l
    } else {
        1
    }
}

/// The guard under which the row walk of `r` runs `want` lanes that [`lanes`] cannot prove
/// (a row over a symbolic length: [`super::row_guard`]); `None` when [`lanes`] keeps them, or
/// no run-time test would (the row axes not trailing, a size of several symbols).
pub fn vector_guard(r: &Region, want: u32) -> Option<VectorGuard> {
    let (row_axes, _) = cooperative(r)?;
    if want < 2 || !trailing(r, &row_axes) || lanes(r, want) >= want {
        return None;
    }
    let em = Emitter::new(r, "").ok()?;
    // The row axes are the trailing iters: the last iter is the row's innermost axis.
    let inner = em.iter_sizes.last()?;
    row_guard::guard(r, inner, want, |s| lanes(s, want) == want)
}

/// The row kernel of `r` (`cooperative(r)` must be `Some`), with up to `lanes` elements per
/// vector access: where [`lanes`] proves fewer, and a run-time test on the row's length gives
/// them ([`vector_guard`]), both walks under that uniform branch.
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
    let (row_axes, _) = cooperative(r).ok_or_else(|| unsupported("no cooperative reduction"))?;
    if !threads_per_row.is_multiple_of(32) {
        return Err(unsupported("threads per row must be whole warps"));
    }
    let shape = (threads_per_row, rows_per_block);
    let body = match vector_guard(r, lanes) {
        None => row_body(r, shape, lanes)?,
        Some(g) => {
            let (name, value) = g.define();
            let mut fast = vec![Stmt::int(&name, value)];
            fast.extend(row_body(&g.region, shape, lanes)?);
            vec![Stmt::If {
                cond: g.cond(),
                div: Div::Block,
                then: fast,
                otherwise: row_body(r, shape, lanes)?,
            }]
        }
    };
    let em = Emitter::new(r, "")?;
    let outer_sizes: Vec<Dim> = r
        .iters
        .iter()
        .zip(&em.iter_sizes)
        .filter(|(it, _)| !row_axes.contains(&it.name))
        .map(|(_, s)| s.clone())
        .collect();
    let rows = Dim::product(&outer_sizes);
    Ok(rows_kernel(
        r,
        (arch, "row"),
        &rows,
        (threads_per_row, rows_per_block),
        body,
    ))
}

/// Opens the body of a kernel folding `rows_c` rows, `rows_per_block` a block (this `row`
/// template and `reduce`): `ty`, `tx`, the block's row `row_raw`, whether it is `valid`, and
/// the `row` computed on (rows past the end compute on the last row, so every thread reaches
/// every barrier); then a scope for the row's bindings.
pub(super) fn open_row(em: &mut Emitter, rows_per_block: u32, rows_c: &str) {
    em.open();
    em.emit(Stmt::int("ty", "(int)threadIdx.y"));
    em.emit(Stmt::int("tx", "(int)threadIdx.x"));
    em.emit(Stmt::int(
        "row_raw",
        format!("(int)blockIdx.x * {rows_per_block} + ty"),
    ));
    em.emit(Stmt::Let {
        ty: CType::Bool,
        name: "valid".into(),
        value: format!("row_raw < {rows_c}"),
        mutable: false,
    });
    em.emit(Stmt::int("row", format!("valid ? row_raw : {rows_c} - 1")));
    em.push_scope();
}

/// The kernel of a template that folds each of `rows` rows with `threads_per_row` threads,
/// `rows_per_block` rows a block (this `row` template and `reduce`): one block row per
/// `threadIdx.y`, the warps' partials in shared memory when a row has several warps.
pub(super) fn rows_kernel(
    r: &Region,
    (arch, template): (Arch, &str),
    rows: &Dim,
    (threads_per_row, rows_per_block): (u32, u32),
    body: Vec<Stmt>,
) -> Kernel {
    let warps = threads_per_row / 32;
    let mut smem = Vec::new();
    if warps > 1 {
        smem.push(Smem {
            name: "partial".into(),
            ty: CType::F32,
            dims: vec![rows_per_block as u64, warps as u64],
            dynamic: false,
        });
    }
    let grid = rows.ceildiv(rows_per_block as i64).max_of(&Dim::int(1));
    Kernel {
        name: cexpr::ident(&r.name),
        arch,
        template: template.into(),
        params: params(r),
        launch: Launch {
            grid: [Size(grid), Size(Dim::int(1)), Size(Dim::int(1))],
            block: [threads_per_row, rows_per_block, 1],
            dyn_smem_bytes: 0,
        },
        smem,
        body,
        max_regs: Some(crate::plan::regs::ROW),
    }
}

/// The body of the row kernel of `r` (threads per row, rows per block) with up to `lanes`
/// elements per vector access ([`vector::lanes`] of the row's sizes).
fn row_body(
    r: &Region,
    (threads_per_row, rows_per_block): (u32, u32),
    lanes: u32,
) -> Result<Vec<Stmt>, CodegenError> {
    let (row_axes, coop) = cooperative(r).ok_or_else(|| CodegenError::Unsupported {
        kernel: r.name.clone(),
        why: "no cooperative reduction".into(),
    })?;
    let mut em = Emitter::new(r, "")?;
    let iter_sizes = em.iter_sizes.clone();
    let (mut outer, mut outer_sizes, mut row_sizes) = (Vec::new(), Vec::new(), Vec::new());
    for (it, s) in r.iters.iter().zip(&iter_sizes) {
        if row_axes.contains(&it.name) {
            row_sizes.push(s.clone());
        } else {
            outer.push(it.name.clone());
            outer_sizes.push(s.clone());
        }
    }
    let mut lanes = if trailing(r, &row_axes) {
        vector::lanes(&row_sizes, lanes)
    } else {
        1
    };
    // The row walk: chunks of `lanes` elements (single elements when 1).
    let walk_sizes = vector::chunk_sizes(&row_sizes, lanes).unwrap_or_else(|| {
        lanes = 1;
        row_sizes.clone()
    });
    let walk = Walk {
        axes: &row_axes,
        sizes: walk_sizes.iter().map(cexpr::dim).collect(),
        lanes,
    };
    let rows = Dim::product(&outer_sizes);
    let (rows_c, len_c) = (cexpr::dim(&rows), cexpr::dim(&Dim::product(&walk_sizes)));
    let warps = threads_per_row / 32;
    open_row(&mut em, rows_per_block, &rows_c);
    let outer_c: Vec<String> = outer_sizes.iter().map(cexpr::dim).collect();
    bind_flat(&mut em, &outer, &outer_c, "row", "i_");
    for li in coop {
        fold_let(&mut em, &walk, li, (&len_c, threads_per_row, warps))?;
    }
    em.open();
    em.push_scope();
    let stored = if walk.lanes > 1 {
        walk.store_chunk(&mut em)
    } else {
        bind_flat(&mut em, &row_axes, &walk.sizes, "e", "r_");
        em.open();
        let stored = store_yields(&mut em);
        let stores = em.close();
        em.emit(Stmt::If {
            cond: "valid".into(),
            div: Div::Thread,
            then: stores,
            otherwise: vec![],
        });
        stored
    };
    em.pop_scope();
    stored?;
    let out_loop = em.close();
    em.emit(Stmt::For {
        var: "e".into(),
        start: "tx".into(),
        end: len_c.clone(),
        step: threads_per_row.to_string(),
        unroll: Unroll::Compiler,
        div: Div::Thread,
        body: out_loop,
    });
    em.pop_scope();
    let inner = em.close();
    // An empty row set has nothing to clamp to.
    em.emit(Stmt::If {
        cond: format!("{rows_c} > 0"),
        div: Div::Block,
        then: inner,
        otherwise: vec![],
    });
    Ok(em.close())
}

/// The fold of the cooperative let `li` of the row walk `walk` (C row length in chunks, threads
/// per row, warps per row): each thread's share, the warp butterfly, the warps' partials through
/// shared memory; the let is then provided to the rest of the body.
pub(super) fn fold_let(
    em: &mut Emitter,
    walk: &Walk,
    li: usize,
    (len_c, threads_per_row, warps): (&str, u32, u32),
) -> Result<(), CodegenError> {
    let r = em.region;
    let l = &r.lets[li];
    let Expr::Reduce(red) = &l.expr else {
        return Ok(());
    };
    let red: &Reduce = red;
    let (init, _) = Emitter::reduce_init(red);
    let identity = super::super::scalar::identity(red.op, DType::F32);
    let acc = em.fresh("acc");
    em.emit(Stmt::Let {
        ty: CType::F32,
        name: acc.clone(),
        value: cexpr::float(identity),
        mutable: true,
    });
    em.open();
    em.push_scope();
    let folded = walk.each(em, std::slice::from_ref(&red.body), |em| {
        let v = em.value(&red.body)?;
        em.emit(Stmt::Assign {
            place: acc.clone(),
            value: Emitter::fold(red, &acc, &v),
        });
        Ok(())
    });
    em.pop_scope();
    folded?;
    let body = em.close();
    em.emit(Stmt::For {
        var: "e".into(),
        start: "tx".into(),
        end: len_c.to_string(),
        step: threads_per_row.to_string(),
        unroll: Unroll::Compiler,
        div: Div::Thread,
        body,
    });
    em.emit(Stmt::WarpReduce {
        op: warp_op(red.op),
        dst: acc.clone(),
        value: acc.clone(),
    });
    if warps > 1 {
        em.emit(Stmt::If {
            cond: "(tx & 31) == 0".into(),
            div: Div::Thread,
            then: vec![Stmt::Assign {
                place: "partial[ty][tx >> 5]".into(),
                value: acc.clone(),
            }],
            otherwise: vec![],
        });
        em.emit(Stmt::Barrier);
        em.emit(Stmt::Assign {
            place: acc.clone(),
            value: "partial[ty][0]".into(),
        });
        em.emit(Stmt::For {
            var: "w".into(),
            start: "1".into(),
            end: warps.to_string(),
            step: "1".into(),
            unroll: Unroll::Full,
            div: Div::Block,
            body: vec![Stmt::Assign {
                place: acc.clone(),
                value: combine(red.op, &acc, "partial[ty][w]"),
            }],
        });
        em.emit(Stmt::Barrier);
    }
    // The explicit init is folded once, after the partials.
    let total = em.materialize(
        &l.name,
        Val {
            code: combine(red.op, &init, &acc),
            kind: Kind::Float,
        },
    );
    em.provide(&l.name, total.code);
    Ok(())
}

/// How the threads of a row walk it: the row axes, bound from the walk index `e` over `sizes`
/// (C; the last one counts chunks when `lanes` > 1).
pub(super) struct Walk<'r> {
    /// The walked axes, outermost first.
    pub(super) axes: &'r [String],
    /// Their sizes (C), the last in chunks when `lanes` > 1.
    pub(super) sizes: Vec<String>,
    /// Elements per chunk.
    pub(super) lanes: u32,
}

impl Walk<'_> {
    /// Binds the row axes at walk index `e` and runs `body` at every element there: once, or per
    /// lane of the chunk with the reads of `values` that vectorize loaded first.
    fn each(
        &self,
        em: &mut Emitter,
        values: &[Expr],
        body: impl FnOnce(&mut Emitter) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        if self.lanes <= 1 {
            bind_flat(em, self.axes, &self.sizes, "e", "r_");
            return body(em);
        }
        let inner = self.axes.last().map(String::as_str).unwrap_or_default();
        let first = vector::bind_chunk(em, self.axes, &self.sizes, "e", "r_", self.lanes);
        let reads = vector::vector_reads_of(em.region, values, inner, self.lanes);
        let loaded = vector::load_chunk(em, &reads, self.lanes)?;
        let lane = em.fresh("l");
        vector::lane_loop(em, (inner, &first, &lane), self.lanes, &loaded, body)
    }

    /// The output pass over one chunk: the yields per lane into registers, then (for valid rows)
    /// one vector store per output.
    fn store_chunk(&self, em: &mut Emitter) -> Result<(), CodegenError> {
        let inner = self.axes.last().map(String::as_str).unwrap_or_default();
        let first = vector::bind_chunk(em, self.axes, &self.sizes, "e", "r_", self.lanes);
        let r = em.region;
        let roots: Vec<Expr> = r.yields.iter().map(|y| Expr::Let(y.from.clone())).collect();
        let reads = vector::vector_reads_of(r, &roots, inner, self.lanes);
        let loaded = vector::load_chunk(em, &reads, self.lanes)?;
        let outputs = vector::ChunkStores::declare(em, self.lanes)?;
        let lane = em.fresh("l");
        vector::lane_loop(em, (inner, &first, &lane), self.lanes, &loaded, |em| {
            outputs.assign(em, &lane)
        })?;
        em.emit(Stmt::If {
            cond: "valid".into(),
            div: Div::Thread,
            then: outputs.stores(self.lanes),
            otherwise: vec![],
        });
        Ok(())
    }
}
