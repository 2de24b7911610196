//! [`Quasi`]: the canonical quasi-affine form `konst + Σ coeff · atom`.

use super::axis::AxisExpr;
use super::coeff::Coeff;
use super::simplify::{self, NoFacts};
use super::IndexError;
use std::collections::{BTreeMap, BTreeSet};

/// An atom of a [`Quasi`]. The derived order (variables, floors, `min`, `max`, opaque atoms) is
/// the printing order of terms.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Atom<C, V> {
    /// A variable: a loop or output axis, a named dimension or a parameter.
    Var(V),
    /// `floor(e / d)`, `d > 1` (or symbolic and provably positive); `e` is what is left after
    /// the simplifier pulled the multiples of `d` out.
    Floor(Box<Quasi<C, V>>, C),
    /// `min(a, b)` (kept as an atom: the form is not piecewise).
    Min(Box<Quasi<C, V>>, Box<Quasi<C, V>>),
    /// `max(a, b)`.
    Max(Box<Quasi<C, V>>, Box<Quasi<C, V>>),
    /// An opaque atom: a data-dependent index (a GATHER reads it from the named value).
    Opaque(String),
}

/// `konst + Σ coeff · atom`; zero coefficients are never stored, so equal forms compare equal.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quasi<C, V> {
    /// Non-zero coefficients by atom.
    pub terms: BTreeMap<Atom<C, V>, C>,
    /// The constant term.
    pub konst: C,
}

impl<C: Coeff, V> Default for Quasi<C, V> {
    fn default() -> Self {
        Quasi {
            terms: BTreeMap::new(),
            konst: C::int(0),
        }
    }
}

type Op<C> = fn(&C, &C) -> Option<C>;

impl<C: Coeff, V: Clone + Ord> Quasi<C, V> {
    /// The constant `c`.
    pub fn constant(c: C) -> Self {
        Quasi {
            terms: BTreeMap::new(),
            konst: c,
        }
    }

    /// The integer `c`.
    pub fn int(c: i64) -> Self {
        Self::constant(C::int(c))
    }

    /// The variable `v`.
    pub fn var(v: impl Into<V>) -> Self {
        Self::atom(Atom::Var(v.into()))
    }

    /// The atom `a` with coefficient 1.
    pub fn atom(a: Atom<C, V>) -> Self {
        Quasi {
            terms: [(a, C::int(1))].into_iter().collect(),
            konst: C::int(0),
        }
    }

    /// The constant when there are no terms.
    pub fn as_const(&self) -> Option<&C> {
        self.terms.is_empty().then_some(&self.konst)
    }

    /// The integer value when constant and integral.
    pub fn as_int(&self) -> Option<i64> {
        self.as_const().and_then(C::as_int)
    }

    /// True when the form is `0`.
    pub fn is_zero(&self) -> bool {
        self.terms.is_empty() && self.konst.is_int(0)
    }

    /// The variable when the form is exactly one variable with coefficient 1.
    pub fn as_var(&self) -> Option<&V> {
        match self.terms.iter().next() {
            Some((Atom::Var(v), c))
                if self.terms.len() == 1 && c.is_int(1) && self.konst.is_int(0) =>
            {
                Some(v)
            }
            _ => None,
        }
    }

    /// `self + k · o` with the given coefficient operations (`None` on overflow).
    fn comb(&self, o: &Self, k: &C, add: Op<C>, mul: Op<C>) -> Option<Self> {
        let mut out = self.clone();
        for (a, c) in &o.terms {
            let kc = mul(c, k)?;
            let v = match out.terms.get(a) {
                Some(old) => add(old, &kc)?,
                None => kc,
            };
            if v.is_int(0) {
                out.terms.remove(a);
            } else {
                out.terms.insert(a.clone(), v);
            }
        }
        out.konst = add(&out.konst, &mul(&o.konst, k)?)?;
        Some(out)
    }

