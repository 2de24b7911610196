//! Convolutions on the tensor-core template (`contraction_mma`, an implicit GEMM): the image
//! operand loaded by the conv gather (row bases, validity and padding predicates hoisted out of
//! the `K` loop), the filter staged by `cp.async` as its contiguous `Ci·Kh·Kw` run when that is
//! a multiple of 8. Small convs (fp16 and bf16; stride 1/2, dilation 1/2, groups 1/2 and
//! depthwise, padding 0/1/2/3, 1×1, 3×3 and 7×7, batch 1 and 3, sizes leaving tails in every
//! tile dimension, bias + ReLU epilogues) are optimized, their planned tensor-core kernel (and
//! a synchronous variant) is run on the CPU emulation (`codegen::host`: `ldmatrix`, `mma.sync`,
//! `cp.async` per the PTX ISA) against the reference evaluator. Realistic shapes are compiled
//! with NVRTC for sm_80 (no spills; on sm90 they are planned on wgmma, `tests/codegen_sm90.rs`).
//! Needs g++ and NVRTC, no GPU.

mod common;

use dlc_egg::codegen::gpu::{render, Kernel};
use dlc_egg::codegen::host::{run_on_host, HostOptions};
use dlc_egg::codegen::{emit, generate};
use dlc_egg::cost::{choose_plan, choose_tiled_plan};
use dlc_egg::cuda::{compile, CompileOptions};
use dlc_egg::eval::evaluate;
use dlc_egg::ir::region::program::Step;
use dlc_egg::ir::region::{Expr, Region};
use dlc_egg::optimize::{optimize, OptimizeOptions, Optimized};
use dlc_egg::plan::space::{Algo, Knobs};
use dlc_egg::rules::testing::random_inputs;
use dlc_egg::target::Arch;
use dlc_egg::{ir::frontend, lower};
use std::collections::BTreeMap;

/// A conv: `X[N, C, H, W]` (N symbolic unless `batch_literal`), `W[Co, C/g, K, K]`, bias and
/// ReLU.
#[derive(Clone, Copy, Debug)]
struct Conv {
    dt: &'static str,
    n: i64,
    c: i64,
    hw: i64,
    co: i64,
    k: i64,
    stride: i64,
    pad: i64,
    dil: i64,
    groups: i64,
    batch_literal: bool,
}

const BASE: Conv = Conv {
    dt: "fp16",
    n: 3,
    c: 8,
    hw: 7,
    co: 20,
    k: 3,
    stride: 1,
    pad: 1,
    dil: 1,
    groups: 1,
    batch_literal: false,
};

impl Conv {
    fn out(&self) -> i64 {
        (self.hw + 2 * self.pad - self.dil * (self.k - 1) - 1) / self.stride + 1
    }

    fn graph(&self) -> String {
        let n = if self.batch_literal {
            self.n.to_string()
        } else {
            "\"N\"".to_string()
        };
        let symbols = if self.batch_literal {
            String::new()
        } else {
            format!("\"symbols\": {{\"N\": {}}},", self.n)
        };
        let (c, hw, co, k, o, dt) = (self.c, self.hw, self.co, self.k, self.out(), self.dt);
        let cg = self.c / self.groups;
        format!(
            r#"{{
  "signature": {{
    "inputs": [{{"tensor": "X", "role": "data"}}, {{"tensor": "W", "role": "param"}},
               {{"tensor": "bias", "role": "param"}}],
    "outputs": [{{"tensor": "Y"}}]
  }},
  {symbols}
  "tensors": {{
    "X": {{"dtype": "{dt}", "shape": [{n}, {c}, {hw}, {hw}]}},
    "W": {{"dtype": "{dt}", "shape": [{co}, {cg}, {k}, {k}]}},
    "bias": {{"dtype": "{dt}", "shape": [{co}]}},
    "Y": {{"dtype": "{dt}", "shape": [{n}, {co}, {o}, {o}]}}
  }},
  "graph": [
    {{"op": "Conv", "name": "conv", "inputs": ["X", "W", "bias"], "outputs": ["C"],
     "attrs": {{"stride": {s}, "pad": {p}, "dilation": {d}, "groups": {g}, "acc_dtype": "fp32"}}}},
    {{"op": "Elementwise", "name": "relu", "inputs": ["C"], "outputs": ["Y"], "attrs": {{"fn": "relu"}}}}
  ]
}}"#,
            s = self.stride,
            p = self.pad,
            d = self.dil,
            g = self.groups,
        )
    }

    fn bindings(&self) -> Vec<(&'static str, i64)> {
        if self.batch_literal {
            vec![]
        } else {
            vec![("N", self.n)]
        }
    }
}

