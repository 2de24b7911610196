//! One test per front-end diagnostic: code, kind and location (and that nothing panics), plus a
//! fuzz-ish property: random mutations of a valid document never panic.

use dlc_egg::diag::{Diagnostic, Diagnostics, Location};
use dlc_egg::ir::frontend::{load_str, resolve_symbols, Graph};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A valid document: Y = relu(A @ B + bias), symbolic M, K, N.
fn base() -> Value {
    json!({
        "signature": {
            "inputs": [{"tensor": "A"}, {"tensor": "B"},
                       {"tensor": "bias", "role": "param", "storage": "const_pool"}],
            "outputs": [{"tensor": "Y"}]
        },
        "symbols": {"M": 4},
        "tensors": {
            "A": {"dtype": "fp16", "shape": ["M", "K"]},
            "B": {"dtype": "fp16", "shape": ["K", "N"]},
            "bias": {"dtype": "fp16", "shape": ["N"]},
            "Y": {"dtype": "fp16", "shape": ["M", "N"]}
        },
        "graph": [
            {"op": "MatMul", "name": "mm", "inputs": ["A", "B"], "outputs": ["C"]},
            {"op": "Elementwise", "name": "add", "inputs": ["C", "bias"], "outputs": ["D"], "attrs": {"fn": "add"}},
            {"op": "Elementwise", "name": "relu", "inputs": ["D"], "outputs": ["Y"], "attrs": {"fn": "relu"}}
        ]
    })
}

fn load(doc: &Value) -> Result<Graph, Diagnostics> {
    load_str(&doc.to_string(), "g.json")
}

/// Loads a document that must fail; returns the first diagnostic after checking code and kind.
fn fails(doc: &Value, code: &str, kind: &str) -> Diagnostic {
    let e = load(doc).expect_err("the document must be rejected");
    let d = e.0[0].clone();
    assert_eq!((d.code, d.kind), (code, kind), "{e}");
    assert!(!d.why.is_empty() && !d.suggestion.is_empty());
    d
}

fn at_node(node: &str, op: &str) -> Location {
    Location::Node {
        node: node.into(),
        op: op.into(),
    }
}

fn at_tensor(t: &str) -> Location {
    Location::Tensor { tensor: t.into() }
}

/// A one-node document over the given inputs (the node's output `Y` is an intermediate).
fn one_node(inputs: &[(&str, &str, Value)], node: Value) -> Value {
    let mut tensors = serde_json::Map::new();
    let mut sig = Vec::new();
    for (n, d, s) in inputs {
        tensors.insert(n.to_string(), json!({"dtype": d, "shape": s}));
        sig.push(json!({"tensor": n}));
    }
    json!({
        "signature": {"inputs": sig, "outputs": [{"tensor": inputs[0].0}]},
        "tensors": tensors,
        "graph": [node],
    })
}

fn n(op: &str, ins: Value, attrs: Value) -> Value {
    json!({"op": op, "name": "n", "inputs": ins, "outputs": ["Y"], "attrs": attrs})
}

#[test]
fn base_document_is_valid() {
    let g = load(&base()).unwrap();
    assert_eq!(g.nodes.len(), 3);
}

#[test]
fn e0001_malformed_json_has_line_and_column() {
    let text = "{\n  \"signature\": {\n    \"inputs\": [,]\n  }\n}";
    let e = load_str(text, "bad.json").unwrap_err();
    let d = &e.0[0];
    assert_eq!((d.code, d.kind), ("E0001", "MalformedJson"));
    assert_eq!(
        d.at,
        Location::Source {
            file: "bad.json".into(),
            line: 3,
            column: 16
        }
    );
    // Not an object at all, and a truncated document.
    assert_eq!(load_str("[1, 2]", "x").unwrap_err().first_code(), "E0005");
    assert_eq!(
        load_str("{\"graph\": [", "x").unwrap_err().first_code(),
        "E0001"
    );
    assert_eq!(load_str("", "x").unwrap_err().first_code(), "E0001");
}

