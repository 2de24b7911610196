//! Best-effort index ranges for the `UnguardedAccess` check: exact intervals of affine indices
//! over the box of axis extents, narrowed by guard facts `x op y` of enclosing selects whose
//! difference `x - y` is the index up to sign and a constant. When the intervals cannot rule a
//! violation out and every extent is known, [`Bounds::exact`] decides by enumerating the (small)
//! box of the axes the index and its guards share — the intervals lose the correlation between a
//! `floordiv` and the guards on its dividend that a strided ConvTranspose or a reshape of an
//! unfolded window produces.

use super::{AxisExpr, CmpOp, Pred};
use crate::ir::dim::Dim;
use std::collections::{BTreeMap, BTreeSet};

/// The most points [`Bounds::exact`] enumerates.
const EXACT_BUDGET: u64 = 1 << 18;

/// An index expression compiled over the enumerated axes (`V(i)`: the `i`-th axis).
enum C {
    K(i64),
    V(usize),
    Add(Vec<C>),
    Mul(Box<C>, Box<C>),
    Div(Box<C>, i64),
    Min(Box<C>, Box<C>),
    Max(Box<C>, Box<C>),
}

impl C {
    fn at(&self, p: &[i64]) -> Option<i64> {
        match self {
            C::K(c) => Some(*c),
            C::V(i) => p.get(*i).copied(),
            C::Add(l) => l.iter().try_fold(0i64, |a, x| a.checked_add(x.at(p)?)),
            C::Mul(a, b) => a.at(p)?.checked_mul(b.at(p)?),
            C::Div(x, c) if *c > 0 => Some(x.at(p)?.div_euclid(*c)),
            C::Div(..) => None,
            C::Min(a, b) => Some(a.at(p)?.min(b.at(p)?)),
            C::Max(a, b) => Some(a.at(p)?.max(b.at(p)?)),
        }
    }
}

/// Position of the innermost binding of `name` in `scope`.
pub(super) fn lookup(scope: &[(String, Dim)], name: &str) -> Option<usize> {
    scope.iter().rposition(|(n, _)| n == name)
}

/// Linear form: coefficients per scope position, plus a constant.
pub(super) type Linear = (BTreeMap<usize, i64>, i64);

pub(super) struct Bounds<'a> {
    pub(super) scope: &'a [(String, Dim)],
    pub(super) bindings: &'a BTreeMap<String, i64>,
}

