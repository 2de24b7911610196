//! The SM80 tensor-core contraction template (`contraction_mma`) run on the CPU: small graphs
//! (GEMMs in fp16 and bf16, with and without transposed operands, tile multiples, tails and
//! symbolic sizes, a padded strided conv) are optimized, their tensor-core kernel is rebuilt
//! under every pipeline the `mma_sync` plan space offers (`cp.async` 2, 3 and 4 stages,
//! synchronous; 2×2 and 4×2 warps; register-staged tiles held across a step or stored as
//! loaded), symbolic sizes with and without ShapeSet specialization, emitted, compiled with `g++` against the host emulation
//! (`codegen::host`, which runs `ldmatrix`, `mma.sync` and `cp.async` per the PTX ISA) and
//! compared with the reference evaluator. Needs g++, no GPU.

mod common;

use dlc_egg::codegen::gpu::verify::{verify, GpuIrError};
use dlc_egg::codegen::gpu::{render, Kernel, Stmt};
use dlc_egg::codegen::host::{run_on_host, HostOptions};
use dlc_egg::codegen::{emit, generate};
use dlc_egg::cost::{choose_plan, PlanChoice};
use dlc_egg::eval::evaluate;
use dlc_egg::ir::tiny::Program;
use dlc_egg::optimize::{optimize, OptimizeOptions, Optimized};
use dlc_egg::plan::space::{Algo, Knobs};
use dlc_egg::rules::testing::random_inputs;
use dlc_egg::shapes::specialize::graph_symbols;
use dlc_egg::shapes::{ShapeCluster, Specialization};
use dlc_egg::{ir::frontend, lower};
use std::collections::BTreeMap;

/// A pipeline variant: tile, warps, stages, `cp.async`.
#[derive(Clone, Copy, Debug)]
struct Variant {
    tile: [u64; 3],
    warps: [u64; 2],
    stages: u32,
    async_: bool,
}

const fn var(tile: [u64; 3], warps: [u64; 2], stages: u32, async_: bool) -> Variant {
    Variant {
        tile,
        warps,
        stages,
        async_,
    }
}

/// The pipelines of the `mma_sync` plan space on its smallest tile, and larger tiles (the
/// 128×128×64 ones with 128-byte `K` rows and 256-byte outer rows: the full 8-row XOR
/// swizzle; a register-staged operand of theirs is stored as loaded, 4 runs at a time).
const VARIANTS: [Variant; 7] = [
    var([64, 64, 32], [2, 2], 2, true),
    var([64, 64, 32], [4, 2], 3, true),
    var([64, 64, 32], [2, 2], 2, false),
    var([128, 64, 32], [4, 2], 3, true),
    var([128, 128, 64], [4, 2], 2, true),
    var([64, 64, 32], [2, 2], 4, true),
    var([128, 128, 64], [2, 2], 2, false),
];

fn gemm_graph(dt: &str, mkn: [&str; 3], trans_a: bool, trans_b: bool) -> String {
    common::gemm_bias_relu_t(dt, mkn, 16, [trans_a, trans_b])
}

/// A 3×3, stride 2, pad 1 conv with bias and SiLU (the structure of
/// `examples/conv3x3_s2_p1_silu.json`, smaller).
const CONV: &str = r#"{
  "signature": {
    "inputs": [{"tensor": "X", "role": "data"}, {"tensor": "W", "role": "param"},
               {"tensor": "bias", "role": "param"}],
    "outputs": [{"tensor": "Y"}]
  },
  "symbols": {"N": 1},
  "tensors": {
    "X": {"dtype": "fp16", "shape": ["N", 16, 9, 9]},
    "W": {"dtype": "fp16", "shape": [24, 16, 3, 3]},
    "bias": {"dtype": "fp16", "shape": [24]},
    "Y": {"dtype": "fp16", "shape": ["N", 24, 5, 5]}
  },
  "graph": [
    {"op": "Conv", "name": "conv", "inputs": ["X", "W", "bias"], "outputs": ["C"],
     "attrs": {"stride": 2, "pad": 1, "acc_dtype": "fp32"}},
    {"op": "Elementwise", "name": "silu", "inputs": ["C"], "outputs": ["Y"], "attrs": {"fn": "silu"}}
  ]
}"#;

