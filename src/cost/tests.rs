//! Cost-model unit tests: the roofline against hand-computed numbers (the seed 000 GEMM and a
//! memory-bound elementwise kernel), the seed's plan choice, the work analysis, and every STOP
//! condition.

use super::roofline::{estimate, Bound};
use super::work::{analyze, Pattern, Role, Shape};
use super::*;
use crate::ir::region::Region;
use crate::plan::space::{candidates_with, Algo, Knobs, Stop};
use crate::target::{Arch, Target};
use std::collections::BTreeMap;

fn seed_gemm() -> Region {
    Region::from_json_str(include_str!("../../tests/region/gemm.json"))
        .expect("the seed's GEMM region parses")
}

/// The seed's GEMM with concrete sizes `M = 64, K = 64, N = 128` (multiples of 8: both
/// operands are plain, 16-byte aligned reads that `cp.async` copies).
fn seed_gemm_concrete() -> Region {
    let text = include_str!("../../tests/region/gemm.json")
        .replace("\"size\":\"M\"", "\"size\":64")
        .replace("\"size\":\"N\"", "\"size\":128")
        .replace("[\"M\",\"K\"]", "[64,64]")
        .replace("[\"K\",\"N\"]", "[64,128]")
        .replace("[\"M\",\"N\"]", "[64,128]")
        .replace("[\"N\"]", "[128]");
    assert!(!text.contains("\"M\"") && !text.contains("\"N\""), "{text}");
    Region::from_json_str(&text).expect("the concrete GEMM region parses")
}

fn seed_attention() -> Region {
    Region::from_json_str(include_str!("../../tests/region/attention.json"))
        .expect("the seed's attention region parses")
}

fn model(target: Target, bind: &[(&str, i64)]) -> CostModel {
    CostModel {
        bindings: bind
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<BTreeMap<_, _>>(),
        default_size: 1024,
        target,
        regions: None,
    }
}

/// The seed 000 GEMM at the shapes of `examples/gemm_bias_relu.json` (M=64, K=64, N=128).
fn example_gemm(arch: Arch) -> CostModel {
    model(arch.target(), &[("M", 64), ("K", 64), ("N", 128)])
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-30)
}

#[test]
fn gemm_work_is_read_off_the_seed_region() {
    let w = analyze(&seed_gemm(), &example_gemm(Arch::Sm80)).expect("analyzes");
    let Shape::Contraction(g) = &w.shape else {
        panic!("{:?}", w.shape)
    };
    assert_eq!((g.m, g.n, g.k, g.batch), (64.0, 128.0, 64.0, 1.0));
    assert_eq!(g.pattern, Pattern::Matmul);
    assert!(g.tensor_cores);
    assert_eq!(
        (g.axes.m.clone(), g.axes.n.clone()),
        (vec!["m".to_string()], vec!["n".to_string()])
    );
    assert_eq!(g.epilogue, vec!["add", "relu"]);
    assert_eq!(g.row_passes, 1);
    // The epilogue: add and relu once per output element; the product is the template's.
    assert_eq!(w.ops.simt, 2.0 * 64.0 * 128.0);
    assert_eq!(w.ops.tensor, 0.0);
    let roles: Vec<Role> = w.inputs.iter().map(|i| i.role).collect();
    assert_eq!(roles, vec![Role::A, Role::B, Role::Other]);
    assert_eq!(w.out_bytes, 64.0 * 128.0 * 2.0);
}

