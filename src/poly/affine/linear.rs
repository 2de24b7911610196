//! Dense integer constraint systems and the elimination procedures behind every query.
//!
//! A [`System`] is a conjunction of rows over `n` integer variables: `row[0] + Σ row[1+j]·x_j`
//! `= 0` (equalities) or `>= 0` (inequalities). Arithmetic is checked `i64`.
//!
//! * Equalities are eliminated exactly: a unit coefficient is substituted; otherwise the
//!   coefficients are reduced Euclid-style by a unimodular change of the eliminated variable
//!   (`σ = x_k + Σ ⌊a_i/a_k⌋ x_i`) until one is a unit. Only an equality whose eliminated
//!   variables all vanish except one with a non-unit coefficient on kept variables (a
//!   congruence on the kept variables) is projected inexactly (rationally).
//! * Inequalities are eliminated by Fourier–Motzkin with the Omega test's exactness check:
//!   for each lower/upper pair with coefficients `a`, `b` the real shadow row and the dark
//!   shadow row (constant lowered by `(a-1)(b-1)`) are normalised (gcd tightening); when they
//!   agree for every pair the integer projection equals the real shadow (exact).
//! * [`decide`] (emptiness) is exact whenever every elimination is; otherwise it concludes
//!   `Empty` from an empty real shadow, `NonEmpty` from a non-empty dark shadow, and
//!   enumerates a variable with small constant bounds (at most [`ENUM_LIMIT`] values); failing
//!   all three it answers [`Emptiness::Unknown`], never a guess.

use super::expr::ck;
use super::AffineError;
use crate::index::gcd;
use std::collections::BTreeMap;

/// `row[0]` is the constant; `row[1 + j]` the coefficient of variable `j`.
pub(crate) type Row = Vec<i64>;

/// Most rows a system may reach during elimination before [`AffineError::TooComplex`].
pub(crate) const MAX_ROWS: usize = 4096;
/// The largest magnitude of a coefficient or constant a constraint may enter with (room for
/// the growth of elimination, which is checked).
pub(crate) const MAX_ENTRY: i64 = 1 << 48;
/// Most values of one variable [`decide`] enumerates.
pub(crate) const ENUM_LIMIT: i64 = 64;

/// A conjunction of integer constraints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct System {
    pub n: usize,
    pub eqs: Vec<Row>,
    pub ineqs: Vec<Row>,
}

/// The answer of `decide`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emptiness {
    /// No integer point (exact).
    Empty,
    /// Some integer point (exact).
    NonEmpty,
    /// The procedure could not tell (an inexact elimination with unbounded variables, or the
    /// work budget ran out).
    Unknown,
}

fn coeff_gcd(r: &[i64]) -> i64 {
    r[1..].iter().fold(0, |g, &c| gcd(g, c))
}

enum Norm {
    True,
    False,
    Row(Row),
}

/// `r >= 0` divided by the gcd of its coefficients, the constant rounded down.
fn norm_ineq(mut r: Row) -> Norm {
    let g = coeff_gcd(&r);
    if g == 0 {
        return if r[0] >= 0 { Norm::True } else { Norm::False };
    }
    if g > 1 {
        r[0] = r[0].div_euclid(g);
        for c in &mut r[1..] {
            *c /= g;
        }
    }
    Norm::Row(r)
}

/// `r = 0` divided by its gcd, first non-zero coefficient positive.
fn norm_eq(mut r: Row) -> Norm {
    let g = coeff_gcd(&r);
    if g == 0 {
        return if r[0] == 0 { Norm::True } else { Norm::False };
    }
    if r[0] % g != 0 {
        return Norm::False;
    }
    let first_neg = r[1..].iter().find(|c| **c != 0).is_some_and(|c| *c < 0);
    let g = if first_neg { -g } else { g };
    for c in &mut r {
        *c /= g;
    }
    Norm::Row(r)
}

