//! The attention template: the optimizer's two attention regions (scores + softmax into a
//! deferred buffer, then `P·V`) emitted as ONE streaming-softmax kernel, run on the CPU through
//! the host emulation (`codegen::host`) and compared with the reference evaluators; and the
//! cases where the pattern must not match (two launches).

use dlc_egg::codegen::emit::emit;
use dlc_egg::codegen::host::{run_on_host, HostOptions};
use dlc_egg::codegen::manifest::{Manifest, ManifestStep};
use dlc_egg::codegen::templates::attention::{self, Mask};
use dlc_egg::codegen::Emitted;
use dlc_egg::eval::evaluate;
use dlc_egg::ir::region::program::{evaluate_program, RegionProgram, Step};
use dlc_egg::ir::region::{BinaryFn, Expr, Region, UnaryFn};
use dlc_egg::ir::tiny::Program;
use dlc_egg::ir::{frontend, lower};
use dlc_egg::optimize::{optimize, OptimizeOptions, Optimized};
use dlc_egg::rules::testing::random_inputs;
use dlc_egg::tensor::Tensor;
use std::collections::BTreeMap;

fn example_text() -> String {
    std::fs::read_to_string("examples/attention_causal.json").expect("example exists")
}

/// The example without its causal flag.
fn non_causal_text() -> String {
    let t = example_text();
    let out = t.replace("\"causal\": true, ", "");
    assert_ne!(out, t, "the example's causal flag moved");
    out
}

/// The example with an additive fp16 mask `M[S, S]` (a fourth input), causal or not.
fn masked_text(causal: bool) -> String {
    let t = if causal {
        example_text()
    } else {
        non_causal_text()
    };
    let out = t
        .replace(
            "{\"tensor\": \"V\", \"role\": \"data\"}",
            "{\"tensor\": \"V\", \"role\": \"data\"}, {\"tensor\": \"M\", \"role\": \"data\"}",
        )
        .replace(
            "\"O\": {\"dtype\"",
            "\"M\": {\"dtype\": \"fp16\", \"shape\": [\"S\", \"S\"]},\n    \"O\": {\"dtype\"",
        )
        .replace("[\"Q\", \"K\", \"V\"]", "[\"Q\", \"K\", \"V\", \"M\"]");
    assert_eq!(
        out.matches('M').count(),
        t.matches('M').count() + 3,
        "the example's text moved"
    );
    out
}

fn lowered(text: &str) -> Program {
    let g = frontend::load_str(text, "attention.json").expect("loads");
    lower::lower(&g).expect("lowers")
}

fn optimized(p: &Program) -> Optimized {
    optimize(p, &OptimizeOptions::default()).expect("optimizes")
}

