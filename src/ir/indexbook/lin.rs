//! Index expressions of the IndexBook while movement chains are composed: a sum of axis-free
//! (possibly symbolic) coefficients times variables, where a variable is a value axis (`i0`, a
//! reduce axis `k0`), a `floor(e / d)` of another expression, or a data-dependent GATHER index.
//! Floordivs simplify by exact division, gcd normalization and the value ranges of the axes
//! (seed 001 §4.3 invariants 6 and 7); `%` is `e − c·floor(e/c)` (invariant 1).

use crate::ir::dim::Dim;
use std::collections::BTreeMap;

/// A variable of a [`Lin`]. The derived order (`i*` by index, then `k*`, floors, gathers) is the
/// printing order of terms.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Var {
    /// Output axis `i<j>` of the value.
    I(usize),
    /// Reduce axis `k<j>` of a REDUCE value.
    K(usize),
    /// `floor(e / d)`, `d > 0`; a symbolic `d` makes the map non-SCoP.
    Floor(Box<Lin>, Dim),
    /// The data-dependent index a GATHER reads from the named value (non-SCoP).
    Gather(String),
}

/// `konst + Σ coeff · var`, coefficients non-zero and free of axes.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Lin {
    terms: BTreeMap<Var, Dim>,
    konst: Dim,
}

/// Axis sizes of the value whose maps are being built: the ranges of `I` and `K` variables.
pub(crate) struct Ranges<'a> {
    pub iters: &'a [Dim],
    pub reduces: &'a [Dim],
}

/// `a <= b` provably (every symbol is a size `>= 0`).
pub(crate) fn provably_le(a: &Dim, b: &Dim) -> bool {
    b.sub(a).is_nonneg()
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    i64::try_from(a).unwrap_or(1)
}

impl Lin {
    pub fn var(v: Var) -> Lin {
        let mut terms = BTreeMap::new();
        terms.insert(v, Dim::int(1));
        Lin {
            terms,
            konst: Dim::int(0),
        }
    }

    pub fn constant(c: Dim) -> Lin {
        Lin {
            terms: BTreeMap::new(),
            konst: c,
        }
    }

    pub fn is_zero(&self) -> bool {
        self.terms.is_empty() && self.konst.is_int(0)
    }

    fn add_term(&mut self, v: Var, c: &Dim) {
        let e = self.terms.entry(v).or_default();
        *e = e.add(c);
        if e.is_int(0) {
            self.terms.retain(|_, c| !c.is_int(0));
        }
    }

    pub fn add(&self, o: &Lin) -> Lin {
        let mut out = self.clone();
        for (v, c) in &o.terms {
            out.add_term(v.clone(), c);
        }
        out.konst = out.konst.add(&o.konst);
        out
    }

    pub fn add_dim(&self, c: &Dim) -> Lin {
        self.add(&Lin::constant(c.clone()))
    }

    pub fn scale(&self, c: &Dim) -> Lin {
        if c.is_int(0) {
            return Lin::default();
        }
        Lin {
            terms: self
                .terms
                .iter()
                .map(|(v, k)| (v.clone(), k.mul(c)))
                .collect(),
            konst: self.konst.mul(c),
        }
    }

    pub fn sub(&self, o: &Lin) -> Lin {
        self.add(&o.scale(&Dim::int(-1)))
    }

    /// The variable when the expression is exactly one variable with coefficient 1.
    pub fn as_var(&self) -> Option<&Var> {
        match self.terms.iter().next() {
            Some((v, c)) if self.terms.len() == 1 && c.is_int(1) && self.konst.is_int(0) => Some(v),
            _ => None,
        }
    }

    /// True when `v` occurs anywhere, floors included.
    pub fn mentions(&self, v: &Var) -> bool {
        self.terms
            .keys()
            .any(|t| t == v || matches!(t, Var::Floor(e, _) if e.mentions(v)))
    }

    /// True when a floordiv has a symbolic divisor or a GATHER index occurs.
    pub fn is_non_scop(&self) -> bool {
        self.terms.keys().any(|t| match t {
            Var::Floor(e, d) => d.as_int().is_none() || e.is_non_scop(),
            Var::Gather(_) => true,
            _ => false,
        })
    }

    /// True when a floordiv occurs (its guard goes into the domain).
    pub fn has_floor(&self) -> bool {
        self.terms.keys().any(|t| matches!(t, Var::Floor(..)))
    }

