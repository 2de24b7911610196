//! SRNF — single-reduce normal form (seed 001 §6.6): merge nested reductions of the same op (R0),
//! hoist factors that do not depend on the reduced axes out of the reduction (R1), optionally
//! distribute a sum over an addition (R2), and drop reductions over size-1 axes.
//!
//! Assumptions (every rule below relies on these, and on nothing else):
//! - Semantics are Tiny IR's reference evaluator: REDUCE drops its axes (keepdim = false), starts
//!   from the op's identity and folds `acc = round_acc(acc ⊕ round_acc(x))` in order; elementwise
//!   ops compute in `f64` and round to the node dtype; MAX/MIN propagate NaN. Values are finite
//!   (an `inf - inf` created by a hoist is outside the contract; see the TODO at [`rules`]).
//!   The sign of a zero is kept: a sum starts from `+0`, so it is never `-0`
//!   (`sum([-0.0]) = +0.0`). A sum over unit axes becomes `x + 0`, not `x`, and a sum hoist
//!   builds `(Σ x)·g + 0` (with `g < 0` and `Σ x = +0`, `(Σ x)·g` alone is `-0`, which
//!   `rsqrt`/`recip` downstream turn into `-inf` where the reference gives `+inf`).
//! - Facts come from the IndexBook: a reduced axis is "invariant" for a factor `g` only when
//!   `expand(g, s)` reads `g` with the constant size 1 on that axis (`Dim` equality); a symbolic
//!   size that might be 1 does not count.
//! - Sizes, symbolic ones included, may be 0: a sum hoist needs every summed extent provably
//!   `>= 1` (`Dim::is_positive`), since `Σ_∅ x/g = 0` while `(Σ_∅ x)/g` is NaN for `g = 0`.
//! - Appliers type-check every node they build with Tiny's rules and union only a node whose
//!   facts equal the matched class's (`helpers::union_same_facts`).
//!
//! Exact vs. within tolerance:
//! - Exact: `reduce-merge` for max/min, `reduce-of-unit-axes`, `reduce-hoist-invariant-add` /
//!   `-sub` when the body dtype is the accumulation dtype (rounding is monotone, so
//!   `max_i round(x_i + g) = round(max_i x_i + g)`).
//! - Within tolerance (`Compare::Close`): `reduce-merge` for sum/prod (reassociation), every
//!   multiplicative hoist (`sum(x·g) = g·sum(x)` rounds differently), `reduce-distribute-add`,
//!   and the additive hoists when the body is narrower than the accumulator.
//!
//! Seed rules and where they live:
//! - R0 `reduce-merge`: `reduce(op,K1){reduce(op,K2){E}} → reduce(op,K1∪K2){E}`, same op and same
//!   accumulation dtype (the pattern shares `?op` and `?acc`). The outer axes number the inner
//!   result, which lacks `K2`, so they are mapped back to `E`'s axes.
//! - R1 the `reduce-hoist-*` rules. R2 `reduce-distribute-add`: nothing in any phase factors a
//!   sum of reductions back, so it cannot ping-pong; each application strictly shrinks the body it
//!   reduces, so it terminates.
//! - R3 (post-ewise epilogue) is not a rule of its own: the hoists *produce* it (the invariant
//!   factor is applied to the accumulator outside the reduce), and the `epilogue` phase then sinks
//!   casts so those post-reduce ops run on the fp32 accumulator.
//! - R4 (different ops never merge) is structural: `reduce-merge` matches only one `?op` leaf, and
//!   no rule moves a reduce through an elementwise op, so softmax's `max → exp2 → sum` stays three
//!   stages (tests: `reduce_merge_near_miss`, `softmax_reductions_never_merge`).

use super::helpers::{cast_to, dtype_attr, ints, leaf, num, try_add, union_same_facts, var, when};
use super::{attr, tensor, Rule};
use crate::ir::dim::Dim;
use crate::ir::egraph::{Attr, IndexBook, TensorGraph, TensorLang};
use crate::ir::tiny::{BinaryOp, ReduceOp};
use egg::{rewrite as rw, Applier, Id, PatternAst, Subst, Symbol, Var};

/// `reduce(op, K1, acc, reduce(op, K2, acc, E)) = reduce(op, K2 ∪ map(K1), acc, E)`.
struct MergeReduce {
    op: Var,
    k1: Var,
    k2: Var,
    acc: Var,
    e: Var,
}