fn bindings(b: i64, h: i64, s: i64) -> BTreeMap<String, i64> {
    [("B", b), ("H", h), ("S", s)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn launches(m: &Manifest) -> Vec<&str> {
    m.steps
        .iter()
        .filter_map(|s| match s {
            ManifestStep::Launch(l) => Some(l.template.as_str()),
            ManifestStep::Alias { .. } => None,
        })
        .collect()
}

fn regions(p: &RegionProgram) -> Vec<&Region> {
    p.steps
        .iter()
        .filter_map(|s| match s {
            Step::Region(r) => Some(r),
            Step::Alias { .. } => None,
        })
        .collect()
}

fn emitted(o: &Optimized, program: &RegionProgram) -> Emitted {
    emit(program, &o.model).expect("emits").emitted
}

/// `got` within fp16 tolerance of `want` (rtol = atol = 1e-2), NaN where `want` is NaN.
fn assert_close(name: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape, want.shape, "{name}: shape");
    for (k, (a, e)) in got.to_f64().iter().zip(want.to_f64()).enumerate() {
        let ok = if e.is_finite() {
            (a - e).abs() <= 1e-2 + 1e-2 * e.abs()
        } else {
            a.is_nan() && e.is_nan() || *a == e
        };
        assert!(ok, "{name}[{k}]: kernel {a}, reference {e}");
    }
}

/// Runs `e` on the host at `b` and compares every graph output with `want`.
fn run_and_compare(
    e: &Emitted,
    ins: &BTreeMap<String, Tensor>,
    b: &BTreeMap<String, i64>,
    want: &BTreeMap<String, Tensor>,
) {
    let got = run_on_host(&e.source, &e.manifest, ins, b, &HostOptions::default())
        .unwrap_or_else(|err| panic!("host run fails: {err}\n{}", e.source));
    for (name, w) in want {
        let g = got
            .get(name)
            .unwrap_or_else(|| panic!("output {name} missing"));
        assert_close(name, g, w);
    }
}

/// Optimizes `text`, checks the one attention launch, runs it at every binding and compares
/// with the graph reference.
fn check_fused(text: &str, sizes: &[(i64, i64, i64)], seed: u64) -> Optimized {
    let p = lowered(text);
    let o = optimized(&p);
    let e = emitted(&o, &o.program);
    assert_eq!(launches(&e.manifest), vec!["attention"], "{}", e.source);
    for (k, &(bb, h, s)) in sizes.iter().enumerate() {
        let b = bindings(bb, h, s);
        let ins = random_inputs(&p, &b, seed + k as u64).expect("inputs");
        let want = evaluate(&p, &b, &ins).expect("reference evaluates");
        run_and_compare(&e, &ins, &b, &want);
    }
    o
}

#[test]
fn causal_attention_is_one_kernel_matching_the_reference() {
    let o = check_fused(&example_text(), &[(1, 2, 37), (1, 2, 64), (2, 1, 100)], 11);
    let rs = regions(&o.program);
    let pair = attention::pair(rs[0], rs[1]).expect("the pair matches");
    assert_eq!(
        pair.mask,
        Some(Mask {
            dn: 1,
            dm: -1,
            dc: 0
        }),
        "causal n <= m"
    );
    let src = emitted(&o, &o.program).source;
    assert!(
        src.contains("> 0LL"),
        "causal key tiles are skipped:\n{src}"
    );
}

#[test]
fn non_causal_attention_is_one_kernel_matching_the_reference() {
    let o = check_fused(&non_causal_text(), &[(1, 2, 37), (2, 1, 70)], 23);
    let rs = regions(&o.program);
    let pair = attention::pair(rs[0], rs[1]).expect("the pair matches");
    assert_eq!(pair.mask, None);
}

/// Rewrites every let of `r` whose definition is `from` (by `f`).
fn rewrite_lets(r: &mut Region, f: &dyn Fn(&Expr) -> Option<Expr>) -> usize {
    let mut n = 0;
    for l in &mut r.lets {
        if let Some(e) = f(&l.expr) {
            l.expr = e;
            n += 1;
        }
    }
    n
}

fn first_region_mut(p: &mut RegionProgram) -> &mut Region {
    p.steps
        .iter_mut()
        .find_map(|s| match s {
            Step::Region(r) => Some(r),
            Step::Alias { .. } => None,
        })
        .expect("a region")
}

/// Runs `program` (a variation of the optimized example) fused on the host and compares with
/// the region program's reference playback.
fn check_variation(o: &Optimized, p: &Program, program: &RegionProgram, want_mask: Option<Mask>) {
    let rs = regions(program);
    let pair = attention::pair(rs[0], rs[1]).expect("the variation matches");
    assert_eq!(pair.mask, want_mask);
    let e = emitted(o, program);
    assert_eq!(launches(&e.manifest), vec!["attention"]);
    for (k, (bb, h, s)) in [(1, 2, 45), (1, 1, 96)].into_iter().enumerate() {
        let b = bindings(bb, h, s);
        let ins = random_inputs(p, &b, 40 + k as u64).expect("inputs");
        let want = evaluate_program(program, &b, &ins).expect("reference evaluates");
        run_and_compare(&e, &ins, &b, &want);
    }
}

#[test]
fn exp_form_and_shifted_causal_mask_match() {
    let p = lowered(&example_text());
    let o = optimized(&p);
    // exp(s − max) instead of exp2((s − max) · log2 e): `exp2(c4)` with `c4 = mul(c3, log2e)`
    // becomes `exp(c3)`.
    let mut program = o.program.clone();
    let r = first_region_mut(&mut program);
    let defs: BTreeMap<String, Expr> = r
        .lets
        .iter()
        .map(|l| (l.name.clone(), l.expr.clone()))
        .collect();
    let n = rewrite_lets(r, &|e| match e {
        Expr::Unary(UnaryFn::Exp2, x) => match x.as_ref() {
            Expr::Let(c4) => match defs.get(c4) {
                Some(Expr::Binary(BinaryFn::Mul, c3, _)) => {
                    Some(Expr::Unary(UnaryFn::Exp, c3.clone()))
                }
                _ => None,
            },
            _ => None,
        },
        _ => None,
    });
    assert_eq!(n, 1, "one exp2(mul(…))");
    check_variation(
        &o,
        &p,
        &program,
        Some(Mask {
            dn: 1,
            dm: -1,
            dc: 0,
        }),
    );
    // The mask `n < m + 3` (three keys past the diagonal): cmplt(idx(n), idx(m) + 3).
    let mut program = o.program.clone();
    let r = first_region_mut(&mut program);
    let n = rewrite_lets(r, &|e| match e {
        Expr::Where(c, a, b) => match c.as_ref() {
            Expr::Binary(BinaryFn::Cmple, n_, m_) => Some(Expr::Where(
                Box::new(Expr::Binary(
                    BinaryFn::Cmplt,
                    n_.clone(),
                    Box::new(Expr::Binary(
                        BinaryFn::Add,
                        m_.clone(),
                        Box::new(Expr::Const(3.0)),
                    )),
                )),
                a.clone(),
                b.clone(),
            )),
            _ => None,
        },
        _ => None,
    });
    assert_eq!(n, 1, "one causal where");
    check_variation(
        &o,
        &p,
        &program,
        Some(Mask {
            dn: 1,
            dm: -1,
            dc: -2,
        }),
    );
}

#[test]
fn deferred_buffer_read_elsewhere_or_another_second_region_is_not_fused() {
    let p = lowered(&example_text());
    let o = optimized(&p);
    let rs = regions(&o.program);
    assert_eq!(rs.len(), 2, "the optimizer's two attention regions");
    let deferred = rs[0].outputs[0].name.clone();
    // The probabilities are also a graph output: two launches, still the reference's values.
    let mut program = o.program.clone();
    program.outputs.push(("P".into(), deferred.clone()));
    let e = emitted(&o, &program);
    assert_eq!(
        launches(&e.manifest).len(),
        2,
        "{:?}",
        launches(&e.manifest)
    );
    assert!(!launches(&e.manifest).contains(&"attention"));
    let b = bindings(1, 2, 37);
    let ins = random_inputs(&p, &b, 5).expect("inputs");
    let want = evaluate_program(&program, &b, &ins).expect("reference evaluates");
    run_and_compare(&e, &ins, &b, &want);
    // A second region that is not `P·V` (a max instead of the sum): no pair, two launches.
    let mut program = o.program.clone();
    if let Some(Step::Region(r)) = program
        .steps
        .iter_mut()
        .filter(|s| matches!(s, Step::Region(_)))
        .nth(1)
    {
        for l in &mut r.lets {
            if let Expr::Reduce(red) = &mut l.expr {
                red.op = dlc_egg::ir::tiny::ReduceOp::Max;
                red.init = None;
            }
        }
    }
    let rs = regions(&program);
    assert!(attention::pair(rs[0], rs[1]).is_none());
    assert!(attention::pair(rs[1], rs[0]).is_none());
    assert!(attention::pair(rs[0], rs[0]).is_none());
    assert_eq!(launches(&emitted(&o, &program).manifest).len(), 2);
}

#[test]
fn additive_mask_and_safe_softmax_are_fused() {
    // The lowering's safe softmax (guarded max and sum) with a bias read per element.
    let o = check_fused(&masked_text(false), &[(1, 2, 37), (2, 1, 70)], 31);
    let rs = regions(&o.program);
    let pair = attention::pair(rs[0], rs[1]).expect("the pair matches");
    assert!(pair.safe_sum, "the guarded sum is recognized");
    check_fused(&masked_text(true), &[(1, 2, 45)], 37);
}

/// An attention graph: `Q`, `K` `[B, H, S, d]`, `V` `[B, H, S, dv]` of `dtype`, optionally a
/// mask `M[S, S]` of `mask` type (`bool`: kept where true; `fp16`: added to the scores).
fn graph(d: u64, dv: u64, dtype: &str, causal: bool, mask: Option<&str>) -> String {
    let (m_in, m_sig, m_tensor) = match mask {
        Some(t) => (
            ", \"M\"",
            ", {\"tensor\": \"M\", \"role\": \"data\"}",
            format!(",\n    \"M\": {{\"dtype\": \"{t}\", \"shape\": [\"S\", \"S\"]}}"),
        ),
        None => ("", "", String::new()),
    };
    let causal = if causal { "\"causal\": true, " } else { "" };
    format!(
        r#"{{
  "signature": {{
    "inputs": [{{"tensor": "Q", "role": "data"}}, {{"tensor": "K", "role": "data"}}, {{"tensor": "V", "role": "data"}}{m_sig}],
    "outputs": [{{"tensor": "O"}}]
  }},
  "symbols": {{"B": 1, "H": 2, "S": 64}},
  "tensors": {{
    "Q": {{"dtype": "{dtype}", "shape": ["B", "H", "S", {d}]}},
    "K": {{"dtype": "{dtype}", "shape": ["B", "H", "S", {d}]}},
    "V": {{"dtype": "{dtype}", "shape": ["B", "H", "S", {dv}]}},
    "O": {{"dtype": "{dtype}", "shape": ["B", "H", "S", {dv}]}}{m_tensor}
  }},
  "graph": [
    {{"op": "Attention", "name": "attn", "inputs": ["Q", "K", "V"{m_in}], "outputs": ["O"],
     "attrs": {{{causal}"acc_dtype": "fp32"}}}}
  ]
}}"#
    )
}

