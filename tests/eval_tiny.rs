//! Integration tests of the reference evaluator: Tiny programs built with `Builder`, checked
//! against independent expectations computed by naive loops here.

use dlc_egg::eval::bench_programs::{conv2d, matmul, random_tensor, ConvSpec};
use dlc_egg::eval::evaluate;
use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::tiny::{AffineIndex, BinaryOp, Builder, Program, ReduceOp, Src, UnaryOp};
use dlc_egg::tensor::{Tensor, TensorData};
use dlc_egg::Diagnostics;
use std::collections::BTreeMap;

fn dims(v: &[i64]) -> Vec<Dim> {
    v.iter().map(|d| Dim::int(*d)).collect()
}

fn t(dtype: DType, shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_f64(dtype, shape.to_vec(), v)
}

fn try_run(
    p: &Program,
    ins: &[(&str, &Tensor)],
    b: &[(&str, i64)],
) -> Result<BTreeMap<String, Tensor>, Diagnostics> {
    let inputs = ins
        .iter()
        .map(|(k, v)| (k.to_string(), (*v).clone()))
        .collect();
    let binds = b.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    evaluate(p, &binds, &inputs)
}

fn run1(p: &Program, ins: &[(&str, &Tensor)]) -> Tensor {
    let out = try_run(p, ins, &[]).expect("evaluates");
    out.into_values().next().expect("one output")
}

fn seq(n: usize, f: impl Fn(usize) -> f64) -> Vec<f64> {
    (0..n).map(f).collect()
}

fn r32(x: f64) -> f64 {
    x as f32 as f64
}

#[test]
fn matmul_fp32_matches_naive_loop() {
    let (m, k, n) = (5usize, 7usize, 3usize);
    let p = matmul(m as i64, k as i64, n as i64, DType::F32, DType::F32).unwrap();
    let a = random_tensor(DType::F32, &[m, k], 10);
    let b = random_tensor(DType::F32, &[k, n], 11);
    let y = run1(&p, &[("A", &a), ("B", &b)]);
    assert_eq!(y.shape, vec![m, n]);
    let (av, bv) = (a.to_f64(), b.to_f64());
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0;
            for q in 0..k {
                acc = r32(acc + r32(av[i * k + q] * bv[q * n + j]));
            }
            assert_eq!(y.get_f64(i * n + j), acc, "at ({i},{j})");
        }
    }
}

#[test]
fn matmul_fp16_inputs_accumulate_in_fp32() {
    let (m, k, n) = (4usize, 33usize, 6usize);
    let p = matmul(m as i64, k as i64, n as i64, DType::F16, DType::F32).unwrap();
    let a = random_tensor(DType::F16, &[m, k], 12);
    let b = random_tensor(DType::F16, &[k, n], 13);
    let y = run1(&p, &[("A", &a), ("B", &b)]);
    assert_eq!(y.dtype, DType::F32);
    let (av, bv) = (a.to_f64(), b.to_f64());
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0;
            for q in 0..k {
                let prod = DType::F16.round(av[i * k + q] * bv[q * n + j]);
                acc = r32(acc + prod);
            }
            assert_eq!(y.get_f64(i * n + j), acc);
        }
    }
}

#[test]
fn conv_with_pad_stride_dilation_matches_seven_loops() {
    let s = ConvSpec {
        n: 2,
        cin: 3,
        cout: 4,
        h: 7,
        w: 6,
        k: 3,
        pad: 2,
        stride: 2,
        dilation: 2,
    };
    let p = conv2d(s, DType::F32).unwrap();
    let (n, ci, co, h, w, k) = (2usize, 3usize, 4usize, 7usize, 6usize, 3usize);
    let x = random_tensor(DType::F32, &[n, ci, h, w], 20);
    let wt = random_tensor(DType::F32, &[co, ci, k, k], 21);
    let y = run1(&p, &[("X", &x), ("W", &wt)]);
    let (oy, ox) = s.out_hw();
    let (oy, ox) = (oy as usize, ox as usize);
    assert_eq!(y.shape, vec![n, co, oy, ox]);
    let (xv, wv) = (x.to_f64(), wt.to_f64());
    for b in 0..n {
        for o in 0..co {
            for yy in 0..oy {
                for xx in 0..ox {
                    let mut acc = 0.0;
                    for c in 0..ci {
                        for ky in 0..k {
                            for kx in 0..k {
                                let iy = (yy * 2 + ky * 2) as i64 - 2;
                                let ix = (xx * 2 + kx * 2) as i64 - 2;
                                let inside =
                                    (0..h as i64).contains(&iy) && (0..w as i64).contains(&ix);
                                let xe = if inside {
                                    xv[((b * ci + c) * h + iy as usize) * w + ix as usize]
                                } else {
                                    0.0
                                };
                                let we = wv[((o * ci + c) * k + ky) * k + kx];
                                acc = r32(acc + r32(xe * we));
                            }
                        }
                    }
                    assert_eq!(y.get_f64(((b * co + o) * oy + yy) * ox + xx), acc);
                }
            }
        }
    }
}

