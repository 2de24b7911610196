//! Load-time constant canonicalization (`src/ir/frontend/pack.rs`, issue 23): small immutable
//! constants with bit-identical values are one value in the lowered program (the real BERT's
//! per-layer `finfo.min` mask scalars), the declared inputs stay, and the optimized program still
//! computes what the graph does.

use dlc_egg::ir::egraph::{add_program, TensorGraph, TensorLang};
use dlc_egg::ir::frontend::{equal_constants, Graph};
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::rules::testing::check_optimized;
use dlc_egg::{ir::frontend, lower};
use serde_json::json;
use std::collections::BTreeMap;

/// `Y = X·c1 + X·c2 + X·z1 + X·z2 + X·w` with `c1 = c2 = -3.5`, `z1 = +0`, `z2 = -0` (scalars)
/// and `w` a scalar argument (bound at run time, not a constant).
fn graph() -> Graph {
    let mut tensors = serde_json::Map::new();
    tensors.insert("X".into(), json!({"dtype": "fp32", "shape": [2, 4]}));
    let mut inputs = vec![json!({"tensor": "X"})];
    let mut constants = serde_json::Map::new();
    let mut nodes = vec![];
    let mut terms = vec![];
    for (name, value) in [
        ("c1", -3.5),
        ("c2", -3.5),
        ("z1", 0.0),
        ("z2", -0.0),
        ("w", -3.5),
    ] {
        tensors.insert(name.into(), json!({"dtype": "fp32", "shape": [1]}));
        if name == "w" {
            inputs.push(json!({"tensor": name, "role": "param"}));
        } else {
            inputs.push(json!({"tensor": name, "role": "param", "storage": "const_pool"}));
            constants.insert(name.into(), json!({ "values": [value] }));
        }
        let t = format!("m_{name}");
        tensors.insert(t.clone(), json!({"dtype": "fp32", "shape": [2, 4]}));
        nodes.push(json!({"op": "Elementwise", "name": format!("mul_{name}"),
            "inputs": ["X", name], "outputs": [t], "attrs": {"fn": "mul"}}));
        terms.push(t);
    }
    let mut acc = terms[0].clone();
    for (i, t) in terms.iter().enumerate().skip(1) {
        let s = if i + 1 == terms.len() {
            "Y".to_string()
        } else {
            format!("s{i}")
        };
        tensors.insert(s.clone(), json!({"dtype": "fp32", "shape": [2, 4]}));
        nodes.push(json!({"op": "Elementwise", "name": format!("add{i}"),
            "inputs": [acc, t], "outputs": [s], "attrs": {"fn": "add"}}));
        acc = s;
    }
    let doc = json!({
        "signature": {"inputs": inputs, "outputs": [{"tensor": "Y"}]},
        "tensors": tensors,
        "constants": constants,
        "graph": nodes,
    });
    frontend::load_str(&doc.to_string(), "consts.json").unwrap_or_else(|d| panic!("{d}"))
}

#[test]
fn equal_small_constants_are_one_value_and_signed_zeros_are_not() {
    let g = graph();
    let alias = equal_constants(&g);
    let want: BTreeMap<String, String> = [("c2".to_string(), "c1".to_string())].into();
    assert_eq!(
        alias, want,
        "only c2 = c1 (z1 = +0 and z2 = -0 differ; w is not a constant)"
    );
    let p = lower::lower(&g).unwrap_or_else(|d| panic!("{d}"));
    // The declared inputs stay (c2 is bound at run time as before, just not read).
    let names: Vec<&str> = p.inputs.iter().map(|i| i.tensor.as_str()).collect();
    assert_eq!(names, ["X", "c1", "c2", "z1", "z2", "w"]);
    // X·c1 and X·c2 are one e-class: four products, not five.
    let mut eg = TensorGraph::default();
    add_program(&mut eg, &p);
    let muls = eg
        .classes()
        .filter(|c| c.nodes.iter().any(|n| matches!(n, TensorLang::Mul(_))))
        .count();
    assert_eq!(muls, 4);
    let o = optimize(&p, &OptimizeOptions::default()).expect("optimizes");
    check_optimized(&p, &o, &BTreeMap::new(), &[1, 2]).unwrap_or_else(|e| panic!("{e}"));
}