/// `x·a + y·b` row-wise.
/// (`i64::MIN` is refused too, so that rows can always be negated.)
fn combine(a: &[i64], x: i64, b: &[i64], y: i64) -> Result<Row, AffineError> {
    a.iter()
        .zip(b)
        .map(|(p, q)| {
            let v = ck(ck(p.checked_mul(x))?.checked_add(ck(q.checked_mul(y))?))?;
            if v == i64::MIN {
                return Err(AffineError::Overflow);
            }
            Ok(v)
        })
        .collect()
}

impl System {
    pub fn new(n: usize) -> System {
        System {
            n,
            eqs: Vec::new(),
            ineqs: Vec::new(),
        }
    }

    fn rows(&self) -> usize {
        self.eqs.len() + self.ineqs.len()
    }

    /// Normalises, removes duplicates and trivially true rows, keeps only the tightest of
    /// parallel inequalities and turns opposite tight pairs into equalities. `false` when a
    /// row is infeasible on its own or against its opposite.
    pub fn simplify(&mut self) -> bool {
        let ok = self.simplify_rows();
        if !ok {
            // The canonical infeasible system: -1 >= 0.
            let mut r = vec![0; 1 + self.n];
            r[0] = -1;
            self.eqs.clear();
            self.ineqs = vec![r];
        }
        ok
    }

    fn simplify_rows(&mut self) -> bool {
        let mut eqs = Vec::new();
        for r in std::mem::take(&mut self.eqs) {
            match norm_eq(r) {
                Norm::True => {}
                Norm::False => return false,
                Norm::Row(r) => eqs.push(r),
            }
        }
        let mut best: BTreeMap<Vec<i64>, i64> = BTreeMap::new();
        for r in std::mem::take(&mut self.ineqs) {
            match norm_ineq(r) {
                Norm::True => {}
                Norm::False => return false,
                Norm::Row(r) => {
                    let e = best.entry(r[1..].to_vec()).or_insert(r[0]);
                    *e = (*e).min(r[0]);
                }
            }
        }
        let mut ineqs = Vec::new();
        for (coef, c) in &best {
            let neg: Vec<i64> = coef.iter().map(|x| -x).collect();
            if let Some(c2) = best.get(&neg) {
                // c + c2 < 0: infeasible; == 0: an equality (emitted once, from the side whose
                // first non-zero coefficient is positive).
                match c.checked_add(*c2) {
                    Some(s) if s < 0 => return false,
                    Some(0) => {
                        if coef.iter().find(|x| **x != 0).is_some_and(|x| *x > 0) {
                            let mut r = vec![*c];
                            r.extend_from_slice(coef);
                            eqs.push(r);
                        }
                        continue;
                    }
                    _ => {}
                }
            }
            let mut r = vec![*c];
            r.extend_from_slice(coef);
            ineqs.push(r);
        }
        eqs.sort();
        eqs.dedup();
        self.eqs = eqs;
        self.ineqs = ineqs;
        true
    }

    /// Substitutes `x_k` away using equality `e` whose coefficient on `k` is ±1.
    fn substitute_unit(&mut self, e: &Row, k: usize) -> Result<(), AffineError> {
        let c = e[1 + k];
        for r in self.eqs.iter_mut().chain(self.ineqs.iter_mut()) {
            let f = r[1 + k];
            if f != 0 {
                *r = combine(r, 1, e, -f * c)?;
            }
        }
        Ok(())
    }

    /// Rational substitution of `x_k` by equality `e` (coefficient `a` on `k`): rows are scaled
    /// by `|a|`. Exact over the rationals only.
    fn substitute_rational(&mut self, e: &Row, k: usize) -> Result<(), AffineError> {
        let a = e[1 + k];
        for r in self.eqs.iter_mut().chain(self.ineqs.iter_mut()) {
            let f = r[1 + k];
            if f != 0 {
                *r = combine(r, a.abs(), e, -f * a.signum())?;
            }
        }
        Ok(())
    }

