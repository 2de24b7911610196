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
mod cover;
pub use cover::{choose_cover, MERGED_WORK_PER_NODE};
pub mod explain;
pub mod extend;
mod load_steps;

use crate::extract::cover::Cover;
use crate::extract::dag::Status;
use crate::extract::derived::Derived;
use crate::extract::kernels::{cover_cost_derived, CostModel, KernelCost, RegionCache};
use crate::extract::pricing::{KernelPricer, Roofline};
use crate::ir::egraph::{add_program, TensorFacts, TensorGraph, TensorLang};
use crate::ir::region::program::RegionProgram;
use crate::ir::tiny::Program;
use crate::rules::fusion::{self, Fingerprints, FusionLimits, Legality};
use crate::rules::subst::MergeGate;
use crate::rules::{try_run_phase, Budget, PhaseStats, RuleError};
use crate::target::{Arch, Target};
use egg::{Id, RecExpr};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use build::KernelInfo;
pub use extend::{AddedPhase, Extensions};

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
    /// Run the graph substitutions (phase "subst", `crate::rules::subst`: merged MatMuls
    /// sharing an input); `--no-subst` turns them off to measure what they buy.
    pub substitutions: bool,
    /// The graph inputs bound to values at load time (an imported model's initializers, the
    /// `constants` extension; [`bound_constants`]): a kernel over these only is a *derived
    /// constant*, computed once when the weights are bound instead of per run
    /// (`crate::extract::derived`). Empty (the default): every input is per-run data.
    pub constants: std::collections::BTreeSet<String>,
    /// A library user's rules, phases, pricer and extractor (empty: the CLI's pipeline); set
    /// them with the builder methods ([`OptimizeOptions::with_rule`], …, module [`extend`]).
    pub extensions: Extensions,
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
            substitutions: true,
            constants: std::collections::BTreeSet::new(),
            extensions: Extensions::default(),
        }
    }
}

/// Why the optimizer could not produce a program (always a bug or an unsupported graph, never a
/// user error in a valid graph).
#[derive(Debug, thiserror::Error)]
pub enum OptimizeError {
    /// No cover computes this output (named) with finite cost.
    #[error("output `{0}` cannot be computed by any kernel (no finite-cost cover)")]
    Unrealizable(String),
    /// A chosen kernel's body is not one region.
    #[error("kernel `{kernel}` cannot be written as a region: {why}")]
    Region {
        /// The kernel's name.
        kernel: String,
        /// Why region synthesis rejected it.
        why: String,
    },
    /// The region program fails verification.
    #[error("the extracted program is invalid: {0}")]
    Program(String),
    /// The extractor failed.
    #[error("extraction failed: {0}")]
    Extraction(String),
    /// A rule set added through [`OptimizeOptions::extensions`] is ill-typed, unsound or names
    /// an unknown phase (E1500–E1503: the user's error, not the compiler's).
    #[error(transparent)]
    Rule(#[from] RuleError),
}

/// Wall time of one step of [`optimize`] (`--timings`): building the e-graph, each rewrite
/// phase, pricing the kernel e-nodes, extraction, the cover's cost, regions and plans of the
/// chosen kernels, and `--explain`'s extras (compute-at comparison, rewrite chains).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepTime {
    /// The step (`e-graph build`, `phase kernels`, `pricing`, `extraction`, …).
    pub step: String,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// CPU seconds of the whole process (user + system, every thread) during the step, where
    /// the platform says (Linux: `/proc/self/stat`, 10 ms resolution); on a loaded machine
    /// the steadier measure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
}

pub use crate::timing::process_cpu_seconds;

/// The steps timed so far and the start of the current one (wall and process CPU).
struct Steps(Vec<StepTime>, Instant, Option<f64>);

impl Default for Steps {
    fn default() -> Steps {
        Steps(Vec::new(), Instant::now(), process_cpu_seconds())
    }
}

impl Steps {
    /// Ends the current step as `name`.
    fn lap(&mut self, name: &str) {
        let now = Instant::now();
        let cpu = process_cpu_seconds();
        self.0.push(StepTime {
            step: name.to_string(),
            seconds: now.duration_since(self.1).as_secs_f64(),
            cpu_seconds: cpu.zip(self.2).map(|(b, a)| (b - a).max(0.0)),
        });
        self.1 = now;
        self.2 = cpu;
    }