/// The SM80 target: on sm90 the GEMMs the SM90 template accepts are planned on `wgmma`
/// (tests/codegen_sm90.rs); this file tests the `mma_sync` template.
fn sm80() -> OptimizeOptions {
    OptimizeOptions {
        target: dlc_egg::target::Arch::Sm80.target(),
        ..OptimizeOptions::default()
    }
}

fn lowered(text: &str) -> Program {
    let g = frontend::load_str(text, "test.json").expect("loads");
    lower::lower(&g).expect("lowers")
}

/// The optimized program's regions whose chosen plan is `mma_sync`.
fn mma_regions(o: &Optimized) -> Vec<&dlc_egg::ir::region::Region> {
    common::host::contraction_regions(o, &[Algo::MmaSync])
}

/// `choice` with the tile, warps, stages and pipeline of `v`, and `splits` CTAs per tile when
/// given (else the plan's).
fn with_variant(choice: &PlanChoice, v: Variant, splits: Option<u64>) -> PlanChoice {
    let mut c = choice.clone();
    let Knobs::Contraction {
        bm,
        bn,
        bk,
        stages,
        warps_m,
        warps_n,
        async_,
        splits: s,
        ..
    } = &mut c.best.knobs
    else {
        panic!("not a contraction plan")
    };
    [*bm, *bn, *bk] = v.tile;
    [*warps_m, *warps_n] = v.warps;
    *stages = v.stages;
    *async_ = v.async_;
    if let Some(splits) = splits {
        *s = splits;
    }
    c
}

/// The tensor-core kernel of `r` under `v` (verified by `kernel_of`).
fn kernel_for(o: &Optimized, r: &dlc_egg::ir::region::Region, v: Variant) -> Kernel {
    let choice = with_variant(&choose_plan(r, &o.model).expect("a plan"), v, None);
    let k = emit::kernel_of(r, &choice, &o.model.target).expect("the kernel builds and verifies");
    assert_eq!(k.template, "contraction_mma", "{v:?}");
    k
}

/// Relative error within `rtol` (against the larger of |want| and a tenth of the output's
/// largest magnitude, so that cancellation near 0 is measured on the output's scale).
use common::host::assert_close_at_scale as assert_close;

/// Optimizes `text`, and for every variant runs the program with its tensor-core kernel built
/// under that variant on the host, against the reference evaluator; returns the number of
/// tensor-core kernels and the kernels' `cp.async` use per variant.
fn check(text: &str, bindings: &[(&str, i64)], variants: &[Variant], rtol: f64) -> Vec<bool> {
    let p = lowered(text);
    let o = optimize(&p, &sm80()).expect("optimizes");
    let b: BTreeMap<String, i64> = bindings.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    check_optimized(&p, &o, &b, variants, rtol)
}

/// [`check`] on program `p` optimized as `o`, run under binding `b`.
fn check_optimized(
    p: &Program,
    o: &Optimized,
    b: &BTreeMap<String, i64>,
    variants: &[Variant],
    rtol: f64,
) -> Vec<bool> {
    let regions = mma_regions(o);
    assert_eq!(regions.len(), 1, "one tensor-core contraction kernel");
    let r = regions[0];
    let generated = generate(o).expect("generates");
    let choice = choose_plan(r, &o.model).expect("plan");
    let plan_kernel =
        emit::kernel_of(r, &choice, &o.model.target).expect("the planned kernel builds");
    assert_eq!(plan_kernel.template, "contraction_mma");
    // Unpadded, swizzled tiles of 2-byte operands: exactly the plan space's estimate.
    assert_eq!(
        plan_kernel.launch.dyn_smem_bytes, choice.best.resources.smem_bytes,
        "shared memory of the planned kernel"
    );
    let ins = random_inputs(p, b, 7).expect("inputs");
    let want = evaluate(p, b, &ins).expect("reference evaluates");
    let mut uses_async = Vec::new();
    for v in variants {
        let k = kernel_for(o, r, *v);
        let new = render::kernel(&k);
        if std::env::var_os("DLC_MMA_DUMP").is_some() {
            eprintln!("{new}");
        }
        let (source, manifest) = common::host::swap_kernel(&generated, &plan_kernel, &k);
        uses_async.push(new.contains("dlc_cp_async_16("));
        let got = run_on_host(&source, &manifest, &ins, b, &HostOptions::default())
            .unwrap_or_else(|e| panic!("{v:?}: the host run fails: {e}\n{new}"));
        for (name, w) in &want {
            let g = got
                .get(name)
                .unwrap_or_else(|| panic!("output {name} missing"));
            assert_close(&format!("{name} {v:?}"), &g.to_f64(), &w.to_f64(), rtol);
        }
    }
    uses_async
}

