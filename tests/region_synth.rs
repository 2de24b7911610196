//! Region synthesis (seed 001 §6.7) end to end: kernel bodies cut out of the example programs
//! become regions whose CPU playback matches the Tiny reference evaluator — every op as its own
//! kernel (a region program), and whole programs as one region where that is legal; illegal
//! fusions are rejected with the right error.

use dlc_egg::eval::evaluate;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::region::program::{evaluate_program, verify_program, Buffer, RegionProgram, Step};
use dlc_egg::ir::region::{evaluate_region, Expr, Materialize, Region};
use dlc_egg::ir::tiny::{NodeId, Program, UOp};
use dlc_egg::rules::testing::random_inputs;
use dlc_egg::synth::{body_from_program, synthesize, SynthError};
use dlc_egg::{ir::frontend, lower};
use std::collections::BTreeMap;
use std::path::PathBuf;

mod synth_common;
use synth_common::*;

fn example(name: &str) -> Program {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(format!("{name}.json"));
    let g = frontend::load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    lower::lower(&g).unwrap_or_else(|d| panic!("{d}"))
}

fn examples() -> Vec<(String, Program)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("examples/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    assert!(names.len() >= 7, "{names:?}");
    names
        .into_iter()
        .map(|n| (n.clone(), example(&n)))
        .collect()
}

/// Every non-movement node its own kernel (movement, CONST and RANGE inlined into consumers).
fn single_op_program(p: &Program) -> RegionProgram {
    let is_root = |id: NodeId| {
        let u = &p.node(id).uop;
        !(u.is_movement() || matches!(u, UOp::Input { .. } | UOp::Const { .. } | UOp::Range))
    };
    let outputs: Vec<NodeId> = p.outputs.iter().map(|o| o.node).collect();
    let mut steps = Vec::new();
    for n in &p.nodes {
        let input = matches!(n.uop, UOp::Input { .. });
        if input || !(is_root(n.id) || outputs.contains(&n.id)) {
            continue;
        }
        let (body, args) = body_from_program(p, n.id, &is_root);
        let r = synthesize(
            &format!("k{}", n.id.0),
            &body,
            &synth_args(p, &args),
            &buffer_name(p, n.id),
            Materialize::Gmem,
        )
        .unwrap_or_else(|e| panic!("{}: {e}\nbody {body}", n.id));
        steps.push(Step::Region(r));
    }
    RegionProgram {
        inputs: p
            .inputs
            .iter()
            .map(|i| Buffer {
                name: i.tensor.clone(),
                dtype: p.node(i.node).dtype,
                shape: p.node(i.node).shape.clone(),
            })
            .collect(),
        steps,
        outputs: p
            .outputs
            .iter()
            .map(|o| (o.tensor.clone(), buffer_name(p, o.node)))
            .collect(),
        derived: Vec::new(),
    }
}

/// Runs example `name` as single-op kernels against the evaluator, with symbol overrides.
fn single_ops_match(name: &str, overrides: &[(&str, i64)]) {
    let p = example(name);
    let rp = single_op_program(&p);
    verify_program(&rp).unwrap_or_else(|e| panic!("{name}: {e}"));
    // The JSON form round-trips.
    let text = serde_json::to_string(&rp).expect("serialize");
    let back: RegionProgram = serde_json::from_str(&text).expect("parse back");
    assert_eq!(back, rp, "{name}");
    let over: BTreeMap<String, i64> = overrides.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let mut syms = p.symbols.clone();
    syms.extend(over.clone());
    let inputs = random_inputs(&p, &over, 7).expect("inputs");
    let want = evaluate(&p, &over, &inputs).unwrap_or_else(|d| panic!("{d}"));
    let got = evaluate_program(&rp, &syms, &inputs).unwrap_or_else(|d| panic!("{name}: {d}"));
    assert_eq!(got.len(), want.len());
    for (k, w) in &want {
        assert_close(&format!("{name}/{k}"), &got[k], w);
    }
}

