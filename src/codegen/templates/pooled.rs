//! The pooled tile's epilogue (`crate::plan::work::PoolTile`, issue 23): a contraction tile
//! whose rows are the points of whole windows (the consumer's window axes are the innermost
//! `M` axes, a tile advances by `⌊BM / W⌋·W` rows, [`View::rows_per_tile`]) folds each window
//! of its epilogue values and stores one value per window and column — a global average pool
//! over a network's last convolution, in the convolution's kernel.
//!
//! Each thread computes the window reduction's body (bias, residual, ReLU: everything the
//! window folds, the contraction's value provided from its accumulator) at its accumulators'
//! rows and columns into shared memory `Ps[BM][BN + 1]`; after a barrier, each (window,
//! column) pair of the tile is one thread's serial fold of its `W` rows in window order — the
//! reference's order, so the value is exact — and that thread computes the region's yields at
//! the window's point (`÷ 49`) and stores them. Rows past the tile's whole windows, or past
//! `M`, belong to no folded window and are not read.

use super::super::gpu::{CType, Div, Smem, Stmt, Unroll};
use super::super::scalar::{Emitter, Val};
use super::super::CodegenError;
use super::contraction::{Pool, View};
use super::{bind_flat, store_yields};
use crate::codegen::cexpr;
use crate::ir::region::kind::Kind;
use crate::plan::regs::SIMT_ROW_PAD;

/// The shared array of a pooled tile's epilogue values.
const VALUES: &str = "Ps";

/// How a SIMT tile's accumulators map to its rows and columns: thread `(tr, tc)` holds rows
/// `tr + i·row_threads` (`i < tm`) and columns `tc + j·col_threads` (`j < tn`).
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Tile rows and columns.
    pub tile: [u64; 2],
    /// Accumulator rows and columns per thread.
    pub micro: [u64; 2],
    /// Threads along the rows and along the columns.
    pub threads: [u64; 2],
}

/// The shared array the epilogue stages its values in (which the plan's shared memory counts:
/// `plan::regs::pooled_smem_bytes`).
pub fn smem(l: &Layout) -> Smem {
    Smem {
        name: VALUES.into(),
        ty: CType::F32,
        dims: vec![l.tile[0], l.tile[1] + SIMT_ROW_PAD],
        dynamic: false,
    }
}

/// The epilogue statements of a pooled tile whose accumulators are `acc[i][j]` (C) laid out
/// as `l` (the tile's origin `m0`, `n0`, the thread's `tr`, `tc` and `tid` in C).
pub fn epilogue(
    em: &mut Emitter,
    v: &View,
    pool: &Pool,
    l: &Layout,
) -> Result<Vec<Stmt>, CodegenError> {
    let [bm, bn] = l.tile;
    let [tm, tn] = l.micro;
    let [tm_threads, tn_threads] = l.threads;
    let rows = v.rows_per_tile(bm);
    let w = pool.window.max(1);
    em.open();
    // The values at the accumulators' points.
    let values = super::contraction_simt::per_accumulator(em, [tm, tn], |em| {
        em.emit(Stmt::int("prow", format!("tr + i * {tm_threads}")));
        em.emit(Stmt::int("pcol", format!("tc + j * {tn_threads}")));
        let store = em.assign_f32(&format!("{VALUES}[prow][pcol]"), &pool.red.body, |em| {
            v.bind_point(em, "m0 + prow", "n0 + pcol");
            em.provide_reduce(v.red, "acc[i][j]");
        })?;
        em.emit(Stmt::If {
            cond: format!("prow < {rows} && {}", v.inside("m0 + prow", "n0 + pcol")),
            div: Div::Thread,
            then: store,
            otherwise: vec![],
        });
        Ok(())
    })?;
    em.emit(Stmt::Block(values));
    em.emit(Stmt::Barrier);
    // One thread per (window, column): the fold, then the yields at the window's point.
    let (init, kind) = Emitter::reduce_init(pool.red);
    em.open();
    em.emit(Stmt::int("pw", format!("q / {bn}")));
    em.emit(Stmt::int("pcol", format!("q % {bn}")));
    em.emit(Stmt::int("pm", format!("m0 / {w} + pw")));
    let folded = em.fresh("pooled");
    let row = format!("{VALUES}[pw * {w} + r][pcol]");
    let step = Emitter::fold(
        pool.red,
        &folded,
        &Val {
            code: row,
            kind: Kind::Float,
        },
    );
    em.open();
    em.push_scope();
    em.emit(Stmt::Let {
        ty: super::super::scalar::ctype(kind),
        name: folded.clone(),
        value: init,
        mutable: true,
    });
    em.emit(Stmt::For {
        var: "r".into(),
        start: "0".into(),
        end: w.to_string(),
        step: "1".into(),
        unroll: Unroll::Compiler,
        div: Div::Thread,
        body: vec![Stmt::Assign {
            place: folded.clone(),
            value: step,
        }],
    });
    bind_flat(em, &pool.outer.names, &pool.outer.c_sizes(), "pm", "c_");
    bind_flat(em, &v.n.names, &v.n.c_sizes(), "n0 + pcol", "n_");
    em.provide(&v.acc, folded);
    let stored = store_yields(em);
    em.pop_scope();
    let yields = em.close();
    stored?;
    em.emit(Stmt::If {
        cond: format!(
            "pm < {} && n0 + pcol < {}",
            cexpr::dim(&pool.outer.extent()),
            cexpr::dim(&v.n.extent())
        ),
        div: Div::Thread,
        then: yields,
        otherwise: vec![],
    });
    let per_window = em.close();
    em.emit(Stmt::For {
        var: "q".into(),
        start: "tid".into(),
        end: ((rows / w) * bn).to_string(),
        step: (tm_threads * tn_threads).to_string(),
        unroll: Unroll::Never,
        div: Div::Thread,
        body: per_window,
    });
    Ok(em.close())
}