fn reduce_prog(op: ReduceOp, shape: &[i64], axes: Vec<usize>, dt: DType) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", dt, dims(shape)).unwrap();
    let r = b.reduce(op, x, axes, dt).unwrap();
    b.output("y", r);
    b.finish()
}

#[test]
fn reduce_max_min_prod() {
    let x = t(
        DType::F32,
        &[2, 3, 2],
        &seq(12, |i| ((i * 7) % 11) as f64 - 5.0),
    );
    let xv = x.to_f64();
    let at = |i: usize, j: usize, k: usize| xv[(i * 3 + j) * 2 + k];
    let y = run1(
        &reduce_prog(ReduceOp::Max, &[2, 3, 2], vec![1], DType::F32),
        &[("x", &x)],
    );
    let want: Vec<f64> = (0..4)
        .map(|o| {
            (0..3)
                .map(|j| at(o / 2, j, o % 2))
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .collect();
    assert_eq!(y.to_f64(), want);
    let y = run1(
        &reduce_prog(ReduceOp::Min, &[2, 3, 2], vec![0, 2], DType::F32),
        &[("x", &x)],
    );
    let want: Vec<f64> = (0..3)
        .map(|j| {
            [at(0, j, 0), at(0, j, 1), at(1, j, 0), at(1, j, 1)]
                .into_iter()
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    assert_eq!(y.to_f64(), want);
    let y = run1(
        &reduce_prog(ReduceOp::Prod, &[2, 3, 2], vec![0, 1, 2], DType::F32),
        &[("x", &x)],
    );
    assert_eq!(y.shape, Vec::<usize>::new());
    assert_eq!(y.to_f64(), vec![xv.iter().fold(1.0, |a, v| r32(a * v))]);
    let xi = t(DType::I32, &[2, 3], &[1.0, -2.0, 3.0, 4.0, 5.0, -6.0]);
    let y = run1(
        &reduce_prog(ReduceOp::Sum, &[2, 3], vec![1], DType::I32),
        &[("x", &xi)],
    );
    assert_eq!(y.data, TensorData::I32(vec![2, 3]));
}

fn gather_prog(xs: &[i64], is: &[i64], axis: usize) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, dims(xs)).unwrap();
    let i = b.input("i", DType::I32, dims(is)).unwrap();
    let g = b.gather(x, i, axis).unwrap();
    b.output("y", g);
    b.finish()
}

#[test]
fn gather_matches_torch_and_rejects_out_of_range() {
    let x = t(DType::F32, &[3, 4], &seq(12, |i| i as f64 * 10.0));
    let idx = t(
        DType::I32,
        &[2, 4],
        &[2.0, 0.0, 1.0, 2.0, 0.0, 0.0, 2.0, 1.0],
    );
    let y = run1(&gather_prog(&[3, 4], &[2, 4], 0), &[("x", &x), ("i", &idx)]);
    let iv = idx.to_f64();
    let want: Vec<f64> = (0..8)
        .map(|p| x.get_f64(iv[p] as usize * 4 + p % 4))
        .collect();
    assert_eq!(y.to_f64(), want);
    let bad = t(
        DType::I32,
        &[2, 4],
        &[0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    );
    let e = try_run(
        &gather_prog(&[3, 4], &[2, 4], 0),
        &[("x", &x), ("i", &bad)],
        &[],
    )
    .unwrap_err();
    assert_eq!(e.first_code(), "E0304");
    assert_eq!(e.0[0].kind, "GatherIndexOutOfRange");
    let neg = t(
        DType::I32,
        &[2, 4],
        &[0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    );
    let e = try_run(
        &gather_prog(&[3, 4], &[2, 4], 0),
        &[("x", &x), ("i", &neg)],
        &[],
    )
    .unwrap_err();
    assert_eq!(e.first_code(), "E0304");
}

#[test]
fn pad_with_value_then_pad_with_another_value() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, dims(&[2, 2])).unwrap();
    let p1 = b.pad(x, vec![(1, 0), (0, 1)], 7.0).unwrap();
    let p2 = b.pad(p1, vec![(0, 1), (1, 0)], -1.0).unwrap();
    b.output("a", p1);
    b.output("b", p2);
    let prog = b.finish();
    let xt = t(DType::F32, &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let out = try_run(&prog, &[("x", &xt)], &[]).unwrap();
    assert_eq!(
        out["a"].to_f64(),
        vec![7.0, 7.0, 7.0, 1.0, 2.0, 7.0, 3.0, 4.0, 7.0]
    );
    assert_eq!(out["b"].shape, vec![4, 4]);
    assert_eq!(
        out["b"].to_f64(),
        vec![-1.0, 7.0, 7.0, 7.0, -1.0, 1.0, 2.0, 7.0, -1.0, 3.0, 4.0, 7.0, -1.0, -1.0, -1.0, -1.0]
    );
}

#[test]
fn shrink_with_step_and_flip() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, dims(&[3, 7])).unwrap();
    let s = b
        .shrink(x, dims(&[1, 1]), dims(&[3, 7]), vec![1, 3])
        .unwrap();
    let f = b.flip(s, vec![0, 1]).unwrap();
    b.output("s", s);
    b.output("f", f);
    let xt = t(DType::F32, &[3, 7], &seq(21, |i| i as f64));
    let out = try_run(&b.finish(), &[("x", &xt)], &[]).unwrap();
    assert_eq!(out["s"].shape, vec![2, 2]);
    assert_eq!(out["s"].to_f64(), vec![8.0, 11.0, 15.0, 18.0]);
    assert_eq!(out["f"].to_f64(), vec![18.0, 15.0, 11.0, 8.0]);
}

#[test]
fn view_sliding_window_sums() {
    // windows of 3 over a length-6 vector: [4, 3] with map i0 + i1, summed over the window.
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, dims(&[6])).unwrap();
    let v = b
        .view(
            x,
            dims(&[4, 3]),
            vec![AffineIndex::new(vec![(0, 1), (1, 1)], 0)],
        )
        .unwrap();
    let r = b.reduce(ReduceOp::Sum, v, vec![1], DType::F32).unwrap();
    b.output("y", r);
    let xt = t(DType::F32, &[6], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(
        run1(&b.finish(), &[("x", &xt)]).to_f64(),
        vec![6.0, 9.0, 12.0, 15.0]
    );
}

#[test]
fn reshape_of_permuted_view_is_row_major() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, dims(&[2, 3])).unwrap();
    let p = b.permute(x, vec![1, 0]).unwrap();
    let r = b.reshape(p, dims(&[6])).unwrap();
    let s = b.shrink(r, dims(&[1]), dims(&[6]), vec![2]).unwrap();
    let y = b.binary(BinaryOp::Add, s.into(), Src::Imm(0.5)).unwrap();
    b.output("r", r);
    b.output("y", y);
    let xt = t(DType::F32, &[2, 3], &seq(6, |i| i as f64));
    let out = try_run(&b.finish(), &[("x", &xt)], &[]).unwrap();
    assert_eq!(out["r"].to_f64(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(out["y"].to_f64(), vec![3.5, 4.5, 5.5]);
}

#[test]
fn i32_ops_are_exact() {
    let mut b = Builder::new();
    let x = b.input("x", DType::I32, dims(&[4])).unwrap();
    let y = b.input("y", DType::I32, dims(&[4])).unwrap();
    let m = b.binary(BinaryOp::Mul, x.into(), y.into()).unwrap();
    let d = b.binary(BinaryOp::Idiv, x.into(), y.into()).unwrap();
    let lt = b.binary(BinaryOp::CmpLt, x.into(), y.into()).unwrap();
    let w = b.where_(lt, x.into(), Src::Imm(-1.0)).unwrap();
    let c = b.cast(d, DType::F32).unwrap();
    for (name, n) in [("m", m), ("d", d), ("w", w), ("c", c)] {
        b.output(name, n);
    }
    let xt = t(DType::I32, &[4], &[65537.0, -7.0, 2147483647.0, 3.0]);
    let yt = t(DType::I32, &[4], &[65537.0, 2.0, 2.0, 5.0]);
    let out = try_run(&b.finish(), &[("x", &xt), ("y", &yt)], &[]).unwrap();
    let mul: Vec<i32> = [(65537i32, 65537i32), (-7, 2), (i32::MAX, 2), (3, 5)]
        .iter()
        .map(|(a, b)| a.wrapping_mul(*b))
        .collect();
    assert_eq!(out["m"].data, TensorData::I32(mul));
    assert_eq!(out["d"].data, TensorData::I32(vec![1, -3, 1073741823, 0]));
    assert_eq!(out["w"].data, TensorData::I32(vec![-1, -7, -1, 3]));
    assert_eq!(out["c"].dtype, DType::F32);
    assert_eq!(out["c"].to_f64(), vec![1.0, -3.0, r32(1073741823.0), 0.0]);
}

#[test]
fn idiv_by_zero_is_a_diagnostic() {
    let mut b = Builder::new();
    let x = b.input("x", DType::I32, dims(&[3])).unwrap();
    let d = b.binary(BinaryOp::Idiv, Src::Imm(1.0), x.into()).unwrap();
    b.output("d", d);
    let xt = t(DType::I32, &[3], &[1.0, 0.0, 2.0]);
    let e = try_run(&b.finish(), &[("x", &xt)], &[]).unwrap_err();
    assert_eq!(e.first_code(), "E0305");
}

#[test]
fn fp16_rounds_at_every_node() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F16, dims(&[2])).unwrap();
    let a = b.binary(BinaryOp::Add, x.into(), Src::Imm(1.0)).unwrap();
    let a2 = b.binary(BinaryOp::Add, a.into(), Src::Imm(1.0)).unwrap();
    let m = b.binary(BinaryOp::Mul, a2.into(), Src::Imm(0.1)).unwrap();
    let s = b.reduce(ReduceOp::Sum, m, vec![0], DType::F16).unwrap();
    b.output("s", s);
    let xt = t(DType::F16, &[2], &[2048.0, 1.0]);
    let y = run1(&b.finish(), &[("x", &xt)]);
    let f = |v: f64| DType::F16.round(v);
    let tenth = f(0.1);
    let e0 = f(f(f(2048.0 + 1.0) + 1.0) * tenth);
    let e1 = f(f(f(1.0 + 1.0) + 1.0) * tenth);
    assert_eq!(e0, f(2048.0 * tenth));
    assert_eq!(y.to_f64(), vec![f(f(0.0 + e0) + e1)]);
}

