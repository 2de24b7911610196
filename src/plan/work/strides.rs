//! How far apart a contraction's reads of an input are along the axes a GEMV warp spreads its
//! lanes over (`plan::space`'s `Algo::Gemv` points, priced by `cost::gemv`): the innermost `K`
//! axis and the innermost `N` axis (each the last of its group with an extent above 1, the one
//! consecutive flat indices move). A read's stride along an axis is the change of its flat
//! (row-major) element offset when that axis steps by 1: `Σ_d |Δ map_d| · Π_{e>d} shape_e`.
//! Also the elements the reads touch: a slice (a CLS token of `[B, S, H]`) touches a part of
//! its input, which a GEMV block re-reads per column block.

use super::{children, Cx, Gemm};
use crate::ir::axis::AxisExpr;
use crate::ir::dim::Dim;
use crate::ir::region::Expr;

/// How a contraction reads one input: the elements between its reads at consecutive indices
/// of the lane axes, the largest over the input's reads (0: no read moves along the axis),
/// and the elements the reads touch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LaneStrides {
    /// Along the innermost `K` axis.
    pub k: f64,
    /// Along the innermost `N` axis.
    pub n: f64,
    /// Elements of the input the reads touch (at most all): per read the product of the
    /// extents of the axes its indices name, the largest read.
    pub touched: f64,
}

impl Cx<'_> {
    /// The innermost `K` and `N` axes of `g` whose extents exceed 1 (else the last of each),
    /// `k_extents` the `K` axes' extents in order and `size_of` an iter's extent.
    pub(super) fn lane_axes(
        &self,
        g: &Gemm,
        k_extents: &[f64],
        size_of: &dyn Fn(&str) -> f64,
    ) -> [Option<String>; 2] {
        let k = g
            .axes
            .k
            .iter()
            .zip(k_extents)
            .rev()
            .find(|(_, e)| **e > 1.0)
            .map(|(n, _)| n.clone())
            .or_else(|| g.axes.k.last().cloned());
        let n = g
            .axes
            .n
            .iter()
            .rev()
            .find(|n| size_of(n) > 1.0)
            .or(g.axes.n.last())
            .cloned();
        [k, n]
    }

    /// The [`LaneStrides`] of the reads of `input` (of `shape`) along `axes` (`[K, N]`).
    pub(super) fn lane_strides(
        &self,
        input: &str,
        shape: &[Dim],
        axes: &[Option<String>; 2],
    ) -> LaneStrides {
        let mut maps = Vec::new();
        for l in &self.r.lets {
            self.reads_of(&l.expr, &l.name, input, &mut Vec::new(), &mut maps);
        }
        let all = self.sizes.numel(shape) as f64;
        let touched = maps
            .iter()
            .map(|(_, extents)| extents.min(all))
            .fold(0.0, f64::max);
        let along = |axis: &Option<String>| -> f64 {
            let Some(axis) = axis else { return 0.0 };
            maps.iter()
                .map(|(map, _)| self.stride(map, shape, axis))
                .fold(0.0, f64::max)
        };
        LaneStrides {
            k: along(&axes[0]),
            n: along(&axes[1]),
            touched,
        }
    }

    /// The stride of one read `map` of an input of `shape` along `axis`: each index's change
    /// when `axis` goes from 0 to 1 (every other name at 0) times its dimension's row-major
    /// stride; an index that does not evaluate (a symbol) and mentions `axis` counts 1.
    fn stride(&self, map: &[AxisExpr], shape: &[Dim], axis: &str) -> f64 {
        let at = |one: bool| move |n: &str| Some(i64::from(one && n == axis));
        map.iter()
            .enumerate()
            .map(|(d, index)| {
                let delta = match (index.eval(&at(true)), index.eval(&at(false))) {
                    (Ok(a), Ok(b)) => (a - b).unsigned_abs() as f64,
                    _ => f64::from(u8::from(index.mentions(&|n| n == axis))),
                };
                let tail = shape.get(d + 1..).unwrap_or(&[]);
                if delta == 0.0 {
                    0.0
                } else {
                    delta * self.sizes.numel(tail) as f64
                }
            })
            .sum()
    }
}

/// An axis a read may name inside the reductions around it, with its extent.
type Scope = Vec<(String, f64)>;

impl<'e> Cx<'e> {
    /// Every index map of a plain read of `input` in `e` (in the let `at`) with the product of
    /// the extents of the axes it names (`scope`: the enclosing reductions' axes; gathers are
    /// data-dependent: skipped).
    fn reads_of(
        &self,
        e: &'e Expr,
        at: &str,
        input: &str,
        scope: &mut Scope,
        out: &mut Vec<(&'e [AxisExpr], f64)>,
    ) {
        if let Expr::Read { tensor, map } = e {
            if tensor == input {
                out.push((map, self.named_extent(map, scope)));
            }
        }
        if let Expr::Reduce(red) = e {
            let depth = scope.len();
            let extents = self.extents(red, at).unwrap_or_default();
            scope.extend(red.axes.iter().cloned().zip(extents));
            self.reads_of(&red.body, at, input, scope, out);
            scope.truncate(depth);
            return;
        }
        for c in children(e) {
            self.reads_of(c, at, input, scope, out);
        }
    }

    /// The product of the extents of the distinct axes `map` names (reduce axes of `scope`
    /// shadow iters).
    fn named_extent(&self, map: &[AxisExpr], scope: &Scope) -> f64 {
        let mut names = std::collections::BTreeSet::new();
        for index in map {
            index.for_each_name(&mut |n| {
                names.insert(n.to_string());
            });
        }
        names
            .iter()
            .map(|n| {
                if let Some((_, x)) = scope.iter().rev().find(|(a, _)| a == n) {
                    *x
                } else if let Some(i) = self.r.iters.iter().position(|it| &it.name == n) {
                    self.size(&self.iter_sizes[i])
                } else {
                    1.0
                }
            })
            .product()
    }
}