fn optimized(c: &Conv, arch: Arch) -> (dlc_egg::ir::tiny::Program, Optimized) {
    let g = frontend::load_str(&c.graph(), "conv.json").expect("loads");
    let p = lower::lower(&g).expect("lowers");
    let opts = OptimizeOptions {
        target: arch.target(),
        ..OptimizeOptions::default()
    };
    let o = optimize(&p, &opts).expect("optimizes");
    (p, o)
}

/// The regions whose tiled plan is `mma_sync` (`cost::choose_tiled_plan`: a depthwise conv is
/// also priced as the pointwise fold and may run as it; these tests run the tensor-core
/// template on it all the same).
fn mma_regions(o: &Optimized) -> Vec<&Region> {
    o.program
        .regions()
        .filter(|r| {
            choose_tiled_plan(r, &o.model).is_ok_and(|c| {
                matches!(
                    c.best.knobs,
                    Knobs::Contraction {
                        algo: Algo::MmaSync,
                        ..
                    }
                )
            })
        })
        .collect()
}

/// The planned kernel of `r`, and the same plan made synchronous.
fn kernels(o: &Optimized, r: &Region) -> [Kernel; 2] {
    let choice = choose_tiled_plan(r, &o.model).expect("a plan");
    let planned = emit::kernel_of(r, &choice, &o.model.target).expect("the planned kernel builds");
    let mut sync = choice.clone();
    if let Knobs::Contraction { async_, .. } = &mut sync.best.knobs {
        *async_ = false;
    }
    let sync = emit::kernel_of(r, &sync, &o.model.target).expect("the synchronous kernel builds");
    [planned, sync]
}

use common::host::assert_close_at_scale as assert_close;

/// What the planned kernel of a conv looks like.
#[derive(Debug, PartialEq)]
struct Staged {
    /// The image goes through the conv gather.
    gather: bool,
    /// The filter is copied by `cp.async`.
    w_async: bool,
}

/// Runs `c`'s planned tensor-core kernel and its synchronous variant on the host against the
/// reference; returns how the planned kernel stages its operands.
fn check(c: &Conv) -> Staged {
    // sm80: on sm90 the planner may put a conv on wgmma (`tests/codegen_sm90.rs`).
    let (p, o) = optimized(c, Arch::Sm80);
    let regions = mma_regions(&o);
    assert_eq!(regions.len(), 1, "{c:?}: one tensor-core kernel");
    let r = regions[0];
    let generated = generate(&o).expect("generates");
    let ks = kernels(&o, r);
    let planned = render::kernel(&ks[0]);
    // Unless the pointwise fold is priced faster (a depthwise conv), the tiled plan is the plan;
    // the host runs below put the tiled kernel in place of the emitted one either way.
    let chosen = choose_plan(r, &o.model).expect("a plan");
    let tiled = matches!(chosen.best.knobs, Knobs::Contraction { .. });
    let emitted_kernel = emit::kernel_of(r, &chosen, &o.model.target).expect("builds");
    let emitted = render::kernel(&emitted_kernel);
    assert!(generated.emitted.source.contains(&emitted), "{c:?}");
    assert_eq!(
        emitted == planned,
        tiled,
        "{c:?}: the planned kernel is the emitted one"
    );
    assert_eq!(ks[0].template, "contraction_mma", "{c:?}");
    let b: BTreeMap<String, i64> = c
        .bindings()
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    let ins = random_inputs(&p, &b, 11).expect("inputs");
    let want = evaluate(&p, &b, &ins).expect("reference evaluates");
    let rtol = if c.dt == "bf16" { 2e-2 } else { 1e-2 };
    for k in &ks {
        let text = render::kernel(k);
        if std::env::var_os("DLC_CONV_DUMP").is_some() {
            eprintln!("{text}");
        }
        let (source, manifest) = common::host::swap_kernel(&generated, &emitted_kernel, k);
        let got = run_on_host(&source, &manifest, &ins, &b, &HostOptions::default())
            .unwrap_or_else(|e| panic!("{c:?}: the host run fails: {e}\n{text}"));
        for (name, w) in &want {
            let g = got.get(name).expect("output");
            assert_close(&format!("{name} {c:?}"), &g.to_f64(), &w.to_f64(), rtol);
        }
    }
    if planned.contains("by the conv gather") {
        // The loads take the `K` decomposition from the shared-memory table: no division.
        assert!(planned.contains("_ktab["), "{c:?}: the K table\n{planned}");
        for line in planned.lines().filter(|l| l.contains("dlc_bits(")) {
            assert!(!line.contains('/') && !line.contains('%'), "{c:?}: {line}");
        }
    }
    Staged {
        gather: planned.contains("by the conv gather"),
        w_async: planned.contains("dlc_cp_async_16(&Bs"),
    }
}

