//! Graph substitutions (issue 23; TASO / Tensat's algebraic rewrites): rules that change which
//! contractions a program computes, not how one is spelled, so the kernel extractor can choose a
//! cover a greedy fusion pass cannot see.
//!
//! - `matmul-merge-shared-lhs` (a multi-pattern rule over all MatMuls sharing a left operand):
//!   `X·W₁, …, X·Wₙ` with `Wᵢ: [K, Nᵢ]` are the column blocks of one MatMul with the weights
//!   concatenated along N, `X·Wᵢ = shrink(X·(W₁‖…‖Wₙ), [0, Σ_{j<i} Nⱼ], [M, Σ_{j≤i} Nⱼ])`, where
//!   `W₁‖…‖Wₙ = pad(W₁, ·) + … + pad(Wₙ, ·)` (Concat's own lowering): Q, K and V are one GEMM
//!   with N = 3·hidden, the FFN's gate and up projections likewise. Linear layers with a bias,
//!   `X·Wᵢ + bᵢ`, merge as `X·(W₁‖…‖Wₙ) + (b₁‖…‖bₙ)` (the biases concatenated along N like the
//!   weights, one bias epilogue on the merged GEMM), each layer read back as columns of that sum.
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
//!   (nodes being *present*, never absent), with `N` a constant. A batched `X: [B…, M, K]` (a
//!   Linear layer over `[B, S, K]` activations, as exported by PyTorch) is lowered the same way
//!   with the batch axes in front: `reduce(sum, [r], …)` over `[B…, M, N, K]` and the weight
//!   broadcast through `reshape(permute(…), [1…, 1, N, K])`; the merged MatMul and its column
//!   `shrink`s keep those axes.
//! - Exactness: column `n < N₁` of the merged product sums `X[m,k]·(W₁[k,n] + 0)` over the same
//!   `k` in the same order as the original: `w + 0 = w` for every value but `-0`, which becomes
//!   `+0`; the sign of a zero is not part of a value (as in the epilogue rules), so the rule is
//!   exact and tested with `Compare::BitExact` on random inputs.
//! - Cycle filtering (Tensat): merged weights must be graph inputs, so no merged MatMul depends
//!   on a class it is unioned with; an e-class cannot end up reading itself.
//! - Budget: a merge group (same `X`, `K`, accumulator and weight dtype, biased or not) is cut
//!   into chunks of at most [`MAX_MERGED`] weights (in weight-class order), and every subset of
//!   two or more weights of a chunk is one merged MatMul built directly from its weights (no
//!   merge of merges): n ≤ 4 siblings give 2ⁿ − n − 1 merged MatMuls (Q/K/V: Q‖K‖V and the
//!   three pairs — the pairs stay, since Q‖K with V apart can be the cheaper cover), and the
//!   phase saturates after one application.
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
use std::collections::BTreeMap;

#[path = "subst_pool.rs"]
mod pool;

/// Names of the substitution rules, in [`rules`] order.
pub const RULE_NAMES: [&str; 2] = ["matmul-merge-shared-lhs", "matmul-absorb-sum-pool"];

/// The substitutions that reassociate floating-point arithmetic (exact for real numbers, not
/// bit for bit): run only under `--fast-math` ([`rules_with`]), like srnf's hoists.
pub const FAST_MATH_RULES: [&str; 1] = ["matmul-absorb-sum-pool"];

/// Most weights one merged MatMul concatenates (Q, K, V and one more); a larger group of
/// siblings is merged in chunks of this many.
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

/// One phase of the pipeline's schedule ([`schedule`]).
pub struct Scheduled {
    /// The phase's name (a phase of the second round repeats its first-round name).
    pub name: String,
    /// Its rules.
    pub rules: Vec<Rule>,
    /// True for the second round (after "subst"): its node budget counts only the e-nodes it
    /// adds, on top of the first round's e-graph.
    pub second_round: bool,
}

