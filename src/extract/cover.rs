//! The kernel cover of an optimized e-graph, chosen by a DAG-aware extractor ([`super::dag`]):
//! every kernel is paid once however many consumers read its output, which is what a program
//! that materializes each kernel's output once costs.
//!
//! The e-graph becomes an extraction [`Problem`] with one class per tensor e-class and these
//! realizable e-nodes (everything else computes a value but is not a kernel, so it cannot be
//! chosen):
//! - a kernel, priced by [`node_price`] (its own bytes and launch, not its inputs), whose
//!   children are its input classes;
//! - an input, free;
//! - a reshape, free, whose child is its operand (a reshape of a materialized buffer is an
//!   alias).
//!
//! Prices are predicted times in nanoseconds ([`KernelCost::scalar`]).

use super::dag::{
    ClassIx, DagExtractor, ExtractError, ExtractOptions, Extraction, Problem, ProblemError, Status,
};
use super::derived::Derived;
use super::kernels::{CostModel, KernelCost};
use super::pair_check::{extract_checked, CheckError, PairTable};
use super::pricing::{KernelPricer, PairRole, Roofline};
use crate::ir::egraph::{TensorGraph, TensorLang};
use egg::Id;
use std::collections::HashMap;

/// The price of one e-node in the extraction problem under the [`Roofline`] pricer (`+∞`: not
/// realizable).
pub fn node_price(eg: &TensorGraph, n: &TensorLang, sizes: &CostModel) -> f64 {
    node_price_with(eg, n, sizes, &Roofline)
}

/// The price of one e-node in the extraction problem: kernels by `pricer`, inputs, reshapes
/// and attributes free, every other e-node `+∞` (not realizable).
pub fn node_price_with(
    eg: &TensorGraph,
    n: &TensorLang,
    sizes: &CostModel,
    pricer: &dyn KernelPricer,
) -> f64 {
    match n {
        TensorLang::Attr(_) | TensorLang::Input(_) | TensorLang::Reshape(_) => 0.0,
        TensorLang::Kernel(_) => pricer.price(eg, n, sizes).scalar(),
        _ => f64::INFINITY,
    }
}

/// An extraction problem built from an e-graph, with the way back to e-classes and e-nodes.
pub struct KernelProblem {
    /// The extraction problem.
    pub problem: Problem,
    /// The e-class of every problem class, by class index.
    pub classes: Vec<Id>,
    /// The e-node of every problem node, by node index.
    pub nodes: Vec<TensorLang>,
    /// The attention pairs among the nodes, as the pricer priced them.
    pairs: PairTable,
}

impl KernelProblem {
    /// A cover of the problem by `extractor` with its attention pairs priced as they run
    /// ([`super::pair_check`]): the extraction, its price and how many first kernels were
    /// repriced. The problem keeps the repriced costs.
    pub fn extract(
        &mut self,
        extractor: &dyn DagExtractor,
        opts: &ExtractOptions,
    ) -> Result<(Extraction, f64, usize), CoverError> {
        extract_checked(&mut self.problem, &self.pairs, extractor, opts).map_err(|e| match e {
            CheckError::Extract(e) => CoverError::Extract(e),
            CheckError::Invalid(v) => CoverError::Invalid(v),
        })
    }
}

/// The extraction problem of `eg` with `roots` (canonical or not), kernels priced by
/// [`Roofline`]. Classes are taken in e-class id order and nodes in e-class order, so the same
/// e-graph gives the same problem.
pub fn kernel_problem(
    eg: &TensorGraph,
    roots: &[Id],
    sizes: &CostModel,
) -> Result<KernelProblem, ProblemError> {
    kernel_problem_with(eg, roots, sizes, &Roofline)
}

/// [`kernel_problem`] with kernels priced by `pricer`. A hand-written [`DagExtractor`] sees
/// this problem: one class per tensor e-class, a node per kernel, input and reshape e-node
/// (its op is `kernel`, `input` or `reshape`; [`KernelProblem::nodes`] gives the e-node).
pub fn kernel_problem_with(
    eg: &TensorGraph,
    roots: &[Id],
    sizes: &CostModel,
    pricer: &dyn KernelPricer,
) -> Result<KernelProblem, ProblemError> {
    kernel_problem_derived(eg, roots, sizes, pricer, &Derived::none())
}

