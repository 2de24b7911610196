//! DAG-aware extraction, quality and speed: the fast and the exact extractor
//! (`dlc_egg::extract::dag`) on every extraction-gym e-graph in `shared/data/extraction-gym`, on
//! the final e-graphs of `dlc_egg::optimize` for `examples/*.json`, `bench/graphs/*.json` and the transformer
//! encoders of `bench/egraph.rs` (1 and 2 layers; 4 and 12 when timed), priced by
//! `extract::cover::node_price` (predicted kernel times, as the optimizer and `dlc-egg optimize
//! --dump egraph` price them), and on a 100k-e-node union of five copies of `tensat/bert.json`
//! (fast only; run when all gym files are).
//!
//! Before timing, prints one table row per e-graph: sizes, both DAG costs, fast/exact, both times
//! (one untimed run each) and whether exact proved optimality; then the geometric mean and the
//! maximum of fast/exact over the e-graphs where exact finished (proved optimality) within its
//! time limit. Criterion then times `fast` on every e-graph and `exact` where it finished in
//! under 2 s.
//!
//! Environment: `EXTRACT_FILES=all|small|a.json,b.json` (gym files by name; default: all under
//! a timed `cargo bench`, and a few small ones in the smoke runs — `cargo test --all-targets` and
//! `cargo bench --bench extract --profile test -- --test`); `EXTRACT_TIMEOUT=SECS` (exact's
//! limit: 60 s timed, 10 s in the smoke runs).
#[path = "common/bench_graphs.rs"]
mod bench_graphs;
use bench_graphs::{transformer_encoder, EncoderConfig};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use dlc_egg::extract::cover::node_price;
use dlc_egg::extract::dag::{
    dag_cost, DagExtractor, ExactExtractor, ExtractOptions, FastExtractor, Problem, Status,
};
use dlc_egg::extract::serialize::{load, to_serialized};
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::{ir::frontend, lower};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SMALL: [&str; 4] = [
    "tensat/vgg_acyclic.json",
    "tensat/resnet50_acyclic.json",
    "diospyros/simple_vec_add_root_7.json",
    "diospyros/vector_mac_just_mul_or_zero_root_14.json",
];

fn gym_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/extraction-gym");
    if dir.exists() {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").is_err(),
        "{} missing under CI",
        dir.display()
    );
    eprintln!(
        "skipping the extraction-gym files: {} not present",
        dir.display()
    );
    None
}

/// The gym files to run, and whether that is all of them.
fn gym_files(dir: &Path, timed: bool) -> (Vec<String>, bool) {
    let all = || {
        let mut v = Vec::new();
        for sub in ["tensat", "diospyros"] {
            let mut names: Vec<String> = std::fs::read_dir(dir.join(sub))
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| n.ends_with(".json"))
                        .map(|n| format!("{sub}/{n}"))
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            v.extend(names);
        }
        v
    };
    let small = || SMALL.iter().map(|s| s.to_string()).collect();
    match std::env::var("EXTRACT_FILES").ok().as_deref() {
        Some("all") => (all(), true),
        Some("small") => (small(), false),
        Some(list) => (
            list.split(',').map(|s| s.trim().to_string()).collect(),
            false,
        ),
        None if timed => (all(), true),
        None => (small(), false),
    }
}

/// The final e-graph of `optimize` on an example, priced as `dlc-egg optimize --dump egraph`.
fn example_problem(path: &Path) -> Problem {
    let g = frontend::load_file(path).unwrap_or_else(|d| panic!("{d}"));
    graph_problem(&g)
}

/// The final e-graph of `optimize` on a graph, priced as `dlc-egg optimize --dump egraph`
/// (predicted kernel times in ns on the default target, H100).
fn graph_problem(g: &dlc_egg::ir::frontend::Graph) -> Problem {
    let prog = lower::lower(g).unwrap_or_else(|d| panic!("{d}"));
    let o = optimize(&prog, &OptimizeOptions::default()).expect("the example optimizes");
    let eg = &o.egraph;
    let s = to_serialized(eg, &o.roots, &|n| node_price(eg, n, &o.model));
    Problem::from_serialized(&s).expect("exported e-graphs are valid problems")
}

struct Case {
    name: String,
    problem: Problem,
    run_exact: bool,
}

