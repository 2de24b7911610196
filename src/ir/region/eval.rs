//! CPU playback of a region (seed 001 §6.11): verify, bind sizes, compile names to slots, then
//! materialize every let over its free iters in order (parallel over points with rayon) and write
//! the yields. An out-of-bounds read is an error (`E1220`), never a panic.

use super::kind::{const_value, Kind, Kinds};
use super::verify::{reduce_extents, verify_with, Checked, RegionError};
use super::{AxisExpr, BinaryFn, CmpOp, Expr, Pred, Region, UnaryFn};
use crate::diag::Diagnostics;
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::tiny::ReduceOp;
use crate::tensor::Tensor;
use rayon::prelude::*;
use std::collections::BTreeMap;

#[path = "eval_ops.rs"]
mod ops;
#[path = "eval_rows.rs"]
mod rows;

use ops::{fold, unary};
use rows::class;

type EResult<T> = Result<T, RegionError>;

/// How a let is played back: a row at a time (the default) or point by point (the original
/// evaluator, kept as the row evaluator's oracle in tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Rows,
    #[cfg_attr(not(test), allow(dead_code))]
    Points,
}

/// Evaluates `region` with symbol values `bindings` and inputs by name; returns every output by
/// name. Inputs must have their declared dtype and bound shape.
pub fn evaluate_region(
    region: &Region,
    bindings: &BTreeMap<String, i64>,
    inputs: &BTreeMap<String, Tensor>,
) -> Result<BTreeMap<String, Tensor>, Diagnostics> {
    run(region, bindings, inputs, Mode::Rows).map_err(Diagnostics::from)
}

/// [`evaluate_region`] point by point (no row evaluation): the oracle of the row evaluator.
#[cfg(test)]
pub(crate) fn evaluate_region_points(
    region: &Region,
    bindings: &BTreeMap<String, i64>,
    inputs: &BTreeMap<String, Tensor>,
) -> Result<BTreeMap<String, Tensor>, Diagnostics> {
    run(region, bindings, inputs, Mode::Points).map_err(Diagnostics::from)
}

fn bind(d: &Dim, what: &str, b: &BTreeMap<String, i64>) -> EResult<usize> {
    let v = d.eval_with(b).map_err(|e| match e {
        crate::ir::dim::DimError::Unbound(s) => RegionError::UnboundSymbol(s),
        crate::ir::dim::DimError::Overflow => RegionError::UnboundSymbol(d.to_string()),
    })?;
    usize::try_from(v)
        .ok()
        .filter(|v| *v <= u32::MAX as usize)
        .ok_or(RegionError::BadSize {
            what: what.to_string(),
            value: v,
        })
}

