//! DAG-aware extraction (`dlc_egg::extract::dag`): hand-built e-graphs where the DAG optimum is not
//! the tree optimum, cycles, infeasible inputs, a property test against brute-force enumeration,
//! the small public extraction-gym e-graphs, and `dlc-egg extract` end to end.

use dlc_egg::extract::dag::{
    dag_cost, tree_cost, validate, ClassIx, DagExtractor, ExactExtractor, ExtractError,
    ExtractOptions, Extraction, FastExtractor, NodeIx, Problem, Status,
};
use dlc_egg::extract::serialize::load;
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_dlc-egg");

fn opts(secs: u64) -> ExtractOptions {
    ExtractOptions {
        time_limit: Some(Duration::from_secs(secs)),
    }
}

/// Both extractors: each result valid, exact optimal, and fast no better than exact.
fn both(p: &Problem) -> (f64, f64) {
    let f = FastExtractor::default()
        .extract(p, &opts(30))
        .expect("fast");
    let e = ExactExtractor::default()
        .extract(p, &opts(30))
        .expect("exact");
    validate(p, &f).expect("fast is valid");
    validate(p, &e).expect("exact is valid");
    assert_eq!(e.status, Status::Optimal);
    assert_eq!(f.status, Status::Heuristic);
    let (fc, ec) = (dag_cost(p, &f).expect("ok"), dag_cost(p, &e).expect("ok"));
    assert!(
        fc >= ec - 1e-9 * ec.abs().max(1.0),
        "fast {fc} < exact {ec}"
    );
    (fc, ec)
}

/// `r = f(a, b)`; `a` is `g(s)` (1) or a leaf (5), `b` is `h(s)` (1) or a leaf (5), `s` a leaf (7).
/// Tree-optimal: both leaves (tree cost 11). DAG-optimal: share `s` (DAG cost 10, tree cost 17).
fn shared_subterm() -> Problem {
    let mut p = Problem::new();
    let [r, a, b, s] = ["r", "a", "b", "s"].map(|n| p.add_class(n).expect("class"));
    p.add_node(r, "f", 1.0, &[a, b]).expect("node");
    p.add_node(a, "g", 1.0, &[s]).expect("node");
    p.add_node(a, "a-leaf", 5.0, &[]).expect("node");
    p.add_node(b, "h", 1.0, &[s]).expect("node");
    p.add_node(b, "b-leaf", 5.0, &[]).expect("node");
    p.add_node(s, "s-leaf", 7.0, &[]).expect("node");
    p.add_root(r).expect("root");
    p
}

#[test]
fn shared_subterm_is_paid_once() {
    let p = shared_subterm();
    let (fc, ec) = both(&p);
    assert_eq!((fc, ec), (10.0, 10.0));
    let e = ExactExtractor::default()
        .extract(&p, &opts(30))
        .expect("exact");
    assert_eq!(tree_cost(&p, &e), Ok(17.0));
    assert_eq!(e.len(), 4);
    // The tree-optimal choice costs more as a DAG.
    let leaves = [Some(NodeIx(0)), Some(NodeIx(2)), Some(NodeIx(4)), None];
    let tree = Extraction::from_choices(&p, &leaves, Status::Heuristic);
    assert_eq!(
        (tree_cost(&p, &tree), dag_cost(&p, &tree)),
        (Ok(11.0), Ok(11.0))
    );
}

#[test]
fn cycles_are_never_extracted() {
    // r: f(c) (1) or a leaf (10); c: g(r) (0, a cycle back to the root) or a leaf (3).
    let mut p = Problem::new();
    let [r, c] = ["r", "c"].map(|n| p.add_class(n).expect("class"));
    p.add_node(r, "f", 1.0, &[c]).expect("node");
    p.add_node(r, "r-leaf", 10.0, &[]).expect("node");
    p.add_node(c, "g", 0.0, &[r]).expect("node");
    p.add_node(c, "c-leaf", 3.0, &[]).expect("node");
    p.add_node(c, "self", 0.0, &[c]).expect("node");
    p.add_root(r).expect("root");
    assert_eq!(both(&p), (4.0, 4.0));
}

#[test]
fn cheap_cycles_need_cuts() {
    // A chain r -> x1 -> x2 -> x3 where every class also has a free node pointing back up: the
    // relaxation without cycle cuts costs 0; the answer must pay the leaf.
    let mut p = Problem::new();
    let cls: Vec<ClassIx> = (0..4)
        .map(|i| p.add_class(format!("x{i}")).expect("class"))
        .collect();
    for i in 0..3 {
        p.add_node(cls[i], "down", 1.0, &[cls[i + 1]])
            .expect("node");
        p.add_node(cls[i + 1], "up", 0.0, &[cls[i]]).expect("node");
    }
    p.add_node(cls[3], "leaf", 2.0, &[]).expect("node");
    p.add_root(cls[0]).expect("root");
    assert_eq!(both(&p), (5.0, 5.0));
}

