//! CPU execution of CUDA kernels (`codegen::host`, `dlc_emu.h`): hand-written kernels in the
//! emitted dialect (`tests/emu/*.cu`, which also compile under NVRTC against the device header:
//! `tests/emu/nvrtc_check.py`), run through `run_on_host` with hand-built manifests and checked
//! against plain Rust computations. No GPU or CUDA needed; g++ is.

mod emu;

use dlc_egg::codegen::host::{HostError, HostOptions};
use dlc_egg::codegen::manifest::{BufferRole, ManifestStep};
use dlc_egg::ir::dtype::{wrap_i32, DType};
use emu::*;

const SGEMM: &str = include_str!("emu/sgemm_tiled.cu");
const ROWS: &str = include_str!("emu/rows.cu");
const GEMM_MMA: &str = include_str!("emu/gemm_mma.cu");
const CP_ASYNC: &str = include_str!("emu/cp_async.cu");
const FRAGMENTS: &str = include_str!("emu/fragments.cu");
const SCALAR: &str = include_str!("emu/scalar.cu");
const DIVERGENT: &str = include_str!("emu/divergent.cu");
const API_ALL: &str = include_str!("emu/api_all.cu");
const SHARED_FORMS: &str = include_str!("emu/shared_forms.cu");
const VECTOR: &str = include_str!("emu/vector.cu");

/// A small program used by the harness tests: Y = 2 X, one thread per element.
const SCALE: &str = r#"#include "dlc_kernel.cuh"
__global__ void __launch_bounds__(64) scale2(const float* __restrict__ X, float* __restrict__ Y, int n) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) Y[i] = 2.0f * X[i];
}
__global__ void __launch_bounds__(64) overrun(const float* __restrict__ X, float* __restrict__ Y, int n) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) Y[i] = X[i + 1];
}
"#;

#[test]
fn simt_tiled_matmul_with_tails() {
    let (m, n, k) = (37usize, 29usize, 45usize);
    let grid = [sym("N").ceildiv(16), sym("M").ceildiv(16), int(1)];
    let prog = Prog::new(&["K", "M", "N"])
        .input("A", DType::F32, &[sym("M"), sym("K")])
        .input("B", DType::F32, &[sym("K"), sym("N")])
        .output("C", DType::F32, &[sym("M"), sym("N")])
        .output("C2", DType::F32, &[sym("M"), sym("N")])
        .then(
            launch("sgemm_tiled", grid.clone(), [16, 16, 1])
                .ins(&["A", "B"])
                .outs(&["C"])
                .syms(&["K", "M", "N"]),
        )
        .then(
            launch("sgemm_no_barrier", grid, [16, 16, 1])
                .ins(&["A", "B"])
                .outs(&["C2"])
                .syms(&["K", "M", "N"]),
        );
    let a = tensor(DType::F32, &[m, k], &data(1, m * k));
    let b = tensor(DType::F32, &[k, n], &data(2, k * n));
    let (want, mag) = matmul(floats(&a), floats(&b), m, k, n);
    let out = run(
        SGEMM,
        &prog,
        vec![("A", a), ("B", b)],
        &[("K", 45), ("M", 37), ("N", 29)],
    )
    .expect("runs");
    let c = floats(&out["C"]);
    assert_eq!(out["C"].shape, vec![m, n]);
    for i in 0..m * n {
        assert!(
            (c[i] as f64 - want[i]).abs() <= 1e-6 * mag[i] + 1e-6,
            "C[{i}] = {} vs {}",
            c[i],
            want[i]
        );
    }
    // Without the barrier after the tile loads, threads read tile elements not stored yet.
    let c2 = floats(&out["C2"]);
    let wrong = (0..m * n)
        .filter(|&i| {
            let d = (c2[i] as f64 - want[i]).abs();
            d.is_nan() || d > 1e-3
        })
        .count();
    assert!(
        wrong > m * n / 2,
        "only {wrong} of {} wrong without the barrier",
        m * n
    );
}

