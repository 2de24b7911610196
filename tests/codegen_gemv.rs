//! The GEMV template for small-`M` contractions (`codegen::templates::gemv`, issue 23):
//! `relu(A·B + bias)` with `M` from 1 to 8, `K` and `N` leaving tails in every block shape,
//! `B` as `[K, N]` and `[N, K]`, fp32, fp16 and bf16. The planner must choose the GEMV plan;
//! its kernel, and the kernel of every other GEMV block shape of the plan space, run on the
//! CPU emulation (`codegen::host`) against the reference evaluator. The ResNet-18 FC shape
//! compiles with NVRTC for sm_80 and sm_90a without spills and within the plan's registers.
//! Needs g++ and NVRTC (`DLC_SKIP_NVRTC=1` skips the NVRTC test), no GPU.

mod common;

use dlc_egg::codegen::gpu::{render, Kernel};
use dlc_egg::codegen::host::{run_on_host, HostOptions};
use dlc_egg::codegen::{emit, generate, HEADER_NAME};
use dlc_egg::cost::roofline::estimate;
use dlc_egg::cost::{choose_plan, PlanChoice};
use dlc_egg::cuda::{compile, CompileOptions};
use dlc_egg::eval::evaluate;
use dlc_egg::ir::region::program::Step;
use dlc_egg::ir::region::Region;
use dlc_egg::ir::tiny::Program;
use dlc_egg::optimize::{optimize, OptimizeOptions, Optimized};
use dlc_egg::plan::space::{candidates, resources, Algo, GemvBlock, Knobs, GEMV_BLOCKS};
use dlc_egg::rules::testing::random_inputs;
use dlc_egg::target::Arch;
use dlc_egg::{ir::frontend, lower};
use std::collections::BTreeMap;

/// `Y[M, N] = relu(A[M, K] · B + bias[N])`, `B` as `[N, K]` when `trans_b`.
fn gemm_graph(dt: &str, [m, k, n]: [i64; 3], trans_b: bool) -> String {
    let [m, k, n] = [m, k, n].map(|d| d.to_string());
    common::gemm_bias_relu_t(dt, [&m, &k, &n], 1, [false, trans_b])
}

fn lowered(text: &str) -> Program {
    let g = frontend::load_str(text, "test.json").expect("loads");
    lower::lower(&g).expect("lowers")
}

fn optimized(text: &str, arch: Arch) -> (Program, Optimized) {
    let p = lowered(text);
    let o = optimize(
        &p,
        &OptimizeOptions {
            target: arch.target(),
            ..OptimizeOptions::default()
        },
    )
    .expect("optimizes");
    (p, o)
}

/// The one region of `o` planned on the GEMV template, with its plan.
fn gemv_region(o: &Optimized) -> (&Region, PlanChoice) {
    let found: Vec<(&Region, PlanChoice)> = o
        .program
        .regions()
        .filter_map(|r| choose_plan(r, &o.model).ok().map(|c| (r, c)))
        .filter(|(_, c)| {
            matches!(
                c.best.knobs,
                Knobs::Contraction {
                    algo: Algo::Gemv,
                    ..
                }
            )
        })
        .collect();
    let plans: Vec<String> = o
        .program
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Region(r) => choose_plan(r, &o.model).ok(),
            _ => None,
        })
        .map(|c| format!("{} {}", c.best.plan.summary(), c.best.time))
        .collect();
    assert_eq!(found.len(), 1, "one GEMV kernel among {plans:?}");
    found.into_iter().next().expect("one")
}

/// `choice` with the GEMV block `block` (and that block's resources).
fn with_block(choice: &PlanChoice, block: GemvBlock, arch: Arch) -> PlanChoice {
    let mut c = choice.clone();
    let (bm, _) = GemvBlock::of(&c.best.knobs).expect("a GEMV plan");
    c.best.knobs = block.knobs(bm, c.best.knobs.vec_bytes());
    c.best.resources = resources(&c.best.knobs, &c.work, &arch.target());
    c
}

/// Relative error within `rtol` of the larger of |want| and a tenth of the output's scale.
use common::host::assert_close_at_scale as assert_close;

