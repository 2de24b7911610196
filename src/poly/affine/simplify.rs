//! Simplification of what pad / slice / reshape produce: redundant-constraint removal, gist
//! against a context (parameter assumptions such as `H >= 1`), and coalescing of the pieces of
//! a union (contained pieces dropped; two pieces replaced by their common hull when the hull is
//! covered by them), under a [`SimplifyBudget`].
//!
//! A constraint is dropped only when its redundancy is decided exactly (emptiness `Empty`);
//! undecided cases keep it, so results are always equal to the input (on the context).

use super::core::Poly;
use super::linear::{Emptiness, Row};
use super::set::{BasicSet, Set};
use super::{AffineError, SimplifyBudget};

/// The context as a poly over `target`'s columns (parameters aligned, dimensions inserted when
/// the context is parameter-only). Its parameters must be among `target`'s.
fn lift_context(ctx: &BasicSet, target: &BasicSet) -> Result<Poly, AffineError> {
    let c = ctx.with_params(&target.space.params)?;
    let nd = target.space.tuple.len();
    if c.space.tuple.is_empty() && nd > 0 {
        Ok(c.poly.insert_dims(0, nd))
    } else if c.space.tuple.len() == nd {
        Ok(c.poly)
    } else {
        Err(AffineError::SpaceMismatch(format!(
            "context {:?} for {:?}",
            c.space.tuple, target.space.tuple
        )))
    }
}

/// The inequality rows of a poly, equalities split into two.
fn ineq_rows(p: &Poly) -> Vec<Row> {
    let mut v = Vec::new();
    for (r, eq) in p.rows() {
        v.push(r.clone());
        if eq {
            v.push(r.iter().map(|x| -x).collect());
        }
    }
    v
}

fn with_rows(p: &Poly, rows: &[Row]) -> Poly {
    let mut q = p.clone();
    q.sys.eqs.clear();
    q.sys.ineqs = rows.to_vec();
    q.sys.simplify();
    q
}

/// True when `base ∧ ¬r` is exactly empty (`r` over `base`'s leading columns).
fn implied(base: &Poly, r: &Row) -> Result<bool, AffineError> {
    Ok(base.and_not(r).emptiness()? == Emptiness::Empty)
}

impl BasicSet {
    /// The same set without the constraints implied by the others (and by `ctx`, a set over the
    /// parameters or over this space, when given: then the result equals `self` on `ctx` —
    /// isl's `gist`).
    pub fn gist(&self, ctx: Option<&BasicSet>) -> Result<BasicSet, AffineError> {
        let mut b = match self.clone().tidy()? {
            Some(b) => b,
            None => return Ok(self.clone()),
        };
        let ctx_poly = ctx.map(|c| lift_context(c, &b)).transpose()?;
        let mut rows = ineq_rows(&b.poly);
        let mut i = 0;
        while i < rows.len() {
            let others: Vec<Row> = rows
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, r)| r.clone())
                .collect();
            let mut base = with_rows(&b.poly, &others);
            if let Some(c) = &ctx_poly {
                base = base.intersect(c);
            }
            let mut r = rows[i].clone();
            r.resize(1 + base.n_cols(), 0);
            if implied(&base, &r)? {
                rows.remove(i);
            } else {
                i += 1;
            }
        }
        b.poly = with_rows(&b.poly, &rows);
        Ok(b)
    }

    /// The same set without redundant constraints.
    pub fn remove_redundancies(&self) -> Result<BasicSet, AffineError> {
        self.gist(None)
    }
}

impl Set {
    /// Removes redundant constraints of every piece, relative to `ctx`.
    pub fn gist(&self, ctx: Option<&BasicSet>) -> Result<Set, AffineError> {
        let mut out = self.clone();
        for p in &mut out.pieces {
            *p = p.gist(ctx)?;
        }
        Ok(out)
    }

