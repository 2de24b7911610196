//! Per-dimension symbolic bounds of sets ([`Set::dim_bounds`]) in terms of the parameters, and
//! the footprint quantities built on them: extent and halo of a tile's pre-image.

use super::core::{Col, Poly};
use super::expr::Aff;
use super::linear::{Emptiness, Row};
use super::set::{BasicSet, Set};
use super::{AffineError, Answer};
use std::fmt;

/// How exact a derived quantity is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Exactness {
    /// Equal to the true value.
    Exact,
    /// An over-approximation: the interval encloses the true one (lower bound may be lower,
    /// upper bound higher).
    Over,
}

impl Exactness {
    fn and(self, o: Exactness) -> Exactness {
        if self == Exactness::Exact && o == Exactness::Exact {
            Exactness::Exact
        } else {
            Exactness::Over
        }
    }
}

/// A symbolic bound: an affine expression of the parameters, or `max`/`min` of bounds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Bound {
    /// No bound in this direction.
    Infinite,
    /// An affine expression of the parameters.
    Aff(Aff),
    /// The largest of the bounds.
    Max(Vec<Bound>),
    /// The smallest of the bounds.
    Min(Vec<Bound>),
}

impl Bound {
    /// The single affine expression, when the bound is one.
    pub fn as_aff(&self) -> Option<&Aff> {
        match self {
            Bound::Aff(a) => Some(a),
            _ => None,
        }
    }

    fn collapse(mut v: Vec<Bound>, max: bool) -> Bound {
        v.dedup();
        if v.contains(&Bound::Infinite) {
            return Bound::Infinite;
        }
        match v.len() {
            0 => Bound::Infinite,
            1 => v.remove(0),
            _ if max => Bound::Max(v),
            _ => Bound::Min(v),
        }
    }

    /// The value for concrete parameters (`None` when infinite).
    pub fn eval(&self, env: &dyn Fn(&str) -> Option<i64>) -> Result<Option<i64>, AffineError> {
        Ok(match self {
            Bound::Infinite => None,
            Bound::Aff(a) => Some(a.eval(env)?),
            Bound::Max(v) | Bound::Min(v) => {
                let mut acc: Option<i64> = None;
                for b in v {
                    let Some(x) = b.eval(env)? else {
                        return Ok(None);
                    };
                    acc = Some(match (acc, self) {
                        (None, _) => x,
                        (Some(a), Bound::Max(_)) => a.max(x),
                        (Some(a), _) => a.min(x),
                    });
                }
                acc
            }
        })
    }
}

impl fmt::Display for Bound {
    /// isl syntax: `max(a, max(b, c))`; `infty` when infinite.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Infinite => f.write_str("infty"),
            Bound::Aff(a) => write!(f, "{a}"),
            Bound::Max(v) | Bound::Min(v) => {
                let op = if matches!(self, Bound::Max(_)) {
                    "max"
                } else {
                    "min"
                };
                for b in &v[..v.len() - 1] {
                    write!(f, "{op}({b}, ")?;
                }
                write!(f, "{}", v[v.len() - 1])?;
                for _ in 1..v.len() {
                    f.write_str(")")?;
                }
                Ok(())
            }
        }
    }
}

/// The bounds of one dimension of a set, valid where the set is non-empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimBounds {
    /// The lower bound.
    pub lower: Bound,
    /// The upper bound.
    pub upper: Bound,
    /// Whether the bounds are exact or over-approximate.
    pub exactness: Exactness,
}

impl DimBounds {
    /// `upper - lower + 1` when both are single affine expressions.
    pub fn extent(&self) -> Option<Aff> {
        let (l, u) = (self.lower.as_aff()?, self.upper.as_aff()?);
        u.sub(l).ok()?.add_const(1).ok()
    }

    /// The overlap of the footprints of consecutive tiles `t` and `t + 1` along this dimension,
    /// when the bounds are the footprint of tile `t` (parameter `tile`):
    /// `upper(t) - lower(t + 1) + 1`. For a window of kernel `K` and stride `S` this is
    /// `K - S` (negative: a gap). Fails unless it is a constant.
    pub fn halo(&self, tile: &str) -> Result<i64, AffineError> {
        let (Some(l), Some(u)) = (self.lower.as_aff(), self.upper.as_aff()) else {
            return Err(AffineError::Unsupported(
                "halo of a bound that is not a single affine expression".into(),
            ));
        };
        let next = l.substitute(&|n| (n == tile).then(|| Aff::var(tile).add_const(1).ok())?)?;
        let h = u.sub(&next)?.add_const(1)?;
        h.as_const()
            .ok_or_else(|| AffineError::Unsupported(format!("the halo `{h}` is not a constant")))
    }
}

