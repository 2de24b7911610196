//! SCAN (seed 004's cumulative ops as a parallel scan): the Tiny op against the old
//! triangular-window form on small sizes (a property test), lowering and the region it becomes,
//! the optimized program's playback against the reference, and linear work in the cost model.

mod common;

use common::{names, one_op, rand_tensor};
use dlc_egg::cost::choose_plan;
use dlc_egg::cost::work::{analyze, Shape};
use dlc_egg::eval::evaluate;
use dlc_egg::extract::kernels::CostModel;
use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend::{load_str, resolve_symbols};
use dlc_egg::ir::region::program::evaluate_program;
use dlc_egg::ir::region::{Expr, Region};
use dlc_egg::ir::tiny::{Builder, Program, ReduceOp, ScanSpec, UOp};
use dlc_egg::lower::{cumulative_window, lower};
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::target::Target;
use dlc_egg::tensor::Tensor;
use proptest::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;

/// `Y = scan(X)` (`window`: the old REDUCE over a triangular window instead).
fn program(shape: &[usize], dt: DType, spec: ScanSpec, window: bool) -> Program {
    let acc = if dt.is_float() {
        DType::F32
    } else {
        DType::I32
    };
    let mut b = Builder::new();
    let shape: Vec<Dim> = shape.iter().map(|s| Dim::int(*s as i64)).collect();
    let x = b.input("X", dt, shape).expect("input");
    let xc = b.cast(x, acc).expect("cast");
    let y = if window {
        cumulative_window(&mut b, xc, spec).expect("window form")
    } else {
        b.scan(xc, spec, acc).expect("scan")
    };
    b.output("Y", y);
    b.finish()
}

fn eval_y(p: &Program, x: &Tensor) -> Tensor {
    let ins = BTreeMap::from([("X".to_string(), x.clone())]);
    let mut out = evaluate(p, &BTreeMap::new(), &ins).unwrap_or_else(|d| panic!("{d}"));
    out.remove("Y").expect("Y")
}

const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min];

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// SCAN equals the triangular-window REDUCE bit for bit. Float inputs are integer-valued when
    /// the order of a reverse sum or product matters (the window folds ascending, the scan
    /// descending: both exact on small integers); otherwise arbitrary values in [-1, 1).
    #[test]
    fn scan_matches_the_window_form(
        shape in prop::collection::vec(1usize..6, 1..4),
        axis_pick in 0usize..3,
        op in 0usize..4,
        exclusive: bool,
        reverse: bool,
        dt in prop::sample::select(vec![DType::F32, DType::F16, DType::I32]),
        seed in 0u64..1000,
    ) {
        let axis = axis_pick % shape.len();
        let spec = ScanSpec { op: OPS[op], axis, exclusive, reverse };
        let n: usize = shape.iter().product();
        let raw = common::data(seed, n);
        let integral = dt == DType::I32
            || (reverse && matches!(spec.op, ReduceOp::Sum | ReduceOp::Prod));
        let vals: Vec<f64> = raw
            .iter()
            .map(|v| if integral { (v * 3.0).round() } else { *v })
            .collect();
        let x = Tensor::from_f64(dt, shape.clone(), &vals);
        let want = eval_y(&program(&shape, dt, spec, true), &x);
        let got = eval_y(&program(&shape, dt, spec, false), &x);
        prop_assert_eq!(&got.shape, &want.shape);
        let (g, w) = (got.to_f64(), want.to_f64());
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            prop_assert!(a == b || (a.is_nan() && b.is_nan()), "{spec:?} {dt} at {i}: {a} vs {b}");
        }
    }
}

/// The Tiny program of a one-node `Cumulative` graph.
fn cumulative_doc(attrs: serde_json::Value, dt: &str, shape: Vec<i64>) -> String {
    one_op("Cumulative", attrs, &[("X", dt, shape)], names(&["X"]))
}

#[test]
fn cumulative_lowers_to_one_scan() {
    let doc = cumulative_doc(json!({"fn": "sum", "axis": 0}), "fp16", vec![5, 3]);
    let prog = lower(&load_str(&doc, "t.json").unwrap_or_else(|d| panic!("{d}")))
        .unwrap_or_else(|d| panic!("{d}"));
    let scans: Vec<&UOp> = prog
        .nodes
        .iter()
        .map(|n| &n.uop)
        .filter(|u| matches!(u, UOp::Scan { .. }))
        .collect();
    assert_eq!(scans.len(), 1, "{prog:?}");
    assert!(
        !prog
            .nodes
            .iter()
            .any(|n| matches!(n.uop, UOp::Reduce { .. } | UOp::Range)),
        "no triangular window left: {prog:?}"
    );
    let dump = dlc_egg::ir::tiny::to_json(&prog).to_string();
    assert!(dump.contains("\"SCAN\""), "{dump}");
}

