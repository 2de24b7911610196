//! Smoke test of the static GPU performance model `bench/gpu/estimate.py` (issue 15): on one
//! small case (the 4096³ fp16 GEMM for sm_80: one `dlc-egg optimize`, one NVRTC compile, one
//! `cuobjdump -sass`, a few seconds) the script must find the kernel's tensor-core main loop in
//! the SASS and print a finite estimate and ratio. Needs python3, NVRTC and cuobjdump (the
//! `.cuda/` wheels of `scripts/install-cuda-wheels.sh`); skipped with a line when NVRTC is
//! absent and `DLC_SKIP_NVRTC=1`, as the other NVRTC tests.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[test]
fn the_static_estimate_models_the_gemm_main_loop() {
    if let Err(e) = dlc_egg::cuda::toolchain() {
        if std::env::var("DLC_SKIP_NVRTC").is_ok_and(|v| v == "1") {
            eprintln!("skipping gpu_estimate (DLC_SKIP_NVRTC=1): {e}");
            return;
        }
        panic!("{e} (or set DLC_SKIP_NVRTC=1 to skip the NVRTC tests)");
    }
    if let Err(e) = dlc_egg::cuda::sass::cuobjdump() {
        panic!("{e}");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(root.join("bench/gpu/estimate.py"))
        .args(["--cases", "gemm_4096", "--archs", "sm80", "--json", "--dlc"])
        .arg(env!("CARGO_BIN_EXE_dlc-egg"))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "estimate.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    let est = r["est_us"].as_f64().expect("est_us");
    let ratio = r["ratio"].as_f64().expect("ratio");
    assert!(est.is_finite() && est > 0.0, "{r}");
    assert!(ratio.is_finite() && ratio > 0.0, "{r}");
    let k = &r["kernels"][0];
    assert!(
        k["loop"]["hmma"].as_u64().unwrap_or(0) > 0,
        "no HMMA main loop: {r}"
    );
    assert!(k["occupancy"].as_u64().unwrap_or(0) > 0, "{r}");
    // 2·4096³ FLOP can take no less than the tensor peak allows (312 TFLOP/s: 440 µs).
    assert!(est > 440.0, "faster than the A100's peak: {r}");
}
