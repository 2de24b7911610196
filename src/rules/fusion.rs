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
//!   (`crate::ir::region::synth`), which rejects a reduction evaluated inside another reduction
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

mod replay;

use super::Rule;
use crate::ir::egraph::kernel::{body_facts, fuse, kernel_parts, merge_same_class, single_op_body};
use crate::ir::egraph::{Attr, IndexBook, KernelBody, TensorFacts, TensorGraph, TensorLang};
use egg::{Applier, Id, PatternAst, RecExpr, Rewrite, SearchMatches, Searcher, Subst, Symbol, Var};
use rayon::prelude::*;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use replay::{Direct, GrowView, Replays};

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
    vec![
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
                memo: Mutex::default(),
                replays: Replays::default(),
                replays_max: Replays::default(),
            },
        )
        .expect("static rule"),
    ]
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
    body: RecExpr<TensorLang>,
    inputs: &[Id],
    rule: Symbol,
) -> Option<Id> {
    let leaf = eg.add(TensorLang::Attr(Attr::Body(KernelBody::new(body))));
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
            changed.extend(add_kernel(eg, eclass, body, &ins, rule));
        }
        changed
    }
}

/// A grown body with its input classes.
type Grown = (RecExpr<TensorLang>, Vec<Id>);

/// A single-op body of a class with its input classes: the seed of one kernel growth.
type Seed = (Id, RecExpr<TensorLang>, Vec<Id>);

/// What `kernel-fuse` remembers between applications (the phase applies it once per iteration to
/// every class; the e-graph's op nodes do not change during the phase, only kernels are added).
#[derive(Default)]
struct GrowMemo {
    /// Seeds already grown breadth-first: that growth reads only op e-nodes, so it is final.
    grown: HashSet<Seed>,
    /// Seeds whose growth met a dense layer's GEMM: they also get the deferred growth and the
    /// contraction-free maximal growth.
    deferred: HashSet<Seed>,
    /// Per seed and policy (`true`: contraction-free producers only), the kernel counts of its
    /// input classes when it was last grown maximally: the maximal growth reads only those
    /// classes' kernels, so equal counts give equal results.
    maxed: HashMap<(Seed, bool), Vec<usize>>,
    /// Legality verdicts by (body, input facts): synthesis is the phase's dominant cost and the
    /// same body is reached from several seeds.
    legal: HashMap<(RecExpr<TensorLang>, Vec<TensorFacts>), bool>,
}

struct Grow {
    legal: Legality,
    limits: FusionLimits,
    memo: Mutex<GrowMemo>,
    /// Recorded breadth-first growths (with whether the seed is deferred), by seed body.
    replays: Replays<bool>,
    /// Recorded maximal growths, by seed body and policy.
    replays_max: Replays<()>,
}

fn input_facts(eg: &impl GrowView, ins: &[Id]) -> Option<Vec<TensorFacts>> {
    ins.iter().map(|i| eg.facts(*i).cloned()).collect()
}

