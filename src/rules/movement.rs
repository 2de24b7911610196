//! Movement-chain simplification at the Tiny level: compose or cancel adjacent views, drop views
//! that do nothing.
//!
//! Assumptions (every rule below relies on these, and on nothing else):
//! - Semantics are Tiny IR's (`docs/tiny-ir.md`, the reference evaluator): RESHAPE is row-major;
//!   `permute(x, p)` has `out[i_0..] = x[j]` with `j[p[k]] = i_k`, so `shape(out)[k] = shape(x)[p[k]]`;
//!   EXPAND keeps the rank and only resizes size-1 axes; FLIP reverses the listed axes; SHRINK keeps
//!   `lo <= i < hi` with `step`; PAD adds `(lo, hi)` cells of `value` per axis; CAST rounds to its
//!   dtype (round to nearest even) and a value of dtype `d` is already rounded to `d`. A NaN's
//!   payload is not part of its value (casts may change it); fill values are compared as attribute
//!   leaves, compared by bits (`crate::ir::num::Num`): `0.0` and `-0.0` are distinct.
//! - Facts come from the IndexBook: every tensor class has one dtype and one (symbolic) shape, and
//!   shapes compare as canonical polynomials (`Dim` equality). A side condition that needs a shape
//!   fact is checked by `Dim` equality only; a size that is merely *possibly* equal (an unbound
//!   symbol) makes the rule not fire.
//! - Appliers that build new attribute leaves (`permute-permute`, `pad-pad`) compute the new
//!   node's facts with Tiny's typing rules first and add nothing unless they equal the matched
//!   class's facts (so a rule can never trip the IndexBook's merge assertion).
//! - Every rule's right-hand side is no larger than its left-hand side (e-nodes, counting attribute
//!   leaves) and all but `unsqueeze-past-permute` are strictly smaller, so `egg::AstSize` extraction
//!   prefers rewritten forms. That rule moves a size-1-inserting RESHAPE below a PERMUTE, where
//!   `permute-permute` and `permute-moving-ones` can cancel it; every application moves a RESHAPE
//!   strictly closer to the leaves, so it cannot repeat forever, and the phase budget bounds the rest.
//! - A size is "one" only when its `Dim` is the constant 1; a symbolic size may be 1 at run time
//!   but is treated as possibly larger, so rules that reorder axes keep its relative position.

use super::cond::{dtype_is, identity_perm, no_axes, same_axes, shape_is};
use super::helpers::{union_same_facts, var, when};
use super::{attr, tensor, Rule};
use crate::ir::dtype::DType;
use crate::ir::egraph::{Attr, TensorGraph, TensorLang};
use egg::{rewrite as rw, Applier, Id, PatternAst, Subst, Symbol, Var};

fn ints(eg: &TensorGraph, s: &Subst, v: Var) -> Option<Vec<usize>> {
    attr(eg, s[v]).and_then(|a| a.as_usizes())
}

/// Every value of dtype `narrow` is exactly representable in `wide`, and casting it back gives
/// the same value: fp16 and bf16 embed in fp32; bool (0/1) embeds in every numeric dtype (the way
/// back maps non-zero to true). i32 does not embed in fp32 (|v| > 2^24 rounds).
pub fn embeds_exactly(narrow: DType, wide: DType) -> bool {
    use DType::*;
    narrow == wide
        || matches!(
            (narrow, wide),
            (F16 | BF16, F32) | (Bool, F16 | BF16 | F32 | I32)
        )
}

/// `cast(cast(?x, ?w), ?d)` with `dtype(?x) = ?d` and `?d` embedding exactly in `?w`.
fn round_trip(x: &str, w: &str, d: &str) -> impl Fn(&mut TensorGraph, Id, &Subst) -> bool {
    let (x, w, d) = (var(x), var(w), var(d));
    when(
        move |eg, m| match (tensor(eg, m[x]), attr(eg, m[w]), attr(eg, m[d])) {
            (Some(f), Some(Attr::DType(w)), Some(Attr::DType(d))) => {
                f.dtype == *d && embeds_exactly(*d, *w)
            }
            _ => false,
        },
    )
}

/// SHRINK with `lo = 0`, `hi = shape(?x)` and `step = 1` on every axis.
fn full_shrink(
    x: &str,
    lo: &str,
    hi: &str,
    st: &str,
) -> impl Fn(&mut TensorGraph, Id, &Subst) -> bool {
    let (x, lo, hi, st) = (var(x), var(lo), var(hi), var(st));
    when(move |eg, m| {
        match (
            tensor(eg, m[x]),
            attr(eg, m[lo]),
            attr(eg, m[hi]),
            attr(eg, m[st]),
        ) {
            (Some(f), Some(Attr::Shape(lo)), Some(Attr::Shape(hi)), Some(Attr::Ints(st))) => {
                lo.iter().all(|d| d.is_int(0))
                    && hi[..] == f.shape[..]
                    && st.iter().all(|s| *s == 1)
            }
            _ => false,
        }
    })
}

