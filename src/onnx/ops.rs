//! ONNX op → graph.json nodes (the table in `docs/onnx.md`): elementwise and movement ops here,
//! contractions, convolutions, pooling, normalization and reductions in [`super::nn`].

use super::fold::{attr_f, attr_i, attr_s, norm_axis, try_fold};
use super::import::{invalid, unsupported, Importer, NResult, Opnd};
use super::proto::NodeProto;
use super::value::{graph_dtype, CTensor, TInfo, Val};
use crate::ir::dim::Dim;
use serde_json::{json, Value};

mod movement;

use movement::{expand, pad, reshape_like, slice, split, tile, transpose};

/// Imports one node: folds it at import time when its inputs allow, else emits graph nodes.
pub(super) fn import_node(imp: &mut Importer<'_>, node: &NodeProto) -> NResult<()> {
    if let Some(vals) = try_fold(imp, node)? {
        for (o, v) in node.output.iter().zip(vals) {
            imp.set(o, v);
        }
        return Ok(());
    }
    let op = node.op_type.as_deref().unwrap_or("");
    let domain = node.domain.as_deref().unwrap_or("");
    if !(domain.is_empty() || domain == "ai.onnx") {
        return Err(unsupported(format!("domain `{domain}`")));
    }
    let out = node.output.first().cloned().unwrap_or_default();
    let variadic_of_one = matches!(op, "Max" | "Min" | "Sum" | "Mean") && node.input.len() == 1;
    if matches!(op, "Identity" | "Dropout") || variadic_of_one {
        return alias(imp, node, &out);
    }
    if op == "Split" {
        return split(imp, node);
    }
    let t = match elementwise(imp, node, op, &out)? {
        Some(t) => t,
        None => structural(imp, node, op, &out)?,
    };
    let t = imp.finalize(t, &out);
    imp.set(&out, Val::T(t));
    Ok(())
}