const fn staged(gather: bool, w_async: bool) -> Staged {
    Staged { gather, w_async }
}

#[test]
fn fp16_3x3_pad1_batch3_with_tails() {
    // K = 72 (a multiple of 8: W by cp.async), M = 3·49, N = 20: tails in every dimension.
    assert_eq!(check(&BASE), staged(true, true));
}

/// A bf16 conv with stride 2, dilation 2 and padding 2 (`K` = 144: half a step of 32 in the
/// last).
const BF16_STRIDED_DILATED: Conv = Conv {
    dt: "bf16",
    n: 1,
    c: 16,
    hw: 11,
    co: 24,
    stride: 2,
    dil: 2,
    pad: 2,
    ..BASE
};

#[test]
fn bf16_3x3_stride2_dilation2_pad2() {
    assert_eq!(check(&BF16_STRIDED_DILATED), staged(true, true));
}

/// A stride-2 conv whose output plane (4·4 = 16) is a multiple of 8 while its rows (4 wide) are
/// not: the epilogue is staged and stored in 16-byte chunks along `M` over the contiguous
/// `OH·OW` run (`View::store_chunk`), with tails in `M` (3·16 = 48 of a 64-row tile) and `N`
/// (Co = 20).
#[test]
fn fp16_3x3_stride2_plane_stored_in_16_byte_chunks() {
    let c = Conv {
        c: 16,
        hw: 8,
        stride: 2,
        ..BASE
    };
    let (_, o) = optimized(&c, Arch::Sm80);
    let r = mma_regions(&o)[0];
    let planned = render::kernel(&kernels(&o, r)[0]);
    assert!(
        planned.contains("stored in 8-element (16-byte) chunks along M"),
        "{planned}"
    );
    assert_eq!(check(&c), staged(true, true));
}

#[test]
fn fp16_1x1_stride2_pad0() {
    let c = Conv {
        c: 16,
        hw: 9,
        co: 12,
        k: 1,
        stride: 2,
        pad: 0,
        ..BASE
    };
    assert_eq!(check(&c), staged(true, true));
}

#[test]
fn fp16_7x7_stride2_pad3_three_channels() {
    // K = 3·49 = 147: the filter run is not a multiple of 8, so it goes through registers.
    // 29² outputs (M = 841: a tail of 9 rows): at 7² the whole conv is a few µs of latency,
    // and the product materialized, then summed by the reduce template, is priced faster.
    let c = Conv {
        n: 1,
        c: 3,
        hw: 57,
        co: 16,
        k: 7,
        stride: 2,
        pad: 3,
        ..BASE
    };
    assert_eq!(check(&c), staged(true, false));
}

#[test]
fn bf16_grouped_and_depthwise() {
    let grouped = Conv {
        dt: "bf16",
        n: 2,
        c: 16,
        hw: 6,
        co: 16,
        groups: 2,
        ..BASE
    };
    assert_eq!(check(&grouped), staged(true, true));
    let depthwise = Conv {
        n: 1,
        c: 8,
        hw: 6,
        co: 8,
        groups: 8,
        ..BASE
    };
    // Every output channel is its own batch (an empty `N`, extent 1); K = 9 taps, not a
    // multiple of 8, so the filter goes through registers.
    assert_eq!(check(&depthwise), staged(true, false));
}

#[test]
fn batch_one_literal_stays_on_tensor_cores() {
    // The batch axis of size 1 is read by no operand (X's index is the constant 0): it used
    // to leave the GEMM view and fall back to a scalar pointwise kernel.
    let c = Conv {
        n: 1,
        c: 16,
        hw: 9,
        co: 24,
        stride: 2,
        batch_literal: true,
        ..BASE
    };
    assert_eq!(check(&c), staged(true, true));
}