/// Seed 000 §5.2: `[64,64,32]` for the seed's GEMM, on both architectures, at the example's
/// shapes and at a tail shape (96×80×72). The region's sizes are symbols (`M`, `K`, `N`): no
/// row length is provably a multiple of 8, so the tensor-core template tests them at run time
/// and copies with `cp.async` when they are (`contraction_mma::operand_staging`), and the
/// plan is asynchronous, as the seed's is. The same GEMM with concrete sizes takes
/// `cp.async` and 4 stages on both (on sm90 wgmma is priced slower at this size).
#[test]
fn seed_gemm_gets_the_seeds_plan() {
    for arch in [Arch::Sm80, Arch::Sm90] {
        for (m, k, n) in [(64, 64, 128), (96, 72, 80)] {
            let c = choose_plan(
                &seed_gemm(),
                &model(arch.target(), &[("M", m), ("K", k), ("N", n)]),
            )
            .expect("plans");
            assert_eq!(
                c.best.plan.tile,
                vec![64, 64, 32],
                "{arch:?} {m}x{k}x{n}: {}",
                c.best.plan.summary()
            );
            assert!(c.best.plan.async_.enable, "{arch:?} {m}x{k}x{n}");
            assert_eq!(c.best.plan.barrier_model, "cp_async_group");
            assert_eq!(c.best.plan.arch, arch);
            assert_eq!(c.best.plan.algo_choice["matmul"], "mma_sync");
            for hint in ["A_swizzle", "B_swizzle"] {
                assert_eq!(c.best.plan.layout_hints[hint], "xor_128b", "{hint}");
            }
        }
        let c = choose_plan(&seed_gemm_concrete(), &model(arch.target(), &[])).expect("plans");
        // Concrete sizes are TMA-addressable, but a GEMM on 2 SMs is latency-bound and sm90
        // runs it on mma_sync too: measured on an H100, the 96×80×72 GEMM took 7.4 µs on the
        // mma_sync kernel and 11.9 µs on wgmma (bench/results/gpu-h100-2026-11-26/
        // call1-gpu-sm80.md, call1-gpu-native.md).
        assert_eq!(c.best.plan.algo_choice["matmul"], "mma_sync", "{arch:?}");
        assert_eq!(c.best.plan.tile, vec![64, 64, 32], "{arch:?}");
        // Two k-iterations: 4 stages keep every load of the k-loop in flight at once.
        assert_eq!(c.best.plan.stages, 4, "{arch:?}: {}", c.best.plan.summary());
        assert!(c.best.plan.async_.enable, "{arch:?}");
    }
}

/// The roofline of `[64,64,32]`, stages 2, 8 warps (16×32), 16-byte vectors, async, on A100,
/// computed by hand from seed 001 §11's formula.
#[test]
fn seed_gemm_roofline_by_hand() {
    let t = Target::a100_sxm4_80gb();
    let m = example_gemm(Arch::Sm80);
    let w = analyze(&seed_gemm(), &m).expect("analyzes");
    let knobs = Knobs::Contraction {
        algo: Algo::MmaSync,
        bm: 64,
        bn: 64,
        bk: 32,
        stages: 2,
        warps_m: 4,
        warps_n: 2,
        vec_bytes: 16,
        async_: true,
        row_resident: false,
        splits: 1,
    };
    let res = crate::plan::space::resources(&knobs, &w, &t);
    // Registers (plan::regs): 16·32/32 = 16 accumulators, 2·(1·4 + 4·2) = 24 fragment
    // registers, one cp.async offset per 16-byte chunk a thread copies (A and B: 64·32·2 B /
    // 16 B / 256 threads = 1 each), 2·2 stage bases, 40 more: 86.
    assert_eq!(res.regs_per_thread, 86);
    assert_eq!(res.threads, 256);
    // Shared memory: 2 stages · 32 · (64·2 + 64·2) bytes.
    assert_eq!(res.smem_bytes, 16384);
    // CTAs per SM: registers 65536 / (86·256) = 2 (ptxas rounds to 88: still 2); shared
    // memory 10; threads 8.
    assert_eq!((res.ctas_per_sm, res.limited_by), (2, "registers"));
    let e = estimate(&w, &knobs, &res, &t);

    // Tiles: ⌈64/64⌉ · ⌈128/64⌉ = 2 CTAs, ⌈64/32⌉ = 2 k-iterations; one wave on 2 of 108
    // SMs, 8 warps each (latency hidden), full last wave: occ = 2/108.
    let occ = 2.0 / 108.0;
    assert!(close(e.occupancy, occ), "{}", e.occupancy);
    assert_eq!(e.waves, 1.0);
    // eff = 2 k-iterations of `iter` cycles at peak over the first tile's 700-cycle latency
    // plus 2 iterations of max(iter / 0.9 (mma.sync on A100) + 40 (barrier), 700 / 1 tile in
    // flight); one k-iteration is 2·64·64·32 FLOP at 312e12/(108·1.41e9) FLOP per clock per SM.
    let per_clock: f64 = 312e12 / (108.0 * 1.41e9);
    let iter = 2.0 * 64.0 * 64.0 * 32.0 / per_clock;
    let eff = 2.0 * iter / (700.0 + 2.0 * (iter / 0.9 + 40.0).max(700.0));
    assert!(close(e.efficiency, eff));
    // FLOPs: the product 2·64·128·64 (no tail), the epilogue 2 per output element.
    let core = 2.0 * 64.0 * 128.0 * 64.0;
    let simt = 2.0 * 64.0 * 128.0;
    let compute = core / (312e12 * occ * eff) + simt / (19.5e12 * occ);
    assert!(close(e.compute_s, compute), "{} vs {compute}", e.compute_s);
    // Bytes: A is loaded by both N tiles (2·8192), B once (16384) through L2; DRAM reads A, B
    // and bias once (24832) and writes C (16384).
    let (a, b, bias, c) = (8192.0, 16384.0, 256.0, 16384.0);
    assert!(close(e.bytes, a + b + bias + c));
    assert_eq!(e.l2_bytes, 2.0 * a + b + bias + c);
    // The seed's B is K×N with N fastest: every operand is read along an axis of its own.
    assert!(w.inputs.iter().all(|i| i.contiguous), "{:?}", w.inputs);
    let load = ((a + b + bias) / 2039e9).max((2.0 * a + b) / (5120.0 * 1.41e9)) / occ;
    assert!(close(e.memory_s, load));
    let epilogue = c / (2039e9 * occ);
    assert!(close(e.epilogue_s, epilogue));
    // Async: the store of one tile overlaps the next tile's loads.
    assert!(close(e.overlap_gain_s, load.min(epilogue)));
    let time = compute.max(load) + epilogue - load.min(epilogue) + 1.5e-6;
    assert!(close(e.time_s, time), "{} vs {time}", e.time_s);
    assert_eq!(
        e.bound,
        if compute >= load {
            Bound::Compute
        } else {
            Bound::Memory
        }
    );
}

