//! The SM90 GEMM template (`sm90_gemm`: TMA + mbarrier + `wgmma`, warp-specialized) on the
//! CPU and through NVRTC: small GEMMs (fp16 and bf16, K-major and MN-major operands, tails in
//! every tile dimension, bias, relu/sigmoid/silu, residual) are
//! optimized for sm90, their kernels rebuilt under the template's plan points, run with the
//! host emulation (`dlc_emu_sm90.h`: mbarrier phases and transaction counts, TMA boxes with the
//! 128-byte swizzle and zero fill, `wgmma` descriptors and fragments per the PTX ISA) and
//! compared with the reference evaluator (seeded random shapes too; the 16-byte staged epilogue
//! where the output rows allow it, else element stores); negative tests remove a wait, shrink
//! an expect-tx and drop the staged epilogue's warp barrier. Convolutions (implicit GEMMs: the
//! NCHW image gathered by the producer warpgroup into the swizzled ring, the filter by TMA as
//! `[Co, Ci·Kh·Kw]`) run the same way on small shapes with tails in `M`, `N` and `K`, stride,
//! dilation and padding, fp16 and bf16, each epilogue; a negative test drops the gather's
//! `fence.proxy.async`.
//! NVRTC compiles the concrete 4096³ GEMM for sm_90a
//! without spills, and the PTX holds `wgmma.mma_async`, `cp.async.bulk.tensor` and
//! `mbarrier`. Needs g++ (and NVRTC for the compile tests), no GPU.

mod common;

use common::nvrtc_here;
use dlc_egg::codegen::gpu::{render, Kernel};
use dlc_egg::codegen::host::{run_on_host, HostOptions};
use dlc_egg::codegen::manifest::ManifestStep;
use dlc_egg::codegen::{emit, generate};
use dlc_egg::cost::choose_plan;
use dlc_egg::eval::evaluate;
use dlc_egg::ir::region::Region;
use dlc_egg::ir::tiny::Program;
use dlc_egg::optimize::{optimize, OptimizeOptions, Optimized};
use dlc_egg::plan::space::{Algo, Knobs};
use dlc_egg::rules::testing::random_inputs;
use dlc_egg::shapes::specialize::graph_symbols;
use dlc_egg::shapes::{ShapeCluster, Specialization};
use dlc_egg::{ir::frontend, lower};
use std::collections::BTreeMap;

#[path = "codegen_sm90/conv.rs"]
mod conv;
#[path = "codegen_sm90/gemm.rs"]
mod gemm;

fn q(s: &str) -> String {
    if s.parse::<i64>().is_ok() {
        s.to_string()
    } else {
        format!("\"{s}\"")
    }
}

/// `Y = act(A·B + bias) [+ R]` in `dt`; `trans_b`: B is `[N, K]`.
fn gemm_graph(dt: &str, [m, k, n]: [&str; 3], trans_b: bool, act: &str, residual: bool) -> String {
    let (m, k, n) = (q(m), q(k), q(n));
    let b = if trans_b {
        format!("[{n}, {k}]")
    } else {
        format!("[{k}, {n}]")
    };
    let syms: Vec<String> = [&m, &k, &n]
        .iter()
        .filter(|s| s.starts_with('"'))
        .map(|s| format!("{s}: 16"))
        .collect();
    let (res_in, res_t, res_op, last) = if residual {
        (
            r#", {"tensor": "R", "role": "data"}"#.to_string(),
            format!(r#""R": {{"dtype": "{dt}", "shape": [{m}, {n}]}},"#),
            r#", {"op": "Elementwise", "name": "res", "fn": "add", "inputs": ["C2", "R"], "outputs": ["Y"]}"#
                .to_string(),
            "C2",
        )
    } else {
        (String::new(), String::new(), String::new(), "Y")
    };
    format!(
        r#"{{
  "signature": {{
    "inputs": [{{"tensor": "A", "role": "data"}}, {{"tensor": "B", "role": "data"}},
               {{"tensor": "bias", "role": "param"}}{res_in}],
    "outputs": [{{"tensor": "Y"}}]
  }},
  "symbols": {{{syms}}},
  "tensors": {{
    "A": {{"dtype": "{dt}", "shape": [{m}, {k}]}},
    "B": {{"dtype": "{dt}", "shape": {b}}},
    "bias": {{"dtype": "{dt}", "shape": [{n}]}},{res_t}
    "Y": {{"dtype": "{dt}", "shape": [{m}, {n}]}}
  }},
  "graph": [
    {{"op": "GEMM", "name": "gemm", "inputs": ["A", "B"], "outputs": ["C0"],
      "attrs": {{"acc_dtype": "fp32", "trans_a": false, "trans_b": {trans_b}}}}},
    {{"op": "Elementwise", "name": "bias_add", "fn": "add", "inputs": ["C0", "bias"], "outputs": ["C1"]}},
    {{"op": "Elementwise", "name": "act", "fn": "{act}", "inputs": ["C1"], "outputs": ["{last}"]}}{res_op}
  ]
}}"#,
        syms = syms.join(", ")
    )
}

