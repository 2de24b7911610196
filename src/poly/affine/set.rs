//! Constraints, named spaces, [`BasicSet`] (a conjunction) and [`Set`] (a union of basic sets:
//! a piecewise domain), with intersection, union, subtraction, emptiness and containment.

use super::core::{Col, Poly};
use super::expr::Aff;
use super::linear::Emptiness;
use super::{AffineError, Answer, SimplifyBudget};

/// A named tuple `S[i, j, ..]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tuple {
    /// The statement or tensor name (may be empty: `[i]`).
    pub name: String,
    /// The dimension names, distinct.
    pub dims: Vec<String>,
}

impl Tuple {
    /// `name[dims..]`.
    pub fn new(name: &str, dims: &[&str]) -> Tuple {
        Tuple {
            name: name.to_string(),
            dims: dims.iter().map(|d| d.to_string()).collect(),
        }
    }

    /// The number of dimensions.
    pub fn len(&self) -> usize {
        self.dims.len()
    }

    /// True for a zero-dimensional tuple.
    pub fn is_empty(&self) -> bool {
        self.dims.is_empty()
    }
}

/// The kind of a [`Constraint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConstraintKind {
    /// `aff = 0`.
    Eq,
    /// `aff >= 0`.
    Ge,
}

/// `aff = 0` or `aff >= 0`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Constraint {
    /// The affine expression.
    pub aff: Aff,
    /// `= 0` or `>= 0`.
    pub kind: ConstraintKind,
}

impl Constraint {
    /// `a >= b`.
    pub fn ge(a: &Aff, b: &Aff) -> Result<Constraint, AffineError> {
        Ok(Constraint {
            aff: a.sub(b)?,
            kind: ConstraintKind::Ge,
        })
    }

    /// `a <= b`.
    pub fn le(a: &Aff, b: &Aff) -> Result<Constraint, AffineError> {
        Constraint::ge(b, a)
    }

    /// `a < b`.
    pub fn lt(a: &Aff, b: &Aff) -> Result<Constraint, AffineError> {
        Constraint::ge(&b.add_const(-1)?, a)
    }

    /// `a = b`.
    pub fn eq(a: &Aff, b: &Aff) -> Result<Constraint, AffineError> {
        Ok(Constraint {
            aff: a.sub(b)?,
            kind: ConstraintKind::Eq,
        })
    }
}

/// The space of a set: its parameters and its tuple. Names are distinct across both.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SetSpace {
    /// Parameters (symbolic sizes).
    pub params: Vec<String>,
    /// The set's dimensions.
    pub tuple: Tuple,
}

fn check_distinct<'a>(names: impl Iterator<Item = &'a String>) -> Result<(), AffineError> {
    let mut seen = std::collections::BTreeSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(AffineError::DuplicateName(n.clone()));
        }
    }
    Ok(())
}

impl SetSpace {
    /// Checks that the names are distinct.
    pub fn new(params: &[&str], tuple: Tuple) -> Result<SetSpace, AffineError> {
        let s = SetSpace {
            params: params.iter().map(|p| p.to_string()).collect(),
            tuple,
        };
        check_distinct(s.params.iter().chain(&s.tuple.dims))?;
        Ok(s)
    }

    pub(crate) fn resolve(&self, n: &str) -> Option<Col> {
        if let Some(i) = self.tuple.dims.iter().position(|d| d == n) {
            return Some(Col::Dim(i));
        }
        self.params.iter().position(|p| p == n).map(Col::Param)
    }
}

/// Merged parameter list of `a` and `b` (`a`'s order, then `b`'s new names) and the new
/// positions of `b`'s parameters.
pub(crate) fn merge_params(a: &[String], b: &[String]) -> (Vec<String>, Vec<usize>, Vec<usize>) {
    let mut all = a.to_vec();
    let mut pos_b = Vec::new();
    for p in b {
        match all.iter().position(|q| q == p) {
            Some(i) => pos_b.push(i),
            None => {
                pos_b.push(all.len());
                all.push(p.clone());
            }
        }
    }
    ((all), (0..a.len()).collect(), pos_b)
}

/// A conjunction of affine constraints over a [`SetSpace`], possibly with existential variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BasicSet {
    pub(crate) space: SetSpace,
    pub(crate) poly: Poly,
}

impl BasicSet {
    /// All points of the space.
    pub fn universe(space: SetSpace) -> BasicSet {
        let poly = Poly::universe(space.params.len(), space.tuple.len());
        BasicSet { space, poly }
    }