/// A relu over 2²⁰ fp16 values: memory-bound, the roofline's memory term by hand.
#[test]
fn elementwise_relu_is_memory_bound_by_hand() {
    let text = r#"{"region": {"name": "relu", "iters": [{"name": "i", "size": 1048576}],
        "inputs": [{"name": "X", "dtype": "fp16", "memref": {"shape": [1048576], "alignment": 128,
            "noalias": true, "layout": {"kind": "row_major"}}}],
        "outputs": [{"name": "Y", "dtype": "fp16", "memref": {"shape": [1048576], "alignment": 128,
            "noalias": true, "layout": {"kind": "row_major"}}, "materialize": "gmem"}],
        "lets": [{"let": "y", "expr": {"relu": [{"read": {"tensor": "X", "map": ["i"]}}]}}],
        "yield": [{"from": "y", "to": "Y", "cast": "fp16"}]}}"#;
    let region = Region::from_json_str(text).expect("parses");
    let t = Target::h100_sxm5();
    let m = model(t.clone(), &[]);
    let w = analyze(&region, &m).expect("analyzes");
    assert!(matches!(w.shape, Shape::Elementwise { elems } if elems == 1048576.0));
    // 128 threads × 1 item × 8 fp16 lanes = 1024 elements per CTA: 1024 CTAs; 48 registers;
    // 10 CTAs per SM by registers; 1320 slots, one wave over all 132 SMs, 32 warps per SM.
    let knobs = Knobs::Elementwise {
        block: 128,
        items: 1,
        vec_bytes: 16,
    };
    let res = crate::plan::space::resources(&knobs, &w, &t);
    assert_eq!((res.regs_per_thread, res.ctas_per_sm), (48, 10));
    let e = estimate(&w, &knobs, &res, &t);
    assert_eq!((e.occupancy, e.waves, e.ctas), (1.0, 1.0, 1024.0));
    let bytes = 2.0 * 1048576.0;
    assert!(close(e.memory_s, bytes / 3.35e12));
    assert!(close(e.epilogue_s, bytes / 3.35e12));
    assert!(close(e.compute_s, 1048576.0 / 66.9e12));
    assert_eq!(e.bound, Bound::Memory);
    assert!(close(e.time_s, 2.0 * bytes / 3.35e12 + 1.5e-6));
    // And the chosen plan is that fast (nothing beats the memory roof).
    let c = choose_plan(&region, &m).expect("plans");
    assert!(c.best.estimate.time_s <= e.time_s * (1.0 + 1e-12));
    assert_eq!(c.best.plan.vectorize.width, 8);
}

