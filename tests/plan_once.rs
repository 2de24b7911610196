//! One plan per kernel, chosen once and emitted as chosen (issue 15 item 1): for every example
//! and a fp16 N = 1 convolution, on sm80 and sm90, the CLI's `--report` JSON, `--dump plan` and
//! the manifest name the same kernels with equal plans and predicted times, and each manifest
//! template is the one its plan's template and algorithm are emitted with; a plan the template
//! cannot emit is an internal error, never a fallback kernel.

mod common;

use dlc_egg::codegen::emit::kernel_of;
use dlc_egg::codegen::manifest::{Manifest, ManifestStep};
use dlc_egg::codegen::CodegenError;
use dlc_egg::cost::program::plan_program;
use dlc_egg::ir::region::program::Step;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::plan::space::{Algo, Knobs};
use dlc_egg::target::Arch;
use serde_json::Value;
use std::path::Path;

/// The CLI's three views of one optimization.
struct Views {
    report: Value,
    dump: Value,
    manifest: Manifest,
}

fn views(path: &Path, arch: &str) -> Views {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let report = dir.path().join("report.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dlc-egg"))
        .args(["optimize", "--arch", arch, "--dump", "plan", "--report"])
        .arg(&report)
        .arg("-o")
        .arg(dir.path())
        .arg(path)
        .output()
        .expect("the CLI runs");
    assert!(
        out.status.success(),
        "{} ({arch}): {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |p: &Path| std::fs::read_to_string(p).expect("a written file");
    Views {
        report: serde_json::from_str(&read(&report)).expect("report JSON"),
        dump: serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).expect("plan JSON"),
        manifest: serde_json::from_str(&read(&dir.path().join("manifest.json")))
            .expect("manifest JSON"),
    }
}

/// The manifest template a plan is emitted with.
fn emitted_template(plan: &Value) -> &'static str {
    let algo = plan["algo_choice"].to_string();
    match plan["template"].as_str().expect("a template") {
        "attention" => "attention",
        "contraction" if algo.contains("mma_sync") => "contraction_mma",
        "contraction" if algo.contains("wgmma") => "sm90_gemm",
        "contraction" if algo.contains("\"gemv\"") => "gemv",
        "contraction" => "contraction_simt",
        "reduction" => "row",
        "reduce" => "reduce",
        // The cooperative compute-at window runs on the plain-reduction template.
        "compute_at" if algo.contains("window_per") => "reduce",
        "elementwise" | "compute_at" => "pointwise",
        t => panic!("unknown plan template {t}"),
    }
}

/// Checks that the three views agree; returns `(kernel, manifest template)` per launch.
fn check_agree(what: &str, v: &Views) -> Vec<(String, String)> {
    let launches: Vec<_> = v
        .manifest
        .steps
        .iter()
        .filter_map(|s| match s {
            ManifestStep::Launch(l) => Some(l),
            ManifestStep::Alias { .. } => None,
        })
        .collect();
    let report = v.report["kernels"].as_array().expect("report kernels");
    let dump = v.dump["kernels"].as_array().expect("dumped kernels");
    let launched: Vec<&str> = launches.iter().map(|l| l.kernel.as_str()).collect();
    let names = |ks: &[Value], key: &str| -> Vec<String> {
        ks.iter()
            .map(|k| k[key].as_str().expect("a name").to_string())
            .collect()
    };
    assert_eq!(
        names(report, "name"),
        launched,
        "{what}: report vs manifest"
    );
    assert_eq!(
        names(dump, "kernel"),
        launched,
        "{what}: --dump plan vs manifest"
    );
    let mut out = Vec::new();
    for ((l, r), d) in launches.iter().zip(report).zip(dump) {
        let rp = &r["plan"]["Ok"];
        assert!(
            rp.is_object(),
            "{what}: {} has no plan: {}",
            l.kernel,
            r["plan"]
        );
        let manifest_plan = serde_json::to_value(&l.plan).expect("a plan serializes");
        assert_eq!(
            rp["plan"], d["plan"],
            "{what}: {}: report vs dump",
            l.kernel
        );
        assert_eq!(
            rp["plan"], manifest_plan,
            "{what}: {}: report vs manifest",
            l.kernel
        );
        assert_eq!(
            rp["predicted_us"].as_f64(),
            Some(l.predicted_us),
            "{what}: {}: predicted time",
            l.kernel
        );
        assert_eq!(
            emitted_template(&manifest_plan),
            l.template,
            "{what}: {}: plan {} emitted as `{}`",
            l.kernel,
            manifest_plan["template"],
            l.template
        );
        out.push((l.kernel.clone(), l.template.clone()));
    }
    out
}

