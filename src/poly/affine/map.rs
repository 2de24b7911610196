//! Relations: [`BasicMap`] (a conjunction over `S[in..] -> T[out..]`) and [`Map`] (a union),
//! built from multi-affine accesses; reverse, composition (`apply_range`), domain and range
//! restriction, and the image / pre-image of sets. All exact by construction (composed-away
//! dimensions become existentials, eliminated afterwards only where that is exact).

use super::core::{Col, Poly};
use super::expr::Aff;
use super::set::{merge_params, BasicSet, Constraint, ConstraintKind, Set, SetSpace, Tuple};
use super::AffineError;

/// The space of a relation: parameters, input and output tuples. All names distinct (output
/// names that clash get primes: `h` → `h'`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MapSpace {
    /// Parameters (symbolic sizes).
    pub params: Vec<String>,
    /// Input dimensions.
    pub input: Tuple,
    /// Output dimensions.
    pub output: Tuple,
}

fn prime_clashes(taken: &[String], t: &Tuple) -> Tuple {
    let mut used: Vec<String> = taken.to_vec();
    let mut dims = Vec::new();
    for d in &t.dims {
        let mut n = d.clone();
        while used.contains(&n) {
            n.push('\'');
        }
        used.push(n.clone());
        dims.push(n);
    }
    Tuple {
        name: t.name.clone(),
        dims,
    }
}

impl MapSpace {
    /// A space; output names that repeat a parameter or input name get primes.
    pub fn new(params: &[String], input: Tuple, output: &Tuple) -> Result<MapSpace, AffineError> {
        SetSpace::new(
            &params.iter().map(String::as_str).collect::<Vec<_>>(),
            input.clone(),
        )?;
        let mut taken = params.to_vec();
        taken.extend(input.dims.iter().cloned());
        let output = prime_clashes(&taken, output);
        Ok(MapSpace {
            params: params.to_vec(),
            input,
            output,
        })
    }

    pub(crate) fn resolve(&self, n: &str) -> Option<Col> {
        if let Some(i) = self.input.dims.iter().position(|d| d == n) {
            return Some(Col::Dim(i));
        }
        if let Some(i) = self.output.dims.iter().position(|d| d == n) {
            return Some(Col::Dim(self.input.len() + i));
        }
        self.params.iter().position(|p| p == n).map(Col::Param)
    }

    fn domain_space(&self) -> SetSpace {
        SetSpace {
            params: self.params.clone(),
            tuple: self.input.clone(),
        }
    }

    fn range_space(&self) -> SetSpace {
        SetSpace {
            params: self.params.clone(),
            tuple: self.output.clone(),
        }
    }
}

/// A conjunction of constraints relating an input tuple to an output tuple.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BasicMap {
    pub(crate) space: MapSpace,
    /// Dimensions: input then output.
    pub(crate) poly: Poly,
}

impl BasicMap {
    /// The whole space.
    pub fn universe(space: MapSpace) -> BasicMap {
        let poly = Poly::universe(space.params.len(), space.input.len() + space.output.len());
        BasicMap { space, poly }
    }

    /// The relation defined by constraints over the space's names.
    pub fn from_constraints(space: MapSpace, cs: &[Constraint]) -> Result<BasicMap, AffineError> {
        let mut m = BasicMap::universe(space);
        for c in cs {
            let space = &m.space;
            m.poly
                .add_constraint(&c.aff, c.kind == ConstraintKind::Eq, &|n| space.resolve(n))?;
        }
        Ok(m)
    }

    /// The access `input[..] -> out_name[affs..]` (each output dimension equals its affine
    /// expression of the input dimensions and parameters); output dimensions are `o0, o1, ..`.
    pub fn from_multi_aff(
        params: &[String],
        input: Tuple,
        out_name: &str,
        affs: &[Aff],
    ) -> Result<BasicMap, AffineError> {
        let out_dims: Vec<String> = (0..affs.len()).map(|k| format!("o{k}")).collect();
        let output = Tuple {
            name: out_name.to_string(),
            dims: out_dims,
        };
        let space = MapSpace::new(params, input, &output)?;
        let cs = affs
            .iter()
            .zip(&space.output.dims)
            .map(|(a, o)| Constraint::eq(&Aff::var(o), a))
            .collect::<Result<Vec<_>, _>>()?;
        BasicMap::from_constraints(space, &cs)
    }

