//! `--explain` for compute-at fusion (seed 003): why a producer reduction embedded in a
//! consumer's window is legal (its pre-image, the halo, the dependence distance) and what it
//! costs (recomputation, and the price against the cover without compute-at); and, for a
//! producer → consumer pair of kernels that stayed apart, why it was not embedded.
//!
//! The numbers come from the embedding synthesis recorded
//! ([`crate::synth::Embedding`]): the producer point is affine in the consumer's
//! iters and window axes, so per producer dimension `j` with index `s·it + Σ b·w + c`:
//! - the pre-image of one consumer point spans `E_j = Σ |b|·(ext_w − 1) + 1` producer points;
//! - consecutive consumer points along `it` start `s` apart, so the *halo* (points a consumer
//!   point shares with its neighbour, which a tile of consumer points recomputes at its edge)
//!   is `max(E_j − s, 0)`: a pool's kernel minus its stride;
//! - the fused kernel computes `Π E_j` producer points per consumer point where the producer
//!   has `Π s_j` of its own: the recompute factor is their ratio.
//!
//! The footprint in each input is read off the region's reads under the embedded reduction:
//! the span over the window and producer axes, per dimension (pool kernel + conv kernel − 1
//! rows for a stride-1 convolution).

use crate::cost::choose_plan;
use crate::extract::kernels::{kernel_own_cost, synthesize_kernel, CostModel, KernelCost};
use crate::ir::axis::AxisExpr;
use crate::ir::dim::Dim;
use crate::ir::egraph::kernel::{fuse, kernel_parts};
use crate::ir::egraph::{Attr, TensorFacts, TensorGraph, TensorLang};
use crate::ir::region::verify::children;
use crate::ir::region::{Expr, Reduce, Region};
use crate::poly::view::aff::{Aff, Atom};
use crate::synth::Embedding;
use egg::{Id, RecExpr};
use std::collections::HashMap;

/// `e` as an affine form over `vars` (size symbols replaced by their pricing values); `None`
/// when it is not affine in `vars` with integer coefficients.
fn linear(e: &AxisExpr, vars: &[&str], size: &dyn Fn(&str) -> Option<i64>) -> Option<Aff> {
    let concrete = e.substitute(&|n| {
        if vars.contains(&n) {
            None
        } else {
            size(n).map(AxisExpr::Const)
        }
    });
    let a = Aff::from_axis(&concrete).ok()?;
    a.terms
        .keys()
        .all(|t| matches!(t, Atom::Var(v) if vars.contains(&v.as_str())))
        .then_some(a)
}

/// The coefficient of the variable `v` in `a`.
fn coef(a: &Aff, v: &str) -> i64 {
    a.terms.get(&Atom::Var(v.to_string())).copied().unwrap_or(0)
}

/// The span `Σ |coef|·(ext − 1) + 1` of `a` over the axes `over`.
fn span(a: &Aff, over: &[(String, i64)]) -> i64 {
    1 + over
        .iter()
        .map(|(n, e)| coef(a, n).abs() * (e - 1).max(0))
        .sum::<i64>()
}

/// `a` with the axes `zero` at 0 and the constant moved by `shift`, in isl text.
fn show_at(a: &Aff, zero: &[(String, i64)], shift: i64, order: &[String]) -> String {
    let at = a.substitute(&|n| zero.iter().any(|(w, _)| w == n).then(|| Aff::int(0)));
    at.add(&Aff::int(shift)).isl(order)
}

