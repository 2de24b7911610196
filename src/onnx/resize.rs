//! ONNX `Resize` in general (every mode, coordinate transformation, nearest_mode, antialias,
//! exclude_outside, keep_aspect_ratio_policy, `axes`, `tf_crop_and_resize` with extrapolation):
//! separable along the resized axes, each axis is an index table and a coefficient table computed
//! at import time (as the ONNX reference computes them), applied as one `Gather` per kernel tap and
//! a weighted sum. A table whose rows each pick one element (nearest; linear at whole positions)
//! is a single `Gather`, exact for every dtype. `Pad` with `reflect`/`edge`/`wrap` and
//! `Slice` with negative steps the same way.

use super::fold::{attr_f, attr_i, attr_ints, attr_s, norm_axis};
use super::import::{invalid, unsupported, Importer, NResult, Opnd};
use super::proto::NodeProto;
use super::value::{et, CTensor, TInfo};
use crate::ir::dtype::DType;

/// The per-axis sampling of one resized axis: `taps` indices and coefficients per output position.
struct AxisTable {
    out: usize,
    taps: usize,
    /// `out × taps` source indices (clamped into the input).
    idx: Vec<i64>,
    /// `out × taps` coefficients.
    coeff: Vec<f64>,
    /// The value of extrapolated positions (`tf_crop_and_resize`), `None` when there are none.
    extra: Option<Vec<f64>>,
}

/// The resize attributes that shape the tables.
struct Modes {
    mode: String,
    ctm: String,
    nearest: String,
    cubic_a: f64,
    antialias: bool,
    exclude_outside: bool,
    extrapolation: f64,
}

/// `Resize` through per-axis gathers and weighted sums (static sizes on the resized axes).
pub(super) fn resize_general(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    x: &TInfo,
    out: &str,
) -> NResult<TInfo> {
    let m = Modes {
        mode: attr_s(node, "mode").unwrap_or_else(|| "nearest".into()),
        ctm: attr_s(node, "coordinate_transformation_mode").unwrap_or_else(|| "half_pixel".into()),
        nearest: attr_s(node, "nearest_mode").unwrap_or_else(|| "round_prefer_floor".into()),
        cubic_a: attr_f(node, "cubic_coeff_a").unwrap_or(-0.75),
        antialias: attr_i(node, "antialias").unwrap_or(0) != 0,
        exclude_outside: attr_i(node, "exclude_outside").unwrap_or(0) != 0,
        extrapolation: attr_f(node, "extrapolation_value").unwrap_or(0.0),
    };
    if !matches!(m.mode.as_str(), "nearest" | "linear" | "cubic") {
        return Err(invalid(node, format!("Resize mode `{}`", m.mode)));
    }
    let (scales, sizes, roi) = sampling(imp, node, x)?;
    let mut cur = x.clone();
    let r = x.shape.len();
    for a in 0..r {
        let in_w = x.shape[a].as_int().unwrap_or(-1);
        let (lo, hi) = roi.as_ref().map_or((0.0, 1.0), |v| (v[a], v[a + r]));
        let trivial_roi = (lo - 0.0).abs() < 1e-9 && (hi - 1.0).abs() < 1e-9;
        if (scales[a] - 1.0).abs() <= 1e-9 && sizes[a] == in_w && (roi.is_none() || trivial_roi) {
            continue;
        }
        if in_w <= 0 {
            return Err(unsupported(
                "Resize along an axis whose size is symbolic or zero",
            ));
        }
        let t = axis_table(
            node,
            &m,
            in_w as usize,
            scales[a],
            sizes[a] as usize,
            (lo, hi),
        )?;
        cur = apply(imp, node, &cur, a, &t, out)?;
    }
    if cur.name == x.name {
        // Nothing resized: a copy, so the output is a node of its own.
        cur = imp.ew(node, "add", &[Opnd::T(cur), Opnd::S(0.0)], out)?;
    }
    Ok(cur)
}

