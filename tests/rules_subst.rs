//! The graph substitutions (`src/rules/subst.rs`, issue 23): every rule fires on a positive case
//! whose merged form evaluates bit-exactly like the original on random inputs, does not fire on
//! near misses, and pays off in the pipeline (fewer kernels on the encoder layer).

#[path = "../bench/common/bench_graphs.rs"]
mod bench_graphs;
use dlc_egg::ir::egraph::{add_program, extract_program, TensorGraph, TensorLang};
use dlc_egg::ir::tiny::Program;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::rules::testing::{assert_fired, assert_not_fired, check_sound, Compare};
use dlc_egg::rules::{run_phase, subst, Budget, PhaseStats};
use dlc_egg::{ir::frontend, lower};
use egg::{AstSize, Extractor, Id};
use serde_json::json;
use std::collections::BTreeMap;

/// A graph of MatMuls `X·Wᵢ` (or `Xᵢ·Wᵢ` with `own_lhs`), `X: [3, 5]`, `Wᵢ: [5, nᵢ]`, dtype
/// `dt`; with `computed_w`, every weight is `relu(Wᵢ)` (not a graph input).
fn matmuls(ns: &[i64], dt: &str, own_lhs: bool, computed_w: bool) -> Program {
    let mut tensors = serde_json::Map::new();
    let mut inputs = vec![];
    let mut outputs = vec![];
    let mut nodes = vec![];
    for (i, n) in ns.iter().enumerate() {
        let x = if own_lhs { format!("X{i}") } else { "X".into() };
        if !tensors.contains_key(&x) {
            tensors.insert(x.clone(), json!({"dtype": dt, "shape": [3, 5]}));
            inputs.push(json!({"tensor": x}));
        }
        let w = format!("W{i}");
        tensors.insert(w.clone(), json!({"dtype": dt, "shape": [5, n]}));
        inputs.push(json!({"tensor": w, "role": "param"}));
        let w_used = if computed_w {
            let r = format!("R{i}");
            tensors.insert(r.clone(), json!({"dtype": dt, "shape": [5, n]}));
            nodes.push(
                json!({"op": "Elementwise", "name": format!("relu{i}"), "inputs": [w],
                "outputs": [r], "attrs": {"fn": "relu"}}),
            );
            r
        } else {
            w
        };
        let y = format!("Y{i}");
        tensors.insert(y.clone(), json!({"dtype": dt, "shape": [3, n]}));
        nodes.push(
            json!({"op": "MatMul", "name": format!("mm{i}"), "inputs": [x, w_used],
            "outputs": [y], "attrs": {}}),
        );
        outputs.push(json!({"tensor": y}));
    }
    let doc = json!({
        "signature": {"inputs": inputs, "outputs": outputs},
        "tensors": tensors,
        "graph": nodes,
    });
    let g = frontend::load_str(&doc.to_string(), "matmuls.json").unwrap_or_else(|d| panic!("{d}"));
    lower::lower(&g).unwrap_or_else(|d| panic!("{d}"))
}

/// The columns of the widest merged MatMul in `c`, when `c` holds `shrink(merged, …)`.
fn widest_shrink(eg: &TensorGraph, c: Id) -> Option<TensorLang> {
    eg[c]
        .nodes
        .iter()
        .filter_map(|n| match n {
            TensorLang::Shrink([x, ..]) => {
                let f = eg[*x].data.tensor()?;
                Some((f.shape.get(1)?.as_int()?, n.clone()))
            }
            _ => None,
        })
        .max_by_key(|(w, _)| *w)
        .map(|(_, n)| n)
}

/// Runs the subst phase, then extracts every output through the widest merged MatMul (the
/// smallest spelling elsewhere); returns the rewritten program, the stats and its REDUCE count.
fn merged(prog: &Program) -> (Program, PhaseStats, usize) {
    let (q, stats, reduces, _) = merged_with_classes(prog);
    (q, stats, reduces)
}

/// [`merged`], plus the number of e-classes holding a REDUCE after the phase.
fn merged_with_classes(prog: &Program) -> (Program, PhaseStats, usize, usize) {
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, prog);
    let (eg, stats) = run_phase(eg, "subst", &subst::rules(), &Budget::default());
    assert!(stats.saturated(), "{stats:?}");
    let reduce_classes = eg
        .classes()
        .filter(|c| c.nodes.iter().any(|n| matches!(n, TensorLang::Reduce(_))))
        .count();
    let ex = Extractor::new(&eg, AstSize);
    let choose = |c: Id| widest_shrink(&eg, c).unwrap_or_else(|| ex.find_best_node(c).clone());
    let q = extract_program(&eg, prog, &class, &choose).unwrap_or_else(|e| panic!("{e}"));
    let reduces = q.nodes.iter().filter(|n| n.uop.name() == "REDUCE").count();
    (q, stats, reduces, reduce_classes)
}

