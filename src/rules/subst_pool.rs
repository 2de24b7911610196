//! `matmul-absorb-sum-pool` (issue 23): a MatMul whose left operand is a sum (or mean) pool over
//! trailing axes — a global average pool followed by a classifier — becomes ONE reduction over
//! the channels and the pooled axes together:
//!
//! `Σ_k (Σ_r Y[m,k,r] / c)·W[k,n] = (Σ_(k,r) Y[m,k,r]·W[k,n]) / c`   (`/ c` optional, `c` an
//! immediate; the FC is linear, so the pool's sum joins its contraction: `K' = K·R`).
//!
//! Why: the pooled row is a reduction the FC reads at every `(m, n)`: as one kernel it is a
//! reduction inside a reduction (illegal), so the pool is its own kernel. The merged form is one
//! contraction (a GEMM/GEMV with `K' = C·H·W`); the DAG-aware extractor prices both covers and
//! keeps the pool kernel when the merged contraction is dearer (it recomputes `W[k,n]·Y` `R`
//! times per output; it pays on small pools and tiny classifiers, not on ResNet's 7×7×512 →
//! 1000 with today's templates: see `bench/results/covers-2026-11-26-4.md`). A pooled tensor
//! with another consumer keeps its pool kernel for that consumer: the extractor prices the
//! extra work in the DAG cost, so the rule needs no consumer check.
//!
//! Assumptions:
//! - The MatMul is the lowered form [`super`] reads (`reduce(sum, [2], acc, mul(A, B))`);
//!   its left operand `X: [M, K]` is, up to reshapes between equal shapes (row-major relabels
//!   of the same `[M, K]` data: the pool's keepdim reshape and the Flatten), `P / c` or `P`,
//!   with `P = reduce(sum, [2, …, r-1], acc, Y)`, `Y: [M, K, R₁, …]`.
//! - One dtype throughout: `Y`, `P`, `X` and both accumulators are `acc` (no cast is moved
//!   across a rounding; fp16 models do not match — a TODO(issue 23) with a test of its own).
//! - Every pooled extent is provably `≥ 1` (`Dim::is_positive`); `c` is a finite, non-zero
//!   immediate.
//! - Exactness: this distributes `W[k,n]·` over the pool's sum and moves the scale out of the
//!   contraction: exact in real arithmetic, reassociated in floating point (rounding differs;
//!   with `W = inf` and terms `1, -1`, `inf·0 = NaN` against `inf - inf = NaN`, but an overflow
//!   of `W·Y` the pooled form avoids is not): the inverse of `reduce-hoist-invariant-mul`, so it
//!   is a fast-math rule ([`super::FAST_MATH_RULES`], `optimize --fast-math` only), tested
//!   with `Compare::Close`.
//! - Budget: one application per MatMul class (the merged reduction is not a MatMul of the
//!   lowered form, so it never matches again); the phase saturates in one iteration.

use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::egraph::{Attr, IndexBook, TensorGraph, TensorLang};
use crate::ir::tiny::ReduceOp;
use crate::rules::helpers::{dtype_attr, ints, leaf, num, try_add, union_same_facts};
use crate::rules::subst::{find, lhs, lowered_products};
use crate::rules::{attr, tensor};
use egg::{Applier, Id, PatternAst, SearchMatches, Searcher, Subst, Symbol, Var};

/// How the pool's sum is scaled before the MatMul reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scale {
    /// A sum pool.
    None,
    /// `P / c` (a mean pool: `c` is the pooled extent).
    Div(Id),
}

/// A MatMul over a pooled left operand, as the rule reads it.
#[derive(Clone, Debug)]
struct PooledMatmul {
    /// The MatMul's class (`[M, N]`).
    class: Id,
    /// The pooled tensor `Y: [M, K, R…]`.
    y: Id,
    /// The MatMul's B operand (`[M, N, K]`, `W[k, n]` broadcast over `m`).
    b: Id,
    /// The scale between the pool and the MatMul.
    scale: Scale,
    /// `M`, `N`, `K`.
    m: Dim,
    n: Dim,
    k: Dim,
    /// The pooled extents `R…`.
    r: Vec<Dim>,
    acc: DType,
}

fn dtype(eg: &TensorGraph, c: Id) -> Option<DType> {
    tensor(eg, c).map(|f| f.dtype)
}

/// `P = reduce(sum, [2, …], acc, Y)` in class `p`: `(Y, R…)` when `Y: [M, K, R…]`.
fn sum_pool(eg: &TensorGraph, p: Id, acc: DType) -> Option<(Id, Vec<Dim>)> {
    find(eg, p, |n| {
        let TensorLang::Reduce([op, axes, a, y]) = n else {
            return None;
        };
        let ys = &tensor(eg, *y)?.shape;
        let want: Vec<usize> = (2..ys.len()).collect();
        let ok = attr(eg, *op) == Some(&Attr::Op(ReduceOp::Sum))
            && ys.len() >= 3
            && ints(eg, *axes)? == want
            && dtype_attr(eg, *a)? == acc
            && dtype(eg, *y)? == acc
            && ys[2..].iter().all(Dim::is_positive);
        ok.then(|| (*y, ys[2..].to_vec()))
    })
}