#[test]
fn warp_row_sum_and_max() {
    let (r, c) = (5usize, 1000usize);
    let mut x = data(3, r * c);
    x[2 * c + 517] = f64::NAN; // row 2: NaN propagates through max (and sum)
    x[3 * c + 999] = f64::INFINITY;
    x[4 * c + 3] = 7.5; // row 4: the maximum in the first warp's first stride
    let prog = Prog::new(&["C", "R"])
        .input("X", DType::F32, &[sym("R"), sym("C")])
        .output("S", DType::F32, &[sym("R")])
        .output("Mx", DType::F32, &[sym("R")])
        .then(
            launch("row_sum_max", grid_x(sym("R")), [32, 4, 1])
                .ins(&["X"])
                .outs(&["S", "Mx"])
                .syms(&["C", "R"]),
        );
    let xt = tensor(DType::F32, &[r, c], &x);
    let xs = floats(&xt).to_vec();
    let out = run(ROWS, &prog, vec![("X", xt)], &[("C", 1000), ("R", 5)]).expect("runs");
    let (s, mx) = (floats(&out["S"]), floats(&out["Mx"]));
    for row in 0..r {
        let vals = &xs[row * c..(row + 1) * c];
        let sum: f64 = vals.iter().map(|v| *v as f64).sum();
        let max = vals.iter().fold(f32::NEG_INFINITY, |m, v| {
            if m.is_nan() || v.is_nan() {
                f32::NAN
            } else {
                m.max(*v)
            }
        });
        if max.is_nan() {
            assert!(
                mx[row].is_nan() && s[row].is_nan(),
                "row {row}: {} {}",
                s[row],
                mx[row]
            );
            continue;
        }
        assert_eq!(mx[row], max, "row {row} max");
        if sum.is_infinite() {
            assert_eq!(s[row] as f64, sum, "row {row} sum");
        } else {
            assert!(
                (s[row] as f64 - sum).abs() < 1e-3,
                "row {row}: {} vs {sum}",
                s[row]
            );
        }
    }
    assert_eq!(mx[4], 7.5);
}

#[test]
fn tensor_core_gemms_match_a_rounded_matmul() {
    // Neither M nor N is a multiple of the 64x64 tile, nor K of the 32-wide k tile.
    let (m, n, k) = (100usize, 88usize, 72usize);
    let grid = [sym("N").ceildiv(64), sym("M").ceildiv(64), int(1)];
    let smem = 2 * 64 * 40 * 2 + 2 * 32 * 72 * 2;
    let syms = ["K", "M", "N"];
    let prog = Prog::new(&syms)
        .input("Ah", DType::F16, &[sym("M"), sym("K")])
        .input("Bh", DType::F16, &[sym("K"), sym("N")])
        .input("Ab", DType::BF16, &[sym("M"), sym("K")])
        .input("Bb", DType::BF16, &[sym("K"), sym("N")])
        .input("Btb", DType::BF16, &[sym("N"), sym("K")])
        .output("Ch", DType::F32, &[sym("M"), sym("N")])
        .output("Cb", DType::F32, &[sym("M"), sym("N")])
        .output("Cbt", DType::F32, &[sym("M"), sym("N")])
        .then(
            launch("gemm_f16", grid.clone(), [128, 1, 1])
                .ins(&["Ah", "Bh"])
                .outs(&["Ch"])
                .syms(&syms)
                .smem(smem),
        )
        .then(
            launch("gemm_bf16", grid.clone(), [128, 1, 1])
                .ins(&["Ab", "Bb"])
                .outs(&["Cb"])
                .syms(&syms)
                .smem(smem),
        )
        .then(
            launch("gemm_bf16_nt", grid, [128, 1, 1])
                .ins(&["Ab", "Btb"])
                .outs(&["Cbt"])
                .syms(&syms)
                .smem(2 * 64 * 40 * 2 * 2),
        );
    let a = data(4, m * k);
    let b: Vec<f64> = data(5, k * n).iter().map(|v| v * 4.0).collect();
    let bt: Vec<f64> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
    let ins = vec![
        ("Ah", tensor(DType::F16, &[m, k], &a)),
        ("Bh", tensor(DType::F16, &[k, n], &b)),
        ("Ab", tensor(DType::BF16, &[m, k], &a)),
        ("Bb", tensor(DType::BF16, &[k, n], &b)),
        ("Btb", tensor(DType::BF16, &[n, k], &bt)),
    ];
    let refs: Vec<(&str, Reference)> = vec![
        ("Ch", matmul(floats(&ins[0].1), floats(&ins[1].1), m, k, n)),
        ("Cb", matmul(floats(&ins[2].1), floats(&ins[3].1), m, k, n)),
        ("Cbt", matmul(floats(&ins[2].1), floats(&ins[3].1), m, k, n)),
    ];
    let out = run(GEMM_MMA, &prog, ins, &[("K", 72), ("M", 100), ("N", 88)]).expect("runs");
    for (name, (want, mag)) in &refs {
        let c = floats(&out[*name]);
        for i in 0..m * n {
            // fp32 accumulation in a different order: a few ulp of the magnitude sum.
            let tol = 1e-6 * mag[i] + 1e-6;
            assert!(
                (c[i] as f64 - want[i]).abs() <= tol,
                "{name}[{i}] = {} vs {}",
                c[i],
                want[i]
            );
        }
    }
}

