//! The plain-reduction template (`codegen::templates::reduce`, issue 15): a graph `Reduce` over
//! its innermost axes runs as a cooperative kernel (threads of a row fold strided shares, warp
//! shuffles, partials through shared memory) instead of one thread per output with a serial
//! loop. Checks that the large contiguous cases are planned and emitted on it, and that every
//! case — all fns, fp16/bf16/fp32, keepdim, odd and prime sizes, 1, a symbolic row count, the
//! reductions the template does not take — computes on the CPU emulation what the reference
//! evaluator does. No GPU needed.

use dlc_egg::codegen::generate;
use dlc_egg::target::Arch;
use std::collections::BTreeMap;

mod common;
use common::host::{emulation_matches_reference, optimized_for};

/// A one-`Reduce` graph: `X` of `dims` in `dt` (JSON entries: integers or quoted symbol names,
/// bound by `symbols`), folded by `func` over `axes` (negative from the end).
fn graph(
    func: &str,
    dt: &str,
    dims: &[&str],
    axes: &[i64],
    keepdim: bool,
    symbols: &str,
) -> String {
    let rank = dims.len() as i64;
    let reduced = |i: usize| axes.iter().any(|&a| (a + rank) % rank == i as i64);
    let out: Vec<&str> = (0..dims.len())
        .filter_map(|i| match (reduced(i), keepdim) {
            (false, _) => Some(dims[i]),
            (true, true) => Some("1"),
            (true, false) => None,
        })
        .collect();
    let (x, y) = (dims.join(", "), out.join(", "));
    let axes = format!("{axes:?}");
    format!(
        r#"{{"signature": {{"inputs": [{{"tensor": "X", "role": "data"}}], "outputs": [{{"tensor": "Y"}}]}},
 "symbols": {{{symbols}}},
 "tensors": {{"X": {{"dtype": "{dt}", "shape": [{x}]}}, "Y": {{"dtype": "{dt}", "shape": [{y}]}}}},
 "graph": [{{"op": "Reduce", "name": "red", "inputs": ["X"], "outputs": ["Y"],
             "attrs": {{"fn": "{func}", "axes": {axes}, "keepdim": {keepdim}, "acc_dtype": "fp32"}}}}]}}"#
    )
}

/// The tolerance of a `dt` output: fp32 sums of up to 4099 terms in another order differ by a few ulps of the
/// row's magnitude; a 16-bit result may round to the neighbouring value (one ulp: 2⁻¹⁰ for
/// fp16, 2⁻⁷ for bf16, relative).
fn rel(dt: &str) -> f64 {
    match dt {
        "fp16" => 2e-3,
        "bf16" => 1e-2,
        _ => 1e-4,
    }
}

/// Optimizes `text` for `arch`, returns the emitted templates, and checks the emulated output
/// against the reference at `binds`.
fn check(text: &str, arch: Arch, binds: &[(&str, i64)], rel: f64, what: &str) -> Vec<String> {
    let (p, o) = optimized_for(text, arch);
    let generated = generate(&o).expect("generates");
    let bindings: BTreeMap<String, i64> = binds.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    emulation_matches_reference(&p, &generated, &bindings, 7, rel, what);
    generated
        .kernels
        .iter()
        .map(|k| k.kernel.template.clone())
        .collect()
}

#[test]
fn long_rows_run_on_the_reduce_template_and_match_the_reference() {
    for arch in [Arch::Sm80, Arch::Sm90] {
        for (dt, func) in [("fp16", "sum"), ("bf16", "max"), ("fp32", "mean")] {
            let text = graph(func, dt, &["64", "4096"], &[-1], false, "");
            let what = format!("{arch:?} {dt} {func} 64x4096");
            let t = check(&text, arch, &[], rel(dt), &what);
            assert_eq!(t, ["reduce"], "{what}");
        }
    }
}

#[test]
fn odd_rows_every_fn_every_dtype() {
    for func in ["sum", "max", "min", "mean", "prod"] {
        for dt in ["fp16", "bf16", "fp32"] {
            let text = graph(func, dt, &["301", "777"], &[1], false, "");
            let what = format!("sm90 {dt} {func} 301x777");
            let t = check(&text, Arch::Sm90, &[], rel(dt), &what);
            // A product is no cooperative fold (TODO(issue 15)): one thread per output.
            let want = if func == "prod" {
                "pointwise"
            } else {
                "reduce"
            };
            assert_eq!(t, [want], "{what}");
        }
    }
}

#[test]
fn keepdim_several_axes_tiny_and_prime_sizes() {
    let cases = [
        ("mean", "fp16", &["96", "768"][..], &[-1][..], true),
        ("sum", "fp32", &["6", "10", "37"], &[1, 2], false),
        ("max", "bf16", &["5", "3", "257"], &[1, 2], true),
        ("sum", "fp32", &["3", "5"], &[1], false),
        ("min", "fp16", &["1", "1"], &[1], true),
        ("sum", "fp32", &["7", "1"], &[1], false),
        ("sum", "fp16", &["13", "4099"], &[1], false),
        ("sum", "fp32", &["4099"], &[0], false),
        ("mean", "fp32", &["8", "0", "16"], &[-1], false),
    ];
    for (func, dt, shape, axes, keepdim) in cases {
        for arch in [Arch::Sm80, Arch::Sm90] {
            let text = graph(func, dt, shape, axes, keepdim, "");
            let what = format!("{arch:?} {dt} {func} {shape:?} axes {axes:?} keepdim {keepdim}");
            check(&text, arch, &[], rel(dt), &what);
        }
    }
}

#[test]
fn symbolic_rows_and_rows_of_a_symbolic_length() {
    let rows = graph(
        "sum",
        "fp16",
        &[r#""N""#, "1024"],
        &[1],
        false,
        r#""N": 300"#,
    );
    let t = check(&rows, Arch::Sm90, &[("N", 37)], rel("fp16"), "rows N=37");
    assert_eq!(t, ["reduce"], "symbolic row count");
    let len = graph(
        "max",
        "fp32",
        &["40", r#""S""#],
        &[1],
        false,
        r#""S": 2048"#,
    );
    for s in [2048, 1001, 1] {
        check(
            &len,
            Arch::Sm90,
            &[("S", s)],
            rel("fp32"),
            &format!("S={s}"),
        );
    }
}

#[test]
fn column_and_middle_reductions_match_the_reference() {
    // Not read along the reduced axis: the pointwise template (coalesced across outputs).
    let cases = [
        ("max", "fp16", &["300", "129"][..], &[0][..]),
        ("sum", "fp32", &["4", "51", "33"], &[1]),
    ];
    for (func, dt, shape, axes) in cases {
        let text = graph(func, dt, shape, axes, false, "");
        let what = format!("{dt} {func} {shape:?} axes {axes:?}");
        let t = check(&text, Arch::Sm90, &[], rel(dt), &what);
        assert_eq!(t, ["pointwise"], "{what}");
    }
}
