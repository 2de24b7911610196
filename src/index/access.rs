//! A normal form for the index expressions of [`AccessMap`]s (seed 001 §4.3), so that folded
//! movement chains stay small: an expression is a linear combination `Σ coeff·atom + const` whose
//! coefficients and constant are axis-free sizes ([`Dim`], symbols included) and whose atoms are
//! output axes `i<k>` and `floordiv(normal form, c)` with `c > 0`.
//!
//! The form and its floordiv simplifier are the index algebra's ([`crate::index`]): this module
//! only converts [`AxisExpr`]s to and from it and decides guards. Simplifications (all exact on
//! integers):
//! - like atoms merge, so `c*(e//c) + (e - c*(e//c)) = e`;
//! - `(c*q + r)//c = q + r//c` for integer `q` (the multiples of `c` leave the floor), then the
//!   rest is reduced by the gcd of its integer coefficients and the divisor;
//! - `r//c = k` when `floor(lo/c) = floor(hi/c) = k` for provable bounds `lo <= r <= hi` (output
//!   axis `i<k>` ranges over `[0, size_k - 1]`); `(e//a)//b = e//(a·b)`;
//! - guard comparisons provably true everywhere on the output domain are dropped (so `0 <= i_k`
//!   and `i_k < size_k` vanish); a guard that is always true becomes no guard.
//!
//! Output axes of a map of rank `r` are `i0..i{r-1}`; every other name is a size symbol (`>= 0`).

use crate::index::axis::{axis_name, AccessMap, AxisExpr, CmpOp, Pred};
use crate::index::dim::Dim;
use crate::index::{self, simplify, Facts, Quasi};

/// An atom of a linear form: output axis `i<k>`, or `floor(e / c)`, `c > 0` (the index
/// algebra's variable and floor atoms).
type Term = index::Atom<Dim, usize>;

/// `Σ coeff·term + konst`: the index algebra's form over output axes.
pub(crate) type Lin = Quasi<Dim, usize>;

/// `a + s·b` (symbolic coefficients do not overflow).
fn add_scaled(a: &Lin, b: &Lin, s: &Dim) -> Lin {
    let t = b.try_scale(s).unwrap_or_default();
    a.try_add(&t).unwrap_or_default()
}

/// Sizes of the output axes: the domain the simplifier proves facts on.
struct Ctx<'a> {
    sizes: &'a [Dim],
}

impl Facts<Dim, usize> for Ctx<'_> {
    fn range(&self, k: &usize) -> Option<(Dim, Dim)> {
        Some((Dim::int(0), self.sizes.get(*k)?.add_int(-1)))
    }
}

