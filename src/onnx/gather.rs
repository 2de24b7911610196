//! ONNX `Gather` (take along an axis) as an index expand plus graph.json's torch-style `Gather`,
//! and `Range` / `ConstantOfShape` over symbolic sizes as fills and scans.

use super::fold::{attr, attr_i, norm_axis};
use super::import::{invalid, unsupported, Importer, NResult, Opnd};
use super::ops::{dims_attr, reshape_to, scalar_param, shape_input};
use super::proto::NodeProto;
use super::value::{decode_tensor, et, CTensor, TInfo, Val};
use crate::ir::dim::{numel, Dim};
use serde_json::json;

/// `Y = take(X, I, axis)`: `Y.shape = X.shape[:a] + I.shape + X.shape[a+1:]`.
pub(super) fn take(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    let x = imp.tensor(&node.input[0])?;
    let r = x.shape.len();
    let a = norm_axis(node, attr_i(node, "axis").unwrap_or(0), r)?;
    let idx_name = &node.input[1];
    let konst = if matches!(imp.val(idx_name), Some(Val::T(_))) {
        None
    } else {
        imp.konst(idx_name)?
    };
    let idx = match konst {
        Some(c) => {
            let n = x.shape[a].as_int();
            let mut c = c;
            for v in &mut c.data {
                if *v < 0.0 {
                    *v += n
                        .ok_or_else(|| unsupported("a negative Gather index on a symbolic axis"))?
                        as f64;
                }
            }
            if c.shape.is_empty() {
                // A scalar index: a slice, then drop the axis.
                let i = c.data[0] as i64;
                let mut shape = x.shape.clone();
                shape[a] = Dim::int(1);
                let attrs = json!({"starts": [i], "ends": [i + 1], "axes": [a], "steps": [1]});
                let s = imp.emit(
                    "Slice",
                    vec![json!(x.name)],
                    attrs,
                    out,
                    x.dtype,
                    shape.clone(),
                );
                shape.remove(a);
                return reshape_to(imp, node, &s, shape, out);
            }
            let name = imp.fresh(idx_name);
            imp.materialize(
                &name,
                &CTensor {
                    elem: et::INT64,
                    ..c
                },
            )?
        }
        None => wrapped_index(imp, node, idx_name, &x.shape[a], out)?,
    };
    if idx.dtype != crate::ir::dtype::DType::I32 {
        return Err(invalid(node, "Gather indices must be int32 or int64"));
    }
    gather_along(imp, node, &x, a, &idx, out)
}

/// `take(x, idx, a)` with a runtime index tensor: the flattened index is reshaped to a column
/// along `a`, expanded over `x`'s other axes, gathered torch-style, then reshaped.
pub(super) fn gather_along(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    x: &TInfo,
    a: usize,
    idx: &TInfo,
    out: &str,
) -> NResult<TInfo> {
    let r = x.shape.len();
    let m = numel(&idx.shape);
    let flat = if idx.shape.len() == 1 {
        idx.clone()
    } else {
        reshape_to(imp, node, idx, vec![m.clone()], out)?
    };
    let mut ones = vec![Dim::int(1); r];
    ones[a] = m.clone();
    let col = reshape_to(imp, node, &flat, ones, out)?;
    let mut gshape = x.shape.clone();
    gshape[a] = m;
    let exp_attr: Vec<serde_json::Value> = gshape
        .iter()
        .enumerate()
        .map(|(i, d)| {
            if i == a {
                Ok(json!(-1))
            } else if d.as_int().is_some() || d.as_symbol().is_some() {
                Ok(json!(d))
            } else {
                Err(unsupported(format!(
                    "Gather on data with a computed size {d}"
                )))
            }
        })
        .collect::<NResult<_>>()?;
    let expanded = imp.emit(
        "Expand",
        vec![json!(col.name)],
        json!({"shape": exp_attr}),
        out,
        idx.dtype,
        gshape.clone(),
    );
    let g = imp.emit(
        "Gather",
        vec![json!(x.name), json!(expanded.name)],
        json!({"axis": a}),
        out,
        x.dtype,
        gshape.clone(),
    );
    let mut fshape = x.shape[..a].to_vec();
    fshape.extend(idx.shape.iter().cloned());
    fshape.extend(x.shape[a + 1..].iter().cloned());
    if fshape == gshape {
        return Ok(g);
    }
    reshape_to(imp, node, &g, fshape, out)
}