    /// Unimodular change of variable `k` so that the coefficients of equality `idx` other than
    /// `k`'s (and its constant) lie in `[0, a)`, `a` its positive coefficient on `k`.
    fn euclid_reduce(&mut self, idx: usize, k: usize) -> Result<(), AffineError> {
        if self.eqs[idx][1 + k] < 0 {
            for c in &mut self.eqs[idx] {
                *c = ck(c.checked_neg())?;
            }
        }
        let e = self.eqs[idx].clone();
        let a = e[1 + k];
        let q: Vec<i64> = e
            .iter()
            .enumerate()
            .map(|(i, v)| if i == 1 + k { 0 } else { v.div_euclid(a) })
            .collect();
        for r in self.eqs.iter_mut().chain(self.ineqs.iter_mut()) {
            let f = r[1 + k];
            if f != 0 {
                let k_coef = r[1 + k];
                *r = combine(r, 1, &q, -f)?;
                r[1 + k] = k_coef;
            }
        }
        Ok(())
    }

    /// Eliminates every equality that involves an eliminable variable. `Ok(None)`: infeasible;
    /// `Ok(Some(exact))`.
    pub fn eliminate_eqs(&mut self, elim: &[bool]) -> Result<Option<bool>, AffineError> {
        let mut exact = true;
        loop {
            if !self.simplify() {
                return Ok(None);
            }
            // The eliminable coefficient of smallest magnitude over all equalities.
            let mut pick: Option<(usize, usize, u64)> = None;
            for (i, e) in self.eqs.iter().enumerate() {
                for k in 0..self.n {
                    let c = e[1 + k].unsigned_abs();
                    if elim[k] && c != 0 && pick.is_none_or(|(_, _, m)| c < m) {
                        pick = Some((i, k, c));
                    }
                }
            }
            let Some((i, mut k, mut c)) = pick else {
                return Ok(Some(exact));
            };
            // Work on equality `i` until it is gone: its smallest eliminable coefficient
            // strictly decreases with every reduction.
            loop {
                if c == 1 {
                    let e = self.eqs.remove(i);
                    self.substitute_unit(&e, k)?;
                    break;
                }
                self.euclid_reduce(i, k)?;
                let e = &self.eqs[i];
                let next = (0..self.n)
                    .filter(|j| *j != k && elim[*j] && e[1 + *j] != 0)
                    .min_by_key(|j| e[1 + *j].unsigned_abs());
                if let Some(j) = next {
                    (k, c) = (j, e[1 + j].unsigned_abs());
                    continue;
                }
                let other_kept = (0..self.n).any(|j| j != k && !elim[j] && e[1 + j] != 0);
                if other_kept {
                    // A congruence on kept variables: not expressible without the variable.
                    let e = self.eqs.remove(i);
                    self.substitute_rational(&e, k)?;
                    exact = false;
                } else if e[0] != 0 {
                    // a·σ + r = 0 with 0 < r < a.
                    return Ok(None);
                } else {
                    // a·σ = 0.
                    let mut e = self.eqs.remove(i);
                    e[1 + k] = 1;
                    self.substitute_unit(&e, k)?;
                }
                break;
            }
            if self.rows() > MAX_ROWS {
                return Err(AffineError::TooComplex);
            }
        }
    }

    /// The variable to eliminate next among `elim`, with whether it occurs on one side only.
    fn pick_var(&self, elim: &[bool]) -> Option<(usize, bool)> {
        let mut best: Option<(usize, (bool, usize))> = None;
        for k in (0..self.n).filter(|k| elim[*k]) {
            let (mut nl, mut nu, mut unit_l, mut unit_u) = (0usize, 0usize, true, true);
            for r in &self.ineqs {
                let c = r[1 + k];
                if c > 0 {
                    nl += 1;
                    unit_l &= c == 1;
                } else if c < 0 {
                    nu += 1;
                    unit_u &= c == -1;
                }
            }
            if nl + nu == 0 {
                continue;
            }
            if nl == 0 || nu == 0 {
                return Some((k, true));
            }
            let score = (!(unit_l || unit_u), nl * nu);
            if best.is_none_or(|(_, s)| score < s) {
                best = Some((k, score));
            }
        }
        best.map(|(k, _)| (k, false))
    }

    /// Drops the inequalities that mention `k` (it occurs on one side only).
    fn drop_var(&mut self, k: usize) {
        self.ineqs.retain(|r| r[1 + k] == 0);
    }

