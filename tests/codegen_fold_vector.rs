//! The pointwise template's folds over a contiguous run (issue 15: "what the plan prices is what
//! codegen emits"): an unfused attention's softmax-and-`P·V` fold is planned with 16-byte lanes
//! (8 bf16 outputs per thread on sm90), so its kernel must load `V` as 16-byte vectors — the fold runs
//! once per chunk with the lanes inside its loop (`codegen::templates::vector::lane_reduces`)
//! — and still compute what the reference does. Likewise a masked softmax's row kernel, planned
//! with 16-byte lanes of fp32 scores, loads the scores its `where(mask, …)` guards as vectors
//! (they are in bounds at every point). Runs on the CPU emulation; no GPU needed.

use dlc_egg::codegen::generate;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::{ir::frontend, lower};
use std::collections::BTreeMap;

mod common;
use common::host::{emulation_matches_reference, optimized_for};

/// An attention graph: `dt` Q, K, V, O of `[b, 1, s, d]`, a `mask` of `[b, 1, 1, s]` in
/// `mask_dt`.
fn attention(dt: &str, mask_dt: &str, (b, s, d): (u32, u32, u32), causal: bool) -> String {
    let t = |dt: &str, s: &str| format!(r#"{{"dtype": "{dt}", "shape": {s}}}"#);
    let qkv = t(dt, &format!("[{b}, 1, {s}, {d}]"));
    format!(
        r#"{{"signature": {{"inputs": [{{"tensor": "Q", "role": "data"}}, {{"tensor": "K", "role": "data"}},
              {{"tensor": "V", "role": "data"}}, {{"tensor": "mask", "role": "data"}}],
            "outputs": [{{"tensor": "O"}}]}},
 "tensors": {{"Q": {qkv}, "K": {qkv}, "V": {qkv}, "O": {qkv}, "mask": {}}},
 "graph": [{{"op": "Attention", "name": "attn", "inputs": ["Q", "K", "V", "mask"], "outputs": ["O"],
             "attrs": {{"causal": {causal}, "acc_dtype": "fp32"}}}}]}}"#,
        t(mask_dt, &format!("[{b}, 1, 1, {s}]"))
    )
}

/// Causal bf16 attention, B = 4, H = 1, 128 queries and keys, head dim 288 (above the fused
/// attention template's head dims), an additive mask: QKᵀ, the softmax-and-`P·V` fold and a copy.
/// (Found by the shape sweep, seed 4, at d = 256 and S = 77; since the pointwise template's
/// refolds are priced — the fold recomputes the softmax's max and sum per thread — d = 256 is
/// one fused kernel on sm90 too: `d256_is_fused_on_sm90` below. At S = 77 the scores and
/// softmax as one pointwise kernel, then `P·V`, are priced faster since an unfused score kernel
/// is priced as it runs, not at the fused attention kernel's tensor-core price.)
fn graph() -> String {
    attention("bf16", "bf16", (4, 128, 288), true)
}

/// The CUDA source of kernel `name` in `source`.
fn kernel_source<'a>(source: &'a str, name: &str) -> &'a str {
    let at = source
        .find(&format!(" {name}("))
        .unwrap_or_else(|| panic!("kernel {name} in the source"));
    let rest = &source[at..];
    &rest[..rest.find("\n}\n").unwrap_or(rest.len())]
}

/// Optimizes `text` for `arch`, checks that exactly one kernel whose plan has `template` and
/// `width` lanes (and whose source contains `marker`) loads `bytes`-byte vectors, and that the
/// emulated program matches the reference.
fn check(
    text: &str,
    arch: dlc_egg::target::Arch,
    (template, width, marker): (&str, u32, &str),
    bytes: u32,
) {
    let (p, o) = optimized_for(text, arch);
    let generated = generate(&o).expect("generates");
    let source = &generated.emitted.source;
    let kernels: Vec<&str> = o
        .kernels
        .iter()
        .filter(|k| {
            k.plan
                .as_ref()
                .is_ok_and(|pl| pl.plan.template == template && pl.plan.vectorize.width == width)
        })
        .map(|k| kernel_source(source, &k.name))
        .filter(|src| src.contains(marker))
        .collect();
    assert_eq!(
        kernels.len(),
        1,
        "{arch:?}: one {template} kernel of {width} lanes:\n{source}"
    );
    assert!(
        kernels[0].contains(&format!("dlc_ld_vec<{bytes}>")),
        "{arch:?}: the kernel of {width} lanes loads no {bytes}-byte vector:\n{}",
        kernels[0]
    );
    // 16-bit outputs: a few units in the last place of the rounded result.
    emulation_matches_reference(
        &p,
        &generated,
        &BTreeMap::new(),
        5,
        2e-2,
        &format!("{arch:?}"),
    );
}