#[test]
fn symbolic_shapes_are_bound() {
    let mut b = Builder::new();
    let n = Dim::sym("N");
    let x = b
        .input("x", DType::F32, vec![n.clone(), Dim::int(3)])
        .unwrap();
    let s = b
        .shrink(
            x,
            vec![Dim::int(1), Dim::int(0)],
            vec![n.clone(), Dim::int(3)],
            vec![1, 1],
        )
        .unwrap();
    let r = b.reduce(ReduceOp::Sum, s, vec![0], DType::F32).unwrap();
    b.output("y", r);
    let p = b.finish();
    let xt = t(DType::F32, &[4, 3], &seq(12, |i| i as f64));
    let out = try_run(&p, &[("x", &xt)], &[("N", 4)]).unwrap();
    assert_eq!(
        out["y"].to_f64(),
        vec![3.0 + 6.0 + 9.0, 4.0 + 7.0 + 10.0, 5.0 + 8.0 + 11.0]
    );
    let e = try_run(&p, &[("x", &xt)], &[]).unwrap_err();
    assert_eq!(e.first_code(), "E0201");
    assert_eq!(e.0[0].kind, "UnboundSymbol");
    let e = try_run(&p, &[("x", &xt)], &[("N", 5)]).unwrap_err();
    assert_eq!(e.first_code(), "E0307");
}