#[test]
fn infeasible_problems_are_errors() {
    // Only an infinite-cost node under the root.
    let mut p = Problem::new();
    let [r, x] = ["r", "x"].map(|n| p.add_class(n).expect("class"));
    p.add_node(r, "f", 1.0, &[x]).expect("node");
    p.add_node(x, "inf", f64::INFINITY, &[]).expect("node");
    p.add_root(r).expect("root");
    // Only a cycle.
    let mut q = Problem::new();
    let [a, b] = ["a", "b"].map(|n| q.add_class(n).expect("class"));
    q.add_node(a, "f", 1.0, &[b]).expect("node");
    q.add_node(b, "g", 1.0, &[a]).expect("node");
    q.add_root(a).expect("root");
    for prob in [&p, &q] {
        for x in [
            dlc_egg::extract::dag::by_name("fast"),
            dlc_egg::extract::dag::by_name("exact"),
        ] {
            let x = x.expect("known extractor");
            assert!(
                matches!(
                    x.extract(prob, &opts(5)),
                    Err(ExtractError::NoFiniteSolution { .. })
                ),
                "{}",
                x.name()
            );
        }
    }
}

/// Brute force: every choice function on the classes reachable from the roots, acyclic and
/// finite; the least DAG cost (`None`: no valid extraction).
fn brute_force(p: &Problem) -> Option<f64> {
    fn go(p: &Problem, choice: &mut Vec<Option<NodeIx>>, best: &mut Option<f64>) {
        // The first needed class without a choice (deterministic order).
        let e = Extraction::from_choices(p, choice, Status::Heuristic);
        let mut need: Option<ClassIx> =
            p.roots().iter().copied().find(|r| choice[r.ix()].is_none());
        if need.is_none() {
            need = e
                .chosen()
                .flat_map(|(_, n)| p.node(n).children.clone())
                .find(|c| choice[c.ix()].is_none());
        }
        match need {
            None => {
                if let Ok(cost) = dag_cost(p, &e) {
                    if best.is_none_or(|b| cost < b) {
                        *best = Some(cost);
                    }
                }
            }
            Some(c) => {
                for &n in &p.class(c).nodes {
                    if p.node(n).cost.is_finite() {
                        choice[c.ix()] = Some(n);
                        // A cycle among the chosen reachable classes cannot be repaired later.
                        let partial = Extraction::from_choices(p, choice, Status::Heuristic);
                        if !has_cycle(p, &partial) {
                            go(p, choice, best);
                        }
                        choice[c.ix()] = None;
                    }
                }
            }
        }
    }
    let mut best = None;
    go(p, &mut vec![None; p.num_classes()], &mut best);
    best
}

/// Whether the chosen nodes (some choices may be missing) form a cycle.
fn has_cycle(p: &Problem, e: &Extraction) -> bool {
    fn visit(p: &Problem, e: &Extraction, c: ClassIx, colour: &mut [u8]) -> bool {
        match colour[c.ix()] {
            1 => return true,
            2 => return false,
            _ => {}
        }
        colour[c.ix()] = 1;
        if let Some(n) = e.choice(c) {
            for ch in &p.node(n).children {
                if visit(p, e, *ch, colour) {
                    return true;
                }
            }
        }
        colour[c.ix()] = 2;
        false
    }
    let mut colour = vec![0u8; p.num_classes()];
    p.roots().iter().any(|r| visit(p, e, *r, &mut colour))
}

/// A random e-graph: `classes` classes, one to three nodes per class on average (at least one
/// each), 0–2 children per node (any class, so cycles and self-loops occur), costs 0–9 or
/// (rarely) infinite; roots: class 0 and sometimes class 1.
fn random_problem() -> impl Strategy<Value = Problem> {
    random_problem_of(2..=10)
}

