//! The emitted CUDA run on the CPU emulation (`codegen::host::run_on_host`) and checked against the
//! reference evaluator on seeded random inputs.

use dlc_egg::codegen::host::{run_on_host, HostOptions};
use dlc_egg::codegen::Generated;
use dlc_egg::eval::evaluate;
use dlc_egg::ir::tiny::Program;
use dlc_egg::rules::testing::random_inputs;
use std::collections::BTreeMap;

/// Runs `generated` (the kernels of `p`) on the CPU emulation with the inputs `random_inputs` draws
/// from `seed` at `bindings`, and asserts every output within `|got − want| ≤ rel·max(|want|, 1)` of
/// the reference evaluator; `what` names the case in failure messages.
pub fn emulation_matches_reference(
    p: &Program,
    generated: &Generated,
    bindings: &BTreeMap<String, i64>,
    seed: u64,
    rel: f64,
    what: &str,
) {
    let (got, want) = emulated_and_reference(p, generated, bindings, seed, what);
    assert_outputs_within(&got, &want, rel, what);
}

/// [`emulation_matches_reference`] within `|got − want| ≤ rel·max(|want|, rms(want))`: for
/// programs whose kernels sum in another order than the reference (split-K: the partial sums of
/// a tile's `K` shares added in split order), where an element that cancels to near zero
/// carries the rounding of sums at the output's scale.
pub fn emulation_matches_reference_at_scale(
    p: &Program,
    generated: &Generated,
    bindings: &BTreeMap<String, i64>,
    seed: u64,
    rel: f64,
    what: &str,
) {
    let (got, want) = emulated_and_reference(p, generated, bindings, seed, what);
    for (name, w) in &want {
        let (g, w) = (got[name].to_f64(), w.to_f64());
        assert_eq!(g.len(), w.len(), "{what} {name}: element count");
        let rms = (w.iter().map(|v| v * v).sum::<f64>() / w.len().max(1) as f64).sqrt();
        for (i, (g, w)) in g.iter().zip(&w).enumerate() {
            assert!(
                (g - w).abs() <= rel * w.abs().max(rms),
                "{what} {name}[{i}]: got {g}, want {w} (rms {rms})"
            );
        }
    }
}

/// The CPU emulation's outputs of `generated` and the reference evaluator's, on the inputs
/// `random_inputs` draws from `seed` at `bindings`.
fn emulated_and_reference(
    p: &Program,
    generated: &Generated,
    bindings: &BTreeMap<String, i64>,
    seed: u64,
    what: &str,
) -> (
    BTreeMap<String, dlc_egg::tensor::Tensor>,
    BTreeMap<String, dlc_egg::tensor::Tensor>,
) {
    let ins = random_inputs(p, bindings, seed).expect("inputs");
    let want = evaluate(p, bindings, &ins).expect("reference evaluates");
    let got = run_on_host(
        &generated.emitted.source,
        &generated.emitted.manifest,
        &ins,
        bindings,
        &HostOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{what}: the host run fails: {e}"));
    (got, want)
}

/// Every output of `want` in `got`, element by element within `|got − want| ≤ rel·max(|want|,
/// 1)`; `what` names the case in failure messages.
pub fn assert_outputs_within(
    got: &BTreeMap<String, dlc_egg::tensor::Tensor>,
    want: &BTreeMap<String, dlc_egg::tensor::Tensor>,
    rel: f64,
    what: &str,
) {
    for (name, w) in want {
        let (g, w) = (got[name].to_f64(), w.to_f64());
        assert_eq!(g.len(), w.len(), "{what} {name}: element count");
        for (i, (g, w)) in g.iter().zip(&w).enumerate() {
            assert!(
                (g - w).abs() <= rel * w.abs().max(1.0),
                "{what} {name}[{i}]: got {g}, want {w}"
            );
        }
    }
}

/// `text` (a graph document) loaded, lowered and optimized for `arch`, the other options at
/// their defaults.
pub fn optimized_for(
    text: &str,
    arch: dlc_egg::target::Arch,
) -> (Program, dlc_egg::optimize::Optimized) {
    let g = dlc_egg::ir::frontend::load_str(text, "graph.json").expect("loads");
    let p = dlc_egg::lower::lower(&g).expect("lowers");
    let opts = dlc_egg::optimize::OptimizeOptions {
        target: arch.target(),
        ..dlc_egg::optimize::OptimizeOptions::default()
    };
    let o = dlc_egg::optimize::optimize(&p, &opts).expect("optimizes");
    (p, o)
}

/// Each kernel of `o` as (name, the template its plan runs on or `none`, the graph nodes it
/// covers), for assertions on covers.
pub fn kernel_templates(o: &dlc_egg::optimize::Optimized) -> Vec<(&str, &str, &Vec<String>)> {
    o.kernels
        .iter()
        .map(|k| {
            let template = k.plan.as_ref().map_or("none", |pl| pl.template);
            (k.name.as_str(), template, &k.covers)
        })
        .collect()
}

/// The index of the kernel of `o` covering the graph node `node` (panics when none does).
pub fn kernel_covering(o: &dlc_egg::optimize::Optimized, node: &str) -> usize {
    o.kernels
        .iter()
        .position(|k| k.covers.iter().any(|c| c == node))
        .unwrap_or_else(|| panic!("a kernel covers {node}"))
}

/// The regions of `o` whose chosen plan is a contraction on one of `algos` (every contraction
/// when `algos` is empty), in program order.
pub fn contraction_regions<'a>(
    o: &'a dlc_egg::optimize::Optimized,
    algos: &[dlc_egg::plan::space::Algo],
) -> Vec<&'a dlc_egg::ir::region::Region> {
    use dlc_egg::plan::space::Knobs;
    o.program
        .regions()
        .filter(|r| {
            dlc_egg::cost::choose_plan(r, &o.model).is_ok_and(|c| match c.best.knobs {
                Knobs::Contraction { algo, .. } => algos.is_empty() || algos.contains(&algo),
                _ => false,
            })
        })
        .collect()
}