/// The fused kernel's source lines that say how `smem` (`Qs`, `Ks`, `Vs`) is staged.
fn staging<'s>(src: &'s str, smem: &str) -> &'s str {
    src.lines()
        .find(|l| l.contains(&format!("// {smem}: ")))
        .unwrap_or_else(|| panic!("no staging comment for {smem}:\n{src}"))
}

#[test]
fn every_head_dim_matches_the_reference() {
    // (d, dv, causal, sizes): tails in M and N (S not a multiple of BM or BN) at every head dim.
    let cases: [(u64, bool, (i64, i64, i64)); 6] = [
        (32, true, (1, 2, 45)),
        (64, false, (1, 1, 100)),
        (80, true, (2, 1, 70)),
        (96, false, (1, 1, 50)),
        (128, true, (1, 1, 67)),
        (256, false, (1, 1, 40)),
    ];
    for (k, (d, causal, size)) in cases.into_iter().enumerate() {
        // Optimized at S = 2048: at the default S = 64 (a 2-block grid) the extractor, pricing
        // the pair as the fused kernel, finds two pointwise kernels cheaper for d = 128 and 256.
        let text = graph(d, d, "fp16", causal, None).replace("\"S\": 64", "\"S\": 2048");
        let o = check_fused(&text, &[size], 100 + k as u64);
        let src = emitted(&o, &o.program).source;
        for smem in ["Qs", "Ks", "Vs"] {
            assert!(
                staging(&src, smem).contains("cp.async"),
                "d = {d}: {smem} is a plain aligned fp16 read"
            );
        }
        assert!(src.contains("dlc_mma_m16n8k16_f16"), "d = {d}");
        assert_eq!(
            src.contains("the heaviest query blocks"),
            causal,
            "d = {d}: causal blocks run heaviest first"
        );
    }
}

