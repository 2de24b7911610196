//! Seed 004's graph DSL: the seed's two programs run with the right values, endless recursion and
//! reserved words are coded diagnostics (exit 2), every example decompiles to a program whose
//! `run` outputs are byte-identical, and random graphs survive `decompile` → parse with the same
//! values (property test).

mod common;

use common::graphgen::{gen_case, Case};
use dlc_egg::dsl::{self, Options};
use dlc_egg::eval::evaluate;
use dlc_egg::ir::frontend::{self, resolve_symbols, Graph};
use dlc_egg::lower::lower;
use dlc_egg::tensor::Tensor;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_dlc-egg");

const SEED_RELU: &str = "\
// サブグラフ定義（動的Shape変数B, Nにデフォルト値を指定）
graph<B=1, N=1> relu(x: f32[B, N]) -> (y: f32[B, N]) {
    zero = 0.0
    result = max(x, zero)
    return result
}

// メイングラフからサブグラフを呼び出し
graph<B=1, D=1> main(input: f32[B, D]) -> (output: f32[B, D]) {
    result = relu(input)
    return result
}
";

const SEED_MULTI: &str = "\
// 複数出力サブグラフのタプル分解
graph<N=1> multi_output(x: f32[N]) -> (a: f32[N], b: f32[N]) {
    r1 = x + 1.0
    r2 = x * 2.0
    return r1, r2
}

graph main(input: f32[10]) -> (out1: f32[10], out2: f32[10]) {
    (a, b) = multi_output(input)
    return a, b
}
";

/// Evaluates a graph with the reference evaluator.
fn eval(
    g: &Graph,
    binds: &BTreeMap<String, i64>,
    inputs: BTreeMap<String, Tensor>,
) -> BTreeMap<String, Tensor> {
    let arrays: BTreeMap<String, Vec<usize>> = inputs
        .iter()
        .map(|(k, t)| (k.clone(), t.shape.clone()))
        .collect();
    let bindings = resolve_symbols(g, binds, &arrays).unwrap_or_else(|d| panic!("{d}"));
    let prog = lower(g).unwrap_or_else(|d| panic!("{d}"));
    evaluate(&prog, &bindings, &inputs).unwrap_or_else(|d| panic!("{d}"))
}

#[test]
fn seed_relu_subgraph_with_shape_variables() {
    let g = dsl::load_str(SEED_RELU, "relu.graph", Options::default())
        .unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(g.symbols.get("B"), Some(&1));
    let x = Tensor::from_f64(
        dlc_egg::ir::dtype::DType::F32,
        vec![2, 3],
        &[-1.5, 0.0, 2.0, 3.25, -0.5, 7.0],
    );
    let out = eval(
        &g,
        &BTreeMap::new(),
        BTreeMap::from([("input".to_string(), x)]),
    );
    let y = &out["output"];
    assert_eq!(y.shape, vec![2, 3]);
    assert_eq!(y.to_f64(), vec![0.0, 0.0, 2.0, 3.25, 0.0, 7.0]);
}

#[test]
fn seed_multi_output_tuple_destructuring() {
    let g = dsl::load_str(SEED_MULTI, "multi.graph", Options::default())
        .unwrap_or_else(|d| panic!("{d}"));
    let v: Vec<f64> = (0..10).map(|i| i as f64 - 4.5).collect();
    let x = Tensor::from_f64(dlc_egg::ir::dtype::DType::F32, vec![10], &v);
    let out = eval(
        &g,
        &BTreeMap::new(),
        BTreeMap::from([("input".to_string(), x)]),
    );
    let want1: Vec<f64> = v.iter().map(|x| x + 1.0).collect();
    let want2: Vec<f64> = v.iter().map(|x| x * 2.0).collect();
    assert_eq!(out["out1"].to_f64(), want1);
    assert_eq!(out["out2"].to_f64(), want2);
}

fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dlc_dsl_{}_{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Runs the CLI; returns (exit code, stdout, stderr).
fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().expect("runs dlc-egg");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn first_code(stderr: &str) -> String {
    let v: serde_json::Value =
        serde_json::from_str(stderr).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    v["diagnostics"][0]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn seed_programs_run_through_the_cli() {
    let dir = tmp_dir("seed_cli");
    let path = dir.join("multi.graph");
    std::fs::write(&path, SEED_MULTI).expect("write");
    let (rc, out, err) = cli(&[
        "run",
        path.to_str().unwrap_or(""),
        "--random",
        "3",
        "--out-dir",
        dir.join("o").to_str().unwrap_or(""),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("out1 fp32 [10]") && out.contains("out2 fp32 [10]"),
        "{out}"
    );
    let (rc, out, err) = cli(&["check", path.to_str().unwrap_or("")]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.starts_with("ok:"), "{out}");
}

#[test]
fn endless_recursion_and_reserved_words_are_coded_exit_2() {
    let dir = tmp_dir("errors");
    let rec = dir.join("rec.graph");
    std::fs::write(
        &rec,
        "graph f(x: f32[4]) -> (y: f32[4]) {\n    y = f(x) + 1.0\n    return y\n}\ngraph main(x: f32[4]) -> (y: f32[4]) {\n    return f(x)\n}\n",
    )
    .expect("write");
    let reserved = dir.join("reserved.graph");
    std::fs::write(
        &reserved,
        "graph main(x: f32[4]) -> (y: f32[4]) {\n    fused = x * 2.0\n    return fused\n}\n",
    )
    .expect("write");
    for (file, code, line) in [(&rec, "E0707", 2), (&reserved, "E0701", 2)] {
        for cmd in ["check", "run", "lower", "optimize", "decompile"] {
            let (rc, _, err) = cli(&["--diagnostics", "json", cmd, file.to_str().unwrap_or("")]);
            assert_eq!(rc, 2, "{cmd} {}: {err}", file.display());
            assert_eq!(first_code(&err), code, "{cmd}: {err}");
            let v: serde_json::Value = serde_json::from_str(&err).expect("json");
            assert_eq!(v["diagnostics"][0]["at"]["line"], line, "{err}");
        }
    }
    // The limit is a flag: a chain of 3 nested calls needs --max-depth 3.
    let chain = dir.join("chain.graph");
    std::fs::write(
        &chain,
        "graph a(x: f32[2]) -> (y: f32[2]) { return b(x) }\ngraph b(x: f32[2]) -> (y: f32[2]) { return c(x) }\ngraph c(x: f32[2]) -> (y: f32[2]) { return exp(x) }\ngraph main(x: f32[2]) -> (y: f32[2]) { return a(x) }\n",
    )
    .expect("write");
    let p = chain.to_str().unwrap_or("");
    let (rc, _, err) = cli(&["--diagnostics", "json", "check", "--max-depth", "2", p]);
    assert_eq!((rc, first_code(&err)), (2, "E0707".to_string()), "{err}");
    let (rc, _, err) = cli(&["check", "--max-depth", "3", p]);
    assert_eq!(rc, 0, "{err}");
}

#[test]
fn dsl_rules_are_located_diagnostics() {
    let cases: [(&str, &str); 7] = [
        ("graph main(x: f32[4, 3], b: f32[3]) -> (y: f32[4, 3]) {\n  y = x + b\n  return y\n}", "E0710"),
        ("graph main(x: f32[4]) -> (y: f32[4]) {\n  return z\n}", "E0702"),
        ("graph main(x: f32[4]) -> (y: f32[4]) {\n  return relux(x)\n}", "E0703"),
        ("graph f(x: f32[4]) -> (y: f32[4]) {\n  return x\n}", "E0704"),
        ("graph main(x: f32[N]) -> (y: f32[N]) {\n  return x\n}", "E0706"),
        ("graph main(x: f32[4]) -> (y: f32[4]) {\n  y = exp(x)\n}", "E0713"),
        ("graph g(x: f32[4]) -> (y: f32[5]) {\n  return exp(x)\n}\ngraph main(x: f32[4]) -> (y: f32[4]) {\n  return g(x)\n}", "E0709"),
    ];
    for (src, code) in cases {
        let d = dsl::load_str(src, "t.graph", Options::default()).expect_err(src);
        assert_eq!(d.first_code(), code, "{src}\n{d}");
        assert!(
            matches!(d.0[0].at, dlc_egg::diag::Location::Source { line, .. } if line >= 1),
            "{d}"
        );
    }
    // Frontend rules keep their codes, located in the DSL source.
    let d = dsl::load_str(
        "graph main(x: f32[4, 3], w: f32[5, 2]) -> (y: f32[4, 2]) {\n  y = matmul(x, w)\n  return y\n}",
        "t.graph",
        Options::default(),
    )
    .expect_err("mismatch");
    assert_eq!(d.first_code(), "E1002");
    assert_eq!(d.0[0].at.to_string(), "t.graph:2:7");
}

/// Byte-identical tensors (dtype, shape and every value's bits).
fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    a.dtype == b.dtype
        && a.shape == b.shape
        && a.to_f64()
            .iter()
            .map(|x| x.to_bits())
            .eq(b.to_f64().iter().map(|x| x.to_bits()))
}

#[test]
fn every_example_decompiles_to_a_program_with_identical_run_outputs() {
    let dir = tmp_dir("examples");
    for path in common::example_paths() {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("x")
            .to_string();
        let (rc, text, err) = cli(&["decompile", path.to_str().unwrap_or("")]);
        assert_eq!(rc, 0, "{stem}: {err}");
        // Deterministic.
        assert_eq!(
            cli(&["decompile", path.to_str().unwrap_or("")]).1,
            text,
            "{stem}"
        );
        let dsl_path = dir.join(format!("{stem}.graph"));
        std::fs::write(&dsl_path, &text).expect("write");
        let mut outs = Vec::new();
        for (tag, p) in [("json", &path), ("dsl", &dsl_path)] {
            let o = dir.join(format!("{stem}_{tag}"));
            let (rc, _, err) = cli(&[
                "run",
                p.to_str().unwrap_or(""),
                "--random",
                "11",
                "--out-dir",
                o.to_str().unwrap_or(""),
            ]);
            assert_eq!(rc, 0, "{stem} {tag}: {err}\n{text}");
            outs.push(o);
        }
        let g = frontend::load_file(&path).unwrap_or_else(|d| panic!("{d}"));
        for o in &g.signature.outputs {
            let f = format!("{}.npy", o.tensor);
            let a = std::fs::read(outs[0].join(&f)).expect("json output");
            let b = std::fs::read(outs[1].join(&f)).expect("dsl output");
            assert!(
                a == b,
                "{stem}: output {} differs between graph.json and its decompiled DSL",
                o.tensor
            );
        }
    }
}

/// Loads a fuzz case, decompiles it, parses the DSL back and evaluates both on the case's inputs.
fn roundtrip(case: &Case) -> Result<(), String> {
    let g =
        frontend::load_str(&case.doc.to_string(), "fuzz.json").map_err(|d| format!("load: {d}"))?;
    let text = match dsl::decompile(&g) {
        Ok(t) => t,
        // TODO(issue 22): sizes computed from symbols have no DSL spelling yet — an implicit
        // broadcast to `T+2` (Expand.shape holds integers and symbols only) and a slice bound
        // such as `max(0, T-3)`; decompile says so with E0720. Every other failure fails the
        // property.
        Err(d)
            if d.first_code() == "E0720"
                && (d.to_string().contains("broadcast to the computed size")
                    || d.to_string().contains("is no clamped integer")) =>
        {
            return Ok(())
        }
        Err(d) => return Err(format!("decompile: {d}")),
    };
    let g2 = dsl::load_str(&text, "fuzz.graph", Options::default())
        .map_err(|d| format!("the decompiled program does not load:\n{d}\n{text}"))?;
    let run = |g: &Graph| -> Result<Vec<Tensor>, String> {
        let inputs: BTreeMap<String, Tensor> = g
            .signature
            .inputs
            .iter()
            .zip(&case.inputs)
            .map(|(s, i)| (s.tensor.clone(), i.tensor.clone()))
            .collect();
        let arrays = inputs
            .iter()
            .map(|(k, t)| (k.clone(), t.shape.clone()))
            .collect();
        let b = resolve_symbols(g, &case.cli, &arrays).map_err(|d| d.to_string())?;
        let prog = lower(g).map_err(|d| d.to_string())?;
        let out = evaluate(&prog, &b, &inputs).map_err(|d| d.to_string())?;
        Ok(g.signature
            .outputs
            .iter()
            .filter_map(|o| out.get(&o.tensor).cloned())
            .collect())
    };
    let (a, b) = (run(&g)?, run(&g2).map_err(|e| format!("{e}\n{text}"))?);
    if a.len() != b.len() || !a.iter().zip(&b).all(|(x, y)| same_bits(x, y)) {
        return Err(format!("outputs differ after the round trip\n{text}"));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed_0022), ..ProptestConfig::default() })]

    /// parse(decompile(g)) computes exactly what g computes, on random valid graphs (the
    /// pipeline fuzzer's generator).
    #[test]
    fn decompile_round_trips_random_graphs(tape in prop::collection::vec(any::<u32>(), 0..400)) {
        let case = gen_case(&tape);
        roundtrip(&case).map_err(TestCaseError::fail)?;
    }
}
