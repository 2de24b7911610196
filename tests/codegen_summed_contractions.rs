//! A tile that sums two contractions (`plan::work::Gemm::second`): a ResNet block with a
//! projection shortcut ends in `relu(conv3x3(H) + b + conv1x1/2(X) + b')`, two convolutions of
//! different inputs over the same output. The SIMT template walks the 3×3 convolution's `K`
//! steps into one set of accumulators and the 1×1 projection's into another, and the epilogue
//! adds them as the graph does (exact: neither sum is reassociated with the other). Its
//! kernels are run on the CPU emulation against the reference for every split-K share and
//! several tiles, with tails in `M`, `N` and both `K`s; realistic ResNet-18 shapes compile
//! with NVRTC for sm_80 and sm_90a without spills. Needs g++ (and NVRTC for the compile).

mod common;

use dlc_egg::codegen::generate;
use dlc_egg::cost::{choose_plan, PlanChoice};
use dlc_egg::cuda::{compile, CompileOptions};
use dlc_egg::ir::region::Region;
use dlc_egg::optimize::Optimized;
use dlc_egg::plan::space::Knobs;
use dlc_egg::target::Arch;
use std::collections::BTreeMap;

use common::{projection_block, projection_block_of};

/// The one kernel of the block, which must sum both convolutions, and its plan.
fn summed_kernel(o: &Optimized) -> (&Region, PlanChoice) {
    let regions: Vec<&Region> = o.program.regions().collect();
    let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
    assert_eq!(regions.len(), 1, "one kernel: {covers:?}");
    let r = regions[0];
    let choice = choose_plan(r, &o.model).expect("a plan");
    let g = common::host::simt_gemm(&choice);
    assert!(g.second.is_some(), "the tile sums the projection: {g:?}");
    assert!(!g.tensor_cores, "two accumulators run on SIMT");
    (r, choice)
}

/// 36 output channels at 9×9 (`M` = 81, `N` = 36: tails in both), `K` = 324 for the 3×3
/// convolution and 20 for the projection (tails in the last step of each): split-K shares
/// from 1 to 16 (a split walks steps of both, or of one; the last of 16 walk none) and three
/// tiles, on the host
/// against the reference.
#[test]
fn the_projection_is_summed_in_the_tile_every_split_and_tile() {
    let text = projection_block(1, 36, 20, 9);
    let (p, o) = common::host::optimized_for(&text, Arch::Sm80);
    let (r, planned) = summed_kernel(&o);
    common::host::tile_variants_match(
        &p,
        &o,
        r,
        &planned,
        &planned,
        (
            &[[32, 32, 32], [32, 64, 32], [64, 64, 16]],
            &[1, 2, 3, 4, 8, 16],
        ),
        |t| (t[0] / 32, t[1] / 32),
        (7, 1e-4),
        &|text, at, splits| {
            assert!(text.contains("kt_main"), "{at}: two K loops");
            assert_eq!(text.contains("kt0"), splits > 1, "{at}: split");
        },
    );
}

/// The summed kernel against the two it replaces, ResNet-18's second stage at batch 1: one
/// kernel, predicted faster than the 3×3 convolution with its epilogue and the projection as
/// graphs of their own (what the cover paid before the tile summed both).
#[test]
fn summing_the_projection_saves_its_kernel_and_time() {
    let (n, c, cx, hw) = (1, 128, 64, 28);
    let (_, o) = common::host::optimized_for(&projection_block(n, c, cx, hw), Arch::Sm90);
    let (_, choice) = summed_kernel(&o);
    let Knobs::Contraction { splits, .. } = choice.best.knobs else {
        unreachable!("a contraction plan")
    };
    assert!(splits > 1, "at batch 1 the block's tiles split K: {splits}");
    let alone = |graph: serde_json::Value| {
        let (_, o) = common::host::optimized_for(&graph.to_string(), Arch::Sm90);
        assert_eq!(o.kernels.len(), 1, "{graph}");
        o.cost.time
    };
    let mut conv: serde_json::Value =
        serde_json::from_str(&projection_block(n, c, cx, hw)).expect("json");
    let mut down = conv.clone();
    // The 3×3 convolution with the closing add (of its own bias) and relu.
    conv["graph"][2]["inputs"] = serde_json::json!(["p", "p"]);
    conv["graph"].as_array_mut().expect("nodes").remove(1);
    conv["signature"]["inputs"] = serde_json::json!([{"tensor": "H"}, {"tensor": "w",
        "role": "param"}, {"tensor": "b", "role": "param"}]);
    for t in ["X", "wd", "bd"] {
        conv["tensors"].as_object_mut().expect("tensors").remove(t);
    }
    // The projection alone, its output the block's.
    down["graph"] = serde_json::json!([down["graph"][1].clone()]);
    down["graph"][0]["outputs"] = serde_json::json!(["Y"]);
    down["signature"]["inputs"] = serde_json::json!([{"tensor": "X"}, {"tensor": "wd",
        "role": "param"}, {"tensor": "bd", "role": "param"}]);
    for t in ["H", "w", "b"] {
        down["tensors"].as_object_mut().expect("tensors").remove(t);
    }
    let apart = alone(conv).0.saturating_add(alone(down).0);
    assert!(
        o.cost.time.0 < apart,
        "summed {:?} against {apart} apart",
        o.cost.time
    );
}

