//! Contractions, convolutions, pooling, normalization, softmax and reductions.

use super::fold::{attr_f, attr_i, attr_ints, attr_s, norm_axis};
use super::import::{invalid, unsupported, Importer, NResult, Opnd};
use super::proto::NodeProto;
use super::value::{CTensor, TInfo, Val};
use crate::ir::dim::Dim;
use serde_json::json;

/// Imports the ops of this module; anything else is unsupported.
pub(super) fn import_nn(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    op: &str,
    out: &str,
) -> NResult<TInfo> {
    match op {
        "MatMul" => matmul(imp, node, out),
        "Gemm" => gemm(imp, node, out),
        "Conv" | "ConvTranspose" => conv(imp, node, op, out),
        "MaxPool" | "AveragePool" => super::pool::pool(imp, node, op, out),
        "GlobalAveragePool" | "GlobalMaxPool" => {
            let x = imp.tensor(&node.input[0])?;
            let axes: Vec<usize> = (2..x.shape.len()).collect();
            let f = if op == "GlobalMaxPool" { "max" } else { "mean" };
            let mut shape = x.shape.clone();
            for a in &axes {
                shape[*a] = Dim::int(1);
            }
            let attrs = json!({"fn": f, "axes": axes, "keepdim": true});
            Ok(imp.emit("Reduce", vec![json!(x.name)], attrs, out, x.dtype, shape))
        }
        "BatchNormalization" => batchnorm(imp, node, out),
        "Softmax" | "LogSoftmax" => {
            let x = imp.tensor(&node.input[0])?;
            let a = norm_axis(node, attr_i(node, "axis").unwrap_or(-1), x.shape.len())?;
            let t = imp.emit(
                "Softmax",
                vec![json!(x.name)],
                json!({"axis": a}),
                out,
                x.dtype,
                x.shape.clone(),
            );
            if op == "LogSoftmax" {
                return imp.ew(node, "log", &[Opnd::T(t)], out);
            }
            Ok(t)
        }
        "LayerNormalization" => {
            let x = imp.tensor(&node.input[0])?;
            let a = norm_axis(node, attr_i(node, "axis").unwrap_or(-1), x.shape.len())?;
            if node.output.iter().skip(1).any(|o| !o.is_empty()) {
                layernorm_stats(imp, node, &x, a)?;
            }
            let mut ins = vec![json!(x.name)];
            for i in 1..node.input.len().min(3) {
                if !node.input[i].is_empty() {
                    ins.push(json!(imp.tensor(&node.input[i])?.name));
                }
            }
            let attrs = json!({"axis": a, "eps": attr_f(node, "epsilon").unwrap_or(1e-5)});
            Ok(imp.emit("LayerNorm", ins, attrs, out, x.dtype, x.shape))
        }
        "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" => {
            reduce(imp, node, op, out)
        }
        _ => Err(unsupported("op not supported")),
    }
}

/// LayerNormalization's optional `Mean` and `InvStdDev` outputs (float32 inputs, the default
/// `stash_type`): means over axes `a..`, kept as size 1; `1 / sqrt(mean((x − mean)²) + ε)`.
fn layernorm_stats(imp: &mut Importer<'_>, node: &NodeProto, x: &TInfo, a: usize) -> NResult<()> {
    if x.dtype != crate::ir::dtype::DType::F32 || attr_i(node, "stash_type").unwrap_or(1) != 1 {
        return Err(unsupported(
            "LayerNormalization mean / inverse-std outputs of a non-float32 input",
        ));
    }
    let axes: Vec<usize> = (a..x.shape.len()).collect();
    let mut shape = x.shape.clone();
    for d in &mut shape[a..] {
        *d = Dim::int(1);
    }
    let attrs = json!({"fn": "mean", "axes": axes, "keepdim": true});
    let names: Vec<String> = (1..3)
        .map(|i| node.output.get(i).cloned().unwrap_or_default())
        .collect();
    let base = if names[0].is_empty() {
        "ln_mean"
    } else {
        &names[0]
    };
    let mean = imp.emit(
        "Reduce",
        vec![json!(x.name)],
        attrs.clone(),
        base,
        x.dtype,
        shape.clone(),
    );
    let mean = imp.finalize(mean, &names[0]);
    imp.set(&names[0], Val::T(mean.clone()));
    if names[1].is_empty() {
        return Ok(());
    }
    let out = names[1].as_str();
    let d = imp.ew(node, "sub", &[Opnd::T(x.clone()), Opnd::T(mean)], out)?;
    let sq = imp.ew(node, "mul", &[Opnd::T(d.clone()), Opnd::T(d)], out)?;
    let var = imp.emit("Reduce", vec![json!(sq.name)], attrs, out, x.dtype, shape);
    let eps = attr_f(node, "epsilon").unwrap_or(1e-5);
    let ve = imp.ew(node, "add", &[Opnd::T(var), Opnd::S(eps)], out)?;
    let sd = imp.ew(node, "sqrt", &[Opnd::T(ve)], out)?;
    let inv = imp.ew(node, "recip", &[Opnd::T(sd)], out)?;
    let inv = imp.finalize(inv, out);
    imp.set(out, Val::T(inv));
    Ok(())
}

