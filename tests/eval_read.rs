//! Tiny READ (`out[i] = guard(i) ? x[index(i)] : fill`): evaluation agrees bit for bit with the
//! movement chain it stands for, the typing rules reject malformed maps, out-of-bounds reads are
//! `E0209`, and READ survives the dump and the e-graph round trip.

use dlc_egg::eval::evaluate;
use dlc_egg::ir::axis::{AccessMap, AxisExpr, CmpOp, Pred};
use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::egraph::{add_program, extract_program, TensorGraph};
use dlc_egg::ir::num::Num;
use dlc_egg::ir::tiny::{self, Builder, NodeId, Program, TinyError};
use dlc_egg::rules::testing::random_inputs;
use egg::{AstSize, Extractor};
use std::collections::BTreeMap;

fn dims(v: &[i64]) -> Vec<Dim> {
    v.iter().map(|d| Dim::int(*d)).collect()
}

fn c(v: i64) -> AxisExpr {
    AxisExpr::Const(v)
}

fn n(s: &str) -> AxisExpr {
    AxisExpr::Name(s.into())
}

fn add(ts: Vec<AxisExpr>) -> AxisExpr {
    AxisExpr::Add(ts)
}

fn mul(a: AxisExpr, b: AxisExpr) -> AxisExpr {
    AxisExpr::product(a, b)
}

fn div(e: AxisExpr, d: i64) -> AxisExpr {
    AxisExpr::FloorDiv(Box::new(e), d)
}

fn cmp(op: CmpOp, a: AxisExpr, b: AxisExpr) -> Pred {
    Pred::Cmp(op, a, b)
}

fn access(shape: Vec<Dim>, index: Vec<AxisExpr>) -> AccessMap {
    AccessMap {
        shape,
        index,
        guard: None,
        fill: Num(0.0),
    }
}

/// A program `y = f(x)` with `x` of `shape`/`dtype` and `symbols`.
fn program(
    dtype: DType,
    shape: Vec<Dim>,
    symbols: &[(&str, i64)],
    f: impl FnOnce(&mut Builder, NodeId) -> Result<NodeId, TinyError>,
) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", dtype, shape).expect("input");
    let y = f(&mut b, x).expect("well-typed");
    b.output("y", y);
    let mut p = b.finish();
    p.symbols = symbols.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    p
}

/// Evaluates both programs on the same random input; outputs must be bit-identical.
fn assert_same(chain: &Program, read: &Program) {
    let b = BTreeMap::new();
    let inputs = random_inputs(chain, &b, 7).expect("inputs");
    let want = evaluate(chain, &b, &inputs).unwrap_or_else(|d| panic!("{d}"));
    let got = evaluate(read, &b, &inputs).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(got, want);
}

#[test]
fn read_equals_reshape_split_and_merge() {
    // [2,3,4] -> [6,4]: x[i0//3, i0 mod 3, i1].
    let chain = program(DType::F32, dims(&[2, 3, 4]), &[], |b, x| {
        b.reshape(x, dims(&[6, 4]))
    });
    let read = program(DType::F32, dims(&[2, 3, 4]), &[], |b, x| {
        let q = div(n("i0"), 3);
        let idx = vec![q.clone(), add(vec![n("i0"), mul(c(-3), q)]), n("i1")];
        b.read(x, access(dims(&[6, 4]), idx))
    });
    assert_same(&chain, &read);
    // [6,4] -> [2,3,4]: x[3*i0+i1, i2].
    let chain = program(DType::I32, dims(&[6, 4]), &[], |b, x| {
        b.reshape(x, dims(&[2, 3, 4]))
    });
    let read = program(DType::I32, dims(&[6, 4]), &[], |b, x| {
        let idx = vec![add(vec![mul(c(3), n("i0")), n("i1")]), n("i2")];
        b.read(x, access(dims(&[2, 3, 4]), idx))
    });
    assert_same(&chain, &read);
}

#[test]
fn read_equals_symbolic_reshape_split() {
    // [N*K] -> [N, K]: x[K*i0 + i1], with symbols bound from the program's defaults.
    let nk = Dim::sym("N").mul(&Dim::sym("K"));
    let syms = [("N", 3), ("K", 5)];
    let chain = program(DType::F32, vec![nk.clone()], &syms, |b, x| {
        b.reshape(x, vec![Dim::sym("N"), Dim::sym("K")])
    });
    let read = program(DType::F32, vec![nk], &syms, |b, x| {
        let idx = vec![add(vec![mul(n("K"), n("i0")), n("i1")])];
        b.read(x, access(vec![Dim::sym("N"), Dim::sym("K")], idx))
    });
    assert_same(&chain, &read);
}

