//! Index expressions during synthesis: `Σ coeff · atom + const` where an atom is a named axis or
//! `floor(ix / c)` (`c` a positive integer) and coefficients and the constant are axis-free sizes
//! ([`Dim`], possibly symbolic). Canonical (a sorted map), so equal indices compare equal — the
//! let table is keyed by them — and printed to [`AxisExpr`] only at the end.

use crate::ir::axis::AxisExpr;
use crate::ir::dim::{Atom as DimAtom, Dim};
use std::collections::{BTreeMap, BTreeSet};

/// An atom of an index.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Atom {
    /// A named axis (iter or reduce variable).
    Var(String),
    /// `floor(ix / c)`, `c > 0`.
    Div(Box<Ix>, i64),
}

/// An affine (+ floordiv) index.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub(crate) struct Ix {
    terms: BTreeMap<Atom, Dim>,
    konst: Dim,
}

/// Extent of a named axis in scope (`None`: unknown).
pub(crate) type Extents<'a> = &'a dyn Fn(&str) -> Option<Dim>;

impl Ix {
    /// The constant `d`.
    pub(crate) fn konst(d: Dim) -> Ix {
        Ix {
            terms: BTreeMap::new(),
            konst: d,
        }
    }

    /// The integer `v`.
    pub(crate) fn int(v: i64) -> Ix {
        Ix::konst(Dim::int(v))
    }

    /// The axis `name`.
    pub(crate) fn var(name: &str) -> Ix {
        Ix::atom(Atom::Var(name.to_string()))
    }

    fn atom(a: Atom) -> Ix {
        Ix {
            terms: [(a, Dim::int(1))].into_iter().collect(),
            konst: Dim::int(0),
        }
    }

    /// `self + o`.
    pub(crate) fn add(&self, o: &Ix) -> Ix {
        let mut out = self.clone();
        for (a, c) in &o.terms {
            let e = out.terms.entry(a.clone()).or_default();
            *e = e.add(c);
            if e.is_int(0) {
                out.terms.remove(a);
            }
        }
        out.konst = out.konst.add(&o.konst);
        out
    }

    /// `self - o`.
    pub(crate) fn sub(&self, o: &Ix) -> Ix {
        self.add(&o.scale(&Dim::int(-1)))
    }

    /// `d · self` for an axis-free `d`.
    pub(crate) fn scale(&self, d: &Dim) -> Ix {
        if d.is_int(0) {
            return Ix::default();
        }
        Ix {
            terms: self
                .terms
                .iter()
                .map(|(a, c)| (a.clone(), c.mul(d)))
                .filter(|(_, c)| !c.is_int(0))
                .collect(),
            konst: self.konst.mul(d),
        }
    }

    /// The axis name when the index is exactly one axis.
    pub(crate) fn as_var(&self) -> Option<&str> {
        match self.terms.iter().next() {
            Some((Atom::Var(v), c))
                if self.terms.len() == 1 && c.is_int(1) && self.konst.is_int(0) =>
            {
                Some(v)
            }
            _ => None,
        }
    }

    /// The constant, when the index mentions no axis.
    pub(crate) fn as_konst(&self) -> Option<&Dim> {
        self.terms.is_empty().then_some(&self.konst)
    }

    /// True for the constant 0.
    pub(crate) fn is_zero(&self) -> bool {
        self.terms.is_empty() && self.konst.is_int(0)
    }

    /// True when a term is a floordiv.
    pub(crate) fn has_div(&self) -> bool {
        self.terms.keys().any(|a| matches!(a, Atom::Div(..)))
    }

    /// The axes the index mentions.
    pub(crate) fn vars(&self, out: &mut BTreeSet<String>) {
        for a in self.terms.keys() {
            match a {
                Atom::Var(v) => {
                    out.insert(v.clone());
                }
                Atom::Div(x, _) => x.vars(out),
            }
        }
    }

    /// Provable range `[lo, hi]` given axis extents (`None` when a sign or extent is unknown).
    fn range(&self, ext: Extents) -> Option<(Dim, Dim)> {
        let (mut lo, mut hi) = (self.konst.clone(), self.konst.clone());
        for (a, c) in &self.terms {
            let (alo, ahi) = match a {
                Atom::Var(v) => (Dim::int(0), ext(v)?.add_int(-1)),
                Atom::Div(x, k) => {
                    let (l, h) = x.range(ext)?;
                    (l.floordiv(*k), h.floordiv(*k))
                }
            };
            if !alo.is_nonneg() {
                return None;
            }
            if c.is_nonneg() {
                lo = lo.add(&alo.mul(c));
                hi = hi.add(&ahi.mul(c));
            } else if c.neg().is_nonneg() {
                lo = lo.add(&ahi.mul(c));
                hi = hi.add(&alo.mul(c));
            } else {
                return None;
            }
        }
        Some((lo, hi))
    }

    /// True when `0 <= self < d` is provable.
    fn within(&self, d: &Dim, ext: Extents) -> bool {
        match self.range(ext) {
            Some((lo, hi)) => lo.is_nonneg() && d.sub(&hi).add_int(-1).is_nonneg(),
            None => false,
        }
    }

