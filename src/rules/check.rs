//! Checked phases: a rule that builds an ill-typed e-node or unions e-classes of different dtype
//! or shape is reported as a [`RuleError`] naming the rule, instead of a panic inside egg.
//!
//! While [`try_run_phase`] runs, the IndexBook analysis records what goes wrong
//! ([`crate::ir::egraph::book::FactError`]) instead of panicking, and every rule's applier is
//! wrapped so that a record made while that rule applies is charged to it (egg applies rules one
//! at a time on the calling thread). The phase stops at the next iteration and the e-graph is
//! dropped: a phase that reports an error returns no e-graph.
//!
//! Diagnostic codes (range E1500–E1519):
//!
//! | code | kind | when |
//! | --- | --- | --- |
//! | E1500 | IllTypedRule | a rule's right-hand side builds an e-node Tiny IR's typing rules reject |
//! | E1501 | UnsoundRule | a rule unions two e-classes of different dtype or shape |
//! | E1502 | UnknownPhase | rules or a phase are added relative to a phase the pipeline does not have |
//! | E1503 | DuplicatePhase | an added phase has the name of an existing phase |

use super::{run_phase_with, Budget, PhaseStats, Rule};
use crate::diag::codes;
use crate::diag::{Diagnostic, Location};
use crate::ir::egraph::book::{
    fact_error_count, fact_errors, record_fact_errors, take_fact_errors, FactError,
};
use crate::ir::egraph::{IndexBook, TensorGraph, TensorLang};
use egg::{Applier, Id, PatternAst, Rewrite, SearchMatches, Searcher, Subst, Symbol, Var};
use std::cell::RefCell;
use std::sync::Arc;

/// Why a rule set cannot run: the rule at fault and what it did.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RuleError {
    /// E1500: the rule's right-hand side builds an e-node that Tiny IR's typing rules reject
    /// (wrong operand dtypes, shapes that do not broadcast, a bad attribute).
    #[error("E1500 rule `{rule}` (phase `{phase}`) built an ill-typed e-node `{node}`: {why}")]
    IllTyped {
        /// The rule's name.
        rule: String,
        /// The phase it ran in.
        phase: String,
        /// The e-node it built, printed.
        node: String,
        /// Why Tiny IR rejects it.
        why: String,
    },
    /// E1501: the rule made two e-classes equal whose dtypes or shapes differ (its two sides do
    /// not denote the same tensor).
    #[error("E1501 rule `{rule}` (phase `{phase}`) is unsound: it makes a {left} value equal to a {right} value")]
    Unsound {
        /// The rule's name.
        rule: String,
        /// The phase it ran in.
        phase: String,
        /// Facts of one side.
        left: String,
        /// Facts of the other side.
        right: String,
    },
    /// E1502: rules or a phase were added relative to a phase that does not exist.
    #[error("E1502 there is no phase `{phase}` to add {what} to (phases: {known})")]
    UnknownPhase {
        /// The phase named.
        phase: String,
        /// What was added (`rule \`name\``, `phase \`name\``).
        what: String,
        /// The pipeline's phases, comma-separated.
        known: String,
    },
    /// E1503: an added phase has the name of a phase that already exists.
    #[error("E1503 a phase named `{phase}` already exists")]
    DuplicatePhase {
        /// The name.
        phase: String,
    },
}

impl RuleError {
    /// The diagnostic code and kind (`E1500` …).
    pub fn code_kind(&self) -> codes::Code {
        match self {
            RuleError::IllTyped { .. } => codes::ILL_TYPED_RULE,
            RuleError::Unsound { .. } => codes::UNSOUND_RULE,
            RuleError::UnknownPhase { .. } => codes::UNKNOWN_PHASE,
            RuleError::DuplicatePhase { .. } => codes::DUPLICATE_PHASE,
        }
    }

