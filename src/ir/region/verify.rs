//! The region verifier: names, scopes, access maps, reduce extents and accumulators, view shapes,
//! yields, and (best effort, when sizes are known) out-of-bounds reads without a guarding
//! `select` (seed 001 §6.7, §6.10). Errors carry codes `E12xx`.

use super::bounds::{lookup, Bounds};
pub use super::error::RegionError;
use super::{AxisExpr, CmpOp, Expr, Pred, Reduce, Region};
use crate::ir::dim::{fmt_shape, Dim};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

/// A region error (verifier `E1200`–`E1216`, playback `E1220`–`E1223`).
type VResult<T> = Result<T, RegionError>;

/// What the verifier learned: resolved iter sizes and, per let, the iters it depends on.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// One size per iter.
    pub iter_sizes: Vec<Dim>,
    /// Per let (in order), the indices of the iters its value depends on, ascending.
    pub let_free: Vec<Vec<usize>>,
}

/// Verifies `region` with no symbol values (the out-of-bounds check runs on constant sizes).
///
/// The last few regions verified on this thread are remembered with their result (compared
/// whole, so a hit is exactly the same region): pricing a kernel verifies its region in
/// synthesis, in the work analysis, in the vector-width check and in the template matchers, one
/// after the other (issue 23: the verifier was a tenth of `optimize`'s time on BERT).
pub fn verify(region: &Region) -> VResult<Checked> {
    RECENT.with(|recent| {
        if let Some((_, c)) = recent.borrow().iter().find(|(r, _)| r == region) {
            return Ok(c.clone());
        }
        let c = verify_with(region, &BTreeMap::new())?;
        let mut recent = recent.borrow_mut();
        if recent.len() == RECENT_REGIONS {
            recent.pop_back();
        }
        recent.push_front((region.clone(), c.clone()));
        Ok(c)
    })
}

/// How many verified regions [`verify`] remembers per thread.
const RECENT_REGIONS: usize = 4;

thread_local! {
    static RECENT: std::cell::RefCell<std::collections::VecDeque<(Region, Checked)>> =
        const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
}

/// Verifies `region`; symbols with a value in `bindings` make more sizes known to the
/// out-of-bounds check.
pub fn verify_with(region: &Region, bindings: &BTreeMap<String, i64>) -> VResult<Checked> {
    let iter_sizes = iter_sizes(region)?;
    unique(region.iters.iter().map(|i| &i.name), "iters")?;
    unique(
        region
            .inputs
            .iter()
            .map(|i| &i.name)
            .chain(region.outputs.iter().map(|o| &o.name)),
        "tensors",
    )?;
    unique(region.lets.iter().map(|l| &l.name), "lets")?;
    let mut symbols = BTreeSet::new();
    for d in iter_sizes
        .iter()
        .chain(
            region
                .inputs
                .iter()
                .flat_map(|i| i.memref.shape.iter().map(|s| &s.0)),
        )
        .chain(
            region
                .outputs
                .iter()
                .flat_map(|o| o.memref.shape.iter().map(|s| &s.0)),
        )
    {
        symbols.extend(d.symbols());
    }
    for l in &region.lets {
        collect_symbols(&l.expr, &mut symbols);
    }
    symbols.extend(bindings.keys().cloned());
    let mut cx = Cx {
        r: region,
        symbols,
        bindings,
        let_free: BTreeMap::new(),
        at: String::new(),
        dead: Cell::new(0),
    };
    let scope0: Vec<(String, Dim)> = region
        .iters
        .iter()
        .zip(&iter_sizes)
        .map(|(i, d)| (i.name.clone(), d.clone()))
        .collect();
    let mut let_free = Vec::new();
    for l in &region.lets {
        cx.at = l.name.clone();
        if nests_scan(&l.expr) {
            return Err(RegionError::AxisAlignmentMismatch {
                at: l.name.clone(),
                why: "a scan must be a let's whole expression".into(),
            });
        }
        let mut scope = scope0.clone();
        let free = cx.expr(&l.expr, &mut scope, &mut Vec::new())?;
        let free: Vec<usize> = free.into_iter().collect();
        cx.let_free.insert(l.name.clone(), free.clone());
        let_free.push(free);
    }
    check_outputs(region, &iter_sizes)?;
    Ok(Checked {
        iter_sizes,
        let_free,
    })
}

