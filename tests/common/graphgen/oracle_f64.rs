//! The f64 oracle of arithmetic ops (naive loops over the definitions in graph-json.md).

use super::super::unravel;
use super::oracle_exact::*;
use super::Tn;
use dlc_egg::ir::dtype::DType;

/// Values of a tensor that are exact, finite and moderate (the f64 oracle's inputs).
pub fn tame(t: &Tn) -> Option<&[f64]> {
    t.refv
        .as_deref()
        .filter(|v| v.iter().all(|x| x.is_finite() && x.abs() <= 1e4))
}

pub fn sigmoid(a: f64) -> f64 {
    1.0 / (1.0 + (-a).exp())
}

/// Element `idx` of `v` (shape `shape`) broadcast right-aligned to `idx`'s rank (size-1 axes
/// read index 0).
pub fn at(v: &[f64], shape: &[usize], idx: &[usize]) -> f64 {
    let lead = idx.len() - shape.len();
    let k = shape.iter().enumerate().fold(0, |k, (a, d)| {
        k * d + if *d == 1 { 0 } else { idx[a + lead] }
    });
    v[k]
}

/// Broadcast of two concrete shapes that are known to broadcast.
pub fn bcast_conc(a: &[usize], b: &[usize]) -> Vec<usize> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|i| {
            let da = (i + a.len()).checked_sub(r).map_or(1, |j| a[j]);
            let db = (i + b.len()).checked_sub(r).map_or(1, |j| b[j]);
            if da == 1 {
                db
            } else {
                da
            }
        })
        .collect()
}

pub fn ref_matmul(a: &[f64], sa: &[usize], b: &[f64], sb: &[usize]) -> Vec<f64> {
    let mut sa2 = sa.to_vec();
    if sa.len() == 1 {
        sa2.insert(0, 1);
    }
    let mut sb2 = sb.to_vec();
    if sb.len() == 1 {
        sb2.push(1);
    }
    let (ra, rb) = (sa2.len(), sb2.len());
    let (m, k, n) = (sa2[ra - 2], sa2[ra - 1], sb2[rb - 1]);
    let batch = bcast_conc(&sa2[..ra - 2], &sb2[..rb - 2]);
    let nb = batch.len();
    let mut full = batch.clone();
    full.extend([m, n]);
    // The squeezed output has the same row-major order as `full`.
    tabulate(&full, |o| {
        let mut ia: Vec<usize> = o[..nb].to_vec();
        ia.extend([o[nb], 0]);
        let mut ib: Vec<usize> = o[..nb].to_vec();
        ib.extend([0, o[nb + 1]]);
        (0..k)
            .map(|kk| {
                ia[nb + 1] = kk;
                ib[nb] = kk;
                at(a, &sa2, &ia) * at(b, &sb2, &ib)
            })
            .sum()
    })
}

pub struct Gemm {
    pub trans_a: bool,
    pub trans_b: bool,
    pub alpha: f64,
    pub beta: f64,
}

pub fn ref_gemm(
    a: &[f64],
    sa: &[usize],
    b: &[f64],
    sb: &[usize],
    c: Option<(&[f64], &[usize])>,
    g: &Gemm,
) -> Vec<f64> {
    let (m, k) = if g.trans_a {
        (sa[1], sa[0])
    } else {
        (sa[0], sa[1])
    };
    let n = if g.trans_b { sb[0] } else { sb[1] };
    tabulate(&[m, n], |o| {
        let s: f64 = (0..k)
            .map(|kk| {
                let av = if g.trans_a {
                    a[kk * sa[1] + o[0]]
                } else {
                    a[o[0] * sa[1] + kk]
                };
                let bv = if g.trans_b {
                    b[o[1] * sb[1] + kk]
                } else {
                    b[kk * sb[1] + o[1]]
                };
                av * bv
            })
            .sum();
        g.alpha * s + c.map_or(0.0, |(cv, cs)| g.beta * at(cv, cs, o))
    })
}

/// Window attributes of Conv, ConvTranspose and Pool (normalized: one entry per spatial dim).
pub struct Window {
    pub stride: Vec<i64>,
    pub pad: Vec<(i64, i64)>,
    pub dilation: Vec<i64>,
    pub groups: usize,
    /// ConvTranspose only.
    pub output_padding: Vec<i64>,
}

