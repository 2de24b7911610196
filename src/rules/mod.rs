//! Rewrite rules, one file per theme (`DESIGN.md` item 4), and the phase runner. Built on `ir` only.
//!
//! A *rule set* is a plain `Vec<Rewrite<TensorLang, IndexBook>>` ([`Rule`]). Library users add
//! their own rules to the real pipeline with
//! [`OptimizeOptions::with_rule`](crate::optimize::OptimizeOptions::with_rule) /
//! [`with_phase`](crate::optimize::OptimizeOptions::with_phase), or run a rule set by itself with
//! [`try_run_phase`] / [`run_phase`], which run egg's [`Runner`] under an explicit [`Budget`]
//! and report what happened as [`PhaseStats`]. [`all_phases`] lists the built-in phases in order.
//!
//! The rule author's kit: the pattern vocabulary is [`TensorLang`]'s rustdoc (every node with
//! its operands and attribute leaves); [`cond`] has the side conditions (`shape_is`,
//! `dtype_is`, `same_shape`, `is_float`, …); [`helpers`] builds well-typed nodes in custom
//! appliers; [`testing`] checks soundness on random inputs. A rule that builds an ill-typed
//! e-node or equates values of different dtype or shape is a [`RuleError`] naming it (codes
//! E1500–E1503, table in [`RuleError`]'s module), never a panic, when run by [`try_run_phase`]
//! (which `optimize` uses).
//!
//! Conventions every rule file follows: `rw!("kebab-name"; …)` with a one-line math comment;
//! conditions and appliers read facts from the IndexBook analysis (never rely on a node being
//! absent from an e-class); a rule that cannot prove its side condition (e.g. for symbolic sizes)
//! does not fire; no blanket commutativity or associativity. [`testing`] is the soundness harness
//! every rule file's tests use.
//!
//! Phases: `subst`, `movement`, `rbssa`, `srnf`, `contraction`, `epilogue` ([`all_phases`]) and `kernels`
//! ([`fusion`], which takes the legality oracle of the pipeline).

/// One positive and one negative (near-miss) test per rule name, and `TESTED`, the list of the
/// names covered: what every `*_tests.rs` of a rule theme instantiates (`positive` and `negative`
/// are the theme's own fixtures).
#[cfg(test)]
macro_rules! rule_tests {
    ($($rule:literal => $pos:ident, $neg:ident;)*) => {
        $(
            #[test]
            fn $pos() {
                positive($rule)
            }
            #[test]
            fn $neg() {
                negative($rule)
            }
        )*
        /// Every rule of the set has a test pair above.
        const TESTED: &[&str] = &[$($rule),*];
    };
}

mod check;
pub mod cond;
pub mod contraction;
pub mod epilogue;
pub mod fusion;
pub mod helpers;
pub mod movement;
pub mod rbssa;
pub mod srnf;
pub mod subst;
pub mod testing;

pub use check::{try_run_phase, RuleError};

use crate::ir::egraph::{Attr, IndexBook, TensorFacts, TensorGraph, TensorLang};
use egg::{Id, Rewrite, Runner, StopReason};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A rewrite rule over dlc-egg's e-graph.
pub type Rule = Rewrite<TensorLang, IndexBook>;

/// Limits of one phase: egg's runner stops at whichever it hits first.
///
/// ```
/// let b = dlc_egg::rules::Budget::default();
/// assert_eq!((b.iter_limit, b.node_limit), (32, 100_000));
/// ```
///
/// Defaults and why:
/// - `iter_limit = 32`: movement chains in lowered graphs are a handful of ops long and every
///   built-in rule shortens a chain, so the movement phase saturates in a few iterations (the
///   examples: 1; random chains of up to 7 views in `tests/rules_movement.rs`: at most 5). 32
///   leaves room for user rules while bounding a runaway rule set.
/// - `node_limit = 100_000` e-nodes: the lowered examples have at most 70 e-nodes and the movement
///   rules grow an e-graph by less than 2× (random chains: at most 1.7×); a phase that grows it
///   1000× is a bug in a rule set, not a workload.
/// - `time_limit = 10 s`: a safety net only. Wall-clock stops are not reproducible, so tests
///   require that built-in phases stop by saturation (`stop_reason == "Saturated"`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Budget {
    /// Runner iterations.
    pub iter_limit: usize,
    /// E-nodes.
    pub node_limit: usize,
    /// Wall-clock time.
    pub time_limit: Duration,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            iter_limit: 32,
            node_limit: 100_000,
            time_limit: Duration::from_secs(10),
        }
    }
}

impl Budget {
    /// The kernels phase's budget: it adds up to `FusionLimits::max_prefixes` + 1 kernels per
    /// op e-node and class per growth round, so its e-graph is ~25–40 e-nodes per input e-node
    /// (a transformer layer: ~10k); `node_limit = 2_000_000` is 4× the 12-layer encoder's
    /// target and stops only a runaway rule set. `time_limit = 300 s` is a safety net on loaded
    /// 2-core machines; tests require that the phase saturates.
    pub fn kernels() -> Budget {
        Budget {
            iter_limit: 32,
            node_limit: 2_000_000,
            time_limit: Duration::from_secs(300),
        }
    }
}

