//! Fuzz-ish properties: random mutations of a valid document, random nodes of every op, and odd
//! attribute values never make the front end panic.

mod common;
use common::{probe_doc, valid_doc};

use dlc_egg::diag::Diagnostics;
use dlc_egg::ir::frontend::{load_str, resolve_symbols, Graph};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn base() -> Value {
    valid_doc()
}

fn load(doc: &Value) -> Result<Graph, Diagnostics> {
    load_str(&doc.to_string(), "g.json")
}

/// A one-node document over the given inputs (the node's output `Y` is an intermediate).
fn one_node(inputs: &[(&str, &str, Value)], node: Value) -> Value {
    probe_doc(inputs, json!([node]))
}

fn n(op: &str, ins: Value, attrs: Value) -> Value {
    json!({"op": op, "name": "n", "inputs": ins, "outputs": ["Y"], "attrs": attrs})
}

fn mutate(v: &mut Value, path: &[usize], replacement: &Value) {
    let Some((first, rest)) = path.split_first() else {
        *v = replacement.clone();
        return;
    };
    match v {
        Value::Array(a) if !a.is_empty() => {
            let i = first % a.len();
            mutate(&mut a[i], rest, replacement);
        }
        Value::Object(o) if !o.is_empty() => {
            let i = first % o.len();
            if let Some((_, x)) = o.iter_mut().nth(i) {
                mutate(x, rest, replacement);
            }
        }
        _ => *v = replacement.clone(),
    }
}

fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..70).prop_map(|x| json!(x)),
        Just(json!(i64::MAX)),
        Just(json!(-1.5)),
        prop::sample::select(vec![
            "M", "K", "N", "A", "B", "C", "D", "Y", "fp16", "fp32", "i32", "add", "relu", "MatMul",
            "Conv", "Reshape", "", "-1"
        ])
        .prop_map(|s| json!(s)),
        Just(json!([])),
        Just(json!({})),
        Just(json!(["M", 3])),
        Just(json!([[1, 1], [0, 0]])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Structured mutations: replace any sub-value of the valid document.
    #[test]
    fn value_mutations_never_panic(
        muts in prop::collection::vec((prop::collection::vec(0usize..8, 0..5), any_value()), 1..4)
    ) {
        let mut doc = base();
        for (path, val) in &muts {
            mutate(&mut doc, path, val);
        }
        if let Ok(g) = load(&doc) {
            let _ = resolve_symbols(&g, &BTreeMap::new(), &BTreeMap::new());
        }
    }

    /// Text mutations: delete, insert or replace characters of the serialized document.
    #[test]
    fn text_mutations_never_panic(
        edits in prop::collection::vec((0usize..2000, 0u8..3, prop::sample::select(vec!['{', '}', '[', ']', '"', ',', ':', '1', '-', 'x', ' '])), 1..6)
    ) {
        let mut text: Vec<char> = base().to_string().chars().collect();
        for (pos, kind, c) in edits {
            let i = pos % (text.len() + 1);
            match kind {
                0 if i < text.len() => { text.remove(i); }
                1 => text.insert(i, c),
                _ if i < text.len() => text[i] = c,
                _ => {}
            }
        }
        let s: String = text.into_iter().collect();
        let _ = load_str(&s, "fuzz.json");
    }
}

fn attr_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-4i64..6).prop_map(|x| json!(x)),
        prop::collection::vec(-4i64..6, 0..5).prop_map(|v| json!(v)),
        prop::collection::vec((-3i64..4, -3i64..4), 0..4).prop_map(|v| json!(v
            .into_iter()
            .map(|(a, b)| json!([a, b]))
            .collect::<Vec<_>>())),
        prop::collection::vec(
            prop_oneof![(-1i64..5).prop_map(|x| json!(x)), Just(json!("M"))],
            0..5
        )
        .prop_map(|v| json!(v)),
        any::<bool>().prop_map(|b| json!(b)),
        Just(json!(0.5)),
        prop::sample::select(vec![
            "sum", "max", "avg", "add", "where", "gt", "fp16", "i32"
        ])
        .prop_map(|s| json!(s)),
    ]
}

