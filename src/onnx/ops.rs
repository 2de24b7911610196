//! ONNX op → graph.json nodes (the table in `docs/onnx.md`): elementwise and movement ops here,
//! contractions, convolutions, pooling, normalization and reductions in [`super::nn`].

use super::fold::{attr_f, attr_i, attr_ints, attr_s, norm_axis, try_fold};
use super::import::{invalid, unsupported, Importer, NResult, Opnd};
use super::proto::NodeProto;
use super::value::{graph_dtype, CTensor, TInfo, Val};
use crate::ir::dim::Dim;
use serde_json::{json, Value};

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

/// `Transpose` as `Permute` (default: reversed axes).
fn transpose(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    let x = imp.tensor(&node.input[0])?;
    let r = x.shape.len();
    let perm: Vec<usize> = match attr_ints(node, "perm") {
        Some(p) => p
            .iter()
            .map(|a| norm_axis(node, *a, r))
            .collect::<NResult<_>>()?,
        None => (0..r).rev().collect(),
    };
    let shape = perm.iter().map(|p| x.shape[*p].clone()).collect();
    Ok(imp.emit(
        "Permute",
        vec![json!(x.name)],
        json!({"perm": perm}),
        out,
        x.dtype,
        shape,
    ))
}

/// `Tile` as `Repeat` (constant repeats).
fn tile(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    let x = imp.tensor(&node.input[0])?;
    let reps = imp
        .konst(&node.input[1])?
        .ok_or_else(|| unsupported("Tile repeats that are not constants"))?
        .ints();
    let shape = x
        .shape
        .iter()
        .zip(&reps)
        .map(|(d, r)| d.mul_int(*r))
        .collect();
    Ok(imp.emit(
        "Repeat",
        vec![json!(x.name)],
        json!({"repeats": reps}),
        out,
        x.dtype,
        shape,
    ))
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

fn reshape_like(imp: &mut Importer<'_>, node: &NodeProto, op: &str, out: &str) -> NResult<TInfo> {
    let x = imp.tensor(&node.input[0])?;
    let r = x.shape.len();
    let shape: Vec<Dim> = match op {
        "Reshape" => {
            let spec = shape_input(imp, node, 1)?;
            let allowzero = attr_i(node, "allowzero") == Some(1);
            let mut t: Vec<Dim> = spec
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    if d.is_int(0) && !allowzero {
                        x.shape.get(i).cloned().unwrap_or_else(|| d.clone())
                    } else {
                        d.clone()
                    }
                })
                .collect();
            if let Some(p) = t.iter().position(|d| d.is_int(-1)) {
                let known = Dim::product(t.iter().filter(|d| !d.is_int(-1)));
                let n = crate::ir::dim::numel(&x.shape);
                t[p] = n.div_exact(&known).ok_or_else(|| {
                    unsupported(format!(
                        "Reshape whose -1 size is not an exact quotient ({n} / {known})"
                    ))
                })?;
            }
            t
        }
        "Flatten" => {
            let a = flatten_axis(node, attr_i(node, "axis").unwrap_or(1), r)?;
            vec![
                Dim::product(x.shape[..a].iter()),
                Dim::product(x.shape[a..].iter()),
            ]
        }
        _ => squeeze_like(imp, node, op, &x)?,
    };
    reshape_to(imp, node, &x, shape, out)
}

/// The shape after `Squeeze` or `Unsqueeze` (axes from the input or the attribute).
fn squeeze_like(imp: &Importer<'_>, node: &NodeProto, op: &str, x: &TInfo) -> NResult<Vec<Dim>> {
    let r = x.shape.len();
    if op == "Squeeze" {
        let axes = match node.input.get(1).filter(|s| !s.is_empty()) {
            Some(_) => Some(
                shape_input(imp, node, 1)?
                    .iter()
                    .filter_map(Dim::as_int)
                    .collect::<Vec<_>>(),
            ),
            None => attr_ints(node, "axes"),
        };
        let axes: Vec<usize> = match axes {
            Some(a) => a
                .iter()
                .map(|v| norm_axis(node, *v, r))
                .collect::<NResult<_>>()?,
            None => (0..r).filter(|i| x.shape[*i].is_int(1)).collect(),
        };
        return Ok(x
            .shape
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, d)| d.clone())
            .collect());
    }
    let axes = match node.input.get(1).filter(|s| !s.is_empty()) {
        Some(_) => shape_input(imp, node, 1)?
            .iter()
            .filter_map(Dim::as_int)
            .collect::<Vec<_>>(),
        None => attr_ints(node, "axes").unwrap_or_default(),
    };
    let nr = r + axes.len();
    let mut axes: Vec<usize> = axes
        .iter()
        .map(|v| norm_axis(node, *v, nr))
        .collect::<NResult<_>>()?;
    axes.sort_unstable();
    let mut s = x.shape.clone();
    for a in axes {
        s.insert(a.min(s.len()), Dim::int(1));
    }
    Ok(s)
}

