//! What the pointwise template's folds read through the L2 cache (issue 15).
//!
//! On the pointwise template every output point folds every reduce let of the region itself:
//! `Σ_k a[m,k]·w[k,n]` loads `K` elements of `a` and `K` of `w` at each `(m, n)`. DRAM serves
//! every input once (`KernelWork::in_bytes`) and the issue slots of the loads are counted with
//! the ops (`codegen::templates::applicability::as_emitted`), but the loads themselves travel
//! through L1 and L2: a fold of a whole GEMM per element streams a weight column from L2 at
//! every output point. The model:
//!
//! - a CTA covers `P` consecutive output points (block × items × lanes), which span the
//!   fastest output axes in order: `c_i = min(extent_i, ⌈P / Π_{j faster} c_j⌉)`;
//! - at each step of a fold the CTA's threads share the elements they load through L1, so a
//!   read loads `Π_{i: the read's index depends on iter i} c_i` distinct elements per CTA per
//!   step — a read that does not depend on the fastest axis is a broadcast within the CTA;
//! - those distinct elements come from L2, once per CTA per step: across all CTAs,
//!   `points · per_point · elem_bytes · Π_{i dep} c_i / Π_i c_i` bytes.
//!
//! - a read whose steps overlap (a stencil's `x[ci, h + i, w + j]`, a row re-read by an outer
//!   fold) loads, for the innermost folds whose window — the hull of its index over the CTA's
//!   points and those folds — fits [`L1_WINDOW_BYTES`], that window once per step of the outer
//!   folds: the inner steps find it in L1.
//!
//! Sector granularity is not modelled (a strided read's 32-byte sector is assumed to serve
//! the next steps of the fold from L1), nor reuse between CTAs resident on one SM. Two reads
//! of the same element at the same step of the same fold count once (the second hits L1).

use super::footprint::interval;
use super::{children, Cx, WorkError};
use crate::ir::axis::AxisExpr;
use crate::ir::dim::Dim;
use crate::ir::region::Expr;
use serde::Serialize;
use std::collections::BTreeSet;

/// The most bytes of one read's window a CTA is assumed to keep in L1 across a fold (of the
/// 192–256 KB an SM shares between its resident CTAs, about an eighth).
pub const L1_WINDOW_BYTES: f64 = 32.0 * 1024.0;

/// A read's index (one expression per input dimension) and the folds around it, outermost
/// first, with their extents.
pub type Window = (Vec<AxisExpr>, Vec<(String, i64)>);

/// A read counted once per fold nest: its input, index and the folds around it.
type ReadKey = (String, Vec<AxisExpr>, Vec<(String, i64)>);

/// One read inside a fold, as the pointwise template issues it at every output point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FoldRead {
    /// The input read.
    pub tensor: String,
    /// Loads of this read per output point: the product of the extents of the folds around
    /// it (through the lets a fold recomputes at every step).
    pub per_point: f64,
    /// Element size, bytes.
    pub elem_bytes: f64,
    /// Per output iter (region order, fastest last): whether the read's index depends on it.
    pub varies: Vec<bool>,
    /// The read's index (symbols replaced by their priced sizes) and the extents of the folds
    /// around it, for its window; `None` for a gather (a data-dependent index).
    #[serde(skip)]
    pub window: Option<Window>,
}

impl FoldRead {
    /// Elements one CTA loads over the whole fold: per step the distinct elements of the
    /// CTA's points (`distinct`), or, where less, for some `j` the outer folds' steps
    /// `f_1..f_{j-1}` times the window of the inner ones `f_j..f_k` (the hull of the index over
    /// the CTA's `cover` of `iters` and those folds) when that window fits [`L1_WINDOW_BYTES`].
    fn cta_elems(&self, iters: &[String], cover: &[f64], distinct: f64) -> f64 {
        let mut best = self.per_point * distinct;
        let Some((_, folds)) = &self.window else {
            return best;
        };
        let mut outer = 1.0;
        for (j, (_, ext)) in folds.iter().enumerate() {
            if let Some(w) = self.window_elems(iters, cover, j) {
                if w * self.elem_bytes <= L1_WINDOW_BYTES {
                    best = best.min(outer * w);
                }
            }
            outer *= *ext as f64;
        }
        best
    }

    /// The hull of the read's index over the CTA's `cover` of the output iters `iters` and the
    /// folds from the `inner`-th on, the outer ones at one step (`None`: unbounded or a
    /// gather).
    fn window_elems(&self, iters: &[String], cover: &[f64], inner: usize) -> Option<f64> {
        let (map, folds) = self.window.as_ref()?;
        let range = |n: &str| {
            // a fold axis shadows an iter of its name
            let ext = match folds.iter().position(|(f, _)| f == n) {
                Some(k) if k < inner => 1,
                Some(k) => folds[k].1,
                None => cover[iters.iter().position(|i| i == n)?] as i64,
            };
            (ext >= 1).then_some((0, ext - 1))
        };
        map.iter().try_fold(1.0, |acc, x| {
            let (lo, hi) = interval(x, &range)?;
            Some(acc * (hi - lo + 1) as f64)
        })
    }
}

