//! CPU execution of CUDA kernels (`codegen::host`, `dlc_emu.h`): hand-written kernels in the
//! emitted dialect (`tests/emu/*.cu`, which also compile under NVRTC against the device header:
//! `tests/emu/nvrtc_check.py`), run through `run_on_host` with hand-built manifests and checked
//! against plain Rust computations. No GPU or CUDA needed; g++ is.

#[path = "common/mod.rs"]
mod common;
mod emu;
#[path = "codegen_emu/harness.rs"]
mod harness;
#[path = "codegen_emu/memory.rs"]
mod memory;
#[path = "codegen_emu/numerics.rs"]
mod numerics;

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
    use common::host::emulation_matches_reference;
    use dlc_egg::codegen::generate;
    use dlc_egg::optimize::{optimize, OptimizeOptions};
    use dlc_egg::{ir::frontend, lower};
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
        // fp16 outputs: a few units in the last place of the rounded result.
        emulation_matches_reference(&p, &generated, &b, 11, 4e-3, &format!("{op} {c}"));
    }
}
