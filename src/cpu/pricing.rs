//! Extraction for the CPU target (issue 16): [`CpuPricer`] prices every kernel e-node with the
//! CPU roofline of [`super::calibrate`] (the model `dlc-egg calibrate` fits), so that the cover
//! `run --device cpu` and `optimize --target cpu` emit is the one cheapest on this machine —
//! what is priced is what is emitted (the C backend emits the chosen regions as they are).
//!
//! Why it matters: under the GPU model a rewrite that multiplies a kernel's arithmetic to save
//! a kernel (LayerNorm's mean distributed over the two GEMMs before it in a BERT layer: a let
//! of `128 × 768·3072` multiply-adds) is nearly free on 60 TFLOP/s; on two CPU threads it is
//! tens of milliseconds, against microseconds for the separate mean.
//!
//! A kernel without a region or without a GPU plan keeps the roofline's infinity (code
//! generation and the plan report still read the chosen kernels' plans); the tie-breakers
//! (bytes, launches, roundings, flops, ops) are the roofline's.

use super::calibrate::{CpuCostParams, KernelFeatures};
use crate::cost::Time;
use crate::extract::kernels::{synthesize_kernel, CostModel, KernelCost};
use crate::extract::pricing::{KernelPricer, Roofline};
use crate::ir::egraph::kernel::kernel_parts;
use crate::ir::egraph::{TensorFacts, TensorGraph, TensorLang};
use std::sync::Arc;

/// Prices kernels with the CPU roofline ([`CpuCostParams::predict_ms`]) at a thread count.
#[derive(Clone, Debug)]
pub struct CpuPricer {
    /// The model's parameters (calibrated, or the defaults).
    pub params: CpuCostParams,
    /// Threads per kernel.
    pub threads: usize,
    name: String,
}

impl CpuPricer {
    /// A pricer for `params` at `threads` threads; its name (part of the plan-cache key) carries
    /// both, so a recalibration or another thread count re-extracts.
    pub fn new(params: CpuCostParams, threads: usize) -> CpuPricer {
        let name = format!(
            "cpu-roofline(bw={:.4},gf={:.4},tr={:.4},oh={:.4},t={threads})",
            params.bandwidth_gbs,
            params.gflops_per_thread,
            params.transcendental_ns,
            params.overhead_us
        );
        CpuPricer {
            params,
            threads,
            name,
        }
    }

    /// The CPU model's time of a kernel e-node, `None` when it has no region.
    fn cpu_time(&self, eg: &TensorGraph, kernel: &TensorLang, model: &CostModel) -> Option<Time> {
        let TensorLang::Kernel(children) = kernel else {
            return None;
        };
        let attr = |id| eg[id].data.attr();
        let (body, inputs) = kernel_parts(children, &attr).ok()?;
        let facts: Vec<TensorFacts> = inputs
            .iter()
            .map(|i| eg[*i].data.tensor().cloned())
            .collect::<Option<_>>()?;
        let region = match &model.regions {
            Some(cache) => cache.region(body.expr(), &facts).ok()?,
            None => Arc::new(synthesize_kernel(body.expr(), &facts).ok()?),
        };
        let f = KernelFeatures::with_model(&region, model)?;
        Some(Time::from_secs(
            self.params.predict_ms(&f, self.threads) * 1e-3,
        ))
    }
}

impl KernelPricer for CpuPricer {
    fn name(&self) -> &str {
        &self.name
    }

    fn price(&self, eg: &TensorGraph, kernel: &TensorLang, model: &CostModel) -> KernelCost {
        let roofline = Roofline.price(eg, kernel, model);
        if roofline.is_infinite() {
            return roofline;
        }
        match self.cpu_time(eg, kernel, model) {
            Some(time) => KernelCost { time, ..roofline },
            None => KernelCost::INFINITY,
        }
    }

    /// `None`: merge always. The model's time is a per-kernel overhead plus the larger of
    /// compute and memory time ([`CpuCostParams::predict_ms`]), so a GEMM merging projections
    /// that share `X` (the flops of its parts, `X` read once, one overhead) never prices above
    /// its parts; the extractor decides whether the merged cover (its column reads included)
    /// is cheaper.
    fn merge_units(&self, _target: &crate::target::Target) -> Option<u32> {
        None
    }
}

/// `opts` with extraction priced for the CPU at `threads` threads: the parameters of
/// [`CpuCostParams::load`] (`$DLC_CPU_COST`, else `cpu-cost.json` in the native cache beside
/// `plan_cache`, else the defaults).
pub fn cpu_optimize_options(
    opts: crate::optimize::OptimizeOptions,
    plan_cache: Option<&std::path::Path>,
    threads: usize,
) -> Result<crate::optimize::OptimizeOptions, super::CpuError> {
    let params = CpuCostParams::load(&super::build::cache_dir(plan_cache))?;
    Ok(opts.with_pricer(CpuPricer::new(params, threads)))
}
