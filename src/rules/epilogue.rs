//! Epilogue cast sinking (seed 000 §8, seed 001 §6.7 step 7): the elementwise ops after a
//! reduction run on the fp32 accumulator and one cast to the storage dtype sits at the end, e.g.
//! gemm_bias_relu's `relu(add(cast(acc, fp16), bias16))` gets
//! `cast(relu(add(acc, cast(bias16, fp32))), fp16)` in the same e-class.
//!
//! Assumptions (every rule below relies on these, and on nothing else):
//! - Semantics are Tiny IR's reference evaluator: an elementwise op computes in `f64` on its
//!   operands and rounds to its dtype; CAST rounds to nearest even; immediates have the dtype of
//!   the node's tensor operands. `lo` is fp16 or bf16, both of which embed exactly in fp32.
//! - Facts come from the IndexBook: the cast's source is fp32 and the other operand has dtype `lo`
//!   (so `cast(y, fp32)` is exact), read from the analysis. An immediate `c` counts as the exact
//!   `lo` constant `round_lo(c)`, and the rewritten node carries `round_lo(c)`.
//! - The searchers match any unary / binary / WHERE node one of whose operand classes holds a
//!   `cast(x, lo)` node (a node being *present*, never absent); the applier rebuilds the op from
//!   the matched class's nodes with those children, type-checking everything it adds.
//! - The sign of a zero is not part of a value (`relu(-0.0) = -0.0` but `relu` of a tiny negative
//!   fp32 value is `+0.0` before the cast).
//!
//! Exact vs. within tolerance:
//! - Exact: `cast-sink-unary` (relu, neg, abs commute with round-to-nearest-even), `where-cast-sink`
//!   (a select computes nothing), and `cast-sink-binary(-right)` for max/min (rounding is monotone
//!   and the other operand is `lo`-exact).
//! - Within tolerance (one `lo` rounding moves: the op now sees the unrounded fp32 value and
//!   rounds once at the end): `cast-sink-unary-approx` (exp2, log2, sqrt, rsqrt, recip, erf) and
//!   `cast-sink-binary(-right)` for add, sub, mul, fdiv.
//!
//! Termination: every application moves a `cast(·, lo)` one op closer to the root of a term, and
//! nothing moves it back down, so the phase saturates.

use super::helpers::{cast_to, dtype_attr, leaf, num, try_add, union_same_facts, var};
use super::{tensor, Rule};
use crate::ir::dtype::DType;
use crate::ir::egraph::{Attr, IndexBook, TensorGraph, TensorLang};
use crate::ir::tiny::{BinaryOp, UnaryOp};
use egg::{Applier, Id, Rewrite, SearchMatches, Searcher, Subst, Symbol, Var};

/// Which nodes a sink rule matches.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Site {
    /// `f(cast(x, lo))` for unary ops that commute with rounding.
    UnaryExact,
    /// `f(cast(x, lo))` for the other unary ops.
    UnaryApprox,
    /// `op(cast(x, lo), y)`.
    BinaryLeft,
    /// `op(y, cast(x, lo))`.
    BinaryRight,
    /// `where(c, a, b)` with a cast in either branch.
    Where,
}

fn unary_ok(site: Site, op: UnaryOp) -> bool {
    use UnaryOp::*;
    match site {
        Site::UnaryExact => matches!(op, Relu | Neg | Abs),
        Site::UnaryApprox => matches!(op, Exp2 | Log2 | Sqrt | Rsqrt | Recip | Erf),
        _ => false,
    }
}

fn binary_ok(op: BinaryOp) -> bool {
    use BinaryOp::*;
    matches!(op, Add | Sub | Mul | Max | Min | Fdiv)
}

fn is_lo(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16)
}

/// The `(x, lo-leaf)` of every `cast(x, lo)` node in class `c` with `x` fp32 and `lo` narrow.
fn narrowing_casts(eg: &TensorGraph, c: Id) -> Vec<(Id, Id)> {
    eg[c]
        .nodes
        .iter()
        .filter_map(|n| match n {
            TensorLang::Cast([x, d]) => {
                let ok = tensor(eg, *x).is_some_and(|f| f.dtype == DType::F32)
                    && dtype_attr(eg, *d).is_some_and(is_lo);
                ok.then_some((eg.find(*x), eg.find(*d)))
            }
            _ => None,
        })
        .collect()
}

