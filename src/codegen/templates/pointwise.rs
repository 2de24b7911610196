//! The pointwise template: one thread per output point, `items` points per thread (strided by
//! the block so that neighbouring threads touch neighbouring elements), every reduction a loop
//! in the thread. It runs any region; the other templates are faster on the regions they
//! accept.
//!
//! With `lanes` > 1 (the plan's vector width, cut to what the innermost iter's size allows:
//! [`vector::lanes`]) a thread's unit is a chunk of `lanes` consecutive points of the innermost
//! iter instead of one point: the reads [`vector::vector_reads`] accepts are one vector load per
//! chunk into registers, the lanes are computed in an unrolled loop (values that do not depend on
//! the innermost iter once per chunk), and each output is one vector store per chunk.

use super::super::cexpr;
use super::super::gpu::{Div, Kernel, Launch, Stmt, Unroll};
use super::super::scalar::Emitter;
use super::super::CodegenError;
use super::{bind_flat, params, store_yields, vector};
use crate::ir::dim::Dim;
use crate::ir::region::{Region, Size};
use crate::target::Arch;

/// The pointwise kernel of `r`: `block` threads per block, `items` points (or chunks of `lanes`
/// points) per thread.
pub fn build(
    r: &Region,
    arch: Arch,
    block: u32,
    items: u32,
    lanes: u32,
) -> Result<Kernel, CodegenError> {
    let mut em = Emitter::new(r, "")?;
    let lanes = vector::lanes(&em.iter_sizes, lanes);
    if lanes > 1 {
        return build_vector(r, em, arch, block, items, lanes);
    }
    let iter_sizes = em.iter_sizes.clone();
    let sizes: Vec<String> = iter_sizes.iter().map(cexpr::dim).collect();
    let total = Dim::product(&iter_sizes);
    let per_block = (block * items) as i64;
    let grid = total.ceildiv(per_block).max_of(&Dim::int(1));
    let axes: Vec<String> = r.iters.iter().map(|i| i.name.clone()).collect();
    em.emit(Stmt::int(
        "base",
        format!("(int)blockIdx.x * {per_block} + (int)threadIdx.x"),
    ));
    em.open();
    em.emit(Stmt::int("p", format!("base + it * {block}")));
    em.open();
    em.push_scope();
    bind_flat(&mut em, &axes, &sizes, "p", "i_");
    let stored = store_yields(&mut em);
    em.pop_scope();
    let inner = em.close();
    stored?;
    em.emit(Stmt::If {
        cond: format!("p < {}", cexpr::dim(&total)),
        div: Div::Thread,
        then: inner,
        otherwise: vec![],
    });
    let per_item = em.close();
    em.emit(Stmt::For {
        var: "it".into(),
        start: "0".into(),
        end: items.to_string(),
        step: "1".into(),
        unroll: Unroll::Full,
        div: Div::Block,
        body: per_item,
    });
    let body = em.close();
    Ok(Kernel {
        name: cexpr::ident(&r.name),
        arch,
        template: "pointwise".into(),
        params: params(r),
        launch: Launch {
            grid: [Size(grid), Size(Dim::int(1)), Size(Dim::int(1))],
            block: [block, 1, 1],
            dyn_smem_bytes: 0,
        },
        smem: vec![],
        body,
        max_regs: None,
    })
}

/// The pointwise kernel with `lanes` (> 1, dividing the innermost iter's size) points per chunk.
fn build_vector(
    r: &Region,
    mut em: Emitter,
    arch: Arch,
    block: u32,
    items: u32,
    lanes: u32,
) -> Result<Kernel, CodegenError> {
    let unsupported = |why: String| CodegenError::Unsupported {
        kernel: r.name.clone(),
        why,
    };
    let inner = r
        .iters
        .last()
        .ok_or_else(|| unsupported("a vectorized pointwise kernel needs an iter".into()))?;
    let chunk_sizes = vector::chunk_sizes(&em.iter_sizes, lanes)
        .ok_or_else(|| unsupported(format!("innermost size is not a multiple of {lanes}")))?;
    let sizes: Vec<String> = chunk_sizes.iter().map(cexpr::dim).collect();
    let chunks = Dim::product(&chunk_sizes);
    let per_block = (block * items) as i64;
    let grid = chunks.ceildiv(per_block).max_of(&Dim::int(1));
    let axes: Vec<String> = r.iters.iter().map(|i| i.name.clone()).collect();
    let reads = vector::vector_reads(r, &inner.name, lanes);
    em.emit(Stmt::int(
        "base",
        format!("(int)blockIdx.x * {per_block} + (int)threadIdx.x"),
    ));
    em.open();
    em.emit(Stmt::int("c", format!("base + it * {block}")));
    em.open();
    em.push_scope();
    let first = vector::bind_chunk(&mut em, &axes, &sizes, "c", "i_", lanes);
    let outputs = vector::ChunkStores::declare(&mut em, lanes)?;
    let reduces = vector::lane_reduces(&mut em, &inner.name, &first, lanes)?;
    let loaded = vector::load_chunk(&mut em, &reads, lanes)?;
    let lane = em.fresh("l");
    vector::lane_loop(
        &mut em,
        (&inner.name, &first, &lane),
        lanes,
        &loaded,
        |em| {
            vector::LaneReduce::provide(&reduces, em, &lane);
            outputs.assign(em, &lane)
        },
    )?;
    for s in outputs.stores(lanes) {
        em.emit(s);
    }
    em.pop_scope();
    let inner_body = em.close();
    em.emit(Stmt::If {
        cond: format!("c < {}", cexpr::dim(&chunks)),
        div: Div::Thread,
        then: inner_body,
        otherwise: vec![],
    });
    let per_item = em.close();
    em.emit(Stmt::range(
        "it",
        ["0".into(), items.to_string(), "1".into()],
        Div::Block,
        Unroll::Full,
        per_item,
    ));
    let body = em.close();
    Ok(Kernel {
        name: cexpr::ident(&r.name),
        arch,
        template: "pointwise".into(),
        params: params(r),
        launch: Launch {
            grid: [Size(grid), Size(Dim::int(1)), Size(Dim::int(1))],
            block: [block, 1, 1],
            dyn_smem_bytes: 0,
        },
        smem: vec![],
        body,
        max_regs: None,
    })
}