fn lowered(text: &str) -> Program {
    let g = frontend::load_str(text, "test.json").expect("loads");
    lower::lower(&g).expect("lowers")
}

fn is_wgmma(r: &Region, o: &Optimized) -> bool {
    choose_plan(r, &o.model).is_ok_and(|c| {
        matches!(
            c.best.knobs,
            Knobs::Contraction {
                algo: Algo::Wgmma,
                ..
            }
        )
    })
}

/// The optimized program's regions planned on `wgmma`.
fn wgmma_regions(o: &Optimized) -> Vec<&Region> {
    o.program.regions().filter(|r| is_wgmma(r, o)).collect()
}

/// A plan point of the template: tile `[BM, BN, 64]`, consumer warpgroups, stages.
#[derive(Clone, Copy, Debug)]
struct Variant {
    bm: u64,
    bn: u64,
    consumers: u64,
    stages: u32,
}

const fn var(bm: u64, bn: u64, consumers: u64, stages: u32) -> Variant {
    Variant {
        bm,
        bn,
        consumers,
        stages,
    }
}

/// The regions planned as tensor-core contractions (on small shapes the cost model may prefer
/// `mma_sync`; the emulation tests rebuild them on `wgmma`).
fn tensor_core_regions(o: &Optimized) -> Vec<&Region> {
    common::host::contraction_regions(o, &[Algo::Wgmma, Algo::MmaSync])
}

fn kernel_for(o: &Optimized, r: &Region, v: Variant) -> Kernel {
    let mut choice = choose_plan(r, &o.model).expect("a plan");
    let Knobs::Contraction {
        algo,
        bm,
        bn,
        bk,
        async_,
        stages,
        warps_m,
        warps_n,
        ..
    } = &mut choice.best.knobs
    else {
        panic!("not a contraction plan")
    };
    [*bm, *bn, *bk] = [v.bm, v.bn, 64];
    *algo = Algo::Wgmma;
    *async_ = true;
    [*warps_m, *warps_n] = [v.consumers * 4, 1];
    *stages = v.stages;
    let k = emit::kernel_of(r, &choice, &o.model.target).expect("the kernel builds and verifies");
    assert_eq!(k.template, "sm90_gemm", "{v:?}");
    k
}

use common::host::assert_close_at_scale as assert_close;

/// The program's source and manifest with `r`'s kernel replaced by `k`.
fn with_kernel(
    o: &Optimized,
    r: &Region,
    k: &Kernel,
) -> (String, dlc_egg::codegen::manifest::Manifest) {
    let generated = generate(o).expect("generates");
    let choice = choose_plan(r, &o.model).expect("plan");
    let planned = emit::kernel_of(r, &choice, &o.model.target).expect("the planned kernel builds");
    let (source, mut manifest) = common::host::swap_kernel(&generated, &planned, k);
    for s in &mut manifest.steps {
        if let ManifestStep::Launch(l) = s {
            if l.kernel == k.name {
                l.args.retain(|a| {
                    !matches!(a, dlc_egg::codegen::manifest::KernelArg::TensorMap { .. })
                });
                l.args
                    .extend(dlc_egg::codegen::templates::sm90::tensor_map_args(r, k));
            }
        }
    }
    (source, manifest)
}

