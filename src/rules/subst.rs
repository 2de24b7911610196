//! Graph substitutions (issue 23; TASO / Tensat's algebraic rewrites): rules that change which
//! contractions a program computes, not how one is spelled, so the kernel extractor can choose a
//! cover a greedy fusion pass cannot see.
//!
//! - `matmul-merge-shared-lhs` (a multi-pattern rule): two lowered MatMuls that read the same
//!   left operand, `X·W₁` and `X·W₂` with `W₁: [K, N₁]`, `W₂: [K, N₂]`, are the two column
//!   blocks of one MatMul with the weights concatenated along N:
//!   `X·W₁ = shrink(X·(W₁‖W₂), [0, 0], [M, N₁])`, `X·W₂ = shrink(X·(W₁‖W₂), [0, N₁], [M, N₁+N₂])`,
//!   where `W₁‖W₂ = pad(W₁, N₂ right) + pad(W₂, N₁ left)` (Concat's own lowering). The merged
//!   MatMul is merged again with a third sibling (Q, K and V: one GEMM with N = 3·hidden; the
//!   FFN's gate and up projections likewise). When both parts add a bias (`Linear` layers,
//!   `X·Wᵢ + bᵢ`), the merged MatMul adds the concatenated bias too and each biased part is its
//!   columns: `X·W₁ + b₁ = shrink(X·(W₁‖W₂) + (b₁‖b₂), columns of 1)`, so the merged GEMM
//!   applies the biases in its epilogue as the parts did, not its consumers at every load.
//! - `matmul-absorb-sum-pool` (fast-math only, `subst_pool.rs`): a MatMul over a sum or mean
//!   pool is one contraction over the channels and the pooled axes (global average pool +
//!   classifier: `Σ_c W[c,o]·(1/HW)·Σ_hw x[c,hw] = (Σ_(c,hw) W[c,o]·x[c,hw])/HW`).
//!
//! The assumptions below are `matmul-merge-shared-lhs`'s; `subst_pool.rs` states its own.
//!
//! Assumptions (every rule below relies on these, and on nothing else):
//! - A lowered MatMul is `reduce(sum, [2], acc, mul(A, B))` with
//!   `A = cast?(expand(reshape(X, [M, 1, K]), [M, N, K]), acc)` and
//!   `B = cast?(expand(permute(reshape(W, [1, K, N]), [0, 2, 1]), [M, N, K]), acc)`
//!   (`src/lower/contraction.rs`); the searcher reads exactly this shape from the e-graph
//!   (nodes being *present*, never absent), with `N` a constant.
//! - Exactness: column `n < N₁` of the merged product sums `X[m,k]·(W₁[k,n] + 0)` over the same
//!   `k` in the same order as the original: `w + 0 = w` for every value but `-0`, which becomes
//!   `+0`; the sign of a zero is not part of a value (as in the epilogue rules), so the rule is
//!   exact and tested with `Compare::BitExact` on random inputs.
//! - Cycle filtering (Tensat): merged weights and biases must be graph inputs, so no merged
//!   MatMul depends on a class it is unioned with; an e-class cannot end up reading itself.
//! - A bias is found among the parents of a MatMul's class, or of its cast (a narrow MatMul's
//!   lowering): `add(X·W, expand(reshape(b, [1…, N]), [L…, N]))` in either operand order,
//!   `b: [N]` (the lowering's broadcast); both parts' casts must agree.
//! - Budget: a merge group (same `X`, `K`, accumulator and weight dtype) gives only left-deep
//!   merges that extend the prefix of its weights in class order by the next weight, of at
//!   most [`MAX_MERGED`] weights: n siblings give min(n, [`MAX_MERGED`]) − 1 merged MatMuls
//!   (Q/K/V: Q‖K and Q‖K‖V), and the phase saturates once the longest prefix exists. Every
//!   subset (2ⁿ − n − 1: Q‖V and K‖V too) was never chosen on the models and made the second
//!   kernels phase regrow their consumers (BERT-12 at sequence 384: 1.43 → 1.25 s).
//!
//! What it costs: the merged GEMM reads the concatenated weights through guarded reads (the
//! pads fold into the GEMM's B loads, no copy kernel) — TODO(issue 23): weights that are
//! constants could be concatenated once at load time instead.

