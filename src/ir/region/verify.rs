//! The region verifier: names, scopes, access maps, reduce extents and accumulators, view shapes,
//! yields, and (best effort, when sizes are known) out-of-bounds reads without a guarding
//! `select` (seed 001 §6.7, §6.10). Errors carry codes `E12xx`.

use super::{AxisExpr, CmpOp, Expr, Pred, Reduce, Region};
use crate::diag::{Diagnostic, Diagnostics, Location};
use crate::ir::dim::{fmt_shape, Dim};
use std::collections::{BTreeMap, BTreeSet};

/// A region error (verifier `E1200`–`E1216`, playback `E1220`–`E1223`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RegionError {
    #[error("invalid region JSON: {0}")]
    Json(String),
    #[error("the name `{name}` is declared twice ({what})")]
    DuplicateName { name: String, what: &'static str },
    #[error("`{name}` is not a let defined before `{at}`")]
    UndefinedLet { name: String, at: String },
    #[error("`{at}` reads `{tensor}`, which is not a region input")]
    UnknownTensor { tensor: String, at: String },
    #[error("`{at}` reads `{tensor}` with {got} indices, but it has rank {rank}")]
    ReadRankMismatch {
        tensor: String,
        at: String,
        rank: usize,
        got: usize,
    },
    #[error("`{name}` in `{at}` is neither an axis in scope nor a size symbol of the region")]
    UnboundName { name: String, at: String },
    #[error("index expression in `{at}` is not affine + floordiv: {why}")]
    NonAffineMap { at: String, why: String },
    #[error("reduce axis `{axis}` in `{at}` has no extent: {why}")]
    ReduceExtentUnknown {
        axis: String,
        at: String,
        why: String,
    },
    #[error("the reduce in `{at}` has no accumulation `dtype`")]
    AccDtypeMissing { at: String },
    #[error("`{at}` reads `{tensor}` axis {axis} at indices [{lo}, {hi}] outside [0, {size}) without a guarding select")]
    UnguardedAccess {
        tensor: String,
        at: String,
        axis: usize,
        lo: i64,
        hi: i64,
        size: i64,
    },
    #[error("BroadcastInDim in `{at}`: operand shape {operand} does not fit result shape {result} along broadcast_dimensions {dims:?}")]
    BroadcastMismatch {
        at: String,
        operand: String,
        result: String,
        dims: Vec<usize>,
    },
    #[error("`{at}`: {why}")]
    AxisAlignmentMismatch { at: String, why: String },
    #[error("the reduce ({op}) in `{at}` selects the neutral {got}, but its identity is {want}")]
    NeutralInvalid {
        at: String,
        op: &'static str,
        got: f64,
        want: f64,
    },
    #[error("yield: {why}")]
    BadYield { why: String },
    #[error("output `{output}` has shape {got}, but the iteration space is {want}")]
    OutputShapeMismatch {
        output: String,
        got: String,
        want: String,
    },
    #[error("yield casts to {cast} but output `{output}` is {dtype}")]
    YieldDtypeMismatch {
        output: String,
        cast: String,
        dtype: String,
    },
    #[error("iter `{iter}` has no size and no output gives one")]
    IterSizeMissing { iter: String },
    #[error("`{at}` reads `{tensor}` at {index:?}, outside its shape {shape:?}")]
    OutOfBounds {
        tensor: String,
        at: String,
        index: Vec<i64>,
        shape: Vec<usize>,
    },
    #[error("symbol `{0}` has no value (or a size overflows)")]
    UnboundSymbol(String),
    #[error("input `{name}`: {why}")]
    InputMismatch { name: String, why: String },
    #[error("size of `{what}` is negative or too large: {value}")]
    BadSize { what: String, value: i64 },
}

