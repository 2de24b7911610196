//! Contractions in tinygrad's explicit-broadcast order (seed 000 §0, §11): `dot(x, w)` reshapes
//! `x` to `[…, M, 1, K]` and `w` to `[…, 1, K, N]`, transposes `w`'s last two axes to `[…, 1, N, K]`,
//! broadcasts both to `[…, M, N, K]`, multiplies and sums the last axis in the accumulation dtype.
//! 1-D operands get no inserted axis (`[K]·[K,N] → [N]`, `[M,K]·[K] → [M]`). GEMM and attention's
//! two products (QKᵀ and PV, seed 002 §5.3) reuse the same core.

use super::reduction::softmax_axis;
use super::util::{bcast, bin, mul_imm};
use super::{LResult, LowerError, Lowerer};
use crate::ir::dim::{broadcast_shapes, fmt_shape, Dim, Shape};
use crate::ir::dtype::DType;
use crate::ir::frontend::{Node, Op};
use crate::ir::tiny::{BinaryOp, Builder, NodeId, ReduceOp, Src};

/// tinygrad's `dot`: returns the `acc`-dtype product with the contracted axis reduced away.
pub fn dot(b: &mut Builder, x: NodeId, w: NodeId, acc: DType) -> LResult<NodeId> {
    let (xs, ws) = (b.shape(x).clone(), b.shape(w).clone());
    let (n1, n2) = (xs.len(), ws.len());
    if n1 == 0 || n2 == 0 {
        return Err(LowerError::Unsupported(
            "matmul operands must be at least 1-D".into(),
        ));
    }
    let ins = (n1 - 1).min(n2 - 1).min(1);
    let ones = vec![Dim::int(1); ins];
    // x.reshape(*x.shape[0:-1], *[1]*ins, x.shape[-1])
    let mut xr: Shape = xs[..n1 - 1].to_vec();
    xr.extend(ones.iter().cloned());
    xr.push(xs[n1 - 1].clone());
    // w.reshape(*w.shape[0:-2], *[1]*ins, *w.shape[-min(n2,2):]).transpose(-1, -min(n2,2))
    let tail = n2.min(2);
    let mut wr: Shape = ws[..n2 - tail].to_vec();
    wr.extend(ones);
    wr.extend(ws[n2 - tail..].iter().cloned());
    let x = b.reshape(x, xr.clone())?;
    let w = b.reshape(w, wr.clone())?;
    let w = if tail == 2 {
        let r = wr.len();
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(r - 1, r - 2);
        b.permute(w, perm)?
    } else {
        w
    };
    let wt = b.shape(w).clone();
    let full = broadcast_shapes(&xr, &wt).map_err(|(l, r)| {
        LowerError::Unsupported(format!(
            "matmul operands {} and {} do not broadcast ({l} vs {r})",
            fmt_shape(&xr),
            fmt_shape(&wt)
        ))
    })?;
    let x = bcast(b, x, &full)?;
    let w = bcast(b, w, &full)?;
    let x = b.cast(x, acc)?;
    let w = b.cast(w, acc)?;
    let p = bin(b, BinaryOp::Mul, x, w)?;
    Ok(b.reduce(ReduceOp::Sum, p, vec![full.len() - 1], acc)?)
}

/// `MatMul`: numpy/tinygrad matmul.
pub fn matmul(lw: &mut Lowerer, node: &Node, acc: DType) -> LResult<NodeId> {
    let a = lw.input(node, 0)?;
    let w = lw.input(node, 1)?;
    dot(&mut lw.b, a, w, acc)
}

/// `GEMM`: `alpha · op(A) · op(B) + beta · C`, C broadcast to `[M, N]`.
pub fn gemm(lw: &mut Lowerer, node: &Node) -> LResult<NodeId> {
    let Op::Gemm {
        trans_a,
        trans_b,
        alpha,
        beta,
        acc,
    } = node.op
    else {
        return Err(LowerError::Unsupported("not a GEMM".into()));
    };
    let a = lw.input(node, 0)?;
    let w = lw.input(node, 1)?;
    let c = lw.opt_input(node, 2)?;
    let b = &mut lw.b;
    let a = if trans_a {
        b.permute(a, vec![1, 0])?
    } else {
        a
    };
    let w = if trans_b {
        b.permute(w, vec![1, 0])?
    } else {
        w
    };
    let y = dot(b, a, w, acc)?;
    let y = mul_imm(b, y, alpha)?;
    let Some(c) = c else { return Ok(y) };
    let shape = b.shape(y).clone();
    let c = bcast(b, c, &shape)?;
    let c = b.cast(c, acc)?;
    let c = mul_imm(b, c, beta)?;
    bin(b, BinaryOp::Add, y, c)
}

/// `n <= m` over `[M, N]` (top-left causal mask, as PyTorch SDPA): RANGE + CMPLE.
pub fn causal_mask(b: &mut Builder, m: &Dim, n: &Dim) -> LResult<NodeId> {
    let mn = vec![m.clone(), n.clone()];
    let rn = b.range(n.clone())?;
    let rn = b.reshape(rn, vec![Dim::int(1), n.clone()])?;
    let rn = b.expand(rn, mn.clone())?;
    let rm = b.range(m.clone())?;
    let rm = b.reshape(rm, vec![m.clone(), Dim::int(1)])?;
    let rm = b.expand(rm, mn)?;
    Ok(b.binary(BinaryOp::CmpLe, rn.into(), rm.into())?)
}

/// `Attention`: `softmax(scale · Q Kᵀ + mask) · V` with the softmax in the accumulation dtype.
/// A row whose every position is masked out gives zeros (graph-json), so with an explicit mask
/// the softmax guards its max and its sum.
pub fn attention(lw: &mut Lowerer, node: &Node) -> LResult<NodeId> {
    let Op::Attention { causal, scale, acc } = node.op else {
        return Err(LowerError::Unsupported("not an Attention".into()));
    };
    let q = lw.input(node, 0)?;
    let k = lw.input(node, 1)?;
    let v = lw.input(node, 2)?;
    let mask = lw.opt_input(node, 3)?;
    let b = &mut lw.b;
    let kr = b.shape(k).len();
    let mut perm: Vec<usize> = (0..kr).collect();
    perm.swap(kr - 1, kr - 2);
    let kt = b.permute(k, perm)?;
    let s = dot(b, q, kt, acc)?;
    let s = mul_imm(b, s, scale)?;
    let sshape = b.shape(s).clone();
    let r = sshape.len();
    let s = if causal {
        let cm = causal_mask(b, &sshape[r - 2], &sshape[r - 1])?;
        let cm = bcast(b, cm, &sshape)?;
        b.where_(cm, s.into(), Src::Imm(f64::NEG_INFINITY))?
    } else {
        s
    };
    let s = match mask {
        Some(m) => {
            let m = bcast(b, m, &sshape)?;
            if b.dtype(m) == DType::Bool {
                b.where_(m, s.into(), Src::Imm(f64::NEG_INFINITY))?
            } else {
                let m = b.cast(m, acc)?;
                bin(b, BinaryOp::Add, s, m)?
            }
        }
        None => s,
    };
    let p = softmax_axis(b, s, r - 1, mask.is_some())?;
    dot(b, p, v, acc)
}
