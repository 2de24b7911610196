//! The pointwise template: one thread per output point, `items` points per thread (strided by
//! the block so that neighbouring threads touch neighbouring elements), every reduction a loop
//! in the thread. It runs any region; the other templates are faster on the regions they
//! accept.

use super::super::cexpr;
use super::super::gpu::{Div, Kernel, Launch, Stmt};
use super::super::scalar::Emitter;
use super::super::CodegenError;
use super::{bind_flat, params, store_yields};
use crate::ir::dim::Dim;
use crate::ir::region::{Region, Size};
use crate::target::Arch;

/// The pointwise kernel of `r`: `block` threads per block, `items` points per thread.
pub fn build(r: &Region, arch: Arch, block: u32, items: u32) -> Result<Kernel, CodegenError> {
    let mut em = Emitter::new(r, "")?;
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
        unroll: true,
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
    })
}