    /// The points satisfying every constraint (names: the space's parameters and dimensions).
    pub fn from_constraints(space: SetSpace, cs: &[Constraint]) -> Result<BasicSet, AffineError> {
        let mut s = BasicSet::universe(space);
        for c in cs {
            s.add_constraint(c)?;
        }
        Ok(s)
    }

    /// The box `lo_k <= x_k < hi_k` (half-open, like loop extents).
    pub fn from_ranges(space: SetSpace, ranges: &[(Aff, Aff)]) -> Result<BasicSet, AffineError> {
        if ranges.len() != space.tuple.len() {
            return Err(AffineError::Arity {
                expected: space.tuple.len(),
                found: ranges.len(),
            });
        }
        let mut cs = Vec::new();
        for (d, (lo, hi)) in space.tuple.dims.iter().zip(ranges) {
            let x = Aff::var(d);
            cs.push(Constraint::ge(&x, lo)?);
            cs.push(Constraint::lt(&x, hi)?);
        }
        BasicSet::from_constraints(space, &cs)
    }

    /// Adds one constraint.
    pub fn add_constraint(&mut self, c: &Constraint) -> Result<(), AffineError> {
        let space = &self.space;
        self.poly
            .add_constraint(&c.aff, c.kind == ConstraintKind::Eq, &|n| space.resolve(n))
    }

    /// The space.
    pub fn space(&self) -> &SetSpace {
        &self.space
    }

    /// The number of existential variables.
    pub fn n_exists(&self) -> usize {
        self.poly.n_exist
    }

    /// Whether the set has no integer point for any parameter value.
    pub fn is_empty(&self) -> Result<Answer, AffineError> {
        Ok(Answer::from_emptiness(self.poly.emptiness()?))
    }

    /// The conjunction (parameters merged).
    pub fn intersect(&self, o: &BasicSet) -> Result<BasicSet, AffineError> {
        if self.space.tuple.len() != o.space.tuple.len() {
            return Err(AffineError::SpaceMismatch(format!(
                "{:?} vs {:?}",
                self.space.tuple, o.space.tuple
            )));
        }
        let (params, pa, pb) = merge_params(&self.space.params, &o.space.params);
        let a = self.poly.align_params(params.len(), &pa);
        let b = o.poly.align_params(params.len(), &pb);
        Ok(BasicSet {
            space: SetSpace {
                params,
                tuple: self.space.tuple.clone(),
            },
            poly: a.intersect(&b),
        })
    }