/// `text` optimized for sm90, its program and the binding of its symbols; with `specialize`,
/// the symbolic graph is specialized to the ShapeSet cluster of `bindings` (`T = d·T_d`).
fn optimized(
    text: &str,
    bindings: &[(&str, i64)],
    specialize: bool,
) -> (Program, Optimized, BTreeMap<String, i64>) {
    let b: BTreeMap<String, i64> = bindings.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    if !specialize {
        let p = lowered(text);
        let o = optimize(&p, &OptimizeOptions::default()).expect("optimizes");
        return (p, o, b);
    }
    let g = frontend::load_str(text, "test.json").expect("loads");
    let cluster = ShapeCluster::of(&b).expect("a cluster");
    let sp = Specialization::new(&cluster, &graph_symbols(&g));
    let bound = sp.bind(&b).expect("binds");
    let p = lower::lower(&sp.apply(&g)).expect("lowers");
    let opts = OptimizeOptions {
        pricing: bound.clone(),
        ..OptimizeOptions::default()
    };
    let o = optimize(&p, &opts).expect("optimizes");
    (p, o, bound)
}

/// Runs the program with its wgmma kernel rebuilt under every variant on the host against the
/// reference; `edit` rewrites the kernel's source first (the negative tests), and then the
/// host run's error is returned instead; `expect_staged`: whether the kernel must use the
/// 16-byte staged epilogue.
fn run_variants(
    text: &str,
    bindings: &[(&str, i64)],
    specialize: bool,
    variants: &[Variant],
    rtol: f64,
    edit: Option<&dyn Fn(&str) -> String>,
    expect_staged: Option<bool>,
) -> Option<String> {
    let (p, o, b) = optimized(text, bindings, specialize);
    let regions = tensor_core_regions(&o);
    assert_eq!(regions.len(), 1, "one wgmma kernel");
    let r = regions[0];
    let ins = random_inputs(&p, &b, 7).expect("inputs");
    let want = evaluate(&p, &b, &ins).expect("reference evaluates");
    for v in variants {
        let k = kernel_for(&o, r, *v);
        // The 16-byte staged epilogue exactly when the output's rows are 16-byte multiples.
        let staged = render::kernel(&k).contains("dlc_bar_sync(2 + cw, 32)");
        if let Some(expect) = expect_staged {
            assert_eq!(staged, expect, "{v:?}: staged epilogue");
        }
        let (mut source, manifest) = with_kernel(&o, r, &k);
        if let Some(edit) = edit {
            let edited = edit(&source);
            assert_ne!(edited, source, "the edit changes the kernel");
            source = edited;
            return Some(
                run_on_host(&source, &manifest, &ins, &b, &HostOptions::default())
                    .err()
                    .map_or("no error".to_string(), |e| e.to_string()),
            );
        }
        let got = run_on_host(&source, &manifest, &ins, &b, &HostOptions::default())
            .unwrap_or_else(|e| panic!("{v:?}: the host run fails: {e}\n{}", render::kernel(&k)));
        for (name, w) in &want {
            let g = got
                .get(name)
                .unwrap_or_else(|| panic!("output {name} missing"));
            assert_close(&format!("{name} {v:?}"), &g.to_f64(), &w.to_f64(), rtol);
        }
    }
    None
}

/// Runs `check`'s variants; `staged`: whether the epilogue is the 16-byte staged one.
fn check(text: &str, variants: &[Variant], rtol: f64, staged: bool) {
    run_variants(text, &[], false, variants, rtol, None, Some(staged));
}
