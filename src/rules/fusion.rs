//! Phase "kernels": kernel nodes (`docs/egraph-design.md` §4). Every value gets a single-op
//! kernel, and kernels grow by absorbing their producers' kernels — epilogue fusion (an
//! elementwise consumer absorbs a reduction: `relu(add(acc, bias))` on the accumulator), prologue
//! fusion (a consumer absorbs an elementwise producer or a movement chain, which becomes part of
//! its reads) and row-reduction fusion (softmax, LayerNorm: reductions whose results are
//! broadcast back along the kernel's own iteration space).
//!
//! Assumptions:
//! - A kernel node's meaning is its body with placeholders replaced by its inputs, so adding a
//!   kernel to the class of the value its body computes is sound by construction (the analysis
//!   re-derives its type from the body and asserts it equals the class's).
//! - Whether a body can be ONE kernel — one RB-SSA region without recomputing a reduction — is
//!   decided by a [`Legality`] oracle: region synthesis in the pipeline
//!   (`crate::synth`), which rejects a reduction evaluated inside another reduction
//!   over a fresh axis (the MLP's second matmul reading `relu(matmul1)`), a reduction needed at
//!   two index environments, and non-affine maps.
//! - Growth is greedy, breadth-first and deterministic: starting from each single-op kernel, the
//!   input classes are visited in order and each absorbs its first op e-node that keeps the body
//!   legal. Every intermediate body is a kernel too, so the extractor chooses where a kernel
//!   stops (fusion that does not pay stays optional). Kernel nodes are linear in e-nodes times
//!   the body limit. A second, maximal growth absorbs, input by input, the largest legal kernel
//!   of the input's class (built on the producers' own growth, so it reaches across alternative
//!   spellings the first path does not take); it depends on other kernels, so the phase runs
//!   until no kernel grows (two to four iterations on the examples).
//!
//! Budget: bodies are capped at [`FusionLimits::max_body_ops`] ops; the phase saturates once no
//! kernel can grow (the examples and the encoder: a few iterations, see the tests).

mod apply;
mod grow;
mod regrow;
mod replay;

use super::Rule;
use crate::ir::egraph::kernel::{body_facts, single_op_body};
use crate::ir::egraph::{Attr, IndexBook, KernelBody, TensorFacts, TensorGraph, TensorLang};
use egg::{Applier, Id, PatternAst, RecExpr, Rewrite, SearchMatches, Searcher, Subst, Symbol, Var};
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use apply::kernels_largest_first;
pub use regrow::{Fingerprints, GrowthState};
use replay::{GrowView, Replays};

/// Decides whether a body (with inputs of the given facts) can be one kernel; `Err` says why not.
/// An ill-typed body must be rejected (the phase does not type-check candidates separately:
/// region synthesis types the body anyway, and typing twice was a fifth of the phase's time).
pub type Legality =
    Arc<dyn Fn(&RecExpr<TensorLang>, &[TensorFacts]) -> Result<(), String> + Send + Sync>;

/// Limits of kernel growth.
#[derive(Clone, Debug, PartialEq)]
pub struct FusionLimits {
    /// Largest body, in ops (attribute leaves and placeholders not counted); default 64, which
    /// covers a fused LayerNorm or softmax-with-mask with room; bigger bodies only come from long
    /// elementwise chains, where splitting costs one extra round trip.
    pub max_body_ops: usize,
    /// Most reductions in one body; default 4, which is attention's first region (the QK contraction, the
    /// softmax max and sum) plus its second contraction, and leaves LayerNorm (2) room for a
    /// following contraction; it stops growth from reaching back through a whole transformer
    /// layer, which is never one region and made the phase quadratic in the body size.
    pub max_reduces: usize,
    /// Most computing ops one seed's breadth-first growth absorbs (default 24; movement and
    /// casts, which fold into reads, are always absorbed); each absorption is a kernel and a
    /// legality check. Growth near the seed gives the fine-grained choices (movement folded into reads, an epilogue
    /// kept or not); larger fusions are composed from producers' kernels by the maximal growth.
    /// Without it the phase did ~60 checks per op on a transformer layer.
    pub max_prefixes: usize,
    /// Replay a seed's recorded growth where the e-graph around it answers every observation
    /// the growth made the same way (identical layers grown once; the result is exactly what
    /// growing gives: `src/rules/fusion/replay.rs`); default on, off only to check that.
    pub replay: bool,
}

