//! Index expressions during synthesis: `Σ coeff · atom + const` where an atom is a named axis or
//! `floor(ix / c)` (`c` a positive integer) and coefficients and the constant are axis-free sizes
//! ([`Dim`], possibly symbolic). A thin view of the index algebra's canonical form
//! ([`crate::index::Quasi`] over [`Dim`] coefficients and axis names) and its one floordiv
//! simplifier ([`crate::index::simplify`]), with axis extents as range facts; equal indices
//! compare equal — the let table is keyed by them — and are printed to [`AxisExpr`] only at the
//! end.

use crate::index::simplify::{self, Facts};
use crate::index::{Atom, Quasi};
use crate::ir::axis::AxisExpr;
use crate::ir::dim::Dim;
use std::collections::BTreeSet;

/// An affine (+ floordiv) index over named axes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub(crate) struct Ix(Quasi<Dim, String>);

/// Extent of a named axis in scope (`None`: unknown).
pub(crate) type Extents<'a> = &'a dyn Fn(&str) -> Option<Dim>;

/// Axis extents as range facts: an axis of extent `n` lies in `[0, n − 1]`.
struct AxisFacts<'a>(Extents<'a>);

impl Facts<Dim, String> for AxisFacts<'_> {
    fn range(&self, v: &String) -> Option<(Dim, Dim)> {
        (self.0)(v).map(|n| (Dim::int(0), n.add_int(-1)))
    }
}

impl Ix {
    /// The index algebra's canonical form.
    pub(crate) fn form(&self) -> &Quasi<Dim, String> {
        &self.0
    }

    /// The index of a canonical form.
    pub(crate) fn of_form(q: Quasi<Dim, String>) -> Ix {
        Ix(q)
    }

    /// The constant `d`.
    pub(crate) fn konst(d: Dim) -> Ix {
        Ix(Quasi::constant(d))
    }

    /// The integer `v`.
    pub(crate) fn int(v: i64) -> Ix {
        Ix(Quasi::int(v))
    }

    /// The axis `name`.
    pub(crate) fn var(name: &str) -> Ix {
        Ix(Quasi::var(name.to_string()))
    }

    /// `self + o` (sizes never overflow: [`Dim`] arithmetic is exact).
    pub(crate) fn add(&self, o: &Ix) -> Ix {
        Ix(self.0.try_add(&o.0).unwrap_or_default())
    }

    /// `d · self` for an axis-free `d`.
    pub(crate) fn scale(&self, d: &Dim) -> Ix {
        Ix(self.0.try_scale(d).unwrap_or_default())
    }

    /// The axis name when the index is exactly one axis.
    pub(crate) fn as_var(&self) -> Option<&str> {
        self.0.as_var().map(String::as_str)
    }

    /// The constant, when the index mentions no axis.
    pub(crate) fn as_konst(&self) -> Option<&Dim> {
        self.0.as_const()
    }

    /// True for the constant 0.
    pub(crate) fn is_zero(&self) -> bool {
        self.0.is_zero()
    }

    /// True when a term is a floordiv.
    pub(crate) fn has_div(&self) -> bool {
        self.0.has_floor()
    }

    /// The axes the index mentions.
    pub(crate) fn vars(&self, out: &mut BTreeSet<String>) {
        self.0.vars(out)
    }

    /// `floor(self / d)` by the index algebra's simplifier (multiples of `d` leave the floor, gcd
    /// reduction, range collapse, nested floors); a floor that stays needs a positive integer `d`
    /// (`Err` otherwise: floordiv by a symbolic size is not affine).
    pub(crate) fn floordiv(&self, d: &Dim, ext: Extents) -> Result<Ix, String> {
        let not_affine = || format!("floordiv of `{}` by the size `{d}`", self.show());
        let q = simplify::floordiv(&self.0, d, &AxisFacts(ext)).map_err(|_| not_affine())?;
        if q.has_opaque_or_symbolic_floor() {
            return Err(not_affine());
        }
        Ok(Ix(q))
    }

    /// The wire form (sizes with `min`/`max` as axis-free [`AxisExpr::Min`] / [`AxisExpr::Max`]).
    pub(crate) fn to_axis(&self) -> Result<AxisExpr, String> {
        quasi_axis(&self.0)
    }

    /// Printed form for messages.
    pub(crate) fn show(&self) -> String {
        self.to_axis().map(|e| e.to_string()).unwrap_or_else(|e| e)
    }
}