/// `generated`'s source and manifest with kernel `new` in place of `old` (same name): its text,
/// and its launch's grid, block and dynamic shared memory.
pub fn swap_kernel(
    generated: &Generated,
    old: &dlc_egg::codegen::gpu::Kernel,
    new: &dlc_egg::codegen::gpu::Kernel,
) -> (String, dlc_egg::codegen::manifest::Manifest) {
    use dlc_egg::codegen::gpu::render;
    use dlc_egg::codegen::manifest::{KernelArg, ManifestStep};
    let old_text = render::kernel(old);
    assert!(
        generated.emitted.source.contains(&old_text),
        "kernel {} is in kernels.cu",
        old.name
    );
    let source = generated
        .emitted
        .source
        .replace(&old_text, &render::kernel(new));
    let mut manifest = generated.emitted.manifest.clone();
    // The new kernel's workspace buffers (split-K) replace the old one's, and its launch passes
    // them before the symbols, as `emit` does.
    let (old_ws, new_ws) = (
        dlc_egg::codegen::emit::workspace_buffers(old),
        dlc_egg::codegen::emit::workspace_buffers(new),
    );
    manifest
        .buffers
        .retain(|b| !old_ws.iter().any(|w| w.name == b.name));
    manifest.buffers.extend(new_ws.iter().cloned());
    for s in &mut manifest.steps {
        if let ManifestStep::Launch(l) = s {
            if l.kernel == new.name {
                l.grid = new.launch.grid.clone();
                l.block = new.launch.block;
                l.dyn_smem_bytes = new.launch.dyn_smem_bytes;
                l.args.retain(|a| !matches!(a, KernelArg::Buffer { name, .. } if old_ws.iter().any(|w| &w.name == name)));
                dlc_egg::codegen::emit::splice_workspace_args(&mut l.args, new);
            }
        }
    }
    (source, manifest)
}

/// Asserts `got` within `rtol·max(|want|, max|want| / 10, 10⁻⁶)` of `want` elementwise: a
/// kernel's output against the reference at the output's scale (an element that cancels to near
/// zero carries the rounding of sums of the output's size); `name` names the case.
pub fn assert_close_at_scale(name: &str, got: &[f64], want: &[f64], rtol: f64) {
    assert_eq!(got.len(), want.len(), "{name}: element count");
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = rtol * w.abs().max(scale * 0.1).max(1e-6);
        assert!(
            (g - w).abs() <= tol,
            "{name}[{i}]: got {g}, want {w} (tolerance {tol})"
        );
    }
}