#[test]
fn read_equals_permute_expand_shrink_flip() {
    let chain = program(DType::F32, dims(&[2, 3, 4]), &[], |b, x| {
        b.permute(x, vec![2, 0, 1])
    });
    let read = program(DType::F32, dims(&[2, 3, 4]), &[], |b, x| {
        b.read(x, access(dims(&[4, 2, 3]), vec![n("i1"), n("i2"), n("i0")]))
    });
    assert_same(&chain, &read);

    let chain = program(DType::Bool, dims(&[3, 1]), &[], |b, x| {
        b.expand(x, dims(&[3, 5]))
    });
    let read = program(DType::Bool, dims(&[3, 1]), &[], |b, x| {
        b.read(x, access(dims(&[3, 5]), vec![n("i0"), c(0)]))
    });
    assert_same(&chain, &read);

    let chain = program(DType::F32, dims(&[5, 7]), &[], |b, x| {
        b.shrink(x, dims(&[1, 0]), dims(&[4, 7]), vec![1, 3])
    });
    let read = program(DType::F32, dims(&[5, 7]), &[], |b, x| {
        let idx = vec![add(vec![n("i0"), c(1)]), mul(c(3), n("i1"))];
        b.read(x, access(dims(&[3, 3]), idx))
    });
    assert_same(&chain, &read);

    let chain = program(DType::F16, dims(&[3, 4]), &[], |b, x| b.flip(x, vec![1]));
    let read = program(DType::F16, dims(&[3, 4]), &[], |b, x| {
        let idx = vec![n("i0"), add(vec![c(3), mul(c(-1), n("i1"))])];
        b.read(x, access(dims(&[3, 4]), idx))
    });
    assert_same(&chain, &read);
}

#[test]
fn read_equals_pad_with_guard_and_fill() {
    let chain = program(DType::F32, dims(&[3, 4]), &[], |b, x| {
        b.pad(x, vec![(1, 2), (0, 1)], 7.5)
    });
    let read = program(DType::F32, dims(&[3, 4]), &[], |b, x| {
        let r = add(vec![n("i0"), c(-1)]);
        let guard = Pred::And(vec![
            cmp(CmpOp::Ge, r.clone(), c(0)),
            cmp(CmpOp::Lt, r.clone(), c(3)),
            cmp(CmpOp::Lt, n("i1"), c(4)),
        ]);
        let mut a = access(dims(&[6, 5]), vec![r, n("i1")]);
        a.guard = Some(guard);
        a.fill = Num(7.5);
        b.read(x, a)
    });
    assert_same(&chain, &read);
}

#[test]
fn read_of_a_view_and_of_a_read_compose() {
    // A READ over a padded (guarded) view, then a READ over that READ.
    let chain = program(DType::F32, dims(&[4, 3]), &[], |b, x| {
        let p = b.pad(x, vec![(0, 0), (1, 1)], -1.0)?;
        let t = b.permute(p, vec![1, 0])?;
        b.flip(t, vec![0])
    });
    let read = program(DType::F32, dims(&[4, 3]), &[], |b, x| {
        let p = b.pad(x, vec![(0, 0), (1, 1)], -1.0)?;
        let t = b.read(p, access(dims(&[5, 4]), vec![n("i1"), n("i0")]))?;
        let idx = vec![add(vec![c(4), mul(c(-1), n("i0"))]), n("i1")];
        b.read(t, access(dims(&[5, 4]), idx))
    });
    assert_same(&chain, &read);
}