    /// `floor(self / d)`: terms whose coefficient `d` divides are divided exactly; the remainder
    /// vanishes when provably in `[0, d)`, and otherwise becomes a `floordiv` atom, which needs a
    /// positive integer `d` (`Err` otherwise: floordiv by a symbolic size is not affine).
    pub(crate) fn floordiv(&self, d: &Dim, ext: Extents) -> Result<Ix, String> {
        if d.is_int(1) {
            return Ok(self.clone());
        }
        // An axis-free index is a size: its floordiv by a constant is a size too.
        if let (true, Some(c)) = (self.terms.is_empty(), d.as_int()) {
            if c > 0 {
                return Ok(Ix::konst(self.konst.floordiv(c)));
            }
        }
        let mut q = Ix::default();
        let mut r = Ix::default();
        for (a, c) in &self.terms {
            match c.div_exact(d) {
                Some(qc) => q.terms.insert(a.clone(), qc),
                None => r.terms.insert(a.clone(), c.clone()),
            };
        }
        match (self.konst.as_int(), d.as_int()) {
            (Some(k), Some(c)) if c > 0 => {
                q.konst = Dim::int(k.div_euclid(c));
                r.konst = Dim::int(k.rem_euclid(c));
            }
            _ => match self.konst.div_exact(d) {
                Some(qk) => q.konst = qk,
                None => r.konst = self.konst.clone(),
            },
        }
        if r.is_zero() || r.within(d, ext) {
            return Ok(q);
        }
        match d.as_int() {
            Some(c) if c > 0 => {
                if let Some((lo, hi)) = r.range(ext) {
                    if let (Some(lo), Some(hi)) = (lo.as_int(), hi.as_int()) {
                        if lo.div_euclid(c) == hi.div_euclid(c) {
                            return Ok(q.add(&Ix::int(lo.div_euclid(c))));
                        }
                    }
                }
                Ok(q.add(&Ix::atom(Atom::Div(Box::new(r), c))))
            }
            _ => Err(format!("floordiv of `{}` by the size `{d}`", self.show())),
        }
    }

    /// `self mod d` as `self - d·floor(self / d)` (just `self` when provably in `[0, d)`).
    pub(crate) fn rem(&self, d: &Dim, ext: Extents) -> Result<Ix, String> {
        if self.within(d, ext) {
            return Ok(self.clone());
        }
        Ok(self.sub(&self.floordiv(d, ext)?.scale(d)))
    }

    /// The wire form (sizes with `min`/`max` as axis-free [`AxisExpr::Min`] / [`AxisExpr::Max`]).
    pub(crate) fn to_axis(&self) -> Result<AxisExpr, String> {
        let mut parts = Vec::new();
        for (a, c) in &self.terms {
            let x = match a {
                Atom::Var(v) => AxisExpr::Name(v.clone()),
                Atom::Div(e, k) => AxisExpr::FloorDiv(Box::new(e.to_axis()?), *k),
            };
            parts.push(if c.is_int(1) {
                x
            } else {
                AxisExpr::Mul(Box::new(dim_axis(c)?), Box::new(x))
            });
        }
        if !self.konst.is_int(0) {
            match dim_axis(&self.konst)? {
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

    /// Printed form for messages.
    pub(crate) fn show(&self) -> String {
        self.to_axis().map(|e| e.to_string()).unwrap_or_else(|e| e)
    }
}

/// A size as an (axis-free) index expression.
pub(crate) fn dim_axis(d: &Dim) -> Result<AxisExpr, String> {
    let mut parts = Vec::new();
    for (atoms, c) in d.monomials() {
        let mut factors: Vec<AxisExpr> = Vec::new();
        for a in atoms {
            factors.push(match a {
                DimAtom::Sym(s) => AxisExpr::Name(s.clone()),
                DimAtom::FloorDiv(e, k) => AxisExpr::FloorDiv(Box::new(dim_axis(e)?), *k),
                DimAtom::Min(x, y) => AxisExpr::Min(Box::new(dim_axis(x)?), Box::new(dim_axis(y)?)),
                DimAtom::Max(x, y) => AxisExpr::Max(Box::new(dim_axis(x)?), Box::new(dim_axis(y)?)),
            });
        }
        let mut e = match (factors.is_empty(), c) {
            (true, _) => AxisExpr::Const(c),
            (false, 1) => factors.remove(0),
            (false, _) => AxisExpr::Mul(Box::new(AxisExpr::Const(c)), Box::new(factors.remove(0))),
        };
        for f in factors {
            e = AxisExpr::Mul(Box::new(e), Box::new(f));
        }
        parts.push(e);
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

    #[test]
    fn split_then_merge_is_exact() {
        // a·S + b, divided by S: a; mod S: b.
        let l = Ix::var("a").scale(&Dim::sym("S")).add(&Ix::var("b"));
        let s = Dim::sym("S");
        assert_eq!(l.floordiv(&s, &ext), Ok(Ix::var("a")));
        assert_eq!(l.rem(&s, &ext), Ok(Ix::var("b")));
        assert!(Ix::var("a").floordiv(&s, &ext).is_err());
    }

    #[test]
    fn constant_floordiv_and_mod() {
        let d = Ix::var("d");
        let q = d.floordiv(&Dim::int(4), &ext).expect("constant divisor");
        assert_eq!(q.to_axis().map(|e| e.to_string()), Ok("d//4".into()));
        let r = d.rem(&Dim::int(4), &ext).expect("mod");
        assert_eq!(r.to_axis().map(|e| e.to_string()), Ok("d+-4*(d//4)".into()));
        // Provably small: c < 4, so c // 4 = 0 and c mod 4 = c.
        let c = Ix::var("c");
        assert_eq!(c.floordiv(&Dim::int(4), &ext), Ok(Ix::default()));
        assert_eq!(c.rem(&Dim::int(4), &ext), Ok(c.clone()));
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