/// Per-axis scales and output sizes and the roi (`[starts..., ends...]` over every axis).
#[allow(clippy::type_complexity)]
fn sampling(
    imp: &Importer<'_>,
    node: &NodeProto,
    x: &TInfo,
) -> NResult<(Vec<f64>, Vec<i64>, Option<Vec<f64>>)> {
    let r = x.shape.len();
    let axes: Vec<usize> = match attr_ints(node, "axes") {
        Some(a) => a
            .iter()
            .map(|v| norm_axis(node, *v, r))
            .collect::<NResult<_>>()?,
        None => (0..r).collect(),
    };
    let konst = |i: usize, what: &str| -> NResult<Option<CTensor>> {
        match node.input.get(i).filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(n) => imp
                .konst(n)?
                .map(Some)
                .ok_or_else(|| unsupported(format!("Resize {what} that are not constants"))),
        }
    };
    let dims: Vec<i64> = x.shape.iter().map(|d| d.as_int().unwrap_or(-1)).collect();
    let mut scales = vec![1.0f64; r];
    let mut sizes = dims.clone();
    let sc = konst(2, "scales")?.filter(|c| c.numel() > 0);
    if let Some(c) = sc {
        if c.numel() != axes.len() {
            return Err(invalid(node, "Resize scales do not match the axes"));
        }
        for (a, s) in axes.iter().zip(&c.data) {
            if dims[*a] < 0 {
                return Err(unsupported("Resize of a symbolic axis"));
            }
            // As the reference: the float32 scale times the size, truncated.
            scales[*a] = f64::from(*s as f32);
            sizes[*a] = (scales[*a] * dims[*a] as f64) as i64;
        }
    } else if let Some(c) = konst(3, "sizes")? {
        if c.numel() != axes.len() {
            return Err(invalid(node, "Resize sizes do not match the axes"));
        }
        for (a, s) in axes.iter().zip(c.ints()) {
            if dims[*a] <= 0 {
                return Err(unsupported("Resize of a symbolic or empty axis"));
            }
            sizes[*a] = s;
            scales[*a] = s as f64 / dims[*a] as f64;
        }
        let policy = attr_s(node, "keep_aspect_ratio_policy").unwrap_or_else(|| "stretch".into());
        if policy != "stretch" {
            let pick = axes.iter().map(|a| scales[*a]);
            let s = match policy.as_str() {
                "not_larger" => pick.fold(f64::INFINITY, f64::min),
                "not_smaller" => pick.fold(f64::NEG_INFINITY, f64::max),
                p => return Err(invalid(node, format!("keep_aspect_ratio_policy `{p}`"))),
            };
            for a in &axes {
                scales[*a] = s;
                sizes[*a] = (s * dims[*a] as f64 + 0.5) as i64;
            }
        }
    } else {
        return Err(invalid(node, "Resize without scales or sizes"));
    }
    if sizes.iter().any(|s| *s < 0) || scales.iter().any(|s| s.is_nan() || *s <= 0.0) {
        return Err(invalid(
            node,
            "Resize to a negative size or by a non-positive scale",
        ));
    }
    let roi = roi_of(node, konst(1, "roi")?, &axes, r)?;
    Ok((scales, sizes, roi))
}

/// The roi over every axis (`[starts..., ends...]`), kept for `tf_crop_and_resize` only.
fn roi_of(
    node: &NodeProto,
    roi: Option<CTensor>,
    axes: &[usize],
    r: usize,
) -> NResult<Option<Vec<f64>>> {
    let roi = match roi.filter(|c| c.numel() > 0) {
        None => None,
        Some(c) if c.numel() == 2 * r && attr_ints(node, "axes").is_none() => Some(c.data),
        Some(c) if c.numel() == 2 * axes.len() => {
            let mut v = [vec![0.0; r], vec![1.0; r]].concat();
            for (i, a) in axes.iter().enumerate() {
                v[*a] = c.data[i];
                v[r + *a] = c.data[axes.len() + i];
            }
            Some(v)
        }
        Some(_) => return Err(invalid(node, "Resize roi does not match the axes")),
    };
    let roi = roi.filter(|_| {
        attr_s(node, "coordinate_transformation_mode").as_deref() == Some("tf_crop_and_resize")
    });
    Ok(roi)
}