#[test]
fn guarded_out_of_bounds_read_is_e0209_and_unbound_symbol_e0201() {
    let p = program(DType::F32, dims(&[3]), &[], |b, x| {
        b.read(x, access(dims(&[3]), vec![add(vec![n("i0"), c(1)])]))
    });
    let b = BTreeMap::new();
    let inputs = random_inputs(&p, &b, 1).expect("inputs");
    let e = evaluate(&p, &b, &inputs).expect_err("reads x[3]");
    assert_eq!(e.first_code(), "E0209");
    // The same map with a guard that excludes the last element is fine.
    let p = program(DType::F32, dims(&[3]), &[], |b, x| {
        let mut a = access(dims(&[3]), vec![add(vec![n("i0"), c(1)])]);
        a.guard = Some(cmp(CmpOp::Lt, n("i0"), c(2)));
        b.read(x, a)
    });
    let y = evaluate(&p, &b, &inputs).expect("guarded");
    let xv = inputs["x"].to_f64();
    assert_eq!(y["y"].to_f64(), vec![xv[1], xv[2], 0.0]);
    // An unbound symbol in the map.
    let p = program(DType::F32, dims(&[3]), &[], |b, x| {
        b.read(x, access(dims(&[3]), vec![mul(n("Q"), n("i0"))]))
    });
    let e = evaluate(&p, &b, &inputs).expect_err("Q unbound");
    assert_eq!(e.first_code(), "E0201");
}

fn malformed(shape: Vec<Dim>, index: Vec<AxisExpr>, guard: Option<Pred>) -> String {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, dims(&[4, 4])).expect("input");
    let mut a = access(shape, index);
    a.guard = guard;
    match b.read(x, a) {
        Err(e @ TinyError::Malformed { .. }) => e.to_string(),
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn infer_rejects_malformed_maps() {
    let s = dims(&[4, 4]);
    let e = malformed(s.clone(), vec![n("i0")], None);
    assert!(e.contains("rank 2"), "{e}");
    let e = malformed(s.clone(), vec![n("i0"), n("i2")], None);
    assert!(e.contains("`i2`"), "{e}");
    let e = malformed(s.clone(), vec![div(n("i0"), 0), n("i1")], None);
    assert!(e.contains("non-positive"), "{e}");
    let e = malformed(s.clone(), vec![mul(n("i0"), n("i1")), n("i1")], None);
    assert!(e.contains("both sides"), "{e}");
    let g = cmp(CmpOp::Lt, n("i7"), c(2));
    let e = malformed(s.clone(), vec![n("i0"), n("i1")], Some(g));
    assert!(e.contains("`i7`"), "{e}");
    // Result shape and dtype come from the map and the operand.
    let p = program(DType::I32, dims(&[4, 4]), &[], |b, x| {
        b.read(x, access(dims(&[2]), vec![n("i0"), c(3)]))
    });
    let y = p.node(p.outputs[0].node);
    assert_eq!((y.dtype, y.shape.clone()), (DType::I32, dims(&[2])));
    tiny::verify(&p).expect("verifies");
}

#[test]
fn dump_prints_region_json_forms() {
    let p = program(DType::F32, dims(&[3, 4]), &[], |b, x| {
        let mut a = access(dims(&[6, 4]), vec![div(n("i0"), 2), n("i1")]);
        a.guard = Some(cmp(CmpOp::Lt, n("i0"), c(5)));
        a.fill = Num(f64::NEG_INFINITY);
        b.read(x, a)
    });
    let j = tiny::to_json(&p);
    let read = &j["uops"][1];
    assert_eq!(read["uop"], "READ");
    let want = serde_json::json!({
        "result_shape": [6, 4],
        "index": [{"floordiv": ["i0", 2]}, "i1"],
        "guard": {"lt": ["i0", 5]},
        "fill": "-inf",
    });
    assert_eq!(read["arg"], want);
}

#[test]
fn read_round_trips_through_the_egraph() {
    let p = program(DType::F32, dims(&[2, 6]), &[], |b, x| {
        let q = div(n("i1"), 2);
        let mut a = access(
            dims(&[2, 6]),
            vec![n("i0"), add(vec![c(5), mul(c(-1), n("i1"))])],
        );
        a.guard = Some(cmp(CmpOp::Ge, q, c(1)));
        a.fill = Num(2.0);
        b.read(x, a)
    });
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, &p);
    eg.rebuild();
    let f = eg[class[1]].data.tensor().expect("tensor facts");
    assert_eq!(f.shape, dims(&[2, 6]));
    let ex = Extractor::new(&eg, AstSize);
    let q = extract_program(&eg, &p, &class, &|c| ex.find_best_node(c).clone()).expect("extracts");
    assert_eq!(q.nodes, p.nodes);
    assert_same(&p, &q);
}