/// What one phase did (for `--explain` / `--report`). Everything except `time` is deterministic:
/// egg is built with its `deterministic` feature, so two runs on the same input give equal stats.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseStats {
    /// The phase's name.
    pub name: String,
    /// Runner iterations (the last one found nothing new when the phase saturated).
    pub iterations: usize,
    /// E-nodes before the phase.
    pub egraph_nodes_before: usize,
    /// E-nodes and e-classes after the phase.
    pub egraph_nodes: usize,
    /// E-classes after the phase.
    pub egraph_classes: usize,
    /// `Saturated`, `IterationLimit(n)`, `NodeLimit(n)`, `TimeLimit(s)` or `Other(..)`.
    pub stop_reason: String,
    /// Rule name → number of new applications, summed over iterations (rules that never applied
    /// are absent).
    pub applied: BTreeMap<String, usize>,
    /// Wall-clock seconds (the only non-deterministic field).
    pub time: f64,
}

impl PhaseStats {
    /// True when the rule applied at least once.
    pub fn fired(&self, rule: &str) -> bool {
        self.applied.get(rule).is_some_and(|n| *n > 0)
    }

    /// True when the phase stopped because no rule found anything new.
    pub fn saturated(&self) -> bool {
        self.stop_reason == "Saturated"
    }
}

fn stop_text(r: Option<&StopReason>) -> String {
    match r {
        None => "None".into(),
        Some(StopReason::Saturated) => "Saturated".into(),
        Some(StopReason::IterationLimit(n)) => format!("IterationLimit({n})"),
        Some(StopReason::NodeLimit(n)) => format!("NodeLimit({n})"),
        Some(StopReason::TimeLimit(s)) => format!("TimeLimit({s})"),
        Some(StopReason::Other(s)) => format!("Other({s})"),
    }
}

/// Runs `rules` on `egraph` under `budget` (egg's default backoff scheduler, which keeps a rule
/// that matches explosively from starving the others). Returns the rebuilt e-graph and the stats.
///
/// # Panics
/// When a rule builds an ill-typed e-node or unions e-classes of different dtype or shape (a
/// bug in the rule set). [`try_run_phase`] reports that as a [`RuleError`] naming the rule;
/// [`crate::optimize::optimize`] runs every phase that way.
pub fn run_phase(
    egraph: TensorGraph,
    name: &str,
    rules: &[Rule],
    budget: &Budget,
) -> (TensorGraph, PhaseStats) {
    run_phase_with(egraph, name, rules, budget, || false)
}

/// [`run_phase`], stopping before an iteration when `stop()` says so.
fn run_phase_with(
    egraph: TensorGraph,
    name: &str,
    rules: &[Rule],
    budget: &Budget,
    stop: impl Fn() -> bool + 'static,
) -> (TensorGraph, PhaseStats) {
    let start = Instant::now();
    let before = egraph.total_number_of_nodes();
    let runner = Runner::default()
        .with_egraph(egraph)
        .with_iter_limit(budget.iter_limit)
        .with_node_limit(budget.node_limit)
        .with_time_limit(budget.time_limit)
        .with_hook(move |_| {
            if stop() {
                Err("a rule built an ill-typed e-node".into())
            } else {
                Ok(())
            }
        })
        .run(rules);
    let mut applied: BTreeMap<String, usize> = BTreeMap::new();
    for it in &runner.iterations {
        for (rule, n) in &it.applied {
            if *n > 0 {
                *applied.entry(rule.to_string()).or_insert(0) += n;
            }
        }
    }
    let mut egraph = runner.egraph;
    egraph.rebuild();
    let stats = PhaseStats {
        name: name.to_string(),
        iterations: runner.iterations.len(),
        egraph_nodes_before: before,
        egraph_nodes: egraph.total_number_of_nodes(),
        egraph_classes: egraph.number_of_classes(),
        stop_reason: stop_text(runner.stop_reason.as_ref()),
        applied,
        time: start.elapsed().as_secs_f64(),
    };
    (egraph, stats)
}

/// The built-in rewrite phases, in pipeline order (the kernels phase, [`fusion::rules`], runs
/// after them with the pipeline's legality oracle): every rule exact for all values, infinities
/// and NaN included ([`all_phases_with`] `(false)`).
///
/// ```
/// let names: Vec<&str> = dlc_egg::rules::all_phases().iter().map(|(n, _)| *n).collect();
/// assert_eq!(names, ["subst", "movement", "rbssa", "srnf", "contraction", "epilogue"]);
/// ```
pub fn all_phases() -> Vec<(&'static str, Vec<Rule>)> {
    all_phases_with(false)
}

/// The built-in rewrite phases; with `fast_math`, srnf also reassociates across reductions
/// ([`srnf::FAST_MATH_RULES`], exact for finite values only: `dlc-egg optimize --fast-math`).
pub fn all_phases_with(fast_math: bool) -> Vec<(&'static str, Vec<Rule>)> {
    vec![
        ("subst", subst::rules_with(fast_math)),
        ("movement", movement::rules()),
        ("rbssa", rbssa::rules()),
        (
            "srnf",
            if fast_math {
                srnf::rules()
            } else {
                srnf::exact_rules()
            },
        ),
        ("contraction", contraction::rules()),
        ("epilogue", epilogue::rules()),
    ]
}

/// The attribute of an attribute e-class (for conditions and appliers of any rule set).
pub fn attr(eg: &TensorGraph, id: Id) -> Option<&Attr> {
    eg[id].data.attr()
}

/// The dtype and shape of a tensor e-class (for conditions and appliers of any rule set).
pub fn tensor(eg: &TensorGraph, id: Id) -> Option<&TensorFacts> {
    eg[id].data.tensor()
}
