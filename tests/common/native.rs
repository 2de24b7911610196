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

/// A region program of one step (`step`: a region's JSON) over fp32 `inputs` (name, shape),
/// whose program output `out` is the step's buffer `buf`.
pub fn region_program(
    step: &str,
    inputs: &[(&str, Vec<usize>)],
    out: &str,
    buf: &str,
) -> dlc_egg::ir::region::program::RegionProgram {
    let ins: Vec<String> = inputs
        .iter()
        .map(|(n, s)| format!(r#"{{"name": "{n}", "dtype": "fp32", "shape": {s:?}}}"#))
        .collect();
    let text = format!(
        r#"{{"inputs": [{}], "steps": [{step}], "outputs": [["{out}", "{buf}"]]}}"#,
        ins.join(", ")
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Runs region program `p` natively (2 threads; `params`: the inputs read as constant
/// parameters, packed once) and by the reference playback on random inputs (`seed`), asserts
/// they agree, and returns the kernels' notes.
pub fn check_region(
    p: &dlc_egg::ir::region::program::RegionProgram,
    inputs: &[(&str, Vec<usize>)],
    params: &[&str],
    seed: u64,
    what: &str,
) -> Vec<String> {
    let ins: BTreeMap<String, Tensor> = inputs
        .iter()
        .enumerate()
        .map(|(k, (n, s))| {
            let t = dlc_egg::run::random_tensor(
                dlc_egg::ir::dtype::DType::F32,
                s.clone(),
                seed,
                k as u64,
                0,
            );
            (n.to_string(), t)
        })
        .collect();
    let b = BTreeMap::new();
    let want = evaluate_program(p, &b, &ins).expect("reference");
    let params: std::collections::BTreeSet<String> = params.iter().map(|n| n.to_string()).collect();
    let (native, loaded) = prepare(p, &params, None).expect("native");
    let mut o = opts();
    o.params = params;
    let (got, _) = run_loaded(p, &native, &loaded, &b, &ins, &o).expect("run");
    compare_all(&got, &want, what).unwrap();
    native
        .kernels
        .iter()
        .flat_map(|k| k.notes.clone())
        .collect()
}

/// A region input's JSON: fp32, row-major, of `shape`.
pub fn region_input(name: &str, shape: &[u64]) -> String {
    format!(
        r#"{{"name": "{name}", "dtype": "fp32", "memref": {{"shape": {shape:?}, "alignment": 128, "noalias": true, "layout": {{"kind": "row_major"}}}}}}"#
    )
}

/// The native kernels' notes (what the C emitter chose) of graph `text` optimized with the
/// default options.
pub fn graph_notes(text: &str) -> Vec<String> {
    let g = load_str(text, "notes").expect("load");
    let prog = lower(&g).expect("lower");
    let o = optimize(&prog, &OptimizeOptions::default()).expect("optimize");
    let native = dlc_egg::cpu::program::emit_program(&o.program).expect("emit");
    native.kernels.into_iter().flat_map(|k| k.notes).collect()
}
