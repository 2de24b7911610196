//! Derived constants (issue 23, `dlc_egg::extract::derived`): a kernel whose inputs are all
//! weights bound at load time runs once when the weights are bound, is priced as a plain input
//! read, and the program still computes the reference's outputs; a `param` without a value stays
//! a per-run input.

use dlc_egg::ir::frontend::{self, Graph};
use dlc_egg::optimize::{bound_constants, optimize, OptimizeOptions, Optimized};
use dlc_egg::run::{self, Device, RunOptions};
use std::collections::BTreeMap;

/// Deterministic weight values in [-0.5, 0.5).
fn values(n: usize, seed: u32) -> String {
    let v: Vec<String> = (0..n)
        .map(|i| {
            let x = ((i as u32)
                .wrapping_mul(2654435761)
                .wrapping_add(seed * 40503))
                % 1000;
            format!("{}", x as f64 / 1000.0 - 0.5)
        })
        .collect();
    v.join(",")
}

/// `Y = X · (W₁ ‖ W₂)` (the weights concatenated along N), with the weights' values in the
/// graph when `bound`.
fn concat_gemm(bound: bool) -> Graph {
    let constants = if bound {
        format!(
            r#","constants": {{"W1": {{"values": [{}]}}, "W2": {{"values": [{}]}}}}"#,
            values(64 * 48, 1),
            values(64 * 80, 2)
        )
    } else {
        String::new()
    };
    let doc = format!(
        r#"{{
  "signature": {{
    "inputs": [{{"tensor": "X"}}, {{"tensor": "W1", "role": "param"}}, {{"tensor": "W2", "role": "param"}}],
    "outputs": [{{"tensor": "Y"}}]
  }},
  "symbols": {{"M": 256}},
  "tensors": {{
    "X": {{"dtype": "fp32", "shape": ["M", 64]}},
    "W1": {{"dtype": "fp32", "shape": [64, 48]}},
    "W2": {{"dtype": "fp32", "shape": [64, 80]}},
    "Y": {{"dtype": "fp32", "shape": ["M", 128]}}
  }},
  "graph": [
    {{"op": "Concat", "name": "cat", "inputs": ["W1", "W2"], "outputs": ["W"], "attrs": {{"axis": 1}}}},
    {{"op": "MatMul", "name": "mm", "inputs": ["X", "W"], "outputs": ["Y"]}}
  ]{constants}
}}"#
    );
    frontend::load_str(&doc, "concat_gemm.json").unwrap_or_else(|d| panic!("{d}"))
}

/// `Y = X · (Wᵀ / ‖Wᵀ‖)` (weight normalization: each output column's weights scaled by the
/// inverse of their norm, a reduction over the weights), `W: [N, K]` transposed first.
fn normalized_gemm(bound: bool) -> Graph {
    let constants = if bound {
        format!(
            r#","constants": {{"W": {{"values": [{}]}}}}"#,
            values(96 * 64, 3)
        )
    } else {
        String::new()
    };
    let doc = format!(
        r#"{{
  "signature": {{
    "inputs": [{{"tensor": "X"}}, {{"tensor": "W", "role": "param"}}],
    "outputs": [{{"tensor": "Y"}}]
  }},
  "symbols": {{"M": 256}},
  "tensors": {{
    "X": {{"dtype": "fp32", "shape": ["M", 64]}},
    "W": {{"dtype": "fp32", "shape": [96, 64]}},
    "Y": {{"dtype": "fp32", "shape": ["M", 96]}}
  }},
  "graph": [
    {{"op": "Permute", "name": "t", "inputs": ["W"], "outputs": ["Wt"], "attrs": {{"perm": [1, 0]}}}},
    {{"op": "Elementwise", "name": "sq", "fn": "mul", "inputs": ["Wt", "Wt"], "outputs": ["W2"]}},
    {{"op": "Reduce", "name": "ss", "inputs": ["W2"], "outputs": ["S"], "attrs": {{"fn": "sum", "axes": [0], "keepdim": true}}}},
    {{"op": "Elementwise", "name": "inv", "fn": "rsqrt", "inputs": ["S"], "outputs": ["R"]}},
    {{"op": "Elementwise", "name": "scale", "fn": "mul", "inputs": ["Wt", "R"], "outputs": ["Wn"]}},
    {{"op": "MatMul", "name": "mm", "inputs": ["X", "Wn"], "outputs": ["Y"]}}
  ]{constants}
}}"#
    );
    frontend::load_str(&doc, "normalized_gemm.json").unwrap_or_else(|d| panic!("{d}"))
}

/// Optimizes `g` with its bound weights as constants (`derived`) or as per-run inputs.
fn optimized(g: &Graph, derived: bool) -> Optimized {
    let prog = run::lower_and_verify(g).unwrap_or_else(|f| panic!("{f:?}"));
    let constants = if derived {
        bound_constants(g)
    } else {
        Default::default()
    };
    optimize(
        &prog,
        &OptimizeOptions {
            constants,
            ..OptimizeOptions::default()
        },
    )
    .expect("optimizes")
}

fn names(o: &Optimized) -> Vec<String> {
    o.kernels
        .iter()
        .map(|k| format!("{}: {}", k.name, k.body))
        .collect()
}