impl Applier<TensorLang, IndexBook> for MergeReduce {
    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let (Some(k1), Some(k2), Some(ef)) = (
            ints(eg, s[self.k1]),
            ints(eg, s[self.k2]),
            tensor(eg, s[self.e]),
        ) else {
            return vec![];
        };
        let rank = ef.shape.len();
        let remaining: Vec<usize> = (0..rank).filter(|a| !k2.contains(a)).collect();
        let mut all = k2.clone();
        for j in &k1 {
            match remaining.get(*j) {
                Some(a) => all.push(*a),
                None => return vec![],
            }
        }
        all.sort_unstable();
        all.dedup();
        let axes = leaf(eg, Attr::usizes(&all));
        let node = TensorLang::Reduce([s[self.op], axes, s[self.acc], s[self.e]]);
        union_same_facts(eg, eclass, node, rule)
    }
}

/// `reduce(op, K, acc, x) = reshape(cast(x, acc), shape(x) \ K)` when every axis in `K` has size 1.
struct UnitAxes {
    op: Var,
    k: Var,
    acc: Var,
    x: Var,
}

impl Applier<TensorLang, IndexBook> for UnitAxes {
    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let (Some(k), Some(acc), Some(xf)) = (
            ints(eg, s[self.k]),
            dtype_attr(eg, s[self.acc]),
            tensor(eg, s[self.x]).cloned(),
        ) else {
            return vec![];
        };
        if k.iter()
            .any(|a| !xf.shape.get(*a).is_some_and(|d| d.is_int(1)))
        {
            return vec![];
        }
        let Some(c) = cast_to(eg, s[self.x], acc) else {
            return vec![];
        };
        // A sum over unit axes is `0 + x`: the same value except that -0.0 becomes +0.0, which
        // `recip`/`rsqrt` downstream turn into +inf instead of -inf.
        let c = if matches!(attr(eg, s[self.op]), Some(Attr::Op(ReduceOp::Sum))) {
            let zero = leaf(eg, Attr::num(0.0));
            match try_add(eg, TensorLang::Add([c, zero])) {
                Some(z) => z,
                None => return vec![],
            }
        } else {
            c
        };
        let out: Vec<Dim> = drop_axes(&xf.shape, &k);
        if out == xf.shape {
            // Nothing reduced and nothing reshaped: the reduce is the (cast) value itself.
            let same = tensor(eg, c) == tensor(eg, eclass);
            return if same && eg.union_trusted(eclass, c, rule) {
                vec![eclass]
            } else {
                vec![]
            };
        }
        let sh = leaf(eg, Attr::Shape(out.into()));
        union_same_facts(eg, eclass, TensorLang::Reshape([c, sh]), rule)
    }
}

fn drop_axes(shape: &[Dim], k: &[usize]) -> Vec<Dim> {
    shape
        .iter()
        .enumerate()
        .filter(|(a, _)| !k.contains(a))
        .map(|(_, d)| d.clone())
        .collect()
}

/// Which reduce ops a hoist applies to.
#[derive(Clone, Copy)]
enum Ops {
    Sum,
    MaxMin,
}

/// `reduce(op, K, acc, x ∘ expand(g, s)) = reduce(op, K, acc, x) ∘ expand(reshape(cast(g, acc)))`
/// when `g` has size 1 on every reduced axis (so the factor is constant along `K`). With
/// `left`, the factor is the first operand of `∘` and stays first.
struct Hoist {
    bin: BinaryOp,
    ops: Ops,
    left: bool,
    op: Var,
    k: Var,
    acc: Var,
    x: Var,
    g: Var,
}