#[test]
fn cp_async_copies_land_only_when_waited_for() {
    let n = 37usize;
    let prog = Prog::new(&["n"])
        .input("Xh", DType::F16, &[int(256)])
        .input("Xf", DType::F32, &[int(256)])
        .input("Xt", DType::F16, &[sym("n")])
        .output("early", DType::F16, &[int(256)])
        .output("late", DType::F16, &[int(256)])
        .output("groups", DType::F32, &[int(384)])
        .output("tail", DType::F16, &[int(192)])
        .output("published", DType::I32, &[int(32)])
        .then(
            launch("copy_early", one_block(), [32, 1, 1])
                .ins(&["Xh"])
                .outs(&["early"]),
        )
        .then(
            launch("copy_late", one_block(), [32, 1, 1])
                .ins(&["Xh"])
                .outs(&["late"]),
        )
        .then(
            launch("copy_groups", one_block(), [32, 1, 1])
                .ins(&["Xf"])
                .outs(&["groups"]),
        )
        .then(
            launch("copy_tail", one_block(), [32, 1, 1])
                .ins(&["Xt"])
                .outs(&["tail"])
                .syms(&["n"]),
        )
        .then(
            launch("ldmatrix_published", one_block(), [64, 1, 1])
                .ins(&["Xh"])
                .outs(&["published"]),
        );
    let xh = tensor(DType::F16, &[256], &data(6, 256));
    let xf = tensor(DType::F32, &[256], &data(7, 256));
    let xt = tensor(
        DType::F16,
        &[n],
        &(1..=n).map(|v| v as f64).collect::<Vec<_>>(),
    );
    let (xhv, xfv) = (floats(&xh).to_vec(), floats(&xf).to_vec());
    let out = run(
        CP_ASYNC,
        &prog,
        vec![("Xh", xh), ("Xf", xf), ("Xt", xt)],
        &[("n", n as i64)],
    )
    .expect("runs");
    // Waited for and published: the neighbour's data.
    assert_eq!(floats(&out["late"]), &xhv[..]);
    // Read before waiting: shared memory still holds what the launcher put there (NaN).
    let early = floats(&out["early"]);
    assert!(
        early.iter().all(|v| v.is_nan()),
        "stale reads must not see the copies"
    );
    // wait<1> lands the first group only; wait<0> the second.
    let groups = floats(&out["groups"]);
    assert_eq!(&groups[..128], &xfv[..128]);
    assert!(
        groups[128..256].iter().all(|v| v.is_nan()),
        "the newest group is still pending"
    );
    assert_eq!(&groups[256..], &xfv[128..]);
    // 16-, 8- and 4-byte copies with partial src sizes zero-fill past n.
    let tail = floats(&out["tail"]);
    for buf in 0..3 {
        for i in 0..64 {
            let want = if i < n { (i + 1) as f32 } else { 0.0 };
            assert_eq!(tail[buf * 64 + i], want, "buffer {buf} element {i}");
        }
    }
    // ldmatrix.x1 after a barrier: lane l holds row l/4, columns 2(l%4) and 2(l%4)+1.
    let published = ints(&out["published"]);
    for (l, got) in published.iter().enumerate() {
        let e = (l / 4) * 8 + 2 * (l % 4);
        assert_eq!(
            *got as u32,
            pack16(half_bits(xhv[e]), half_bits(xhv[e + 1])),
            "lane {l}"
        );
    }
}

