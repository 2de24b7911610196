//! The tensor-core GEMM on realistic shapes through NVRTC and ptxas (no GPU needed): fp16 and
//! bf16 `4096³` GEMMs with a bias + ReLU epilogue, concrete, with symbolic `M`/`K`/`N`, and with
//! the symbols ShapeSet-specialized (`T = 8*T_8`), each optimized for and compiled for sm_80
//! and sm_90a. Every case must compile without spills (`-Werror` on spills), launch within the
//! grid limits at `4096³`, issue `mma.sync`, and copy with `cp.async` exactly the operands the
//! plan stages that way. Run with `--nocapture` for the table of registers, shared memory,
//! stages and grids.
//!
//! libnvrtc comes from `scripts/install-cuda-wheels.sh`; without it these tests fail with that
//! suggestion, unless `DLC_SKIP_NVRTC=1`, where they print a skip line and pass.

mod common;

use dlc_egg::codegen::emit;
use dlc_egg::codegen::scalar::Emitter;
use dlc_egg::codegen::templates::contraction::{view, Side};
use dlc_egg::codegen::templates::contraction_mma::{operand_staging, Staging};
use dlc_egg::cost::choose_plan;
use dlc_egg::cuda::{compile, toolchain, CompileOptions};
use dlc_egg::ir::frontend;
use dlc_egg::optimize::{optimize, OptimizeOptions, Optimized};
use dlc_egg::plan::space::Knobs;
use dlc_egg::shapes::specialize::graph_symbols;
use dlc_egg::shapes::{ShapeCluster, Specialization};
use dlc_egg::target::Arch;
use std::collections::BTreeMap;

fn nvrtc_here(test: &str) -> bool {
    match toolchain() {
        Ok(_) => true,
        Err(e) if std::env::var("DLC_SKIP_NVRTC").is_ok_and(|v| v == "1") => {
            eprintln!("skipping {test} (DLC_SKIP_NVRTC=1): {e}");
            false
        }
        Err(e) => panic!("{e} (or set DLC_SKIP_NVRTC=1 to skip the NVRTC tests)"),
    }
}

/// `Y = relu(A·B + bias)`; a size that is not a number is a symbol priced at 4096.
fn gemm(dt: &str, dims: [&str; 3]) -> String {
    common::gemm_bias_relu(dt, dims, 4096)
}

/// How a case's sizes are given.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sizes {
    Concrete,
    Symbolic,
    /// Symbolic, specialized to the ShapeSet cluster of 4096 (`T = 4096·T_4096`… as the
    /// cluster's divisibility class says).
    Specialized,
}

/// The optimized program of a case and the binding its sizes take at 4096³.
fn optimized(dt: &str, sizes: Sizes, arch: Arch) -> (Optimized, BTreeMap<String, i64>) {
    let opts = OptimizeOptions {
        target: arch.target(),
        ..OptimizeOptions::default()
    };
    let names = match sizes {
        Sizes::Concrete => ["4096", "4096", "4096"],
        _ => ["M", "K", "N"],
    };
    let g = frontend::load_str(&gemm(dt, names), "gemm.json").expect("loads");
    let binding: BTreeMap<String, i64> = match sizes {
        Sizes::Concrete => BTreeMap::new(),
        _ => ["M", "K", "N"].map(|s| (s.to_string(), 4096)).into(),
    };
    if sizes == Sizes::Specialized {
        let cluster = ShapeCluster::of(&binding).expect("cluster");
        let sp = Specialization::new(&cluster, &graph_symbols(&g));
        let o = dlc_egg::shapes::cache::optimize_specialized(&g, &sp, &opts).expect("optimizes");
        let bound = sp.bind(&binding).expect("binds");
        return (o, bound);
    }
    let p = dlc_egg::lower::lower(&g).expect("lowers");
    (optimize(&p, &opts).expect("optimizes"), binding)
}

