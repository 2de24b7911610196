//! `MaxPool`'s second output `Indices`: per output position, the flat index into `X` (`N·C·…`
//! row-major; `storage_order=1` makes the spatial part column-major) of the first maximum of the
//! window in scan order, as the ONNX reference computes it (`x > best` replaces the best, so
//! ties keep the earliest element; out-of-bounds window elements are skipped).
//!
//! graph.json has no argmax: each kernel tap `t` is a strided `Slice` of the (explicitly padded)
//! input, compared with the pooled maximum (`eq`); a chain of `where`s over the taps, from the last
//! to the first, selects the index table of the first tap equal to the maximum. The index tables
//! and the in-bounds masks are constants computed at import (static sizes only), the image and
//! channel offset `(n·C + c)·∏spatial` is added last.

use super::import::{unsupported, Importer, NResult, Opnd};
use super::pool::{static_spatial, Geo};
use super::proto::NodeProto;
use super::value::{et, CTensor, TInfo};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use serde_json::json;

/// The `Indices` output (i32, the narrowed int64) of a max pooling of `x` with geometry `g`
/// whose pooled output is `y`; `col_major` is `storage_order=1`.
pub(super) fn max_pool_indices(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    x: &TInfo,
    g: &Geo,
    y: &TInfo,
    col_major: bool,
    out: &str,
) -> NResult<TInfo> {
    let what = "MaxPool indices";
    let ns = static_spatial(x, what)?;
    let (n, c) = match (x.shape[0].as_int(), x.shape[1].as_int()) {
        (Some(n), Some(c)) => (n, c),
        _ => return Err(unsupported(format!("{what} on a symbolic size"))),
    };
    let plane: i64 = ns.iter().product();
    if n.saturating_mul(c).saturating_mul(plane) > i64::from(i32::MAX) {
        return Err(unsupported(format!(
            "{what} of a tensor of more than 2^31 elements (indices are narrowed to i32)"
        )));
    }
    let k = ns.len();
    let ms: Vec<i64> = (0..k).map(|i| g.out_len(i, ns[i])).collect();
    if ms.iter().any(|m| *m < 1) {
        return Err(unsupported("pooling with an empty output"));
    }
    let xp = pad_for_taps(imp, x, g, &ns, &ms, out);
    // Element strides of the spatial dims in the index (row- or column-major).
    let mut strides = vec![1i64; k];
    if col_major {
        for i in 1..k {
            strides[i] = strides[i - 1] * ns[i - 1];
        }
    } else {
        for i in (0..k.saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * ns[i + 1];
        }
    }
    let taps = tap_list(&g.kernel);
    let positions: usize = ms.iter().map(|m| *m as usize).product();
    let mut table_shape = vec![1usize, 1];
    table_shape.extend(ms.iter().map(|m| *m as usize));
    // Per tap, per output position (row-major over `ms`): the index, or None out of bounds.
    let index_of = |tap: &[i64], pos: usize| -> Option<i64> {
        let mut rest = pos;
        let mut idx = 0;
        for i in (0..k).rev() {
            let o = (rest % ms[i] as usize) as i64;
            rest /= ms[i] as usize;
            let p = o * g.stride[i] - g.pads[i].0 + tap[i] * g.dil[i];
            if !(0..ns[i]).contains(&p) {
                return None;
            }
            idx += p * strides[i];
        }
        Some(idx)
    };
    let first_valid: Vec<f64> = (0..positions)
        .map(|pos| {
            taps.iter()
                .find_map(|t| index_of(t, pos))
                .map_or(0.0, |v| v as f64)
        })
        .collect();
    let mut acc = konst(imp, out, et::INT32, &table_shape, first_valid)?;
    for tap in taps.iter().rev() {
        let idx: Vec<Option<i64>> = (0..positions).map(|pos| index_of(tap, pos)).collect();
        if idx.iter().all(Option::is_none) {
            continue;
        }
        let s = tap_slice(imp, &xp, g, tap, &ms, out);
        let mut cond = imp.ew(node, "eq", &[Opnd::T(s), Opnd::T(y.clone())], out)?;
        if idx.iter().any(Option::is_none) {
            let mask: Vec<f64> = idx
                .iter()
                .map(|v| f64::from(u8::from(v.is_some())))
                .collect();
            let valid = konst(imp, out, et::BOOL, &table_shape, mask)?;
            let ops = [Opnd::T(valid.clone()), Opnd::T(cond), Opnd::T(valid)];
            cond = imp.ew(node, "where", &ops, out)?;
        }
        let data: Vec<f64> = idx.iter().map(|v| v.unwrap_or(0) as f64).collect();
        let table = konst(imp, out, et::INT32, &table_shape, data)?;
        acc = imp.ew(
            node,
            "where",
            &[Opnd::T(cond), Opnd::T(table), Opnd::T(acc)],
            out,
        )?;
    }
    let mut base_shape = vec![n as usize, c as usize];
    base_shape.extend(std::iter::repeat_n(1, k));
    let base: Vec<f64> = (0..n * c).map(|nc| (nc * plane) as f64).collect();
    let base = konst(imp, out, et::INT32, &base_shape, base)?;
    imp.ew(node, "add", &[Opnd::T(acc), Opnd::T(base)], out)
}