#[test]
fn value_dim_bf16_and_register_staged_operands_match() {
    // A value dim other than the head dim; bf16 operands.
    check_fused(&graph(32, 96, "fp16", false, None), &[(1, 2, 41)], 201);
    let o = check_fused(&graph(64, 64, "bf16", true, None), &[(1, 1, 77)], 202);
    assert!(emitted(&o, &o.program)
        .source
        .contains("dlc_mma_m16n8k16_bf16"));
    // Head dims that are no multiple of 8 (36 → 48 in the tile, also the value dim): no 16-byte chunk is all
    // inside or all outside a row, so the tiles are staged through registers.
    let o = check_fused(&graph(36, 36, "fp16", true, None), &[(1, 2, 53)], 203);
    let src = emitted(&o, &o.program).source;
    for smem in ["Qs", "Ks", "Vs"] {
        assert!(
            staging(&src, smem).contains("through registers"),
            "{smem}: not 16-byte chunks"
        );
    }
}

#[test]
fn bool_and_additive_masks_match() {
    check_fused(
        &graph(64, 64, "fp16", false, Some("bool")),
        &[(1, 2, 58)],
        301,
    );
    check_fused(
        &graph(80, 80, "fp16", true, Some("bool")),
        &[(1, 1, 49)],
        302,
    );
    check_fused(
        &graph(32, 32, "fp16", true, Some("fp16")),
        &[(2, 1, 66)],
        303,
    );
}

