//! READ (`out[i] = guard(i) ? x[index(i)] : fill`, affine + floordiv maps): materialized one
//! element at a time. Symbols are bound first, so evaluating an element only touches the output
//! index; rows of the output run in parallel like GATHER.

use super::error::{dim_error, internal, overflow, read_out_of_bounds, too_large, EvalResult};
use super::kernel::Elem;
use super::value::{Store, Value};
use super::view::{numel, View};
use crate::diag::Diagnostics;
use crate::ir::axis::{AccessMap, AxisExpr, CmpOp, Pred};
use crate::ir::dim::DimError;
use crate::ir::dtype::DType;
use crate::ir::tiny::NodeId;
use crate::tensor::TensorData;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

/// An index expression with symbols bound: names are output axes.
enum Ix {
    Const(i64),
    Axis(usize),
    Add(Vec<Ix>),
    Mul(Box<Ix>, Box<Ix>),
    Div(Box<Ix>, i64),
    Min(Box<Ix>, Box<Ix>),
    Max(Box<Ix>, Box<Ix>),
}

enum Guard {
    And(Vec<Guard>),
    Or(Vec<Guard>),
    Cmp(CmpOp, Ix, Ix),
}

impl Ix {
    fn new(
        node: NodeId,
        e: &AxisExpr,
        acc: &AccessMap,
        syms: &BTreeMap<String, i64>,
    ) -> EvalResult<Ix> {
        let sub = |x: &AxisExpr| Ix::new(node, x, acc, syms);
        Ok(match e {
            AxisExpr::Const(c) => Ix::Const(*c),
            AxisExpr::Name(n) => match acc.axis_of(n) {
                Some(k) => Ix::Axis(k),
                None => Ix::Const(
                    *syms
                        .get(n)
                        .ok_or_else(|| dim_error(node, &DimError::Unbound(n.clone())))?,
                ),
            },
            AxisExpr::Add(ts) => Ix::Add(ts.iter().map(sub).collect::<EvalResult<_>>()?),
            AxisExpr::Mul(a, b) => Ix::Mul(Box::new(sub(a)?), Box::new(sub(b)?)),
            AxisExpr::FloorDiv(x, c) if *c > 0 => Ix::Div(Box::new(sub(x)?), *c),
            AxisExpr::FloorDiv(..) => return Err(internal(node, "READ floordiv by <= 0")),
            AxisExpr::Min(a, b) => Ix::Min(Box::new(sub(a)?), Box::new(sub(b)?)),
            AxisExpr::Max(a, b) => Ix::Max(Box::new(sub(a)?), Box::new(sub(b)?)),
        })
    }

    /// Value at output index `i`; `None` on overflow.
    fn at(&self, i: &[i64]) -> Option<i64> {
        match self {
            Ix::Const(c) => Some(*c),
            Ix::Axis(k) => i.get(*k).copied(),
            Ix::Add(ts) => ts.iter().try_fold(0i64, |a, t| a.checked_add(t.at(i)?)),
            Ix::Mul(a, b) => a.at(i)?.checked_mul(b.at(i)?),
            Ix::Div(x, c) => Some(x.at(i)?.div_euclid(*c)),
            Ix::Min(a, b) => Some(a.at(i)?.min(b.at(i)?)),
            Ix::Max(a, b) => Some(a.at(i)?.max(b.at(i)?)),
        }
    }
}

impl Guard {
    fn new(
        node: NodeId,
        p: &Pred,
        acc: &AccessMap,
        syms: &BTreeMap<String, i64>,
    ) -> EvalResult<Guard> {
        let list = |ps: &[Pred]| {
            ps.iter()
                .map(|q| Guard::new(node, q, acc, syms))
                .collect::<EvalResult<Vec<_>>>()
        };
        Ok(match p {
            Pred::And(ps) => Guard::And(list(ps)?),
            Pred::Or(ps) => Guard::Or(list(ps)?),
            Pred::Cmp(op, a, b) => Guard::Cmp(
                *op,
                Ix::new(node, a, acc, syms)?,
                Ix::new(node, b, acc, syms)?,
            ),
        })
    }

