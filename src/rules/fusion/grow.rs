//! Breadth-first kernel growth ([`Grow::grow`]): a seed's single-op body absorbs, input class by
//! input class, first its free producers (movement, casts) and then one computing producer at a
//! time, each prefix a kernel; the state of one growth is a [`Growth`].

use super::{input_facts, lock, Grow, Grown, Seed, Verdicts};
use crate::ir::egraph::kernel::{fuse, merge_same_class};
use crate::ir::egraph::{TensorFacts, TensorLang};
use egg::{Id, RecExpr};
use std::collections::{BTreeSet, VecDeque};

use super::replay::GrowView;

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
        let key = Verdicts::key(body, &facts);
        if let Some(ok) = lock(&self.memo).legal.get(key, body, &facts) {
            return ok;
        }
        let facts: Vec<TensorFacts> = facts.into_iter().cloned().collect();
        let ok = (self.legal)(body, &facts).is_ok();
        lock(&self.memo).legal.insert(key, body.clone(), facts, ok);
        ok
    }

    /// `fuse` of a producer into the consumer's input `pos`, kept only when the result is within
    /// the body limits and legal.
    pub(super) fn try_fuse(
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
    /// shared values, and it stops where only contractions wait — unless the body is still an
    /// elementwise epilogue: then with the dense-layer GEMMs ([`deferred_next`]). Deferred
    /// growth also absorbs each class in the spelling that reads the fewest new classes
    /// (`absorb_computing`'s `reuse`): the LayerNorm's mean as `Σx` over its own `x`, so the
    /// one-kernel LayerNorm over a materialized `x` is among the prefixes. Returns the bodies
    /// and whether a dense-layer GEMM was waiting where deferring pays: a rank-2 one for any
    /// seed, a batched dense layer (`[B, S, K]·W`) for an elementwise epilogue
    /// ([`GrowView::is_dense`]).
    pub(super) fn grow(&self, eg: &impl GrowView, seed: &Seed, defer: bool) -> (Vec<Grown>, bool) {
        // The seed's class is canonical ([`Grow::seeds`], on the unchanged e-graph).
        let (eclass, body, ins) = seed.clone();
        let mut g = Growth::new(eclass, body, ins);
        let mut out = Vec::new();
        let mut last_legal = g.clone();
        let mut strict = false;
        let mut saw_boundary = false;
        // Deferred growth past its epilogue ([`deferred_next`]) and what it may absorb there.
        let mut closing = false;
        let mut products: BTreeSet<Id> = BTreeSet::new();
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
            let next = if defer {
                match deferred_next(eg, &g, &mut closing, &products) {
                    Some(i) => i,
                    None => break,
                }
            } else {
                0
            };
            let Some(d) = g.waiting.get(next).copied() else {
                break;
            };
            // A rank-2 GEMM defers any seed (the row reductions after it); a batched dense
            // layer only an elementwise epilogue (the body holds no reduction yet).
            saw_boundary |= eg.is_dense(d)
                && (eg.facts(d).is_some_and(|f| f.shape.len() == 2) || !has_reduce(&g.body));
            g.waiting.remove(next);
            if g.computing < self.limits.max_prefixes {
                // A closing growth's GEMM: the inputs it adds are its products.
                let before: Option<BTreeSet<Id>> =
                    (closing && eg.is_dense(d)).then(|| g.ins.iter().copied().collect());
                if let Some(alternatives) = self.absorb_computing(eg, eclass, &mut g, d, defer) {
                    if let Some(before) = before {
                        products.extend(g.ins.iter().filter(|c| !before.contains(c)));
                    }
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
        let mut candidates: Vec<Grown> = Self::candidates(eg, eclass, d, true).collect();
        // A merged contraction's column block is a shrink of each merge that holds it (Q/K/V:
        // of Q‖K‖V and of the pairs): the widest merge first — the one GEMM that computes every
        // block, which the other blocks' consumers read too. Stable: the e-graph's order
        // otherwise (issue 23: P·V read V through a copy of the three-way merge).
        candidates.sort_by_key(|(p, p_ins)| std::cmp::Reverse(shrink_source_width(eg, p, p_ins)));
        for (p, p_ins) in candidates {
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
                let mut alternatives: Vec<Grown> = if contraction {
                    rest.filter_map(|(q, q_ins)| {
                        self.try_fuse(eg, &g.body, &g.ins, pos, &q, &q_ins)
                    })
                    .collect()
                } else {
                    Vec::new()
                };
                let reduction = matches!(p.as_ref().last(), Some(TensorLang::Reduce(_)));
                // Other inputs wait ahead of the GEMM's product: the body with the GEMM
                // completed first ([`Grow::complete_product`]).
                let ahead = !g.waiting.is_empty();
                // Or another contraction waits (a residual block's projection shortcut beside
                // its last convolution): the body over the whole contraction reading the other
                // branch's output.
                let beside = g.waiting.iter().any(|w| eg.is_contraction(*w));
                g.absorb(d, b, i, &p_ins);
                g.computing += 1;
                if contraction && reduction && ahead && (beside || eg.is_dense(d)) {
                    alternatives.extend(self.complete_product(eg, eclass, g.clone()));
                }
                return Some(alternatives);
            }
        }
        None
    }
}

impl Grow {
    /// A dense-layer GEMM's reduction `g` just absorbed, completed: its product (queued) and the
    /// product's free producers absorbed, the other waiting inputs left as inputs. The
    /// breadth-first order absorbs those inputs first, so without this no kernel reads them
    /// over the whole GEMM: a merged Q‖K‖V GEMM whose epilogue adds the concatenated bias (a
    /// constant computed at load time, `crate::extract::derived`) computed the concatenation
    /// in the epilogue instead of reading it (issue 23). Also for any contraction while another
    /// contraction waits: a residual block's last convolution reading its projection shortcut's
    /// output (fp16: the `mma_sync` convolution, two kernels, where the summed SIMT tile was the
    /// only one-kernel form; MobileNetV2's projection reading the previous block's, 52 → 51
    /// kernels). `None` when the product does not fuse.
    fn complete_product(&self, eg: &impl GrowView, eclass: Id, mut g: Growth) -> Option<Grown> {
        let products: Vec<Id> = g.queue.drain(..).collect();
        for d in products {
            if let Absorbed::No = self.absorb_free(eg, eclass, &mut g, d, true) {
                self.absorb_computing(eg, eclass, &mut g, d, false)?;
            }
        }
        while let Some(d) = g.queue.pop_front() {
            self.absorb_free(eg, eclass, &mut g, d, true);
        }
        Some((g.body, g.ins))
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

/// The waiting input a deferred growth absorbs next (`None`: it ends). Shared values come after
/// the rest, and it stops where only contractions wait: absorbing them is what the
/// breadth-first growth does, and the bodies past that point (a GEMM under a whole LayerNorm)
/// were a third of BERT's pricing and never chosen. Except after an elementwise epilogue (no
/// reduction in the body): then it is `closing` and absorbs the waiting dense-layer GEMMs and
/// their `products` (the classes their reduces read), each a prefix — the GEMM with its whole
/// epilogue (GPT-2's tanh GELU over a `[B·S, N]` GEMM read back as `[B, S, N]`, where the
/// breadth-first growth reaches the GEMM's LayerNorm before the epilogue is whole).
fn deferred_next(
    eg: &impl GrowView,
    g: &Growth,
    closing: &mut bool,
    products: &BTreeSet<Id>,
) -> Option<usize> {
    if !*closing {
        let boundary = |d: Id| eg.is_contraction(d) || eg.read_outside(d, &g.inside);
        let first = g.waiting.iter().position(|d| !boundary(*d));
        let other = || g.waiting.iter().position(|d| !eg.is_contraction(*d));
        if let Some(i) = first.or_else(other) {
            return Some(i);
        }
        if has_reduce(&g.body) {
            return None;
        }
        *closing = true;
    }
    g.waiting
        .iter()
        .position(|d| eg.is_dense(*d) || products.contains(d))
}

/// Whether `body` holds a reduction.
fn has_reduce(body: &RecExpr<TensorLang>) -> bool {
    body.as_ref()
        .iter()
        .any(|n| matches!(n, TensorLang::Reduce(_)))
}

/// The constant last extent of the tensor a single-op `shrink` body cuts its block from; 0 for
/// other bodies and symbolic extents.
fn shrink_source_width(eg: &impl GrowView, p: &RecExpr<TensorLang>, p_ins: &[Id]) -> i64 {
    if !matches!(p.as_ref().last(), Some(TensorLang::Shrink(_))) {
        return 0;
    }
    p_ins
        .iter()
        .filter_map(|c| eg.facts(*c)?.shape.last()?.as_int())
        .max()
        .unwrap_or(0)
}

/// Ops a kernel absorbs without computing anything per element: movement (an access map) and
/// casts (a conversion on load).
fn is_free(n: &TensorLang) -> bool {
    n.is_movement() || matches!(n, TensorLang::Cast(_))
}