#[test]
fn an_attention_fold_with_16_byte_lanes_loads_v_as_vectors() {
    // The softmax-and-`P·V` fold: a pointwise kernel that folds (`acc_`), of 8 lanes of bf16
    // output on sm90 (`V` in 16-byte vectors).
    check(
        &graph(),
        dlc_egg::target::Arch::Sm90,
        ("elementwise", 8, "acc_"),
        16,
    );
}

#[test]
fn d256_is_fused_on_sm90() {
    // The fold at d = 256 recomputes the softmax's row max and sum once per thread of 8 lanes:
    // priced so (`KernelWork::pointwise_refolds`), QKᵀ plus the fold lose to the fused
    // attention kernel, whose emulated output matches the reference.
    let g = frontend::load_str(&attention("bf16", "bf16", (4, 77, 256), true), "attn.json")
        .expect("loads");
    let p = lower::lower(&g).expect("lowers");
    let opts = OptimizeOptions {
        target: dlc_egg::target::Arch::Sm90.target(),
        ..OptimizeOptions::default()
    };
    let o = optimize(&p, &opts).expect("optimizes");
    let templates: Vec<String> = o
        .kernels
        .iter()
        .map(|k| {
            k.plan
                .as_ref()
                .map_or("-".into(), |pl| pl.plan.template.to_string())
        })
        .collect();
    assert_eq!(templates, ["attention"], "one fused attention kernel");
    let generated = generate(&o).expect("generates");
    emulation_matches_reference(&p, &generated, &BTreeMap::new(), 5, 2e-2, "sm90 fused");
}

#[test]
fn an_attention_fold_on_sm80_loads_v_as_vectors() {
    // The sweep's seed 4 Vec128Loads failure (d = 256, sm80): the fold wrote fp32 and folded
    // bf16 `V`, took 4 lanes by its output element and loaded `V` 8 bytes at a time under the
    // 16-byte plan (the fp32-output case of the rule is `a_bf16_fold_with_fp32_output_…`
    // below). That attention is one fused kernel on sm80 now, and at 128 keys `P·V` runs as a
    // SIMT contraction on the 32-row tiles (144 CTAs against the fold's 8-lane threads). Since
    // the fold's product and softmax prologue are priced at every multiply-accumulate (the
    // prologue once per thread of 8 lanes, `Gemm::pointwise_prologue`), 48 and 40 keys split
    // too; 32 keep the fold, of 8 lanes of bf16 output with `V` in 16-byte vectors.
    check(
        &attention("bf16", "bf16", (4, 32, 288), true),
        dlc_egg::target::Arch::Sm80,
        ("elementwise", 8, "acc_"),
        16,
    );
}

/// A batch-1 1×1 bf16 convolution, 256 → 32 channels at 56², fp32 accumulation (the sweep's
/// `sw_conv_bf16_n1_c256to32_56_k1s1d1g1p0`, seed 3).
fn pointwise_conv() -> String {
    r#"{"signature": {"inputs": [{"tensor": "X", "role": "data"},
        {"tensor": "W", "role": "param", "storage": "const_pool"},
        {"tensor": "bias", "role": "param", "storage": "const_pool"}],
      "outputs": [{"tensor": "C"}]},
 "tensors": {"X": {"dtype": "bf16", "shape": [1, 256, 56, 56]},
             "W": {"dtype": "bf16", "shape": [32, 256, 1, 1]},
             "bias": {"dtype": "bf16", "shape": [32]},
             "C": {"dtype": "bf16", "shape": [1, 32, 56, 56]}},
 "graph": [{"op": "Conv", "name": "conv", "inputs": ["X", "W", "bias"], "outputs": ["C"],
            "attrs": {"stride": 1, "pad": [[0, 0], [0, 0]], "dilation": 1, "groups": 1,
                      "acc_dtype": "fp32"}}]}"#
        .to_string()
}

#[test]
fn a_bf16_fold_with_fp32_output_takes_lanes_by_its_bf16_reads() {
    // The conv's pointwise fold (`acc_`) writes fp32 and folds bf16 `X` along the output's
    // innermost axis: 8 lanes (32 output bytes), so `X` is loaded 16 bytes at a time. By its
    // output element it took 4 lanes (16 bytes) and loaded `X` 8 bytes at a time, against the
    // 16-byte claim (the sweep's seed 3 Vec128Loads failures, sm80 and sm90).
    use dlc_egg::target::Arch::{Sm80, Sm90};
    for arch in [Sm80, Sm90] {
        check(&pointwise_conv(), arch, ("elementwise", 8, "acc_"), 16);
    }
}

