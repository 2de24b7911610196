//! Quasi-affine expressions and constraints of the Poly-View, printed in isl syntax.
//!
//! An [`Aff`] is `Σ coeff · atom + const`, an atom being a variable (a statement dimension or a
//! size parameter), `floor(e / d)` of an affine `e`, or `min` / `max` of two parameter-only
//! expressions (a clamped slice size). A [`Cons`] is `aff >= 0` or `aff = 0`; a piece is a
//! conjunction of them and a [`Pieces`] set a union (disjunctive normal form). Conversions from
//! the region IR ([`AxisExpr`], [`Dim`], [`Pred`]) report what is not affine ([`NonAffine`]).
//!
//! Printing (isl syntax, so islpy can read it): terms as `2*h + rh - 1`, floordiv as
//! `floor((e)/c)`, constraints with their variable terms on the side where they are positive
//! (`k1 + m >= 1`, `k1 + m <= 32`, `h = 2*h1 + rh1`), `and` between constraints.

use crate::index::{self, simplify, NoFacts, Quasi};
use crate::ir::axis::{AxisExpr, CmpOp, Pred};
use crate::ir::dim::{self, Dim};
use crate::poly::affine::expr::quasi_of_axis;

/// An atom of an affine expression: a statement dimension or size parameter, `floor(e / d)`
/// (`d > 1`), or `min` / `max` of parameter-only expressions.
pub type Atom = index::Atom<i64, String>;

/// `Σ coeff · atom + konst` (zero coefficients are never stored): the index algebra's form.
pub type Aff = Quasi<i64, String>;

/// Why an index, size or predicate has no affine form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NonAffine(pub String);

impl Quasi<i64, String> {
    /// `floor(self / d)`, `d > 0`, by the index algebra's simplifier (no range facts).
    pub fn floor(&self, d: i64) -> Aff {
        // Only overflow fails (callers pass d > 0): keep the exact, unsimplified atom then.
        simplify::floordiv(self, &d, &NoFacts)
            .unwrap_or_else(|_| Aff::atom(Atom::Floor(Box::new(self.clone()), d)))
    }

    /// Every variable `v` with `f(v) = Some(e)` replaced by `e`.
    pub fn substitute(&self, f: &dyn Fn(&str) -> Option<Aff>) -> Aff {
        let mut out = Aff::int(self.konst);
        for (a, c) in &self.terms {
            let t = match a {
                Atom::Var(v) => f(v).unwrap_or_else(|| Aff::var(v)),
                Atom::Floor(e, d) => e.substitute(f).floor(*d),
                Atom::Min(x, y) => Aff::atom(Atom::Min(
                    Box::new(x.substitute(f)),
                    Box::new(y.substitute(f)),
                )),
                Atom::Max(x, y) => Aff::atom(Atom::Max(
                    Box::new(x.substitute(f)),
                    Box::new(y.substitute(f)),
                )),
                Atom::Opaque(_) => Aff::atom(a.clone()),
            };
            out = out.add(&t.scale(*c));
        }
        out
    }

    /// Renames variables (`f` gives the new name or `None` to keep).
    pub fn rename(&self, f: &dyn Fn(&str) -> Option<String>) -> Aff {
        self.substitute(&|v| f(v).map(Aff::var))
    }

    /// The affine form of an index expression.
    pub fn from_axis(e: &AxisExpr) -> Result<Aff, NonAffine> {
        quasi_of_axis(e).map_err(|x| NonAffine(x.0))
    }