    /// The access of a region read: `input[..] -> out_name[index..]` from the region layer's
    /// index expressions ([`Aff::from_axis_expr`]; non-affine indices are errors).
    pub fn from_axis_exprs(
        params: &[String],
        input: Tuple,
        out_name: &str,
        index: &[crate::ir::axis::AxisExpr],
    ) -> Result<BasicMap, AffineError> {
        let affs = index
            .iter()
            .map(Aff::from_axis_expr)
            .collect::<Result<Vec<_>, _>>()?;
        BasicMap::from_multi_aff(params, input, out_name, &affs)
    }

    /// The space.
    pub fn space(&self) -> &MapSpace {
        &self.space
    }

    fn n_in(&self) -> usize {
        self.space.input.len()
    }

    fn n_out(&self) -> usize {
        self.space.output.len()
    }

    fn with_params(&self, params: &[String]) -> BasicMap {
        let pos: Vec<usize> = self
            .space
            .params
            .iter()
            .map(|p| params.iter().position(|q| q == p).unwrap_or(0))
            .collect();
        let mut space = self.space.clone();
        space.params = params.to_vec();
        BasicMap {
            space,
            poly: self.poly.align_params(params.len(), &pos),
        }
    }

    /// `T[out] -> S[in]`.
    pub fn reverse(&self) -> BasicMap {
        let (ni, no) = (self.n_in(), self.n_out());
        let perm: Vec<usize> = (ni..ni + no).chain(0..ni).collect();
        BasicMap {
            space: MapSpace {
                params: self.space.params.clone(),
                input: self.space.output.clone(),
                output: self.space.input.clone(),
            },
            poly: self.poly.permute_dims(&perm),
        }
    }

    /// The composition `self ; o` = `{ a -> c : ∃ b. (a, b) ∈ self ∧ (b, c) ∈ o }`.
    pub fn apply_range(&self, o: &BasicMap) -> Result<BasicMap, AffineError> {
        if self.n_out() != o.n_in() {
            return Err(AffineError::Arity {
                expected: self.n_out(),
                found: o.n_in(),
            });
        }
        let (params, _, _) = merge_params(&self.space.params, &o.space.params);
        let a = self.with_params(&params);
        let b = o.with_params(&params);
        let (na, nb, nc) = (a.n_in(), a.n_out(), b.n_out());
        let pa = a.poly.insert_dims(na + nb, nc);
        let pb = b.poly.insert_dims(0, na);
        let poly = pa.intersect(&pb).dims_to_exists(na, na + nb);
        let space = MapSpace::new(&params, a.space.input.clone(), &b.space.output)?;
        let mut m = BasicMap { space, poly };
        m.poly.tidy()?;
        Ok(m)
    }

    /// The input points related to some output point.
    pub fn domain(&self) -> BasicSet {
        let ni = self.n_in();
        BasicSet {
            space: self.space.domain_space(),
            poly: self.poly.dims_to_exists(ni, ni + self.n_out()),
        }
    }

    /// The output points related to some input point.
    pub fn range(&self) -> BasicSet {
        self.reverse().domain()
    }

    /// The pairs whose input lies in `s` (parameters merged).
    pub fn intersect_domain(&self, s: &BasicSet) -> Result<BasicMap, AffineError> {
        self.intersect_side(s, true)
    }

    /// The pairs whose output lies in `s`.
    pub fn intersect_range(&self, s: &BasicSet) -> Result<BasicMap, AffineError> {
        self.intersect_side(s, false)
    }

    fn intersect_side(&self, s: &BasicSet, input: bool) -> Result<BasicMap, AffineError> {
        let want = if input { self.n_in() } else { self.n_out() };
        if s.space.tuple.len() != want {
            return Err(AffineError::Arity {
                expected: want,
                found: s.space.tuple.len(),
            });
        }
        let (params, _, _) = merge_params(&self.space.params, &s.space.params);
        let m = self.with_params(&params);
        let s = s.with_params(&params)?;
        let lifted = if input {
            s.poly.insert_dims(m.n_in(), m.n_out())
        } else {
            s.poly.insert_dims(0, m.n_in())
        };
        Ok(BasicMap {
            space: m.space.clone(),
            poly: m.poly.intersect(&lifted),
        })
    }

