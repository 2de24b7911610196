//! Contractions: `MatMul`, `GEMM`, `Attention`.

use super::{broadcast, same_size, Ctx, Inferred};
use crate::diag::codes;
use crate::diag::Diagnostic;
use crate::ir::dim::{fmt_shape, Dim};
use crate::ir::dtype::DType;
use crate::ir::frontend::{Op, TensorInfo};

fn rank_err(cx: &Ctx, why: String, sugg: &str, shape: &[Dim]) -> Diagnostic {
    cx.err(codes::RANK_MISMATCH, why, sugg)
        .with("shape", fmt_shape(shape))
}

/// numpy/tinygrad matmul: 1-D operands are promoted (A to `[1,K]`, B to `[K,1]`) and the added
/// axis squeezed from the result; batch axes broadcast.
pub(super) fn matmul(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(2, 2, "A, B")?;
    let dtype = cx.same_dtype(&[0, 1])?;
    cx.float_only(dtype, "MatMul")?;
    let acc = cx.acc(dtype)?;
    let (an, a) = cx.t(0)?;
    let (bn, b) = cx.t(1)?;
    for (n, t) in [(an, a), (bn, b)] {
        if t.shape.is_empty() {
            return Err(rank_err(
                cx,
                format!("MatMul operand `{n}` is rank 0; both operands must be at least 1-D"),
                "use Elementwise mul for a scalar product",
                &t.shape,
            ));
        }
    }
    let mut sa = a.shape.clone();
    let mut sb = b.shape.clone();
    let a1 = sa.len() == 1;
    let b1 = sb.len() == 1;
    if a1 {
        sa.insert(0, Dim::int(1));
    }
    if b1 {
        sb.push(Dim::int(1));
    }
    let (ra, rb) = (sa.len(), sb.len());
    let k_a = &sa[ra - 1];
    let k_b = &sb[rb - 2];
    same_size(
        cx,
        k_a,
        k_b,
        || {
            format!(
                "MatMul contracts the last axis of `{an}` {} ({k_a}) with the second-to-last of `{bn}` {} ({k_b}); they differ",
                fmt_shape(&a.shape),
                fmt_shape(&b.shape)
            )
        },
        "make the contracted sizes equal (Permute B, or check the operand order)",
    )
    .map_err(|d| {
        d.with("lhs_shape", fmt_shape(&a.shape))
            .with("rhs_shape", fmt_shape(&b.shape))
    })?;
    let mut shape = broadcast(cx, &sa[..ra - 2], &sb[..rb - 2], "MatMul batch axes")?;
    if !a1 {
        shape.push(sa[ra - 2].clone());
    }
    if !b1 {
        shape.push(sb[rb - 1].clone());
    }
    Ok((Op::MatMul { acc }, TensorInfo { dtype, shape }))
}

/// `alpha·op(A)·op(B) + beta·C` on 2-D operands; C broadcasts to `[M, N]`.
pub(super) fn gemm(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(2, 3, "A, B and optionally C")?;
    let idx: Vec<usize> = (0..cx.ins.len()).collect();
    let dtype = cx.same_dtype(&idx)?;
    cx.float_only(dtype, "GEMM")?;
    let acc = cx.acc(dtype)?;
    let a = &cx.node.attrs;
    let (trans_a, trans_b) = (a.bool_or("trans_a", false), a.bool_or("trans_b", false));
    let (alpha, beta) = (a.num_or("alpha", 1.0), a.num_or("beta", 1.0));
    let (an, ta) = cx.t(0)?;
    let (bn, tb) = cx.t(1)?;
    for (n, t) in [(an, ta), (bn, tb)] {
        if t.shape.len() != 2 {
            return Err(rank_err(
                cx,
                format!(
                    "GEMM operand `{n}` has rank {}; GEMM takes 2-D A and B",
                    t.shape.len()
                ),
                "use MatMul for batched or 1-D products, or Reshape to 2-D",
                &t.shape,
            ));
        }
    }
    let (m, ka) = if trans_a {
        (&ta.shape[1], &ta.shape[0])
    } else {
        (&ta.shape[0], &ta.shape[1])
    };
    let (kb, n) = if trans_b {
        (&tb.shape[1], &tb.shape[0])
    } else {
        (&tb.shape[0], &tb.shape[1])
    };
    same_size(
        cx,
        ka,
        kb,
        || {
            format!(
                "GEMM contracts K: op(A) = `{an}` {}{} has K = {ka}, op(B) = `{bn}` {}{} has K = {kb}",
                fmt_shape(&ta.shape),
                if trans_a { "ᵀ" } else { "" },
                fmt_shape(&tb.shape),
                if trans_b { "ᵀ" } else { "" },
            )
        },
        "make K equal, or set `trans_a`/`trans_b`",
    )?;
    let shape = vec![m.clone(), n.clone()];
    if cx.ins.len() == 3 {
        let (cn, tc) = cx.t(2)?;
        let b = broadcast(
            cx,
            &tc.shape,
            &shape,
            &format!("GEMM C `{cn}` against [M, N]"),
        )?;
        if b != shape {
            return Err(cx
                .err(
                    codes::BROADCAST_MISMATCH,
                    format!(
                        "GEMM C `{cn}` {} must broadcast to [M, N] = {} without growing it",
                        fmt_shape(&tc.shape),
                        fmt_shape(&shape)
                    ),
                    "give C a shape [N], [M, 1], [1, N], [M, N] or a rank-0 shape",
                )
                .with("lhs_shape", fmt_shape(&tc.shape))
                .with("rhs_shape", fmt_shape(&shape)));
        }
    }
    Ok((
        Op::Gemm {
            trans_a,
            trans_b,
            alpha,
            beta,
            acc,
        },
        TensorInfo { dtype, shape },
    ))
}