fn stops(region: &Region, m: &CostModel) -> Vec<Stop> {
    let w = analyze(region, m).expect("analyzes");
    // With the wgmma points, which the code generator does not emit yet (`WGMMA_EMITTED`).
    candidates_with(&w, &m.target, true)
        .into_iter()
        .filter_map(|c| c.verdict.err())
        .collect()
}

#[test]
fn stop_sm90_shape_rejects_wgmma_tiles_off_the_tma_swizzle() {
    let s = stops(&seed_gemm(), &example_gemm(Arch::Sm90));
    assert!(s
        .iter()
        .any(|x| matches!(x, Stop::Sm90Shape { why } if why.contains("128-byte TMA swizzle"))));
    // sm80 has no wgmma points at all.
    let s = stops(&seed_gemm(), &example_gemm(Arch::Sm80));
    assert!(!s.iter().any(|x| matches!(x, Stop::Sm90Shape { .. })));
}

#[test]
fn stop_vector_widths_shrinking_or_misaligned() {
    // K = 64 fp16: 128-byte rows take 16-byte vectors; 8 and 4 shrink them.
    let s = stops(&seed_gemm(), &example_gemm(Arch::Sm80));
    assert!(s.iter().any(|x| matches!(
        x,
        Stop::VectorShrinks {
            from_bytes: 16,
            to_bytes: 8
        }
    )));
    // K = 3 fp16: 6-byte rows split into 2-byte vectors only; 16, 8 and 4 are misaligned.
    let m = model(Arch::Sm80.target(), &[("M", 64), ("K", 3), ("N", 64)]);
    let s = stops(&seed_gemm(), &m);
    assert!(s.iter().any(|x| matches!(
        x,
        Stop::Misaligned {
            width_bytes: 16,
            extent_bytes: 6
        }
    )));
    let c = choose_plan(&seed_gemm(), &m).expect("plans");
    assert_eq!(c.best.plan.vectorize.width, 1);
}

#[test]
fn stop_shared_memory_over_80_percent() {
    // The seed's fp32 attention rows at N = 4096: the SIMT row-resident tile [64, 4096, 32]
    // needs 32 · (64 + 1 + 4096 + 1) · 4 bytes (one fp32 buffer of each operand, rows padded).
    let m = model(
        Arch::Sm80.target(),
        &[("B", 1), ("H", 1), ("M", 256), ("N", 4096), ("D", 64)],
    );
    let s = stops(&seed_attention(), &m);
    assert!(s.iter().any(|x| matches!(
        x,
        Stop::SmemOver {
            smem_bytes: 532736,
            ..
        }
    )));
    // No tiled template emits this region alone (a contraction with a row epilogue): by
    // itself it runs as the pointwise kernel and is priced so.
    let alone = choose_plan(&seed_attention(), &m).expect("plans");
    assert_eq!(alone.best.plan.template, "elementwise");
    // The extractor prices it as the scores-and-softmax part of a fused attention kernel: the
    // multi-pass plans remain, the row epilogue's 3 passes (max, then sum, then divide).
    let c = choose_plan_for_extraction(&seed_attention(), &m).expect("plans");
    let Shape::Contraction(g) = &c.work.shape else {
        panic!()
    };
    assert_eq!((g.row_passes, g.row_extent), (3, Some(4096.0)));
    assert!(
        c.best.plan.algo_choice["attention"].contains("3pass"),
        "{:?}",
        c.best.plan
    );
}

