//! Numerics of the emulated device header: conversions (round to nearest even, NaN), the PTX
//! ISA's fragment layouts, and every API function compiled and reduced on the host.

use super::*;

#[test]
fn conversions_round_to_nearest_even_and_nan_propagates() {
    let p = |e: i32| 2f32.powi(e);
    let (xs, ys) = conversion_inputs();
    let n = xs.len();
    let nf = 25usize;
    let prog = Prog::new(&["n"])
        .input("X", DType::F32, &[sym("n")])
        .input("Y", DType::F32, &[sym("n")])
        .output("F", DType::F32, &[int(nf as i64), sym("n")])
        .output("I", DType::I32, &[int(3), sym("n")])
        .then(
            launch("scalar_ops", grid_x(sym("n").ceildiv(64)), [64, 1, 1])
                .ins(&["X", "Y"])
                .outs(&["F", "I"])
                .syms(&["n"]),
        );
    let to_t = |v: &[f32]| {
        tensor(
            DType::F32,
            &[v.len()],
            &v.iter().map(|x| *x as f64).collect::<Vec<_>>(),
        )
    };
    let out = run(
        SCALAR,
        &prog,
        vec![("X", to_t(&xs)), ("Y", to_t(&ys))],
        &[("n", n as i64)],
    )
    .expect("runs");
    let (f, iv) = (floats(&out["F"]), ints(&out["I"]));
    assert_eq!(out["F"].shape, vec![nf, n]);
    for i in 0..n {
        check_scalar_ops(i, n, xs[i], ys[i], f, iv);
    }
    // The ties, spelled out.
    let at = |k: usize, i: usize| f[k * n + i];
    assert_eq!(
        (at(0, 0), at(0, 1), at(0, 2), at(0, 3)),
        (2048.0, 2052.0, 1.0, 1.0 + p(-9))
    );
    assert_eq!(
        (at(0, 4), at(0, 5), at(0, 8), at(0, 9)),
        (65504.0, f32::INFINITY, 0.0, p(-23))
    );
    assert_eq!(
        (at(1, 13), at(1, 14), at(1, 16)),
        (1.0, 1.0 + p(-6), f32::INFINITY)
    );
    assert!(at(4, 18).is_nan() && at(5, 18).is_nan() && at(4, 19).is_nan() && at(6, 18).is_nan());
    assert!(at(4, 21).to_bits() == 0 && at(6, 22).to_bits() == (-0.0f32).to_bits());
    assert_eq!(
        (iv[25], iv[26], iv[27], iv[28]),
        (i32::MIN, -1294967296, 1294967296, 0)
    );
}

/// The operands of `scalar_ops`: fp16 and bf16 ties, subnormals and overflow, NaN and the
/// infinities, signed zeros, int conversion edges, then seeded values.
fn conversion_inputs() -> (Vec<f32>, Vec<f32>) {
    let p = |e: i32| 2f32.powi(e);
    let mut xs: Vec<f32> = vec![
        2049.0,
        2051.0,
        1.0 + p(-11),
        1.0 + 3.0 * p(-11),
        65519.0,
        65520.0,
        -65520.0,
        65504.0,
        p(-25),
        3.0 * p(-25),
        p(-24),
        1.5 * p(-24),
        p(-14) - p(-25), // fp16 ties and subnormals
        1.0 + p(-8),
        1.0 + 3.0 * p(-8),
        -(1.0 + p(-8)),
        f32::MAX,
        3.0e38, // bf16 ties, overflow
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        -2.7,
        2.7,
        2147483648.0,
        3.0e9,
        -3.0e9,
        1.0e19,
        0.5,
        4.0,
        1.0e-3,
    ];
    let mut ys: Vec<f32> = vec![0.0; xs.len()];
    ys[18] = 1.0; // max(NaN, 1), min(NaN, 1)
    ys[19] = f32::NAN; // max(inf, NaN)
    ys[21] = -0.0; // max(+0, -0) keeps +0 (the first operand on ties)
    ys[22] = 0.0;
    ys[27] = 2.0;
    let extra = data(10, 32);
    xs.extend(extra.iter().map(|v| (*v * 8.0) as f32));
    ys.extend(extra.iter().rev().map(|v| (*v * 3.0) as f32));
    (xs, ys)
}