/// The kernel coefficients at `ratio` (in `(0, 1]`) for a scale `scale`.
fn coeffs(m: &Modes, ratio: f64, scale: f64) -> NResult<Vec<f64>> {
    let a = m.cubic_a;
    let cubic = |x: f64| {
        let x = x.abs();
        if x <= 1.0 {
            ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        } else if x < 2.0 {
            ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        } else {
            0.0
        }
    };
    Ok(match (m.mode.as_str(), m.antialias) {
        ("nearest", false) => {
            let one = if ratio.fract() == 0.0 {
                1
            } else {
                match m.nearest.as_str() {
                    "round_prefer_floor" => usize::from(ratio > 0.5),
                    "round_prefer_ceil" => usize::from(ratio >= 0.5),
                    "floor" => 0,
                    "ceil" => 1,
                    other => return Err(unsupported(format!("Resize nearest_mode `{other}`"))),
                }
            };
            let mut c = vec![0.0, 0.0];
            c[one] = 1.0;
            c
        }
        ("nearest", true) => return Err(unsupported("Resize nearest with antialias")),
        ("linear", false) => vec![1.0 - ratio, ratio],
        ("cubic", false) => {
            let r = ratio;
            vec![
                ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                ((a + 2.0) * (1.0 - r) - (a + 3.0)) * (1.0 - r) * (1.0 - r) + 1.0,
                ((a * ((1.0 - r) + 1.0) - 5.0 * a) * ((1.0 - r) + 1.0) + 8.0 * a)
                    * ((1.0 - r) + 1.0)
                    - 4.0 * a,
            ]
        }
        (mode, _) if !matches!(mode, "linear" | "cubic") => {
            return Err(unsupported(format!("Resize mode `{mode}`")))
        }
        (mode, _) => {
            let s = scale.min(1.0);
            let lin = mode == "linear";
            let reach = if lin { 1.0 } else { 2.0 };
            let start = (-reach / s).floor() as i64 + 1;
            let c: Vec<f64> = (start..2 - start)
                .map(|i| {
                    let x = s * (i as f64 - ratio);
                    if lin {
                        (1.0 - x.abs()).clamp(0.0, 1.0)
                    } else {
                        cubic(x)
                    }
                })
                .collect();
            let sum: f64 = c.iter().sum();
            c.into_iter().map(|v| v / sum).collect()
        }
    })
}

/// The index and coefficient tables of one axis (the ONNX reference's
/// `_interpolate_1d_along_axis`).
fn axis_table(
    node: &NodeProto,
    m: &Modes,
    in_w: usize,
    scale: f64,
    out: usize,
    (lo, hi): (f64, f64),
) -> NResult<AxisTable> {
    let inw = in_w as f64;
    let mut idx = Vec::new();
    let mut coeff = Vec::new();
    let mut extra = vec![0.0; out];
    let mut any_extra = false;
    let mut taps = 0;
    for (y, extra_y) in extra.iter_mut().enumerate() {
        let x_ori = source_coord(node, &m.ctm, y as f64, scale, (in_w, out), (lo, hi))?;
        let extrapolated = m.ctm == "tf_crop_and_resize" && (x_ori < 0.0 || x_ori > inw - 1.0);
        let fl = x_ori.floor();
        let ratio = if x_ori == fl { 1.0 } else { x_ori - fl };
        let mut c = coeffs(m, ratio, scale)?;
        let n = c.len();
        taps = n;
        let pad = n.div_ceil(2) as f64;
        let xp = x_ori + pad;
        let p = xp.floor();
        let frac = xp - p;
        let half = (n / 2) as f64;
        let off = if n % 2 == 0 {
            if frac == 0.0 {
                -half
            } else {
                -half + 1.0
            }
        } else {
            let base = -(((n - 1) / 2) as f64);
            if frac <= 0.5 {
                base
            } else {
                base + 1.0
            }
        };
        let start = p + off - pad;
        let raw: Vec<f64> = (0..n).map(|k| start + k as f64).collect();
        if m.exclude_outside {
            for (ck, ik) in c.iter_mut().zip(&raw) {
                if *ik < 0.0 || *ik >= inw {
                    *ck = 0.0;
                }
            }
            let s: f64 = c.iter().sum();
            let s = if s == 0.0 { 1.0 } else { s };
            c.iter_mut().for_each(|v| *v /= s);
        }
        if extrapolated {
            c.iter_mut().for_each(|v| *v = 0.0);
            *extra_y = m.extrapolation;
            any_extra = true;
        }
        idx.extend(raw.iter().map(|i| i.clamp(0.0, inw - 1.0) as i64));
        coeff.extend(c);
    }
    Ok(AxisTable {
        out,
        taps,
        idx,
        coeff,
        extra: any_extra.then_some(extra),
    })
}