#[test]
fn stop_register_spill_and_one_cta_per_sm() {
    let m = model(
        Arch::Sm90.target(),
        &[("M", 4096), ("K", 4096), ("N", 4096)],
    );
    let s = stops(&seed_gemm(), &m);
    // wgmma [128,256,64] with one warpgroup: 32·256/32 = 256 accumulators per thread.
    assert!(s.iter().any(|x| matches!(
        x,
        Stop::RegisterSpill {
            regs: 304,
            limit: 255
        }
    )));
    // mma_sync [128,128,32] with 4 warps (64×64 each): 128 + 48 + 40 registers, 1 CTA per SM.
    assert!(s.iter().any(|x| matches!(x, Stop::OneCtaPerSm { .. })));
    // At 4096³ on H100 the fastest survivor of the full space is a wgmma plan.
    let c =
        choose_plan_for(analyze(&seed_gemm(), &m).expect("analyzes"), &m.target).expect("plans");
    assert_eq!(c.best.plan.algo_choice["matmul"], "wgmma");
    let w = analyze(&seed_gemm(), &m).expect("analyzes");
    let fastest_wgmma = candidates_with(&w, &m.target, true)
        .into_iter()
        .filter(|c| c.verdict.is_ok())
        .map(|c| {
            let e = crate::cost::roofline::estimate(&w, &c.knobs, &c.resources, &m.target);
            (e.time_s, c.knobs)
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .expect("a wgmma plan survives");
    assert!(
        matches!(
            fastest_wgmma.1,
            Knobs::Contraction {
                algo: Algo::Wgmma,
                ..
            }
        ),
        "{:?}",
        fastest_wgmma.1
    );
}

#[test]
fn the_plan_space_is_small_and_stopped_points_are_reported() {
    // One algorithm on sm80: 4 tiles × 4 pipelines × 2 warp tiles × 4 widths (16 to 2 bytes).
    let c = choose_plan(&seed_gemm_concrete(), &example_gemm(Arch::Sm80)).expect("plans");
    assert_eq!(c.report().space, 128);
    // With symbolic sizes both operands are copied under a run-time alignment test: every
    // pipeline is emitted as priced.
    let c = choose_plan(&seed_gemm(), &example_gemm(Arch::Sm80)).expect("plans");
    let r = c.report();
    assert_eq!(r.space, 128);
    assert!(r.priced >= 2 && r.priced < r.space, "{}", r.priced);
    assert!(r.rejected.iter().any(|x| x.reason.starts_with("slower")));
    assert!(r.rejected.iter().any(|x| x.reason.starts_with("STOP")));
}

#[test]
fn times_saturate_and_order() {
    assert_eq!(Time::from_secs(1e-6), Time(1_000_000));
    assert_eq!(Time::from_secs(f64::INFINITY), Time::INFINITY);
    assert_eq!(Time::from_secs(f64::NAN), Time::ZERO);
    assert_eq!(Time::INFINITY.plus(Time(1)), Time::INFINITY);
    assert!(Time(1) < Time(2) && Time(2) < Time::INFINITY);
    assert_eq!(Time(1_500_000).to_string(), "1.500 µs");
}

/// A region spelling attention as one kernel (P·V whose P is QKᵀ's softmax), with `o`'s
/// operand reading the scores through `let_expr` (inline, or a let of its own).
fn attention_in_one_region(scores_let: bool) -> Region {
    // The key axis: the reduce's own `j` inline; the iter `k` in the let of its own.
    let key = if scores_let { "k" } else { "j" };
    let qk = format!(
        r#"{{"reduce": {{"op": "sum", "axes": ["d"], "extents": {{"d": 4}}, "dtype": "fp32",
                 "body": {{"mul": [{{"read": {{"tensor": "Q", "map": ["m", "d"]}}}}, {{"read": {{"tensor": "K", "map": ["{key}", "d"]}}}}]}}}}}}"#
    );
    let (lets, score) = if scores_let {
        (
            format!(r#"{{"let": "s", "expr": {qk}}},"#),
            r#""s""#.to_string(),
        )
    } else {
        (String::new(), qk)
    };
    let (iters, out) = if scores_let {
        (
            r#"[{"name": "m", "size": 8}, {"name": "k", "size": 8}, {"name": "n", "size": 4}]"#,
            "[8, 8, 4]",
        )
    } else {
        (
            r#"[{"name": "m", "size": 8}, {"name": "n", "size": 4}]"#,
            "[8, 4]",
        )
    };
    let text = format!(
        r#"{{"region": {{"name": "attn1", "iters": {iters},
        "inputs": [
          {{"name": "Q", "dtype": "fp16", "memref": {{"shape": [8, 4], "alignment": 128, "noalias": true, "layout": {{"kind": "row_major"}}}}}},
          {{"name": "K", "dtype": "fp16", "memref": {{"shape": [8, 4], "alignment": 128, "noalias": true, "layout": {{"kind": "row_major"}}}}}},
          {{"name": "V", "dtype": "fp16", "memref": {{"shape": [8, 4], "alignment": 128, "noalias": true, "layout": {{"kind": "row_major"}}}}}}],
        "outputs": [{{"name": "O", "dtype": "fp32", "memref": {{"shape": {out}, "alignment": 128, "noalias": true, "layout": {{"kind": "row_major"}}}}, "materialize": "gmem"}}],
        "lets": [{lets}
          {{"let": "o", "expr": {{"reduce": {{"op": "sum", "axes": ["j"], "extents": {{"j": 8}}, "dtype": "fp32",
             "body": {{"mul": [{{"exp": [{score}]}}, {{"read": {{"tensor": "V", "map": ["j", "n"]}}}}]}}}}}}}}],
        "yield": [{{"from": "o", "to": "O"}}]}}}}"#
    );
    Region::from_json_str(&text).expect("parses")
}

