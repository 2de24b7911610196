//! Pipeline fuzzing: random *valid* `graph.json` documents (the generator of
//! `common::graphgen`: DAGs of 1–6 nodes drawn from every op of `graph-json.md`, fp16/bf16/fp32
//! and i32/bool where the op allows, some symbolic sizes bound through `resolve_symbols`,
//! zero-size axes, special input values) must load, lower to Tiny IR that verifies, and evaluate to
//! every signature output with its declared dtype and bound shape — never a panic, an internal
//! error or an unsupported-lowering diagnostic — and to the values of the generator's two oracles
//! (exact, bit for bit; f64, within graph-json's tolerances).
//!
//! A second property checks identities (Flip∘Flip, Permute∘inverse, Reshape∘Reshape back, Concat
//! then Slice back, Pad then crop, Softmax rows summing to 1, the last element of a cumulative sum
//! equal to the Reduce sum); a third, that the generator reaches every op, function and dtype.
//!
//! Generation reads a tape of random `u32`s (a value past its end reads 0), so proptest shrinks a
//! failure towards short tapes and the first choice of every decision. `PIPELINE_FUZZ_CASES=N`
//! runs more cases (2000 by default, about a second).

mod common;

use common::graphgen::oracle_exact::ravel;
use common::graphgen::{gen_case, run_reported, Case, BINARY, UNARY};
use common::within;
use dlc_egg::eval::evaluate;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend::{load_str, resolve_symbols};
use dlc_egg::ir::tiny::verify;
use dlc_egg::lower::lower;
use dlc_egg::tensor::Tensor;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

// ---------------------------------------------------------------------------------------------
// Running a case.

/// Diagnostic codes that mean a compiler bug on a valid graph.
fn internal_code(c: &str) -> bool {
    c == "E1100"
        || c == "E0306"
        || c == "E0315"
        || c == "E0316"
        || c.starts_with("E9")
        || c.starts_with("E10")
}