#[test]
fn every_example_is_covered() {
    let covered = [
        "attention_causal",
        "bias_gelu_residual",
        "conv3x3_s2_p1_silu",
        "conv_relu_pool",
        "gemm_bias_relu",
        "layernorm",
        "matmul_1d_2d",
        "mlp_gelu",
    ];
    let names: Vec<String> = examples().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, covered);
}

#[test]
fn single_ops_attention() {
    single_ops_match("attention_causal", &[]);
}

#[test]
fn single_ops_bias_gelu_residual() {
    single_ops_match("bias_gelu_residual", &[("T", 5)]);
}

#[test]
fn single_ops_conv3x3() {
    single_ops_match("conv3x3_s2_p1_silu", &[]);
}

#[test]
fn single_ops_conv_relu_pool() {
    single_ops_match("conv_relu_pool", &[]);
}

#[test]
fn single_ops_gemm() {
    single_ops_match("gemm_bias_relu", &[]);
}

#[test]
fn single_ops_layernorm() {
    single_ops_match("layernorm", &[]);
}

#[test]
fn single_ops_matmul_1d_2d() {
    single_ops_match("matmul_1d_2d", &[]);
}

#[test]
fn single_ops_mlp() {
    // T = 16 materializes a 16x3072x768 product per matmul; 3 rows cover the same code.
    single_ops_match("mlp_gelu", &[("T", 3)]);
}

/// After the movement and RB-SSA phases (movement chains folded into READ nodes), the single-op
/// split still matches the evaluator.
#[test]
fn single_ops_after_the_rbssa_phase() {
    use dlc_egg::rules::testing::optimize;
    use dlc_egg::rules::{all_phases, Budget};
    let phases = all_phases();
    let rules = |n: &str| {
        phases
            .iter()
            .find(|(name, _)| *name == n)
            .map(|(_, r)| r.clone())
            .expect("phase")
    };
    for name in [
        "attention_causal",
        "gemm_bias_relu",
        "layernorm",
        "matmul_1d_2d",
    ] {
        let p = example(name);
        let (q, _) =
            optimize(&p, "movement", &rules("movement"), &Budget::default()).expect("movement");
        let (q, _) = optimize(&q, "rbssa", &rules("rbssa"), &Budget::default()).expect("rbssa");
        assert!(
            q.nodes.iter().any(|n| matches!(n.uop, UOp::Read { .. })),
            "{name}: no READ after the rbssa phase"
        );
        let rp = single_op_program(&q);
        let inputs = random_inputs(&q, &BTreeMap::new(), 5).expect("inputs");
        let want = evaluate(&p, &BTreeMap::new(), &inputs).unwrap_or_else(|d| panic!("{d}"));
        let got =
            evaluate_program(&rp, &q.symbols, &inputs).unwrap_or_else(|d| panic!("{name}: {d}"));
        for (k, w) in &want {
            assert_close(&format!("{name}/{k}"), &got[k], w);
        }
        // And the GEMM is still one region.
        if name == "gemm_bias_relu" {
            let r = whole(&q).unwrap_or_else(|e| panic!("{e}"));
            check_region(name, &q, &r, q.outputs[0].node);
        }
    }
}

/// The whole program (its first output) as one region.
fn whole(p: &Program) -> Result<Region, SynthError> {
    let root = p.outputs[0].node;
    let (body, args) = body_from_program(p, root, &|_| false);
    synthesize(
        "whole",
        &body,
        &synth_args(p, &args),
        "OUT",
        Materialize::Gmem,
    )
}

fn check_region(name: &str, p: &Program, r: &Region, root: NodeId) {
    let inputs = random_inputs(p, &BTreeMap::new(), 3).expect("inputs");
    let want = evaluate_node(p, root, &inputs);
    let got = evaluate_region(r, &p.symbols, &inputs).unwrap_or_else(|d| panic!("{name}: {d}"));
    assert_close(name, &got["OUT"], &want);
}

