//! Canonical contractions (seed 001 §6.3.1, C-CON1): a sum-reduction of a product of two operands
//! that are movement-only chains over tensors is a contraction, and its canonical form reads the
//! ORIGINAL tensors inside the reduce body:
//!
//! `reduce(sum, K, acc, mul(O_a, O_b))` with `O = cast(M(X), acc)` when `dtype(X) ≠ acc` and
//! `O = M(X)` when `dtype(X) = acc`,
//!
//! where `M` is a chain of RESHAPE / PERMUTE / EXPAND / PAD / SHRINK / FLIP / VIEW and `X` an
//! input or a compute class. The cast sits directly under the product, so the body converts each
//! element as it is read and nothing of broadcast shape is computed before the product. (An
//! identity cast is never added: `cast(x, dtype(x))` is `x`'s own class after the movement
//! phase's `cast-identity`, and a node whose child is its own class would make kernel extraction
//! cyclic.) The lowered matmul / batched matmul / conv / attention contractions already have this
//! shape; the rules move casts that sit *below* a movement op up to the product, which is the
//! direction C-CON1 wants (the reverse, `cast(movement(x)) → movement(cast(x))`, would put a
//! cast of the whole tensor before the reads).
//!
//! Assumptions (every rule below relies on these, and on nothing else):
//! - Semantics are Tiny IR's: movement ops only re-index (PAD also fills), CAST is elementwise, so
//!   the two commute. PAD's fill is rounded to the node dtype, so `pad(cast(x, d), v)` equals
//!   `cast(pad(x, v), d)` only when `v` is exact in `dtype(x)` (checked from the analysis).
//! - Every rule is exact (`Compare::BitExact`): no value is computed differently, only where the
//!   cast sits. The right-hand sides have the same number of e-nodes as the left-hand sides.
//! - Termination: each application moves a CAST one movement op up; nothing moves it down in this
//!   phase, so it saturates — except through a cycle of movement ops, which the movement phase
//!   leaves behind for identities (`x = permute(x)` for a permute of unit axes, `x = reshape(y)`
//!   and `y = reshape(x)` for a reshape round trip): moving a cast past such a movement adds
//!   `cast(M(M(…M(x))))` forever, each `M(…)` a new class (a Cast to bf16 feeding a Cumulative
//!   grew the e-graph to its node limit before any kernel was added). So no rule fires on a
//!   movement op that is on a cycle through the cast's class (`off_cycle`); the value it would
//!   add is already in the class.
//!
//! [`contraction_of`] is the analysis helper behind `--explain`: the two operand classes under
//! their movement chains, the reduced axes and the kind (matmul / batched / conv-like).

use super::helpers::{dtype_attr, num, var, when};
use super::{attr, tensor, Rule};
use crate::ir::dtype::DType;
use crate::ir::egraph::{Attr, TensorGraph, TensorLang};
use crate::ir::tiny::ReduceOp;
use egg::{rewrite as rw, Id, Subst};

/// PAD's fill `?v` is exact in `dtype(?x)`.
fn fill_exact(x: &str, v: &str) -> impl Fn(&mut TensorGraph, Id, &Subst) -> bool {
    let (x, v) = (var(x), var(v));
    when(move |eg, m| match (tensor(eg, m[x]), num(eg, m[v])) {
        (Some(f), Some(v)) => {
            let r = f.dtype.round(v);
            r == v || (r.is_nan() && v.is_nan())
        }
        _ => false,
    })
}

/// The movement op `M` matched at the root of `M(cast(?x, ?d))` is not on a cycle of movement
/// ops: the root class is not reachable from the cast's class through movement operands.
fn off_cycle(x: &str, d: &str) -> impl Fn(&mut TensorGraph, Id, &Subst) -> bool {
    let (x, d) = (var(x), var(d));
    move |eg, root, s| {
        let Some(c) = eg.lookup(TensorLang::Cast([s[x], s[d]])) else {
            return true;
        };
        !movement_reaches(eg, c, eg.find(root))
    }
}

/// True when `to` is `from` or is reached from it by following the operands of movement nodes.
fn movement_reaches(eg: &TensorGraph, from: Id, to: Id) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![eg.find(from)];
    while let Some(c) = stack.pop() {
        if c == to {
            return true;
        }
        if !seen.insert(c) {
            continue;
        }
        for n in &eg[c].nodes {
            if let Some((_, x)) = movement_name(n) {
                stack.push(eg.find(x));
            }
        }
    }
    false
}

/// Names of the contraction rules, in [`rules`] order.
pub const RULE_NAMES: [&str; 5] = [
    "cast-past-reshape",
    "cast-past-permute",
    "cast-past-expand",
    "cast-past-view",
    "cast-past-pad",
];