    /// Fourier–Motzkin on `k` (no equality mentions it): the real shadow, and the dark shadow
    /// when it differs (then the elimination is inexact).
    fn fm(&self, k: usize) -> Result<(System, Option<System>), AffineError> {
        let (mut lo, mut up, mut rest) = (Vec::new(), Vec::new(), Vec::new());
        for r in &self.ineqs {
            match r[1 + k].signum() {
                1 => lo.push(r),
                -1 => up.push(r),
                _ => rest.push(r.clone()),
            }
        }
        if lo.len() * up.len() > MAX_ROWS {
            return Err(AffineError::TooComplex);
        }
        let mut real = System {
            n: self.n,
            eqs: self.eqs.clone(),
            ineqs: rest.clone(),
        };
        let mut dark = real.clone();
        let mut exact = true;
        for l in &lo {
            for u in &up {
                let (a, b) = (l[1 + k], -u[1 + k]);
                let r = combine(l, b, u, a)?;
                let pen = ck((a - 1).checked_mul(b - 1))?;
                let mut d = r.clone();
                d[0] = ck(d[0].checked_sub(pen))?;
                if pen != 0 {
                    let same = match (norm_ineq(r.clone()), norm_ineq(d.clone())) {
                        (Norm::True, Norm::True) | (Norm::False, Norm::False) => true,
                        (Norm::Row(x), Norm::Row(y)) => x == y,
                        _ => false,
                    };
                    exact &= same;
                }
                real.ineqs.push(r);
                dark.ineqs.push(d);
            }
        }
        Ok((real, (!exact).then_some(dark)))
    }

    /// Constant bounds of `x_k` from the rows that mention only `k`.
    fn const_bounds(&self, k: usize) -> (Option<i64>, Option<i64>) {
        let (mut lo, mut hi): (Option<i64>, Option<i64>) = (None, None);
        let only_k = |r: &Row| (0..self.n).all(|j| j == k || r[1 + j] == 0);
        for r in self.ineqs.iter().filter(|r| only_k(r)) {
            let a = r[1 + k];
            if a > 0 {
                // a x + c >= 0  ->  x >= ceil(-c / a)
                let v = (-(r[0] as i128)).div_euclid(a as i128)
                    + i128::from((-(r[0] as i128)).rem_euclid(a as i128) != 0);
                let v = i64::try_from(v).unwrap_or(i64::MAX);
                lo = Some(lo.map_or(v, |x| x.max(v)));
            } else if a < 0 {
                let v = i64::try_from((r[0] as i128).div_euclid(-(a as i128))).unwrap_or(i64::MIN);
                hi = Some(hi.map_or(v, |x| x.min(v)));
            }
        }
        for r in self.eqs.iter().filter(|r| only_k(r)) {
            let a = r[1 + k];
            if a != 0 && r[0] % a == 0 {
                let v = -r[0] / a;
                lo = Some(lo.map_or(v, |x| x.max(v)));
                hi = Some(hi.map_or(v, |x| x.min(v)));
            }
        }
        (lo, hi)
    }

    /// Constant bounds of `x_k` implied by the whole system (real shadow: an enclosure).
    pub fn var_bounds(&self, k: usize) -> Result<(Option<i64>, Option<i64>), AffineError> {
        let elim: Vec<bool> = (0..self.n).map(|j| j != k).collect();
        Ok(match self.clone().project(&elim)? {
            Some((p, _)) => p.const_bounds(k),
            None => (Some(1), Some(0)),
        })
    }

    /// Projects out the variables marked in `elim` (their columns stay, zero). `Ok(None)` when
    /// the system is (exactly) infeasible; otherwise the projection and whether it is exact (else
    /// it is the real shadow, a superset of the integer projection).
    pub fn project(mut self, elim: &[bool]) -> Result<Option<(System, bool)>, AffineError> {
        let Some(mut exact) = self.eliminate_eqs(elim)? else {
            return Ok(None);
        };
        loop {
            // Fourier–Motzkin can create equalities (opposite tight pairs): eliminate them too.
            match self.eliminate_eqs(elim)? {
                None => return Ok(None),
                Some(e) => exact &= e,
            }
            let Some((k, one_sided)) = self.pick_var(elim) else {
                return Ok(Some((self, exact)));
            };
            if one_sided {
                self.drop_var(k);
                continue;
            }
            let (real, dark) = self.fm(k)?;
            exact &= dark.is_none();
            self = real;
            if self.rows() > MAX_ROWS {
                return Err(AffineError::TooComplex);
            }
        }
    }