impl Bounds<'_> {
    fn name(&self, n: &str) -> Option<Result<usize, i64>> {
        match lookup(self.scope, n) {
            Some(p) => Some(Ok(p)),
            None => self.bindings.get(n).map(|v| Err(*v)),
        }
    }

    pub(super) fn linear(&self, e: &AxisExpr) -> Option<Linear> {
        match e {
            AxisExpr::Const(c) => Some((BTreeMap::new(), *c)),
            AxisExpr::Name(n) => match self.name(n)? {
                Ok(p) => Some(([(p, 1)].into(), 0)),
                Err(v) => Some((BTreeMap::new(), v)),
            },
            AxisExpr::Add(l) => {
                let mut acc: Linear = (BTreeMap::new(), 0);
                for x in l {
                    let (m, c) = self.linear(x)?;
                    acc.1 = acc.1.checked_add(c)?;
                    for (p, k) in m {
                        *acc.0.entry(p).or_insert(0) += k;
                    }
                }
                acc.0.retain(|_, k| *k != 0);
                Some(acc)
            }
            AxisExpr::Mul(a, b) => {
                let (la, lb) = (self.linear(a)?, self.linear(b)?);
                let (k, (m, c)) = match (la.0.is_empty(), lb.0.is_empty()) {
                    (true, _) => (la.1, lb),
                    (_, true) => (lb.1, la),
                    _ => return None,
                };
                let m = m
                    .into_iter()
                    .map(|(p, x)| Some((p, x.checked_mul(k)?)))
                    .collect::<Option<BTreeMap<_, _>>>()?;
                Some((
                    m.into_iter().filter(|(_, x)| *x != 0).collect(),
                    c.checked_mul(k)?,
                ))
            }
            AxisExpr::FloorDiv(..) => None,
            // Axis-free (checked by the verifier): a constant once its symbols are bound.
            AxisExpr::Min(a, b) | AxisExpr::Max(a, b) => {
                let (la, lb) = (self.linear(a)?, self.linear(b)?);
                if !la.0.is_empty() || !lb.0.is_empty() {
                    return None;
                }
                let v = match e {
                    AxisExpr::Min(..) => la.1.min(lb.1),
                    _ => la.1.max(lb.1),
                };
                Some((BTreeMap::new(), v))
            }
        }
    }

    fn extent(&self, p: usize) -> Option<i64> {
        self.scope[p].1.eval_with(self.bindings).ok()
    }

    pub(super) fn interval(&self, e: &AxisExpr) -> Option<(i64, i64)> {
        if let Some((m, c)) = self.linear(e) {
            let (mut lo, mut hi) = (c, c);
            for (p, k) in m {
                let top = self.extent(p)?.checked_sub(1)?.checked_mul(k)?;
                lo = lo.checked_add(top.min(0))?;
                hi = hi.checked_add(top.max(0))?;
            }
            return Some((lo, hi));
        }
        match e {
            AxisExpr::FloorDiv(x, c) if *c > 0 => {
                let (lo, hi) = self.interval(x)?;
                Some((lo.div_euclid(*c), hi.div_euclid(*c)))
            }
            AxisExpr::Add(l) if self.is_mod(l).is_some() => self.is_mod(l),
            AxisExpr::Add(l) => l.iter().try_fold((0i64, 0i64), |(a, b), x| {
                let (lo, hi) = self.interval(x)?;
                Some((a.checked_add(lo)?, b.checked_add(hi)?))
            }),
            AxisExpr::Mul(a, b) => {
                let (a, b) = (self.interval(a)?, self.interval(b)?);
                let ps = [a.0 * b.0, a.0 * b.1, a.1 * b.0, a.1 * b.1];
                Some((*ps.iter().min()?, *ps.iter().max()?))
            }
            _ => None,
        }
    }

    /// Interval of `e` under the guard facts `x op y` of enclosing selects: linear parts are
    /// narrowed by every guard whose difference matches them, and narrowing propagates through
    /// sums, products, floordivs and remainders (an empty interval stays empty: the guard is
    /// unsatisfiable there and the read never happens).
    pub(super) fn guarded(
        &self,
        e: &AxisExpr,
        guards: &[(CmpOp, AxisExpr, AxisExpr)],
    ) -> Option<(i64, i64)> {
        if let Some(lm) = self.linear(e) {
            let (mut lo, mut hi) = self.interval(e)?;
            if !lm.0.is_empty() {
                for (op, x, y) in guards {
                    if let Some((l2, h2)) = self.narrow(&lm, *op, x, y) {
                        lo = lo.max(l2);
                        hi = hi.min(h2);
                    }
                }
            }
            return Some((lo, hi));
        }
        match e {
            AxisExpr::FloorDiv(x, c) if *c > 0 => {
                let (lo, hi) = self.guarded(x, guards)?;
                Some((lo.div_euclid(*c), hi.div_euclid(*c)))
            }
            AxisExpr::Add(l) if self.is_mod(l).is_some() => self.is_mod(l),
            AxisExpr::Add(l) => {
                let (mut lo, mut hi) = (0i64, 0i64);
                for x in l {
                    let (a, b) = self.guarded(x, guards)?;
                    if a > b {
                        return Some((a, b));
                    }
                    lo = lo.checked_add(a)?;
                    hi = hi.checked_add(b)?;
                }
                Some((lo, hi))
            }
            AxisExpr::Mul(a, b) => {
                let (a, b) = (self.guarded(a, guards)?, self.guarded(b, guards)?);
                if a.0 > a.1 || b.0 > b.1 {
                    return Some((1, 0));
                }
                let ps = [
                    a.0.checked_mul(b.0)?,
                    a.0.checked_mul(b.1)?,
                    a.1.checked_mul(b.0)?,
                    a.1.checked_mul(b.1)?,
                ];
                Some((*ps.iter().min()?, *ps.iter().max()?))
            }
            _ => self.interval(e),
        }
    }

    /// True when `p` provably holds at no point of the box (an empty `or`, or a comparison whose
    /// two sides' difference has a known range on the wrong side of 0).
    pub(super) fn never(&self, p: &Pred) -> bool {
        match p {
            Pred::Or(ps) => ps.iter().all(|q| self.never(q)),
            Pred::And(ps) => ps.iter().any(|q| self.never(q)),
            Pred::Cmp(op, a, b) => {
                let d = AxisExpr::Add(vec![
                    a.clone(),
                    AxisExpr::Mul(Box::new(AxisExpr::Const(-1)), Box::new(b.clone())),
                ]);
                let Some((lo, hi)) = self.interval(&d) else {
                    return false;
                };
                match op {
                    CmpOp::Ge => hi < 0,
                    CmpOp::Gt => hi <= 0,
                    CmpOp::Le => lo > 0,
                    CmpOp::Lt => lo >= 0,
                    CmpOp::Eq => lo > 0 || hi < 0,
                }
            }
        }
    }

    /// The scope positions `e` mentions.
    fn axes(&self, e: &AxisExpr) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        e.for_each_name(&mut |n| {
            if let Some(p) = lookup(self.scope, n) {
                out.insert(p);
            }
        });
        out
    }

    /// `e` over the enumerated `axes`; `None` for an unbound symbol.
    fn compile(&self, e: &AxisExpr, axes: &[usize]) -> Option<C> {
        let sub = |x: &AxisExpr| self.compile(x, axes);
        Some(match e {
            AxisExpr::Const(c) => C::K(*c),
            AxisExpr::Name(n) => match lookup(self.scope, n) {
                Some(p) => C::V(axes.iter().position(|a| *a == p)?),
                None => C::K(*self.bindings.get(n)?),
            },
            AxisExpr::Add(l) => C::Add(l.iter().map(sub).collect::<Option<_>>()?),
            AxisExpr::Mul(a, b) => C::Mul(Box::new(sub(a)?), Box::new(sub(b)?)),
            AxisExpr::FloorDiv(x, c) => C::Div(Box::new(sub(x)?), *c),
            AxisExpr::Min(a, b) => C::Min(Box::new(sub(a)?), Box::new(sub(b)?)),
            AxisExpr::Max(a, b) => C::Max(Box::new(sub(a)?), Box::new(sub(b)?)),
        })
    }

    /// Decides exactly whether index `m` leaves `[0, size)` at a point of the box where every
    /// guard holds: `Some(None)` when it never does, `Some(Some((lo, hi)))` with the range of the
    /// offending indices when it does, `None` when undecidable here (an unknown extent or
    /// symbol, overflow, or more than [`EXACT_BUDGET`] points). Every guard is used when the box
    /// over all their axes fits the budget (so an unsatisfiable guard on other axes — a pad of
    /// an empty tensor read at a constant index — shows the read never runs); otherwise only
    /// the guards connected to the index through shared axes (the others cannot change which
    /// indices it reaches, short of being unsatisfiable, which only makes the answer
    /// conservative).
    pub(super) fn exact(
        &self,
        m: &AxisExpr,
        guards: &[(CmpOp, AxisExpr, AxisExpr)],
        size: i64,
    ) -> Option<Option<(i64, i64)>> {
        let mut axes = self.axes(m);
        let guard_axes: Vec<BTreeSet<usize>> = guards
            .iter()
            .map(|(_, a, b)| self.axes(a).union(&self.axes(b)).copied().collect())
            .collect();
        let all: BTreeSet<usize> = guard_axes.iter().flatten().chain(&axes).copied().collect();
        let fits = all
            .iter()
            .try_fold(1u64, |n, p| {
                let e = u64::try_from(self.extent(*p)?).ok()?;
                n.checked_mul(e.max(1))
            })
            .is_some_and(|n| n <= EXACT_BUDGET);
        if fits {
            axes = all;
        }
        let mut used = vec![fits; guards.len()];
        let mut grew = true;
        while grew {
            grew = false;
            for (k, ga) in guard_axes.iter().enumerate() {
                if !used[k] && !ga.is_disjoint(&axes) {
                    used[k] = true;
                    axes.extend(ga.iter().copied());
                    grew = true;
                }
            }
        }
        let axes: Vec<usize> = axes.into_iter().collect();
        let ext: Vec<i64> = axes
            .iter()
            .map(|p| self.extent(*p))
            .collect::<Option<_>>()?;
        if ext.iter().any(|e| *e <= 0) {
            return Some(None);
        }
        let total = ext
            .iter()
            .try_fold(1u64, |a, e| a.checked_mul(u64::try_from(*e).ok()?))?;
        if total > EXACT_BUDGET {
            return None;
        }
        let index = self.compile(m, &axes)?;
        let conds = guards
            .iter()
            .zip(&used)
            .filter(|(_, u)| **u)
            .map(|((op, a, b), _)| Some((*op, self.compile(a, &axes)?, self.compile(b, &axes)?)))
            .collect::<Option<Vec<_>>>()?;
        let mut point = vec![0i64; axes.len()];
        let mut bad: Option<(i64, i64)> = None;
        loop {
            let mut admitted = true;
            for (op, a, b) in &conds {
                if !op.holds(a.at(&point)?, b.at(&point)?) {
                    admitted = false;
                    break;
                }
            }
            if admitted {
                let v = index.at(&point)?;
                if v < 0 || v >= size {
                    bad = Some(bad.map_or((v, v), |(l, h)| (l.min(v), h.max(v))));
                }
            }
            // Next point of the box, row-major.
            let mut k = point.len();
            loop {
                if k == 0 {
                    return Some(bad);
                }
                k -= 1;
                point[k] += 1;
                if point[k] < ext[k] {
                    break;
                }
                point[k] = 0;
            }
        }
    }

    /// `[0, c-1]` when the sum `l` is `x mod c` written `x + -c·(x // c)` (how region synthesis
    /// spells a remainder), with `x` given as the other terms (structurally or as equal linear
    /// forms).
    fn is_mod(&self, l: &[AxisExpr]) -> Option<(i64, i64)> {
        let (k, x, c) = l.iter().enumerate().find_map(|(k, t)| match t {
            AxisExpr::Mul(a, b) => match (&**a, &**b) {
                (AxisExpr::Const(n), AxisExpr::FloorDiv(x, c)) if *c > 0 && *n == -*c => {
                    Some((k, &**x, *c))
                }
                _ => None,
            },
            _ => None,
        })?;
        let rest: Vec<AxisExpr> = l
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != k)
            .map(|(_, t)| t.clone())
            .collect();
        let mut want = match x {
            AxisExpr::Add(xs) => xs.clone(),
            _ => vec![x.clone()],
        };
        let mut have = rest.clone();
        want.sort();
        have.sort();
        let same = want == have;
        let rest_e = match rest.as_slice() {
            [one] => one.clone(),
            _ => AxisExpr::Add(rest),
        };
        let same =
            same || matches!((self.linear(&rest_e), self.linear(x)), (Some(a), Some(b)) if a == b);
        same.then_some((0, c - 1))
    }

    /// The range a guard `x op y` allows for the linear index `lm`, when `lm` is an integer
    /// multiple of `x - y` up to constants.
    pub(super) fn narrow(
        &self,
        lm: &Linear,
        op: CmpOp,
        x: &AxisExpr,
        y: &AxisExpr,
    ) -> Option<(i64, i64)> {
        let (mx, cx) = self.linear(x)?;
        let (my, cy) = self.linear(y)?;
        let mut diff = mx;
        for (p, k) in my {
            *diff.entry(p).or_insert(0) -= k;
        }
        diff.retain(|_, k| *k != 0);
        let dconst = cx.checked_sub(cy)?;
        // x - y = (lm - lm.c)/s + dconst for an integer s ≠ 0 (the index is a multiple of the
        // guarded expression: `2i - 1` under `i >= 1`), so `lm = s·(x - y - dconst) + lm.c`.
        let (p0, k0) = diff.iter().next()?;
        let l0 = *lm.0.get(p0)?;
        if *k0 == 0 || l0 % k0 != 0 || diff.len() != lm.0.len() {
            return None;
        }
        let s = l0 / k0;
        if s == 0
            || diff
                .iter()
                .any(|(p, k)| lm.0.get(p).copied() != k.checked_mul(s))
        {
            return None;
        }
        // Range of t = x - y allowed by `t op 0`.
        let big = i64::MAX / 4;
        let (tlo, thi) = match op {
            CmpOp::Ge => (0, big),
            CmpOp::Gt => (1, big),
            CmpOp::Le => (-big, 0),
            CmpOp::Lt => (-big, -1),
            CmpOp::Eq => (0, 0),
        };
        let at = |t: i64| {
            t.saturating_sub(dconst)
                .saturating_mul(s)
                .saturating_add(lm.1)
        };
        let (a, b) = (at(tlo), at(thi));
        Some((a.min(b), a.max(b)))
    }
}
