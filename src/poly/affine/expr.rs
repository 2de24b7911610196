//! [`Aff`]: integer affine expressions over named variables (loop dims and parameters) with
//! `floor(aff / c)` terms, exact arithmetic (checked `i64`), and the conversion from the
//! region layer's [`AxisExpr`].

use super::AffineError;
use crate::ir::axis::AxisExpr;
use std::collections::BTreeMap;
use std::fmt;

/// A term of an [`Aff`]: a named variable or `floor(aff / c)` with a constant `c >= 2`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Atom {
    /// A loop dimension or a parameter (which one depends on the space it is used in).
    Name(String),
    /// `floor(e / c)`, `c >= 2`; `e` is not a multiple of `c` term-wise (else it is folded).
    FloorDiv(Box<Aff>, i64),
}

/// `constant + Σ coeff · atom`, canonical (no zero coefficients, atoms sorted), so equal
/// expressions compare equal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Aff {
    terms: BTreeMap<Atom, i64>,
    constant: i64,
}

pub(crate) fn ck(v: Option<i64>) -> Result<i64, AffineError> {
    v.ok_or(AffineError::Overflow)
}

impl Aff {
    /// The integer `c`.
    pub fn constant(c: i64) -> Aff {
        Aff {
            terms: BTreeMap::new(),
            constant: c,
        }
    }

    /// The variable `name`.
    pub fn var(name: &str) -> Aff {
        Aff::term(Atom::Name(name.to_string()), 1)
    }

    fn term(a: Atom, c: i64) -> Aff {
        let mut terms = BTreeMap::new();
        if c != 0 {
            terms.insert(a, c);
        }
        Aff { terms, constant: 0 }
    }

    /// The constant part.
    pub fn constant_term(&self) -> i64 {
        self.constant
    }

    /// The terms, sorted.
    pub fn terms(&self) -> impl Iterator<Item = (&Atom, i64)> {
        self.terms.iter().map(|(a, c)| (a, *c))
    }

