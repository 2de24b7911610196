//! Reduce axes that shadow region iters, renamed apart before emission.
//!
//! The ONNX import names a convolution's window axes after the iters they stand beside: a 1×1
//! convolution over `[i0, i1, i2, i3, i4]` reduces over `[k, i0, i1]`, a depthwise one over
//! `[b, h, m, n]` reduces over `[b, k, k1]` (the iters of size 1). The reduce rebinds those
//! names inside its body, so they are legal, but [`super::contraction::recognize`] classifies
//! a contraction's iters by the names its operands read and refuses a reduce that shadows an
//! iter: every pointwise convolution of MobileNetV2 ran as a scalar dot product per output
//! point (16 of 96 lanes of a 64-lane accumulator) instead of the packed GEMM, 10–40× slower
//! than priced.
//!
//! The same pass moves a reduce's axes of extent 1 before the others (the same points folded in
//! the same order): the lane reduction vectorizes the innermost axis, and the pooled 1×1
//! convolution's `[k2, m, k3]` (320, 1, 1) ran one lane of 64.
//!
//! [`unshadow`] gives each such axis a fresh name (its extent made explicit, as the iter's size
//! or the reads' dimension it had) and substitutes it in the reduce's body up to any nested
//! reduce that rebinds the same name. A body that reads lets, views (broadcast, transpose) or
//! scans is left alone: a let read inside the body is evaluated at the rebound value of the
//! shadowed iter, which a rename would change.

use super::emit::visit_expr;
use crate::ir::dim::Dim;
use crate::ir::region::verify::reduce_extents;
use crate::ir::region::{Expr, Reduce, Region, Size};
use std::collections::{BTreeMap, BTreeSet};

/// `r` with every reduce axis that shadows an iter renamed apart, or `None` when none does (or
/// none can be renamed). `iter_sizes`: the iters' sizes ([`crate::ir::region::verify::Checked`]).
pub(super) fn unshadow(r: &Region, iter_sizes: &[Dim]) -> Option<Region> {
    let iters: BTreeSet<&str> = r.iters.iter().map(|i| i.name.as_str()).collect();
    let mut cx = Cx {
        r,
        iter_sizes,
        iters,
        taken: taken_names(r),
        changed: false,
    };
    let lets: Vec<Expr> = r.lets.iter().map(|l| cx.rename(&l.expr)).collect();
    if !cx.changed {
        return None;
    }
    let mut out = r.clone();
    for (l, e) in out.lets.iter_mut().zip(lets) {
        l.expr = e;
    }
    Some(out)
}

struct Cx<'a> {
    r: &'a Region,
    iter_sizes: &'a [Dim],
    iters: BTreeSet<&'a str>,
    taken: BTreeSet<String>,
    changed: bool,
}

/// Every name the region uses: iters, inputs, lets, reduce and scan axes, names in indices.
fn taken_names(r: &Region) -> BTreeSet<String> {
    let mut t: BTreeSet<String> = r.iters.iter().map(|i| i.name.clone()).collect();
    t.extend(r.inputs.iter().map(|i| i.name.clone()));
    t.extend(r.lets.iter().map(|l| l.name.clone()));
    for l in &r.lets {
        visit_expr(&l.expr, &mut |e| {
            let mut add = |a: &crate::ir::axis::AxisExpr| {
                a.for_each_name(&mut |n| {
                    t.insert(n.to_string());
                })
            };
            match e {
                Expr::Read { map, .. } | Expr::Gather { map, .. } => map.iter().for_each(&mut add),
                Expr::Select { pred, .. } => pred.for_each_expr(&mut add),
                Expr::Index(a) => add(a),
                Expr::Reduce(red) => t.extend(red.axes.iter().cloned()),
                Expr::Scan(sc) => {
                    t.insert(sc.axis.clone());
                }
                _ => {}
            }
        });
    }
    t
}

/// Whether `e` reads a let, a view or a scan anywhere (a rename inside it is not safe).
fn opaque(e: &Expr) -> bool {
    let mut hit = false;
    visit_expr(e, &mut |x| {
        hit |= matches!(
            x,
            Expr::Let(_) | Expr::Scan(_) | Expr::BroadcastInDim { .. } | Expr::Transpose { .. }
        )
    });
    hit
}