/// The order the pipeline runs `phases` in (`phases` as `OptimizeOptions::rewrite_phases`
/// lists them, "subst" first and the kernels phase last): first every phase but "subst" —
/// exactly the pipeline of `--no-subst` — then, with `substitutions`, "subst" and every phase
/// after it once more (`second_round`).
///
/// Why two rounds (issue 23): the substitutions only add e-nodes, but the phases after them are
/// not monotone in the e-graph — kernel growth absorbs each input class's *first* legal
/// spelling and stops at classes read outside the body, so a merged GEMM's column views in
/// the Q/K/V classes changed which kernels growth built far from the merge (bert2: the mask
/// chain split in five, the embedding LayerNorm recomputed; 42 kernels against 32, the
/// 32-kernel cover gone from the e-graph). Running the substitutions after a complete first
/// round keeps every kernel of the `--no-subst` e-graph (e-nodes are never removed), so the
/// `--no-subst` cover stays extractable and the second round only adds options. The pipeline
/// skips the rest of the second round when "subst" applied nothing (the e-graph is unchanged).
pub fn schedule(phases: Vec<(String, Vec<Rule>)>, substitutions: bool) -> Vec<Scheduled> {
    let first = phases
        .iter()
        .filter(|(n, _)| n != "subst")
        .map(|(n, r)| Scheduled {
            name: n.clone(),
            rules: r.clone(),
            second_round: false,
        });
    let mut out: Vec<Scheduled> = first.collect();
    if substitutions {
        let at = phases.iter().position(|(n, _)| n == "subst").unwrap_or(0);
        out.extend(phases.into_iter().skip(at).map(|(name, rules)| Scheduled {
            name,
            rules,
            second_round: true,
        }));
    }
    out
}

/// A lowered MatMul found in the e-graph.
#[derive(Clone, Debug, PartialEq)]
struct Matmul {
    /// Its e-class (`[M, N]`, dtype `acc`).
    class: Id,
    x: Id,
    w: Id,
    /// `X`'s shape less its last axis: `[M]`, or `[B…, M]` for a batched `X` (a Linear layer
    /// over `[B, S, K]` activations).
    rows: Vec<Dim>,
    k: Dim,
    n: i64,
    acc: DType,
    /// The bias `b: [N]` added after the product (a Linear layer's epilogue): `class` is then
    /// the sum's class, `X·W + b`.
    bias: Option<Id>,
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

/// The `X: [B…, M, K]` of the A operand `expand(reshape(X, [B…, M, 1, K]), [B…, M, N, K])`
/// (rank 2 or more; `[M, K]` for a plain MatMul).
pub(super) fn lhs(eg: &TensorGraph, a: Id) -> Option<Id> {
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

/// The weight `W: [K, N]` read by the B operand `expand(permute(reshape(W, [1, K, N]), [0,2,1]))`,
/// or with `batch` leading batch axes `expand(reshape(permute(…), [1…, 1, N, K]))` (the
/// lowering's broadcast of the weight over `X`'s batch axes).
fn rhs(eg: &TensorGraph, b: Id, batch: usize) -> Option<Id> {
    let mut p = find(eg, b, |n| match n {
        TensorLang::Expand([p, _]) => Some(*p),
        _ => None,
    })?;
    if batch > 0 {
        p = find(eg, p, |n| match n {
            TensorLang::Reshape([q, s]) => {
                let qs = &tensor(eg, *q)?.shape;
                let s = shape_attr(eg, *s)?;
                (qs.len() == 3
                    && s.len() == batch + 3
                    && s[..batch].iter().all(|d| d.is_int(1))
                    && s[batch..] == qs[..])
                    .then_some(*q)
            }
            _ => None,
        })?;
    }
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
        let xs = &tensor(eg, x)?.shape;
        let (rows, k) = xs.split_at(xs.len() - 1);
        let w = rhs(eg, uncast(eg, b, acc)?, rows.len() - 1)?;
        let ws = &tensor(eg, w)?.shape;
        (k[0] == ws[0]).then_some(())?;
        Some(Matmul {
            class,
            x: eg.find(x),
            w: eg.find(w),
            rows: rows.to_vec(),
            k: k[0].clone(),
            n: ws[1].as_int()?,
            acc,
            bias: None,
        })
    })
}

/// The lowered MatMul with a bias epilogue computed by `class`: `add(P, B)` (either order) with
/// `P` a lowered MatMul's class and `B = expand(reshape(b, [1…, N]), [B…, M, N])` the
/// lowering's broadcast of a bias `b: [N]` in the accumulator dtype.
fn biased(eg: &TensorGraph, class: Id) -> Option<Matmul> {
    let class = eg.find(class);
    find(eg, class, |n| {
        let TensorLang::Add([a, b]) = n else {
            return None;
        };
        [(*a, *b), (*b, *a)].into_iter().find_map(|(p, c)| {
            let mm = matmul(eg, p)?;
            let bias = bias_vector(eg, c, &mm)?;
            Some(Matmul {
                class,
                bias: Some(bias),
                ..mm
            })
        })
    })
}