    /// The diagnostic code (`E1500` …).
    pub fn code(&self) -> &'static str {
        self.code_kind().0
    }

    /// The error as a [`Diagnostic`] (a user error: the rule set is the user's input).
    ///
    /// ```
    /// use dlc_egg::rules::RuleError;
    /// let e = RuleError::DuplicatePhase { phase: "srnf".into() };
    /// let d = e.to_diagnostic();
    /// assert_eq!((d.code, d.kind), ("E1503", "DuplicatePhase"));
    /// ```
    pub fn to_diagnostic(&self) -> Diagnostic {
        let (at, help) = match self {
            RuleError::IllTyped { rule, .. } => (
                rule.clone(),
                "build only nodes Tiny IR accepts (see the pattern vocabulary of `TensorLang`), \
                 or guard the rule with a condition (`rules::cond`)",
            ),
            RuleError::Unsound { rule, .. } => (
                rule.clone(),
                "both sides of a rule must have the same dtype and shape; add a condition \
                 (`rules::cond::shape_is`, `dtype_is`) or a cast",
            ),
            RuleError::UnknownPhase { phase, .. } => {
                (phase.clone(), "name one of the listed phases")
            }
            RuleError::DuplicatePhase { phase } => {
                (phase.clone(), "give the added phase a new name")
            }
        };
        Diagnostic::error(
            self.code_kind(),
            Location::Field {
                path: format!("rule set: {at}"),
            },
            self.to_string(),
            help,
        )
    }

    fn from_fact(rule: &str, phase: &str, e: FactError) -> RuleError {
        match e {
            FactError::IllTyped { node, why } => RuleError::IllTyped {
                rule: rule.to_string(),
                phase: phase.to_string(),
                node,
                why,
            },
            FactError::Conflict { left, right } => RuleError::Unsound {
                rule: rule.to_string(),
                phase: phase.to_string(),
                left,
                right,
            },
        }
    }
}

thread_local! {
    /// The rule charged with the first fact error of the running checked phase, and that
    /// error's index in the analysis's record.
    static FIRST: RefCell<Option<(String, usize)>> = const { RefCell::new(None) };
}

/// An applier that charges the analysis's error records made while it applies to its rule.
struct Charged {
    inner: Arc<dyn Applier<TensorLang, IndexBook> + Send + Sync>,
}

impl Charged {
    fn charge<T>(&self, rule: Symbol, f: impl FnOnce() -> T) -> T {
        let before = fact_error_count();
        let out = f();
        if fact_error_count() > before {
            FIRST.with(|first| {
                first
                    .borrow_mut()
                    .get_or_insert_with(|| (rule.to_string(), before));
            });
        }
        out
    }
}

impl Applier<TensorLang, IndexBook> for Charged {
    fn apply_matches(
        &self,
        egraph: &mut TensorGraph,
        matches: &[SearchMatches<TensorLang>],
        rule_name: Symbol,
    ) -> Vec<Id> {
        self.charge(rule_name, || {
            self.inner.apply_matches(egraph, matches, rule_name)
        })
    }

    fn get_pattern_ast(&self) -> Option<&PatternAst<TensorLang>> {
        self.inner.get_pattern_ast()
    }

    fn apply_one(
        &self,
        egraph: &mut TensorGraph,
        eclass: Id,
        subst: &Subst,
        searcher_ast: Option<&PatternAst<TensorLang>>,
        rule_name: Symbol,
    ) -> Vec<Id> {
        self.charge(rule_name, || {
            self.inner
                .apply_one(egraph, eclass, subst, searcher_ast, rule_name)
        })
    }

    fn vars(&self) -> Vec<Var> {
        self.inner.vars()
    }
}

/// The searcher of a rule, shared.
struct Shared(Arc<dyn Searcher<TensorLang, IndexBook> + Send + Sync>);

