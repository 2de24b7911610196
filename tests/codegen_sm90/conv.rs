//! Convolutions on the SM90 template (implicit GEMMs: the image gathered by the producer
//! warpgroup, the filter by TMA): tails, stride, dilation, padding, every epilogue, random
//! shapes, a missing proxy fence rejected, and the 3×3 conv through NVRTC.

use super::*;
use dlc_egg::cost::PlanChoice;
use dlc_egg::cuda::Compiled;

/// A conv `act(conv(X, W) + bias) [+ R]`: `X[n, c, hw, hw]`, `W[co, c, k, k]`, NCHW, in `dt`.
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
    act: &'static str,
    residual: bool,
}

impl Conv {
    fn out(&self) -> i64 {
        (self.hw + 2 * self.pad - self.dil * (self.k - 1) - 1) / self.stride + 1
    }

    fn graph(&self) -> String {
        let (n, c, hw, co, k, o, dt) = (
            self.n,
            self.c,
            self.hw,
            self.co,
            self.k,
            self.out(),
            self.dt,
        );
        let (res_in, res_t, res_op, last) = if self.residual {
            (
                r#", {"tensor": "R", "role": "data"}"#.to_string(),
                format!(r#""R": {{"dtype": "{dt}", "shape": [{n}, {co}, {o}, {o}]}},"#),
                r#", {"op": "Elementwise", "name": "res", "fn": "add", "inputs": ["A1", "R"], "outputs": ["Y"]}"#
                    .to_string(),
                "A1",
            )
        } else {
            (String::new(), String::new(), String::new(), "Y")
        };
        format!(
            r#"{{
  "signature": {{
    "inputs": [{{"tensor": "X", "role": "data"}}, {{"tensor": "W", "role": "param"}},
               {{"tensor": "bias", "role": "param"}}{res_in}],
    "outputs": [{{"tensor": "Y"}}]
  }},
  "tensors": {{
    "X": {{"dtype": "{dt}", "shape": [{n}, {c}, {hw}, {hw}]}},
    "W": {{"dtype": "{dt}", "shape": [{co}, {c}, {k}, {k}]}},
    "bias": {{"dtype": "{dt}", "shape": [{co}]}},{res_t}
    "Y": {{"dtype": "{dt}", "shape": [{n}, {co}, {o}, {o}]}}
  }},
  "graph": [
    {{"op": "Conv", "name": "conv", "inputs": ["X", "W", "bias"], "outputs": ["C"],
     "attrs": {{"stride": {s}, "pad": {p}, "dilation": {d}, "acc_dtype": "fp32"}}}},
    {{"op": "Elementwise", "name": "act", "fn": "{act}", "inputs": ["C"], "outputs": ["{last}"]}}{res_op}
  ]
}}"#,
            s = self.stride,
            p = self.pad,
            d = self.dil,
            act = self.act,
        )
    }

    fn rtol(&self) -> f64 {
        if self.dt == "bf16" {
            2e-2
        } else {
            1e-2
        }
    }
}

const CONV: Conv = Conv {
    dt: "fp16",
    n: 3,
    c: 8,
    hw: 7,
    co: 20,
    k: 3,
    stride: 1,
    pad: 1,
    dil: 1,
    act: "relu",
    residual: false,
};

/// A conv's kernel rebuilt on wgmma gathers its image (no tensor map for it) and loads the
/// filter by TMA.
fn assert_gathered(c: &Conv, v: Variant) {
    let (_, o, _) = optimized(&c.graph(), &[], false);
    let r = tensor_core_regions(&o)[0];
    let k = render::kernel(&kernel_for(&o, r, v));
    assert!(
        k.contains("gathered (im2col, K-major, lanes along M) A"),
        "{c:?}\n{k}"
    );
    assert!(
        k.contains("dlc_fence_proxy_async()") && !k.contains("tm_a"),
        "{k}"
    );
}

#[test]
fn conv_fp16_3x3_pad1_tails_in_m_n_and_k() {
    // M = 3·49 = 147, N = 20, K = 72: a tail in every tile dimension; output rows of 7.
    let v = [var(64, 64, 1, 2), var(128, 128, 2, 3)];
    assert_gathered(&CONV, v[0]);
    run_variants(&CONV.graph(), &[], false, &v, 1e-2, None, Some(false));
}