/// The `b: [N]` broadcast by `expand(reshape(b, [1…, N]), [B…, M, N])` in class `c`, for the
/// MatMul `mm` (`N` and dtype `acc` match).
fn bias_vector(eg: &TensorGraph, c: Id, mm: &Matmul) -> Option<Id> {
    let r = find(eg, c, |n| match n {
        TensorLang::Expand([r, _]) => Some(*r),
        _ => None,
    })?;
    find(eg, r, |n| match n {
        TensorLang::Reshape([b, s]) => {
            let f = tensor(eg, *b)?;
            let s = shape_attr(eg, *s)?;
            let rows = mm.rows.len();
            (f.dtype == mm.acc
                && f.shape.len() == 1
                && f.shape[0].is_int(mm.n)
                && s.len() == rows + 1
                && s[..rows].iter().all(|d| d.is_int(1))
                && s[rows].is_int(mm.n))
            .then(|| eg.find(*b))
        }
        _ => None,
    })
}

/// The first `f(acc, a, b)` accepted over the lowered MatMuls of `class`:
/// `reduce(sum, [r], acc, a · b)` with `a, b: [B…, M, N, K]` of rank `r + 1` (the last axis
/// summed; `r = 2` for a plain MatMul).
pub(super) fn lowered_products<T>(
    eg: &TensorGraph,
    class: Id,
    f: impl Fn(DType, Id, Id) -> Option<T>,
) -> Option<T> {
    find(eg, class, |n| {
        let TensorLang::Reduce([op, axes, acc, body]) = n else {
            return None;
        };
        let rank = tensor(eg, *body)?.shape.len();
        if attr(eg, *op) != Some(&Attr::Op(ReduceOp::Sum))
            || rank < 3
            || ints(eg, *axes) != Some(vec![rank - 1])
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
        let found = matmul(egraph, eclass).is_some() || biased(egraph, eclass).is_some();
        (limit > 0 && found).then(|| SearchMatches {
            eclass,
            substs: vec![Subst::default()],
            ast: None,
        })
    }

    fn vars(&self) -> Vec<Var> {
        vec![]
    }
}

/// The weights a MatMul's `W` concatenates: `W` itself for a graph input, else the parts of a
/// concatenation this rule built (`pad(W₁, ·) + pad(W₂, ·) + …`, left-deep, read back from the
/// e-graph; at least two parts).
fn leaves(eg: &TensorGraph, w: Id, depth: usize) -> Option<Vec<Id>> {
    let w = eg.find(w);
    if is_input(eg, w) {
        return Some(vec![w]);
    }
    concat_parts(eg, w, depth).filter(|ws| ws.len() >= 2)
}

fn is_input(eg: &TensorGraph, c: Id) -> bool {
    eg[eg.find(c)]
        .nodes
        .iter()
        .any(|n| matches!(n, TensorLang::Input(_)))
}

/// The graph inputs of `pad(W₁, ·) + … + pad(Wₙ, ·)` (left-deep, at most `depth` adds), or of a
/// single `pad(W, ·)`.
fn concat_parts(eg: &TensorGraph, c: Id, depth: usize) -> Option<Vec<Id>> {
    let padded = |c: Id| {
        find(eg, c, |p| match p {
            TensorLang::Pad([x, _, _]) if is_input(eg, *x) => Some(vec![eg.find(*x)]),
            _ => None,
        })
    };
    padded(c).or_else(|| {
        (depth > 0).then_some(())?;
        find(eg, c, |n| {
            let TensorLang::Add([l, r]) = n else {
                return None;
            };
            let mut out = concat_parts(eg, *l, depth - 1)?;
            out.extend(padded(*r)?);
            Some(out)
        })
    })
}

/// For `--explain`: the substitution that produced class `class`'s value, when it is a merged
/// MatMul (`matmul-merge-shared-lhs`, naming the concatenated weights).
pub fn explain(eg: &TensorGraph, class: Id) -> Option<String> {
    let mm = matmul(eg, class).or_else(|| biased(eg, class))?;
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
         operand, weights {} concatenated along N ({} columns){}",
        names.join(", "),
        mm.n,
        if mm.bias.is_some() {
            ", their biases likewise (one bias epilogue)"
        } else {
            ""
        }
    ))
}