fn run(
    r: &Region,
    b: &BTreeMap<String, i64>,
    inputs: &BTreeMap<String, Tensor>,
    mode: Mode,
) -> EResult<BTreeMap<String, Tensor>> {
    let Checked {
        iter_sizes,
        let_free,
    } = verify_with(r, b)?;
    let sizes: Vec<usize> = iter_sizes
        .iter()
        .zip(&r.iters)
        .map(|(d, it)| bind(d, &it.name, b))
        .collect::<EResult<_>>()?;
    let total = sizes
        .iter()
        .try_fold(1usize, |a, s| a.checked_mul(*s))
        .ok_or(RegionError::BadSize {
            what: "iteration space".into(),
            value: i64::MAX,
        })?;
    let mut ins = Vec::new();
    for inp in &r.inputs {
        let t = inputs
            .get(&inp.name)
            .ok_or_else(|| RegionError::InputMismatch {
                name: inp.name.clone(),
                why: "no value given".into(),
            })?;
        let shape: Vec<usize> = inp
            .memref
            .shape
            .iter()
            .map(|s| bind(&s.0, &inp.name, b))
            .collect::<EResult<_>>()?;
        if t.dtype != inp.dtype || t.shape != shape {
            return Err(RegionError::InputMismatch {
                name: inp.name.clone(),
                why: format!(
                    "declared {} {:?}, given {} {:?}",
                    inp.dtype, shape, t.dtype, t.shape
                ),
            });
        }
        ins.push(t);
    }
    let mut comp = Compiler {
        r,
        b,
        iter_sizes: &iter_sizes,
        let_free: &let_free,
        sizes: &sizes,
        nslots: r.iters.len(),
        at: String::new(),
        let_kinds: Vec::new(),
        row: None,
        slot_max: sizes
            .iter()
            .map(|s| (*s as i64).saturating_sub(1).max(0))
            .collect(),
    };
    let mut values: Vec<Vec<f64>> = Vec::new();
    for (li, l) in r.lets.iter().enumerate() {
        if total == 0 {
            // An empty iteration space has no point to evaluate a let at: nothing is read.
            values.push(Vec::new());
            continue;
        }
        comp.at = l.name.clone();
        // The row iter: the let's innermost free iter (rows are contiguous in its array).
        comp.row = match (mode, &l.expr) {
            (Mode::Rows, e) if !matches!(e, Expr::Scan(_)) => let_free[li].last().copied(),
            _ => None,
        };
        let scope: Vec<(String, usize)> = r
            .iters
            .iter()
            .enumerate()
            .map(|(i, it)| (it.name.clone(), i))
            .collect();
        if let Expr::Scan(sc) = &l.expr {
            let code = comp.expr(&sc.body, &mut scope.clone())?;
            comp.let_kinds.push(comp.kind(&l.expr));
            let cx = Ctx {
                inputs: &ins,
                names: r.inputs.iter().map(|i| i.name.clone()).collect(),
                lets: &values,
                at: &l.name,
            };
            let axis = r.iters.iter().position(|i| i.name == sc.axis);
            let axis = axis.ok_or_else(|| RegionError::UnboundName {
                name: sc.axis.clone(),
                at: l.name.clone(),
            })?;
            let line = ScanLine {
                sc,
                free: &let_free[li],
                axis,
                sizes: &sizes,
                nslots: comp.nslots,
            };
            let vals = line.run(&cx, &code)?;
            values.push(vals);
            continue;
        }
        let code = comp.expr(&l.expr, &mut scope.clone())?;
        let kind = comp.kind(&l.expr);
        comp.let_kinds.push(kind);
        let free = &let_free[li];
        let fsizes: Vec<usize> = free.iter().map(|i| sizes[*i]).collect();
        let n: usize = fsizes.iter().product();
        let cx = Ctx {
            inputs: &ins,
            names: r.inputs.iter().map(|i| i.name.clone()).collect(),
            lets: &values,
            at: &l.name,
        };
        let nslots = comp.nslots;
        if let Some(row) = comp.row {
            let rl = rows::RowLet {
                free,
                sizes: &sizes,
                row,
                nslots,
            };
            values.push(rl.run(&cx, &code)?);
            continue;
        }
        let vals = (0..n)
            .into_par_iter()
            .map_init(
                || vec![0i64; nslots],
                |env, flat| {
                    set_slots(env, free, &fsizes, flat);
                    cx.eval(&code, env)
                },
            )
            .collect::<EResult<Vec<f64>>>()?;
        values.push(vals);
    }
    let mut out = BTreeMap::new();
    for y in &r.yields {
        let (Some(li), Some(o)) = (
            r.lets.iter().position(|l| l.name == y.from),
            r.output(&y.to),
        ) else {
            continue;
        };
        let src = &values[li];
        if let_free[li].len() == sizes.len() {
            // The let depends on every iter: its array is the output, row-major.
            out.insert(
                o.name.clone(),
                Tensor::from_f64(o.dtype, sizes.clone(), src),
            );
            continue;
        }
        let strides = let_strides(&let_free[li], &sizes);
        let vals: Vec<f64> = (0..total)
            .into_par_iter()
            .map(|flat| {
                let mut rest = flat;
                let mut idx = 0;
                for i in (0..sizes.len()).rev() {
                    let c = rest % sizes[i];
                    rest /= sizes[i];
                    idx += c * strides[i];
                }
                src.get(idx).copied().unwrap_or(f64::NAN)
            })
            .collect();
        out.insert(
            o.name.clone(),
            Tensor::from_f64(o.dtype, sizes.clone(), &vals),
        );
    }
    Ok(out)
}

