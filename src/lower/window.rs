//! Sliding-window ops (seed 002 §5.2, seed 003): `Conv` as PAD + a sliding-window VIEW +
//! reshape/expand/permute + MUL + REDUCE over (Cin, kernel…), groups and dilation included;
//! `ConvTranspose` as tinygrad does it (stride by zero-insertion through reshape/pad/reshape, flipped
//! and transposed weights, then a conv); `Pool` as PAD + VIEW + REDUCE(MAX|SUM).

use super::util::{bcast, bin, pad_signed};
use super::{LResult, LowerError, Lowerer};
use crate::ir::dim::{Dim, Shape};
use crate::ir::dtype::DType;
use crate::ir::frontend::{ConvAttrs, Node, PoolAttrs, PoolMode};
use crate::ir::tiny::{AffineIndex, BinaryOp, Builder, NodeId, ReduceOp};

/// Spatial window parameters, one entry per spatial dim.
pub struct Window<'a> {
    pub kernel: &'a [Dim],
    pub stride: &'a [i64],
    pub dilation: &'a [i64],
}

/// Output size of one spatial dim: `(in − dil·(k − 1) − 1) // stride + 1`, for an already padded `in`.
fn out_size(inp: &Dim, k: &Dim, stride: i64, dil: i64) -> Dim {
    inp.sub(&k.add_int(-1).mul_int(dil))
        .add_int(-1)
        .floordiv(stride)
        .add_int(1)
}

/// `[N, C, *sp]` (padded) → VIEW `[N, C, *out, *kernel]` with input index
/// `stride·o + dil·k` per spatial dim.
pub fn window_view(b: &mut Builder, x: NodeId, w: &Window) -> LResult<NodeId> {
    let xs = b.shape(x).clone();
    let nsp = w.kernel.len();
    let mut shape: Shape = xs[..2].to_vec();
    let mut map = vec![
        AffineIndex::new(vec![(0, 1)], 0),
        AffineIndex::new(vec![(1, 1)], 0),
    ];
    for d in 0..nsp {
        shape.push(out_size(
            &xs[2 + d],
            &w.kernel[d],
            w.stride[d],
            w.dilation[d],
        ));
        map.push(AffineIndex::new(
            vec![(2 + d, w.stride[d]), (2 + nsp + d, w.dilation[d])],
            0,
        ));
    }
    shape.extend(w.kernel.iter().cloned());
    Ok(b.view(x, shape, map)?)
}

/// N-d convolution (PyTorch semantics) with signed `pads` (negative crops); returns the `acc`
/// result `[N, Cout, *out]`.
#[allow(clippy::too_many_arguments)]
pub fn conv_core(
    b: &mut Builder,
    x: NodeId,
    w: NodeId,
    stride: &[i64],
    pads: &[(i64, i64)],
    dilation: &[i64],
    groups: i64,
    acc: DType,
) -> LResult<NodeId> {
    let xs = b.shape(x).clone();
    let ws = b.shape(w).clone();
    let nsp = xs.len() - 2;
    let (n, cout, cin) = (xs[0].clone(), ws[0].clone(), ws[1].clone());
    let g = Dim::int(groups);
    let rcout = cout.floordiv(groups);
    let kernel: Shape = ws[2..].to_vec();
    // X.pad(...) then the sliding window: [N, G*Cin, *out, *k]
    let pad_list: Vec<(usize, i64, i64)> = pads
        .iter()
        .enumerate()
        .map(|(d, (l, h))| (2 + d, *l, *h))
        .collect();
    let xp = pad_signed(b, x, &pad_list, 0.0)?;
    let xw = window_view(
        b,
        xp,
        &Window {
            kernel: &kernel,
            stride,
            dilation,
        },
    )?;
    let out: Shape = b.shape(xw).clone()[2..2 + nsp].to_vec();
    // x.reshape(N, G, Cin, 1, *out, *k).expand(N, G, Cin, Rcout, *out, *k)
    //  .permute(N, G, Rcout, *out, Cin, *k)
    let mut s1: Shape = vec![n.clone(), g.clone(), cin.clone(), Dim::int(1)];
    s1.extend(out.iter().cloned());
    s1.extend(kernel.iter().cloned());
    let x1 = b.reshape(xw, s1.clone())?;
    s1[3] = rcout.clone();
    let x2 = b.expand(x1, s1)?;
    let mut perm = vec![0, 1, 3];
    perm.extend(4..4 + nsp);
    perm.push(2);
    perm.extend(4 + nsp..4 + 2 * nsp);
    let x3 = b.permute(x2, perm)?;
    // weight.reshape(1, G, Rcout, 1…, Cin, *k).expand(N, G, Rcout, *out, Cin, *k)
    let mut sw: Shape = vec![Dim::int(1), g.clone(), rcout.clone()];
    sw.extend(std::iter::repeat_n(Dim::int(1), nsp));
    sw.push(cin.clone());
    sw.extend(kernel.iter().cloned());
    let w1 = b.reshape(w, sw)?;
    let full = b.shape(x3).clone();
    let w2 = b.expand(w1, full.clone())?;
    let xa = b.cast(x3, acc)?;
    let wa = b.cast(w2, acc)?;
    let p = bin(b, BinaryOp::Mul, xa, wa)?;
    let axes: Vec<usize> = (3 + nsp..full.len()).collect();
    let y = b.reduce(ReduceOp::Sum, p, axes, acc)?;
    let mut so: Shape = vec![n, cout];
    so.extend(out);
    Ok(b.reshape(y, so)?)
}

