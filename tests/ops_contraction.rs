//! MatMul, GEMM and Attention through graph.json → Tiny IR → reference evaluator, against
//! hand-computed values and naive loops.

mod common;
use common::*;
use dlc_egg::ir::dtype::DType;
use dlc_egg::tensor::Tensor;
use serde_json::json;

fn t(dtype: DType, shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_f64(dtype, shape.to_vec(), v)
}

#[test]
fn matmul_2x3_3x2_by_hand() {
    let g = one_op(
        "MatMul",
        json!({}),
        &[("A", "fp32", vec![2, 3]), ("B", "fp32", vec![3, 2])],
        names(&["A", "B"]),
    );
    let a = t(DType::F32, &[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let b = t(DType::F32, &[3, 2], &[7., 8., 9., 10., 11., 12.]);
    let y = run_y(&g, vec![("A", a), ("B", b)]);
    assert_close(&y, &[58., 64., 139., 154.], &[2, 2], 0.0, 0.0);
}

/// numpy matmul on f64 for operands of any rank >= 1 (batch broadcast, 1-D promotion).
fn np_matmul(a: &[f64], ash: &[usize], b: &[f64], bsh: &[usize]) -> (Vec<f64>, Vec<usize>) {
    let (a2, b2) = (ash.len() == 1, bsh.len() == 1);
    let ash: Vec<usize> = if a2 { vec![1, ash[0]] } else { ash.to_vec() };
    let bsh: Vec<usize> = if b2 { vec![bsh[0], 1] } else { bsh.to_vec() };
    let (m, k, n) = (ash[ash.len() - 2], ash[ash.len() - 1], bsh[bsh.len() - 1]);
    let (ab, bb) = (&ash[..ash.len() - 2], &bsh[..bsh.len() - 2]);
    let r = ab.len().max(bb.len());
    let batch: Vec<usize> = (0..r)
        .map(|i| {
            let x = if i + ab.len() >= r {
                ab[i + ab.len() - r]
            } else {
                1
            };
            let y = if i + bb.len() >= r {
                bb[i + bb.len() - r]
            } else {
                1
            };
            x.max(y)
        })
        .collect();
    let nb: usize = batch.iter().product();
    let mut out = vec![0.0; nb * m * n];
    for bi in 0..nb {
        let idx = unravel(bi, &batch);
        let off = |sh: &[usize]| -> usize {
            let mut o = 0;
            for (j, d) in sh.iter().enumerate() {
                let ii = idx[j + r - sh.len()];
                o = o * d + if *d == 1 { 0 } else { ii };
            }
            o
        };
        let (oa, ob) = (off(ab) * m * k, off(bb) * k * n);
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for q in 0..k {
                    s += a[oa + i * k + q] * b[ob + q * n + j];
                }
                out[bi * m * n + i * n + j] = s;
            }
        }
    }
    let mut shape = batch;
    if !a2 {
        shape.push(m);
    }
    if !b2 {
        shape.push(n);
    }
    (out, shape)
}

fn check_matmul(ash: &[usize], bsh: &[usize], dtype: DType) {
    let dt = dtype.name();
    let g = one_op(
        "MatMul",
        json!({}),
        &[
            ("A", dt, ash.iter().map(|d| *d as i64).collect()),
            ("B", dt, bsh.iter().map(|d| *d as i64).collect()),
        ],
        names(&["A", "B"]),
    );
    let a = rand_tensor(1, dtype, ash);
    let b = rand_tensor(2, dtype, bsh);
    let (want, shape) = np_matmul(&a.to_f64(), ash, &b.to_f64(), bsh);
    let y = run_y(&g, vec![("A", a), ("B", b)]);
    let tol = if dtype == DType::F32 { 1e-5 } else { 1e-2 };
    assert_close(&y, &want, &shape, tol, tol);
}

#[test]
fn matmul_ranks_and_broadcast() {
    check_matmul(&[5], &[5, 3], DType::F32); // 1-D x 2-D
    check_matmul(&[4, 5], &[5], DType::F32); // 2-D x 1-D
    check_matmul(&[7], &[7], DType::F32); // 1-D x 1-D -> scalar
    check_matmul(&[2, 1, 3, 4], &[5, 4, 2], DType::F32); // batch broadcast
    check_matmul(&[3, 4], &[2, 4, 3], DType::F32);
    check_matmul(&[9, 17], &[17, 5], DType::F16); // fp16 in, fp32 accumulate
    check_matmul(&[3, 8], &[8, 6], DType::BF16);
}

#[test]
fn gemm_transposes_alpha_beta_and_c_broadcast() {
    let g = one_op(
        "GEMM",
        json!({"trans_a": true, "trans_b": true, "alpha": 0.5, "beta": 2.0}),
        &[
            ("A", "fp32", vec![3, 2]),
            ("B", "fp32", vec![4, 3]),
            ("C", "fp32", vec![4]),
        ],
        names(&["A", "B", "C"]),
    );
    let a = rand_tensor(3, DType::F32, &[3, 2]);
    let b = rand_tensor(4, DType::F32, &[4, 3]);
    let c = rand_tensor(5, DType::F32, &[4]);
    let (av, bv, cv) = (a.to_f64(), b.to_f64(), c.to_f64());
    let mut want = vec![0.0; 8];
    for i in 0..2 {
        for j in 0..4 {
            let s: f64 = (0..3).map(|k| av[k * 2 + i] * bv[j * 3 + k]).sum();
            want[i * 4 + j] = 0.5 * s + 2.0 * cv[j];
        }
    }
    let y = run_y(&g, vec![("A", a), ("B", b), ("C", c)]);
    assert_close(&y, &want, &[2, 4], 1e-5, 1e-5);
}

