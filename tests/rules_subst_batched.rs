//! `matmul-merge-shared-lhs` on an exporter's batched projections (`X: [B, S, K]` times
//! `Wᵢ: [K, Nᵢ]`, issue 23): the merge is bit-exact on random inputs, and the pipeline's gate
//! ([`subst::MergeGate`], the pricer's) lets it fire under the roofline only where each
//! projection launches fewer CTAs than the target has SMs (a serving batch), not where the parts
//! already fill the GPU (the default sizes, where the merged cover equals the unmerged one:
//! bench/results/covers-2026-11-28.md), and always under the CPU model.

use dlc_egg::ir::egraph::{add_program, extract_program, TensorGraph, TensorLang};
use dlc_egg::ir::tiny::Program;
use dlc_egg::rules::subst::{self, MergeGate};
use dlc_egg::rules::testing::{assert_fired, assert_not_fired, check_sound, Compare};
use dlc_egg::rules::{run_phase, Budget, PhaseStats, Rule};
use dlc_egg::{ir::frontend, lower};
use egg::{AstSize, Extractor, Id};
use serde_json::json;
use std::collections::BTreeMap;

/// MatMuls `X·Wᵢ` with `X: [b, s, 5]` (sizes or symbols) and `Wᵢ: [5, nᵢ]`, fp32.
fn projections(b: serde_json::Value, s: serde_json::Value, ns: &[i64]) -> Program {
    let mut tensors = serde_json::Map::new();
    tensors.insert("X".into(), json!({"dtype": "fp32", "shape": [b, s, 5]}));
    let mut inputs = vec![json!({"tensor": "X"})];
    let mut outputs = vec![];
    let mut nodes = vec![];
    for (i, n) in ns.iter().enumerate() {
        let (w, y) = (format!("W{i}"), format!("Y{i}"));
        tensors.insert(w.clone(), json!({"dtype": "fp32", "shape": [5, n]}));
        tensors.insert(y.clone(), json!({"dtype": "fp32", "shape": [b, s, n]}));
        inputs.push(json!({"tensor": w, "role": "param"}));
        nodes.push(
            json!({"op": "MatMul", "name": format!("mm{i}"), "inputs": ["X", w],
            "outputs": [y], "attrs": {}}),
        );
        outputs.push(json!({"tensor": y}));
    }
    let doc = json!({
        "signature": {"inputs": inputs, "outputs": outputs},
        "tensors": tensors,
        "graph": nodes,
    });
    let g = frontend::load_str(&doc.to_string(), "proj.json").unwrap_or_else(|d| panic!("{d}"));
    lower::lower(&g).unwrap_or_else(|d| panic!("{d}"))
}

/// The subst phase with `rules` on `prog`; every output extracted through the widest merged
/// MatMul (the smallest spelling elsewhere). Returns the program, the stats and its REDUCEs.
fn merged(prog: &Program, rules: &[Rule]) -> (Program, PhaseStats, usize) {
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, prog);
    let (eg, stats) = run_phase(eg, "subst", rules, &Budget::default());
    assert!(stats.saturated(), "{stats:?}");
    let widest = |c: Id| {
        eg[c]
            .nodes
            .iter()
            .filter_map(|n| match n {
                TensorLang::Shrink([x, ..]) => {
                    let f = eg[*x].data.tensor()?;
                    Some((f.shape.last()?.as_int()?, n.clone()))
                }
                _ => None,
            })
            .max_by_key(|(w, _)| *w)
            .map(|(_, n)| n)
    };
    let ex = Extractor::new(&eg, AstSize);
    let choose = |c: Id| widest(c).unwrap_or_else(|| ex.find_best_node(c).clone());
    let q = extract_program(&eg, prog, &class, &choose).unwrap_or_else(|e| panic!("{e}"));
    let reduces = q.nodes.iter().filter(|n| n.uop.name() == "REDUCE").count();
    (q, stats, reduces)
}

/// The gate at `B`, `S` on a 132-SM target.
fn gate(b: i64, s: i64) -> MergeGate {
    MergeGate {
        bindings: BTreeMap::from([("B".to_string(), b), ("S".to_string(), s)]),
        default_size: 1024,
        units: Some(132),
    }
}

#[test]
fn batched_projections_merge_into_one_matmul_bit_exactly() {
    let p = projections(json!(2), json!(3), &[4, 6, 2]);
    let (q, stats, reduces) = merged(&p, &subst::rules());
    assert_fired(&stats, "matmul-merge-shared-lhs");
    assert_eq!(
        reduces, 1,
        "three projections through one merged MatMul: {q:#?}"
    );
    check_sound(&p, &q, &BTreeMap::new(), &[1, 2, 3], Compare::BitExact).unwrap();
}

#[test]
fn the_gate_merges_projections_that_leave_sms_idle() {
    // B·S = 128 rows: 2 row tiles × 12, 11 and 10 column tiles = 24, 22 and 20 CTAs per
    // projection (< 132 SMs). Distinct widths: with three equal ones this test's extraction
    // (widest shrink, else the smallest term) reads each output through a different merge.
    let p = projections(json!("B"), json!("S"), &[768, 704, 640]);
    let (q, stats, reduces) = merged(&p, &[subst::merge_rule(Some(gate(1, 128)))]);
    assert_fired(&stats, "matmul-merge-shared-lhs");
    assert_eq!(reduces, 1);
    let small = BTreeMap::from([("B".to_string(), 1), ("S".to_string(), 2)]);
    check_sound(&p, &q, &small, &[4], Compare::BitExact).unwrap();
}

