//! The IndexBook (seed §4.5) of lowered examples and hand-built Tiny programs: index maps, axis
//! kinds, domains (pieces for padded windows), gathers and views.

use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::indexbook::*;
use dlc_egg::ir::tiny::{Builder, UnaryOp};
use dlc_egg::{ir::frontend, lower};
use serde_json::json;
use std::path::Path;

fn example(name: &str) -> IndexBook {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}.json"));
    let g = frontend::load_file(&path).expect("example loads");
    let p = lower::lower(&g).expect("example lowers");
    index_book(&p).expect("index book")
}

fn value<'b>(book: &'b IndexBook, id: &str) -> &'b IndexInfo {
    book.get(id).unwrap_or_else(|| panic!("no value {id}"))
}

fn maps(info: &IndexInfo) -> Vec<(String, Vec<String>)> {
    info.inputs
        .iter()
        .map(|i| (i.value_id.clone(), i.map.clone()))
        .collect()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn sym(s: &str) -> Dim {
    Dim::sym(s)
}

#[test]
fn gemm_reduce_reads_its_product_with_a_reduce_axis() {
    let book = example("gemm_bias_relu");
    let prod = value(&book, "n10");
    let red = value(&book, "n11");
    assert_eq!(maps(red), vec![("n10".into(), strs(&["i0", "i1", "k0"]))]);
    // The reduced axis is the product's K axis, as in seed §4.5 (`reduce_axes` = id before
    // deletion).
    assert_eq!(prod.axes[2].size, sym("K"));
    assert_eq!(red.reduce_axes, vec![prod.axes[2].id]);
    assert_eq!(red.axes.len(), 2);
    assert!(red.axes.iter().all(|a| a.kind == AxisKind::Iter));
    let Domain::Constraints(c) = &red.domain else {
        panic!("a GEMM reduce has no pieces")
    };
    assert!(c.contains(&strs(&["0<=k0", "k0<K"])));
    assert!(c.contains(&strs(&["0<=i0", "i0<M"])));
    // The operands of the product: A read through RESHAPE/EXPAND/CAST, B through a transpose;
    // the axis A does not vary along is a broadcast axis.
    let a = value(&book, "n8");
    assert_eq!(maps(a), vec![("A".into(), strs(&["i0", "i2"]))]);
    assert_eq!(a.axes[1].kind, AxisKind::Broadcast);
    assert_eq!(
        maps(value(&book, "n9")),
        vec![("B".into(), strs(&["i2", "i1"]))]
    );
    let j = book.to_json();
    assert_eq!(
        j["index_book"]["n11"]["reduce_axes"],
        json!([prod.axes[2].id])
    );
    assert_eq!(j["index_book"]["A"]["axes"][0]["size"], json!("M"));
}

#[test]
fn conv_padded_window_is_piecewise() {
    let book = example("conv3x3_s2_p1_silu");
    let x = value(&book, "n10");
    let read = &x.inputs[0];
    assert_eq!(read.value_id, "X");
    assert_eq!(read.map, strs(&["i0", "i5", "2*i3+i6-1", "2*i4+i7-1"]));
    assert_eq!(read.pad_value, Some(0.0));
    let Domain::Pieces(ps) = &x.domain else {
        panic!("a padded read is piecewise")
    };
    assert_eq!(ps.len(), 2);
    // The high side of the pad is never reached at stride 2 (gist): only the low bound stays.
    assert!(ps[0].contains(&strs(&["0<=2*i3+i6-1"])));
    assert!(ps[0].contains(&strs(&["0<=2*i4+i7-1"])));
    assert_eq!(ps[1].last(), Some(&strs(&["else_pad_piece"])));
    let j = book.to_json();
    assert_eq!(
        j["index_book"]["n10"]["domain"]["pieces"][1]["constraints"]
            .as_array()
            .map(|a| a.len()),
        Some(9)
    );
    // Stride 1 keeps both halves of the bounds.
    let pool = example("conv_relu_pool");
    let Domain::Pieces(ps) = &value(&pool, "n10").domain else {
        panic!("piecewise")
    };
    assert!(ps[0].contains(&strs(&["0<=i3+i6-1", "i3+i6-1<32"])));
}

#[test]
fn pool_window_reduce_gets_fresh_reduce_axes() {
    let book = example("conv_relu_pool");
    let y = value(&book, "Y");
    assert_eq!(
        maps(y),
        vec![("n16".into(), strs(&["i0", "i1", "2*i2+k0", "2*i3+k1"]))]
    );
    let fresh: Vec<&AxisVar> = y
        .axes
        .iter()
        .filter(|a| a.kind == AxisKind::Reduce)
        .collect();
    assert_eq!(fresh.len(), 2);
    assert_eq!(fresh[0].name, "k0");
    assert_eq!(
        y.reduce_axes,
        fresh.iter().map(|a| a.id).collect::<Vec<_>>()
    );
}

#[test]
fn attention_mask_broadcasts_need_no_pieces() {
    let book = example("attention_causal");
    // The causal mask compares two RANGEs read through RESHAPE+EXPAND: each ignores one axis.
    assert_eq!(
        maps(value(&book, "n20")),
        vec![("n14".into(), strs(&["i1"])), ("n17".into(), strs(&["i0"]))]
    );
    // WHERE reads the [S,S] mask broadcast over batch and heads, and the scores identically.
    let w = value(&book, "n23");
    assert_eq!(
        maps(w),
        vec![
            ("n20".into(), strs(&["i2", "i3"])),
            ("n13".into(), strs(&["i0", "i1", "i2", "i3"])),
        ]
    );
    assert!(matches!(w.domain, Domain::Constraints(_)));
    assert!(!w.non_scop);
    // The row max is broadcast back along the reduced axis.
    assert_eq!(
        maps(value(&book, "n27"))[1],
        ("n24".into(), strs(&["i0", "i1", "i2"]))
    );
}

#[test]
fn expanding_a_size_one_axis_reads_constant_zero() {
    let mut b = Builder::new();
    let x = b
        .input("x", DType::F32, vec![sym("M"), Dim::int(1)])
        .unwrap();
    let e = b.expand(x, vec![sym("M"), sym("N")]).unwrap();
    let r = b.unary(UnaryOp::Relu, e).unwrap();
    b.output("y", r);
    let book = index_book(&b.finish()).unwrap();
    let y = value(&book, "y");
    assert_eq!(maps(y), vec![("x".into(), strs(&["i0", "0"]))]);
    assert_eq!(y.axes[1].kind, AxisKind::Broadcast);
}

#[test]
fn symbolic_reshape_merge_is_non_scop() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, vec![sym("M"), sym("N")]).unwrap();
    let m = b.reshape(x, vec![sym("M").mul(&sym("N"))]).unwrap();
    let r = b.unary(UnaryOp::Relu, m).unwrap();
    b.output("y", r);
    let book = index_book(&b.finish()).unwrap();
    let y = value(&book, "y");
    assert!(y.non_scop);
    assert_eq!(maps(y)[0].1, strs(&["i0//N", "i0-N*(i0//N)"]));
    assert_eq!(
        book.to_json()["index_book"]["y"]["flags"],
        json!(["non_scop"])
    );
    // The split direction is affine (a symbolic coefficient, no floordiv).
    let mut b = Builder::new();
    let x = b
        .input("x", DType::F32, vec![sym("M").mul(&sym("N"))])
        .unwrap();
    let s = b.reshape(x, vec![sym("M"), sym("N")]).unwrap();
    let r = b.unary(UnaryOp::Relu, s).unwrap();
    b.output("y", r);
    let book = index_book(&b.finish()).unwrap();
    assert!(!value(&book, "y").non_scop);
    assert_eq!(maps(value(&book, "y"))[0].1, strs(&["N*i0+i1"]));
}

