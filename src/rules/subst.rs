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
//!   FFN's gate and up projections likewise).
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
//!   (`src/ir/lower/contraction.rs`); the searcher reads exactly this shape from the e-graph
//!   (nodes being *present*, never absent), with `N` a constant.
//! - Exactness: column `n < N₁` of the merged product sums `X[m,k]·(W₁[k,n] + 0)` over the same
//!   `k` in the same order as the original: `w + 0 = w` for every value but `-0`, which becomes
//!   `+0`; the sign of a zero is not part of a value (as in the epilogue rules), so the rule is
//!   exact and tested with `Compare::BitExact` on random inputs.
//! - Cycle filtering (Tensat): merged weights must be graph inputs, so no merged MatMul depends
//!   on a class it is unioned with; an e-class cannot end up reading itself.
//! - Budget: a merge group (same `X`, `K`, accumulator and weight dtype) gives only left-deep
//!   merges whose right part is one weight with a larger class id than every weight on the left
//!   — every subset once, in one spelling — of at most [`MAX_MERGED`] weights: n siblings give
//!   at most 2ⁿ − n − 1 merged MatMuls (Q/K/V: 4), and the phase saturates once every subset
//!   exists.
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

#[path = "subst_pool.rs"]
mod pool;

/// Names of the substitution rules, in [`rules`] order.
pub const RULE_NAMES: [&str; 2] = ["matmul-merge-shared-lhs", "matmul-absorb-sum-pool"];

/// The substitutions that reassociate floating-point arithmetic (exact for real numbers, not
/// bit for bit): run only under `--fast-math` ([`rules_with`]), like srnf's hoists.
pub const FAST_MATH_RULES: [&str; 1] = ["matmul-absorb-sum-pool"];

/// Most weights one merged MatMul concatenates (Q, K, V and one more).
pub const MAX_MERGED: usize = 4;

/// The substitution rule set, [`FAST_MATH_RULES`] included (phase "subst" under `--fast-math`).
pub fn rules() -> Vec<Rule> {
    vec![
        // X·W₁, X·W₂ ⇒ shrink(X·(W₁‖W₂), columns of each): MatMuls sharing X merged along N.
        Rewrite::new("matmul-merge-shared-lhs", Matmuls, MergeShared).expect("static rule"),
        // (Σ_r Y[m,k,r] / c)·W ⇒ (Σ_(k,r) Y[m,k,r]·W[k,n]) / c: a pool's sum joins the MatMul's.
        Rewrite::new(
            "matmul-absorb-sum-pool",
            pool::PooledMatmuls,
            pool::AbsorbPool,
        )
        .expect("static rule"),
    ]
}

/// The substitutions of phase "subst" (first in `crate::rules::all_phases_with`): without
/// `fast_math`, [`rules`] less [`FAST_MATH_RULES`].
pub fn rules_with(fast_math: bool) -> Vec<Rule> {
    rules()
        .into_iter()
        .filter(|r| fast_math || !FAST_MATH_RULES.contains(&r.name.as_str()))
        .collect()
}

/// A lowered MatMul found in the e-graph.
#[derive(Clone, Debug, PartialEq)]
struct Matmul {
    /// Its e-class (`[M, N]`, dtype `acc`).
    class: Id,
    x: Id,
    w: Id,
    m: Dim,
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
    let r = find(eg, a, |n| match n {
        TensorLang::Expand([r, _]) => Some(*r),
        _ => None,
    })?;
    find(eg, r, |n| match n {
        TensorLang::Reshape([x, s]) => {
            let xs = &tensor(eg, *x)?.shape;
            let s = shape_attr(eg, *s)?;
            (xs.len() == 2 && s.len() == 3 && s[0] == xs[0] && s[1].is_int(1) && s[2] == xs[1])
                .then_some(*x)
        }
        _ => None,
    })
}

/// The weight `W: [K, N]` read by the B operand `expand(permute(reshape(W, [1, K, N]), [0,2,1]))`.
fn rhs(eg: &TensorGraph, b: Id) -> Option<Id> {
    let p = find(eg, b, |n| match n {
        TensorLang::Expand([p, _]) => Some(*p),
        _ => None,
    })?;
    let r = find(eg, p, |n| match n {
        TensorLang::Permute([r, perm]) if ints(eg, *perm) == Some(vec![0, 2, 1]) => Some(*r),
        _ => None,
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
        let x = lhs(eg, uncast(eg, a, acc)?)?;
        let w = rhs(eg, uncast(eg, b, acc)?)?;
        let xs = &tensor(eg, x)?.shape;
        let ws = &tensor(eg, w)?.shape;
        (xs[1] == ws[0]).then_some(())?;
        Some(Matmul {
            class,
            x: eg.find(x),
            w: eg.find(w),
            m: xs[0].clone(),
            k: xs[1].clone(),
            n: ws[1].as_int()?,
            acc,
        })
    })
}