/// The source coordinate of output position `yf` (the ONNX reference's `_compute_x_ori`).
fn source_coord(
    node: &NodeProto,
    ctm: &str,
    yf: f64,
    scale: f64,
    (in_w, out): (usize, usize),
    (lo, hi): (f64, f64),
) -> NResult<f64> {
    let out_w = scale * in_w as f64;
    let inw = in_w as f64;
    Ok(match ctm {
        "align_corners" if out_w == 1.0 => 0.0,
        "align_corners" => yf * (inw - 1.0) / (out_w - 1.0),
        "asymmetric" => yf / scale,
        "pytorch_half_pixel" if out_w == 1.0 => -0.5,
        "pytorch_half_pixel" | "half_pixel" => (yf + 0.5) / scale - 0.5,
        "half_pixel_symmetric" => {
            let adjustment = out as f64 / out_w;
            inw / 2.0 * (1.0 - adjustment) + (yf + 0.5) / scale - 0.5
        }
        "tf_crop_and_resize" => {
            let x = if out_w == 1.0 {
                (hi - lo) * (inw - 1.0) / 2.0
            } else {
                yf * (hi - lo) * (inw - 1.0) / (out_w - 1.0)
            };
            x + lo * (inw - 1.0)
        }
        other => {
            return Err(invalid(
                node,
                format!("coordinate_transformation_mode `{other}`"),
            ))
        }
    })
}

/// The ONNX element type of a float dtype (for the coefficient constants).
fn float_elem(d: DType) -> Option<i32> {
    match d {
        DType::F32 => Some(et::FLOAT),
        DType::F16 => Some(et::FLOAT16),
        DType::BF16 => Some(et::BFLOAT16),
        _ => None,
    }
}

/// Applies one axis table to `x` along `a`.
fn apply(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    x: &TInfo,
    a: usize,
    t: &AxisTable,
    out: &str,
) -> NResult<TInfo> {
    let r = x.shape.len();
    let gather = |imp: &mut Importer<'_>, idx: Vec<f64>| -> NResult<TInfo> {
        let name = imp.fresh("resize_index");
        let c = CTensor {
            elem: et::INT64,
            shape: vec![idx.len()],
            data: idx,
        };
        let it = imp.materialize(&name, &c)?;
        super::gather::gather_along(imp, node, x, a, &it, out)
    };
    // Every row picks one element with weight 1: one Gather.
    let one_hot: Option<Vec<f64>> = (0..t.out)
        .map(|y| {
            let row = &t.coeff[y * t.taps..(y + 1) * t.taps];
            let ones: Vec<usize> = (0..t.taps).filter(|k| row[*k] == 1.0).collect();
            let zeros = row.iter().filter(|v| **v == 0.0).count();
            (ones.len() == 1 && zeros == t.taps - 1).then(|| t.idx[y * t.taps + ones[0]] as f64)
        })
        .collect();
    if let (Some(idx), None) = (&one_hot, &t.extra) {
        return gather(imp, idx.clone());
    }
    let elem = float_elem(x.dtype)
        .ok_or_else(|| unsupported(format!("Resize interpolating {} data", x.dtype.name())))?;
    let mut wshape = vec![1usize; r];
    wshape[a] = t.out;
    let mut acc: Option<TInfo> = None;
    for k in 0..t.taps {
        let w: Vec<f64> = (0..t.out).map(|y| t.coeff[y * t.taps + k]).collect();
        if w.iter().all(|v| *v == 0.0) {
            continue;
        }
        let idx: Vec<f64> = (0..t.out).map(|y| t.idx[y * t.taps + k] as f64).collect();
        let g = gather(imp, idx)?;
        let wname = imp.fresh("resize_weight");
        let wt = imp.materialize(
            &wname,
            &CTensor {
                elem,
                shape: wshape.clone(),
                data: w,
            },
        )?;
        let term = imp.ew(node, "mul", &[Opnd::T(g), Opnd::T(wt)], out)?;
        acc = Some(match acc {
            None => term,
            Some(s) => imp.ew(node, "add", &[Opnd::T(s), Opnd::T(term)], out)?,
        });
    }
    if let Some(e) = &t.extra {
        let ename = imp.fresh("resize_extrapolation");
        let et_ = imp.materialize(
            &ename,
            &CTensor {
                elem,
                shape: wshape.clone(),
                data: e.clone(),
            },
        )?;
        acc = Some(match acc {
            None => {
                // Every position extrapolated: the constant broadcast over x's other axes.
                let g = gather(imp, vec![0.0; t.out])?;
                let z = imp.ew(node, "mul", &[Opnd::T(g), Opnd::S(0.0)], out)?;
                imp.ew(node, "add", &[Opnd::T(z), Opnd::T(et_)], out)?
            }
            Some(s) => imp.ew(node, "add", &[Opnd::T(s), Opnd::T(et_)], out)?,
        });
    }
    match acc {
        Some(v) => Ok(v),
        None => gather(imp, vec![0.0; t.out])
            .and_then(|g| imp.ew(node, "mul", &[Opnd::T(g), Opnd::S(0.0)], out)),
    }
}