#[test]
fn input_problems_are_diagnostics() {
    let p = reduce_prog(ReduceOp::Sum, &[2], vec![0], DType::F32);
    assert_eq!(try_run(&p, &[], &[]).unwrap_err().first_code(), "E0303");
    let wrong = t(DType::I32, &[2], &[1.0, 2.0]);
    assert_eq!(
        try_run(&p, &[("x", &wrong)], &[]).unwrap_err().first_code(),
        "E0308"
    );
    let mut lying = t(DType::F32, &[2], &[1.0, 2.0]);
    lying.shape = vec![3];
    assert_eq!(
        try_run(&p, &[("x", &lying)], &[]).unwrap_err().first_code(),
        "E0307"
    );
}

#[test]
fn range_compare_builds_a_causal_mask() {
    let mut b = Builder::new();
    let r = b.range(Dim::int(3)).unwrap();
    let rows = b.reshape(r, dims(&[3, 1])).unwrap();
    let rows = b.expand(rows, dims(&[3, 3])).unwrap();
    let cols = b.reshape(r, dims(&[1, 3])).unwrap();
    let cols = b.expand(cols, dims(&[3, 3])).unwrap();
    let keep = b.binary(BinaryOp::CmpLe, cols.into(), rows.into()).unwrap();
    let one = b.constant(2.5, DType::F32).unwrap();
    let one = b.reshape(one, dims(&[1, 1])).unwrap();
    let one = b.expand(one, dims(&[3, 3])).unwrap();
    let m = b
        .where_(keep, one.into(), Src::Imm(f64::NEG_INFINITY))
        .unwrap();
    let e = b.unary(UnaryOp::Exp2, m).unwrap();
    b.output("e", e);
    let y = run1(&b.finish(), &[]);
    let v = r32(2.5f64.exp2());
    assert_eq!(y.to_f64(), vec![v, 0.0, 0.0, v, v, 0.0, v, v, v]);
}