/// The row `r` (over the columns of `p`) restricted to the parameters, as an [`Aff`].
fn param_aff(r: &Row, params: &[String], skip: usize) -> Result<Aff, AffineError> {
    let mut a = Aff::constant(r[0]);
    for (i, p) in params.iter().enumerate() {
        if i != skip && r[1 + i] != 0 {
            a = a.add(&Aff::var(p).scale(r[1 + i])?)?;
        }
    }
    Ok(a)
}

/// Drops the candidates dominated by another one on the parameter domain `dom`.
fn prune(
    cands: Vec<Aff>,
    dom: &Poly,
    params: &[String],
    max: bool,
) -> Result<Vec<Aff>, AffineError> {
    let mut keep: Vec<Aff> = Vec::new();
    let mut cands = cands;
    cands.sort();
    cands.dedup();
    let resolve = |n: &str| params.iter().position(|p| p == n).map(Col::Param);
    let mut removed = vec![false; cands.len()];
    for j in 0..cands.len() {
        for i in 0..cands.len() {
            if i == j || removed[i] {
                continue;
            }
            // j is dominated by i when `cands[j] > cands[i]` (max: `<`) is impossible on dom.
            let diff = if max {
                cands[j].sub(&cands[i])?
            } else {
                cands[i].sub(&cands[j])?
            };
            let mut p = dom.clone();
            p.add_constraint(&diff.add_const(-1)?, false, &resolve)?;
            if p.emptiness()? == Emptiness::Empty {
                removed[j] = true;
                break;
            }
        }
        if !removed[j] {
            keep.push(cands[j].clone());
        }
    }
    Ok(keep)
}

/// True when the poly is a *box form*: every equality defines one dimension (unit
/// coefficient) from parameters and existentials, and every inequality bounds a single
/// variable that no equality defines (unit coefficient) by parameters. Then each dimension is
/// an affine function of variables ranging over a box with integer corners, so its rational
/// extremes are attained at integer points: bounds from the real shadow are exact even where
/// the projection itself is not (strided windows `s·h + d·r` have holes but attained ends).
fn box_form(p: &Poly) -> bool {
    let mut sys = p.sys.clone();
    if !sys.simplify() {
        return false;
    }
    let (np, nd, n) = (p.n_param, p.n_dim, p.n_cols());
    let mut defined = vec![false; nd];
    for r in &sys.eqs {
        let dims: Vec<usize> = (0..nd).filter(|j| r[1 + np + j] != 0).collect();
        match dims[..] {
            [j] if r[1 + np + j].abs() == 1 && !defined[j] => defined[j] = true,
            _ => return false,
        }
    }
    for r in &sys.ineqs {
        let vars: Vec<usize> = (np..n).filter(|c| r[1 + c] != 0).collect();
        match vars[..] {
            [] => {}
            [c] if r[1 + c].abs() == 1 && (c >= np + nd || !defined[c - np]) => {}
            _ => return false,
        }
    }
    true
}