#[test]
fn e0002_unknown_op_suggests_closest() {
    let mut doc = base();
    doc["graph"][0]["op"] = json!("Matmul");
    let d = fails(&doc, "E0002", "UnknownOp");
    assert_eq!(d.at, at_node("mm", "Matmul"));
    assert!(d.suggestion.contains("`MatMul`"), "{}", d.suggestion);
}

#[test]
fn e0003_unknown_attributes_are_all_reported() {
    let mut doc = base();
    doc["graph"][0]["attrs"] = json!({"acc_dtyp": "fp32", "transpose": true});
    let e = load(&doc).unwrap_err();
    assert_eq!(e.codes(), ["E0003", "E0003"]);
    let d = &e.0[0];
    assert_eq!(d.kind, "UnknownAttribute");
    assert_eq!(d.at, at_node("mm", "MatMul"));
    assert!(d.suggestion.contains("`acc_dtype`"), "{}", d.suggestion);
}

#[test]
fn e0004_unknown_dtype() {
    let mut doc = base();
    doc["tensors"]["A"]["dtype"] = json!("float16");
    let d = fails(&doc, "E0004", "UnknownDtype");
    assert_eq!(d.at, at_tensor("A"));
    assert!(d.suggestion.contains("`fp16`"));
    let mut doc = base();
    doc["graph"][0]["attrs"] = json!({"acc_dtype": "fp33"});
    let d = fails(&doc, "E0004", "UnknownDtype");
    assert_eq!(d.at, at_node("mm", "MatMul"));
    assert!(d.suggestion.contains("`fp32`"));
}

#[test]
fn e0005_invalid_fields() {
    // Wrong attribute type.
    let doc = one_node(
        &[("X", "fp32", json!([2, 3]))],
        n("Softmax", json!(["X"]), json!({"axis": "last"})),
    );
    let d = fails(&doc, "E0005", "InvalidField");
    assert_eq!(d.at, at_node("n", "Softmax"));
    // Missing required attribute.
    let doc = one_node(
        &[("X", "fp32", json!([2, 3]))],
        n("Permute", json!(["X"]), json!({})),
    );
    let d = fails(&doc, "E0005", "InvalidField");
    assert!(d.why.contains("perm"));
    // Bad shape entry, bad role, missing tensor field.
    let mut doc = base();
    doc["tensors"]["A"]["shape"] = json!(["M", -4]);
    assert_eq!(fails(&doc, "E0005", "InvalidField").at, at_tensor("A"));
    let mut doc = base();
    doc["signature"]["inputs"][0]["role"] = json!("weights");
    let d = fails(&doc, "E0005", "InvalidField");
    assert_eq!(
        d.at,
        Location::Field {
            path: "signature.inputs[0].role".into()
        }
    );
    // Negative symbol default.
    let mut doc = base();
    doc["symbols"]["M"] = json!(-1);
    let d = fails(&doc, "E0005", "InvalidField");
    assert_eq!(d.at, Location::Symbol { symbol: "M".into() });
    // Unknown elementwise function with a suggestion.
    let mut doc = base();
    doc["graph"][2]["attrs"]["fn"] = json!("reLU");
    assert!(fails(&doc, "E0005", "InvalidField")
        .suggestion
        .contains("`relu`"));
    // Scalars only for Elementwise.
    let mut doc = base();
    doc["graph"][0]["inputs"] = json!(["A", 2.0]);
    fails(&doc, "E0005", "InvalidField");
}

#[test]
fn e0101_undeclared_signature_tensor() {
    let mut doc = base();
    doc["tensors"].as_object_mut().unwrap().remove("B");
    let d = fails(&doc, "E0101", "UndeclaredTensor");
    assert_eq!(d.at, at_tensor("B"));
}