/// A canonical form as the wire form: terms in the form's order, then the constant.
fn quasi_axis(q: &Quasi<Dim, String>) -> Result<AxisExpr, String> {
    let mut parts = Vec::new();
    for (a, c) in &q.terms {
        let x = match a {
            Atom::Var(v) => AxisExpr::Name(v.clone()),
            Atom::Floor(e, k) => match k.as_int() {
                Some(k) => AxisExpr::FloorDiv(Box::new(quasi_axis(e)?), k),
                None => return Err(format!("floordiv by the size `{k}` is not affine")),
            },
            other => return Err(format!("`{other:?}` has no index wire form")),
        };
        parts.push(if c.is_int(1) {
            x
        } else {
            AxisExpr::Mul(Box::new(AxisExpr::of_dim(c)), Box::new(x))
        });
    }
    if !q.konst.is_int(0) {
        match AxisExpr::of_dim(&q.konst) {
            AxisExpr::Add(l) => parts.extend(l),
            e => parts.push(e),
        }
    }
    Ok(match parts.len() {
        0 => AxisExpr::Const(0),
        1 => parts.remove(0),
        _ => AxisExpr::Add(parts),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(v: &str) -> Option<Dim> {
        match v {
            "a" => Some(Dim::sym("H")),
            "b" => Some(Dim::sym("S")),
            "c" => Some(Dim::int(4)),
            "d" => Some(Dim::int(6)),
            _ => None,
        }
    }

    /// `e mod d` as RESHAPE splits it (`e − d·floor(e / d)`).
    fn rem(e: &Ix, d: &Dim) -> Result<Ix, String> {
        let q = e.floordiv(d, &ext)?;
        let r = e
            .form()
            .try_sub(&q.form().try_scale(d).map_err(|x| x.to_string())?);
        r.map(Ix::of_form).map_err(|x| x.to_string())
    }

    #[test]
    fn split_then_merge_is_exact() {
        // a·S + b, divided by S: a; mod S: b.
        let l = Ix::var("a").scale(&Dim::sym("S")).add(&Ix::var("b"));
        let s = Dim::sym("S");
        assert_eq!(l.floordiv(&s, &ext), Ok(Ix::var("a")));
        assert_eq!(rem(&l, &s), Ok(Ix::var("b")));
        assert!(Ix::var("a").floordiv(&s, &ext).is_err());
    }

    #[test]
    fn constant_floordiv_and_mod() {
        let d = Ix::var("d");
        let q = d.floordiv(&Dim::int(4), &ext).expect("constant divisor");
        assert_eq!(q.to_axis().map(|e| e.to_string()), Ok("d//4".into()));
        let r = rem(&d, &Dim::int(4)).expect("mod");
        assert_eq!(r.to_axis().map(|e| e.to_string()), Ok("d+-4*(d//4)".into()));
        // Provably small: c < 4, so c // 4 = 0 and c mod 4 = c.
        let c = Ix::var("c");
        assert_eq!(c.floordiv(&Dim::int(4), &ext), Ok(Ix::default()));
        assert_eq!(rem(&c, &Dim::int(4)), Ok(c.clone()));
        // (c + 5) // 4 with c in [0, 3]: 1 + (c + 1) // 4, not constant.
        let e = c
            .add(&Ix::int(5))
            .floordiv(&Dim::int(4), &ext)
            .expect("div");
        assert!(e.show().contains("//4"));
    }

    #[test]
    fn axis_free_indices_stay_sizes() {
        // A size with min/max divided by a constant is a size (a slice of a strided slice of a
        // symbolic axis): it can still be the operand of another min.
        let d = Dim::int(1000).min_of(&Dim::sym("S"));
        let q = Ix::konst(d.clone())
            .floordiv(&Dim::int(3), &ext)
            .expect("constant divisor");
        assert_eq!(q.as_konst(), Some(&d.floordiv(3)));
        assert_eq!(
            q.to_axis().map(|e| e.to_string()),
            Ok("min(1000,S)//3".into())
        );
    }

    #[test]
    fn printing() {
        let e = Ix::var("a")
            .scale(&Dim::int(2))
            .add(&Ix::var("b"))
            .add(&Ix::int(-1));
        assert_eq!(e.show(), "2*a+b+-1");
        assert!(Ix::default().is_zero());
        assert_eq!(Ix::var("a").as_var(), Some("a"));
        assert_eq!(e.as_var(), None);
        let mut v = BTreeSet::new();
        e.vars(&mut v);
        assert_eq!(v.len(), 2);
    }
}
