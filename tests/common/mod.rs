//! Shared helpers of the end-to-end tests: one-node graphs, deterministic data, tolerant compare.
#![allow(dead_code)]

pub mod fe;
pub mod graphgen;
pub mod host;
pub mod movement_chains;
pub mod native;

use dlc_egg::ir::dtype::DType;
use dlc_egg::tensor::Tensor;
use dlc_egg::{ir::frontend, lower};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Whether NVRTC is here (`scripts/install-cuda-wheels.sh`, which `bash .ci/run` runs): panics
/// with the install suggestion when it is not, unless `DLC_SKIP_NVRTC=1`, where it prints a
/// skip line and the calling test returns.
pub fn nvrtc_here() -> bool {
    match dlc_egg::cuda::toolchain() {
        Ok(_) => true,
        Err(e) if std::env::var("DLC_SKIP_NVRTC").is_ok_and(|v| v == "1") => {
            eprintln!("skipping the NVRTC compile (DLC_SKIP_NVRTC=1): {e}");
            false
        }
        Err(e) => panic!("{e} (or set DLC_SKIP_NVRTC=1 to skip the NVRTC tests)"),
    }
}

/// Every `examples/*.json`, sorted, as absolute paths (at least one).
pub fn example_paths() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut v: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no examples in {}", dir.display());
    v
}

/// Golden files of every example: compares `dump(example)` with
/// `tests/golden/<dir>/<example stem>.<ext>` (byte-identical), or, with `UPDATE_GOLDEN` set,
/// rewrites the files. `test` names the test target in the regeneration hint, `what` the dump in
/// the mismatch message. Returns every example with its dump, for further checks.
pub fn check_golden_files(
    dir: &str,
    ext: &str,
    test: &str,
    what: &str,
    dump: &dyn Fn(&std::path::Path) -> String,
) -> Vec<(std::path::PathBuf, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(dir);
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    if update {
        std::fs::create_dir_all(&dir).expect("golden dir");
    }
    let mut out = Vec::new();
    for ex in example_paths() {
        let got = dump(&ex);
        let stem = ex.file_stem().expect("file name").to_string_lossy();
        let golden = dir.join(format!("{stem}.{ext}"));
        if update {
            std::fs::write(&golden, &got).expect("write golden");
        } else {
            let want = std::fs::read_to_string(&golden).unwrap_or_else(|_| {
                panic!(
                    "{} missing: run UPDATE_GOLDEN=1 cargo test --release --test {test}",
                    golden.display()
                )
            });
            assert!(
                got == want,
                "{} differs from its golden {what} ({}); inspect and regenerate with \
                 UPDATE_GOLDEN=1",
                ex.display(),
                golden.display()
            );
        }
        out.push((ex, got));
    }
    out
}

/// The `--dump` document of `layer` for the graph at `path`, optimized with default options, as
/// pretty JSON with a trailing newline (the golden-file form).
pub fn optimized_dump(path: &std::path::Path, layer: dlc_egg::dump::DumpLayer) -> String {
    let g = frontend::load_file(path).unwrap_or_else(|d| panic!("{}: {d}", path.display()));
    let p = lower::lower(&g).unwrap_or_else(|d| panic!("{}: {d}", path.display()));
    let opts = dlc_egg::optimize::OptimizeOptions::default();
    let o = dlc_egg::optimize::optimize(&p, &opts).expect("optimizes");
    let doc = dlc_egg::dump::dump_document(&[layer], &g, Some(&p), Some(&o), None);
    serde_json::to_string_pretty(&doc).expect("json") + "\n"
}

/// The seed examples every example-driven test covers (`examples/<name>.json`).
pub const SEED_EXAMPLES: [&str; 7] = [
    "gemm_bias_relu",
    "conv3x3_s2_p1_silu",
    "conv_relu_pool",
    "attention_causal",
    "layernorm",
    "mlp_gelu",
    "matmul_1d_2d",
];

/// Deterministic values in [-1, 1) (the library's test LCG), for test inputs.
pub fn data(seed: u64, n: usize) -> Vec<f64> {
    dlc_egg::rules::testing::lcg(seed, n)
}

/// A tensor of deterministic values rounded to `dtype`.
pub fn rand_tensor(seed: u64, dtype: DType, shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_f64(dtype, shape.to_vec(), &data(seed, n))
}