#[test]
fn the_gate_keeps_projections_that_fill_the_gpu_apart() {
    let p = projections(json!("B"), json!("S"), &[768, 768, 768]);
    // 1024·1024 rows (the default size): 16384 row tiles per projection.
    let (_, stats, _) = merged(&p, &[subst::merge_rule(Some(gate(1024, 1024)))]);
    assert_not_fired(&stats, "matmul-merge-shared-lhs");
    // The boundary: 11 row tiles × 12 column tiles = 132 CTAs, one per SM.
    let (_, stats, _) = merged(&p, &[subst::merge_rule(Some(gate(1, 704)))]);
    assert_not_fired(&stats, "matmul-merge-shared-lhs");
    // One row tile fewer (120 CTAs) merges.
    let (_, stats, _) = merged(&p, &[subst::merge_rule(Some(gate(1, 640)))]);
    assert_fired(&stats, "matmul-merge-shared-lhs");
}

#[test]
fn a_gate_without_units_merges_at_any_size() {
    // The CPU pricer's gate (`merge_units` = None): a merged GEMM never prices above its
    // parts there, so the projections merge even where they would fill a GPU.
    let p = projections(json!("B"), json!("S"), &[768, 704, 640]);
    let always = MergeGate {
        units: None,
        ..gate(1024, 1024)
    };
    let (q, stats, reduces) = merged(&p, &subst::gated_rules(false, &always));
    assert_fired(&stats, "matmul-merge-shared-lhs");
    assert_eq!(reduces, 1);
    let small = BTreeMap::from([("B".to_string(), 1), ("S".to_string(), 2)]);
    check_sound(&p, &q, &small, &[5], Compare::BitExact).unwrap();
}

#[test]
fn the_pricers_give_the_gate_its_units() {
    use dlc_egg::extract::pricing::{KernelPricer, Roofline};
    let h100 = dlc_egg::target::Arch::Sm90.target();
    assert_eq!(Roofline.merge_units(&h100), Some(h100.sms));
    let cpu = dlc_egg::cpu::pricing::CpuPricer::new(Default::default(), 2);
    assert_eq!(cpu.merge_units(&h100), None);
}

#[test]
fn the_gate_leaves_rank_two_matmuls_to_the_ungated_rule() {
    // X: [M, K] MatMuls (the bench encoder's lowering) merge whatever the sizes, as before.
    let mut tensors = serde_json::Map::new();
    tensors.insert("X".into(), json!({"dtype": "fp32", "shape": [4096, 5]}));
    for i in 0..2 {
        tensors.insert(format!("W{i}"), json!({"dtype": "fp32", "shape": [5, 768]}));
        tensors.insert(
            format!("Y{i}"),
            json!({"dtype": "fp32", "shape": [4096, 768]}),
        );
    }
    let doc = json!({
        "signature": {"inputs": [{"tensor": "X"}, {"tensor": "W0", "role": "param"},
            {"tensor": "W1", "role": "param"}], "outputs": [{"tensor": "Y0"}, {"tensor": "Y1"}]},
        "tensors": tensors,
        "graph": [
            {"op": "MatMul", "name": "mm0", "inputs": ["X", "W0"], "outputs": ["Y0"], "attrs": {}},
            {"op": "MatMul", "name": "mm1", "inputs": ["X", "W1"], "outputs": ["Y1"], "attrs": {}}
        ],
    });
    let g = frontend::load_str(&doc.to_string(), "mm.json").unwrap_or_else(|d| panic!("{d}"));
    let p = lower::lower(&g).unwrap_or_else(|d| panic!("{d}"));
    let (_, stats, reduces) = merged(&p, &[subst::merge_rule(Some(gate(1024, 1024)))]);
    assert_fired(&stats, "matmul-merge-shared-lhs");
    assert_eq!(reduces, 1);
}

#[test]
fn the_pipeline_gates_the_merge_by_its_pricer() {
    use dlc_egg::optimize::{optimize, OptimizeOptions};
    // Unbound B and S at the default size 1024: every projection fills an H100.
    let p = projections(json!("B"), json!("S"), &[768, 704, 640]);
    let subst_fired = |opts: &OptimizeOptions| {
        let o = optimize(&p, opts).unwrap_or_else(|e| panic!("{e}"));
        let st = o
            .phases
            .iter()
            .find(|s| s.name == "subst")
            .expect("phase subst");
        st.fired("matmul-merge-shared-lhs")
    };
    assert!(
        !subst_fired(&OptimizeOptions::default()),
        "roofline: filled"
    );
    let cpu = dlc_egg::cpu::pricing::CpuPricer::new(Default::default(), 2);
    assert!(
        subst_fired(&OptimizeOptions::default().with_pricer(cpu)),
        "the CPU model merges always"
    );
}

/// `subst::has_merged_matmuls` (what gives the fast extractor `MERGED_WORK_PER_NODE`) sees
/// the merge's unions: after a gated merge at batch 1 yes, where the gate refuses (and on the
/// e-graph before the phase) no.
#[test]
fn merged_matmuls_are_seen_in_the_e_graph() {
    let p = projections(json!("B"), json!("S"), &[768, 704, 640]);
    let subst_phase = |g: MergeGate| {
        let mut eg = TensorGraph::default();
        add_program(&mut eg, &p);
        assert!(!subst::has_merged_matmuls(&eg), "before the phase");
        run_phase(
            eg,
            "subst",
            &[subst::merge_rule(Some(g))],
            &Budget::default(),
        )
        .0
    };
    assert!(subst::has_merged_matmuls(&subst_phase(gate(1, 128))));
    assert!(!subst::has_merged_matmuls(&subst_phase(gate(1024, 1024))));
}
