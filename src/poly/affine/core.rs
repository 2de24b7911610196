//! [`Poly`]: the dense form shared by basic sets and basic maps — a [`System`] whose columns are
//! the parameters, the tuple dimensions (a map's input then output dimensions) and existential
//! variables (from floordivs, projections and compositions). Operations here are exact by
//! construction: projecting a dimension makes it existential; only queries eliminate.

use super::expr::{Aff, Atom};
use super::linear::{decide, Emptiness, Row, System, DECIDE_FUEL, MAX_ENTRY};
use super::AffineError;
use std::collections::BTreeMap;

/// A dense conjunction over `[params | dims | exists]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Poly {
    pub n_param: usize,
    pub n_dim: usize,
    pub n_exist: usize,
    pub sys: System,
}

/// Where a name lives in a [`Poly`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Col {
    Param(usize),
    Dim(usize),
    Exist(usize),
}

impl Poly {
    pub fn universe(n_param: usize, n_dim: usize) -> Poly {
        Poly {
            n_param,
            n_dim,
            n_exist: 0,
            sys: System::new(n_param + n_dim),
        }
    }

    pub fn n_cols(&self) -> usize {
        self.n_param + self.n_dim + self.n_exist
    }

    pub fn col(&self, c: Col) -> usize {
        match c {
            Col::Param(i) => i,
            Col::Dim(i) => self.n_param + i,
            Col::Exist(i) => self.n_param + self.n_dim + i,
        }
    }

    /// Appends `k` existential columns; returns the index of the first.
    pub fn add_exists(&mut self, k: usize) -> usize {
        let first = self.n_exist;
        for r in self.sys.eqs.iter_mut().chain(self.sys.ineqs.iter_mut()) {
            r.extend(std::iter::repeat_n(0, k));
        }
        self.n_exist += k;
        self.sys.n += k;
        first
    }

    /// Rebuilds every row with a column map: `map[old] = new` column in a poly of the given
    /// shape.
    fn remap(&self, n_param: usize, n_dim: usize, n_exist: usize, map: &[usize]) -> Poly {
        let n = n_param + n_dim + n_exist;
        let conv = |r: &Row| -> Row {
            let mut out = vec![0; 1 + n];
            out[0] = r[0];
            for (old, new) in map.iter().enumerate() {
                out[1 + new] = r[1 + old];
            }
            out
        };
        Poly {
            n_param,
            n_dim,
            n_exist,
            sys: System {
                n,
                eqs: self.sys.eqs.iter().map(conv).collect(),
                ineqs: self.sys.ineqs.iter().map(conv).collect(),
            },
        }
    }

    /// The same constraints over a larger parameter list: `pos[i]` is the new index of old
    /// parameter `i`.
    pub fn align_params(&self, n_new: usize, pos: &[usize]) -> Poly {
        let mut map: Vec<usize> = pos.to_vec();
        map.extend((0..self.n_dim + self.n_exist).map(|j| n_new + j));
        self.remap(n_new, self.n_dim, self.n_exist, &map)
    }

    /// Moves the dimensions `from..to` to new existential columns (projection, exact).
    pub fn dims_to_exists(&self, from: usize, to: usize) -> Poly {
        let (np, nd, ne) = (self.n_param, self.n_dim, self.n_exist);
        let moved = to - from;
        let mut map: Vec<usize> = (0..np).collect();
        for j in 0..nd {
            map.push(if j < from {
                np + j
            } else if j < to {
                np + (nd - moved) + ne + (j - from)
            } else {
                np + j - moved
            });
        }
        map.extend((0..ne).map(|e| np + nd - moved + e));
        self.remap(np, nd - moved, ne + moved, &map)
    }

    /// Inserts `k` unconstrained dimensions before dimension `at`.
    pub fn insert_dims(&self, at: usize, k: usize) -> Poly {
        let (np, nd, ne) = (self.n_param, self.n_dim, self.n_exist);
        let mut map: Vec<usize> = (0..np).collect();
        map.extend((0..nd).map(|j| if j < at { np + j } else { np + j + k }));
        map.extend((0..ne).map(|e| np + nd + k + e));
        self.remap(np, nd + k, ne, &map)
    }