/// Attention as one region runs on no tiled template. Embedded inline (the scores recomputed
/// at every key of every output point) it is the compute-at nest's, its recomputation priced
/// (synthesis never builds it: the scores' index misses the iter `n`, `synth::compute_at`
/// rule 4); read through a let of its own it has no template at all.
#[test]
fn a_contraction_inside_a_contraction_operand_has_no_tiled_template() {
    let m = model(Arch::Sm90.target(), &[]);
    let nested = choose_plan(&attention_in_one_region(false), &m).expect("the nest");
    assert_eq!(nested.best.plan.template, "compute_at");
    match &nested.work.shape {
        Shape::ComputeAt(ca) => {
            assert_eq!((ca.points, ca.window, ca.producer_len), (32.0, 8.0, 4.0));
            assert_eq!(
                ca.producer_evals, 256.0,
                "recomputed for each of the 4 columns"
            );
        }
        other => panic!("{other:?}"),
    }
    let e = choose_plan(&attention_in_one_region(true), &m).expect_err("no template");
    assert!(
        matches!(e, PlanError::Work(work::WorkError::NestedContraction)),
        "{e}"
    );
}

/// The `wgmma` knobs `[128, 256, 64]` (two consumer warpgroups of 64 rows) with `stages`.
fn wgmma_128x256(stages: u32) -> Knobs {
    Knobs::Contraction {
        algo: Algo::Wgmma,
        bm: 128,
        bn: 256,
        bk: 64,
        stages,
        warps_m: 8,
        warps_n: 1,
        vec_bytes: 16,
        async_: true,
        row_resident: false,
        splits: 1,
    }
}

/// Calibration point (issue 21): the fp16 4096³ GEMM with bias and relu on the sm90 template's
/// measured plan, `wgmma [128,256,64] stages=2`, ran in 0.3102 ms on an H100 SXM (the plain
/// GEMM 0.3076 ms; bench/results/gpu-h100-2026-11-26/call1-gpu-native.md): the prediction is
/// within ±15 % of it. A deeper TMA ring is priced faster (3 stages, then 4: it fits in the
/// block's 227 KB, not STOPped by the 80 % margin of the register-staged templates).
#[test]
fn wgmma_gemm_4096_is_calibrated_on_the_h100_measurement() {
    let t = Target::h100_sxm5();
    let m = model(t.clone(), &[("M", 4096), ("K", 4096), ("N", 4096)]);
    let w = analyze(&seed_gemm(), &m).expect("analyzes");
    let price = |stages: u32| {
        let k = wgmma_128x256(stages);
        let res = crate::plan::space::resources(&k, &w, &t);
        estimate(&w, &k, &res, &t).time_s
    };
    let measured = 0.3102e-3;
    let two = price(2);
    assert!(
        (two / measured - 1.0).abs() <= 0.15,
        "2 stages: predicted {two:e} s, measured {measured:e} s"
    );
    let (three, four) = (price(3), price(4));
    assert!(four < three && three < two, "{two:e} {three:e} {four:e}");
    let four_stages = candidates_with(&w, &t, true)
        .into_iter()
        .find(|c| c.knobs == wgmma_128x256(4))
        .expect("the 4-stage point is in the grid");
    assert_eq!(four_stages.resources.smem_bytes, 196608);
    assert!(
        four_stages.verdict.is_ok(),
        "{:?}",
        four_stages.verdict.err()
    );
}

