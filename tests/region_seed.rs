//! The three RB-SSA regions of seed 001 §6.8, evaluated by CPU playback on random inputs and
//! compared with the Tiny reference evaluator running the equivalent graph.json.
//!
//! The dumps in `tests/region/` are the seed's, adapted only by `dtype` on inputs and outputs
//! and, for the conv, the padding guard: the seed bounds the input index by `H+2` / `W+2` (the
//! padded extent), but the index `2·ho + kh − 1` is already in unpadded coordinates, so it must
//! stay below `H` / `W` (PyTorch conv semantics); with `H+2` the read leaves `X`.

mod common;
use common::*;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::region::{evaluate_region, Region};
use dlc_egg::tensor::Tensor;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const GEMM: &str = include_str!("region/gemm.json");
const CONV: &str = include_str!("region/conv.json");
const ATTENTION: &str = include_str!("region/attention.json");

fn parse(s: &str) -> Region {
    Region::from_json_str(s).unwrap_or_else(|e| panic!("{e}"))
}

fn binds(kv: &[(&str, i64)]) -> BTreeMap<String, i64> {
    kv.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn ins(kv: Vec<(&str, Tensor)>) -> BTreeMap<String, Tensor> {
    kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn eval(r: &Region, b: &[(&str, i64)], inputs: Vec<(&str, Tensor)>) -> BTreeMap<String, Tensor> {
    evaluate_region(r, &binds(b), &ins(inputs)).unwrap_or_else(|d| panic!("{d}"))
}

#[test]
fn seed_dumps_round_trip() {
    for s in [GEMM, CONV, ATTENTION] {
        let v: Value = serde_json::from_str(s).expect("json");
        let r = parse(s);
        assert_eq!(r.to_json_value(), v);
        assert_eq!(parse(&r.to_json_string()), r);
    }
}

#[test]
fn gemm_bias_relu_matches_tiny() {
    let r = parse(GEMM);
    for (m, k, n) in [(4, 8, 5), (3, 17, 2)] {
        let a = rand_tensor(1, DType::F16, &[m, k]);
        let b = rand_tensor(2, DType::F16, &[k, n]);
        let bias = rand_tensor(3, DType::F16, &[n]);
        let want = run(
            &valid_doc()
                .to_string()
                .replace("\"M\": 4", &format!("\"M\": {m}")),
            vec![("A", a.clone()), ("B", b.clone()), ("bias", bias.clone())],
        );
        let got = eval(
            &r,
            &[("M", m as i64), ("K", k as i64), ("N", n as i64)],
            vec![("A", a), ("B", b), ("bias", bias)],
        );
        let y = &want["Y"];
        assert_eq!(got["C"].dtype, DType::F16);
        assert_close(&got["C"], &y.to_f64(), &y.shape, 1e-2, 1e-2);
    }
}

#[test]
fn conv3x3_s2_p1_matches_tiny() {
    let r = parse(CONV);
    // Odd and even sizes: with H odd the last window reaches index H, which the guard must cut.
    for (n, ci, co, h, w) in [(2, 3, 4, 7, 6), (1, 2, 3, 5, 5), (1, 1, 2, 1, 2)] {
        let x = rand_tensor(4, DType::F16, &[n, ci, h, w]);
        let wt = rand_tensor(5, DType::F16, &[co, ci, 3, 3]);
        let g = one_op(
            "Conv",
            json!({"stride": [2, 2], "pad": [[1, 1], [1, 1]]}),
            &[
                ("X", "fp16", vec![n as i64, ci as i64, h as i64, w as i64]),
                ("W", "fp16", vec![co as i64, ci as i64, 3, 3]),
            ],
            names(&["X", "W"]),
        );
        let want = run_y(&g, vec![("X", x.clone()), ("W", wt.clone())]);
        let (ho, wo) = ((h as i64 - 1) / 2 + 1, (w as i64 - 1) / 2 + 1);
        assert_eq!(want.shape, vec![n, co, ho as usize, wo as usize]);
        let b = [
            ("N", n as i64),
            ("Ci", ci as i64),
            ("Co", co as i64),
            ("H", h as i64),
            ("W", w as i64),
            ("Ho", ho),
            ("Wo", wo),
        ];
        let got = eval(&r, &b, vec![("X", x), ("W", wt)]);
        assert_close(&got["Y"], &want.to_f64(), &want.shape, 1e-2, 1e-2);
    }
}

#[test]
fn conv_with_the_seeds_padded_bound_reads_out_of_bounds() {
    // The seed's guard `< H+2` lets the read reach rows H and H+1: the static check rejects it
    // once sizes are known, and evaluation reports it (never panics).
    let bad = CONV.replace("\"H\"]}", "{\"add\":[\"H\",2]}]}");
    assert_ne!(bad, CONV);
    let r = parse(&bad);
    let x = rand_tensor(4, DType::F16, &[1, 1, 5, 4]);
    let wt = rand_tensor(5, DType::F16, &[1, 1, 3, 3]);
    let b = binds(&[
        ("N", 1),
        ("Ci", 1),
        ("Co", 1),
        ("H", 5),
        ("W", 4),
        ("Ho", 3),
        ("Wo", 2),
    ]);
    let d = evaluate_region(&r, &b, &ins(vec![("X", x), ("W", wt)])).expect_err("out of bounds");
    assert_eq!(d.first_code(), "E1209", "{d}");
    assert!(
        dlc_egg::ir::region::verify(&r).is_ok(),
        "symbolic sizes: not decidable"
    );
}

#[test]
fn attention_row_softmax_matches_tiny() {
    let r = parse(ATTENTION);
    let (b, h, m, n, d) = (2, 2, 3, 5, 8);
    let q = rand_tensor(6, DType::F32, &[b, h, m, d]);
    let k = rand_tensor(7, DType::F32, &[b, h, n, d]);
    let doc = json!({
        "signature": {"inputs": [{"tensor": "Q"}, {"tensor": "K"}], "outputs": [{"tensor": "P"}]},
        "tensors": {
            "Q": {"dtype": "fp32", "shape": [b, h, m, d]},
            "K": {"dtype": "fp32", "shape": [b, h, n, d]},
            "P": {"dtype": "fp16", "shape": [b, h, m, n]}
        },
        "graph": [
            {"op": "Permute", "name": "kt", "inputs": ["K"], "outputs": ["Kt"], "attrs": {"perm": [0, 1, 3, 2]}},
            {"op": "MatMul", "name": "s", "inputs": ["Q", "Kt"], "outputs": ["S"]},
            {"op": "Softmax", "name": "p", "inputs": ["S"], "outputs": ["P32"], "attrs": {"axis": -1}},
            {"op": "Cast", "name": "c", "inputs": ["P32"], "outputs": ["P"], "attrs": {"to": "fp16"}}
        ]
    });
    let want = run(&doc.to_string(), vec![("Q", q.clone()), ("K", k.clone())]);
    let bs = [
        ("B", b as i64),
        ("H", h as i64),
        ("M", m as i64),
        ("N", n as i64),
        ("D", d as i64),
    ];
    let got = eval(&r, &bs, vec![("Q", q), ("K", k)]);
    let p = &want["P"];
    assert_close(&got["P"], &p.to_f64(), &p.shape, 1e-2, 1e-2);
    // Rows sum to one.
    let g = got["P"].to_f64();
    for row in g.chunks(n) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-2);
    }
}

#[test]
fn symbols_are_bound_at_evaluation() {
    let r = parse(GEMM);
    let a = rand_tensor(1, DType::F16, &[2, 3]);
    let b = rand_tensor(2, DType::F16, &[3, 4]);
    let bias = rand_tensor(3, DType::F16, &[4]);
    let d = evaluate_region(
        &r,
        &binds(&[("M", 2), ("K", 3)]),
        &ins(vec![
            ("A", a.clone()),
            ("B", b.clone()),
            ("bias", bias.clone()),
        ]),
    )
    .expect_err("N unbound");
    assert_eq!(d.first_code(), "E1221");
    let d = evaluate_region(
        &r,
        &binds(&[("M", 2), ("K", 3), ("N", 5)]),
        &ins(vec![("A", a), ("B", b), ("bias", bias)]),
    )
    .expect_err("B has N = 4");
    assert_eq!(d.first_code(), "E1222");
}