/// Every kernel tap (one offset per spatial dim), in scan order (row-major).
fn tap_list(kernel: &[i64]) -> Vec<Vec<i64>> {
    let mut taps: Vec<Vec<i64>> = vec![Vec::new()];
    for &kd in kernel {
        taps = taps
            .into_iter()
            .flat_map(|t| {
                (0..kd).map(move |j| {
                    let mut t = t.clone();
                    t.push(j);
                    t
                })
            })
            .collect();
    }
    taps
}

/// A constant param named after `out`.
fn konst(
    imp: &mut Importer<'_>,
    out: &str,
    elem: i32,
    shape: &[usize],
    data: Vec<f64>,
) -> NResult<TInfo> {
    let name = imp.fresh(&format!("{out}_table"));
    let c = CTensor {
        elem,
        shape: shape.to_vec(),
        data,
    };
    imp.materialize(&name, &c)
}

/// `x` padded so that every tap's strided slice of `ms` positions is in range (the padding
/// values are never selected: out-of-bounds taps are masked).
fn pad_for_taps(
    imp: &mut Importer<'_>,
    x: &TInfo,
    g: &Geo,
    ns: &[i64],
    ms: &[i64],
    out: &str,
) -> TInfo {
    let mut pad = vec![[0i64, 0i64]; x.shape.len()];
    let mut shape = x.shape.clone();
    for (i, &n) in ns.iter().enumerate() {
        let (lo, hi) = g.pads[i];
        let need = (ms[i] - 1) * g.stride[i] + g.span(i);
        let hi = (need - n - lo).max(hi).max(0);
        pad[2 + i] = [lo, hi];
        shape[2 + i] = Dim::int(n + lo + hi);
    }
    if pad.iter().all(|p| *p == [0, 0]) {
        return x.clone();
    }
    let value = if x.dtype.is_float() {
        f64::from(f32::MIN)
    } else {
        0.0
    };
    imp.emit(
        "Pad",
        vec![json!(x.name)],
        json!({"pad": pad, "value": value}),
        out,
        x.dtype,
        shape,
    )
}

/// The elements tap `tap` of every window reads: `xp[.., t·d + s·o]` for `o` in `0..m`.
fn tap_slice(
    imp: &mut Importer<'_>,
    xp: &TInfo,
    g: &Geo,
    tap: &[i64],
    ms: &[i64],
    out: &str,
) -> TInfo {
    let k = tap.len();
    let starts: Vec<i64> = (0..k).map(|i| tap[i] * g.dil[i]).collect();
    let ends: Vec<i64> = (0..k)
        .map(|i| starts[i] + (ms[i] - 1) * g.stride[i] + 1)
        .collect();
    let axes: Vec<usize> = (2..2 + k).collect();
    let mut shape = xp.shape[..2].to_vec();
    shape.extend(ms.iter().map(|m| Dim::int(*m)));
    let attrs = json!({"starts": starts, "ends": ends, "axes": axes, "steps": g.stride});
    let dtype: DType = xp.dtype;
    imp.emit("Slice", vec![json!(xp.name)], attrs, out, dtype, shape)
}