    /// Ends the current step as two: `first` took `first_s` wall and `first_cpu` CPU seconds
    /// of it, `rest` the remainder.
    fn split(&mut self, first: &str, (first_s, first_cpu): (f64, Option<f64>), rest: &str) {
        let total = self.1.elapsed().as_secs_f64();
        self.lap(rest);
        let last = self.0.len() - 1;
        let whole = &mut self.0[last];
        whole.seconds = (total - first_s).max(0.0);
        whole.cpu_seconds = whole
            .cpu_seconds
            .zip(first_cpu)
            .map(|(t, f)| (t - f).max(0.0));
        self.0.insert(
            last,
            StepTime {
                step: first.to_string(),
                seconds: first_s,
                cpu_seconds: first_cpu,
            },
        );
    }
}

/// The result of [`optimize`].
///
/// `Debug` prints everything but the e-graph, which it summarizes (node and class counts).
pub struct Optimized {
    /// Wall time of every step of the pipeline, in order (they differ between runs; the
    /// report carries them only with `--timings`).
    pub steps: Vec<StepTime>,
    /// Statistics of every phase, in order.
    pub phases: Vec<PhaseStats>,
    /// The extracted program.
    pub program: RegionProgram,
    /// Every kernel of `program` with its plan, chosen once (`crate::cost::program::plan_program`):
    /// what `kernels`' reports, `--dump plan`, the manifest and code generation read.
    pub planned: Vec<crate::codegen::emit::PlannedKernel>,
    /// One entry per region of `program`, in order.
    pub kernels: Vec<KernelInfo>,
    /// The derived-constant kernels (`program.derived`, in order): computed once when the
    /// weights are bound, not part of `kernels` or `cost`; each with its one-time cost.
    pub precomputed: Vec<KernelInfo>,
    /// The cover's cost counted as a DAG (every kernel once), under the pricer that chose it
    /// (the roofline model unless [`OptimizeOptions::with_pricer`]).
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
    /// The e-class of every node of the input Tiny program, by node index (canonical in
    /// `egraph`: pass it through `egraph.find`).
    pub classes: Vec<Id>,
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

/// Runs the pipeline on a verified Tiny program: every phase (built-in and added, checked:
/// a bad rule is [`OptimizeError::Rule`]), extraction of a kernel cover by the pricer and
/// extractor of `opts`, and the region program of that cover.
///
/// ```
/// use dlc_egg::optimize::{optimize, OptimizeOptions};
/// # let json = r#"{"signature": {"inputs": [{"tensor": "x"}], "outputs": [{"tensor": "y"}]},
/// #   "tensors": {"x": {"dtype": "fp32", "shape": [64]}, "y": {"dtype": "fp32", "shape": [64]}},
/// #   "graph": [{"op": "Elementwise", "name": "r", "inputs": ["x"], "outputs": ["h"],
/// #              "attrs": {"fn": "relu"}},
/// #             {"op": "Elementwise", "name": "e", "inputs": ["h"], "outputs": ["y"],
/// #              "attrs": {"fn": "exp"}}]}"#;
/// # let graph = dlc_egg::ir::frontend::load_str(json, "doc.json").unwrap();
/// let prog = dlc_egg::run::lower_and_verify(&graph)?;
/// let o = optimize(&prog, &OptimizeOptions::default())?;
/// assert_eq!(o.kernels.len(), 1); // relu and exp fused into one kernel
/// assert!(o.phases.iter().all(|p| p.saturated()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn optimize(prog: &Program, opts: &OptimizeOptions) -> Result<Optimized, OptimizeError> {
    let mut steps = Steps::default();
    let mut eg = if opts.explain {
        TensorGraph::default().with_explanations_enabled()
    } else {
        TensorGraph::default()
    };
    let class = add_program(&mut eg, prog);
    steps.lap("e-graph build");
    let regions = Arc::new(RegionCache::default());
    let mut bindings = prog.symbols.clone();
    bindings.extend(opts.pricing.iter().map(|(k, v)| (k.clone(), *v)));
    // The substitutions' merge gate is the pricer's: it decides the cover.
    let gate = MergeGate {
        bindings: bindings.clone(),
        default_size: opts.default_size,
        units: pricer(opts).merge_units(&opts.target),
    };
    let (eg, phases) = run_phases(eg, opts, &regions, &gate, &mut steps)?;

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
    let derived = Derived::analyze(&eg, &opts.constants, &sizes);
    let (cover, pricing) = cover::choose_cover_timed(&eg, prog, &roots, &sizes, opts, &derived)?;
    steps.split("pricing", pricing, "extraction");
    let choose = |c: Id| {
        cover
            .node(eg.find(c))
            .cloned()
            .expect("the extractor covers every class reachable from the roots")
    };
    let cost = cover_cost_derived(&eg, &roots, &choose, &sizes, pricer(opts), &derived);
    steps.lap("cover cost");
    let (program, mut kernels, planned, precomputed) = build::build_program(
        &eg,
        prog,
        &class,
        &roots,
        &choose,
        &sizes,
        &derived,
        // Why a pair stayed apart: only for `--explain` (it synthesizes and prices the
        // fused candidates).
        opts.explain && opts.compute_at,
    )?;
    // What is printed is what runs: the planned kernels' times and launches.
    let cost = build::planned_cost(cost, &planned);
    steps.lap("regions and plans");
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
        repriced_pairs: cover.repriced_pairs,
        custom: custom_names(opts),
    };
    let mut eg = eg;
    let rewrites = explain::rewrite_chains(&mut eg, &extracted);
    steps.lap("explain");
    Ok(Optimized {
        steps: steps.0,
        phases,
        program,
        planned,
        kernels,
        precomputed,
        cost,
        extraction,
        rewrites,
        egraph: eg,
        roots,
        classes: class,
        model: sizes,
    })
}

