//! The attention template: the optimizer's two attention regions (scores + softmax into a
//! deferred buffer, then `P·V`) emitted as ONE streaming-softmax kernel, run on the CPU through
//! the host emulation (`codegen::host`) and compared with the reference evaluators; and the
//! cases where the pattern must not match (two launches).

use dlc_egg::codegen::host::{run_on_host, HostOptions};
use dlc_egg::codegen::manifest::{Manifest, ManifestStep};
use dlc_egg::codegen::templates::attention::{self, Mask};
use dlc_egg::codegen::Emitted;
use dlc_egg::eval::evaluate;
use dlc_egg::ir::region::program::{evaluate_program, RegionProgram, Step};
use dlc_egg::ir::region::{BinaryFn, Expr, Region, UnaryFn};
use dlc_egg::ir::tiny::Program;
use dlc_egg::optimize::{optimize, OptimizeOptions, Optimized};
use dlc_egg::pipeline::plan_and_emit;
use dlc_egg::rules::testing::random_inputs;
use dlc_egg::tensor::Tensor;
use dlc_egg::{ir::frontend, lower};
use std::collections::BTreeMap;

#[path = "codegen_attention/cover.rs"]
mod cover;
#[path = "codegen_attention/plans.rs"]
mod plans;
#[path = "codegen_attention/variants.rs"]
mod variants;

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

/// `p` optimized for `arch` (the other options at their defaults).
fn optimized_for(p: &Program, arch: dlc_egg::target::Arch) -> Optimized {
    let opts = OptimizeOptions {
        target: arch.target(),
        ..OptimizeOptions::default()
    };
    optimize(p, &opts).expect("optimizes")
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
    p.regions().collect()
}

fn emitted(o: &Optimized, program: &RegionProgram) -> Emitted {
    plan_and_emit(program, &o.model).expect("emits").emitted
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
