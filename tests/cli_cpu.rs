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