/// The iters' sizes: `size`, else the first output's size at the same position.
pub fn iter_sizes(r: &Region) -> VResult<Vec<Dim>> {
    r.iters
        .iter()
        .enumerate()
        .map(|(i, it)| match &it.size {
            Some(s) => Ok(s.0.clone()),
            None => r
                .outputs
                .first()
                .filter(|o| o.memref.shape.len() == r.iters.len())
                .map(|o| o.memref.shape[i].0.clone())
                .ok_or_else(|| RegionError::IterSizeMissing {
                    iter: it.name.clone(),
                }),
        })
        .collect()
}

/// The extent of each axis of `red` (see the module doc of `region`): explicit `extents`, else
/// the size of the iter of the same name, else the agreeing sizes of the input dimensions that
/// reads directly in the body index with exactly that axis.
pub fn reduce_extents(r: &Region, red: &Reduce, iter_sizes: &[Dim], at: &str) -> VResult<Vec<Dim>> {
    let mut out = Vec::new();
    for a in &red.axes {
        if let Some((_, s)) = red.extents.iter().find(|(n, _)| n == a) {
            out.push(s.0.clone());
            continue;
        }
        if let Some(i) = r.iters.iter().position(|it| &it.name == a) {
            out.push(iter_sizes[i].clone());
            continue;
        }
        let mut found = Vec::new();
        derive_extent(r, &red.body, a, &mut found);
        found.dedup();
        let err = |why: String| RegionError::ReduceExtentUnknown {
            axis: a.clone(),
            at: at.to_string(),
            why,
        };
        match found.as_slice() {
            [d] => out.push(d.clone()),
            [] => {
                return Err(err(
                    "no `extents` entry, iter or read that indexes with it".into()
                ))
            }
            _ => return Err(err(format!("reads disagree: {}", fmt_shape(&found)))),
        }
    }
    Ok(out)
}

fn derive_extent(r: &Region, e: &Expr, axis: &str, out: &mut Vec<Dim>) {
    match e {
        Expr::Read { tensor, map } => {
            if let Some(inp) = r.input(tensor) {
                for (j, m) in map.iter().enumerate() {
                    if matches!(m, AxisExpr::Name(n) if n == axis) {
                        if let Some(s) = inp.memref.shape.get(j) {
                            if !out.contains(&s.0) {
                                out.push(s.0.clone());
                            }
                        }
                    }
                }
            }
        }
        Expr::Gather {
            tensor,
            map,
            axis: g,
            index,
        } => {
            if let Some(inp) = r.input(tensor) {
                for (j, m) in map.iter().enumerate() {
                    if j != *g && matches!(m, AxisExpr::Name(n) if n == axis) {
                        if let Some(s) = inp.memref.shape.get(j) {
                            if !out.contains(&s.0) {
                                out.push(s.0.clone());
                            }
                        }
                    }
                }
            }
            derive_extent(r, index, axis, out);
        }
        Expr::Reduce(red) if red.axes.iter().any(|a| a == axis) => {}
        _ => children(e).for_each(|c| derive_extent(r, c, axis, out)),
    }
}

/// The direct sub-expressions of `e` (at most three), in order.
pub type Children<'a> = std::iter::Flatten<std::array::IntoIter<Option<&'a Expr>, 3>>;

/// The up-to-three direct sub-expressions of an expression, shared or mutable (`mut`), in one
/// order: [`children`] and [`children_mut`] are this one match.
macro_rules! child_slots {
    ($e:expr $(, $m:tt)?) => {{
        let slots: [Option<&$($m)? Expr>; 3] = match $e {
            Expr::Const(_) | Expr::Let(_) | Expr::Read { .. } | Expr::Index(_) => [None, None, None],
            Expr::Unary(_, x) | Expr::Cast { x, .. } => [Some(x), None, None],
            Expr::Gather { index, .. } => [Some(index), None, None],
            Expr::Where(c, a, b) => [Some(c), Some(a), Some(b)],
            Expr::Binary(_, a, b) => [Some(a), Some(b), None],
            Expr::Select {
                then, otherwise, ..
            } => [Some(then), Some(otherwise), None],
            Expr::Reduce(r) => [Some(&$($m)? r.body), None, None],
            Expr::Scan(s) => [Some(&$($m)? s.body), None, None],
            Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => {
                [Some(operand), None, None]
            }
        };
        slots.into_iter().flatten()
    }};
}

