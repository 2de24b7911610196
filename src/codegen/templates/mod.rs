//! Kernel templates: a region and its plan → one GPU IR [`Kernel`](crate::codegen::gpu::Kernel).
//!
//! | template | when | skeleton |
//! | --- | --- | --- |
//! | `attention` | two regions: scores + softmax into a deferred buffer, then its product with `V` (`attention::pair`) | one streaming-softmax kernel: a query row per thread, `K`/`V` tiles in shared memory, online max/sum, fully masked key tiles skipped |
//! | `contraction_simt` | the plan's algorithm is `simt` and the region is one contraction with an epilogue that reduces nothing | shared-memory tiles of `A` and `B` loaded cooperatively (double-buffered through registers), per-thread micro-tiles, the epilogue on the fp32 accumulators, predicated tails |
//! | `contraction_mma` | the plan's algorithm is `mma_sync` and both operands are fp16 or both bf16 after their prologue | SM80 tensor cores: a multi-stage shared-memory ring filled by `cp.async` (plain aligned reads) or through registers (computed operands), `ldmatrix` fragments, `mma.sync.m16n8k16` with fp32 accumulators, the epilogue on the accumulator fragments, predicated tails |
//! | `gemv` | the plan's algorithm is `gemv` (a contraction with `M ≤ 8`) | warps over output columns and `K`-slices, each warp's lanes over 1, 8, 16 or 32 consecutive columns × the rest along `K` (the weight's contiguous axis, by the price), `BM` fp32 accumulators folded by warp shuffles, slices summed through shared memory in a fixed order, the epilogue once per output |
//! | `row` | a top-level reduction over trailing iters (softmax, norms) | one row per `threads_per_row` threads, strided loops, warp shuffles and a shared-memory combine across warps, then the row's outputs |
//! | `reduce` | a plain reduction (the reduced axes are no iters: a graph `Reduce`, a mean) read along its innermost reduced axis; or a compute-at region whose consumer is one (a global pool over a convolution) | the row template's fold per output point (`threads_per_row` threads, vector chunks, warp shuffles, partials through shared memory in a fixed order), the yields stored by the row's first thread; a compute-at window walks scalar, each window point's producer fold a loop in its thread |
//! | `scan` | a region with a `scan` let (cumulative ops) | one block per line, tiles of `block × items`: per-thread sequential scan, warp shuffle scan, warp totals through shared memory, a running carry; fp32 (or i32) accumulation |
//! | `pointwise` | anything else (elementwise, movement, pooling windows, small contractions) | one thread per output point (`items` per thread), reductions as loops; with the plan's vector width, chunks of consecutive points with 16-byte vector loads and stores where alignment is proved (`vector`) |
//!
//! Every template handles any size, symbolic ones included: sizes are kernel parameters and
//! every tile loop is strip-mined with predicated tails.

pub mod applicability;
pub mod attention;
pub mod contraction;
pub mod contraction_mma;
pub mod contraction_simt;
pub mod gemv;
pub mod pointwise;
pub mod pooled;
pub mod reduce;
pub mod row;
pub mod row_guard;
pub mod scan;
pub mod sm90;
pub mod split_k;
pub mod vector;

use super::cexpr;
use super::gpu::{CType, Param, ParamKind};
use super::scalar::Emitter;
use crate::ir::axis::AxisExpr;
use crate::ir::dtype::DType;
use crate::ir::region::{Expr, Region};
use std::collections::BTreeSet;

/// The kernel parameters of `r`: inputs `in{i}`, outputs `out{j}`, then the symbols.
pub fn params(r: &Region) -> Vec<Param> {
    params_of(
        r.inputs.iter().map(|i| i.dtype),
        r.outputs.iter().map(|o| o.dtype),
        &symbols(r),
    )
}

/// Parameters `in{i}` of the `inputs` dtypes, `out{j}` of the `outputs` dtypes, then one `int`
/// per symbol.
pub fn params_of(
    inputs: impl Iterator<Item = DType>,
    outputs: impl Iterator<Item = DType>,
    symbols: &BTreeSet<String>,
) -> Vec<Param> {
    let param = |name: String, ty, kind| Param {
        name,
        ty,
        kind,
        tmap: None,
        workspace: None,
    };
    inputs
        .enumerate()
        .map(|(i, d)| param(format!("in{i}"), CType::of(d), ParamKind::Input))
        .chain(
            outputs
                .enumerate()
                .map(|(j, d)| param(format!("out{j}"), CType::of(d), ParamKind::Output)),
        )
        .chain(
            symbols
                .iter()
                .map(|s| param(cexpr::sym(s), CType::I32, ParamKind::Symbol)),
        )
        .collect()
}