#[test]
fn ldmatrix_rejects_rows_still_in_flight() {
    let prog = Prog::new(&[])
        .input("X", DType::F16, &[int(64)])
        .output("Y", DType::I32, &[int(32)])
        .then(
            launch("ldmatrix_before_wait", one_block(), [32, 1, 1])
                .ins(&["X"])
                .outs(&["Y"]),
        );
    let x = tensor(DType::F16, &[64], &data(8, 64));
    let err = run_error(run(CP_ASYNC, &prog, vec![("X", x)], &[]));
    assert!(
        err.contains("dlc_ldmatrix") && err.contains("still in flight"),
        "{err}"
    );
}

#[test]
fn ldmatrix_rejects_copies_no_barrier_published() {
    let prog = Prog::new(&[])
        .input("X", DType::F16, &[int(64)])
        .output("Y", DType::I32, &[int(32)])
        .then(
            launch("ldmatrix_unpublished", one_block(), [64, 1, 1])
                .ins(&["X"])
                .outs(&["Y"]),
        );
    let x = tensor(DType::F16, &[64], &data(9, 64));
    let err = run_error(run(CP_ASYNC, &prog, vec![("X", x)], &[]));
    assert!(err.contains("no __syncthreads()"), "{err}");
}

#[test]
fn cp_async_source_past_its_buffer_is_reported() {
    let prog = Prog::new(&["n"])
        .input("X", DType::F16, &[sym("n")])
        .output("Y", DType::F16, &[int(8)])
        .then(
            launch("copy_overrun", one_block(), [32, 1, 1])
                .ins(&["X"])
                .outs(&["Y"])
                .syms(&["n"]),
        );
    let x = tensor(DType::F16, &[12], &data(14, 12));
    let err = run_error(run(CP_ASYNC, &prog, vec![("X", x)], &[("n", 12)]));
    assert!(
        err.contains("dlc_cp_async_16: source") && err.contains("not inside one global buffer"),
        "{err}"
    );
}

/// `vec_scale` over `n` halves of Y from X (`x_len` halves) shifted by `shift`.
fn vec_scale(n: i64, x_len: usize, shift: i64) -> Outputs {
    let prog = Prog::new(&["n", "shift"])
        .input("X", DType::F16, &[int(x_len as i64)])
        .output("Y", DType::F16, &[sym("n")])
        .then(
            launch("vec_scale", grid_x(int(2)), [32, 1, 1])
                .ins(&["X"])
                .outs(&["Y"])
                .syms(&["n", "shift"]),
        );
    let xs: Vec<f64> = (0..x_len).map(|i| i as f64 - 100.0).collect();
    let x = tensor(DType::F16, &[x_len], &xs);
    run(VECTOR, &prog, vec![("X", x)], &[("n", n), ("shift", shift)])
}

#[test]
fn vector_accesses_copy_whole_words() {
    let out = vec_scale(512, 520, 8).expect("runs");
    let y = floats(&out["Y"]);
    for (i, v) in y.iter().enumerate() {
        assert_eq!(*v, 2.0 * (i as f32 + 8.0 - 100.0), "Y[{i}]");
    }
}

