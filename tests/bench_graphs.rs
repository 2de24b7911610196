//! The generated transformer encoder is a valid graph that lowers and runs.

#[path = "../bench/common/bench_graphs.rs"]
mod bench_graphs;
use bench_graphs::{transformer_encoder, EncoderConfig};
use dlc_egg::{ir::frontend, lower};
use std::collections::BTreeMap;

#[test]
fn encoder_graphs_load_and_lower_with_linear_size() {
    let mut sizes = vec![];
    for layers in [1, 2, 4] {
        let doc = transformer_encoder(&EncoderConfig::bert_base(layers));
        let g =
            frontend::load_str(&doc.to_string(), "encoder.json").unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(g.tensor("Y").map(|t| t.shape.len()), Some(2));
        let p = lower::lower(&g).unwrap_or_else(|d| panic!("{d}"));
        sizes.push(p.nodes.len());
    }
    // Every layer adds the same number of Tiny nodes: sizes are linear in the layer count.
    let per_layer = sizes[1] - sizes[0];
    assert!(per_layer > 0 && sizes[0] >= per_layer);
    assert_eq!(sizes[2] - sizes[1], 2 * per_layer, "sizes {sizes:?}");
}

#[test]
fn one_layer_encoder_runs_on_a_short_sequence() {
    let doc = transformer_encoder(&EncoderConfig {
        seq_default: 3,
        ..EncoderConfig::bert_base(1)
    });
    let g = frontend::load_str(&doc.to_string(), "encoder.json").unwrap_or_else(|d| panic!("{d}"));
    let b = frontend::resolve_symbols(&g, &BTreeMap::new(), &BTreeMap::new()).expect("binds");
    let p = lower::lower(&g).unwrap_or_else(|d| panic!("{d}"));
    let inputs =
        dlc_egg::rules::testing::random_inputs(&p, &b, 0).unwrap_or_else(|e| panic!("{e}"));
    let out = dlc_egg::eval::evaluate(&p, &b, &inputs).unwrap_or_else(|d| panic!("{d}"));
    let y = &out["Y"];
    assert_eq!(y.shape, vec![3, 768]);
    // Post-LayerNorm output with gamma, beta in [-1, 1): finite and bounded.
    assert!(y.to_f64().iter().all(|v| v.is_finite() && v.abs() < 100.0));
}
