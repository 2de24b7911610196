//! The attention pattern over two regions (see the parent module doc for the conditions).
//!
//! Matching works on *inlined* expressions: every `let` reference is replaced by its definition,
//! which is exact under the region semantics (a let used inside a reduce that rebinds one of its
//! free axes is evaluated at the rebound value, exactly what substitution gives). So the matcher
//! does not care how the optimizer split the softmax into lets.

use crate::index::{quasi_of_axis, Atom, Quasi};
use crate::ir::axis::{AxisExpr, CmpOp, Pred};
use crate::ir::dtype::DType;
use crate::ir::egraph::TensorLang;
use crate::ir::region::verify::children_mut;
use crate::ir::region::{BinaryFn, Expr, Materialize, Reduce, Region, UnaryFn};
use crate::ir::tiny::ReduceOp;
use std::collections::{BTreeMap, BTreeSet};
use unit::{one_query, unit_corr, unit_iter};

mod unit;

/// Inlining stops past this many expression nodes (a shared DAG could blow up).
const INLINE_BUDGET: usize = 20_000;

/// The exponential of the softmax.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Softmax {
    /// `exp(s - max)`.
    Exp,
    /// `exp2((s - max) · c)`, `c > 0`.
    Exp2(f64),
}

/// A score mask the template can skip whole key tiles of: a key `n` of query row `m` is kept
/// only where `dn·n + dm·m + dc ≤ 0` (causal `n ≤ m`: `(1, -1, 0)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mask {
    /// Coefficient of the key index `n`.
    pub dn: i64,
    /// Coefficient of the query index `m`.
    pub dm: i64,
    /// The constant term.
    pub dc: i64,
}

/// What [`super::pair`] found: the two regions and every piece the kernel needs.
#[derive(Clone, Debug)]
pub struct AttentionPair<'p> {
    /// The score/softmax region (writes the deferred probabilities).
    pub first: &'p Region,
    /// The `P·V` region.
    pub second: &'p Region,
    /// The deferred buffer between them.
    pub deferred: String,
    /// The contraction's let in `first` (the raw `Q·Kᵀ` dot product).
    pub acc: String,
    /// The score (inlined), with the contraction replaced by a reference to `acc`: the scale,
    /// the mask, anything the region applies between the dot product and the row max.
    pub score: Expr,
    /// The operand of the contraction that reads the query row (inlined; axes of `first`).
    pub q_side: Expr,
    /// The operand that reads the key row.
    pub k_side: Expr,
    /// `first`'s key iter (the softmax's row axis).
    pub key: String,
    /// `first`'s query iter.
    pub query: String,
    /// `first`'s other iters (batch, heads), in iter order.
    pub batch: Vec<String>,
    /// The contraction's (head-dim) axis and its extent.
    pub head_axis: String,
    /// Its extent (elements of one head).
    pub head_dim: u64,
    /// Which exponential the softmax of `first` uses.
    pub softmax: Softmax,
    /// A mask whose fully masked key tiles may be skipped.
    pub mask: Option<Mask>,
    /// The row sum is guarded (`where(sum == 0, 1, sum)`): a fully masked row gives zeros.
    pub safe_sum: bool,
    /// `second`'s contraction let, its reduce (key) axis and its output column iter.
    pub acc2: String,
    /// `second`'s reduce axis (the key axis again).
    pub key2: String,
    /// `second`'s output column iter (the value dimension).
    pub col: String,
    /// Extent of the value dimension.
    pub value_dim: u64,
    /// The `V` operand (inlined; axes of `second`).
    pub v_side: Expr,
    /// `first`'s iters (other than the key) → the axis of `second` at the same point.
    pub corr: BTreeMap<String, String>,
}

/// `e` with every let reference replaced by its definition (`None` past the budget or on an
/// unknown let).
pub fn inline(r: &Region, e: &Expr) -> Option<Expr> {
    let lets: BTreeMap<&str, &Expr> = r.lets.iter().map(|l| (l.name.as_str(), &l.expr)).collect();
    let mut budget = INLINE_BUDGET;
    inline_in(&lets, e, &mut budget)
}