fn lock(m: &Mutex<GrowMemo>) -> std::sync::MutexGuard<'_, GrowMemo> {
    // A panic while holding the lock leaves only caches behind, which stay valid.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Grow {
    /// `fuse` of a producer into the consumer's input `pos`, when the result is within the
    /// body limits (not yet checked for legality).
    /// Nodes of one e-class are merged ([`merge_same_class`]).
    fn fuse_within_limits(
        &self,
        eg: &impl GrowView,
        body: &RecExpr<TensorLang>,
        ins: &[Id],
        pos: usize,
        p: &RecExpr<TensorLang>,
        p_ins: &[Id],
    ) -> Option<(RecExpr<TensorLang>, Vec<Id>)> {
        let (b, i) = fuse(body, ins, pos, p, p_ins);
        let (b, i) = merge_same_class(&b, &i, &|n| eg.lookup(n));
        let ops = b.as_ref().iter().filter(|n| !n.is_attr()).count();
        let reduces = b
            .as_ref()
            .iter()
            .filter(|n| matches!(n, TensorLang::Reduce(_)))
            .count();
        (ops <= self.limits.max_body_ops && reduces <= self.limits.max_reduces).then_some((b, i))
    }

    /// The legality verdict on a body over input classes (memoized by body and input facts).
    fn is_legal(&self, eg: &impl GrowView, body: &RecExpr<TensorLang>, ins: &[Id]) -> bool {
        let Some(facts) = input_facts(eg, ins) else {
            return false;
        };
        let key = (body.clone(), facts);
        if let Some(ok) = lock(&self.memo).legal.get(&key) {
            return *ok;
        }
        let ok = (self.legal)(&key.0, &key.1).is_ok();
        lock(&self.memo).legal.insert(key, ok);
        ok
    }

    /// `fuse` of a producer into the consumer's input `pos`, kept only when the result is within
    /// the body limits and legal.
    fn try_fuse(
        &self,
        eg: &impl GrowView,
        body: &RecExpr<TensorLang>,
        ins: &[Id],
        pos: usize,
        p: &RecExpr<TensorLang>,
        p_ins: &[Id],
    ) -> Option<(RecExpr<TensorLang>, Vec<Id>)> {
        let (b, i) = self.fuse_within_limits(eg, body, ins, pos, p, p_ins)?;
        self.is_legal(eg, &b, &i).then_some((b, i))
    }

    /// Grows one single-op body breadth-first: input classes are visited in order (new inputs
    /// queued behind), and each absorbs the first of its op e-nodes whose single-op body keeps
    /// the kernel legal and within limits. Returns the successive bodies (each one a kernel of
    /// `eclass`): the prefixes give the extractor the choice of where the kernel stops — e.g.
    /// the MLP's second matmul with its operand's movement folded in but the first matmul's
    /// epilogue left to the first kernel.
    ///
    /// Free ops (movement, casts) come first: before each computing op, every queued input
    /// absorbs its free producers, transitively (so every prefix reads through all the movement
    /// it can: attention's P·V with V's transpose folded in but P read from memory). Inputs
    /// with only computing producers wait, in order, for the next computing step. Legality is
    /// checked, and a prefix emitted, once per batch of free ops (a cut inside a movement chain
    /// is never better than reading through it); when a batch turns out illegal, growth
    /// restarts from the last legal body checking every op, which gives exactly the
    /// one-op-at-a-time result.
    ///
    /// With `defer`, the computing step takes the first waiting input that is neither a
    /// contraction ([`is_contraction_class`]) nor read by a consumer outside the body (a value
    /// materialized for another kernel anyway) while there is one: the prefixes then include
    /// the whole row-reduction kernel after a GEMM or after another LayerNorm (BERT's second
    /// LayerNorm over `ff2 + LN1`) before those producers are absorbed (issue 23); then the
    /// shared values, and it stops where only contractions wait. Deferred growth also absorbs
    /// each class in the spelling that reads the fewest new classes (`absorb_computing`'s
    /// `reuse`): the LayerNorm's mean as `Σx` over its own `x`, so the one-kernel LayerNorm over
    /// a materialized `x` is among the prefixes. Returns the bodies and whether a dense-layer
    /// GEMM (a contraction with a rank-2 result) was waiting.
    fn grow(&self, eg: &impl GrowView, seed: &Seed, defer: bool) -> (Vec<Grown>, bool) {
        // The seed's class is canonical ([`Grow::seeds`], on the unchanged e-graph).
        let (eclass, body, ins) = seed.clone();
        let mut g = Growth::new(eclass, body, ins);
        let mut out = Vec::new();
        let mut last_legal = g.clone();
        let mut strict = false;
        let mut saw_boundary = false;
        loop {
            // Free closure.
            while let Some(d) = g.queue.pop_front() {
                match self.absorb_free(eg, eclass, &mut g, d, strict) {
                    Absorbed::Yes if strict => {
                        out.push((g.body.clone(), g.ins.clone()));
                        last_legal = g.clone();
                    }
                    Absorbed::Yes => g.pending += 1,
                    Absorbed::No => g.waiting.push_back(d),
                    Absorbed::Gone => {}
                }
            }
            if g.pending > 0 {
                if !self.is_legal(eg, &g.body, &g.ins) {
                    g = last_legal.clone();
                    strict = true;
                    continue;
                }
                g.pending = 0;
                out.push((g.body.clone(), g.ins.clone()));
            }
            // One computing op.
            let boundary = |d: Id| eg.is_contraction(d) || eg.read_outside(d, &g.inside);
            // Deferred growth takes shared values after the rest and stops where only
            // contractions wait: absorbing them is what the breadth-first growth does, and the
            // bodies past that point (a GEMM under a whole LayerNorm) were a third of BERT's
            // pricing and never chosen.
            let next = if defer {
                let first = g.waiting.iter().position(|d| !boundary(*d));
                match first.or_else(|| g.waiting.iter().position(|d| !eg.is_contraction(*d))) {
                    Some(i) => i,
                    None => break,
                }
            } else {
                0
            };
            let Some(d) = g.waiting.get(next).copied() else {
                break;
            };
            saw_boundary |= eg.is_contraction(d) && eg.facts(d).is_some_and(|f| f.shape.len() == 2);
            g.waiting.remove(next);
            if g.computing < self.limits.max_prefixes {
                if let Some(alternatives) = self.absorb_computing(eg, eclass, &mut g, d, defer) {
                    out.push((g.body.clone(), g.ins.clone()));
                    out.extend(alternatives);
                }
            }
            last_legal = g.clone();
        }
        (out, saw_boundary)
    }

    /// The single-op bodies of input class `d` that growth may absorb: not using the kernel's
    /// own class (the kernel would be its own input), free or computing as asked.
    fn candidates(
        eg: &impl GrowView,
        eclass: Id,
        d: Id,
        free: bool,
    ) -> impl Iterator<Item = (RecExpr<TensorLang>, Vec<Id>)> {
        eg.op_bodies(d).into_iter().filter(move |(p, p_ins)| {
            !p_ins.contains(&eclass) && p.as_ref().last().is_some_and(is_free) == free
        })
    }

    /// Absorbs the first free producer of input `d` within limits (checked for legality only in
    /// strict mode; otherwise the batch is checked as a whole).
    fn absorb_free(
        &self,
        eg: &impl GrowView,
        eclass: Id,
        g: &mut Growth,
        d: Id,
        strict: bool,
    ) -> Absorbed {
        let Some(pos) = g.ins.iter().position(|c| *c == d) else {
            return Absorbed::Gone;
        };
        for (p, p_ins) in Self::candidates(eg, eclass, d, true) {
            let Some((b, i)) = self.fuse_within_limits(eg, &g.body, &g.ins, pos, &p, &p_ins) else {
                continue;
            };
            if strict && !self.is_legal(eg, &b, &i) {
                continue;
            }
            g.absorb(d, b, i, &p_ins);
            return Absorbed::Yes;
        }
        Absorbed::No
    }

    /// Absorbs the first computing producer of input `d` that keeps the body legal. With
    /// `reuse`, producers that read only classes the body already reads or computes come
    /// first: a class with several spellings (SRNF's `Σ(a + b) = Σa + Σb`) is then absorbed in
    /// the spelling over the body's own values — a LayerNorm's mean as the row sum of the `x`
    /// it normalizes, not as partial sums over `x`'s producers, which left the one-kernel
    /// LayerNorm over a materialized `x` out of the e-graph (issue 23).
    ///
    /// Returns `None` when nothing was absorbed, else the *alternative* bodies: when `d` is a
    /// contraction with several spellings (a substitution's merged GEMM next to the original),
    /// the body with each other legal spelling of `d` absorbed — kernels the growth does not
    /// continue from, so the epilogue over every spelling is in the e-graph (without them a
    /// bias add after `matmul-absorb-sum-pool`'s merged form lost its fused GEMM + bias kernel
    /// and was priced as a kernel of its own).
    fn absorb_computing(
        &self,
        eg: &impl GrowView,
        eclass: Id,
        g: &mut Growth,
        d: Id,
        reuse: bool,
    ) -> Option<Vec<Grown>> {
        let pos = g.ins.iter().position(|c| *c == d)?;
        let mut candidates: Vec<Grown> = Self::candidates(eg, eclass, d, false).collect();
        let contraction = eg.is_contraction(d);
        if contraction {
            // The reduction itself first (stable), its other spellings as alternatives: the
            // epilogue over the GEMM as lowered is grown on, an epilogue over a
            // substitution's form (`(Σ …) / c`) is a prefix, and the maximal growth absorbs
            // that form's whole kernel.
            candidates
                .sort_by_key(|(p, _)| !matches!(p.as_ref().last(), Some(TensorLang::Reduce(_))));
        }
        if reuse {
            // Stable: the e-graph's order among equally reusing spellings.
            candidates.sort_by_key(|(_, p_ins)| {
                p_ins
                    .iter()
                    .filter(|c| !g.ins.contains(c) && !g.inside.contains(c))
                    .count()
            });
        }
        let mut rest = candidates.into_iter();
        for (p, p_ins) in rest.by_ref() {
            if let Some((b, i)) = self.try_fuse(eg, &g.body, &g.ins, pos, &p, &p_ins) {
                let alternatives = if contraction {
                    rest.filter_map(|(q, q_ins)| {
                        self.try_fuse(eg, &g.body, &g.ins, pos, &q, &q_ins)
                    })
                    .collect()
                } else {
                    Vec::new()
                };
                g.absorb(d, b, i, &p_ins);
                g.computing += 1;
                return Some(alternatives);
            }
        }
        None
    }
}