/// Element `i` (`x`, `y`) of every `scalar_ops` output (`f`: the 25 float ops over `n`
/// elements, `iv`: int conversion and the two packs) against the host's computation.
fn check_scalar_ops(i: usize, n: usize, x: f32, y: f32, f: &[f32], iv: &[i32]) {
    let h = half::f16::from_f32(x).to_f32();
    let b = half::bf16::from_f32(x).to_f32();
    let exact = [
        (0, h),
        (1, b),
        (2, h),
        (3, b),
        (4, ref_max(x, y)),
        (5, ref_min(x, y)),
        (6, if x < 0.0 { 0.0 } else { x }),
        (7, if x != 0.0 { 1.0 } else { 0.0 }),
        (12, x.sqrt()),
        (13, 1.0 / x.sqrt()),
        (14, 1.0 / x),
        (18, x.abs()),
        (20, x),
        (21, wrap_i32(x as f64) as f32),
        (22, if x > y { 1.0 } else { 0.0 }),
        (23, f32::INFINITY),
        (24, f32::NAN),
    ];
    for (k, want) in exact {
        assert!(
            same(f[k * n + i], want),
            "op {k} of x = {x:e}, y = {y:e}: {} vs {want}",
            f[k * n + i]
        );
    }
    let xd = x as f64;
    let approx = [
        (8, xd.exp()),
        (9, xd.exp2()),
        (10, xd.ln()),
        (11, xd.log2()),
        (15, libm::erf(xd)),
        (16, xd.tanh()),
        (17, 1.0 / (1.0 + (-xd).exp())),
        (19, xd.powf(y as f64)),
    ];
    for (k, want) in approx {
        let want = want as f32;
        let got = f[k * n + i];
        let ok = same(got, want) || (got - want).abs() <= 4.0 * f32::EPSILON * want.abs();
        assert!(ok, "op {k} of x = {x:e}, y = {y:e}: {got} vs {want}");
    }
    assert_eq!(iv[i], wrap_i32(x as f64), "cvt<int>({x:e})");
    let (ph, pb) = (iv[n + i] as u32, iv[2 * n + i] as u32);
    if !x.is_nan() && !y.is_nan() {
        assert_eq!(
            ph,
            pack16(half_bits(x), half_bits(y)),
            "pack_half2({x:e}, {y:e})"
        );
        assert_eq!(
            pb,
            pack16(bf16_bits(x), bf16_bits(y)),
            "pack_bf162({x:e}, {y:e})"
        );
    }
}