#[test]
fn fp32_operands_are_not_fused() {
    // The tensor-core kernel multiplies fp16/bf16 operands; fp32 attention stays two kernels.
    let p = lowered(&graph(32, 32, "fp32", true, None));
    let o = optimized(&p);
    let e = emitted(&o, &o.program);
    assert!(!launches(&e.manifest).contains(&"attention"));
    let b = bindings(1, 1, 40);
    let ins = random_inputs(&p, &b, 401).expect("inputs");
    let want = evaluate(&p, &b, &ins).expect("reference evaluates");
    run_and_compare(&e, &ins, &b, &want);
}

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
        // The program optimized as by default (the extractor's split at other targets and
        // sizes can differ: for sm_90a at d = 80, or at S = 2048 for d = 256, it does not form
        // the attention pair), then planned at S = 2048 and emitted for each target.
        // Optimized at S = 2048 (at S = 64, d = 128 and 256 stay two pointwise kernels: see
        // `every_head_dim_matches_the_reference`).
        let p = lowered(&graph(d, d, "fp16", true, None).replace("\"S\": 64", "\"S\": 2048"));
        let o = optimized(&p);
        for arch in [Arch::Sm80, Arch::Sm90] {
            let model = dlc_egg::extract::kernels::CostModel {
                target: arch.target(),
                bindings: bindings(1, 16, 2048),
                ..o.model.clone()
            };
            let e = emit(&o.program, &model).expect("emits").emitted;
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
    use dlc_egg::cost::attention::{registers, space};
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
        for plan in space(attention::copies_async(&pair)) {
            let est = registers(&plan, d, d);
            for arch in [Arch::Sm80, Arch::Sm90] {
                let t = arch.target();
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
    use dlc_egg::cost::attention::{attention_plan, choose_attention_plan, ALGO};
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
        let ap = attention_plan(&c.best).expect("attention knobs");
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
    use dlc_egg::target::Arch;
    for (d, bn, measured_ms) in [(64, 64, 0.3015), (128, 32, 0.6353)] {
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
        let plan = AttentionPlan {
            bm: 64,
            rows: 16,
            bn,
            stages: 2,
            async_: true,
            q_in_regs: true,
        };
        let then = estimate(&pair, &plan, &model, MEASURED).expect("prices");
        let now = estimate(&pair, &plan, &model, issue(&pair)).expect("prices");
        let best = choose_attention_plan(&pair, &model).expect("plans");
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
    }
}

/// The causal kernel's exponent is one FFMA on the raw dot product (the scale `1/√d` folded
/// into the factor `log2(e)/8`, `fold_scale`) and one `ex2.approx`: no scaled score, no
/// `exp2f` range fix-up; a score with an additive bias keeps its scale.
#[test]
fn the_score_scale_is_folded_into_the_exponent() {
    use dlc_egg::codegen::gpu::render;
    use dlc_egg::cost::attention::{attention_plan, choose_attention_plan};
    let source = |text: &str| {
        let p = lowered(text);
        let o = optimized(&p);
        let rs = regions(&o.program);
        let pair = attention::pair(rs[0], rs[1]).expect("the pair matches");
        let folded = attention::fold_scale(&pair.score, &pair.acc).is_some();
        let c = choose_attention_plan(&pair, &o.model).expect("plans");
        let plan = attention_plan(&c.best).expect("attention knobs");
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
    let cases: [(Case, (u64, u64, bool)); 9] = [
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

/// An attention graph with a size-1 batch (and head, `h1`) written as the literal 1 (the
/// optimizer reads those axes as index 0), `S` symbolic, and a `[1, 1, 1, S]` mask of `mask`
/// type broadcast over the heads and query rows (the sweep's and the exports' form).
fn unit_graph(d: u64, h1: bool, causal: bool, mask: &str) -> String {
    let h = if h1 { "1".to_string() } else { "2".to_string() };
    graph(d, d, "fp16", causal, Some(mask))
        .replace("\"B\", \"H\"", &format!("1, {h}"))
        .replace("\"shape\": [\"S\", \"S\"]", "\"shape\": [1, 1, 1, \"S\"]")
        .replace("\"S\": 64", "\"S\": 2048")
}

#[test]
fn unit_batch_and_head_axes_with_broadcast_masks_are_fused() {
    // Issue 15: at B = 1 (and H = 1) the scores' reduction was reached at `[b, …]` and at
    // `[0, …]`, and the pattern saw two query axes: three kernels instead of one.
    check_fused(&unit_graph(64, true, false, "bool"), &[(1, 1, 77)], 401);
    check_fused(&unit_graph(96, false, true, "fp16"), &[(1, 2, 45)], 402);
}