impl Default for FusionLimits {
    fn default() -> FusionLimits {
        FusionLimits {
            max_body_ops: 64,
            max_reduces: 4,
            max_prefixes: 24,
            replay: true,
        }
    }
}

/// The phase's rules: `kernel-wrap` and `kernel-fuse`, with `legal` as the legality oracle.
pub fn rules(legal: Legality, limits: FusionLimits) -> Vec<Rule> {
    rules_with_state(legal, limits).0
}

/// [`rules`], with a handle on what `kernel-fuse` remembers between runs: the same rules run
/// again after the e-graph changed (the pipeline's kernels round after the substitutions)
/// regrow only the seeds whose growth observed a changed class ([`GrowthState`]).
pub fn rules_with_state(legal: Legality, limits: FusionLimits) -> (Vec<Rule>, GrowthState) {
    let memo: Arc<Mutex<GrowMemo>> = Arc::default();
    let state = GrowthState { memo: memo.clone() };
    let rules = vec![
        // v ⇒ kernel{op($0, …)}(children): every value computed by one op is a one-op kernel.
        Rewrite::new("kernel-wrap", OpNodes, Wrap).expect("static rule"),
        // kernel{B}(…, d, …) ⇒ kernel{B[$d := op(…)]}(…, inputs of op, …) for an op e-node of d
        // that keeps B legal: producers absorbed into their consumer, breadth-first.
        Rewrite::new(
            "kernel-fuse",
            OpNodes,
            Grow {
                legal,
                limits,
                memo,
                replays: Replays::default(),
                replays_max: Replays::default(),
            },
        )
        .expect("static rule"),
    ];
    (rules, state)
}

/// True for e-nodes that compute or move a value (not attributes, inputs, reads of nothing, or
/// kernels themselves).
fn is_op(n: &TensorLang) -> bool {
    !matches!(
        n,
        TensorLang::Attr(_) | TensorLang::Input(_) | TensorLang::Kernel(_)
    )
}

/// Matches every e-class holding at least one op e-node.
struct OpNodes;

impl Searcher<TensorLang, IndexBook> for OpNodes {
    fn search_eclass_with_limit(
        &self,
        egraph: &TensorGraph,
        eclass: Id,
        limit: usize,
    ) -> Option<SearchMatches<'_, TensorLang>> {
        let class = &egraph[eclass];
        if limit == 0 || class.data.tensor().is_none() || !class.nodes.iter().any(is_op) {
            return None;
        }
        Some(SearchMatches {
            eclass,
            substs: vec![Subst::default()],
            ast: None,
        })
    }

    fn vars(&self) -> Vec<Var> {
        vec![]
    }
}

fn attr_of(eg: &TensorGraph, id: Id) -> Option<Attr> {
    eg[id].data.attr().cloned()
}

/// Adds `kernel{body}(inputs)` and unions it into `eclass` (justified by `rule`).
fn add_kernel(
    eg: &mut TensorGraph,
    eclass: Id,
    body: KernelBody,
    inputs: &[Id],
    rule: Symbol,
) -> Option<Id> {
    let leaf = eg.add(TensorLang::Attr(Attr::Body(body)));
    let mut children = vec![leaf];
    children.extend(inputs.iter().map(|i| eg.find(*i)));
    let id = eg.add(TensorLang::Kernel(children.into_boxed_slice()));
    if eg.union_trusted(eclass, id, rule) {
        Some(eclass)
    } else {
        None
    }
}

/// The single-op body of every op e-node of `eclass`, except identities on the class itself
/// (`x = permute(x)` for a permute of unit axes, `x = reshape(x, shape(x))`, an identity `read`):
/// a kernel computing a value from itself is useless, and absorbing one into a consumer would
/// leave the same input behind, so growth would repeat it until the body limit.
fn single_op_bodies(eg: &TensorGraph, eclass: Id) -> Vec<(RecExpr<TensorLang>, Vec<Id>)> {
    let eclass = eg.find(eclass);
    let nodes: Vec<TensorLang> = eg[eclass]
        .nodes
        .iter()
        .filter(|n| {
            is_op(n)
                && !egg::Language::children(*n)
                    .iter()
                    .any(|c| eg.find(*c) == eclass)
        })
        .cloned()
        .collect();
    nodes
        .iter()
        .map(|n| {
            let (b, ins) = single_op_body(n, &|c| attr_of(eg, c));
            (b, ins.into_iter().map(|i| eg.find(i)).collect())
        })
        .collect()
}

