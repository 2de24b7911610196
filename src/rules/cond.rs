//! Side conditions for rules: each returns a closure egg accepts as a [`egg::Condition`]
//! (`rw!("name"; "lhs" => "rhs" if cond)`), reading facts from the IndexBook analysis only —
//! never from which e-nodes a class happens to hold.
//!
//! Pattern variables are given by name (`"?x"`); a variable bound to an attribute leaf is read
//! as that attribute, one bound to a tensor class as its dtype and shape. A condition whose
//! variable is bound to the wrong kind of class (a tensor where an attribute is expected) is
//! false, so the rule does not fire. A fact that cannot be decided (a symbolic size compared
//! with a number) is false too: a rule that cannot prove its side condition does not fire.
//!
//! ```
//! use dlc_egg::rules::cond::{dtype_of, same_shape};
//! use dlc_egg::rules::Rule;
//! use dlc_egg::ir::dtype::DType;
//! use egg::rewrite as rw;
//!
//! // max(x, x) = x, always; x - y where both are fp32 tensors of one shape …
//! let idem: Rule = rw!("max-idem"; "(max ?x ?x)" => "?x");
//! let guarded: Rule = rw!("sub-self"; "(sub ?x ?y)" => "(mul ?x 0)"
//!     if same_shape("?x", "?y") if dtype_of("?x", DType::F32));
//! # let _ = (idem, guarded);
//! ```

use super::helpers::{var, when};
use super::{attr, tensor};
use crate::ir::dtype::DType;
use crate::ir::egraph::{Attr, TensorGraph};
use egg::{Id, Subst};

/// The type of every condition here: what `rw!(… if c)` accepts.
pub trait Cond: Fn(&mut TensorGraph, Id, &Subst) -> bool {}
impl<F: Fn(&mut TensorGraph, Id, &Subst) -> bool> Cond for F {}

/// `shape(?x) = ?s` where `?s` is bound to a shape leaf (`[M,1,K]`), by symbolic equality.
pub fn shape_is(x: &str, s: &str) -> impl Cond {
    let (x, s) = (var(x), var(s));
    when(move |eg, m| match (tensor(eg, m[x]), attr(eg, m[s])) {
        (Some(f), Some(Attr::Shape(sh))) => f.shape[..] == sh[..],
        _ => false,
    })
}

/// `dtype(?x) = ?d` where `?d` is bound to a dtype leaf (`fp16`).
pub fn dtype_is(x: &str, d: &str) -> impl Cond {
    let (x, d) = (var(x), var(d));
    when(move |eg, m| match (tensor(eg, m[x]), attr(eg, m[d])) {
        (Some(f), Some(Attr::DType(d))) => f.dtype == *d,
        _ => false,
    })
}

/// `dtype(?x)` is the given dtype.
pub fn dtype_of(x: &str, d: DType) -> impl Cond {
    let x = var(x);
    when(move |eg, m| tensor(eg, m[x]).is_some_and(|f| f.dtype == d))
}

/// `?x` is a floating-point tensor (fp16, bf16, fp32).
pub fn is_float(x: &str) -> impl Cond {
    let x = var(x);
    when(move |eg, m| tensor(eg, m[x]).is_some_and(|f| f.dtype.is_float()))
}

/// `?x` and `?y` are tensors of the same (symbolic) shape.
pub fn same_shape(x: &str, y: &str) -> impl Cond {
    let (x, y) = (var(x), var(y));
    when(move |eg, m| match (tensor(eg, m[x]), tensor(eg, m[y])) {
        (Some(a), Some(b)) => a.shape == b.shape,
        _ => false,
    })
}

/// `?x` and `?y` are tensors of the same dtype.
pub fn same_dtype(x: &str, y: &str) -> impl Cond {
    let (x, y) = (var(x), var(y));
    when(move |eg, m| match (tensor(eg, m[x]), tensor(eg, m[y])) {
        (Some(a), Some(b)) => a.dtype == b.dtype,
        _ => false,
    })
}

/// `?x` is a tensor of rank `rank`.
pub fn rank_is(x: &str, rank: usize) -> impl Cond {
    let x = var(x);
    when(move |eg, m| tensor(eg, m[x]).is_some_and(|f| f.shape.len() == rank))
}

/// `?x` is a tensor whose every size is a known integer (no symbols).
pub fn is_static(x: &str) -> impl Cond {
    let x = var(x);
    when(move |eg, m| {
        tensor(eg, m[x]).is_some_and(|f| f.shape.iter().all(|d| d.as_int().is_some()))
    })
}

/// `?v` is bound to a number leaf equal to `value` (compared by value: `0.0 == -0.0`).
pub fn num_is(v: &str, value: f64) -> impl Cond {
    let v = var(v);
    when(move |eg, m| matches!(attr(eg, m[v]), Some(Attr::Num(n)) if n.0 == value))
}

/// `?p` is the identity permutation of `shape(?x)`'s rank.
pub fn identity_perm(x: &str, p: &str) -> impl Cond {
    let (x, p) = (var(x), var(p));
    when(
        move |eg, m| match (tensor(eg, m[x]), attr(eg, m[p]).and_then(|a| a.as_usizes())) {
            (Some(f), Some(p)) => {
                p.len() == f.shape.len() && p.iter().enumerate().all(|(i, v)| i == *v)
            }
            _ => false,
        },
    )
}

/// `?a` and `?b` are integer lists of the same set of axes.
pub fn same_axes(a: &str, b: &str) -> impl Cond {
    let (a, b) = (var(a), var(b));
    let ints = |eg: &TensorGraph, id: Id| attr(eg, id).and_then(|a| a.as_usizes());
    when(move |eg, m| match (ints(eg, m[a]), ints(eg, m[b])) {
        (Some(mut a), Some(mut b)) => {
            a.sort_unstable();
            b.sort_unstable();
            a == b
        }
        _ => false,
    })
}

/// `?a` is an empty integer list (no axes).
pub fn no_axes(a: &str) -> impl Cond {
    let a = var(a);
    when(move |eg, m| {
        attr(eg, m[a])
            .and_then(|a| a.as_usizes())
            .is_some_and(|v| v.is_empty())
    })
}

/// Both conditions hold (egg's `if a if b` says the same; this is for building conditions in
/// code).
pub fn both(a: impl Cond, b: impl Cond) -> impl Cond {
    move |eg: &mut TensorGraph, id: Id, s: &Subst| a(eg, id, s) && b(eg, id, s)
}

/// Turns a predicate over the analysis and the match into a condition (the building block of
/// every condition here): `when(|eg, m| …)` reads facts through [`super::tensor`] and
/// [`super::attr`] of `m[var]`.
pub fn from_fn(f: impl Fn(&TensorGraph, &Subst) -> bool) -> impl Cond {
    when(f)
}