#[test]
fn a_masked_softmax_row_loads_its_scores_as_vectors() {
    // fp16 attention, B = 2, 512 keys, head dim 256, a bool mask: no fused plan (the masked
    // d = 256 attention's registers), so on sm80 QKᵀ, the masked softmax as a row kernel of 4
    // fp32 lanes, and P·V. (Found by the shape sweep, seed 5, at d = 80; since the attention
    // pair's pricing fix (a6fcaa7) d = 80 is one fused kernel.)
    let text = attention("fp16", "bool", (2, 512, 256), false);
    check(
        &text,
        dlc_egg::target::Arch::Sm80,
        ("reduction", 4, "dlc_warp_max"),
        16,
    );
}

/// A softmax of fp32 scores `[8, 12, S, S]` over keys; `S` a number, or the symbol `sequence`
/// (what `dlc-egg import` leaves of a BERT export's dynamic axis).
fn softmax(s: &str) -> String {
    let shape = format!(r#"{{"dtype": "fp32", "shape": [8, 12, {s}, {s}]}}"#);
    format!(
        r#"{{"signature": {{"inputs": [{{"tensor": "X", "role": "data"}}], "outputs": [{{"tensor": "Y"}}]}},
 "tensors": {{"X": {shape}, "Y": {shape}}},
 "graph": [{{"op": "Softmax", "name": "softmax", "inputs": ["X"], "outputs": ["Y"],
            "attrs": {{"axis": -1}}}}]}}"#
    )
}

/// The row kernels' plans and sources of `text` optimized for sm80: (vector width, source).
fn row_kernels(text: &str) -> Vec<(u32, String)> {
    let g = frontend::load_str(text, "softmax.json").expect("loads");
    let p = lower::lower(&g).expect("lowers");
    let opts = OptimizeOptions {
        target: dlc_egg::target::Arch::Sm80.target(),
        ..OptimizeOptions::default()
    };
    let o = optimize(&p, &opts).expect("optimizes");
    let generated = generate(&o).expect("generates");
    let source = &generated.emitted.source;
    o.kernels
        .iter()
        .filter_map(|k| {
            let pl = k.plan.as_ref().ok()?;
            (pl.plan.template == "reduction").then(|| {
                (
                    pl.plan.vectorize.width,
                    kernel_source(source, &k.name).to_string(),
                )
            })
        })
        .collect()
}

/// Runs `text` (optimized for sm80) on the CPU emulation at the symbol values `b` and checks
/// it against the reference.
fn emulated_matches(text: &str, b: &[(&str, i64)]) {
    let g = frontend::load_str(text, "softmax.json").expect("loads");
    let p = lower::lower(&g).expect("lowers");
    let opts = OptimizeOptions {
        target: dlc_egg::target::Arch::Sm80.target(),
        ..OptimizeOptions::default()
    };
    let o = optimize(&p, &opts).expect("optimizes");
    let generated = generate(&o).expect("generates");
    let b: BTreeMap<String, i64> = b.iter().map(|(s, v)| (s.to_string(), *v)).collect();
    emulation_matches_reference(&p, &generated, &b, 7, 1e-5, &format!("{b:?}"));
}

#[test]
fn a_row_over_a_symbolic_length_loads_vectors_under_a_run_time_test() {
    // bert2's unfused softmax over `sequence` keys (`k12_where_cmpne_div_reduce`): the row
    // template cannot prove `sequence` a multiple of 4, so it walked (and the plan priced) the
    // row element by element (32-bit LDG and STG). Now the kernel tests `sequence % 4 == 0` at
    // run time: the vector walk (16-byte loads and stores) there, the element walk elsewhere;
    // the plan, priced at `sequence` = 1024, claims the vector walk's 4 lanes.
    let text = softmax("\"sequence\"");
    let rows = row_kernels(&text);
    assert!(!rows.is_empty(), "a row kernel");
    for (width, src) in &rows {
        assert_eq!(*width, 4, "the plan claims {width} lanes:\n{src}");
        assert!(src.contains("dlc_ld_vec<16>"), "no 16-byte loads:\n{src}");
        assert!(
            src.contains("s_sequence % 4 == 0"),
            "no run-time test of the row length:\n{src}"
        );
    }
    // Both walks compute the softmax: a length that is a multiple of 4 and one that is not.
    emulated_matches(&text, &[("sequence", 12)]);
    emulated_matches(&text, &[("sequence", 13)]);
    // At a length that is a multiple of 4 the row is loaded 16 bytes at a time with no test.
    let rows = row_kernels(&softmax("128"));
    assert!(!rows.is_empty(), "a row kernel");
    for (width, src) in &rows {
        assert_eq!(*width, 4, "the plan claims {width} lanes:\n{src}");
        assert!(src.contains("dlc_ld_vec<16>"), "no 16-byte loads:\n{src}");
        assert!(!src.contains(" % 4 == 0"), "a needless test:\n{src}");
    }
}