    /// Inclusive bounds `[lo, hi]`, when every term has a known sign and range.
    pub fn range(&self, r: &Ranges) -> Option<(Dim, Dim)> {
        let (mut lo, mut hi) = (self.konst.clone(), self.konst.clone());
        for (v, c) in &self.terms {
            let (vlo, vhi) = match v {
                Var::I(j) => (Dim::int(0), r.iters.get(*j)?.add_int(-1)),
                Var::K(j) => (Dim::int(0), r.reduces.get(*j)?.add_int(-1)),
                Var::Floor(e, d) => {
                    let k = d.as_int()?;
                    let (a, b) = e.range(r)?;
                    (a.floordiv(k), b.floordiv(k))
                }
                Var::Gather(_) => return None,
            };
            if c.is_nonneg() {
                lo = lo.add(&c.mul(&vlo));
                hi = hi.add(&c.mul(&vhi));
            } else if c.neg().is_nonneg() {
                lo = lo.add(&c.mul(&vhi));
                hi = hi.add(&c.mul(&vlo));
            } else {
                return None;
            }
        }
        Some((lo, hi))
    }

    /// `floor(self / d)` for `d > 0`, simplified: exactly divisible terms leave the floor, the
    /// rest is reduced by the gcd of its integer coefficients, and a remainder whose range lies
    /// in one multiple of `d` becomes a constant.
    pub fn floordiv(&self, d: &Dim, r: &Ranges) -> Lin {
        if d.is_int(1) {
            return self.clone();
        }
        let (mut q, mut rest) = (Lin::default(), Lin::default());
        for (v, c) in &self.terms {
            match c.div_exact(d) {
                Some(qc) => q.add_term(v.clone(), &qc),
                None => rest.add_term(v.clone(), c),
            }
        }
        match (self.konst.div_exact(d), self.konst.as_int(), d.as_int()) {
            (Some(qk), _, _) => q.konst = qk,
            (None, Some(k), Some(c)) => {
                q.konst = Dim::int(k.div_euclid(c));
                rest.konst = Dim::int(k.rem_euclid(c));
            }
            _ => rest.konst = self.konst.clone(),
        }
        if rest.is_zero() {
            return q;
        }
        let mut d = d.clone();
        if let Some(c) = d.as_int() {
            let ints: Option<Vec<i64>> = rest
                .terms
                .values()
                .chain(std::iter::once(&rest.konst))
                .map(Dim::as_int)
                .collect();
            if let Some(ints) = ints {
                let g = ints.into_iter().fold(c, gcd);
                if g > 1 {
                    rest = Lin {
                        terms: rest
                            .terms
                            .iter()
                            .map(|(v, k)| (v.clone(), k.floordiv(g)))
                            .collect(),
                        konst: rest.konst.floordiv(g),
                    };
                    d = Dim::int(c / g);
                }
            }
        }
        if let Some((lo, hi)) = rest.range(r) {
            if let (Some(l), Some(h), Some(c)) = (lo.as_int(), hi.as_int(), d.as_int()) {
                if l.div_euclid(c) == h.div_euclid(c) {
                    return q.add_dim(&Dim::int(l.div_euclid(c)));
                }
            } else if provably_le(&Dim::int(0), &lo) && provably_le(&hi.add_int(1), &d) {
                return q;
            }
        }
        if d.is_int(1) {
            return q.add(&rest);
        }
        q.add(&Lin::var(Var::Floor(Box::new(rest), d)))
    }

    /// The value at axis values `iters` / `reduces` with symbols from `syms` (tests check the
    /// composed maps against the reference evaluator with it).
    #[cfg(test)]
    pub fn eval(
        &self,
        iters: &[i64],
        reduces: &[i64],
        syms: &BTreeMap<String, i64>,
    ) -> Option<i64> {
        let mut acc = self.konst.eval_with(syms).ok()?;
        for (v, c) in &self.terms {
            let x = match v {
                Var::I(j) => *iters.get(*j)?,
                Var::K(j) => *reduces.get(*j)?,
                Var::Floor(e, d) => e
                    .eval(iters, reduces, syms)?
                    .div_euclid(d.eval_with(syms).ok()?),
                Var::Gather(_) => return None,
            };
            acc += c.eval_with(syms).ok()? * x;
        }
        Some(acc)
    }