/// `P₁‖…‖Pₙ` along the last axis of `[K, ·]` weights or `[·]` biases (`parts`: each tensor
/// and its width): `pad(P₁, [(0,0)…, (0, N−N₁)], 0) + pad(P₂, [(0,0)…, (N₁, N−N₁−N₂)], 0) + …`,
/// left-deep.
fn concat_last(eg: &mut TensorGraph, parts: &[(Id, i64)]) -> Option<Id> {
    let rank = tensor(eg, parts.first()?.0)?.shape.len();
    let total: i64 = parts.iter().map(|(_, n)| n).sum();
    let zero = leaf(eg, Attr::num(0.0));
    let (mut lo, mut sum) = (0, None);
    for (x, n) in parts {
        let pads = vec![(0, 0); rank - 1]
            .into_iter()
            .chain([(lo, total - lo - n)])
            .collect();
        let pads = leaf(eg, Attr::Pads(pads));
        let p = try_add(eg, TensorLang::Pad([*x, pads, zero]))?;
        sum = Some(match sum {
            None => p,
            Some(s) => try_add(eg, TensorLang::Add([s, p]))?,
        });
        lo += n;
    }
    sum
}

/// `c + expand(reshape(b, [1…, N]), [B…, M, N])`: the bias epilogue as the lowering spells it.
fn add_bias(eg: &mut TensorGraph, c: Id, b: Id, rows: &[Dim], n: i64) -> Option<Id> {
    let s = shape_leaf(eg, joined(&vec![Dim::int(1); rows.len()], &[Dim::int(n)]));
    let br = try_add(eg, TensorLang::Reshape([b, s]))?;
    let full = shape_leaf(eg, joined(rows, &[Dim::int(n)]));
    let be = try_add(eg, TensorLang::Expand([br, full]))?;
    try_add(eg, TensorLang::Add([c, be]))
}

fn shape_leaf(eg: &mut TensorGraph, dims: Vec<Dim>) -> Id {
    leaf(eg, Attr::Shape(dims.into()))
}

/// `cast(x, acc)` unless `x` already has dtype `acc`.
fn to_acc(eg: &mut TensorGraph, x: Id, acc: DType) -> Option<Id> {
    super::helpers::cast_to(eg, x, acc)
}

/// `rows` followed by `tail`.
fn joined(rows: &[Dim], tail: &[Dim]) -> Vec<Dim> {
    rows.iter().chain(tail).cloned().collect()
}

/// The lowered MatMul `X·W` with `W: [K, n]` (the shape [`matmul`] reads, batched like `X`).
fn build_matmul(eg: &mut TensorGraph, mm: &Matmul, w: Id, n: i64) -> Option<Id> {
    let (rows, k, nn) = (&mm.rows, mm.k.clone(), Dim::int(n));
    let s = shape_leaf(eg, joined(rows, &[Dim::int(1), k.clone()]));
    let xr = try_add(eg, TensorLang::Reshape([mm.x, s]))?;
    let full = shape_leaf(eg, joined(rows, &[nn.clone(), k.clone()]));
    let xe = try_add(eg, TensorLang::Expand([xr, full]))?;
    let a = to_acc(eg, xe, mm.acc)?;
    let s = shape_leaf(eg, vec![Dim::int(1), k.clone(), nn.clone()]);
    let wr = try_add(eg, TensorLang::Reshape([w, s]))?;
    let perm = leaf(eg, Attr::Ints(vec![0, 2, 1]));
    let mut wp = try_add(eg, TensorLang::Permute([wr, perm]))?;
    let batch = rows.len() - 1;
    if batch > 0 {
        let ones = vec![Dim::int(1); batch + 1];
        let s = shape_leaf(eg, joined(&ones, &[nn, k]));
        wp = try_add(eg, TensorLang::Reshape([wp, s]))?;
    }
    let we = try_add(eg, TensorLang::Expand([wp, full]))?;
    let b = to_acc(eg, we, mm.acc)?;
    let prod = try_add(eg, TensorLang::Mul([a, b]))?;
    let op = leaf(eg, Attr::Op(ReduceOp::Sum));
    // `[B…, M, N, K]`: K is axis `rows.len() + 1` (axis 2 for a plain MatMul).
    let axes = leaf(eg, Attr::Ints(vec![rows.len() as i64 + 1]));
    let acc = leaf(eg, Attr::DType(mm.acc));
    try_add(eg, TensorLang::Reduce([op, axes, acc, prod]))
}

