//! Movement chains folded into `read` maps (seed 001 §6.5): every movement op over a
//! compute/INPUT class gets a `(read x access)` with `out[i] = guard(i) ? x[index(i)] : fill`, and
//! a movement op (or a `read`) over a movement class composes with the `read` that class already
//! has, so every movement class ends with one `read` directly over a compute/INPUT class.
//!
//! Assumptions (every rule below relies on these, and on nothing else):
//! - Semantics are Tiny IR's (`docs/tiny-ir.md`): RESHAPE is row-major; `permute(x, p)` has
//!   `out[i] = x[j]` with `j[p[k]] = i_k`; EXPAND resizes size-1 axes only; PAD's value is rounded
//!   to the dtype like READ's fill; READ evaluates its guard before its index.
//! - A *base* class has some e-node that is neither a movement op nor a `read` (INPUT, CONST,
//!   compute, kernel). Folding targets base classes only; a class that is not base is a view.
//! - Maps are affine with `Dim` coefficients plus `floordiv` by positive constants
//!   (`crate::index::access` normalizes them). A map that needs more — a RESHAPE whose split
//!   or merge divides by a symbolic size, a `min`/`max` size, or two guards with different fills —
//!   is not built: the rule does not fire and the chain stays (a region boundary).
//! - Appliers compute the new `read`'s facts with Tiny's typing rules and add nothing unless they
//!   equal the matched class's facts. A map without a guard has fill 0 (the fill is unused), so
//!   equal maps reached along different chains are one attribute leaf.

use super::helpers::{union_same_facts, var};
use super::{attr, run_phase, tensor, Budget, PhaseStats, Rule};
use crate::index::access::{dim_to_expr, expr, floordiv_on, simplify_access, Lin};
use crate::index::movement as mv;
use crate::ir::axis::{axis_name, AccessMap, AxisExpr, CmpOp, Pred};
use crate::ir::dim::Dim;
use crate::ir::egraph::{add_program, extract_program, Attr, IndexBook, TensorGraph, TensorLang};
use crate::ir::num::Num;
use crate::ir::tiny::{AffineIndex, Program};
use egg::{
    rewrite as rw, Applier, CostFunction, Extractor, Id, Language, PatternAst, Subst, Symbol, Var,
};

fn ax(k: usize) -> AxisExpr {
    AxisExpr::Name(axis_name(k))
}

fn c(v: i64) -> AxisExpr {
    AxisExpr::Const(v)
}

/// The output axes `i0…` of a map over `t`, as index forms (the environment the index
/// algebra's movement transformers start from).
fn axes(t: &[Dim]) -> Vec<Lin> {
    (0..t.len()).map(Lin::var).collect()
}

/// The unguarded map of result shape `t` whose operand indices are `forms` (`None` when one has
/// no wire form: a floor by a symbolic size).
fn unguarded(t: &[Dim], forms: Vec<Lin>) -> Option<AccessMap> {
    Some(AccessMap {
        shape: t.to_vec(),
        index: forms.iter().map(expr).collect::<Option<_>>()?,
        guard: None,
        fill: Num(0.0),
    })
}

/// The class holds a value computed by something other than a view (INPUT, CONST, compute).
pub fn is_base(eg: &TensorGraph, id: Id) -> bool {
    eg[id]
        .nodes
        .iter()
        .any(|n| !n.is_movement() && !n.is_attr())
}

/// RESHAPE `s → t` (row-major): the index algebra's grouping and split
/// ([`mv::reshape_groups`], [`mv::reshape`]); a floor by a symbolic size has no map.
pub fn reshape_map(s: &[Dim], t: &[Dim]) -> Option<AccessMap> {
    if s.iter().chain(t).any(|d| d.is_int(0)) {
        // Nothing is ever read from an empty tensor.
        return Some(AccessMap {
            shape: t.to_vec(),
            index: vec![c(0); s.len()],
            guard: None,
            fill: Num(0.0),
        });
    }
    let groups = mv::reshape_groups(s, t)?;
    let floor = |e: &Lin, d: &Dim| floordiv_on(e, d, t);
    let forms = mv::reshape(&axes(t), s, t, &groups, &floor, &mut |_, _| {}).ok()?;
    unguarded(t, forms)
}

