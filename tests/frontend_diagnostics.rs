//! One test per front-end diagnostic: code, kind and location (and that nothing panics).

mod common;
use common::{probe_doc, valid_doc};

use dlc_egg::diag::{Diagnostic, Diagnostics, Location};
use dlc_egg::ir::frontend::{load_str, resolve_symbols, Graph};
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn base() -> Value {
    valid_doc()
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
    probe_doc(inputs, json!([node]))
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
    // A node reading its own output.
    let mut doc = base();
    doc["graph"][2]["inputs"] = json!(["Y"]);
    let d = fails(&doc, "E0104", "Cycle");
    assert_eq!(d.at, at_node("relu", "Elementwise"));
    assert_eq!(d.details["cycle"], json!("relu -> relu"));
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