#[test]
fn fragment_layouts_follow_the_ptx_isa() {
    let prog = Prog::new(&[])
        .input("X", DType::F16, &[int(256)])
        .input("A", DType::F32, &[int(16), int(16)])
        .input("B", DType::F32, &[int(16), int(8)])
        .input("C", DType::F32, &[int(16), int(8)])
        .output("O", DType::I32, &[int(6 * 32 * 4)])
        .output("Dh", DType::F32, &[int(16), int(8)])
        .output("Db", DType::F32, &[int(16), int(8)])
        .then(
            launch("ldmatrix_probe", one_block(), [32, 1, 1])
                .ins(&["X"])
                .outs(&["O"]),
        )
        .then(
            launch("mma_probe_f16", one_block(), [32, 1, 1])
                .ins(&["A", "B", "C"])
                .outs(&["Dh"]),
        )
        .then(
            launch("mma_probe_bf16", one_block(), [32, 1, 1])
                .ins(&["A", "B", "C"])
                .outs(&["Db"]),
        );
    // Small integers: exact in fp16, bf16 and every fp32 sum.
    let a: Vec<f64> = (0..256).map(|i| ((i * 7) % 11) as f64 - 5.0).collect();
    let b: Vec<f64> = (0..128).map(|i| ((i * 5) % 9) as f64 - 4.0).collect();
    let c: Vec<f64> = (0..128).map(|i| (i % 13) as f64).collect();
    let x: Vec<f64> = (0..256).map(|i| i as f64).collect();
    let ins = vec![
        ("X", tensor(DType::F16, &[256], &x)),
        ("A", tensor(DType::F32, &[16, 16], &a)),
        ("B", tensor(DType::F32, &[16, 8], &b)),
        ("C", tensor(DType::F32, &[16, 8], &c)),
    ];
    let out = run(FRAGMENTS, &prog, ins, &[]).expect("runs");
    let o = ints(&out["O"]);
    let val = |m: usize, r: usize, col: usize| half_bits((m * 64 + r * 8 + col) as f32);
    for (v, (count, trans)) in [
        (1, false),
        (2, false),
        (4, false),
        (1, true),
        (2, true),
        (4, true),
    ]
    .into_iter()
    .enumerate()
    {
        for lane in 0..32 {
            let (g, t) = (lane / 4, lane % 4);
            for j in 0..4 {
                let want = if j >= count {
                    0
                } else if trans {
                    pack16(val(j, 2 * t, g), val(j, 2 * t + 1, g))
                } else {
                    pack16(val(j, g, 2 * t), val(j, g, 2 * t + 1))
                };
                assert_eq!(
                    o[(v * 32 + lane) * 4 + j] as u32,
                    want,
                    "variant {v} lane {lane} register {j}"
                );
            }
        }
    }
    for name in ["Dh", "Db"] {
        let d = floats(&out[name]);
        for i in 0..16 {
            for j in 0..8 {
                let want: f64 =
                    c[i * 8 + j] + (0..16).map(|k| a[i * 16 + k] * b[k * 8 + j]).sum::<f64>();
                assert_eq!(d[i * 8 + j] as f64, want, "{name}[{i}][{j}]");
            }
        }
    }
}

#[test]
fn every_api_function_compiles_and_reduces_on_the_host() {
    let prog = Prog::new(&["n"])
        .input("x", DType::F32, &[int(32)])
        .input("h", DType::F16, &[int(64)])
        .input("b", DType::BF16, &[int(64)])
        .output("out", DType::F32, &[int(64)])
        .output("bits", DType::I32, &[int(64)])
        .then(
            launch("dlc_api_all", one_block(), [32, 1, 1])
                .ins(&["x", "h", "b"])
                .outs(&["out", "bits"])
                .syms(&["n"])
                .smem(64),
        );
    let xs: Vec<f64> = data(11, 32).iter().map(|v| (v * 64.0).round()).collect();
    let hs: Vec<f64> = (0..64).map(|i| i as f64).collect();
    let ins = vec![
        ("x", tensor(DType::F32, &[32], &xs)),
        ("h", tensor(DType::F16, &[64], &hs)),
        ("b", tensor(DType::BF16, &[64], &hs)),
    ];
    let out = run(API_ALL, &prog, ins, &[("n", 32)]).expect("runs");
    let o = floats(&out["out"]);
    let sum: f64 = xs.iter().sum();
    let max = xs.iter().cloned().fold(f64::MIN, f64::max);
    let min = xs.iter().cloned().fold(f64::MAX, f64::min);
    for lane in 0..32 {
        let want = sum + max + min + xs[lane ^ 1] + xs[0];
        assert_eq!(o[32 + lane] as f64, want, "lane {lane}");
        assert!(o[lane].is_finite(), "lane {lane}: {}", o[lane]);
    }
    // The 4-byte copies of h[0..32) (the last one of 2 bytes, zero-filled) into dynamic shared
    // memory, read back as bytes.
    let bits = ints(&out["bits"]);
    let bytes: Vec<u8> = (0..31)
        .flat_map(|i| half_bits(i as f32).to_le_bytes())
        .chain([0, 0])
        .collect();
    for lane in 0..32 {
        assert_eq!(
            bits[32 + lane],
            i32::from(bytes[lane]) | (i32::from(bytes[lane + 32]) << 8),
            "byte {lane}"
        );
    }
}