    /// The affine form of a size (a product of symbols is not affine).
    pub fn from_dim(d: &Dim) -> Result<Aff, NonAffine> {
        let mut out = Aff::int(0);
        for (atoms, c) in d.monomials() {
            let t = match atoms {
                [] => Aff::int(1),
                [a] => match a {
                    dim::Atom::Sym(s) => Aff::var(s),
                    dim::Atom::FloorDiv(e, k) => Aff::from_dim(e)?.floor(*k),
                    dim::Atom::Min(x, y) => Aff::atom(Atom::Min(
                        Box::new(Aff::from_dim(x)?),
                        Box::new(Aff::from_dim(y)?),
                    )),
                    dim::Atom::Max(x, y) => Aff::atom(Atom::Max(
                        Box::new(Aff::from_dim(x)?),
                        Box::new(Aff::from_dim(y)?),
                    )),
                },
                _ => return Err(NonAffine(format!("size `{d}` is a product of symbols"))),
            };
            out = out.add(&t.scale(c));
        }
        Ok(out)
    }

    /// True when a `min`/`max` atom mentions a variable satisfying `is_dim`: the non-affine
    /// forms the view must reject for loop variables.
    pub fn minmax_of(&self, is_dim: &dyn Fn(&str) -> bool) -> bool {
        self.terms.keys().any(|a| match a {
            Atom::Var(_) | Atom::Opaque(_) => false,
            Atom::Floor(e, _) => e.minmax_of(is_dim),
            Atom::Min(x, y) | Atom::Max(x, y) => {
                x.mentions(&|v: &String| is_dim(v)) || y.mentions(&|v: &String| is_dim(v))
            }
        })
    }
}

/// `aff >= 0` or `aff = 0`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cons {
    /// The constrained expression.
    pub aff: Aff,
    /// `aff = 0` when true, else `aff >= 0`.
    pub eq: bool,
}

impl Cons {
    /// `a >= b`.
    pub fn ge(a: &Aff, b: &Aff) -> Cons {
        Cons {
            aff: a.sub(b),
            eq: false,
        }
    }

    /// `a = b`.
    pub fn eq(a: &Aff, b: &Aff) -> Cons {
        Cons {
            aff: a.sub(b),
            eq: true,
        }
    }

    /// `Some(truth)` when the constraint is constant.
    pub fn decided(&self) -> Option<bool> {
        self.aff
            .as_int()
            .map(|c| if self.eq { c == 0 } else { c >= 0 })
    }

    /// The negation, as a union of pieces: `¬(e >= 0)` is `-e - 1 >= 0`; `¬(e = 0)` is
    /// `e >= 1 or e <= -1`.
    pub fn negate(&self) -> Vec<Vec<Cons>> {
        let lt = Cons {
            aff: self.aff.scale(-1).add(&Aff::int(-1)),
            eq: false,
        };
        if !self.eq {
            return vec![vec![lt]];
        }
        let gt = Cons {
            aff: self.aff.add(&Aff::int(-1)),
            eq: false,
        };
        vec![vec![lt], vec![gt]]
    }

    /// isl text: variable terms positive on each side (`k1 + m >= 1`, `h = 2*h1 + rh1`).
    pub fn isl(&self, order: &[String]) -> String {
        let mut lhs = Aff::int(0);
        let mut rhs = Aff::int(-self.aff.konst);
        for (a, c) in &self.aff.terms {
            let t = Aff {
                terms: [(a.clone(), c.abs())].into_iter().collect(),
                konst: 0,
            };
            if *c > 0 {
                lhs = lhs.add(&t);
            } else {
                rhs = rhs.add(&t);
            }
        }
        if lhs.terms.is_empty() {
            // `-x + c >= 0`: write `x <= c`.
            let op = if self.eq { "=" } else { "<=" };
            let (var_side, k) = (
                Aff {
                    terms: rhs.terms.clone(),
                    konst: 0,
                },
                -rhs.konst,
            );
            return format!("{} {op} {k}", var_side.isl(order));
        }
        let op = if self.eq { "=" } else { ">=" };
        format!("{} {op} {}", lhs.isl(order), rhs.isl(order))
    }
}

/// A union of conjunctions (disjunctive normal form). An empty union is false; a union holding
/// one empty conjunction is true.
pub type Pieces = Vec<Vec<Cons>>;

