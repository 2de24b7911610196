//! [`Aff`]: the affine engine's integer affine expressions over named variables (loop dims and
//! parameters) with `floor(aff / c)` terms — a checked façade over the index algebra's
//! [`Quasi`] (every operation reports overflow as [`AffineError::Overflow`]), and the
//! conversion from the region layer's [`AxisExpr`].

use super::AffineError;
pub use crate::index::quasi::{quasi_of_axis, NotQuasiAffine};
use crate::index::{self, simplify, IndexError, NoFacts, Quasi};
use crate::ir::axis::AxisExpr;
use std::fmt;

/// A term of an [`Aff`]: a named variable or `floor(e / c)` with a constant `c >= 2`
/// (`min` / `max` and opaque atoms never occur in the engine).
pub type Atom = index::Atom<i64, String>;

/// `constant + Σ coeff · atom`, canonical (no zero coefficients, atoms sorted), so equal
/// expressions compare equal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Aff(Quasi<i64, String>);

/// `v`, or [`AffineError::Overflow`] for a failed checked operation.
pub(crate) fn ck(v: Option<i64>) -> Result<i64, AffineError> {
    v.ok_or(AffineError::Overflow)
}

impl From<IndexError> for AffineError {
    fn from(e: IndexError) -> AffineError {
        match e {
            IndexError::Overflow => AffineError::Overflow,
            IndexError::BadDivisor(d) => AffineError::BadDivisor(d.parse().unwrap_or(0)),
            IndexError::Opaque(n) | IndexError::NonAffine(n) => AffineError::NonAffine(n),
        }
    }
}

impl Aff {
    /// The integer `c`.
    pub fn constant(c: i64) -> Aff {
        Aff(Quasi::int(c))
    }

    /// The variable `name`.
    pub fn var(name: &str) -> Aff {
        Aff(Quasi::var(name.to_string()))
    }

    /// The index algebra's form.
    pub fn quasi(&self) -> &Quasi<i64, String> {
        &self.0
    }

    /// The affine form of an index-algebra expression without `min` / `max` / opaque atoms.
    pub fn from_quasi(q: Quasi<i64, String>) -> Result<Aff, AffineError> {
        fn plain(q: &Quasi<i64, String>) -> bool {
            q.terms.keys().all(|a| match a {
                Atom::Var(_) => true,
                Atom::Floor(e, d) => *d >= 2 && plain(e),
                _ => false,
            })
        }
        if plain(&q) {
            Ok(Aff(q))
        } else {
            Err(AffineError::NonAffine(q.to_string()))
        }
    }

    /// The constant part.
    pub fn constant_term(&self) -> i64 {
        self.0.konst
    }

    /// The terms, sorted.
    pub fn terms(&self) -> impl Iterator<Item = (&Atom, i64)> {
        self.0.terms.iter().map(|(a, c)| (a, *c))
    }