/// `y[n, co, o] = bias[co] + Σ_{ci, k} x[n, g·C/G + ci, o·s − lo + k·d] · w[co, ci, k]` (PyTorch).
pub fn ref_conv(
    x: &[f64],
    sx: &[usize],
    w: &[f64],
    sw: &[usize],
    bias: Option<&[f64]>,
    p: &Window,
) -> Vec<f64> {
    let nsp = sx.len() - 2;
    let (cout, cg) = (sw[0], sw[1]);
    let coutg = cout / p.groups;
    let kernel = &sw[2..];
    let mut out = vec![sx[0], cout];
    for i in 0..nsp {
        let (lo, hi) = p.pad[i];
        let span = p.dilation[i] * (kernel[i] as i64 - 1) + 1;
        out.push(((sx[2 + i] as i64 + lo + hi - span) / p.stride[i] + 1) as usize);
    }
    let nk: usize = kernel.iter().product();
    tabulate(&out, |o| {
        let co = o[1];
        let grp = co / coutg;
        let mut acc = bias.map_or(0.0, |b| b[co]);
        for ci in 0..cg {
            'taps: for kf in 0..nk {
                let kidx = unravel(kf, kernel);
                let mut xi = vec![o[0], grp * cg + ci];
                for i in 0..nsp {
                    let pos =
                        o[2 + i] as i64 * p.stride[i] - p.pad[i].0 + kidx[i] as i64 * p.dilation[i];
                    if pos < 0 || pos >= sx[2 + i] as i64 {
                        continue 'taps;
                    }
                    xi.push(pos as usize);
                }
                let mut wi = vec![co, ci];
                wi.extend(&kidx);
                acc += x[ravel(&xi, sx)] * w[ravel(&wi, sw)];
            }
        }
        acc
    })
}

/// PyTorch conv_transpose: every input element `x[n, ci, i]` adds `x · w[ci, co, k]` to
/// `y[n, g·Cout/G + co, i·s − lo + k·d]`.
pub fn ref_conv_transpose(
    x: &[f64],
    sx: &[usize],
    w: &[f64],
    sw: &[usize],
    bias: Option<&[f64]>,
    p: &Window,
) -> Vec<f64> {
    let nsp = sx.len() - 2;
    let c = sx[1];
    let cg = c / p.groups;
    let coutg = sw[1];
    let kernel = &sw[2..];
    let mut out = vec![sx[0], coutg * p.groups];
    for i in 0..nsp {
        let (lo, hi) = p.pad[i];
        let v = (sx[2 + i] as i64 - 1) * p.stride[i] - lo - hi
            + p.dilation[i] * (kernel[i] as i64 - 1)
            + p.output_padding[i]
            + 1;
        out.push(v as usize);
    }
    let nk: usize = kernel.iter().product();
    tabulate(&out, |o| {
        let co = o[1];
        let grp = co / coutg;
        let mut acc = bias.map_or(0.0, |b| b[co]);
        for cl in 0..cg {
            let ci = grp * cg + cl;
            'taps: for kf in 0..nk {
                let kidx = unravel(kf, kernel);
                let mut xi = vec![o[0], ci];
                for i in 0..nsp {
                    let t = o[2 + i] as i64 + p.pad[i].0 - kidx[i] as i64 * p.dilation[i];
                    if t < 0 || t % p.stride[i] != 0 || t / p.stride[i] >= sx[2 + i] as i64 {
                        continue 'taps;
                    }
                    xi.push((t / p.stride[i]) as usize);
                }
                let mut wi = vec![ci, co % coutg];
                wi.extend(&kidx);
                acc += x[ravel(&xi, sx)] * w[ravel(&wi, sw)];
            }
        }
        acc
    })
}

/// Pooling over the taps `o·s − lo + k·d`: max (`avg` None; padding taps are the lowest value),
/// or the average dividing by every tap (`Some(true)`: count_include_pad) or by the taps inside
/// the input (`Some(false)`).
pub fn ref_pool(
    x: &[f64],
    sx: &[usize],
    kernel: &[i64],
    p: &Window,
    avg: Option<bool>,
    dt: DType,
) -> Vec<f64> {
    let nsp = sx.len() - 2;
    let mut out = vec![sx[0], sx[1]];
    for i in 0..nsp {
        let (lo, hi) = p.pad[i];
        let span = p.dilation[i] * (kernel[i] - 1) + 1;
        out.push(((sx[2 + i] as i64 + lo + hi - span) / p.stride[i] + 1) as usize);
    }
    let ks: Vec<usize> = kernel.iter().map(|k| *k as usize).collect();
    let nk: usize = ks.iter().product();
    tabulate(&out, |o| {
        let mut acc = if avg.is_some() { 0.0 } else { dt.lowest() };
        let mut inside = 0usize;
        'taps: for kf in 0..nk {
            let kidx = unravel(kf, &ks);
            let mut xi = vec![o[0], o[1]];
            for i in 0..nsp {
                let pos =
                    o[2 + i] as i64 * p.stride[i] - p.pad[i].0 + kidx[i] as i64 * p.dilation[i];
                if pos < 0 || pos >= sx[2 + i] as i64 {
                    continue 'taps;
                }
                xi.push(pos as usize);
            }
            inside += 1;
            let v = x[ravel(&xi, sx)];
            acc = if avg.is_some() {
                acc + v
            } else {
                nan_max(acc, v)
            };
        }
        match avg {
            Some(true) => acc / nk as f64,
            Some(false) => acc / inside as f64,
            None => acc,
        }
    })
}

