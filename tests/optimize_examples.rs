//! The optimizer on the seed examples: the seed's kernel structure (seed 001 §6.8 / §15), the
//! optimized program's values equal to the reference evaluator's, and determinism.

#[path = "../bench/common/bench_graphs.rs"]
mod bench_graphs;
mod common;

use dlc_egg::eval::evaluate;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::region::program::evaluate_program;
use dlc_egg::ir::region::{Expr, Materialize, Region};
use dlc_egg::ir::tiny::Program;
use dlc_egg::optimize::{optimize, OptimizeOptions, Optimized};
use dlc_egg::rules::testing::{compare_tensor, random_inputs, Compare};
use dlc_egg::{ir::frontend, lower};
use serde_json::json;
use std::collections::BTreeMap;

fn lowered_doc(text: &str, file: &str) -> Program {
    let g = frontend::load_str(text, file).expect("loads");
    lower::lower(&g).expect("lowers")
}

fn lowered(name: &str) -> Program {
    let text = std::fs::read_to_string(format!("examples/{name}.json")).expect("example exists");
    lowered_doc(&text, name)
}

fn regions(o: &Optimized) -> Vec<&Region> {
    o.program.regions().collect()
}

/// Every sub-expression of a region's lets.
fn exprs(r: &Region) -> Vec<&Expr> {
    let mut out = Vec::new();
    let mut stack: Vec<&Expr> = r.lets.iter().map(|l| &l.expr).collect();
    while let Some(e) = stack.pop() {
        out.push(e);
        stack.extend(dlc_egg::ir::region::verify::children(e));
    }
    out
}

fn reduces(r: &Region) -> Vec<&dlc_egg::ir::region::Reduce> {
    exprs(r)
        .into_iter()
        .filter_map(|e| match e {
            Expr::Reduce(red) => Some(red.as_ref()),
            _ => None,
        })
        .collect()
}

/// Concrete sizes for the example's symbols (small, odd where possible).
fn bindings(p: &Program) -> BTreeMap<String, i64> {
    let mut b = p.symbols.clone();
    for n in &p.nodes {
        for d in &n.shape {
            for s in d.symbols() {
                b.entry(s).or_insert(3);
            }
        }
    }
    b
}

/// Optimizes `p`, plays the program back and compares it with the reference evaluator.
fn check_matches_reference(p: &Program, seed: u64) -> Optimized {
    let o = optimize(p, &OptimizeOptions::default()).expect("optimizes");
    let b = bindings(p);
    let ins = random_inputs(p, &b, seed).expect("inputs");
    let want = evaluate(p, &b, &ins).expect("reference evaluates");
    let got = evaluate_program(&o.program, &b, &ins).unwrap_or_else(|d| {
        panic!(
            "the optimized program fails: {d}\n{}",
            serde_json::to_value(&o.program).unwrap_or_default()
        )
    });
    for (name, w) in &want {
        let g = got
            .get(name)
            .unwrap_or_else(|| panic!("output {name} missing"));
        // The numerics contract of fusion (docs/numerics.md): graph-json's tolerance plus
        // κ·u·max|reference| (κ = 32, u the output dtype's unit roundoff): fused kernels keep
        // intermediates in fp32 where the reference rounds every tensor to its dtype, and after a
        // long contraction (the MLP's K = 3072) the skipped roundings add up beyond 1e-2 relative.
        if let Err(e) = compare_tensor(name, g, w, Compare::Fused) {
            panic!(
                "{e}\n{}",
                serde_json::to_string(&o.program).unwrap_or_default()
            );
        }
    }
    o
}

#[test]
fn every_example_matches_the_reference() {
    for (k, name) in common::SEED_EXAMPLES.iter().enumerate() {
        eprintln!("example {name}");
        let o = check_matches_reference(&lowered(name), 7 + k as u64);
        assert!(!o.kernels.is_empty(), "{name}: no kernels");
    }
}

#[test]
fn kernel_counts_follow_the_seed() {
    for (name, want) in [
        ("gemm_bias_relu", 1),
        ("conv3x3_s2_p1_silu", 1),
        ("layernorm", 1),
        ("mlp_gelu", 2),
        ("matmul_1d_2d", 1),
        ("bias_gelu_residual", 1),
        // Compute-at (seed 003): the conv is embedded in the pool's window.
        ("conv_relu_pool", 1),
    ] {
        let o = optimize(&lowered(name), &OptimizeOptions::default()).expect("optimizes");
        let names: Vec<&str> = o.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(o.kernels.len(), want, "{name}: kernels {names:?}");
    }
}