/// ResNet-18's three projection blocks (batch 1 and 8) through NVRTC for sm_80 and sm_90a:
/// the summed kernel compiles without spills under the plan's register cap.
#[test]
fn resnet_projection_blocks_compile_spill_free() {
    if !common::nvrtc_here() {
        return;
    }
    let mut failures = Vec::new();
    for (n, c, hw) in [(1, 128, 28), (1, 256, 14), (1, 512, 7), (8, 256, 14)] {
        for arch in [Arch::Sm80, Arch::Sm90] {
            let (_, o) = common::host::optimized_for(&projection_block(n, c, c / 2, hw), arch);
            let (_, choice) = summed_kernel(&o);
            eprintln!(
                "plan {:?} regs {}",
                choice.best.knobs, choice.best.resources.regs_per_thread
            );
            let generated = generate(&o).expect("generates");
            let src = &generated.emitted.source;
            let compiled = match compile(src, arch, &CompileOptions::default()) {
                Ok(c) => c,
                Err(e) => {
                    failures.push(format!(
                        "N={n} C={c} {hw}² {arch:?}: {}",
                        e.to_string().lines().next().unwrap_or("")
                    ));
                    continue;
                }
            };
            for k in &compiled.kernels {
                assert_eq!(k.spill_bytes, 0, "N={n} C={c} {hw}² {arch:?}: {k:?}");
                eprintln!("{arch:?} N={n} C={c} {hw}²: {k:?}");
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// In fp16 at 128 channels the 3×3 convolution on tensor cores reading the projection's output
/// (both biases, the add and the `relu` in its epilogue) beats the summed SIMT tile (the summed
/// tile has no `mma_sync` form): two kernels, predicted 6.7 µs against 7.2 µs. The growth that
/// absorbs the convolution's reduction while the projection waits also completes the
/// convolution first (`rules::fusion` `Grow::complete_product`); before, that kernel was not in
/// the e-graph and the cover was the summed tile. On the CPU emulation against the reference.
#[test]
fn in_fp16_the_tensor_core_convolution_reads_the_projection() {
    let (p, o) =
        common::host::optimized_for(&projection_block_of("fp16", 1, 128, 64, 14), Arch::Sm90);
    let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
    assert_eq!(o.kernels.len(), 2, "{covers:?}");
    let conv = common::host::kernel_covering(&o, "conv");
    for node in ["residual", "out_relu"] {
        assert!(
            o.kernels[conv].covers.iter().any(|c| c == node),
            "the convolution's kernel applies {node}: {covers:?}"
        );
    }
    // The projection's sum is a kernel of its own, which the convolution's reads (its bias is
    // added in the convolution's epilogue: both kernels cover part of `down`).
    assert_ne!(
        common::host::kernel_covering(&o, "down"),
        conv,
        "the projection is read, not recomputed: {covers:?}"
    );
    let g = generate(&o).expect("generates");
    assert!(
        g.emitted.source.contains("dlc_mma_m16n8k16_f16("),
        "tensor cores"
    );
    common::host::emulation_matches_reference_at_scale(&p, &g, &BTreeMap::new(), 3, 2e-2, "fp16");
}