fn expand(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    let x = imp.tensor(&node.input[0])?;
    let target = shape_input(imp, node, 1)?;
    // ONNX Expand is a bidirectional broadcast: a target 1 keeps the input's size.
    let shape = crate::ir::dim::broadcast_shapes(&x.shape, &target)
        .map_err(|(a, b)| invalid(node, format!("Expand: {a} and {b} do not broadcast")))?;
    let r = shape.len();
    let attr: Vec<Value> = shape
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let xi = (i + x.shape.len())
                .checked_sub(r)
                .and_then(|j| x.shape.get(j));
            if xi == Some(d) {
                Ok(json!(-1))
            } else if d.as_int().is_some() || d.as_symbol().is_some() {
                Ok(json!(d))
            } else {
                Err(unsupported(format!("Expand to a computed size {d}")))
            }
        })
        .collect::<NResult<_>>()?;
    Ok(imp.emit(
        "Expand",
        vec![json!(x.name)],
        json!({"shape": attr}),
        out,
        x.dtype,
        shape,
    ))
}

fn pad(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    let x = imp.tensor(&node.input[0])?;
    let r = x.shape.len();
    let mode = attr_s(node, "mode").unwrap_or_else(|| "constant".into());
    let pads = imp
        .konst(&node.input[1])?
        .ok_or_else(|| unsupported("Pad amounts that are not constants"))?
        .ints();
    let (value, runtime_value) = match node.input.get(2).filter(|s| !s.is_empty()) {
        Some(v) => match imp.konst(v)? {
            Some(c) => (c.data.first().copied().unwrap_or(0.0), None),
            None => (0.0, Some(imp.tensor(v)?)),
        },
        None => (0.0, None),
    };
    let axes: Vec<usize> = match node.input.get(3).filter(|s| !s.is_empty()) {
        Some(a) => imp
            .konst(a)?
            .ok_or_else(|| unsupported("Pad axes that are not constants"))?
            .ints()
            .iter()
            .map(|v| norm_axis(node, *v, r))
            .collect::<NResult<_>>()?,
        None => (0..r).collect(),
    };
    let k = axes.len();
    if pads.len() != 2 * k {
        return Err(invalid(
            node,
            format!("Pad has {} amounts for {k} axes", pads.len()),
        ));
    }
    let mut pairs = vec![(0i64, 0i64); r];
    for (j, a) in axes.iter().enumerate() {
        pairs[*a] = (pads[j], pads[j + k]);
    }
    if mode != "constant" {
        return super::resize::pad_by_index(imp, node, &x, &pairs, &mode, out);
    }
    let shape = x
        .shape
        .iter()
        .zip(&pairs)
        .map(|(d, (lo, hi))| d.add_int(lo + hi))
        .collect();
    let attr: Vec<[i64; 2]> = pairs.iter().map(|(a, b)| [*a, *b]).collect();
    let padded = imp.emit(
        "Pad",
        vec![json!(x.name)],
        json!({"pad": attr, "value": value}),
        out,
        x.dtype,
        shape,
    );
    match runtime_value {
        Some(v) => super::extra::pad_runtime_value(imp, node, &x, &pairs, padded, v, out),
        None => Ok(padded),
    }
}