/// The pool behind the MatMul's left operand `x` (shape `shape`): reshapes between equal
/// shapes are followed (at most `depth`), then an optional scale by an immediate.
fn pooled(
    eg: &TensorGraph,
    x: Id,
    shape: &[Dim],
    acc: DType,
    depth: usize,
) -> Option<(Id, Vec<Dim>, Scale)> {
    let same = |c: Id| tensor(eg, c).is_some_and(|f| f.shape.as_slice() == shape && f.dtype == acc);
    let x = eg.find(x);
    if !same(x) {
        return None;
    }
    if let Some((y, r)) = sum_pool(eg, x, acc) {
        return Some((y, r, Scale::None));
    }
    let scaled = find(eg, x, |n| match n {
        TensorLang::Fdiv([p, c]) if num(eg, *c).is_some_and(|v| v.is_finite() && v != 0.0) => {
            let (y, r) = sum_pool(eg, *p, acc)?;
            Some((y, r, Scale::Div(*c)))
        }
        _ => None,
    });
    if scaled.is_some() || depth == 0 {
        return scaled;
    }
    // A reshape between two tensors of the same shape (through a `[M, K, 1, 1]` view).
    let inner: Vec<Id> = eg[x]
        .nodes
        .iter()
        .filter_map(|n| match n {
            TensorLang::Reshape([v, _]) => Some(*v),
            _ => None,
        })
        .collect();
    inner.into_iter().find_map(|v| {
        let vs = tensor(eg, v)?.shape.clone();
        if vs.as_slice() == shape {
            return pooled(eg, v, shape, acc, depth - 1);
        }
        // One step through a view of another shape and back: `reshape(reshape(p, s), [M, K])`.
        find(eg, v, |n| match n {
            TensorLang::Reshape([w, _]) => pooled(eg, *w, shape, acc, depth.saturating_sub(2)),
            _ => None,
        })
    })
}

/// The pooled MatMul computed by `class`, if any.
fn pooled_matmul(eg: &TensorGraph, class: Id) -> Option<PooledMatmul> {
    let class = eg.find(class);
    lowered_products(eg, class, |acc, a, b| {
        let bs = &tensor(eg, b)?.shape;
        if bs.len() != 3 || dtype(eg, a)? != acc || dtype(eg, b)? != acc {
            return None;
        }
        let x = lhs(eg, a)?;
        let xs = tensor(eg, x)?.shape.clone();
        let (y, r, scale) = pooled(eg, x, &xs, acc, 4)?;
        Some(PooledMatmul {
            class,
            y: eg.find(y),
            b: eg.find(b),
            scale,
            m: bs[0].clone(),
            n: bs[1].clone(),
            k: bs[2].clone(),
            r,
            acc,
        })
    })
}

/// Matches every e-class holding a MatMul over a pooled left operand.
pub(super) struct PooledMatmuls;

impl Searcher<TensorLang, IndexBook> for PooledMatmuls {
    fn search_eclass_with_limit(
        &self,
        egraph: &TensorGraph,
        eclass: Id,
        limit: usize,
    ) -> Option<SearchMatches<'_, TensorLang>> {
        (limit > 0 && pooled_matmul(egraph, eclass).is_some()).then(|| SearchMatches {
            eclass,
            substs: vec![Subst::default()],
            ast: None,
        })
    }

    fn vars(&self) -> Vec<Var> {
        vec![]
    }
}

/// Builds `(Σ_(k,r) Y[m,k,r]·B[m,n,k]) / c` and unions it with the MatMul's class.
pub(super) struct AbsorbPool;

impl AbsorbPool {
    fn build(eg: &mut TensorGraph, p: &PooledMatmul) -> Option<TensorLang> {
        let ones = vec![Dim::int(1); p.r.len()];
        let mut full = vec![p.m.clone(), p.n.clone(), p.k.clone()];
        full.extend(p.r.iter().cloned());
        let mut ys = vec![p.m.clone(), Dim::int(1), p.k.clone()];
        ys.extend(p.r.iter().cloned());
        let mut bs = vec![p.m.clone(), p.n.clone(), p.k.clone()];
        bs.extend(ones);
        let shape = |eg: &mut TensorGraph, d: Vec<Dim>| leaf(eg, Attr::Shape(d.into()));
        let (ys, bs, full) = (shape(eg, ys), shape(eg, bs), shape(eg, full));
        let yr = try_add(eg, TensorLang::Reshape([p.y, ys]))?;
        let ye = try_add(eg, TensorLang::Expand([yr, full]))?;
        let br = try_add(eg, TensorLang::Reshape([p.b, bs]))?;
        let be = try_add(eg, TensorLang::Expand([br, full]))?;
        let prod = try_add(eg, TensorLang::Mul([ye, be]))?;
        let op = leaf(eg, Attr::Op(ReduceOp::Sum));
        let axes: Vec<usize> = (2..3 + p.r.len()).collect();
        let axes = leaf(eg, Attr::usizes(&axes));
        let acc = leaf(eg, Attr::DType(p.acc));
        let reduce = TensorLang::Reduce([op, axes, acc, prod]);
        match p.scale {
            Scale::None => Some(reduce),
            Scale::Div(c) => {
                let red = try_add(eg, reduce)?;
                Some(TensorLang::Fdiv([red, c]))
            }
        }
    }
}

impl Applier<TensorLang, IndexBook> for AbsorbPool {
    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        _subst: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let Some(p) = pooled_matmul(eg, eclass) else {
            return vec![];
        };
        match Self::build(eg, &p) {
            Some(node) => union_same_facts(eg, p.class, node, rule),
            None => vec![],
        }
    }
}