#[test]
fn misaligned_or_overrunning_vector_accesses_are_reported() {
    let err = run_error(vec_scale(64, 80, 3));
    assert!(
        err.contains("dlc_ld_vec<16>") && err.contains("not 16-byte aligned"),
        "{err}"
    );
    let err = run_error(vec_scale(64, 64, 8));
    assert!(
        err.contains("dlc_ld_vec<16>") && err.contains("not inside one global buffer"),
        "{err}"
    );
}

#[test]
fn shared_memory_at_file_scope_in_inline_helpers_and_templates() {
    let prog = Prog::new(&[])
        .input("X", DType::F32, &[int(64)])
        .output("Y", DType::F32, &[int(64)])
        .then(
            launch("shared_forms", grid_x(int(3)), [64, 1, 1])
                .ins(&["X"])
                .outs(&["Y"]),
        );
    let xs: Vec<f64> = (0..64).map(|i| f64::from(i * i % 17)).collect();
    let out = run(
        SHARED_FORMS,
        &prog,
        vec![("X", tensor(DType::F32, &[64], &xs))],
        &[],
    )
    .expect("runs");
    let want: Vec<f32> = (0..64)
        .map(|t| (xs[(t + 1) % 64] + xs[(t + 2) % 64] + xs[(t + 3) % 64]) as f32)
        .collect();
    assert_eq!(floats(&out["Y"]), &want[..]);
}

fn divergent(kernel: &str, threads: u32) -> String {
    let prog = Prog::new(&[])
        .output("Y", DType::F32, &[int(i64::from(threads))])
        .then(launch(kernel, grid_x(int(2)), [threads, 1, 1]).outs(&["Y"]));
    run_error(run(DIVERGENT, &prog, vec![], &[]))
}

#[test]
fn divergent_syncthreads_is_reported() {
    let err = divergent("divergent_barrier", 32);
    assert!(err.contains("divergent __syncthreads()"), "{err}");
    assert!(
        err.contains("block (0,0,0) thread (16,0,0)") && err.contains("16 thread(s) wait"),
        "{err}"
    );
}

#[test]
fn divergent_warp_collective_and_mismatched_barriers_are_reported() {
    let err = divergent("divergent_shfl", 32);
    assert!(
        err.contains("divergent warp") && err.contains("dlc_shfl_xor"),
        "{err}"
    );
    let err = divergent("two_barriers", 64);
    assert!(
        err.contains("divergent __syncthreads()") && err.contains("thread (32,0,0)"),
        "{err}"
    );
}