use super::helpers::{dtype_attr, ints, leaf, try_add, union_same_facts};
use super::{attr, tensor, Rule};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::egraph::{Attr, IndexBook, TensorGraph, TensorLang};
use crate::ir::tiny::ReduceOp;
use egg::{Applier, Id, PatternAst, Rewrite, SearchMatches, Searcher, Subst, Symbol, Var};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

#[path = "subst_pool.rs"]
mod pool;

/// Names of the substitution rules, in [`rules`] order.
pub const RULE_NAMES: [&str; 2] = ["matmul-merge-shared-lhs", "matmul-absorb-sum-pool"];

/// The substitutions that reassociate floating-point arithmetic (exact for real numbers, not
/// bit for bit): run only under `--fast-math` ([`rules_with`]), like srnf's hoists.
pub const FAST_MATH_RULES: [&str; 1] = ["matmul-absorb-sum-pool"];

/// Most weights one merged MatMul concatenates (Q, K, V and one more).
pub const MAX_MERGED: usize = 4;

/// The substitution rule set, [`FAST_MATH_RULES`] included, ungated (tests, library users;
/// phase "subst" of [`crate::rules::all_phases_with`]).
pub fn rules() -> Vec<Rule> {
    build(true, None)
}

/// The substitutions of phase "subst" as the optimizer runs them: without `fast_math`, less
/// [`FAST_MATH_RULES`]; the merge of batched projections behind `gate` (the pricer's,
/// [`MergeGate`]).
pub fn gated_rules(fast_math: bool, gate: &MergeGate) -> Vec<Rule> {
    build(fast_math, Some(gate.clone()))
}

/// The rule set: [`FAST_MATH_RULES`] only with `fast_math`; `matmul-merge-shared-lhs` behind
/// `gate` where one is given.
fn build(fast_math: bool, gate: Option<MergeGate>) -> Vec<Rule> {
    let mut out = vec![
        // X·W₁, X·W₂ ⇒ shrink(X·(W₁‖W₂), columns of each): MatMuls sharing X merged along N.
        merge_rule(gate),
    ];
    if fast_math {
        // (Σ_r Y[m,k,r] / c)·W ⇒ (Σ_(k,r) Y[m,k,r]·W[k,n]) / c: a pool's sum joins the MatMul's.
        out.push(
            Rewrite::new(
                "matmul-absorb-sum-pool",
                pool::PooledMatmuls,
                pool::AbsorbPool,
            )
            .expect("static rule"),
        );
    }
    out
}

/// `matmul-merge-shared-lhs`; with a `gate`, an exporter's batched projections (`X: [B, S, K]`)
/// merge only where the gate says the parts leave SMs idle ([`MergeGate`]).
pub fn merge_rule(gate: Option<MergeGate>) -> Rule {
    Rewrite::new(
        "matmul-merge-shared-lhs",
        Matmuls,
        MergeShared(gate.map(Arc::new)),
    )
    .expect("static rule")
}

/// When the batched form of `matmul-merge-shared-lhs` may pay, at the sizes the program is
/// priced at, under the pricer that chooses the cover (`crate::optimize` asks the pricer,
/// `crate::extract::pricing::KernelPricer::merge_units`):
///
/// - A GPU (the roofline, `units = Some(sms)`): the roofline prices a merged GEMM as the sum
///   of its parts while they fill the GPU (bench/results/covers-2026-11-27-6.md §3: on BERT-12
///   at the default sizes the merged covers equalled the unmerged ones and doubled `optimize`'s
///   time), so the merge can only win when a part launches fewer CTAs than the target has SMs
///   (a serving batch: BERT at batch 1, sequence 128 runs each 768-column projection on 24 of
///   132 SMs). CTAs are counted with the smallest GEMM tile the plan space has (64×64: the most
///   CTAs any plan launches), the leading axes evaluated at the bindings (unbound symbols at
///   the default size).
/// - A pricer whose time is additive in work (the CPU model, `units = None`: a per-kernel
///   overhead plus the larger of compute and memory time, so a merged GEMM, one overhead and
///   `X` read once, never prices above its parts): every group merges, and the extractor
///   decides whether the merged cover is cheaper.
///
/// A heuristic on which e-graph to build, not a price: the extractor still chooses between
/// merged and unmerged kernels (bench/results/covers-2026-11-28.md).
#[derive(Clone, Debug)]
pub struct MergeGate {
    /// Symbol values the program is priced at.
    pub bindings: BTreeMap<String, i64>,
    /// The value of an unbound symbol.
    pub default_size: i64,
    /// The parallel units (a GPU's SMs) a projection must leave idle for a merge to be tried;
    /// `None`: merge always.
    pub units: Option<u32>,
}