fn const_ints(
    imp: &Importer<'_>,
    node: &NodeProto,
    i: usize,
    what: &str,
) -> NResult<Option<Vec<i64>>> {
    match node.input.get(i).filter(|s| !s.is_empty()) {
        Some(n) => Ok(Some(
            imp.konst(n)?
                .ok_or_else(|| unsupported(format!("{what} that are not constants")))?
                .ints(),
        )),
        None => Ok(None),
    }
}

/// The size of `d[start:end:step]` (numpy clamping; symbolic sizes assume in-range bounds).
fn slice_len(d: &Dim, s: i64, e: i64, step: i64) -> (Dim, Dim, Dim) {
    if let Some(n) = d.as_int() {
        let c = |v: i64| (if v < 0 { v + n } else { v }).clamp(0, n);
        let (s, e) = (c(s), c(e));
        let len = if e > s { (e - s + step - 1) / step } else { 0 };
        return (Dim::int(s), Dim::int(e), Dim::int(len));
    }
    let at = |v: i64| {
        if v < 0 {
            d.add_int(v)
        } else if v >= i64::from(i32::MAX) {
            d.clone()
        } else {
            Dim::int(v)
        }
    };
    let (s, e) = (at(s), at(e));
    let len = e.sub(&s).ceildiv(step);
    (s, e, len)
}

fn slice(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    if super::symdata::is_symbolic(imp, node, 1) || super::symdata::is_symbolic(imp, node, 2) {
        return super::symdata::slice_symbolic(imp, node, out);
    }
    let x = imp.tensor(&node.input[0])?;
    let r = x.shape.len();
    let starts = const_ints(imp, node, 1, "Slice starts")?.unwrap_or_default();
    let ends = const_ints(imp, node, 2, "Slice ends")?.unwrap_or_default();
    let axes = const_ints(imp, node, 3, "Slice axes")?
        .unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = const_ints(imp, node, 4, "Slice steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    if steps.contains(&0) {
        return Err(invalid(node, "Slice with a zero step"));
    }
    if steps.iter().any(|s| *s < 0) {
        let spec = (
            starts.as_slice(),
            ends.as_slice(),
            axes.as_slice(),
            steps.as_slice(),
        );
        return super::resize::slice_by_index(imp, node, &x, spec, out);
    }
    let mut shape = x.shape.clone();
    let mut axes_n = Vec::new();
    let clamp = |v: i64| v.clamp(-(1 << 53), 1 << 53);
    for (k, a) in axes.iter().enumerate() {
        let a = norm_axis(node, *a, r)?;
        axes_n.push(a);
        shape[a] = slice_len(&x.shape[a], starts[k], ends[k], steps[k]).2;
    }
    let attrs = json!({
        "starts": starts.iter().map(|v| clamp(*v)).collect::<Vec<_>>(),
        "ends": ends.iter().map(|v| clamp(*v)).collect::<Vec<_>>(),
        "axes": axes_n, "steps": steps});
    Ok(imp.emit("Slice", vec![json!(x.name)], attrs, out, x.dtype, shape))
}

fn split(imp: &mut Importer<'_>, node: &NodeProto) -> NResult<()> {
    let x = imp.tensor(&node.input[0])?;
    let r = x.shape.len();
    let a = norm_axis(node, attr_i(node, "axis").unwrap_or(0), r)?;
    let n = node.output.len() as i64;
    let sizes = match const_ints(imp, node, 1, "Split sizes")?.or_else(|| attr_ints(node, "split"))
    {
        Some(s) => s,
        None => {
            let d = x.shape[a]
                .as_int()
                .ok_or_else(|| unsupported("Split of a symbolic axis"))?;
            let chunk = (d + n - 1) / n;
            (0..n).map(|i| chunk.min(d - i * chunk).max(0)).collect()
        }
    };
    let mut start = 0i64;
    for (o, size) in node.output.iter().zip(sizes) {
        let mut shape = x.shape.clone();
        shape[a] = Dim::int(size);
        let attrs = json!({"starts": [start], "ends": [start + size], "axes": [a], "steps": [1]});
        let t = imp.emit("Slice", vec![json!(x.name)], attrs, o, x.dtype, shape);
        let t = imp.finalize(t, o);
        imp.set(o, Val::T(t));
        start += size;
    }
    Ok(())
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