    /// `self + o`, checked.
    pub fn try_add(&self, o: &Self) -> Result<Self, IndexError> {
        self.comb(o, &C::int(1), C::checked_add, C::checked_mul)
            .ok_or(IndexError::Overflow)
    }

    /// `self − o`, checked.
    pub fn try_sub(&self, o: &Self) -> Result<Self, IndexError> {
        self.comb(o, &C::int(-1), C::checked_add, C::checked_mul)
            .ok_or(IndexError::Overflow)
    }

    /// `k · self`, checked.
    pub fn try_scale(&self, k: &C) -> Result<Self, IndexError> {
        if k.is_int(0) {
            return Ok(Self::default());
        }
        Self::default()
            .comb(self, k, C::checked_add, C::checked_mul)
            .ok_or(IndexError::Overflow)
    }

    /// `self + c`, checked.
    pub fn try_add_const(&self, c: &C) -> Result<Self, IndexError> {
        Ok(Quasi {
            terms: self.terms.clone(),
            konst: self.konst.checked_add(c).ok_or(IndexError::Overflow)?,
        })
    }

    /// Every variable, atoms' insides included.
    pub fn vars(&self, out: &mut BTreeSet<V>) {
        for a in self.terms.keys() {
            match a {
                Atom::Var(v) => {
                    out.insert(v.clone());
                }
                Atom::Floor(e, _) => e.vars(out),
                Atom::Min(x, y) | Atom::Max(x, y) => {
                    x.vars(out);
                    y.vars(out);
                }
                Atom::Opaque(_) => {}
            }
        }
    }

    /// The same form over variables renamed by `f` (`f` must be injective on this form's
    /// variables, else terms merge).
    pub fn map_vars<W: Clone + Ord>(&self, f: &dyn Fn(&V) -> W) -> Quasi<C, W> {
        let mut out = Quasi::<C, W>::constant(self.konst.clone());
        for (a, c) in &self.terms {
            let b = match a {
                Atom::Var(v) => Atom::Var(f(v)),
                Atom::Floor(e, d) => Atom::Floor(Box::new(e.map_vars(f)), d.clone()),
                Atom::Min(x, y) => Atom::Min(Box::new(x.map_vars(f)), Box::new(y.map_vars(f))),
                Atom::Max(x, y) => Atom::Max(Box::new(x.map_vars(f)), Box::new(y.map_vars(f))),
                Atom::Opaque(n) => Atom::Opaque(n.clone()),
            };
            out.terms.insert(b, c.clone());
        }
        out
    }

    /// True when some variable satisfies `f` (atoms' insides included).
    pub fn mentions(&self, f: &dyn Fn(&V) -> bool) -> bool {
        let mut vs = BTreeSet::new();
        self.vars(&mut vs);
        vs.iter().any(f)
    }

    /// True when a floor atom occurs at the top level.
    pub fn has_floor(&self) -> bool {
        self.terms.keys().any(|a| matches!(a, Atom::Floor(..)))
    }

    /// True when an opaque atom, or a floor with a symbolic divisor, occurs anywhere.
    pub fn has_opaque_or_symbolic_floor(&self) -> bool {
        self.terms.keys().any(|a| match a {
            Atom::Floor(e, d) => d.as_int().is_none() || e.has_opaque_or_symbolic_floor(),
            Atom::Opaque(_) => true,
            Atom::Min(x, y) | Atom::Max(x, y) => {
                x.has_opaque_or_symbolic_floor() || y.has_opaque_or_symbolic_floor()
            }
            Atom::Var(_) => false,
        })
    }