/// `Identity`, inference `Dropout` and one-input variadic ops: the output is the input (and
/// Dropout's mask, when asked for, all true).
fn alias(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<()> {
    if let Some(tm) = node.input.get(2).filter(|s| !s.is_empty()) {
        let training = imp.konst(tm)?.is_none_or(|c| c.data.first() != Some(&0.0));
        // Training mode drops with probability `ratio` by a random mask; at ratio 0 nothing is
        // dropped and the scale 1/(1 − ratio) is 1: the output is the input, the mask all true.
        let ratio = match node.input.get(1).filter(|s| !s.is_empty()) {
            Some(r) => imp.konst(r)?.and_then(|c| c.data.first().copied()),
            None => Some(0.5),
        };
        match ratio {
            _ if !training => {}
            Some(0.0) => {}
            Some(r) => {
                return Err(unsupported(format!(
                    "Dropout in training mode with ratio {r}: its output depends on a random mask"
                )))
            }
            None => {
                return Err(unsupported(
                    "Dropout in training mode with a ratio that is not a constant",
                ))
            }
        }
    }
    if let Some(mask) = node.output.get(1).filter(|m| !m.is_empty()) {
        let x = imp.tensor(&node.input[0])?;
        if x.shape.is_empty() {
            return Err(unsupported("Dropout mask of a scalar"));
        }
        let one = scalar_param(imp, "dropout_mask_true", super::value::et::BOOL, 1.0)?;
        let attr = dims_attr(node, &x.shape, false)?;
        let m = imp.emit(
            "Expand",
            vec![json!(one.name)],
            json!({"shape": attr}),
            mask,
            crate::ir::dtype::DType::Bool,
            x.shape.clone(),
        );
        let m = imp.finalize(m, mask);
        imp.set(mask, Val::T(m));
    }
    let v = imp.val(&node.input[0]).cloned().unwrap_or(Val::Poison);
    imp.set(out, v);
    Ok(())
}

/// Elementwise ops (`None` if `op` is not one).
fn elementwise(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    op: &str,
    out: &str,
) -> NResult<Option<TInfo>> {
    Ok(Some(match op {
        _ if unary_fn(op).is_some() => {
            let x = imp.tensor(&node.input[0])?;
            let f = unary_fn(op).unwrap_or("");
            imp.ew(node, f, &[Opnd::T(x)], out)?
        }
        "Gelu" => {
            let x = imp.tensor(&node.input[0])?;
            let f = match attr_s(node, "approximate").as_deref() {
                Some("tanh") => "gelu_tanh",
                _ => "gelu",
            };
            imp.ew(node, f, &[Opnd::T(x)], out)?
        }
        _ if binary_fn(op).is_some() => {
            let f = binary_fn(op).unwrap_or("");
            let mut acc = operands(imp, node, &node.input[..node.input.len().min(2)])?;
            if op == "Pow" && matches!(&acc[0], Opnd::T(b) if !b.dtype.is_float()) {
                return super::intpow::int_pow(imp, node, &acc, out).map(Some);
            }
            let mut t = imp.ew(node, f, &acc, out)?;
            // Variadic Max/Min/Sum/Mean fold left.
            for extra in node.input.iter().skip(2) {
                acc = vec![Opnd::T(t), imp.opnd(extra, 8)?];
                t = imp.ew(node, f, &acc, out)?;
            }
            if op == "Mean" {
                let n = node.input.len() as f64;
                t = imp.ew(node, "div", &[Opnd::T(t), Opnd::S(n)], out)?;
            }
            t
        }
        "Where" => {
            let ops = operands(imp, node, &node.input)?;
            imp.ew(node, "where", &ops, out)?
        }
        "Not" => {
            let x = imp.tensor(&node.input[0])?;
            imp.ew(node, "eq", &[Opnd::T(x), Opnd::S(0.0)], out)?
        }
        "Clip" => {
            let mut x = Opnd::T(imp.tensor(&node.input[0])?);
            for (i, f) in [(1, "max"), (2, "min")] {
                if let Some(name) = node.input.get(i).filter(|s| !s.is_empty()) {
                    let c = imp
                        .konst(name)?
                        .ok_or_else(|| unsupported("Clip bounds that are not constants"))?;
                    x = Opnd::T(imp.ew(node, f, &[x, Opnd::S(c.data[0])], out)?);
                }
            }
            match x {
                Opnd::T(t) => t,
                Opnd::S(_) => return Err(invalid(node, "Clip of a scalar")),
            }
        }
        "LeakyRelu" | "HardSigmoid" | "HardSwish" => activation(imp, node, op, out)?,
        "Mod" => super::extra::modulo(imp, node, out)?,
        "Erf" => super::extra::erf(imp, node, out)?,
        _ if super::act::OPS.contains(&op) => super::act::activation(imp, node, op, out)?,
        _ => return super::symdata::logical(imp, node, op, out),
    }))
}

/// Movement, indexing and the remaining ops (contractions, convolutions, ... in [`super::nn`]).
fn structural(imp: &mut Importer<'_>, node: &NodeProto, op: &str, out: &str) -> NResult<TInfo> {
    Ok(match op {
        "Cast" => {
            let x = imp.tensor(&node.input[0])?;
            let to = attr_i(node, "to").unwrap_or(0) as i32;
            let dtype =
                graph_dtype(to).ok_or_else(|| unsupported(format!("Cast to element type {to}")))?;
            imp.emit(
                "Cast",
                vec![json!(x.name)],
                json!({"to": dtype.name()}),
                out,
                dtype,
                x.shape,
            )
        }
        "CastLike" => {
            let x = imp.tensor(&node.input[0])?;
            let elem = match imp.val(&node.input[1]).cloned() {
                Some(Val::T(t)) => Ok(t.dtype),
                _ => match imp.konst(&node.input[1])? {
                    Some(c) => graph_dtype(c.elem)
                        .ok_or_else(|| unsupported(format!("CastLike to element type {}", c.elem))),
                    None => Err(unsupported("CastLike target without a value")),
                },
            }?;
            imp.emit(
                "Cast",
                vec![json!(x.name)],
                json!({"to": elem.name()}),
                out,
                elem,
                x.shape,
            )
        }
        "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" => reshape_like(imp, node, op, out)?,
        "Transpose" => transpose(imp, node, out)?,
        "Expand" => expand(imp, node, out)?,
        "Concat" => {
            let xs: Vec<TInfo> = node
                .input
                .iter()
                .map(|i| imp.tensor(i))
                .collect::<NResult<_>>()?;
            let r = xs[0].shape.len();
            let a = norm_axis(node, attr_i(node, "axis").unwrap_or(0), r)?;
            let mut shape = xs[0].shape.clone();
            shape[a] = xs.iter().fold(Dim::int(0), |s, x| s.add(&x.shape[a]));
            let ins = xs.iter().map(|x| json!(x.name)).collect();
            imp.emit("Concat", ins, json!({"axis": a}), out, xs[0].dtype, shape)
        }
        "Pad" => pad(imp, node, out)?,
        "Slice" => slice(imp, node, out)?,
        "Gather" => super::gather::take(imp, node, out)?,
        "GatherElements" => {
            let x = imp.tensor(&node.input[0])?;
            let a = norm_axis(node, attr_i(node, "axis").unwrap_or(0), x.shape.len())?;
            let idx = super::gather::wrapped_index(imp, node, &node.input[1], &x.shape[a], out)?;
            imp.emit(
                "Gather",
                vec![json!(x.name), json!(idx.name)],
                json!({"axis": a}),
                out,
                x.dtype,
                idx.shape,
            )
        }
        "Tile" => tile(imp, node, out)?,
        "CumSum" => cumsum(imp, node, out)?,
        "Range" => super::gather::range(imp, node, out)?,
        "ConstantOfShape" => super::gather::constant_of_shape(imp, node, out)?,
        "Einsum" => super::extra::einsum(imp, node, out)?,
        "Resize" => super::extra::resize(imp, node, out)?,
        _ => super::nn::import_nn(imp, node, op, out)?,
    })
}

/// `LeakyRelu`, `HardSigmoid` and `HardSwish` as `where`/`mul`/`add`/`min`/`max`.
fn activation(imp: &mut Importer<'_>, node: &NodeProto, op: &str, out: &str) -> NResult<TInfo> {
    let x = imp.tensor(&node.input[0])?;
    if op == "LeakyRelu" {
        let alpha = attr_f(node, "alpha").unwrap_or(0.01);
        let neg = imp.ew(node, "lt", &[Opnd::T(x.clone()), Opnd::S(0.0)], out)?;
        let scaled = imp.ew(node, "mul", &[Opnd::T(x.clone()), Opnd::S(alpha)], out)?;
        return imp.ew(
            node,
            "where",
            &[Opnd::T(neg), Opnd::T(scaled), Opnd::T(x)],
            out,
        );
    }
    let (alpha, beta) = if op == "HardSwish" {
        (1.0 / 6.0, 0.5)
    } else {
        (
            attr_f(node, "alpha").unwrap_or(0.2),
            attr_f(node, "beta").unwrap_or(0.5),
        )
    };
    let a = imp.ew(node, "mul", &[Opnd::T(x.clone()), Opnd::S(alpha)], out)?;
    let b = imp.ew(node, "add", &[Opnd::T(a), Opnd::S(beta)], out)?;
    let c = imp.ew(node, "min", &[Opnd::T(b), Opnd::S(1.0)], out)?;
    let hs = imp.ew(node, "max", &[Opnd::T(c), Opnd::S(0.0)], out)?;
    if op == "HardSwish" {
        imp.ew(node, "mul", &[Opnd::T(x), Opnd::T(hs)], out)
    } else {
        Ok(hs)
    }
}

/// `CumSum` as a `Cumulative` sum (constant axis).
fn cumsum(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    let x = imp.tensor(&node.input[0])?;
    let a = imp
        .konst(&node.input[1])?
        .ok_or_else(|| unsupported("CumSum axis that is not a constant"))?
        .ints();
    let a = norm_axis(node, a.first().copied().unwrap_or(0), x.shape.len())?;
    let attrs = json!({"fn": "sum", "axis": a,
        "exclusive": attr_i(node, "exclusive") == Some(1), "reverse": attr_i(node, "reverse") == Some(1)});
    Ok(imp.emit(
        "Cumulative",
        vec![json!(x.name)],
        attrs,
        out,
        x.dtype,
        x.shape,
    ))
}

fn unary_fn(op: &str) -> Option<&'static str> {
    Some(match op {
        "Relu" => "relu",
        "Sigmoid" => "sigmoid",
        "Tanh" => "tanh",
        "Exp" => "exp",
        "Log" => "log",
        "Sqrt" => "sqrt",
        "Neg" => "neg",
        "Abs" => "abs",
        "Reciprocal" => "recip",
        _ => return None,
    })
}

