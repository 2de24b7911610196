//! Flat kernels (`src/cpu/emit_loops.rs`, `flat_collapse`) share their leading loops among the
//! threads as one collapsed `omp parallel for`: a kernel whose outermost extent is 1 (BERT's
//! masked softmax over `[1, 12, 128, 128]` ran on one thread) still splits its work. The native
//! program must match the reference, and two threads must give the one-thread results bit for
//! bit (each point's value, its reductions included, is computed within one work item).

mod common;

use common::native::{check_graph, compare_all, opts};
use dlc_egg::cpu::exec::{prepare, run_loaded, NativeOptions};
use dlc_egg::eval::evaluate;
use dlc_egg::ir::frontend::load_str;
use dlc_egg::lower::lower;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use std::collections::{BTreeMap, BTreeSet};

/// `X / Σ X` over all of `X: [1, H, S, C]`: the global sum leaves no outer iter, so the region
/// is flat; its pointwise loop nest has the size-1 batch outermost. `Y`, a row's max over the
/// last axis (`[1, H, S]`), is a flat reduce let.
const GLOBAL_NORM: &str = r#"{
  "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Z"}, {"tensor": "M"}]},
  "symbols": {"H": 12, "S": 16, "C": 37},
  "tensors": {
    "X": {"dtype": "fp32", "shape": [1, "H", "S", "C"]},
    "T": {"dtype": "fp32", "shape": [1, 1, 1, 1]},
    "Z": {"dtype": "fp32", "shape": [1, "H", "S", "C"]},
    "M": {"dtype": "fp32", "shape": [1, "H", "S"]}
  },
  "graph": [
    {"op": "Reduce", "name": "t", "inputs": ["X"], "outputs": ["T"],
     "attrs": {"fn": "sum", "axes": [0, 1, 2, 3], "keepdim": true}},
    {"op": "Elementwise", "name": "z", "inputs": ["X", "T"], "outputs": ["Z"], "attrs": {"fn": "div"}},
    {"op": "Reduce", "name": "m", "inputs": ["X"], "outputs": ["M"], "attrs": {"fn": "max", "axes": [3]}}
  ]
}"#;

#[test]
fn a_flat_kernel_with_outer_extent_one_collapses_its_leading_loops() {
    let g = load_str(GLOBAL_NORM, "flat").expect("load");
    let prog = lower(&g).expect("lower");
    let o = optimize(&prog, &OptimizeOptions::default()).expect("optimize");
    let (native, loaded) = prepare(&o.program, &BTreeSet::new(), None).expect("native");
    let flat: Vec<_> = native
        .kernels
        .iter()
        .filter(|k| k.form.starts_with("flat"))
        .collect();
    assert!(!flat.is_empty(), "{:?}", native.kernels);
    // The pointwise nest over [1, H, S, C]: its three leading loops (the batch of 1 among
    // them) are one parallel loop of H·S work items; the vector loop over C stays whole.
    let body = |f: &str| -> String {
        let start = native.source.find(&format!("int {f}(")).expect("function");
        let end = native.source[start..].find("\n}\n").expect("end");
        native.source[start..start + end].to_string()
    };
    let collapsed = flat
        .iter()
        .any(|k| body(&k.function).contains("#pragma omp parallel for collapse(3)"));
    assert!(collapsed, "{}", body(&flat[0].function));
    let binds: BTreeMap<String, i64> = BTreeMap::new();
    let prepared = dlc_egg::run::prepare_inputs(&g, &[], &binds, Some(5)).expect("inputs");
    let want = evaluate(&prog, &prepared.bindings, &prepared.tensors).expect("reference");
    let run = |threads: usize| {
        let nopts = NativeOptions { threads, ..opts() };
        let (got, _) = run_loaded(
            &o.program,
            &native,
            &loaded,
            &prepared.bindings,
            &prepared.tensors,
            &nopts,
        )
        .expect("runs");
        got
    };
    let (one, two) = (run(1), run(2));
    compare_all(&two, &want, "flat, 2 threads").unwrap();
    assert_eq!(one, two, "two threads differ from one");
}

#[test]
fn collapsed_flat_kernels_match_the_reference_with_tails() {
    // extents of 1 in every position, and totals on either side of the parallel threshold
    for (h, s, c) in [
        (1, 1, 1),
        (1, 1, 5000),
        (3, 1, 17),
        (1, 200, 33),
        (12, 16, 37),
    ] {
        let what = format!("global norm H={h} S={s} C={c}");
        check_graph(GLOBAL_NORM, &[("H", h), ("S", s), ("C", c)], &what).unwrap();
    }
}
