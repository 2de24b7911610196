//! A crate outside the repository uses dlc-egg as a library (issue 18's acceptance): it depends
//! on it by path, adds a rewrite rule and a kernel pricer (each under 40 lines), runs one
//! `optimize` call and checks the rule in the rewrite chains and statistics, the changed cover,
//! the regions, the report and the CUDA, and the outputs against the reference evaluator.
//!
//! Build time: the outside crate builds into this repository's target directory
//! (`CARGO_TARGET_DIR`, or `target/`) with this repository's `Cargo.lock`, in the profile this
//! test was built with (`--release`, or CI's `test` profile) and with the same settings for the
//! dependencies, so cargo reuses every dependency already compiled (`--offline`: nothing is
//! fetched). dlc-egg itself is compiled once more: cargo's `-C metadata` of a path package hashes
//! its path relative to the workspace root, which is `""` for this repository's own build and the
//! repository's path for the outside crate, so the two can never share the artifact. The outside
//! crate therefore compiles dlc-egg unoptimized and without debug info (`opt-level = 0`,
//! `debug = false`, 256 codegen units: the fastest build; the example runs in a fraction of a
//! second either way). Measured on the shared 2-core machine: 34 s of CPU (user) for that build,
//! 2 min 42 s wall while 8 other builds ran; reruns take seconds.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The outside crate's `main.rs`.
const MAIN: &str = r##"
use dlc_egg::cost::Time;
use dlc_egg::extract::kernels::{CostModel, KernelCost};
use dlc_egg::extract::pricing::{KernelPricer, Roofline};
use dlc_egg::ir::egraph::{TensorGraph, TensorLang};
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::rules::{cond, testing::check_optimized, Rule};

// --- the rule (relu(relu(x)) = relu(x)) ---
fn double_rule() -> Rule {
    egg::rewrite!("relu-idem"; "(relu (relu ?x))" => "(relu ?x)" if cond::is_float("?x"))
}

// --- the pricer (one op per kernel: every fusion priced out) ---
struct OneOpPerKernel;
impl KernelPricer for OneOpPerKernel {
    fn name(&self) -> &str {
        "one-op-per-kernel"
    }
    fn price(&self, eg: &TensorGraph, k: &TensorLang, m: &CostModel) -> KernelCost {
        let r = Roofline.price(eg, k, m);
        if r.is_infinite() {
            return r;
        }
        let extra = Time::from_secs(r.ops.saturating_sub(1) as f64);
        KernelCost { time: r.time.plus(extra), ..r }
    }
}

const GRAPH: &str = r#"{
  "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
  "tensors": {"X": {"dtype": "fp32", "shape": [16, 64]}, "Y": {"dtype": "fp32", "shape": [16, 64]}},
  "graph": [
    {"op": "Elementwise", "name": "a", "inputs": ["X"], "outputs": ["H1"], "attrs": {"fn": "relu"}},
    {"op": "Elementwise", "name": "b", "inputs": ["H1"], "outputs": ["H2"], "attrs": {"fn": "relu"}},
    {"op": "Elementwise", "name": "e", "inputs": ["H2"], "outputs": ["Y"], "attrs": {"fn": "exp"}}
  ]
}"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let graph = dlc_egg::ir::frontend::load_str(GRAPH, "outside.json")?;
    let prog = dlc_egg::run::lower_and_verify(&graph)?;
    let plain = optimize(&prog, &OptimizeOptions::default())?;
    let opts = OptimizeOptions::default()
        .with_rule("srnf", double_rule())
        .with_pricer(OneOpPerKernel)
        .with_explain(true);
    let o = optimize(&prog, &opts)?;
    let fired = o.phases.iter().any(|p| p.fired("relu-idem"));
    let chain = o.rewrites[0].rules.iter().any(|u| u.rule == "relu-idem");
    println!("fired={fired} chain={chain}");
    println!("kernels={} plain={}", o.kernels.len(), plain.kernels.len());
    for k in &o.kernels {
        println!("kernel {} covers={}", k.body, k.covers.join(","));
    }
    println!("regions={}", o.program.steps.len());
    println!("report={}", serde_json::to_string(&o.report())?.len());
    println!("custom={:?}", o.extraction.custom);
    check_optimized(&prog, &o, &Default::default(), &[0, 1])?;
    println!("reference=ok");
    let cuda = dlc_egg::codegen::emit_program(&o)?;
    println!("cuda={}", cuda.source.contains("__global__"));
    Ok(())
}
"##;