impl RegionError {
    /// `(code, kind)`.
    pub fn code(&self) -> (&'static str, &'static str) {
        use RegionError as E;
        match self {
            E::Json(_) => ("E1200", "InvalidRegion"),
            E::DuplicateName { .. } => ("E1201", "DuplicateName"),
            E::UndefinedLet { .. } => ("E1202", "UndefinedLet"),
            E::UnknownTensor { .. } => ("E1203", "UnknownTensor"),
            E::ReadRankMismatch { .. } => ("E1204", "AxisAlignmentMismatch"),
            E::UnboundName { .. } => ("E1205", "UnboundAxis"),
            E::NonAffineMap { .. } => ("E1206", "NonAffineMap"),
            E::ReduceExtentUnknown { .. } => ("E1207", "ReduceExtentUnknown"),
            E::AccDtypeMissing { .. } => ("E1208", "AccDtypeMissing"),
            E::UnguardedAccess { .. } => ("E1209", "UnguardedAccess"),
            E::BroadcastMismatch { .. } => ("E1210", "BroadcastMismatch"),
            E::AxisAlignmentMismatch { .. } => ("E1211", "AxisAlignmentMismatch"),
            E::NeutralInvalid { .. } => ("E1212", "NeutralInvalid"),
            E::BadYield { .. } => ("E1213", "BadYield"),
            E::OutputShapeMismatch { .. } => ("E1214", "OutputShapeMismatch"),
            E::YieldDtypeMismatch { .. } => ("E1215", "YieldDtypeMismatch"),
            E::IterSizeMissing { .. } => ("E1216", "IterSizeMissing"),
            E::OutOfBounds { .. } => ("E1220", "UnguardedAccess"),
            E::UnboundSymbol(_) => ("E1221", "UnboundSymbol"),
            E::InputMismatch { .. } => ("E1222", "InputMismatch"),
            E::BadSize { .. } => ("E1223", "BadSize"),
        }
    }

    fn suggestion(&self) -> &'static str {
        use RegionError as E;
        match self {
            E::Json(_) => "write the seed 001 §6.8 form: {\"region\": {\"name\", \"iters\", \"inputs\", \"outputs\", \"lets\", \"yield\"}}",
            E::DuplicateName { .. } => "rename one of them",
            E::UndefinedLet { .. } => "define the let earlier (lets are SSA, in order)",
            E::UnknownTensor { .. } => "declare the tensor in `inputs`",
            E::ReadRankMismatch { .. } | E::AxisAlignmentMismatch { .. } => {
                "give one index (or dimension) per axis"
            }
            E::UnboundName { .. } => "bind the axis with an iter or an enclosing reduce, or use a symbol of a shape",
            E::NonAffineMap { .. } => "keep one side of `mul` free of axes and divide by a positive integer",
            E::ReduceExtentUnknown { .. } => "add `\"extents\": {\"k\": \"K\"}` to the reduce",
            E::AccDtypeMissing { .. } => "add `\"dtype\": \"fp32\"` to the reduce",
            E::UnguardedAccess { .. } | E::OutOfBounds { .. } => {
                "wrap the read in a `select` whose predicate keeps the index inside the tensor"
            }
            E::BroadcastMismatch { .. } => "make every operand dimension equal its result dimension (or 1)",
            E::NeutralInvalid { .. } => "select the reduce op's identity (0 for sum, -INF for max, …)",
            E::BadYield { .. } => "yield every output exactly once from a let",
            E::OutputShapeMismatch { .. } => "make the output shape the iters' sizes",
            E::YieldDtypeMismatch { .. } => "cast to the output's dtype",
            E::IterSizeMissing { .. } => "give the iter a `size`",
            E::UnboundSymbol(_) => "pass a value for the symbol",
            E::InputMismatch { .. } => "pass every input with its declared dtype and shape",
            E::BadSize { .. } => "bind symbols so that sizes are non-negative",
        }
    }

    /// The user-facing diagnostic.
    pub fn to_diagnostic(&self) -> Diagnostic {
        let (code, kind) = self.code();
        let at = match self {
            RegionError::UnknownTensor { tensor, .. }
            | RegionError::UnguardedAccess { tensor, .. }
            | RegionError::OutOfBounds { tensor, .. }
            | RegionError::ReadRankMismatch { tensor, .. } => Location::Tensor {
                tensor: tensor.clone(),
            },
            RegionError::InputMismatch { name, .. } => Location::Tensor {
                tensor: name.clone(),
            },
            RegionError::OutputShapeMismatch { output, .. }
            | RegionError::YieldDtypeMismatch { output, .. } => Location::Tensor {
                tensor: output.clone(),
            },
            RegionError::UnboundSymbol(s) => Location::Symbol { symbol: s.clone() },
            _ => Location::Document,
        };
        Diagnostic::error(code, kind, at, self.to_string(), self.suggestion())
    }
}

