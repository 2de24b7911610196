//! Elementwise functions, broadcasting, scalars, comparisons, where and Cast.

mod common;
use common::*;
use dlc_egg::ir::dtype::DType;
use dlc_egg::tensor::Tensor;
use serde_json::json;

/// `(fn name, inputs, f64 reference)`.
type Case<'a> = (&'a str, &'a Vec<f64>, Box<dyn Fn(f64) -> f64>);

fn erf(x: f64) -> f64 {
    // Abramowitz–Stegun 7.1.26 is too coarse; integrate numerically instead (Simpson, 2000 steps).
    let n = 2000;
    let h = x / n as f64;
    let f = |t: f64| (-t * t).exp();
    let mut s = f(0.0) + f(x);
    for i in 1..n {
        s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn unary_functions_match_f64_formulas() {
    let xs: Vec<f64> = vec![-3.0, -1.5, -0.25, 0.0, 0.1, 0.7, 2.0, 4.5];
    let pos: Vec<f64> = xs.iter().map(|x| x.abs() + 0.125).collect();
    let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
    let cases: Vec<Case> = vec![
        ("neg", &xs, Box::new(|x: f64| -x)),
        ("abs", &xs, Box::new(f64::abs)),
        ("exp", &xs, Box::new(f64::exp)),
        ("exp2", &xs, Box::new(f64::exp2)),
        ("log", &pos, Box::new(f64::ln)),
        ("sqrt", &pos, Box::new(f64::sqrt)),
        ("rsqrt", &pos, Box::new(|x: f64| 1.0 / x.sqrt())),
        ("recip", &pos, Box::new(|x: f64| 1.0 / x)),
        ("relu", &xs, Box::new(|x: f64| x.max(0.0))),
        ("sigmoid", &xs, Box::new(sig)),
        ("tanh", &xs, Box::new(f64::tanh)),
        ("silu", &xs, Box::new(move |x: f64| x * sig(x))),
        (
            "gelu",
            &xs,
            Box::new(|x: f64| 0.5 * x * (1.0 + erf(x / 2f64.sqrt()))),
        ),
        (
            "gelu_tanh",
            &xs,
            Box::new(|x: f64| {
                0.5 * x
                    * (1.0
                        + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
            }),
        ),
    ];
    for (f, input, reference) in cases {
        for dtype in [DType::F32, DType::F16] {
            let g = one_op(
                "Elementwise",
                json!({"fn": f}),
                &[("X", dtype.name(), vec![input.len() as i64])],
                names(&["X"]),
            );
            let x = Tensor::from_f64(dtype, vec![input.len()], input);
            let want: Vec<f64> = x.to_f64().iter().map(|v| reference(*v)).collect();
            let y = run_y(&g, vec![("X", x)]);
            let tol = if dtype == DType::F32 { 1e-5 } else { 2e-3 };
            assert_close(&y, &want, &[input.len()], tol, tol);
        }
    }
}

#[test]
fn binary_broadcast_and_scalar_operands() {
    let g = one_op(
        "Elementwise",
        json!({"fn": "sub"}),
        &[("A", "fp32", vec![2, 1, 3]), ("B", "fp32", vec![4, 1])],
        names(&["A", "B"]),
    );
    let a = rand_tensor(61, DType::F32, &[2, 1, 3]);
    let b = rand_tensor(62, DType::F32, &[4, 1]);
    let (av, bv) = (a.to_f64(), b.to_f64());
    let mut want = vec![];
    for i in 0..2 {
        for bj in &bv {
            for k in 0..3 {
                want.push(av[i * 3 + k] - bj);
            }
        }
    }
    let y = run_y(&g, vec![("A", a), ("B", b)]);
    assert_close(&y, &want, &[2, 4, 3], 1e-6, 1e-6);

    // A scalar constant adopts the tensor's dtype (rounded to fp16: 0.1 -> 0.0999755859375).
    let g = one_op(
        "Elementwise",
        json!({"fn": "add"}),
        &[("A", "fp16", vec![2])],
        vec![json!("A"), json!(0.1)],
    );
    let y = run_y(
        &g,
        vec![("A", Tensor::from_f64(DType::F16, vec![2], &[0.0, 1.0]))],
    );
    assert_close(&y, &[0.0999755859375, 1.099609375], &[2], 0.0, 0.0);
}

#[test]
fn comparisons_give_bool_and_where_selects() {
    let a = Tensor::from_f64(DType::F32, vec![4], &[1.0, 2.0, 3.0, 4.0]);
    let b = Tensor::from_f64(DType::F32, vec![4], &[4.0, 2.0, 1.0, 4.0]);
    for (f, want) in [
        ("lt", [1., 0., 0., 0.]),
        ("le", [1., 1., 0., 1.]),
        ("gt", [0., 0., 1., 0.]),
        ("ge", [0., 1., 1., 1.]),
        ("eq", [0., 1., 0., 1.]),
        ("ne", [1., 0., 1., 0.]),
    ] {
        let g = one_op(
            "Elementwise",
            json!({"fn": f}),
            &[("A", "fp32", vec![4]), ("B", "fp32", vec![4])],
            names(&["A", "B"]),
        );
        let y = run_y(&g, vec![("A", a.clone()), ("B", b.clone())]);
        assert_eq!(y.dtype, DType::Bool, "{f}");
        assert_close(&y, &want, &[4], 0.0, 0.0);
    }
    let g = one_op(
        "Elementwise",
        json!({"fn": "where"}),
        &[("C", "bool", vec![4]), ("A", "fp32", vec![4])],
        vec![json!("C"), json!("A"), json!(-1.0)],
    );
    let c = Tensor::from_f64(DType::Bool, vec![4], &[1.0, 0.0, 1.0, 0.0]);
    let y = run_y(&g, vec![("C", c), ("A", a)]);
    assert_close(&y, &[1.0, -1.0, 3.0, -1.0], &[4], 0.0, 0.0);
}

#[test]
fn integer_division_truncates_toward_zero() {
    let g = one_op(
        "Elementwise",
        json!({"fn": "div"}),
        &[("A", "i32", vec![4]), ("B", "i32", vec![4])],
        names(&["A", "B"]),
    );
    let a = Tensor::from_f64(DType::I32, vec![4], &[7.0, -7.0, 7.0, 9.0]);
    let b = Tensor::from_f64(DType::I32, vec![4], &[2.0, 2.0, -2.0, 3.0]);
    let y = run_y(&g, vec![("A", a), ("B", b)]);
    assert_close(&y, &[3.0, -3.0, -3.0, 3.0], &[4], 0.0, 0.0);
}

#[test]
fn cast_rounds_to_nearest_even_and_truncates_to_int() {
    let g = one_op(
        "Cast",
        json!({"to": "fp16"}),
        &[("X", "fp32", vec![3])],
        names(&["X"]),
    );
    let y = run_y(
        &g,
        vec![(
            "X",
            Tensor::from_f64(DType::F32, vec![3], &[2049.0, 2051.0, 1e-8]),
        )],
    );
    assert_close(&y, &[2048.0, 2052.0, 0.0], &[3], 0.0, 0.0);
    let g = one_op(
        "Cast",
        json!({"to": "i32"}),
        &[("X", "fp32", vec![3])],
        names(&["X"]),
    );
    let y = run_y(
        &g,
        vec![(
            "X",
            Tensor::from_f64(DType::F32, vec![3], &[2.7, -2.7, 0.5]),
        )],
    );
    assert_eq!(y.dtype, DType::I32);
    assert_close(&y, &[2.0, -2.0, 0.0], &[3], 0.0, 0.0);
}