    /// The value with variables and coefficients evaluated by `var` and `coeff` (floors round
    /// toward −∞; opaque atoms and overflow are errors).
    pub fn eval<E: From<IndexError>>(
        &self,
        var: &dyn Fn(&V) -> Result<i64, E>,
        coeff: &dyn Fn(&C) -> Result<i64, E>,
    ) -> Result<i64, E> {
        let of = || E::from(IndexError::Overflow);
        let mut acc = coeff(&self.konst)?;
        for (a, c) in &self.terms {
            let x = match a {
                Atom::Var(v) => var(v)?,
                Atom::Floor(e, d) => {
                    let d = coeff(d)?;
                    if d <= 0 {
                        return Err(E::from(IndexError::BadDivisor(d.to_string())));
                    }
                    e.eval(var, coeff)?.div_euclid(d)
                }
                Atom::Min(x, y) => x.eval(var, coeff)?.min(y.eval(var, coeff)?),
                Atom::Max(x, y) => x.eval(var, coeff)?.max(y.eval(var, coeff)?),
                Atom::Opaque(n) => return Err(E::from(IndexError::Opaque(n.clone()))),
            };
            let t = coeff(c)?.checked_mul(x).ok_or_else(of)?;
            acc = acc.checked_add(t).ok_or_else(of)?;
        }
        Ok(acc)
    }
}

impl<V: Clone + Ord> Quasi<i64, V> {
    /// `self + o` (integer coefficients; wraps on overflow like plain `i64` arithmetic — use
    /// [`Quasi::try_add`] where overflow must be reported).
    pub fn add(&self, o: &Self) -> Self {
        self.comb(o, &1, wrap_add, wrap_mul).unwrap_or_default()
    }

    /// `self − o` (wrapping, see [`Quasi::add`]).
    pub fn sub(&self, o: &Self) -> Self {
        self.comb(o, &-1, wrap_add, wrap_mul).unwrap_or_default()
    }

    /// `k · self` (wrapping, see [`Quasi::add`]).
    pub fn scale(&self, k: i64) -> Self {
        if k == 0 {
            return Self::default();
        }
        Self::default()
            .comb(self, &k, wrap_add, wrap_mul)
            .unwrap_or_default()
    }
}

fn wrap_add(a: &i64, b: &i64) -> Option<i64> {
    Some(a.wrapping_add(*b))
}

fn wrap_mul(a: &i64, b: &i64) -> Option<i64> {
    Some(a.wrapping_mul(*b))
}

/// Why an index expression has no quasi-affine form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotQuasiAffine(pub String);

/// The quasi-affine form of a region index expression (names as variables, `min` / `max` kept
/// as atoms): products need one constant side, floordivs a positive divisor.
pub fn quasi_of_axis(e: &AxisExpr) -> Result<Quasi<i64, String>, NotQuasiAffine> {
    let lift = |r: Result<Quasi<i64, String>, IndexError>| {
        r.map_err(|x| NotQuasiAffine(format!("`{e}`: {x}")))
    };
    Ok(match e {
        AxisExpr::Const(c) => Quasi::int(*c),
        AxisExpr::Name(n) => Quasi::var(n.clone()),
        AxisExpr::Add(ts) => {
            let mut out = Quasi::int(0);
            for t in ts {
                out = lift(out.try_add(&quasi_of_axis(t)?))?;
            }
            out
        }
        AxisExpr::Mul(a, b) => {
            let (x, y) = (quasi_of_axis(a)?, quasi_of_axis(b)?);
            match (x.as_int(), y.as_int()) {
                (Some(k), _) => lift(y.try_scale(&k))?,
                (_, Some(k)) => lift(x.try_scale(&k))?,
                _ => return Err(NotQuasiAffine(format!("product of two variables `{e}`"))),
            }
        }
        AxisExpr::FloorDiv(x, c) if *c > 0 => {
            lift(simplify::floordiv(&quasi_of_axis(x)?, c, &NoFacts))?
        }
        AxisExpr::FloorDiv(..) => {
            return Err(NotQuasiAffine(format!(
                "floordiv by a non-positive constant `{e}`"
            )))
        }
        AxisExpr::Min(a, b) => Quasi::atom(Atom::Min(
            Box::new(quasi_of_axis(a)?),
            Box::new(quasi_of_axis(b)?),
        )),
        AxisExpr::Max(a, b) => Quasi::atom(Atom::Max(
            Box::new(quasi_of_axis(a)?),
            Box::new(quasi_of_axis(b)?),
        )),
    })
}