/// The smallest GEMM tile edge of the plan space ([`MergeGate`]).
const SMALLEST_TILE: i64 = 64;

impl MergeGate {
    /// Whether the one-weight MatMul `mm` may merge: always without `units`, else when it
    /// launches fewer CTAs than there are units.
    fn admits(&self, mm: &Matmul) -> bool {
        let Some(units) = self.units else {
            return true;
        };
        let lookup = |s: &str| Some(self.bindings.get(s).copied().unwrap_or(self.default_size));
        let rows = mm.lead.iter().try_fold(1i64, |acc, d| {
            d.eval(&lookup).ok().and_then(|v| acc.checked_mul(v.max(0)))
        });
        let tiles = |v: i64| (v + SMALLEST_TILE - 1) / SMALLEST_TILE;
        rows.and_then(|m| tiles(m).checked_mul(tiles(mm.n)))
            .is_some_and(|ctas| ctas < i64::from(units))
    }
}

/// The substitutions of phase "subst" (first in `crate::rules::all_phases_with`), ungated:
/// without `fast_math`, [`rules`] less [`FAST_MATH_RULES`].
pub fn rules_with(fast_math: bool) -> Vec<Rule> {
    build(fast_math, None)
}

/// A lowered MatMul found in the e-graph.
#[derive(Clone, Debug, PartialEq)]
struct Matmul {
    /// Its e-class (`[M, N]`, dtype `acc`).
    class: Id,
    x: Id,
    w: Id,
    /// The leading axes of `X` and of the product (`[M]`, or `[B, S]` for an exporter's
    /// batched projection `X: [B, S, K]`).
    lead: Vec<Dim>,
    k: Dim,
    n: i64,
    acc: DType,
}

/// The first node of `class` that `f` accepts.
pub(super) fn find<T>(
    eg: &TensorGraph,
    class: Id,
    f: impl Fn(&TensorLang) -> Option<T>,
) -> Option<T> {
    eg[eg.find(class)].nodes.iter().find_map(f)
}

/// The operand of a `cast(·, acc)` node in `class` (the lowering's cast of a narrow operand),
/// else `class` itself when its dtype is `acc`.
fn uncast(eg: &TensorGraph, class: Id, acc: DType) -> Option<Id> {
    let cast = find(eg, class, |n| match n {
        TensorLang::Cast([x, d])
            if dtype_attr(eg, *d) == Some(acc) && tensor(eg, *x)?.dtype != acc =>
        {
            Some(*x)
        }
        _ => None,
    });
    cast.or_else(|| (tensor(eg, class)?.dtype == acc).then_some(class))
}

fn shape_attr(eg: &TensorGraph, id: Id) -> Option<Vec<Dim>> {
    match attr(eg, id) {
        Some(Attr::Shape(s)) => Some(s.to_vec()),
        _ => None,
    }
}

/// The `X: [M, K]` of the A operand `expand(reshape(X, [M, 1, K]), [M, N, K])`.
pub(super) fn lhs(eg: &TensorGraph, a: Id) -> Option<Id> {
    lhs_batched(eg, a).filter(|x| tensor(eg, *x).is_some_and(|t| t.shape.len() == 2))
}

/// The `X: [L…, K]` of the A operand `expand(reshape(X, [L…, 1, K]), [L…, N, K])` (`L…` one or
/// more leading axes: the lowering of `X · W` for a rank ≥ 2 `X` and a rank-2 `W`).
fn lhs_batched(eg: &TensorGraph, a: Id) -> Option<Id> {
    let r = find(eg, a, |n| match n {
        TensorLang::Expand([r, _]) => Some(*r),
        _ => None,
    })?;
    find(eg, r, |n| match n {
        TensorLang::Reshape([x, s]) => {
            let xs = &tensor(eg, *x)?.shape;
            let s = shape_attr(eg, *s)?;
            let r = xs.len();
            (r >= 2
                && s.len() == r + 1
                && s[..r - 1] == xs[..r - 1]
                && s[r - 1].is_int(1)
                && s[r] == xs[r - 1])
                .then_some(*x)
        }
        _ => None,
    })
}