/// [`kernel_problem_with`] with the derived constants of `derived` ([`super::derived`]): in a
/// constant class only its constant realizations are kept, and its kernels are priced by
/// [`Derived::price`] (they run once at load time, not per run) instead of by `pricer`.
pub fn kernel_problem_derived(
    eg: &TensorGraph,
    roots: &[Id],
    sizes: &CostModel,
    pricer: &dyn KernelPricer,
    derived: &Derived,
) -> Result<KernelProblem, ProblemError> {
    let ids = tensor_classes(eg);
    let mut problem = Problem::new();
    let mut index = HashMap::with_capacity(ids.len());
    for id in &ids {
        index.insert(*id, problem.add_class(id.to_string())?);
    }
    // The realizable e-nodes with their problem children, in class order; then their prices,
    // in parallel (pricing is pure: the same prices in the same order on any schedule).
    let mut found: Vec<(ClassIx, &TensorLang, Vec<ClassIx>)> = Vec::new();
    for id in &ids {
        for n in &eg[*id].nodes {
            let children: Vec<Id> = match n {
                TensorLang::Kernel(ch) => ch[1..].to_vec(),
                TensorLang::Reshape([x, _]) => vec![*x],
                TensorLang::Input(_) => Vec::new(),
                _ => continue,
            };
            if !derived.keeps(eg, *id, n) {
                continue; // a per-run spelling of a value computed at load time
            }
            let Some(children) = children
                .iter()
                .map(|c| index.get(&eg.find(*c)).copied())
                .collect::<Option<Vec<_>>>()
            else {
                continue; // a child without tensor facts: not a buffer
            };
            found.push((index[id], n, children));
        }
    }
    // Kernels by the pricer, all at once (it may share work between them); the rest as
    // `node_price_with` prices them.
    let at_load = |c: ClassIx, n: &TensorLang| derived.is_derived_kernel(eg, ids[c.ix()], n);
    let kernels: Vec<&TensorLang> = found
        .iter()
        .filter(|(c, n, _)| matches!(n, TensorLang::Kernel(_)) && !at_load(*c, n))
        .map(|(_, n, _)| *n)
        .collect();
    let (kernel_prices, kernel_roles) = pricer.price_all_paired(eg, &kernels, sizes);
    let mut kernel_prices = kernel_prices.into_iter();
    let mut kernel_roles = kernel_roles.into_iter();
    let (prices, roles): (Vec<f64>, Vec<Option<PairRole>>) = found
        .iter()
        .map(|(c, n, _)| match n {
            TensorLang::Kernel(_) if at_load(*c, n) => (Derived::price(n, eg), None),
            TensorLang::Kernel(_) => (
                kernel_prices.next().map_or(f64::INFINITY, |c| c.scalar()),
                kernel_roles.next().flatten(),
            ),
            _ => (node_price_with(eg, n, sizes, pricer), None),
        })
        .unzip();
    let mut nodes = Vec::with_capacity(found.len());
    for ((class, n, children), price) in found.into_iter().zip(prices) {
        problem.add_node(class, op_name(n), price, &children)?;
        nodes.push(n.clone());
    }
    for r in roots {
        let c = eg.find(*r);
        let ix = index.get(&c).copied().ok_or(ProblemError::NoRoots)?;
        problem.add_root(ix)?;
    }
    let pairs = PairTable::new(&nodes, &roles);
    Ok(KernelProblem {
        problem,
        classes: ids,
        nodes,
        pairs,
    })
}

fn op_name(n: &TensorLang) -> &'static str {
    match n {
        TensorLang::Kernel(_) => "kernel",
        TensorLang::Reshape(_) => "reshape",
        _ => "input",
    }
}

/// A chosen cover: the realization of every needed e-class.
#[derive(Clone, Debug)]
pub struct Cover {
    choice: HashMap<Id, TensorLang>,
    /// Whether the extractor proved the cover optimal.
    pub status: Status,
    /// The cover's DAG cost in nanoseconds of predicted time, and the extractor's lower bound when it has one.
    pub price: f64,
    /// A proven lower bound on the optimal price (the exact extractor).
    pub lower_bound: Option<f64>,
    /// First kernels of attention pairs the extraction repriced at their unfused time, since a
    /// cover it found ran them unfused ([`super::pair_check`]); 0 when none did.
    pub repriced_pairs: usize,
}

impl Cover {
    /// The e-node realizing the canonical class `c` (`None` when `c` is not needed).
    pub fn node(&self, c: Id) -> Option<&TensorLang> {
        self.choice.get(&c)
    }

    /// The chosen e-nodes by canonical class, in class order.
    pub fn choices(&self) -> impl Iterator<Item = (Id, &TensorLang)> {
        let mut v: Vec<(Id, &TensorLang)> = self.choice.iter().map(|(c, n)| (*c, n)).collect();
        v.sort_by_key(|(c, _)| *c);
        v.into_iter()
    }

    /// Number of kernels in the cover.
    pub fn kernel_count(&self) -> usize {
        self.choice
            .values()
            .filter(|n| matches!(n, TensorLang::Kernel(_)))
            .count()
    }
}