/// The index tensor `name` with negative values wrapped (`i < 0 ? i + n : i`) when the axis size
/// `n` is known; constants are wrapped at import.
pub(super) fn wrapped_index(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    name: &str,
    n: &Dim,
    out: &str,
) -> NResult<TInfo> {
    if !matches!(imp.val(name), Some(Val::T(_))) {
        if let (Some(mut c), Some(n)) = (imp.konst(name)?, n.as_int()) {
            for v in &mut c.data {
                if *v < 0.0 {
                    *v += n as f64;
                }
            }
            let fresh = imp.fresh(name);
            return imp.materialize(
                &fresh,
                &CTensor {
                    elem: et::INT64,
                    ..c
                },
            );
        }
    }
    let t = imp.tensor(name)?;
    Ok(match n.as_int() {
        Some(n) => {
            let neg = imp.ew(node, "lt", &[Opnd::T(t.clone()), Opnd::S(0.0)], out)?;
            let wrapped = imp.ew(node, "add", &[Opnd::T(t.clone()), Opnd::S(n as f64)], out)?;
            imp.ew(
                node,
                "where",
                &[Opnd::T(neg), Opnd::T(wrapped), Opnd::T(t)],
                out,
            )?
        }
        None => t,
    })
}

/// `Range(start, limit, delta)` with a symbolic limit: an exclusive scan of ones, scaled.
pub(super) fn range(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    let start = imp
        .konst(&node.input[0])?
        .ok_or_else(|| unsupported("Range with a start computed at run time"))?;
    let delta = imp
        .konst(&node.input[2])?
        .ok_or_else(|| unsupported("Range with a delta computed at run time"))?;
    let limit = shape_input(imp, node, 1)?;
    let (s, d) = (start.data[0], delta.data[0]);
    if s.fract() != 0.0 || d.fract() != 0.0 || d <= 0.0 {
        return Err(unsupported(
            "Range over a symbolic size with a fractional or non-positive step",
        ));
    }
    let n = limit
        .first()
        .cloned()
        .unwrap_or(Dim::int(0))
        .add_int(-(s as i64))
        .ceildiv(d as i64);
    let ones = scalar_param(imp, &format!("{out}_one"), start.elem, 1.0)?;
    let attr = dims_attr(node, std::slice::from_ref(&n), false)?;
    let filled = imp.emit(
        "Expand",
        vec![json!(ones.name)],
        json!({"shape": attr}),
        out,
        ones.dtype,
        vec![n.clone()],
    );
    let attrs = json!({"fn": "sum", "axis": 0, "exclusive": true, "reverse": false});
    let mut t = imp.emit(
        "Cumulative",
        vec![json!(filled.name)],
        attrs,
        out,
        ones.dtype,
        vec![n],
    );
    if d != 1.0 {
        t = imp.ew(node, "mul", &[Opnd::T(t), Opnd::S(d)], out)?;
    }
    if s != 0.0 {
        t = imp.ew(node, "add", &[Opnd::T(t), Opnd::S(s)], out)?;
    }
    Ok(t)
}

/// `ConstantOfShape` of a symbolic shape: a one-element constant expanded.
pub(super) fn constant_of_shape(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    out: &str,
) -> NResult<TInfo> {
    let dims = shape_input(imp, node, 0)?;
    let value = match attr(node, "value").and_then(|a| a.t.as_ref()) {
        Some(t) => decode_tensor(t, imp.dir).map_err(|w| invalid(node, w))?,
        None => CTensor::scalar(et::FLOAT, 0.0),
    };
    let one = scalar_param(
        imp,
        &format!("{out}_value"),
        value.elem,
        value.data.first().copied().unwrap_or(0.0),
    )?;
    let attr = dims_attr(node, &dims, false)?;
    Ok(imp.emit(
        "Expand",
        vec![json!(one.name)],
        json!({"shape": attr}),
        out,
        one.dtype,
        dims,
    ))
}