/// Optimizes the GEMM, checks its plan is the GEMV one, and runs the program with the kernel of
/// every GEMV block shape on the host against the reference evaluator.
fn check(dt: &str, mkn: [i64; 3], trans_b: bool, rtol: f64) {
    let (p, o) = optimized(&gemm_graph(dt, mkn, trans_b), Arch::Sm80);
    let (r, choice) = gemv_region(&o);
    let generated = generate(&o).expect("generates");
    let planned = emit::kernel_of(r, &choice, &o.model.target).expect("the planned kernel builds");
    assert_eq!(planned.template, "gemv");
    assert_eq!(planned.launch.block[0], choice.best.resources.threads);
    let b = BTreeMap::new();
    let ins = random_inputs(&p, &b, 11).expect("inputs");
    let want = evaluate(&p, &b, &ins).expect("reference evaluates");
    for block in GEMV_BLOCKS {
        let k: Kernel =
            emit::kernel_of(r, &with_block(&choice, block, Arch::Sm80), &o.model.target)
                .unwrap_or_else(|e| panic!("{block:?}: {e}"));
        let (source, manifest) = common::host::swap_kernel(&generated, &planned, &k);
        let got = run_on_host(&source, &manifest, &ins, &b, &HostOptions::default())
            .unwrap_or_else(|e| panic!("{block:?}: the host run fails: {e}"));
        for (name, w) in &want {
            let g = got.get(name).expect("output");
            let what = format!("{dt} {mkn:?} trans_b {trans_b} block {block:?}: {name}");
            assert_close(&what, &g.to_f64(), &w.to_f64(), rtol);
        }
    }
}

#[test]
fn fp32_batch_one_fc_with_tails() {
    check("fp32", [1, 45, 29], true, 1e-5);
}

#[test]
fn fp32_three_rows_k_major_weight() {
    check("fp32", [3, 300, 17], false, 1e-5);
}

#[test]
fn fp16_eight_rows_long_k() {
    check("fp16", [8, 1000, 9], true, 1e-2);
}

#[test]
fn bf16_five_rows_n_major_weight() {
    check("bf16", [5, 77, 40], false, 2e-2);
}

/// Wider than [`check`]: the GEMV plan beats every tiled plan on the ResNet-18 FC shape, with
/// the weight as `[N, K]` (PyTorch's `Linear`) and as `[K, N]`.
#[test]
fn resnet_fc_is_priced_below_the_tile() {
    for arch in [Arch::Sm80, Arch::Sm90] {
        for trans_b in [true, false] {
            let (_, o) = optimized(&gemm_graph("fp32", [1, 512, 1000], trans_b), arch);
            let (_, choice) = gemv_region(&o);
            // Every tiled point of the plan space, priced by the same roofline.
            let tiled = candidates(&choice.work, &arch.target())
                .into_iter()
                .filter(|c| c.verdict.is_ok())
                .filter(|c| {
                    !matches!(
                        c.knobs,
                        Knobs::Contraction {
                            algo: Algo::Gemv,
                            ..
                        }
                    )
                })
                .map(|c| {
                    estimate(&choice.work, &c.knobs, &c.resources, &arch.target()).time_s * 1e6
                })
                .fold(f64::INFINITY, f64::min);
            assert!(
                choice.best.time.micros() < tiled,
                "{arch:?} trans_b {trans_b}: GEMV {} vs the tile's {tiled} us",
                choice.best.time
            );
            assert!(
                choice.best.time.micros() < 5.0,
                "{arch:?}: 2 MB of weights priced {}",
                choice.best.time
            );
        }
    }
}

/// Every point of `choice`'s plan space that passes its checks, with its price in µs.
fn priced(choice: &PlanChoice, arch: Arch) -> Vec<(Knobs, f64)> {
    candidates(&choice.work, &arch.target())
        .into_iter()
        .filter(|c| c.verdict.is_ok())
        .map(|c| {
            let t = estimate(&choice.work, &c.knobs, &c.resources, &arch.target()).time_s;
            (c.knobs, t * 1e6)
        })
        .collect()
}

/// The cheapest of `points` whose GEMV block satisfies `keep`.
fn cheapest(points: &[(Knobs, f64)], keep: impl Fn(GemvBlock) -> bool) -> f64 {
    points
        .iter()
        .filter(|(k, _)| GemvBlock::of(k).is_some_and(|(_, b)| keep(b)))
        .map(|(_, t)| *t)
        .fold(f64::INFINITY, f64::min)
}