/// The SIMT micro-tile's shared-memory reads against its FMAs (`roofline::simt_smem_share`):
/// `32×32` over 128 threads (`4×2`: 6 reads for 8 FMAs a thread) keeps 0.31 of an H100 SM's
/// 137 FMA lanes a cycle busy, `64×64` over 128 (`8×4`) 0.62, `128×128` over 256 (`8×8`) 0.93;
/// A100's 64 lanes a cycle are fed fully from `8×4` on.
#[test]
fn simt_share_of_the_fma_pipe_is_set_by_the_micro_tile() {
    use super::roofline::simt_smem_share;
    let h100 = Arch::Sm90.target();
    let a100 = Arch::Sm80.target();
    let at = |bm, bn, threads, t: &Target| simt_smem_share(bm, bn, threads, t);
    // H100: 66.9 TFLOP/s over 132 SMs at 1.83 GHz, 138.5 FMA a cycle.
    let lanes = 66.9e12 / 2.0 / (132.0 * 1.83e9);
    assert!(close(at(32, 32, 128, &h100), 128.0 * 8.0 / lanes / 24.0));
    assert!(close(at(64, 64, 128, &h100), 128.0 * 32.0 / lanes / 48.0));
    assert!(close(
        at(128, 128, 256, &h100),
        256.0 * 64.0 / lanes / 128.0
    ));
    assert!(at(32, 32, 256, &h100) < at(32, 32, 128, &h100));
    assert!(at(64, 64, 256, &h100) < at(64, 64, 128, &h100));
    assert_eq!(at(64, 64, 128, &a100), 1.0);
    assert!(at(32, 32, 128, &a100) < 1.0);
}

/// The seed's GEMM in fp32 (the SIMT template's: no tensor cores).
fn seed_gemm_f32() -> Region {
    let text = include_str!("../../tests/region/gemm.json").replace("\"fp16\"", "\"fp32\"");
    Region::from_json_str(&text).expect("the fp32 GEMM region parses")
}

/// Split-K: a deep GEMM of few tiles (ResNet-18's last 3×3 convolution as a GEMM: `M = 49`,
/// `K = 4608`, `N = 512`: 32 tiles of 32×32 for 132 SMs) is planned on split SIMT tiles and
/// priced below its best unsplit plan; the split adds its fix-up to the price; a GEMM that
/// fills the GPU (`4096³`) has no split point.
#[test]
fn split_k_plans_deep_gemms_of_few_tiles() {
    use crate::plan::space::candidates;
    let deep = model(Arch::Sm90.target(), &[("M", 49), ("K", 4608), ("N", 512)]);
    let c = choose_plan(&seed_gemm_f32(), &deep).expect("plans");
    assert!(c.best.plan.split_k > 1, "{}", c.best.plan.summary());
    assert!(c.best.plan.summary().contains("split_k="));
    let Knobs::Contraction { splits, .. } = c.best.knobs else {
        panic!("contraction knobs")
    };
    assert_eq!(u64::from(c.best.plan.split_k), splits);
    let mut unsplit = c.best.clone();
    if let Knobs::Contraction { splits, .. } = &mut unsplit.knobs {
        *splits = 1;
    }
    let t = Arch::Sm90.target();
    let one = estimate(&c.work, &unsplit.knobs, &unsplit.resources, &t);
    let split = estimate(&c.work, &c.best.knobs, &c.best.resources, &t);
    assert!(
        split.time_s < 0.5 * one.time_s,
        "split {} s vs unsplit {} s",
        split.time_s,
        one.time_s
    );
    let fix = super::roofline::split_fixup_s(splits as f64, 32.0 * 64.0, &t);
    assert!(fix > 0.0 && super::roofline::split_fixup_s(1.0, 4096.0, &t) == 0.0);
    let big = model(
        Arch::Sm90.target(),
        &[("M", 4096), ("K", 4096), ("N", 4096)],
    );
    let c = choose_plan(&seed_gemm_f32(), &big).expect("plans");
    assert!(candidates(&c.work, &t)
        .iter()
        .all(|k| !matches!(k.knobs, Knobs::Contraction { splits, .. } if splits > 1)));
}