impl Applier<TensorLang, IndexBook> for Hoist {
    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        s: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let rop = match attr(eg, s[self.op]) {
            Some(Attr::Op(o)) => *o,
            _ => return vec![],
        };
        let op_ok = match self.ops {
            Ops::Sum => rop == ReduceOp::Sum,
            Ops::MaxMin => matches!(rop, ReduceOp::Max | ReduceOp::Min),
        };
        let (Some(k), Some(acc), Some(gf), Some(xf)) = (
            ints(eg, s[self.k]),
            dtype_attr(eg, s[self.acc]),
            tensor(eg, s[self.g]).cloned(),
            tensor(eg, s[self.x]),
        ) else {
            return vec![];
        };
        // A sum over an empty range differs: Σ_∅ x/g = 0 but (Σ_∅ x)/0 = NaN (a softmax over a
        // slice bound to size 0, summed), so every summed extent must be provably ≥ 1. (max/min
        // start from ∓inf, and ∓inf ∘ g = ∓inf for finite g.)
        let nonempty = k
            .iter()
            .all(|a| xf.shape.get(*a).is_some_and(Dim::is_positive));
        if !op_ok
            || (matches!(self.ops, Ops::Sum) && !nonempty)
            || k.iter()
                .any(|a| !gf.shape.get(*a).is_some_and(|d| d.is_int(1)))
        {
            return vec![];
        }
        let Some(out) = tensor(eg, eclass).map(|f| f.shape.clone()) else {
            return vec![];
        };
        let red = TensorLang::Reduce([s[self.op], s[self.k], s[self.acc], s[self.x]]);
        let Some(red) = try_add(eg, red) else {
            return vec![];
        };
        let Some(mut g) = cast_to(eg, s[self.g], acc) else {
            return vec![];
        };
        let squeezed = drop_axes(&gf.shape, &k);
        if squeezed != gf.shape {
            let sh = leaf(eg, Attr::Shape(squeezed.clone().into()));
            let Some(r) = try_add(eg, TensorLang::Reshape([g, sh])) else {
                return vec![];
            };
            g = r;
        }
        if squeezed != out {
            let sh = leaf(eg, Attr::Shape(out.into()));
            let Some(e) = try_add(eg, TensorLang::Expand([g, sh])) else {
                return vec![];
            };
            g = e;
        }
        let c = if self.left { [g, red] } else { [red, g] };
        let hoisted = match self.ops {
            Ops::MaxMin => TensorLang::binary(self.bin, c),
            // A sum starts from +0 and is never -0 (`+0 + -0 = +0`), but `(Σ x)·g` is -0 when
            // `Σ x = +0` and `g < 0`: `+ 0` maps -0 to +0 and leaves every other value as it is.
            Ops::Sum => {
                let Some(v) = try_add(eg, TensorLang::binary(self.bin, c)) else {
                    return vec![];
                };
                TensorLang::Add([v, leaf(eg, Attr::num(0.0))])
            }
        };
        union_same_facts(eg, eclass, hoisted, rule)
    }
}

fn hoist(bin: BinaryOp, ops: Ops, left: bool) -> Hoist {
    Hoist {
        bin,
        ops,
        left,
        op: var("?op"),
        k: var("?k"),
        acc: var("?acc"),
        x: var("?x"),
        g: var("?g"),
    }
}

/// `?c` is a finite immediate (a number leaf): `(Σ_∅ x)·inf` is NaN where `Σ_∅ x·inf` is 0.
fn is_finite_imm(c: &str) -> impl Fn(&mut TensorGraph, Id, &Subst) -> bool {
    let c = var(c);
    when(move |eg, m| num(eg, m[c]).is_some_and(f64::is_finite))
}

/// `?a` and `?b` are tensor classes (not immediates).
fn tensors(a: &str, b: &str) -> impl Fn(&mut TensorGraph, Id, &Subst) -> bool {
    let (a, b) = (var(a), var(b));
    when(move |eg, m| tensor(eg, m[a]).is_some() && tensor(eg, m[b]).is_some())
}

/// Names of the SRNF rules, in [`rules`] order.
pub const RULE_NAMES: [&str; 9] = [
    "reduce-merge",
    "reduce-of-unit-axes",
    "reduce-hoist-invariant-mul",
    "reduce-hoist-invariant-mul-left",
    "reduce-hoist-scalar-mul",
    "reduce-hoist-invariant-div",
    "reduce-hoist-invariant-add",
    "reduce-hoist-invariant-sub",
    "reduce-distribute-add",
];