/// True when bound `b` of column `x` is attained by a point of `p` for every parameter value
/// of `dom` (an enclosure of `p`'s parameter domain): for each candidate, on the region of
/// `dom` where it is the active one, the parameters where `p ∧ x = candidate` has a point
/// (an exact projection) must include the region.
fn attained(
    p: &Poly,
    x: usize,
    b: &Bound,
    dom: &Poly,
    params: &[String],
) -> Result<bool, AffineError> {
    let (cands, max): (Vec<&Aff>, bool) = match b {
        Bound::Infinite => return Ok(true),
        Bound::Aff(a) => (vec![a], true),
        Bound::Max(v) | Bound::Min(v) => match v.iter().map(Bound::as_aff).collect() {
            Some(c) => (c, matches!(b, Bound::Max(_))),
            None => return Ok(false),
        },
    };
    let np = p.n_param;
    let resolve = |n: &str| params.iter().position(|q| q == n).map(Col::Param);
    for (i, c) in cands.iter().enumerate() {
        let mut region = dom.clone();
        for (j, d) in cands.iter().enumerate() {
            if j != i {
                let diff = if max { c.sub(d)? } else { d.sub(c)? };
                region.add_constraint(&diff, false, &resolve)?;
            }
        }
        if region.emptiness()? == Emptiness::Empty {
            continue;
        }
        let mut q = p.clone();
        for (r, eq) in dom.rows() {
            let mut r = r[..=np].to_vec();
            r.resize(1 + q.n_cols(), 0);
            if eq {
                q.sys.eqs.push(r);
            } else {
                q.sys.ineqs.push(r);
            }
        }
        // x = c
        let mut row = q.aff_row(c, &resolve)?;
        row.resize(1 + q.n_cols(), 0);
        row[1 + x] = super::expr::ck(row[1 + x].checked_sub(1))?;
        q.sys.eqs.push(row);
        let elim: Vec<bool> = (0..q.n_cols()).map(|k| k >= np).collect();
        let Some((proj, true)) = q.sys.clone().project(&elim)? else {
            return Ok(false);
        };
        for (r, eq) in proj
            .eqs
            .iter()
            .map(|r| (r, true))
            .chain(proj.ineqs.iter().map(|r| (r, false)))
        {
            let mut row = r[..=np].to_vec();
            row.resize(1 + region.n_cols(), 0);
            if region.and_not(&row).emptiness()? != Emptiness::Empty {
                return Ok(false);
            }
            if eq {
                let neg: Row = row.iter().map(|v| -v).collect();
                if region.and_not(&neg).emptiness()? != Emptiness::Empty {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

impl BasicSet {
    /// The bounds of dimension `k` in terms of the parameters; `None` when the set is empty.
    pub fn dim_bounds(&self, k: usize) -> Result<Option<DimBounds>, AffineError> {
        let nd = self.poly.n_dim;
        if k >= nd {
            return Err(AffineError::Arity {
                expected: nd,
                found: k + 1,
            });
        }
        if self.poly.emptiness()? == Emptiness::Empty {
            return Ok(None);
        }
        let np = self.poly.n_param;
        let x = np + k;
        let elim: Vec<bool> = (0..self.poly.n_cols()).map(|c| c >= np && c != x).collect();
        let Some((proj, exact)) = self.poly.sys.clone().project(&elim)? else {
            return Ok(None);
        };
        let params = &self.space.params;
        let (mut lower, mut upper) = (Vec::new(), Vec::new());
        let stray = |r: &Row| (np..proj.n).any(|c| c != x && r[1 + c] != 0);
        if proj.eqs.iter().chain(&proj.ineqs).any(stray) {
            return Err(AffineError::Unsupported(
                "projection left an eliminated variable".into(),
            ));
        }
        for r in proj.eqs.iter() {
            let a = r[1 + x];
            if a == 0 {
                continue;
            }
            let rest = param_aff(r, params, usize::MAX)?;
            // a·x + rest = 0  ->  x = -rest / a
            let v = rest.scale(-a.signum())?.floordiv(a.abs())?;
            lower.push(v.clone());
            upper.push(v);
        }
        for r in proj.ineqs.iter() {
            let a = r[1 + x];
            let rest = param_aff(r, params, usize::MAX)?;
            if a > 0 {
                lower.push(rest.scale(-1)?.ceildiv(a)?);
            } else if a < 0 {
                upper.push(rest.floordiv(-a)?);
            }
        }
        // The parameter domain: everything else projected away.
        let mut dom_elim = elim.clone();
        dom_elim[x] = true;
        let dom_sys = match proj.project(&dom_elim)? {
            Some((s, _)) => s,
            None => return Ok(None),
        };
        let mut dom = Poly {
            n_param: np,
            n_dim: 0,
            n_exist: 0,
            sys: dom_sys,
        };
        let mask: Vec<bool> = (0..dom.sys.n).map(|c| c >= np).collect();
        dom.sys.remove_cols(&mask);
        let lower = prune(lower, &dom, params, true)?;
        let upper = prune(upper, &dom, params, false)?;
        let lower = Bound::collapse(lower.into_iter().map(Bound::Aff).collect(), true);
        let upper = Bound::collapse(upper.into_iter().map(Bound::Aff).collect(), false);
        // An inexact projection still gives exact bounds when they are attained: always in
        // box form; otherwise checked per candidate.
        let exact = exact
            || box_form(&self.poly)
            || (attained(&self.poly, x, &lower, &dom, params)?
                && attained(&self.poly, x, &upper, &dom, params)?);
        Ok(Some(DimBounds {
            lower,
            upper,
            exactness: if exact {
                Exactness::Exact
            } else {
                Exactness::Over
            },
        }))
    }
}

impl Set {
    /// The bounds of dimension `k` in terms of the parameters, valid where the set is
    /// non-empty; `None` when it is empty. For a union: `min` of the pieces' lower bounds and
    /// `max` of their upper bounds, [`Exactness::Exact`] only when every piece is exact and
    /// non-empty wherever the union is.
    pub fn dim_bounds(&self, k: usize) -> Result<Option<DimBounds>, AffineError> {
        let mut found: Vec<(BasicSet, DimBounds)> = Vec::new();
        for p in &self.pieces {
            if let Some(b) = p.dim_bounds(k)? {
                found.push((p.clone(), b));
            }
        }
        if found.len() <= 1 {
            return Ok(found.pop().map(|(_, b)| b));
        }
        let mut exactness = Exactness::Exact;
        for (_, b) in &found {
            exactness = exactness.and(b.exactness);
        }
        if exactness == Exactness::Exact {
            let all = self.params_domain();
            for (p, _) in &found {
                let mine = Set::from(p.params_domain());
                if all.is_subset(&mine)? != Answer::Yes {
                    exactness = Exactness::Over;
                    break;
                }
            }
        }
        let mut lows: Vec<Bound> = found.iter().map(|(_, b)| b.lower.clone()).collect();
        let mut ups: Vec<Bound> = found.iter().map(|(_, b)| b.upper.clone()).collect();
        lows.sort_by_key(|b| b.to_string());
        ups.sort_by_key(|b| b.to_string());
        Ok(Some(DimBounds {
            lower: Bound::collapse(lows, false),
            upper: Bound::collapse(ups, true),
            exactness,
        }))
    }

    /// The bounds of every dimension (`None` when the set is empty).
    pub fn bounds(&self) -> Result<Option<Vec<DimBounds>>, AffineError> {
        (0..self.space.tuple.len())
            .map(|k| self.dim_bounds(k))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poly::affine::isl::{parse_map, parse_set};

    fn bounds(set: &str, k: usize) -> DimBounds {
        parse_set(set).unwrap().dim_bounds(k).unwrap().unwrap()
    }

    #[test]
    fn parametric_box_bounds() {
        let b = bounds("[Ho] -> { S[h, r] : 0 <= h < Ho and 0 <= r < 2 }", 0);
        assert_eq!(b.lower.to_string(), "0");
        assert_eq!(b.upper.to_string(), "Ho - 1");
        assert_eq!(b.exactness, Exactness::Exact);
        let img = parse_set("[Ho] -> { S[h, r] : 0 <= h < Ho and 0 <= r < 2 }")
            .unwrap()
            .apply(&parse_map("[Ho] -> { S[h, r] -> T[2h + r] }").unwrap())
            .unwrap();
        let b = img.dim_bounds(0).unwrap().unwrap();
        assert_eq!(
            (b.lower.to_string(), b.upper.to_string()),
            ("0".into(), "2*Ho - 1".into())
        );
        assert_eq!(b.exactness, Exactness::Exact);
        assert!(parse_set("{ S[i] : 1 <= i <= 0 }")
            .unwrap()
            .dim_bounds(0)
            .unwrap()
            .is_none());
    }

    #[test]
    fn candidates_are_pruned_or_kept() {
        // i < N and i < M: both stay (min), i < N and i < N + 3: one.
        let b = bounds("[N, M] -> { S[i] : 0 <= i < N and i < M }", 0);
        assert_eq!(b.upper.to_string(), "min(M - 1, N - 1)");
        let b = bounds("[N] -> { S[i] : 0 <= i < N and i < N + 3 }", 0);
        assert_eq!(b.upper.to_string(), "N - 1");
        // ceil: 3i >= N -> i >= ceil(N/3).
        let b = bounds("[N] -> { S[i] : 3i >= N and i <= 10 }", 0);
        assert_eq!(b.lower.to_string(), "floor((N + 2)/3)");
    }

    #[test]
    fn congruence_is_over_approximated() {
        let b = bounds("[N] -> { S[i] : exists (e0 : i = 4e0) and 0 <= i < N }", 0);
        assert_eq!(b.upper.to_string(), "N - 1");
        assert_eq!(b.exactness, Exactness::Over);
    }

    /// Seed 003: a 4x4 pool tile (origin `h0`) with pool kernel PK and stride 2 reads conv
    /// rows `[8 h0, 8 h0 + PK + 5]`; halo = PK - 2.
    #[test]
    fn seed_003_conv_pool_tile_preimage_and_halo() {
        for (pk, hi, halo) in [(2, 7, 0), (3, 8, 1)] {
            let tile = parse_set(&format!(
                "[h0, w0] -> {{ S_pool[n, c, h, w, rh, rw] : 0 <= n < 1 and 0 <= c < 1 and \
                 4h0 <= h < 4h0 + 4 and 4w0 <= w < 4w0 + 4 and 0 <= rh < {pk} and 0 <= rw < {pk} }}"
            ))
            .unwrap();
            let read =
                parse_map("{ S_pool[n, c, h, w, rh, rw] -> Out[n, c, 2h + rh, 2w + rw] }").unwrap();
            let rows = tile.apply(&read).unwrap();
            let b = rows.dim_bounds(2).unwrap().unwrap();
            assert_eq!(b.lower.to_string(), "8*h0");
            assert_eq!(b.upper.to_string(), format!("8*h0 + {hi}"));
            assert_eq!(b.exactness, Exactness::Exact);
            assert_eq!(b.halo("h0").unwrap(), halo);
            assert_eq!(b.extent().unwrap(), Aff::constant(hi + 1));
        }
    }
}
