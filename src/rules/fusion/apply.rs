//! The `kernel-fuse` applier: the breadth-first growth of each seed once (replayed where a
//! recorded growth fits), then the maximal growth by whole producer kernels whenever the input
//! classes gained kernels.

use super::replay::{Direct, GrowView};
use super::{add_kernel, consumers, has_contraction, kernel_count, lock, single_op_bodies};
use super::{made, Grow, Grown, Made, Seed};
use crate::ir::egraph::kernel::kernel_parts;
use crate::ir::egraph::{IndexBook, KernelBody, TensorGraph, TensorLang};
use egg::{Applier, Id, PatternAst, RecExpr, SearchMatches, Subst, Symbol};
use rayon::prelude::*;
use std::collections::BTreeSet;

/// The kernels of a class, largest body first (ties: body text), as (body, inputs).
pub(super) fn kernels_largest_first(eg: &TensorGraph, class: Id) -> Vec<(KernelBody, Vec<Id>)> {
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

/// Which producer kernels a maximal growth absorbs, input by input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum MaxMode {
    /// The largest legal kernel of each input class, in input order.
    Largest = 0,
    /// The largest contraction-free kernel of each (deferred seeds: the row-reduction kernel
    /// after a GEMM).
    NoContractions = 1,
    /// As `Largest`, but only for the inputs no other kernel reads: a value materialized for
    /// another consumer anyway stays an input (a residual add absorbs its branch's GEMM or
    /// convolution, not the skip value's producer, whose kernel, absorbed first, left the
    /// branch unfusable). For seeds with both kinds of input, and for seeds whose exclusive
    /// inputs have such a growth themselves (the `relu` after that add,
    /// [`Grow::grow_shared_kept`]).
    SharedKept = 2,
    /// Each of the [`EACH_PRODUCER_MAX`] largest kernels of the one input class, one kernel
    /// apiece: for a scaled reduction (`Σ / n`, a mean's division; [`scales_a_reduction`]),
    /// whose cover takes whichever of its sum's kernels is cheapest, and the largest alone is
    /// rarely that one (ResNet's global average pool over the last block: the largest kernel
    /// of the sum recomputes the residual's convolutions, the cheapest reads it).
    EachProducer = 3,
}

/// Most producer kernels one [`MaxMode::EachProducer`] growth absorbs, each into its own kernel.
const EACH_PRODUCER_MAX: usize = 64;

/// Whether the single-op `body` over `ins` scales a reduction: a multiplication or division
/// whose only input class (the other operand an immediate) holds a `reduce`.
fn scales_a_reduction(eg: &impl GrowView, body: &RecExpr<TensorLang>, ins: &[Id]) -> bool {
    let [input] = ins else {
        return false;
    };
    let scales = matches!(
        body.as_ref().last(),
        Some(TensorLang::Mul(_) | TensorLang::Fdiv(_))
    );
    scales
        && eg
            .op_bodies(*input)
            .iter()
            .any(|(b, _)| matches!(b.as_ref().last(), Some(TensorLang::Reduce(_))))
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
        mode: MaxMode,
    ) -> Option<(RecExpr<TensorLang>, Vec<Id>)> {
        if mode == MaxMode::SharedKept {
            return self.grow_shared_kept(eg, eclass, body, ins, SHARED_KEPT_DEPTH);
        }
        debug_assert!(mode != MaxMode::EachProducer, "grow_each");
        let no_contractions = mode == MaxMode::NoContractions;
        let (mut body, mut ins) = (body, ins);
        let mut grew = false;
        for d in ins.clone() {
            let Some(pos) = ins.iter().position(|c| *c == d) else {
                continue;
            };
            if let Some((b, i)) =
                self.absorb_largest(eg, eclass, &body, &ins, pos, d, no_contractions)
            {
                body = b;
                ins = i;
                grew = true;
            }
        }
        grew.then_some((body, ins))
    }

    /// `body` with the largest kernel of input class `d` (at `pos`) that keeps it legal
    /// absorbed; with `no_contractions`, only kernels without a contraction.
    #[allow(clippy::too_many_arguments)]
    fn absorb_largest(
        &self,
        eg: &impl GrowView,
        eclass: Id,
        body: &RecExpr<TensorLang>,
        ins: &[Id],
        pos: usize,
        d: Id,
        no_contractions: bool,
    ) -> Option<(RecExpr<TensorLang>, Vec<Id>)> {
        eg.kernels(d).into_iter().find_map(|(p, p_ins)| {
            if p_ins.contains(&eclass) || (no_contractions && has_contraction(p.expr())) {
                return None;
            }
            self.try_fuse(eg, body, ins, pos, p.expr(), &p_ins)
        })
    }

    /// [`MaxMode::EachProducer`]: `body` (a scaled reduction, one input) with each of the
    /// largest kernels of its input class that keep it legal absorbed, one kernel apiece.
    fn grow_each(
        &self,
        eg: &impl GrowView,
        eclass: Id,
        body: &RecExpr<TensorLang>,
        ins: &[Id],
    ) -> Vec<(RecExpr<TensorLang>, Vec<Id>)> {
        let [d] = ins else {
            return Vec::new();
        };
        eg.kernels(*d)
            .into_iter()
            .filter(|(_, p_ins)| !p_ins.contains(&eclass))
            .take(EACH_PRODUCER_MAX)
            .filter_map(|(p, p_ins)| self.try_fuse(eg, body, ins, 0, p.expr(), &p_ins))
            .collect()
    }

    /// [`MaxMode::SharedKept`]: the inputs other kernels read stay inputs; every other input
    /// absorbs its own shared-kept growth (`depth` levels down: `relu(conv + b + skip)` is a
    /// `relu` over an `add` whose shared-kept growth reads the skip value) or, without one, its
    /// largest legal kernel. `None` when nothing is kept: then it is `Largest`'s growth.
    fn grow_shared_kept(
        &self,
        eg: &impl GrowView,
        eclass: Id,
        body: RecExpr<TensorLang>,
        ins: Vec<Id>,
        depth: usize,
    ) -> Option<(RecExpr<TensorLang>, Vec<Id>)> {
        let inside = BTreeSet::from([eclass]);
        let exclusive: Vec<Id> = ins
            .iter()
            .copied()
            .filter(|d| !eg.read_outside(*d, &inside))
            .collect();
        if exclusive.is_empty() {
            return None;
        }
        // Each exclusive input's own shared-kept growth, from its first seed that has one.
        let kept: Vec<Option<(RecExpr<TensorLang>, Vec<Id>)>> = exclusive
            .iter()
            .map(|&d| {
                if depth == 0 {
                    return None;
                }
                eg.op_bodies(d).into_iter().find_map(|(b, i)| {
                    self.grow_shared_kept(eg, d, b, i, depth - 1)
                        .filter(|(_, p_ins)| !p_ins.contains(&eclass))
                })
            })
            .collect();
        if exclusive.len() == ins.len() && kept.iter().all(Option::is_none) {
            return None;
        }
        let (mut body, mut ins) = (body, ins);
        let mut grew = false;
        for (d, kept) in exclusive.into_iter().zip(kept) {
            let Some(pos) = ins.iter().position(|c| *c == d) else {
                continue;
            };
            let fused = match kept {
                Some((p, p_ins)) => self.try_fuse(eg, &body, &ins, pos, &p, &p_ins),
                None => self.absorb_largest(eg, eclass, &body, &ins, pos, d, false),
            };
            if let Some((b, i)) = fused {
                body = b;
                ins = i;
                grew = true;
            }
        }
        grew.then_some((body, ins))
    }
}