/// What [`Grow::absorb_free`] did with an input class.
enum Absorbed {
    /// A free producer was absorbed.
    Yes,
    /// The class has no free producer to absorb (it waits for a computing step).
    No,
    /// The class is no longer an input (absorbed along another path).
    Gone,
}

/// The state of one breadth-first growth.
#[derive(Clone)]
struct Growth {
    body: RecExpr<TensorLang>,
    ins: Vec<Id>,
    /// Input classes still to visit, and every class ever queued (the seed's class included).
    queue: VecDeque<Id>,
    /// Input classes with no free producer, waiting for a computing step (in order).
    waiting: VecDeque<Id>,
    visited: BTreeSet<Id>,
    /// The classes the body computes (the seed's and every absorbed producer's).
    inside: BTreeSet<Id>,
    /// Computing ops absorbed so far.
    computing: usize,
    /// Free ops absorbed since the last legality check.
    pending: usize,
}

impl Growth {
    fn new(eclass: Id, body: RecExpr<TensorLang>, ins: Vec<Id>) -> Growth {
        let mut visited: BTreeSet<Id> = ins.iter().copied().collect();
        visited.insert(eclass);
        Growth {
            queue: ins.iter().copied().collect(),
            waiting: VecDeque::new(),
            visited,
            inside: [eclass].into(),
            body,
            ins,
            computing: 0,
            pending: 0,
        }
    }