fn inline_in(lets: &BTreeMap<&str, &Expr>, e: &Expr, budget: &mut usize) -> Option<Expr> {
    *budget = budget.checked_sub(1)?;
    let mut go = |x: &Expr| inline_in(lets, x, budget).map(Box::new);
    Some(match e {
        Expr::Let(n) => {
            let d = *lets.get(n.as_str())?;
            return inline_in(lets, d, budget);
        }
        Expr::Const(_) | Expr::Read { .. } | Expr::Index(_) => e.clone(),
        Expr::Unary(f, x) => Expr::Unary(*f, go(x)?),
        Expr::Binary(f, a, b) => Expr::Binary(*f, go(a)?, go(b)?),
        Expr::Cast { to, x } => Expr::Cast { to: *to, x: go(x)? },
        Expr::Where(c, a, b) => Expr::Where(go(c)?, go(a)?, go(b)?),
        Expr::Select {
            pred,
            then,
            otherwise,
        } => Expr::Select {
            pred: pred.clone(),
            then: go(then)?,
            otherwise: go(otherwise)?,
        },
        Expr::Gather {
            tensor,
            map,
            axis,
            index,
        } => Expr::Gather {
            tensor: tensor.clone(),
            map: map.clone(),
            axis: *axis,
            index: go(index)?,
        },
        Expr::BroadcastInDim {
            operand,
            result_shape,
            broadcast_dimensions,
        } => Expr::BroadcastInDim {
            operand: go(operand)?,
            result_shape: result_shape.clone(),
            broadcast_dimensions: broadcast_dimensions.clone(),
        },
        Expr::Transpose {
            operand,
            permutation,
        } => Expr::Transpose {
            operand: go(operand)?,
            permutation: permutation.clone(),
        },
        // A scan is never part of an attention pattern.
        Expr::Scan(_) => return None,
        Expr::Reduce(red) => {
            let body = inline_in(lets, &red.body, budget)?;
            Expr::Reduce(Box::new(Reduce {
                body,
                ..(**red).clone()
            }))
        }
    })
}

/// Every sub-expression of `e` (pre-order).
fn walk<'e>(e: &'e Expr, f: &mut dyn FnMut(&'e Expr)) {
    f(e);
    for c in crate::ir::region::verify::children(e) {
        walk(c, f);
    }
}

/// How many reduces `e` contains.
fn reduces(e: &Expr) -> usize {
    let mut n = 0;
    walk(e, &mut |x| n += usize::from(matches!(x, Expr::Reduce(_))));
    n
}

/// The axis (and symbol) names an inlined, reduce-free expression mentions.
fn mentions(e: &Expr) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    walk(e, &mut |x| {
        let mut add = |a: &AxisExpr| {
            a.for_each_name(&mut |n| {
                out.insert(n.to_string());
            })
        };
        match x {
            Expr::Read { map, .. } | Expr::Gather { map, .. } => map.iter().for_each(&mut add),
            Expr::Index(a) => add(a),
            Expr::Select { pred, .. } => pred.for_each_expr(&mut add),
            _ => {}
        }
    });
    out
}

/// Whether `e` reads tensor `t`.
fn reads(e: &Expr, t: &str) -> bool {
    let mut found = false;
    walk(e, &mut |x| {
        if let Expr::Read { tensor, .. } | Expr::Gather { tensor, .. } = x {
            found |= tensor == t;
        }
    });
    found
}

/// An fp32 reduce over one axis with the op's identity as init.
fn plain(red: &Reduce, op: ReduceOp) -> Option<&str> {
    let identity = super::super::super::scalar::identity(op, DType::F32);
    let init_ok = red.init.is_none_or(|i| i == identity);
    (red.op == op && red.dtype == Some(DType::F32) && red.axes.len() == 1 && init_ok)
        .then(|| red.axes[0].as_str())
}