fn cases(timed: bool) -> Vec<Case> {
    let mut out = Vec::new();
    if let Some(dir) = gym_dir() {
        let (files, every) = gym_files(&dir, timed);
        for f in files {
            let g = load(&dir.join(&f)).unwrap_or_else(|d| panic!("{d}"));
            let problem = Problem::from_serialized(&g).unwrap_or_else(|e| panic!("{f}: {e}"));
            out.push(Case {
                name: f,
                problem,
                run_exact: true,
            });
        }
        if every {
            let g = load(&dir.join("tensat/bert.json")).unwrap_or_else(|d| panic!("{d}"));
            let bert = Problem::from_serialized(&g).expect("bert is valid");
            let mut big = Problem::new();
            for i in 0..5 {
                big.append(&bert, &format!("copy{i}/")).expect("fits");
            }
            out.push(Case {
                name: format!("5 x tensat/bert.json ({} e-nodes)", big.num_nodes()),
                problem: big,
                run_exact: false,
            });
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<(String, PathBuf)> = Vec::new();
    for dir in ["examples", "bench/graphs"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        paths.retain(|p| p.extension().is_some_and(|x| x == "json"));
        paths.sort();
        names.extend(paths.into_iter().map(|p| (dir.to_string(), p)));
    }
    for (dir, path) in names {
        let name = format!(
            "{dir}/{}",
            path.file_name().unwrap_or_default().to_string_lossy()
        );
        out.push(Case {
            name,
            problem: example_problem(&path),
            run_exact: true,
        });
    }
    // The transformer encoders of the e-graph benchmark (`bench/egraph.rs`): 1 and 2 layers in
    // every run, 4 and 12 when timed.
    let layers: &[usize] = if timed { &[1, 2, 4, 12] } else { &[1, 2] };
    for &l in layers {
        let doc = transformer_encoder(&EncoderConfig::bert_base(l)).to_string();
        let g = frontend::load_str(&doc, "encoder.json").unwrap_or_else(|d| panic!("{d}"));
        out.push(Case {
            name: format!("encoder, {l} layer(s)"),
            problem: graph_problem(&g),
            // Exact does not finish on them: only the timed run waits for its limit.
            run_exact: timed,
        });
    }
    out
}

fn bench(c: &mut Criterion) {
    // `cargo bench` passes `--bench`; its `-- --test` smoke mode adds `--test`; `cargo test
    // --all-targets` passes neither.
    let args: Vec<String> = std::env::args().collect();
    let timed = args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test");
    let timeout = std::env::var("EXTRACT_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(if timed { 60.0 } else { 10.0 });
    let opts = ExtractOptions {
        time_limit: Some(Duration::from_secs_f64(timeout)),
    };
    let fast = FastExtractor::default();
    let exact = ExactExtractor::default();
    let cases = cases(timed);
    eprintln!(
        "{:<58} {:>7} {:>6} {:>14} {:>14} {:>9} {:>9} {:>9}  exact",
        "e-graph", "e-nodes", "classes", "fast DAG", "exact DAG", "fast/ex", "fast s", "exact s"
    );
    let mut ratios = Vec::new();
    let mut exact_quick = Vec::new();
    for case in &cases {
        let p = &case.problem;
        let t = Instant::now();
        let f = fast
            .extract(p, &opts)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let fast_s = t.elapsed().as_secs_f64();
        let fast_cost = dag_cost(p, &f).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let (exact_cost, exact_s, status) = if case.run_exact {
            let t = Instant::now();
            let e = exact
                .extract(p, &opts)
                .unwrap_or_else(|e| panic!("{}: {e}", case.name));
            let s = t.elapsed().as_secs_f64();
            let cost = dag_cost(p, &e).unwrap_or_else(|e| panic!("{}: {e}", case.name));
            assert!(
                cost <= fast_cost * (1.0 + 1e-9),
                "{}: exact worse than fast",
                case.name
            );
            let status = match e.status {
                Status::Optimal => "optimal".to_string(),
                _ => format!("time limit, bound {:.6}", e.lower_bound.unwrap_or(f64::NAN)),
            };
            if e.status == Status::Optimal {
                ratios.push(if cost > 0.0 { fast_cost / cost } else { 1.0 });
                if s < 2.0 {
                    exact_quick.push(case.name.clone());
                }
            }
            (format!("{cost:.6}"), format!("{s:.3}"), status)
        } else {
            ("-".into(), "-".into(), "not run".into())
        };
        let ratio = exact_cost
            .parse::<f64>()
            .map(|e| format!("{:.5}", if e > 0.0 { fast_cost / e } else { 1.0 }))
            .unwrap_or_else(|_| "-".into());
        eprintln!(
            "{:<58} {:>7} {:>6} {:>14.6} {:>14} {:>9} {:>9.4} {:>9}  {status}",
            case.name,
            p.num_nodes(),
            p.num_classes(),
            fast_cost,
            exact_cost,
            ratio,
            fast_s,
            exact_s
        );
    }
    if !ratios.is_empty() {
        let geo = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
        let max = ratios.iter().cloned().fold(1.0, f64::max);
        eprintln!(
            "fast/exact over the {} e-graphs exact solved within {timeout} s: geometric mean {geo:.5}, max {max:.5}",
            ratios.len()
        );
    }
    let mut g = c.benchmark_group("extract");
    g.sample_size(10);
    for case in &cases {
        g.bench_with_input(
            BenchmarkId::new("fast", &case.name),
            &case.problem,
            |b, p| b.iter(|| black_box(fast.extract(p, &opts).map(|e| e.len()))),
        );
        if exact_quick.contains(&case.name) {
            g.bench_with_input(
                BenchmarkId::new("exact", &case.name),
                &case.problem,
                |b, p| b.iter(|| black_box(exact.extract(p, &opts).map(|e| e.len()))),
            );
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
