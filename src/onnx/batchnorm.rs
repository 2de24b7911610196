//! `BatchNormalization` in training mode (opset 14+, `training_mode=1`): normalization by the
//! batch statistics and the running-statistics outputs, all deterministic formulas:
//! `mean = ReduceMean(X, all axes but 1)`, `var = ReduceMean((X − mean)²)` (the population
//! variance), `Y = scale · (X − mean) / √(var + ε) + B`,
//! `running_mean = input_mean · momentum + mean · (1 − momentum)` and likewise `running_var`.

use super::fold::attr_f;
use super::import::{invalid, Importer, NResult, Opnd};
use super::proto::NodeProto;
use super::value::{TInfo, Val};
use crate::ir::dim::Dim;
use serde_json::json;

/// Imports a training-mode `BatchNormalization`; returns `Y` and binds the optional
/// `running_mean` / `running_var` outputs.
pub(super) fn training(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    if node.input.len() < 5 {
        return Err(invalid(node, "BatchNormalization takes five inputs"));
    }
    let x = imp.tensor(&node.input[0])?;
    let r = x.shape.len();
    if r < 2 {
        return Err(invalid(node, "BatchNormalization of a tensor of rank < 2"));
    }
    let eps = attr_f(node, "epsilon").unwrap_or(1e-5);
    let momentum = attr_f(node, "momentum").unwrap_or(0.9);
    let axes: Vec<usize> = (0..r).filter(|a| *a != 1).collect();
    let mut kshape = vec![Dim::int(1); r];
    kshape[1] = x.shape[1].clone();
    let attrs = json!({"fn": "mean", "axes": axes, "keepdim": true});
    let mean = imp.emit(
        "Reduce",
        vec![json!(x.name)],
        attrs.clone(),
        out,
        x.dtype,
        kshape.clone(),
    );
    let t = Opnd::T;
    let d = imp.ew(node, "sub", &[t(x.clone()), t(mean.clone())], out)?;
    let sq = imp.ew(node, "mul", &[t(d.clone()), t(d.clone())], out)?;
    let var = imp.emit("Reduce", vec![json!(sq.name)], attrs, out, x.dtype, kshape);
    // [C] parameters as [C, 1, …] so they broadcast along axis 1.
    let mut pshape = vec![x.shape[1].clone()];
    pshape.extend(std::iter::repeat_n(Dim::int(1), r - 2));
    let scale = channel_param(imp, node, 1, &pshape, out)?;
    let bias = channel_param(imp, node, 2, &pshape, out)?;
    let sd_in = imp.ew(node, "add", &[t(var.clone()), Opnd::S(eps)], out)?;
    let sd = imp.ew(node, "sqrt", &[t(sd_in)], out)?;
    let sdx = imp.ew(node, "mul", &[t(scale), t(d)], out)?;
    let norm = imp.ew(node, "div", &[t(sdx), t(sd)], out)?;
    let y = imp.ew(node, "add", &[t(norm), t(bias)], out)?;
    let y = imp.finalize(y, out);
    for (i, stat) in [(1usize, mean), (2, var)] {
        let Some(name) = node.output.get(i).filter(|o| !o.is_empty()) else {
            continue;
        };
        let name = name.as_str();
        let running = imp.tensor(&node.input[2 + i])?;
        let cshape = vec![x.shape[1].clone()];
        let flat = imp.emit(
            "Reshape",
            vec![json!(stat.name)],
            json!({"shape": super::ops::dims_attr_plain(&cshape)}),
            name,
            x.dtype,
            cshape,
        );
        let old = imp.ew(node, "mul", &[t(running), Opnd::S(momentum)], name)?;
        let new = imp.ew(node, "mul", &[t(flat), Opnd::S(1.0 - momentum)], name)?;
        let sum = imp.ew(node, "add", &[t(old), t(new)], name)?;
        let sum = imp.finalize(sum, name);
        imp.set(name, Val::T(sum));
    }
    Ok(y)
}

/// Input `i` (a `[C]` tensor) reshaped to `shape` (`[C, 1, …]`).
fn channel_param(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    i: usize,
    shape: &[Dim],
    out: &str,
) -> NResult<TInfo> {
    let p = imp.tensor(&node.input[i])?;
    if p.shape.len() != 1 {
        return Err(invalid(
            node,
            format!("BatchNormalization input {i} must be one-dimensional"),
        ));
    }
    if shape.len() == 1 {
        return Ok(p);
    }
    Ok(imp.emit(
        "Reshape",
        vec![json!(p.name)],
        json!({"shape": super::ops::dims_attr_plain(shape)}),
        out,
        p.dtype,
        shape.to_vec(),
    ))
}
