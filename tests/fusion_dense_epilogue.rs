//! A dense layer computed in two dimensions and read back in three — ONNX `Gemm` between two
//! `Reshape`s, the form GPT-2's `Conv1D` exports to — keeps its epilogue: GPT-2's tanh GELU
//! (`0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`) over `reshape(X₂·W + b, [B, S, N])` is ONE
//! kernel with the GEMM, after a LayerNorm as in the transformer block (issue 23, "the fusions
//! real models miss": on a 2-layer GPT-2 export 28 → 26 kernels, the FFN's GELU had a kernel of
//! its own). Two pieces make it so: region synthesis accepts a reduction read at merged iters
//! (`S·b + s`, an injective map: `crate::synth`), and the deferred growth of an elementwise
//! epilogue absorbs the dense-layer GEMM it waits on (`rules::fusion::grow`). The same GELU
//! after an exporter's `nn.Linear` (`MatMul` of the rank-3 `X`, then the bias `Add`) was three
//! kernels, the GEMM computed twice (predicted 3 666 µs at the default sizes, now 2 146 µs):
//! there the epilogue seeds are deferred too. The emitted CUDA
//! compiles for sm_80 and sm_90a without spills and, on the CPU emulation, matches the
//! reference evaluator, as does the native CPU program.

mod common;

use dlc_egg::codegen::generate;
use std::collections::BTreeMap;

/// `LayerNorm(X) → Reshape [-1, K] → Gemm(W, b) → Reshape [B, S, N] → tanh GELU`, fp32, with
/// the symbols' defaults `B`, `S` and the sizes `K`, `N`; with `batched`, the dense layer is
/// `MatMul(X, W) + b` on the rank-3 `X` instead (an exporter's `nn.Linear`).
fn dense_gelu(b: i64, s: i64, k: i64, n: i64, batched: bool) -> String {
    stacked(b, s, k, n, batched, 1)
}

/// `blocks` of [`dense_gelu`] in a row (`K = N` past the first), the last one's output `Y`.
fn stacked(b: i64, s: i64, k: i64, n: i64, batched: bool, blocks: usize) -> String {
    let mut inputs = vec![serde_json::json!({"tensor": "X"})];
    let mut tensors = serde_json::Map::new();
    tensors.insert(
        "X".into(),
        serde_json::json!({"dtype": "fp32", "shape": ["B", "S", k]}),
    );
    tensors.insert(
        "Y".into(),
        serde_json::json!({"dtype": "fp32", "shape": ["B", "S", n]}),
    );
    let mut graph = Vec::new();
    for i in 0..blocks {
        let kin = if i == 0 { k } else { n };
        for (w, shape) in [
            ("lw", serde_json::json!([kin])),
            ("lb", serde_json::json!([kin])),
            ("W", serde_json::json!([kin, n])),
            ("b", serde_json::json!([n])),
        ] {
            let name = format!("{w}{i}");
            inputs.push(serde_json::json!({"tensor": name, "role": "param"}));
            tensors.insert(name, serde_json::json!({"dtype": "fp32", "shape": shape}));
        }
        let x = if i == 0 {
            "X".to_string()
        } else {
            format!("y{}", i - 1)
        };
        let y = if i + 1 == blocks {
            "Y".to_string()
        } else {
            format!("y{i}")
        };
        graph.extend(block(i, &x, &y, [kin, n], batched));
    }
    let doc = serde_json::json!({
        "signature": {"inputs": inputs, "outputs": [{"tensor": "Y"}]},
        "symbols": {"B": b, "S": s},
        "tensors": tensors,
        "graph": graph
    });
    doc.to_string()
}

/// The nodes of block `i`: LayerNorm, the dense layer (`Gemm` between `Reshape`s or, `batched`,
/// `MatMul` + bias) from `K` to `N` columns, tanh GELU; node names carry `i` past the first block.
fn block(i: usize, x: &str, y: &str, [k, n]: [i64; 2], batched: bool) -> Vec<serde_json::Value> {
    let id = |s: &str| {
        if i == 0 {
            s.to_string()
        } else {
            format!("{s}{i}")
        }
    };
    let ew = |name: &str, f: &str, ins: serde_json::Value, out: &str| {
        serde_json::json!({"op": "Elementwise", "name": id(name), "inputs": ins,
            "outputs": [out], "attrs": {"fn": f}})
    };
    let t = |s: &str| format!("{s}_{i}");
    let (xl, x2, g, m, xx) = (t("xl"), t("x2"), t("g"), t("m"), t("x"));
    let mut out = vec![serde_json::json!({"op": "LayerNorm", "name": id("ln"),
        "inputs": [x, format!("lw{i}"), format!("lb{i}")], "outputs": [xl],
        "attrs": {"axis": 2, "eps": 1e-5}})];
    if batched {
        out.push(serde_json::json!({"op": "MatMul", "name": id("fc"),
            "inputs": [xl, format!("W{i}")], "outputs": [m], "attrs": {}}));
        out.push(ew(
            "unflat",
            "add",
            serde_json::json!([m, format!("b{i}")]),
            &xx,
        ));
    } else {
        out.push(
            serde_json::json!({"op": "Reshape", "name": id("flat"), "inputs": [xl],
            "outputs": [x2], "attrs": {"shape": [-1, k]}}),
        );
        out.push(serde_json::json!({"op": "GEMM", "name": id("fc"),
            "inputs": [x2, format!("W{i}"), format!("b{i}")], "outputs": [g],
            "attrs": {"trans_a": false, "trans_b": false, "alpha": 1.0, "beta": 1.0}}));
        out.push(
            serde_json::json!({"op": "Reshape", "name": id("unflat"), "inputs": [g],
            "outputs": [xx], "attrs": {"shape": ["B", "S", n]}}),
        );
    }
    let (a, p, q, r, tt, th, u) = (t("a"), t("p"), t("q"), t("r"), t("t"), t("th"), t("u"));
    out.extend([
        ew("half", "mul", serde_json::json!([xx, 0.5]), &a),
        ew("cube", "pow", serde_json::json!([xx, 3.0]), &p),
        ew("c1", "mul", serde_json::json!([p, 0.044715]), &q),
        ew("inner", "add", serde_json::json!([xx, q]), &r),
        ew("c2", "mul", serde_json::json!([r, 0.7978845608]), &tt),
        ew("tanh", "tanh", serde_json::json!([tt]), &th),
        ew("one", "add", serde_json::json!([th, 1.0]), &u),
        ew("gelu", "mul", serde_json::json!([a, u]), y),
    ]);
    out
}