impl Ctx<'_> {
    fn axis_of(&self, n: &str) -> Option<usize> {
        let k: usize = n.strip_prefix('i')?.parse().ok()?;
        (k < self.sizes.len() && axis_name(k) == n).then_some(k)
    }

    /// The linear form of `e`; `None` when `e` is not affine + floordiv (a product of two axis
    /// terms, a non-positive divisor, an out-of-range axis name).
    fn lin(&self, e: &AxisExpr) -> Option<Lin> {
        Some(match e {
            AxisExpr::Const(c) => Lin::int(*c),
            AxisExpr::Name(n) => match self.axis_of(n) {
                Some(k) => Lin::var(k),
                None if looks_like_axis(n) => return None,
                None => Lin::constant(Dim::sym(n)),
            },
            AxisExpr::Add(ts) => {
                let mut out = Lin::default();
                for t in ts {
                    out = add_scaled(&out, &self.lin(t)?, &Dim::int(1));
                }
                out
            }
            AxisExpr::Mul(a, b) => {
                let (a, b) = (self.lin(a)?, self.lin(b)?);
                if a.terms.is_empty() {
                    add_scaled(&Lin::default(), &b, &a.konst)
                } else if b.terms.is_empty() {
                    add_scaled(&Lin::default(), &a, &b.konst)
                } else {
                    return None;
                }
            }
            AxisExpr::FloorDiv(x, c) if *c > 0 => {
                simplify::floordiv(&self.lin(x)?, &Dim::int(*c), self).ok()?
            }
            AxisExpr::FloorDiv(..) => return None,
            // Axis-free only: the min/max of two sizes is a size.
            AxisExpr::Min(a, b) | AxisExpr::Max(a, b) => {
                let (a, b) = (self.lin(a)?, self.lin(b)?);
                if !a.terms.is_empty() || !b.terms.is_empty() {
                    return None;
                }
                Lin::constant(match e {
                    AxisExpr::Min(..) => a.konst.min_of(&b.konst),
                    _ => a.konst.max_of(&b.konst),
                })
            }
        })
    }

    /// Provable `(lo, hi)` with `lo <= l <= hi` on the whole output domain (vacuous when some
    /// size is 0), or `None` when a coefficient's sign is unknown.
    fn bounds(&self, l: &Lin) -> Option<(Dim, Dim)> {
        simplify::range(l, self)
    }

    /// The comparison `d op 0`: decided when the bounds prove it, else kept.
    fn cmp(&self, op: CmpOp, d: &Lin) -> Option<Truth> {
        if let Some((lo, hi)) = self.bounds(d) {
            let nonneg = |x: &Dim| x.is_nonneg();
            let (always, never) = match op {
                CmpOp::Ge => (nonneg(&lo), nonneg(&hi.neg().add_int(-1))),
                CmpOp::Gt => (nonneg(&lo.add_int(-1)), nonneg(&hi.neg())),
                CmpOp::Le => (nonneg(&hi.neg()), nonneg(&lo.add_int(-1))),
                CmpOp::Lt => (nonneg(&hi.neg().add_int(-1)), nonneg(&lo)),
                CmpOp::Eq => (
                    lo.is_int(0) && hi.is_int(0),
                    nonneg(&lo.add_int(-1)) || nonneg(&hi.neg().add_int(-1)),
                ),
            };
            if always {
                return Some(Truth::True);
            }
            if never {
                return Some(Truth::False);
            }
        }
        let mut lhs = d.clone();
        let rhs = lhs.konst.neg();
        lhs.konst = Dim::int(0);
        Some(Truth::Pred(Pred::Cmp(op, expr(&lhs)?, dim_to_expr(&rhs)?)))
    }

    fn pred(&self, p: &Pred) -> Option<Truth> {
        Some(match p {
            Pred::Cmp(op, a, b) => {
                let d = add_scaled(&self.lin(a)?, &self.lin(b)?, &Dim::int(-1));
                self.cmp(*op, &d)?
            }
            Pred::And(ps) => {
                let mut kept = Vec::new();
                for q in ps {
                    match self.pred(q)? {
                        Truth::True => {}
                        Truth::False => return Some(Truth::False),
                        Truth::Pred(Pred::And(inner)) => kept.extend(inner),
                        Truth::Pred(x) => kept.push(x),
                    }
                }
                match kept.len() {
                    0 => Truth::True,
                    1 => Truth::Pred(kept.remove(0)),
                    _ => Truth::Pred(Pred::And(kept)),
                }
            }
            Pred::Or(ps) => {
                let mut kept = Vec::new();
                for q in ps {
                    match self.pred(q)? {
                        Truth::True => return Some(Truth::True),
                        Truth::False => {}
                        Truth::Pred(x) => kept.push(x),
                    }
                }
                match kept.len() {
                    0 => Truth::False,
                    1 => Truth::Pred(kept.remove(0)),
                    _ => Truth::Pred(Pred::Or(kept)),
                }
            }
        })
    }
}

enum Truth {
    True,
    False,
    Pred(Pred),
}