#[test]
fn e0102_doubly_produced_tensor() {
    let mut doc = base();
    doc["graph"][1]["outputs"] = json!(["C"]);
    let d = fails(&doc, "E0102", "DoublyProducedTensor");
    assert_eq!(d.at, at_node("add", "Elementwise"));
    assert!(d.details.contains_key("first_producer"));
    // A node writing a signature input.
    let mut doc = base();
    doc["graph"][0]["outputs"] = json!(["A"]);
    fails(&doc, "E0102", "DoublyProducedTensor");
}

#[test]
fn e0103_dangling_reference() {
    let mut doc = base();
    doc["graph"][1]["inputs"] = json!(["C", "bais"]);
    let d = fails(&doc, "E0103", "DanglingReference");
    assert_eq!(d.at, at_node("add", "Elementwise"));
    assert!(d.suggestion.contains("`bias`"));
}

#[test]
fn e0104_cycle_names_a_node_on_it() {
    let mut doc = base();
    doc["graph"][0]["inputs"] = json!(["A", "D"]);
    let d = fails(&doc, "E0104", "Cycle");
    let Location::Node { node, .. } = &d.at else {
        panic!("{:?}", d.at)
    };
    assert!(node == "mm" || node == "add", "{node}");
    assert!(d.why.contains("mm") && d.why.contains("add"));
}

#[test]
fn e0105_duplicate_node_name() {
    let mut doc = base();
    doc["graph"][1]["name"] = json!("mm");
    let d = fails(&doc, "E0105", "DuplicateNodeName");
    assert_eq!(d.at, at_node("mm", "Elementwise"));
}

#[test]
fn e0106_unproduced_output() {
    let mut doc = base();
    doc["graph"].as_array_mut().unwrap().pop();
    let d = fails(&doc, "E0106", "UnproducedTensor");
    assert_eq!(d.at, at_tensor("Y"));
}

#[test]
fn e1001_broadcast_mismatch() {
    let mut doc = base();
    doc["tensors"]["bias"]["shape"] = json!(["K"]);
    let d = fails(&doc, "E1001", "BroadcastMismatch");
    assert_eq!(d.at, at_node("add", "Elementwise"));
    assert_eq!(d.details["lhs_shape"], json!("[M, N]"));
    assert_eq!(d.details["rhs_shape"], json!("[K]"));
}

#[test]
fn e1002_reshape_element_count() {
    let doc = one_node(
        &[("X", "fp32", json!([2, 3]))],
        n("Reshape", json!(["X"]), json!({"shape": [4, 2]})),
    );
    let d = fails(&doc, "E1002", "AxisSizeMismatch");
    assert_eq!(d.at, at_node("n", "Reshape"));
    let doc = one_node(
        &[("X", "fp32", json!([2, 3]))],
        n("Reshape", json!(["X"]), json!({"shape": [4, -1]})),
    );
    fails(&doc, "E1002", "AxisSizeMismatch");
    // MatMul K mismatch and a declared intermediate that disagrees with inference.
    let mut doc = base();
    doc["tensors"]["B"]["shape"] = json!([3, "N"]);
    fails(&doc, "E1002", "AxisSizeMismatch");
    let mut doc = base();
    doc["tensors"]["Y"]["shape"] = json!(["N", "M"]);
    let d = fails(&doc, "E1002", "AxisSizeMismatch");
    assert_eq!(d.at, at_node("relu", "Elementwise"));
}

#[test]
fn e1003_invalid_permutation() {
    for perm in [json!([0, 0]), json!([0, 2]), json!([1])] {
        let doc = one_node(
            &[("X", "fp32", json!([2, 3]))],
            n("Permute", json!(["X"]), json!({"perm": perm})),
        );
        let d = fails(&doc, "E1003", "InvalidPermutation");
        assert_eq!(d.at, at_node("n", "Permute"));
    }
}

