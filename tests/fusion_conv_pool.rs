//! The last convolution of a ResNet stage with the global average pool (issue 23): `P =
//! mean_hw relu(conv3x3(X) + b + S)` is one compute-at region (the convolution recomputed at
//! every window point of the pool, no `[N, C, H, W]` intermediate), and the plain-reduction
//! template runs it cooperatively: the threads of an output channel split its 7×7 window, each
//! window point's 3×3×C fold a loop in its thread, the partials combined by warp shuffles
//! (`codegen::templates::reduce`, `cost::roofline::compute_at_window`). Before, only the
//! thread-per-output nest could run that region (512 threads for ResNet-18's tail: priced
//! 1 712.6 µs), and the convolution, the pool and the classifier were three kernels.
//!
//! The price decides: at batch 1 and 64 channels the cooperative window beats the tiled
//! convolution; at 512 channels (batch 1 and 4) the pooled tile does — the same region as a
//! split-K SIMT tile whose rows are the window points, folded in its epilogue
//! (`plan::work::PoolTile`, `tests/codegen_pooled_tile.rs`). The emitted CUDA (CPU emulation),
//! NVRTC for sm_80 and sm_90a and the native program are checked.

mod common;

use common::host::kernel_covering;
use dlc_egg::codegen::generate;
use dlc_egg::plan::space::Knobs;
use dlc_egg::plan::work::Shape;
use dlc_egg::target::Arch;
use std::collections::BTreeMap;

/// The plan chosen once for kernel `k` of `o` (what code generation emits).
fn choice(o: &dlc_egg::optimize::Optimized, k: usize) -> dlc_egg::cost::PlanChoice {
    let name = &o.kernels[k].name;
    let planned = o.planned.iter().find(|p| p.name == *name);
    let planned = planned.unwrap_or_else(|| panic!("{name} is planned"));
    planned.choice.clone().expect("a plan")
}

#[test]
fn the_pool_runs_in_the_convolutions_kernel_at_batch_one() {
    let (c, arch) = (64, Arch::Sm90);
    let (_, o) = common::host::optimized_for(&common::stage_tail(c, 7, 1), arch);
    let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
    let k = kernel_covering(&o, "pool");
    assert_eq!(
        k,
        kernel_covering(&o, "conv"),
        "C = {c} {arch:?}: {covers:?}"
    );
    assert_eq!(o.kernels.len(), 2, "conv + pool, fc: {covers:?}");
    let plan = o.kernels[k].plan.as_ref().expect("planned");
    assert_eq!(plan.template, "compute_at", "C = {c} {arch:?}");
    let knobs = &choice(&o, k).best.knobs;
    assert!(
        matches!(knobs, Knobs::Reduction { .. }),
        "C = {c} {arch:?}: the cooperative window, not the thread-per-output nest: {knobs:?}"
    );
}

/// ResNet-18's tail (512 channels at 7×7, batch 1 and 4): the convolution, its residual, ReLU
/// and the global average pool are one kernel, the pooled tile (a split-K SIMT tile whose rows
/// are the 49 window points, folded by its epilogue), on both architectures (H100, batch 1:
/// 17.9 + 2.1 µs apart, 18.0 µs in the tile's kernel with the mean).
#[test]
fn at_512_channels_the_pooled_tile_runs_the_convolution_and_its_pool() {
    for (arch, n) in [(Arch::Sm90, 1), (Arch::Sm80, 1), (Arch::Sm90, 4)] {
        let (_, o) = common::host::optimized_for(&common::stage_tail(512, 7, n), arch);
        let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
        let conv = kernel_covering(&o, "conv");
        assert_eq!(
            conv,
            kernel_covering(&o, "pool"),
            "{arch:?} N={n}: {covers:?}"
        );
        let c = choice(&o, conv);
        assert!(
            matches!(&c.work.shape, Shape::Contraction(g) if g.pool.is_some()),
            "{arch:?} N={n}: {:?}",
            c.work.shape
        );
        assert!(
            matches!(c.best.knobs, Knobs::Contraction { splits, .. } if splits > 1),
            "{arch:?} N={n}: {:?}",
            c.best.knobs
        );
    }
}

#[test]
fn the_fused_kernel_computes_the_reference_on_the_cpu_emulation() {
    for (c, hw) in [(64, 7), (12, 5)] {
        let (p, o) = common::host::optimized_for(&common::stage_tail(c, hw, 1), Arch::Sm90);
        assert_eq!(
            kernel_covering(&o, "conv"),
            kernel_covering(&o, "pool"),
            "C = {c}"
        );
        let g = generate(&o).expect("generates");
        common::host::emulation_matches_reference(
            &p,
            &g,
            &BTreeMap::new(),
            7,
            1e-4,
            &format!("C = {c}, {hw}×{hw}"),
        );
    }
}

