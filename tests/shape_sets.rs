//! ShapeSets (`dlc_egg::shapes`): clustering, specialization to a cluster (vectorized CUDA for a
//! symbolic innermost dim), CPU playback of a cluster's program against the reference evaluator,
//! and the on-disk plan cache (hit within a cluster, miss across clusters), through the library
//! and the CLI.

mod common;

use dlc_egg::codegen::generate;
use dlc_egg::ir::frontend;
use dlc_egg::npy::{read_array, to_tensor};
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::run::{self, RunOptions};
use dlc_egg::shapes::specialize::graph_symbols;
use dlc_egg::shapes::{CacheOutcome, ShapeCluster, ShapeError, Specialization};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const BIN: &str = env!("CARGO_BIN_EXE_dlc-egg");
const GRAPH: &str = "tests/data/shape_sets_pointwise.json";

fn binding(v: &[(&str, i64)]) -> BTreeMap<String, i64> {
    v.iter().map(|(s, x)| (s.to_string(), *x)).collect()
}

/// A fresh directory under cargo's per-target temp dir.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("shape_sets_{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

#[test]
fn clusters_split_by_bucket_and_divisibility() {
    let c = |t| ShapeCluster::of(&binding(&[("T", t)])).expect("cluster");
    assert_ne!(c(48), c(56), "same bucket, divisible by 16 vs by 8");
    assert_eq!(
        c(48).classes["T"].bucket,
        c(56).classes["T"].bucket,
        "48 and 56 share (32, 64]"
    );
    assert_ne!(c(64).classes["T"].bucket, c(96).classes["T"].bucket);
    assert_eq!(c(40), c(56));
    assert_eq!(c(64).key(), "T:b6d16");
}

/// The emitted CUDA of the pointwise graph, specialized to the cluster of `b` or not at all.
fn cuda(specialize: Option<&BTreeMap<String, i64>>) -> String {
    let g = frontend::load_file(Path::new(GRAPH)).expect("graph");
    let o = match specialize {
        Some(b) => {
            let cluster = ShapeCluster::of(b).expect("cluster");
            let sp = Specialization::new(&cluster, &graph_symbols(&g));
            dlc_egg::shapes::cache::optimize_specialized(&g, &sp, &OptimizeOptions::default())
                .expect("optimize")
        }
        None => {
            let p = dlc_egg::lower::lower(&g).expect("lower");
            optimize(&p, &OptimizeOptions::default()).expect("optimize")
        }
    };
    generate(&o).expect("codegen").emitted.source
}

#[test]
fn specialization_vectorizes_a_symbolic_innermost_dim() {
    let plain = cuda(None);
    assert!(!plain.contains("dlc_ld_vec"), "{plain}");
    let special = cuda(Some(&binding(&[("N", 3), ("T", 56)])));
    assert!(special.contains("dlc_ld_vec"), "{special}");
    assert!(special.contains("T_8"), "{special}");
}

fn run_opts(t: i64, optimized: bool, cache: Option<&Path>, out: &Path) -> RunOptions {
    RunOptions {
        graph: PathBuf::from(GRAPH),
        binds: binding(&[("N", 3), ("T", t)]),
        out_dir: out.to_path_buf(),
        random: Some(7),
        optimized,
        plan_cache: cache.map(Path::to_path_buf),
        ..RunOptions::default()
    }
}

fn outputs(r: &[run::WrittenOutput]) -> BTreeMap<String, dlc_egg::tensor::Tensor> {
    r.iter()
        .map(|w| {
            let a = read_array(&w.path).expect("npy");
            (
                w.tensor.clone(),
                to_tensor(a, &w.tensor, w.dtype).expect("tensor"),
            )
        })
        .collect()
}

#[test]
fn cluster_programs_match_the_reference_and_the_cache_hits_within_a_cluster() {
    let dir = scratch("cache");
    let cache = dir.join("plans");
    let mut outcomes = Vec::new();
    // 40 and 56: the same cluster (T in (32, 64], multiple of 8); 48: another one.
    for t in [40, 56, 48] {
        let out = dir.join(format!("out{t}"));
        let got = run::run_report(&run_opts(t, true, Some(&cache), &out)).expect("optimized");
        let want = run::run_report(&run_opts(t, false, None, &dir.join(format!("ref{t}"))))
            .expect("reference");
        assert_eq!(want.plan_cache, None);
        let (g, w) = (outputs(&got.outputs), outputs(&want.outputs));
        for (name, wt) in &w {
            common::compare_output(name, &g[name], wt, "the reference")
                .unwrap_or_else(|e| panic!("T={t}: {e}"));
        }
        outcomes.push(got.plan_cache.expect("an optimized run reports the cache"));
    }
    assert!(matches!(&outcomes[0], CacheOutcome::Miss(k) if k.ends_with("N:b2d1,T:b6d8")));
    assert!(matches!(&outcomes[1], CacheOutcome::Hit(k) if k.ends_with("N:b2d1,T:b6d8")));
    assert!(matches!(&outcomes[2], CacheOutcome::Miss(k) if k.ends_with("N:b2d1,T:b6d16")));
    let files = std::fs::read_dir(&cache).expect("cache dir").count();
    assert_eq!(files, 2, "one entry per cluster");
}

#[test]
fn a_binding_outside_the_specialization_is_a_diagnostic() {
    let cluster = ShapeCluster::of(&binding(&[("T", 48)])).expect("cluster");
    let sp = Specialization::new(&cluster, &["T".to_string()].into());
    let e = sp
        .bind(&binding(&[("T", 40)]))
        .expect_err("40 is not a multiple of 16");
    assert!(matches!(e, ShapeError::NotMultiple { divisor: 16, .. }));
    let d = e.to_diagnostic();
    assert_eq!((d.code, d.kind), ("E0501", "BindingOutsideCluster"));
}

fn cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(args)
        .output()
        .expect("run dlc-egg")
}

#[test]
fn cli_shape_set_and_plan_cache() {
    let bad = cli(&[
        "--diagnostics",
        "json",
        "optimize",
        GRAPH,
        "--shape-set",
        "T=4x",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("E0500") && err.contains("InvalidShapeSet"),
        "{err}"
    );
    let unknown = cli(&["optimize", GRAPH, "--shape-set", "Q=4"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("E0500"));

    let dir = scratch("cli");
    let cache = dir.join("plans");
    let cache_s = cache.to_string_lossy().to_string();
    let o = cli(&[
        "optimize",
        GRAPH,
        "--shape-set",
        "T=40,48,56",
        "--shape-set",
        "N=3",
        "--plan-cache",
        &cache_s,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("3 binding(s) in 2 shape cluster(s)"),
        "{text}"
    );
    assert!(
        text.contains("T = 8*T_8") && text.contains("T = 16*T_16"),
        "{text}"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("plan cache: miss").count(), 2, "{err}");

    // `run` shares the entries `optimize --shape-set` wrote (same file, arch and cluster).
    let out = dir.join("out").to_string_lossy().to_string();
    let r = cli(&[
        "run",
        GRAPH,
        "--optimized",
        "--random",
        "1",
        "--bind",
        "N=3",
        "--bind",
        "T=24",
        "--out-dir",
        &out,
        "--plan-cache",
        &cache_s,
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stderr).contains("plan cache: miss"));
    let r = cli(&[
        "run",
        GRAPH,
        "--optimized",
        "--random",
        "1",
        "--bind",
        "N=3",
        "--bind",
        "T=56",
        "--out-dir",
        &out,
        "--plan-cache",
        &cache_s,
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("plan cache: hit") && err.contains("T:b6d8"),
        "{err}"
    );
}