#[test]
fn conv_bf16_stride2_dilation2_residual_sigmoid() {
    let c = Conv {
        dt: "bf16",
        c: 16,
        hw: 11,
        co: 24,
        stride: 2,
        pad: 2,
        dil: 2,
        act: "sigmoid",
        residual: true,
        ..CONV
    };
    run_variants(
        &c.graph(),
        &[],
        false,
        &[var(64, 64, 1, 3)],
        c.rtol(),
        None,
        None,
    );
}

#[test]
fn conv_fp16_staged_epilogue_along_m_silu() {
    // Output planes of 8×8: the 16-byte staged epilogue along `M`; pad 0 (no guard).
    let c = Conv {
        c: 8,
        hw: 10,
        co: 16,
        pad: 0,
        act: "silu",
        ..CONV
    };
    assert_eq!(c.out(), 8);
    run_variants(
        &c.graph(),
        &[],
        false,
        &[var(128, 64, 1, 2)],
        c.rtol(),
        None,
        Some(true),
    );
}

/// Seeded random convs: sizes with tails in `M`, `N` and `K`, stride, padding and dilation,
/// fp16 and bf16, each activation, with and without the residual.
#[test]
fn conv_random_shapes_every_epilogue_fp16_and_bf16() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |lo: i64, hi: i64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        lo + (seed % (hi - lo) as u64) as i64
    };
    let cases = [
        ("fp16", "relu", true, var(64, 128, 1, 2)),
        ("bf16", "silu", false, var(128, 64, 2, 2)),
    ];
    for (dt, act, residual, v) in cases {
        let k = [3, 5][next(0, 2) as usize];
        let c = Conv {
            dt,
            n: next(1, 3),
            c: 8 * next(1, 4),
            hw: next(5, 12),
            co: next(9, 40),
            k,
            stride: next(1, 3),
            pad: next(0, k / 2 + 2),
            dil: next(1, 3),
            act,
            residual,
        };
        if c.out() < 1 {
            continue;
        }
        eprintln!("{c:?} {v:?}");
        run_variants(&c.graph(), &[], false, &[v], c.rtol(), None, None);
    }
}

/// The gather's stores must be fenced for the async proxy before the consumers' `wgmma` reads
/// them: without `fence.proxy.async` the emulation reports it.
#[test]
fn conv_emulation_rejects_a_missing_proxy_fence() {
    let drop: &dyn Fn(&str) -> String = &|s| s.replace("dlc_fence_proxy_async();", "");
    let e = run_variants(
        &CONV.graph(),
        &[],
        false,
        &[var(64, 64, 1, 2)],
        1e-2,
        Some(drop),
        None,
    )
    .expect("an error");
    assert!(e.contains("without fence.proxy.async"), "{e}");
}

/// The benchmark's conv 3×3 (N=32, 64→64, 56×56, NCHW fp16, `bench/gpu/graphs/conv3x3.json`)
/// for sm90: a tensor-core contraction (`wgmma` or `mma.sync`, whichever the model prices
/// lower: `cost::conv90` prices the gather producer); every wgmma point of its plan space
/// compiles for sm_90a without spills within the plan's registers, the PTX issues
/// `wgmma.mma_async` on the gathered image, the filter by `cp.async.bulk.tensor` and
/// `mbarrier` phases, the SASS `HGMMA` and no `HMMA`, and the gather producer's loop has no
/// more instructions than its price counts. For sm80 the same conv keeps `mma.sync`. The
/// fastest wgmma point's source is left in `CARGO_TARGET_TMPDIR/conv3x3_sm90_wgmma.cu`.
#[test]
fn conv3x3_compiles_for_sm90a_on_wgmma_without_spills() {
    if !nvrtc_here() {
        return;
    }
    use dlc_egg::cuda::{compile, CompileOptions};
    use dlc_egg::target::Arch;
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/bench/gpu/graphs/conv3x3.json"
    ))
    .expect("the benchmark graph");
    let sm80 = OptimizeOptions {
        target: Arch::Sm80.target(),
        ..OptimizeOptions::default()
    };
    let o80 = optimize(&lowered(&text), &sm80).expect("optimizes for sm80");
    let g80 = generate(&o80).expect("generates");
    assert!(g80.emitted.source.contains("contraction_mma kernel"));
    assert!(
        !g80.emitted.source.contains("dlc_wgmma_m64n"),
        "sm80 keeps mma.sync"
    );
    let (_, o, _) = optimized(&text, &[], false);
    let regions = tensor_core_regions(&o);
    assert_eq!(regions.len(), 1, "the conv is planned on tensor cores");
    let r = regions[0];
    let planned = choose_plan(r, &o.model).expect("plan");
    let points = wgmma_points(&planned, &o);
    for (i, choice) in points.iter().enumerate() {
        let k = emit::kernel_of(r, choice, &o.model.target).expect("the kernel builds");
        let (source, _) = with_kernel(&o, r, &k);
        let c = compile(&source, Arch::Sm90, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{:?}: {e}", choice.best.knobs));
        let ck = c
            .kernels
            .iter()
            .find(|x| x.name == k.name)
            .expect("compiled");
        eprintln!(
            "{:?}: {} registers (plan {}), {} spill bytes",
            choice.best.knobs, ck.registers, choice.best.resources.regs_per_thread, ck.spill_bytes
        );
        assert_eq!(ck.spill_bytes, 0, "{:?}", choice.best.knobs);
        assert!(
            ck.registers <= choice.best.resources.regs_per_thread,
            "{:?}: the plan's register estimate holds",
            choice.best.knobs
        );
        if i > 0 {
            continue;
        }
        check_fastest_point(&source, &c, &k.name, choice);
    }
}