fn looks_like_axis(n: &str) -> bool {
    n.strip_prefix('i')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// A size as an index expression ([`AxisExpr::of_dim`]); `None` for symbols named like axes.
pub fn dim_to_expr(d: &Dim) -> Option<AxisExpr> {
    if d.symbols().iter().any(|s| looks_like_axis(s)) {
        return None;
    }
    Some(AxisExpr::of_dim(d))
}

/// `floor(e / d)` simplified over output axes of sizes `sizes` (`None` when `d` is not provably
/// positive).
pub(crate) fn floordiv_on(e: &Lin, d: &Dim, sizes: &[Dim]) -> Result<Lin, index::IndexError> {
    simplify::floordiv(e, d, &Ctx { sizes })
}

/// The wire form of `l`; `None` when a floor keeps a symbolic divisor or an atom has no wire form.
pub(crate) fn expr(l: &Lin) -> Option<AxisExpr> {
    let mut parts = Vec::with_capacity(l.terms.len() + 1);
    for (t, coef) in &l.terms {
        let atom = match t {
            Term::Var(k) => AxisExpr::Name(axis_name(*k)),
            Term::Floor(e, c) => AxisExpr::FloorDiv(Box::new(expr(e)?), c.as_int()?),
            Term::Min(..) | Term::Max(..) | Term::Opaque(_) => return None,
        };
        parts.push(if coef.is_int(1) {
            atom
        } else {
            AxisExpr::product(dim_to_expr(coef)?, atom)
        });
    }
    if !l.konst.is_int(0) || parts.is_empty() {
        parts.push(dim_to_expr(&l.konst)?);
    }
    Some(AxisExpr::sum(parts))
}

/// `e` in normal form over output axes of sizes `sizes`; `None` when it is not affine + floordiv.
pub fn simplify_expr(e: &AxisExpr, sizes: &[Dim]) -> Option<AxisExpr> {
    let cx = Ctx { sizes };
    expr(&cx.lin(e)?)
}

/// The map with every index in normal form and the guard's always-true comparisons dropped
/// (`guard: None` when nothing is left; an always-false guard becomes `or()`). `None` when some
/// expression is not affine + floordiv.
pub fn simplify_access(a: &AccessMap) -> Option<AccessMap> {
    let cx = Ctx { sizes: &a.shape };
    let index = a
        .index
        .iter()
        .map(|e| expr(&cx.lin(e)?))
        .collect::<Option<Vec<_>>>()?;
    let guard = match &a.guard {
        None => None,
        Some(g) => match cx.pred(g)? {
            Truth::True => None,
            Truth::False => Some(Pred::Or(vec![])),
            Truth::Pred(p) => Some(p),
        },
    };
    Some(AccessMap {
        shape: a.shape.clone(),
        index,
        guard,
        fill: a.fill,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> AxisExpr {
        AxisExpr::Name(s.into())
    }

    fn c(v: i64) -> AxisExpr {
        AxisExpr::Const(v)
    }

    fn div(e: AxisExpr, d: i64) -> AxisExpr {
        AxisExpr::FloorDiv(Box::new(e), d)
    }

    fn mul(a: AxisExpr, b: AxisExpr) -> AxisExpr {
        AxisExpr::product(a, b)
    }

    fn sizes(v: &[i64]) -> Vec<Dim> {
        v.iter().map(|d| Dim::int(*d)).collect()
    }

    fn s(e: &AxisExpr, sz: &[Dim]) -> String {
        simplify_expr(e, sz).expect("affine").to_string()
    }

    #[test]
    fn div_mod_recombine_to_the_original() {
        // (e//c)*c + (e - c*(e//c)) = e, with e = 2*i0 + i1 + N.
        let e = AxisExpr::Add(vec![mul(c(2), n("i0")), n("i1"), n("N")]);
        let q = div(e.clone(), 4);
        let r = AxisExpr::Add(vec![e.clone(), mul(c(-4), q.clone())]);
        let whole = AxisExpr::Add(vec![mul(q, c(4)), r]);
        let sz = vec![Dim::sym("M"), Dim::sym("K")];
        assert_eq!(s(&whole, &sz), s(&e, &sz));
        assert_eq!(s(&e, &sz), "2*i0+i1+N");
    }

    #[test]
    fn exact_multiples_leave_the_floor() {
        // (3*i0 + i1)//3 = i0 + i1//3 = i0   with 0 <= i1 < 3.
        let e = div(AxisExpr::Add(vec![mul(c(3), n("i0")), n("i1")]), 3);
        assert_eq!(s(&e, &sizes(&[2, 3])), "i0");
        // With i1 < 4 the remainder's floor is not constant.
        assert_eq!(s(&e, &sizes(&[2, 4])), "i0+i1//3");
        // (3*i0 + i1) - 3*((3*i0+i1)//3) = i1.
        let f = AxisExpr::Add(vec![mul(c(3), n("i0")), n("i1")]);
        let m = AxisExpr::Add(vec![f.clone(), mul(c(-3), div(f, 3))]);
        assert_eq!(s(&m, &sizes(&[2, 3])), "i1");
        // Symbolic coefficients divisible by c leave too: (2*N*i0 + 1)//2 = N*i0.
        let g = div(
            AxisExpr::Add(vec![mul(mul(c(2), n("N")), n("i0")), c(1)]),
            2,
        );
        assert_eq!(s(&g, &sizes(&[5])), "N*i0");
        // (i0//2)//3 = i0//6.
        assert_eq!(s(&div(div(n("i0"), 2), 3), &sizes(&[100])), "i0//6");
    }

    #[test]
    fn always_true_guards_are_dropped() {
        let a = AccessMap {
            shape: vec![Dim::sym("N"), Dim::int(4)],
            index: vec![n("i0"), n("i1")],
            guard: Some(Pred::And(vec![
                Pred::Cmp(CmpOp::Ge, n("i0"), c(0)),
                Pred::Cmp(CmpOp::Lt, n("i0"), n("N")),
                Pred::Cmp(CmpOp::Lt, n("i1"), c(4)),
                Pred::Cmp(CmpOp::Ge, AxisExpr::Add(vec![n("i1"), c(-1)]), c(0)),
            ])),
            fill: 0.0.into(),
        };
        let b = simplify_access(&a).expect("affine");
        assert_eq!(b.guard.expect("one comparison left").to_string(), "i1>=1");
        let mut never = a.clone();
        never.guard = Some(Pred::Cmp(CmpOp::Lt, n("i1"), c(0)));
        let b = simplify_access(&never).expect("affine");
        assert_eq!(b.guard, Some(Pred::Or(vec![])));
    }

    #[test]
    fn min_max_of_sizes_are_sizes() {
        // A slice start clamped to a symbolic size, `i0 + min(1000, S)`, stays affine in i0.
        let start = Dim::int(1000).min_of(&Dim::sym("S"));
        let e = AxisExpr::Add(vec![n("i0"), dim_to_expr(&start).expect("a size")]);
        assert_eq!(s(&e, &sizes(&[2])), "i0+min(1000,S)");
        let v = e.eval(&|x| match x {
            "i0" => Some(1),
            "S" => Some(4),
            _ => None,
        });
        assert_eq!(v, Ok(5));
        // The min of an axis is not affine.
        let bad = AxisExpr::Min(Box::new(n("i0")), Box::new(c(1)));
        assert!(simplify_expr(&bad, &sizes(&[2])).is_none());
    }

    #[test]
    fn non_affine_forms_are_refused() {
        assert!(simplify_expr(&mul(n("i0"), n("i1")), &sizes(&[2, 2])).is_none());
        assert!(simplify_expr(&n("i5"), &sizes(&[2, 2])).is_none());
        assert!(simplify_expr(&div(n("i0"), 0), &sizes(&[2])).is_none());
        // A symbolic coefficient times an axis is fine.
        assert_eq!(s(&mul(n("K"), n("i0")), &sizes(&[2])), "K*i0");
    }
}