    /// The map as a set over the concatenated tuple `[in.., out..]` (named `in_out`), for
    /// bounds and emptiness queries on a relation.
    pub fn wrap(&self) -> BasicSet {
        let mut dims = self.space.input.dims.clone();
        dims.extend(self.space.output.dims.iter().cloned());
        BasicSet {
            space: SetSpace {
                params: self.space.params.clone(),
                tuple: Tuple {
                    name: format!("{}_{}", self.space.input.name, self.space.output.name),
                    dims,
                },
            },
            poly: self.poly.clone(),
        }
    }
}

/// A finite union of [`BasicMap`]s of one space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Map {
    pub(crate) space: MapSpace,
    pub(crate) pieces: Vec<BasicMap>,
}

impl From<BasicMap> for Map {
    fn from(b: BasicMap) -> Map {
        Map {
            space: b.space.clone(),
            pieces: vec![b],
        }
    }
}

impl Map {
    /// The space.
    pub fn space(&self) -> &MapSpace {
        &self.space
    }

    /// The pieces.
    pub fn pieces(&self) -> &[BasicMap] {
        &self.pieces
    }

    /// A union of basic maps of the same arities (parameters merged; the first piece's names).
    pub fn from_pieces(pieces: Vec<BasicMap>) -> Result<Map, AffineError> {
        let Some(first) = pieces.first() else {
            return Err(AffineError::Unsupported(
                "a map needs at least one piece".into(),
            ));
        };
        Map::collect(first.space.clone(), pieces)
    }

    /// The union of `pieces`, of space `hint` when there are none.
    fn collect(hint: MapSpace, pieces: Vec<BasicMap>) -> Result<Map, AffineError> {
        let Some(first) = pieces.first() else {
            return Ok(Map {
                space: hint,
                pieces,
            });
        };
        let mut params = first.space.params.clone();
        for p in &pieces {
            params = merge_params(&params, &p.space.params).0;
            if (p.n_in(), p.n_out()) != (first.n_in(), first.n_out()) {
                return Err(AffineError::SpaceMismatch(format!(
                    "{:?} vs {:?}",
                    p.space, first.space
                )));
            }
        }
        let mut space = first.space.clone();
        space.params = params.clone();
        let pieces = pieces
            .iter()
            .map(|p| {
                let mut p = p.with_params(&params);
                p.space = space.clone();
                p
            })
            .collect();
        Ok(Map { space, pieces })
    }

    /// The reverse relation.
    pub fn reverse(&self) -> Map {
        Map {
            space: self.pieces.first().map_or_else(
                || MapSpace {
                    params: self.space.params.clone(),
                    input: self.space.output.clone(),
                    output: self.space.input.clone(),
                },
                |p| p.reverse().space,
            ),
            pieces: self.pieces.iter().map(BasicMap::reverse).collect(),
        }
    }

    /// The composition `self ; o` (pairwise over pieces).
    pub fn apply_range(&self, o: &Map) -> Result<Map, AffineError> {
        let mut out = Vec::new();
        for a in &self.pieces {
            for b in &o.pieces {
                out.push(a.apply_range(b)?);
            }
        }
        let hint = match (self.pieces.first(), o.pieces.first()) {
            (Some(a), Some(b)) => {
                MapSpace::new(&a.space.params, a.space.input.clone(), &b.space.output)?
            }
            _ => MapSpace::new(
                &self.space.params,
                self.space.input.clone(),
                &o.space.output,
            )?,
        };
        Map::collect(hint, out)
    }

    /// The pairs whose input lies in `s`.
    pub fn intersect_domain(&self, s: &Set) -> Result<Map, AffineError> {
        self.intersect_set(s, true)
    }

    /// The pairs whose output lies in `s`.
    pub fn intersect_range(&self, s: &Set) -> Result<Map, AffineError> {
        self.intersect_set(s, false)
    }

    fn intersect_set(&self, s: &Set, input: bool) -> Result<Map, AffineError> {
        let mut out = Vec::new();
        for m in &self.pieces {
            for p in &s.pieces {
                out.push(if input {
                    m.intersect_domain(p)?
                } else {
                    m.intersect_range(p)?
                });
            }
        }
        Map::collect(self.space.clone(), out)
    }

    fn to_set(
        &self,
        space: SetSpace,
        f: &dyn Fn(&BasicMap) -> BasicSet,
    ) -> Result<Set, AffineError> {
        let mut pieces = Vec::new();
        for m in &self.pieces {
            if let Some(b) = f(m).tidy()? {
                pieces.push(b);
            }
        }
        Ok(Set { space, pieces })
    }