fn matmul(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    let a = imp.tensor(&node.input[0])?;
    let b = imp.tensor(&node.input[1])?;
    let (mut sa, mut sb) = (a.shape.clone(), b.shape.clone());
    let (va, vb) = (sa.len() == 1, sb.len() == 1);
    if va {
        sa.insert(0, Dim::int(1));
    }
    if vb {
        sb.push(Dim::int(1));
    }
    let (ra, rb) = (sa.len(), sb.len());
    let batch =
        crate::ir::dim::broadcast_shapes(&sa[..ra - 2], &sb[..rb - 2]).map_err(|(x, y)| {
            invalid(
                node,
                format!("MatMul batch dims {x} and {y} do not broadcast"),
            )
        })?;
    let mut shape = batch;
    if !va {
        shape.push(sa[ra - 2].clone());
    }
    if !vb {
        shape.push(sb[rb - 1].clone());
    }
    Ok(imp.emit(
        "MatMul",
        vec![json!(a.name), json!(b.name)],
        json!({}),
        out,
        a.dtype,
        shape,
    ))
}

fn gemm(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    let a = imp.tensor(&node.input[0])?;
    let b = imp.tensor(&node.input[1])?;
    let ta = attr_i(node, "transA") == Some(1);
    let tb = attr_i(node, "transB") == Some(1);
    if a.shape.len() != 2 || b.shape.len() != 2 {
        return Err(invalid(node, "Gemm operands must be 2-D"));
    }
    let m = a.shape[usize::from(ta)].clone();
    let n = b.shape[usize::from(!tb)].clone();
    let mut ins = vec![json!(a.name), json!(b.name)];
    if let Some(c) = node.input.get(2).filter(|s| !s.is_empty()) {
        ins.push(json!(imp.tensor(c)?.name));
    }
    let attrs = json!({"trans_a": ta, "trans_b": tb,
        "alpha": attr_f(node, "alpha").unwrap_or(1.0), "beta": attr_f(node, "beta").unwrap_or(1.0)});
    Ok(imp.emit("GEMM", ins, attrs, out, a.dtype, vec![m, n]))
}

/// `[lo, hi]` pads per spatial dim from ONNX `pads` (all begins, then all ends) or `auto_pad`.
pub(super) fn spatial_pads(
    node: &NodeProto,
    x: &[Dim],
    kernel: &[i64],
    stride: &[i64],
    dil: &[i64],
) -> NResult<Vec<(i64, i64)>> {
    let k = kernel.len();
    match attr_s(node, "auto_pad").as_deref().unwrap_or("NOTSET") {
        "NOTSET" => {
            let p = attr_ints(node, "pads").unwrap_or_else(|| vec![0; 2 * k]);
            if p.len() != 2 * k {
                return Err(invalid(
                    node,
                    "`pads` must have two entries per spatial dim",
                ));
            }
            Ok((0..k).map(|i| (p[i], p[i + k])).collect())
        }
        "VALID" => Ok(vec![(0, 0); k]),
        mode @ ("SAME_UPPER" | "SAME_LOWER") => (0..k)
            .map(|i| {
                let n = x[2 + i]
                    .as_int()
                    .ok_or_else(|| unsupported(format!("auto_pad {mode} on a symbolic size")))?;
                let o = (n + stride[i] - 1) / stride[i];
                let total = ((o - 1) * stride[i] + dil[i] * (kernel[i] - 1) + 1 - n).max(0);
                let small = total / 2;
                Ok(if mode == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                })
            })
            .collect(),
        other => Err(invalid(node, format!("unknown auto_pad `{other}`"))),
    }
}