#[test]
fn a_weight_reduction_feeding_a_gemm_is_precomputed_one_fewer_kernel() {
    let g = normalized_gemm(true);
    assert_eq!(
        bound_constants(&g).into_iter().collect::<Vec<_>>(),
        vec!["W".to_string()]
    );
    let per_run = optimized(&g, false);
    let at_load = optimized(&g, true);
    assert!(per_run.precomputed.is_empty() && per_run.program.derived.is_empty());
    assert!(
        at_load.kernels.len() < per_run.kernels.len(),
        "with derived constants {:?}; without {:?}",
        names(&at_load),
        names(&per_run)
    );
    assert_eq!(at_load.kernels.len(), 1, "{:?}", names(&at_load));
    assert!(!at_load.precomputed.is_empty());
    // What is priced is what runs: the derived kernels are not in the per-run cost.
    assert_eq!(at_load.cost.kernels, at_load.kernels.len() as u64);
    assert!(
        at_load.cost.time < per_run.cost.time,
        "{:?} vs {:?}",
        at_load.cost,
        per_run.cost
    );
    // The GEMM reads the derived constant as an input of the per-run program.
    let derived = at_load.program.derived_inputs();
    assert_eq!(derived.len(), 1, "{derived:?}");
    let gemm_inputs = &at_load.kernels[0].inputs;
    assert!(
        gemm_inputs.iter().any(|i| derived.contains(i)),
        "{gemm_inputs:?} reads none of {derived:?}"
    );
    let report = dlc_egg::optimize::explain::render(&at_load.report(), false);
    assert!(report.contains("precomputed at load"), "{report}");
}

#[test]
fn a_weight_concat_feeding_a_gemm_is_precomputed() {
    let g = concat_gemm(true);
    let per_run = optimized(&g, false);
    let at_load = optimized(&g, true);
    assert!(
        at_load.kernels.len() <= per_run.kernels.len()
            && at_load.cost.time <= per_run.cost.time
            && at_load.cost.bytes <= per_run.cost.bytes,
        "with derived constants {:?} {:?}; without {:?} {:?}",
        names(&at_load),
        at_load.cost,
        names(&per_run),
        per_run.cost
    );
    assert_eq!(at_load.kernels.len(), 1, "{:?}", names(&at_load));
    assert_eq!(at_load.program.derived_inputs().len(), 1);
}

#[test]
fn a_param_without_a_value_stays_a_per_run_input() {
    for g in [normalized_gemm(false), concat_gemm(false)] {
        assert!(bound_constants(&g).is_empty());
        let o = optimized(&g, true);
        assert!(o.precomputed.is_empty() && o.program.derived.is_empty());
        assert_eq!(o.kernels.len(), optimized(&g, false).kernels.len());
    }
    // A `data` input with a value is per-call data, not a weight.
    let doc = r#"{
  "signature": {"inputs": [{"tensor": "X"}, {"tensor": "W"}], "outputs": [{"tensor": "Y"}]},
  "tensors": {"X": {"dtype": "fp32", "shape": [4, 2]}, "W": {"dtype": "fp32", "shape": [2, 2]},
              "Y": {"dtype": "fp32", "shape": [4, 2]}},
  "graph": [{"op": "MatMul", "name": "mm", "inputs": ["X", "W"], "outputs": ["Y"]}],
  "constants": {"W": {"values": [1, 2, 3, 4]}}
}"#;
    let g = frontend::load_str(doc, "data.json").unwrap_or_else(|d| panic!("{d}"));
    assert!(bound_constants(&g).is_empty());
}

/// Runs `g` on `device` with seeded inputs (the weights from the graph) and returns the outputs.
fn run_on(g: &Graph, device: Device, optimized: bool, dir: &str) -> BTreeMap<String, Vec<f64>> {
    let out = std::env::temp_dir().join(format!("dlc-derived-{dir}-{}", std::process::id()));
    let opts = RunOptions {
        out_dir: out.clone(),
        device,
        optimized,
        random: Some(7),
        ..RunOptions::default()
    };
    let written = run::run_graph(g, &opts).unwrap_or_else(|f| panic!("{f:?}"));
    let got = written
        .iter()
        .map(|w| {
            let a = dlc_egg::npy::read_array(&w.path).expect("reads the output");
            let dlc_egg::npy::NpyData::F32(v) = a.data else {
                panic!("fp32 outputs are written as <f4: {}", a.descr)
            };
            (w.tensor.clone(), v.into_iter().map(f64::from).collect())
        })
        .collect();
    let _ = std::fs::remove_dir_all(&out);
    got
}

fn assert_close(a: &BTreeMap<String, Vec<f64>>, b: &BTreeMap<String, Vec<f64>>, what: &str) {
    for (name, x) in a {
        let y = &b[name];
        assert_eq!(x.len(), y.len());
        for (i, (p, q)) in x.iter().zip(y).enumerate() {
            assert!(
                (p - q).abs() <= 1e-4 + 1e-4 * q.abs(),
                "{what}: {name}[{i}] = {p}, reference {q}"
            );
        }
    }
}

#[test]
fn outputs_with_derived_constants_match_the_reference() {
    for (k, g) in [normalized_gemm(true), concat_gemm(true)]
        .into_iter()
        .enumerate()
    {
        let reference = run_on(&g, Device::Reference, false, &format!("ref{k}"));
        let regions = run_on(&g, Device::Reference, true, &format!("opt{k}"));
        assert_close(&regions, &reference, "run --optimized");
        let native = run_on(&g, Device::Cpu, false, &format!("cpu{k}"));
        assert_close(&native, &reference, "run --device cpu");
    }
}
