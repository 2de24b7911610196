//! SCAN: a prefix fold along one axis, linear and sequential — the oracle of the parallel scan
//! templates. The value is viewed as `[outer, len, inner]` (`len` the scanned axis); every
//! `outer` slab is independent (parallel with rayon), and within a slab the `inner` running
//! accumulators advance together one step of the scanned axis at a time, in scan order, each
//! step rounded to the accumulation dtype exactly as REDUCE rounds (`ops::accumulate_rows`).

use super::error::{internal, too_large, EvalResult};
use super::nodes::to_tensor;
use super::ops::{accumulate_rows, Operand};
use super::value::{Store, Value};
use super::view::View;
use crate::ir::dtype::DType;
use crate::ir::tiny::{NodeId, ScanSpec};
use crate::tensor::{Tensor, TensorData};
use rayon::prelude::*;
use std::sync::Arc;

/// Evaluates a SCAN node of `spec` accumulating in `acc` over the value `x`.
pub fn scan(node: NodeId, x: &Value, spec: ScanSpec, acc: DType) -> EvalResult<Value<'static>> {
    let shape = x.view.shape().to_vec();
    if spec.axis >= shape.len() {
        return Err(internal(node, "SCAN axis outside its operand"));
    }
    let x = to_tensor(node, x.clone())?;
    let out = scan_values(&x, spec, acc).ok_or_else(|| too_large(node, x.numel()))?;
    let data = match acc {
        DType::I32 => TensorData::I32(out.iter().map(|v| *v as i32).collect()),
        _ => TensorData::F32(out.iter().map(|v| *v as f32).collect()),
    };
    Ok(Value {
        store: Store::Owned(Arc::new(data)),
        view: View::contiguous(&shape),
        dtype: acc,
    })
}

/// The scanned values of a dense tensor (row-major, rounded to `acc`); `None` when the buffer
/// cannot be allocated. Public so that the linear-work tests and benches can drive it directly.
pub fn scan_values(x: &Tensor, spec: ScanSpec, acc: DType) -> Option<Vec<f64>> {
    let shape = &x.shape;
    let len = shape.get(spec.axis).copied().unwrap_or(1);
    let inner: usize = shape[spec.axis + 1..].iter().product();
    let total = x.numel();
    let mut out: Vec<f64> = Vec::new();
    out.try_reserve_exact(total).ok()?;
    out.resize(total, 0.0);
    if total == 0 {
        return Some(out);
    }
    let slab = len * inner;
    let identity = spec.op.identity(acc);
    out.par_chunks_mut(slab).enumerate().for_each(|(o, chunk)| {
        let base = o * slab;
        let mut run = vec![acc.round(identity); inner];
        let mut row = vec![0.0f64; inner];
        for step in 0..len {
            let k = if spec.reverse { len - 1 - step } else { step };
            let at = k * inner;
            for (i, r) in row.iter_mut().enumerate() {
                *r = x.get_f64(base + at + i);
            }
            let dst = &mut chunk[at..at + inner];
            if spec.exclusive {
                dst.copy_from_slice(&run);
                accumulate_rows(spec.op, acc, &mut run, Operand::R(&row));
            } else {
                accumulate_rows(spec.op, acc, &mut run, Operand::R(&row));
                dst.copy_from_slice(&run);
            }
        }
    });
    Some(out)
}