/// The weight's layout decides the lanes, by the prices: a `[K, N]` weight (`N` contiguous)
/// read by warps walking `K` costs a sector per lane, so the plan spreads lanes over `N`; a
/// `[N, K]` weight keeps them on `K`. The chosen plan is the cheapest point of the space, the
/// other orientation is priced higher, and `kernels.cu` holds exactly the chosen block's kernel
/// (its lanes' column mapping and its threads).
#[test]
fn weight_layout_picks_the_coalesced_lanes() {
    for arch in [Arch::Sm80, Arch::Sm90] {
        for dt in ["fp32", "fp16"] {
            let mut k_walk = [0.0; 2];
            for trans_b in [false, true] {
                let what = format!("{arch:?} {dt} trans_b {trans_b}");
                let (_, o) = optimized(&gemm_graph(dt, [1, 512, 1000], trans_b), arch);
                let (r, choice) = gemv_region(&o);
                let (_, block) = GemvBlock::of(&choice.best.knobs).expect("a GEMV block");
                let all = priced(&choice, arch);
                let best = all.iter().map(|(_, t)| *t).fold(f64::INFINITY, f64::min);
                let mine = estimate(
                    &choice.work,
                    &choice.best.knobs,
                    &choice.best.resources,
                    &arch.target(),
                )
                .time_s
                    * 1e6;
                assert!(
                    (mine - best).abs() <= 1e-9 * best,
                    "{what}: chose {block:?} at {mine} us, the space's cheapest is {best} us"
                );
                let along_k = cheapest(&all, |b| b.lanes_n == 1);
                let along_n = cheapest(&all, |b| b.lanes_n >= 8);
                k_walk[usize::from(trans_b)] = along_k;
                if trans_b {
                    assert_eq!(block.lanes_n, 1, "{what}: {block:?}");
                    assert!(along_n > along_k, "{what}: {along_n} vs {along_k} us");
                } else {
                    assert!(block.lanes_n >= 8, "{what}: {block:?}");
                    assert!(along_k > along_n, "{what}: {along_k} vs {along_n} us");
                }
                let planned = emit::kernel_of(r, &choice, &o.model.target).expect("builds");
                let text = render::kernel(&planned);
                let generated = generate(&o).expect("generates");
                assert!(
                    generated.emitted.source.contains(&text),
                    "{what}: kernels.cu holds the chosen kernel"
                );
                assert_eq!(
                    u64::from(planned.launch.block[0]),
                    32 * block.warps_n * block.slices,
                    "{what}"
                );
                let col = match block.lanes_n {
                    1 => format!("col = warp % {};", block.warps_n),
                    32 => format!("col = warp % {} * 32 + lane;", block.warps_n),
                    l => format!("col = warp % {} * {l} + lane % {l};", block.warps_n),
                };
                assert!(text.contains(&col), "{what}: `{col}` in\n{text}");
            }
            // The same warps walking `K` pay for the `[K, N]` weight's strided sectors.
            assert!(
                k_walk[0] > 1.5 * k_walk[1],
                "{arch:?} {dt}: K-walk over [K, N] {} us vs [N, K] {} us",
                k_walk[0],
                k_walk[1]
            );
        }
    }
}

#[test]
fn gemv_kernels_compile_spill_free_within_the_estimate() {
    if !crate::common::nvrtc_here() {
        return;
    }
    for (dt, m) in [("fp32", 1), ("fp16", 8), ("bf16", 3)] {
        for arch in [Arch::Sm80, Arch::Sm90] {
            let (_, o) = optimized(&gemm_graph(dt, [m, 512, 1000], true), arch);
            let (r, choice) = gemv_region(&o);
            for block in GEMV_BLOCKS {
                let c = with_block(&choice, block, arch);
                let k = emit::kernel_of(r, &c, &o.model.target).expect("builds");
                let src = format!(
                    "#include \"{HEADER_NAME}\"\n{}\n{}",
                    dlc_egg::codegen::cexpr::PRELUDE,
                    render::kernel(&k)
                );
                let what = format!("{dt} M={m} {arch:?} {block:?}");
                let compiled = compile(&src, arch, &CompileOptions::default())
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let res = compiled.kernel(&k.name).expect("compiled");
                assert_eq!(res.spill_bytes, 0, "{what}");
                let est = c.best.resources.regs_per_thread;
                eprintln!("{what}: ptxas {} registers, estimate {est}", res.registers);
                assert!(res.registers <= est, "{what}: {} > {est}", res.registers);
            }
        }
    }
}