/// The `(s − max)` of `exp`'s argument: `exp(x)` / `exp2(x · c)` / `exp2(c · x)`.
fn softmax_arg(e: &Expr) -> Option<(Softmax, &Expr)> {
    match e {
        Expr::Unary(UnaryFn::Exp, x) => Some((Softmax::Exp, x)),
        Expr::Unary(UnaryFn::Exp2, x) => match x.as_ref() {
            Expr::Binary(BinaryFn::Mul, a, b) => match (a.as_ref(), b.as_ref()) {
                (Expr::Const(c), d) | (d, Expr::Const(c)) if *c > 0.0 && c.is_finite() => {
                    Some((Softmax::Exp2(*c), d))
                }
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// `e` with the (first) node equal to `from` replaced by `to`.
fn replace(e: &Expr, from: &Expr, to: &Expr) -> Expr {
    if e == from {
        return to.clone();
    }
    let mut out = e.clone();
    for c in children_mut(&mut out) {
        *c = replace(c, from, to);
    }
    out
}

/// An index value or axis expression in the index algebra's form ([`Quasi`]) whose only
/// variables are the key and query axes: `n·key + m·query + c`.
type Aff = Quasi<i64, String>;

fn aff_axis(a: &AxisExpr, key: &str, query: &str) -> Option<Aff> {
    let q = quasi_of_axis(a).ok()?;
    q.terms
        .keys()
        .all(|t| matches!(t, Atom::Var(v) if v == key || v == query))
        .then_some(q)
}

fn aff_value(e: &Expr, key: &str, query: &str) -> Option<Aff> {
    match e {
        Expr::Index(a) => aff_axis(a, key, query),
        Expr::Const(c) if c.fract() == 0.0 && c.abs() < 1e9 => Some(Quasi::int(*c as i64)),
        Expr::Binary(BinaryFn::Add, a, b) => aff_value(a, key, query)?
            .try_add(&aff_value(b, key, query)?)
            .ok(),
        Expr::Binary(BinaryFn::Sub, a, b) => aff_value(a, key, query)?
            .try_sub(&aff_value(b, key, query)?)
            .ok(),
        _ => None,
    }
}

/// `a ≤ b` (`strict`: `a < b`) as a [`Mask`]: kept where `a − b (+1) ≤ 0`.
fn le(a: &Aff, b: &Aff, strict: bool, key: &str, query: &str) -> Option<Mask> {
    let d = a.try_sub(b).ok()?;
    let coeff = |v: &str| d.terms.get(&Atom::Var(v.to_string())).copied().unwrap_or(0);
    Some(Mask {
        dn: coeff(key),
        dm: coeff(query),
        dc: d.konst.checked_add(i64::from(strict))?,
    })
}

/// The mask of a comparison value `cond` (kept where it holds, or where it fails when
/// `negated`), when it is affine in the key and query axes.
fn cmp_mask(cond: &Expr, negated: bool, key: &str, query: &str) -> Option<Mask> {
    let Expr::Binary(f, a, b) = cond else {
        return None;
    };
    let (a, b) = (aff_value(a, key, query)?, aff_value(b, key, query)?);
    match (f, negated) {
        (BinaryFn::Cmple, false) => le(&a, &b, false, key, query),
        (BinaryFn::Cmplt, false) => le(&a, &b, true, key, query),
        (BinaryFn::Cmple, true) => le(&b, &a, true, key, query),
        (BinaryFn::Cmplt, true) => le(&b, &a, false, key, query),
        _ => None,
    }
}

/// The mask of an axis predicate (kept where it holds); of a conjunction, its first affine
/// conjunct (a tile it masks is masked by the whole conjunction).
fn pred_mask(p: &Pred, key: &str, query: &str) -> Option<Mask> {
    match p {
        Pred::And(ps) => ps.iter().find_map(|q| pred_mask(q, key, query)),
        Pred::Cmp(op, a, b) => {
            let (a, b) = (aff_axis(a, key, query)?, aff_axis(b, key, query)?);
            match op {
                CmpOp::Le => le(&a, &b, false, key, query),
                CmpOp::Lt => le(&a, &b, true, key, query),
                CmpOp::Ge => le(&b, &a, false, key, query),
                CmpOp::Gt => le(&b, &a, true, key, query),
                _ => None,
            }
        }
        _ => None,
    }
}

fn is_neg_inf(e: &Expr) -> bool {
    matches!(e, Expr::Const(c) if *c == f64::NEG_INFINITY)
}

/// The skippable mask at the top of the score: `where(cond, s, -INF)`, `where(cond, -INF, s)`
/// or `select(pred, s, -INF)`.
fn mask_of(score: &Expr, key: &str, query: &str) -> Option<Mask> {
    match score {
        Expr::Where(c, a, b) if is_neg_inf(b) && !is_neg_inf(a) => cmp_mask(c, false, key, query),
        Expr::Where(c, a, b) if is_neg_inf(a) && !is_neg_inf(b) => cmp_mask(c, true, key, query),
        Expr::Select {
            pred, otherwise, ..
        } if is_neg_inf(otherwise) => pred_mask(pred, key, query),
        _ => None,
    }
}

/// The score's kept branch and its whole mask, when the score is `where(cond, s, -INF)`,
/// `where(cond, -INF, s)` or `select(pred, s, -INF)` with `cond` / `pred` ONE affine comparison
/// of the key and query axes: then a key tile the mask keeps at every element computes `s`
/// alone (no comparison, no select).
pub fn kept_score<'e>(score: &'e Expr, key: &str, query: &str) -> Option<(&'e Expr, Mask)> {
    match score {
        Expr::Where(c, a, b) if is_neg_inf(b) && !is_neg_inf(a) => {
            Some((a, cmp_mask(c, false, key, query)?))
        }
        Expr::Where(c, a, b) if is_neg_inf(a) && !is_neg_inf(b) => {
            Some((b, cmp_mask(c, true, key, query)?))
        }
        Expr::Select {
            pred: pred @ Pred::Cmp(..),
            then,
            otherwise,
        } if is_neg_inf(otherwise) => Some((then, pred_mask(pred, key, query)?)),
        _ => None,
    }
}

/// `k` when `e` is `acc · k` or `k · acc` with `k` a positive finite constant (its fp32 value,
/// as the reference computes it).
fn scale_of(e: &Expr, acc: &str) -> Option<f64> {
    let Expr::Binary(BinaryFn::Mul, a, b) = e else {
        return None;
    };
    let k = match (a.as_ref(), b.as_ref()) {
        (Expr::Let(x), Expr::Const(k)) | (Expr::Const(k), Expr::Let(x)) if x == acc => *k,
        _ => return None,
    };
    let k = f64::from(k as f32);
    (k > 0.0 && k.is_finite()).then_some(k)
}

/// The score with its scale folded out: when the score is `acc · k` (`k > 0` a constant),
/// alone or as the kept branch of the skippable mask (`where(cond, acc·k, -INF)`,
/// `where(cond, -INF, acc·k)`, `select(pred, acc·k, -INF)`), the same score on the raw dot
/// product `acc`, and `k`. The softmax of `k·s` is the softmax of `s` with `k` folded into the
/// exponent's factor (`max(k·s) = k·max(s)` as `k > 0`, and `-INF` stays `-INF`), so the kernel
/// computes no scaled score.
pub fn fold_scale(score: &Expr, acc: &str) -> Option<(Expr, f64)> {
    let raw = || Box::new(Expr::Let(acc.to_string()));
    if let Some(k) = scale_of(score, acc) {
        return Some((*raw(), k));
    }
    match score {
        Expr::Where(c, a, b) if is_neg_inf(b) => {
            let k = scale_of(a, acc)?;
            Some((Expr::Where(c.clone(), raw(), b.clone()), k))
        }
        Expr::Where(c, a, b) if is_neg_inf(a) => {
            let k = scale_of(b, acc)?;
            Some((Expr::Where(c.clone(), a.clone(), raw()), k))
        }
        Expr::Select {
            pred,
            then,
            otherwise,
        } if is_neg_inf(otherwise) => {
            let k = scale_of(then, acc)?;
            Some((
                Expr::Select {
                    pred: pred.clone(),
                    then: raw(),
                    otherwise: otherwise.clone(),
                },
                k,
            ))
        }
        _ => None,
    }
}

/// `where(cmpeq(x, bad), good, x)` (either comparison order) → `(x, true)`; else `(e, false)`.
/// The lowering guards a softmax this way so that a fully masked row gives zeros.
fn unguard(e: &Expr, bad: f64, good: f64) -> (&Expr, bool) {
    let is = |x: &Expr, v: f64| matches!(x, Expr::Const(c) if *c == v);
    if let Expr::Where(c, g, x) = e {
        if let Expr::Binary(BinaryFn::Cmpeq, a, b) = c.as_ref() {
            let same = (a == x && is(b, bad)) || (b == x && is(a, bad));
            if same && is(g, good) {
                return (x, true);
            }
        }
    }
    (e, false)
}

/// A constant iter or reduce extent.
fn const_extent(r: &Region, red: &Reduce) -> Option<u64> {
    let sizes = crate::ir::region::verify::verify(r).ok()?.iter_sizes;
    let ext = crate::ir::region::verify::reduce_extents(r, red, &sizes, &r.name).ok()?;
    match ext.as_slice() {
        [d] => d.as_int().and_then(|v| u64::try_from(v).ok()),
        _ => None,
    }
}

/// The first region's part of the pattern.
struct First<'p> {
    acc: String,
    score: Expr,
    q_side: Expr,
    k_side: Expr,
    key: String,
    query: String,
    batch: Vec<String>,
    head_axis: String,
    head_dim: u64,
    softmax: Softmax,
    mask: Option<Mask>,
    safe_sum: bool,
    deferred: &'p str,
}

/// Whether `r` is the first region of an attention pair: scores, softmax and the deferred
/// buffer `P` (what `pair` matches on its first side).
pub fn is_first(r: &Region) -> bool {
    match_first(r).is_some()
}

/// Whether a kernel body (a term over Tiny IR e-nodes) can synthesize to a region [`is_first`]
/// accepts: `p = e / Σe` with `e = exp2(…(s − max s)…)` needs an `fdiv`, an `exp2` and two
/// reductions, since synthesis spells a region's division only from `fdiv` and its exponential
/// only from `exp2`. A necessary condition, checked before synthesizing (pricing asks it of
/// every kernel with a row epilogue: a GEMM + LayerNorm never is one).
pub fn body_may_be_first(body: &egg::RecExpr<TensorLang>) -> bool {
    let nodes = body.as_ref();
    let has = |f: fn(&TensorLang) -> bool| nodes.iter().any(f);
    nodes
        .iter()
        .filter(|m| matches!(m, TensorLang::Reduce(_)))
        .count()
        >= 2
        && has(|m| matches!(m, TensorLang::Fdiv(_)))
        && has(|m| matches!(m, TensorLang::Exp2(_)))
}

fn match_first(r: &Region) -> Option<First<'_>> {
    let [out] = r.outputs.as_slice() else {
        return None;
    };
    let [y] = r.yields.as_slice() else {
        return None;
    };
    if out.materialize != Materialize::Deferred || y.to != out.name || !out.dtype.is_float() {
        return None;
    }
    let p = inline(r, &Expr::Let(y.from.clone()))?;
    // p = e / sum_n(e)
    let Expr::Binary(BinaryFn::Div, e, sum) = &p else {
        return None;
    };
    let (sum, safe_sum) = unguard(sum, 0.0, 1.0);
    let Expr::Reduce(sum) = sum else {
        return None;
    };
    let key = plain(sum, ReduceOp::Sum)?;
    if sum.body != **e {
        return None;
    }
    // e = exp(s - max_n(s)) or exp2((s - max_n(s)) · c)
    let (softmax, arg) = softmax_arg(e)?;
    let Expr::Binary(BinaryFn::Sub, score, max) = arg else {
        return None;
    };
    // A guarded max (`-INF` → 0) is what the kernel computes anyway.
    let (max, _) = unguard(max, f64::NEG_INFINITY, 0.0);
    let Expr::Reduce(max) = max else {
        return None;
    };
    if plain(max, ReduceOp::Max)? != key || max.body != **score || reduces(score) != 1 {
        return None;
    }
    if !r.iters.iter().any(|i| i.name == key) {
        return None;
    }
    // The one reduce of the score: sum_k(a · b) over a head axis that is no iter.
    let mut contraction = None;
    walk(score, &mut |x| {
        if let Expr::Reduce(red) = x {
            contraction = Some(red.as_ref());
        }
    });
    let red = contraction?;
    let head_axis = plain(red, ReduceOp::Sum)?;
    if r.iters.iter().any(|i| i.name == head_axis) {
        return None;
    }
    let Expr::Binary(BinaryFn::Mul, a, b) = &red.body else {
        return None;
    };
    if reduces(a) + reduces(b) != 0 {
        return None;
    }
    let (ma, mb) = (mentions(a), mentions(b));
    let (q_side, k_side, mq, mk) = match (ma.contains(key), mb.contains(key)) {
        (false, true) => (a, b, ma, mb),
        (true, false) => (b, a, mb, ma),
        _ => return None,
    };
    let others: Vec<&str> = r
        .iters
        .iter()
        .map(|i| i.name.as_str())
        .filter(|n| *n != key)
        .collect();
    let query: Vec<&str> = others
        .iter()
        .copied()
        .filter(|n| !mk.contains(*n))
        .collect();
    let query = one_query(r, &query)?;
    let query = &query;
    let batch: Vec<String> = others
        .iter()
        .filter(|n| *n != query)
        .map(|s| s.to_string())
        .collect();
    if mq.contains(key) || mk.contains(*query) {
        return None;
    }
    // The contraction must be a let of its own (the kernel provides its value).
    let reduce_expr = Expr::Reduce(Box::new(red.clone()));
    let acc = r
        .lets
        .iter()
        .find(|l| inline(r, &l.expr).as_ref() == Some(&reduce_expr))?
        .name
        .clone();
    let head_dim = const_extent(r, red)?;
    let mask = mask_of(score, key, query);
    Some(First {
        acc: acc.clone(),
        score: replace(score, &reduce_expr, &Expr::Let(acc)),
        q_side: (**q_side).clone(),
        k_side: (**k_side).clone(),
        key: key.to_string(),
        query: query.to_string(),
        batch,
        head_axis: head_axis.to_string(),
        head_dim,
        softmax,
        mask,
        safe_sum,
        deferred: &out.name,
    })
}

/// The two regions as one attention, when they are (see the parent module doc).
pub fn pair<'p>(first: &'p Region, second: &'p Region) -> Option<AttentionPair<'p>> {
    let f = match_first(first)?;
    let t = f.deferred;
    // The one reduce of `second`: sum_k2(read t · v), and nothing else reads `t`.
    let (acc2, red) = second.lets.iter().find_map(|l| match &l.expr {
        Expr::Reduce(red) => Some((l.name.clone(), red.as_ref())),
        _ => None,
    })?;
    let total: usize = second.lets.iter().map(|l| reduces(&l.expr)).sum();
    if total != 1 {
        return None;
    }
    let key2 = plain(red, ReduceOp::Sum)?;
    let Expr::Binary(BinaryFn::Mul, a, b) = &red.body else {
        return None;
    };
    let is_t = |e: &Expr| matches!(e, Expr::Read { tensor, .. } if tensor == t);
    let (read, v) = match (is_t(a), is_t(b)) {
        (true, false) => (a.as_ref(), b.as_ref()),
        (false, true) => (b.as_ref(), a.as_ref()),
        _ => return None,
    };
    let Expr::Read { map, .. } = read else {
        return None;
    };
    let reads_t: usize = second
        .lets
        .iter()
        .map(|l| {
            let mut n = 0;
            walk(&l.expr, &mut |x| {
                n += usize::from(is_t(x) || matches!(x, Expr::Gather { tensor, .. } if tensor == t))
            });
            n
        })
        .sum();
    if reads_t != 1 || map.len() != first.iters.len() {
        return None;
    }
    let v_side = inline(second, v)?;
    if reads(&v_side, t) || reduces(&v_side) != 0 {
        return None;
    }
    // The read's map names one axis of `second` per iter of `first`: the key ↦ key2.
    // An iter of extent 1 may be read as index 0: it corresponds to an iter of extent 1 of
    // `second` that the map does not name (matched below, in order).
    let s1 = crate::ir::region::verify::verify(first).ok()?.iter_sizes;
    let s2 = crate::ir::region::verify::verify(second).ok()?.iter_sizes;
    let mut corr = BTreeMap::new();
    let mut image = BTreeSet::new();
    let mut unit_firsts = Vec::new();
    for (it, a) in first.iters.iter().zip(map) {
        let x = match a {
            AxisExpr::Name(x) => x,
            AxisExpr::Const(0) if it.name != f.key && unit_iter(first, &s1, &it.name) => {
                unit_firsts.push(it.name.clone());
                continue;
            }
            _ => return None,
        };
        if (it.name == f.key) != (x == key2) || !image.insert(x.clone()) {
            return None;
        }
        if it.name != f.key {
            corr.insert(it.name.clone(), x.clone());
        }
    }
    let size2 = |n: &str| {
        second
            .iters
            .iter()
            .position(|i| i.name == n)
            .map(|i| &s2[i])
    };
    for (i, it) in first.iters.iter().enumerate() {
        let Some(x) = corr.get(&it.name) else {
            continue;
        };
        if size2(x)? != &s1[i] {
            return None;
        }
    }
    let key_pos = first.iters.iter().position(|i| i.name == f.key)?;
    let key_extent =
        crate::ir::region::verify::reduce_extents(second, red, &s2, &second.name).ok()?;
    if key_extent.as_slice() != [s1[key_pos].clone()] {
        return None;
    }
    let cols: Vec<&str> = second
        .iters
        .iter()
        .map(|i| i.name.as_str())
        .filter(|n| !image.contains(*n))
        .collect();
    let col = unit_corr(second, &s2, &cols, &unit_firsts, &mut corr)?;
    let value_dim = size2(&col)?.as_int().and_then(|v| u64::try_from(v).ok())?;
    let q2 = corr.get(&f.query)?;
    let mv = mentions(&v_side);
    if mv.contains(q2.as_str()) || second.iters.iter().any(|i| i.name == key2) {
        return None;
    }
    Some(AttentionPair {
        first,
        second,
        deferred: t.to_string(),
        acc: f.acc,
        score: f.score,
        q_side: f.q_side,
        k_side: f.k_side,
        key: f.key,
        query: f.query,
        batch: f.batch,
        head_axis: f.head_axis,
        head_dim: f.head_dim,
        softmax: f.softmax,
        mask: f.mask,
        safe_sum: f.safe_sum,
        acc2,
        key2: key2.to_string(),
        col,
        value_dim,
        v_side,
        corr,
    })
}

#[cfg(test)]
mod body_tests {
    use super::body_may_be_first;

    fn term(s: &str) -> egg::RecExpr<crate::ir::egraph::TensorLang> {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn only_a_softmax_shaped_body_may_start_an_attention_pair() {
        let x = "(input @x fp32 [4,8])";
        let e = format!("(exp2 (mul (sub {x} (expand (reduce max #[1] fp32 {x}) [4,8])) 1.4427))");
        let softmax = format!("(fdiv {e} (expand (reduce sum #[1] fp32 {e}) [4,8]))");
        assert!(body_may_be_first(&term(&softmax)));
        // A LayerNorm-like row epilogue: two reductions and a division, no exponential.
        let mean = format!("(fdiv (reduce sum #[1] fp32 {x}) 8)");
        let d = format!("(sub {x} (expand {mean} [4,8]))");
        let var = format!("(reduce sum #[1] fp32 (mul {d} {d}))");
        let ln = format!("(fdiv {d} (expand (sqrt {var}) [4,8]))");
        assert!(!body_may_be_first(&term(&ln)));
        // exp2 and a division over one reduction (an unnormalized score).
        assert!(!body_may_be_first(&term(&format!("(fdiv {e} 2)"))));
    }
}