/// Adds `bias[Cout]` (cast to `acc`) along axis 1.
fn add_bias(b: &mut Builder, y: NodeId, bias: Option<NodeId>, acc: DType) -> LResult<NodeId> {
    let Some(bias) = bias else { return Ok(y) };
    let ys = b.shape(y).clone();
    let mut bs: Shape = vec![Dim::int(1); ys.len()];
    bs[1] = ys[1].clone();
    let bb = b.reshape(bias, bs)?;
    let bb = bcast(b, bb, &ys)?;
    let bb = b.cast(bb, acc)?;
    bin(b, BinaryOp::Add, y, bb)
}

/// `Conv`.
pub fn conv(lw: &mut Lowerer, node: &Node, a: &ConvAttrs) -> LResult<NodeId> {
    let x = lw.input(node, 0)?;
    let w = lw.input(node, 1)?;
    let bias = lw.opt_input(node, 2)?;
    let b = &mut lw.b;
    let y = conv_core(b, x, w, &a.stride, &a.pad, &a.dilation, a.groups, a.acc)?;
    add_bias(b, y, bias, a.acc)
}

/// `ConvTranspose` (PyTorch `conv_transpose`), as tinygrad's `conv_transpose2d`:
/// `W[Cin, Cout/G, *k]` → `[G, Cin/G, Cout/G, *k]` → transpose the two channel axes → flip the
/// kernel → `[Cout, Cin/G, *k]`; `x` gets `stride − 1` zeros after every element (reshape to
/// `[…, H, 1, …]`, pad to `[…, H, s, …]`, reshape to `[…, H·s, …]`); then a stride-1 conv with
/// pads `(d(k−1) − lo, d(k−1) − hi + output_padding − (s − 1))`, the high pad dropping the
/// trailing `s − 1` zeros. (Shrinking to `(H−1)·s + 1` instead would fail for an empty input,
/// `H = 0`, whose output is all bias.)
pub fn conv_transpose(lw: &mut Lowerer, node: &Node, a: &ConvAttrs) -> LResult<NodeId> {
    let x = lw.input(node, 0)?;
    let w = lw.input(node, 1)?;
    let bias = lw.opt_input(node, 2)?;
    let b = &mut lw.b;
    let ws = b.shape(w).clone();
    let nsp = ws.len() - 2;
    let g = a.groups;
    let cin_g = ws[0].floordiv(g);
    let cout_g = ws[1].clone();
    let kernel: Shape = ws[2..].to_vec();
    let mut s: Shape = vec![Dim::int(g), cin_g.clone(), cout_g.clone()];
    s.extend(kernel.iter().cloned());
    let w1 = b.reshape(w, s)?;
    let mut perm: Vec<usize> = vec![0, 2, 1];
    perm.extend(3..3 + nsp);
    let w2 = b.permute(w1, perm)?;
    let w3 = b.flip(w2, (3..3 + nsp).collect())?;
    let mut s: Shape = vec![cout_g.mul_int(g), cin_g];
    s.extend(kernel.iter().cloned());
    let wt = b.reshape(w3, s)?;
    let xd = zero_insert(b, x, &a.stride)?;
    let mut pads = Vec::with_capacity(nsp);
    for (d, kd) in kernel.iter().enumerate() {
        let k = kd.as_int().ok_or_else(|| {
            LowerError::Unsupported("ConvTranspose needs a concrete kernel size".into())
        })?;
        let span = a.dilation[d] * (k - 1);
        pads.push((
            span - a.pad[d].0,
            span - a.pad[d].1 + a.output_padding[d] - (a.stride[d] - 1),
        ));
    }
    let ones = vec![1; nsp];
    let y = conv_core(b, xd, wt, &ones, &pads, &a.dilation, g, a.acc)?;
    add_bias(b, y, bias, a.acc)
}