fn run_case(case: &Case) -> Result<(), String> {
    let text = case.doc.to_string();
    let g = load_str(&text, "fuzz.json").map_err(|d| format!("load rejects it:\n{d}"))?;
    let bindings = resolve_symbols(&g, &case.cli, &case.arrays)
        .map_err(|d| format!("resolve_symbols fails:\n{d}"))?;
    for (s, v) in &case.syms {
        if bindings.get(s) != Some(v) {
            return Err(format!(
                "symbol {s} bound to {:?}, expected {v}",
                bindings.get(s)
            ));
        }
    }
    let prog = lower(&g).map_err(|d| {
        let tag = if d.codes().iter().any(|c| internal_code(c)) {
            "internal error"
        } else {
            "error"
        };
        format!("lower fails ({tag}):\n{d}")
    })?;
    verify(&prog).map_err(|e| format!("verify fails:\n{}", e.to_diagnostic()))?;
    let ins: BTreeMap<String, Tensor> = case
        .inputs
        .iter()
        .map(|i| (i.name.clone(), i.tensor.clone()))
        .collect();
    let out = evaluate(&prog, &bindings, &ins).map_err(|d| format!("evaluate fails:\n{d}"))?;
    for o in &case.outputs {
        let t = out
            .get(&o.name)
            .ok_or_else(|| format!("output {} missing", o.name))?;
        if t.dtype != o.dtype || t.shape != o.conc {
            return Err(format!(
                "output {}: {} {:?}, declared {} {:?}",
                o.name,
                t.dtype.name(),
                t.shape,
                o.dtype.name(),
                o.conc
            ));
        }
        if t.numel() != t.to_f64().len() {
            return Err(format!(
                "output {}: data length differs from its shape",
                o.name
            ));
        }
        if let Some(want) = &o.refv {
            let got = t.to_f64();
            for (k, (a, b)) in got.iter().zip(want).enumerate() {
                if !within(*a, *b, None) {
                    return Err(format!(
                        "output {}: element {k} is {a}, the naive interpreter says {b}\n  got  {got:?}\n  want {want:?}",
                        o.name
                    ));
                }
            }
        }
        if let Some(want) = &o.approx {
            // graph-json's tolerances: 1e-3 for fp32 outputs, 1e-2 for fp16/bf16.
            let tol = if o.dtype == DType::F32 { 1e-3 } else { 1e-2 };
            let got = t.to_f64();
            for (k, (a, b)) in got.iter().zip(want).enumerate() {
                if !within(*a, *b, Some(tol)) {
                    return Err(format!(
                        "output {}: element {k} is {a}, the f64 oracle says {b}\n  got  {got:?}\n  want {want:?}",
                        o.name
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Case count: 2000 (about a second), or `PIPELINE_FUZZ_CASES` for a longer run.
fn fuzz_cases() -> u32 {
    std::env::var("PIPELINE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

proptest! {
    // Failures are minimized by hand into tests/pipeline_regressions.rs; no persistence file.
    #![proptest_config(ProptestConfig {
        cases: fuzz_cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Valid documents never make lowering or the evaluator fail or panic, and every output has
    /// its declared dtype and bound shape (and the naive interpreter's values where it has them).
    #[test]
    fn valid_graphs_lower_and_evaluate(tape in prop::collection::vec(any::<u32>(), 0..400)) {
        let case = gen_case(&tape);
        run_reported(&case, run_case).map_err(TestCaseError::fail)?;
    }
}

/// The generator reaches every op, every elementwise function and every dtype (checked on a fixed
/// set of tapes, generation only).
#[test]
fn generator_covers_every_op_and_dtype() {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut s: u64 = 12345;
    for _ in 0..1500 {
        let tape: Vec<u32> = (0..400)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 33) as u32
            })
            .collect();
        seen.extend(gen_case(&tape).labels);
    }
    let mut want: Vec<String> = dlc_egg::ir::frontend::Op::NAMES
        .iter()
        .map(|s| s.to_string())
        .collect();
    want.retain(|o| o != "GEMM" && o != "Elementwise");
    want.push("GEMM".into());
    want.push("Elementwise".into());
    for f in UNARY.iter().chain(BINARY.iter()).chain(["where"].iter()) {
        assert!(
            seen.iter().any(|l| l.starts_with(&format!("fn:{f}:"))),
            "function {f} never generated"
        );
    }
    for o in want {
        assert!(seen.contains(&o), "op {o} never generated");
    }
    for d in DType::ALL {
        assert!(
            seen.contains(&format!("input:{}", d.name())),
            "dtype {d:?} never generated"
        );
    }
    for a in DType::ALL {
        for b in DType::ALL {
            let l = format!("Cast:{}->{}", a.name(), b.name());
            assert!(seen.contains(&l), "{l} never generated");
        }
    }
    for f in ["sum", "max", "min", "mean", "prod"] {
        for k in [false, true] {
            assert!(
                seen.iter().any(|l| l.starts_with(&format!("Reduce:{f}:"))
                    && l.ends_with(&format!(":keepdim:{k}"))),
                "Reduce {f} keepdim={k} never generated"
            );
        }
    }
    for f in ["sum", "prod", "max", "min"] {
        for rev in [false, true] {
            for ex in [false, true] {
                assert!(
                    seen.iter()
                        .any(|l| l.starts_with(&format!("Cumulative:{f}:"))
                            && l.ends_with(&format!(":rev:{rev}:excl:{ex}"))),
                    "Cumulative {f} reverse={rev} exclusive={ex} never generated"
                );
            }
        }
    }
    for l in [
        "Reduce:max:bool:keepdim:false",
        "Reduce:min:i32:keepdim:true",
        "Conv:1d:g2",
        "Conv:2d:g3",
        "Conv:symbolic-kernel",
        "ConvTranspose:1d:g2",
        "ConvTranspose:2d:g1",
        "Pool:max:2d:i32",
        "Pool:avg:1d:bf16",
        "Attention:mask:fp32",
        "Attention:causal:false",
        "LayerNorm:params2",
        "RMSNorm:params1",
        "Reshape:0->2",
        "Reshape:3->1",
        "MatMul:4x4",
        "acc:fp16",
        "MatMul:1x1",
        "MatMul:1x2",
        "MatMul:2x1",
        "MatMul:3x3",
        "Attention:mask:bool",
        "Attention:causal:true",
        "Pool:avg:2d:fp16",
        "GEMM:C",
        "scalar-operand",
        "scalar-only",
        "Cast:bool->bf16",
        "Cast:fp32->i32",
    ] {
        assert!(seen.contains(l), "{l} never generated");
    }
}

// ---------------------------------------------------------------------------------------------
// Identities.

/// Loads, binds (no symbols), lowers and evaluates a document; returns the outputs.
fn eval_doc(doc: &Value, inputs: &[(&str, Tensor)]) -> BTreeMap<String, Tensor> {
    let ins: Vec<(&str, Tensor)> = inputs.iter().map(|(n, t)| (*n, t.clone())).collect();
    common::try_run(&doc.to_string(), ins).unwrap_or_else(|d| {
        panic!(
            "{d}\n{}",
            serde_json::to_string_pretty(doc).unwrap_or_default()
        )
    })
}

fn two_node_doc(x_shape: &[usize], dt: &str, n1: Value, n2: Value, y_shape: Value) -> Value {
    json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {
            "X": {"dtype": dt, "shape": x_shape},
            "Y": {"dtype": dt, "shape": y_shape},
        },
        "graph": [n1, n2],
    })
}

fn nd(op: &str, i: &str, o: &str, attrs: Value) -> Value {
    json!({"op": op, "name": o, "inputs": [i], "outputs": [o], "attrs": attrs})
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 120,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Movement round trips give back the input exactly.
    #[test]
    fn movement_roundtrips_are_identity(
        shape in prop::collection::vec(1usize..5, 1..5),
        kind in 0usize..5,
        seed in any::<u64>(),
        aux in any::<u32>(),
        dt in prop::sample::select(vec!["fp16", "bf16", "fp32", "i32"]),
    ) {
        let r = shape.len();
        let x = common::rand_tensor(seed, DType::parse(dt).expect("dtype"), &shape);
        let (n1, n2) = match kind {
            0 => {
                let axes: Vec<usize> = (0..r).filter(|a| aux >> a & 1 == 1).collect();
                (nd("Flip", "X", "A", json!({"axes": axes})), nd("Flip", "A", "Y", json!({"axes": axes})))
            }
            1 => {
                let mut perm: Vec<usize> = (0..r).collect();
                perm.rotate_left(aux as usize % r);
                let mut inv = vec![0; r];
                for (i, p) in perm.iter().enumerate() {
                    inv[*p] = i;
                }
                (nd("Permute", "X", "A", json!({"perm": perm})), nd("Permute", "A", "Y", json!({"perm": inv})))
            }
            2 => {
                let n: usize = shape.iter().product();
                let t = if aux % 2 == 0 { json!([n]) } else { json!([-1, shape[r - 1]]) };
                (nd("Reshape", "X", "A", json!({"shape": t})), nd("Reshape", "A", "Y", json!({"shape": shape})))
            }
            3 => {
                let axis = aux as usize % r;
                let n = shape[axis] as i64;
                let n1 = json!({"op": "Concat", "name": "A", "inputs": ["X", "X", "X"], "outputs": ["A"], "attrs": {"axis": axis}});
                (n1, nd("Slice", "A", "Y", json!({"starts": [n], "ends": [2 * n], "axes": [axis]})))
            }
            _ => {
                let pads: Vec<Value> = (0..r).map(|a| json!([(aux >> a) as i64 % 3, (aux >> (a + 8)) as i64 % 2])).collect();
                let crops: Vec<Value> = (0..r).map(|a| json!([-((aux >> a) as i64 % 3), -((aux >> (a + 8)) as i64 % 2)])).collect();
                (nd("Pad", "X", "A", json!({"pad": pads, "value": 5})), nd("Pad", "A", "Y", json!({"pad": crops})))
            }
        };
        let doc = two_node_doc(&shape, dt, n1, n2, json!(shape));
        let y = eval_doc(&doc, &[("X", x.clone())]).remove("Y").expect("Y");
        prop_assert_eq!(y, x);
    }

    /// Softmax rows sum to 1; the last element of an inclusive cumulative sum (the first, when
    /// reversed) is the Reduce sum.
    #[test]
    fn softmax_rows_and_scan_totals(
        shape in prop::collection::vec(1usize..6, 1..4),
        axis_pick in any::<usize>(),
        reverse in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let r = shape.len();
        let axis = axis_pick % r;
        let x = common::rand_tensor(seed, DType::F32, &shape);
        let mut reduced = shape.clone();
        reduced[axis] = 1;
        let doc = json!({
            "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "P"}, {"tensor": "C"}, {"tensor": "R"}]},
            "tensors": {
                "X": {"dtype": "fp32", "shape": shape},
                "P": {"dtype": "fp32", "shape": reduced},
                "C": {"dtype": "fp32", "shape": shape},
                "R": {"dtype": "fp32", "shape": reduced},
            },
            "graph": [
                {"op": "Softmax", "name": "sm", "inputs": ["X"], "outputs": ["S"], "attrs": {"axis": axis}},
                {"op": "Reduce", "name": "ps", "inputs": ["S"], "outputs": ["P"], "attrs": {"fn": "sum", "axes": [axis], "keepdim": true}},
                {"op": "Cumulative", "name": "cs", "inputs": ["X"], "outputs": ["C"], "attrs": {"fn": "sum", "axis": axis, "reverse": reverse}},
                {"op": "Reduce", "name": "rs", "inputs": ["X"], "outputs": ["R"], "attrs": {"fn": "sum", "axes": axis, "keepdim": true}},
            ],
        });
        let out = eval_doc(&doc, &[("X", x)]);
        for p in out["P"].to_f64() {
            prop_assert!((p - 1.0).abs() < 1e-5, "softmax row sums to {}", p);
        }
        let c = &out["C"];
        let rsum = out["R"].to_f64();
        let n = shape[axis];
        for (k, total) in rsum.iter().enumerate() {
            let mut i = common::unravel(k, &reduced);
            i[axis] = if reverse { 0 } else { n - 1 };
            let last = c.get_f64(ravel(&i, &shape));
            prop_assert!((last - total).abs() <= 1e-5 * (1.0 + total.abs()), "scan total {} vs reduce {}", last, total);
        }
    }
}
