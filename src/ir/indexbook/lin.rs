//! Index expressions of the IndexBook while movement chains are composed: a sum of axis-free
//! (possibly symbolic) coefficients times variables, where a variable is a value axis (`i0`, a
//! reduce axis `k0`), a `floor(e / d)` of another expression, or a data-dependent GATHER index.
//! The form is the index algebra's [`Quasi`] over symbolic [`Dim`] coefficients; floordivs
//! simplify by its one simplifier ([`simplify::floordiv`]: exact division, gcd normalization,
//! the value ranges of the axes, nested floors; seed 001 §4.3 invariants 6 and 7); `%` is
//! `e − c·floor(e/c)` (invariant 1). This module keeps the IndexBook's printing (`i0//4`).

use crate::index::{self, simplify, Coeff, Facts, Quasi};
use crate::ir::dim::Dim;
#[cfg(test)]
use std::collections::BTreeMap;

/// A variable of a [`Lin`]. The derived order (`i*` by index, then `k*`) is the printing order
/// of terms (floors and GATHER indices, the index algebra's floor and opaque atoms, follow).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Var {
    /// Output axis `i<j>` of the value.
    I(usize),
    /// Reduce axis `k<j>` of a REDUCE value.
    K(usize),
}

/// An atom of a [`Lin`]: a variable, `floor(e / d)` (`d > 0`; a symbolic `d` makes the map
/// non-SCoP) or the data-dependent index a GATHER reads from the named value (opaque, non-SCoP).
pub(crate) type Atom = index::Atom<Dim, Var>;

/// `konst + Σ coeff · atom`, coefficients non-zero and free of axes: the index algebra's form.
pub(crate) type Lin = Quasi<Dim, Var>;

/// Axis sizes of the value whose maps are being built: the ranges of `I` and `K` variables.
pub(crate) struct Ranges<'a> {
    pub iters: &'a [Dim],
    pub reduces: &'a [Dim],
}

impl Facts<Dim, Var> for Ranges<'_> {
    fn range(&self, v: &Var) -> Option<(Dim, Dim)> {
        let size = match v {
            Var::I(j) => self.iters.get(*j)?,
            Var::K(j) => self.reduces.get(*j)?,
        };
        Some((Dim::int(0), size.add_int(-1)))
    }
}

/// `a <= b` provably (every symbol is a size `>= 0`).
pub(crate) fn provably_le(a: &Dim, b: &Dim) -> bool {
    Dim::provably_le(a, b)
}

impl Quasi<Dim, Var> {
    /// `self + o`.
    pub fn add(&self, o: &Lin) -> Lin {
        self.add_scaled(o, &Dim::int(1))
    }

    /// `self + c`.
    pub fn add_dim(&self, c: &Dim) -> Lin {
        self.add(&Lin::constant(c.clone()))
    }

    /// `c · self`.
    pub fn scale(&self, c: &Dim) -> Lin {
        Lin::default().add_scaled(self, c)
    }

    /// `self − o`.
    pub fn sub(&self, o: &Lin) -> Lin {
        self.add_scaled(o, &Dim::int(-1))
    }

    /// `self + c · o` (symbolic coefficients do not overflow).
    fn add_scaled(&self, o: &Lin, c: &Dim) -> Lin {
        let t = o.try_scale(c).unwrap_or_default();
        self.try_add(&t).unwrap_or_default()
    }

    /// True when a floordiv has a symbolic divisor or a GATHER index occurs.
    pub fn is_non_scop(&self) -> bool {
        self.has_opaque_or_symbolic_floor()
    }

    /// Inclusive bounds `[lo, hi]`, when every term has a known sign and range.
    pub fn range(&self, r: &Ranges) -> Option<(Dim, Dim)> {
        simplify::range(self, r)
    }

    /// `floor(self / d)` for `d > 0`, by the index algebra's simplifier under the axis ranges
    /// (exact division, gcd, range collapse, nested floors).
    pub fn floordiv(&self, d: &Dim, r: &Ranges) -> Lin {
        // Sizes never overflow; a divisor not provably positive keeps the exact floor atom.
        simplify::floordiv(self, d, r)
            .unwrap_or_else(|_| Lin::atom(Atom::Floor(Box::new(self.clone()), d.clone())))
    }

    /// The value at axis values `iters` / `reduces` with symbols from `syms` (tests check the
    /// composed maps against the reference evaluator with it).
    #[cfg(test)]
    pub fn eval_at(
        &self,
        iters: &[i64],
        reduces: &[i64],
        syms: &BTreeMap<String, i64>,
    ) -> Option<i64> {
        let var = |v: &Var| match v {
            Var::I(j) => iters.get(*j).copied().ok_or(()),
            Var::K(j) => reduces.get(*j).copied().ok_or(()),
        };
        self.eval::<Unit>(&|v| var(v).map_err(|_| Unit), &|c| {
            c.eval_with(syms).map_err(|_| Unit)
        })
        .ok()
    }

    /// `self mod d` as `self − d·floor(self/d)`.
    pub fn modulo(&self, d: &Dim, r: &Ranges) -> Lin {
        self.sub(&self.floordiv(d, r).scale(d))
    }
}

/// No value (test evaluation).
#[cfg(test)]
pub(crate) struct Unit;

#[cfg(test)]
impl From<index::IndexError> for Unit {
    fn from(_: index::IndexError) -> Unit {
        Unit
    }
}

/// True when a size prints as one factor (`4`, `N`, `M*N`, `H//2`), so it needs no parentheses
/// as a coefficient or divisor.
fn is_atomic(s: &str) -> bool {
    !s.trim_start_matches('-').contains(['+', '-'])
}

fn var_string(v: &Atom) -> String {
    match v {
        Atom::Var(Var::I(j)) => format!("i{j}"),
        Atom::Var(Var::K(j)) => format!("k{j}"),
        Atom::Floor(e, d) => {
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
        Atom::Opaque(id) => format!("gather({id})"),
        Atom::Min(a, b) => format!("min({a}, {b})"),
        Atom::Max(a, b) => format!("max({a}, {b})"),
    }
}

impl std::fmt::Display for Quasi<Dim, Var> {
    /// `2*i2+i4-1`, `i0-4*(i0//4)`, `N*i0+i1`; constant last, `0` for zero.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = String::new();
        for (v, c) in &self.terms {
            let vs = var_string(v);
            let vs = if matches!(v, Atom::Floor(..)) && !c.is_int(1) {
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