    /// Merges pieces: drops empty pieces and pieces contained in another, and replaces two
    /// pieces by their common hull (the constraints of each that hold on the other) when the
    /// hull is covered by the two. With `ctx` the checks hold under the context (the result
    /// equals `self` where `ctx` holds), e.g. the three pieces of a padded domain
    /// `0 <= i < P`, `P <= i < P + H`, `P + H <= i < 2P + H` become `0 <= i < 2P + H` once
    /// `ctx` says `H >= 1` and `P >= 0`. Pieces with existentials are only dropped when
    /// contained. Fails with [`AffineError::PiecewiseOverBudget`] when more than
    /// `budget.max_pieces` pieces remain.
    pub fn coalesce(
        &self,
        ctx: Option<&BasicSet>,
        budget: &SimplifyBudget,
    ) -> Result<Set, AffineError> {
        let mut pieces: Vec<BasicSet> = Vec::new();
        for p in &self.pieces {
            let Some(p) = p.clone().tidy()? else { continue };
            let mut under = p.clone();
            if let Some(c) = ctx {
                under.poly = under.poly.intersect(&lift_context(c, &p)?);
            }
            if under.poly.emptiness()? != Emptiness::Empty {
                pieces.push(p.gist(ctx)?);
            }
        }
        let restrict = |p: &BasicSet| -> Result<Set, AffineError> {
            let mut q = p.clone();
            if let Some(c) = ctx {
                q.poly = q.poly.intersect(&lift_context(c, p)?);
            }
            Ok(Set::from(q))
        };
        let mut changed = true;
        while changed {
            changed = false;
            'pairs: for i in 0..pieces.len() {
                for j in 0..pieces.len() {
                    if i == j {
                        continue;
                    }
                    let (a, b) = (&pieces[i], &pieces[j]);
                    if restrict(a)?.is_subset(&Set::from(b.clone()))? == super::Answer::Yes {
                        pieces.remove(i);
                        changed = true;
                        break 'pairs;
                    }
                    if i < j && a.n_exists() == 0 && b.n_exists() == 0 {
                        if let Some(h) = hull_if_covered(a, b, ctx)? {
                            pieces[i] = h;
                            pieces.remove(j);
                            changed = true;
                            break 'pairs;
                        }
                    }
                }
            }
        }
        if pieces.len() > budget.max_pieces {
            return Err(AffineError::PiecewiseOverBudget {
                pieces: pieces.len(),
                budget: budget.max_pieces,
            });
        }
        Ok(Set {
            space: self.space.clone(),
            pieces,
        })
    }
}

/// The constraints of `a` valid on `b` and of `b` valid on `a` (under `ctx`), when their
/// conjunction is covered by `a ∪ b` (under `ctx`).
fn hull_if_covered(
    a: &BasicSet,
    b: &BasicSet,
    ctx: Option<&BasicSet>,
) -> Result<Option<BasicSet>, AffineError> {
    let under = |p: &BasicSet| -> Result<Poly, AffineError> {
        Ok(match ctx {
            Some(c) => p.poly.intersect(&lift_context(c, p)?),
            None => p.poly.clone(),
        })
    };
    let (ua, ub) = (under(a)?, under(b)?);
    let mut rows = Vec::new();
    for r in ineq_rows(&a.poly) {
        if implied(&ub, &r)? {
            rows.push(r);
        }
    }
    for r in ineq_rows(&b.poly) {
        if implied(&ua, &r)? && !rows.contains(&r) {
            rows.push(r);
        }
    }
    let h = BasicSet {
        space: a.space.clone(),
        poly: with_rows(&a.poly, &rows),
    };
    let mut hu = h.clone();
    hu.poly = under(&h)?;
    let union = Set::from(a.clone()).union(&Set::from(b.clone()))?;
    Ok((Set::from(hu).is_subset(&union)? == super::Answer::Yes).then_some(h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poly::affine::isl::parse_set;
    use crate::poly::affine::Answer;

    #[test]
    fn redundant_constraints_go() {
        let s = parse_set("[N] -> { S[i] : 0 <= i < N and i >= -5 and i < N + 7 }").unwrap();
        let g = s.gist(None).unwrap();
        assert_eq!(g.to_string(), "[N] -> { S[i] : 0 <= i < N }");
        let ctx = parse_set("[N] -> { [] : N <= 8 }").unwrap().pieces()[0].clone();
        let s = parse_set("[N] -> { S[i] : 0 <= i < N and i < 10 }").unwrap();
        assert_eq!(
            s.gist(Some(&ctx)).unwrap().to_string(),
            "[N] -> { S[i] : 0 <= i < N }"
        );
    }

    #[test]
    fn padded_domain_coalesces_under_context() {
        let s = parse_set(
            "[P, H] -> { S[i] : 0 <= i < P; S[i] : P <= i < P + H; S[i] : P + H <= i < 2P + H }",
        )
        .unwrap();
        let budget = SimplifyBudget::default();
        // Without assumptions the pieces stay apart (H may be negative).
        assert_eq!(s.coalesce(None, &budget).unwrap().pieces().len(), 3);
        let ctx = parse_set("[P, H] -> { [] : H >= 1 and P >= 0 }")
            .unwrap()
            .pieces()[0]
            .clone();
        let c = s.coalesce(Some(&ctx), &budget).unwrap();
        assert_eq!(c.to_string(), "[P, H] -> { S[i] : 0 <= i < H + 2*P }");
        let tight = SimplifyBudget { max_pieces: 2 };
        assert!(matches!(
            s.coalesce(None, &tight),
            Err(AffineError::PiecewiseOverBudget {
                pieces: 3,
                budget: 2
            })
        ));
    }

    #[test]
    fn contained_pieces_are_dropped_but_disjoint_ones_stay() {
        let s =
            parse_set("{ S[i] : 0 <= i < 10; S[i] : 2 <= i < 5; S[i] : 20 <= i < 30 }").unwrap();
        let c = s.coalesce(None, &SimplifyBudget::default()).unwrap();
        assert_eq!(c.pieces().len(), 2);
        assert_eq!(c.is_equal(&s).unwrap(), Answer::Yes);
    }
}