#[test]
fn fp16_gemm_tile_multiple_every_pipeline() {
    let uses = check(
        &gemm_graph("fp16", ["128", "64", "64"], false, false),
        &[],
        &VARIANTS,
        1e-2,
    );
    // Plain row-major fp16 reads with 8-multiple rows: both operands take cp.async when the
    // plan is asynchronous, none when it is synchronous.
    assert_eq!(uses, vec![true, true, false, true, true, true, false]);
}

#[test]
fn fp16_gemm_with_tails() {
    check(
        &gemm_graph("fp16", ["96", "72", "80"], false, false),
        &[],
        &VARIANTS[..3],
        1e-2,
    );
}

#[test]
fn bf16_gemm_with_tails_and_transposed_operands() {
    // K = 40: A (transposed: [K, M], M = 33) and B ([N, K], N = 17) rows are not 16-byte
    // multiples along M; B is, along K.
    let g = gemm_graph("bf16", ["33", "40", "17"], true, true);
    let uses = check(&g, &[], &[VARIANTS[0], VARIANTS[1], VARIANTS[4]], 2e-2);
    assert_eq!(uses, vec![true, true, true], "B[N, K] takes cp.async");
    check(
        &gemm_graph("bf16", ["96", "72", "80"], false, true),
        &[],
        &VARIANTS[..1],
        2e-2,
    );
}

#[test]
fn fp16_gemm_symbolic_sizes_tested_at_run_time() {
    let g = gemm_graph("fp16", ["M", "K", "N"], false, false);
    // Symbolic row lengths are not provably 16-byte multiples: the kernel tests them at run
    // time. K = 24 passes A's test (cp.async), N = 17 fails B's (loaded element by element)
    // and the staged epilogue's (its chunks stored element by element, the row's tail too).
    let uses = check(&g, &[("M", 33), ("K", 24), ("N", 17)], &VARIANTS[..1], 1e-2);
    assert_eq!(
        uses,
        vec![true],
        "the cp.async path is emitted under its test"
    );
    // Every test passes: both operands by cp.async, 16-byte epilogue chunks (tails in M, K).
    check(&g, &[("M", 33), ("K", 40), ("N", 24)], &VARIANTS[..1], 1e-2);
    check(&g, &[("M", 70), ("K", 9), ("N", 40)], &VARIANTS[1..2], 1e-2);
    // 128×128×64 tiles: A (K = 70) fails its test and is stored as loaded, 4 runs at a time;
    // the synchronous plan stages both operands through registers; and 4 stages.
    let uses = check(
        &g,
        &[("M", 150), ("K", 70), ("N", 136)],
        &[VARIANTS[4], VARIANTS[6], VARIANTS[5]],
        1e-2,
    );
    assert_eq!(uses, vec![true, false, true]);
}

/// The symbolic GEMM specialized to the ShapeSet cluster of `binding` (`T = d*T_d`), optimized
/// and run under the specialized binding: `div_exact` proves the rows 16-byte aligned, so both
/// operands take `cp.async`, tails (in `M`, `N` and `K`) zero-filled.
fn check_specialized(
    dt: &str,
    binding: &[(&str, i64)],
    variants: &[Variant],
    rtol: f64,
) -> Vec<bool> {
    let g = frontend::load_str(&gemm_graph(dt, ["M", "K", "N"], false, false), "test.json")
        .expect("loads");
    let b: BTreeMap<String, i64> = binding.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let cluster = ShapeCluster::of(&b).expect("a cluster");
    let sp = Specialization::new(&cluster, &graph_symbols(&g));
    let bound = sp.bind(&b).expect("binds");
    let p = lower::lower(&sp.apply(&g)).expect("lowers");
    let opts = OptimizeOptions {
        pricing: bound.clone(),
        ..sm80()
    };
    let o = optimize(&p, &opts).expect("optimizes");
    check_optimized(&p, &o, &bound, variants, rtol)
}

#[test]
fn shape_set_specialized_gemm_takes_cp_async() {
    let v = [VARIANTS[0], VARIANTS[1], VARIANTS[5], VARIANTS[4]];
    let uses = check_specialized("fp16", &[("M", 72), ("K", 40), ("N", 48)], &v, 1e-2);
    assert_eq!(
        uses,
        vec![true; 4],
        "8*T_8 rows are provably 16-byte aligned"
    );
    let uses = check_specialized("bf16", &[("M", 40), ("K", 88), ("N", 24)], &v[..3], 2e-2);
    assert_eq!(uses, vec![true; 3]);
}