fn target_dir(repo: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target"))
}

/// Writes the outside crate (manifest, this repository's lock file, `src/main.rs`) into `dir`.
fn write_outside_crate(dir: &Path, repo: &Path) {
    let manifest = format!(
        r#"[package]
name = "outside"
version = "0.1.0"
edition = "2021"

[dependencies]
dlc-egg = {{ path = {repo:?} }}
egg = {{ version = "0.11", features = ["deterministic"] }}
serde_json = {{ version = "1", features = ["preserve_order"] }}
# dlc-egg's dev-dependencies: `cargo test` unifies their features into the shared dependencies,
# so the outside crate names them too and gets the very artifacts the test build made.
criterion = {{ version = "0.5", default-features = false, features = ["cargo_bench_support"] }}
proptest = "1"
tempfile = "3"

# dlc-egg's profiles, so that the dependencies' artifacts of its own build are reused; dlc-egg
# itself (compiled again, see the test's doc) unoptimized, for the fastest build.
[profile.dev]
opt-level = 1
[profile.dev.package."*"]
opt-level = 2
[profile.test]
opt-level = 1
[profile.test.package.dlc-egg]
opt-level = 0
debug = false
codegen-units = 256
[profile.release.package.dlc-egg]
opt-level = 0
debug = false
codegen-units = 256
"#,
        repo = repo.display().to_string()
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).expect("write Cargo.toml");
    std::fs::copy(repo.join("Cargo.lock"), dir.join("Cargo.lock")).expect("copy lock");
    std::fs::create_dir(dir.join("src")).expect("mkdir src");
    std::fs::write(dir.join("src/main.rs"), MAIN).expect("write main.rs");
}

#[test]
fn an_outside_crate_adds_a_rule_and_a_pricer() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("temp dir");
    write_outside_crate(dir.path(), repo);

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // The profile this test was built with: `--release`, or the `test` profile of CI's `cargo
    // test` (whose `CARGO_PROFILE_TEST_*` settings the outside build inherits from the environment).
    let profile = if cfg!(debug_assertions) {
        "--profile=test"
    } else {
        "--release"
    };
    let args = ["run", "--offline", "--quiet", profile];
    let start = std::time::Instant::now();
    let out = Command::new(cargo)
        .args(args)
        .current_dir(dir.path())
        .env("CARGO_TARGET_DIR", target_dir(repo))
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "outside crate: built and ran in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");

    let line = |key: &str| -> String {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no `{key}` line in:\n{stdout}"))
            .to_string()
    };
    // The rule fired, and is on the output's rewrite chain.
    assert_eq!(line("fired="), "true chain=true", "{stdout}");
    // The pricer changed the cover: more kernels than the roofline's one fused kernel.
    let counts = line("kernels=");
    let (mine, plain) = counts.split_once(" plain=").expect("two counts");
    let (mine, plain): (usize, usize) = (mine.parse().unwrap(), plain.parse().unwrap());
    assert_eq!(plain, 1, "{stdout}");
    assert!(mine > plain, "{stdout}");
    // Every frontend node is covered (`covers:` survives the user's rule).
    let covers: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once("covers=").map(|(_, c)| c))
        .collect();
    let covered = |node: &str| covers.iter().any(|c| c.split(',').any(|n| n == node));
    assert!(covered("e"), "e not covered:\n{stdout}");
    assert!(
        covered("a") || covered("b"),
        "the ReLU not covered:\n{stdout}"
    );
    assert!(line("regions=").parse::<usize>().unwrap() >= mine);
    assert!(line("report=").parse::<usize>().unwrap() > 0);
    assert_eq!(line("custom="), r#"Some("pricer=one-op-per-kernel")"#);
    assert_eq!(line("reference="), "ok");
    assert_eq!(line("cuda="), "true");
    // Each part of the outside crate stays under 40 lines.
    let part = |from: &str, to: &str| {
        let after = MAIN.split(from).nth(1).expect("marker");
        after.split(to).next().expect("end").lines().count()
    };
    assert!(part("// --- the rule", "// --- the pricer") < 40);
    assert!(part("// --- the pricer", "const GRAPH") < 40);
}