/// A valid document: `Y = relu(A @ B + bias)` with symbolic `M`, `K`, `N` (default `M = 4`).
pub fn valid_doc() -> Value {
    json!({
        "signature": {
            "inputs": [{"tensor": "A"}, {"tensor": "B"},
                       {"tensor": "bias", "role": "param", "storage": "const_pool"}],
            "outputs": [{"tensor": "Y"}]
        },
        "symbols": {"M": 4},
        "tensors": {
            "A": {"dtype": "fp16", "shape": ["M", "K"]},
            "B": {"dtype": "fp16", "shape": ["K", "N"]},
            "bias": {"dtype": "fp16", "shape": ["N"]},
            "Y": {"dtype": "fp16", "shape": ["M", "N"]}
        },
        "graph": [
            {"op": "MatMul", "name": "mm", "inputs": ["A", "B"], "outputs": ["C"]},
            {"op": "Elementwise", "name": "add", "inputs": ["C", "bias"], "outputs": ["D"], "attrs": {"fn": "add"}},
            {"op": "Elementwise", "name": "relu", "inputs": ["D"], "outputs": ["Y"], "attrs": {"fn": "relu"}}
        ]
    })
}

/// A document whose signature inputs are `inputs` `(name, dtype, shape)` and whose nodes are
/// `nodes`. Its signature output is the first input, so node outputs are undeclared intermediates
/// whose dtype and shape the frontend infers.
pub fn probe_doc(inputs: &[(&str, &str, Value)], nodes: Value) -> Value {
    let mut tensors = serde_json::Map::new();
    let mut sig = Vec::new();
    for (n, d, s) in inputs {
        tensors.insert(n.to_string(), json!({"dtype": d, "shape": s}));
        sig.push(json!({"tensor": n}));
    }
    json!({
        "signature": {"inputs": sig, "outputs": [{"tensor": inputs[0].0}]},
        "tensors": tensors,
        "graph": nodes,
    })
}

/// A one-node graph: inputs `(name, dtype, shape)`, node operands `operands` (tensor names or
/// numbers), output `Y`. `Y` must be declared (signature outputs are), so its dtype and shape are
/// taken from a [`probe_doc`] load in which `Y` is an undeclared intermediate.
pub fn one_op(
    op: &str,
    attrs: Value,
    ins: &[(&str, &str, Vec<i64>)],
    operands: Vec<Value>,
) -> String {
    let ins_v: Vec<(&str, &str, Value)> = ins.iter().map(|(n, d, s)| (*n, *d, json!(s))).collect();
    let node =
        json!({"op": op, "name": "node", "inputs": operands, "outputs": ["Y"], "attrs": attrs});
    let mut doc = probe_doc(&ins_v, json!([node]));
    let g = frontend::load_str(&doc.to_string(), "probe.json").unwrap_or_else(|d| panic!("{d}"));
    let y = g.tensor("Y").expect("Y inferred");
    doc["tensors"]["Y"] = json!({"dtype": y.dtype, "shape": y.shape});
    doc["signature"]["outputs"] = json!([{"tensor": "Y"}]);
    doc.to_string()
}

/// Operand list of tensor names.
pub fn names(ns: &[&str]) -> Vec<Value> {
    ns.iter().map(|n| json!(n)).collect()
}

/// load → bind (from the given arrays) → lower → verify → evaluate. Panics with the diagnostics.
pub fn run(graph_json: &str, inputs: Vec<(&str, Tensor)>) -> BTreeMap<String, Tensor> {
    try_run(graph_json, inputs).unwrap_or_else(|d| panic!("{d}"))
}

/// Like [`run`] but returns the diagnostics.
pub fn try_run(
    graph_json: &str,
    inputs: Vec<(&str, Tensor)>,
) -> Result<BTreeMap<String, Tensor>, dlc_egg::Diagnostics> {
    let g = frontend::load_str(graph_json, "test.json")?;
    let arrays: BTreeMap<String, Vec<usize>> = inputs
        .iter()
        .map(|(n, t)| (n.to_string(), t.shape.clone()))
        .collect();
    let bindings = frontend::resolve_symbols(&g, &BTreeMap::new(), &arrays)?;
    let prog = lower::lower(&g)?;
    let ins: BTreeMap<String, Tensor> = inputs
        .into_iter()
        .map(|(n, t)| (n.to_string(), t))
        .collect();
    dlc_egg::eval::evaluate(&prog, &bindings, &ins)
}

/// Runs a one-output graph and returns `Y`.
pub fn run_y(graph_json: &str, inputs: Vec<(&str, Tensor)>) -> Tensor {
    let mut out = run(graph_json, inputs);
    out.remove("Y").expect("output Y")
}

/// graph-json's tolerance of an output dtype: 1e-3 for fp32, 1e-2 for fp16/bf16, `None` (exact)
/// for i32 and bool.
pub fn graph_json_tolerance(dt: DType) -> Option<f64> {
    match dt {
        DType::F32 => Some(1e-3),
        DType::F16 | DType::BF16 => Some(1e-2),
        _ => None,
    }
}