/// Every symbol `r`'s sizes and index expressions mention, sorted.
pub fn symbols(r: &Region) -> BTreeSet<String> {
    let mut s = BTreeSet::new();
    let sizes = r
        .iters
        .iter()
        .filter_map(|i| i.size.as_ref())
        .chain(r.inputs.iter().flat_map(|i| &i.memref.shape))
        .chain(r.outputs.iter().flat_map(|o| &o.memref.shape));
    for d in sizes {
        s.extend(d.0.symbols());
    }
    let mut axes: BTreeSet<String> = r.iters.iter().map(|i| i.name.clone()).collect();
    for l in &r.lets {
        collect_axes(&l.expr, &mut axes);
    }
    for l in &r.lets {
        walk_names(&l.expr, &mut |n| {
            if !axes.contains(n) {
                s.insert(n.to_string());
            }
        });
        walk_exprs(&l.expr, &mut |e| {
            if let Expr::Reduce(red) = e {
                for (_, ext) in &red.extents {
                    s.extend(ext.0.symbols());
                }
            }
        });
    }
    s
}

fn walk_exprs(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    for c in crate::ir::region::verify::children(e) {
        walk_exprs(c, f);
    }
}

fn collect_axes(e: &Expr, axes: &mut BTreeSet<String>) {
    walk_exprs(e, &mut |x| {
        if let Expr::Reduce(r) = x {
            axes.extend(r.axes.iter().cloned());
        }
    });
}

fn walk_names(e: &Expr, f: &mut dyn FnMut(&str)) {
    walk_exprs(e, &mut |x| {
        let mut on = |a: &AxisExpr| a.for_each_name(f);
        match x {
            Expr::Read { map, .. } | Expr::Gather { map, .. } => map.iter().for_each(&mut on),
            Expr::Index(a) => on(a),
            Expr::Select { pred, .. } => pred.for_each_expr(&mut on),
            _ => {}
        }
    });
}

/// Binds the iters `axes` (sizes `sizes`, C) from the flat row-major index `flat` (C): emits
/// the `const int` decomposition and binds each axis to its variable.
pub fn bind_flat(em: &mut Emitter, axes: &[String], sizes: &[String], flat: &str, base: &str) {
    use super::gpu::Stmt;
    let mut rest = flat.to_string();
    for (d, (a, s)) in axes.iter().zip(sizes).enumerate().rev() {
        let v = em.fresh(&format!("{base}{}", cexpr::ident(a)));
        let value = if d == 0 {
            rest.clone()
        } else if s == "1" {
            "0".to_string()
        } else {
            format!("({rest}) % {s}")
        };
        em.emit(Stmt::int(&v, value));
        em.bind(a, v);
        if d > 0 {
            let q = em.fresh("q");
            em.emit(Stmt::int(
                &q,
                if s == "1" {
                    rest.clone()
                } else {
                    format!("({rest}) / {s}")
                },
            ));
            rest = q;
        }
    }
}

/// Stores every yield of the region at the current point; `guard` (C) predicates the stores.
pub fn store_yields(em: &mut Emitter) -> Result<(), super::CodegenError> {
    use super::gpu::Stmt;
    let r = em.region;
    let off = em.output_offset();
    let off = em.materialize(
        "off",
        super::scalar::Val {
            code: off,
            kind: crate::ir::region::kind::Kind::I32,
        },
    );
    for y in &r.yields {
        let (j, dt) = yield_output(r, y)?;
        let v = em.let_value(&y.from)?;
        em.emit(Stmt::Store {
            buffer: format!("out{j}"),
            index: off.code.clone(),
            value: super::scalar::store_value(&v, dt),
            ty: CType::of(dt),
            vector: 1,
        });
    }
    Ok(())
}

/// The output `y` writes: its index (`out{j}`) and dtype.
pub fn yield_output(
    r: &Region,
    y: &crate::ir::region::Yield,
) -> Result<(usize, DType), super::CodegenError> {
    r.outputs
        .iter()
        .enumerate()
        .find(|(_, o)| o.name == y.to)
        .map(|(j, o)| (j, o.dtype))
        .ok_or_else(|| super::CodegenError::Unsupported {
            kernel: r.name.clone(),
            why: format!("yield to unknown output `{}`", y.to),
        })
}
