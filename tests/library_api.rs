//! The library API of the pipeline (issue 18): rules and phases added to `optimize`, a bad rule
//! reported as an error naming it (E1500–E1503), a user's extractor, the public path from a cover
//! to a region program, and `Optimized`'s `Debug`.

use dlc_egg::extract::dag::{
    DagExtractor, ExtractError, ExtractOptions, Extraction, FastExtractor, Problem,
};
use dlc_egg::ir::egraph::{add_program, TensorGraph};
use dlc_egg::ir::tiny::Program;
use dlc_egg::optimize::{choose_cover, optimize, program_of_cover, OptimizeError, OptimizeOptions};
use dlc_egg::rules::testing::check_optimized;
use dlc_egg::rules::{cond, try_run_phase, Budget, Rule, RuleError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// `Y = exp(relu(relu(X)))` in fp32, 16×64.
const GRAPH: &str = r#"{
  "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
  "tensors": {"X": {"dtype": "fp32", "shape": [16, 64]}, "Y": {"dtype": "fp32", "shape": [16, 64]}},
  "graph": [
    {"op": "Elementwise", "name": "a", "inputs": ["X"], "outputs": ["H1"], "attrs": {"fn": "relu"}},
    {"op": "Elementwise", "name": "b", "inputs": ["H1"], "outputs": ["H2"], "attrs": {"fn": "relu"}},
    {"op": "Elementwise", "name": "e", "inputs": ["H2"], "outputs": ["Y"], "attrs": {"fn": "exp"}}
  ]
}"#;

fn program() -> Program {
    let graph = dlc_egg::ir::frontend::load_str(GRAPH, "api.json").expect("loads");
    dlc_egg::run::lower_and_verify(&graph).expect("lowers")
}

fn double() -> Rule {
    egg::rewrite!("relu-idem"; "(relu (relu ?x))" => "(relu ?x)" if cond::is_float("?x"))
}

fn rule_error(r: Result<dlc_egg::optimize::Optimized, OptimizeError>) -> RuleError {
    match r {
        Err(OptimizeError::Rule(e)) => e,
        Err(e) => panic!("expected a rule error, got {e}"),
        Ok(_) => panic!("expected a rule error, got a program"),
    }
}

#[test]
fn a_user_rule_runs_in_its_phase_and_is_on_the_rewrite_chain() {
    let p = program();
    let o = optimize(
        &p,
        &OptimizeOptions::default()
            .with_rule("srnf", double())
            .with_explain(true),
    )
    .expect("optimizes");
    let srnf = o.phases.iter().find(|s| s.name == "srnf").expect("srnf");
    assert!(srnf.fired("relu-idem"), "{:?}", srnf.applied);
    assert!(o.rewrites[0].rules.iter().any(|u| u.rule == "relu-idem"));
    assert_eq!(o.kernels.len(), 1);
    assert_eq!(
        o.kernels[0].body.matches("(relu").count(),
        1,
        "{}",
        o.kernels[0].body
    );
    assert!(!o.kernels[0].covers.is_empty());
    check_optimized(&p, &o, &Default::default(), &[0]).expect("matches the reference");
}

#[test]
fn an_added_phase_runs_after_its_anchor() {
    let p = program();
    let opts = OptimizeOptions::default().with_phase("epilogue", "mine", vec![double()]);
    assert_eq!(
        opts.phase_names().expect("fits"),
        [
            "movement",
            "rbssa",
            "srnf",
            "contraction",
            "epilogue",
            "mine",
            "kernels",
            // The substitutions run between two kernels rounds (issue 23).
            "subst",
            "kernels"
        ]
    );
    let o = optimize(&p, &opts).expect("optimizes");
    let names: Vec<&str> = o.phases.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names[5], "mine");
    assert!(o.phases[5].fired("relu-idem"));
}

#[test]
fn an_unknown_or_duplicate_phase_is_an_error() {
    let p = program();
    let e = rule_error(optimize(
        &p,
        &OptimizeOptions::default().with_rule("srfn", double()),
    ));
    assert_eq!(e.code(), "E1502");
    assert!(
        e.to_string().contains("`srfn`") && e.to_string().contains("srnf"),
        "{e}"
    );
    let e = rule_error(optimize(
        &p,
        &OptimizeOptions::default().with_phase("srnf", "epilogue", vec![]),
    ));
    assert_eq!(e.code(), "E1503");
}

#[test]
fn an_ill_typed_rule_is_an_error_naming_it() {
    let p = program();
    // exp(x) => where(x, x, x): the condition must be bool.
    let bad: Rule = egg::rewrite!("bad-where"; "(exp2 ?x)" => "(where ?x ?x ?x)");
    let e = rule_error(optimize(
        &p,
        &OptimizeOptions::default().with_rule("srnf", bad),
    ));
    assert_eq!(e.code(), "E1500", "{e}");
    assert!(e.to_string().contains("rule `bad-where`"), "{e}");
    assert_eq!(e.to_diagnostic().kind, "IllTypedRule");
}

#[test]
fn an_unsound_rule_is_an_error_naming_it() {
    let p = program();
    let bad: Rule = egg::rewrite!("to-half"; "(exp2 ?x)" => "(cast ?x fp16)");
    let e = rule_error(optimize(
        &p,
        &OptimizeOptions::default().with_rule("movement", bad),
    ));
    assert_eq!(e.code(), "E1501", "{e}");
    assert!(e.to_string().contains("rule `to-half`"), "{e}");
    // The same through the phase runner directly; nothing is left recorded afterwards.
    let mut eg = TensorGraph::default();
    add_program(&mut eg, &p);
    let bad: Rule = egg::rewrite!("to-half"; "(exp2 ?x)" => "(cast ?x fp16)");
    let e = try_run_phase(eg, "mine", &[bad], &Budget::default()).expect_err("unsound");
    assert!(matches!(e, RuleError::Unsound { ref phase, .. } if phase == "mine"));
    let mut eg = TensorGraph::default();
    add_program(&mut eg, &p);
    try_run_phase(eg, "clean", &[double()], &Budget::default()).expect("a sound rule runs");
}

/// The fast extractor, counting its calls.
struct Counting(Arc<AtomicUsize>);

impl DagExtractor for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn extract(&self, p: &Problem, opts: &ExtractOptions) -> Result<Extraction, ExtractError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        FastExtractor::default().extract(p, opts)
    }
}

#[test]
fn a_user_extractor_chooses_the_cover_and_a_cover_becomes_a_program() {
    let p = program();
    let calls = Arc::new(AtomicUsize::new(0));
    let opts = OptimizeOptions::default().with_extractor(Counting(calls.clone()));
    let o = optimize(&p, &opts).expect("optimizes");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(o.extraction.custom.as_deref(), Some("extractor=counting"));
    let plain = optimize(&p, &OptimizeOptions::default()).expect("optimizes");
    assert_eq!(o.program, plain.program);
    assert_eq!(plain.extraction.custom, None);
    // The public path: the final e-graph and a cover of its roots give the same program.
    let cover = choose_cover(&o.egraph, &p, &o.roots, &o.model, &opts).expect("covers");
    let built = program_of_cover(&o.egraph, &p, &o.classes, &cover, &o.model).expect("builds");
    assert_eq!(built.program, o.program);
    assert_eq!(built.kernels.len(), o.kernels.len());
    // Debug summarizes the e-graph instead of printing it.
    let text = format!("{o:?}");
    assert!(
        text.contains("TensorGraph(") && text.contains("e-classes)"),
        "{text}"
    );
}