/// PERMUTE by `p`: operand axis `p[k]` is output axis `k`.
pub fn permute_map(s: &[Dim], p: &[usize], t: &[Dim]) -> Option<AccessMap> {
    let forms = mv::permute(&axes(t), p).ok()?;
    (forms.len() == s.len()).then_some(())?;
    unguarded(t, forms)
}

/// EXPAND: a size-1 operand axis reads index 0 (broadcast), any other axis its own index.
pub fn expand_map(s: &[Dim], t: &[Dim]) -> Option<AccessMap> {
    (s.len() == t.len()).then_some(())?;
    unguarded(t, mv::expand(&axes(t), s))
}

/// PAD by `(lo, hi)` with `value`: index `i_a - lo_a`, valid where `lo_a <= i_a < lo_a + s_a`.
pub fn pad_map(s: &[Dim], pads: &[(i64, i64)], value: f64, t: &[Dim]) -> Option<AccessMap> {
    if pads.len() != s.len() || t.len() != s.len() {
        return None;
    }
    let mut guard = Vec::new();
    for (a, (lo, hi)) in pads.iter().enumerate() {
        if (*lo, *hi) != (0, 0) {
            guard.push(Pred::Cmp(CmpOp::Ge, ax(a), c(*lo)));
            let end = dim_to_expr(&s[a].add_int(*lo))?;
            guard.push(Pred::Cmp(CmpOp::Lt, ax(a), end));
        }
    }
    let mut m = unguarded(t, mv::pad(&axes(t), pads).ok()?)?;
    m.guard = (!guard.is_empty()).then_some(Pred::And(guard));
    m.fill = Num(value);
    Some(m)
}

/// SHRINK from `lo` with `step`: index `lo_a + step_a·i_a`.
pub fn shrink_map(s: &[Dim], lo: &[Dim], step: &[i64], t: &[Dim]) -> Option<AccessMap> {
    if lo.len() != s.len() || step.len() != s.len() || t.len() != s.len() {
        return None;
    }
    unguarded(t, mv::shrink(&axes(t), lo, step).ok()?)
}

/// FLIP `axes`: index `s_a - 1 - i_a` on a flipped axis.
pub fn flip_map(s: &[Dim], flipped: &[usize]) -> Option<AccessMap> {
    flipped.iter().all(|a| *a < s.len()).then_some(())?;
    unguarded(s, mv::flip(&axes(s), flipped, s).ok()?)
}

/// VIEW: operand axis `j` reads `offset_j + Σ coeff·i`.
pub fn view_map(s: &[Dim], map: &[AffineIndex], t: &[Dim]) -> Option<AccessMap> {
    if map.len() != s.len() {
        return None;
    }
    unguarded(
        t,
        mv::view(&axes(t), map.iter().map(AffineIndex::row)).ok()?,
    )
}

/// `outer ∘ inner`: `inner` reads `x` with output axes = `outer`'s operand axes. The inner map's
/// axes are replaced by the outer index; guards conjoin when the fills agree bit for bit (else
/// `None`); a lone guard keeps its own fill.
pub fn compose(inner: &AccessMap, outer: &AccessMap) -> Option<AccessMap> {
    if outer.index.len() != inner.shape.len() {
        return None;
    }
    let sub = |n: &str| inner.axis_of(n).map(|k| outer.index[k].clone());
    let index = inner.index.iter().map(|e| e.substitute(&sub)).collect();
    let gi = inner.guard.as_ref().map(|g| g.substitute(&sub));
    let (guard, fill) = match (&outer.guard, gi) {
        (None, None) => (None, outer.fill),
        (Some(go), None) => (Some(go.clone()), outer.fill),
        (None, Some(gi)) => (Some(gi), inner.fill),
        (Some(go), Some(gi)) => {
            if go_bits(outer) != go_bits(inner) {
                return None;
            }
            (Some(Pred::And(vec![go.clone(), gi])), outer.fill)
        }
    };
    Some(AccessMap {
        shape: outer.shape.clone(),
        index,
        guard,
        fill,
    })
}

fn go_bits(a: &AccessMap) -> u64 {
    a.fill.0.to_bits()
}