fn conv(imp: &mut Importer<'_>, node: &NodeProto, op: &str, out: &str) -> NResult<TInfo> {
    let x = imp.tensor(&node.input[0])?;
    let w = imp.tensor(&node.input[1])?;
    let k = x.shape.len().saturating_sub(2);
    let kernel: Vec<i64> = match attr_ints(node, "kernel_shape") {
        Some(v) => v,
        None => w.shape[2..]
            .iter()
            .map(|d| {
                d.as_int()
                    .ok_or_else(|| unsupported("a symbolic kernel size"))
            })
            .collect::<NResult<_>>()?,
    };
    let stride = attr_ints(node, "strides").unwrap_or_else(|| vec![1; k]);
    let dil = attr_ints(node, "dilations").unwrap_or_else(|| vec![1; k]);
    let groups = attr_i(node, "group").unwrap_or(1);
    let mut outpad = attr_ints(node, "output_padding").unwrap_or_else(|| vec![0; k]);
    if outpad.len() != k {
        return Err(invalid(
            node,
            "`output_padding` must have one entry per spatial dim",
        ));
    }
    let pads = if op == "ConvTranspose" {
        let geo = TransposeGeo {
            kernel: &kernel,
            stride: &stride,
            dil: &dil,
        };
        transpose_pads(node, &x.shape, &geo, &mut outpad)?
    } else {
        spatial_pads(node, &x.shape, &kernel, &stride, &dil)?
    };
    let mut shape = vec![x.shape[0].clone()];
    shape.push(if op == "Conv" {
        w.shape[0].clone()
    } else {
        w.shape[1].mul_int(groups)
    });
    for i in 0..k {
        let (lo, hi) = pads[i];
        let n = &x.shape[2 + i];
        shape.push(if op == "Conv" {
            n.add_int(lo + hi - dil[i] * (kernel[i] - 1) - 1)
                .floordiv(stride[i])
                .add_int(1)
        } else {
            n.add_int(-1)
                .mul_int(stride[i])
                .add_int(-lo - hi + dil[i] * (kernel[i] - 1) + outpad[i] + 1)
        });
    }
    let mut ins = vec![json!(x.name), json!(w.name)];
    if let Some(b) = node.input.get(2).filter(|s| !s.is_empty()) {
        ins.push(json!(imp.tensor(b)?.name));
    }
    let pad: Vec<[i64; 2]> = pads.iter().map(|(a, b)| [*a, *b]).collect();
    let mut attrs = json!({"stride": stride, "pad": pad, "dilation": dil, "groups": groups});
    if op == "ConvTranspose" {
        attrs["output_padding"] = json!(outpad);
    }
    Ok(imp.emit(op, ins, attrs, out, x.dtype, shape))
}

/// Kernel geometry of a `ConvTranspose` (per spatial dim).
struct TransposeGeo<'a> {
    kernel: &'a [i64],
    stride: &'a [i64],
    dil: &'a [i64],
}

/// `ConvTranspose`'s `[lo, hi]` pads per spatial dim. With `output_shape` or `auto_pad`
/// `SAME_UPPER`/`SAME_LOWER` (whose target is `input · stride`), the ONNX formula:
/// `total = stride·(in − 1) + output_padding + dilation·(kernel − 1) + 1 − out`, SAME_UPPER
/// `(total/2, total − total/2)`, otherwise `(total − total/2, total/2)` (`pads` are ignored);
/// `VALID` is no padding. A total of −1 without auto_pad (an output one longer than the full
/// result) is one more `output_padding` (`outpad`), as onnxruntime and the ONNX reference
/// compute it; other negative totals are refused (the formula would give negative pads, which
/// the reference and onnxruntime do not follow).
fn transpose_pads(
    node: &NodeProto,
    x: &[Dim],
    geo: &TransposeGeo<'_>,
    outpad: &mut [i64],
) -> NResult<Vec<(i64, i64)>> {
    let k = geo.kernel.len();
    let mode = attr_s(node, "auto_pad").unwrap_or_else(|| "NOTSET".into());
    let target: Option<Vec<i64>> = match attr_ints(node, "output_shape") {
        // Spatial sizes, or (as onnxruntime accepts) the full output shape.
        Some(v) if v.len() == k => Some(v),
        Some(v) if v.len() == k + 2 => Some(v[2..].to_vec()),
        Some(_) => return Err(invalid(node, "`output_shape` must list the spatial sizes")),
        None => None,
    };
    let same = matches!(mode.as_str(), "SAME_UPPER" | "SAME_LOWER");
    if target.is_none() && !same {
        return match mode.as_str() {
            "VALID" => Ok(vec![(0, 0); k]),
            "NOTSET" => spatial_pads(node, x, geo.kernel, geo.stride, geo.dil),
            other => Err(invalid(node, format!("unknown auto_pad `{other}`"))),
        };
    }
    (0..k)
        .map(|i| {
            let n = x[2 + i].as_int().ok_or_else(|| {
                unsupported("ConvTranspose output_shape / auto_pad on a symbolic size")
            })?;
            let out = target.as_ref().map_or(n * geo.stride[i], |t| t[i]);
            let full = geo.stride[i] * (n - 1) + outpad[i] + geo.dil[i] * (geo.kernel[i] - 1) + 1;
            let total = full - out;
            if total == -1 && !same {
                outpad[i] += 1;
                return Ok((0, 0));
            }
            if total < 0 {
                return Err(unsupported(format!(
                    "ConvTranspose output size {out} beyond the full result {full} (negative pads)"
                )));
            }
            let half = total / 2;
            Ok(if mode == "SAME_UPPER" {
                (half, total - half)
            } else {
                (total - half, half)
            })
        })
        .collect()
}

