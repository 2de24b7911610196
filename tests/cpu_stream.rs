//! The streamed outputs of the native CPU backend (issue 16): a rows-form kernel whose output may
//! reach `DLC_STREAM_MIN_BYTES` stores each row either into a thread buffer copied out with
//! non-temporal stores (`dlc_stream`) or directly into the output. Both paths against the
//! reference evaluator, on row lengths that leave tails for every vector width. One test in
//! this file: it sets `DLC_CPU_STREAM_MIN_BYTES` (read when the C is compiled), so nothing may
//! run beside it.

mod common;

use common::compare_output;
use dlc_egg::cpu::exec::evaluate_native;
use dlc_egg::cpu::exec::NativeOptions;
use dlc_egg::eval::evaluate;
use dlc_egg::ir::frontend::load_str;
use dlc_egg::ir::lower::lower;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use std::collections::BTreeMap;

/// Two softmaxes over rows of `C` (fp32, symbolic rows `T` and columns `C`).
const GRAPH: &str = r#"{
  "signature": {"inputs": [{"tensor": "X", "role": "data"}], "outputs": [{"tensor": "Y"}, {"tensor": "Z"}]},
  "symbols": {"T": 8, "C": 40},
  "tensors": {
    "X": {"dtype": "fp32", "shape": ["T", "C"]},
    "Y": {"dtype": "fp32", "shape": ["T", "C"]},
    "Z": {"dtype": "fp32", "shape": ["T", "C"]}
  },
  "graph": [
    {"op": "Softmax", "name": "sm", "inputs": ["X"], "outputs": ["Y"], "attrs": {"axis": -1}},
    {"op": "Softmax", "name": "sm2", "inputs": ["Y"], "outputs": ["Z"], "attrs": {"axis": -1}}
  ]
}"#;

fn check(threshold: &str) -> Vec<String> {
    std::env::set_var("DLC_CPU_STREAM_MIN_BYTES", threshold);
    let g = load_str(GRAPH, "stream.json").expect("load");
    let prog = lower(&g).expect("lower");
    let o = optimize(&prog, &OptimizeOptions::default()).expect("optimize");
    let mut fails = Vec::new();
    for (t, c) in [(3, 1), (5, 7), (4, 17), (2, 33), (3, 1000), (1, 4099)] {
        let binds: BTreeMap<String, i64> = [("T".to_string(), t), ("C".to_string(), c)].into();
        let p = dlc_egg::run::prepare_inputs(&g, &[], &binds, Some(7)).expect("inputs");
        let want = evaluate(&prog, &p.bindings, &p.tensors).expect("reference");
        let opts = NativeOptions {
            threads: 2,
            repeat: 0,
            params: Default::default(),
        };
        let got = match evaluate_native(&o.program, &p.bindings, &p.tensors, &opts, None) {
            Ok((got, _)) => got,
            Err(e) => {
                fails.push(format!("threshold {threshold} T={t} C={c}: native: {e}"));
                continue;
            }
        };
        for (name, w) in &want {
            let r = match got.get(name) {
                Some(x) => compare_output(name, x, w, "the reference evaluator"),
                None => Err(format!("output {name} missing")),
            };
            if let Err(e) = r {
                let e: String = e.chars().take(300).collect();
                fails.push(format!("threshold {threshold} T={t} C={c}: {e}"));
            }
        }
    }
    fails
}

#[test]
fn streamed_and_direct_rows_match_the_reference() {
    // 0: every row staged and streamed; huge: every row stored directly into the output.
    let mut fails = check("0");
    fails.extend(check("9000000000000000000"));
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}