struct Wrap;

impl Applier<TensorLang, IndexBook> for Wrap {
    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        _subst: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let mut changed = Vec::new();
        for (body, ins) in single_op_bodies(eg, eclass) {
            changed.extend(add_kernel(eg, eclass, KernelBody::new(body), &ins, rule));
        }
        changed
    }
}

/// A grown body with its input classes.
type Grown = (RecExpr<TensorLang>, Vec<Id>);

/// A grown body as the kernel e-node's body, with its input classes: what growth adds to the
/// e-graph. A replayed growth gives the recorded growth's bodies (shared, not copied), so the
/// hash-cons lookup of an identical layer's kernel body hashes nothing and compares pointers.
type Made = (KernelBody, Vec<Id>);

/// [`Grown`] bodies wrapped as kernel bodies.
fn made(grown: Vec<Grown>) -> Vec<Made> {
    grown
        .into_iter()
        .map(|(b, i)| (KernelBody::new(b), i))
        .collect()
}

/// A single-op body of a class with its input classes: the seed of one kernel growth.
type Seed = (Id, RecExpr<TensorLang>, Vec<Id>);

/// What `kernel-fuse` remembers between applications (the phase applies it once per iteration to
/// every class; the e-graph's op nodes do not change during the phase, only kernels are added).
#[derive(Default)]
struct GrowMemo {
    /// Seeds already grown breadth-first, with the classes the growth observed (`None`:
    /// not recorded, growth without replay): that growth reads only op e-nodes, which the
    /// phase does not change, so it is final until the e-graph changes around those classes.
    grown: FxHashMap<Seed, Option<Vec<Id>>>,
    /// Seeds whose growth met a dense layer's GEMM: they also get the deferred growth and the
    /// contraction-free maximal growth.
    deferred: FxHashSet<Seed>,
    /// Per seed and policy ([`apply::MaxMode`]), the kernel counts of its input classes when
    /// it was last grown maximally: the maximal growth reads only those classes' kernels, so
    /// equal counts give equal results.
    maxed: FxHashMap<(Seed, apply::MaxMode), Vec<usize>>,
    /// Legality verdicts by (body, input facts): synthesis is the phase's dominant cost and the
    /// same body is reached from several seeds.
    legal: Verdicts,
}

/// Legality verdicts by (body, input facts), looked up from borrowed parts: a hit (most
/// lookups) clones no body or facts. Filed under [`Verdicts::key`], the parts' hash; equal
/// hashes are told apart by comparing the parts.
#[derive(Default)]
struct Verdicts(FxHashMap<u64, Vec<Verdict>>);

/// A body, its input facts and whether it is legal.
type Verdict = (RecExpr<TensorLang>, Vec<TensorFacts>, bool);

impl Verdicts {
    fn key(body: &RecExpr<TensorLang>, facts: &[&TensorFacts]) -> u64 {
        let mut h = FxHasher::default();
        body.hash(&mut h);
        facts.hash(&mut h);
        h.finish()
    }

    /// The verdict on `body` over inputs of `facts` (`key`: [`Verdicts::key`] of them).
    fn get(&self, key: u64, body: &RecExpr<TensorLang>, facts: &[&TensorFacts]) -> Option<bool> {
        self.0.get(&key)?.iter().find_map(|(b, f, ok)| {
            (b == body && f.len() == facts.len() && f.iter().zip(facts).all(|(x, y)| x == *y))
                .then_some(*ok)
        })
    }

    fn insert(&mut self, key: u64, body: RecExpr<TensorLang>, facts: Vec<TensorFacts>, ok: bool) {
        self.0.entry(key).or_default().push((body, facts, ok));
    }
}