/// One wgmma point of `planned`'s space per tile and warpgroup split (the stages and vector
/// widths change neither the main loop's registers nor the gather), the fastest first.
fn wgmma_points(planned: &PlanChoice, o: &Optimized) -> Vec<PlanChoice> {
    let mut cands = dlc_egg::plan::space::candidates(&planned.work, &o.model.target);
    let time = |c: &dlc_egg::plan::space::Candidate| {
        dlc_egg::cost::roofline::estimate(&planned.work, &c.knobs, &c.resources, &o.model.target)
            .time_s
    };
    cands.sort_by(|a, b| time(a).total_cmp(&time(b)));
    let mut points = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for c in cands {
        let Knobs::Contraction {
            algo: Algo::Wgmma,
            bm,
            bn,
            warps_m,
            ..
        } = c.knobs
        else {
            continue;
        };
        if c.verdict.is_ok() && seen.insert((bm, bn, warps_m)) {
            let mut p = planned.clone();
            p.best.knobs = c.knobs;
            p.best.resources = c.resources;
            points.push(p);
        }
    }
    points
}

/// The fastest point's source (left in `CARGO_TARGET_TMPDIR`), its PTX (wgmma, TMA, mbarrier,
/// the proxy fence) and, where cuobjdump is here, its SASS (`HGMMA`, no `HMMA`, the gather
/// producer's loop within its price).
fn check_fastest_point(source: &str, c: &Compiled, kernel: &str, choice: &PlanChoice) {
    use dlc_egg::cuda::CompileOptions;
    use dlc_egg::target::Arch;
    std::fs::write(
        concat!(env!("CARGO_TARGET_TMPDIR"), "/conv3x3_sm90_wgmma.cu"),
        source,
    )
    .expect("writes the source");
    let ptx =
        dlc_egg::cuda::nvrtc::ptx(source, Arch::Sm90, &CompileOptions::default()).expect("ptx");
    for needle in [
        "wgmma.mma_async.sync.aligned.m64n",
        "cp.async.bulk.tensor.2d",
        "mbarrier.try_wait.parity",
        "fence.proxy.async",
    ] {
        assert!(ptx.contains(needle), "the PTX has no `{needle}`");
    }
    if let Ok(sass) = c.sass() {
        let s = sass.iter().find(|s| s.name == *kernel).expect("its SASS");
        eprintln!("SASS {} HGMMA, {} instructions", s.hgmma, s.instructions);
        assert!(s.hgmma > 0);
        assert_eq!(s.hmma, 0, "no mma.sync");
        // The gather producer's k-loop: the loop without HGMMA, the longest.
        let producer = s
            .loops
            .iter()
            .filter(|l| l.mma == 0)
            .map(|l| l.instructions)
            .max()
            .expect("the producer's loop");
        let Knobs::Contraction { bm, bk, .. } = choice.best.knobs else {
            unreachable!()
        };
        let priced = dlc_egg::cost::conv90::EMITTED.instrs_per_elem * (bm * bk) as f64
            / dlc_egg::cost::conv90::PRODUCERS;
        eprintln!("producer loop: {producer} SASS instructions, priced {priced}");
        assert!(
            f64::from(producer) <= priced * 1.05,
            "{producer} > {priced}"
        );
    }
}