/// Seed 001 §6.8.1: one region, C-CON1 reads, an fp32 accumulator, the epilogue on it, one
/// fp16 cast on the yield.
#[test]
fn gemm_bias_relu_is_the_seed_region() {
    let o = optimize(&lowered("gemm_bias_relu"), &OptimizeOptions::default()).expect("optimizes");
    let rs = regions(&o);
    assert_eq!(rs.len(), 1);
    let r = rs[0];
    let red = reduces(r);
    assert_eq!(red.len(), 1);
    assert_eq!(red[0].dtype, Some(DType::F32));
    assert_eq!(red[0].axes.len(), 1);
    match &red[0].body {
        Expr::Binary(dlc_egg::ir::region::BinaryFn::Mul, a, b) => {
            assert!(matches!(**a, Expr::Read { .. }), "C-CON1: {a:?}");
            assert!(matches!(**b, Expr::Read { .. }), "C-CON1: {b:?}");
        }
        other => panic!("reduce body is not a product of reads: {other:?}"),
    }
    assert_eq!(r.yields.len(), 1);
    assert_eq!(r.yields[0].cast, Some(DType::F16));
    assert!(
        !exprs(r).iter().any(|e| matches!(e, Expr::Cast { .. })),
        "the epilogue runs on the fp32 accumulator: {}",
        r.to_json_string()
    );
    assert!(exprs(r)
        .iter()
        .any(|e| matches!(e, Expr::Unary(dlc_egg::ir::region::UnaryFn::Relu, _))));
}

/// Seed 001 §6.8.2: one region whose padded reads are guarded by `select`.
#[test]
fn conv_reads_are_select_guarded() {
    let o =
        optimize(&lowered("conv3x3_s2_p1_silu"), &OptimizeOptions::default()).expect("optimizes");
    let rs = regions(&o);
    assert_eq!(rs.len(), 1);
    let red = reduces(rs[0]);
    assert_eq!(red.len(), 1, "{}", rs[0].to_json_string());
    assert_eq!(red[0].axes.len(), 3, "sum over ci, kh, kw");
    let mut stack = vec![&red[0].body];
    let mut guarded = false;
    while let Some(e) = stack.pop() {
        if let Expr::Select { then, .. } = e {
            guarded |= matches!(**then, Expr::Read { .. });
        }
        stack.extend(dlc_egg::ir::region::verify::children(e));
    }
    assert!(
        guarded,
        "no select-guarded read: {}",
        rs[0].to_json_string()
    );
}

/// Seed 001 §6.8.3 / §15.3: QKᵀ + row softmax in one region (P deferred to the next), P·V in
/// the second; the max and the sum stay different reductions (R4).
///
/// This needs the kernels phase to merge the two spellings of QKᵀ growth meets (inside the row
/// max and beside it) into one reduction, and the cost to charge the softmax recomputed in P·V's
/// prologue once per head-dimension column (`body_flops`).
#[test]
fn attention_is_two_regions_with_separate_reductions() {
    let o = optimize(&lowered("attention_causal"), &OptimizeOptions::default()).expect("optimizes");
    let rs = regions(&o);
    assert_eq!(rs.len(), 2);
    let ops: Vec<_> = reduces(rs[0]).iter().map(|r| r.op).collect();
    use dlc_egg::ir::tiny::ReduceOp;
    assert!(
        ops.contains(&ReduceOp::Max) && ops.contains(&ReduceOp::Sum),
        "{ops:?}"
    );
    assert_eq!(rs[0].outputs[0].materialize, Materialize::Deferred);
    let second: Vec<_> = reduces(rs[1]).iter().map(|r| r.op).collect();
    assert_eq!(second, vec![ReduceOp::Sum]);
}