    /// Truth at output index `i`; `None` on overflow.
    fn holds(&self, i: &[i64]) -> Option<bool> {
        match self {
            Guard::And(ps) => {
                for p in ps {
                    if !p.holds(i)? {
                        return Some(false);
                    }
                }
                Some(true)
            }
            Guard::Or(ps) => {
                for p in ps {
                    if p.holds(i)? {
                        return Some(true);
                    }
                }
                Some(false)
            }
            Guard::Cmp(op, a, b) => Some(op.holds(a.at(i)?, b.at(i)?)),
        }
    }
}

/// Evaluates a READ node of bound shape `out_shape` over operand `x`.
pub fn read(
    node: NodeId,
    x: &Value,
    access: &AccessMap,
    out_shape: &[usize],
    syms: &BTreeMap<String, i64>,
) -> EvalResult<Value<'static>> {
    if access.index.len() != x.view.shape().len() || access.shape.len() != out_shape.len() {
        return Err(internal(node, "READ ranks disagree with its operand"));
    }
    let index = access
        .index
        .iter()
        .map(|e| Ix::new(node, e, access, syms))
        .collect::<EvalResult<Vec<_>>>()?;
    let guard = match &access.guard {
        Some(g) => Some(Guard::new(node, g, access, syms)?),
        None => None,
    };
    let compiled = Compiled {
        node,
        index,
        guard,
        fill: x.dtype.round(access.fill.0),
    };
    let n = numel(out_shape);
    let data = match x.dtype {
        DType::I32 => TensorData::I32(compiled.run::<i32>(x, out_shape, n)?),
        DType::Bool => TensorData::Bool(compiled.run::<bool>(x, out_shape, n)?),
        _ => TensorData::F32(compiled.run::<f32>(x, out_shape, n)?),
    };
    Ok(Value {
        store: Store::Owned(Arc::new(data)),
        view: View::contiguous(out_shape),
        dtype: x.dtype,
    })
}

struct Compiled {
    node: NodeId,
    index: Vec<Ix>,
    guard: Option<Guard>,
    fill: f64,
}

impl Compiled {
    /// Rows in parallel; the first failing element in row-major order is the one reported.
    fn run<T: Elem>(&self, x: &Value, shape: &[usize], n: usize) -> EvalResult<Vec<T>> {
        let node = self.node;
        let mut out: Vec<T> = Vec::new();
        out.try_reserve_exact(n).map_err(|_| too_large(node, n))?;
        out.resize(n, T::default());
        let row = shape.last().copied().unwrap_or(1).max(1);
        let xs = x.view.shape();
        let results: Vec<EvalResult<()>> = out
            .par_chunks_mut(row)
            .enumerate()
            .map(|(r, chunk)| {
                let mut pos = vec![0i64; shape.len()];
                let mut flat = r * row;
                for (p, d) in pos.iter_mut().zip(shape).rev() {
                    *p = (flat % d.max(&1)) as i64;
                    flat /= d.max(&1);
                }
                let mut scratch = Vec::new();
                let mut src = vec![0i64; xs.len()];
                for slot in chunk.iter_mut() {
                    *slot = T::from_f64(self.element(x, &pos, &mut src, &mut scratch)?);
                    advance(&mut pos, shape);
                }
                Ok(())
            })
            .collect();
        results.into_iter().collect::<EvalResult<Vec<()>>>()?;
        Ok(out)
    }

    fn element(
        &self,
        x: &Value,
        pos: &[i64],
        src: &mut [i64],
        scratch: &mut Vec<i64>,
    ) -> Result<f64, Diagnostics> {
        let node = self.node;
        if let Some(g) = &self.guard {
            if !g.holds(pos).ok_or_else(|| overflow(node))? {
                return Ok(self.fill);
            }
        }
        let xs = x.view.shape();
        for (axis, (s, e)) in src.iter_mut().zip(&self.index).enumerate() {
            let v = e.at(pos).ok_or_else(|| overflow(node))?;
            if v < 0 || v >= xs[axis] as i64 {
                return Err(read_out_of_bounds(node, pos, axis, v, xs[axis]));
            }
            *s = v;
        }
        x.at(src, scratch)
            .map_err(|_| internal(node, "READ read outside its operand"))
    }
}

/// Row-major increment of a multi-index.
fn advance(pos: &mut [i64], shape: &[usize]) {
    for (p, d) in pos.iter_mut().zip(shape).rev() {
        *p += 1;
        if (*p as usize) < *d {
            return;
        }
        *p = 0;
    }
}
