//! The optimizer pipeline (`dlc-egg optimize`): Tiny program → e-graph → rule phases (movement,
//! rbssa, srnf, contraction, epilogue; `crate::rules::all_phases_with`) → phase "kernels" (fusion with
//! region synthesis as the legality oracle) → extraction of a kernel cover → a
//! [`RegionProgram`] of RB-SSA regions (seed 001 §6.8) that the region evaluator can run.
//!
//! Everything is deterministic: egg runs with its `deterministic` feature, kernels are ordered by
//! a post-order walk from the outputs in signature order, and buffer names are numbered in that
//! order. Only `PhaseStats::time` varies between runs.

mod build;
pub mod compute_at;
pub mod explain;

use crate::extract::cover::{extract_cover, Cover, CoverError};
use crate::extract::dag::{
    ExactExtractor, ExtractError, ExtractOptions, Extractor, FastExtractor, Status,
};
use crate::extract::kernels::{dag_cost, CostModel, KernelCost, RegionCache};
use crate::ir::egraph::{add_program, TensorFacts, TensorGraph, TensorLang};
use crate::ir::region::program::RegionProgram;
use crate::ir::tiny::Program;
use crate::rules::fusion::{self, FusionLimits, Legality};
use crate::rules::{all_phases_with, run_phase, Budget, PhaseStats};
use crate::target::{Arch, Target};
use egg::{Id, RecExpr};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

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
    /// Size assumed for unbound symbols when pricing kernels that `pricing` does not give.
    pub default_size: i64,
    /// Sizes symbols are priced with (a shape cluster's representative binding,
    /// `crate::shapes`); they take precedence over the program's default `symbols`. Pricing
    /// only: the program stays symbolic.
    pub pricing: BTreeMap<String, i64>,
    /// The GPU kernels are priced and planned for (`--arch`; default H100, sm90).
    pub target: Target,
    /// Also run the rewrites exact for finite values only (`--fast-math`,
    /// `rules::srnf::FAST_MATH_RULES`).
    pub fast_math: bool,
    /// Embed producer reductions in consumers' window reductions where it pays (compute-at,
    /// seed 003; `--no-compute-at` turns it off).
    pub compute_at: bool,
    /// Record egg explanations so the report can give the rewrite chain of every output.
    pub explain: bool,
    /// Which extractor chooses the kernel cover.
    pub extractor: ExtractorKind,
    /// The exact extractor's time limit; at it, the best cover found so far is used (never
    /// worse than the fast extractor's, which seeds it).
    pub extract_time_limit: Duration,
}

/// The extractors `dlc-egg optimize --extractor` offers (both DAG-aware: a kernel read by
/// several consumers is paid once).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtractorKind {
    /// Greedy DAG fixpoint plus local improvement (`extract::dag::FastExtractor`).
    Fast,
    /// Integer linear program with lazy cycle cuts (`extract::dag::ExactExtractor`).
    Exact,
}