/// Runs every phase of `opts` ([`OptimizeOptions::phase_names`]) on `eg`, timing each in
/// `steps`. The kernels phase runs twice when the substitutions are on: once before phase
/// `subst`, so the kernels of the unsubstituted program are in the e-graph (unions never remove
/// e-nodes: the cover without substitutions stays available, so the exact extractor can only
/// do better with them; the fast one is a heuristic and is not monotone in added options,
/// TODO(issue 23): bench/results/covers-2026-11-27-5.md), and again after it, with the same rules and their memory, growing
/// only the seeds whose growth observed a class the substitutions changed
/// ([`fusion::GrowthState::forget_changed`]); when `subst` changed nothing, the second round is
/// skipped. Phases after the first kernels round get their node budget on top of the e-graph's
/// size (it holds every kernel by then).
fn run_phases(
    mut eg: TensorGraph,
    opts: &OptimizeOptions,
    regions: &Arc<RegionCache>,
    gate: &MergeGate,
    steps: &mut Steps,
) -> Result<(TensorGraph, Vec<PhaseStats>), OptimizeError> {
    let (kernel_rules, growth) = fusion::rules_with_state(
        region_legality_with(regions.clone(), opts.compute_at),
        opts.fusion.clone(),
    );
    let mut phases: Vec<PhaseStats> = Vec::new();
    // Fingerprints of the e-graph after the first kernels round (then `subst` runs).
    let mut before_subst: Option<fusion::Fingerprints> = None;
    let mut kernels_rounds = 0;
    for (name, mut rules) in opts.rewrite_phases(Some(gate))? {
        let budget = if name == extend::KERNELS_PHASE {
            kernels_rounds += 1;
            if kernels_rounds > 1 {
                let Some(before) = before_subst.take() else {
                    continue;
                };
                let changed = before.changed(&eg);
                if changed.is_empty() {
                    continue;
                }
                growth.forget_changed(&eg, &changed);
            }
            let mut fused = kernel_rules.clone();
            fused.append(&mut rules);
            rules = fused;
            opts.kernel_budget.clone()
        } else if kernels_rounds > 0 {
            if name == extend::SUBST_PHASE {
                if !opts.substitutions {
                    continue;
                }
                before_subst = Some(Fingerprints::of(&eg));
            }
            Budget {
                node_limit: eg.total_number_of_nodes() + opts.budget.node_limit,
                ..opts.budget.clone()
            }
        } else {
            opts.budget.clone()
        };
        // TODO(issue 23): the kernels phase replays recorded growths per seed across identical
        // layers (`FusionLimits::replay`) but still costs ~2.6-3.5 s CPU of the 12-layer BERT's
        // 5.6-8.1 s (one layer grown and recorded, kernel e-node adds, maximal-growth replays);
        // replaying whole layers is the next step (bench/results/optimize-speed-2026-11-26-3.md).
        let (e, st) = try_run_phase(eg, &name, &rules, &budget)?;
        eg = e;
        steps.lap(&format!("phase {name}"));
        phases.push(st);
    }
    Ok((eg, phases))
}