/// The explain lines of every embedding of a compute-at kernel's region.
pub fn embedding_lines(
    region: &Region,
    embeddings: &[Embedding],
    model: &CostModel,
    elem_bytes: u64,
) -> Vec<String> {
    let size = |d: &Dim| model.numel(std::slice::from_ref(d)) as i64;
    let sym = |n: &str| Some(model.bindings.get(n).copied().unwrap_or(model.default_size));
    let mut out = Vec::new();
    for emb in embeddings {
        let window: Vec<(String, i64)> = emb
            .window
            .iter()
            .map(|(n, d)| (n.clone(), size(d)))
            .collect();
        let prod_axes: Vec<(String, i64)> = emb
            .producer_axes
            .iter()
            .map(|(n, d)| (n.clone(), size(d)))
            .collect();
        let iter_names: Vec<&str> = emb.iters.iter().map(|(n, _)| n.as_str()).collect();
        let mut vars: Vec<&str> = iter_names.clone();
        vars.extend(window.iter().map(|(n, _)| n.as_str()));
        let order: Vec<String> = vars.iter().map(|v| v.to_string()).collect();
        let point: Vec<String> = emb
            .point
            .iter()
            .map(|a| linear(a, &vars, &sym).map_or_else(|| a.to_string(), |l| l.isl(&order)))
            .collect();
        let show = |axes: &[(String, i64)]| {
            axes.iter()
                .map(|(n, e)| format!("{n}:{e}"))
                .collect::<Vec<_>>()
                .join(" × ")
        };
        out.push(format!(
            "compute-at: the producer reduction (fold {}) is embedded at [{}] inside the \
             consumer window {}; its values never reach global memory (registers in the nest, shared memory in a pooled tile)",
            show(&prod_axes),
            point.join(", "),
            show(&window)
        ));
        let mut boxes = Vec::new();
        let mut halos = Vec::new();
        let (mut pre, mut own) = (1i64, 1i64);
        let mut affine = true;
        for (j, a) in emb.point.iter().enumerate() {
            let Some(lin) = linear(a, &vars, &sym) else {
                affine = false;
                continue;
            };
            let e = span(&lin, &window);
            let it = iter_names
                .iter()
                .map(|n| (*n, coef(&lin, n)))
                .find(|(_, c)| *c != 0);
            // The consumer point's first producer point: the window axes at 0.
            let lo = show_at(&lin, &window, 0, &order);
            boxes.push(if e == 1 {
                format!("{{{lo}}}")
            } else {
                format!("[{lo}, {}]", show_at(&lin, &window, e - 1, &order))
            });
            let s = it.map_or(1, |(_, c)| c.abs());
            pre *= e;
            own *= s.min(e).max(1);
            if let Some((n, _)) = it {
                if e > 1 || s > 1 {
                    halos.push(format!(
                        "dim {j} along {n}: {} (window span {e} − stride {s})",
                        (e - s).max(0)
                    ));
                }
            }
        }
        if affine {
            out.push(format!(
                "legality: the pre-image of one consumer point is the box {} in the producer's \
                 space (affine and bounded); dependence distance 0 — each producer point is \
                 computed inside the consumer iteration that reads it",
                boxes.join(" × ")
            ));
            let recompute = pre as f64 / own.max(1) as f64;
            let halo_elems = (pre - own).max(0);
            out.push(format!(
                "halo: {}; {} element(s) = {} B shared with neighbours per consumer point \
                 (recompute {:.2}×)",
                if halos.is_empty() {
                    "none".to_string()
                } else {
                    halos.join(", ")
                },
                halo_elems,
                halo_elems as u64 * elem_bytes,
                recompute
            ));
        }
        if let Some(red) = find_reduce(region, &emb.producer_axes) {
            let mut over = window.clone();
            over.extend(prod_axes.iter().cloned());
            let mut reads = Vec::new();
            footprints(
                &red.body,
                &vars_with(&vars, &prod_axes),
                &over,
                &sym,
                &mut reads,
            );
            reads.dedup();
            if !reads.is_empty() {
                out.push(format!(
                    "footprint per consumer point (window + producer kernel − 1 per axis): {}",
                    reads.join("; ")
                ));
            }
        }
    }
    out
}

fn vars_with<'a>(vars: &[&'a str], more: &'a [(String, i64)]) -> Vec<&'a str> {
    let mut v = vars.to_vec();
    v.extend(more.iter().map(|(n, _)| n.as_str()));
    v
}

/// The nested reduction of `region` folding exactly `axes`.
fn find_reduce<'r>(region: &'r Region, axes: &[(String, Dim)]) -> Option<&'r Reduce> {
    fn walk<'r>(e: &'r Expr, axes: &[(String, Dim)]) -> Option<&'r Reduce> {
        if let Expr::Reduce(r) = e {
            if r.axes.len() == axes.len() && r.axes.iter().zip(axes).all(|(a, (b, _))| a == b) {
                return Some(r);
            }
        }
        children(e).into_iter().find_map(|c| walk(c, axes))
    }
    region.lets.iter().find_map(|l| walk(&l.expr, axes))
}

/// `tensor: a × b × …` spans of every read under `e` over the axes `over`.
fn footprints(
    e: &Expr,
    vars: &[&str],
    over: &[(String, i64)],
    sym: &dyn Fn(&str) -> Option<i64>,
    out: &mut Vec<String>,
) {
    if let Expr::Read { tensor, map } = e {
        let spans: Option<Vec<String>> = map
            .iter()
            .map(|a| linear(a, vars, sym).map(|l| span(&l, over).to_string()))
            .collect();
        if let Some(s) = spans {
            out.push(format!("{tensor} {}", s.join(" × ")));
        }
    }
    for c in children(e) {
        footprints(c, vars, over, sym, out);
    }
}

/// True when `region` embeds a reduction in another (only compute-at does: synthesis makes
/// every other reduction a let of its own).
pub fn embeds(region: &Region) -> bool {
    fn nested(e: &Expr, inside: bool) -> bool {
        match e {
            Expr::Reduce(r) => inside || nested(&r.body, true),
            _ => children(e).into_iter().any(|c| nested(c, inside)),
        }
    }
    region.lets.iter().any(|l| nested(&l.expr, false))
}