/// The direct sub-expressions of `e`, in order (no allocation: the region walks of synthesis,
/// verification and planning call it on every node).
pub fn children(e: &Expr) -> Children<'_> {
    child_slots!(e)
}

/// The direct sub-expressions of `e`, in [`children`]'s order, mutably: a rewrite that rebuilds
/// an expression bottom-up (`for c in children_mut(e) { … }`) without naming every variant.
pub fn children_mut(e: &mut Expr) -> impl Iterator<Item = &mut Expr> {
    child_slots!(e, mut)
}

/// The first reduction of `e` in [`children`] order (`e` itself when it is one; not through
/// lets): a pooled tile's contraction inside its window's body.
pub fn first_reduce(e: &Expr) -> Option<&Reduce> {
    match e {
        Expr::Reduce(r) => Some(r),
        _ => children(e).find_map(first_reduce),
    }
}

/// The reductions of `e`, itself and nested ones included (a contraction template's region has
/// exactly its contractions: `codegen::templates::contraction::view`, `plan::work`).
pub fn reduces_in(e: &Expr) -> usize {
    // `children` of a reduce is its body.
    usize::from(matches!(e, Expr::Reduce(_))) + children(e).map(reduces_in).sum::<usize>()
}

/// True when `e` has a reduce or a scan strictly inside it.
fn nests_fold(e: &Expr) -> bool {
    children(e)
        .into_iter()
        .any(|c| matches!(c, Expr::Reduce(_) | Expr::Scan(_)) || nests_fold(c))
}

/// True when `e` has a scan strictly inside it.
fn nests_scan(e: &Expr) -> bool {
    children(e)
        .into_iter()
        .any(|c| matches!(c, Expr::Scan(_)) || nests_scan(c))
}

fn collect_symbols(e: &Expr, out: &mut BTreeSet<String>) {
    match e {
        Expr::Reduce(r) => r
            .extents
            .iter()
            .for_each(|(_, s)| out.extend(s.0.symbols())),
        Expr::BroadcastInDim { result_shape, .. } => {
            result_shape.iter().for_each(|s| out.extend(s.0.symbols()))
        }
        _ => {}
    }
    children(e).for_each(|c| collect_symbols(c, out));
}

fn unique<'a>(names: impl Iterator<Item = &'a String>, what: &'static str) -> VResult<()> {
    let mut seen = BTreeSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(RegionError::DuplicateName {
                name: n.clone(),
                what,
            });
        }
    }
    Ok(())
}

fn check_outputs(r: &Region, iter_sizes: &[Dim]) -> VResult<()> {
    for o in &r.outputs {
        let shape: Vec<Dim> = o.memref.shape.iter().map(|s| s.0.clone()).collect();
        if shape != iter_sizes {
            return Err(RegionError::OutputShapeMismatch {
                output: o.name.clone(),
                got: fmt_shape(&shape),
                want: fmt_shape(iter_sizes),
            });
        }
        let n = r.yields.iter().filter(|y| y.to == o.name).count();
        if n != 1 {
            return Err(RegionError::BadYield {
                why: format!("output `{}` is yielded {n} times", o.name),
            });
        }
    }
    for y in &r.yields {
        if !r.lets.iter().any(|l| l.name == y.from) {
            return Err(RegionError::BadYield {
                why: format!("`{}` is not a let", y.from),
            });
        }
        let Some(o) = r.output(&y.to) else {
            return Err(RegionError::BadYield {
                why: format!("`{}` is not an output", y.to),
            });
        };
        if let Some(c) = y.cast.filter(|c| *c != o.dtype) {
            return Err(RegionError::YieldDtypeMismatch {
                output: o.name.clone(),
                cast: c.to_string(),
                dtype: o.dtype.to_string(),
            });
        }
    }
    Ok(())
}

/// A guard fact from an enclosing `select`: `a op b`.
type Guard = (CmpOp, AxisExpr, AxisExpr);

