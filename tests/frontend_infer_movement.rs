//! Shape inference and normal form of the movement ops, graph-level behaviour (topological order,
//! declared tensors, symbol binding) and the example graphs.

mod common;
use common::fe::{dtype, load, node, op, shape};

use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend::{load_file, load_str, resolve_symbols, Mutability, Op, Role, Storage};
use serde_json::json;
use std::collections::BTreeMap;

// ---------------------------------------------------------------- movement

#[test]
fn reshape_resolves_minus_one_symbolically() {
    let g = load(
        &[("X", "fp16", json!(["B", "S", 768]))],
        node(
            "Reshape",
            json!(["X"]),
            json!({"shape": ["B", "S", 12, -1]}),
        ),
    );
    assert_eq!(shape(&g, "Y"), "[B, S, 12, 64]");
    assert_eq!(
        op(&g),
        &Op::Reshape {
            shape: vec![Dim::sym("B"), Dim::sym("S"), Dim::int(12), Dim::int(64)]
        }
    );
    let g = load(
        &[("X", "fp32", json!(["M", "K"]))],
        node("Reshape", json!(["X"]), json!({"shape": [-1]})),
    );
    assert_eq!(shape(&g, "Y"), "[K*M]");
    let g = load(
        &[("X", "fp32", json!([2, 3, 4]))],
        node("Reshape", json!(["X"]), json!({"shape": [4, -1, 2]})),
    );
    assert_eq!(shape(&g, "Y"), "[4, 3, 2]");
    let g = load(
        &[("X", "fp32", json!([]))],
        node("Reshape", json!(["X"]), json!({"shape": [1, 1]})),
    );
    assert_eq!(shape(&g, "Y"), "[1, 1]");
}

#[test]
fn permute_expand_pad() {
    let g = load(
        &[("X", "fp32", json!(["A", "B", "C"]))],
        node("Permute", json!(["X"]), json!({"perm": [2, 0, -2]})),
    );
    assert_eq!(shape(&g, "Y"), "[C, A, B]");
    assert_eq!(
        op(&g),
        &Op::Permute {
            perm: vec![2, 0, 1]
        }
    );
    let g = load(
        &[("X", "fp32", json!([1, "N"]))],
        node("Expand", json!(["X"]), json!({"shape": [2, "M", -1]})),
    );
    assert_eq!(shape(&g, "Y"), "[2, M, N]");
    assert_eq!(
        op(&g),
        &Op::Expand {
            shape: vec![Dim::int(2), Dim::sym("M"), Dim::sym("N")]
        }
    );
    let g = load(
        &[("X", "fp32", json!(["H", 10]))],
        node(
            "Pad",
            json!(["X"]),
            json!({"pad": [[1, 2], [-3, 0]], "value": -1.5}),
        ),
    );
    assert_eq!(shape(&g, "Y"), "[H+3, 7]");
    assert_eq!(
        op(&g),
        &Op::Pad {
            pad: vec![(1, 2), (-3, 0)],
            value: -1.5
        }
    );
}

#[test]
fn slice_numpy_clamping_constant_and_symbolic() {
    let g = load(
        &[("X", "fp32", json!([10, 6, "S"]))],
        node(
            "Slice",
            json!(["X"]),
            json!({"starts": [-3, 1], "ends": [100, 6], "axes": [0, 1], "steps": [1, 2]}),
        ),
    );
    assert_eq!(shape(&g, "Y"), "[3, 3, S]");
    let Op::Slice {
        starts,
        ends,
        steps,
    } = op(&g)
    else {
        panic!()
    };
    assert_eq!(starts, &vec![Dim::int(7), Dim::int(1), Dim::int(0)]);
    assert_eq!(ends, &vec![Dim::int(10), Dim::int(6), Dim::sym("S")]);
    assert_eq!(steps, &vec![1, 2, 1]);
    // Symbolic axis sliced to the end; `axes` default to the leading axes.
    let g = load(
        &[("X", "fp32", json!(["S", 4]))],
        node(
            "Slice",
            json!(["X"]),
            json!({"starts": [0], "ends": [9223372036854775807_i64]}),
        ),
    );
    assert_eq!(shape(&g, "Y"), "[S, 4]");
    // Start beyond the end gives an empty axis; a symbolic start stays symbolic (min/max).
    let g = load(
        &[("X", "fp32", json!([5, "S"]))],
        node(
            "Slice",
            json!(["X"]),
            json!({"starts": [4, 2], "ends": [2, 8]}),
        ),
    );
    let y = &g.tensor("Y").unwrap().shape;
    assert_eq!(y[0], Dim::int(0));
    let b: BTreeMap<String, i64> = [("S".to_string(), 5)].into_iter().collect();
    assert_eq!(y[1].eval_with(&b), Ok(3));
    let b: BTreeMap<String, i64> = [("S".to_string(), 1)].into_iter().collect();
    assert_eq!(y[1].eval_with(&b), Ok(0));
    let b: BTreeMap<String, i64> = [("S".to_string(), 20)].into_iter().collect();
    assert_eq!(y[1].eval_with(&b), Ok(6));
}