#[test]
fn view_out_of_bounds_after_binding_is_a_diagnostic() {
    let mut b = Builder::new();
    let n = Dim::sym("N");
    let x = b.input("x", DType::F32, dims(&[4])).unwrap();
    let v = b
        .view(x, vec![n], vec![AffineIndex::new(vec![(0, 1)], 1)])
        .unwrap();
    b.output("y", v);
    let p = b.finish();
    let xt = t(DType::F32, &[4], &[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(
        try_run(&p, &[("x", &xt)], &[("N", 3)]).unwrap()["y"].to_f64(),
        vec![2.0, 3.0, 4.0]
    );
    assert_eq!(
        try_run(&p, &[("x", &xt)], &[("N", 4)])
            .unwrap_err()
            .first_code(),
        "E0207"
    );
}

#[test]
fn parallel_results_do_not_depend_on_thread_count() {
    let s = ConvSpec {
        n: 2,
        cin: 8,
        cout: 8,
        h: 12,
        w: 12,
        k: 3,
        pad: 1,
        stride: 1,
        dilation: 1,
    };
    let conv = conv2d(s, DType::F32).unwrap();
    let x = random_tensor(DType::F32, &[2, 8, 12, 12], 30);
    let w = random_tensor(DType::F32, &[8, 8, 3, 3], 31);
    let mm = matmul(48, 40, 36, DType::F32, DType::F32).unwrap();
    let a = random_tensor(DType::F32, &[48, 40], 32);
    let b = random_tensor(DType::F32, &[40, 36], 33);
    let run_with = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            (
                run1(&conv, &[("X", &x), ("W", &w)]),
                run1(&mm, &[("A", &a), ("B", &b)]),
            )
        })
    };
    let one = run_with(1);
    for n in [2, 3, 5] {
        assert_eq!(run_with(n), one, "{n} threads");
    }
}

#[test]
fn rows_longer_than_one_segment() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, dims(&[3, 2500])).unwrap();
    let m = b.binary(BinaryOp::Mul, x.into(), Src::Imm(0.3)).unwrap();
    let s0 = b.reduce(ReduceOp::Sum, m, vec![0], DType::F32).unwrap();
    let m2 = b.binary(BinaryOp::Mul, x.into(), Src::Imm(0.3)).unwrap();
    let s1 = b.reduce(ReduceOp::Sum, m2, vec![1], DType::F32).unwrap();
    let e = b.unary(UnaryOp::Neg, x).unwrap();
    b.output("s0", s0);
    b.output("s1", s1);
    b.output("e", e);
    let xt = random_tensor(DType::F32, &[3, 2500], 40);
    let out = try_run(&b.finish(), &[("x", &xt)], &[]).unwrap();
    let xv = xt.to_f64();
    let p = |i: usize| r32(xv[i] * r32(0.3));
    let want0: Vec<f64> = (0..2500)
        .map(|j| (0..3).fold(0.0, |a, i| r32(a + p(i * 2500 + j))))
        .collect();
    let want1: Vec<f64> = (0..3)
        .map(|i| (0..2500).fold(0.0, |a, j| r32(a + p(i * 2500 + j))))
        .collect();
    assert_eq!(out["s0"].to_f64(), want0);
    assert_eq!(out["s1"].to_f64(), want1);
    assert_eq!(out["e"].to_f64(), xv.iter().map(|v| -v).collect::<Vec<_>>());
}