/// The contraction rule set.
pub fn rules() -> Vec<Rule> {
    vec![
        // reshape(cast(x, d), s) = cast(reshape(x, s), d).
        rw!("cast-past-reshape"; "(reshape (cast ?x ?d) ?s)" => "(cast (reshape ?x ?s) ?d)"
            if off_cycle("?x", "?d")),
        // permute(cast(x, d), p) = cast(permute(x, p), d).
        rw!("cast-past-permute"; "(permute (cast ?x ?d) ?p)" => "(cast (permute ?x ?p) ?d)"
            if off_cycle("?x", "?d")),
        // expand(cast(x, d), s) = cast(expand(x, s), d).
        rw!("cast-past-expand"; "(expand (cast ?x ?d) ?s)" => "(cast (expand ?x ?s) ?d)"
            if off_cycle("?x", "?d")),
        // view(cast(x, d), s, map) = cast(view(x, s, map), d).
        rw!("cast-past-view"; "(view (cast ?x ?d) ?s ?m)" => "(cast (view ?x ?s ?m) ?d)"
            if off_cycle("?x", "?d")),
        // pad(cast(x, d), p, v) = cast(pad(x, p, v), d)   when v is exact in dtype(x).
        rw!("cast-past-pad"; "(pad (cast ?x ?d) ?p ?v)" => "(cast (pad ?x ?p ?v) ?d)"
            if fill_exact("?x", "?v") if off_cycle("?x", "?d")),
    ]
}

/// What a contraction reduces over its operands' index spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContractionKind {
    /// Both operands read tensors of rank ≤ 2 through reshapes / permutes / expands (gemm, mlp,
    /// 1-D × 2-D).
    Matmul,
    /// Rank > 2 operands, no window reads (attention's QKᵀ and PV, batched matmul).
    Batched,
    /// A VIEW or PAD in an operand chain: a sliding-window (convolution-like) read.
    ConvLike,
}

/// One operand of a contraction: `cast?(M(source))`.
#[derive(Clone, Debug, PartialEq)]
pub struct ContractionOperand {
    /// The class read: an input or a compute class.
    pub source: Id,
    /// The movement ops from `source` up to the product, innermost first (`"reshape"`, …).
    pub chain: Vec<&'static str>,
    /// The dtype the operand is cast to under the product, when it is cast.
    pub cast: Option<DType>,
}

/// A contraction found by [`contraction_of`].
#[derive(Clone, Debug, PartialEq)]
pub struct Contraction {
    /// Accumulator dtype.
    pub acc: DType,
    /// Reduced axes of the product's index space.
    pub axes: Vec<usize>,
    /// The two operands.
    pub operands: [ContractionOperand; 2],
    /// What kind of contraction.
    pub kind: ContractionKind,
}

fn movement_name(n: &TensorLang) -> Option<(&'static str, Id)> {
    use TensorLang as T;
    Some(match n {
        T::Reshape([x, _]) => ("reshape", *x),
        T::Permute([x, _]) => ("permute", *x),
        T::Expand([x, _]) => ("expand", *x),
        T::Pad([x, _, _]) => ("pad", *x),
        T::Shrink([x, _, _, _]) => ("shrink", *x),
        T::Flip([x, _]) => ("flip", *x),
        T::View([x, _, _]) => ("view", *x),
        _ => return None,
    })
}

/// Walks down from an operand class: one optional cast right under the product, then movement
/// nodes (the first one in each class) until a class without one. Bounded by the e-graph size.
fn operand(eg: &TensorGraph, class: Id) -> ContractionOperand {
    let mut cur = eg.find(class);
    let mut cast = None;
    for n in &eg[cur].nodes {
        if let TensorLang::Cast([x, d]) = n {
            if let Some(d) = dtype_attr(eg, *d) {
                cast = Some(d);
                cur = eg.find(*x);
                break;
            }
        }
    }
    let mut chain = Vec::new();
    let mut seen = vec![cur];
    while let Some((name, x)) = eg[cur].nodes.iter().find_map(movement_name) {
        let next = eg.find(x);
        if seen.contains(&next) {
            break;
        }
        chain.push(name);
        seen.push(next);
        cur = next;
    }
    chain.reverse();
    ContractionOperand {
        source: cur,
        chain,
        cast,
    }
}

/// The contraction computed by e-class `class`, if it holds a `reduce(sum, K, acc, mul(a, b))`
/// node with tensor operands `a`, `b` (an analysis helper for `--explain`; it reads the e-graph
/// and changes nothing).
pub fn contraction_of(eg: &TensorGraph, class: Id) -> Option<Contraction> {
    for n in &eg[eg.find(class)].nodes {
        let TensorLang::Reduce([op, axes, acc, body]) = n else {
            continue;
        };
        if attr(eg, *op) != Some(&Attr::Op(ReduceOp::Sum)) {
            continue;
        }
        let (Some(axes), Some(acc)) = (
            attr(eg, *axes).and_then(|a| a.as_usizes()),
            dtype_attr(eg, *acc),
        ) else {
            continue;
        };
        let product = eg[eg.find(*body)].nodes.iter().find_map(|m| match m {
            TensorLang::Mul([a, b]) if tensor(eg, *a).is_some() && tensor(eg, *b).is_some() => {
                Some((*a, *b))
            }
            _ => None,
        });
        let Some((a, b)) = product else { continue };
        let operands = [operand(eg, a), operand(eg, b)];
        let windowed = operands
            .iter()
            .any(|o| o.chain.iter().any(|s| matches!(*s, "view" | "pad")));
        let small = operands
            .iter()
            .all(|o| tensor(eg, o.source).is_some_and(|f| f.shape.len() <= 2));
        let kind = if windowed {
            ContractionKind::ConvLike
        } else if small {
            ContractionKind::Matmul
        } else {
            ContractionKind::Batched
        };
        return Some(Contraction {
            acc,
            axes,
            operands,
            kind,
        });
    }
    None
}

#[cfg(test)]
#[path = "contraction_tests.rs"]
mod tests;
