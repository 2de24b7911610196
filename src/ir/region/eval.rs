//! CPU playback of a region (seed 001 §6.11): verify, bind sizes, compile names to slots, then
//! materialize every let over its free iters in order (parallel over points with rayon) and write
//! the yields. An out-of-bounds read is an error (`E1220`), never a panic.

use super::kind::Kind;
use super::verify::{verify_with, Checked, RegionError};
use super::{BinaryFn, CmpOp, Expr, Region, UnaryFn};
use crate::diag::Diagnostics;
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::tiny::ReduceOp;
use crate::tensor::Tensor;
use rayon::prelude::*;
use std::collections::BTreeMap;

#[path = "eval_affine.rs"]
mod affine;
#[path = "eval_compile.rs"]
mod compile;
#[path = "eval_ops.rs"]
mod ops;
#[path = "eval_point.rs"]
mod point;
#[path = "eval_rows.rs"]
mod rows;

use ops::fold;
use point::{axis, pred};

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
    let ins = bound_inputs(r, b, inputs)?;
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
            let vals = scan_let(&mut comp, &ins, &values, li, sc, &scope)?;
            values.push(vals);
            continue;
        }
        let vals = let_values(&mut comp, &ins, &values, li, &scope)?;
        values.push(vals);
    }
    Ok(yields(r, &let_free, &sizes, total, &values))
}

/// The inputs in `r`'s order, each checked against its declared dtype and bound shape.
fn bound_inputs<'t>(
    r: &Region,
    b: &BTreeMap<String, i64>,
    inputs: &'t BTreeMap<String, Tensor>,
) -> EResult<Vec<&'t Tensor>> {
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
    Ok(ins)
}

/// The values of scan let `li` (`sc`), line by line ([`ScanLine`]).
fn scan_let(
    comp: &mut Compiler,
    ins: &[&Tensor],
    values: &[Vec<f64>],
    li: usize,
    sc: &super::Scan,
    scope: &[(String, usize)],
) -> EResult<Vec<f64>> {
    let r = comp.r;
    let l = &r.lets[li];
    let code = comp.expr(&sc.body, &mut scope.to_vec())?;
    comp.let_kinds.push(comp.kind(&l.expr));
    let cx = Ctx {
        inputs: ins,
        names: r.inputs.iter().map(|i| i.name.clone()).collect(),
        lets: values,
        at: &l.name,
    };
    let axis = r.iters.iter().position(|i| i.name == sc.axis);
    let axis = axis.ok_or_else(|| RegionError::UnboundName {
        name: sc.axis.clone(),
        at: l.name.clone(),
    })?;
    let line = ScanLine {
        sc,
        free: &comp.let_free[li],
        axis,
        sizes: comp.sizes,
        nslots: comp.nslots,
    };
    line.run(&cx, &code)
}

/// The values of (non-scan) let `li` over its free iters: row by row when the compiler has a
/// row iter ([`rows::RowLet`]), else point by point (parallel).
fn let_values(
    comp: &mut Compiler,
    ins: &[&Tensor],
    values: &[Vec<f64>],
    li: usize,
    scope: &[(String, usize)],
) -> EResult<Vec<f64>> {
    let r = comp.r;
    let l = &r.lets[li];
    let sizes = comp.sizes;
    let code = comp.expr(&l.expr, &mut scope.to_vec())?;
    let kind = comp.kind(&l.expr);
    comp.let_kinds.push(kind);
    let free = &comp.let_free[li];
    let fsizes: Vec<usize> = free.iter().map(|i| sizes[*i]).collect();
    let n: usize = fsizes.iter().product();
    let cx = Ctx {
        inputs: ins,
        names: r.inputs.iter().map(|i| i.name.clone()).collect(),
        lets: values,
        at: &l.name,
    };
    let nslots = comp.nslots;
    if let Some(row) = comp.row {
        let rl = rows::RowLet {
            free,
            sizes,
            row,
            nslots,
        };
        return rl.run(&cx, &code);
    }
    let point = |env: &mut Vec<i64>, flat: usize| {
        set_slots(env, free, &fsizes, flat);
        cx.eval(&code, env)
    };
    let par = (0..n)
        .into_par_iter()
        .map_init(|| vec![0i64; nslots], point)
        .collect::<EResult<Vec<f64>>>();
    first_error_in_order(par, || {
        let mut env = vec![0i64; nslots];
        (0..n).try_for_each(|flat| point(&mut env, flat).map(|_| ()))
    })
}

/// `par`, a parallel pass's result; on an error, the first error in order. Which failing point,
/// line or row a parallel pass reports depends on the schedule: `in_order` runs the pass again
/// sequentially and its first error is reported, so that the message is deterministic.
pub(super) fn first_error_in_order<T>(
    par: EResult<T>,
    in_order: impl FnOnce() -> EResult<()>,
) -> EResult<T> {
    par.or_else(|e| {
        in_order()?;
        Err(e)
    })
}

/// The outputs: every yield's let array, broadcast over the iters it does not depend on.
fn yields(
    r: &Region,
    let_free: &[Vec<usize>],
    sizes: &[usize],
    total: usize,
    values: &[Vec<f64>],
) -> BTreeMap<String, Tensor> {
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
                Tensor::from_f64(o.dtype, sizes.to_vec(), src),
            );
            continue;
        }
        let strides = let_strides(&let_free[li], sizes);
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
            Tensor::from_f64(o.dtype, sizes.to_vec(), &vals),
        );
    }
    out
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
        let line = |flat: usize| -> EResult<Vec<(usize, f64)>> {
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
        };
        let per_line = (0..lines)
            .into_par_iter()
            .map(line)
            .collect::<EResult<Vec<_>>>();
        let per_line = first_error_in_order(per_line, || {
            (0..lines).try_for_each(|flat| line(flat).map(|_| ()))
        })?;
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
    aff: Option<affine::Affine>,
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

struct Ctx<'a> {
    inputs: &'a [&'a Tensor],
    names: Vec<String>,
    lets: &'a [Vec<f64>],
    at: &'a str,
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
