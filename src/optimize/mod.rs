//! The optimizer pipeline (`dlc-egg optimize`): Tiny program → e-graph → rule phases (movement,
//! rbssa, srnf, contraction, epilogue; `crate::rules::all_phases`) → phase "kernels" (fusion with
//! region synthesis as the legality oracle) → extraction of a kernel cover → a
//! [`RegionProgram`] of RB-SSA regions (seed 001 §6.8) that the region evaluator can run.
//!
//! Everything is deterministic: egg runs with its `deterministic` feature, kernels are ordered by
//! a post-order walk from the outputs in signature order, and buffer names are numbered in that
//! order. Only `PhaseStats::time` varies between runs.

mod build;
pub mod explain;

use crate::extract::kernels::{dag_cost, BytesCost, CostSizes, KernelCost};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::egraph::{add_program, TensorFacts, TensorGraph, TensorLang};
use crate::ir::region::program::RegionProgram;
use crate::ir::region::synth::{synthesize, SynthArg};
use crate::ir::region::Materialize;
use crate::ir::tiny::Program;
use crate::rules::fusion::{self, FusionLimits, Legality};
use crate::rules::{all_phases, run_phase, Budget, PhaseStats};
use egg::{Extractor, Id, RecExpr};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use build::KernelInfo;

/// Options of [`optimize`].
#[derive(Clone, Debug)]
pub struct OptimizeOptions {
    /// Budget of every rewrite phase (see [`Budget`] for the defaults and why).
    pub budget: Budget,
    /// Budget of the kernels phase.
    pub kernel_budget: Budget,
    /// Limits of kernel growth.
    pub fusion: FusionLimits,
    /// Size assumed for unbound symbols when pricing kernels (TODO(cost model)).
    pub default_size: i64,
    /// Record egg explanations so the report can give the rewrite chain of every output.
    pub explain: bool,
}

impl Default for OptimizeOptions {
    fn default() -> OptimizeOptions {
        OptimizeOptions {
            budget: Budget::default(),
            kernel_budget: Budget::default(),
            fusion: FusionLimits::default(),
            default_size: 1024,
            explain: false,
        }
    }
}

/// Why the optimizer could not produce a program (always a bug or an unsupported graph, never a
/// user error in a valid graph).
#[derive(Debug, thiserror::Error)]
pub enum OptimizeError {
    #[error("output `{0}` cannot be computed by any kernel (no finite-cost cover)")]
    Unrealizable(String),
    #[error("kernel `{kernel}` cannot be written as a region: {why}")]
    Region { kernel: String, why: String },
    #[error("the extracted program is invalid: {0}")]
    Program(String),
}

/// The result of [`optimize`].
pub struct Optimized {
    /// Statistics of every phase, in order.
    pub phases: Vec<PhaseStats>,
    /// The extracted program.
    pub program: RegionProgram,
    /// One entry per region of `program`, in order.
    pub kernels: Vec<KernelInfo>,
    /// The cover's cost counted as a DAG (every kernel once).
    pub cost: KernelCost,
    /// Per output, the rules on the rewrite chain from the input term to the extracted one
    /// (empty unless `explain`).
    pub rewrites: Vec<explain::RewriteChain>,
    /// The final e-graph (for `--dump egraph`).
    pub egraph: TensorGraph,
    /// The e-classes of the program's outputs, in signature order.
    pub roots: Vec<Id>,
}

/// A candidate kernel as the legality oracle sees it: its body and its inputs' types.
type LegalityKey = (RecExpr<TensorLang>, Vec<(DType, Vec<Dim>)>);

/// Legality oracle of the kernels phase: a body is one kernel when region synthesis accepts it.
/// Answers are memoized: the phase re-grows every kernel at each iteration, so most candidates
/// are asked about several times (about six times on average on `optimize_fuzz`'s graphs).
pub fn region_legality() -> Legality {
    let memo: Mutex<HashMap<LegalityKey, Result<(), String>>> = Mutex::default();
    Arc::new(move |body: &RecExpr<TensorLang>, inputs: &[TensorFacts]| {
        let key: LegalityKey = (
            body.clone(),
            inputs.iter().map(|f| (f.dtype, f.shape.clone())).collect(),
        );
        if let Some(r) = memo.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return r;
        }
        let r = synthesize_candidate(body, inputs);
        if let Ok(mut m) = memo.lock() {
            m.insert(key, r.clone());
        }
        r
    })
}

/// Region synthesis of a candidate body (inputs named `in0`, `in1`, …).
fn synthesize_candidate(body: &RecExpr<TensorLang>, inputs: &[TensorFacts]) -> Result<(), String> {
    let args: Vec<SynthArg> = inputs
        .iter()
        .enumerate()
        .map(|(i, f)| SynthArg {
            name: format!("in{i}"),
            dtype: f.dtype,
            shape: f.shape.clone(),
        })
        .collect();
    synthesize("candidate", body, &args, "out", Materialize::Gmem)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Runs the pipeline on a verified Tiny program.
pub fn optimize(prog: &Program, opts: &OptimizeOptions) -> Result<Optimized, OptimizeError> {
    let mut eg = if opts.explain {
        TensorGraph::default().with_explanations_enabled()
    } else {
        TensorGraph::default()
    };
    let class = add_program(&mut eg, prog);
    let mut phases = Vec::new();
    for (name, rules) in all_phases() {
        let (e, st) = run_phase(eg, name, &rules, &opts.budget);
        eg = e;
        phases.push(st);
    }
    let kernel_rules = fusion::rules(region_legality(), opts.fusion.clone());
    let (eg, st) = run_phase(eg, "kernels", &kernel_rules, &opts.kernel_budget);
    phases.push(st);

    let sizes = CostSizes {
        bindings: prog.symbols.clone(),
        default_size: opts.default_size,
    };
    let ex = Extractor::new(&eg, BytesCost::new(&eg, sizes.clone()));
    let roots: Vec<Id> = prog
        .outputs
        .iter()
        .map(|o| eg.find(class[o.node.index()]))
        .collect();
    for (o, r) in prog.outputs.iter().zip(&roots) {
        if ex.find_best_cost(*r).is_infinite() {
            return Err(OptimizeError::Unrealizable(o.tensor.clone()));
        }
    }
    let choose = |c: Id| ex.find_best_node(c).clone();
    let cost = dag_cost(&eg, &roots, &choose, &sizes);
    let (program, kernels) = build::build_program(&eg, prog, &class, &roots, &choose, &sizes)?;
    let extracted: Vec<(String, Id, RecExpr<TensorLang>)> = if opts.explain {
        prog.outputs
            .iter()
            .zip(&roots)
            .map(|(o, r)| (o.tensor.clone(), class[o.node.index()], ex.find_best(*r).1))
            .collect()
    } else {
        Vec::new()
    };
    drop(ex);
    let mut eg = eg;
    let rewrites = explain::rewrite_chains(&mut eg, &extracted);
    Ok(Optimized {
        phases,
        program,
        kernels,
        cost,
        rewrites,
        egraph: eg,
        roots,
    })
}

/// The report of an optimization (`--report`, and what `--explain` prints).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub kernels: Vec<KernelInfo>,
    pub cost: KernelCost,
    pub phases: Vec<PhaseStats>,
    pub rewrites: Vec<explain::RewriteChain>,
}

impl Optimized {
    /// The report.
    pub fn report(&self) -> Report {
        Report {
            kernels: self.kernels.clone(),
            cost: self.cost,
            phases: self.phases.clone(),
            rewrites: self.rewrites.clone(),
        }
    }
}