struct Cx<'a> {
    r: &'a Region,
    symbols: BTreeSet<String>,
    bindings: &'a BTreeMap<String, i64>,
    /// Free iters of each let defined so far.
    let_free: BTreeMap<String, Vec<usize>>,
    /// The let being checked (for messages).
    at: String,
    /// How many enclosing `select`s have a guard that never holds (reads under one never run).
    dead: Cell<usize>,
}

impl Cx<'_> {
    /// Checks `e`; returns its free axes as scope positions.
    fn expr(
        &self,
        e: &Expr,
        scope: &mut Vec<(String, Dim)>,
        guards: &mut Vec<Guard>,
    ) -> VResult<BTreeSet<usize>> {
        let at = || self.at.clone();
        match e {
            Expr::Const(_) => Ok(BTreeSet::new()),
            Expr::Let(n) => {
                let free = self
                    .let_free
                    .get(n)
                    .ok_or_else(|| RegionError::UndefinedLet {
                        name: n.clone(),
                        at: at(),
                    })?;
                free.iter()
                    .map(|i| {
                        let name = &self.r.iters[*i].name;
                        lookup(scope, name).ok_or_else(|| RegionError::UnboundName {
                            name: name.clone(),
                            at: at(),
                        })
                    })
                    .collect()
            }
            Expr::Read { tensor, map } => {
                let inp = self
                    .r
                    .input(tensor)
                    .ok_or_else(|| RegionError::UnknownTensor {
                        tensor: tensor.clone(),
                        at: at(),
                    })?;
                if map.len() != inp.memref.shape.len() {
                    return Err(RegionError::ReadRankMismatch {
                        tensor: tensor.clone(),
                        at: at(),
                        rank: inp.memref.shape.len(),
                        got: map.len(),
                    });
                }
                let mut free = BTreeSet::new();
                for (j, m) in map.iter().enumerate() {
                    free.extend(self.axis(m, scope)?);
                    self.bounds_check(tensor, j, m, &inp.memref.shape[j].0, scope, guards)?;
                }
                Ok(free)
            }
            Expr::Unary(_, x) | Expr::Cast { x, .. } => self.expr(x, scope, guards),
            Expr::Index(m) => self.axis(m, scope),
            Expr::Where(c, a, b) => {
                let mut f = self.expr(c, scope, guards)?;
                f.extend(self.expr(a, scope, guards)?);
                f.extend(self.expr(b, scope, guards)?);
                Ok(f)
            }
            Expr::Gather {
                tensor,
                map,
                axis,
                index,
            } => {
                let inp = self
                    .r
                    .input(tensor)
                    .ok_or_else(|| RegionError::UnknownTensor {
                        tensor: tensor.clone(),
                        at: at(),
                    })?;
                if map.len() != inp.memref.shape.len() || *axis >= map.len() {
                    return Err(RegionError::ReadRankMismatch {
                        tensor: tensor.clone(),
                        at: at(),
                        rank: inp.memref.shape.len(),
                        got: map.len().max(*axis + 1),
                    });
                }
                let mut free = self.expr(index, scope, guards)?;
                for (j, m) in map.iter().enumerate() {
                    free.extend(self.axis(m, scope)?);
                    if j != *axis {
                        self.bounds_check(tensor, j, m, &inp.memref.shape[j].0, scope, guards)?;
                    }
                }
                Ok(free)
            }
            Expr::Binary(_, a, b) => {
                let mut f = self.expr(a, scope, guards)?;
                f.extend(self.expr(b, scope, guards)?);
                Ok(f)
            }
            Expr::Select {
                pred,
                then,
                otherwise,
            } => {
                let mut f = self.pred(pred, scope)?;
                let n = guards.len();
                conjuncts(pred, guards);
                // A guard that holds nowhere on the box (a pad that covers the whole output)
                // makes its branch dead: it reads nothing.
                let b = Bounds {
                    scope,
                    bindings: self.bindings,
                };
                let dead = b.never(pred);
                self.dead.set(self.dead.get() + usize::from(dead));
                let t = self.expr(then, scope, guards);
                self.dead.set(self.dead.get() - usize::from(dead));
                guards.truncate(n);
                f.extend(t?);
                f.extend(self.expr(otherwise, scope, guards)?);
                Ok(f)
            }
            Expr::Reduce(red) => self.reduce(red, scope, guards),
            Expr::Scan(sc) => {
                // Only as a let's whole expression, where the scope is the iters.
                let Some(p) = scope.iter().position(|(n, _)| *n == sc.axis) else {
                    return Err(RegionError::UnboundName {
                        name: sc.axis.clone(),
                        at: at(),
                    });
                };
                if scope.len() != self.r.iters.len() || nests_fold(e) {
                    return Err(RegionError::AxisAlignmentMismatch {
                        at: at(),
                        why: "a scan must be a let's whole expression, with no reduce or scan in its body".into(),
                    });
                }
                let mut f = self.expr(&sc.body, scope, guards)?;
                f.insert(p);
                Ok(f)
            }
            Expr::BroadcastInDim {
                operand,
                result_shape,
                broadcast_dimensions: dims,
            } => {
                let f = self.expr(operand, scope, guards)?;
                let shape: Vec<Dim> = f.iter().map(|p| scope[*p].1.clone()).collect();
                let result: Vec<Dim> = result_shape.iter().map(|s| s.0.clone()).collect();
                let increasing = dims.windows(2).all(|w| w[0] < w[1]);
                if dims.len() != shape.len()
                    || !increasing
                    || dims.iter().any(|d| *d >= result.len())
                {
                    return Err(RegionError::AxisAlignmentMismatch {
                        at: at(),
                        why: format!(
                            "broadcast_dimensions {dims:?} must be strictly increasing positions of result shape {} , one per operand axis (operand shape {})",
                            fmt_shape(&result),
                            fmt_shape(&shape)
                        ),
                    });
                }
                if shape
                    .iter()
                    .zip(dims)
                    .any(|(s, d)| !s.is_int(1) && *s != result[*d])
                {
                    return Err(RegionError::BroadcastMismatch {
                        at: at(),
                        operand: fmt_shape(&shape),
                        result: fmt_shape(&result),
                        dims: dims.clone(),
                    });
                }
                Ok(f)
            }
            Expr::Transpose {
                operand,
                permutation,
            } => {
                let f = self.expr(operand, scope, guards)?;
                let mut sorted = permutation.clone();
                sorted.sort_unstable();
                if sorted != (0..f.len()).collect::<Vec<_>>() {
                    return Err(RegionError::AxisAlignmentMismatch {
                        at: at(),
                        why: format!(
                            "permutation {permutation:?} is not a permutation of the operand's {} axes",
                            f.len()
                        ),
                    });
                }
                Ok(f)
            }
        }
    }

    fn reduce(
        &self,
        red: &Reduce,
        scope: &mut Vec<(String, Dim)>,
        guards: &mut Vec<Guard>,
    ) -> VResult<BTreeSet<usize>> {
        let at = self.at.clone();
        let Some(dt) = red.dtype else {
            return Err(RegionError::AccDtypeMissing { at });
        };
        unique(red.axes.iter(), "reduce axes")?;
        if let Some((n, _)) = red.extents.iter().find(|(n, _)| !red.axes.contains(n)) {
            return Err(RegionError::ReduceExtentUnknown {
                axis: n.clone(),
                at,
                why: "`extents` names an axis the reduce does not reduce".into(),
            });
        }
        let sizes = iter_sizes(self.r)?;
        let ext = reduce_extents(self.r, red, &sizes, &at)?;
        if let Expr::Select { otherwise, .. } = &red.body {
            let want = red.op.identity(dt);
            if let Expr::Const(c) = **otherwise {
                if c != want && !(c.is_nan() && want.is_nan()) {
                    return Err(RegionError::NeutralInvalid {
                        at,
                        op: super::json::reduce_op_name(red.op),
                        got: c,
                        want,
                    });
                }
            }
        }
        let base = scope.len();
        scope.extend(red.axes.iter().cloned().zip(ext));
        let body = self.expr(&red.body, scope, guards);
        scope.truncate(base);
        Ok(body?.into_iter().filter(|p| *p < base).collect())
    }

    fn pred(&self, p: &Pred, scope: &[(String, Dim)]) -> VResult<BTreeSet<usize>> {
        match p {
            Pred::And(ps) | Pred::Or(ps) => {
                let mut f = BTreeSet::new();
                for q in ps {
                    f.extend(self.pred(q, scope)?);
                }
                Ok(f)
            }
            Pred::Cmp(_, a, b) => {
                let mut f = self.axis(a, scope)?;
                f.extend(self.axis(b, scope)?);
                Ok(f)
            }
        }
    }

    /// Checks an index expression; returns the axes it uses.
    fn axis(&self, e: &AxisExpr, scope: &[(String, Dim)]) -> VResult<BTreeSet<usize>> {
        match e {
            AxisExpr::Const(_) => Ok(BTreeSet::new()),
            AxisExpr::Name(n) => match lookup(scope, n) {
                Some(p) => Ok([p].into()),
                None if self.symbols.contains(n) => Ok(BTreeSet::new()),
                None => Err(RegionError::UnboundName {
                    name: n.clone(),
                    at: self.at.clone(),
                }),
            },
            AxisExpr::Add(l) => {
                let mut f = BTreeSet::new();
                for x in l {
                    f.extend(self.axis(x, scope)?);
                }
                Ok(f)
            }
            AxisExpr::Mul(a, b) => {
                let fa = self.axis(a, scope)?;
                let fb = self.axis(b, scope)?;
                if !fa.is_empty() && !fb.is_empty() {
                    return Err(RegionError::NonAffineMap {
                        at: self.at.clone(),
                        why: "both sides of `mul` depend on axes".into(),
                    });
                }
                Ok(fa.into_iter().chain(fb).collect())
            }
            AxisExpr::FloorDiv(x, c) => {
                if *c <= 0 {
                    return Err(RegionError::NonAffineMap {
                        at: self.at.clone(),
                        why: format!("floordiv by {c}"),
                    });
                }
                self.axis(x, scope)
            }
            AxisExpr::Min(a, b) | AxisExpr::Max(a, b) => {
                let mut f = self.axis(a, scope)?;
                f.extend(self.axis(b, scope)?);
                if !f.is_empty() {
                    return Err(RegionError::NonAffineMap {
                        at: self.at.clone(),
                        why: format!("`{e}` takes the min/max of an axis (only sizes may be)"),
                    });
                }
                Ok(f)
            }
        }
    }

    /// True when `d` is known (with the bindings) to be empty: an axis of that extent has no
    /// point, so nothing under it is evaluated.
    fn empty_extent(&self, d: &Dim) -> bool {
        d.eval_with(self.bindings).is_ok_and(|v| v <= 0)
    }

    /// `UnguardedAccess` when the index range is known and leaves `[0, size)` — unless the read is
    /// never executed: an iter or an enclosing reduce axis is known to be empty (a zero-size
    /// slice, an expand of an empty tensor, a symbol bound to 0: an empty iteration space has no
    /// point to evaluate a let at), or an enclosing `select`'s guard never holds.
    fn bounds_check(
        &self,
        tensor: &str,
        j: usize,
        m: &AxisExpr,
        size: &Dim,
        scope: &[(String, Dim)],
        guards: &[Guard],
    ) -> VResult<()> {
        let Ok(size) = size.eval_with(self.bindings) else {
            return Ok(());
        };
        // The scope holds the iters, then the enclosing reduce axes.
        if self.dead.get() > 0 || scope.iter().any(|(_, d)| self.empty_extent(d)) {
            return Ok(());
        }
        let b = Bounds {
            scope,
            bindings: self.bindings,
        };
        let Some((mut lo, mut hi)) = b.guarded(m, guards) else {
            return Ok(());
        };
        if lo <= hi && (lo < 0 || hi >= size) {
            match b.exact(m, guards, size) {
                Some(None) => return Ok(()),
                Some(Some(range)) => (lo, hi) = range,
                None => {}
            }
            return Err(RegionError::UnguardedAccess {
                tensor: tensor.to_string(),
                at: self.at.clone(),
                axis: j,
                lo,
                hi,
                size,
            });
        }
        Ok(())
    }
}

fn conjuncts(p: &Pred, out: &mut Vec<Guard>) {
    match p {
        Pred::And(ps) => ps.iter().for_each(|q| conjuncts(q, out)),
        Pred::Or(ps) if ps.len() == 1 => conjuncts(&ps[0], out),
        Pred::Or(_) => {}
        Pred::Cmp(op, a, b) => out.push((*op, a.clone(), b.clone())),
    }
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