/// `softmax(scale·QKᵀ + mask)·V`; batch axes of Q, K, V broadcast, the mask broadcasts to
/// `[…, M, N]`.
pub(super) fn attention(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(3, 4, "Q, K, V and optionally mask")?;
    let dtype = cx.same_dtype(&[0, 1, 2])?;
    cx.float_only(dtype, "Attention")?;
    let acc = cx.acc(dtype)?;
    let (qn, q) = cx.t(0)?;
    let (kn, k) = cx.t(1)?;
    let (vn, v) = cx.t(2)?;
    for (n, t, what) in [
        (qn, q, "Q […, M, D]"),
        (kn, k, "K […, N, D]"),
        (vn, v, "V […, N, Dv]"),
    ] {
        if t.shape.len() < 2 {
            return Err(rank_err(
                cx,
                format!(
                    "Attention {what}: `{n}` has rank {}, needs at least 2",
                    t.shape.len()
                ),
                "Reshape the operand to […, rows, features]",
                &t.shape,
            ));
        }
    }
    let (rq, rk, rv) = (q.shape.len(), k.shape.len(), v.shape.len());
    let (m, d) = (&q.shape[rq - 2], &q.shape[rq - 1]);
    let (nk, dk) = (&k.shape[rk - 2], &k.shape[rk - 1]);
    let (nv, dv) = (&v.shape[rv - 2], &v.shape[rv - 1]);
    same_size(
        cx,
        d,
        dk,
        || format!("Attention: Q `{qn}` has D = {d} but K `{kn}` has D = {dk}"),
        "Q and K must share the last (head) dimension",
    )?;
    same_size(
        cx,
        nk,
        nv,
        || format!("Attention: K `{kn}` has N = {nk} keys but V `{vn}` has {nv}"),
        "K and V must have the same number of rows N",
    )?;
    let batch = broadcast(
        cx,
        &q.shape[..rq - 2],
        &k.shape[..rk - 2],
        "Attention Q/K batch axes",
    )?;
    let batch = broadcast(cx, &batch, &v.shape[..rv - 2], "Attention V batch axes")?;
    if cx.ins.len() == 4 {
        let (mn, mask) = cx.t(3)?;
        if mask.dtype != DType::Bool && mask.dtype != dtype {
            return Err(cx
                .err(
                    codes::DTYPE_MISMATCH,
                    format!(
                        "Attention mask `{mn}` is {}; it must be bool (true keeps) or {dtype} (added)",
                        mask.dtype
                    ),
                    format!("Cast the mask to bool or {dtype}"),
                )
                .with("mask_dtype", mask.dtype));
        }
        let mut scores = batch.clone();
        scores.push(m.clone());
        scores.push(nk.clone());
        let b = broadcast(cx, &mask.shape, &scores, &format!("Attention mask `{mn}`"))?;
        if b != scores {
            return Err(cx
                .err(
                    codes::BROADCAST_MISMATCH,
                    format!(
                        "Attention mask `{mn}` {} must broadcast to the scores' shape {}",
                        fmt_shape(&mask.shape),
                        fmt_shape(&scores)
                    ),
                    "give the mask a shape that broadcasts to […, M, N] without growing it",
                )
                .with("lhs_shape", fmt_shape(&mask.shape))
                .with("rhs_shape", fmt_shape(&scores)));
        }
    }
    let scale = match cx.node.attrs.num("scale") {
        Some(s) => s,
        None => match d.as_int() {
            Some(dv) if dv > 0 => 1.0 / (dv as f64).sqrt(),
            _ => {
                return Err(cx
                    .err(
                        codes::SYMBOLIC_HEAD_DIM,
                        format!(
                            "the default Attention scale is 1/sqrt(D), but D = {d} is not a positive constant"
                        ),
                        "give `scale` explicitly, or make the head dimension a constant",
                    )
                    .with("head_dim", d))
            }
        },
    };
    let mut shape = batch;
    shape.push(m.clone());
    shape.push(dv.clone());
    Ok((
        Op::Attention {
            causal: cx.node.attrs.bool_or("causal", false),
            scale,
            acc,
        },
        TensorInfo { dtype, shape },
    ))
}
