//! The arithmetic of a region as the C backend runs it: every let once per point of its free
//! iters (what [`super::calibrate::KernelFeatures`] prices).
//!
//! The GPU work analysis ([`crate::cost::work::analyze`]) counts a let that is not a reduction
//! once per *output element*: a GPU template maps threads to output elements and does not share
//! a loop-invariant value between them. The C emitter does share it: in the rows form a let
//! free of the inner iter is one scalar per row (LayerNorm's `1 / sqrt(var + eps)`, softmax's
//! reciprocal), in the flat form every let is an array over its free iters. Priced per element,
//! LayerNorm `[8192, 768]` had `3 · 8192 · 768` transcendentals (two divisions and the rsqrt)
//! instead of `3 · 8192`: 3.6 ms of phantom work at one thread, which made extraction at
//! `--threads 1` prefer a two-kernel cover whose variance kernel ran 28 ms (its per-row folds
//! were serial chains; the flat form now folds them in lane accumulators too) over the fused
//! kernel. The per-op costs are the GPU analysis'
//! table ([`crate::cost::work::node_cost`]), which the
//! calibrated parameters were fitted with.
//!
//! A reduce *nested* in a let's expression (below its top: in the body of the let's reduce or
//! under a pointwise op) is a scalar statement expression in the C (`({ float acc = 0; for …
//! acc = acc + …; acc; })`) evaluated per point: its accumulations are one dependent chain,
//! not the lane accumulators or interchanged vector loops of a let's own reduce. Its work is
//! counted [`SERIAL_CHAIN`] times. MobileNetV2's last 1×1 convolution (320 → 1280 on 7×7)
//! fused into the global average pool as such a nested sum was priced 0.61 ms and ran 31 ms
//! of the model's 74 (40 MFLOP at 0.65 GFLOP/s per thread, `bench/results/cpu-models-2026-11-28-3.md`).

use crate::cost::work::{node_cost, Ops, Sizes};
use crate::ir::region::verify::{children, reduce_extents, verify};
use crate::ir::region::{Expr, Region};

/// The arithmetic of `r` with every let counted once per point of its free iters (reductions:
/// their whole fold per point), sized by `sizes`; `None` when `r` does not verify.
pub fn region_ops(r: &Region, sizes: &dyn Sizes) -> Option<Ops> {
    let checked = verify(r).ok()?;
    let size = |d: &crate::ir::dim::Dim| sizes.numel(std::slice::from_ref(d)) as f64;
    let mut total = Ops::default();
    for (l, free) in r.lets.iter().zip(&checked.let_free) {
        let evals: f64 = free.iter().map(|i| size(&checked.iter_sizes[*i])).product();
        let o = expr_ops(r, &checked.iter_sizes, sizes, &l.expr, &l.name, false)?;
        total.tensor += o.tensor * evals;
        total.simt += o.simt * evals;
        total.sfu += o.sfu * evals;
    }
    Some(total)
}

/// How many vector operations one operation of a scalar dependent chain costs: a vector FMA
/// unit does 2 FMAs of 8 fp32 lanes per cycle (AVX2; 32 flops), a chain one multiply and one
/// dependent add per add latency (3 cycles on Zen 3: 2/3 flop per cycle), 48 times fewer.
pub const SERIAL_CHAIN: f64 = 48.0;

/// Ops of one evaluation of `e` (a reduction: its whole fold, one accumulation per element);
/// `nested`: `e` is below the top of its let, where a reduce is a serial chain.
fn expr_ops(
    r: &Region,
    iter_sizes: &[crate::ir::dim::Dim],
    sizes: &dyn Sizes,
    e: &Expr,
    at: &str,
    nested: bool,
) -> Option<Ops> {
    let mut o = Ops::default();
    match e {
        Expr::Reduce(red) => {
            let ext = reduce_extents(r, red, iter_sizes, at).ok()?;
            let n: f64 = ext
                .iter()
                .map(|d| sizes.numel(std::slice::from_ref(d)) as f64)
                .product();
            let mut body = expr_ops(r, iter_sizes, sizes, &red.body, at, true)?;
            body.simt += 1.0; // the accumulation
            let serial = if nested { SERIAL_CHAIN } else { 1.0 };
            o.add(body, n * serial);
            return Some(o);
        }
        _ => {
            let (simt, sfu) = node_cost(e);
            o.simt += simt;
            o.sfu += sfu;
        }
    }
    for c in children(e) {
        let x = expr_ops(r, iter_sizes, sizes, c, at, true)?;
        o.add(x, 1.0);
    }
    Some(o)
}