/// A scan let evaluated line by line: every point of its free iters but the scanned one is a
/// line (parallel), folded sequentially along the scanned iter in scan order — linear work.
struct ScanLine<'a> {
    sc: &'a super::Scan,
    /// The let's free iters (the scanned one among them), ascending.
    free: &'a [usize],
    /// The scanned iter.
    axis: usize,
    sizes: &'a [usize],
    nslots: usize,
}

impl ScanLine<'_> {
    fn run(&self, cx: &Ctx, body: &CExpr) -> EResult<Vec<f64>> {
        let strides = let_strides(self.free, self.sizes);
        let others: Vec<usize> = self
            .free
            .iter()
            .copied()
            .filter(|i| *i != self.axis)
            .collect();
        let osizes: Vec<usize> = others.iter().map(|i| self.sizes[*i]).collect();
        let lines: usize = osizes.iter().product();
        let len = self.sizes[self.axis];
        let (op, dt) = (self.sc.op, self.sc.dtype);
        let init = dt.round(op.identity(dt));
        let per_line = (0..lines)
            .into_par_iter()
            .map(|flat| {
                let mut env = vec![0i64; self.nslots];
                let mut rest = flat;
                let mut base = 0usize;
                for (slot, s) in others.iter().zip(&osizes).rev() {
                    env[*slot] = (rest % s) as i64;
                    base += (rest % s) * strides[*slot];
                    rest /= s;
                }
                let mut acc = init;
                let mut out = Vec::with_capacity(len);
                for step in 0..len {
                    let k = if self.sc.reverse {
                        len - 1 - step
                    } else {
                        step
                    };
                    env[self.axis] = k as i64;
                    let v = dt.round(cx.eval(body, &mut env)?);
                    let next = dt.round(fold(op, dt, acc, v));
                    out.push((
                        base + k * strides[self.axis],
                        if self.sc.exclusive { acc } else { next },
                    ));
                    acc = next;
                }
                Ok(out)
            })
            .collect::<EResult<Vec<_>>>()?;
        let mut vals = vec![0.0; lines * len];
        for (at, v) in per_line.into_iter().flatten() {
            if let Some(slot) = vals.get_mut(at) {
                *slot = v;
            }
        }
        Ok(vals)
    }
}

/// Row-major strides of a let's array, per iter (0 for iters it does not depend on).
fn let_strides(free: &[usize], sizes: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; sizes.len()];
    let mut s = 1;
    for i in free.iter().rev() {
        strides[*i] = s;
        s *= sizes[*i];
    }
    strides
}

/// An index expression's class along the row iter, and its affine form where it has one.
#[derive(Clone, Debug)]
struct Cls {
    class: Class,
    aff: Option<rows::Affine>,
}

/// How an index expression varies along the row iter of a row evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Independent of the row iter.
    Uniform,
    /// Affine in the row iter with this slope (where no operation overflows).
    Linear(i64),
    /// Anything else (floordiv, min or max of the row iter): evaluated lane by lane.
    General,
}

#[derive(Debug)]
enum CAxis {
    Const(i64),
    Slot(usize),
    Add(Vec<CAxis>),
    Mul(Box<CAxis>, Box<CAxis>),
    FloorDiv(Box<CAxis>, i64),
    Min(Box<CAxis>, Box<CAxis>),
    Max(Box<CAxis>, Box<CAxis>),
}