impl Cx<'_> {
    fn fresh(&mut self, base: &str) -> String {
        let mut k = 0;
        loop {
            let n = format!("{base}_u{k}");
            if self.taken.insert(n.clone()) {
                return n;
            }
            k += 1;
        }
    }

    /// `e` with the shadowing axes of its reduces renamed.
    fn rename(&mut self, e: &Expr) -> Expr {
        let bx = |cx: &mut Self, x: &Expr| Box::new(cx.rename(x));
        match e {
            Expr::Reduce(red) => Expr::Reduce(Box::new(self.rename_reduce(red))),
            Expr::Unary(f, x) => Expr::Unary(*f, bx(self, x)),
            Expr::Cast { to, x } => Expr::Cast {
                to: *to,
                x: bx(self, x),
            },
            Expr::Binary(f, a, b) => Expr::Binary(*f, bx(self, a), bx(self, b)),
            Expr::Select {
                pred,
                then,
                otherwise,
            } => Expr::Select {
                pred: pred.clone(),
                then: bx(self, then),
                otherwise: bx(self, otherwise),
            },
            Expr::Where(c, a, b) => Expr::Where(bx(self, c), bx(self, a), bx(self, b)),
            Expr::Gather {
                tensor,
                map,
                axis,
                index,
            } => Expr::Gather {
                tensor: tensor.clone(),
                map: map.clone(),
                axis: *axis,
                index: bx(self, index),
            },
            // Views and scans keep their operands' names (see `opaque`).
            _ => e.clone(),
        }
    }

    fn rename_reduce(&mut self, red: &Reduce) -> Reduce {
        let mut out = red.clone();
        let Ok(ext) = reduce_extents(self.r, red, self.iter_sizes, "") else {
            out.body = self.rename(&out.body);
            return out;
        };
        let shadowing: Vec<usize> = (0..red.axes.len())
            .filter(|j| self.iters.contains(red.axes[*j].as_str()))
            .collect();
        if !shadowing.is_empty() && !opaque(&red.body) {
            for j in shadowing {
                let old = red.axes[j].clone();
                let new = self.fresh(&old);
                out.axes[j] = new.clone();
                out.extents.retain(|(n, _)| *n != old);
                out.extents.push((new.clone(), Size(ext[j].clone())));
                out.body = subst(&out.body, &old, &new);
            }
            self.changed = true;
        }
        // Axes of extent 1 first: the fold visits the same points in the same order, and the
        // innermost axis (the lane reduction's vector loop) is one that has extent.
        let none = BTreeMap::new();
        let unit: Vec<bool> = ext
            .iter()
            .map(|d| d.eval_with(&none).ok() == Some(1))
            .collect();
        if (1..unit.len()).any(|j| unit[j] && !unit[j - 1]) {
            let order = (0..unit.len())
                .filter(|j| unit[*j])
                .chain((0..unit.len()).filter(|j| !unit[*j]));
            out.axes = order.map(|j| out.axes[j].clone()).collect();
            self.changed = true;
        }
        out.body = self.rename(&out.body);
        out
    }
}

/// `e` with the axis `from` read as `to`, up to reduces that rebind `from`.
fn subst(e: &Expr, from: &str, to: &str) -> Expr {
    use crate::ir::axis::AxisExpr;
    let f = |n: &str| (n == from).then(|| AxisExpr::Name(to.to_string()));
    let bx = |x: &Expr| Box::new(subst(x, from, to));
    match e {
        Expr::Read { tensor, map } => Expr::Read {
            tensor: tensor.clone(),
            map: map.iter().map(|a| a.substitute(&f)).collect(),
        },
        Expr::Gather {
            tensor,
            map,
            axis,
            index,
        } => Expr::Gather {
            tensor: tensor.clone(),
            map: map.iter().map(|a| a.substitute(&f)).collect(),
            axis: *axis,
            index: bx(index),
        },
        Expr::Index(a) => Expr::Index(a.substitute(&f)),
        Expr::Select {
            pred,
            then,
            otherwise,
        } => Expr::Select {
            pred: pred.substitute(&f),
            then: bx(then),
            otherwise: bx(otherwise),
        },
        Expr::Unary(g, x) => Expr::Unary(*g, bx(x)),
        Expr::Cast { to: t, x } => Expr::Cast { to: *t, x: bx(x) },
        Expr::Binary(g, a, b) => Expr::Binary(*g, bx(a), bx(b)),
        Expr::Where(c, a, b) => Expr::Where(bx(c), bx(a), bx(b)),
        Expr::Reduce(red) if !red.axes.iter().any(|a| a == from) => {
            let mut r2 = (**red).clone();
            r2.body = subst(&red.body, from, to);
            Expr::Reduce(Box::new(r2))
        }
        // A reduce rebinding `from`, constants, lets; views and scans are excluded by `opaque`.
        _ => e.clone(),
    }
}