    /// Eliminates the variables of `elim` that go exactly (unit equalities and exact
    /// Fourier–Motzkin steps), leaving the others; returns the mask of those eliminated.
    pub fn eliminate_exact(&mut self, elim: &[bool]) -> Result<Vec<bool>, AffineError> {
        let mut gone = vec![false; self.n];
        let mut todo = elim.to_vec();
        loop {
            if !self.simplify() {
                return Ok(gone);
            }
            let unit = self.eqs.iter().enumerate().find_map(|(i, e)| {
                (0..self.n)
                    .find(|k| todo[*k] && e[1 + k].abs() == 1)
                    .map(|k| (i, k))
            });
            if let Some((i, k)) = unit {
                let e = self.eqs.remove(i);
                self.substitute_unit(&e, k)?;
                gone[k] = true;
                todo[k] = false;
                continue;
            }
            let in_eq = |s: &System, k: usize| s.eqs.iter().any(|e| e[1 + k] != 0);
            let mut progress = false;
            for k in 0..self.n {
                if !todo[k] || in_eq(self, k) {
                    continue;
                }
                let mut only = self.clone();
                let mut mask = vec![false; self.n];
                mask[k] = true;
                match only.pick_var(&mask) {
                    None => {
                        gone[k] = true;
                        todo[k] = false;
                        progress = true;
                    }
                    Some((_, true)) => {
                        only.drop_var(k);
                        *self = only;
                        gone[k] = true;
                        todo[k] = false;
                        progress = true;
                    }
                    Some((_, false)) => {
                        let (real, dark) = self.fm(k)?;
                        if dark.is_none() && real.rows() <= self.rows() + 8 {
                            *self = real;
                            gone[k] = true;
                            todo[k] = false;
                            progress = true;
                        }
                    }
                }
                if progress {
                    break;
                }
            }
            if !progress {
                return Ok(gone);
            }
        }
    }

    /// Removes the columns of the variables marked in `mask` (which must not occur).
    pub fn remove_cols(&mut self, mask: &[bool]) {
        let keep = |r: &Row| -> Row {
            let mut out = vec![r[0]];
            out.extend((0..self.n).filter(|k| !mask[*k]).map(|k| r[1 + k]));
            out
        };
        self.eqs = self.eqs.iter().map(keep).collect();
        self.ineqs = self.ineqs.iter().map(keep).collect();
        self.n = mask.iter().filter(|m| !**m).count();
    }
}

/// Decides whether `s` has an integer point (every variable existential).
pub(crate) fn decide(s: System, fuel: &mut u32) -> Result<Emptiness, AffineError> {
    if *fuel == 0 {
        return Ok(Emptiness::Unknown);
    }
    *fuel -= 1;
    let mut s = s;
    let all = vec![true; s.n];
    if s.eliminate_eqs(&all)?.is_none() {
        return Ok(Emptiness::Empty);
    }
    loop {
        if s.eliminate_eqs(&all)?.is_none() {
            return Ok(Emptiness::Empty);
        }
        let Some((k, one_sided)) = s.pick_var(&all) else {
            return Ok(Emptiness::NonEmpty);
        };
        if one_sided {
            s.drop_var(k);
            continue;
        }
        let (real, dark) = s.fm(k)?;
        let Some(dark) = dark else {
            s = real;
            continue;
        };
        if decide(real, fuel)? == Emptiness::Empty {
            return Ok(Emptiness::Empty);
        }
        if decide(dark, fuel)? == Emptiness::NonEmpty {
            return Ok(Emptiness::NonEmpty);
        }
        if let (Some(lo), Some(hi)) = s.var_bounds(k)? {
            if hi < lo {
                return Ok(Emptiness::Empty);
            }
            if hi.checked_sub(lo).is_some_and(|w| w < ENUM_LIMIT) {
                let mut unknown = false;
                for v in lo..=hi {
                    let mut t = s.clone();
                    let mut r = vec![0; 1 + s.n];
                    r[0] = -v;
                    r[1 + k] = 1;
                    t.eqs.push(r);
                    match decide(t, fuel)? {
                        Emptiness::NonEmpty => return Ok(Emptiness::NonEmpty),
                        Emptiness::Unknown => unknown = true,
                        Emptiness::Empty => {}
                    }
                }
                return Ok(if unknown {
                    Emptiness::Unknown
                } else {
                    Emptiness::Empty
                });
            }
        }
        return Ok(Emptiness::Unknown);
    }
}