/// The reads of every fold of a region at one output point ([`FoldRead`]), with the output
/// iters' extents that place them in a CTA.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FoldTraffic {
    /// Names of the output iters, region order (fastest last).
    pub iters: Vec<String>,
    /// Extents of the output iters, region order (fastest last).
    pub extents: Vec<f64>,
    /// The reads inside folds; empty for a region without reductions.
    pub reads: Vec<FoldRead>,
}

impl FoldTraffic {
    /// Bytes the folds read from L2 when `points` output points run in CTAs of `cta_points`
    /// consecutive points each (module docs).
    pub fn l2_bytes(&self, points: f64, cta_points: f64) -> f64 {
        let cover = cta_coverage(&self.extents, cta_points);
        let all: f64 = cover.iter().product::<f64>().max(1.0);
        self.reads
            .iter()
            .map(|r| {
                let distinct: f64 = cover
                    .iter()
                    .zip(&r.varies)
                    .filter(|(_, v)| **v)
                    .map(|(c, _)| *c)
                    .product();
                points / all * r.cta_elems(&self.iters, &cover, distinct) * r.elem_bytes
            })
            .sum()
    }
}

/// Per output iter the extent a CTA of `points` consecutive output points spans along it:
/// the fastest iters first, each at most its extent.
fn cta_coverage(extents: &[f64], points: f64) -> Vec<f64> {
    let mut left = points.max(1.0);
    let mut cover = vec![1.0; extents.len()];
    for (c, e) in cover.iter_mut().zip(extents).rev() {
        if left <= 1.0 {
            break;
        }
        *c = e.min(left).max(1.0);
        left = (left / *c).ceil();
    }
    cover
}