fn random_problem_of(classes: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Problem> {
    classes.prop_flat_map(|classes| {
        let node = (
            0..classes,
            prop::collection::vec(0..classes, 0..=2),
            prop_oneof![9 => (0u32..10).prop_map(f64::from), 1 => Just(f64::INFINITY)],
        );
        (
            Just(classes),
            prop::collection::vec(node, classes..=3 * classes),
            any::<bool>(),
        )
            .prop_map(|(classes, nodes, two_roots)| {
                let mut p = Problem::new();
                let cls: Vec<ClassIx> = (0..classes)
                    .map(|i| p.add_class(format!("c{i}")).expect("class"))
                    .collect();
                for (i, (class, children, cost)) in nodes.into_iter().enumerate() {
                    // The first node of each class only reads classes numbered above it (an
                    // acyclic backbone, so most problems are feasible); the others read any.
                    let (class, children) = if i < classes {
                        (i, children.into_iter().filter(|c| *c > i).collect())
                    } else {
                        (class, children)
                    };
                    let ch: Vec<ClassIx> = children.iter().map(|c| cls[*c]).collect();
                    p.add_node(cls[class], "op", cost, &ch).expect("node");
                }
                p.add_root(cls[0]).expect("root");
                if two_roots {
                    p.add_root(cls[1]).expect("root");
                }
                p
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn exact_matches_brute_force_and_fast_is_no_better(p in random_problem()) {
        let expected = brute_force(&p);
        let fast = FastExtractor::default().extract(&p, &opts(30));
        let exact = ExactExtractor::default().extract(&p, &opts(30));
        match expected {
            None => {
                prop_assert!(matches!(fast, Err(ExtractError::NoFiniteSolution { .. })), "{:?}", fast);
                prop_assert!(matches!(exact, Err(ExtractError::NoFiniteSolution { .. })), "{:?}", exact);
            }
            Some(best) => {
                let (f, e) = (fast.expect("fast"), exact.expect("exact"));
                prop_assert_eq!(e.status, Status::Optimal);
                let (fc, ec) = (dag_cost(&p, &f).expect("fast valid"), dag_cost(&p, &e).expect("exact valid"));
                prop_assert_eq!(ec, best);
                prop_assert!(fc >= ec);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Larger random e-graphs (too many for brute force): both answers valid, fast no better.
    #[test]
    fn larger_random_egraphs_give_valid_answers(p in random_problem_of(20..=60)) {
        let fast = FastExtractor::default().extract(&p, &opts(30));
        let exact = ExactExtractor::default().extract(&p, &opts(30));
        match (fast, exact) {
            (Ok(f), Ok(e)) => {
                let fc = dag_cost(&p, &f).expect("fast valid");
                let ec = dag_cost(&p, &e).expect("exact valid");
                prop_assert!(fc >= ec - 1e-9);
            }
            (Err(ExtractError::NoFiniteSolution { .. }), Err(ExtractError::NoFiniteSolution { .. })) => {}
            (f, e) => prop_assert!(false, "fast {:?}, exact {:?}", f.map(|x| x.len()), e.map(|x| x.len())),
        }
    }
}

fn gym_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/extraction-gym");
    if dir.exists() {
        return Some(dir);
    }
    // CI always has shared/ beside the checkout; a developer's checkout may not.
    assert!(
        std::env::var("CI").is_err(),
        "{} missing under CI",
        dir.display()
    );
    eprintln!("skipping: {} not present", dir.display());
    None
}

#[test]
fn extraction_gym_small_files() {
    let Some(dir) = gym_dir() else { return };
    // (file, optimal DAG cost as found by the exact extractor)
    for (file, optimum) in [
        ("tensat/vgg_acyclic.json", 4.866774947848171),
        ("tensat/resnet50_acyclic.json", 4.41599300802045),
        ("diospyros/simple_vec_add_root_7.json", 1.205),
        ("diospyros/vector_mac_just_mul_or_zero_root_14.json", 1.309),
    ] {
        let g = load(&dir.join(file)).unwrap_or_else(|d| panic!("{d}"));
        let p = Problem::from_serialized(&g).unwrap_or_else(|e| panic!("{file}: {e}"));
        let (fc, ec) = both(&p);
        assert!(
            (ec - optimum).abs() <= 1e-9 * optimum,
            "{file}: exact {ec}, expected {optimum}"
        );
        assert!(
            fc <= ec * 1.01,
            "{file}: fast {fc} more than 1 % above the optimum {ec}"
        );
    }
}

#[test]
fn cyclic_gym_file_with_a_tiny_time_limit() {
    let Some(dir) = gym_dir() else { return };
    let g = load(&dir.join("tensat/vgg.json")).unwrap_or_else(|d| panic!("{d}"));
    let p = Problem::from_serialized(&g).expect("valid");
    let fast = FastExtractor::default()
        .extract(&p, &opts(1))
        .expect("fast");
    validate(&p, &fast).expect("valid");
    let zero = ExtractOptions {
        time_limit: Some(Duration::ZERO),
    };
    // With the fast answer as incumbent, a passed deadline returns it, marked not optimal.
    let e = ExactExtractor::default()
        .extract(&p, &zero)
        .expect("incumbent");
    assert_eq!(e.status, Status::TimeLimit);
    assert_eq!(dag_cost(&p, &e), dag_cost(&p, &fast));
    // Without one, it is an error.
    let cold = ExactExtractor {
        warm_start: false,
        ..ExactExtractor::default()
    };
    assert!(matches!(
        cold.extract(&p, &zero),
        Err(ExtractError::Timeout { .. })
    ));
}

#[test]
fn exported_example_egraph_round_trips_through_the_format() {
    use dlc_egg::extract::serialize::{to_json, to_serialized};
    use dlc_egg::ir::egraph::{add_program, TensorGraph};
    use dlc_egg::{ir::frontend, lower};
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gemm_bias_relu.json");
    let g = frontend::load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    let prog = lower::lower(&g).unwrap_or_else(|d| panic!("{d}"));
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, &prog);
    eg.rebuild();
    let roots: Vec<_> = prog.outputs.iter().map(|o| class[o.node.index()]).collect();
    let s = to_serialized(&eg, &roots, &|n| if n.is_attr() { 0.0 } else { 1.0 });
    let back: dlc_egg::extract::serialize::SerializedEGraph =
        serde_json::from_str(&to_json(&s)).expect("parses");
    let p = Problem::from_serialized(&back).expect("valid");
    assert_eq!(p.num_nodes(), eg.total_number_of_nodes());
    let (fc, ec) = both(&p);
    assert_eq!(fc, ec);
    // Before any rewrite each class has one node: the DAG cost counts the program's operations.
    assert!(ec >= 1.0);
}

fn write_temp(name: &str, text: &str) -> PathBuf {
    let dir = tempfile::tempdir().expect("tempdir").keep();
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const SHARED_DOC: &str = r#"{"nodes": {
  "f": {"op": "f", "eclass": "r", "cost": 1, "children": ["g", "h"]},
  "g": {"op": "g", "eclass": "a", "cost": 1, "children": ["s"]},
  "al": {"op": "leaf", "eclass": "a", "cost": 5},
  "h": {"op": "h", "eclass": "b", "cost": 1, "children": ["s"]},
  "bl": {"op": "leaf", "eclass": "b", "cost": 5},
  "s": {"op": "s", "eclass": "s", "cost": 7}
}, "root_eclasses": ["r"]}"#;

#[test]
fn cli_reports_costs_as_text_and_json() {
    let path = write_temp("shared.json", SHARED_DOC);
    let file = path.to_string_lossy().into_owned();
    let (code, out, err) = run(&["extract", &file, "--extractor", "exact"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("tree cost:      17"), "{out}");
    assert!(out.contains("DAG cost:       10"), "{out}");
    assert!(out.contains("chosen e-nodes: 4"), "{out}");
    assert!(out.contains("optimal:        yes"), "{out}");
    let (code, out, err) = run(&["extract", &file, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["dag_cost"], 10.0);
    assert_eq!(v["status"], "heuristic");
    assert_eq!(v["choices"]["a"], "g");
    assert_eq!(v["choices"]["s"], "s");
}

#[test]
fn cli_diagnostics() {
    let infeasible = write_temp(
        "inf.json",
        r#"{"nodes": {"f": {"op": "f", "eclass": "r", "children": ["f"]}}, "root_eclasses": ["r"]}"#,
    );
    let dangling = write_temp(
        "dangling.json",
        r#"{"nodes": {"f": {"op": "f", "eclass": "r", "children": ["zz"]}}, "root_eclasses": ["r"]}"#,
    );
    let ok = write_temp("ok.json", SHARED_DOC);
    let cases: [(Vec<String>, &str); 5] = [
        (vec!["/nonexistent/e.json".into()], "E0000"),
        (
            vec![write_temp("bad.json", "{").to_string_lossy().into_owned()],
            "E0001",
        ),
        (vec![dangling.to_string_lossy().into_owned()], "E1300"),
        (
            vec![
                infeasible.to_string_lossy().into_owned(),
                "--extractor".into(),
                "exact".into(),
            ],
            "E1301",
        ),
        (
            vec![
                ok.to_string_lossy().into_owned(),
                "--timeout".into(),
                "-1".into(),
            ],
            "E0313",
        ),
    ];
    for (args, code) in cases {
        let mut full = vec!["--diagnostics", "json", "extract"];
        full.extend(args.iter().map(String::as_str));
        let (status, _, err) = run(&full);
        assert_eq!(status, 2, "{args:?}: {err}");
        let v: serde_json::Value = serde_json::from_str(&err).expect("json diagnostics");
        assert_eq!(v["diagnostics"][0]["code"], code, "{args:?}: {err}");
        assert!(v["diagnostics"][0]["suggestion"]
            .as_str()
            .is_some_and(|s| !s.is_empty()));
    }
}
