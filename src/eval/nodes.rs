//! Evaluation of single nodes: leaves (INPUT, CONST, RANGE), movement views and kernels.

use super::bind::Bound;
use super::error::{
    bad_shape, div_by_zero, input_dtype, input_shape, internal, missing_input, overflow, too_large,
    view_out_of_bounds, EvalResult,
};
use super::kernel::{Kernel, KernelError, Reduction};
use super::plan::Expr;
use super::value::{data_len, Store, Value};
use super::view::{numel, View, ViewError};
use crate::diag::Diagnostics;
use crate::ir::dtype::{wrap_i32, DType};
use crate::ir::tiny::{Node, NodeId, UOp};
use crate::tensor::{Tensor, TensorData};
use std::collections::BTreeMap;
use std::sync::Arc;

/// INPUT, CONST or RANGE.
pub fn leaf<'a>(
    node: &Node,
    shape: &[usize],
    inputs: &'a BTreeMap<String, Tensor>,
) -> EvalResult<Value<'a>> {
    match &node.uop {
        UOp::Input { tensor_id } => input(node, tensor_id, shape, inputs),
        UOp::Const { value } => Ok(owned(
            node.dtype,
            View::contiguous(&[]),
            from_values(node.dtype, &[node.dtype.round(*value)]),
        )),
        UOp::Range => {
            let n = shape.first().copied().unwrap_or(0);
            let mut v: Vec<i32> = Vec::new();
            v.try_reserve_exact(n).map_err(|_| too_large(node.id, n))?;
            v.extend((0..n).map(|i| wrap_i32(i as f64)));
            Ok(owned(
                DType::I32,
                View::contiguous(shape),
                TensorData::I32(v),
            ))
        }
        _ => Err(internal(node.id, "not a leaf")),
    }
}

fn owned(dtype: DType, view: View, data: TensorData) -> Value<'static> {
    Value {
        store: Store::Owned(Arc::new(data)),
        view,
        dtype,
    }
}

fn from_values(dtype: DType, values: &[f64]) -> TensorData {
    Tensor::from_f64(dtype, vec![values.len()], values).data
}

/// Storage variant name expected for a dtype.
fn storage_matches(dtype: DType, data: &TensorData) -> bool {
    matches!(
        (dtype, data),
        (DType::F16 | DType::BF16 | DType::F32, TensorData::F32(_))
            | (DType::I32, TensorData::I32(_))
            | (DType::Bool, TensorData::Bool(_))
    )
}

/// A signature input, checked against its INPUT node; borrowed unless fp16/bf16 values need
/// rounding.
fn input<'a>(
    node: &Node,
    tensor_id: &str,
    shape: &[usize],
    inputs: &'a BTreeMap<String, Tensor>,
) -> EvalResult<Value<'a>> {
    let t = inputs
        .get(tensor_id)
        .ok_or_else(|| missing_input(tensor_id))?;
    if t.dtype != node.dtype || !storage_matches(t.dtype, &t.data) {
        let found = format!(
            "{} ({:?} storage)",
            t.dtype,
            std::mem::discriminant(&t.data)
        );
        return Err(input_dtype(tensor_id, node.dtype.name(), &found));
    }
    let len = data_len(&t.data);
    if t.shape != shape || len != numel(shape) {
        return Err(input_shape(tensor_id, shape, &t.shape, len));
    }
    let view = View::contiguous(shape);
    if let (DType::F16 | DType::BF16, TensorData::F32(v)) = (node.dtype, &t.data) {
        let dt = node.dtype;
        if v.iter()
            .any(|x| dt.round(*x as f64) as f32 != *x && !x.is_nan())
        {
            let r = v.iter().map(|x| dt.round(*x as f64) as f32).collect();
            return Ok(owned(dt, view, TensorData::F32(r)));
        }
    }
    Ok(Value {
        store: Store::Borrowed(&t.data),
        view,
        dtype: t.dtype,
    })
}