/// The weight `W: [K, N]` read by the B operand `expand(permute(reshape(W, [1, K, N]), [0,2,1]))`
/// (with a batched `X`, the permuted `[1, N, K]` is first reshaped to `[1…, N, K]`).
fn rhs(eg: &TensorGraph, b: Id) -> Option<Id> {
    let e = find(eg, b, |n| match n {
        TensorLang::Expand([p, _]) => Some(*p),
        _ => None,
    })?;
    let transposed = |p: Id| {
        find(eg, p, |n| match n {
            TensorLang::Permute([r, perm]) if ints(eg, *perm) == Some(vec![0, 2, 1]) => Some(*r),
            _ => None,
        })
    };
    let r = transposed(e).or_else(|| {
        find(eg, e, |n| match n {
            TensorLang::Reshape([p, s]) => {
                let ps = &tensor(eg, *p)?.shape;
                let s = shape_attr(eg, *s)?;
                let k = s.len().checked_sub(2)?;
                (ps.len() == 3
                    && k >= 1
                    && s[..k].iter().all(|d| d.is_int(1))
                    && s[k..] == ps[1..])
                    .then_some(())?;
                transposed(*p)
            }
            _ => None,
        })
    })?;
    find(eg, r, |n| match n {
        TensorLang::Reshape([w, s]) => {
            let ws = &tensor(eg, *w)?.shape;
            let s = shape_attr(eg, *s)?;
            (ws.len() == 2 && s.len() == 3 && s[0].is_int(1) && s[1] == ws[0] && s[2] == ws[1])
                .then_some(*w)
        }
        _ => None,
    })
}

/// The lowered MatMul computed by `class`, if it holds one with a constant N.
fn matmul(eg: &TensorGraph, class: Id) -> Option<Matmul> {
    let class = eg.find(class);
    lowered_products(eg, class, |acc, a, b| {
        let x = lhs_batched(eg, uncast(eg, a, acc)?)?;
        let w = rhs(eg, uncast(eg, b, acc)?)?;
        let xs = &tensor(eg, x)?.shape;
        let ws = &tensor(eg, w)?.shape;
        let r = xs.len();
        (xs[r - 1] == ws[0]).then_some(())?;
        Some(Matmul {
            class,
            x: eg.find(x),
            w: eg.find(w),
            lead: xs[..r - 1].to_vec(),
            k: xs[r - 1].clone(),
            n: ws[1].as_int()?,
            acc,
        })
    })
}

/// Whether `class` holds a lowered MatMul of activations by one weight `W: [K, N]` (the growth's
/// dense-layer test, `crate::rules::fusion`).
pub(crate) fn is_weight_matmul(eg: &TensorGraph, class: Id) -> bool {
    matmul(eg, class).is_some()
}

/// Whether `matmul-merge-shared-lhs` merged MatMuls in `eg`: a lowered MatMul's class also
/// holds a column block (`shrink`) of another lowered MatMul — the union the rule makes
/// (`crate::optimize::MERGED_WORK_PER_NODE`).
pub fn has_merged_matmuls(eg: &TensorGraph) -> bool {
    eg.classes().any(|c| {
        c.nodes.iter().any(|n| match n {
            TensorLang::Shrink([x, ..]) => {
                let x = eg.find(*x);
                x != c.id && is_weight_matmul(eg, x) && is_weight_matmul(eg, c.id)
            }
            _ => false,
        })
    })
}

/// The first `f(acc, a, b)` accepted over the lowered MatMuls of `class`:
/// `reduce(sum, [r], acc, a · b)` over the last axis of `a, b: [L…, N, K]` (`r` = rank − 1;
/// `[M, N, K]` and axis 2 for a rank-2 `X`).
pub(super) fn lowered_products<T>(
    eg: &TensorGraph,
    class: Id,
    f: impl Fn(DType, Id, Id) -> Option<T>,
) -> Option<T> {
    find(eg, class, |n| {
        let TensorLang::Reduce([op, axes, acc, body]) = n else {
            return None;
        };
        let last = tensor(eg, *body)?.shape.len().checked_sub(1)?;
        if attr(eg, *op) != Some(&Attr::Op(ReduceOp::Sum))
            || last < 2
            || ints(eg, *axes) != Some(vec![last])
        {
            return None;
        }
        let acc = dtype_attr(eg, *acc)?;
        find(eg, *body, |p| match p {
            TensorLang::Mul([a, b]) => f(acc, *a, *b),
            _ => None,
        })
    })
}