#[test]
fn every_example_reports_dumps_and_emits_one_plan() {
    for path in common::example_paths() {
        for arch in ["sm80", "sm90"] {
            let what = format!("{} ({arch})", path.display());
            let v = views(&path, arch);
            let ks = check_agree(&what, &v);
            assert!(!ks.is_empty(), "{what}: no kernel");
            // On sm90 the extractor picks the scores-and-softmax / P·V pair (on sm80 a split
            // that does not pair).
            if path.ends_with("attention_causal.json") && arch == "sm90" {
                assert!(
                    ks.iter().any(|(_, t)| t == "attention"),
                    "{what}: the attention pair is one attention kernel: {ks:?}"
                );
            }
        }
    }
}

/// A stage's last convolution with its global average pool (batch 1, 64 channels: one
/// compute-at kernel whose window is split over threads on the H100, `tests/fusion_conv_pool.rs`)
/// keeps one plan: the report, `--dump plan` and the manifest agree, and it is launched on the
/// reduce template.
#[test]
fn the_cooperative_compute_at_window_is_emitted_as_planned() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("stage_tail.json");
    std::fs::write(&path, common::stage_tail(64, 7, 1)).expect("written");
    let arch = "sm90";
    let v = views(&path, arch);
    let ks = check_agree(&format!("stage tail ({arch})"), &v);
    let (fused, t) = pool_kernel(&v, &ks);
    let plan = &fused["plan"]["Ok"]["plan"];
    assert!(
        plan["algo_choice"].to_string().contains("window_per"),
        "{arch}: {plan}"
    );
    assert_eq!(t, "reduce", "{arch}");
}

/// The report's kernel that covers the pool, and the template it is launched on (`ks`:
/// [`check_agree`]'s launches).
fn pool_kernel<'v>(v: &'v Views, ks: &[(String, String)]) -> (&'v Value, String) {
    let fused = v.report["kernels"]
        .as_array()
        .expect("kernels")
        .iter()
        .find(|k| k["covers"].to_string().contains("pool"))
        .expect("a kernel covers the pool");
    let (_, t) = ks
        .iter()
        .find(|(n, _)| fused["name"] == n.as_str())
        .expect("launched");
    (fused, t.clone())
}

/// ResNet-18's tail at 512 channels: the convolution and its global average pool are one pooled
/// tile (`plan::work::PoolTile`, `tests/codegen_pooled_tile.rs`) on both targets: the report,
/// `--dump plan` and the manifest agree, the plan names the 49-point windows, and it is launched
/// on the SIMT template.
#[test]
fn the_pooled_tile_is_emitted_as_planned() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("stage_tail.json");
    std::fs::write(&path, common::stage_tail(512, 7, 1)).expect("written");
    for arch in ["sm80", "sm90"] {
        let v = views(&path, arch);
        let ks = check_agree(&format!("stage tail 512 ({arch})"), &v);
        let (fused, t) = pool_kernel(&v, &ks);
        assert!(
            fused["covers"].to_string().contains("conv"),
            "{arch}: {fused}"
        );
        let plan = &fused["plan"]["Ok"]["plan"];
        assert!(
            plan["algo_choice"].to_string().contains("_pooled49"),
            "{arch}: {plan}"
        );
        assert_eq!(t, "contraction_simt", "{arch}");
    }
}

/// A residual block's projection shortcut summed in one SIMT tile (`plan::work::Gemm::second`,
/// `tests/codegen_summed_contractions.rs`; batch 1 splits `K`) keeps one plan on both targets:
/// the report, `--dump plan` and the manifest agree, and it is launched on the SIMT template.
#[test]
fn the_summed_projection_is_emitted_as_planned() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("projection_block.json");
    std::fs::write(&path, common::projection_block(1, 128, 64, 28)).expect("written");
    for arch in ["sm80", "sm90"] {
        let v = views(&path, arch);
        let ks = check_agree(&format!("projection block ({arch})"), &v);
        assert_eq!(ks.len(), 1, "{arch}: one kernel: {ks:?}");
        assert_eq!(ks[0].1, "contraction_simt", "{arch}: {ks:?}");
    }
}