/// softmax(scale·QKᵀ + mask)·V in f64 for [B, M, D] · [B, N, D] · [B, N, Dv].
#[allow(clippy::too_many_arguments)]
fn naive_attention(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    bsz: usize,
    m: usize,
    n: usize,
    d: usize,
    dv: usize,
    causal: bool,
    keep: Option<&[bool]>,
) -> Vec<f64> {
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0.0; bsz * m * dv];
    for b in 0..bsz {
        for i in 0..m {
            let mut s: Vec<f64> = (0..n)
                .map(|j| {
                    let dot: f64 = (0..d)
                        .map(|x| q[(b * m + i) * d + x] * k[(b * n + j) * d + x])
                        .sum();
                    let masked = (causal && j > i) || keep.is_some_and(|kp| !kp[i * n + j]);
                    if masked {
                        f64::NEG_INFINITY
                    } else {
                        dot * scale
                    }
                })
                .collect();
            let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            if mx == f64::NEG_INFINITY {
                continue; // fully masked row: zeros
            }
            s.iter_mut().for_each(|x| *x = (*x - mx).exp());
            let z: f64 = s.iter().sum();
            for c in 0..dv {
                out[(b * m + i) * dv + c] =
                    (0..n).map(|j| s[j] / z * v[(b * n + j) * dv + c]).sum();
            }
        }
    }
    out
}

#[test]
fn causal_attention_matches_naive_softmax() {
    let (bsz, m, n, d, dv) = (2, 5, 5, 4, 3);
    let g = one_op(
        "Attention",
        json!({"causal": true}),
        &[
            ("Q", "fp32", vec![bsz as i64, m as i64, d as i64]),
            ("K", "fp32", vec![bsz as i64, n as i64, d as i64]),
            ("V", "fp32", vec![bsz as i64, n as i64, dv as i64]),
        ],
        names(&["Q", "K", "V"]),
    );
    let q = rand_tensor(6, DType::F32, &[bsz, m, d]);
    let k = rand_tensor(7, DType::F32, &[bsz, n, d]);
    let v = rand_tensor(8, DType::F32, &[bsz, n, dv]);
    let want = naive_attention(
        &q.to_f64(),
        &k.to_f64(),
        &v.to_f64(),
        bsz,
        m,
        n,
        d,
        dv,
        true,
        None,
    );
    let y = run_y(&g, vec![("Q", q), ("K", k), ("V", v)]);
    assert_close(&y, &want, &[bsz, m, dv], 1e-5, 1e-5);
}

#[test]
fn attention_rows_sum_to_one_and_respect_causality() {
    // With V = I (N = Dv), O is the probability matrix P itself.
    let (m, n, d) = (6, 6, 8);
    let g = one_op(
        "Attention",
        json!({"causal": true}),
        &[
            ("Q", "fp16", vec![1, 1, m, d]),
            ("K", "fp16", vec![1, 1, n, d]),
            ("V", "fp16", vec![1, 1, n, n]),
        ],
        names(&["Q", "K", "V"]),
    );
    let mut eye = vec![0.0; (n * n) as usize];
    for i in 0..n as usize {
        eye[i * n as usize + i] = 1.0;
    }
    let q = rand_tensor(9, DType::F16, &[1, 1, m as usize, d as usize]);
    let k = rand_tensor(10, DType::F16, &[1, 1, n as usize, d as usize]);
    let v = Tensor::from_f64(DType::F16, vec![1, 1, n as usize, n as usize], &eye);
    let p = run_y(&g, vec![("Q", q), ("K", k), ("V", v)]).to_f64();
    for i in 0..m as usize {
        let row = &p[i * n as usize..(i + 1) * n as usize];
        let sum: f64 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-2, "row {i} sums to {sum}");
        assert!(
            row[i + 1..].iter().all(|x| *x == 0.0),
            "row {i} attends to the future: {row:?}"
        );
    }
}

#[test]
fn attention_bool_mask_fully_masked_row_gives_zeros() {
    let (m, n, d, dv) = (3, 4, 2, 2);
    let g = one_op(
        "Attention",
        json!({}),
        &[
            ("Q", "fp32", vec![m, d]),
            ("K", "fp32", vec![n, d]),
            ("V", "fp32", vec![n, dv]),
            ("mask", "bool", vec![m, n]),
        ],
        names(&["Q", "K", "V", "mask"]),
    );
    let keep = [
        true, false, true, true, false, false, false, false, true, true, true, true,
    ];
    let mask = Tensor::from_f64(
        DType::Bool,
        vec![3, 4],
        &keep.map(|b| if b { 1.0 } else { 0.0 }),
    );
    let q = rand_tensor(11, DType::F32, &[3, 2]);
    let k = rand_tensor(12, DType::F32, &[4, 2]);
    let v = rand_tensor(13, DType::F32, &[4, 2]);
    let want = naive_attention(
        &q.to_f64(),
        &k.to_f64(),
        &v.to_f64(),
        1,
        3,
        4,
        2,
        2,
        false,
        Some(&keep),
    );
    assert_eq!(&want[2..4], &[0.0, 0.0]);
    let y = run_y(&g, vec![("Q", q), ("K", k), ("V", v), ("mask", mask)]);
    assert_close(&y, &want, &[3, 2], 1e-5, 1e-5);
}