#[test]
fn constant_reshapes_delinearize_with_guards() {
    let mut b = Builder::new();
    let x = b
        .input("x", DType::F32, vec![Dim::int(4), Dim::int(6)])
        .unwrap();
    let m = b.reshape(x, vec![Dim::int(6), Dim::int(4)]).unwrap();
    let r = b.unary(UnaryOp::Relu, m).unwrap();
    b.output("y", r);
    let book = index_book(&b.finish()).unwrap();
    let y = value(&book, "y");
    assert!(!y.non_scop);
    assert_eq!(
        maps(y)[0].1,
        strs(&["(4*i0+i1)//6", "4*i0+i1-6*((4*i0+i1)//6)"])
    );
    let Domain::Constraints(c) = &y.domain else {
        panic!("no pieces")
    };
    assert!(c.contains(&strs(&[
        "0<=4*i0+i1-6*((4*i0+i1)//6)",
        "4*i0+i1-6*((4*i0+i1)//6)<6"
    ])));
    // A reshape round trip composes back to the identity.
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, vec![sym("M"), sym("N")]).unwrap();
    let m = b.reshape(x, vec![sym("M").mul(&sym("N"))]).unwrap();
    let s = b.reshape(m, vec![sym("M"), sym("N")]).unwrap();
    let r = b.unary(UnaryOp::Relu, s).unwrap();
    b.output("y", r);
    let book = index_book(&b.finish()).unwrap();
    assert_eq!(maps(value(&book, "y"))[0].1, strs(&["i0", "i1"]));
    assert!(!value(&book, "y").non_scop);
}

