//! Optimizer fuzzing: the random valid `graph.json` documents of `common::graphgen` (the cases of
//! `pipeline_fuzz`) are lowered, optimized with the default options
//! (`dlc_egg::optimize::optimize`) and the extracted region program is played back
//! (`evaluate_program`). Every signature output must have the reference evaluator's dtype and
//! shape, and its values: exactly for i32/bool outputs, within graph-json's tolerances for float
//! outputs (`|a − b| <= tol + tol·|b|`, tol 1e-3 for fp32 and 1e-2 for fp16/bf16; a non-finite
//! reference value must be matched exactly, NaN by NaN). An optimizer error, a failing playback or
//! a panic is a failure too; the report gives the document, as `pipeline_fuzz` does.
//!
//! The cases are the same on every run (`OPTIMIZE_FUZZ_SEED` picks others).
//! `OPTIMIZE_FUZZ_CASES=N` runs N cases (500 by default, about 15 s in the test profile).
//! Failures are minimized by hand into `tests/optimize_regressions.rs`.

mod common;

use common::compare_output;
use common::graphgen::{gen_case, run_reported, Case};
use dlc_egg::eval::evaluate;
use dlc_egg::ir::frontend::{load_str, resolve_symbols};
use dlc_egg::ir::region::program::evaluate_program;
use dlc_egg::lower::lower;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use proptest::prelude::*;

fn run_case(case: &Case) -> Result<(), String> {
    run_case_with(case, &OptimizeOptions::default())
}

/// With `--fast-math`: the reassociating rules too (`reduce-hoist-invariant-mul`, the pool
/// absorbed into a classifier's contraction, …), still within graph-json's tolerances.
fn run_case_fast_math(case: &Case) -> Result<(), String> {
    let opts = OptimizeOptions {
        fast_math: true,
        ..OptimizeOptions::default()
    };
    run_case_with(case, &opts)
}

fn run_case_with(case: &Case, opts: &OptimizeOptions) -> Result<(), String> {
    let text = case.doc.to_string();
    let g = load_str(&text, "fuzz.json").map_err(|d| format!("load rejects it:\n{d}"))?;
    let bindings = resolve_symbols(&g, &case.cli, &case.arrays)
        .map_err(|d| format!("resolve_symbols fails:\n{d}"))?;
    let prog = lower(&g).map_err(|d| format!("lower fails:\n{d}"))?;
    let ins = case.input_map();
    let want = evaluate(&prog, &bindings, &ins)
        .map_err(|d| format!("the reference evaluator fails:\n{d}"))?;
    let o = optimize(&prog, opts).map_err(|e| format!("optimize fails: {e}"))?;
    let got = evaluate_program(&o.program, &bindings, &ins)
        .map_err(|d| format!("the optimized program fails to evaluate:\n{d}"))?;
    for (name, w) in &want {
        let t = got
            .get(name)
            .ok_or_else(|| format!("output {name} missing from the optimized program"))?;
        compare_output(name, t, w, "the reference evaluator")?;
    }
    if let Some(extra) = got.keys().find(|k| !want.contains_key(*k)) {
        return Err(format!("the optimized program has an extra output {extra}"));
    }
    Ok(())
}

/// The generator's seed: `OPTIMIZE_FUZZ_SEED`, or a fixed one, so that CI runs the same cases
/// every time (explore with `OPTIMIZE_FUZZ_SEED=$RANDOM OPTIMIZE_FUZZ_CASES=5000`).
fn fuzz_seed() -> u64 {
    std::env::var("OPTIMIZE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_d1c0)
}

/// Case count: 500, or `OPTIMIZE_FUZZ_CASES`.
fn fuzz_cases() -> u32 {
    std::env::var("OPTIMIZE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

proptest! {
    // Failures are minimized by hand into tests/optimize_regressions.rs; no persistence file.
    #![proptest_config(ProptestConfig {
        cases: fuzz_cases(),
        rng_seed: proptest::test_runner::RngSeed::Fixed(fuzz_seed()),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The optimized program of a valid document computes what the reference evaluator computes.
    #[test]
    fn optimized_programs_match_the_reference(tape in prop::collection::vec(any::<u32>(), 0..400)) {
        let case = gen_case(&tape);
        run_reported(&case, run_case).map_err(TestCaseError::fail)?;
    }

    /// The same with `fast_math` (every rule of every phase, the substitutions included).
    #[test]
    fn fast_math_programs_match_the_reference(tape in prop::collection::vec(any::<u32>(), 0..400)) {
        let case = gen_case(&tape);
        run_reported(&case, run_case_fast_math).map_err(TestCaseError::fail)?;
    }
}