#[test]
fn e1004_axis_out_of_range() {
    let doc = one_node(
        &[("X", "fp32", json!([2, 3]))],
        n("Softmax", json!(["X"]), json!({"axis": 2})),
    );
    let d = fails(&doc, "E1004", "AxisOutOfRange");
    assert_eq!(d.at, at_node("n", "Softmax"));
    let doc = one_node(
        &[("X", "fp32", json!([2, 3]))],
        n("Reduce", json!(["X"]), json!({"fn": "sum", "axes": [-3]})),
    );
    fails(&doc, "E1004", "AxisOutOfRange");
}

#[test]
fn e1005_wrong_input_count() {
    let mut doc = base();
    doc["graph"][2]["inputs"] = json!(["D", "D"]);
    let d = fails(&doc, "E1005", "WrongInputCount");
    assert_eq!(d.at, at_node("relu", "Elementwise"));
    let doc = one_node(
        &[("X", "fp32", json!([1, 1, 4, 4]))],
        n("Conv", json!(["X"]), json!({})),
    );
    fails(&doc, "E1005", "WrongInputCount");
}

#[test]
fn e1006_dtype_mismatch_without_cast() {
    let mut doc = base();
    doc["tensors"]["bias"]["dtype"] = json!("fp32");
    let d = fails(&doc, "E1006", "DtypeMismatch");
    assert_eq!(d.at, at_node("add", "Elementwise"));
    assert!(d.suggestion.contains("Cast"));
    // where needs a bool condition; Gather needs an i32 index.
    let doc = one_node(
        &[("c", "fp32", json!([2])), ("x", "fp32", json!([2]))],
        n(
            "Elementwise",
            json!(["c", "x", "x"]),
            json!({"fn": "where"}),
        ),
    );
    fails(&doc, "E1006", "DtypeMismatch");
}

#[test]
fn e1007_invalid_expand_and_e1011_rank() {
    let doc = one_node(
        &[("X", "fp32", json!([2, 3]))],
        n("Expand", json!(["X"]), json!({"shape": [4, 3]})),
    );
    fails(&doc, "E1007", "InvalidExpand");
    let doc = one_node(
        &[
            ("A", "fp32", json!([2, 3, 4])),
            ("B", "fp32", json!([4, 3])),
        ],
        n("GEMM", json!(["A", "B"]), json!({})),
    );
    fails(&doc, "E1011", "RankMismatch");
}

#[test]
fn e1012_symbolic_head_dim_needs_scale() {
    let doc = one_node(
        &[
            ("Q", "fp32", json!(["S", "D"])),
            ("K", "fp32", json!(["S", "D"])),
            ("V", "fp32", json!(["S", "D"])),
        ],
        n("Attention", json!(["Q", "K", "V"]), json!({})),
    );
    let d = fails(&doc, "E1012", "SymbolicHeadDim");
    assert_eq!(d.at, at_node("n", "Attention"));
}

#[test]
fn e1013_float_op_on_integers() {
    let doc = one_node(
        &[("X", "i32", json!([4]))],
        n("Elementwise", json!(["X"]), json!({"fn": "exp"})),
    );
    fails(&doc, "E1013", "UnsupportedDtype");
    let doc = one_node(
        &[("X", "bool", json!([4]))],
        n("Elementwise", json!(["X", "X"]), json!({"fn": "add"})),
    );
    fails(&doc, "E1013", "UnsupportedDtype");
}

#[test]
fn e0203_shape_overflow_constant() {
    let mut doc = base();
    doc["tensors"]["A"]["shape"] = json!([4294967296_i64, 4294967296_i64]);
    let d = fails(&doc, "E0203", "ShapeOverflow");
    assert_eq!(d.at, at_tensor("A"));
}

#[test]
fn e0201_unbound_symbol() {
    let g = load(&base()).unwrap();
    let e = resolve_symbols(&g, &BTreeMap::new(), &BTreeMap::new()).unwrap_err();
    assert_eq!(e.codes(), ["E0201", "E0201"]); // K and N; M has a default
    let d = &e.0[0];
    assert_eq!(d.kind, "UnboundSymbol");
    assert_eq!(d.at, Location::Symbol { symbol: "K".into() });
    assert!(d.suggestion.contains("--bind K="));
}