/// Runs `generated` with its kernel `old` replaced by `new` (a variant of the planned kernel)
/// on the CPU emulation and asserts every output within [`assert_close_at_scale`] of `want`;
/// `at` names the variant.
#[allow(clippy::too_many_arguments)]
pub fn variant_matches(
    generated: &Generated,
    old: &dlc_egg::codegen::gpu::Kernel,
    new: &dlc_egg::codegen::gpu::Kernel,
    ins: &BTreeMap<String, dlc_egg::tensor::Tensor>,
    bindings: &BTreeMap<String, i64>,
    want: &BTreeMap<String, dlc_egg::tensor::Tensor>,
    rtol: f64,
    at: &str,
) {
    let (source, manifest) = swap_kernel(generated, old, new);
    let got = run_on_host(&source, &manifest, ins, bindings, &HostOptions::default())
        .unwrap_or_else(|e| panic!("{at}: the host run fails: {e}"));
    for (name, w) in want {
        assert_close_at_scale(
            &format!("{name} {at}"),
            &got[name].to_f64(),
            &w.to_f64(),
            rtol,
        );
    }
}

/// The kernel of region `r` — `planned` is the plan `o`'s program emitted it with — re-planned
/// from `base` (a contraction plan) on each tile of `tiles` (warps from `warps`) and each split
/// of `splits`, each variant run on the CPU emulation against the reference evaluator (inputs
/// drawn from `seed`, no symbols) within [`assert_close_at_scale`] at `rtol`; `check` sees
/// each variant's CUDA text, its name and its splits first.
#[allow(clippy::too_many_arguments)]
pub fn tile_variants_match(
    p: &Program,
    o: &dlc_egg::optimize::Optimized,
    r: &dlc_egg::ir::region::Region,
    planned: &dlc_egg::cost::PlanChoice,
    base: &dlc_egg::cost::PlanChoice,
    (tiles, splits): (&[[u64; 3]], &[u64]),
    warps: fn([u64; 3]) -> (u64, u64),
    (seed, rtol): (u64, f64),
    check: &dyn Fn(&str, &str, u64),
) {
    use dlc_egg::codegen::{emit, generate, gpu::render};
    use dlc_egg::plan::space::Knobs;
    let generated = generate(o).expect("generates");
    let emitted = emit::kernel_of(r, planned, &o.model.target).expect("builds");
    let b = BTreeMap::new();
    let ins = random_inputs(p, &b, seed).expect("inputs");
    let want = evaluate(p, &b, &ins).expect("reference evaluates");
    for tile in tiles {
        for &split in splits {
            let mut plan = base.clone();
            let Knobs::Contraction {
                bm,
                bn,
                bk,
                warps_m,
                warps_n,
                splits: s,
                ..
            } = &mut plan.best.knobs
            else {
                panic!("a contraction plan: {:?}", plan.best.knobs)
            };
            (*bm, *bn, *bk, *s) = (tile[0], tile[1], tile[2], split);
            (*warps_m, *warps_n) = warps(*tile);
            let k = emit::kernel_of(r, &plan, &o.model.target).expect("the kernel builds");
            let at = format!("tile {tile:?} split {split}");
            check(&render::kernel(&k), &at, split);
            variant_matches(&generated, &emitted, &k, &ins, &b, &want, rtol, &at);
        }
    }
}

/// The GEMM view of `choice`, which must be a contraction planned on the SIMT template (the
/// only one that runs a summed or a pooled tile).
pub fn simt_gemm(choice: &dlc_egg::cost::PlanChoice) -> &dlc_egg::plan::work::Gemm {
    use dlc_egg::plan::space::{Algo, Knobs};
    let dlc_egg::plan::work::Shape::Contraction(g) = &choice.work.shape else {
        panic!("a contraction: {:?}", choice.work.shape)
    };
    assert!(
        matches!(
            choice.best.knobs,
            Knobs::Contraction {
                algo: Algo::Simt,
                ..
            }
        ),
        "{:?}",
        choice.best.knobs
    );
    g
}