impl Searcher<TensorLang, IndexBook> for Shared {
    fn search_eclass_with_limit(
        &self,
        egraph: &TensorGraph,
        eclass: Id,
        limit: usize,
    ) -> Option<SearchMatches<'_, TensorLang>> {
        self.0.search_eclass_with_limit(egraph, eclass, limit)
    }

    fn search_with_limit(
        &self,
        egraph: &TensorGraph,
        limit: usize,
    ) -> Vec<SearchMatches<'_, TensorLang>> {
        self.0.search_with_limit(egraph, limit)
    }

    fn search(&self, egraph: &TensorGraph) -> Vec<SearchMatches<'_, TensorLang>> {
        self.0.search(egraph)
    }

    fn get_pattern_ast(&self) -> Option<&PatternAst<TensorLang>> {
        self.0.get_pattern_ast()
    }

    fn vars(&self) -> Vec<Var> {
        self.0.vars()
    }
}

/// `r` with its applier charged with the analysis's error records (`r` itself when egg
/// refuses the copy, which it cannot: the copy binds the same variables).
fn charged(r: &Rule) -> Rule {
    let applier = Charged {
        inner: r.applier.clone(),
    };
    Rewrite::new(r.name, Shared(r.searcher.clone()), applier).unwrap_or_else(|_| r.clone())
}

/// Runs `rules` on `egraph` like [`super::run_phase`], but a rule that builds an ill-typed
/// e-node (E1500) or unions classes of different dtype or shape (E1501) stops the phase with a
/// [`RuleError`] naming it instead of panicking. The e-graph is consumed either way; on an
/// error it is dropped (it holds the bad node).
///
/// ```
/// use dlc_egg::ir::egraph::{add_program, TensorGraph};
/// use dlc_egg::rules::{try_run_phase, Budget, Rule};
/// # let json = r#"{"signature": {"inputs": [{"tensor": "x"}], "outputs": [{"tensor": "y"}]},
/// #   "tensors": {"x": {"dtype": "fp32", "shape": [4]}, "y": {"dtype": "fp32", "shape": [4]}},
/// #   "graph": [{"op": "Elementwise", "name": "r", "inputs": ["x"], "outputs": ["y"],
/// #              "attrs": {"fn": "relu"}}]}"#;
/// # let graph = dlc_egg::ir::frontend::load_str(json, "doc.json").unwrap();
/// # let prog = dlc_egg::run::lower_and_verify(&graph).unwrap();
/// // `relu(x) => cast(x, fp16)` changes the dtype: unsound.
/// let bad: Rule = egg::rewrite!("bad"; "(relu ?x)" => "(cast ?x fp16)");
/// let mut eg = TensorGraph::default();
/// add_program(&mut eg, &prog);
/// let err = try_run_phase(eg, "mine", &[bad], &Budget::default()).unwrap_err();
/// assert_eq!(err.code(), "E1501");
/// assert!(err.to_string().contains("rule `bad`"));
/// ```
pub fn try_run_phase(
    egraph: TensorGraph,
    name: &str,
    rules: &[Rule],
    budget: &Budget,
) -> Result<(TensorGraph, PhaseStats), RuleError> {
    let nested = record_fact_errors();
    let outer = FIRST.with(|f| f.borrow_mut().take());
    let charged: Vec<Rule> = rules.iter().map(charged).collect();
    let start = fact_error_count();
    let stop = move || fact_error_count() > start;
    let (eg, stats) = run_phase_with(egraph, name, &charged, budget, stop);
    let first = FIRST.with(|f| std::mem::replace(&mut *f.borrow_mut(), outer));
    let errors = fact_errors();
    if !nested {
        take_fact_errors();
    }
    let Some(e) = errors.get(start).cloned() else {
        return Ok((eg, stats));
    };
    Err(match first {
        Some((rule, ix)) => {
            let e = errors.get(ix).cloned().unwrap_or(e);
            RuleError::from_fact(&rule, name, e)
        }
        None => RuleError::from_fact("(none: found while rebuilding)", name, e),
    })
}