    /// The coefficient of the variable `name` (outside floordivs).
    pub fn coeff(&self, name: &str) -> i64 {
        self.terms
            .get(&Atom::Name(name.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// The value when the expression has no terms.
    pub fn as_const(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.constant)
    }

    /// Every variable name, including those inside floordivs (sorted, deduplicated).
    pub fn names(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_names(&mut out);
        out.sort();
        out.dedup();
        out
    }

    fn collect_names(&self, out: &mut Vec<String>) {
        for a in self.terms.keys() {
            match a {
                Atom::Name(n) => out.push(n.clone()),
                Atom::FloorDiv(e, _) => e.collect_names(out),
            }
        }
    }

    /// True when some floordiv term occurs.
    pub fn has_div(&self) -> bool {
        self.terms.keys().any(|a| matches!(a, Atom::FloorDiv(..)))
    }

    /// `self + o`.
    pub fn add(&self, o: &Aff) -> Result<Aff, AffineError> {
        let mut r = self.clone();
        for (a, c) in &o.terms {
            let e = r.terms.entry(a.clone()).or_insert(0);
            *e = ck(e.checked_add(*c))?;
            if *e == 0 {
                r.terms.remove(a);
            }
        }
        r.constant = ck(r.constant.checked_add(o.constant))?;
        Ok(r)
    }

    /// `self - o`.
    pub fn sub(&self, o: &Aff) -> Result<Aff, AffineError> {
        self.add(&o.scale(-1)?)
    }

    /// `self + c`.
    pub fn add_const(&self, c: i64) -> Result<Aff, AffineError> {
        self.add(&Aff::constant(c))
    }

    /// `k · self`.
    pub fn scale(&self, k: i64) -> Result<Aff, AffineError> {
        if k == 0 {
            return Ok(Aff::constant(0));
        }
        let mut terms = BTreeMap::new();
        for (a, c) in &self.terms {
            terms.insert(a.clone(), ck(c.checked_mul(k))?);
        }
        Ok(Aff {
            terms,
            constant: ck(self.constant.checked_mul(k))?,
        })
    }

    /// `floor(self / c)` for `c >= 1`: folded when `c` divides every coefficient (then the
    /// constant is floor-divided), otherwise a [`Atom::FloorDiv`] term (with the multiples of
    /// `c` pulled out: `floor((4i + j)/4) = i + floor(j/4)`).
    pub fn floordiv(&self, c: i64) -> Result<Aff, AffineError> {
        if c <= 0 {
            return Err(AffineError::BadDivisor(c));
        }
        if c == 1 {
            return Ok(self.clone());
        }
        let mut outside = Aff::constant(0);
        let mut inside = Aff::constant(self.constant.rem_euclid(c));
        outside.constant = self.constant.div_euclid(c);
        for (a, k) in &self.terms {
            let (q, r) = (k.div_euclid(c), k.rem_euclid(c));
            if q != 0 {
                outside.terms.insert(a.clone(), q);
            }
            if r != 0 {
                inside.terms.insert(a.clone(), r);
            }
        }
        if inside.terms.is_empty() {
            // 0 <= inside.constant < c
            return Ok(outside);
        }
        outside.add(&Aff::term(Atom::FloorDiv(Box::new(inside), c), 1))
    }

    /// `ceil(self / c)` for `c >= 1`.
    pub fn ceildiv(&self, c: i64) -> Result<Aff, AffineError> {
        if c <= 0 {
            return Err(AffineError::BadDivisor(c));
        }
        self.add_const(c - 1)?.floordiv(c)
    }

    /// The value with variables looked up in `env` (floordiv rounds toward −∞).
    pub fn eval(&self, env: &dyn Fn(&str) -> Option<i64>) -> Result<i64, AffineError> {
        let mut v = self.constant;
        for (a, c) in &self.terms {
            let x = match a {
                Atom::Name(n) => env(n).ok_or_else(|| AffineError::UnknownName(n.clone()))?,
                Atom::FloorDiv(e, d) => e.eval(env)?.div_euclid(*d),
            };
            v = ck(v.checked_add(ck(x.checked_mul(*c))?))?;
        }
        Ok(v)
    }

    /// The expression with every variable `n` for which `f(n)` is `Some(e)` replaced by `e`
    /// (floordivs are re-folded).
    pub fn substitute(&self, f: &dyn Fn(&str) -> Option<Aff>) -> Result<Aff, AffineError> {
        let mut r = Aff::constant(self.constant);
        for (a, c) in &self.terms {
            let t = match a {
                Atom::Name(n) => f(n).unwrap_or_else(|| Aff::var(n)),
                Atom::FloorDiv(e, d) => e.substitute(f)?.floordiv(*d)?,
            };
            r = r.add(&t.scale(*c)?)?;
        }
        Ok(r)
    }

    /// Converts a region index expression. Products need one constant side, `min`/`max` must
    /// fold to constants; anything else is [`AffineError::NonAffine`].
    pub fn from_axis_expr(e: &AxisExpr) -> Result<Aff, AffineError> {
        let non_affine = || AffineError::NonAffine(e.to_string());
        Ok(match e {
            AxisExpr::Const(c) => Aff::constant(*c),
            AxisExpr::Name(n) => Aff::var(n),
            AxisExpr::Add(ts) => {
                let mut r = Aff::constant(0);
                for t in ts {
                    r = r.add(&Aff::from_axis_expr(t)?)?;
                }
                r
            }
            AxisExpr::Mul(a, b) => {
                let (a, b) = (Aff::from_axis_expr(a)?, Aff::from_axis_expr(b)?);
                match (a.as_const(), b.as_const()) {
                    (Some(k), _) => b.scale(k)?,
                    (_, Some(k)) => a.scale(k)?,
                    _ => return Err(non_affine()),
                }
            }
            AxisExpr::FloorDiv(x, c) => Aff::from_axis_expr(x)?.floordiv(*c)?,
            AxisExpr::Min(a, b) | AxisExpr::Max(a, b) => {
                let (a, b) = (Aff::from_axis_expr(a)?, Aff::from_axis_expr(b)?);
                match (a.as_const(), b.as_const()) {
                    (Some(x), Some(y)) if matches!(e, AxisExpr::Min(..)) => Aff::constant(x.min(y)),
                    (Some(x), Some(y)) => Aff::constant(x.max(y)),
                    _ => return Err(non_affine()),
                }
            }
        })
    }
}

impl From<i64> for Aff {
    fn from(c: i64) -> Aff {
        Aff::constant(c)
    }
}

impl fmt::Display for Aff {
    /// ISL syntax: `2*h + rh - 1`, `floor((N - 3)/2) + 1`; `0` when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (a, c) in &self.terms {
            let atom = match a {
                Atom::Name(n) => n.clone(),
                Atom::FloorDiv(e, d) => format!("floor(({e})/{d})"),
            };
            let (neg, mag) = (*c < 0, c.unsigned_abs());
            match (first, neg) {
                (true, true) => f.write_str("-")?,
                (true, false) => {}
                (false, true) => f.write_str(" - ")?,
                (false, false) => f.write_str(" + ")?,
            }
            if mag == 1 {
                f.write_str(&atom)?;
            } else {
                write!(f, "{mag}*{atom}")?;
            }
            first = false;
        }
        if first {
            write!(f, "{}", self.constant)
        } else if self.constant > 0 {
            write!(f, " + {}", self.constant)
        } else if self.constant < 0 {
            write!(f, " - {}", self.constant.unsigned_abs())
        } else {
            Ok(())
        }
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