/// `shrink(c, [0…, 0, lo], [B…, M, hi])`: columns `lo..hi` of every row.
fn columns(eg: &mut TensorGraph, c: Id, rows: &[Dim], lo: i64, hi: i64) -> TensorLang {
    let l = shape_leaf(eg, joined(&vec![Dim::int(0); rows.len()], &[Dim::int(lo)]));
    let h = shape_leaf(eg, joined(rows, &[Dim::int(hi)]));
    let st = leaf(eg, Attr::Ints(vec![1; rows.len() + 1]));
    TensorLang::Shrink([c, l, h, st])
}

struct MergeShared;

/// MatMuls that can merge: same `X`, `K`, accumulator and weight dtype, both with a bias or
/// both without.
type GroupKey = (Id, String, DType, DType, bool);

impl MergeShared {
    /// Merges the one-weight MatMuls `parts` into one, `X·(W₁‖…‖Wₙ)` — with biases, plus
    /// `(b₁‖…‖bₙ)` as the merged GEMM's epilogue — and unions each part's class with its
    /// columns of the merged class.
    fn merge(eg: &mut TensorGraph, parts: &[&Matmul], rule: Symbol) -> Vec<Id> {
        let Some(c) = Self::merged(eg, parts) else {
            return vec![];
        };
        let mut changed = Vec::new();
        let mut lo = 0;
        for p in parts {
            let cols = columns(eg, c, &p.rows, lo, lo + p.n);
            changed.extend(union_same_facts(eg, p.class, cols, rule));
            lo += p.n;
        }
        changed
    }

    /// `X·(W₁‖…‖Wₙ)`, plus `(b₁‖…‖bₙ)` broadcast over the rows when the parts carry biases
    /// (a merge group's parts all do or all do not).
    fn merged(eg: &mut TensorGraph, parts: &[&Matmul]) -> Option<Id> {
        let first = parts.first()?;
        let ws: Vec<(Id, i64)> = parts.iter().map(|p| (p.w, p.n)).collect();
        let n: i64 = ws.iter().map(|(_, n)| n).sum();
        let wc = concat_last(eg, &ws)?;
        let c = build_matmul(eg, first, wc, n)?;
        if first.bias.is_none() {
            return Some(c);
        }
        let bs: Vec<(Id, i64)> = parts
            .iter()
            .map(|p| Some((p.bias?, p.n)))
            .collect::<Option<_>>()?;
        let bc = concat_last(eg, &bs)?;
        add_bias(eg, c, bc, &first.rows, n)
    }

    /// The matched MatMul of `class` (plain or biased) when it can be a part of a merge: its
    /// weight (and bias) a graph input, not a concatenation (cycle filtering).
    fn member(eg: &TensorGraph, mm: Matmul) -> Option<(GroupKey, Matmul)> {
        if !is_input(eg, mm.w) || mm.bias.is_some_and(|b| !is_input(eg, b)) {
            return None;
        }
        let wd = tensor(eg, mm.w)?.dtype;
        let key = (mm.x, mm.k.to_string(), mm.acc, wd, mm.bias.is_some());
        Some((key, mm))
    }
}

impl Applier<TensorLang, IndexBook> for MergeShared {
    /// Groups the matched MatMuls by (X, K, acc, weight dtype, biased) and merges every subset
    /// of each chunk of at most [`MAX_MERGED`] weights into one MatMul (see the module doc).
    fn apply_matches(
        &self,
        eg: &mut TensorGraph,
        matches: &[SearchMatches<TensorLang>],
        rule: Symbol,
    ) -> Vec<Id> {
        let mut groups: BTreeMap<GroupKey, Vec<Matmul>> = BTreeMap::new();
        for m in matches {
            let found = [matmul(eg, m.eclass), biased(eg, m.eclass)];
            for (key, mm) in found
                .into_iter()
                .flatten()
                .filter_map(|mm| Self::member(eg, mm))
            {
                groups.entry(key).or_default().push(mm);
            }
        }
        let mut changed = Vec::new();
        for members in groups.values_mut() {
            // One part per weight, in weight order: the same merge on every application.
            members.sort_by_key(|m| m.w);
            members.dedup_by_key(|m| m.w);
            for chunk in members.chunks(MAX_MERGED) {
                // Every subset of two or more, each built directly from its weights.
                for mask in 1u32..(1 << chunk.len()) {
                    let parts: Vec<&Matmul> = (0..chunk.len())
                        .filter(|i| mask & (1 << i) != 0)
                        .map(|i| &chunk[i])
                        .collect();
                    if parts.len() >= 2 {
                        changed.extend(Self::merge(eg, &parts, rule));
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