/// Split-K with the image gathered (`K` = 288 in 9 steps of 32; a bf16 strided, dilated conv
/// with `K` = 144, half a step in the last): 1 to 16 CTAs per tile — the last splits of 16
/// walk no step — under 2 to 4 stages, synchronous and `cp.async`. Each split fills the conv
/// gather's `K` table for its own global tiles (`kt0 + t`) into the local slots its loads
/// read; the last CTA sums the partial tiles. On the host against the reference.
#[test]
fn gathered_conv_split_k_every_split_and_pipeline() {
    let convs = [Conv { c: 32, ..BASE }, BF16_STRIDED_DILATED];
    for c in convs {
        let (p, o) = optimized(&c, Arch::Sm80);
        let regions = mma_regions(&o);
        assert_eq!(regions.len(), 1, "{c:?}: one tensor-core kernel");
        let r = regions[0];
        let generated = generate(&o).expect("generates");
        let tiled = choose_tiled_plan(r, &o.model).expect("a plan");
        let chosen = choose_plan(r, &o.model).expect("a plan");
        let emitted = emit::kernel_of(r, &chosen, &o.model.target).expect("builds");
        let b: BTreeMap<String, i64> = c
            .bindings()
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        let ins = random_inputs(&p, &b, 5).expect("inputs");
        let want = evaluate(&p, &b, &ins).expect("reference evaluates");
        let rtol = if c.dt == "bf16" { 2e-2 } else { 1e-2 };
        for (stages, async_) in [(2, false), (3, true), (4, true)] {
            for splits in [1, 2, 4, 8, 16] {
                let mut plan = tiled.clone();
                let Knobs::Contraction {
                    stages: st,
                    async_: a,
                    splits: s,
                    ..
                } = &mut plan.best.knobs
                else {
                    panic!("not a contraction plan")
                };
                (*st, *a, *s) = (stages, async_, splits);
                let k = emit::kernel_of(r, &plan, &o.model.target).expect("the kernel builds");
                let text = render::kernel(&k);
                let at = format!("{c:?} stages {stages} async {async_} split {splits}");
                assert!(text.contains("by the conv gather"), "{at}: gathered");
                assert_eq!(text.contains("kt0"), splits > 1, "{at}: split");
                common::host::variant_matches(&generated, &emitted, &k, &ins, &b, &want, rtol, &at);
            }
        }
    }
}

/// Realistic shapes through NVRTC for sm_80 and sm_90a: the emitted tensor-core kernel
/// compiles without spills (a spill is a compile error), issues `mma.sync`, copies `W` with
/// `cp.async` and gathers `X`.
#[test]
fn realistic_convs_compile_spill_free() {
    if !crate::common::nvrtc_here() {
        return;
    }
    let shapes = [
        Conv {
            n: 32,
            c: 64,
            hw: 56,
            co: 64,
            ..BASE
        },
        Conv {
            n: 256,
            c: 64,
            hw: 224,
            co: 64,
            ..BASE
        },
    ];
    // sm80's mma.sync kernels; on sm90 these convs are planned on wgmma
    // (`tests/codegen_sm90.rs`, `conv3x3_compiles_for_sm90a_on_wgmma_without_spills`).
    for c in shapes {
        {
            let arch = Arch::Sm80;
            let (_, o) = optimized(&c, arch);
            let regions = mma_regions(&o);
            assert_eq!(regions.len(), 1, "{c:?} {arch:?}: one tensor-core kernel");
            let generated = generate(&o).expect("generates");
            let src = &generated.emitted.source;
            assert!(src.contains("dlc_mma_m16n8k16_f16("), "{c:?} {arch:?}");
            assert!(
                src.contains("dlc_cp_async_16(&Bs"),
                "{c:?} {arch:?}: W by cp.async"
            );
            assert!(src.contains("by the conv gather"), "{c:?} {arch:?}");
            let compiled = compile(src, arch, &CompileOptions::default())
                .unwrap_or_else(|e| panic!("{c:?} {arch:?}: {e}"));
            for k in &compiled.kernels {
                assert_eq!(k.spill_bytes, 0, "{c:?} {arch:?}: {k:?}");
                eprintln!("{arch:?} N={} {}²: {k:?}", c.n, c.hw);
            }
        }
    }
}