/// Transposes and reshapes around a matmul fold into its reads: no movement-only kernel.
#[test]
fn movement_around_a_matmul_folds_into_reads() {
    let doc = json!({
        "signature": {"inputs": [{"tensor": "A"}, {"tensor": "B"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {
            "A": {"dtype": "fp16", "shape": [8, 6]},
            "B": {"dtype": "fp16", "shape": [5, 8]},
            "Y": {"dtype": "fp16", "shape": [30]}
        },
        "graph": [
            {"op": "Permute", "name": "at", "inputs": ["A"], "outputs": ["At"], "attrs": {"perm": [1, 0]}},
            {"op": "Permute", "name": "bt", "inputs": ["B"], "outputs": ["Bt"], "attrs": {"perm": [1, 0]}},
            {"op": "MatMul", "name": "mm", "inputs": ["At", "Bt"], "outputs": ["C"]},
            {"op": "Reshape", "name": "flat", "inputs": ["C"], "outputs": ["Y"], "attrs": {"shape": [30]}}
        ]
    });
    let p = lowered_doc(&doc.to_string(), "t.json");
    let o = check_matches_reference(&p, 3);
    assert_eq!(o.kernels.len(), 1, "{:?}", o.kernels);
    assert!(o.kernels.iter().all(|k| !k.name.ends_with("_copy")));
}

#[test]
fn reports_and_dumps_are_deterministic() {
    for name in ["attention_causal", "layernorm"] {
        let p = lowered(name);
        let run = || {
            let opts = OptimizeOptions {
                explain: true,
                ..OptimizeOptions::default()
            };
            let o = optimize(&p, &opts).expect("optimizes");
            let mut r = o.report();
            for ph in &mut r.phases {
                ph.time = 0.0;
            }
            (
                serde_json::to_string(&r).expect("report"),
                serde_json::to_value(&o.program)
                    .unwrap_or_default()
                    .to_string(),
            )
        };
        assert_eq!(run(), run(), "{name}");
    }
}

#[test]
fn explain_names_kernels_covers_and_rules() {
    let opts = OptimizeOptions {
        explain: true,
        ..OptimizeOptions::default()
    };
    let o = optimize(&lowered("gemm_bias_relu"), &opts).expect("optimizes");
    let r = o.report();
    let k = &r.kernels[0];
    assert!(!k.covers.is_empty(), "{k:?}");
    assert!(
        k.fused_because.iter().any(|w| w.contains("contraction")),
        "{k:?}"
    );
    assert!(
        k.fused_because.iter().any(|w| w.contains("epilogue")),
        "{k:?}"
    );
    let chain = &r.rewrites[0];
    assert!(
        chain.rules.iter().any(|u| u.rule == "kernel-fuse"),
        "{chain:?}"
    );
    // The chain reaches into the kernel's body: the fp16 casts sunk below the epilogue.
    assert!(
        chain.rules.iter().any(|u| u.rule.starts_with("cast-sink")),
        "{chain:?}"
    );
    let text = dlc_egg::optimize::explain::render(&r, false);
    for phase in ["movement", "kernels"] {
        assert!(text.contains(phase), "{text}");
    }
}

/// Every step of every rewrite chain names a rule of the rule sets (custom appliers justify
/// their unions with the rule's name, not a source location).
#[test]
fn rewrite_chains_name_rules() {
    let opts = OptimizeOptions {
        explain: true,
        ..OptimizeOptions::default()
    };
    let known: Vec<String> = dlc_egg::rules::all_phases()
        .iter()
        .flat_map(|(_, rules)| rules.iter().map(|r| r.name.to_string()))
        .chain(["kernel-wrap".to_string(), "kernel-fuse".to_string()])
        .collect();
    for ex in [
        "attention_causal",
        "conv3x3_s2_p1_silu",
        "layernorm",
        "mlp_gelu",
    ] {
        let r = optimize(&lowered(ex), &opts).expect("optimizes").report();
        for chain in &r.rewrites {
            for u in &chain.rules {
                assert!(
                    known.contains(&u.rule),
                    "{ex}: step `{}` is not a rule",
                    u.rule
                );
            }
        }
    }
}

/// `--explain`'s covers on one encoder layer: every frontend node is covered by some kernel, and
/// the three projections of X (which share X's cast and reshape) are each attributed to their
/// own kernel only.
#[test]
fn encoder_covers_attribute_each_projection_to_its_kernel() {
    use crate::bench_graphs::{transformer_encoder, EncoderConfig};
    let doc = transformer_encoder(&EncoderConfig::bert_base(1));
    let p = lowered_doc(&doc.to_string(), "encoder.json");
    let o = optimize(&p, &OptimizeOptions::default()).expect("optimizes");
    let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
    for node in doc["graph"].as_array().expect("a graph") {
        let name = node["name"].as_str().expect("named nodes");
        assert!(
            covers.iter().any(|c| c.iter().any(|t| t == name)),
            "{name} is covered by no kernel: {covers:?}"
        );
    }
    for proj in ["l0.q.mm", "l0.k.mm", "l0.v.mm"] {
        let n = covers
            .iter()
            .filter(|c| c.iter().any(|t| t == proj))
            .count();
        assert_eq!(n, 1, "{proj}: {covers:?}");
    }
}