    /// Takes the fused body (class `d` absorbed); the producer's inputs are queued behind.
    fn absorb(&mut self, d: Id, body: RecExpr<TensorLang>, ins: Vec<Id>, p_ins: &[Id]) {
        self.inside.insert(d);
        for c in p_ins {
            if self.visited.insert(*c) {
                self.queue.push_back(*c);
            }
        }
        self.body = body;
        self.ins = ins;
    }
}

/// Ops a kernel absorbs without computing anything per element: movement (an access map) and
/// casts (a conversion on load).
fn is_free(n: &TensorLang) -> bool {
    n.is_movement() || matches!(n, TensorLang::Cast(_))
}

/// The kernels of a class, largest body first (ties: body text), as (body, inputs).
fn kernels_largest_first(eg: &TensorGraph, class: Id) -> Vec<(KernelBody, Vec<Id>)> {
    let attr = |id: Id| eg[id].data.attr();
    // Op counts computed once, not per comparison (the sort was most of this function).
    let mut ks: Vec<(usize, KernelBody, Vec<Id>)> = eg[class]
        .nodes
        .iter()
        .filter_map(|n| match n {
            TensorLang::Kernel(ch) => kernel_parts(ch, &attr).ok().map(|(b, ins)| {
                let ins = ins.iter().map(|i| eg.find(*i)).collect();
                (b.op_count(), b.clone(), ins)
            }),
            _ => None,
        })
        .collect();
    ks.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| a.1.cmp(&b.1))
            .then_with(|| a.2.cmp(&b.2))
    });
    ks.into_iter().map(|(_, b, ins)| (b, ins)).collect()
}