fn op_attrs(op: &str) -> &'static [&'static str] {
    match op {
        "MatMul" => &["acc_dtype"],
        "GEMM" => &["trans_a", "trans_b", "alpha", "beta"],
        "Conv" => &["stride", "pad", "dilation", "groups"],
        "ConvTranspose" => &["stride", "pad", "dilation", "groups", "output_padding"],
        "Pool" => &["mode", "kernel", "stride", "pad", "dilation"],
        "Attention" => &["causal", "scale"],
        "Softmax" | "Cumulative" | "Concat" | "Gather" => &["axis", "fn"],
        "LayerNorm" | "RMSNorm" => &["axis", "eps"],
        "Elementwise" => &["fn"],
        "Reduce" => &["fn", "axes", "keepdim"],
        "Cast" => &["to"],
        "Reshape" | "Expand" => &["shape"],
        "Permute" => &["perm"],
        "Pad" => &["pad", "value"],
        "Slice" => &["starts", "ends", "axes", "steps"],
        "Flip" => &["axes"],
        "Repeat" => &["repeats"],
        "Unfold" => &["axis", "size", "step"],
        _ => &[],
    }
}

/// A plausible value for an attribute (`None`: leave it out).
fn plausible(name: &str, seed: usize) -> Option<Value> {
    let choices: Vec<Value> = match name {
        "stride" | "dilation" | "kernel" => {
            vec![json!(1), json!(2), json!([1, 2]), json!([3]), json!(0)]
        }
        "pad" => vec![
            json!(0),
            json!(1),
            json!([1, 0]),
            json!([[0, 1], [1, 0]]),
            json!([[1, -1]]),
            json!([[0, 0]]),
        ],
        "output_padding" => vec![json!(0), json!(1)],
        "groups" => vec![json!(1), json!(2), json!(3)],
        "mode" => vec![json!("max"), json!("avg")],
        "axis" | "size" | "step" => vec![json!(0), json!(-1), json!(1), json!(2), json!(-3)],
        "axes" => vec![
            json!([0]),
            json!([-1]),
            json!([0, 1]),
            json!(1),
            json!([1, 1]),
        ],
        "shape" => vec![
            json!([-1]),
            json!(["M", -1]),
            json!([1, "M", "N"]),
            json!([2, 3]),
            json!([-1, -1]),
            json!([]),
        ],
        "perm" => vec![json!([1, 0]), json!([0]), json!([0, 2, 1]), json!([])],
        "starts" | "ends" => vec![
            json!([0]),
            json!([-1, 1]),
            json!([9223372036854775807_i64]),
            json!([2, 0]),
        ],
        "steps" => vec![json!([1]), json!([2, 1]), json!([0])],
        "repeats" => vec![json!([2]), json!([1, 2, 3]), json!([2, 2, 2, 2, 2])],
        "fn" => vec![
            json!("sum"),
            json!("max"),
            json!("add"),
            json!("where"),
            json!("relu"),
            json!("lt"),
            json!("mean"),
        ],
        "to" => vec![json!("fp16"), json!("i32"), json!("bool")],
        "keepdim" | "causal" | "trans_a" | "trans_b" => vec![json!(true), json!(false)],
        "eps" | "value" | "alpha" | "beta" | "scale" => vec![json!(0.5), json!(1e-5)],
        _ => vec![],
    };
    let n = choices.len() + 1;
    choices.get(seed % n).cloned()
}

