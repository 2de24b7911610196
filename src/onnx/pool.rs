//! `MaxPool` / `AveragePool`: graph.json `Pool`, with explicit padding where ONNX allows more
//! than graph.json (`ceil_mode=1` averages, pads larger than half the kernel).

use super::fold::{attr_i, attr_ints};
use super::import::{invalid, unsupported, Importer, NResult, Opnd};
use super::nn::spatial_pads;
use super::proto::NodeProto;
use super::value::{et, CTensor, TInfo};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use serde_json::json;

/// Pooling geometry of one node: per spatial dim kernel, stride, dilation, `[lo, hi]` pads.
pub(super) struct Geo {
    pub kernel: Vec<i64>,
    pub stride: Vec<i64>,
    pub dil: Vec<i64>,
    pub pads: Vec<(i64, i64)>,
    /// `ceil_mode=1`.
    pub ceil: bool,
}

impl Geo {
    /// The window span of spatial dim `i`.
    pub fn span(&self, i: usize) -> i64 {
        self.dil[i] * (self.kernel[i] - 1) + 1
    }

    /// Output length of spatial dim `i` over `n` inputs; `ceil_mode` drops a last window that
    /// would start past the input and its start padding (as the ONNX reference does).
    pub fn out_len(&self, i: usize, n: i64) -> i64 {
        let (lo, hi) = self.pads[i];
        let total = n + lo + hi - self.span(i);
        if !self.ceil {
            return total.div_euclid(self.stride[i]) + 1;
        }
        let mut count = (total + self.stride[i] - 1).div_euclid(self.stride[i]) + 1;
        if (count - 1) * self.stride[i] >= n + lo {
            count -= 1;
        }
        count
    }
}

/// Imports `MaxPool` / `AveragePool` (`op`) as graph.json `Pool`.
pub(super) fn pool(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    op: &str,
    out: &str,
) -> NResult<TInfo> {
    let ceil = attr_i(node, "ceil_mode") == Some(1);
    let x = imp.tensor(&node.input[0])?;
    let kernel = attr_ints(node, "kernel_shape").ok_or_else(|| invalid(node, "no kernel_shape"))?;
    let k = kernel.len();
    let stride = attr_ints(node, "strides").unwrap_or_else(|| vec![1; k]);
    let dil = attr_ints(node, "dilations").unwrap_or_else(|| vec![1; k]);
    let pads = spatial_pads(node, &x.shape, &kernel, &stride, &dil)?;
    let g = Geo {
        kernel,
        stride,
        dil,
        pads,
        ceil,
    };
    let avg = op != "MaxPool";
    let indices = node.output.get(1).filter(|o| !o.is_empty());
    if let Some(iname) = indices.filter(|_| !avg) {
        let y = pool_output(imp, node, &x, &g, avg, out)?;
        let y = imp.finalize(y, out);
        let order = attr_i(node, "storage_order").unwrap_or(0);
        let idx = super::pool_indices::max_pool_indices(imp, node, &x, &g, &y, order == 1, iname)?;
        let idx = imp.finalize(idx, iname);
        imp.set(iname, super::value::Val::T(idx));
        return Ok(y);
    }
    pool_output(imp, node, &x, &g, avg, out)
}

/// The pooled output (`Y`) of geometry `g` over `x`.
fn pool_output(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    x: &TInfo,
    g: &Geo,
    avg: bool,
    out: &str,
) -> NResult<TInfo> {
    let k = g.kernel.len();
    let oversize = (0..k).any(|i| 2 * g.pads[i].0.max(g.pads[i].1) > g.span(i));
    let include = attr_i(node, "count_include_pad") == Some(1);
    if oversize || (g.ceil && avg) {
        return explicit_pool(imp, node, x, g, avg, include, out);
    }
    let x = if g.ceil {
        ceil_mode_pad(imp, x, g, out)?
    } else {
        x.clone()
    };
    let mut shape = x.shape[..2].to_vec();
    for i in 0..k {
        let (lo, hi) = g.pads[i];
        shape.push(
            x.shape[2 + i]
                .add_int(lo + hi - g.span(i))
                .floordiv(g.stride[i])
                .add_int(1),
        );
    }
    let pad: Vec<[i64; 2]> = g.pads.iter().map(|(a, b)| [*a, *b]).collect();
    let mode = if avg { "avg" } else { "max" };
    let attrs = json!({"mode": mode, "kernel": g.kernel, "stride": g.stride, "pad": pad,
        "dilation": g.dil, "count_include_pad": include});
    Ok(imp.emit("Pool", vec![json!(x.name)], attrs, out, x.dtype, shape))
}

/// Static spatial sizes of `x`, or unsupported (`what` names the feature needing them).
pub(super) fn static_spatial(x: &TInfo, what: &str) -> NResult<Vec<i64>> {
    x.shape[2..]
        .iter()
        .map(|d| {
            d.as_int()
                .ok_or_else(|| unsupported(format!("{what} on a symbolic size")))
        })
        .collect()
}