fn binary_fn(op: &str) -> Option<&'static str> {
    Some(match op {
        "Add" | "Sum" | "Mean" => "add",
        "Sub" => "sub",
        "Mul" => "mul",
        "Div" => "div",
        "Pow" => "pow",
        "Max" => "max",
        "Min" => "min",
        "Equal" => "eq",
        "Less" => "lt",
        "Greater" => "gt",
        "LessOrEqual" => "le",
        "GreaterOrEqual" => "ge",
        _ => return None,
    })
}

/// Elementwise operands: one-element constants become scalars when that keeps the rank.
pub(super) fn operands(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    names: &[String],
) -> NResult<Vec<Opnd>> {
    let mut max_rank = 0;
    for n in names {
        max_rank = max_rank.max(imp.rank_of(n)?);
    }
    let mut ops: Vec<Opnd> = names
        .iter()
        .map(|n| imp.opnd(n, max_rank))
        .collect::<NResult<_>>()?;
    // At least one operand must be a tensor (else the node would have folded).
    if !ops.iter().any(|o| matches!(o, Opnd::T(_))) {
        ops[0] = Opnd::T(imp.tensor(&names[0])?);
    }
    // graph.json's pow is float-only, with one dtype on both sides: ONNX's result has the
    // base's type, so an exponent of another type is cast to it.
    if node.op_type.as_deref() == Some("Pow") {
        let base = match &ops[0] {
            Opnd::T(t) => Some(t.dtype),
            Opnd::S(_) => None,
        };
        match (base, &ops[1]) {
            (Some(b), _) if !b.is_float() => return Ok(ops),
            (Some(b), Opnd::T(e)) if e.dtype != b => {
                let out = node.output.first().map_or("pow", String::as_str);
                let cast = imp.emit(
                    "Cast",
                    vec![json!(e.name)],
                    json!({"to": b.name()}),
                    out,
                    b,
                    e.shape.clone(),
                );
                ops[1] = Opnd::T(cast);
            }
            (None, Opnd::T(e)) if !e.dtype.is_float() => {
                return Err(unsupported("Pow of a constant base by integers"));
            }
            _ => {}
        }
    }
    Ok(ops)
}

