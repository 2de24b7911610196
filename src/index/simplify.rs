//! The one floordiv simplifier of the index algebra, over range facts.
//!
//! `floor(e / d)` for `d > 0` (an integer, or a symbolic size where the division is provably
//! exact), all rules exact on integers:
//! 1. multiples leave the floor: `floor((d·q + r) / d) = q + floor(r / d)` for integer-valued
//!    `q` (Euclidean split of integer coefficients, exact division of symbolic ones);
//! 2. gcd reduction: `floor(g·r / g·c) = floor(r / c)` when `g` divides every integer
//!    coefficient of the rest and the divisor;
//! 3. range collapse: `floor(r / d) = k` when the facts prove `lo <= r <= hi` with
//!    `floor(lo/d) = floor(hi/d) = k` (or `0 <= lo`, `hi < d` for a symbolic `d`);
//! 4. nested floors: `floor(floor(e / a) / c) = floor(e / (a·c))`.
//!
//! What stays is `q + floor(r / d)` with the remainder `r` as an [`Atom::Floor`].

use super::coeff::{gcd, Coeff};
use super::quasi::{Atom, Quasi};
use super::{trace, IndexError};

/// Range facts: inclusive bounds of variables, valid on the whole domain the expression is
/// simplified for.
pub trait Facts<C, V> {
    /// `(lo, hi)` with `lo <= v <= hi`, or `None` when unknown.
    fn range(&self, v: &V) -> Option<(C, C)>;
}

/// No facts: every variable is unbounded.
pub struct NoFacts;

impl<C, V> Facts<C, V> for NoFacts {
    fn range(&self, _: &V) -> Option<(C, C)> {
        None
    }
}

/// Provable inclusive bounds of `e` under `facts`, `None` when some atom is unbounded or a
/// coefficient has no known sign.
pub fn range<C: Coeff, V: Clone + Ord>(e: &Quasi<C, V>, facts: &dyn Facts<C, V>) -> Option<(C, C)> {
    let (mut lo, mut hi) = (e.konst.clone(), e.konst.clone());
    for (a, c) in &e.terms {
        let (alo, ahi) = match a {
            Atom::Var(v) => facts.range(v)?,
            Atom::Floor(x, d) => {
                let k = d.as_int()?;
                let (l, h) = range(x, facts)?;
                (l.floordiv_int(k), h.floordiv_int(k))
            }
            Atom::Min(..) | Atom::Max(..) | Atom::Opaque(_) => return None,
        };
        let (a, b) = if c.is_nonneg() {
            (c.checked_mul(&alo)?, c.checked_mul(&ahi)?)
        } else if c.checked_neg()?.is_nonneg() {
            (c.checked_mul(&ahi)?, c.checked_mul(&alo)?)
        } else {
            return None;
        };
        lo = lo.checked_add(&a)?;
        hi = hi.checked_add(&b)?;
    }
    Some((lo, hi))
}

/// `floor(e / d)` simplified (see the module documentation). A divisor that is not provably
/// positive is [`IndexError::BadDivisor`]; overflow is [`IndexError::Overflow`].
pub fn floordiv<C: Coeff, V: Clone + Ord>(
    e: &Quasi<C, V>,
    d: &C,
    facts: &dyn Facts<C, V>,
) -> Result<Quasi<C, V>, IndexError> {
    let out = floordiv_rules(e, d, facts)?;
    trace::record(e, d, facts, &out);
    Ok(out)
}

fn floordiv_rules<C: Coeff, V: Clone + Ord>(
    e: &Quasi<C, V>,
    d: &C,
    facts: &dyn Facts<C, V>,
) -> Result<Quasi<C, V>, IndexError> {
    match d.as_int() {
        Some(k) if k <= 0 => return Err(IndexError::BadDivisor(d.to_string())),
        Some(1) => return Ok(e.clone()),
        None if !C::provably_le(&C::int(1), d) && !d.is_nonneg() => {
            return Err(IndexError::BadDivisor(d.to_string()))
        }
        _ => {}
    }
    // 1. Multiples of d leave the floor.
    let split = |c: &C| -> (C, C) {
        match (d.as_int(), c.div_exact(d)) {
            (Some(k), _) => c.split_int(k),
            (None, Some(q)) => (q, C::int(0)),
            (None, None) => (C::int(0), c.clone()),
        }
    };
    let (mut q, mut rest) = (Quasi::<C, V>::default(), Quasi::<C, V>::default());
    for (a, c) in &e.terms {
        let (qc, rc) = split(c);
        if !qc.is_int(0) {
            q.terms.insert(a.clone(), qc);
        }
        if !rc.is_int(0) {
            rest.terms.insert(a.clone(), rc);
        }
    }
    (q.konst, rest.konst) = split(&e.konst);
    let mut d = d.clone();
    // 2. gcd reduction.
    if let Some(k) = d.as_int() {
        let ints: Option<Vec<i64>> = rest
            .terms
            .values()
            .chain(std::iter::once(&rest.konst))
            .map(C::as_int)
            .collect();
        if let Some(ints) = ints {
            let g = ints.into_iter().fold(k, gcd);
            if g > 1 {
                for c in rest.terms.values_mut() {
                    *c = c.floordiv_int(g);
                }
                rest.konst = rest.konst.floordiv_int(g);
                d = C::int(k / g);
            }
        }
    }
    if d.is_int(1) {
        return q.try_add(&rest);
    }
    // 3. Range collapse.
    if let Some((lo, hi)) = range(&rest, facts) {
        if let Some(k) = d.as_int() {
            let (a, b) = (lo.floordiv_int(k), hi.floordiv_int(k));
            if a == b {
                return q.try_add_const(&a);
            }
        }
        if C::provably_le(&C::int(0), &lo)
            && hi
                .checked_add(&C::int(1))
                .is_some_and(|h1| C::provably_le(&h1, &d))
        {
            return Ok(q);
        }
    }
    // 4. Nested floors.
    let atom = match (rest.terms.len(), rest.terms.iter().next()) {
        (1, Some((Atom::Floor(x, a), c))) if c.is_int(1) && rest.konst.is_int(0) => {
            match a.checked_mul(&d) {
                Some(ad) => Atom::Floor(x.clone(), ad),
                None => Atom::Floor(Box::new(rest), d),
            }
        }
        _ => Atom::Floor(Box::new(rest), d),
    };
    q.try_add(&Quasi::atom(atom))
}

