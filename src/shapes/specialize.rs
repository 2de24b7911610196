//! Specialization of a graph to a shape cluster: every clustered symbol `T` whose divisibility
//! class is `d > 1` is rewritten as `d*T_d`, a new symbol `T_d = T / d`, in every tensor shape and
//! every size-valued attribute (`Reshape`/`Expand` shapes, `Slice` bounds). The sizes stay
//! symbolic, so the optimized program is valid for every binding of the cluster (the runtime binds
//! `T_d = T / d`, [`Specialization::bind`]), but `Dim::div_exact` can now prove that `8*T_8` is a
//! multiple of 4 (vector widths, tile divisibility): the "runtime specialization" of seed 003,
//! with the divisibility as the specialized fact instead of the value.
//!
//! Assumptions: every symbol is a non-negative size (as `crate::ir::dim` assumes), so
//! substituting `d*T_d` into `floordiv`/`min`/`max` atoms and re-simplifying is exact; the
//! frontend's normal form keeps sizes only in tensor shapes and in the `Reshape`, `Expand` and
//! `Slice` attributes listed above (`crate::ir::frontend::Op`), and lowering derives every other
//! size from those.

use super::cluster::ShapeCluster;
use super::ShapeError;
use crate::ir::dim::Dim;
use crate::ir::frontend::{Graph, Op};
use std::collections::{BTreeMap, BTreeSet};

/// `T = divisor * symbol`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Factor {
    /// The divisor.
    pub divisor: i64,
    /// The new symbol (`T_8`).
    pub symbol: String,
}

/// How a graph is specialized to a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Specialization {
    /// The cluster.
    pub cluster: ShapeCluster,
    /// Per clustered symbol with a divisor > 1, its factorization (sorted by symbol).
    pub factors: BTreeMap<String, Factor>,
}

/// The symbols `graph`'s tensors use (sorted).
pub fn graph_symbols(graph: &Graph) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for t in graph.tensors.values() {
        for d in &t.shape {
            out.extend(d.symbols());
        }
    }
    out
}

impl Specialization {
    /// The specialization of a graph using the symbols `taken` (new names avoid them).
    pub fn new(cluster: &ShapeCluster, taken: &BTreeSet<String>) -> Specialization {
        let mut used = taken.clone();
        used.extend(cluster.classes.keys().cloned());
        let mut factors = BTreeMap::new();
        for (s, c) in &cluster.classes {
            if c.divisor <= 1 {
                continue;
            }
            let mut name = format!("{s}_{}", c.divisor);
            while used.contains(&name) {
                name.push('_');
            }
            used.insert(name.clone());
            factors.insert(
                s.clone(),
                Factor {
                    divisor: c.divisor,
                    symbol: name,
                },
            );
        }
        Specialization {
            cluster: cluster.clone(),
            factors,
        }
    }

    /// The substitution `T -> d*T_d`.
    pub fn substitution(&self) -> BTreeMap<String, Dim> {
        self.factors
            .iter()
            .map(|(s, f)| (s.clone(), Dim::sym(&f.symbol).mul_int(f.divisor)))
            .collect()
    }

    /// The graph with every factored symbol substituted; the factored symbols lose their
    /// document defaults (the new symbols stay unbound, so the code is generated for symbolic
    /// sizes).
    pub fn apply(&self, graph: &Graph) -> Graph {
        let sub = self.substitution();
        if sub.is_empty() {
            return graph.clone();
        }
        let shape = |s: &[Dim]| -> Vec<Dim> { s.iter().map(|d| d.substitute_dims(&sub)).collect() };
        let mut g = graph.clone();
        for t in g.tensors.values_mut() {
            t.shape = shape(&t.shape);
        }
        for n in &mut g.nodes {
            match &mut n.op {
                Op::Reshape { shape: s } | Op::Expand { shape: s } => *s = shape(s),
                Op::Slice { starts, ends, .. } => {
                    *starts = shape(starts);
                    *ends = shape(ends);
                }
                _ => {}
            }
        }
        for s in sub.keys() {
            g.symbols.remove(s);
        }
        g
    }

    /// The binding of the specialized program for a binding of the original symbols: `T_d = T /
    /// d` for every factored symbol, the others unchanged. `ShapeError::NotMultiple` when a value
    /// is not a multiple of its factor (the binding is not in a cluster this specialization
    /// serves).
    pub fn bind(
        &self,
        binding: &BTreeMap<String, i64>,
    ) -> Result<BTreeMap<String, i64>, ShapeError> {
        let mut out = BTreeMap::new();
        for (s, v) in binding {
            match self.factors.get(s) {
                Some(f) if v % f.divisor != 0 => {
                    return Err(ShapeError::NotMultiple {
                        symbol: s.clone(),
                        value: *v,
                        divisor: f.divisor,
                        cluster: self.cluster.key(),
                    })
                }
                Some(f) => {
                    out.insert(f.symbol.clone(), v / f.divisor);
                }
                None => {
                    out.insert(s.clone(), *v);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(v: &[(&str, i64)]) -> ShapeCluster {
        let b: BTreeMap<String, i64> = v.iter().map(|(s, x)| (s.to_string(), *x)).collect();
        ShapeCluster::of(&b).expect("cluster")
    }

    #[test]
    fn substitution_makes_sizes_divisible() {
        let c = cluster(&[("T", 56), ("N", 3)]);
        let sp = Specialization::new(&c, &["T".to_string(), "N".to_string()].into());
        assert_eq!(sp.factors.len(), 1);
        assert_eq!(sp.factors["T"].symbol, "T_8");
        let sub = sp.substitution();
        let t = Dim::sym("T");
        let s = t.substitute_dims(&sub);
        assert!(t.div_exact(&Dim::int(4)).is_none());
        assert!(s.div_exact(&Dim::int(8)).is_some());
        // floor((T + 1) / 2) = 4*T_8 for T = 8*T_8.
        let f = t.add_int(1).floordiv(2).substitute_dims(&sub);
        assert_eq!(f, Dim::sym("T_8").mul_int(4));
        let n = Dim::sym("N").mul(&t);
        assert_eq!(
            n.substitute_dims(&sub),
            Dim::sym("N").mul(&Dim::sym("T_8")).mul_int(8)
        );
    }

    #[test]
    fn fresh_names_and_binding() {
        let c = cluster(&[("T", 48)]);
        let sp = Specialization::new(&c, &["T".to_string(), "T_16".to_string()].into());
        assert_eq!(sp.factors["T"].symbol, "T_16_");
        let b: BTreeMap<String, i64> = [("T".to_string(), 80)].into();
        assert_eq!(sp.bind(&b).expect("80")["T_16_"], 5);
        let bad: BTreeMap<String, i64> = [("T".to_string(), 56)].into();
        assert!(matches!(
            sp.bind(&bad),
            Err(ShapeError::NotMultiple { divisor: 16, .. })
        ));
    }
}