/// A target shape for graph.json `Reshape`/`Expand`: integers and symbol names; one entry that
/// is an expression may be written `-1` (`allow_infer`).
pub(super) fn dims_attr(node: &NodeProto, dims: &[Dim], allow_infer: bool) -> NResult<Value> {
    let mut inferred = false;
    let mut out = Vec::new();
    for d in dims {
        if d.as_int().is_some() || d.as_symbol().is_some() {
            out.push(json!(d));
        } else if allow_infer && !inferred {
            inferred = true;
            out.push(json!(-1));
        } else {
            return Err(unsupported(format!(
                "{} to a shape with several computed sizes ({})",
                node.op_type.as_deref().unwrap_or(""),
                crate::ir::dim::fmt_shape(dims)
            )));
        }
    }
    Ok(Value::Array(out))
}

/// Flatten's axis in `0..=rank` (negative counts from the end).
pub(super) fn flatten_axis(node: &NodeProto, axis: i64, rank: usize) -> NResult<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    usize::try_from(a)
        .ok()
        .filter(|a| *a <= rank)
        .ok_or_else(|| {
            invalid(
                node,
                format!("Flatten axis {axis} is out of range for rank {rank}"),
            )
        })
}

/// A shape for a copying `Reshape`: sizes that are not integers or symbol names become `-1`
/// (a copy keeps its element count, so one inferred size is exact; more are rejected on load).
pub(super) fn dims_attr_plain(dims: &[Dim]) -> Value {
    Value::Array(
        dims.iter()
            .map(|d| {
                if d.as_int().is_some() || d.as_symbol().is_some() {
                    json!(d)
                } else {
                    json!(-1)
                }
            })
            .collect(),
    )
}

/// Emits a graph `Reshape` of `x` to `shape`.
pub(super) fn reshape_to(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    x: &TInfo,
    shape: Vec<Dim>,
    out: &str,
) -> NResult<TInfo> {
    let attr = dims_attr(node, &shape, true)?;
    Ok(imp.emit(
        "Reshape",
        vec![json!(x.name)],
        json!({"shape": attr}),
        out,
        x.dtype,
        shape,
    ))
}

/// The ONNX shape-value input `i` as sizes (constant or symbolic).
pub(super) fn shape_input(imp: &Importer<'_>, node: &NodeProto, i: usize) -> NResult<Vec<Dim>> {
    let name = node.input.get(i).map(String::as_str).unwrap_or("");
    match imp.val(name) {
        Some(Val::Sym { dims, .. }) => Ok(dims.clone()),
        _ => imp
            .konst(name)?
            .map(|c| c.ints().into_iter().map(Dim::int).collect())
            .ok_or_else(|| {
                unsupported(format!(
                    "input `{name}` must be computable at import (a shape or constant)"
                ))
            }),
    }
}

/// A constant as a one-element tensor of `dtype` (for Expand-based fills).
pub(super) fn scalar_param(
    imp: &mut Importer<'_>,
    base: &str,
    elem: i32,
    v: f64,
) -> NResult<TInfo> {
    let name = imp.fresh(base);
    imp.materialize(
        &name,
        &CTensor {
            elem,
            shape: vec![1],
            data: vec![v],
        },
    )
}