#[derive(Debug)]
enum CPred {
    And(Vec<CPred>),
    Or(Vec<CPred>),
    /// A comparison, with its sides' classes along the row iter.
    Cmp(CmpOp, CAxis, CAxis, Cls, Cls),
}

#[derive(Debug)]
enum CExpr {
    Const(f64),
    /// A let's array, addressed by `(env slot, stride)` pairs.
    Let(usize, Vec<(usize, usize)>),
    Read {
        input: usize,
        map: Vec<CAxis>,
        /// The class of every map entry along the row iter.
        cls: Vec<Cls>,
        shape: Vec<usize>,
    },
    /// An op computing in a kind (see [`Kind`]).
    Unary(UnaryFn, Kind, Box<CExpr>),
    Binary(BinaryFn, Kind, Box<CExpr>, Box<CExpr>),
    Select(CPred, Box<CExpr>, Box<CExpr>),
    Reduce {
        op: ReduceOp,
        slots: Vec<usize>,
        extents: Vec<i64>,
        init: f64,
        dtype: DType,
        body: Box<CExpr>,
    },
    Cast(DType, Box<CExpr>),
    Index(CAxis, Cls),
    Where(Box<CExpr>, Box<CExpr>, Box<CExpr>),
    Gather {
        input: usize,
        map: Vec<CAxis>,
        shape: Vec<usize>,
        axis: usize,
        index: Box<CExpr>,
    },
}

struct Compiler<'a> {
    r: &'a Region,
    b: &'a BTreeMap<String, i64>,
    iter_sizes: &'a [Dim],
    let_free: &'a [Vec<usize>],
    sizes: &'a [usize],
    nslots: usize,
    at: String,
    /// The kinds of the lets compiled so far.
    let_kinds: Vec<Kind>,
    /// The slot of the row iter of the let being compiled (row evaluation), if any.
    row: Option<usize>,
    /// The largest value of every env slot allocated so far (iters, then reduce axes).
    slot_max: Vec<i64>,
}

fn lookup(scope: &[(String, usize)], n: &str) -> Option<usize> {
    scope.iter().rev().find(|(m, _)| m == n).map(|(_, s)| *s)
}

