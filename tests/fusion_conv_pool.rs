//! The last convolution of a ResNet stage with the global average pool (issue 23): `P =
//! mean_hw relu(conv3x3(X) + b + S)` is one compute-at region (the convolution recomputed at
//! every window point of the pool, no `[N, C, H, W]` intermediate), and the plain-reduction
//! template runs it cooperatively: the threads of an output channel split its 7×7 window, each
//! window point's 3×3×C fold a loop in its thread, the partials combined by warp shuffles
//! (`codegen::templates::reduce`, `cost::roofline::compute_at_window`). Before, only the
//! thread-per-output nest could run that region (512 threads for ResNet-18's tail: priced
//! 1 712.6 µs), and the convolution, the pool and the classifier were three kernels.
//!
//! The price decides: at batch 1 and 64 channels the fused kernel beats the tiled convolution;
//! at 512 channels the tiled convolution split along `K` (split-K: its 49-row GEMM is 32 CTAs
//! of 32×64 unsplit, 512 split 16 ways) beats it, and at batch 4 the tiled convolution fills
//! the GPU unsplit: the pool stays a kernel of its own. The emitted CUDA (CPU emulation),
//! NVRTC for sm_80 and sm_90a and the native program are checked.

mod common;

use common::host::kernel_covering;
use dlc_egg::codegen::generate;
use dlc_egg::plan::space::Knobs;
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

/// ResNet-18's tail (512 channels at 7×7, batch 1): the split-K tiled convolution is priced
/// below the fused window on both architectures (H100: 22.1 µs for the three kernels).
#[test]
fn at_512_channels_the_split_convolution_pays_and_the_pool_is_its_own_kernel() {
    for arch in [Arch::Sm90, Arch::Sm80] {
        let (_, o) = common::host::optimized_for(&common::stage_tail(512, 7, 1), arch);
        let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
        let conv = kernel_covering(&o, "conv");
        assert_ne!(conv, kernel_covering(&o, "pool"), "{arch:?}: {covers:?}");
        assert!(
            matches!(choice(&o, conv).best.knobs, Knobs::Contraction { splits, .. } if splits > 1),
            "{arch:?}: {:?}",
            choice(&o, conv).best.knobs
        );
    }
}

#[test]
fn at_batch_four_the_tiled_convolution_pays_and_the_pool_is_its_own_kernel() {
    let (_, o) = common::host::optimized_for(&common::stage_tail(512, 7, 4), Arch::Sm90);
    let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
    assert_ne!(
        kernel_covering(&o, "conv"),
        kernel_covering(&o, "pool"),
        "196 GEMM rows fill the GPU: {covers:?}"
    );
    assert!(matches!(
        choice(&o, kernel_covering(&o, "conv")).best.knobs,
        Knobs::Contraction { .. }
    ));
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
        if chosen.best.plan.template != "compute_at" {
            continue;
        }
        let old = emit::kernel_of(r, &chosen, &target).expect("builds");
        for (threads_per_row, rows_per_block) in [(32, 4), (64, 2), (128, 1)] {
            let mut c = chosen.clone();
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
/// lanes, the batch symbolic), whose price keeps the thread-per-output nest.
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