impl Cx<'_> {
    /// The [`FoldTraffic`] of the region: the reads inside every reduce let, as the pointwise
    /// template folds each at every output point.
    pub(super) fn fold_traffic(&self) -> Result<FoldTraffic, WorkError> {
        let mut reads = Vec::new();
        for l in &self.r.lets {
            if matches!(l.expr, Expr::Reduce(_)) {
                let mut seen = BTreeSet::new();
                self.fold_reads(&l.expr, &l.name, &[], 1.0, &mut seen, &mut reads)?;
            }
        }
        Ok(FoldTraffic {
            iters: self.r.iters.iter().map(|i| i.name.clone()).collect(),
            extents: self.iter_sizes.iter().map(|d| self.size(d)).collect(),
            reads,
        })
    }

    /// Collects the reads of `e` inside folds over `folds` (axis, extent), each loaded `per`
    /// times per output point; `seen` keys (input, index, folds) already counted in this let's
    /// fold.
    fn fold_reads(
        &self,
        e: &Expr,
        at: &str,
        folds: &[(String, i64)],
        per: f64,
        seen: &mut BTreeSet<ReadKey>,
        out: &mut Vec<FoldRead>,
    ) -> Result<(), WorkError> {
        match e {
            Expr::Reduce(red) => {
                let ext = self.extents(red, at)?;
                let n: f64 = ext.iter().product();
                let mut inner = folds.to_vec();
                inner.extend(red.axes.iter().cloned().zip(ext.iter().map(|e| *e as i64)));
                return self.fold_reads(&red.body, at, &inner, per * n, seen, out);
            }
            Expr::Read { tensor, map } | Expr::Gather { tensor, map, .. } if !folds.is_empty() => {
                let first = seen.insert((tensor.clone(), map.clone(), folds.to_vec()));
                if first {
                    out.push(self.fold_read(e, tensor, folds, per));
                }
            }
            Expr::Let(_) => {
                let names: Vec<String> = folds.iter().map(|(f, _)| f.clone()).collect();
                if let Some((name, l)) = self.refolded_let(e, Some(&names)) {
                    return self.fold_reads(l.expr, name, folds, per, seen, out);
                }
            }
            _ => {}
        }
        for c in children(e) {
            self.fold_reads(c, at, folds, per, seen, out)?;
        }
        Ok(())
    }

    /// The read `e` of `tensor` inside folds over `folds` (which shadow iters of their names).
    fn fold_read(&self, e: &Expr, tensor: &str, folds: &[(String, i64)], per: f64) -> FoldRead {
        let is_fold = |n: &str| folds.iter().any(|(f, _)| f == n);
        let mut axes = BTreeSet::new();
        self.axes_of(e, &[], &mut axes);
        let elem_bytes = self
            .r
            .inputs
            .iter()
            .find(|i| i.name == tensor)
            .map_or(4, |i| i.dtype.size_bytes()) as f64;
        FoldRead {
            tensor: tensor.to_string(),
            per_point: per,
            elem_bytes,
            varies: self
                .r
                .iters
                .iter()
                .map(|i| axes.contains(&i.name) && !is_fold(&i.name))
                .collect(),
            window: match e {
                Expr::Read { map, .. } => Some((self.resolved(map, &is_fold), folds.to_vec())),
                _ => None,
            },
        }
    }

    /// `map` with every name that is no iter and no fold axis (`is_fold`) — a symbol —
    /// replaced by its priced size.
    fn resolved(&self, map: &[AxisExpr], is_fold: &dyn Fn(&str) -> bool) -> Vec<AxisExpr> {
        let symbol = |n: &str| {
            let axis = is_fold(n) || self.r.iters.iter().any(|i| i.name == n);
            (!axis).then(|| AxisExpr::Const(self.sizes.numel(&[Dim::sym(n)]) as i64))
        };
        map.iter().map(|x| x.substitute(&symbol)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cta_spans_the_fastest_axes_first() {
        assert_eq!(cta_coverage(&[197.0, 768.0], 512.0), vec![1.0, 512.0]);
        assert_eq!(cta_coverage(&[4096.0, 2.0], 256.0), vec![128.0, 2.0]);
        assert_eq!(cta_coverage(&[8.0, 4.0], 256.0), vec![8.0, 4.0]);
    }

    fn name(n: &str) -> AxisExpr {
        AxisExpr::Name(n.into())
    }

    fn plus(a: &str, b: &str) -> AxisExpr {
        AxisExpr::Add(vec![name(a), name(b)])
    }

    fn read(varies: Vec<bool>) -> FoldRead {
        FoldRead {
            tensor: "x".into(),
            per_point: 768.0,
            elem_bytes: 4.0,
            varies,
            window: None,
        }
    }

    #[test]
    fn a_weight_column_streams_and_a_row_broadcasts() {
        // Σ_k a[m,k]·w[k,n] at 197×768 points in CTAs of 512 along n.
        let t = FoldTraffic {
            iters: vec!["m".into(), "n".into()],
            extents: vec![197.0, 768.0],
            reads: vec![read(vec![true, false]), read(vec![false, true])],
        };
        let points = 197.0 * 768.0;
        let w = points * 768.0 * 4.0;
        assert_eq!(t.l2_bytes(points, 512.0), w + w / 512.0);
    }

    #[test]
    fn a_stencil_loads_its_window_once() {
        // A 3×3 depthwise window x[h + i, w + j] at 56×56 points, CTAs of 512: 10 rows × 56.
        let folds = vec![("i".to_string(), 3), ("j".to_string(), 3)];
        let mut r = read(vec![true, true]);
        r.per_point = 9.0;
        r.window = Some((vec![plus("h", "i"), plus("w", "j")], folds));
        let t = FoldTraffic {
            iters: vec!["h".into(), "w".into()],
            extents: vec![56.0, 56.0],
            reads: vec![r],
        };
        let points = 56.0 * 56.0;
        let ctas = points / (10.0 * 56.0);
        assert_eq!(t.l2_bytes(points, 512.0), ctas * (12.0 * 58.0) * 4.0);
    }

    #[test]
    fn a_stencil_over_many_channels_reuses_each_channels_window() {
        // x[c, h + i, w + j] over 256 channels at 14×14 points, CTAs of 256 (all 196 points):
        // a channel's 16×16 window fits L1, all 256 windows (256 KB) do not.
        let folds = vec![
            ("c".to_string(), 256),
            ("i".to_string(), 3),
            ("j".to_string(), 3),
        ];
        let mut r = read(vec![true, true]);
        r.per_point = 256.0 * 9.0;
        r.window = Some((vec![name("c"), plus("h", "i"), plus("w", "j")], folds));
        let t = FoldTraffic {
            iters: vec!["h".into(), "w".into()],
            extents: vec![14.0, 14.0],
            reads: vec![r],
        };
        let points = 196.0;
        assert_eq!(t.l2_bytes(points, 256.0), 256.0 * 16.0 * 16.0 * 4.0);
    }

    #[test]
    fn a_thin_output_shares_the_weights() {
        // N = 2: a CTA of 256 points spans 128 rows, each loading its own a[m, k].
        let t = FoldTraffic {
            iters: vec!["m".into(), "n".into()],
            extents: vec![4096.0, 2.0],
            reads: vec![read(vec![true, false]), read(vec![false, true])],
        };
        let points = 8192.0;
        let per = points * 768.0 * 4.0;
        assert_eq!(
            t.l2_bytes(points, 256.0),
            per * 128.0 / 256.0 + per * 2.0 / 256.0
        );
    }
}
