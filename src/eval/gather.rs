//! GATHER (`torch.gather(x, axis, index)`): `out[i] = x[i with axis replaced by index[i]]`.

use super::error::{bad_shape, gather_oob, internal, too_large, EvalResult};
use super::kernel::Elem;
use super::value::{Store, Value};
use super::view::{numel, View};
use crate::ir::dtype::DType;
use crate::ir::tiny::NodeId;
use crate::tensor::TensorData;
use rayon::prelude::*;
use std::sync::Arc;

/// Evaluates a GATHER node; `out_shape` is the index's shape.
pub fn gather(
    node: NodeId,
    x: &Value,
    index: &Value,
    axis: usize,
    out_shape: &[usize],
) -> EvalResult<Value<'static>> {
    let xs = x.view.shape();
    if index.view.shape() != out_shape || xs.len() != out_shape.len() || axis >= xs.len() {
        return Err(internal(node, "GATHER operand ranks disagree"));
    }
    for (i, (a, b)) in xs.iter().zip(out_shape).enumerate() {
        if i != axis && b > a {
            return Err(bad_shape(
                node,
                format!("GATHER index axis {i} has size {b} > input size {a}"),
            ));
        }
    }
    let n = numel(out_shape);
    let data = match x.dtype {
        DType::I32 => TensorData::I32(gather_into::<i32>(node, x, index, axis, out_shape, n)?),
        DType::Bool => TensorData::Bool(gather_into::<bool>(node, x, index, axis, out_shape, n)?),
        _ => TensorData::F32(gather_into::<f32>(node, x, index, axis, out_shape, n)?),
    };
    Ok(Value {
        store: Store::Owned(Arc::new(data)),
        view: View::contiguous(out_shape),
        dtype: x.dtype,
    })
}

/// Rows of the output (along the last axis) in parallel; within a row one element at a time
/// through the views (the index is data, so there is no stride to exploit). The first
/// out-of-range index in row-major order is the one reported, whatever the thread count.
fn gather_into<T: Elem>(
    node: NodeId,
    x: &Value,
    index: &Value,
    axis: usize,
    shape: &[usize],
    n: usize,
) -> EvalResult<Vec<T>> {
    let mut out: Vec<T> = Vec::new();
    out.try_reserve_exact(n).map_err(|_| too_large(node, n))?;
    out.resize(n, T::default());
    let row = shape.last().copied().unwrap_or(1).max(1);
    let size = x.view.shape()[axis];
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
            let bad = |_| internal(node, "GATHER read outside its operand");
            for slot in chunk.iter_mut() {
                let v = index.at(&pos, &mut scratch).map_err(bad)?;
                if !(v >= 0.0 && v < size as f64) {
                    let p: Vec<usize> = pos.iter().map(|i| *i as usize).collect();
                    return Err(gather_oob(node, v, size, &p));
                }
                let keep = pos[axis];
                pos[axis] = v as i64;
                let e = x.at(&pos, &mut scratch).map_err(bad)?;
                pos[axis] = keep;
                *slot = T::from_f64(e);
                advance(&mut pos, shape);
            }
            Ok(())
        })
        .collect();
    results.into_iter().collect::<EvalResult<Vec<()>>>()?;
    Ok(out)
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