/// A searcher for one [`Site`]. Matches bind `?a` / `?b` / `?c` (the node's operand classes),
/// `?x` (the fp32 source of the cast) and `?lo` (the cast's dtype leaf).
struct SinkSearcher {
    site: Site,
}

fn v(s: &str) -> Var {
    var(s)
}

impl Searcher<TensorLang, IndexBook> for SinkSearcher {
    fn search_eclass_with_limit(
        &self,
        eg: &TensorGraph,
        eclass: Id,
        limit: usize,
    ) -> Option<SearchMatches<'_, TensorLang>> {
        let mut substs = Vec::new();
        for node in &eg[eclass].nodes {
            // (operands, index of the operand holding the cast)
            let (ops, at): (Vec<Id>, Vec<usize>) = match (self.site, node) {
                (Site::UnaryExact | Site::UnaryApprox, n) => match n.unary_op() {
                    Some((op, x)) if unary_ok(self.site, op) => (vec![x], vec![0]),
                    _ => continue,
                },
                (Site::BinaryLeft, n) => match n.binary_op() {
                    Some((op, [a, b])) if binary_ok(op) => (vec![a, b], vec![0]),
                    _ => continue,
                },
                (Site::BinaryRight, n) => match n.binary_op() {
                    Some((op, [a, b])) if binary_ok(op) => (vec![a, b], vec![1]),
                    _ => continue,
                },
                (Site::Where, TensorLang::Where([c, a, b])) => (vec![*a, *b, *c], vec![0, 1]),
                _ => continue,
            };
            for i in at {
                for (x, lo) in narrowing_casts(eg, ops[i]) {
                    let mut s = Subst::with_capacity(5);
                    for (name, id) in ["?a", "?b", "?c"].iter().zip(&ops) {
                        s.insert(v(name), eg.find(*id));
                    }
                    s.insert(v("?x"), x);
                    s.insert(v("?lo"), lo);
                    if !substs.contains(&s) {
                        substs.push(s);
                    }
                }
            }
        }
        substs.truncate(limit);
        (!substs.is_empty()).then(|| SearchMatches {
            eclass,
            substs,
            ast: None,
        })
    }

    fn vars(&self) -> Vec<Var> {
        match self.site {
            Site::UnaryExact | Site::UnaryApprox => vec![v("?a"), v("?x"), v("?lo")],
            Site::BinaryLeft | Site::BinaryRight => vec![v("?a"), v("?b"), v("?x"), v("?lo")],
            Site::Where => vec![v("?a"), v("?b"), v("?c"), v("?x"), v("?lo")],
        }
    }
}

/// Rewrites every matched node of the class into `cast(op(…fp32 operands…), lo)`.
struct SinkApplier {
    site: Site,
}

/// The fp32 form of operand `c` of a node whose cast sits in class `cast_class` with source `x`:
/// `x` itself there; elsewhere `cast(c, fp32)` for a `lo` tensor, `round_lo(c)` for an immediate.
fn widened(eg: &mut TensorGraph, c: Id, cast_class: Id, x: Id, lo: DType) -> Option<Id> {
    if eg.find(c) == eg.find(cast_class) {
        return Some(x);
    }
    if let Some(value) = num(eg, c) {
        return Some(leaf(eg, Attr::num(lo.round(value))));
    }
    match tensor(eg, c) {
        Some(f) if f.dtype == lo => cast_to(eg, c, DType::F32),
        _ => None,
    }
}