    /// Permutes the dimensions: new dimension `j` is old dimension `perm[j]`.
    pub fn permute_dims(&self, perm: &[usize]) -> Poly {
        let np = self.n_param;
        let mut map: Vec<usize> = (0..np).collect();
        let mut inv = vec![0; perm.len()];
        for (new, old) in perm.iter().enumerate() {
            inv[*old] = new;
        }
        map.extend(inv.iter().map(|new| np + new));
        map.extend((0..self.n_exist).map(|e| np + self.n_dim + e));
        self.remap(np, self.n_dim, self.n_exist, &map)
    }

    /// The conjunction of two polys of the same shape (existentials concatenated).
    pub fn intersect(&self, o: &Poly) -> Poly {
        debug_assert_eq!((self.n_param, self.n_dim), (o.n_param, o.n_dim));
        let mut a = self.clone();
        let first = a.add_exists(o.n_exist);
        let mut map: Vec<usize> = (0..o.n_param + o.n_dim).collect();
        map.extend((0..o.n_exist).map(|e| o.n_param + o.n_dim + first + e));
        let b = o.remap(a.n_param, a.n_dim, a.n_exist, &map);
        a.sys.eqs.extend(b.sys.eqs);
        a.sys.ineqs.extend(b.sys.ineqs);
        a
    }

    /// The dense row of `aff` (names resolved by `resolve`; floordivs become new existentials
    /// `q` with `d·q <= e <= d·q + d - 1`).
    pub fn aff_row(
        &mut self,
        aff: &Aff,
        resolve: &dyn Fn(&str) -> Option<Col>,
    ) -> Result<Row, AffineError> {
        let mut terms: BTreeMap<usize, i64> = BTreeMap::new();
        for (a, c) in aff.terms() {
            let col = match a {
                Atom::Var(n) => {
                    let col = resolve(n).ok_or_else(|| AffineError::UnknownName(n.clone()))?;
                    self.col(col)
                }
                Atom::Floor(e, d) => {
                    let e = self.aff_row(&Aff::from_quasi((**e).clone())?, resolve)?;
                    let q = self.add_exists(1);
                    let qc = self.col(Col::Exist(q));
                    let mut lo = e.clone();
                    lo.resize(1 + self.n_cols(), 0);
                    lo[1 + qc] = -d;
                    let mut hi: Row = lo.iter().map(|x| -x).collect();
                    hi[0] += d - 1;
                    self.sys.ineqs.push(lo);
                    self.sys.ineqs.push(hi);
                    qc
                }
                other => return Err(AffineError::NonAffine(format!("{other:?}"))),
            };
            let e = terms.entry(col).or_insert(0);
            *e = super::expr::ck(e.checked_add(c))?;
        }
        let mut row = vec![0; 1 + self.n_cols()];
        row[0] = aff.constant_term();
        for (col, c) in terms {
            row[1 + col] = c;
        }
        Ok(row)
    }

    /// Adds `aff = 0` (`eq`) or `aff >= 0`.
    pub fn add_constraint(
        &mut self,
        aff: &Aff,
        eq: bool,
        resolve: &dyn Fn(&str) -> Option<Col>,
    ) -> Result<(), AffineError> {
        let mut row = self.aff_row(aff, resolve)?;
        row.resize(1 + self.n_cols(), 0);
        if row.iter().any(|v| v.unsigned_abs() > MAX_ENTRY as u64) {
            return Err(AffineError::Overflow);
        }
        if eq {
            self.sys.eqs.push(row);
        } else {
            self.sys.ineqs.push(row);
        }
        Ok(())
    }