/// The map in normal form, with fill 0 when there is no guard.
pub fn finish(a: &AccessMap) -> Option<AccessMap> {
    let mut a = simplify_access(a)?;
    if a.guard.is_none() {
        a.fill = Num(0.0);
    }
    Some(a)
}

/// Adds `(read x access)` to `eclass` when Tiny's typing gives it exactly `eclass`'s facts.
fn add_read(
    eg: &mut TensorGraph,
    eclass: Id,
    x: Id,
    access: AccessMap,
    rule: Symbol,
) -> Option<Id> {
    let leaf = eg.add(TensorLang::Attr(Attr::Access(access)));
    union_same_facts(eg, eclass, TensorLang::Read([x, leaf]), rule)
        .first()
        .copied()
}

/// The map of the matched view over its operand: `(eg, subst, operand shape, result shape)`.
type MapFn = fn(&TensorGraph, &Subst, &[Dim], &[Dim]) -> Option<AccessMap>;

/// Folds the matched view of `?x` into a `read`: directly when `?x` is a base class
/// (`direct`), else composed with each `read` over a base class that `?x`'s class holds.
struct ToRead {
    x: Var,
    map: MapFn,
    direct: bool,
}

impl Applier<TensorLang, IndexBook> for ToRead {
    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let y = eg.find(s[self.x]);
        let (Some(yf), Some(out)) = (tensor(eg, y), tensor(eg, eclass)) else {
            return vec![];
        };
        let Some(m) = (self.map)(eg, s, &yf.shape, &out.shape) else {
            return vec![];
        };
        let mut targets: Vec<(Id, AccessMap)> = Vec::new();
        if is_base(eg, y) {
            if self.direct {
                targets.push((y, m));
            }
        } else {
            for n in &eg[y].nodes {
                if let TensorLang::Read([x, a]) = n {
                    if let (true, Some(Attr::Access(inner))) = (is_base(eg, *x), attr(eg, *a)) {
                        if let Some(composed) = compose(inner, &m) {
                            targets.push((*x, composed));
                        }
                    }
                }
            }
        }
        let mut changed = Vec::new();
        for (x, a) in targets {
            if let Some(a) = finish(&a) {
                changed.extend(add_read(eg, eclass, x, a, rule));
            }
        }
        changed
    }
}

fn shape_of(eg: &TensorGraph, s: &Subst, v: &str) -> Option<Vec<Dim>> {
    match attr(eg, s[var(v)]) {
        Some(Attr::Shape(sh)) => Some(sh.to_vec()),
        _ => None,
    }
}

fn usizes_of(eg: &TensorGraph, s: &Subst, v: &str) -> Option<Vec<usize>> {
    attr(eg, s[var(v)]).and_then(|a| a.as_usizes())
}

fn reshape_fn(_: &TensorGraph, _: &Subst, s: &[Dim], t: &[Dim]) -> Option<AccessMap> {
    reshape_map(s, t)
}

fn permute_fn(eg: &TensorGraph, m: &Subst, s: &[Dim], t: &[Dim]) -> Option<AccessMap> {
    permute_map(s, &usizes_of(eg, m, "?p")?, t)
}

fn expand_fn(_: &TensorGraph, _: &Subst, s: &[Dim], t: &[Dim]) -> Option<AccessMap> {
    expand_map(s, t)
}

fn pad_fn(eg: &TensorGraph, m: &Subst, s: &[Dim], t: &[Dim]) -> Option<AccessMap> {
    match (attr(eg, m[var("?p")]), attr(eg, m[var("?v")])) {
        (Some(Attr::Pads(p)), Some(Attr::Num(v))) => pad_map(s, p, v.0, t),
        _ => None,
    }
}

fn shrink_fn(eg: &TensorGraph, m: &Subst, s: &[Dim], t: &[Dim]) -> Option<AccessMap> {
    let lo = shape_of(eg, m, "?lo")?;
    match attr(eg, m[var("?st")]) {
        Some(Attr::Ints(step)) => shrink_map(s, &lo, step, t),
        _ => None,
    }
}

fn flip_fn(eg: &TensorGraph, m: &Subst, s: &[Dim], _: &[Dim]) -> Option<AccessMap> {
    flip_map(s, &usizes_of(eg, m, "?a")?)
}

