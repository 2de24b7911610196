//! Conv, ConvTranspose and Pool against explicit loops (seed 003's 7-loop convolution).

mod common;
use common::*;
use dlc_egg::ir::dtype::DType;
use serde_json::json;

struct Conv2d {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    cout: usize,
    k: (usize, usize),
    stride: (usize, usize),
    pad: ((usize, usize), (usize, usize)),
    dil: (usize, usize),
    groups: usize,
}

/// The explicit 7-loop sum: Out[n,k,h,w] += In[n, c, h·S + rh·D − P, w·S + rw·D − P] · W[k,c,rh,rw].
fn conv2d_loops(p: &Conv2d, x: &[f64], w: &[f64], bias: Option<&[f64]>) -> (Vec<f64>, Vec<usize>) {
    let cin_g = p.c / p.groups;
    let cout_g = p.cout / p.groups;
    let oh = (p.h + p.pad.0 .0 + p.pad.0 .1 - p.dil.0 * (p.k.0 - 1) - 1) / p.stride.0 + 1;
    let ow = (p.w + p.pad.1 .0 + p.pad.1 .1 - p.dil.1 * (p.k.1 - 1) - 1) / p.stride.1 + 1;
    let mut out = vec![0.0; p.n * p.cout * oh * ow];
    for n in 0..p.n {
        for co in 0..p.cout {
            let g = co / cout_g;
            for y in 0..oh {
                for xo in 0..ow {
                    let mut s = bias.map_or(0.0, |b| b[co]);
                    for ci in 0..cin_g {
                        for rh in 0..p.k.0 {
                            for rw in 0..p.k.1 {
                                let ih = (y * p.stride.0 + rh * p.dil.0) as i64 - p.pad.0 .0 as i64;
                                let iw =
                                    (xo * p.stride.1 + rw * p.dil.1) as i64 - p.pad.1 .0 as i64;
                                if ih < 0 || iw < 0 || ih >= p.h as i64 || iw >= p.w as i64 {
                                    continue;
                                }
                                let c = g * cin_g + ci;
                                s += x[((n * p.c + c) * p.h + ih as usize) * p.w + iw as usize]
                                    * w[((co * cin_g + ci) * p.k.0 + rh) * p.k.1 + rw];
                            }
                        }
                    }
                    out[((n * p.cout + co) * oh + y) * ow + xo] = s;
                }
            }
        }
    }
    (out, vec![p.n, p.cout, oh, ow])
}

fn check_conv(p: Conv2d, dtype: DType, with_bias: bool) {
    let dt = dtype.name();
    let xs = [p.n, p.c, p.h, p.w];
    let ws = [p.cout, p.c / p.groups, p.k.0, p.k.1];
    let mut ins = vec![
        ("X", dt, xs.iter().map(|v| *v as i64).collect()),
        ("W", dt, ws.iter().map(|v| *v as i64).collect()),
    ];
    let mut ops = vec!["X", "W"];
    if with_bias {
        ins.push(("bias", dt, vec![p.cout as i64]));
        ops.push("bias");
    }
    let attrs = json!({
        "stride": [p.stride.0, p.stride.1],
        "pad": [[p.pad.0.0, p.pad.0.1], [p.pad.1.0, p.pad.1.1]],
        "dilation": [p.dil.0, p.dil.1],
        "groups": p.groups,
    });
    let g = one_op("Conv", attrs, &ins, names(&ops));
    let x = rand_tensor(21, dtype, &xs);
    let w = rand_tensor(22, dtype, &ws);
    let b = rand_tensor(23, dtype, &[p.cout]);
    let bv = b.to_f64();
    let (want, shape) = conv2d_loops(&p, &x.to_f64(), &w.to_f64(), with_bias.then_some(&bv[..]));
    let mut inputs = vec![("X", x), ("W", w)];
    if with_bias {
        inputs.push(("bias", b));
    }
    let y = run_y(&g, inputs);
    let tol = if dtype == DType::F32 { 1e-5 } else { 1e-2 };
    assert_close(&y, &want, &shape, tol, tol);
}

#[test]
fn conv3x3_s2_p1_equals_seven_loop_sum() {
    check_conv(
        Conv2d {
            n: 2,
            c: 3,
            h: 9,
            w: 8,
            cout: 4,
            k: (3, 3),
            stride: (2, 2),
            pad: ((1, 1), (1, 1)),
            dil: (1, 1),
            groups: 1,
        },
        DType::F32,
        true,
    );
}

#[test]
fn conv_groups_dilation_asymmetric_pad() {
    check_conv(
        Conv2d {
            n: 1,
            c: 4,
            h: 7,
            w: 9,
            cout: 6,
            k: (2, 3),
            stride: (1, 2),
            pad: ((2, 0), (1, 3)),
            dil: (2, 1),
            groups: 2,
        },
        DType::F32,
        false,
    );
    check_conv(
        Conv2d {
            n: 1,
            c: 6,
            h: 5,
            w: 5,
            cout: 6,
            k: (3, 3),
            stride: (1, 1),
            pad: ((1, 1), (1, 1)),
            dil: (1, 1),
            groups: 6,
        },
        DType::F16,
        true,
    );
}

#[test]
fn conv1d_single_int_attrs() {
    let g = one_op(
        "Conv",
        json!({"stride": 2, "pad": 1}),
        &[("X", "fp32", vec![1, 2, 7]), ("W", "fp32", vec![3, 2, 3])],
        names(&["X", "W"]),
    );
    let x = rand_tensor(31, DType::F32, &[1, 2, 7]);
    let w = rand_tensor(32, DType::F32, &[3, 2, 3]);
    let (xv, wv) = (x.to_f64(), w.to_f64());
    let mut want = vec![];
    for co in 0..3 {
        for o in 0..4 {
            let mut s = 0.0;
            for ci in 0..2 {
                for k in 0..3 {
                    let i = (o * 2 + k) as i64 - 1;
                    if (0..7).contains(&i) {
                        s += xv[ci * 7 + i as usize] * wv[(co * 2 + ci) * 3 + k];
                    }
                }
            }
            want.push(s);
        }
    }
    let y = run_y(&g, vec![("X", x), ("W", w)]);
    assert_close(&y, &want, &[1, 3, 4], 1e-5, 1e-5);
}