struct Grow {
    legal: Legality,
    limits: FusionLimits,
    memo: Arc<Mutex<GrowMemo>>,
    /// Recorded breadth-first growths (with whether the seed is deferred), by seed body.
    replays: Replays<bool>,
    /// Recorded maximal growths, by seed body and policy.
    replays_max: Replays<()>,
}

fn input_facts<'a>(eg: &'a impl GrowView, ins: &[Id]) -> Option<Vec<&'a TensorFacts>> {
    ins.iter().map(|i| eg.facts(*i)).collect()
}

fn lock(m: &Mutex<GrowMemo>) -> std::sync::MutexGuard<'_, GrowMemo> {
    // A panic while holding the lock leaves only caches behind, which stay valid.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// True when e-class `d` computes a contraction: a sum-reduction of a product of two different
/// tensor classes (a GEMM, a convolution, QKᵀ; not a sum of squares).
fn is_contraction_class(eg: &TensorGraph, d: Id) -> bool {
    eg[d].nodes.iter().any(|n| match n {
        TensorLang::Reduce([_, _, _, x]) => eg[*x].nodes.iter().any(|m| match m {
            TensorLang::Mul([a, b]) => {
                eg.find(*a) != eg.find(*b)
                    && eg[*a].data.tensor().is_some()
                    && eg[*b].data.tensor().is_some()
            }
            _ => false,
        }),
        _ => false,
    })
}

/// Whether class `d` computes a dense layer's GEMM: a contraction with a rank-2 result, or a
/// lowered MatMul of activations `X: [L…, K]` by one weight `W: [K, N]` (ONNX `Gemm`, or
/// `MatMul` of a rank-3 `X`: `crate::rules::subst`'s form); not attention's batched products.
fn is_dense_class(eg: &TensorGraph, d: Id) -> bool {
    is_contraction_class(eg, d)
        && (eg[d].data.tensor().is_some_and(|f| f.shape.len() == 2)
            || super::subst::is_weight_matmul(eg, d))
}

/// True when a body contains a contraction: a sum whose operand (under casts) is a product of
/// two different values (a GEMM, a convolution, QKᵀ). A sum of squares (`mul(d, d)`, a
/// variance) or of a value times an immediate is not one.
pub fn has_contraction(body: &RecExpr<TensorLang>) -> bool {
    let nodes = body.as_ref();
    let strip = |mut id: Id| {
        while let TensorLang::Cast([x, _]) = &nodes[usize::from(id)] {
            id = *x;
        }
        id
    };
    nodes.iter().any(|n| match n {
        TensorLang::Reduce([_, _, _, x]) => match &nodes[usize::from(strip(*x))] {
            TensorLang::Mul([a, b]) => {
                let (a, b) = (strip(*a), strip(*b));
                a != b && !nodes[usize::from(a)].is_attr() && !nodes[usize::from(b)].is_attr()
            }
            _ => false,
        },
        _ => false,
    })
}

/// Per e-class, the e-classes whose op nodes (not kernels) read it.
type Consumers = FxHashMap<Id, Vec<Id>>;

fn consumers(eg: &TensorGraph) -> Consumers {
    let mut out: Consumers = FxHashMap::default();
    for class in eg.classes() {
        for n in class.nodes.iter().filter(|n| is_op(n)) {
            for c in egg::Language::children(n) {
                let c = eg.find(*c);
                if eg[c].data.tensor().is_some() && c != class.id {
                    let v = out.entry(c).or_default();
                    if !v.contains(&class.id) {
                        v.push(class.id);
                    }
                }
            }
        }
    }
    out
}

fn kernel_count(eg: &TensorGraph, class: Id) -> usize {
    eg[class]
        .nodes
        .iter()
        .filter(|n| matches!(n, TensorLang::Kernel(_)))
        .count()
}

/// The kernel e-nodes of a class (for tests and extraction).
pub fn kernel_nodes(eg: &TensorGraph, class: Id) -> Vec<TensorLang> {
    eg[class]
        .nodes
        .iter()
        .filter(|n| matches!(n, TensorLang::Kernel(_)))
        .cloned()
        .collect()
}

/// A legality oracle that accepts every well-typed body (for tests of the rules themselves).
pub fn any_body() -> Legality {
    Arc::new(|body, inputs| body_facts(body, inputs).map(|_| ()))
}