impl Grow {
    /// Grows one single-op body by whole producer kernels: for each input in order, absorbs the
    /// largest kernel of the input's class that keeps the body legal (maximal fusion, built on
    /// the producers' own growth, so it reaches across alternative spellings the breadth-first
    /// growth does not take). With `no_contractions`, only producer kernels without a
    /// contraction ([`has_contraction`]) are absorbed: largest-first alone absorbs a GEMM into
    /// the row reductions after it (legal: the GEMM's output point is the row reduction's
    /// shadowed iteration point, but priced far above the two kernels) and never builds the
    /// contraction-free row-reduction kernel, so a LayerNorm after a projection was cut into
    /// three kernels (issue 23).
    fn grow_max(
        &self,
        eg: &impl GrowView,
        eclass: Id,
        body: RecExpr<TensorLang>,
        ins: Vec<Id>,
        no_contractions: bool,
    ) -> Option<(RecExpr<TensorLang>, Vec<Id>)> {
        // `eclass` is canonical (the caller's `find`).
        let originals = ins.clone();
        let (mut body, mut ins) = (body, ins);
        let mut grew = false;
        for d in originals {
            let Some(pos) = ins.iter().position(|c| *c == d) else {
                continue;
            };
            for (p, p_ins) in eg.kernels(d) {
                if p_ins.contains(&eclass) || (no_contractions && has_contraction(p.expr())) {
                    continue;
                }
                let Some((b, i)) = self.try_fuse(eg, &body, &ins, pos, p.expr(), &p_ins) else {
                    continue;
                };
                body = b;
                ins = i;
                grew = true;
                break;
            }
        }
        grew.then_some((body, ins))
    }
}

impl Grow {
    /// The breadth-first growth of a seed, once per seed (it reads only op e-nodes, which the
    /// phase does not change); replayed from a recorded growth where one fits ([`replay`]).
    fn grow_once(&self, eg: &Direct, seed: &Seed) -> Vec<(RecExpr<TensorLang>, Vec<Id>)> {
        if lock(&self.memo).grown.contains(seed) {
            return Vec::new();
        }
        let (out, deferred) = if self.limits.replay {
            let classes: Vec<Id> = std::iter::once(seed.0)
                .chain(seed.2.iter().copied())
                .collect();
            self.replays
                .grow(eg, &seed.1, 0, &classes, |rec| self.grow_seed(rec, seed))
        } else {
            self.grow_seed(eg, seed)
        };
        if deferred {
            lock(&self.memo).deferred.insert(seed.clone());
        }
        lock(&self.memo).grown.insert(seed.clone());
        out
    }

    /// The breadth-first growths of a seed, and whether it is deferred (it also gets the
    /// deferred growth and the contraction-free maximal growth).
    fn grow_seed(&self, eg: &impl GrowView, seed: &Seed) -> (Vec<Grown>, bool) {
        let (mut out, saw_boundary) = self.grow(eg, seed, false);
        // A dense layer's GEMM was reachable: also the growth that absorbs it (and shared
        // values) last. Not for a contraction's own seed, nor around batched contractions:
        // there the breadth-first growth already gives the attention template's two regions,
        // and deferring only re-splits the softmax.
        let deferred = saw_boundary && !eg.is_contraction(seed.0);
        if deferred {
            let (more, _) = self.grow(eg, seed, true);
            out.extend(
                more.into_iter()
                    .filter(|k| !out.contains(k))
                    .collect::<Vec<_>>(),
            );
        }
        (out, deferred)
    }