/// The kernel of `o` covering the graph node `node`, as (name, covers).
fn kernel_covering<'a>(o: &'a dlc_egg::optimize::Optimized, node: &str) -> (&'a str, &'a [String]) {
    o.kernels
        .iter()
        .find(|k| k.covers.iter().any(|c| c == node))
        .map(|k| (k.name.as_str(), k.covers.as_slice()))
        .unwrap_or_else(|| panic!("no kernel covers {node}"))
}

#[test]
fn the_gemm_and_its_whole_gelu_are_one_kernel() {
    use dlc_egg::target::Arch::{Sm80, Sm90};
    for (arch, batched) in [(Sm90, false), (Sm80, false), (Sm90, true)] {
        let text = dense_gelu(4, 24, 64, 96, batched);
        let (p, o) = common::host::optimized_for(&text, arch);
        let (name, covers) = kernel_covering(&o, "fc");
        for node in ["unflat", "cube", "tanh", "gelu"] {
            assert!(
                covers.iter().any(|c| c == node),
                "{arch:?} batched {batched}: {name} covers {covers:?}, not {node}"
            );
        }
        assert_eq!(
            o.kernels.len(),
            2,
            "{arch:?} batched {batched}: LayerNorm, GEMM + GELU"
        );
        // What was priced runs: the emitted CUDA on the CPU emulation.
        let g = generate(&o).expect("generates");
        let b = BTreeMap::from([("B".to_string(), 4), ("S".to_string(), 24)]);
        let what = format!("{arch:?} batched {batched}");
        common::host::emulation_matches_reference(&p, &g, &b, 7, 1e-4, &what);
        compiles_without_spills(&g.emitted.source, arch);
    }
}

/// NVRTC compiles `source` for `arch` with no spills (skipped with `DLC_SKIP_NVRTC=1` where
/// NVRTC is missing, as `tests/cuda_compile.rs`).
fn compiles_without_spills(source: &str, arch: dlc_egg::target::Arch) {
    use dlc_egg::cuda::{compile, CompileOptions};
    if !crate::common::nvrtc_here() {
        return;
    }
    let c = compile(source, arch, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{arch:?}: {e}"));
    for k in &c.kernels {
        assert_eq!(k.spill_bytes, 0, "{arch:?}: {k:?}");
    }
}

#[test]
fn the_fused_dense_layer_runs_natively_with_tails() {
    // Symbolic rows (B·S = 3·7, not a multiple of any tile or vector width).
    for batched in [false, true] {
        let text = dense_gelu(3, 7, 40, 72, batched);
        common::native::check_graph(&text, &[("B", 3), ("S", 7)], "dense_gelu").unwrap();
    }
}

#[test]
fn replayed_growth_equals_growing_on_stacked_dense_layers() {
    // Identical blocks: growth is recorded on one and replayed on the next
    // (`FusionLimits::replay`), which must give exactly what growing gives, the dense-layer
    // test (`GrowView::is_dense`) included.
    use dlc_egg::optimize::{optimize, OptimizeOptions};
    use dlc_egg::rules::fusion::FusionLimits;
    for batched in [false, true] {
        let text = stacked(2, 16, 32, 32, batched, 3);
        let g = dlc_egg::ir::frontend::load_str(&text, "stacked.json").expect("loads");
        let p = dlc_egg::lower::lower(&g).expect("lowers");
        let replayed = optimize(&p, &OptimizeOptions::default()).expect("optimizes");
        let no_replay = FusionLimits {
            replay: false,
            ..FusionLimits::default()
        };
        let opts = OptimizeOptions {
            fusion: no_replay,
            ..OptimizeOptions::default()
        };
        let grown = optimize(&p, &opts).expect("optimizes");
        assert_eq!(
            replayed.egraph.total_number_of_nodes(),
            grown.egraph.total_number_of_nodes(),
            "batched {batched}"
        );
        let covers = |o: &dlc_egg::optimize::Optimized| -> Vec<Vec<String>> {
            o.kernels.iter().map(|k| k.covers.clone()).collect()
        };
        assert_eq!(covers(&replayed), covers(&grown), "batched {batched}");
    }
}