#[test]
fn conversions_round_to_nearest_even_and_nan_propagates() {
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
        let (x, y) = (xs[i], ys[i]);
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

#[test]
fn harness_aliases_cache_and_reports_input_errors() {
    let cache = tempfile::tempdir().expect("temp dir");
    let opts = HostOptions {
        cache_dir: Some(cache.path().to_path_buf()),
        ..HostOptions::default()
    };
    let prog = Prog::new(&["n"])
        .input("X", DType::F32, &[sym("n")])
        .buffer("Y", DType::F32, &[sym("n")], BufferRole::Kernel)
        .buffer(
            "Yr",
            DType::F32,
            &[int(8), sym("n").floordiv(8)],
            BufferRole::Alias { of: "Y".into() },
        )
        .then(
            launch("scale2", grid_x(sym("n").ceildiv(64)), [64, 1, 1])
                .ins(&["X"])
                .outs(&["Y"])
                .syms(&["n"]),
        );
    let mut prog = prog;
    prog.0.steps.push(ManifestStep::Alias {
        name: "Yr".into(),
        of: "Y".into(),
    });
    prog.0.outputs.push(("y".into(), "Yr".into()));
    let xs = data(12, 72);
    let out = run_with(
        SCALE,
        &prog,
        vec![("X", tensor(DType::F32, &[72], &xs))],
        &[("n", 72)],
        &opts,
    )
    .expect("runs");
    assert_eq!(out["y"].shape, vec![8, 9]);
    let want: Vec<f32> = xs.iter().map(|v| 2.0 * *v as f32).collect();
    assert_eq!(floats(&out["y"]), &want[..]);
    // The same program again, other bindings: served from the cache (no compiler needed), and a
    // launch with an empty grid is skipped.
    let no_cxx = HostOptions {
        compiler: "/nonexistent/g++".into(),
        ..opts.clone()
    };
    let out = run_with(
        SCALE,
        &prog,
        vec![("X", tensor(DType::F32, &[0], &[]))],
        &[("n", 0)],
        &no_cxx,
    )
    .expect("cached");
    assert_eq!(out["y"].shape, vec![8, 0]);
    // A program not in the cache needs the compiler.
    let other = format!("{SCALE}\n// another program\n");
    let r = run_with(
        &other,
        &prog,
        vec![("X", tensor(DType::F32, &[8], &[0.0; 8]))],
        &[("n", 8)],
        &no_cxx,
    );
    assert!(matches!(r, Err(HostError::CompilerMissing { .. })), "{r:?}");
    // Inputs and bindings are checked before anything runs.
    let r = run_with(SCALE, &prog, vec![], &[("n", 8)], &opts);
    assert!(
        matches!(&r, Err(HostError::MissingInput { name }) if name == "X"),
        "{r:?}"
    );
    let r = run_with(
        SCALE,
        &prog,
        vec![("X", tensor(DType::F32, &[9], &[0.0; 9]))],
        &[("n", 8)],
        &opts,
    );
    assert!(matches!(r, Err(HostError::BadInput { .. })), "{r:?}");
    let r = run_with(
        SCALE,
        &prog,
        vec![("X", tensor(DType::F32, &[8], &[0.0; 8]))],
        &[],
        &opts,
    );
    assert!(matches!(r, Err(HostError::Size { .. })), "{r:?}");
    // A kernel that does not compile.
    let r = run_with(
        "#include \"dlc_kernel.cuh\"\n__global__ void scale2(int) { undefined_name(); }\n",
        &prog,
        vec![("X", tensor(DType::F32, &[8], &[0.0; 8]))],
        &[("n", 8)],
        &opts,
    );
    assert!(
        matches!(&r, Err(HostError::Compile { log }) if log.contains("undefined_name")),
        "{r:?}"
    );
}

#[test]
fn sanitized_build_reports_out_of_bounds_reads() {
    let prog = Prog::new(&["n"])
        .input("X", DType::F32, &[sym("n")])
        .output("Y", DType::F32, &[sym("n")])
        .then(
            launch("overrun", grid_x(sym("n").ceildiv(64)), [64, 1, 1])
                .ins(&["X"])
                .outs(&["Y"])
                .syms(&["n"]),
        );
    let opts = HostOptions {
        sanitize: true,
        ..HostOptions::default()
    };
    let x = tensor(DType::F32, &[40], &data(13, 40));
    let err = run_error(run_with(SCALE, &prog, vec![("X", x)], &[("n", 40)], &opts));
    assert!(
        err.contains("AddressSanitizer: heap-buffer-overflow"),
        "{err}"
    );
}

/// A one-op row graph (`op` over the last axis of `[T, C]`, fp16 I/O), with LayerNorm's
/// `gamma` and `beta` when `norm`.
fn row_graph(op: &str, c: usize, norm: bool) -> String {
    let (params, extra, attrs) = if norm {
        (
            r#", {"tensor": "gamma", "role": "param"}, {"tensor": "beta", "role": "param"}"#,
            format!(
                r#", "gamma": {{"dtype": "fp16", "shape": [{c}]}}, "beta": {{"dtype": "fp16", "shape": [{c}]}}"#
            ),
            r#"{"axis": -1, "eps": 1e-5}"#,
        )
    } else {
        ("", String::new(), r#"{"axis": -1}"#)
    };
    let ins = if norm {
        r#""X", "gamma", "beta""#
    } else {
        r#""X""#
    };
    format!(
        r#"{{"signature": {{"inputs": [{{"tensor": "X", "role": "data"}}{params}], "outputs": [{{"tensor": "Y"}}]}},
 "symbols": {{"T": 5}},
 "tensors": {{"X": {{"dtype": "fp16", "shape": ["T", {c}]}}, "Y": {{"dtype": "fp16", "shape": ["T", {c}]}}{extra}}},
 "graph": [{{"op": "{op}", "name": "r", "inputs": [{ins}], "outputs": ["Y"], "attrs": {attrs}}}]}}"#
    )
}