/// The profitability line of a compute-at cover against the same program without compute-at.
pub fn profit_line(with: &KernelCost, without: &KernelCost) -> String {
    let (a, b) = (with.time.micros(), without.time.micros());
    format!(
        "profitability: {a:.3} µs in {} kernel(s), {} B to/from global memory, against {b:.3} µs \
         in {} kernel(s), {} B without compute-at ({:+.1} %): {}",
        with.kernels,
        with.bytes,
        without.kernels,
        without.bytes,
        (a / b.max(1e-12) - 1.0) * 100.0,
        if a <= b { "pays" } else { "does not pay" }
    )
}

/// True when body node `$arg` is read inside a reduction of `body`.
fn read_under_reduce(body: &RecExpr<TensorLang>, arg: usize) -> bool {
    let nodes = body.as_ref();
    let mut under = vec![false; nodes.len()];
    for (k, n) in nodes.iter().enumerate().rev() {
        if under[k] || matches!(n, TensorLang::Reduce(_)) {
            for c in egg::Language::children(n) {
                under[usize::from(*c)] = true;
            }
        }
    }
    nodes
        .iter()
        .enumerate()
        .any(|(k, n)| under[k] && matches!(n, TensorLang::Attr(Attr::Arg(a)) if *a as usize == arg))
}

/// For a consumer kernel `node` of the cover, why each producer kernel it reads inside a
/// reduction (a compute-at candidate: the producer has a reduction too) was kept apart:
/// illegal (synthesis says why) or not paying (the fused kernel's price against the pair's).
pub fn kept_apart(
    eg: &TensorGraph,
    node: &TensorLang,
    choose: &dyn Fn(Id) -> TensorLang,
    names: &HashMap<Id, String>,
    model: &CostModel,
) -> Vec<String> {
    let attr = |id: Id| eg[id].data.attr();
    let TensorLang::Kernel(ch) = node else {
        return Vec::new();
    };
    let Ok((c_body, c_inputs)) = kernel_parts(ch, &attr) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (j, input) in c_inputs.iter().enumerate() {
        let class = eg.find(*input);
        let p_node = choose(class);
        let TensorLang::Kernel(pch) = &p_node else {
            continue;
        };
        let Ok((p_body, p_inputs)) =
            kernel_parts(pch, &|id: Id| eg[id].data.attr()).map(|(b, i)| (b.clone(), i.to_vec()))
        else {
            continue;
        };
        let p_reduces = p_body
            .expr()
            .as_ref()
            .iter()
            .any(|n| matches!(n, TensorLang::Reduce(_)));
        if !p_reduces || !read_under_reduce(c_body.expr(), j) {
            continue;
        }
        let producer = names
            .get(&class)
            .cloned()
            .unwrap_or_else(|| class.to_string());
        let (fused, inputs) = fuse(c_body.expr(), c_inputs, j, p_body.expr(), &p_inputs);
        let Some(facts) = inputs
            .iter()
            .map(|i| eg[eg.find(*i)].data.tensor().cloned())
            .collect::<Option<Vec<TensorFacts>>>()
        else {
            continue;
        };
        let region = match synthesize_kernel(&fused, &facts) {
            Ok(r) => r,
            Err(why) => {
                out.push(format!(
                    "compute-at of {producer} into this kernel: illegal — {why}"
                ));
                continue;
            }
        };
        if !embeds(&region) {
            continue;
        }
        let pair = kernel_own_cost(eg, &p_node, model)
            .time
            .plus(kernel_own_cost(eg, node, model).time);
        match choose_plan(&region, model) {
            Ok(c) => out.push(format!(
                "compute-at of {producer} into this kernel: legal, but it does not pay — the \
                 fused kernel takes {:.3} µs ({}) against {:.3} µs for the two kernels",
                c.best.time.micros(),
                recompute_note(&c.work),
                pair.micros()
            )),
            Err(e) => out.push(format!(
                "compute-at of {producer} into this kernel: legal, but no plan: {e}"
            )),
        }
    }
    out
}

fn recompute_note(w: &crate::cost::work::KernelWork) -> String {
    match &w.shape {
        crate::cost::work::Shape::ComputeAt(ca) => format!(
            "{:.3e} producer evaluations of {} fold steps, {:.3e} loads",
            ca.producer_evals, ca.producer_len, ca.loads
        ),
        crate::cost::work::Shape::Contraction(g) => match &g.pool {
            Some(p) => format!(
                "a pooled tile: each window's {} points are rows of the contraction's tile, \
                 folded by its epilogue",
                p.window
            ),
            None => "a contraction".into(),
        },
        _ => "not a compute-at shape".into(),
    }
}
