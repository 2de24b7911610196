//! Symbolic sizes. A [`Dim`] is an integer polynomial over symbols (`M`, `N`, …) whose atoms may
//! also be `floordiv` by a positive constant, `min` and `max` (what conv/pool output sizes and
//! clamped slices produce). The representation is canonical — a sorted map from monomials to
//! coefficients — so equal polynomials compare equal (`M*K == K*M`), which is what shape checks need.
//!
//! Assumption used by the simplifier: every symbol is a size, hence `>= 0`.

use crate::index::Coeff;
use serde::{Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

/// An atom of a monomial.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Atom {
    /// A symbol, by name.
    Sym(String),
    /// `floor(e / d)`, `d > 0`, kept only when it does not simplify.
    FloorDiv(Box<Dim>, i64),
    /// The smaller of two sizes.
    Min(Box<Dim>, Box<Dim>),
    /// The larger of two sizes.
    Max(Box<Dim>, Box<Dim>),
}

impl Atom {
    /// Provably `>= 0` for sizes `>= 0`.
    fn is_nonneg(&self) -> bool {
        match self {
            Atom::Sym(_) => true,
            Atom::FloorDiv(e, _) => e.is_nonneg(),
            Atom::Min(a, b) => a.is_nonneg() && b.is_nonneg(),
            Atom::Max(a, b) => a.is_nonneg() || b.is_nonneg(),
        }
    }
}

/// A symbolic integer: `Σ coeff · Π atoms`. The empty monomial is the constant term.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Dim {
    terms: Arc<BTreeMap<Vec<Atom>, i64>>,
}

/// Why a [`Dim`] could not be evaluated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DimError {
    #[error("symbol `{0}` has no value")]
    /// A symbol without a value.
    Unbound(String),
    #[error("size arithmetic overflows i64")]
    /// The value does not fit an `i64`.
    Overflow,
}

/// `Dim::int(v)` for `0 <= v <` this is made once per thread and cloned (one reference count):
/// region synthesis and planning build small sizes by the million, each two allocations
/// otherwise (issue 23, optimize speed).
const SMALL_INTS: i64 = 1024;

thread_local! {
    static SMALL: Vec<Dim> = (0..SMALL_INTS).map(Dim::new_int).collect();
}

impl Dim {
    /// `self` with every symbol of `sub` replaced by its value (re-simplified): a shape
    /// cluster's specialization (`T = d·T_d`), or a run-time branch's (`S = q·S'`).
    pub fn substitute_dims(&self, sub: &BTreeMap<String, Dim>) -> Dim {
        let mut out = Dim::int(0);
        for (atoms, coeff) in self.monomials() {
            let mut term = Dim::int(coeff);
            for a in atoms {
                let v = match a {
                    Atom::Sym(s) => sub.get(s).cloned().unwrap_or_else(|| Dim::sym(s)),
                    Atom::FloorDiv(e, k) => e.substitute_dims(sub).floordiv(*k),
                    Atom::Min(x, y) => x.substitute_dims(sub).min_of(&y.substitute_dims(sub)),
                    Atom::Max(x, y) => x.substitute_dims(sub).max_of(&y.substitute_dims(sub)),
                };
                term = term.mul(&v);
            }
            out = out.add(&term);
        }
        out
    }

    /// The size `v`.
    pub fn int(v: i64) -> Dim {
        if (0..SMALL_INTS).contains(&v) {
            return SMALL.with(|s| s[v as usize].clone());
        }
        Dim::new_int(v)
    }

    fn new_int(v: i64) -> Dim {
        let mut terms = BTreeMap::new();
        if v != 0 {
            terms.insert(Vec::new(), v);
        }
        Dim {
            terms: Arc::new(terms),
        }
    }

    /// The symbol `name`.
    pub fn sym(name: &str) -> Dim {
        Dim::atom(Atom::Sym(name.to_string()))
    }

    fn atom(a: Atom) -> Dim {
        let mut terms = BTreeMap::new();
        terms.insert(vec![a], 1);
        Dim {
            terms: Arc::new(terms),
        }
    }