impl Compiler<'_> {
    /// The kind of `e`'s value.
    fn kind(&self, e: &Expr) -> Kind {
        self.with_kinds(&|k| k.of(e))
    }

    /// The kind the operands `es` of one op compute in.
    fn kinds_of(&self, es: &[&Expr]) -> Kind {
        self.with_kinds(&|k| k.operands(es))
    }

    fn with_kinds(&self, f: &dyn Fn(&Kinds) -> Kind) -> Kind {
        let input = |n: &str| self.r.input(n).map(|i| i.dtype);
        let let_kind = |n: &str| {
            let li = self.r.lets.iter().position(|l| l.name == n)?;
            self.let_kinds.get(li).copied()
        };
        f(&Kinds {
            input: &input,
            let_kind: &let_kind,
        })
    }

    /// The position of input `tensor` and its bound shape.
    fn input_slot(&self, tensor: &str) -> EResult<(usize, Vec<usize>)> {
        let input = self
            .r
            .inputs
            .iter()
            .position(|i| i.name == tensor)
            .ok_or_else(|| RegionError::UnknownTensor {
                tensor: tensor.to_string(),
                at: self.at.clone(),
            })?;
        let shape = self.r.inputs[input]
            .memref
            .shape
            .iter()
            .map(|s| bind(&s.0, tensor, self.b))
            .collect::<EResult<_>>()?;
        Ok((input, shape))
    }

    fn expr(&mut self, e: &Expr, scope: &mut Vec<(String, usize)>) -> EResult<CExpr> {
        Ok(match e {
            Expr::Const(c) => CExpr::Const(const_value(*c)),
            Expr::Let(n) => {
                let li = self
                    .r
                    .lets
                    .iter()
                    .position(|l| &l.name == n)
                    .ok_or_else(|| RegionError::UndefinedLet {
                        name: n.clone(),
                        at: self.at.clone(),
                    })?;
                let strides = let_strides(&self.let_free[li], self.sizes);
                let mut addr = Vec::new();
                for i in &self.let_free[li] {
                    let name = &self.r.iters[*i].name;
                    let slot = lookup(scope, name).ok_or_else(|| RegionError::UnboundName {
                        name: name.clone(),
                        at: self.at.clone(),
                    })?;
                    addr.push((slot, strides[*i]));
                }
                CExpr::Let(li, addr)
            }
            Expr::Read { tensor, map } => {
                let (input, shape) = self.input_slot(tensor)?;
                let map: Vec<CAxis> = map
                    .iter()
                    .map(|m| self.axis(m, scope))
                    .collect::<EResult<_>>()?;
                let cls = map.iter().map(|m| self.class(m)).collect();
                CExpr::Read {
                    input,
                    map,
                    cls,
                    shape,
                }
            }
            Expr::Unary(f, x) => CExpr::Unary(*f, self.kind(x), Box::new(self.expr(x, scope)?)),
            Expr::Binary(f, a, b) => CExpr::Binary(
                *f,
                self.kinds_of(&[a, b]),
                Box::new(self.expr(a, scope)?),
                Box::new(self.expr(b, scope)?),
            ),
            Expr::Select {
                pred,
                then,
                otherwise,
            } => CExpr::Select(
                self.pred(pred, scope)?,
                Box::new(self.expr(then, scope)?),
                Box::new(self.expr(otherwise, scope)?),
            ),
            Expr::Reduce(red) => {
                let ext = reduce_extents(self.r, red, self.iter_sizes, &self.at)?;
                let extents = ext
                    .iter()
                    .zip(&red.axes)
                    .map(|(d, a)| bind(d, a, self.b).map(|v| v as i64))
                    .collect::<EResult<Vec<_>>>()?;
                let dtype = red.dtype.ok_or_else(|| RegionError::AccDtypeMissing {
                    at: self.at.clone(),
                })?;
                let base = scope.len();
                let mut slots = Vec::new();
                for a in &red.axes {
                    slots.push(self.nslots);
                    scope.push((a.clone(), self.nslots));
                    self.nslots += 1;
                    let e = extents.get(slots.len() - 1).copied().unwrap_or(0);
                    self.slot_max.push(e.saturating_sub(1).max(0));
                }
                let body = self.expr(&red.body, scope);
                scope.truncate(base);
                CExpr::Reduce {
                    op: red.op,
                    slots,
                    extents,
                    init: dtype.round(red.init.unwrap_or_else(|| red.op.identity(dtype))),
                    dtype,
                    body: Box::new(body?),
                }
            }
            Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => {
                self.expr(operand, scope)?
            }
            Expr::Cast { to, x } => CExpr::Cast(*to, Box::new(self.expr(x, scope)?)),
            Expr::Index(m) => {
                let m = self.axis(m, scope)?;
                let c = self.class(&m);
                CExpr::Index(m, c)
            }
            Expr::Where(c, a, b) => CExpr::Where(
                Box::new(self.expr(c, scope)?),
                Box::new(self.expr(a, scope)?),
                Box::new(self.expr(b, scope)?),
            ),
            Expr::Scan(_) => {
                return Err(RegionError::AxisAlignmentMismatch {
                    at: self.at.clone(),
                    why: "a scan must be a let's whole expression".into(),
                })
            }
            Expr::Gather {
                tensor,
                map,
                axis,
                index,
            } => {
                let (input, shape) = self.input_slot(tensor)?;
                let map = map
                    .iter()
                    .map(|m| self.axis(m, scope))
                    .collect::<EResult<_>>()?;
                CExpr::Gather {
                    input,
                    map,
                    shape,
                    axis: *axis,
                    index: Box::new(self.expr(index, scope)?),
                }
            }
        })
    }

    fn pred(&self, p: &Pred, scope: &[(String, usize)]) -> EResult<CPred> {
        Ok(match p {
            Pred::And(ps) => CPred::And(
                ps.iter()
                    .map(|q| self.pred(q, scope))
                    .collect::<EResult<_>>()?,
            ),
            Pred::Or(ps) => CPred::Or(
                ps.iter()
                    .map(|q| self.pred(q, scope))
                    .collect::<EResult<_>>()?,
            ),
            Pred::Cmp(op, a, b) => {
                let (a, b) = (self.axis(a, scope)?, self.axis(b, scope)?);
                let (ca, cb) = (self.class(&a), self.class(&b));
                CPred::Cmp(*op, a, b, ca, cb)
            }
        })
    }

    /// How `e` varies along the row iter (`Uniform` without one).
    fn class(&self, e: &CAxis) -> Cls {
        match self.row {
            Some(row) => Cls {
                class: class(e, row),
                aff: rows::affine(e, &self.slot_max),
            },
            None => Cls {
                class: Class::Uniform,
                aff: None,
            },
        }
    }

    fn axis(&self, e: &AxisExpr, scope: &[(String, usize)]) -> EResult<CAxis> {
        Ok(match e {
            AxisExpr::Const(c) => CAxis::Const(*c),
            AxisExpr::Name(n) => match lookup(scope, n) {
                Some(s) => CAxis::Slot(s),
                None => CAxis::Const(
                    *self
                        .b
                        .get(n)
                        .ok_or_else(|| RegionError::UnboundSymbol(n.clone()))?,
                ),
            },
            AxisExpr::Add(l) => CAxis::Add(
                l.iter()
                    .map(|x| self.axis(x, scope))
                    .collect::<EResult<_>>()?,
            ),
            AxisExpr::Mul(a, b) => CAxis::Mul(
                Box::new(self.axis(a, scope)?),
                Box::new(self.axis(b, scope)?),
            ),
            AxisExpr::FloorDiv(x, c) => CAxis::FloorDiv(Box::new(self.axis(x, scope)?), *c),
            AxisExpr::Min(a, b) => CAxis::Min(
                Box::new(self.axis(a, scope)?),
                Box::new(self.axis(b, scope)?),
            ),
            AxisExpr::Max(a, b) => CAxis::Max(
                Box::new(self.axis(a, scope)?),
                Box::new(self.axis(b, scope)?),
            ),
        })
    }
}