/// More pieces than this in one guard are not expanded: the statement becomes non-SCoP with a
/// reason starting with [`EXCESSIVE_PIECEWISE`], reported as `W2101 ExcessivePiecewise`
/// (`super::diag`). The engine's budget, [`crate::poly::affine::PIECEWISE_BUDGET`].
pub const MAX_PIECES: usize = crate::poly::affine::PIECEWISE_BUDGET;

/// How a non-SCoP reason caused by a guard over [`MAX_PIECES`] starts.
pub const EXCESSIVE_PIECEWISE: &str = "the guard has";

/// The non-SCoP reason of a guard of `n` pieces.
fn over_budget(n: usize) -> NonAffine {
    NonAffine(format!(
        "{EXCESSIVE_PIECEWISE} {n} pieces (more than {MAX_PIECES})"
    ))
}

/// The conjunction of two unions (pairwise; constant constraints dropped, false pieces removed).
pub fn and(a: &Pieces, b: &Pieces) -> Result<Pieces, NonAffine> {
    let mut out = Vec::new();
    for p in a {
        for q in b {
            let mut piece: Vec<Cons> = p.iter().chain(q.iter()).cloned().collect();
            if let Some(piece) = simplify_piece(&mut piece) {
                if !out.contains(&piece) {
                    out.push(piece);
                }
            }
        }
    }
    if out.len() > MAX_PIECES {
        return Err(over_budget(out.len()));
    }
    Ok(out)
}

/// The piece without constant-true, duplicate and weaker parallel constraints (`e + 1 >= 0`
/// beside `e >= 0`); `None` when a constraint is false or two opposite ones exclude each other
/// (`e + a >= 0` and `-e + b >= 0` with `a + b < 0`).
fn simplify_piece(p: &mut Vec<Cons>) -> Option<Vec<Cons>> {
    let mut out: Vec<Cons> = Vec::new();
    for c in p.drain(..) {
        match c.decided() {
            Some(true) => continue,
            Some(false) => return None,
            None => {}
        }
        if out.contains(&c) {
            continue;
        }
        if !c.eq {
            let mut keep = true;
            for o in out.iter_mut().filter(|o| !o.eq) {
                if o.aff.terms == c.aff.terms {
                    o.aff.konst = o.aff.konst.min(c.aff.konst);
                    keep = false;
                } else if o.aff.scale(-1).terms == c.aff.terms && o.aff.konst + c.aff.konst < 0 {
                    return None;
                }
            }
            if !keep {
                continue;
            }
        }
        out.push(c);
    }
    Some(out)
}

/// The union `true`.
pub fn always() -> Pieces {
    vec![Vec::new()]
}

/// The DNF of a predicate, names substituted by `subst` (`negate`: of its negation).
pub fn from_pred(
    p: &Pred,
    negate: bool,
    subst: &dyn Fn(&str) -> Option<Aff>,
) -> Result<Pieces, NonAffine> {
    match (p, negate) {
        (Pred::And(ps), false) | (Pred::Or(ps), true) => {
            let mut acc = always();
            for q in ps {
                acc = and(&acc, &from_pred(q, negate, subst)?)?;
            }
            Ok(acc)
        }
        (Pred::Or(ps), false) | (Pred::And(ps), true) => {
            let mut acc: Pieces = Vec::new();
            for q in ps {
                for piece in from_pred(q, negate, subst)? {
                    if !acc.contains(&piece) {
                        acc.push(piece);
                    }
                }
            }
            if acc.len() > MAX_PIECES {
                return Err(over_budget(acc.len()));
            }
            Ok(acc)
        }
        (Pred::Cmp(op, a, b), _) => {
            let a = Aff::from_axis(a)?.substitute(subst);
            let b = Aff::from_axis(b)?.substitute(subst);
            let one = Aff::int(1);
            let c = match op {
                CmpOp::Ge => Cons::ge(&a, &b),
                CmpOp::Gt => Cons::ge(&a, &b.add(&one)),
                CmpOp::Le => Cons::ge(&b, &a),
                CmpOp::Lt => Cons::ge(&b, &a.add(&one)),
                CmpOp::Eq => Cons::eq(&a, &b),
            };
            let pieces = if negate { c.negate() } else { vec![vec![c]] };
            and(&always(), &pieces)
        }
    }
}