impl From<RegionError> for Diagnostic {
    fn from(e: RegionError) -> Diagnostic {
        e.to_diagnostic()
    }
}

impl From<RegionError> for Diagnostics {
    fn from(e: RegionError) -> Diagnostics {
        Diagnostics::one(e.to_diagnostic())
    }
}

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
pub fn verify(region: &Region) -> VResult<Checked> {
    verify_with(region, &BTreeMap::new())
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
        Expr::Reduce(red) if red.axes.iter().any(|a| a == axis) => {}
        _ => children(e)
            .into_iter()
            .for_each(|c| derive_extent(r, c, axis, out)),
    }
}

/// The direct sub-expressions of `e`.
pub fn children(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::Const(_) | Expr::Let(_) | Expr::Read { .. } => vec![],
        Expr::Unary(_, x) | Expr::Cast { x, .. } => vec![x],
        Expr::Binary(_, a, b) => vec![a, b],
        Expr::Select {
            then, otherwise, ..
        } => vec![then, otherwise],
        Expr::Reduce(r) => vec![&r.body],
        Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => vec![operand],
    }
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
    children(e)
        .into_iter()
        .for_each(|c| collect_symbols(c, out));
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
}

/// Position of the innermost binding of `name` in `scope`.
fn lookup(scope: &[(String, Dim)], name: &str) -> Option<usize> {
    scope.iter().rposition(|(n, _)| n == name)
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
                let t = self.expr(then, scope, guards);
                guards.truncate(n);
                f.extend(t?);
                f.extend(self.expr(otherwise, scope, guards)?);
                Ok(f)
            }
            Expr::Reduce(red) => self.reduce(red, scope, guards),
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
        }
    }

    /// `UnguardedAccess` when the index range is known and leaves `[0, size)`.
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
        let b = Bounds {
            scope,
            bindings: self.bindings,
        };
        let Some((mut lo, mut hi)) = b.interval(m) else {
            return Ok(());
        };
        if let Some(lm) = b.linear(m).filter(|l| !l.0.is_empty()) {
            for (op, x, y) in guards {
                if let Some((l2, h2)) = b.narrow(&lm, *op, x, y) {
                    lo = lo.max(l2);
                    hi = hi.min(h2);
                }
            }
        }
        if lo <= hi && (lo < 0 || hi >= size) {
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

/// Linear form: coefficients per scope position, plus a constant.
type Linear = (BTreeMap<usize, i64>, i64);

struct Bounds<'a> {
    scope: &'a [(String, Dim)],
    bindings: &'a BTreeMap<String, i64>,
}