#[test]
fn shrink_step_and_flip_compose() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, vec![Dim::int(8)]).unwrap();
    let s = b
        .shrink(x, vec![Dim::int(1)], vec![Dim::int(7)], vec![2])
        .unwrap();
    let f = b.flip(s, vec![0]).unwrap();
    let r = b.unary(UnaryOp::Relu, f).unwrap();
    b.output("y", r);
    let book = index_book(&b.finish()).unwrap();
    assert_eq!(maps(value(&book, "y"))[0].1, strs(&["-2*i0+5"]));
}

#[test]
fn gather_and_view_outputs() {
    let mut b = Builder::new();
    let x = b
        .input("x", DType::F32, vec![Dim::int(5), Dim::int(3)])
        .unwrap();
    let i = b
        .input("idx", DType::I32, vec![Dim::int(2), Dim::int(3)])
        .unwrap();
    let g = b.gather(x, i, 0).unwrap();
    let t = b.permute(g, vec![1, 0]).unwrap();
    b.output("y", t);
    let book = index_book(&b.finish()).unwrap();
    let gv = value(&book, "n2");
    assert!(gv.non_scop);
    assert_eq!(
        maps(gv),
        vec![
            ("x".into(), strs(&["gather(idx)", "i1"])),
            ("idx".into(), strs(&["i0", "i1"]))
        ]
    );
    // An output that is a view is a value reading its own chain.
    assert_eq!(
        maps(value(&book, "y")),
        vec![("n2".into(), strs(&["i1", "i0"]))]
    );
}

#[test]
fn clashing_value_ids_are_an_error() {
    let mut b = Builder::new();
    let x = b.input("n1", DType::F32, vec![Dim::int(2)]).unwrap();
    let r = b.unary(UnaryOp::Relu, x).unwrap();
    let r2 = b.unary(UnaryOp::Relu, r).unwrap();
    b.output("y", r2);
    assert!(matches!(
        index_book(&b.finish()),
        Err(IndexBookError::DuplicateValue(id)) if id == "n1"
    ));
}

#[test]
fn every_example_axis_id_is_unique_and_sequential() {
    for name in ["gemm_bias_relu", "conv_relu_pool", "attention_causal"] {
        let book = example(name);
        let ids: Vec<usize> = book
            .values
            .iter()
            .flat_map(|(_, i)| i.axes.iter().map(|a| a.id))
            .collect();
        assert_eq!(ids, (0..ids.len()).collect::<Vec<_>>(), "{name}");
    }
}