impl Applier<TensorLang, IndexBook> for SinkApplier {
    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&egg::PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let (x, lo_leaf) = (s[v("?x")], s[v("?lo")]);
        let Some(lo) = dtype_attr(eg, lo_leaf) else {
            return vec![];
        };
        let get = |name: &str| s.get(v(name)).copied();
        let nodes: Vec<TensorLang> = eg[eclass].nodes.clone();
        let mut out = Vec::new();
        for node in nodes {
            let built = match (self.site, &node) {
                (Site::UnaryExact | Site::UnaryApprox, n) => match n.unary_op() {
                    Some((op, a)) if unary_ok(self.site, op) && Some(eg.find(a)) == get("?a") => {
                        Some(TensorLang::unary(op, x))
                    }
                    _ => None,
                },
                (Site::BinaryLeft | Site::BinaryRight, n) => match n.binary_op() {
                    Some((op, [a, b]))
                        if binary_ok(op)
                            && Some(eg.find(a)) == get("?a")
                            && Some(eg.find(b)) == get("?b") =>
                    {
                        let (cast_at, other) = if self.site == Site::BinaryLeft {
                            (a, b)
                        } else {
                            (b, a)
                        };
                        widened(eg, other, cast_at, x, lo).map(|w| {
                            let c = if self.site == Site::BinaryLeft {
                                [x, w]
                            } else {
                                [w, x]
                            };
                            TensorLang::binary(op, c)
                        })
                    }
                    _ => None,
                },
                (Site::Where, TensorLang::Where([c, a, b]))
                    if Some(eg.find(*a)) == get("?a")
                        && Some(eg.find(*b)) == get("?b")
                        && Some(eg.find(*c)) == get("?c") =>
                {
                    // The branch holding the cast is the one whose class narrowing_casts found
                    // `x` in; the other branch is widened (or is that same cast).
                    let cast_class = if narrowing_casts(eg, *a).contains(&(x, lo_leaf)) {
                        *a
                    } else {
                        *b
                    };
                    let wa = widened(eg, *a, cast_class, x, lo);
                    let wb = widened(eg, *b, cast_class, x, lo);
                    match (wa, wb) {
                        (Some(wa), Some(wb)) => Some(TensorLang::Where([*c, wa, wb])),
                        _ => None,
                    }
                }
                _ => None,
            };
            let Some(built) = built else { continue };
            let Some(inner) = try_add(eg, built) else {
                continue;
            };
            if tensor(eg, inner).map(|f| f.dtype) != Some(DType::F32) {
                continue;
            }
            out.extend(union_same_facts(
                eg,
                eclass,
                TensorLang::Cast([inner, lo_leaf]),
                rule,
            ));
        }
        out
    }
}

fn sink(name: &str, site: Site) -> Rule {
    Rewrite::new(name, SinkSearcher { site }, SinkApplier { site })
        .expect("a static rule definition")
}

/// Names of the epilogue rules, in [`rules`] order.
pub const RULE_NAMES: [&str; 5] = [
    "cast-sink-unary",
    "cast-sink-unary-approx",
    "cast-sink-binary",
    "cast-sink-binary-right",
    "where-cast-sink",
];

/// The epilogue rule set.
pub fn rules() -> Vec<Rule> {
    vec![
        // f(cast(x, lo)) = cast(f(x), lo)   for f ∈ {relu, neg, abs}, x fp32 (exact).
        sink("cast-sink-unary", Site::UnaryExact),
        // f(cast(x, lo)) ≈ cast(f(x), lo)   for f ∈ {exp2, log2, sqrt, rsqrt, recip, erf}.
        sink("cast-sink-unary-approx", Site::UnaryApprox),
        // op(cast(x, lo), y) ≈ cast(op(x, cast(y, fp32)), lo)   for y of dtype lo or an immediate.
        sink("cast-sink-binary", Site::BinaryLeft),
        // op(y, cast(x, lo)) ≈ cast(op(cast(y, fp32), x), lo)   (the mirrored operand position).
        sink("cast-sink-binary-right", Site::BinaryRight),
        // where(c, cast(x, lo), y) = cast(where(c, x, cast(y, fp32)), lo)   (either branch).
        sink("where-cast-sink", Site::Where),
    ]
}

#[cfg(test)]
#[path = "epilogue_tests.rs"]
mod tests;