impl Default for OptimizeOptions {
    fn default() -> OptimizeOptions {
        OptimizeOptions {
            budget: Budget::default(),
            kernel_budget: Budget::kernels(),
            fusion: FusionLimits::default(),
            default_size: 1024,
            pricing: BTreeMap::new(),
            target: Arch::Sm90.target(),
            fast_math: false,
            compute_at: true,
            explain: false,
            extractor: ExtractorKind::Fast,
            extract_time_limit: Duration::from_secs(60),
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
    #[error("extraction failed: {0}")]
    Extraction(String),
}

/// The result of [`optimize`].
pub struct Optimized {
    /// Statistics of every phase, in order.
    pub phases: Vec<PhaseStats>,
    /// The extracted program.
    pub program: RegionProgram,
    /// Every kernel of `program` with its plan, chosen once (`crate::codegen::emit::plan_program`):
    /// what `kernels`' reports, `--dump plan`, the manifest and code generation read.
    pub planned: Vec<crate::codegen::emit::PlannedKernel>,
    /// One entry per region of `program`, in order.
    pub kernels: Vec<KernelInfo>,
    /// The cover's cost counted as a DAG (every kernel once).
    pub cost: KernelCost,
    /// How the cover was chosen.
    pub extraction: ExtractionInfo,
    /// Per output, the rules on the rewrite chain from the input term to the extracted one
    /// (empty unless `explain`).
    pub rewrites: Vec<explain::RewriteChain>,
    /// The final e-graph (for `--dump egraph`).
    pub egraph: TensorGraph,
    /// The e-classes of the program's outputs, in signature order.
    pub roots: Vec<Id>,
    /// What the kernels were priced with.
    pub model: CostModel,
}

/// Legality oracle of the kernels phase: a body is one kernel when region synthesis accepts it.
/// The regions go to `cache`, where pricing finds them.
pub fn region_legality(cache: Arc<RegionCache>) -> Legality {
    region_legality_with(cache, true)
}

/// [`region_legality`], rejecting compute-at embeddings unless `compute_at`.
pub fn region_legality_with(cache: Arc<RegionCache>, compute_at: bool) -> Legality {
    Arc::new(move |body: &RecExpr<TensorLang>, inputs: &[TensorFacts]| {
        let r = cache.region(body, inputs)?;
        if !compute_at && compute_at::embeds(&r) {
            return Err("compute-at embedding is turned off (--no-compute-at)".into());
        }
        Ok(())
    })
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
    for (name, rules) in all_phases_with(opts.fast_math) {
        let (e, st) = run_phase(eg, name, &rules, &opts.budget);
        eg = e;
        phases.push(st);
    }
    let regions = Arc::new(RegionCache::default());
    let kernel_rules = fusion::rules(
        region_legality_with(regions.clone(), opts.compute_at),
        opts.fusion.clone(),
    );
    let (eg, st) = run_phase(eg, "kernels", &kernel_rules, &opts.kernel_budget);
    phases.push(st);

    let mut bindings = prog.symbols.clone();
    bindings.extend(opts.pricing.iter().map(|(k, v)| (k.clone(), *v)));
    let sizes = CostModel {
        bindings,
        default_size: opts.default_size,
        target: opts.target.clone(),
        regions: Some(regions),
    };
    let roots: Vec<Id> = prog
        .outputs
        .iter()
        .map(|o| eg.find(class[o.node.index()]))
        .collect();
    let cover = choose_cover(&eg, prog, &roots, &sizes, opts)?;
    let choose = |c: Id| {
        cover
            .node(eg.find(c))
            .cloned()
            .expect("the extractor covers every class reachable from the roots")
    };
    let cost = dag_cost(&eg, &roots, &choose, &sizes);
    let (program, mut kernels, planned) = build::build_program(
        &eg,
        prog,
        &class,
        &roots,
        &choose,
        &sizes,
        // Why a pair stayed apart: only for `--explain` (it synthesizes and prices the
        // fused candidates).
        opts.explain && opts.compute_at,
    )?;
    // What is printed is what runs: the planned kernels' times and launches.
    let cost = build::planned_cost(cost, &planned);
    if opts.explain && opts.compute_at && kernels.iter().any(|k| k.embeds) {
        // Profitability: the same program without compute-at, side by side.
        let split = optimize(
            prog,
            &OptimizeOptions {
                compute_at: false,
                explain: false,
                ..opts.clone()
            },
        )?;
        let line = compute_at::profit_line(&cost, &split.cost);
        for k in kernels.iter_mut().filter(|k| k.embeds) {
            k.compute_at.push(line.clone());
        }
    }
    let extracted: Vec<(String, Id, RecExpr<TensorLang>)> = if opts.explain {
        prog.outputs
            .iter()
            .zip(&roots)
            .filter_map(|(o, r)| {
                Some((
                    o.tensor.clone(),
                    class[o.node.index()],
                    cover.term(&eg, *r)?,
                ))
            })
            .collect()
    } else {
        Vec::new()
    };
    let extraction = ExtractionInfo {
        extractor: opts.extractor,
        status: cover.status,
        price: cover.price,
        lower_bound: cover.lower_bound,
    };
    let mut eg = eg;
    let rewrites = explain::rewrite_chains(&mut eg, &extracted);
    Ok(Optimized {
        phases,
        program,
        planned,
        kernels,
        cost,
        extraction,
        rewrites,
        egraph: eg,
        roots,
        model: sizes,
    })
}

/// How the kernel cover was chosen (for `--explain` and `--report`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExtractionInfo {
    pub extractor: ExtractorKind,
    /// `optimal` (proven), `heuristic` (fast) or `time_limit` (exact stopped at its limit).
    pub status: Status,
    /// The cover's DAG cost in nanoseconds (`KernelCost::scalar` summed over kernels), and
    /// the exact extractor's proven lower bound on it.
    pub price: f64,
    pub lower_bound: Option<f64>,
}

/// The kernel cover of the outputs by the chosen extractor; an output without a finite cover
/// is [`OptimizeError::Unrealizable`].
fn choose_cover(
    eg: &TensorGraph,
    prog: &Program,
    roots: &[Id],
    sizes: &CostModel,
    opts: &OptimizeOptions,
) -> Result<Cover, OptimizeError> {
    let extractor: Box<dyn Extractor> = match opts.extractor {
        ExtractorKind::Fast => Box::new(FastExtractor::default()),
        ExtractorKind::Exact => Box::new(ExactExtractor::default()),
    };
    let limits = ExtractOptions {
        time_limit: Some(opts.extract_time_limit),
    };
    extract_cover(eg, roots, sizes, extractor.as_ref(), &limits).map_err(|e| match e {
        CoverError::Extract(ExtractError::NoFiniteSolution { root }) => {
            let output = prog
                .outputs
                .iter()
                .zip(roots)
                .find(|(_, r)| r.to_string() == root)
                .map(|(o, _)| o.tensor.clone())
                .unwrap_or(root);
            OptimizeError::Unrealizable(output)
        }
        e => OptimizeError::Extraction(e.to_string()),
    })
}

/// The report of an optimization (`--report`, and what `--explain` prints).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The GPU the kernels were planned for.
    pub target: Target,
    pub kernels: Vec<KernelInfo>,
    pub cost: KernelCost,
    pub extraction: ExtractionInfo,
    pub phases: Vec<PhaseStats>,
    pub rewrites: Vec<explain::RewriteChain>,
}

impl Optimized {
    /// The report.
    pub fn report(&self) -> Report {
        Report {
            target: self.model.target.clone(),
            kernels: self.kernels.clone(),
            cost: self.cost,
            extraction: self.extraction.clone(),
            phases: self.phases.clone(),
            rewrites: self.rewrites.clone(),
        }
    }
}