    /// The value if the polynomial is a constant.
    pub fn as_int(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// True when the size is the integer `v`.
    pub fn is_int(&self, v: i64) -> bool {
        self.as_int() == Some(v)
    }

    /// `self + o`, simplified.
    pub fn add(&self, o: &Dim) -> Dim {
        // Fast paths (most sizes are constants): no map is built for `x + 0` or `a + b`.
        if o.terms.is_empty() {
            return self.clone();
        }
        if self.terms.is_empty() {
            return o.clone();
        }
        if let (Some(a), Some(b)) = (self.as_int(), o.as_int()) {
            return Dim::int(a.saturating_add(b));
        }
        let mut terms = (*self.terms).clone();
        for (m, c) in o.terms.iter() {
            let e = terms.entry(m.clone()).or_insert(0);
            *e = e.saturating_add(*c);
            if *e == 0 {
                terms.remove(m);
            }
        }
        Dim {
            terms: Arc::new(terms),
        }
    }

    /// `self + v`.
    pub fn add_int(&self, v: i64) -> Dim {
        self.add(&Dim::int(v))
    }

    /// `-self`.
    pub fn neg(&self) -> Dim {
        Dim {
            terms: Arc::new(
                self.terms
                    .iter()
                    .map(|(m, c)| (m.clone(), c.saturating_neg()))
                    .collect(),
            ),
        }
    }

    /// `self - o`.
    pub fn sub(&self, o: &Dim) -> Dim {
        self.add(&o.neg())
    }

    /// `self · o`, simplified.
    pub fn mul(&self, o: &Dim) -> Dim {
        match (self.as_int(), o.as_int()) {
            (Some(a), Some(b)) => return Dim::int(a.saturating_mul(b)),
            (Some(1), None) => return o.clone(),
            (None, Some(1)) => return self.clone(),
            _ => {}
        }
        let mut out = Dim::default();
        for (ma, ca) in self.terms.iter() {
            for (mb, cb) in o.terms.iter() {
                let mut m: Vec<Atom> = ma.iter().chain(mb.iter()).cloned().collect();
                m.sort();
                out = out.add(&Dim {
                    terms: Arc::new([(m, ca.saturating_mul(*cb))].into_iter().collect()),
                });
            }
        }
        out
    }

    /// `self · v`.
    pub fn mul_int(&self, v: i64) -> Dim {
        self.mul(&Dim::int(v))
    }

    /// Product of a list of sizes (1 for the empty list).
    pub fn product<'a>(dims: impl IntoIterator<Item = &'a Dim>) -> Dim {
        dims.into_iter().fold(Dim::int(1), |acc, d| acc.mul(d))
    }

    /// `floor(self / d)` for `d > 0`. Exact when every coefficient is divisible by `d`.
    pub fn floordiv(&self, d: i64) -> Dim {
        assert!(d > 0, "floordiv by a non-positive constant");
        if d == 1 {
            return self.clone();
        }
        if let Some(v) = self.as_int() {
            return Dim::int(v.div_euclid(d));
        }
        if self.terms.values().all(|c| c % d == 0) {
            return Dim {
                terms: Arc::new(self.terms.iter().map(|(m, c)| (m.clone(), c / d)).collect()),
            };
        }
        // Pull out the symbolic part that divides exactly: floor((d·q + r)/d) = q + floor(r/d).
        let (mut q, mut r) = (Dim::default(), Dim::default());
        for (m, c) in self.terms.iter() {
            if m.is_empty() {
                // c = d·⌊c/d⌋ + (c mod d): the multiple of d leaves the floor exactly.
                q = q.add_int(c.div_euclid(d));
                r = r.add_int(c.rem_euclid(d));
                continue;
            }
            let t = Dim {
                terms: Arc::new([(m.clone(), *c)].into_iter().collect()),
            };
            if c % d == 0 {
                q = q.add(&Dim {
                    terms: Arc::new([(m.clone(), c / d)].into_iter().collect()),
                });
            } else {
                r = r.add(&t);
            }
        }
        if let Some(rv) = r.as_int() {
            return q.add_int(rv.div_euclid(d));
        }
        q.add(&Dim::atom(Atom::FloorDiv(Box::new(r), d)))
    }