fn shape_value() -> impl Strategy<Value = Value> {
    prop::collection::vec(
        prop_oneof![
            (0i64..6).prop_map(|x| json!(x)),
            Just(json!("M")),
            Just(json!("N"))
        ],
        0..5,
    )
    .prop_map(|v| json!(v))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Random ops with random operands and attributes never panic.
    #[test]
    fn random_nodes_never_panic(
        op in prop::sample::select(dlc_egg::ir::frontend::Op::NAMES.to_vec()),
        shapes in prop::collection::vec(
            (shape_value(), prop::sample::select(vec!["fp16", "fp32", "i32", "bool"])), 1..5),
        picks in prop::collection::vec(0usize..5, 0..5),
        seeds in prop::collection::vec(0usize..64, 4),
        raw_attrs in prop::collection::vec((prop::sample::select(vec![
            "stride", "pad", "dilation", "groups", "kernel", "mode", "axis", "axes", "shape",
            "perm", "starts", "ends", "steps", "repeats", "size", "step", "output_padding",
            "fn", "keepdim", "causal", "scale", "to", "trans_a", "trans_b", "value", "eps",
        ]), attr_value()), 0..12),
    ) {
        let names = ["X0", "X1", "X2", "X3", "X4"];
        let inputs: Vec<(&str, &str, Value)> = shapes
            .iter()
            .enumerate()
            .map(|(i, (s, d))| (names[i], *d, s.clone()))
            .collect();
        let ins: Vec<Value> = picks.iter().map(|p| json!(names[p % inputs.len()])).collect();
        // Attributes the op has, with plausible values (and one random attribute, rarely).
        let own = op_attrs(op);
        let mut attrs: serde_json::Map<String, Value> = serde_json::Map::new();
        for (i, (k, v)) in raw_attrs.into_iter().enumerate() {
            if i == 11 {
                attrs.insert(k.to_string(), v);
            }
        }
        for (j, a) in own.iter().enumerate() {
            let seed = seeds.get(j).copied().unwrap_or(0);
            if let Some(v) = plausible(a, seed) {
                attrs.insert(a.to_string(), v);
            }
        }
        let doc = one_node(&inputs, n(op, json!(ins), Value::Object(attrs)));
        if let Ok(g) = load(&doc) {
            let _ = resolve_symbols(&g, &BTreeMap::new(), &BTreeMap::new());
            let b: BTreeMap<String, i64> = [("M".to_string(), 3), ("N".to_string(), 0)].into();
            let _ = resolve_symbols(&g, &b, &BTreeMap::new());
        }
    }
}

/// Every op with random attribute values and input shapes never panics.
#[test]
fn every_op_with_odd_attributes_never_panics() {
    let odd = [
        json!(0),
        json!(-1),
        json!(-9223372036854775807_i64),
        json!(9223372036854775807_i64),
        json!([]),
        json!([0]),
        json!([-5, 5]),
        json!([[0, -3]]),
        json!(["M"]),
        json!(true),
        json!(1.5),
    ];
    let shapes = [
        json!([]),
        json!([0]),
        json!(["M"]),
        json!([1, 2, 3, 4]),
        json!(["M", 0, 5]),
        json!([9223372036854775807_i64, 1, 3]),
        json!(["M", 9223372036854775807_i64, 1, 1]),
    ];
    for op in dlc_egg::ir::frontend::Op::NAMES {
        let attrs: Vec<&str> = [
            "stride",
            "pad",
            "dilation",
            "groups",
            "kernel",
            "mode",
            "axis",
            "axes",
            "shape",
            "perm",
            "starts",
            "ends",
            "steps",
            "repeats",
            "size",
            "step",
            "output_padding",
        ]
        .to_vec();
        for a in &attrs {
            for v in &odd {
                for s in &shapes {
                    let doc = one_node(
                        &[("X", "fp32", s.clone()), ("W", "fp32", s.clone())],
                        n(op, json!(["X", "W"]), json!({ *a: v })),
                    );
                    let _ = load(&doc);
                    let doc = one_node(
                        &[("X", "fp32", s.clone())],
                        n(
                            op,
                            json!(["X"]),
                            json!({ *a: v, "mode": "max", "kernel": v, "fn": "sum" }),
                        ),
                    );
                    let _ = load(&doc);
                }
            }
        }
    }
}