#[test]
fn qkv_projections_merge_into_one_matmul_bit_exactly() {
    for dt in ["fp16", "fp32"] {
        let p = matmuls(&[4, 6, 2], dt, false, false);
        let (q, stats, reduces) = merged(&p);
        assert_fired(&stats, "matmul-merge-shared-lhs");
        assert_eq!(
            reduces, 1,
            "{dt}: three MatMuls through one merged MatMul: {q:#?}"
        );
        check_sound(&p, &q, &BTreeMap::new(), &[1, 2, 3], Compare::BitExact)
            .unwrap_or_else(|e| panic!("{dt}: {e}"));
    }
}

#[test]
fn gate_and_up_projections_merge() {
    let p = matmuls(&[8, 8], "bf16", false, false);
    let (q, stats, reduces) = merged(&p);
    assert_fired(&stats, "matmul-merge-shared-lhs");
    assert_eq!(reduces, 1);
    check_sound(&p, &q, &BTreeMap::new(), &[4, 5], Compare::BitExact).unwrap();
}

#[test]
fn merges_are_bounded_by_the_prefixes_of_a_group() {
    // Five siblings: left-deep merges of at most MAX_MERGED weights, each extending the
    // prefix of the weights in class order by the next one.
    let p = matmuls(&[2, 3, 4, 5, 6], "fp32", false, false);
    let (q, stats, _, classes) = merged_with_classes(&p);
    // W1‖W2, W1‖W2‖W3 and W1‖W2‖W3‖W4, each built once (the subsets were 10 + 10 + 5).
    assert_eq!(classes, 5 + 3, "{:?}", stats.applied);
    check_sound(&p, &q, &BTreeMap::new(), &[6], Compare::BitExact).unwrap();
}

#[test]
fn matmuls_with_different_lhs_do_not_merge() {
    let p = matmuls(&[4, 6], "fp16", true, false);
    let (_, stats, _) = merged(&p);
    assert_not_fired(&stats, "matmul-merge-shared-lhs");
}

#[test]
fn computed_weights_do_not_merge() {
    // Cycle filtering: only graph inputs are concatenated.
    let p = matmuls(&[4, 6], "fp16", false, true);
    let (_, stats, _) = merged(&p);
    assert_not_fired(&stats, "matmul-merge-shared-lhs");
}

#[test]
fn a_single_matmul_does_not_merge() {
    let p = matmuls(&[4], "fp16", false, false);
    let (_, stats, _) = merged(&p);
    assert_not_fired(&stats, "matmul-merge-shared-lhs");
}

/// `Linear` layers sharing `X: [3, 5]` (dtype `dt`): `X·Wᵢ + bᵢ` with `Wᵢ: [5, nᵢ]`, the bias
/// added where `biased[i]` (else the bare MatMul).
fn linears(ns: &[i64], biased: &[bool], dt: &str) -> Program {
    let mut tensors = serde_json::Map::new();
    tensors.insert("X".into(), json!({"dtype": dt, "shape": [3, 5]}));
    let (mut inputs, mut outputs, mut nodes) = (vec![json!({"tensor": "X"})], vec![], vec![]);
    for (i, (n, b)) in ns.iter().zip(biased).enumerate() {
        let (w, y) = (format!("W{i}"), format!("Y{i}"));
        tensors.insert(w.clone(), json!({"dtype": dt, "shape": [5, n]}));
        inputs.push(json!({"tensor": w, "role": "param"}));
        let mm = if *b { format!("M{i}") } else { y.clone() };
        tensors.insert(mm.clone(), json!({"dtype": dt, "shape": [3, n]}));
        nodes.push(
            json!({"op": "MatMul", "name": format!("mm{i}"), "inputs": ["X", w],
            "outputs": [mm], "attrs": {}}),
        );
        if *b {
            let bias = format!("b{i}");
            tensors.insert(bias.clone(), json!({"dtype": dt, "shape": [n]}));
            tensors.insert(y.clone(), json!({"dtype": dt, "shape": [3, n]}));
            inputs.push(json!({"tensor": bias, "role": "param"}));
            nodes.push(json!({"op": "Elementwise", "name": format!("bias{i}"),
                "inputs": [mm, bias], "outputs": [y], "attrs": {"fn": "add"}}));
        }
        outputs.push(json!({"tensor": y}));
    }
    let doc = json!({
        "signature": {"inputs": inputs, "outputs": outputs},
        "tensors": tensors,
        "graph": nodes,
    });
    let g = frontend::load_str(&doc.to_string(), "linears.json").unwrap_or_else(|d| panic!("{d}"));
    lower::lower(&g).unwrap_or_else(|d| panic!("{d}"))
}

/// The `--explain` lines of every merged MatMul the subst phase builds for `prog`.
fn merge_explanations(prog: &Program) -> Vec<String> {
    let mut eg = TensorGraph::default();
    add_program(&mut eg, prog);
    let (eg, stats) = run_phase(eg, "subst", &subst::rules(), &Budget::default());
    assert!(stats.saturated(), "{stats:?}");
    let mut out: Vec<String> = eg
        .classes()
        .filter_map(|c| subst::explain(&eg, c.id))
        .collect();
    out.sort();
    out
}