/// The signature inputs of `graph` whose values are bound when the program is loaded: weights
/// (`role: param` or `storage: const_pool`) with a value in
/// [`crate::ir::frontend::Graph::constants`] (an imported model's initializers, the `constants`
/// extension) that the program never writes. A `data` input is per-call even when the graph
/// gives it a default value. What
/// [`OptimizeOptions::constants`] is set to for a graph (`dlc-egg optimize`, `run`'s compiled
/// programs); a `param` without a value stays a per-run input.
pub fn bound_constants(graph: &crate::ir::frontend::Graph) -> std::collections::BTreeSet<String> {
    use crate::ir::frontend::{Mutability, Role, Storage};
    graph
        .signature
        .inputs
        .iter()
        .filter(|i| i.role == Role::Param || i.storage == Storage::ConstPool)
        .filter(|i| {
            i.mutability == Mutability::Immutable && graph.constants.contains_key(&i.tensor)
        })
        .map(|i| i.tensor.clone())
        .collect()
}

/// Optimizes `prog` (lowered from `graph`) with `opts`, whose `constants` become the weights
/// `graph` binds at load time ([`bound_constants`]): kernels over them only are derived
/// constants, computed once when the weights are bound (issue 23). The pipeline's step
/// (`crate::pipeline::optimize_graph`): the CLI's `optimize`, the ShapeSets' clusters and so
/// `run`'s compiled programs.
pub fn optimize_graph(
    graph: &crate::ir::frontend::Graph,
    prog: &Program,
    opts: &OptimizeOptions,
) -> Result<Optimized, OptimizeError> {
    let opts = OptimizeOptions {
        constants: bound_constants(graph),
        ..opts.clone()
    };
    optimize(prog, &opts)
}

/// The kernel pricer of `opts` ([`Roofline`] unless a user's).
fn pricer(opts: &OptimizeOptions) -> &dyn KernelPricer {
    match &opts.extensions.pricer {
        Some(p) => p.as_ref(),
        None => &Roofline,
    }
}

/// `pricer=NAME`, `extractor=NAME` for a user's pricer and extractor (for the report).
fn custom_names(opts: &OptimizeOptions) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(p) = &opts.extensions.pricer {
        parts.push(format!("pricer={}", p.name()));
    }
    if let Some(e) = &opts.extensions.extractor {
        parts.push(format!("extractor={}", e.name()));
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// A region program built from a kernel cover ([`program_of_cover`]).
#[derive(Clone, Debug)]
pub struct CoverProgram {
    /// The region program (one region per kernel, in post-order from the outputs).
    pub program: RegionProgram,
    /// One entry per region of `program`, in order.
    pub kernels: Vec<KernelInfo>,
    /// Every kernel with the plan chosen once for it (what code generation emits).
    pub planned: Vec<crate::codegen::emit::PlannedKernel>,
}

/// The region program of `cover` for a pipeline a library user assembled: `eg` holds `prog`
/// (`classes`: [`add_program`]'s class of every Tiny node) after a kernels phase, `cover` is a
/// cover of the outputs' classes ([`choose_cover`] or
/// [`crate::extract::cover::extract_cover_with`]), and `model` the sizes and target the
/// kernels are planned with. [`optimize`] does exactly this after extraction.
pub fn program_of_cover(
    eg: &TensorGraph,
    prog: &Program,
    classes: &[Id],
    cover: &Cover,
    model: &CostModel,
) -> Result<CoverProgram, OptimizeError> {
    let roots: Vec<Id> = prog
        .outputs
        .iter()
        .map(|o| eg.find(classes[o.node.index()]))
        .collect();
    // Every class reachable from the outputs through chosen nodes must have a choice.
    let mut stack = roots.clone();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(c) = stack.pop() {
        let c = eg.find(c);
        if !seen.insert(c) {
            continue;
        }
        match cover.node(c) {
            Some(TensorLang::Kernel(ch)) => stack.extend(ch[1..].iter().copied()),
            Some(TensorLang::Reshape([x, _])) => stack.push(*x),
            Some(TensorLang::Input(_)) => {}
            Some(n) => {
                return Err(OptimizeError::Extraction(format!(
                    "the cover realizes class {c} by `{n}`, which is not a kernel, input or reshape"
                )))
            }
            None => {
                return Err(OptimizeError::Extraction(format!(
                    "the cover does not realize class {c}, which the outputs need"
                )))
            }
        }
    }
    let choose = |c: Id| {
        cover
            .node(eg.find(c))
            .cloned()
            .expect("every needed class was checked above")
    };
    let (program, kernels, planned, _) = build::build_program(
        eg,
        prog,
        classes,
        &roots,
        &choose,
        model,
        &Derived::none(),
        false,
    )?;
    Ok(CoverProgram {
        program,
        kernels,
        planned,
    })
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// How the kernel cover was chosen (for `--explain` and `--report`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExtractionInfo {
    /// The built-in extractor named by the options (see `custom` for a user's).
    pub extractor: ExtractorKind,
    /// `optimal` (proven), `heuristic` (fast) or `time_limit` (exact stopped at its limit).
    pub status: Status,
    /// The cover's DAG cost in nanoseconds (`KernelCost::scalar` summed over kernels), and
    /// the exact extractor's proven lower bound on it.
    pub price: f64,
    /// The exact extractor's lower bound.
    pub lower_bound: Option<f64>,
    /// First kernels of attention pairs repriced at their unfused time because a cover ran them
    /// unfused (`extract::pair_check`; the status is then `heuristic`); omitted when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub repriced_pairs: usize,
    /// A library user's pricer and extractor (`pricer=NAME extractor=NAME`); absent for the
    /// built-in ones (the CLI's report).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom: Option<String>,
}

/// The report of an optimization (`--report`, and what `--explain` prints).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The GPU the kernels were planned for.
    pub target: Target,
    /// Every kernel, in program order.
    pub kernels: Vec<KernelInfo>,
    /// The derived constants precomputed at load time (not per-run kernels).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub precomputed: Vec<KernelInfo>,
    /// The cover's cost (every kernel once).
    pub cost: KernelCost,
    /// How the cover was chosen.
    pub extraction: ExtractionInfo,
    /// Statistics of every phase, in order.
    pub phases: Vec<PhaseStats>,
    /// Per output, the rules on its rewrite chain (with `explain`).
    pub rewrites: Vec<explain::RewriteChain>,
    /// Wall time per pipeline step ([`Optimized::steps`]); empty unless asked for (`--timings`:
    /// times differ between runs, the report does not otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepTime>,
}

