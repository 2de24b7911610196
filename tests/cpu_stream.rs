//! The streamed outputs of the native CPU backend (issue 16): a rows-form kernel whose output may
//! reach `DLC_STREAM_MIN_BYTES` stores each row either into a thread buffer copied out with
//! non-temporal stores (`dlc_stream`) or directly into the output. Both paths against the
//! reference evaluator, on row lengths that leave tails for every vector width. One test in
//! this file: it sets `DLC_CPU_STREAM_MIN_BYTES` (read when the C is compiled), so nothing may
//! run beside it.

mod common;

use common::native::check_graph;

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

/// The graph at row lengths that leave tails for every vector width, natively (the streaming
/// threshold set to `threshold` bytes) against the reference: the failures.
fn check(threshold: &str) -> Vec<String> {
    std::env::set_var("DLC_CPU_STREAM_MIN_BYTES", threshold);
    let mut fails = Vec::new();
    for (t, c) in [(3, 1), (5, 7), (4, 17), (2, 33), (3, 1000), (1, 4099)] {
        let what = format!("threshold {threshold} T={t} C={c}");
        if let Err(e) = check_graph(GRAPH, &[("T", t), ("C", c)], &what) {
            fails.push(e);
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