/// `examples/conv_relu_pool.json` with fp16 tensors and a batch of 1.
fn conv_n1_fp16(dir: &Path) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/conv_relu_pool.json");
    let mut g: Value = serde_json::from_str(&std::fs::read_to_string(src).expect("example"))
        .expect("example JSON");
    g["symbols"]["N"] = Value::from(1);
    for (_, t) in g["tensors"].as_object_mut().expect("tensors").iter_mut() {
        t["dtype"] = Value::from("fp16");
    }
    let p = dir.join("conv_n1_fp16.json");
    std::fs::write(&p, serde_json::to_string(&g).expect("JSON")).expect("written");
    p
}

/// The N = 1 fp16 convolution keeps one plan: when it claims tensor cores it emits the
/// tensor-core template, otherwise it is priced as what it runs as.
#[test]
fn n1_conv_is_emitted_as_planned() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = conv_n1_fp16(dir.path());
    for arch in ["sm80", "sm90"] {
        let v = views(&path, arch);
        let ks = check_agree(&format!("conv N=1 fp16 ({arch})"), &v);
        let conv = v.report["kernels"]
            .as_array()
            .expect("kernels")
            .iter()
            .find(|k| k["covers"].to_string().contains("conv"))
            .expect("a kernel covers the convolution");
        let plan = &conv["plan"]["Ok"]["plan"];
        let (_, t) = ks
            .iter()
            .find(|(n, _)| conv["name"] == n.as_str())
            .expect("launched");
        assert_eq!(emitted_template(plan), t, "{arch}: {plan}");
    }
}

/// A fp16 3×3 convolution `[2, 64, hw, hw]` → 64 channels (pad 1) on the tensor cores.
fn conv_fp16(dir: &Path, hw: u64) -> std::path::PathBuf {
    let g = serde_json::json!({
        "signature": {"inputs": [{"tensor": "X", "role": "data"}, {"tensor": "W", "role": "param"}],
                      "outputs": [{"tensor": "Y"}]},
        "tensors": {"X": {"dtype": "fp16", "shape": [2, 64, hw, hw]},
                    "W": {"dtype": "fp16", "shape": [64, 64, 3, 3]},
                    "Y": {"dtype": "fp16", "shape": [2, 64, hw, hw]}},
        "graph": [{"op": "Conv", "name": "conv", "inputs": ["X", "W"], "outputs": ["Y"],
                   "attrs": {"pad": [[1, 1], [1, 1]], "acc_dtype": "fp32"}}]
    });
    let p = dir.join(format!("conv_{hw}.json"));
    std::fs::write(&p, g.to_string()).expect("written");
    p
}

/// The plan says how the tensor-core epilogue stores (`layout_hints.C_store`): a 7×7 output
/// (49 elements per channel, not a multiple of a 16-byte chunk) is stored from the fragments,
/// element by element, and the plan says so; an 8×8 one is staged through shared memory in
/// 16-byte chunks (`dlc_st_vec<16>`) and the plan has no `C_store`.
#[test]
fn the_plan_says_how_the_epilogue_stores() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (hw, staged) in [(7, false), (8, true)] {
        for arch in ["sm80", "sm90"] {
            let v = views(&conv_fp16(dir.path(), hw), arch);
            check_agree(&format!("conv {hw}x{hw} ({arch})"), &v);
            let plan = &v.dump["kernels"][0]["plan"];
            assert!(plan["algo_choice"].to_string().contains("mma"), "{plan}");
            let hint = plan["layout_hints"]["C_store"].as_str();
            assert_eq!(
                hint,
                (!staged).then_some("fragments"),
                "{hw} ({arch}): {plan}"
            );
        }
        let out = tempfile::tempdir().expect("a temporary directory");
        let st = std::process::Command::new(env!("CARGO_BIN_EXE_dlc-egg"))
            .args(["optimize", "--arch", "sm80", "-o"])
            .arg(out.path())
            .arg(conv_fp16(dir.path(), hw))
            .output()
            .expect("the CLI runs");
        assert!(st.status.success());
        let cu = std::fs::read_to_string(out.path().join("kernels.cu")).expect("kernels.cu");
        assert_eq!(cu.contains("dlc_st_vec<16>"), staged, "{hw}: {cu}");
    }
}