/// `|a − b| <= tol + tol·|b|`; exactly (NaN by NaN) without a tolerance or when `b` is not
/// finite.
pub fn within(a: f64, b: f64, tol: Option<f64>) -> bool {
    match tol {
        Some(t) if b.is_finite() => (a - b).abs() <= t + t * b.abs(),
        _ => a == b || (a.is_nan() && b.is_nan()),
    }
}

/// One output against its reference (`who` names it in the message): same dtype and shape, values
/// within graph-json's tolerances ([`graph_json_tolerance`], [`within`]).
pub fn compare_output(name: &str, got: &Tensor, want: &Tensor, who: &str) -> Result<(), String> {
    if got.dtype != want.dtype || got.shape != want.shape {
        return Err(format!(
            "output {name}: {} {:?}, {who} {} {:?}",
            got.dtype.name(),
            got.shape,
            want.dtype.name(),
            want.shape
        ));
    }
    let (g, w) = (got.to_f64(), want.to_f64());
    if g.len() != w.len() {
        return Err(format!(
            "output {name}: {} elements, {who} has {}",
            g.len(),
            w.len()
        ));
    }
    let tol = graph_json_tolerance(want.dtype);
    for (k, (a, b)) in g.iter().zip(&w).enumerate() {
        if !within(*a, *b, tol) {
            return Err(format!(
                "output {name}: element {k} is {a}, {who} says {b}\n  got  {g:?}\n  want {w:?}"
            ));
        }
    }
    Ok(())
}

/// Asserts `|got − want| <= atol + rtol·|want|` elementwise (NaN matches NaN, ±inf must match).
pub fn assert_close(got: &Tensor, want: &[f64], shape: &[usize], rtol: f64, atol: f64) {
    assert_eq!(got.shape, shape, "shape");
    let g = got.to_f64();
    assert_eq!(g.len(), want.len(), "element count");
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        let ok = (a.is_nan() && b.is_nan())
            || (a.is_infinite() && a == b)
            || (a - b).abs() <= atol + rtol * b.abs();
        assert!(ok, "element {i}: got {a}, want {b} (all: {g:?})");
    }
}

/// Row-major strides of a shape.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Unravels a flat index.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut out = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        out[d] = i % shape[d];
        i /= shape[d];
    }
    out
}

/// `Y = relu(A·B + bias)`, `A [M, K]`, `B [K, N]`; a size that is not a number is a symbol
/// priced at `default`.
pub fn gemm_bias_relu(dt: &str, mkn: [&str; 3], default: i64) -> String {
    gemm_bias_relu_t(dt, mkn, default, [false, false])
}

/// [`gemm_bias_relu`] with `A` stored `[K, M]` when `trans[0]` and `B` stored `[N, K]` when
/// `trans[1]` (the GEMM's `trans_a`, `trans_b`).
pub fn gemm_bias_relu_t(dt: &str, [m, k, n]: [&str; 3], default: i64, trans: [bool; 2]) -> String {
    let q = |s: &str| {
        if s.parse::<i64>().is_ok() {
            s.to_string()
        } else {
            format!("\"{s}\"")
        }
    };
    let syms: Vec<String> = [m, k, n]
        .iter()
        .filter(|s| s.parse::<i64>().is_err())
        .map(|s| format!("\"{s}\": {default}"))
        .collect();
    let (m, k, n) = (q(m), q(k), q(n));
    let [trans_a, trans_b] = trans;
    let a = if trans_a { [&k, &m] } else { [&m, &k] };
    let b = if trans_b { [&n, &k] } else { [&k, &n] };
    format!(
        r#"{{
  "signature": {{
    "inputs": [{{"tensor": "A", "role": "data"}}, {{"tensor": "B", "role": "param"}},
               {{"tensor": "bias", "role": "param"}}],
    "outputs": [{{"tensor": "Y"}}]
  }},
  "symbols": {{{syms}}},
  "tensors": {{
    "A": {{"dtype": "{dt}", "shape": [{a0}, {a1}]}},
    "B": {{"dtype": "{dt}", "shape": [{b0}, {b1}]}},
    "bias": {{"dtype": "{dt}", "shape": [{n}]}},
    "Y": {{"dtype": "{dt}", "shape": [{m}, {n}]}}
  }},
  "graph": [
    {{"op": "GEMM", "name": "gemm", "inputs": ["A", "B"], "outputs": ["C0"],
      "attrs": {{"acc_dtype": "fp32", "trans_a": {trans_a}, "trans_b": {trans_b}}}}},
    {{"op": "Elementwise", "name": "bias_add", "fn": "add", "inputs": ["C0", "bias"], "outputs": ["C1"]}},
    {{"op": "Elementwise", "name": "relu", "fn": "relu", "inputs": ["C1"], "outputs": ["Y"]}}
  ]
}}"#,
        syms = syms.join(", "),
        a0 = a[0],
        a1 = a[1],
        b0 = b[0],
        b1 = b[1],
    )
}