/// PAD by `(0, 0)` on every axis.
fn zero_pads(p: &str) -> impl Fn(&mut TensorGraph, Id, &Subst) -> bool {
    let p = var(p);
    when(
        move |eg, m| matches!(attr(eg, m[p]), Some(Attr::Pads(p)) if p.iter().all(|x| *x == (0, 0))),
    )
}

/// `permute(permute(x, p), q) = permute(x, r)` with `r[j] = p[q[j]]`.
struct ComposePermute {
    x: Var,
    p: Var,
    q: Var,
}

impl Applier<TensorLang, crate::ir::egraph::IndexBook> for ComposePermute {
    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let (Some(p), Some(q)) = (ints(eg, s, self.p), ints(eg, s, self.q)) else {
            return vec![];
        };
        if p.len() != q.len() || q.iter().any(|j| *j >= p.len()) {
            return vec![];
        }
        let r: Vec<usize> = q.iter().map(|j| p[*j]).collect();
        let leaf = eg.add(TensorLang::Attr(Attr::usizes(&r)));
        union_same_facts(eg, eclass, TensorLang::Permute([s[self.x], leaf]), rule)
    }
}

/// `pad(pad(x, p1, v), p2, v) = pad(x, p1 + p2, v)` (same value `v`, bitwise).
struct ComposePad {
    x: Var,
    p1: Var,
    p2: Var,
    v: Var,
}

impl Applier<TensorLang, crate::ir::egraph::IndexBook> for ComposePad {
    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let sum = match (attr(eg, s[self.p1]), attr(eg, s[self.p2])) {
            (Some(Attr::Pads(a)), Some(Attr::Pads(b))) if a.len() == b.len() => a
                .iter()
                .zip(b)
                .map(|((l1, h1), (l2, h2))| Some((l1.checked_add(*l2)?, h1.checked_add(*h2)?)))
                .collect::<Option<Vec<_>>>(),
            _ => None,
        };
        let Some(sum) = sum else { return vec![] };
        let leaf = eg.add(TensorLang::Attr(Attr::Pads(sum)));
        union_same_facts(
            eg,
            eclass,
            TensorLang::Pad([s[self.x], leaf, s[self.v]]),
            rule,
        )
    }
}

/// Aligns `to` against `from` as `from` with size-1 axes inserted: for each axis of `to`, the axis
/// of `from` it is (or `None` for an inserted 1). `None` overall when `to` is not such a shape or
/// inserts nothing.
fn inserted_ones(
    from: &[crate::ir::dim::Dim],
    to: &[crate::ir::dim::Dim],
) -> Option<Vec<Option<usize>>> {
    let mut j = 0;
    let mut out = Vec::with_capacity(to.len());
    for d in to {
        if j < from.len() && *d == from[j] {
            out.push(Some(j));
            j += 1;
        } else if d.is_int(1) {
            out.push(None);
        } else {
            return None;
        }
    }
    (j == from.len() && out.iter().any(|a| a.is_none())).then_some(out)
}

/// `reshape(permute(x, p), s) = permute(reshape(x, shape(x) ++ [1]·t), q)` when `s` is the
/// permuted shape with `t` size-1 axes inserted: `q[i] = p[k]` where axis `i` of `s` is axis `k`
/// of the permuted shape, and the `u`-th inserted axis takes `rank(x) + u`.
struct UnsqueezePastPermute {
    x: Var,
    p: Var,
    s: Var,
}

impl Applier<TensorLang, crate::ir::egraph::IndexBook> for UnsqueezePastPermute {
    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        m: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let (Some(xf), Some(p), Some(Attr::Shape(s))) = (
            tensor(eg, m[self.x]).cloned(),
            ints(eg, m, self.p),
            attr(eg, m[self.s]).cloned(),
        ) else {
            return vec![];
        };
        if p.len() != xf.shape.len() || p.iter().any(|a| *a >= p.len()) {
            return vec![];
        }
        let permuted: Vec<_> = p.iter().map(|a| xf.shape[*a].clone()).collect();
        let Some(align) = inserted_ones(&permuted, &s) else {
            return vec![];
        };
        let rank = xf.shape.len();
        let mut widened = xf.shape.clone();
        let mut q = Vec::with_capacity(s.len());
        for a in &align {
            match a {
                Some(k) => q.push(p[*k]),
                None => {
                    q.push(widened.len());
                    widened.push(crate::ir::dim::Dim::int(1));
                }
            }
        }
        debug_assert!(widened.len() > rank);
        let shape_leaf = eg.add(TensorLang::Attr(Attr::Shape(widened.into())));
        let reshaped = eg.add(TensorLang::Reshape([m[self.x], shape_leaf]));
        let q_leaf = eg.add(TensorLang::Attr(Attr::usizes(&q)));
        union_same_facts(eg, eclass, TensorLang::Permute([reshaped, q_leaf]), rule)
    }
}

/// `permute(x, p) = reshape(x, permuted shape)` when `p` keeps every axis whose size is not the
/// constant 1 in its original relative order (only size-1 axes move, so row-major order is kept).
struct PermuteMovingOnes {
    x: Var,
    p: Var,
}