/// A movement op: the source's view with the op composed in.
pub fn movement<'a>(node: &Node, src: &Value<'a>, bound: &Bound) -> EvalResult<Value<'a>> {
    let id = node.id;
    let shape = &bound.shapes[id.index()];
    if let UOp::Read { access } = &node.uop {
        return super::read::read(id, src, access, shape, &bound.syms);
    }
    let mut v = src.clone();
    let r = match &node.uop {
        UOp::Reshape => v.view.reshape(shape),
        UOp::Permute { perm } => v.view.permute(perm),
        UOp::Expand => v.view.expand(shape),
        UOp::Pad { pad, value } => v.view.pad(pad, node.dtype.round(*value)),
        UOp::Shrink { step, .. } => {
            let (lo, hi) = &bound.shrink[id.index()];
            v.view.shrink(lo, hi, step)
        }
        UOp::Flip { axes } => v.view.flip(axes),
        UOp::View { map } => v.view.affine(map, shape),
        _ => return Err(internal(id, "not a movement op")),
    };
    r.map_err(|e| view_error(id, e))?;
    if v.view.shape() != shape.as_slice() {
        return Err(bad_shape(
            id,
            format!(
                "{} gives shape {:?} but the node declares {shape:?} with these symbol values",
                node.uop.name(),
                v.view.shape()
            ),
        ));
    }
    Ok(v)
}

fn view_error(id: NodeId, e: ViewError) -> Diagnostics {
    match e {
        ViewError::Overflow => overflow(id),
        ViewError::Shape(why) => bad_shape(id, why),
        ViewError::OutOfBounds(why) => view_out_of_bounds(id, why),
    }
}

/// Runs the fused kernel of a materialized elementwise or REDUCE node.
pub fn kernel<'a>(
    node: &Node,
    expr: &Expr,
    leaves: Vec<&Value<'a>>,
    bound: &Bound,
    row_major: bool,
) -> EvalResult<Value<'static>> {
    let id = node.id;
    let out_shape = &bound.shapes[id.index()];
    let (space, reduce) = match &node.uop {
        UOp::Reduce { op, axes, acc } => {
            let space = leaves.first().map(|v| v.view.shape().to_vec());
            let space = space.ok_or_else(|| internal(id, "REDUCE without operand"))?;
            let red = Reduction {
                op: *op,
                acc: *acc,
                axes: axes.clone(),
            };
            (space, Some(red))
        }
        _ => (out_shape.clone(), None),
    };
    if leaves.iter().any(|v| v.view.shape() != space.as_slice()) {
        return Err(internal(id, "kernel operands disagree on shape"));
    }
    let k = Kernel {
        expr,
        leaves,
        space,
        reduce,
        dtype: node.dtype,
        row_major,
    };
    k.run(out_shape).map_err(|e| match e {
        KernelError::DivByZero(n) => div_by_zero(n),
        KernelError::BadAddress => internal(id, "kernel read outside a buffer"),
        KernelError::Alloc(n) => too_large(id, n),
    })
}

/// The dense row-major tensor of a value (zero-copy when it already is one and not shared).
pub fn to_tensor(id: NodeId, v: Value) -> EvalResult<Tensor> {
    let shape = v.view.shape().to_vec();
    let dtype = v.dtype;
    let len = data_len(v.store.data());
    let data = if v.view.is_dense_row_major(len) {
        match v.store {
            Store::Borrowed(d) => d.clone(),
            Store::Owned(a) => Arc::try_unwrap(a).unwrap_or_else(|a| (*a).clone()),
        }
    } else {
        let expr = Expr::load(id);
        let k = Kernel {
            expr: &expr,
            leaves: vec![&v],
            space: shape.clone(),
            reduce: None,
            dtype,
            row_major: true,
        };
        let dense = k
            .run(&shape)
            .map_err(|_| internal(id, "copying an output failed"))?;
        match dense.store {
            Store::Owned(a) => Arc::try_unwrap(a).unwrap_or_else(|a| (*a).clone()),
            Store::Borrowed(d) => d.clone(),
        }
    };
    Ok(Tensor { dtype, shape, data })
}
