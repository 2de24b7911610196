//! A library user's rewrite rule inside the real pipeline: `relu(relu(x)) = relu(x)` added to
//! the `srnf` phase of `optimize`, seen in the phase statistics and in the rewrite chain of the
//! output, the optimized program checked against the reference evaluator, and CUDA emitted.
//!
//! Run: `cargo run --release --example custom_rule`.

use dlc_egg::codegen::emit_program;
use dlc_egg::ir::frontend::load_str;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::rules::testing::check_optimized;
use dlc_egg::rules::Rule;
use dlc_egg::run::lower_and_verify;
use std::error::Error;

/// `Y = relu(relu(X)) + B`: the double ReLU is what the rule removes.
const GRAPH: &str = r#"{
  "signature": {"inputs": [{"tensor": "X"}, {"tensor": "B"}], "outputs": [{"tensor": "Y"}]},
  "symbols": {"T": 32},
  "tensors": {
    "X": {"dtype": "fp32", "shape": ["T", 256]},
    "B": {"dtype": "fp32", "shape": [256]},
    "Y": {"dtype": "fp32", "shape": ["T", 256]}
  },
  "graph": [
    {"op": "Elementwise", "name": "r1", "inputs": ["X"], "outputs": ["H1"], "attrs": {"fn": "relu"}},
    {"op": "Elementwise", "name": "r2", "inputs": ["H1"], "outputs": ["H2"], "attrs": {"fn": "relu"}},
    {"op": "Elementwise", "name": "bias", "inputs": ["H2", "B"], "outputs": ["Y"], "attrs": {"fn": "add"}}
  ]
}"#;

fn main() -> Result<(), Box<dyn Error>> {
    let graph = load_str(GRAPH, "custom_rule.json")?;
    let prog = lower_and_verify(&graph)?;

    // relu(relu(x)) = relu(x): exact for every value (NaN and infinities included).
    let relu_idem: Rule = egg::rewrite!("relu-idem"; "(relu (relu ?x))" => "(relu ?x)");
    let opts = OptimizeOptions::default()
        .with_rule("srnf", relu_idem)
        .with_explain(true);
    let o = optimize(&prog, &opts)?;

    let srnf = o
        .phases
        .iter()
        .find(|p| p.name == "srnf")
        .ok_or("no srnf phase")?;
    println!("srnf applied: {:?}", srnf.applied);
    if !srnf.fired("relu-idem") {
        return Err("relu-idem did not fire".into());
    }
    let chain = &o.rewrites[0];
    let rules: Vec<&str> = chain.rules.iter().map(|u| u.rule.as_str()).collect();
    println!("rewrite chain of {}: {}", chain.output, rules.join(" → "));
    if !rules.contains(&"relu-idem") {
        return Err("relu-idem is not on the rewrite chain".into());
    }
    for k in &o.kernels {
        println!("{}: {}  covers: {}", k.name, k.body, k.covers.join(", "));
    }
    // The kernel computes one ReLU, not two.
    let relus = o
        .kernels
        .iter()
        .map(|k| k.body.matches("(relu").count())
        .sum::<usize>();
    if relus != 1 {
        return Err(format!("{relus} ReLUs in the kernels, expected 1").into());
    }

    check_optimized(&prog, &o, &Default::default(), &[0, 1])?;
    println!("optimized program matches the reference evaluator (seeds 0, 1)");

    let cuda = emit_program(&o)?;
    println!(
        "CUDA: {} lines, {} step(s) in the manifest",
        cuda.source.lines().count(),
        cuda.manifest.steps.len()
    );
    Ok(())
}