/// `Pad` in `reflect`, `edge` or `wrap` mode: one `Gather` per padded axis whose index table maps
/// each output position to its source (static sizes on the padded axes).
pub(super) fn pad_by_index(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    x: &TInfo,
    pairs: &[(i64, i64)],
    mode: &str,
    out: &str,
) -> NResult<TInfo> {
    let mut cur = x.clone();
    for (a, &(lo, hi)) in pairs.iter().enumerate() {
        if lo == 0 && hi == 0 {
            continue;
        }
        let n = x.shape[a]
            .as_int()
            .filter(|n| *n > 0)
            .ok_or_else(|| unsupported(format!("Pad {mode} of a symbolic or empty axis")))?;
        let len = n + lo + hi;
        if len < 0 {
            return Err(invalid(node, "Pad crops more than the axis holds"));
        }
        let idx: NResult<Vec<f64>> = (0..len)
            .map(|i| {
                let s = i - lo;
                Ok(match mode {
                    "edge" => s.clamp(0, n - 1),
                    "wrap" => s.rem_euclid(n),
                    "reflect" if n == 1 => 0,
                    "reflect" => {
                        let p = 2 * (n - 1);
                        let j = s.rem_euclid(p);
                        if j >= n {
                            p - j
                        } else {
                            j
                        }
                    }
                    m => return Err(invalid(node, format!("Pad mode `{m}`"))),
                } as f64)
            })
            .collect();
        let name = imp.fresh("pad_index");
        let c = CTensor {
            elem: et::INT64,
            shape: vec![len as usize],
            data: idx?,
        };
        let it = imp.materialize(&name, &c)?;
        cur = super::gather::gather_along(imp, node, &cur, a, &it, out)?;
    }
    if cur.name == x.name {
        cur = imp.ew(node, "add", &[Opnd::T(cur), Opnd::S(0.0)], out)?;
    }
    Ok(cur)
}

/// `Slice` with a negative step: one `Gather` per sliced axis listing the taken positions
/// (ONNX's clamping of starts and ends; static sizes on the sliced axes).
pub(super) fn slice_by_index(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    x: &TInfo,
    (starts, ends, axes, steps): (&[i64], &[i64], &[i64], &[i64]),
    out: &str,
) -> NResult<TInfo> {
    let r = x.shape.len();
    let mut cur = x.clone();
    for (k, a) in axes.iter().enumerate() {
        let a = norm_axis(node, *a, r)?;
        let (Some(&s), Some(&e), Some(&st)) = (starts.get(k), ends.get(k), steps.get(k)) else {
            return Err(invalid(
                node,
                "Slice starts/ends/steps shorter than its axes",
            ));
        };
        let n = x.shape[a]
            .as_int()
            .filter(|n| *n > 0)
            .ok_or_else(|| unsupported("Slice with a negative step on a symbolic or empty axis"))?;
        let norm = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
        let (s, e) = if st < 0 {
            (norm(s).clamp(0, n - 1), norm(e).clamp(-1, n - 1))
        } else {
            (norm(s).clamp(0, n), norm(e).clamp(0, n))
        };
        let mut idx = Vec::new();
        let mut i = s;
        while (st > 0 && i < e) || (st < 0 && i > e) {
            idx.push(i as f64);
            i += st;
        }
        if idx.is_empty() {
            return Err(unsupported("Slice with a negative step to an empty tensor"));
        }
        let name = imp.fresh("slice_index");
        let c = CTensor {
            elem: et::INT64,
            shape: vec![idx.len()],
            data: idx,
        };
        let it = imp.materialize(&name, &c)?;
        cur = super::gather::gather_along(imp, node, &cur, a, &it, out)?;
    }
    Ok(cur)
}
