//! The native CPU backend against the reference evaluator: one graph optimized, run natively
//! and compared (`tests/cpu_native.rs`, `tests/cpu_stream.rs`).

use super::compare_output;
use dlc_egg::cpu::exec::{param_inputs, prepare, run_loaded, NativeOptions};
use dlc_egg::eval::evaluate;
use dlc_egg::ir::frontend::load_str;
use dlc_egg::ir::region::program::evaluate_program;
use dlc_egg::lower::lower;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::tensor::Tensor;
use std::collections::BTreeMap;

pub fn opts() -> NativeOptions {
    NativeOptions {
        threads: 2,
        repeat: 0,
        params: Default::default(),
    }
}

/// Graphs whose optimized program already differs from the reference beyond tolerance when the
/// region interpreter plays it back (`run --optimized`): the optimizer's GELU is decomposed into
/// fp32 steps rounded one by one, the reference computes it in one f64 step, and the fp16 hidden
/// layer then rounds some values the other way, which the 3072-term second GEMM amplifies.
/// For these the native program must match the playback instead (it is bit-identical today).
/// TODO(issue 16): remove when the optimizer's GELU rounds as the reference does.
pub const PLAYBACK_ORACLE: &[&str] = &["mlp_gelu.json"];

/// Optimizes `text`, runs it natively and with the reference evaluator on seeded inputs. A graph
/// with `role: param` inputs runs with kept weight packs: twice per loaded program (the second
/// run reads the packs of the first), and again on new inputs (a new pack epoch).
pub fn check_graph(text: &str, binds: &[(&str, i64)], what: &str) -> Result<(), String> {
    let g = load_str(text, what).map_err(|d| format!("{what}: load: {d}"))?;
    let binds: BTreeMap<String, i64> = binds.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let prog = lower(&g).map_err(|d| format!("{what}: lower: {d}"))?;
    let o = optimize(&prog, &OptimizeOptions::default())
        .map_err(|e| format!("{what}: optimize: {e}"))?;
    let params = param_inputs(&g);
    let seeds: &[u64] = if params.is_empty() { &[3] } else { &[3, 4] };
    let (native, loaded) =
        prepare(&o.program, &params, None).map_err(|e| format!("{what}: native: {e}"))?;
    let nopts = NativeOptions {
        repeat: u32::from(!params.is_empty()),
        params,
        ..opts()
    };
    for seed in seeds {
        let prepared = dlc_egg::run::prepare_inputs(&g, &[], &binds, Some(*seed))
            .map_err(|f| format!("{what}: inputs: {}", f.diagnostics))?;
        let want = evaluate(&prog, &prepared.bindings, &prepared.tensors)
            .map_err(|d| format!("{what}: reference: {d}"))?;
        let (got, _) = run_loaded(
            &o.program,
            &native,
            &loaded,
            &prepared.bindings,
            &prepared.tensors,
            &nopts,
        )
        .map_err(|e| format!("{what}: native: {e}"))?;
        let vs_reference = compare_all(&got, &want, what);
        if vs_reference.is_err() && PLAYBACK_ORACLE.iter().any(|f| what.contains(f)) {
            let played = evaluate_program(&o.program, &prepared.bindings, &prepared.tensors)
                .map_err(|d| format!("{what}: playback: {d}"))?;
            if compare_all(&played, &want, what).is_ok() {
                // The playback is right here, so the native program must be too.
                vs_reference?;
                continue;
            }
            compare_all(&got, &played, what)?;
            continue;
        }
        vs_reference?;
    }
    Ok(())
}

pub fn compare_all(
    got: &BTreeMap<String, Tensor>,
    want: &BTreeMap<String, Tensor>,
    what: &str,
) -> Result<(), String> {
    for (name, w) in want {
        let t = got
            .get(name)
            .ok_or_else(|| format!("{what}: output {name} missing"))?;
        compare_output(name, t, w, "the reference evaluator")
            .map_err(|e| format!("{what}: {}", e.chars().take(400).collect::<String>()))?;
    }
    Ok(())
}