#[test]
fn e0202_conflicting_symbol_bindings() {
    let g = load(&base()).unwrap();
    let arrays: BTreeMap<String, Vec<usize>> =
        [("A".to_string(), vec![4, 8]), ("B".to_string(), vec![9, 2])].into();
    let e = resolve_symbols(&g, &BTreeMap::new(), &arrays).unwrap_err();
    let d = &e.0[0];
    assert_eq!((d.code, d.kind), ("E0202", "ConflictingSymbolBinding"));
    assert_eq!(d.at, Location::Symbol { symbol: "K".into() });
    // CLI against an array.
    let cli: BTreeMap<String, i64> = [("M".to_string(), 3)].into();
    let arrays: BTreeMap<String, Vec<usize>> = [("A".to_string(), vec![4, 8])].into();
    let e = resolve_symbols(&g, &cli, &arrays).unwrap_err();
    assert_eq!(e.first_code(), "E0202");
}

#[test]
fn e0302_array_shape_mismatch() {
    let mut doc = base();
    doc["tensors"]["bias"]["shape"] = json!([16]);
    doc["tensors"]["B"]["shape"] = json!(["K", 16]);
    doc["tensors"]["Y"]["shape"] = json!(["M", 16]);
    let g = load(&doc).unwrap();
    let arrays: BTreeMap<String, Vec<usize>> = [("bias".to_string(), vec![15])].into();
    let e = resolve_symbols(&g, &BTreeMap::new(), &arrays).unwrap_err();
    let d = &e.0[0];
    assert_eq!((d.code, d.kind), ("E0302", "NpyShapeMismatch"));
    assert_eq!(d.at, at_tensor("bias"));
    let arrays: BTreeMap<String, Vec<usize>> = [("A".to_string(), vec![4])].into();
    assert_eq!(
        resolve_symbols(&g, &BTreeMap::new(), &arrays)
            .unwrap_err()
            .first_code(),
        "E0302"
    );
}

#[test]
fn e0203_shape_overflow_after_binding() {
    let g = load(&base()).unwrap();
    let cli: BTreeMap<String, i64> = [
        ("M".to_string(), 1 << 40),
        ("K".to_string(), 1 << 40),
        ("N".to_string(), 2),
    ]
    .into();
    let e = resolve_symbols(&g, &cli, &BTreeMap::new()).unwrap_err();
    let d = &e.0[0];
    assert_eq!((d.code, d.kind), ("E0203", "ShapeOverflow"));
    assert_eq!(d.at, at_tensor("A"));
}

#[test]
fn e0204_unknown_cli_symbol() {
    let g = load(&base()).unwrap();
    let cli: BTreeMap<String, i64> = [("m".to_string(), 3)].into();
    let e = resolve_symbols(&g, &cli, &BTreeMap::new()).unwrap_err();
    let d = &e.0[0];
    assert_eq!((d.code, d.kind), ("E0204", "UnknownSymbol"));
    assert!(d.suggestion.contains("`M`"));
}

#[test]
fn independent_errors_are_collected_without_cascade() {
    let mut doc = base();
    // Two independent problems: a bad Permute node and an Elementwise dtype clash.
    doc["graph"].as_array_mut().unwrap().push(json!(
        {"op": "Permute", "name": "p", "inputs": ["A"], "outputs": ["P"], "attrs": {"perm": [0, 0]}}
    ));
    doc["graph"].as_array_mut().unwrap().push(json!(
        {"op": "Softmax", "name": "s", "inputs": ["P"], "outputs": ["S"]}
    ));
    doc["tensors"]["bias"]["dtype"] = json!("fp32");
    let e = load(&doc).unwrap_err();
    // `relu` (reads the failed `add`) and `s` (reads the failed `p`) are not reported.
    assert_eq!(e.codes(), ["E1006", "E1003"]);
}

// ---------------------------------------------------------------- fuzz

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
