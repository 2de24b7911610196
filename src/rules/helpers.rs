//! Small pieces shared by the srnf, contraction and epilogue rule files: pattern variables, side
//! conditions over the analysis, and appliers' node building that type-checks every new node with
//! Tiny's rules before adding it (so a rule can never make the IndexBook panic or trip its merge
//! assertion).

use super::{attr, tensor};
use crate::ir::dtype::DType;
use crate::ir::egraph::book::{infer_facts, tiny_parts};
use crate::ir::egraph::{Attr, TensorFacts, TensorGraph, TensorLang};
use egg::{Id, Subst, Symbol, Var};

pub(crate) fn var(s: &str) -> Var {
    s.parse().expect("static pattern variable")
}

/// A side condition reading the analysis only.
pub(crate) fn when(
    f: impl Fn(&TensorGraph, &Subst) -> bool,
) -> impl Fn(&mut TensorGraph, Id, &Subst) -> bool {
    move |eg, _, s| f(eg, s)
}

/// The integer list of an attribute class.
pub(crate) fn ints(eg: &TensorGraph, id: Id) -> Option<Vec<usize>> {
    attr(eg, id).and_then(|a| a.as_usizes())
}

/// The dtype of an attribute class.
pub(crate) fn dtype_attr(eg: &TensorGraph, id: Id) -> Option<DType> {
    match attr(eg, id) {
        Some(Attr::DType(d)) => Some(*d),
        _ => None,
    }
}

/// The immediate of a number leaf.
pub(crate) fn num(eg: &TensorGraph, id: Id) -> Option<f64> {
    match attr(eg, id) {
        Some(Attr::Num(v)) => Some(v.0),
        _ => None,
    }
}

/// Tiny's typing of `node` (its children already in the e-graph).
pub(crate) fn facts_of(eg: &TensorGraph, node: &TensorLang) -> Result<TensorFacts, String> {
    let a = |id: Id| eg[id].data.attr();
    tiny_parts(node, &a).and_then(|p| infer_facts(&p, &|id| eg[id].data.tensor().cloned()))
}

/// Adds an attribute leaf.
pub(crate) fn leaf(eg: &mut TensorGraph, a: Attr) -> Id {
    eg.add(TensorLang::Attr(a))
}

/// Adds `node` when it is well-typed; `None` (and nothing added) otherwise.
pub(crate) fn try_add(eg: &mut TensorGraph, node: TensorLang) -> Option<Id> {
    facts_of(eg, &node).ok()?;
    Some(eg.add(node))
}

/// `cast(x, to)`, or `x` itself when it already has dtype `to`.
pub(crate) fn cast_to(eg: &mut TensorGraph, x: Id, to: DType) -> Option<Id> {
    if tensor(eg, x)?.dtype == to {
        return Some(x);
    }
    let d = leaf(eg, Attr::DType(to));
    try_add(eg, TensorLang::Cast([x, d]))
}

/// Adds `node` and unions it with `eclass`, but only when Tiny's typing rules give it exactly
/// `eclass`'s facts; otherwise adds nothing. The union is justified by `rule` (the applier's
/// rule name), so explanations name the rule rather than this function.
pub(crate) fn union_same_facts(
    eg: &mut TensorGraph,
    eclass: Id,
    node: TensorLang,
    rule: Symbol,
) -> Vec<Id> {
    match (facts_of(eg, &node), tensor(eg, eclass)) {
        (Ok(f), Some(want)) if f == *want => {
            let id = eg.add(node);
            if eg.union_trusted(eclass, id, rule) {
                vec![eclass]
            } else {
                vec![]
            }
        }
        _ => vec![],
    }
}