    /// `ceil(self / d)` for `d > 0`.
    pub fn ceildiv(&self, d: i64) -> Dim {
        self.add_int(d - 1).floordiv(d)
    }

    /// `min(self, o)`, decided when the difference is a constant.
    pub fn min_of(&self, o: &Dim) -> Dim {
        match self.sub(o).as_int() {
            Some(c) if c <= 0 => self.clone(),
            Some(_) => o.clone(),
            None => {
                let (a, b) = if self <= o { (self, o) } else { (o, self) };
                Dim::atom(Atom::Min(Box::new(a.clone()), Box::new(b.clone())))
            }
        }
    }

    /// `max(self, o)`, decided when the difference is a constant, or when one side is a
    /// constant `<= 0` and the other a non-negative polynomial (all symbols are sizes).
    pub fn max_of(&self, o: &Dim) -> Dim {
        match self.sub(o).as_int() {
            Some(c) if c >= 0 => self.clone(),
            Some(_) => o.clone(),
            None => {
                if o.as_int().is_some_and(|v| v <= 0) && self.is_nonneg() {
                    return self.clone();
                }
                if self.as_int().is_some_and(|v| v <= 0) && o.is_nonneg() {
                    return o.clone();
                }
                let (a, b) = if self <= o { (self, o) } else { (o, self) };
                Dim::atom(Atom::Max(Box::new(a.clone()), Box::new(b.clone())))
            }
        }
    }

    /// The length of the range `self..end` of an axis of size `size` (`0 <= self`, `end <= size`):
    /// `size` itself for the whole axis, else `max(end − self, 0)` (0 when it is empty). Every
    /// layer derives slice lengths with it: `min`/`max` atoms are not normalized, so the same
    /// length computed two ways (`max(e, s) − s` and `max(e − s, 0)`, or `max(S−3, 0)` and `S−3`)
    /// would not compare equal.
    pub fn range_len(&self, end: &Dim, size: &Dim) -> Dim {
        if self.is_int(0) && end == size {
            return size.clone();
        }
        end.sub(self).max_of(&Dim::int(0))
    }

    /// The terms `(atoms, coefficient)` in canonical order (the constant term has no atoms).
    pub fn monomials(&self) -> impl Iterator<Item = (&[Atom], i64)> {
        self.terms.iter().map(|(m, c)| (m.as_slice(), *c))
    }

    /// The symbol's name when the polynomial is exactly one symbol.
    pub fn as_symbol(&self) -> Option<&str> {
        match self.terms.iter().next() {
            Some((m, 1)) if self.terms.len() == 1 && m.len() == 1 => match &m[0] {
                Atom::Sym(s) => Some(s),
                _ => None,
            },
            _ => None,
        }
    }

    /// True when the value is provably `>= 0` for sizes `>= 0`: every coefficient is
    /// non-negative and so is every atom (a `floordiv` of a negative polynomial, such as the
    /// `(-2*S)//3` of a conv output size, is not).
    pub fn is_nonneg(&self) -> bool {
        self.terms
            .iter()
            .all(|(m, c)| *c >= 0 && m.iter().all(Atom::is_nonneg))
    }

    /// True when the value is provably `>= 1` for sizes `>= 0`: [`Dim::is_nonneg`] with a
    /// constant term of at least 1 (a bare symbol may be bound to 0).
    pub fn is_positive(&self) -> bool {
        self.is_nonneg() && self.terms.get(&Vec::new()).is_some_and(|c| *c >= 1)
    }

    /// Symbols the polynomial mentions.
    pub fn symbols(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        self.collect_symbols(&mut out);
        out
    }

    fn collect_symbols(&self, out: &mut BTreeSet<String>) {
        for m in self.terms.keys() {
            for a in m {
                match a {
                    Atom::Sym(s) => {
                        out.insert(s.clone());
                    }
                    Atom::FloorDiv(e, _) => e.collect_symbols(out),
                    Atom::Min(x, y) | Atom::Max(x, y) => {
                        x.collect_symbols(out);
                        y.collect_symbols(out);
                    }
                }
            }
        }
    }