/// `e mod d` as `e − d · floor(e / d)`.
pub fn modulo<C: Coeff, V: Clone + Ord>(
    e: &Quasi<C, V>,
    d: &C,
    facts: &dyn Facts<C, V>,
) -> Result<Quasi<C, V>, IndexError> {
    e.try_sub(&floordiv(e, d, facts)?.try_scale(d)?)
}

/// `ceil(e / d)` as `floor((e + d − 1) / d)`.
pub fn ceildiv<C: Coeff, V: Clone + Ord>(
    e: &Quasi<C, V>,
    d: &C,
    facts: &dyn Facts<C, V>,
) -> Result<Quasi<C, V>, IndexError> {
    let dm1 = d.checked_add(&C::int(-1)).ok_or(IndexError::Overflow)?;
    floordiv(&e.try_add_const(&dm1)?, d, facts)
}

/// `e` with every variable `v` for which `f(v)` is `Some(x)` replaced by `x`, floors re-simplified
/// under `facts` (`min` / `max` atoms substituted inside).
pub fn substitute<C: Coeff, V: Clone + Ord>(
    e: &Quasi<C, V>,
    f: &dyn Fn(&V) -> Option<Quasi<C, V>>,
    facts: &dyn Facts<C, V>,
) -> Result<Quasi<C, V>, IndexError> {
    let mut out = Quasi::constant(e.konst.clone());
    for (a, c) in &e.terms {
        let t = match a {
            Atom::Var(v) => f(v).unwrap_or_else(|| Quasi::var(v.clone())),
            Atom::Floor(x, d) => floordiv(&substitute(x, f, facts)?, d, facts)?,
            Atom::Min(x, y) => Quasi::atom(Atom::Min(
                Box::new(substitute(x, f, facts)?),
                Box::new(substitute(y, f, facts)?),
            )),
            Atom::Max(x, y) => Quasi::atom(Atom::Max(
                Box::new(substitute(x, f, facts)?),
                Box::new(substitute(y, f, facts)?),
            )),
            Atom::Opaque(_) => Quasi::atom(a.clone()),
        };
        out = out.try_add(&t.try_scale(c)?)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Axis `j` ranges over `[0, sizes[j] - 1]`.
    struct Boxed(Vec<i64>);

    impl Facts<i64, usize> for Boxed {
        fn range(&self, v: &usize) -> Option<(i64, i64)> {
            self.0.get(*v).map(|n| (0, n - 1))
        }
    }

    fn i(j: usize) -> Quasi<i64, usize> {
        Quasi::var(j)
    }

    #[test]
    fn union_of_the_legacy_rules() {
        let f = Boxed(vec![4, 6]);
        // Multiples leave; the rest collapses by range: (6*i0 + i1) // 6 = i0.
        let l = i(0).scale(6).add(&i(1));
        assert_eq!(floordiv(&l, &6, &f), Ok(i(0)));
        assert_eq!(modulo(&l, &6, &f), Ok(i(1)));
        // gcd: (2*i1) // 4 = i1 // 2.
        let g = floordiv(&i(1).scale(2), &4, &NoFacts).expect("floordiv");
        assert_eq!(g, Quasi::atom(Atom::Floor(Box::new(i(1)), 2)));
        // Nested: (i0 // 2) // 3 = i0 // 6.
        let n = floordiv(&i(0), &2, &NoFacts).expect("floordiv");
        let n = floordiv(&n, &3, &NoFacts).expect("floordiv");
        assert_eq!(n, Quasi::atom(Atom::Floor(Box::new(i(0)), 6)));
        // Euclidean split of non-multiples: (5*i0 + 7) // 4 = i0 + 1 + (i0 + 3) // 4.
        let e = floordiv(&i(0).scale(5).add(&Quasi::int(7)), &4, &NoFacts).expect("floordiv");
        assert_eq!(e.konst, 1);
        assert_eq!(
            floordiv(&i(0), &0, &NoFacts),
            Err(IndexError::BadDivisor("0".into()))
        );
        assert_eq!(
            ceildiv(&Quasi::<i64, usize>::int(7), &2, &NoFacts),
            Ok(Quasi::int(4))
        );
    }
}