impl Optimized {
    /// The report.
    pub fn report(&self) -> Report {
        Report {
            target: self.model.target.clone(),
            kernels: self.kernels.clone(),
            precomputed: self.precomputed.clone(),
            cost: self.cost,
            extraction: self.extraction.clone(),
            phases: self.phases.clone(),
            rewrites: self.rewrites.clone(),
            steps: Vec::new(),
        }
    }

    /// The Poly Core report of the program under its planned kernels' plans (both regions of a
    /// fused attention pair under the fused kernel's plan), for its target architecture.
    pub fn poly_core(&self) -> crate::poly::core::PolyCore {
        let mut plans: BTreeMap<String, crate::plan::Plan> = BTreeMap::new();
        for pk in &self.planned {
            let Ok(c) = &pk.choice else { continue };
            for step in pk.fused_first.into_iter().chain([pk.step]) {
                if let Some(crate::ir::region::program::Step::Region(r)) =
                    self.program.steps.get(step)
                {
                    plans.insert(r.name.clone(), c.best.plan.clone());
                }
            }
        }
        crate::poly::core::build(&self.program, &plans, self.model.target.arch)
    }
}

impl AsRef<RegionProgram> for Optimized {
    /// The extracted program.
    fn as_ref(&self) -> &RegionProgram {
        &self.program
    }
}

impl crate::codegen::PlannedProgram for Optimized {
    fn program(&self) -> &RegionProgram {
        &self.program
    }
    fn planned(&self) -> &[crate::codegen::emit::PlannedKernel] {
        &self.planned
    }
    fn target(&self) -> &crate::target::Target {
        &self.model.target
    }
}

impl std::fmt::Debug for Optimized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Optimized")
            .field("steps", &self.steps)
            .field("phases", &self.phases)
            .field("program", &self.program)
            .field("kernels", &self.kernels)
            .field("precomputed", &self.precomputed)
            .field("cost", &self.cost)
            .field("extraction", &self.extraction)
            .field("rewrites", &self.rewrites)
            .field(
                "egraph",
                &format_args!(
                    "TensorGraph({} e-nodes, {} e-classes)",
                    self.egraph.total_number_of_nodes(),
                    self.egraph.number_of_classes()
                ),
            )
            .field("roots", &self.roots)
            .field("classes", &self.classes)
            .field("model", &self.model)
            .finish()
    }
}