/// The first `f(acc, a, b)` accepted over the lowered MatMuls of `class`:
/// `reduce(sum, [2], acc, a · b)` with `a: [M, N, K]` and `b: [M, N, K]`.
pub(super) fn lowered_products<T>(
    eg: &TensorGraph,
    class: Id,
    f: impl Fn(DType, Id, Id) -> Option<T>,
) -> Option<T> {
    find(eg, class, |n| {
        let TensorLang::Reduce([op, axes, acc, body]) = n else {
            return None;
        };
        if attr(eg, *op) != Some(&Attr::Op(ReduceOp::Sum)) || ints(eg, *axes) != Some(vec![2]) {
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
/// MatMul (`matmul-merge-shared-lhs`, naming the concatenated weights).
pub fn explain(eg: &TensorGraph, class: Id) -> Option<String> {
    let mm = matmul(eg, class)?;
    let ws = leaves(eg, mm.w, MAX_MERGED)?;
    if ws.len() < 2 {
        return None;
    }
    let names: Vec<String> = ws
        .iter()
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
        .collect();
    Some(format!(
        "substitution matmul-merge-shared-lhs: one GEMM for the MatMuls sharing their left \
         operand, weights {} concatenated along N ({} columns)",
        names.join(", "),
        mm.n
    ))
}

/// `W₁‖W₂` along axis 1: `pad(W₁, [(0,0),(0,N₂)], 0) + pad(W₂, [(0,0),(N₁,0)], 0)`.
fn concat_cols(eg: &mut TensorGraph, l: Id, nl: i64, r: Id, nr: i64) -> Option<Id> {
    let zero = leaf(eg, Attr::num(0.0));
    let pl = leaf(eg, Attr::Pads(vec![(0, 0), (0, nr)]));
    let pr = leaf(eg, Attr::Pads(vec![(0, 0), (nl, 0)]));
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
    let (m, k, nn) = (mm.m.clone(), mm.k.clone(), Dim::int(n));
    let s = shape_leaf(eg, vec![m.clone(), Dim::int(1), k.clone()]);
    let xr = try_add(eg, TensorLang::Reshape([mm.x, s]))?;
    let full = shape_leaf(eg, vec![m, nn.clone(), k.clone()]);
    let xe = try_add(eg, TensorLang::Expand([xr, full]))?;
    let a = to_acc(eg, xe, mm.acc)?;
    let s = shape_leaf(eg, vec![Dim::int(1), k, nn]);
    let wr = try_add(eg, TensorLang::Reshape([w, s]))?;
    let perm = leaf(eg, Attr::Ints(vec![0, 2, 1]));
    let wp = try_add(eg, TensorLang::Permute([wr, perm]))?;
    let we = try_add(eg, TensorLang::Expand([wp, full]))?;
    let b = to_acc(eg, we, mm.acc)?;
    let prod = try_add(eg, TensorLang::Mul([a, b]))?;
    let op = leaf(eg, Attr::Op(ReduceOp::Sum));
    let axes = leaf(eg, Attr::Ints(vec![2]));
    let acc = leaf(eg, Attr::DType(mm.acc));
    try_add(eg, TensorLang::Reduce([op, axes, acc, prod]))
}

/// `shrink(c, [0, lo], [M, hi])`.
fn columns(eg: &mut TensorGraph, c: Id, m: &Dim, lo: i64, hi: i64) -> TensorLang {
    let l = shape_leaf(eg, vec![Dim::int(0), Dim::int(lo)]);
    let h = shape_leaf(eg, vec![m.clone(), Dim::int(hi)]);
    let st = leaf(eg, Attr::Ints(vec![1, 1]));
    TensorLang::Shrink([c, l, h, st])
}

struct MergeShared;

/// MatMuls that can merge: same `X`, `K`, accumulator and weight dtype.
type GroupKey = (Id, String, DType, DType);

impl MergeShared {
    /// Merges `l` (one weight or a merge of several) with the one-weight MatMul `r`.
    fn merge(eg: &mut TensorGraph, l: &Matmul, r: &Matmul, rule: Symbol) -> Vec<Id> {
        let Some(wc) = concat_cols(eg, l.w, l.n, r.w, r.n) else {
            return vec![];
        };
        let Some(c) = build_matmul(eg, l, wc, l.n + r.n) else {
            return vec![];
        };
        let left = columns(eg, c, &l.m, 0, l.n);
        let right = columns(eg, c, &l.m, l.n, l.n + r.n);
        let mut changed = union_same_facts(eg, l.class, left, rule);
        changed.extend(union_same_facts(eg, r.class, right, rule));
        changed
    }
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
            let key = (mm.x, mm.k.to_string(), mm.acc, wd);
            groups.entry(key).or_default().push((mm, ls));
        }
        let mut changed = Vec::new();
        for members in groups.values() {
            let mut done: BTreeSet<Vec<Id>> = BTreeSet::new();
            for (l, ls) in members {
                for (r, rs) in members {
                    let [rw] = rs.as_slice() else { continue };
                    let max_l = ls.iter().max().copied();
                    if ls.len() >= MAX_MERGED || max_l.is_some_and(|x| x >= *rw) {
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