/// Why no cover was found.
#[derive(Debug, thiserror::Error)]
pub enum CoverError {
    #[error("the extraction problem is malformed: {0}")]
    /// The e-graph does not make a valid problem.
    Problem(#[from] ProblemError),
    #[error(transparent)]
    /// The extractor found no cover.
    Extract(#[from] ExtractError),
    #[error("the extractor returned an invalid cover: {0}")]
    /// The extraction fails validation (an extractor bug).
    Invalid(String),
}

/// Extracts a cover of `roots` with `extractor`, kernels priced by [`Roofline`].
pub fn extract_cover(
    eg: &TensorGraph,
    roots: &[Id],
    sizes: &CostModel,
    extractor: &dyn DagExtractor,
    opts: &ExtractOptions,
) -> Result<Cover, CoverError> {
    extract_cover_with(eg, roots, sizes, &Roofline, extractor, opts)
}

/// Extracts a cover of `roots` with `extractor`, kernels priced by `pricer`.
pub fn extract_cover_with(
    eg: &TensorGraph,
    roots: &[Id],
    sizes: &CostModel,
    pricer: &dyn KernelPricer,
    extractor: &dyn DagExtractor,
    opts: &ExtractOptions,
) -> Result<Cover, CoverError> {
    extract_cover_timed(eg, roots, sizes, pricer, extractor, opts).map(|(c, _)| c)
}

/// [`extract_cover_with`], also returning the wall and CPU seconds spent building the problem
/// (pricing every kernel e-node; CPU seconds where [`crate::timing::process_cpu_seconds`]
/// knows them); the rest is the extractor's.
pub fn extract_cover_timed(
    eg: &TensorGraph,
    roots: &[Id],
    sizes: &CostModel,
    pricer: &dyn KernelPricer,
    extractor: &dyn DagExtractor,
    opts: &ExtractOptions,
) -> Result<(Cover, (f64, Option<f64>)), CoverError> {
    extract_cover_derived(eg, roots, sizes, pricer, extractor, opts, &Derived::none())
}

/// [`extract_cover_timed`] over [`kernel_problem_derived`]: the constant classes of `derived`
/// are realized by their constant routes, derived-constant kernels priced as load-time work.
pub fn extract_cover_derived(
    eg: &TensorGraph,
    roots: &[Id],
    sizes: &CostModel,
    pricer: &dyn KernelPricer,
    extractor: &dyn DagExtractor,
    opts: &ExtractOptions,
    derived: &Derived,
) -> Result<(Cover, (f64, Option<f64>)), CoverError> {
    let start = std::time::Instant::now();
    let cpu = crate::timing::process_cpu_seconds();
    let mut kp = kernel_problem_derived(eg, roots, sizes, pricer, derived)?;
    let cpu = crate::timing::process_cpu_seconds()
        .zip(cpu)
        .map(|(b, a)| (b - a).max(0.0));
    let pricing = (start.elapsed().as_secs_f64(), cpu);
    let (e, price, repriced_pairs) = kp.extract(extractor, opts)?;
    let choice = e
        .chosen()
        .map(|(c, n)| (kp.classes[c.ix()], kp.nodes[n.ix()].clone()))
        .collect();
    let cover = Cover {
        choice,
        status: e.status,
        price,
        lower_bound: e.lower_bound,
        repriced_pairs,
    };
    Ok((cover, pricing))
}

impl KernelCost {
    /// The cost as one number for extractors that add costs: the predicted time in
    /// nanoseconds, plus 10⁻³ per narrow rounding and 10⁻⁶ per body op (tie-breakers between
    /// kernels of equal time: the epilogue on the fp32 accumulator, then the smaller body);
    /// `+∞` for [`KernelCost::INFINITY`].
    pub fn scalar(&self) -> f64 {
        if self.is_infinite() {
            return f64::INFINITY;
        }
        self.time.0 as f64 / 1e3 + 1e-3 * self.roundings as f64 + 1e-6 * self.ops as f64
    }
}

impl Cover {
    /// The chosen term of `root` as an expression (shared sub-terms shared; attribute leaves
    /// copied from their classes), for egg's explanations. `None` when a needed class has no
    /// choice (not a cover of `root`).
    pub fn term(&self, eg: &TensorGraph, root: Id) -> Option<egg::RecExpr<TensorLang>> {
        use egg::Language;
        let mut out = egg::RecExpr::default();
        let mut done: HashMap<Id, Id> = HashMap::new();
        let mut stack = vec![(eg.find(root), false)];
        while let Some((c, expanded)) = stack.pop() {
            if done.contains_key(&c) {
                continue;
            }
            let node = match self.choice.get(&c) {
                Some(n) => n,
                None => eg[c].nodes.iter().find(|n| n.is_attr())?,
            };
            if !expanded {
                stack.push((c, true));
                for ch in node.children() {
                    stack.push((eg.find(*ch), false));
                }
                continue;
            }
            if !node
                .children()
                .iter()
                .all(|ch| done.contains_key(&eg.find(*ch)))
            {
                return None;
            }
            let mapped = node.clone().map_children(|ch| done[&eg.find(ch)]);
            done.insert(c, out.add(mapped));
        }
        Some(out)
    }
}

/// The ids of the e-graph's tensor classes, ascending (the order problems are built in).
pub(crate) fn tensor_classes(eg: &TensorGraph) -> Vec<Id> {
    let mut ids: Vec<Id> = eg
        .classes()
        .filter(|c| c.data.tensor().is_some())
        .map(|c| c.id)
        .collect();
    ids.sort();
    ids
}
