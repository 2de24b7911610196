//! Movement ops: `Transpose`, `Tile`, `Reshape` / `Flatten` / `Squeeze` / `Unsqueeze`,
//! `Expand`, `Pad`, `Slice` and `Split` as graph.json movement nodes.

use super::super::{extra, resize, symdata};
use super::{flatten_axis, reshape_to, shape_input};
use crate::ir::dim::Dim;
use crate::onnx::fold::{attr_i, attr_ints, attr_s, norm_axis};
use crate::onnx::import::{invalid, unsupported, Importer, NResult};
use crate::onnx::proto::NodeProto;
use crate::onnx::value::{TInfo, Val};
use serde_json::{json, Value};

/// `Transpose` as `Permute` (default: reversed axes).
pub(super) fn transpose(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
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
pub(super) fn tile(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
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

pub(super) fn reshape_like(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    op: &str,
    out: &str,
) -> NResult<TInfo> {
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

pub(super) fn expand(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
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

pub(super) fn pad(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
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
        return resize::pad_by_index(imp, node, &x, &pairs, &mode, out);
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
        Some(v) => extra::pad_runtime_value(imp, node, &x, &pairs, padded, v, out),
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

pub(super) fn slice(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    if symdata::is_symbolic(imp, node, 1) || symdata::is_symbolic(imp, node, 2) {
        return symdata::slice_symbolic(imp, node, out);
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
        return resize::slice_by_index(imp, node, &x, spec, out);
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

pub(super) fn split(imp: &mut Importer<'_>, node: &NodeProto) -> NResult<()> {
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
