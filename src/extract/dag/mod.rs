//! DAG-aware extraction: choose one e-node per needed e-class so that the chosen nodes form an
//! acyclic term graph of least *DAG cost* (each chosen node paid once, however many parents share
//! it), as opposed to the tree cost (a shared sub-term paid once per use).
//!
//! - [`problem`]: the [`Problem`] (classes, nodes with child classes and costs, roots), built from
//!   any `egraph-serialize` document.
//! - [`cost`]: [`tree_cost`], [`dag_cost`] and the validator [`validate`].
//! - [`DagExtractor`]: the trait both extractors implement. [`FastExtractor`] (greedy DAG fixpoint +
//!   local improvement, for large e-graphs) and [`ExactExtractor`] (integer linear program with
//!   lazy cycle cuts, through the pure-Rust `microlp` solver; the yardstick on small and medium
//!   e-graphs).
//!
//! Assumptions: costs are `≥ 0` (`+∞` marks a node that must not be chosen); the e-graph may have
//! cycles (an extraction may not); it need not be congruence-closed (two nodes with the same op and
//! child classes are distinct nodes). Results are deterministic: the same problem and options give
//! the same extraction (the exact extractor only when it finishes within its time limit).

pub mod cost;
pub mod exact;
pub mod fast;
mod improve;
pub mod problem;
mod reduce;

pub use cost::{dag_cost, tree_cost, validate, ValidationError};
pub use exact::ExactExtractor;
pub use fast::FastExtractor;
pub use problem::{Class, ClassIx, Node, NodeIx, Problem, ProblemError};

use std::time::Duration;
use thiserror::Error;

/// Options of one extraction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExtractOptions {
    /// Wall-clock limit (`None`: none). The exact extractor stops at it and returns its best
    /// solution so far marked [`Status::TimeLimit`] (or [`ExtractError::Timeout`] without one);
    /// the fast extractor is bounded by its own work budget and ignores it.
    pub time_limit: Option<Duration>,
}

/// How good an [`Extraction`] is known to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Proven to have the least DAG cost.
    Optimal,
    /// A heuristic's answer: valid, no optimality claim.
    Heuristic,
    /// The exact extractor reached its time limit: the best valid solution found, not proven
    /// optimal.
    TimeLimit,
}

/// The result of an extraction: a chosen node for every class reachable from the roots through
/// chosen nodes, and nothing for other classes.
#[derive(Clone, Debug, PartialEq)]
pub struct Extraction {
    /// `choices[c]`: the node chosen for class `c`, `None` when `c` is not needed.
    pub choices: Vec<Option<NodeIx>>,
    /// Whether the result is proven optimal.
    pub status: Status,
    /// A proven lower bound on the optimal DAG cost, when the extractor has one.
    pub lower_bound: Option<f64>,
}

impl Extraction {
    /// The extraction of a full choice vector (`choice[c]` for any subset of classes): keeps the
    /// choices of the classes reachable from the roots, drops the rest. Unreachable or missing
    /// choices are not checked here (see [`validate`]); a cycle does not loop.
    pub fn from_choices(p: &Problem, choice: &[Option<NodeIx>], status: Status) -> Extraction {
        let mut choices = vec![None; p.num_classes()];
        let mut stack: Vec<ClassIx> = p.roots().to_vec();
        while let Some(c) = stack.pop() {
            if choices[c.ix()].is_some() {
                continue;
            }
            let Some(n) = choice.get(c.ix()).copied().flatten() else {
                continue;
            };
            choices[c.ix()] = Some(n);
            stack.extend(p.node(n).children.iter().copied());
        }
        Extraction {
            choices,
            status,
            lower_bound: None,
        }
    }

    /// The node chosen for `c`.
    pub fn choice(&self, c: ClassIx) -> Option<NodeIx> {
        self.choices.get(c.ix()).copied().flatten()
    }

    /// The chosen nodes, by class index.
    pub fn chosen(&self) -> impl Iterator<Item = (ClassIx, NodeIx)> + '_ {
        self.choices
            .iter()
            .enumerate()
            .filter_map(|(c, n)| n.map(|n| (ClassIx(c as u32), n)))
    }

    /// Number of chosen nodes.
    pub fn len(&self) -> usize {
        self.choices.iter().filter(|c| c.is_some()).count()
    }

    /// Whether nothing is chosen.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Why an extractor returns no extraction.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum ExtractError {
    /// A root class has no finite acyclic term: every node of it needs an unusable node or a
    /// cycle.
    #[error("root e-class `{root}` has no finite acyclic term (every e-node of it needs an infinite-cost e-node or a cycle)")]
    NoFiniteSolution {
        /// The root class.
        root: String,
    },
    /// The time limit passed before any valid solution was found.
    #[error("the time limit ({seconds} s) passed before any valid extraction was found")]
    Timeout {
        /// The limit.
        seconds: f64,
    },
    /// The ILP solver failed (numerical trouble) and no valid solution was at hand.
    #[error("the ILP solver failed: {0}")]
    Solver(String),
}

/// An extractor: a problem in, a valid extraction (or why not) out. (Not egg's
/// `egg::Extractor`, which extracts trees by a local cost function.)
pub trait DagExtractor {
    /// A short name (`fast`, `exact`).
    fn name(&self) -> &str;
    /// Extracts. An `Ok` result is valid in the sense of [`validate`].
    fn extract(&self, p: &Problem, opts: &ExtractOptions) -> Result<Extraction, ExtractError>;
}

/// The extractor called `name` (`fast` or `exact`) with default settings.
///
/// ```
/// use dlc_egg::extract::dag::by_name;
/// assert_eq!(by_name("exact").map(|e| e.name().to_string()).as_deref(), Some("exact"));
/// assert!(by_name("greedy").is_none());
/// ```
pub fn by_name(name: &str) -> Option<Box<dyn DagExtractor>> {
    match name {
        "fast" => Some(Box::new(FastExtractor::default())),
        "exact" => Some(Box::new(ExactExtractor::default())),
        _ => None,
    }
}