#[test]
fn whole_programs_that_are_one_region() {
    for name in [
        "gemm_bias_relu",
        "layernorm",
        "conv3x3_s2_p1_silu",
        "matmul_1d_2d",
        "bias_gelu_residual",
        // Compute-at: the conv is embedded in the pool's window reduction (seed 003).
        "conv_relu_pool",
    ] {
        let p = example(name);
        let r = whole(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        let again = Region::from_json_value(r.to_json_value()).expect("round trip");
        assert_eq!(again, r, "{name}");
        check_region(name, &p, &r, p.outputs[0].node);
    }
}

#[test]
fn whole_programs_that_would_recompute_are_rejected() {
    for name in ["attention_causal", "mlp_gelu"] {
        let p = example(name);
        match whole(&p) {
            Err(SynthError::Recompute { .. }) => {}
            other => panic!("{name}: expected Recompute, got {other:?}"),
        }
    }
}

#[test]
fn gemm_region_has_the_seed_structure() {
    let p = example("gemm_bias_relu");
    let r = whole(&p).expect("gemm");
    let reduces: Vec<&dlc_egg::ir::region::Reduce> = r
        .lets
        .iter()
        .filter_map(|l| match &l.expr {
            Expr::Reduce(red) => Some(&**red),
            _ => None,
        })
        .collect();
    assert_eq!(reduces.len(), 1, "{}", r.to_json_string());
    let red = reduces[0];
    assert_eq!(red.axes.len(), 1);
    assert_eq!(red.dtype, Some(DType::F32));
    assert_eq!(red.op, dlc_egg::ir::tiny::ReduceOp::Sum);
    let k = red.axes[0].as_str();
    let Expr::Binary(dlc_egg::ir::region::BinaryFn::Mul, a, b) = &red.body else {
        panic!("body is not a product: {}", red.body.to_json());
    };
    let read = |e: &Expr| match e {
        Expr::Read { tensor, map } => (
            tensor.clone(),
            map.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
        ),
        other => panic!("not a plain read (C-CON1): {}", other.to_json()),
    };
    assert_eq!(
        read(a),
        ("A".to_string(), vec!["m".to_string(), k.to_string()])
    );
    assert_eq!(
        read(b),
        ("B".to_string(), vec![k.to_string(), "n".to_string()])
    );
    // No extents: the verifier derives k from the reads.
    assert!(red.extents.is_empty());
    // The bias is broadcast explicitly (seed §6.8.1).
    assert!(
        r.to_json_string().contains("BroadcastInDim"),
        "{}",
        r.to_json_string()
    );
    assert_eq!(r.yields[0].cast, Some(DType::F16));
}

#[test]
fn attention_softmax_is_one_region_with_shadowing_reduces() {
    let p = example("attention_causal");
    // P: the softmax (the last FDIV), before P·V.
    let pnode = p
        .nodes
        .iter()
        .rev()
        .find(|n| matches!(n.uop, UOp::Binary(dlc_egg::ir::tiny::BinaryOp::Fdiv)))
        .map(|n| n.id)
        .expect("softmax division");
    let (body, args) = body_from_program(&p, pnode, &|_| false);
    let r = synthesize(
        "softmax",
        &body,
        &synth_args(&p, &args),
        "OUT",
        Materialize::Deferred,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = r.iters.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["b", "h", "m", "n"]);
    let reduces: Vec<(String, Vec<String>, dlc_egg::ir::tiny::ReduceOp)> = r
        .lets
        .iter()
        .filter_map(|l| match &l.expr {
            Expr::Reduce(red) => Some((l.name.clone(), red.axes.clone(), red.op)),
            _ => None,
        })
        .collect();
    assert_eq!(reduces.len(), 3, "{}", r.to_json_string());
    // S = sum over a fresh var; Mrow = max over `n` (shadowing the iter); Z = sum over `n`.
    use dlc_egg::ir::tiny::ReduceOp::{Max, Sum};
    assert_eq!(reduces[0].2, Sum);
    assert_ne!(reduces[0].1, vec!["n".to_string()]);
    assert_eq!(
        (reduces[1].1.clone(), reduces[1].2),
        (vec!["n".to_string()], Max)
    );
    assert_eq!(
        (reduces[2].1.clone(), reduces[2].2),
        (vec!["n".to_string()], Sum)
    );
    // The max's body is the score let itself at the shadowed point (no recomputation).
    let Expr::Reduce(mx) = &r
        .lets
        .iter()
        .find(|l| l.name == reduces[1].0)
        .expect("max")
        .expr
    else {
        unreachable!()
    };
    assert!(matches!(mx.body, Expr::Let(_)), "{}", mx.body.to_json());
    check_region("softmax", &p, &r, pnode);
}

/// `X [B, S, 8]` flattened to `[B·S, 8]` times `W [8, 12]` (ONNX `Gemm`), then `tanh` of the
/// product read back as `[B, S, 12]` — or, with `split_columns`, as `[B, S, 3, 4]` (its rows
/// and, a head split, its columns).
fn reshaped_gemm(split_columns: bool) -> Program {
    let (back, y) = if split_columns {
        (
            serde_json::json!(["B", "S", 3, 4]),
            serde_json::json!(["B", "S", 3, 4]),
        )
    } else {
        (
            serde_json::json!(["B", "S", 12]),
            serde_json::json!(["B", "S", 12]),
        )
    };
    let doc = serde_json::json!({
        "signature": {"inputs": [{"tensor": "X"}, {"tensor": "W", "role": "param"}],
            "outputs": [{"tensor": "Y"}]},
        "symbols": {"B": 3, "S": 5},
        "tensors": {"X": {"dtype": "fp32", "shape": ["B", "S", 8]},
            "W": {"dtype": "fp32", "shape": [8, 12]}, "Y": {"dtype": "fp32", "shape": y}},
        "graph": [
            {"op": "Reshape", "name": "flat", "inputs": ["X"], "outputs": ["x2"],
                "attrs": {"shape": [-1, 8]}},
            {"op": "GEMM", "name": "fc", "inputs": ["x2", "W"], "outputs": ["g"], "attrs": {}},
            {"op": "Reshape", "name": "back", "inputs": ["g"], "outputs": ["x"],
                "attrs": {"shape": back}},
            {"op": "Elementwise", "name": "act", "inputs": ["x"], "outputs": ["Y"],
                "attrs": {"fn": "tanh"}}
        ]
    });
    let g = frontend::load_str(&doc.to_string(), "reshaped_gemm.json")
        .unwrap_or_else(|d| panic!("{d}"));
    lower::lower(&g).unwrap_or_else(|d| panic!("{d}"))
}

/// The product is needed at the merged row `S·b + s`, one point per iteration (`synth`'s
/// `aligned`): one region, the GEMM's reads at `X`'s own axes.
#[test]
fn a_gemm_read_back_at_merged_rows_is_one_region() {
    let p = reshaped_gemm(false);
    let r = whole(&p).unwrap_or_else(|e| panic!("{e}"));
    let reduces = r
        .lets
        .iter()
        .filter(|l| matches!(l.expr, Expr::Reduce(_)))
        .count();
    assert_eq!(reduces, 1, "{}", r.to_json_string());
    check_region("reshaped_gemm", &p, &r, p.outputs[0].node);
}

/// The product's columns split into two iters: not one region (the contraction templates tile
/// one column iter; `synth`'s `aligned` keeps the innermost index plain).
#[test]
fn a_gemm_whose_columns_are_split_is_not_one_region() {
    match whole(&reshaped_gemm(true)) {
        Err(SynthError::Recompute { .. }) => {}
        other => panic!("expected Recompute, got {other:?}"),
    }
}