impl Applier<TensorLang, crate::ir::egraph::IndexBook> for PermuteMovingOnes {
    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        m: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let (Some(xf), Some(p)) = (tensor(eg, m[self.x]).cloned(), ints(eg, m, self.p)) else {
            return vec![];
        };
        if p.len() != xf.shape.len() || p.iter().any(|a| *a >= p.len()) {
            return vec![];
        }
        let kept: Vec<usize> = p
            .iter()
            .copied()
            .filter(|a| !xf.shape[*a].is_int(1))
            .collect();
        let identity = p.iter().enumerate().all(|(i, a)| i == *a);
        if identity || kept.windows(2).any(|w| w[0] > w[1]) {
            return vec![];
        }
        let permuted: Vec<_> = p.iter().map(|a| xf.shape[*a].clone()).collect();
        let leaf = eg.add(TensorLang::Attr(Attr::Shape(permuted.into())));
        union_same_facts(eg, eclass, TensorLang::Reshape([m[self.x], leaf]), rule)
    }
}

/// Names of the movement rules, in [`rules`] order.
pub const RULE_NAMES: [&str; 15] = [
    "permute-permute",
    "permute-identity",
    "reshape-reshape",
    "reshape-identity",
    "expand-expand",
    "expand-identity",
    "flip-flip",
    "flip-empty",
    "shrink-full",
    "pad-zero",
    "pad-pad",
    "cast-identity",
    "cast-widen-narrow",
    "unsqueeze-past-permute",
    "permute-moving-ones",
];

/// The movement rule set.
pub fn rules() -> Vec<Rule> {
    vec![
        // permute(permute(x, p), q) = permute(x, p∘q), i.e. r[j] = p[q[j]].
        rw!("permute-permute"; "(permute (permute ?x ?p) ?q)" =>
            { ComposePermute { x: var("?x"), p: var("?p"), q: var("?q") } }),
        // permute(x, [0, 1, …, n-1]) = x.
        rw!("permute-identity"; "(permute ?x ?p)" => "?x" if identity_perm("?x", "?p")),
        // reshape(reshape(x, s1), s2) = reshape(x, s2)   (row-major reshapes compose).
        rw!("reshape-reshape"; "(reshape (reshape ?x ?s1) ?s2)" => "(reshape ?x ?s2)"),
        // reshape(x, s) = x   when shape(x) = s.
        rw!("reshape-identity"; "(reshape ?x ?s)" => "?x" if shape_is("?x", "?s")),
        // expand(expand(x, s1), s2) = expand(x, s2)   (an axis of x is 1 or already s1 = s2).
        rw!("expand-expand"; "(expand (expand ?x ?s1) ?s2)" => "(expand ?x ?s2)"),
        // expand(x, s) = x   when shape(x) = s.
        rw!("expand-identity"; "(expand ?x ?s)" => "?x" if shape_is("?x", "?s")),
        // flip(flip(x, a), b) = x   when a and b are the same set of axes.
        rw!("flip-flip"; "(flip (flip ?x ?a) ?b)" => "?x" if same_axes("?a", "?b")),
        // flip(x, []) = x.
        rw!("flip-empty"; "(flip ?x ?a)" => "?x" if no_axes("?a")),
        // shrink(x, 0, shape(x), 1) = x.
        rw!("shrink-full"; "(shrink ?x ?lo ?hi ?st)" => "?x" if full_shrink("?x", "?lo", "?hi", "?st")),
        // pad(x, [(0,0)…], v) = x.
        rw!("pad-zero"; "(pad ?x ?p ?v)" => "?x" if zero_pads("?p")),
        // pad(pad(x, p1, v), p2, v) = pad(x, p1 + p2, v)   (the same fill value on both).
        rw!("pad-pad"; "(pad (pad ?x ?p1 ?v) ?p2 ?v)" =>
            { ComposePad { x: var("?x"), p1: var("?p1"), p2: var("?p2"), v: var("?v") } }),
        // cast(x, d) = x   when dtype(x) = d.
        rw!("cast-identity"; "(cast ?x ?d)" => "?x" if dtype_is("?x", "?d")),
        // cast(cast(x, w), d) = x   when dtype(x) = d and every d value is exact in w.
        rw!("cast-widen-narrow"; "(cast (cast ?x ?w) ?d)" => "?x" if round_trip("?x", "?w", "?d")),
        // reshape(permute(x, p), s) = permute(reshape(x, shape(x) ++ 1s), q)   when s only inserts 1s.
        rw!("unsqueeze-past-permute"; "(reshape (permute ?x ?p) ?s)" =>
            { UnsqueezePastPermute { x: var("?x"), p: var("?p"), s: var("?s") } }),
        // permute(x, p) = reshape(x, permuted shape)   when p moves only size-1 axes.
        rw!("permute-moving-ones"; "(permute ?x ?p)" =>
            { PermuteMovingOnes { x: var("?x"), p: var("?p") } }),
    ]
}

#[cfg(test)]
#[path = "movement_tests.rs"]
mod tests;