/// The negation of a union (De Morgan, then DNF).
pub fn negate(p: &Pieces) -> Result<Pieces, NonAffine> {
    let mut acc: Pieces = vec![Vec::new()];
    for piece in p {
        // ¬(c1 ∧ c2 …) = ¬c1 ∨ ¬c2 …
        let mut alt: Pieces = Vec::new();
        for c in piece {
            alt.extend(c.negate());
        }
        if piece.is_empty() {
            return Ok(Vec::new());
        }
        acc = and(&acc, &alt)?;
    }
    Ok(acc)
}

/// `c1 and c2 and …` (chained `lo <= v < hi` for box bounds is written by the callers).
pub fn conj_isl(cs: &[Cons], order: &[String]) -> String {
    cs.iter()
        .map(|c| c.isl(order))
        .collect::<Vec<_>>()
        .join(" and ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn prints_terms_in_dimension_order() {
        let e = AxisExpr::Add(vec![
            AxisExpr::Name("k1".into()),
            AxisExpr::product(AxisExpr::Const(2), AxisExpr::Name("m".into())),
            AxisExpr::Const(-1),
        ]);
        let a = Aff::from_axis(&e).expect("affine");
        assert_eq!(a.isl(&order(&["m", "k1"])), "2*m + k1 - 1");
        // The multiples of the divisor leave the floor (the index algebra's canonical form).
        assert_eq!(
            a.floor(2).isl(&order(&["m", "k1"])),
            "m + floor((k1 + 1)/2) - 1"
        );
        assert_eq!(a.scale(2).floor(2), a);
    }

    #[test]
    fn products_of_variables_are_not_affine() {
        let e = AxisExpr::product(AxisExpr::Name("i".into()), AxisExpr::Name("j".into()));
        assert!(Aff::from_axis(&e).is_err());
        let d = Dim::sym("M").mul(&Dim::sym("N"));
        assert!(Aff::from_dim(&d).is_err());
        let h = Dim::sym("H").add_int(-1).floordiv(2).add_int(1);
        assert_eq!(
            Aff::from_dim(&h).expect("affine").isl(&[]),
            "floor((H + 1)/2)"
        );
    }

    #[test]
    fn constraints_print_with_positive_sides() {
        let (k1, m) = (Aff::var("k1"), Aff::var("m"));
        let o = order(&["m", "k1"]);
        assert_eq!(Cons::ge(&k1.add(&m), &Aff::int(1)).isl(&o), "m + k1 >= 1");
        assert_eq!(Cons::ge(&Aff::int(32), &k1.add(&m)).isl(&o), "m + k1 <= 32");
        assert_eq!(Cons::eq(&m, &k1.scale(2)).isl(&o), "m = 2*k1");
    }

    #[test]
    fn negated_conjunction_is_a_union() {
        let p = Pred::And(vec![
            Pred::Cmp(CmpOp::Ge, AxisExpr::Name("h".into()), AxisExpr::Const(1)),
            Pred::Cmp(CmpOp::Lt, AxisExpr::Name("h".into()), AxisExpr::Const(33)),
        ]);
        let none = |_: &str| None;
        assert_eq!(from_pred(&p, false, &none).expect("dnf").len(), 1);
        let neg = from_pred(&p, true, &none).expect("dnf");
        assert_eq!(neg.len(), 2);
        assert_eq!(negate(&from_pred(&p, false, &none).expect("dnf")), Ok(neg));
    }
}