/// The reference evaluator's outputs and the optimized program's, and the program.
fn reference_and_optimized(
    doc: &str,
    x: Tensor,
) -> (Tensor, Tensor, dlc_egg::ir::region::program::RegionProgram) {
    let g = load_str(doc, "t.json").unwrap_or_else(|d| panic!("{d}"));
    let arrays = BTreeMap::from([("X".to_string(), x.shape.clone())]);
    let bindings = resolve_symbols(&g, &BTreeMap::new(), &arrays).unwrap_or_else(|d| panic!("{d}"));
    let prog = lower(&g).unwrap_or_else(|d| panic!("{d}"));
    let ins = BTreeMap::from([("X".to_string(), x)]);
    let want = evaluate(&prog, &bindings, &ins).unwrap_or_else(|d| panic!("{d}"));
    let o = optimize(&prog, &OptimizeOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let got = evaluate_program(&o.program, &bindings, &ins).unwrap_or_else(|d| panic!("{d}"));
    (want["Y"].clone(), got["Y"].clone(), o.program)
}

fn regions(p: &dlc_egg::ir::region::program::RegionProgram) -> Vec<&Region> {
    p.regions().collect()
}

/// Every variant, the scanned axis strided or innermost, fp16 (casts fused as prologue and
/// epilogue), i32 and bool: one scan kernel, played back equal to the reference.
#[test]
fn optimized_scan_is_one_kernel_and_matches_the_reference() {
    for (f, dt) in [
        ("sum", "fp16"),
        ("prod", "fp32"),
        ("max", "i32"),
        ("min", "fp32"),
    ] {
        for axis in [0i64, 1, -1] {
            for (exclusive, reverse) in [(false, false), (true, false), (false, true), (true, true)]
            {
                let attrs =
                    json!({"fn": f, "axis": axis, "exclusive": exclusive, "reverse": reverse});
                let doc = cumulative_doc(attrs.clone(), dt, vec![3, 37, 5]);
                let dtype: DType = serde_json::from_value(json!(dt)).expect("dtype");
                let x = rand_tensor(7, dtype, &[3, 37, 5]);
                let x = if dtype == DType::I32 {
                    let v: Vec<f64> = common::data(7, x.numel())
                        .iter()
                        .map(|v| (v * 50.0).round())
                        .collect();
                    Tensor::from_f64(dtype, x.shape.clone(), &v)
                } else {
                    x
                };
                let (want, got, prog) = reference_and_optimized(&doc, x);
                if let Err(why) = common::compare_output("Y", &got, &want, "the reference") {
                    panic!("{attrs} {dt}: {why}");
                }
                let rs = regions(&prog);
                assert_eq!(rs.len(), 1, "{attrs} {dt}: one kernel, got {}", rs.len());
                assert!(
                    rs[0].lets.iter().any(|l| matches!(l.expr, Expr::Scan(_))),
                    "{}",
                    rs[0].to_json_string()
                );
            }
        }
    }
}

#[test]
fn bool_cumulative_max_matches_the_reference() {
    let doc = cumulative_doc(json!({"fn": "max", "axis": 0}), "bool", vec![9]);
    let v: Vec<f64> = [0., 0., 1., 0., 1., 1., 0., 0., 0.].to_vec();
    let x = Tensor::from_f64(DType::Bool, vec![9], &v);
    let (want, got, _) = reference_and_optimized(&doc, x);
    assert_eq!(got, want);
}

fn scan_region(n: i64) -> Region {
    let doc = cumulative_doc(json!({"fn": "sum", "axis": 0}), "fp32", vec![n]);
    let prog = lower(&load_str(&doc, "t.json").unwrap_or_else(|d| panic!("{d}")))
        .unwrap_or_else(|d| panic!("{d}"));
    let o = optimize(&prog, &OptimizeOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    regions(&o.program)[0].clone()
}

/// Linear work, read off the cost model (not a timing): doubling `n` doubles the scan kernel's
/// operations and bytes; its shape is a scan of one line of `n`. The old triangular form's work
/// quadruples.
#[test]
fn scan_work_is_linear() {
    let model = CostModel {
        bindings: BTreeMap::new(),
        default_size: 1024,
        target: Target::h100_sxm5(),
        regions: None,
    };
    let (a, b) = (scan_region(4096), scan_region(8192));
    let (wa, wb) = (
        analyze(&a, &model).expect("work"),
        analyze(&b, &model).expect("work"),
    );
    assert!(
        matches!(wa.shape, Shape::Scan { lines, len } if lines == 1.0 && len == 4096.0),
        "{:?}",
        wa.shape
    );
    assert_eq!(wb.ops.total(), 2.0 * wa.ops.total());
    assert_eq!(
        wb.in_bytes() + wb.out_bytes,
        2.0 * (wa.in_bytes() + wa.out_bytes)
    );
    let plan = choose_plan(&b, &model).expect("a plan");
    assert_eq!(plan.work.shape.template(), "scan");
    // The window form of the same scan: a reduction of n × n.
    let mut bld = Builder::new();
    let x = bld.input("X", DType::F32, vec![Dim::int(8192)]).expect("x");
    let spec = ScanSpec {
        op: ReduceOp::Sum,
        axis: 0,
        exclusive: false,
        reverse: false,
    };
    let y = cumulative_window(&mut bld, x, spec).expect("window");
    bld.output("Y", y);
    let p = bld.finish();
    let o = optimize(&p, &OptimizeOptions::default()).expect("optimize");
    let w: f64 = regions(&o.program)
        .iter()
        .map(|r| analyze(r, &model).expect("work").ops.total())
        .sum();
    assert!(w >= 8192.0 * 8192.0, "the window form is quadratic: {w}");
    assert!(w > 1000.0 * wb.ops.total());
}

/// A scan let round-trips through the region JSON and is rejected anywhere but a let's whole
/// expression.
#[test]
fn scan_region_json_round_trips_and_verifies() {
    let r = scan_region(100);
    let text = r.to_json_string();
    assert!(text.contains("\"scan\""), "{text}");
    let back = Region::from_json_str(&text).expect("parses");
    assert_eq!(back, r);
    let mut v: serde_json::Value = serde_json::from_str(&text).expect("json");
    let lets = v["region"]["lets"].as_array_mut().expect("lets");
    let i = lets
        .iter()
        .position(|l| l["expr"].get("scan").is_some())
        .expect("a scan let");
    let scan = lets[i]["expr"].clone();
    lets[i]["expr"] = json!({"neg": [scan]});
    let nested = Region::from_json_value(v).expect("parses");
    let err = dlc_egg::ir::region::verify(&nested).expect_err("a nested scan is rejected");
    assert!(err.to_string().contains("scan"), "{err}");
}