/// Compiles one case and checks it; returns its report line.
fn case(dt: &str, sizes: Sizes, arch: Arch) -> String {
    let what = format!("{dt} {sizes:?} {arch:?}");
    let (o, binding) = optimized(dt, sizes, arch);
    let regions: Vec<_> = o
        .program
        .regions()
        .filter(|r| {
            choose_plan(r, &o.model)
                .is_ok_and(|c| matches!(c.best.knobs, Knobs::Contraction { .. }))
        })
        .collect();
    assert_eq!(regions.len(), 1, "{what}: one contraction kernel");
    let r = regions[0];
    let choice = choose_plan(r, &o.model).expect("a plan");
    let Knobs::Contraction {
        bm,
        bn,
        bk,
        stages,
        warps_m,
        warps_n,
        async_,
        ..
    } = choice.best.knobs
    else {
        panic!("{what}: not a contraction plan")
    };
    let k = emit::kernel_of(r, &choice, &o.model.target).expect("the kernel builds");
    if k.template == "sm90_gemm" {
        // Planned on wgmma: the SM90 template, compiled by tests/codegen_sm90.rs.
        return format!("{what}: sm90_gemm");
    }
    assert_eq!(k.template, "contraction_mma", "{what}");
    let grid: Vec<i64> = k
        .launch
        .grid
        .iter()
        .map(|s| s.0.eval_with(&binding).expect("the grid evaluates"))
        .collect();
    assert!(
        grid[0] <= i32::MAX as i64 && grid[1] <= 65535 && grid[2] <= 65535,
        "{what}: grid {grid:?} over the limits"
    );
    let generated = dlc_egg::codegen::generate(&o).expect("generates");
    let source = &generated.emitted.source;
    let text = dlc_egg::codegen::gpu::render::kernel(&k);
    if std::env::var_os("DLC_MMA_DUMP").is_some() {
        eprintln!("// {what}\n{text}");
    }
    assert!(text.contains("dlc_mma_m16n8k16"), "{what}: no mma.sync");
    let view_async = {
        let em = Emitter::new(r, "").expect("an emitter");
        let v = view(r, &choice.work, &em).expect("a GEMM view");
        [Side::A, Side::B].map(|s| {
            matches!(
                operand_staging(r, &v, s),
                Staging::CpAsync | Staging::CpAsyncChecked
            )
        })
    };
    let copies = text.matches("dlc_cp_async_16(").count();
    let want = view_async.iter().filter(|a| **a).count() * (stages as usize);
    assert_eq!(
        copies,
        if async_ { want } else { 0 },
        "{what}: cp.async sites (operand staging {view_async:?}, {stages} stages)"
    );
    let c =
        compile(source, arch, &CompileOptions::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let res = c.kernel(&k.name).expect("the kernel is compiled");
    assert_eq!(res.spill_bytes, 0, "{what}");
    format!(
        "{what}: {bm}x{bn}x{bk} {warps_m}x{warps_n} warps, {stages} stages, async {async_} \
         (cp.async A/B {view_async:?}), {} regs, {} B dynamic smem, grid {grid:?}",
        res.registers, k.launch.dyn_smem_bytes
    )
}

fn run(dt: &str, test: &str) {
    if !nvrtc_here(test) {
        return;
    }
    let mut lines = Vec::new();
    for sizes in [Sizes::Concrete, Sizes::Symbolic, Sizes::Specialized] {
        for arch in [Arch::Sm80, Arch::Sm90] {
            lines.push(case(dt, sizes, arch));
        }
    }
    eprintln!("{}", lines.join("\n"));
}

#[test]
fn fp16_gemm_4096_compiles_spill_free() {
    run("fp16", "fp16_gemm_4096_compiles_spill_free");
}

#[test]
fn bf16_gemm_4096_compiles_spill_free() {
    run("bf16", "bf16_gemm_4096_compiles_spill_free");
}