/// How many single-input levels a shared-kept growth looks down for a kept value
/// ([`MaxMode::SharedKept`]): `relu(add(conv + b, skip))` needs 1, a clip as `min(max(·))`
/// over such an add 2.
const SHARED_KEPT_DEPTH: usize = 2;

impl Grow {
    /// The breadth-first growth of a seed, once per seed (it reads only op e-nodes, which the
    /// phase does not change); replayed from a recorded growth where one fits ([`super::replay`]).
    ///
    /// The classes the growth observed are remembered with the seed (unknown without replay,
    /// which records them), so that [`super::GrowthState::forget_changed`] can tell which
    /// growths a later change of the e-graph (the substitutions) may alter.
    fn grow_once(&self, eg: &Direct, seed: &Seed) -> Vec<Made> {
        if lock(&self.memo).grown.contains_key(seed) {
            return Vec::new();
        }
        let (out, deferred, observed) = if self.limits.replay {
            let classes: Vec<Id> = std::iter::once(seed.0)
                .chain(seed.2.iter().copied())
                .collect();
            let (out, deferred, observed) = self
                .replays
                .grow(eg, &seed.1, 0, &classes, |rec| self.grow_seed(rec, seed));
            (out, deferred, Some(observed))
        } else {
            let (out, deferred) = self.grow_seed(eg, seed);
            (made(out), deferred, None)
        };
        let mut memo = lock(&self.memo);
        if deferred {
            memo.deferred.insert(seed.clone());
        }
        memo.grown.insert(seed.clone(), observed);
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
    fn grow_max_if_changed(&self, eg: &Direct, seed: &Seed) -> Vec<Made> {
        let (eclass, body, ins) = seed.clone();
        let eclass = eg.eg.find(eclass);
        let counts: Vec<usize> = ins.iter().map(|i| kernel_count(eg.eg, *i)).collect();
        let mut out = Vec::new();
        let deferred = lock(&self.memo).deferred.contains(seed);
        for mode in [
            MaxMode::Largest,
            MaxMode::NoContractions,
            MaxMode::SharedKept,
            MaxMode::EachProducer,
        ] {
            if mode == MaxMode::NoContractions && !deferred {
                continue;
            }
            if mode == MaxMode::EachProducer && !scales_a_reduction(eg, &body, &ins) {
                continue;
            }
            let key = (seed.clone(), mode);
            if lock(&self.memo).maxed.get(&key) == Some(&counts) {
                continue;
            }
            lock(&self.memo).maxed.insert(key, counts.clone());
            let grown = if self.limits.replay {
                let classes: Vec<Id> = std::iter::once(eclass).chain(ins.iter().copied()).collect();
                let kind = 1 + mode as u8;
                let (g, (), _) = self.replays_max.grow(eg, &body, kind, &classes, |rec| {
                    (self.grow_max_mode(rec, eclass, &body, &ins, mode), ())
                });
                g
            } else {
                made(self.grow_max_mode(eg, eclass, &body, &ins, mode))
            };
            out.extend(grown);
        }
        out.dedup();
        out
    }

    /// The maximal growths of `body` in `mode`: one ([`Self::grow_max`]) or, for
    /// [`MaxMode::EachProducer`], one per absorbed producer kernel.
    fn grow_max_mode(
        &self,
        eg: &impl GrowView,
        eclass: Id,
        body: &RecExpr<TensorLang>,
        ins: &[Id],
        mode: MaxMode,
    ) -> Vec<(RecExpr<TensorLang>, Vec<Id>)> {
        if mode == MaxMode::EachProducer {
            return self.grow_each(eg, eclass, body, ins);
        }
        self.grow_max(eg, eclass, body.clone(), ins.to_vec(), mode)
            .into_iter()
            .collect()
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
        let grown: Vec<Vec<Made>> = seeds
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
