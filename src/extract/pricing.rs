//! Kernel pricing for extraction: a [`KernelPricer`] says what one kernel e-node costs by itself
//! (its inputs are priced separately), and the DAG-aware extractor chooses the cover of least
//! total price. [`Roofline`] is the built-in pricer (the predicted time of the kernel's best
//! schedule plan, `crate::cost`); a library user's pricer changes which kernels the cover uses
//! (`crate::optimize::OptimizeOptions::with_pricer`).
//!
//! A pricer decides the cover only: every chosen kernel is still planned and emitted by the
//! roofline model's best plan (code generation needs one), and [`crate::optimize::KernelInfo`]
//! reports that plan's predicted cost.
//!
//! ```
//! use dlc_egg::extract::kernels::{CostModel, KernelCost};
//! use dlc_egg::extract::pricing::{KernelPricer, Roofline};
//! use dlc_egg::ir::egraph::{TensorGraph, TensorLang};
//!
//! /// Fewest kernels first, then the roofline's time.
//! struct FewestKernels;
//!
//! impl KernelPricer for FewestKernels {
//!     fn name(&self) -> &str {
//!         "fewest-kernels"
//!     }
//!     fn price(&self, eg: &TensorGraph, kernel: &TensorLang, model: &CostModel) -> KernelCost {
//!         let roofline = Roofline.price(eg, kernel, model);
//!         if roofline.is_infinite() {
//!             return roofline; // no region or no plan: the kernel cannot run
//!         }
//!         // One millisecond per launch dominates any predicted time difference.
//!         KernelCost { time: roofline.time.plus(dlc_egg::cost::Time::from_secs(1e-3)), ..roofline }
//!     }
//! }
//! # let _ = FewestKernels;
//! ```

use super::kernels::{kernel_own_cost, CostModel, KernelCost};
use crate::ir::egraph::{TensorGraph, TensorLang};
use crate::target::Target;
use rayon::prelude::*;

/// Prices one kernel e-node (`(kernel {body} in…)`) by itself, without its inputs.
///
/// Contract: the price is `≥ 0`, [`KernelCost::INFINITY`] for a kernel that must not be chosen
/// (keep the roofline's infinity: it means the kernel has no region or no plan and cannot be
/// emitted), and deterministic (the same kernel and model give the same price). Extractors add
/// prices as [`KernelCost::scalar`].
pub trait KernelPricer: Send + Sync {
    /// A short name for reports (`roofline`).
    fn name(&self) -> &str;
    /// The price of `kernel`, an e-node of `eg`, under `model` (sizes and target).
    fn price(&self, eg: &TensorGraph, kernel: &TensorLang, model: &CostModel) -> KernelCost;

    /// The prices of many kernel e-nodes of `eg`, in order: what extraction asks for, once,
    /// with every kernel e-node of the e-graph. The default calls [`KernelPricer::price`] on
    /// each, in parallel; a pricer may share work between the nodes but must return exactly
    /// what `price` returns for each.
    fn price_all(
        &self,
        eg: &TensorGraph,
        kernels: &[&TensorLang],
        model: &CostModel,
    ) -> Vec<KernelCost> {
        kernels
            .par_iter()
            .map(|k| self.price(eg, k, model))
            .collect()
    }

    /// [`KernelPricer::price_all`] with each kernel's part in an attention pair (`None`: in
    /// none). A pricer that prices the first kernel of a pair below what it costs by itself
    /// (at its share of the fused kernel, as [`Roofline`] does) must say so here: the extractor
    /// then checks every cover it finds and reprices a first kernel that the cover runs by
    /// itself (read by another kernel too, or a graph output), [`super::cover`]. The default:
    /// `price_all`, no pairs.
    fn price_all_paired(
        &self,
        eg: &TensorGraph,
        kernels: &[&TensorLang],
        model: &CostModel,
    ) -> (Vec<KernelCost>, Vec<Option<PairRole>>) {
        let costs = self.price_all(eg, kernels, model);
        let roles = vec![None; costs.len()];
        (costs, roles)
    }

    /// The parallel units of `target` a kernel must fill before more work in it costs more
    /// time under this pricer, for the graph substitutions' merge gate
    /// (`crate::rules::subst::MergeGate`): batched projections sharing an input merge only
    /// where one launches fewer CTAs than this. The default is the roofline's, the target's
    /// SM count; `None` for a pricer under which a merged GEMM never prices above its parts
    /// (the CPU model: merge always, the extractor decides).
    fn merge_units(&self, target: &Target) -> Option<u32> {
        Some(target.sms)
    }
}

/// The built-in pricer: the predicted time of the kernel's best schedule plan on the target
/// (roofline model, seed 001 §11), then bytes, launches, narrow roundings, flops and body ops as
/// tie-breakers ([`kernel_own_cost`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Roofline;

impl KernelPricer for Roofline {
    fn name(&self) -> &str {
        "roofline"
    }

    fn price(&self, eg: &TensorGraph, kernel: &TensorLang, model: &CostModel) -> KernelCost {
        kernel_own_cost(eg, kernel, model)
    }

    /// [`kernel_own_cost`] of each, with the first kernels of attention pairs listed once per
    /// input class instead of once per reader.
    fn price_all(
        &self,
        eg: &TensorGraph,
        kernels: &[&TensorLang],
        model: &CostModel,
    ) -> Vec<KernelCost> {
        super::own_cost::kernel_own_costs(eg, kernels, model)
    }

    /// [`Roofline::price_all`] with the attention pairs: a second kernel (`P·V`) is priced at
    /// the fused kernel less its first kernel's share, the first kernel at that share.
    fn price_all_paired(
        &self,
        eg: &TensorGraph,
        kernels: &[&TensorLang],
        model: &CostModel,
    ) -> (Vec<KernelCost>, Vec<Option<PairRole>>) {
        super::own_cost::kernel_own_costs_paired(eg, kernels, model)
    }
}

/// A kernel e-node's part in an attention pair, as its pricer priced it
/// ([`KernelPricer::price_all_paired`]).
#[derive(Clone, Debug, PartialEq)]
pub enum PairRole {
    /// The first kernel of a pair (scores and softmax), priced below `alone`, what it costs
    /// when it runs by itself (it only runs inside the fused kernel when its one reader is a
    /// second kernel paired with it and it is no graph output).
    First {
        /// Its price by itself.
        alone: KernelCost,
    },
    /// A second kernel (`P·V`) priced as fused with the first kernel e-node `first` (of one of
    /// its input classes); `alone`: its price when that first kernel is not fused with it.
    Second {
        /// The first kernel e-node it pairs with.
        first: TensorLang,
        /// Its price by itself.
        alone: KernelCost,
    },
}