fn view_fn(eg: &TensorGraph, m: &Subst, s: &[Dim], t: &[Dim]) -> Option<AccessMap> {
    match attr(eg, m[var("?m")]) {
        Some(Attr::Map(map)) => view_map(s, map, t),
        _ => None,
    }
}

fn read_fn(eg: &TensorGraph, m: &Subst, _: &[Dim], _: &[Dim]) -> Option<AccessMap> {
    match attr(eg, m[var("?a")]) {
        Some(Attr::Access(a)) => Some(a.clone()),
        _ => None,
    }
}

fn to_read(map: MapFn) -> ToRead {
    ToRead {
        x: var("?x"),
        map,
        direct: true,
    }
}

/// Extraction cost that prefers `read` nodes: a movement e-node costs 1000, every other e-node 1
/// (plus its children), so a class folded into a `read` is extracted as that `read`.
#[derive(Clone, Copy, Debug, Default)]
pub struct PreferReads;

impl CostFunction<TensorLang> for PreferReads {
    type Cost = usize;

    fn cost<C: FnMut(Id) -> usize>(&mut self, enode: &TensorLang, mut costs: C) -> usize {
        let own = match enode {
            TensorLang::Read(_) => 1,
            n if n.is_movement() => 1000,
            _ => 1,
        };
        enode.fold(own, |sum, id| sum.saturating_add(costs(id)))
    }
}

/// Runs the rbssa phase on `prog` and extracts with [`PreferReads`]: every folded movement chain
/// comes back as one READ node.
pub fn fold_reads(prog: &Program, budget: &Budget) -> Result<(Program, PhaseStats), String> {
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, prog);
    let (eg, stats) = run_phase(eg, "rbssa", &rules(), budget);
    let ex = Extractor::new(&eg, PreferReads);
    let q = extract_program(&eg, prog, &class, &|c| ex.find_best_node(c).clone())
        .map_err(|e| format!("extraction after phase `rbssa`: {e}"))?;
    Ok((q, stats))
}

/// Names of the rbssa rules, in [`rules`] order.
pub const RULE_NAMES: [&str; 8] = [
    "reshape-to-read",
    "permute-to-read",
    "expand-to-read",
    "pad-to-read",
    "shrink-to-read",
    "flip-to-read",
    "view-to-read",
    "read-of-read",
];

/// The rbssa rule set (phase "rbssa").
pub fn rules() -> Vec<Rule> {
    vec![
        // reshape(x, t)[i] = x[split(flat_t(i))]   (row-major; floordiv/mod by constant strides).
        rw!("reshape-to-read"; "(reshape ?x ?s)" => { to_read(reshape_fn) }),
        // permute(x, p)[i] = x[j]  with  j[p[k]] = i_k.
        rw!("permute-to-read"; "(permute ?x ?p)" => { to_read(permute_fn) }),
        // expand(x, t)[i] = x[j]  with  j_a = 0 on a broadcast (size-1) axis, else i_a.
        rw!("expand-to-read"; "(expand ?x ?s)" => { to_read(expand_fn) }),
        // pad(x, p, v)[i] = (lo <= i < lo + shape(x)) ? x[i - lo] : v.
        rw!("pad-to-read"; "(pad ?x ?p ?v)" => { to_read(pad_fn) }),
        // shrink(x, lo, hi, st)[i] = x[lo + st·i].
        rw!("shrink-to-read"; "(shrink ?x ?lo ?hi ?st)" => { to_read(shrink_fn) }),
        // flip(x, A)[i] = x[j]  with  j_a = shape(x)_a - 1 - i_a for a in A, else i_a.
        rw!("flip-to-read"; "(flip ?x ?a)" => { to_read(flip_fn) }),
        // view(x, t, m)[i] = x[m(i)].
        rw!("view-to-read"; "(view ?x ?s ?m)" => { to_read(view_fn) }),
        // read(read(x, a1), a2) = read(x, a1 ∘ a2)   (guards conjoin; fills must agree).
        rw!("read-of-read"; "(read ?x ?a)" => { ToRead { x: var("?x"), map: read_fn, direct: false } }),
    ]
}

#[cfg(test)]
#[path = "rbssa_tests.rs"]
mod tests;