/// The rules that reassociate floating-point arithmetic across a reduction: exact for finite
/// values only (`Σ_K x·g` and `(Σ_K x)·g` differ when a term is infinite, NaN or overflows: with
/// `g = inf`, `x = [1, -1, 0.5]`, NaN against inf; a region cannot check values before choosing
/// a form). The optimizer runs them only under `--fast-math` ([`exact_rules`] leaves them out),
/// as C compilers reassociate only under `-ffast-math`.
pub const FAST_MATH_RULES: [&str; 4] = [
    "reduce-hoist-invariant-mul",
    "reduce-hoist-invariant-mul-left",
    "reduce-hoist-scalar-mul",
    "reduce-hoist-invariant-div",
];

/// The SRNF rules that hold for every value, infinities and NaN included: [`rules`] without
/// [`FAST_MATH_RULES`].
pub fn exact_rules() -> Vec<Rule> {
    rules()
        .into_iter()
        .filter(|r| !FAST_MATH_RULES.contains(&r.name.as_str()))
        .collect()
}

/// The SRNF rule set, the [`FAST_MATH_RULES`] included.
pub fn rules() -> Vec<Rule> {
    vec![
        // R0: reduce(op, K1, reduce(op, K2, E)) = reduce(op, K2 ∪ K1', E)   (K1' = K1 in E's axes).
        rw!("reduce-merge"; "(reduce ?op ?k1 ?acc (reduce ?op ?k2 ?acc ?e))" =>
            { MergeReduce { op: var("?op"), k1: var("?k1"), k2: var("?k2"), acc: var("?acc"), e: var("?e") } }),
        // reduce(op, K, x) = reshape(cast(x, acc))   when every axis in K has size 1 (for a sum,
        // reshape(cast(x, acc) + 0), which is exact for -0.0 too).
        rw!("reduce-of-unit-axes"; "(reduce ?op ?k ?acc ?x)" =>
            { UnitAxes { op: var("?op"), k: var("?k"), acc: var("?acc"), x: var("?x") } }),
        // The four multiplicative hoists below are FAST_MATH_RULES: exact for finite values only.
        // R1: Σ_K x·bcast(g) = (Σ_K x)·g + 0   when g is constant along K and K is nonempty.
        rw!("reduce-hoist-invariant-mul"; "(reduce ?op ?k ?acc (mul ?x (expand ?g ?s)))" =>
            { hoist(BinaryOp::Mul, Ops::Sum, false) }),
        // R1: Σ_K bcast(g)·x = g·(Σ_K x) + 0   when g is constant along K and K is nonempty.
        rw!("reduce-hoist-invariant-mul-left"; "(reduce ?op ?k ?acc (mul (expand ?g ?s) ?x))" =>
            { hoist(BinaryOp::Mul, Ops::Sum, true) }),
        // R1: Σ_K x·c = (Σ_K x)·c + 0   for a finite immediate c.
        rw!("reduce-hoist-scalar-mul"; "(reduce sum ?k ?acc (mul ?x ?c))" =>
            "(add (mul (reduce sum ?k ?acc ?x) ?c) 0)" if is_finite_imm("?c")),
        // R1: Σ_K x / bcast(g) = (Σ_K x) / g + 0   when g is constant along K and K is nonempty.
        rw!("reduce-hoist-invariant-div"; "(reduce ?op ?k ?acc (fdiv ?x (expand ?g ?s)))" =>
            { hoist(BinaryOp::Fdiv, Ops::Sum, false) }),
        // R1: max_K (x + bcast(g)) = max_K x + g   (min likewise) when g is constant along K.
        rw!("reduce-hoist-invariant-add"; "(reduce ?op ?k ?acc (add ?x (expand ?g ?s)))" =>
            { hoist(BinaryOp::Add, Ops::MaxMin, false) }),
        // R1: max_K (x - bcast(g)) = max_K x - g   (min likewise) when g is constant along K.
        rw!("reduce-hoist-invariant-sub"; "(reduce ?op ?k ?acc (sub ?x (expand ?g ?s)))" =>
            { hoist(BinaryOp::Sub, Ops::MaxMin, false) }),
        // R2: Σ_K (a + b) = Σ_K a + Σ_K b.
        rw!("reduce-distribute-add"; "(reduce sum ?k ?acc (add ?a ?b))" =>
            "(add (reduce sum ?k ?acc ?a) (reduce sum ?k ?acc ?b))" if tensors("?a", "?b")),
    ]
}

#[cfg(test)]
#[path = "srnf_tests.rs"]
mod tests;