#[test]
fn padded_strided_conv_through_registers() {
    let uses = check(CONV, &[("N", 2)], &VARIANTS[..3], 1e-2);
    // The image's guarded gather goes through registers; the filter's contiguous
    // Ci·Kh·Kw = 144 run is copied by cp.async when the plan is asynchronous.
    assert_eq!(uses, vec![true, true, false]);
}

fn strip(body: &[Stmt], drop: &dyn Fn(&Stmt) -> bool) -> Vec<Stmt> {
    body.iter()
        .filter(|s| !drop(s))
        .map(|s| match s {
            Stmt::For {
                var,
                start,
                end,
                step,
                unroll,
                div,
                body,
            } => Stmt::For {
                var: var.clone(),
                start: start.clone(),
                end: end.clone(),
                step: step.clone(),
                unroll: *unroll,
                div: *div,
                body: strip(body, drop),
            },
            Stmt::If {
                cond,
                div,
                then,
                otherwise,
            } => Stmt::If {
                cond: cond.clone(),
                div: *div,
                then: strip(then, drop),
                otherwise: strip(otherwise, drop),
            },
            Stmt::Block(b) => Stmt::Block(strip(b, drop)),
            other => other.clone(),
        })
        .collect()
}

#[test]
fn verifier_rejects_the_skeleton_without_its_wait_or_barrier() {
    let p = lowered(&gemm_graph("fp16", ["64", "64", "64"], false, false));
    let o = optimize(&p, &sm80()).expect("optimizes");
    let r = mma_regions(&o)[0];
    let target = &o.model.target;
    let k = kernel_for(&o, r, VARIANTS[0]);
    assert!(verify(&k, target).is_ok());
    let mut no_wait = k.clone();
    no_wait.body = strip(&k.body, &|s| matches!(s, Stmt::Wait { .. }));
    assert!(matches!(
        verify(&no_wait, target),
        Err(GpuIrError::TokenNotReady { ref token, .. }) if token == "tile"
    ));
    // The synchronous skeleton: register-staged tiles are published by the barrier.
    let k = kernel_for(&o, r, VARIANTS[2]);
    assert!(verify(&k, target).is_ok());
    let mut no_barrier = k.clone();
    no_barrier.body = strip(&k.body, &|s| matches!(s, Stmt::Barrier));
    assert!(matches!(
        verify(&no_barrier, target),
        Err(GpuIrError::TokenNotReady { ref token, .. }) if token == "barrier"
    ));
}

/// Split-K on the tensor-core template (a fp16 `40×1000×72` GEMM: one or two tiles for 108
/// SMs, `K` tails in the last step): 2 to 16 CTAs per tile under async and synchronous
/// pipelines, each split's partial tile summed back in split order by the last CTA, on the
/// host against the reference.
#[test]
fn fp16_split_k_every_split_and_pipeline() {
    let p = lowered(&gemm_graph("fp16", ["40", "1000", "72"], false, true));
    let o = optimize(&p, &sm80()).expect("optimizes");
    let regions = mma_regions(&o);
    assert_eq!(regions.len(), 1, "one tensor-core contraction kernel");
    let r = regions[0];
    let generated = generate(&o).expect("generates");
    let choice = choose_plan(r, &o.model).expect("plan");
    let planned = emit::kernel_of(r, &choice, &o.model.target).expect("the plan emits");
    let b = BTreeMap::new();
    let ins = random_inputs(&p, &b, 7).expect("inputs");
    let want = evaluate(&p, &b, &ins).expect("reference evaluates");
    for v in [VARIANTS[0], VARIANTS[1], VARIANTS[2], VARIANTS[4]] {
        for splits in [1, 2, 4, 8, 16] {
            let c = with_variant(&choice, v, Some(splits));
            let k = emit::kernel_of(r, &c, &o.model.target).expect("the kernel builds");
            assert_eq!(k.launch.grid[2].0.as_int(), Some(splits as i64), "{v:?}");
            let at = format!("{v:?} split {splits}");
            common::host::variant_matches(&generated, &planned, &k, &ins, &b, &want, 1e-2, &at);
        }
    }
}