    /// Evaluates with symbol values from `lookup`; checked arithmetic.
    pub fn eval(&self, lookup: &dyn Fn(&str) -> Option<i64>) -> Result<i64, DimError> {
        let mut total: i64 = 0;
        for (m, c) in self.terms.iter() {
            let mut v: i64 = *c;
            for a in m {
                let av = match a {
                    Atom::Sym(s) => lookup(s).ok_or_else(|| DimError::Unbound(s.clone()))?,
                    Atom::FloorDiv(e, d) => e.eval(lookup)?.div_euclid(*d),
                    Atom::Min(x, y) => x.eval(lookup)?.min(y.eval(lookup)?),
                    Atom::Max(x, y) => x.eval(lookup)?.max(y.eval(lookup)?),
                };
                v = v.checked_mul(av).ok_or(DimError::Overflow)?;
            }
            total = total.checked_add(v).ok_or(DimError::Overflow)?;
        }
        Ok(total)
    }

    /// `self / d` when the division is exact term by term: `d` a non-zero integer dividing every
    /// coefficient, or a single monomial (`N`, `2*M*N`) dividing every term (`4*M*N / N = 4*M`).
    /// `None` otherwise (which does not prove the division inexact).
    pub fn div_exact(&self, d: &Dim) -> Option<Dim> {
        if self == d && !self.terms.is_empty() {
            return Some(Dim::int(1));
        }
        let (dm, dc) = match d.terms.iter().next() {
            Some((m, c)) if d.terms.len() == 1 && *c != 0 => (m, *c),
            _ => return None,
        };
        let mut out = BTreeMap::new();
        for (m, c) in self.terms.iter() {
            if c % dc != 0 {
                return None;
            }
            let mut rest = m.clone();
            for a in dm {
                let at = rest.iter().position(|x| x == a)?;
                rest.remove(at);
            }
            out.insert(rest, c / dc);
        }
        Some(Dim {
            terms: Arc::new(out),
        })
    }

    /// Evaluates with a symbol table.
    pub fn eval_with(&self, bindings: &BTreeMap<String, i64>) -> Result<i64, DimError> {
        self.eval(&|s| bindings.get(s).copied())
    }

    /// Replaces symbols that have a value in `bindings` and re-simplifies.
    pub fn substitute(&self, bindings: &BTreeMap<String, i64>) -> Dim {
        let sizes = bindings
            .iter()
            .map(|(s, v)| (s.clone(), Dim::int(*v)))
            .collect();
        self.substitute_dims(&sizes)
    }
}

impl From<i64> for Dim {
    fn from(v: i64) -> Dim {
        Dim::int(v)
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Sym(s) => f.write_str(s),
            Atom::FloorDiv(e, d) if e.as_symbol().is_some() => write!(f, "{e}//{d}"),
            Atom::FloorDiv(e, d) => write!(f, "({e})//{d}"),
            Atom::Min(a, b) => write!(f, "min({a}, {b})"),
            Atom::Max(a, b) => write!(f, "max({a}, {b})"),
        }
    }
}

impl fmt::Display for Dim {
    /// Highest-degree terms first, constant last: `2*H+1`, `M*N`, `(H+1)//2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        let mut items: Vec<(&Vec<Atom>, &i64)> = self.terms.iter().collect();
        items.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(b.0)));
        for (i, (m, c)) in items.into_iter().enumerate() {
            let c = *c;
            if i > 0 {
                f.write_str(if c < 0 { "-" } else { "+" })?;
            } else if c < 0 {
                f.write_str("-")?;
            }
            let a = c.unsigned_abs();
            if m.is_empty() {
                write!(f, "{a}")?;
                continue;
            }
            if a != 1 {
                write!(f, "{a}*")?;
            }
            for (j, at) in m.iter().enumerate() {
                if j > 0 {
                    f.write_str("*")?;
                }
                // `*` and `//` bind alike, left to right: a quotient after a factor is
                // parenthesized (`B*((S+63)//64)`, not `B*(S+63)//64`).
                if matches!(at, Atom::FloorDiv(..)) && (j > 0 || a != 1) {
                    write!(f, "({at})")?;
                } else {
                    write!(f, "{at}")?;
                }
            }
        }
        Ok(())
    }
}

