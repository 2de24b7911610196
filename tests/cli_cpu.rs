//! `dlc-egg optimize --target cpu`: the generated C and manifest (`-o DIR`) and the native
//! backend's `--explain` account (loop form, what the emitter chose, the CPU roofline's time).
//! Neither compiles C, so no compiler is needed. The cost parameters are pinned to the defaults
//! (`DLC_CPU_COST` names a file that does not exist), whatever this machine has calibrated.

use serde_json::Value;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_dlc-egg");

fn example(name: &str) -> String {
    format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn optimize_cpu(args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .arg("optimize")
        .args(args)
        .args(["--target", "cpu"])
        .env("DLC_CPU_COST", "/nonexistent/dlc-egg-test/cpu-cost.json")
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn explain_for_the_cpu_describes_the_native_kernels_not_gpu_plans() {
    let out = optimize_cpu(&[&example("layernorm.json"), "--explain"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or_default();
    assert!(first.contains("kernel(s) for cpu ("), "{first}");
    assert!(first.contains("predicted") && first.contains(" ms by the CPU roofline"));
    for want in [
        "  form: rows(",
        "  emits: fp32 sum to a scalar in 64 lane accumulators",
        "  predicted: ",
        "e-graph phases:",
    ] {
        assert!(text.contains(want), "missing `{want}` in:\n{text}");
    }
    for gpu_only in ["plan space", "plan: reduction", "sm90"] {
        assert!(!text.contains(gpu_only), "`{gpu_only}` in:\n{text}");
    }
    // Every kernel of the report has its CPU lines.
    let kernels = text.lines().filter(|l| l.starts_with("kernel ")).count();
    let forms = text.lines().filter(|l| l.starts_with("  form: ")).count();
    assert!(kernels > 0);
    assert_eq!(kernels, forms, "{text}");
}

#[test]
fn explain_names_the_packed_gemm_and_its_fused_epilogue() {
    let out = optimize_cpu(&[&example("gemm_bias_relu.json"), "--explain"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "  form: gemm: the contraction's work items",
        "  emits: packed GEMM",
        "  emits: the pointwise epilogue applied to each work item's block while it is hot",
        "compute-bound",
    ] {
        assert!(text.contains(want), "missing `{want}` in:\n{text}");
    }
}

#[test]
fn out_dir_writes_the_c_and_a_manifest_with_forms_notes_and_estimates() {
    let dir = std::env::temp_dir().join(format!("dlc-egg-cli-cpu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_string_lossy().to_string();
    optimize_cpu(&[&example("layernorm.json"), "-o", &d]);
    let c = std::fs::read_to_string(dir.join("kernels.c")).expect("kernels.c");
    assert!(c.contains("int dlc_k0(void *const *dlc_buf"));
    assert!(
        c.contains("DLC_DIV_INV") || c.contains("accv"),
        "no lane reduction"
    );
    let m: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("manifest.json")).expect("manifest"),
    )
    .expect("JSON");
    let kernels = m["kernels"].as_array().expect("kernels");
    assert!(!kernels.is_empty());
    for k in kernels {
        assert!(k["form"].as_str().is_some(), "{k}");
        assert!(k["notes"].as_array().is_some(), "{k}");
        assert!(k["estimate_ms"].as_f64().is_some_and(|e| e > 0.0), "{k}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--explain`, `--dump plan` and `-o`'s manifest print one native plan (`cpu::plan`): per
/// kernel the same form, notes and predicted time, sizes bound by the graph's symbols (the
/// examples' `T = 64`, `M/K/N`), not each view its own (the manifest once priced symbolic sizes
/// at 1024 where `--explain` used the symbols' values).
#[test]
fn explain_dump_plan_and_manifest_agree_kernel_by_kernel() {
    for ex in ["layernorm.json", "gemm_bias_relu.json", "mlp_gelu.json"] {
        let dir =
            std::env::temp_dir().join(format!("dlc-egg-cli-plan-{}-{ex}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let d = dir.to_string_lossy().to_string();
        let out = optimize_cpu(&[&example(ex), "--explain", "--dump", "plan", "-o", &d]);
        let plan: Value = serde_json::from_slice(&out.stdout).expect("--dump plan is JSON");
        assert_eq!(plan["target"], "cpu", "{plan}");
        let explain = String::from_utf8_lossy(&out.stderr).to_string();
        let m: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("manifest.json")).expect("manifest"),
        )
        .expect("JSON");
        let pk = plan["kernels"].as_array().expect("plan kernels");
        let mk = m["kernels"].as_array().expect("manifest kernels");
        assert!(!pk.is_empty());
        assert_eq!(pk.len(), mk.len(), "{ex}");
        assert_eq!(plan["threads"], m["threads"], "{ex}");
        assert_eq!(plan["cost_params"], m["cost_params"], "{ex}");
        let mut total = 0.0;
        for (p, k) in pk.iter().zip(mk) {
            assert_eq!(p["kernel"], k["region"], "{ex}");
            assert_eq!(p["form"], k["form"], "{ex}");
            assert_eq!(p["notes"], k["notes"], "{ex}");
            let ms = p["roofline"]["predicted_ms"].as_f64().expect("priced");
            assert_eq!(Some(ms), k["estimate_ms"].as_f64(), "{ex}");
            total += ms;
            // --explain's block of this kernel prints the same form and time.
            let name = p["kernel"].as_str().unwrap_or_default();
            let block: Vec<&str> = explain
                .lines()
                .skip_while(|l| !l.starts_with(&format!("kernel {name}:")))
                .skip(1)
                .take_while(|l| l.starts_with("  "))
                .collect();
            let form = p["form"].as_str().unwrap_or_default();
            assert!(
                block
                    .iter()
                    .any(|l| l.starts_with(&format!("  form: {form}"))),
                "{ex}: {name}: {block:?}"
            );
            let want = format!("  predicted: {ms:.3} ms");
            assert!(
                block.iter().any(|l| l.starts_with(&want)),
                "{ex}: {name}: `{want}` not in {block:?}"
            );
        }
        assert!((plan["predicted_ms"].as_f64().unwrap_or(-1.0) - total).abs() < 1e-9);
        let head = explain
            .lines()
            .find(|l| l.contains("by the CPU roofline"))
            .unwrap_or_default();
        assert!(head.contains(&format!("predicted {total:.3} ms")), "{head}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
