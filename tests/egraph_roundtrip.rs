//! Tiny IR ⇄ e-graph: every example survives the round trip lower → e-graph → extract → Tiny with
//! identical semantics (bit-identical evaluator outputs), the IndexBook facts equal Tiny's typing,
//! and merging classes with different facts asserts.

mod common;
use common::SEED_EXAMPLES;
use dlc_egg::ir::egraph::{
    add_program, extract_program, Attr, Facts, IndexBook, TensorGraph, TensorLang,
};
use dlc_egg::rules::testing::random_inputs;
use dlc_egg::{
    ir::{frontend, tiny},
    lower,
};
use egg::{AstSize, Extractor};
use std::path::Path;

fn example(name: &str) -> tiny::Program {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(format!("{name}.json"));
    let g = frontend::load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    lower::lower(&g).unwrap_or_else(|d| panic!("{d}"))
}

#[test]
fn examples_round_trip_with_identical_semantics() {
    for name in SEED_EXAMPLES {
        let p = example(name);
        let mut eg = TensorGraph::default();
        let class = add_program(&mut eg, &p);
        eg.rebuild();
        // Facts of every class agree with Tiny IR's recorded dtype and shape.
        for (n, c) in p.nodes.iter().zip(&class) {
            let f = eg[*c].data.tensor().expect("tensor facts");
            assert_eq!((f.dtype, &f.shape), (n.dtype, &n.shape), "{name}: {}", n.id);
        }
        let ex = Extractor::new(&eg, AstSize);
        let q = extract_program(&eg, &p, &class, &|c| ex.find_best_node(c).clone())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            q.nodes.len() <= p.nodes.len(),
            "{name}: extraction must not duplicate shared nodes"
        );
        let b = p.symbols.clone();
        let inputs = random_inputs(&p, &b, 100).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = dlc_egg::eval::evaluate(&p, &b, &inputs).unwrap_or_else(|d| panic!("{d}"));
        let got = dlc_egg::eval::evaluate(&q, &b, &inputs).unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(got, want, "{name}: outputs differ after the round trip");
    }
}

#[test]
fn hash_consing_merges_identical_tiny_nodes() {
    // The causal mask builds RANGE(S) twice; in the e-graph they are one class.
    let p = example("attention_causal");
    let ranges = p.nodes.iter().filter(|n| n.uop.name() == "RANGE").count();
    assert_eq!(ranges, 2);
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, &p);
    let range_classes: std::collections::BTreeSet<_> = p
        .nodes
        .iter()
        .zip(&class)
        .filter(|(n, _)| n.uop.name() == "RANGE")
        .map(|(_, c)| eg.find(*c))
        .collect();
    assert_eq!(range_classes.len(), 1);
}

#[test]
fn attribute_leaves_are_analysed_as_attributes() {
    let mut eg = TensorGraph::default();
    let a = eg.add(TensorLang::Attr("#[1,0]".parse().expect("attr")));
    assert_eq!(eg[a].data, Facts::Attr(Attr::Ints(vec![1, 0])));
}

fn input(eg: &mut TensorGraph, name: &str, shape: &str) -> egg::Id {
    let n = eg.add(TensorLang::Attr(Attr::Name(name.into())));
    let d = eg.add(TensorLang::Attr("fp32".parse().expect("dtype")));
    let s = eg.add(TensorLang::Attr(shape.parse().expect("shape")));
    eg.add(TensorLang::Input([n, d, s]))
}

#[test]
fn merging_equal_facts_is_allowed() {
    let mut eg = TensorGraph::new(IndexBook);
    let a = input(&mut eg, "A", "[2,3]");
    let b = input(&mut eg, "B", "[2,3]");
    eg.union(a, b);
    eg.rebuild();
    assert_eq!(eg.find(a), eg.find(b));
}

#[test]
#[should_panic(expected = "different IndexBook facts")]
fn merging_different_shapes_asserts() {
    let mut eg = TensorGraph::new(IndexBook);
    let a = input(&mut eg, "A", "[2,3]");
    let b = input(&mut eg, "B", "[3,2]");
    eg.union(a, b);
}

#[test]
#[should_panic(expected = "ill-typed e-node")]
fn ill_typed_enodes_are_rejected() {
    let mut eg = TensorGraph::new(IndexBook);
    let a = input(&mut eg, "A", "[2,3]");
    let b = input(&mut eg, "B", "[3,2]");
    eg.add(TensorLang::Add([a, b]));
}