/// `softmax(scale·QKᵀ + mask)·V` over broadcast batch axes; `causal` keeps n <= m, a bool mask
/// keeps true, a float mask is added; a row with nothing kept gives zeros.
pub fn ref_attention(
    qkv: [(&[f64], &[usize]); 3],
    mask: Option<(&[f64], &[usize], bool)>,
    causal: bool,
    scale: f64,
) -> Vec<f64> {
    let [(q, sq), (k, sk), (v, sv)] = qkv;
    let (rq, rk, rv) = (sq.len(), sk.len(), sv.len());
    let batch = bcast_conc(&bcast_conc(&sq[..rq - 2], &sk[..rk - 2]), &sv[..rv - 2]);
    let nb = batch.len();
    let (m, d, n, dv) = (sq[rq - 2], sq[rq - 1], sk[rk - 2], sv[rv - 1]);
    let mut out = batch.clone();
    out.extend([m, dv]);
    tabulate(&out, |o| {
        let b = &o[..nb];
        let mi = o[nb];
        let idx = |x: usize, y: usize| {
            let mut i = b.to_vec();
            i.extend([x, y]);
            i
        };
        let mut scores = Vec::with_capacity(n);
        for ni in 0..n {
            let mut keep = !causal || ni <= mi;
            let mut s: f64 = (0..d)
                .map(|di| at(q, sq, &idx(mi, di)) * at(k, sk, &idx(ni, di)))
                .sum::<f64>()
                * scale;
            if let Some((mv, ms, is_bool)) = mask {
                let mval = at(mv, ms, &idx(mi, ni));
                if is_bool {
                    keep &= mval != 0.0;
                } else {
                    s += mval;
                }
            }
            if keep {
                scores.push((ni, s));
            }
        }
        if scores.is_empty() {
            return 0.0;
        }
        let mx = scores.iter().fold(f64::NEG_INFINITY, |a, (_, s)| a.max(*s));
        let z: f64 = scores.iter().map(|(_, s)| (s - mx).exp()).sum();
        scores
            .iter()
            .map(|(ni, s)| (s - mx).exp() / z * at(v, sv, &idx(*ni, o[nb + 1])))
            .sum()
    })
}

pub fn ref_softmax(x: &[f64], sx: &[usize], axis: usize) -> Vec<f64> {
    let mx = ref_reduce(sx, x, &[axis], Comb::Max, DType::F32);
    let mut red = sx.to_vec();
    red[axis] = 1;
    let e: Vec<f64> = tabulate(sx, |o| x[ravel(o, sx)] - at(&mx, &red, o))
        .into_iter()
        .map(f64::exp)
        .collect();
    let z = ref_reduce(sx, &e, &[axis], Comb::Sum, DType::F32);
    tabulate(sx, |o| e[ravel(o, sx)] / at(&z, &red, o))
}

/// LayerNorm (`layer`: `(x − mean)/sqrt(var + eps)`, then · gamma + beta) or RMSNorm
/// (`x/sqrt(mean(x²) + eps)` · gamma) over the axes `axis..`.
pub fn ref_norm(
    x: &[f64],
    sx: &[usize],
    axis: usize,
    eps: f64,
    layer: bool,
    params: &[&[f64]],
) -> Vec<f64> {
    let axes: Vec<usize> = (axis..sx.len()).collect();
    let cnt: usize = sx[axis..].iter().product();
    let mut red = sx.to_vec();
    for a in &axes {
        red[*a] = 1;
    }
    let mean: Vec<f64> = ref_reduce(sx, x, &axes, Comb::Sum, DType::F32)
        .into_iter()
        .map(|s| s / cnt as f64)
        .collect();
    let centered: Vec<f64> = if layer {
        tabulate(sx, |o| x[ravel(o, sx)] - at(&mean, &red, o))
    } else {
        x.to_vec()
    };
    let sq: Vec<f64> = centered.iter().map(|c| c * c).collect();
    let var: Vec<f64> = ref_reduce(sx, &sq, &axes, Comb::Sum, DType::F32)
        .into_iter()
        .map(|s| s / cnt as f64)
        .collect();
    let pshape = &sx[axis..];
    tabulate(sx, |o| {
        let mut y = centered[ravel(o, sx)] / (at(&var, &red, o) + eps).sqrt();
        if let Some(g) = params.first() {
            y *= at(g, pshape, o);
        }
        if let Some(b) = params.get(1) {
            y += at(b, pshape, o);
        }
        y
    })
}