/// `Y = relu(conv3x3(H, w, b) + conv1x1(X, wd, bd, stride 2))`: `H[n, c, hw, hw]`,
/// `X[n, cx, 2·hw, 2·hw]`, `c` output channels.
pub fn projection_block(n: i64, c: i64, cx: i64, hw: i64) -> String {
    projection_block_of("fp32", n, c, cx, hw)
}

/// [`projection_block`] in `dtype`.
pub fn projection_block_of(dtype: &str, n: i64, c: i64, cx: i64, hw: i64) -> String {
    let conv = |name: &str, ins: [&str; 3], out: &str, k: i64, s: i64| {
        let p = k / 2;
        serde_json::json!({"op": "Conv", "name": name, "inputs": ins, "outputs": [out],
            "attrs": {"stride": [s, s], "pad": [[p, p], [p, p]], "dilation": [1, 1],
            "groups": 1}})
    };
    let ew = |name: &str, f: &str, ins: serde_json::Value, out: &str| {
        serde_json::json!({"op": "Elementwise", "name": name, "inputs": ins, "outputs": [out],
            "attrs": {"fn": f}})
    };
    let param = |t: &str| serde_json::json!({"tensor": t, "role": "param"});
    let t = |shape: serde_json::Value| serde_json::json!({"dtype": dtype, "shape": shape});
    serde_json::json!({
        "signature": {
            "inputs": [{"tensor": "H"}, {"tensor": "X"}, param("w"), param("b"), param("wd"),
                param("bd")],
            "outputs": [{"tensor": "Y"}]
        },
        "tensors": {
            "H": t(serde_json::json!([n, c, hw, hw])),
            "X": t(serde_json::json!([n, cx, 2 * hw, 2 * hw])),
            "w": t(serde_json::json!([c, c, 3, 3])),
            "b": t(serde_json::json!([c])),
            "wd": t(serde_json::json!([c, cx, 1, 1])),
            "bd": t(serde_json::json!([c])),
            "Y": t(serde_json::json!([n, c, hw, hw]))
        },
        "graph": [
            conv("conv", ["H", "w", "b"], "p", 3, 1),
            conv("down", ["X", "wd", "bd"], "d", 1, 2),
            ew("residual", "add", serde_json::json!(["p", "d"]), "r"),
            ew("out_relu", "relu", serde_json::json!(["r"]), "Y")
        ]
    })
    .to_string()
}

/// A ResNet stage's tail: `Y = fc(flatten(mean_hw(relu(conv3x3(X) + b + S))))`, `C` channels at `H×W`, batch `n`.
pub fn stage_tail(c: i64, hw: i64, n: i64) -> String {
    let param = |t: &str| json!({"tensor": t, "role": "param"});
    let act = json!({"dtype": "fp32", "shape": [n, c, hw, hw]});
    json!({
        "signature": {
            "inputs": [{"tensor": "X"}, {"tensor": "S"}, param("W"), param("b"), param("FW"),
                param("FB")],
            "outputs": [{"tensor": "Y"}]
        },
        "tensors": {
            "X": act, "S": act,
            "W": {"dtype": "fp32", "shape": [c, c, 3, 3]},
            "b": {"dtype": "fp32", "shape": [c]},
            "FW": {"dtype": "fp32", "shape": [10, c]},
            "FB": {"dtype": "fp32", "shape": [10]},
            "Y": {"dtype": "fp32", "shape": [n, 10]}
        },
        "graph": [
            {"op": "Conv", "name": "conv", "inputs": ["X", "W", "b"], "outputs": ["C1"],
             "attrs": {"stride": [1, 1], "pad": [[1, 1], [1, 1]], "dilation": [1, 1],
                       "groups": 1}},
            {"op": "Elementwise", "name": "residual", "inputs": ["C1", "S"], "outputs": ["A"],
             "attrs": {"fn": "add"}},
            {"op": "Elementwise", "name": "relu", "inputs": ["A"], "outputs": ["R"],
             "attrs": {"fn": "relu"}},
            {"op": "Reduce", "name": "pool", "inputs": ["R"], "outputs": ["P"],
             "attrs": {"fn": "mean", "axes": [2, 3], "keepdim": true}},
            {"op": "Reshape", "name": "flatten", "inputs": ["P"], "outputs": ["F"],
             "attrs": {"shape": [n, c]}},
            {"op": "GEMM", "name": "fc", "inputs": ["F", "FW", "FB"], "outputs": ["Y"],
             "attrs": {"trans_a": false, "trans_b": true, "alpha": 1.0, "beta": 1.0}}
        ]
    })
    .to_string()
}