/// Matches every e-class holding a lowered MatMul.
struct Matmuls;

impl Searcher<TensorLang, IndexBook> for Matmuls {
    fn search_eclass_with_limit(
        &self,
        egraph: &TensorGraph,
        eclass: Id,
        limit: usize,
    ) -> Option<SearchMatches<'_, TensorLang>> {
        (limit > 0 && matmul(egraph, eclass).is_some()).then(|| SearchMatches {
            eclass,
            substs: vec![Subst::default()],
            ast: None,
        })
    }

    fn vars(&self) -> Vec<Var> {
        vec![]
    }
}

/// The weights a MatMul's `W` concatenates: `W` itself for a graph input, the parts of a
/// concatenation this rule built (`pad(L, ·) + pad(R, ·)`, read back from the e-graph).
fn leaves(eg: &TensorGraph, w: Id, depth: usize) -> Option<Vec<Id>> {
    let w = eg.find(w);
    if eg[w]
        .nodes
        .iter()
        .any(|n| matches!(n, TensorLang::Input(_)))
    {
        return Some(vec![w]);
    }
    if depth == 0 {
        return None;
    }
    find(eg, w, |n| {
        let TensorLang::Add([l, r]) = n else {
            return None;
        };
        let part = |c: Id| {
            find(eg, c, |p| match p {
                TensorLang::Pad([x, _, _]) => Some(*x),
                _ => None,
            })
        };
        let mut out = leaves(eg, part(*l)?, depth - 1)?;
        let right = leaves(eg, part(*r)?, 0)?;
        out.extend(right);
        Some(out)
    })
}