struct Ctx<'a> {
    inputs: &'a [&'a Tensor],
    names: Vec<String>,
    lets: &'a [Vec<f64>],
    at: &'a str,
}

fn axis(e: &CAxis, env: &[i64]) -> i64 {
    match e {
        CAxis::Const(c) => *c,
        CAxis::Slot(s) => env[*s],
        CAxis::Add(l) => l.iter().fold(0i64, |a, x| a.saturating_add(axis(x, env))),
        CAxis::Mul(a, b) => axis(a, env).saturating_mul(axis(b, env)),
        CAxis::FloorDiv(x, c) if *c > 0 => axis(x, env).div_euclid(*c),
        CAxis::FloorDiv(..) => 0,
        CAxis::Min(a, b) => axis(a, env).min(axis(b, env)),
        CAxis::Max(a, b) => axis(a, env).max(axis(b, env)),
    }
}

fn pred(p: &CPred, env: &[i64]) -> bool {
    match p {
        CPred::And(ps) => ps.iter().all(|q| pred(q, env)),
        CPred::Or(ps) => ps.iter().any(|q| pred(q, env)),
        CPred::Cmp(op, a, b, ..) => op.holds(axis(a, env), axis(b, env)),
    }
}

impl Ctx<'_> {
    fn eval(&self, e: &CExpr, env: &mut [i64]) -> EResult<f64> {
        Ok(match e {
            CExpr::Const(c) => *c,
            CExpr::Let(li, addr) => {
                let idx: usize = addr.iter().map(|(s, st)| env[*s] as usize * st).sum();
                self.lets
                    .get(*li)
                    .and_then(|v| v.get(idx))
                    .copied()
                    .unwrap_or(f64::NAN)
            }
            CExpr::Read {
                input, map, shape, ..
            } => self.load(*input, map, env, shape, None)?,
            CExpr::Gather {
                input,
                map,
                shape,
                axis: g,
                index,
            } => {
                // A non-finite or huge index saturates, then fails the bounds check.
                let v = self.eval(index, env)?.trunc() as i64;
                self.load(*input, map, env, shape, Some((*g, v)))?
            }
            CExpr::Unary(f, k, x) => k.round(unary(*f, self.eval(x, env)?)),
            CExpr::Binary(f, k, a, b) => {
                let a = self.eval(a, env)?;
                ops::binary(*f, *k, a, self.eval(b, env)?)
            }
            CExpr::Select(p, t, f) => {
                if pred(p, env) {
                    self.eval(t, env)?
                } else {
                    self.eval(f, env)?
                }
            }
            CExpr::Reduce {
                op,
                slots,
                extents,
                init,
                dtype,
                body,
            } => {
                let mut acc = *init;
                if extents.iter().all(|e| *e > 0) {
                    for s in slots {
                        env[*s] = 0;
                    }
                    loop {
                        let v = dtype.round(self.eval(body, env)?);
                        acc = dtype.round(fold(*op, *dtype, acc, v));
                        if !advance(env, slots, extents) {
                            break;
                        }
                    }
                }
                acc
            }
            CExpr::Index(m, _) => axis(m, env) as f64,
            CExpr::Where(c, a, b) => {
                if self.eval(c, env)? != 0.0 {
                    self.eval(a, env)?
                } else {
                    self.eval(b, env)?
                }
            }
            CExpr::Cast(to, x) => to.round(self.eval(x, env)?),
        })
    }

    /// Loads input `input` at `map(env)`, dimension `shift.0` moved by `shift.1` (a gather);
    /// an error outside `shape`.
    fn load(
        &self,
        input: usize,
        map: &[CAxis],
        env: &[i64],
        shape: &[usize],
        shift: Option<(usize, i64)>,
    ) -> EResult<f64> {
        let at = |j: usize, m: &CAxis| match shift {
            Some((g, v)) if g == j => axis(m, env).saturating_add(v),
            _ => axis(m, env),
        };
        let mut flat = 0usize;
        for (j, (m, s)) in map.iter().zip(shape).enumerate() {
            let i = at(j, m);
            if i < 0 || i as usize >= *s {
                return Err(RegionError::OutOfBounds {
                    tensor: self.names.get(input).cloned().unwrap_or_default(),
                    at: self.at.to_string(),
                    index: map.iter().enumerate().map(|(j, m)| at(j, m)).collect(),
                    shape: shape.to_vec(),
                });
            }
            flat = flat * s + i as usize;
        }
        Ok(self.inputs[input].get_f64(flat))
    }
}

#[cfg(test)]
#[path = "eval_tests.rs"]
mod tests;

/// Advances the reduction odometer `env[slots]` (last slot fastest) within `extents`; `false`
/// once every point was visited (the slots are back at 0).
fn advance(env: &mut [i64], slots: &[usize], extents: &[i64]) -> bool {
    for k in (0..slots.len()).rev() {
        env[slots[k]] += 1;
        if env[slots[k]] < extents[k] {
            return true;
        }
        env[slots[k]] = 0;
    }
    false
}

/// Writes the row-major decomposition of `flat` over `sizes` into `env[slots]`.
fn set_slots(env: &mut [i64], slots: &[usize], sizes: &[usize], flat: usize) {
    let mut rest = flat;
    for (slot, s) in slots.iter().zip(sizes).rev() {
        env[*slot] = (rest % s) as i64;
        rest /= s;
    }
}