/// The default work budget of [`decide`] (recursive calls).
pub(crate) const DECIDE_FUEL: u32 = 20_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn sys(n: usize, eqs: &[&[i64]], ineqs: &[&[i64]]) -> System {
        System {
            n,
            eqs: eqs.iter().map(|r| r.to_vec()).collect(),
            ineqs: ineqs.iter().map(|r| r.to_vec()).collect(),
        }
    }

    fn dec(s: System) -> Emptiness {
        decide(s, &mut DECIDE_FUEL.clone()).unwrap()
    }

    #[test]
    fn boxes_and_contradictions() {
        // 0 <= x <= 3
        assert_eq!(dec(sys(1, &[], &[&[0, 1], &[3, -1]])), Emptiness::NonEmpty);
        // 0 <= x <= -1
        assert_eq!(dec(sys(1, &[], &[&[0, 1], &[-1, -1]])), Emptiness::Empty);
        // 2x = 1
        assert_eq!(dec(sys(1, &[&[-1, 2]], &[])), Emptiness::Empty);
    }

    #[test]
    fn integer_gaps_are_seen() {
        // 1 <= 3x <= 2 has a rational but no integer solution.
        assert_eq!(dec(sys(1, &[], &[&[-1, 3], &[2, -3]])), Emptiness::Empty);
        // x = 2y + 1, x = 4z: no integer point.
        let s = sys(3, &[&[-1, 1, -2, 0], &[0, 1, 0, -4]], &[]);
        assert_eq!(dec(s), Emptiness::Empty);
        // 2 <= 2x + 3y <= 2, 0 <= x, y <= 5  -> (1, 0)
        let s = sys(
            2,
            &[],
            &[
                &[-2, 2, 3],
                &[2, -2, -3],
                &[0, 1, 0],
                &[0, 0, 1],
                &[5, -1, 0],
                &[5, 0, -1],
            ],
        );
        assert_eq!(dec(s), Emptiness::NonEmpty);
        // 27 <= 11x + 13y <= 45, -10 <= 7x - 9y <= 4 (Pugh's example): no integer point.
        let s = sys(
            2,
            &[],
            &[&[-27, 11, 13], &[45, -11, -13], &[10, 7, -9], &[4, -7, 9]],
        );
        assert_eq!(dec(s), Emptiness::Empty);
    }

    #[test]
    fn projection_of_strided_sum_is_exact() {
        // x = 2h + r, 0 <= h <= 3, 0 <= r <= 2; project onto x (var 0).
        let s = sys(
            3,
            &[&[0, 1, -2, -1]],
            &[&[0, 0, 1, 0], &[3, 0, -1, 0], &[0, 0, 0, 1], &[2, 0, 0, -1]],
        );
        let (p, exact) = s.project(&[false, true, true]).unwrap().unwrap();
        assert!(exact);
        let mut want = sys(3, &[], &[&[0, 1, 0, 0], &[8, -1, 0, 0]]);
        want.simplify();
        assert_eq!(p.ineqs, want.ineqs);
        // x = 4h: the projection loses the congruence and says so.
        let s = sys(2, &[&[0, 1, -4]], &[&[0, 0, 1], &[3, 0, -1]]);
        let (_, exact) = s.project(&[false, true]).unwrap().unwrap();
        assert!(!exact);
    }
}