/// Inserts `s − 1` zeros after every element of each spatial dim (movement ops only).
fn zero_insert(b: &mut Builder, x: NodeId, stride: &[i64]) -> LResult<NodeId> {
    if stride.iter().all(|s| *s == 1) {
        return Ok(x);
    }
    let xs = b.shape(x).clone();
    let nsp = stride.len();
    let mut s1: Shape = xs[..2].to_vec();
    let mut pad = vec![(0, 0), (0, 0)];
    for d in 0..nsp {
        s1.push(xs[2 + d].clone());
        s1.push(Dim::int(1));
        pad.push((0, 0));
        pad.push((0, stride[d] - 1));
    }
    let x1 = b.reshape(x, s1)?;
    let x2 = b.pad(x1, pad, 0.0)?;
    let mut s3: Shape = xs[..2].to_vec();
    for d in 0..nsp {
        s3.push(xs[2 + d].mul_int(stride[d]));
    }
    Ok(b.reshape(x2, s3)?)
}

/// `Pool`: max pads with the dtype's lowest value (−∞), avg sums in fp32 and divides by the window
/// size, or with `count_include_pad = false` by the number of non-padding elements (a pooled
/// window over padded ones).
pub fn pool(lw: &mut Lowerer, node: &Node, a: &PoolAttrs) -> LResult<NodeId> {
    let x = lw.input(node, 0)?;
    let b = &mut lw.b;
    let dt = b.dtype(x);
    let nsp = a.kernel.len();
    let kernel: Shape = a.kernel.iter().map(|k| Dim::int(*k)).collect();
    let win = Window {
        kernel: &kernel,
        stride: &a.stride,
        dilation: &a.dilation,
    };
    let pad_list: Vec<(usize, i64, i64)> = a
        .pad
        .iter()
        .enumerate()
        .map(|(d, (l, h))| (2 + d, *l, *h))
        .collect();
    let axes: Vec<usize> = (2 + nsp..2 + 2 * nsp).collect();
    match a.mode {
        PoolMode::Max => {
            let xp = pad_signed(b, x, &pad_list, dt.lowest())?;
            let xw = window_view(b, xp, &win)?;
            let acc = if dt.is_float() {
                DType::F32
            } else {
                DType::I32
            };
            let xw = b.cast(xw, acc)?;
            Ok(b.reduce(ReduceOp::Max, xw, axes, acc)?)
        }
        PoolMode::Avg => {
            let xp = pad_signed(b, x, &pad_list, 0.0)?;
            let xw = window_view(b, xp, &win)?;
            let xw = b.cast(xw, DType::F32)?;
            let s = b.reduce(ReduceOp::Sum, xw, axes.clone(), DType::F32)?;
            if a.count_include_pad {
                // In f64: the product of huge (legal) window sizes overflows i64.
                let n: f64 = a.kernel.iter().map(|&k| k as f64).product();
                return Ok(b.binary(BinaryOp::Fdiv, s.into(), crate::ir::tiny::Src::Imm(n))?);
            }
            // Count of real elements per window: pool a padded tensor of ones [1, 1, *sp].
            let xs = b.shape(x).clone();
            let one = b.constant(1.0, DType::F32)?;
            let one = b.reshape(one, vec![Dim::int(1); 2 + nsp])?;
            let mut os: Shape = vec![Dim::int(1), Dim::int(1)];
            os.extend(xs[2..].iter().cloned());
            let ones = b.expand(one, os)?;
            let op = pad_signed(b, ones, &pad_list, 0.0)?;
            let ow = window_view(b, op, &win)?;
            let cnt = b.reduce(ReduceOp::Sum, ow, axes, DType::F32)?;
            let ss = b.shape(s).clone();
            let cnt = bcast(b, cnt, &ss)?;
            bin(b, BinaryOp::Fdiv, s, cnt)
        }
    }
}