/// For `--explain`: the substitution that produced class `class`'s value, when it is a merged
/// MatMul (`matmul-merge-shared-lhs`, naming the concatenated weights) or a merged MatMul with
/// its concatenated bias added.
pub fn explain(eg: &TensorGraph, class: Id) -> Option<String> {
    let (mm, biases) = match matmul(eg, class) {
        Some(mm) => (mm, None),
        None => find(eg, class, |n| {
            let TensorLang::Add([a, b]) = n else {
                return None;
            };
            [(*a, *b), (*b, *a)].into_iter().find_map(|(x, e)| {
                let uncast = |x: Id| {
                    find(eg, x, |n| match n {
                        TensorLang::Cast([y, _]) => matmul(eg, *y),
                        _ => None,
                    })
                };
                let mm = matmul(eg, x).or_else(|| uncast(x))?;
                let bias = bias_of(eg, e, &mm.lead, mm.n)?;
                Some((mm, Some(bias)))
            })
        })?,
    };
    let ws = leaves(eg, mm.w, MAX_MERGED)?;
    if ws.len() < 2 {
        return None;
    }
    let names = |ids: &[Id]| -> String {
        ids.iter()
            .map(|w| {
                find(eg, *w, |n| match n {
                    TensorLang::Input([name, _, _]) => match attr(eg, *name) {
                        Some(Attr::Name(s)) => Some(s.clone()),
                        _ => None,
                    },
                    _ => None,
                })
                .unwrap_or_else(|| format!("class {w}"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let bias_note = biases
        .and_then(|b| leaves(eg, b, MAX_MERGED))
        .map(|bs| {
            format!(
                ", biases {} concatenated and added in its epilogue",
                names(&bs)
            )
        })
        .unwrap_or_default();
    Some(format!(
        "substitution matmul-merge-shared-lhs: one GEMM for the MatMuls sharing their left \
         operand, weights {} concatenated along N ({} columns){bias_note}",
        names(&ws),
        mm.n
    ))
}

/// `L‖R` along the last axis (`l`: `nl` columns, `r`: `nr`): `pad(L, nr right) + pad(R, nl
/// left)`, Concat's own lowering (weights `[K, N]`, biases `[N]`).
fn concat_last(eg: &mut TensorGraph, l: Id, nl: i64, r: Id, nr: i64) -> Option<Id> {
    let lead = tensor(eg, l)?.shape.len().checked_sub(1)?;
    let pads = |p: (i64, i64)| {
        let mut v = vec![(0, 0); lead];
        v.push(p);
        Attr::Pads(v)
    };
    let zero = leaf(eg, Attr::num(0.0));
    let pl = leaf(eg, pads((0, nr)));
    let pr = leaf(eg, pads((nl, 0)));
    let a = try_add(eg, TensorLang::Pad([l, pl, zero]))?;
    let b = try_add(eg, TensorLang::Pad([r, pr, zero]))?;
    try_add(eg, TensorLang::Add([a, b]))
}

fn shape_leaf(eg: &mut TensorGraph, dims: Vec<Dim>) -> Id {
    leaf(eg, Attr::Shape(dims.into()))
}

/// `cast(x, acc)` unless `x` already has dtype `acc`.
fn to_acc(eg: &mut TensorGraph, x: Id, acc: DType) -> Option<Id> {
    super::helpers::cast_to(eg, x, acc)
}

/// The lowered MatMul `X·W` with `W: [K, n]` (the shape [`matmul`] reads).
fn build_matmul(eg: &mut TensorGraph, mm: &Matmul, w: Id, n: i64) -> Option<Id> {
    let (k, nn) = (mm.k.clone(), Dim::int(n));
    let with = |tail: [Dim; 2]| -> Vec<Dim> { mm.lead.iter().cloned().chain(tail).collect() };
    let s = shape_leaf(eg, with([Dim::int(1), k.clone()]));
    let xr = try_add(eg, TensorLang::Reshape([mm.x, s]))?;
    let full = shape_leaf(eg, with([nn.clone(), k.clone()]));
    let xe = try_add(eg, TensorLang::Expand([xr, full]))?;
    let a = to_acc(eg, xe, mm.acc)?;
    let s = shape_leaf(eg, vec![Dim::int(1), k.clone(), nn.clone()]);
    let wr = try_add(eg, TensorLang::Reshape([w, s]))?;
    let perm = leaf(eg, Attr::Ints(vec![0, 2, 1]));
    let wp = try_add(eg, TensorLang::Permute([wr, perm]))?;
    let wp = if mm.lead.len() > 1 {
        let ones = vec![Dim::int(1); mm.lead.len()];
        let s = shape_leaf(eg, ones.into_iter().chain([nn, k]).collect());
        try_add(eg, TensorLang::Reshape([wp, s]))?
    } else {
        wp
    };
    let we = try_add(eg, TensorLang::Expand([wp, full]))?;
    let b = to_acc(eg, we, mm.acc)?;
    let prod = try_add(eg, TensorLang::Mul([a, b]))?;
    let op = leaf(eg, Attr::Op(ReduceOp::Sum));
    let axes = leaf(eg, Attr::Ints(vec![mm.lead.len() as i64 + 1]));
    let acc = leaf(eg, Attr::DType(mm.acc));
    try_add(eg, TensorLang::Reduce([op, axes, acc, prod]))
}

/// `shrink(c, [0…, lo], [L…, hi])`: columns `lo..hi` of `c: [L…, N]`.
fn columns(eg: &mut TensorGraph, c: Id, lead: &[Dim], lo: i64, hi: i64) -> TensorLang {
    let lo_dims: Vec<Dim> = lead
        .iter()
        .map(|_| Dim::int(0))
        .chain([Dim::int(lo)])
        .collect();
    let hi_dims: Vec<Dim> = lead.iter().cloned().chain([Dim::int(hi)]).collect();
    let l = shape_leaf(eg, lo_dims);
    let h = shape_leaf(eg, hi_dims);
    let st = leaf(eg, Attr::Ints(vec![1; lead.len() + 1]));
    TensorLang::Shrink([c, l, h, st])
}

/// The applier of `matmul-merge-shared-lhs`, with its gate on batched projections (none: every
/// group merges, as [`rules`] gives it).
struct MergeShared(Option<Arc<MergeGate>>);

/// MatMuls that can merge: same `X`, `K`, accumulator and weight dtype.
type GroupKey = (Id, String, DType, DType);

impl MergeShared {
    /// Merges `l` (one weight or a merge of several) with the one-weight MatMul `r`.
    fn merge(eg: &mut TensorGraph, l: &Matmul, r: &Matmul, rule: Symbol) -> Vec<Id> {
        let Some(wc) = concat_last(eg, l.w, l.n, r.w, r.n) else {
            return vec![];
        };
        let Some(c) = build_matmul(eg, l, wc, l.n + r.n) else {
            return vec![];
        };
        let left = columns(eg, c, &l.lead, 0, l.n);
        let right = columns(eg, c, &l.lead, l.n, l.n + r.n);
        let mut changed = union_same_facts(eg, l.class, left, rule);
        changed.extend(union_same_facts(eg, r.class, right, rule));
        changed.extend(Self::merge_biases(eg, (l, r), c, rule));
        changed
    }

    /// When both parts add a bias (`X·W₁ + b₁`, `X·W₂ + b₂`: the projections of an exporter's
    /// `Linear`), the merged MatMul `c` adds the concatenated bias too and each biased part is
    /// its columns: `X·W₁ + b₁ = shrink(X·(W₁‖W₂) + (b₁‖b₂), columns of 1)`. The merged GEMM
    /// then applies the bias in its epilogue as each part did (without this, the parts'
    /// consumers would add it while loading their tiles).
    fn merge_biases(
        eg: &mut TensorGraph,
        (l, r): (&Matmul, &Matmul),
        c: Id,
        rule: Symbol,
    ) -> Vec<Id> {
        let (Some(bl), Some(br)) = (biased(eg, l), biased(eg, r)) else {
            return vec![];
        };
        if bl.cast != br.cast {
            return vec![];
        }
        let value = match bl.cast {
            Some(d) => try_add(eg, TensorLang::Cast([c, d])),
            None => Some(c),
        };
        let Some(lin) = value.and_then(|v| {
            let e = concat_last(eg, bl.bias, l.n, br.bias, r.n)
                .and_then(|b| bias_expand(eg, b, &l.lead, l.n + r.n))?;
            try_add(eg, TensorLang::Add([v, e]))
        }) else {
            return vec![];
        };
        let left = columns(eg, lin, &l.lead, 0, l.n);
        let right = columns(eg, lin, &l.lead, l.n, l.n + r.n);
        let mut changed = union_same_facts(eg, bl.class, left, rule);
        changed.extend(union_same_facts(eg, br.class, right, rule));
        changed
    }
}

/// A MatMul's bias add found in the e-graph: the class of `X·W + b` (or of `cast(X·W) + b`),
/// `b: [N]`, and the cast's dtype attribute class.
#[derive(Clone, Copy, Debug)]
struct Biased {
    class: Id,
    bias: Id,
    cast: Option<Id>,
}

/// The `b: [N]` of `expand(reshape(b, [1…, N]), [L…, N])` in class `e` (the lowering's
/// broadcast of a bias over the leading axes `lead`), when `b` is a graph input or a
/// concatenation this rule built (cycle filtering, as for the weights).
fn bias_of(eg: &TensorGraph, e: Id, lead: &[Dim], n: i64) -> Option<Id> {
    let want: Vec<Dim> = lead.iter().cloned().chain([Dim::int(n)]).collect();
    find(eg, e, |node| {
        let TensorLang::Expand([rs, s]) = node else {
            return None;
        };
        (shape_attr(eg, *s)? == want).then_some(())?;
        find(eg, *rs, |node| {
            let TensorLang::Reshape([b, s]) = node else {
                return None;
            };
            let s = shape_attr(eg, *s)?;
            let b_shape = &tensor(eg, *b)?.shape;
            let ones = s.len() == lead.len() + 1 && s[..lead.len()].iter().all(|d| d.is_int(1));
            (ones && s[lead.len()].is_int(n) && b_shape.len() == 1 && b_shape[0].is_int(n))
                .then_some(())?;
            leaves(eg, *b, MAX_MERGED).map(|_| eg.find(*b))
        })
    })
}

/// The bias add over MatMul `mm` (`mm + b` or `b + mm` among the parents of its class, or of
/// its cast to a narrow dtype: an fp16 MatMul's lowering), when there is one.
fn biased(eg: &TensorGraph, mm: &Matmul) -> Option<Biased> {
    let class = eg.find(mm.class);
    // The MatMul's value as the graph uses it: itself, or its casts (with the dtype attribute).
    let mut values = vec![(class, None)];
    values.extend(eg[class].parents().filter_map(|p| match eg.id_to_node(p) {
        TensorLang::Cast([x, d]) if eg.find(*x) == class => Some((eg.find(p), Some(eg.find(*d)))),
        _ => None,
    }));
    let mut found: Vec<Biased> = values
        .into_iter()
        .flat_map(|(value, cast)| {
            eg[value].parents().filter_map(move |p| {
                let TensorLang::Add([a, b]) = eg.id_to_node(p) else {
                    return None;
                };
                let (a, b) = (eg.find(*a), eg.find(*b));
                let other = match (a == value, b == value) {
                    (true, _) => b,
                    (_, true) => a,
                    _ => return None,
                };
                let bias = bias_of(eg, other, &mm.lead, mm.n)?;
                Some(Biased {
                    class: eg.find(p),
                    bias,
                    cast,
                })
            })
        })
        .collect();
    // Deterministic: the parents' order follows insertion; the smallest class wins.
    found.sort_by_key(|b| (b.class, b.bias, b.cast));
    found.first().copied()
}

/// `expand(reshape(b, [1…, n]), [L…, n])`: `b: [n]` broadcast over the leading axes.
fn bias_expand(eg: &mut TensorGraph, b: Id, lead: &[Dim], n: i64) -> Option<Id> {
    let ones: Vec<Dim> = lead
        .iter()
        .map(|_| Dim::int(1))
        .chain([Dim::int(n)])
        .collect();
    let s = shape_leaf(eg, ones);
    let rs = try_add(eg, TensorLang::Reshape([b, s]))?;
    let full: Vec<Dim> = lead.iter().cloned().chain([Dim::int(n)]).collect();
    let s = shape_leaf(eg, full);
    try_add(eg, TensorLang::Expand([rs, s]))
}

impl Applier<TensorLang, IndexBook> for MergeShared {
    /// Groups the matched MatMuls by (X, K, acc, weight dtype) and adds every left-deep merge
    /// of a group's MatMuls with one more weight (see the module doc's budget).
    fn apply_matches(
        &self,
        eg: &mut TensorGraph,
        matches: &[SearchMatches<TensorLang>],
        rule: Symbol,
    ) -> Vec<Id> {
        let mut groups: BTreeMap<GroupKey, Vec<(Matmul, Vec<Id>)>> = BTreeMap::new();
        for m in matches {
            let Some(mm) = matmul(eg, m.eclass) else {
                continue;
            };
            let Some(ls) = leaves(eg, mm.w, MAX_MERGED) else {
                continue;
            };
            let Some(wd) = tensor(eg, mm.w).map(|f| f.dtype) else {
                continue;
            };
            // One weight of a batched projection the gate refuses (it fills the GPU): not
            // merged (a merged MatMul is in the e-graph only when its parts passed).
            let refused = |g: &MergeGate| ls.len() == 1 && !g.admits(&mm);
            if mm.lead.len() > 1 && self.0.as_deref().is_some_and(refused) {
                continue;
            }
            let key = (mm.x, mm.k.to_string(), mm.acc, wd);
            groups.entry(key).or_default().push((mm, ls));
        }
        let mut changed = Vec::new();
        for members in groups.values() {
            let mut done: BTreeSet<Vec<Id>> = BTreeSet::new();
            // The group's single weights in class order: merges extend their prefixes only.
            let mut singles: Vec<Id> = members
                .iter()
                .filter_map(|(_, ls)| match ls.as_slice() {
                    [w] => Some(*w),
                    _ => None,
                })
                .collect();
            singles.sort_unstable();
            singles.dedup();
            for (l, ls) in members {
                for (r, rs) in members {
                    let [rw] = rs.as_slice() else { continue };
                    let prefix = singles.get(..ls.len()) == Some(ls.as_slice())
                        && singles.get(ls.len()) == Some(rw);
                    if ls.len() >= MAX_MERGED || !prefix {
                        continue;
                    }
                    let mut key = ls.clone();
                    key.push(*rw);
                    if done.insert(key) {
                        changed.extend(Self::merge(eg, l, r, rule));
                    }
                }
            }
        }
        changed
    }

    fn apply_one(
        &self,
        _eg: &mut TensorGraph,
        _eclass: Id,
        _subst: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        _rule: Symbol,
    ) -> Vec<Id> {
        // A merge needs two matches: everything happens in `apply_matches`.
        Vec::new()
    }
}