    /// The maximal growths of a seed (largest producers, then contraction-free producers), again
    /// only when its input classes gained kernels since.
    fn grow_max_if_changed(&self, eg: &Direct, seed: &Seed) -> Vec<(RecExpr<TensorLang>, Vec<Id>)> {
        let (eclass, body, ins) = seed.clone();
        let eclass = eg.eg.find(eclass);
        let counts: Vec<usize> = ins.iter().map(|i| kernel_count(eg.eg, *i)).collect();
        let mut out = Vec::new();
        let deferred = lock(&self.memo).deferred.contains(seed);
        for no_contractions in [false, true] {
            if no_contractions && !deferred {
                continue;
            }
            let key = (seed.clone(), no_contractions);
            if lock(&self.memo).maxed.get(&key) == Some(&counts) {
                continue;
            }
            lock(&self.memo).maxed.insert(key, counts.clone());
            let (grown, ()) = if self.limits.replay {
                let classes: Vec<Id> = std::iter::once(eclass).chain(ins.iter().copied()).collect();
                let kind = 1 + u8::from(no_contractions);
                self.replays_max.grow(eg, &body, kind, &classes, |rec| {
                    let g = self.grow_max(rec, eclass, body.clone(), ins.clone(), no_contractions);
                    (g.into_iter().collect(), ())
                })
            } else {
                let g = self.grow_max(eg, eclass, body.clone(), ins.clone(), no_contractions);
                (g.into_iter().collect(), ())
            };
            out.extend(grown);
        }
        out.dedup();
        out
    }

    /// The seeds of a class: its single-op bodies.
    fn seeds(eg: &TensorGraph, eclass: Id) -> Vec<Seed> {
        let eclass = eg.find(eclass);
        single_op_bodies(eg, eclass)
            .into_iter()
            .map(|(b, i)| (eclass, b, i))
            .collect()
    }
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
type Consumers = HashMap<Id, Vec<Id>>;

fn consumers(eg: &TensorGraph) -> Consumers {
    let mut out: Consumers = HashMap::new();
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

impl Applier<TensorLang, IndexBook> for Grow {
    /// First the breadth-first growth of every matched seed, in parallel on the unchanged
    /// e-graph (it reads only op e-nodes); its kernels are added in match order. Then the maximal
    /// growth, sequentially in match order, so a consumer sees the kernels its producers (lower
    /// class ids, added first) just gained. Deterministic: results do not depend on the thread
    /// schedule, and the memo only skips work whose result is already in the e-graph.
    fn apply_matches(
        &self,
        eg: &mut TensorGraph,
        matches: &[SearchMatches<TensorLang>],
        rule: Symbol,
    ) -> Vec<Id> {
        let seeds: Vec<Seed> = matches
            .iter()
            .flat_map(|m| Grow::seeds(eg, m.eclass))
            .collect();
        let shared: &TensorGraph = eg;
        let consumers = consumers(shared);
        let view = Direct {
            eg: shared,
            consumers: &consumers,
        };
        let grown: Vec<Vec<(RecExpr<TensorLang>, Vec<Id>)>> = seeds
            .par_iter()
            .map(|seed| self.grow_once(&view, seed))
            .collect();
        let mut changed = Vec::new();
        for (seed, kernels) in seeds.iter().zip(grown) {
            for (b, i) in kernels {
                changed.extend(add_kernel(eg, seed.0, b, &i, rule));
            }
        }
        for seed in &seeds {
            let view = Direct {
                eg,
                consumers: &consumers,
            };
            for (b, i) in self.grow_max_if_changed(&view, seed) {
                changed.extend(add_kernel(eg, seed.0, b, &i, rule));
            }
        }
        changed
    }

    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        _subst: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let mut changed = Vec::new();
        for seed in Grow::seeds(eg, eclass) {
            let consumers = consumers(eg);
            let view = Direct {
                eg,
                consumers: &consumers,
            };
            let mut kernels = self.grow_once(&view, &seed);
            kernels.extend(self.grow_max_if_changed(&view, &seed));
            for (b, i) in kernels {
                changed.extend(add_kernel(eg, eclass, b, &i, rule));
            }
        }
        changed
    }
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