    /// `self mod d` as `self − d·floor(self/d)`.
    pub fn modulo(&self, d: &Dim, r: &Ranges) -> Lin {
        self.sub(&self.floordiv(d, r).scale(d))
    }
}

/// True when a size prints as one factor (`4`, `N`, `M*N`, `H//2`), so it needs no parentheses
/// as a coefficient or divisor.
fn is_atomic(s: &str) -> bool {
    !s.trim_start_matches('-').contains(['+', '-'])
}

fn var_string(v: &Var) -> String {
    match v {
        Var::I(j) => format!("i{j}"),
        Var::K(j) => format!("k{j}"),
        Var::Floor(e, d) => {
            let es = e.to_string();
            let es = if e.as_var().is_some() {
                es
            } else {
                format!("({es})")
            };
            let ds = d.to_string();
            if is_atomic(&ds) && !ds.contains('*') {
                format!("{es}//{ds}")
            } else {
                format!("{es}//({ds})")
            }
        }
        Var::Gather(id) => format!("gather({id})"),
    }
}

impl std::fmt::Display for Lin {
    /// `2*i2+i4-1`, `i0-4*(i0//4)`, `N*i0+i1`; constant last, `0` for zero.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = String::new();
        for (v, c) in &self.terms {
            let vs = var_string(v);
            let vs = if matches!(v, Var::Floor(..)) && !c.is_int(1) {
                format!("({vs})")
            } else {
                vs
            };
            let term = match c.as_int() {
                Some(1) => vs,
                Some(-1) => format!("-{vs}"),
                _ => {
                    let cs = c.to_string();
                    if is_atomic(&cs) {
                        format!("{cs}*{vs}")
                    } else {
                        format!("({cs})*{vs}")
                    }
                }
            };
            if !out.is_empty() && !term.starts_with('-') {
                out.push('+');
            }
            out.push_str(&term);
        }
        if out.is_empty() || !self.konst.is_int(0) {
            let ks = self.konst.to_string();
            if !out.is_empty() && !ks.starts_with('-') {
                out.push('+');
            }
            out.push_str(&ks);
        }
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i(j: usize) -> Lin {
        Lin::var(Var::I(j))
    }

    #[test]
    fn prints_affine_forms_like_the_seed() {
        let e = i(2).scale(&Dim::int(2)).add(&i(4)).add_dim(&Dim::int(-1));
        assert_eq!(e.to_string(), "2*i2+i4-1");
        assert_eq!(Lin::default().to_string(), "0");
        let n = Dim::sym("N");
        assert_eq!(i(0).scale(&n).add(&i(1)).to_string(), "N*i0+i1");
        assert_eq!(i(0).add_dim(&n.add_int(1)).to_string(), "i0+N+1");
    }

    #[test]
    fn floordiv_simplifies_by_ranges_and_gcd() {
        let sizes = [Dim::int(4), Dim::int(6)];
        let r = Ranges {
            iters: &sizes,
            reduces: &[],
        };
        // (6*i0 + i1) // 6 = i0 because 0 <= i1 < 6.
        let l = i(0).scale(&Dim::int(6)).add(&i(1));
        assert_eq!(l.floordiv(&Dim::int(6), &r), i(0));
        assert_eq!(l.modulo(&Dim::int(6), &r), i(1));
        // (2*i1) // 4 = i1 // 2 after gcd normalization.
        let f = i(1).scale(&Dim::int(2)).floordiv(&Dim::int(4), &r);
        assert_eq!(f.to_string(), "i1//2");
        assert_eq!(i(1).modulo(&Dim::int(4), &r).to_string(), "i1-4*(i1//4)");
    }

    #[test]
    fn symbolic_divisors_are_exact_or_non_scop() {
        let (m, n) = (Dim::sym("M"), Dim::sym("N"));
        let sizes = [m.clone(), n.clone()];
        let r = Ranges {
            iters: &sizes,
            reduces: &[],
        };
        let split = i(0).scale(&n).add(&i(1));
        assert_eq!(split.floordiv(&n, &r), i(0));
        assert!(!split.floordiv(&n, &r).is_non_scop());
        let merged = [m.mul(&n)];
        let r2 = Ranges {
            iters: &merged,
            reduces: &[],
        };
        let q = i(0).floordiv(&n, &r2);
        assert_eq!(q.to_string(), "i0//N");
        assert!(q.is_non_scop());
    }
}