/// MaxPool's `ceil_mode=1` as floor mode over `x` extended at the end of each spatial axis by
/// the lowest float (never a maximum): enough for the last window that starts inside the input
/// or its start padding. Static spatial sizes only.
fn ceil_mode_pad(imp: &mut Importer<'_>, x: &TInfo, g: &Geo, out: &str) -> NResult<TInfo> {
    let ns = static_spatial(x, "ceil_mode=1")?;
    let mut pad = vec![[0i64, 0i64]; x.shape.len()];
    let mut shape = x.shape.clone();
    for (i, &n) in ns.iter().enumerate() {
        let (lo, hi) = g.pads[i];
        let count = g.out_len(i, n);
        let extra = ((count - 1) * g.stride[i] + g.span(i) - (n + lo + hi)).max(0);
        pad[2 + i][1] = extra;
        shape[2 + i] = Dim::int(n + extra);
    }
    if pad.iter().all(|p| p[1] == 0) {
        return Ok(x.clone());
    }
    Ok(imp.emit(
        "Pad",
        vec![json!(x.name)],
        json!({"pad": pad, "value": f64::from(f32::MIN)}),
        out,
        x.dtype,
        shape,
    ))
}

/// Pooling over `x` padded explicitly (zeros for averages, the lowest float for maxima) with a
/// pad-free graph.json `Pool`. An average is the window sum over the window size (`Pool` avg with
/// `count_include_pad`), rescaled per output position by `window size / count`, where `count`
/// is the ONNX reference's divisor: the window's elements inside the input
/// (`count_include_pad=0`) or inside the padded input (`=1`; with `ceil_mode` the last windows
/// may reach past it). Static spatial sizes only.
fn explicit_pool(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    x: &TInfo,
    g: &Geo,
    avg: bool,
    include: bool,
    out: &str,
) -> NResult<TInfo> {
    let ns = static_spatial(x, "explicit pooling pads")?;
    let k = ns.len();
    let mut pad = vec![[0i64, 0i64]; x.shape.len()];
    let mut pshape = x.shape.clone();
    let mut oshape = x.shape[..2].to_vec();
    // Per spatial dim, the divisor of each output position.
    let mut counts: Vec<Vec<i64>> = Vec::with_capacity(k);
    for (i, &n) in ns.iter().enumerate() {
        let (lo, hi) = g.pads[i];
        let m = g.out_len(i, n);
        if m < 1 {
            return Err(unsupported("pooling with an empty output"));
        }
        let extra = ((m - 1) * g.stride[i] + g.span(i) - (n + lo + hi)).max(0);
        pad[2 + i] = [lo, hi + extra];
        pshape[2 + i] = Dim::int(n + lo + hi + extra);
        oshape.push(Dim::int(m));
        let (first, end) = if include { (-lo, n + hi) } else { (0, n) };
        counts.push(
            (0..m)
                .map(|j| {
                    (0..g.kernel[i])
                        .map(|t| j * g.stride[i] - lo + t * g.dil[i])
                        .filter(|p| (first..end).contains(p))
                        .count() as i64
                })
                .collect(),
        );
    }
    let value = if avg { 0.0 } else { f64::from(f32::MIN) };
    let xp = imp.emit(
        "Pad",
        vec![json!(x.name)],
        json!({"pad": pad, "value": value}),
        out,
        x.dtype,
        pshape,
    );
    let zero: Vec<[i64; 2]> = vec![[0, 0]; k];
    let mode = if avg { "avg" } else { "max" };
    let attrs = json!({"mode": mode, "kernel": g.kernel, "stride": g.stride, "pad": zero,
        "dilation": g.dil, "count_include_pad": true});
    let pooled = imp.emit("Pool", vec![json!(xp.name)], attrs, out, x.dtype, oshape);
    if !avg {
        return Ok(pooled);
    }
    if counts.iter().flatten().any(|c| *c == 0) {
        return Err(unsupported(
            "an average pooling window with no element to average",
        ));
    }
    let size: i64 = g.kernel.iter().product();
    let scale = rescale(&counts, size, x.dtype)?;
    let sname = imp.fresh(&format!("{out}_count_scale"));
    let s = imp.materialize(&sname, &scale)?;
    imp.ew(node, "mul", &[Opnd::T(pooled), Opnd::T(s)], out)
}

/// `[1, 1, *out]` constant `size / count` over the per-dim divisors `counts` (their product).
fn rescale(counts: &[Vec<i64>], size: i64, dtype: DType) -> NResult<CTensor> {
    let elem = match dtype {
        DType::F32 => et::FLOAT,
        DType::F16 => et::FLOAT16,
        DType::BF16 => et::BFLOAT16,
        _ => return Err(unsupported("average pooling of a non-float tensor")),
    };
    let mut data = vec![1.0f64];
    for c in counts {
        data = data
            .iter()
            .flat_map(|d| c.iter().map(move |v| d * *v as f64))
            .collect();
    }
    let mut shape = vec![1, 1];
    shape.extend(counts.iter().map(Vec::len));
    Ok(CTensor {
        elem,
        shape,
        data: data.iter().map(|c| size as f64 / c).collect(),
    })
}