fn program(example: &str) -> dlc_egg::ir::tiny::Program {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(example);
    let g = dlc_egg::ir::frontend::load_file(&path).expect("loads");
    dlc_egg::lower::lower(&g).expect("lowers")
}

/// A plan whose template cannot emit the region is `PlanNotEmittable`, not another kernel.
#[test]
fn an_unemittable_plan_is_an_internal_error() {
    let opts = OptimizeOptions {
        target: Arch::Sm80.target(),
        ..OptimizeOptions::default()
    };
    let o = optimize(&program("layernorm.json"), &opts).expect("optimizes");
    let planned = plan_program(&o.program, &o.model);
    assert_eq!(planned.len(), o.planned.len());
    let mut tried = 0;
    for pk in &planned {
        let Some(Step::Region(r)) = o.program.steps.get(pk.step) else {
            panic!("a planned step is a region")
        };
        let mut choice = pk.choice.clone().expect("planned");
        // Every region of layer norm is a row or pointwise kernel: a tensor-core contraction
        // plan, and a wgmma one, cannot be emitted for it.
        for algo in [Algo::MmaSync, Algo::Wgmma, Algo::Simt] {
            choice.best.knobs = Knobs::Contraction {
                algo,
                bm: 64,
                bn: 64,
                bk: 32,
                stages: 2,
                warps_m: 2,
                warps_n: 2,
                vec_bytes: 4,
                async_: false,
                row_resident: false,
                splits: 1,
            };
            match kernel_of(r, &choice, &o.model.target) {
                Err(CodegenError::PlanNotEmittable { kernel, .. }) => {
                    assert_eq!(kernel, r.name);
                    tried += 1;
                }
                other => panic!("{}: {algo:?} on a non-contraction: {other:?}", r.name),
            }
        }
        // The emitted plan itself builds.
        kernel_of(r, pk.choice.as_ref().expect("planned"), &o.model.target)
            .expect("the plan emits");
    }
    assert!(tried > 0);
}

/// Causal fp16 attention `[B=1, H=2, S=64, d]`.
fn attention_graph(d: u64) -> String {
    format!(
        r#"{{
  "signature": {{
    "inputs": [{{"tensor": "Q", "role": "data"}}, {{"tensor": "K", "role": "data"}}, {{"tensor": "V", "role": "data"}}],
    "outputs": [{{"tensor": "O"}}]
  }},
  "symbols": {{"B": 1, "H": 2, "S": 64}},
  "tensors": {{
    "Q": {{"dtype": "fp16", "shape": ["B", "H", "S", {d}]}},
    "K": {{"dtype": "fp16", "shape": ["B", "H", "S", {d}]}},
    "V": {{"dtype": "fp16", "shape": ["B", "H", "S", {d}]}},
    "O": {{"dtype": "fp16", "shape": ["B", "H", "S", {d}]}}
  }},
  "graph": [
    {{"op": "Attention", "name": "attn", "inputs": ["Q", "K", "V"], "outputs": ["O"],
     "attrs": {{"causal": true, "acc_dtype": "fp32"}}}}
  ]
}}"#
    )
}