    /// Eliminates the existentials that go exactly and drops their columns; normalises rows.
    /// `false` when the poly is found infeasible.
    pub fn tidy(&mut self) -> Result<bool, AffineError> {
        let n = self.n_cols();
        let ex0 = self.n_param + self.n_dim;
        let elim: Vec<bool> = (0..n).map(|c| c >= ex0).collect();
        let gone = self.sys.eliminate_exact(&elim)?;
        if !self.sys.simplify() {
            return Ok(false);
        }
        // Unused existentials go too.
        let used = |s: &System, c: usize| s.eqs.iter().chain(&s.ineqs).any(|r| r[1 + c] != 0);
        let mask: Vec<bool> = (0..n)
            .map(|c| c >= ex0 && (gone[c] || !used(&self.sys, c)))
            .collect();
        self.n_exist -= mask.iter().filter(|m| **m).count();
        self.sys.remove_cols(&mask);
        Ok(true)
    }

    /// The poly as a union of polys without existentials, by splitting on the values of
    /// existentials with small constant ranges (at most 16 values each, `limit` pieces in
    /// all); `None` when some existential has no such range. Exact.
    pub fn expand_exists(&self, limit: usize) -> Result<Option<Vec<Poly>>, AffineError> {
        let mut done = Vec::new();
        let mut todo = vec![self.clone()];
        while let Some(mut p) = todo.pop() {
            if !p.tidy()? {
                continue;
            }
            if p.n_exist == 0 {
                done.push(p);
                if done.len() > limit {
                    return Ok(None);
                }
                continue;
            }
            let mut best: Option<(usize, i64, i64)> = None;
            for e in 0..p.n_exist {
                let c = p.col(Col::Exist(e));
                if let (Some(lo), Some(hi)) = p.sys.var_bounds(c)? {
                    if best.is_none_or(|(_, l, h)| hi - lo < h - l) {
                        best = Some((c, lo, hi));
                    }
                }
            }
            let Some((c, lo, hi)) = best else {
                return Ok(None);
            };
            if hi.checked_sub(lo).is_none_or(|w| w >= 16)
                || todo.len() + done.len() + 16 > limit.saturating_mul(4)
            {
                return Ok(None);
            }
            for v in lo..=hi {
                let mut q = p.clone();
                let mut r = vec![0; 1 + q.n_cols()];
                r[0] = -v;
                r[1 + c] = 1;
                q.sys.eqs.push(r);
                todo.push(q);
            }
        }
        Ok(Some(done))
    }

    /// Exact emptiness where decidable (see [`decide`]).
    pub fn emptiness(&self) -> Result<Emptiness, AffineError> {
        decide(self.sys.clone(), &mut DECIDE_FUEL.clone())
    }

    /// The rows of the constraints as `(row, is_eq)`, equalities first.
    pub fn rows(&self) -> impl Iterator<Item = (&Row, bool)> {
        self.sys
            .eqs
            .iter()
            .map(|r| (r, true))
            .chain(self.sys.ineqs.iter().map(|r| (r, false)))
    }

    /// `self ∧ ¬(row >= 0)` (`row` over params and dims only, no existentials).
    pub fn and_not(&self, row: &Row) -> Poly {
        let mut p = self.clone();
        let mut r: Row = row.iter().map(|x| -x).collect();
        r[0] -= 1;
        r.resize(1 + p.n_cols(), 0);
        p.sys.ineqs.push(r);
        p
    }

    /// `self ∧ (row >= 0)` (`row` over params and dims only).
    pub fn and_ge(&self, row: &Row) -> Poly {
        let mut p = self.clone();
        let mut r = row.clone();
        r.resize(1 + p.n_cols(), 0);
        p.sys.ineqs.push(r);
        p
    }

    /// `self \ b` as disjoint pieces (`b` without existentials), the pieces found empty dropped.
    pub fn subtract(&self, b: &Poly) -> Result<Vec<Poly>, AffineError> {
        debug_assert_eq!(b.n_exist, 0);
        let mut out = Vec::new();
        let mut cur = self.clone();
        let mut cons: Vec<Row> = Vec::new();
        for (r, eq) in b.rows() {
            cons.push(r.clone());
            if eq {
                cons.push(r.iter().map(|x| -x).collect());
            }
        }
        for c in cons {
            let piece = cur.and_not(&c);
            if piece.emptiness()? != Emptiness::Empty {
                out.push(piece);
            }
            cur = cur.and_ge(&c);
            if cur.emptiness()? == Emptiness::Empty {
                break;
            }
        }
        Ok(out)
    }
}