fn batchnorm(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    let stats_out = node.output.iter().skip(1).any(|o| !o.is_empty());
    if imp.opset < 14 && stats_out {
        return Err(unsupported(
            "BatchNormalization-9 in training mode (saved mean/variance outputs)",
        ));
    }
    if attr_i(node, "training_mode") == Some(1) {
        return super::batchnorm::training(imp, node, out);
    }
    if stats_out {
        return Err(invalid(
            node,
            "running mean / variance outputs of BatchNormalization in inference mode",
        ));
    }
    let x = imp.tensor(&node.input[0])?;
    let mut p: Vec<CTensor> = Vec::new();
    for i in 1..5 {
        p.push(
            imp.konst(&node.input[i])?.ok_or_else(|| {
                unsupported("BatchNormalization parameters that are not constants")
            })?,
        );
    }
    let eps = attr_f(node, "epsilon").unwrap_or(1e-5);
    let c = p[0].numel();
    let r = x.shape.len();
    let mut shape = vec![c];
    shape.extend(std::iter::repeat_n(1, r.saturating_sub(2)));
    let scale: Vec<f64> = (0..c)
        .map(|i| p[0].data[i] / (p[3].data[i] + eps).sqrt())
        .collect();
    let shift: Vec<f64> = (0..c)
        .map(|i| p[1].data[i] - p[2].data[i] * scale[i])
        .collect();
    let mk = |data: Vec<f64>| {
        CTensor {
            elem: p[0].elem,
            shape: shape.clone(),
            data,
        }
        .normalized()
    };
    let sname = imp.fresh(&format!("{}_scale", node.input[1]));
    let s = imp.materialize(&sname, &mk(scale))?;
    let bname = imp.fresh(&format!("{}_shift", node.input[2]));
    let b = imp.materialize(&bname, &mk(shift))?;
    let m = imp.ew(node, "mul", &[Opnd::T(x), Opnd::T(s)], out)?;
    imp.ew(node, "add", &[Opnd::T(m), Opnd::T(b)], out)
}

fn reduce(imp: &mut Importer<'_>, node: &NodeProto, op: &str, out: &str) -> NResult<TInfo> {
    let x = imp.tensor(&node.input[0])?;
    let r = x.shape.len();
    let axes_input = op == "ReduceSum" || imp.opset >= 18;
    let axes: Option<Vec<i64>> = if axes_input {
        match node.input.get(1).filter(|s| !s.is_empty()) {
            Some(n) => Some(
                imp.konst(n)?
                    .ok_or_else(|| unsupported("reduction axes that are not constants"))?
                    .ints(),
            ),
            None => None,
        }
    } else {
        attr_ints(node, "axes")
    };
    let keep = attr_i(node, "keepdims").unwrap_or(1) == 1;
    let axes: Vec<usize> = match axes.filter(|a| !a.is_empty()) {
        Some(a) => {
            let mut v: Vec<usize> = a
                .iter()
                .map(|x| norm_axis(node, *x, r))
                .collect::<NResult<_>>()?;
            v.sort_unstable();
            v.dedup();
            v
        }
        None if attr_i(node, "noop_with_empty_axes") == Some(1) => {
            return Ok(imp.emit(
                "Reshape",
                vec![json!(x.name)],
                json!({"shape": super::ops::dims_attr_plain(&x.shape)}),
                out,
                x.dtype,
                x.shape.clone(),
            ));
        }
        None => (0..r).collect(),
    };
    let f = &op[6..].to_ascii_lowercase();
    let shape: Vec<Dim> = x
        .shape
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match (axes.contains(&i), keep) {
            (true, true) => Some(Dim::int(1)),
            (true, false) => None,
            _ => Some(d.clone()),
        })
        .collect();
    let attrs = json!({"fn": f, "axes": axes, "keepdim": keep});
    Ok(imp.emit("Reduce", vec![json!(x.name)], attrs, out, x.dtype, shape))
}