    /// The input points related to some output point.
    pub fn domain(&self) -> Result<Set, AffineError> {
        self.to_set(self.space.domain_space(), &BasicMap::domain)
    }

    /// The output points related to some input point.
    pub fn range(&self) -> Result<Set, AffineError> {
        self.to_set(self.space.range_space(), &BasicMap::range)
    }

    /// The relation as a set over `[in.., out..]` (see [`BasicMap::wrap`]).
    pub fn wrap(&self) -> Set {
        let pieces: Vec<BasicSet> = self.pieces.iter().map(BasicMap::wrap).collect();
        let space = pieces.first().map_or_else(
            || BasicMap::universe(self.space.clone()).wrap().space,
            |p| p.space.clone(),
        );
        Set { space, pieces }
    }
}

impl Set {
    /// The image `{ m(x) : x ∈ self }` (exact; eliminated input dimensions that do not go
    /// exactly stay existential).
    pub fn apply(&self, m: &Map) -> Result<Set, AffineError> {
        m.intersect_domain(self)?.range()
    }

    /// The pre-image `{ x : m(x) ∩ self ≠ ∅ }` (for an access map: the iterations that touch
    /// `self`).
    pub fn preimage(&self, m: &Map) -> Result<Set, AffineError> {
        m.intersect_range(self)?.domain()
    }
}

#[cfg(test)]
mod tests {
    use crate::poly::affine::isl::{parse_map, parse_set};
    use crate::poly::affine::Answer;

    #[test]
    fn image_of_strided_window() {
        let s = parse_set("{ S[h, rh] : 0 <= h < 4 and 0 <= rh < 3 }").unwrap();
        let m = parse_map("{ S[h, rh] -> T[2h + rh] }").unwrap();
        let img = s.apply(&m).unwrap();
        let want = parse_set("{ T[x] : 0 <= x <= 8 }").unwrap();
        assert_eq!(img.is_equal(&want).unwrap(), Answer::Yes);
        // Stride 3 with a kernel of 2 leaves holes: 2 is not read.
        let m3 = parse_map("{ S[h, rh] -> T[3h + rh] }").unwrap();
        let s2 = parse_set("{ S[h, rh] : 0 <= h < 4 and 0 <= rh < 2 }").unwrap();
        let img = s2.apply(&m3).unwrap();
        let hole = parse_set("{ T[x] : x = 2 }").unwrap();
        assert_eq!(hole.is_subset(&img).unwrap(), Answer::No);
        let hit = parse_set("{ T[x] : x = 4 }").unwrap();
        assert_eq!(hit.is_subset(&img).unwrap(), Answer::Yes);
    }

    #[test]
    fn access_from_axis_exprs() {
        use crate::ir::axis::AxisExpr as A;
        let idx = vec![
            A::Name("n".into()),
            A::Add(vec![
                A::product(A::Const(2), A::Name("h".into())),
                A::Name("rh".into()),
                A::Const(-1),
            ]),
        ];
        let t = super::Tuple::new("S", &["n", "h", "rh"]);
        let m = super::BasicMap::from_axis_exprs(&["H".into()], t.clone(), "In", &idx).unwrap();
        assert_eq!(
            m.to_string(),
            "[H] -> { S[n, h, rh] -> In[n, 2*h + rh - 1] }"
        );
        let bad = vec![A::product(A::Name("h".into()), A::Name("rh".into()))];
        assert!(super::BasicMap::from_axis_exprs(&[], t, "In", &bad).is_err());
    }

    #[test]
    fn reverse_and_compose() {
        let w = parse_map("[N] -> { A[i] -> X[i] : 0 <= i < N }").unwrap();
        let r = parse_map("[N] -> { B[j] -> X[j + 1] : 0 <= j < N - 1 }").unwrap();
        let dep = w.apply_range(&r.reverse()).unwrap();
        let want = parse_map("[N] -> { A[i] -> B[j] : i = j + 1 and 0 <= j < N - 1 }").unwrap();
        assert_eq!(dep.wrap().is_equal(&want.wrap()).unwrap(), Answer::Yes);
        let pre = parse_set("[N] -> { X[x] : x = 0 }")
            .unwrap()
            .preimage(&r)
            .unwrap();
        assert_eq!(pre.is_empty().unwrap(), Answer::Yes);
    }
}