    /// The coefficient of the variable `name` (outside floordivs).
    pub fn coeff(&self, name: &str) -> i64 {
        self.0
            .terms
            .get(&Atom::Var(name.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// The value when the expression has no terms.
    pub fn as_const(&self) -> Option<i64> {
        self.0.as_int()
    }

    /// Every variable name, including those inside floordivs (sorted, deduplicated).
    pub fn names(&self) -> Vec<String> {
        let mut out = std::collections::BTreeSet::new();
        self.0.vars(&mut out);
        out.into_iter().collect()
    }

    /// True when some floordiv term occurs.
    pub fn has_div(&self) -> bool {
        self.0.has_floor()
    }

    /// `self + o`.
    pub fn add(&self, o: &Aff) -> Result<Aff, AffineError> {
        Ok(Aff(self.0.try_add(&o.0)?))
    }

    /// `self - o`.
    pub fn sub(&self, o: &Aff) -> Result<Aff, AffineError> {
        Ok(Aff(self.0.try_sub(&o.0)?))
    }

    /// `self + c`.
    pub fn add_const(&self, c: i64) -> Result<Aff, AffineError> {
        Ok(Aff(self.0.try_add_const(&c)?))
    }

    /// `k · self`.
    pub fn scale(&self, k: i64) -> Result<Aff, AffineError> {
        Ok(Aff(self.0.try_scale(&k)?))
    }

    /// `floor(self / c)` for `c >= 1`, by the index algebra's simplifier
    /// ([`simplify::floordiv`]; no range facts: multiples of `c` leave the floor, gcd reduction,
    /// nested floors): `floor((4i + j)/4) = i + floor(j/4)`.
    pub fn floordiv(&self, c: i64) -> Result<Aff, AffineError> {
        Ok(Aff(simplify::floordiv(&self.0, &c, &NoFacts)?))
    }

    /// `ceil(self / c)` for `c >= 1`.
    pub fn ceildiv(&self, c: i64) -> Result<Aff, AffineError> {
        Ok(Aff(simplify::ceildiv(&self.0, &c, &NoFacts)?))
    }

    /// The value with variables looked up in `env` (floordiv rounds toward −∞).
    pub fn eval(&self, env: &dyn Fn(&str) -> Option<i64>) -> Result<i64, AffineError> {
        self.0.eval(
            &|n: &String| env(n).ok_or_else(|| AffineError::UnknownName(n.clone())),
            &|c: &i64| Ok(*c),
        )
    }

    /// The expression with every variable `n` for which `f(n)` is `Some(e)` replaced by `e`
    /// (floordivs are re-folded).
    pub fn substitute(&self, f: &dyn Fn(&str) -> Option<Aff>) -> Result<Aff, AffineError> {
        let g = |n: &String| f(n).map(|a| a.0);
        Ok(Aff(simplify::substitute(&self.0, &g, &NoFacts)?))
    }

    /// Converts a region index expression. Products need one constant side, `min`/`max` must
    /// fold to constants; anything else is [`AffineError::NonAffine`].
    pub fn from_axis_expr(e: &AxisExpr) -> Result<Aff, AffineError> {
        if let AxisExpr::FloorDiv(_, c) = e {
            if *c <= 0 {
                return Err(AffineError::BadDivisor(*c));
            }
        }
        let q = quasi_of_axis(e).map_err(|_| AffineError::NonAffine(e.to_string()))?;
        Aff::from_quasi(fold_const_minmax(&q)?).map_err(|_| AffineError::NonAffine(e.to_string()))
    }
}

/// `min`/`max` of two constants folded (checked); other atoms kept.
fn fold_const_minmax(q: &Quasi<i64, String>) -> Result<Quasi<i64, String>, AffineError> {
    let mut out = Quasi::int(q.konst);
    for (a, c) in &q.terms {
        let t = match a {
            Atom::Min(x, y) | Atom::Max(x, y) => {
                let (x, y) = (fold_const_minmax(x)?, fold_const_minmax(y)?);
                match (x.as_int(), y.as_int(), matches!(a, Atom::Min(..))) {
                    (Some(x), Some(y), true) => Quasi::int(x.min(y)),
                    (Some(x), Some(y), false) => Quasi::int(x.max(y)),
                    _ => Quasi::atom(a.clone()),
                }
            }
            Atom::Floor(x, d) => simplify::floordiv(&fold_const_minmax(x)?, d, &NoFacts)?,
            _ => Quasi::atom(a.clone()),
        };
        out = out.try_add(&t.try_scale(c)?)?;
    }
    Ok(out)
}

impl From<i64> for Aff {
    fn from(c: i64) -> Aff {
        Aff::constant(c)
    }
}

impl fmt::Display for Aff {
    /// ISL syntax: `2*h + rh - 1`, `floor((N - 3)/2) + 1`; `0` when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn v(n: &str) -> Aff {
        Aff::var(n)
    }

    #[test]
    fn arithmetic_is_canonical() {
        let a = v("h").scale(2).unwrap().add(&v("rh")).unwrap();
        let b = v("rh").add(&v("h").scale(2).unwrap()).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "2*h + rh");
        assert_eq!(a.sub(&a).unwrap(), Aff::constant(0));
        assert_eq!(v("N").add_const(-3).unwrap().to_string(), "N - 3");
        assert!(Aff::constant(i64::MAX).add_const(1).is_err());
        assert!(v("x").scale(i64::MAX).unwrap().scale(2).is_err());
    }

    #[test]
    fn floordiv_folds_multiples() {
        let e = v("i").scale(4).unwrap().add(&v("j")).unwrap();
        assert_eq!(e.floordiv(4).unwrap().to_string(), "i + floor((j)/4)");
        assert_eq!(
            v("i")
                .scale(6)
                .unwrap()
                .add_const(7)
                .unwrap()
                .floordiv(3)
                .unwrap()
                .to_string(),
            "2*i + 2"
        );
        assert_eq!(v("N").ceildiv(2).unwrap().to_string(), "floor((N + 1)/2)");
        assert!(v("N").floordiv(0).is_err());
        let env = |n: &str| (n == "j").then_some(-5);
        assert_eq!(v("j").floordiv(4).unwrap().eval(&env).unwrap(), -2);
    }

    #[test]
    fn from_axis_expr_accepts_affine_and_rejects_products() {
        use AxisExpr as A;
        let e = A::Add(vec![
            A::product(A::Name("h".into()), A::Const(2)),
            A::Name("rh".into()),
            A::Const(-1),
        ]);
        assert_eq!(Aff::from_axis_expr(&e).unwrap().to_string(), "2*h + rh - 1");
        let d = A::FloorDiv(Box::new(A::Name("i".into())), 4);
        assert_eq!(Aff::from_axis_expr(&d).unwrap().to_string(), "floor((i)/4)");
        let bad = A::product(A::Name("h".into()), A::Name("w".into()));
        assert!(matches!(
            Aff::from_axis_expr(&bad),
            Err(AffineError::NonAffine(_))
        ));
        let mm = A::Min(Box::new(A::Name("S".into())), Box::new(A::Const(10)));
        assert!(Aff::from_axis_expr(&mm).is_err());
        let mc = A::Max(Box::new(A::Const(3)), Box::new(A::Const(10)));
        assert_eq!(Aff::from_axis_expr(&mc).unwrap(), Aff::constant(10));
    }
}