impl Bounds<'_> {
    fn name(&self, n: &str) -> Option<Result<usize, i64>> {
        match lookup(self.scope, n) {
            Some(p) => Some(Ok(p)),
            None => self.bindings.get(n).map(|v| Err(*v)),
        }
    }

    fn linear(&self, e: &AxisExpr) -> Option<Linear> {
        match e {
            AxisExpr::Const(c) => Some((BTreeMap::new(), *c)),
            AxisExpr::Name(n) => match self.name(n)? {
                Ok(p) => Some(([(p, 1)].into(), 0)),
                Err(v) => Some((BTreeMap::new(), v)),
            },
            AxisExpr::Add(l) => {
                let mut acc: Linear = (BTreeMap::new(), 0);
                for x in l {
                    let (m, c) = self.linear(x)?;
                    acc.1 = acc.1.checked_add(c)?;
                    for (p, k) in m {
                        *acc.0.entry(p).or_insert(0) += k;
                    }
                }
                acc.0.retain(|_, k| *k != 0);
                Some(acc)
            }
            AxisExpr::Mul(a, b) => {
                let (la, lb) = (self.linear(a)?, self.linear(b)?);
                let (k, (m, c)) = match (la.0.is_empty(), lb.0.is_empty()) {
                    (true, _) => (la.1, lb),
                    (_, true) => (lb.1, la),
                    _ => return None,
                };
                let m = m
                    .into_iter()
                    .map(|(p, x)| Some((p, x.checked_mul(k)?)))
                    .collect::<Option<BTreeMap<_, _>>>()?;
                Some((
                    m.into_iter().filter(|(_, x)| *x != 0).collect(),
                    c.checked_mul(k)?,
                ))
            }
            AxisExpr::FloorDiv(..) => None,
        }
    }

    fn extent(&self, p: usize) -> Option<i64> {
        self.scope[p].1.eval_with(self.bindings).ok()
    }

    fn interval(&self, e: &AxisExpr) -> Option<(i64, i64)> {
        if let Some((m, c)) = self.linear(e) {
            let (mut lo, mut hi) = (c, c);
            for (p, k) in m {
                let top = self.extent(p)?.checked_sub(1)?.checked_mul(k)?;
                lo = lo.checked_add(top.min(0))?;
                hi = hi.checked_add(top.max(0))?;
            }
            return Some((lo, hi));
        }
        match e {
            AxisExpr::FloorDiv(x, c) if *c > 0 => {
                let (lo, hi) = self.interval(x)?;
                Some((lo.div_euclid(*c), hi.div_euclid(*c)))
            }
            AxisExpr::Add(l) => l.iter().try_fold((0i64, 0i64), |(a, b), x| {
                let (lo, hi) = self.interval(x)?;
                Some((a.checked_add(lo)?, b.checked_add(hi)?))
            }),
            AxisExpr::Mul(a, b) => {
                let (a, b) = (self.interval(a)?, self.interval(b)?);
                let ps = [a.0 * b.0, a.0 * b.1, a.1 * b.0, a.1 * b.1];
                Some((*ps.iter().min()?, *ps.iter().max()?))
            }
            _ => None,
        }
    }

    /// The range a guard `x op y` allows for the linear index `lm`, when `x - y = ±lm + d`.
    fn narrow(&self, lm: &Linear, op: CmpOp, x: &AxisExpr, y: &AxisExpr) -> Option<(i64, i64)> {
        let (mx, cx) = self.linear(x)?;
        let (my, cy) = self.linear(y)?;
        let mut diff = mx;
        for (p, k) in my {
            *diff.entry(p).or_insert(0) -= k;
        }
        diff.retain(|_, k| *k != 0);
        let dconst = cx.checked_sub(cy)?;
        let neg: BTreeMap<usize, i64> = lm.0.iter().map(|(p, k)| (*p, -k)).collect();
        // x - y = s·(lm - lm.c) + dconst, so `lm = s·(x - y - dconst) + lm.c`.
        let s = if diff == lm.0 {
            1
        } else if diff == neg {
            -1
        } else {
            return None;
        };
        // Range of t = x - y allowed by `t op 0`.
        let big = i64::MAX / 4;
        let (tlo, thi) = match op {
            CmpOp::Ge => (0, big),
            CmpOp::Gt => (1, big),
            CmpOp::Le => (-big, 0),
            CmpOp::Lt => (-big, -1),
            CmpOp::Eq => (0, 0),
        };
        let at = |t: i64| {
            t.saturating_sub(dconst)
                .saturating_mul(s)
                .saturating_add(lm.1)
        };
        let (a, b) = (at(tlo), at(thi));
        Some((a.min(b), a.max(b)))
    }
}