#[test]
fn flip_concat_repeat_unfold_gather() {
    let g = load(
        &[("X", "fp32", json!([2, 3, 4]))],
        node("Flip", json!(["X"]), json!({"axes": [-1, 0]})),
    );
    assert_eq!(op(&g), &Op::Flip { axes: vec![0, 2] });
    let g = load(
        &[
            ("a", "fp16", json!(["N", 2])),
            ("b", "fp16", json!(["M", 2])),
            ("c", "fp16", json!([3, 2])),
        ],
        node("Concat", json!(["a", "b", "c"]), json!({"axis": -2})),
    );
    assert_eq!(shape(&g, "Y"), "[M+N+3, 2]");
    assert_eq!(op(&g), &Op::Concat { axis: 0 });
    let g = load(
        &[("X", "fp32", json!(["N", 3]))],
        node("Repeat", json!(["X"]), json!({"repeats": [2, 3, 1]})),
    );
    assert_eq!(shape(&g, "Y"), "[2, 3*N, 3]");
    let g = load(
        &[("X", "fp32", json!([2, 10]))],
        node(
            "Unfold",
            json!(["X"]),
            json!({"axis": -1, "size": 3, "step": 2}),
        ),
    );
    assert_eq!(shape(&g, "Y"), "[2, 4, 3]");
    assert_eq!(
        op(&g),
        &Op::Unfold {
            axis: 1,
            size: 3,
            step: 2
        }
    );
    let g = load(
        &[
            ("X", "fp16", json!(["N", 5])),
            ("i", "i32", json!(["N", 7])),
        ],
        node("Gather", json!(["X", "i"]), json!({"axis": 1})),
    );
    assert_eq!(shape(&g, "Y"), "[N, 7]");
    assert_eq!(dtype(&g, "Y"), DType::F16);
}

// ---------------------------------------------------------------- graph level

#[test]
fn topological_order_is_stable_and_signature_defaults() {
    let text = json!({
        "signature": {"inputs": [{"tensor": "x"}, {"tensor": "w", "role": "param", "storage": "const_pool", "mutability": "mutable"}],
                      "outputs": [{"tensor": "z"}]},
        "tensors": {"x": {"dtype": "fp32", "shape": [4]}, "w": {"dtype": "fp32", "shape": [4]},
                    "z": {"dtype": "fp32", "shape": [4]}},
        "graph": [
            {"op": "Elementwise", "name": "last", "inputs": ["p", "q"], "outputs": ["z"], "attrs": {"fn": "add"}},
            {"op": "Elementwise", "name": "first", "inputs": ["x"], "outputs": ["p"], "attrs": {"fn": "neg"}},
            {"op": "Elementwise", "name": "second", "inputs": ["w"], "outputs": ["q"], "attrs": {"fn": "abs"}}
        ]
    })
    .to_string();
    let g = load_str(&text, "t").unwrap();
    let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["first", "second", "last"]);
    assert_eq!(g.signature.inputs[0].role, Role::Data);
    assert_eq!(g.signature.inputs[0].mutability, Mutability::Immutable);
    assert_eq!(g.signature.inputs[0].storage, Storage::Arg);
    assert_eq!(g.signature.inputs[1].role, Role::Param);
    assert_eq!(g.signature.inputs[1].storage, Storage::ConstPool);
    assert_eq!(g.signature.inputs[1].mutability, Mutability::Mutable);
    assert!(g.tensor("p").is_some() && g.tensor("q").is_some());
}

#[test]
fn declared_output_may_name_a_derived_size() {
    // A symbol used by no input may name a compound inferred size.
    let text = json!({
        "signature": {"inputs": [{"tensor": "X"}, {"tensor": "W"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {"X": {"dtype": "fp32", "shape": [1, 3, "H", "H"]},
                    "W": {"dtype": "fp32", "shape": [4, 3, 3, 3]},
                    "Y": {"dtype": "fp32", "shape": [1, 4, "Ho", "Ho"]}},
        "graph": [{"op": "Conv", "name": "c", "inputs": ["X", "W"], "outputs": ["Y"], "attrs": {"stride": 2, "pad": 1}}]
    })
    .to_string();
    let g = load_str(&text, "t").unwrap();
    // (H − 1)//2 + 1 = (H + 1)//2
    assert_eq!(shape(&g, "Y"), "[1, 4, (H+1)//2, (H+1)//2]");
}

#[test]
fn resolve_symbols_order_cli_arrays_defaults() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/gemm_bias_relu.json"
    ))
    .unwrap();
    let g = load_str(&text, "gemm").unwrap();
    let v = resolve_symbols(&g, &BTreeMap::new(), &BTreeMap::new()).unwrap();
    assert_eq!(
        v,
        [("K".into(), 64), ("M".into(), 64), ("N".into(), 128)].into()
    );
    let cli: BTreeMap<String, i64> = [("M".to_string(), 5)].into();
    let arrays: BTreeMap<String, Vec<usize>> =
        [("A".to_string(), vec![5, 7]), ("B".to_string(), vec![7, 3])].into();
    let v = resolve_symbols(&g, &cli, &arrays).unwrap();
    assert_eq!(
        v,
        [("K".into(), 7), ("M".into(), 5), ("N".into(), 3)].into()
    );
}

#[test]
fn all_examples_load() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let g = load_file(&p).unwrap_or_else(|d| panic!("{}: {d}", p.display()));
            assert!(!g.nodes.is_empty());
            resolve_symbols(&g, &BTreeMap::new(), &BTreeMap::new())
                .unwrap_or_else(|d| panic!("{}: {d}", p.display()));
            n += 1;
        }
    }
    assert!(n >= 7);
}

#[test]
fn example_shapes() {
    let ex = |f: &str| {
        load_file(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples")
                .join(f),
        )
        .unwrap()
    };
    let g = ex("gemm_bias_relu.json");
    assert_eq!(shape(&g, "C0"), "[M, N]");
    assert_eq!(g.signature.inputs[2].storage, Storage::ConstPool);
    let g = ex("conv_relu_pool.json");
    assert_eq!(shape(&g, "Y"), "[N, 32, 16, 16]");
    let g = ex("matmul_1d_2d.json");
    assert_eq!(shape(&g, "y"), "[N]");
    let g = ex("attention_causal.json");
    assert!(matches!(op(&g), Op::Attention { causal: true, scale, .. } if *scale == 0.125));
}