/// Depthwise convs at batch 8 (MobileNet's 3×3, padding 1, 28² to 112²) may run as the
/// pointwise fold; their taps are padded (guarded) reads inside the fold, which the pointwise
/// template loads element by element. The plan used to claim 8 lanes (16-byte vectors) for
/// them, which the kernel lacked (`Vec128Loads` of tests/static_perf.rs): every chosen
/// elementwise plan's width must now be one the template emits with a vector load.
#[test]
fn a_pointwise_plan_claims_vector_loads_only_where_the_kernel_issues_them() {
    use dlc_egg::codegen::templates::vector::loads_vectors;
    let mut depthwise_regions = 0;
    for (c, hw) in [(32, 112), (96, 56), (144, 56), (192, 28), (32, 28)] {
        let depthwise = Conv {
            n: 8,
            c,
            hw,
            co: c,
            groups: c,
            batch_literal: true,
            ..BASE
        };
        for arch in [Arch::Sm80, Arch::Sm90] {
            let (_, o) = optimized(&depthwise, arch);
            for s in &o.program.steps {
                let Step::Region(r) = s else { continue };
                // The conv's region: its taps are all guarded, so its fold has no vector
                // width (the plan space drops them all, `cost::choose_plan`).
                if r.lets.iter().any(|l| matches!(l.expr, Expr::Reduce(_))) {
                    depthwise_regions += 1;
                    for lanes in [2, 4, 8] {
                        assert!(!loads_vectors(r, lanes), "{arch:?} c={c}: {lanes} lanes");
                    }
                }
                let chosen = choose_plan(r, &o.model).expect("a plan");
                if !matches!(chosen.best.knobs, Knobs::Elementwise { .. }) {
                    continue;
                }
                let width = chosen.best.plan.vectorize.width;
                assert!(
                    width == 1 || loads_vectors(r, width),
                    "{arch:?} c={c} {hw}²: plan width {width} without a vector load"
                );
            }
        }
    }
    assert_eq!(depthwise_regions, 10, "one conv region per shape and arch");
}

/// Sweep seed 5's depthwise conv (bf16, N = 1, 256 channels, 14² → 12², 3×3, no padding): its
/// fold's taps sit in a reduce body, so the pointwise template loads none of them as a vector,
/// and its rows of 12 make 4 lanes the plan space's only vector width. Dropping that width left
/// the fold no plan at all (the scalar one stops at `VectorShrinks`) and extraction failed with
/// E9000 "no finite-cost cover": the space is now built for the widths the template emits, so
/// the scalar plan stays. The program runs on the host emulation against the reference.
#[test]
fn a_pointwise_kernel_without_vector_reads_keeps_its_scalar_plan() {
    use dlc_egg::codegen::templates::vector::loads_vectors;
    let c = Conv {
        dt: "bf16",
        n: 1,
        c: 256,
        hw: 14,
        co: 256,
        pad: 0,
        groups: 256,
        batch_literal: true,
        ..BASE
    };
    for arch in [Arch::Sm80, Arch::Sm90] {
        let (p, o) = optimized(&c, arch);
        let mut pointwise = 0;
        for s in &o.program.steps {
            let Step::Region(r) = s else { continue };
            let chosen = choose_plan(r, &o.model).expect("a plan");
            if let Knobs::Elementwise { vec_bytes, .. } = chosen.best.knobs {
                pointwise += 1;
                let width = chosen.best.plan.vectorize.width;
                assert_eq!(u64::from(width) * 2, vec_bytes, "{arch:?}: bf16 lanes");
                assert!(
                    width == 1 || loads_vectors(r, width),
                    "{arch:?}: plan width {width} without a vector load"
                );
            }
        }
        assert!(
            pointwise > 0,
            "{arch:?}: the depthwise conv runs as the fold"
        );
        let generated = generate(&o).expect("generates");
        let ins = random_inputs(&p, &BTreeMap::new(), 5).expect("inputs");
        let want = evaluate(&p, &BTreeMap::new(), &ins).expect("reference evaluates");
        let got = run_on_host(
            &generated.emitted.source,
            &generated.emitted.manifest,
            &ins,
            &BTreeMap::new(),
            &HostOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{arch:?}: the host run fails: {e}"));
        for (name, w) in &want {
            let g = got.get(name).expect("output");
            assert_close(&format!("{name} {arch:?}"), &g.to_f64(), &w.to_f64(), 2e-2);
        }
    }
}