/// The extractor prices the attention pair as the one fused kernel it runs as, so the pair is
/// chosen at every head dim the kernel emits — 36 (padded to 48, register-staged, recorded as a
/// synchronous plan) as well as 64 (`cp.async`) — and the printed totals (time, launches) are
/// the planned kernel's.
#[test]
fn attention_is_priced_planned_and_reported_as_one_kernel() {
    for (d, copies) in [(36, false), (64, true)] {
        let g =
            dlc_egg::ir::frontend::load_str(&attention_graph(d), "attention.json").expect("loads");
        let p = dlc_egg::lower::lower(&g).expect("lowers");
        let o = optimize(&p, &OptimizeOptions::default()).expect("optimizes");
        assert_eq!(o.planned.len(), 1, "d = {d}: {:?}", o.planned);
        let pk = &o.planned[0];
        assert!(pk.fused_first.is_some(), "d = {d}: not the fused pair");
        let choice = pk.choice.as_ref().expect("planned");
        assert_eq!(choice.best.plan.template, "attention", "d = {d}");
        assert_eq!(choice.best.plan.async_.enable, copies, "d = {d}");
        assert_eq!(o.cost.time, choice.best.time, "d = {d}");
        assert_eq!(o.cost.kernels, 1, "d = {d}");
        assert_eq!(o.kernels.len(), 1, "d = {d}");
        let text = dlc_egg::optimize::explain::render(&o.report(), false);
        assert!(
            text.starts_with("1 kernel(s)") && text.contains("1 launch(es)"),
            "d = {d}: {text}"
        );
        let emitted = dlc_egg::codegen::emit_program(&o).expect("emits");
        let launches: Vec<_> = emitted
            .manifest
            .steps
            .iter()
            .filter_map(|s| match s {
                ManifestStep::Launch(l) => Some(l.template.as_str()),
                ManifestStep::Alias { .. } => None,
            })
            .collect();
        assert_eq!(launches, vec!["attention"], "d = {d}");
    }
}

/// A `[rows, width]` fp16 normalization graph (`op` LayerNorm or RMSNorm over the last axis).
fn norm_fp16(dir: &Path, op: &str, rows: u64, width: u64) -> std::path::PathBuf {
    let mut inputs = vec![serde_json::json!({"tensor": "X", "role": "data"})];
    let mut tensors = serde_json::json!({
        "X": {"dtype": "fp16", "shape": [rows, width]},
        "Y": {"dtype": "fp16", "shape": [rows, width]},
        "gamma": {"dtype": "fp16", "shape": [width]},
    });
    let mut names = vec!["X", "gamma"];
    inputs.push(serde_json::json!({"tensor": "gamma", "role": "param"}));
    if op == "LayerNorm" {
        inputs.push(serde_json::json!({"tensor": "beta", "role": "param"}));
        tensors["beta"] = serde_json::json!({"dtype": "fp16", "shape": [width]});
        names.push("beta");
    }
    let g = serde_json::json!({
        "signature": {"inputs": inputs, "outputs": [{"tensor": "Y"}]},
        "tensors": tensors,
        "graph": [{"op": op, "name": "norm", "inputs": names, "outputs": ["Y"],
                   "attrs": {"axis": -1, "eps": 1e-5}}]
    });
    let p = dir.join(format!("{op}_{rows}x{width}.json"));
    std::fs::write(&p, g.to_string()).expect("written");
    p
}

/// A normalization is one row kernel that folds each row once, cooperatively, and is planned
/// as one: RMSNorm's `Σ x·x` is a dot product per row (no M and no N axis), not a matrix
/// product whose pointwise fallback folds the whole row again at every element; and with a
/// single row (the outer axis of size 1 leaves the sums without a free axis) the output pass
/// uses the cooperative sums instead of a serial fold of the row per thread.
#[test]
fn a_normalization_folds_each_row_once() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (op, rows, width) in [
        ("RMSNorm", 8192, 4096),
        ("LayerNorm", 1, 100),
        ("RMSNorm", 1, 100),
    ] {
        let path = norm_fp16(dir.path(), op, rows, width);
        for arch in ["sm80", "sm90"] {
            let v = views(&path, arch);
            let ks = check_agree(&format!("{op} {rows}x{width} ({arch})"), &v);
            assert_eq!(ks.len(), 1, "{op} {rows}x{width} ({arch}): {ks:?}");
            assert_eq!(ks[0].1, "row", "{op} {rows}x{width} ({arch}): {ks:?}");
        }
        let out = tempfile::tempdir().expect("a temporary directory");
        let st = std::process::Command::new(env!("CARGO_BIN_EXE_dlc-egg"))
            .args(["optimize", "--arch", "sm80", "-o"])
            .arg(out.path())
            .arg(&path)
            .output()
            .expect("the CLI runs");
        assert!(st.status.success());
        let cu = std::fs::read_to_string(out.path().join("kernels.cu")).expect("kernels.cu");
        let serial = format!("< {width}; ");
        assert!(
            !cu.lines()
                .any(|l| l.contains("for (") && l.contains(&serial)),
            "{op} {rows}x{width}: a loop walks a whole row serially:\n{cu}"
        );
    }
}

