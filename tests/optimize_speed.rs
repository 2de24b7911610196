//! Issue 23, optimize speed: the batched kernel pricing extraction uses
//! ([`KernelPricer::price_all`], which lists the first kernels of attention pairs once per
//! class) gives exactly the per-node prices, replaying recorded growths in the kernels phase
//! (`FusionLimits::replay`) gives exactly the growing's e-graph and cover, and `optimize`
//! reports its step times. A small CI smoke of `bench/optimize_speed.rs` (one to three encoder
//! layers at a short sequence).

#[path = "../bench/common/bench_graphs.rs"]
mod bench_graphs;
use bench_graphs::{transformer_encoder, EncoderConfig};
use dlc_egg::extract::pricing::{KernelPricer, Roofline};
use dlc_egg::ir::egraph::TensorLang;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::rules::fusion::FusionLimits;
use dlc_egg::{ir::frontend, lower};

/// The encoder of `bench/optimize_speed.rs` with `layers` layers at sequence 16, lowered.
fn encoder(layers: usize) -> dlc_egg::ir::tiny::Program {
    let doc = transformer_encoder(&EncoderConfig {
        seq_default: 16,
        ..EncoderConfig::bert_base(layers)
    });
    let g = frontend::load_str(&doc.to_string(), "encoder.json").unwrap_or_else(|d| panic!("{d}"));
    lower::lower(&g).unwrap_or_else(|d| panic!("{d}"))
}

/// Every kernel e-node of an e-graph, printed, sorted (class ids left out: they are numbered
/// alike by both runs, but the text is what matters).
fn kernel_texts(eg: &dlc_egg::ir::egraph::TensorGraph) -> Vec<String> {
    let mut v: Vec<String> = eg
        .classes()
        .flat_map(|c| c.nodes.iter().map(move |n| (c.id, n)))
        .filter(|(_, n)| matches!(n, TensorLang::Kernel(_)))
        .map(|(id, n)| format!("{id}: {n:?}"))
        .collect();
    v.sort();
    v
}

#[test]
fn replayed_growth_equals_growing_on_a_two_layer_encoder() {
    let p = encoder(2);
    let replayed = optimize(&p, &OptimizeOptions::default()).expect("the encoder optimizes");
    let grown = optimize(
        &p,
        &OptimizeOptions {
            fusion: FusionLimits {
                replay: false,
                ..FusionLimits::default()
            },
            ..OptimizeOptions::default()
        },
    )
    .expect("the encoder optimizes");
    // The same e-graph (every kernel e-node, in the same class), hence the same cover.
    assert_eq!(
        replayed.egraph.total_number_of_nodes(),
        grown.egraph.total_number_of_nodes()
    );
    assert_eq!(kernel_texts(&replayed.egraph), kernel_texts(&grown.egraph));
    // The report, without the phases' wall times (they differ between any two runs).
    let json = |o: &dlc_egg::optimize::Optimized| {
        let mut v = serde_json::to_value(o.report()).expect("report");
        for p in v["phases"].as_array_mut().expect("phases") {
            p.as_object_mut().expect("a phase").remove("time");
        }
        v
    };
    assert_eq!(json(&replayed), json(&grown));
    assert_eq!(replayed.kernels.len(), grown.kernels.len());
}

#[test]
fn batched_pricing_equals_per_node_pricing_on_an_encoder_layer() {
    let p = encoder(1);
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
