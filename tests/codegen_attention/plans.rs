//! The fused kernel's plans: every head dim and every unstopped plan compiled by NVRTC without
//! spills, the plan priced as emitted and against the H100 measurements, the score scale folded
//! into the exponent, and every warp layout against the reference.

use super::*;

/// NVRTC (ptxas included, `--warn-on-spills -Werror`) compiles the fused kernel planned at
/// S = 2048 for sm_80 and sm_90a at every head dim, without spills; prints its registers.
#[test]
fn every_head_dim_compiles_without_spills_for_sm80_and_sm90a() {
    use dlc_egg::cuda::{compile, toolchain, CompileOptions};
    use dlc_egg::target::Arch;
    if let Err(e) = toolchain() {
        if std::env::var("DLC_SKIP_NVRTC").is_ok_and(|v| v == "1") {
            eprintln!("skipping (DLC_SKIP_NVRTC=1): {e}");
            return;
        }
        panic!("{e} (or set DLC_SKIP_NVRTC=1 to skip the NVRTC tests)");
    }
    let mut failures = Vec::new();
    for d in [32, 64, 80, 96, 128, 256] {
        // The program optimized as by default (for sm90) at S = 2048, where every head dim
        // forms the attention pair (d = 80 and 256 too since the pair is priced with the first
        // kernel's share, `extract::own_cost::first_share`; at S = 64, for sm90, d = 128 and
        // 256 stay two pointwise kernels: see `every_head_dim_matches_the_reference`), then
        // planned and emitted for each target.
        let p = lowered(&graph(d, d, "fp16", true, None).replace("\"S\": 64", "\"S\": 2048"));
        let o = optimized(&p);
        for arch in [Arch::Sm80, Arch::Sm90] {
            let model = dlc_egg::extract::kernels::CostModel {
                target: arch.target(),
                bindings: bindings(1, 16, 2048),
                ..o.model.clone()
            };
            let e = plan_and_emit(&o.program, &model).expect("emits").emitted;
            let launch = e
                .manifest
                .steps
                .iter()
                .find_map(|s| match s {
                    ManifestStep::Launch(l) if l.template == "attention" => Some(l),
                    _ => None,
                })
                .unwrap_or_else(|| {
                    panic!(
                        "d = {d}, {arch:?}: no attention launch: {:?}",
                        launches(&e.manifest)
                    )
                });
            assert!(e.source.contains("dlc_mma_m16n8k16_f16("), "d = {d}");
            match compile(&e.source, arch, &CompileOptions::default()) {
                Ok(c) => {
                    let k = c
                        .kernel(&launch.kernel)
                        .unwrap_or_else(|| panic!("d = {d}: {:?}", c.kernels));
                    eprintln!(
                        "d = {d}, {arch:?}: {} ({} registers, {} B spilled, {} B dynamic smem)",
                        launch.plan.summary(),
                        k.registers,
                        k.spill_bytes,
                        launch.dyn_smem_bytes
                    );
                    assert_eq!(k.spill_bytes, 0);
                }
                Err(err) => failures.push(format!("d = {d}, {arch:?}: {err}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every point of the attention plan space that the model does not stop (registers, shared
/// memory) compiles without spills for sm_80 and sm_90a at every head dim, causal or not, with
/// at most the registers the model estimates (up to 9 more, see the TODO below): so no plan the
/// cost model can choose spills. About two minutes of NVRTC (up to 144 compilations): run with `cargo test --release --test codegen_attention -- --ignored`.
#[test]
#[ignore]
fn every_unstopped_plan_compiles_without_spills() {
    use dlc_egg::codegen::gpu::render;
    use dlc_egg::cost::attention::{registers, space_for};
    use dlc_egg::cuda::{compile, toolchain, CompileOptions};
    use dlc_egg::target::Arch;
    if toolchain().is_err() && std::env::var("DLC_SKIP_NVRTC").is_ok_and(|v| v == "1") {
        return;
    }
    let mut failures = Vec::new();
    // `DLC_ATTENTION_DUMP=DIR` also writes each point's source to DIR (for `cuobjdump -sass`).
    let dump = std::env::var("DLC_ATTENTION_DUMP").ok();
    for (d, causal) in [32, 64, 80, 96, 128, 256]
        .into_iter()
        .flat_map(|d| [(d, true), (d, false)])
    {
        // At S = 2048 (at S = 64, d = 128 and 256 stay two pointwise kernels).
        let text = graph(d, d, "fp16", causal, None).replace("\"S\": 64", "\"S\": 2048");
        let p = lowered(&text);
        let o = optimized(&p);
        let rs = regions(&o.program);
        let pair = attention::pair(rs[0], rs[1]).expect("the pair matches");
        for arch in [Arch::Sm80, Arch::Sm90] {
            let t = arch.target();
            for plan in space_for(&pair, &t) {
                let est = registers(&plan, d, d);
                // (With the dump, the stopped points too: their registers calibrate the model.)
                if dump.is_none() && est > u64::from(t.regs_per_thread)
                    || plan.smem_bytes(d, d) > u64::from(t.smem_per_block)
                {
                    continue;
                }
                let k = attention::build(&pair, &plan, arch).expect("builds");
                let src = format!(
                    "#include \"{}\"\n{}",
                    dlc_egg::codegen::HEADER_NAME,
                    render::kernel(&k)
                );
                if let Some(dir) = &dump {
                    let file = format!(
                        "{dir}/d{d}_{}_{arch:?}_r{}_bn{}_{}.cu",
                        if causal { "causal" } else { "full" },
                        plan.rows,
                        plan.bn,
                        if plan.q_in_regs { "qreg" } else { "qsmem" }
                    );
                    std::fs::write(&file, &src).expect("writes the dump");
                }
                match compile(&src, arch, &CompileOptions::default()) {
                    Ok(c) => {
                        let regs = c.kernels[0].registers;
                        eprintln!(
                            "d = {d}, causal = {causal}, {arch:?}, rows = {}, bn = {}, \
                             q_in_regs = {}: {regs} registers (model {est})",
                            plan.rows, plan.bn, plan.q_in_regs
                        );
                        // TODO(issue 15): at D = 80 and 96 with BN = 128 (Q in shared
                        // memory) ptxas takes up to 9 registers more than the model (the
                        // staged epilogue); printed, not yet failed on.
                        if u64::from(regs) > est + 9 {
                            failures.push(format!(
                                "d = {d}, causal = {causal}, {arch:?}, {plan:?}: {regs} \
                                 registers > the model's {est}"
                            ));
                        }
                    }
                    Err(e) => failures.push(format!("d = {d}, {arch:?}, {plan:?}: {e}")),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The fused kernel's plan: template `attention`, one algorithm, tile `[BM, BN, D]`, the knobs
/// the kernel is built from; a causal mask halves the FLOPs priced (the skipped key tiles).
#[test]
fn the_attention_plan_is_priced_as_emitted() {
    use dlc_egg::codegen::templates::attention::AttentionPlan;
    use dlc_egg::cost::attention::{choose_attention_plan, ALGO};
    let flops = |causal: bool| {
        let p = lowered(&graph(64, 64, "fp16", causal, None));
        let o = optimized(&p);
        let rs = regions(&o.program);
        let pair = attention::pair(rs[0], rs[1]).expect("the pair matches");
        let model = dlc_egg::extract::kernels::CostModel {
            bindings: bindings(2, 16, 2048),
            ..o.model.clone()
        };
        let c = choose_attention_plan(&pair, &model).expect("plans");
        let plan = &c.best.plan;
        assert_eq!(plan.template, "attention");
        assert_eq!(
            plan.algo_choice.get("attention").map(|s| s.as_str()),
            Some(ALGO)
        );
        let ap = AttentionPlan::of_priced(&c.best).expect("attention knobs");
        assert_eq!(plan.tile, vec![ap.bm, ap.bn, 64]);
        assert_eq!(c.best.resources.threads as u64, ap.threads());
        let k = attention::build(&pair, &ap, model.target.arch).expect("builds");
        assert_eq!(k.launch.block[0] as u64, ap.threads());
        assert_eq!(
            u64::from(k.launch.dyn_smem_bytes),
            ap.smem_bytes(64, 64),
            "the priced shared memory is the kernel's"
        );
        // 4·B·H·M·N·D at most, padded to whole tiles.
        let dense = 4.0 * 32.0 * 2048.0 * 2048.0 * 64.0;
        (c.best.estimate.flops, dense)
    };
    let (full, dense) = flops(false);
    assert_eq!(full, dense, "S = 2048 has no tails");
    let (causal, _) = flops(true);
    let ratio = causal / full;
    assert!(
        (0.5..0.55).contains(&ratio),
        "causal / full FLOPs = {ratio}"
    );
}

/// The causal fp16 attention of head dim `d` at the measured shape (B = 8, H = 16, S = 2048):
/// its matched region pair and the sm90 cost model bound to that shape, handed to `f`.
fn with_measured_pair<R>(
    d: u64,
    f: impl FnOnce(&attention::AttentionPair, &dlc_egg::extract::kernels::CostModel) -> R,
) -> R {
    use dlc_egg::target::Arch;
    let text = graph(d, d, "fp16", true, None).replace("\"S\": 64", "\"S\": 2048");
    let p = lowered(&text);
    let o = optimized(&p);
    let rs = regions(&o.program);
    let pair = attention::pair(rs[0], rs[1]).expect("the pair matches");
    let model = dlc_egg::extract::kernels::CostModel {
        bindings: bindings(8, 16, 2048),
        target: Arch::Sm90.target(),
        ..o.model.clone()
    };
    f(&pair, &model)
}

/// The attention price against the H100 measurements of 2026-11-26
/// (`bench/results/gpu-h100-2026-11-26/call1-gpu-native.md`: causal B = 8, H = 16, S = 2048,
/// fp16, sm90 build, `k0_div_reduce_exp2_mul_k1_reduce_mul` 0.3015 ms at d = 64 with plan
/// `[64, 64, 64]` and 0.6353 ms at d = 128 with `[64, 32, 128]`, `Q` in registers both): the
/// plans measured, priced with the instruction count of the kernel measured
/// (`MEASURED_OPS_PER_SCORE`), are within 10 % of the times; the kernel emitted now (fewer
/// instructions per score: the scale folded into the exponent's FFMA) is priced faster, and the
/// model picks a plan at least as fast.
#[test]
fn the_attention_price_matches_the_h100_measurements() {
    use dlc_egg::codegen::templates::attention::AttentionPlan;
    use dlc_egg::cost::attention::{choose_attention_plan, estimate, issue, MEASURED};
    for (d, bn, measured_ms) in [(64, 64, 0.3015), (128, 32, 0.6353)] {
        with_measured_pair(d, |pair, model| {
            let plan = AttentionPlan {
                bm: 64,
                rows: 16,
                bn,
                stages: 2,
                async_: true,
                q_in_regs: true,
            };
            let then = estimate(pair, &plan, model, MEASURED).expect("prices");
            let now = estimate(pair, &plan, model, issue(pair)).expect("prices");
            let best = choose_attention_plan(pair, model).expect("plans");
            let ms = |t: f64| t * 1e3;
            eprintln!(
                "d = {d}: measured {measured_ms} ms, priced {:.4} ms (kernel measured), {:.4} ms \
                 (kernel now), chosen {:?} {:.4} ms",
                ms(then.time_s),
                ms(now.time_s),
                best.best.plan.tile,
                ms(best.best.estimate.time_s)
            );
            let err = ms(then.time_s) / measured_ms - 1.0;
            assert!(
                err.abs() <= 0.10,
                "d = {d}: {:.4} ms priced vs {measured_ms} ms measured ({:+.1} %)",
                ms(then.time_s),
                err * 100.0
            );
            assert!(now.time_s < then.time_s, "d = {d}: the cheaper kernel");
            assert!(best.best.estimate.time_s <= now.time_s * (1.0 + 1e-9));
        });
    }
}

/// The 32-row layout (`BM = 128`, two `m16` fragments per warp) priced as the H200 measured it
/// (bench/results/gpu-h200-2026-11-28/, causal B=8 H=16 S=2048 fp16, the kernel of today;
/// the H200 has the H100's SMs and clocks and these kernels are compute-bound): within 20 %,
/// through `cost::attention::FRAG_ILP` (fitted there). Before the fit: 0.56–0.73×.
#[test]
fn the_32_row_layout_price_matches_the_h200_measurements() {
    use dlc_egg::codegen::templates::attention::AttentionPlan;
    use dlc_egg::cost::attention::{estimate, issue};
    for (d, bn, measured_ms) in [(32, 64, 0.1871), (64, 64, 0.2758), (128, 32, 0.5115)] {
        with_measured_pair(d, |pair, model| {
            // The cheaper of `Q` in registers or in shared memory, as plan choice takes it.
            let priced_ms = [true, false]
                .into_iter()
                .filter_map(|q_in_regs| {
                    let plan = AttentionPlan {
                        bm: 128,
                        rows: 32,
                        bn,
                        stages: 2,
                        async_: true,
                        q_in_regs,
                    };
                    estimate(pair, &plan, model, issue(pair)).ok()
                })
                .map(|e| e.time_s * 1e3)
                .fold(f64::INFINITY, f64::min);
            let ratio = priced_ms / measured_ms;
            eprintln!(
                "d = {d}, BN = {bn}: priced {priced_ms:.4} ms, measured {measured_ms} ms ({ratio:.2}x)"
            );
            assert!(
                (0.8..=1.2).contains(&ratio),
                "d = {d}: {priced_ms:.4} ms priced vs {measured_ms} ms measured ({ratio:.2}x)"
            );
        });
    }
}

/// The causal kernel's exponent is one FFMA on the raw dot product (the scale `1/√d` folded
/// into the factor `log2(e)/8`, `fold_scale`) and one `ex2.approx`: no scaled score, no
/// `exp2f` range fix-up; a score with an additive bias keeps its scale.
#[test]
fn the_score_scale_is_folded_into_the_exponent() {
    use dlc_egg::codegen::gpu::render;
    use dlc_egg::codegen::templates::attention::AttentionPlan;
    use dlc_egg::cost::attention::choose_attention_plan;
    let source = |text: &str| {
        let p = lowered(text);
        let o = optimized(&p);
        let rs = regions(&o.program);
        let pair = attention::pair(rs[0], rs[1]).expect("the pair matches");
        let folded = attention::fold_scale(&pair.score, &pair.acc).is_some();
        let c = choose_attention_plan(&pair, &o.model).expect("plans");
        let plan = AttentionPlan::of_priced(&c.best).expect("attention knobs");
        let k = attention::build(&pair, &plan, o.model.target.arch).expect("builds");
        (folded, render::kernel(&k))
    };
    let (folded, src) = source(&graph(64, 64, "fp16", true, None));
    assert!(folded, "causal: the scale folds");
    assert!(
        src.contains("dlc_exp2_approx(fmaf(sacc[mf][ni][e], 0.1803"),
        "{src}"
    );
    assert!(!src.contains("* 0.125f"), "no scaled score:\n{src}");
    assert!(!src.contains("dlc_exp2("), "no exp2f:\n{src}");
    let (folded, src) = source(&graph(64, 64, "fp16", false, Some("fp16")));
    assert!(!folded, "an additive mask keeps the scale");
    assert!(src.contains("dlc_exp2_approx(fmaf("));
}

/// `e` with its one attention kernel rebuilt under `plan` (the layout the model did not
/// necessarily choose): the source's kernel replaced, the launch's grid, block and dynamic
/// shared memory the rebuilt kernel's.
fn with_plan(
    e: &Emitted,
    pair: &attention::AttentionPair,
    plan: &attention::AttentionPlan,
    arch: dlc_egg::target::Arch,
) -> Emitted {
    use dlc_egg::codegen::gpu::render;
    let k = attention::build(pair, plan, arch).expect("builds");
    let at = e
        .source
        .find("// attention kernel `")
        .unwrap_or_else(|| panic!("no attention kernel:\n{}", e.source));
    let mut out = Emitted {
        source: format!("{}{}", &e.source[..at], render::kernel(&k)),
        manifest: e.manifest.clone(),
    };
    for s in &mut out.manifest.steps {
        if let ManifestStep::Launch(l) = s {
            assert_eq!(l.kernel, k.name);
            l.grid = k.launch.grid.clone();
            l.block = k.launch.block;
            l.dyn_smem_bytes = k.launch.dyn_smem_bytes;
        }
    }
    out
}

/// Both warp layouts of the plan space (16 and 32 query rows per warp), with `Q` in registers
/// or re-read from shared memory, at several key tiles, built directly (whatever the model
/// would choose) and run on the host against the reference: every head dim, causal and full,
/// bool and additive masks, fp16 and bf16, a value dim other than the head dim, register-staged
/// operands, tails in the query and key tiles (S not a multiple of BM = 128 or BN).
#[test]
fn every_warp_layout_matches_the_reference() {
    use dlc_egg::codegen::templates::attention::AttentionPlan;
    type Case = (
        u64,
        u64,
        &'static str,
        bool,
        Option<&'static str>,
        (i64, i64, i64),
    );
    // (d, dv, dtype, causal, mask, (B, H, S)), then (rows, BN, Q in registers).
    let cases: [(Case, (u64, u64, bool)); 10] = [
        ((64, 64, "fp16", true, None, (1, 1, 150)), (32, 64, true)),
        ((128, 128, "fp16", true, None, (1, 1, 140)), (32, 32, false)),
        (
            (32, 96, "bf16", false, Some("bool"), (1, 1, 70)),
            (32, 32, true),
        ),
        (
            (80, 80, "fp16", true, Some("fp16"), (1, 1, 45)),
            (32, 64, false),
        ),
        ((96, 96, "fp16", false, None, (2, 1, 40)), (32, 128, false)),
        ((256, 256, "fp16", true, None, (1, 1, 40)), (32, 32, false)),
        ((36, 36, "fp16", true, None, (1, 1, 53)), (32, 32, true)),
        (
            (64, 64, "bf16", true, Some("bool"), (1, 1, 99)),
            (16, 32, false),
        ),
        ((128, 128, "fp16", false, None, (1, 1, 66)), (16, 64, true)),
        // The 16-key tile (d = 256 with a mask: the only tile that fits), a key tail.
        (
            (256, 256, "fp16", false, Some("bool"), (1, 1, 40)),
            (16, 16, false),
        ),
    ];
    for (k, ((d, dv, dtype, causal, mask, (bb, h, s)), (rows, bn, q_in_regs))) in
        cases.into_iter().enumerate()
    {
        let text = graph(d, dv, dtype, causal, mask).replace("\"S\": 64", "\"S\": 2048");
        let p = lowered(&text);
        let o = optimized(&p);
        let e = emitted(&o, &o.program);
        assert_eq!(launches(&e.manifest), vec!["attention"], "d = {d}");
        let rs = regions(&o.program);
        let pair = attention::pair(rs[0], rs[1]).expect("the pair matches");
        let plan = AttentionPlan {
            bm: 4 * rows,
            rows,
            bn,
            stages: 2,
            async_: attention::copies_async(&pair),
            q_in_regs,
        };
        let forced = with_plan(&e, &pair, &plan, o.model.target.arch);
        let b = bindings(bb, h, s);
        let ins = random_inputs(&p, &b, 500 + k as u64).expect("inputs");
        let want = evaluate(&p, &b, &ins).expect("reference evaluates");
        run_and_compare(&forced, &ins, &b, &want);
    }
}

/// Optimized for `arch`, `text`'s one fused attention kernel compiles for it within the
/// registers its plan estimates (`label` names the case).
fn fused_within_estimate(text: &str, label: &str) {
    use dlc_egg::cuda::{compile, toolchain, CompileOptions};
    use dlc_egg::target::Arch;
    if toolchain().is_err() && std::env::var("DLC_SKIP_NVRTC").is_ok_and(|v| v == "1") {
        return;
    }
    let p = lowered(text);
    for arch in [Arch::Sm80, Arch::Sm90] {
        let o = optimized_for(&p, arch);
        let e = emitted(&o, &o.program);
        assert_eq!(
            launches(&e.manifest),
            vec!["attention"],
            "{label}, {arch:?}"
        );
        let report = o.kernels[0].plan.as_ref().expect("a plan");
        let est = report.regs_per_thread;
        let c = compile(&e.source, arch, &CompileOptions::default()).expect("compiles");
        let k = &c.kernels[0];
        let plan = report.plan.summary();
        eprintln!(
            "{label}, {arch:?}: {plan}: {} registers (estimate {est})",
            k.registers
        );
        assert!(
            k.registers <= est,
            "{label}, {arch:?}, {plan}: {} registers > the estimate {est}",
            k.registers
        );
    }
}

/// A symbolic sequence length (the sweep's `sw_attn_fp16_b4h8_SxS_d32_full_none`, no symbol
/// value: priced at the default size): optimized for sm90, its fused kernel took 205 registers
/// on sm_90a against the plan's 200 (the lengths and their bounds live across the key loop,
/// `cost::attention::SYMBOLIC_REGS`).
#[test]
fn a_symbolic_sequence_length_stays_within_the_register_estimate() {
    let text = r#"{"signature": {"inputs": [{"tensor": "Q", "role": "data"},
      {"tensor": "K", "role": "data"}, {"tensor": "V", "role": "data"}],
      "outputs": [{"tensor": "O"}]},
     "tensors": {"Q": {"dtype": "fp16", "shape": [4, 8, "S", 32]},
      "K": {"dtype": "fp16", "shape": [4, 8, "S", 32]},
      "V": {"dtype": "fp16", "shape": [4, 8, "S", 32]},
      "O": {"dtype": "fp16", "shape": [4, 8, "S", 32]}},
     "graph": [{"op": "Attention", "name": "attn", "inputs": ["Q", "K", "V"], "outputs": ["O"],
      "attrs": {"causal": false, "acc_dtype": "fp32"}}]}"#;
    fused_within_estimate(text, "symbolic S, d = 32");
}

/// d = 256 with a mask (bool, or additive fp16) at S = 2048: the score epilogue's read takes
/// `MASK_REGS` more registers, over 255 at `BN = 32` (266), so no fused plan existed and the
/// attention ran as a split cover whose kernels claimed what they did not emit (the random
/// sweep, `sw_attn_*_200x200_d256_full_float`). The 16-key tile fits (242): the extractor
/// keeps the pair, one attention launch, and its kernel planned and emitted for sm_80 and
/// sm_90a compiles without spills, within the plan's register estimate.
/// TODO(issue 15): at S = 200 (and d = 256 at S = 64 on sm90) the extractor keeps a split
/// cover whose pointwise fold is priced far below what it runs (it recomputes `QKᵀ` at every
/// key of its row max and sum); branch `gpu15j-fold-pricing` prices it as emitted.
#[test]
fn head_dim_256_with_a_mask_is_fused_within_its_registers() {
    use dlc_egg::codegen::templates::attention::AttentionPlan;
    use dlc_egg::cost::attention::pair_registers;
    use dlc_egg::cuda::{compile, toolchain, CompileOptions};
    use dlc_egg::target::Arch;
    let nvrtc = toolchain().is_ok();
    if !nvrtc && !std::env::var("DLC_SKIP_NVRTC").is_ok_and(|v| v == "1") {
        panic!("no NVRTC (or set DLC_SKIP_NVRTC=1 to skip the NVRTC tests)");
    }
    for mask in ["bool", "fp16"] {
        let text = graph(256, 256, "fp16", false, Some(mask)).replace("\"S\": 64", "\"S\": 2048");
        let p = lowered(&text);
        let o = optimized_for(&p, Arch::Sm80);
        let rs = regions(&o.program);
        assert_eq!(rs.len(), 2, "{mask} mask: {} regions", rs.len());
        let pair = attention::pair(rs[0], rs[1]).expect("the pair matches");
        for arch in [Arch::Sm80, Arch::Sm90] {
            let model = dlc_egg::extract::kernels::CostModel {
                target: arch.target(),
                ..o.model.clone()
            };
            let e = plan_and_emit(&o.program, &model).expect("emits").emitted;
            assert_eq!(
                launches(&e.manifest),
                vec!["attention"],
                "{mask} mask, {arch:?}"
            );
            let launch = e
                .manifest
                .steps
                .iter()
                .find_map(|s| match s {
                    ManifestStep::Launch(l) => Some(l),
                    _ => None,
                })
                .expect("a launch");
            let plan = AttentionPlan::of_priced(
                &dlc_egg::cost::attention::choose_attention_plan(&pair, &model)
                    .expect("a fused plan")
                    .best,
            )
            .expect("an attention plan");
            assert_eq!(
                launch.plan.tile[1], plan.bn,
                "{mask} mask, {arch:?}: the emitted plan"
            );
            let est = pair_registers(&plan, &pair);
            assert!(est <= 255, "{mask}, {arch:?}: {plan:?} estimates {est}");
            if !nvrtc {
                continue;
            }
            let c = compile(&e.source, arch, &CompileOptions::default())
                .unwrap_or_else(|err| panic!("{mask} mask, {arch:?}: {err}"));
            let k = c.kernel(&launch.kernel).expect("the kernel compiled");
            eprintln!(
                "d = 256, {mask} mask, {arch:?}: {plan:?}: {} registers (estimate {est})",
                k.registers
            );
            assert_eq!(k.spill_bytes, 0, "{mask} mask, {arch:?}");
            assert!(
                u64::from(k.registers) <= est,
                "{mask} mask, {arch:?}, {plan:?}: {} registers > the estimate {est}",
                k.registers
            );
        }
    }
}

/// d = 256 with an additive bf16 `[B,1,1,N]` mask (the sweep's
/// `sw_attn_bf16_b2h12_200x200_d256_full_float`): on the 16-key tile its kernel took 241
/// registers on sm_90a against 228 + 12 (`cost::attention::MASK_REGS`, now 14).
#[test]
fn head_dim_256_with_an_additive_row_mask_stays_within_the_register_estimate() {
    let text = r#"{"signature": {"inputs": [{"tensor": "Q", "role": "data"},
      {"tensor": "K", "role": "data"}, {"tensor": "V", "role": "data"},
      {"tensor": "mask", "role": "data"}], "outputs": [{"tensor": "O"}]},
     "tensors": {"Q": {"dtype": "bf16", "shape": [2, 12, 200, 256]},
      "K": {"dtype": "bf16", "shape": [2, 12, 200, 256]},
      "V": {"dtype": "bf16", "shape": [2, 12, 200, 256]},
      "O": {"dtype": "bf16", "shape": [2, 12, 200, 256]},
      "mask": {"dtype": "bf16", "shape": [2, 1, 1, 200]}},
     "graph": [{"op": "Attention", "name": "attn", "inputs": ["Q", "K", "V", "mask"],
      "outputs": ["O"], "attrs": {"causal": false, "acc_dtype": "fp32"}}]}"#;
    fused_within_estimate(text, "d = 256, additive [B,1,1,N] mask");
}