#[test]
fn conv_transpose_equals_scatter_definition() {
    // y[n, g·Cout_g + co, o] += x[n, ci, i] · w[ci, co, k] where o = i·s − pad_lo + k·d (2-D).
    let (n, cin, h, w, cout_g, groups) = (1, 4, 3, 4, 3, 2);
    let (k, s, d, pad, op) = (3, 2, 1, (1, 0), (1, 0));
    let attrs = json!({"stride": s, "pad": [[pad.0, pad.0], [pad.1, pad.1]], "output_padding": [op.0, op.1], "dilation": d, "groups": groups});
    let g = one_op(
        "ConvTranspose",
        attrs,
        &[
            ("X", "fp32", vec![n, cin, h, w]),
            ("W", "fp32", vec![cin, cout_g, k, k]),
        ],
        names(&["X", "W"]),
    );
    let x = rand_tensor(
        41,
        DType::F32,
        &[n as usize, cin as usize, h as usize, w as usize],
    );
    let wt = rand_tensor(
        42,
        DType::F32,
        &[cin as usize, cout_g as usize, k as usize, k as usize],
    );
    let (xv, wv) = (x.to_f64(), wt.to_f64());
    let oh = (h - 1) * s - 2 * pad.0 + d * (k - 1) + op.0 + 1;
    let ow = (w - 1) * s - 2 * pad.1 + d * (k - 1) + op.1 + 1;
    let cout = cout_g * groups;
    let mut want = vec![0.0; (cout * oh * ow) as usize];
    let cin_g = cin / groups;
    for ci in 0..cin {
        let gi = ci / cin_g;
        for i in 0..h {
            for j in 0..w {
                for co in 0..cout_g {
                    for a in 0..k {
                        for bb in 0..k {
                            let o1 = i * s - pad.0 + a * d;
                            let o2 = j * s - pad.1 + bb * d;
                            if o1 < 0 || o2 < 0 || o1 >= oh || o2 >= ow {
                                continue;
                            }
                            let oc = gi * cout_g + co;
                            want[((oc * oh + o1) * ow + o2) as usize] += xv
                                [((ci * h + i) * w + j) as usize]
                                * wv[(((ci * cout_g + co) * k + a) * k + bb) as usize];
                        }
                    }
                }
            }
        }
    }
    let y = run_y(&g, vec![("X", x), ("W", wt)]);
    assert_close(
        &y,
        &want,
        &[1, cout as usize, oh as usize, ow as usize],
        1e-5,
        1e-5,
    );
}

#[allow(clippy::too_many_arguments)]
fn pool_loops(
    x: &[f64],
    c: usize,
    h: usize,
    w: usize,
    k: usize,
    s: usize,
    p: usize,
    max: bool,
    include_pad: bool,
) -> (Vec<f64>, Vec<usize>) {
    let oh = (h + 2 * p - k) / s + 1;
    let ow = (w + 2 * p - k) / s + 1;
    let mut out = vec![];
    for ch in 0..c {
        for y in 0..oh {
            for xo in 0..ow {
                let (mut acc, mut cnt) = (if max { f64::NEG_INFINITY } else { 0.0 }, 0);
                for a in 0..k {
                    for b in 0..k {
                        let (i, j) = (
                            (y * s + a) as i64 - p as i64,
                            (xo * s + b) as i64 - p as i64,
                        );
                        if i < 0 || j < 0 || i >= h as i64 || j >= w as i64 {
                            continue;
                        }
                        let v = x[(ch * h + i as usize) * w + j as usize];
                        acc = if max { acc.max(v) } else { acc + v };
                        cnt += 1;
                    }
                }
                out.push(if max {
                    acc
                } else if include_pad {
                    acc / (k * k) as f64
                } else {
                    acc / cnt as f64
                });
            }
        }
    }
    (out, vec![1, c, oh, ow])
}

#[test]
fn pools_match_loops() {
    for (mode, include) in [("max", true), ("avg", true), ("avg", false)] {
        let g = one_op(
            "Pool",
            json!({"mode": mode, "kernel": 3, "stride": 2, "pad": 1, "count_include_pad": include}),
            &[("X", "fp32", vec![1, 2, 7, 6])],
            names(&["X"]),
        );
        let x = rand_tensor(51, DType::F32, &[1, 2, 7, 6]);
        let (want, shape) = pool_loops(&x.to_f64(), 2, 7, 6, 3, 2, 1, mode == "max", include);
        let y = run_y(&g, vec![("X", x)]);
        assert_close(&y, &want, &shape, 1e-5, 1e-5);
    }
}

#[test]
fn max_pool_default_stride_is_kernel() {
    let g = one_op(
        "Pool",
        json!({"mode": "max", "kernel": [2, 2]}),
        &[("X", "fp16", vec![1, 1, 4, 4])],
        names(&["X"]),
    );
    let x = dlc_egg::tensor::Tensor::from_f64(
        DType::F16,
        vec![1, 1, 4, 4],
        &(0..16).map(|v| v as f64).collect::<Vec<_>>(),
    );
    let y = run_y(&g, vec![("X", x)]);
    assert_close(&y, &[5., 7., 13., 15.], &[1, 1, 2, 2], 0.0, 0.0);
}