/// The row template's one-warp-per-row plan (rows up to `plan::space::WARP_ROW_MAX`), as
/// optimized and emitted, run on the host against the reference: fp16 I/O, fp32 math,
/// 16-byte chunks where the row allows them, with tails in every dimension — 5 rows over
/// blocks of 4 warps, rows of 200 (25 chunks of 8 over 32 lanes) and of 100 (4-element chunks)
/// and 1000 (125 chunks: some lanes walk 4 chunks, some 3); and a block per row of 3000 (375
/// chunks over 256 threads: the cross-warp step through shared memory).
#[test]
fn row_kernels_one_warp_per_row_with_tails() {
    use dlc_egg::codegen::generate;
    use dlc_egg::codegen::host::run_on_host;
    use dlc_egg::eval::evaluate;
    use dlc_egg::ir::{frontend, lower};
    use dlc_egg::optimize::{optimize, OptimizeOptions};
    use dlc_egg::rules::testing::random_inputs;
    use std::collections::BTreeMap;
    // (op, row length, normalizes, plan the row price chooses): a warp per row up to
    // `WARP_ROW_MAX`; 3000 columns (12 chunks per lane of a warp, over the 8 it keeps in flight)
    // are priced cheaper one block of 256 threads per row (two barriers per reduction, a tail
    // chunk per thread), emulated the same way.
    for (op, c, norm, algo) in [
        ("LayerNorm", 200, true, "warp_per_row"),
        ("Softmax", 100, false, "warp_per_row"),
        ("LayerNorm", 1000, true, "warp_per_row"),
        ("LayerNorm", 3000, true, "block_per_row"),
    ] {
        let text = row_graph(op, c, norm);
        let g = frontend::load_str(&text, "row.json").expect("loads");
        let p = lower::lower(&g).expect("lowers");
        let opts = OptimizeOptions {
            target: dlc_egg::target::Arch::Sm80.target(),
            ..OptimizeOptions::default()
        };
        let o = optimize(&p, &opts).expect("optimizes");
        let generated = generate(&o).expect("generates");
        let rows: Vec<_> = o
            .kernels
            .iter()
            .filter_map(|k| k.plan.as_ref().ok())
            .filter(|pl| pl.plan.template == "reduction")
            .collect();
        assert_eq!(rows.len(), 1, "{op} {c}: one row kernel");
        assert_eq!(rows[0].plan.algo_choice["reduce"], algo, "{op} {c}");
        if algo == "warp_per_row" {
            assert_eq!(
                rows[0].plan.tile,
                vec![4, 32],
                "{op} {c}: 4 rows of a warp each"
            );
        }
        let want_lanes = if c % 8 == 0 { 8 } else { 4 };
        assert_eq!(rows[0].plan.vectorize.width, want_lanes, "{op} {c}");
        let b: BTreeMap<String, i64> = [("T".to_string(), 5)].into();
        let ins = random_inputs(&p, &b, 11).expect("inputs");
        let want = evaluate(&p, &b, &ins).expect("reference evaluates");
        let got = run_on_host(
            &generated.emitted.source,
            &generated.emitted.manifest,
            &ins,
            &b,
            &HostOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{op} {c}: the host run fails: {e}"));
        for (name, w) in &want {
            let (g, w) = (got[name].to_f64(), w.to_f64());
            assert_eq!(g.len(), w.len());
            for (i, (g, w)) in g.iter().zip(&w).enumerate() {
                // fp16 outputs: a few units in the last place of the rounded result.
                assert!(
                    (g - w).abs() <= 4e-3 * w.abs().max(1.0),
                    "{op} {c} {name}[{i}]: got {g}, want {w}"
                );
            }
        }
    }
}