#[test]
fn biased_projections_merge_with_their_biases_bit_exactly() {
    // Q, K, V with biases: one GEMM whose epilogue adds b0‖b1‖b2, each output its columns (in
    // fp16 the bias is added to the MatMul's cast, as the lowering spells a narrow MatMul).
    for dt in ["fp32", "fp16"] {
        let p = linears(&[4, 6, 2], &[true, true, true], dt);
        let (q, stats, reduces) = merged(&p);
        assert_fired(&stats, "matmul-merge-shared-lhs");
        assert_eq!(reduces, 1, "{dt}: {q:#?}");
        check_sound(&p, &q, &BTreeMap::new(), &[7, 8, 9], Compare::BitExact)
            .unwrap_or_else(|e| panic!("{dt}: {e}"));
        let lines = merge_explanations(&p);
        assert!(
            lines.iter().any(|l| l.contains("weights W0, W1, W2")
                && l.ends_with("biases b0, b1, b2 concatenated and added in its epilogue")),
            "{dt}: {lines:#?}"
        );
    }
}

#[test]
fn a_bias_merges_only_with_another_bias() {
    // One projection has no bias: the weights merge, the bias stays with its own part.
    let p = linears(&[4, 6], &[true, false], "fp32");
    let (q, stats, reduces) = merged(&p);
    assert_fired(&stats, "matmul-merge-shared-lhs");
    assert_eq!(reduces, 1, "{q:#?}");
    check_sound(&p, &q, &BTreeMap::new(), &[10], Compare::BitExact).unwrap();
    let lines = merge_explanations(&p);
    assert!(!lines.is_empty(), "the weights merge");
    assert!(lines.iter().all(|l| !l.contains("biases")), "{lines:#?}");
}

fn encoder_layer() -> Program {
    use crate::bench_graphs::{transformer_encoder, EncoderConfig};
    let doc = transformer_encoder(&EncoderConfig::bert_base(1));
    let g = frontend::load_str(&doc.to_string(), "encoder.json").unwrap_or_else(|d| panic!("{d}"));
    lower::lower(&g).unwrap_or_else(|d| panic!("{d}"))
}

/// The cover of one BERT-base layer (issue 23). Without substitutions: 10 kernels (was 14),
/// each LayerNorm one kernel with its residual add and the projection's bias. With them the
/// extractor takes the merged Q/K/V GEMM (one GEMM, N = 2304; QKᵀ reads its Q and K columns
/// with the biases added on load): 9 kernels, predicted time strictly lower — TODO(issue 23):
/// the V columns are still copied (likely because a sliced read is priced as a read of the
/// whole merged output, `plan::work::analyze`'s `InputUse::bytes`: on bert2 a kernel reading
/// its columns of a 2-weight merged GEMM is priced 1.5× the same kernel reading its own).
#[test]
fn encoder_layer_covers_with_and_without_substitutions() {
    let p = encoder_layer();
    let plain = optimize(
        &p,
        &OptimizeOptions {
            substitutions: false,
            ..OptimizeOptions::default()
        },
    )
    .expect("optimizes");
    let names: Vec<&str> = plain.kernels.iter().map(|k| k.name.as_str()).collect();
    assert!(plain.kernels.len() <= 10, "{names:?}");
    for ln in ["l0.ln1", "l0.ln2"] {
        // Kernels computing part of the LayerNorm, apart from a GEMM whose prologue recomputes
        // its last elementwise step (ff1 reads LN1 through `· gamma + beta`).
        let n = plain
            .kernels
            .iter()
            .filter(|k| k.covers.iter().any(|c| c == ln))
            .filter(|k| !k.covers.iter().any(|c| c.ends_with(".mm")))
            .count();
        let covers: Vec<(&str, &Vec<String>)> = plain
            .kernels
            .iter()
            .map(|k| (k.name.as_str(), &k.covers))
            .collect();
        assert_eq!(n, 1, "{ln} spread over {n} kernels: {covers:?}");
    }
    let o = optimize(&p, &OptimizeOptions::default()).expect("optimizes");
    let names: Vec<&str> = o.kernels.iter().map(|k| k.name.as_str()).collect();
    assert!(
        o.cost.time < plain.cost.time,
        "{:?} vs {:?}",
        o.cost,
        plain.cost
    );
    assert!(o.kernels.len() <= 9, "{names:?}");
    let merged = o
        .kernels
        .iter()
        .filter(|k| {
            k.fused_because
                .iter()
                .any(|r| r.contains("matmul-merge-shared-lhs"))
        })
        .count();
    let covers: Vec<(&str, &Vec<String>)> = o
        .kernels
        .iter()
        .map(|k| (k.name.as_str(), &k.covers))
        .collect();
    // One merged GEMM, for all three projections: with the substitutions before the kernels
    // phase the cover took two merged GEMMs (some projection computed twice); with kernels
    // grown before and after them, every projection is computed once.
    assert_eq!(merged, 1, "one Q/K/V GEMM, named in --explain: {covers:?}");
}