    /// Over a larger parameter list (`params` must contain this set's).
    pub(crate) fn with_params(&self, params: &[String]) -> Result<BasicSet, AffineError> {
        let pos = self
            .space
            .params
            .iter()
            .map(|p| {
                params
                    .iter()
                    .position(|q| q == p)
                    .ok_or_else(|| AffineError::UnknownName(p.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(BasicSet {
            space: SetSpace {
                params: params.to_vec(),
                tuple: self.space.tuple.clone(),
            },
            poly: self.poly.align_params(params.len(), &pos),
        })
    }

    /// Eliminates the existentials that go exactly; `None` when found empty.
    pub(crate) fn tidy(mut self) -> Result<Option<BasicSet>, AffineError> {
        Ok(self.poly.tidy()?.then_some(self))
    }

    /// The set over the parameters only (the parameter values where it is non-empty), exact
    /// by construction (dimensions become existentials).
    pub fn params_domain(&self) -> BasicSet {
        BasicSet {
            space: SetSpace {
                params: self.space.params.clone(),
                tuple: Tuple::new("", &[]),
            },
            poly: self.poly.dims_to_exists(0, self.poly.n_dim),
        }
    }
}

/// A finite union of [`BasicSet`]s of one space (a piecewise domain).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set {
    pub(crate) space: SetSpace,
    pub(crate) pieces: Vec<BasicSet>,
}

impl From<BasicSet> for Set {
    fn from(b: BasicSet) -> Set {
        Set {
            space: b.space.clone(),
            pieces: vec![b],
        }
    }
}

impl Set {
    /// The empty set of a space.
    pub fn empty(space: SetSpace) -> Set {
        Set {
            space,
            pieces: Vec::new(),
        }
    }

    /// The union of basic sets of the same tuple arity (parameters merged).
    pub fn from_pieces(space: SetSpace, pieces: Vec<BasicSet>) -> Result<Set, AffineError> {
        let mut s = Set::empty(space);
        for p in pieces {
            s = s.union(&Set::from(p))?;
        }
        Ok(s)
    }

    /// The space.
    pub fn space(&self) -> &SetSpace {
        &self.space
    }

    /// The pieces.
    pub fn pieces(&self) -> &[BasicSet] {
        &self.pieces
    }

    fn aligned(&self, o: &Set) -> Result<(Set, Set), AffineError> {
        if self.space.tuple.len() != o.space.tuple.len() {
            return Err(AffineError::SpaceMismatch(format!(
                "{:?} vs {:?}",
                self.space.tuple, o.space.tuple
            )));
        }
        let (params, _, _) = merge_params(&self.space.params, &o.space.params);
        let lift = |s: &Set| -> Result<Set, AffineError> {
            Ok(Set {
                space: SetSpace {
                    params: params.clone(),
                    tuple: s.space.tuple.clone(),
                },
                pieces: s
                    .pieces
                    .iter()
                    .map(|p| {
                        let mut p = p.with_params(&params)?;
                        p.space.tuple = self.space.tuple.clone();
                        Ok(p)
                    })
                    .collect::<Result<_, AffineError>>()?,
            })
        };
        Ok((lift(self)?, lift(o)?))
    }

    /// `self ∪ o` (pieces concatenated; see `coalesce` to merge them).
    pub fn union(&self, o: &Set) -> Result<Set, AffineError> {
        let (mut a, b) = self.aligned(o)?;
        a.pieces.extend(b.pieces);
        Ok(a)
    }

    /// `self ∩ o` (pairwise; pieces found empty dropped).
    pub fn intersect(&self, o: &Set) -> Result<Set, AffineError> {
        let (a, b) = self.aligned(o)?;
        let mut pieces = Vec::new();
        for p in &a.pieces {
            for q in &b.pieces {
                if let Some(r) = p.intersect(q)?.tidy()? {
                    if r.poly.emptiness()? != Emptiness::Empty {
                        pieces.push(r);
                    }
                }
            }
        }
        Ok(Set {
            space: a.space,
            pieces,
        })
    }

    /// `self \ o`, exact. Every piece of `o` must be free of existentials once those that go
    /// exactly are eliminated, or have existentials with small constant ranges (split on
    /// their values); else [`AffineError::Unsupported`] (the complement of a congruence is not
    /// a conjunction). Fails with [`AffineError::PiecewiseOverBudget`] when
    /// the result exceeds `budget.max_pieces`.
    pub fn subtract(&self, o: &Set, budget: &SimplifyBudget) -> Result<Set, AffineError> {
        let (a, b) = self.aligned(o)?;
        let mut cur: Vec<BasicSet> = a.pieces.clone();
        for q in &b.pieces {
            let Some(q) = q.clone().tidy()? else {
                continue;
            };
            let parts = if q.poly.n_exist > 0 {
                q.poly.expand_exists(budget.max_pieces)?.ok_or_else(|| {
                    AffineError::Unsupported(
                        "subtracting a set whose existentials neither eliminate exactly nor \
                         have small constant ranges"
                            .into(),
                    )
                })?
            } else {
                vec![q.poly.clone()]
            };
            for part in parts {
                let mut next = Vec::new();
                for p in &cur {
                    for poly in p.poly.subtract(&part)? {
                        next.push(BasicSet {
                            space: a.space.clone(),
                            poly,
                        });
                    }
                    if next.len() > budget.max_pieces {
                        return Err(AffineError::PiecewiseOverBudget {
                            pieces: next.len(),
                            budget: budget.max_pieces,
                        });
                    }
                }
                cur = next;
            }
        }
        Ok(Set {
            space: a.space,
            pieces: cur,
        })
    }

    /// Whether the set has no point (for any parameter value).
    pub fn is_empty(&self) -> Result<Answer, AffineError> {
        let mut unknown = false;
        for p in &self.pieces {
            match p.poly.emptiness()? {
                Emptiness::NonEmpty => return Ok(Answer::No),
                Emptiness::Unknown => unknown = true,
                Emptiness::Empty => {}
            }
        }
        Ok(if unknown {
            Answer::Unknown
        } else {
            Answer::Yes
        })
    }

    /// Whether `self ⊆ o` (via `self \ o = ∅`). `Unknown` when an emptiness check is
    /// undecided or `o` has existentials that do not eliminate exactly.
    pub fn is_subset(&self, o: &Set) -> Result<Answer, AffineError> {
        match self.subtract(o, &SimplifyBudget::default()) {
            Ok(d) => d.is_empty(),
            Err(AffineError::Unsupported(_)) | Err(AffineError::PiecewiseOverBudget { .. }) => {
                Ok(Answer::Unknown)
            }
            Err(e) => Err(e),
        }
    }

    /// Whether `self = o` (both containments).
    pub fn is_equal(&self, o: &Set) -> Result<Answer, AffineError> {
        Ok(self.is_subset(o)?.and(o.is_subset(self)?))
    }

    /// The parameter values where the set is non-empty (dimensions made existential).
    pub fn params_domain(&self) -> Set {
        Set {
            space: SetSpace {
                params: self.space.params.clone(),
                tuple: Tuple::new("", &[]),
            },
            pieces: self.pieces.iter().map(|p| p.params_domain()).collect(),
        }
    }

    /// Adds a constraint to every piece.
    pub fn add_constraint(&mut self, c: &Constraint) -> Result<(), AffineError> {
        for p in &mut self.pieces {
            p.add_constraint(c)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poly::affine::isl::parse_set;

    fn set(s: &str) -> Set {
        parse_set(s).unwrap()
    }

    #[test]
    fn emptiness_of_boxes_and_strides() {
        assert_eq!(
            set("[N] -> { S[i] : 0 <= i < N }").is_empty().unwrap(),
            Answer::No
        );
        assert_eq!(
            set("{ S[i] : 0 <= i and i < 0 }").is_empty().unwrap(),
            Answer::Yes
        );
        // The even numbers in [1, 1] are none.
        let s = set("{ S[i] : exists (e0 : i = 2e0) and 1 <= i <= 1 }");
        assert_eq!(s.is_empty().unwrap(), Answer::Yes);
        let s = set("[N] -> { S[i] : 0 <= i < N and N <= 0 }");
        assert_eq!(s.is_empty().unwrap(), Answer::Yes);
    }

    #[test]
    fn containment_positive_and_negative() {
        let a = set("[N] -> { S[i, j] : 0 <= i < N and 0 <= j < 4 }");
        let b = set("[N] -> { S[i, j] : 0 <= i < N + 1 and 0 <= j < 8 }");
        assert_eq!(a.is_subset(&b).unwrap(), Answer::Yes);
        assert_eq!(b.is_subset(&a).unwrap(), Answer::No);
        assert_eq!(a.is_equal(&a).unwrap(), Answer::Yes);
        // A union covering a box.
        let u = set("[N] -> { S[i] : 0 <= i < 4; S[i] : 4 <= i < N }");
        let bx = set("[N] -> { S[i] : 0 <= i < N }");
        assert_eq!(bx.is_subset(&u).unwrap(), Answer::Yes);
        assert_eq!(u.is_subset(&bx).unwrap(), Answer::No); // N < 4 leaves [N, 4) out
    }

    #[test]
    fn overflow_is_an_error_not_a_panic() {
        let big = i64::MAX / 2 + 1;
        let r = parse_set(&format!("{{ S[i] : {big}*i >= {big} + {big} }}"));
        assert_eq!(r.unwrap_err(), AffineError::Overflow);
        let r = parse_set(&format!("{{ S[i, j] : {big}*i - j >= 0 and j >= {big} }}"));
        assert_eq!(r.unwrap_err(), AffineError::Overflow);
        // Elimination multiplies coefficients: an error or an answer, never a panic.
        let k = 1i64 << 40;
        let s = parse_set(&format!(
            "{{ S[i, j, l] : {k}*i - {k}*j >= 1 and {k}*j - {k}*l >= 1 and {k}*l - {}*i >= 3 }}",
            k - 1
        ))
        .unwrap();
        let _ = s.is_empty();
    }

    #[test]
    fn subtract_respects_budget() {
        let a = set("{ S[i, j, k] : 0 <= i, j, k < 10 }");
        let b = set("{ S[i, j, k] : 1 <= i, j, k < 9 }");
        let tight = SimplifyBudget { max_pieces: 2 };
        assert!(matches!(
            a.subtract(&b, &tight),
            Err(AffineError::PiecewiseOverBudget { .. })
        ));
        let d = a.subtract(&b, &SimplifyBudget::default()).unwrap();
        assert_eq!(d.pieces().len(), 6);
    }
}