/// A depthwise 3×3 convolution at batch 8 (`[8, 16, 56, 56]`, 16 groups): the tensor-core
/// template accepts it (N = 1, K = 9: a 64×64×32 tile filled to 1/64 and 9/32), so the planner
/// prices the pointwise fold too and runs the faster, one kernel (no product tensor of every
/// tap written and summed by a second kernel), emitted as planned.
#[test]
fn a_depthwise_conv_is_priced_as_the_pointwise_fold_too() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let g = serde_json::json!({
        "signature": {"inputs": [{"tensor": "X", "role": "data"}, {"tensor": "W", "role": "param"},
                                 {"tensor": "bias", "role": "param"}],
                      "outputs": [{"tensor": "C"}]},
        "tensors": {"X": {"dtype": "bf16", "shape": [8, 16, 56, 56]},
                    "W": {"dtype": "bf16", "shape": [16, 1, 3, 3]},
                    "bias": {"dtype": "bf16", "shape": [16]},
                    "C": {"dtype": "bf16", "shape": [8, 16, 56, 56]}},
        "graph": [{"op": "Conv", "name": "conv", "inputs": ["X", "W", "bias"], "outputs": ["C"],
                   "attrs": {"pad": 1, "groups": 16, "acc_dtype": "fp32"}}]
    });
    let p = dir.path().join("dwconv.json");
    std::fs::write(&p, g.to_string()).expect("written");
    for arch in ["sm80", "sm90"] {
        let v = views(&p, arch);
        let ks = check_agree(&format!("depthwise conv ({arch})"), &v);
        assert_eq!(ks.len(), 1, "{arch}: {ks:?}");
        assert_eq!(ks[0].1, "pointwise", "{arch}: {ks:?}");
    }
}

/// A split-K plan (`examples/conv_relu_pool.json` on the A100: its convolution split in two
/// along `K`) is what the report, `--dump plan` and the manifest say, and the launch is that
/// plan: `split_k` CTAs per tile on `grid.z`, the partial tiles' and counters' workspaces
/// declared in the manifest (the counters zeroed) and passed before the symbols.
#[test]
fn a_split_k_plan_launches_its_splits_with_their_workspaces() {
    use dlc_egg::codegen::manifest::{BufferRole, KernelArg};
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/conv_relu_pool.json");
    let v = views(&path, "sm80");
    check_agree("conv_relu_pool (sm80)", &v);
    let split = v
        .manifest
        .steps
        .iter()
        .find_map(|s| match s {
            ManifestStep::Launch(l) if l.plan.split_k > 1 => Some(l),
            _ => None,
        })
        .expect("a split-K launch");
    assert_eq!(split.template, "contraction_simt");
    assert_eq!(
        split.grid[2].0.as_int(),
        Some(i64::from(split.plan.split_k))
    );
    let workspaces: Vec<(&str, bool)> = split
        .args
        .iter()
        .filter_map(|a| match a {
            KernelArg::Buffer { name, write: true } => v
                .manifest
                .buffers
                .iter()
                .find(|b| &b.name == name)
                .and_then(|b| match b.role {
                    BufferRole::Workspace { zeroed } => Some((name.as_str(), zeroed)),
                    _ => None,
                }),
            _ => None,
        })
        .collect();
    assert_eq!(workspaces.len(), 2, "{:?}", split.args);
    assert_eq!(
        workspaces.iter().map(|w| w.1).collect::<Vec<_>>(),
        [false, true],
        "partial tiles, then zeroed counters: {workspaces:?}"
    );
    let last_buffer = split
        .args
        .iter()
        .rposition(|a| matches!(a, KernelArg::Buffer { .. }));
    let first_symbol = split
        .args
        .iter()
        .position(|a| matches!(a, KernelArg::Symbol { .. }));
    if let (Some(b), Some(s)) = (last_buffer, first_symbol) {
        assert!(b < s, "buffers before symbols: {:?}", split.args);
    }
}