impl Serialize for Dim {
    /// Constants serialize as JSON integers, symbolic sizes as their printed form.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.as_int() {
            Some(v) => s.serialize_i64(v),
            None => s.serialize_str(&self.to_string()),
        }
    }
}

/// A shape: one [`Dim`] per axis.
pub type Shape = Vec<Dim>;

/// Formats a shape as `[M, 64]`.
pub fn fmt_shape(s: &[Dim]) -> String {
    let parts: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// Number of elements of a shape, symbolic.
pub fn numel(s: &[Dim]) -> Dim {
    Dim::product(s.iter())
}

/// Right-aligned (numpy) broadcast of two shapes: sizes must be equal or 1. On mismatch returns
/// the offending pair of sizes (`lhs`, `rhs`).
pub fn broadcast_shapes(a: &[Dim], b: &[Dim]) -> Result<Shape, (Dim, Dim)> {
    let r = a.len().max(b.len());
    let mut out = Vec::with_capacity(r);
    for i in 0..r {
        let da = if i + a.len() >= r {
            Some(&a[i + a.len() - r])
        } else {
            None
        };
        let db = if i + b.len() >= r {
            Some(&b[i + b.len() - r])
        } else {
            None
        };
        let d = match (da, db) {
            (Some(x), None) | (None, Some(x)) => x.clone(),
            (Some(x), Some(y)) if x == y => x.clone(),
            (Some(x), Some(y)) if x.is_int(1) => y.clone(),
            (Some(x), Some(y)) if y.is_int(1) => x.clone(),
            (Some(x), Some(y)) => return Err((x.clone(), y.clone())),
            (None, None) => unreachable!("index below both ranks"),
        };
        out.push(d);
    }
    Ok(out)
}

/// Symbolic sizes as coefficients of the index algebra (every symbol a size `>= 0`).
impl Coeff for Dim {
    fn int(v: i64) -> Dim {
        Dim::int(v)
    }
    fn as_int(&self) -> Option<i64> {
        Dim::as_int(self)
    }
    fn checked_add(&self, o: &Dim) -> Option<Dim> {
        Some(self.add(o))
    }
    fn checked_mul(&self, o: &Dim) -> Option<Dim> {
        Some(self.mul(o))
    }
    fn div_exact(&self, d: &Dim) -> Option<Dim> {
        Dim::div_exact(self, d)
    }
    /// Monomial by monomial: the constant by Euclidean division, a symbolic monomial into the
    /// quotient when `d` divides its coefficient.
    fn split_int(&self, d: i64) -> (Dim, Dim) {
        let (mut q, mut r) = (Dim::int(0), Dim::int(0));
        for (atoms, k) in self.monomials() {
            if atoms.is_empty() {
                q = q.add_int(k.div_euclid(d));
                r = r.add_int(k.rem_euclid(d));
            } else {
                let m = monomial(atoms);
                if k % d == 0 {
                    q = q.add(&m.mul_int(k / d));
                } else {
                    r = r.add(&m.mul_int(k));
                }
            }
        }
        (q, r)
    }
    fn floordiv_int(&self, d: i64) -> Dim {
        self.floordiv(d)
    }
    fn is_nonneg(&self) -> bool {
        Dim::is_nonneg(self)
    }
}

/// The product of the atoms of one monomial.
fn monomial(atoms: &[Atom]) -> Dim {
    use Atom as D;
    atoms.iter().fold(Dim::int(1), |acc, a| {
        acc.mul(&match a {
            D::Sym(s) => Dim::sym(s),
            D::FloorDiv(e, d) => e.floordiv(*d),
            D::Min(x, y) => x.min_of(y),
            D::Max(x, y) => x.max_of(y),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> Dim {
        Dim::sym("M")
    }
    fn k() -> Dim {
        Dim::sym("K")
    }

    #[test]
    fn products_are_canonical() {
        assert_eq!(m().mul(&k()), k().mul(&m()));
        assert_eq!(m().mul(&k()).to_string(), "K*M");
        assert_eq!(m().add(&m()).to_string(), "2*M");
        assert_eq!(m().sub(&m()), Dim::int(0));
    }

    #[test]
    fn floordiv_simplifies_exact_parts() {
        // (2H + 2 - 3)//2 + 1 = H + floor(-1/2) + 1 = H
        let h = Dim::sym("H");
        let o = h.mul_int(2).add_int(2 - 3).floordiv(2).add_int(1);
        assert_eq!(o, h);
        // (H + 2 - 3)//2 + 1 stays symbolic
        let o = h.add_int(-1).floordiv(2).add_int(1);
        assert_eq!(o.to_string(), "(H+1)//2");
        // (H − 2)//2 + 1 = H//2: whole multiples of d leave the constant term.
        assert_eq!(h.add_int(-2).floordiv(2).add_int(1).to_string(), "H//2");
        let b: BTreeMap<String, i64> = [("H".to_string(), 56)].into_iter().collect();
        assert_eq!(o.eval_with(&b), Ok(28));
        assert_eq!(o.substitute(&b), Dim::int(28));
    }

    #[test]
    fn min_max_decide_constant_differences() {
        assert_eq!(m().min_of(&m().add_int(3)), m());
        assert_eq!(m().max_of(&Dim::int(0)), m());
        let s = m().min_of(&Dim::int(10));
        assert_eq!(s.to_string(), "min(10, M)");
        let lo: BTreeMap<String, i64> = [("M".to_string(), 4)].into_iter().collect();
        assert_eq!(s.eval_with(&lo), Ok(4));
    }

    #[test]
    fn eval_reports_unbound_and_overflow() {
        assert_eq!(
            m().eval_with(&BTreeMap::new()),
            Err(DimError::Unbound("M".into()))
        );
        let big: BTreeMap<String, i64> = [("M".to_string(), i64::MAX / 2)].into_iter().collect();
        assert_eq!(m().mul_int(4).eval_with(&big), Err(DimError::Overflow));
    }

    #[test]
    fn serializes_ints_as_numbers() {
        let v = serde_json::to_string(&vec![Dim::int(3), m()]).unwrap();
        assert_eq!(v, "[3,\"M\"]");
    }

    #[test]
    fn nonneg_looks_inside_atoms() {
        assert!(m().floordiv(2).add_int(1).is_nonneg());
        assert!(m().min_of(&Dim::sym("N")).is_nonneg());
        // (-2*M)//3 + 3 is -1 at M = 6: its floordiv atom is negative.
        let conv_out = m().mul_int(-2).add_int(6).floordiv(3).add_int(1);
        assert!(!conv_out.is_nonneg(), "{conv_out}");
        assert!(!conv_out.add_int(-3).is_nonneg());
        assert!(m().add_int(-3).max_of(&m()).is_nonneg());
    }

    #[test]
    fn div_exact_divides_by_monomials() {
        let mk = m().mul(&k()).mul_int(4);
        assert_eq!(mk.div_exact(&k()), Some(m().mul_int(4)));
        assert_eq!(mk.div_exact(&Dim::int(2)), Some(m().mul(&k()).mul_int(2)));
        assert_eq!(mk.div_exact(&Dim::int(3)), None);
        assert_eq!(m().add_int(1).div_exact(&m()), None);
        assert_eq!(m().add(&k()).div_exact(&m().add(&k())), Some(Dim::int(1)));
        assert_eq!(Dim::int(0).div_exact(&m()), Some(Dim::int(0)));
    }

    #[test]
    fn range_len_of_the_whole_axis_is_the_axis() {
        let d = m().add_int(-3);
        assert_eq!(Dim::int(0).range_len(&d, &d), d);
        assert_eq!(Dim::int(1).range_len(&Dim::int(4), &m()), Dim::int(3));
        assert_eq!(Dim::int(5).range_len(&Dim::int(2), &m()), Dim::int(0));
        // Empty when the end is before the start: max(0, end − start), not end − start.
        let e = m().min_of(&Dim::int(2));
        assert_eq!(m().range_len(&e, &m()), e.sub(&m()).max_of(&Dim::int(0)));
    }
}