#[test]
fn the_stage_tail_runs_natively() {
    common::native::check_graph(&common::stage_tail(16, 7, 1), &[], "stage_tail").unwrap();
}

#[test]
fn the_fused_kernel_compiles_spill_free_within_its_register_estimate() {
    use dlc_egg::codegen::gpu::render;
    use dlc_egg::codegen::{emit, HEADER_NAME};
    use dlc_egg::cuda::{compile, CompileOptions};
    if !crate::common::nvrtc_here() {
        return;
    }
    for arch in [Arch::Sm80, Arch::Sm90] {
        let (_, o) = common::host::optimized_for(&common::stage_tail(512, 7, 1), arch);
        let k = kernel_covering(&o, "pool");
        let c = choice(&o, k);
        let r = o.program.regions().nth(k).expect("a region per kernel");
        let kernel = emit::kernel_of(r, &c, &o.model.target).expect("builds");
        let src = format!(
            "#include \"{HEADER_NAME}\"\n{}\n{}",
            dlc_egg::codegen::cexpr::PRELUDE,
            render::kernel(&kernel)
        );
        let compiled = compile(&src, arch, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{arch:?}: {e}"));
        let res = compiled.kernel(&kernel.name).expect("compiled");
        assert_eq!(res.spill_bytes, 0, "{arch:?}");
        let est = c.best.resources.regs_per_thread;
        eprintln!(
            "{arch:?}: ptxas {} registers, estimate {est}",
            res.registers
        );
        assert!(res.registers <= est, "{arch:?}: {} > {est}", res.registers);
    }
}

/// The cooperative window is the plain-reduction template's for every fold it takes: each
/// compute-at kernel of `text`, run with its window split over a warp, two warps and a block
/// (whatever its price chose), computes the reference on the CPU emulation at `binds`.
fn split_windows_match_the_reference(text: &str, binds: &[(&str, i64)], what: &str) {
    use dlc_egg::codegen::emit;
    use dlc_egg::codegen::host::{run_on_host, HostOptions};
    use dlc_egg::plan::space::resources;
    let (p, o) = common::host::optimized_for(text, Arch::Sm90);
    let g = generate(&o).expect("generates");
    let binds: BTreeMap<String, i64> = binds.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let ins = dlc_egg::rules::testing::random_inputs(&p, &binds, 5).expect("inputs");
    let want = dlc_egg::eval::evaluate(&p, &binds, &ins).expect("reference");
    let target = Arch::Sm90.target();
    let mut split = 0;
    for (k, r) in o.program.regions().enumerate() {
        let chosen = choice(&o, k);
        // The region's compute-at work as the reduce template runs it (the plan may be the
        // pooled tile of the same region).
        let raw = dlc_egg::cost::work::analyze(r, &o.model).expect("analyzes");
        if !matches!(raw.shape, Shape::ComputeAt(_)) {
            continue;
        }
        let e = dlc_egg::codegen::templates::applicability::emits(r, &raw, false);
        let nest = dlc_egg::codegen::templates::applicability::as_emitted(raw, e);
        let old = emit::kernel_of(r, &chosen, &target).expect("builds");
        for (threads_per_row, rows_per_block) in [(32, 4), (64, 2), (128, 1)] {
            let mut c = chosen.clone();
            c.work = nest.clone();
            c.best.knobs = Knobs::Reduction {
                threads_per_row,
                rows_per_block,
                vec_bytes: 4,
            };
            c.best.resources = resources(&c.best.knobs, &c.work, &target);
            let new = emit::kernel_of(r, &c, &target).expect("the reduce template builds it");
            assert_eq!(new.template, "reduce");
            let (source, manifest) = common::host::swap_kernel(&g, &old, &new);
            let got = run_on_host(&source, &manifest, &ins, &binds, &HostOptions::default())
                .unwrap_or_else(|e| panic!("{what} {threads_per_row}×{rows_per_block}: {e}"));
            let case = format!(
                "{what}: window over {threads_per_row} threads, {rows_per_block} per block"
            );
            common::host::assert_outputs_within(&got, &want, 1e-4, &case);
            split += 1;
        }
    }
    assert!(split > 0, "{what}: a compute-at kernel");
}

/// The `max` pool of `examples/conv_relu_pool.json` (2×2: four window points for a warp's 32
/// lanes, the batch symbolic), whose price chooses the pooled tile.
#[test]
fn a_max_pool_window_split_over_threads_computes_the_reference() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/conv_relu_pool.json");
    let text = std::fs::read_to_string(path).expect("the example");
    split_windows_match_the_reference(&text, &[("N", 2)], "conv_relu_pool");
}

/// A 7×7 global pool (49 window points: two rounds of a warp, one of two warps) over a
/// 24-channel convolution with a residual.
#[test]
fn a_global_pool_window_split_over_threads_computes_the_reference() {
    split_windows_match_the_reference(&common::stage_tail(24, 7, 1), &[], "stage_tail");
}
