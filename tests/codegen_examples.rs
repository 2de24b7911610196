//! Code generation on the seed examples: every example emits for sm80 and sm90, every kernel's
//! GPU IR verifies, the output is deterministic, and the emitted CUDA equals the golden files
//! (`tests/golden/cu/<example>.cu`, sm90). Regenerate them with
//! `UPDATE_GOLDEN=1 cargo test --test codegen_examples`.

mod common;

use dlc_egg::codegen::manifest::{Manifest, ManifestStep};
use dlc_egg::codegen::{generate, gpu, Generated};
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::target::Arch;
use dlc_egg::{ir::frontend, lower};
use std::path::Path;

fn generated(path: &Path, arch: Arch) -> Generated {
    let g = frontend::load_file(path).unwrap_or_else(|d| panic!("{}: {d}", path.display()));
    let p = lower::lower(&g).unwrap_or_else(|d| panic!("{}: {d}", path.display()));
    let opts = OptimizeOptions {
        target: arch.target(),
        ..OptimizeOptions::default()
    };
    let o = optimize(&p, &opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    generate(&o).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_example_emits_verified_kernels_for_both_archs() {
    for ex in common::example_paths() {
        for arch in [Arch::Sm80, Arch::Sm90] {
            let c = generated(&ex, arch);
            assert!(!c.kernels.is_empty(), "{}", ex.display());
            let launches = c
                .emitted
                .manifest
                .steps
                .iter()
                .filter(|s| matches!(s, ManifestStep::Launch(_)))
                .count();
            assert_eq!(launches, c.kernels.len(), "{}", ex.display());
            for k in &c.kernels {
                gpu::verify::verify(&k.kernel, &arch.target())
                    .unwrap_or_else(|e| panic!("{}: {e}", ex.display()));
                // The block size's bounds, or the register cap of a template that sets one.
                let bounds = match k.kernel.max_regs {
                    Some(n) => format!("__maxnreg__({n})"),
                    None => format!("__launch_bounds__({}, 1)", k.kernel.launch.threads()),
                };
                assert!(
                    c.emitted
                        .source
                        .contains(&format!("void {bounds} {}(", k.kernel.name)),
                    "{}: {} not in the source",
                    ex.display(),
                    k.kernel.name
                );
            }
            // The manifest reads back.
            let text = serde_json::to_string(&c.emitted.manifest).expect("json");
            let back: Manifest = serde_json::from_str(&text).expect("parses");
            assert_eq!(back, c.emitted.manifest);
        }
    }
}

#[test]
fn contractions_run_on_tiled_templates_and_norms_on_rows() {
    let template_on = |name: &str, arch: Arch| -> Vec<String> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}.json"));
        generated(&p, arch)
            .kernels
            .iter()
            .map(|k| k.kernel.template.clone())
            .collect()
    };
    let template_of = |name: &str| template_on(name, Arch::Sm80);
    assert!(template_of("gemm_bias_relu")[0].starts_with("contraction"));
    assert!(template_of("conv3x3_s2_p1_silu")[0].starts_with("contraction"));
    assert_eq!(template_of("layernorm"), vec!["row"]);
    // Compute-at as a pooled tile: the convolution's SIMT tile folds each 2×2 window of its
    // rows in its epilogue (H100 4.7 µs, A100 5.4 µs; the seed 003 nest, one thread per pooled
    // point, 5.9 µs on the H100, and the split convolution with a pooling kernel, 6.4 and 7.1
    // µs, are priced slower).
    assert_eq!(
        template_on("conv_relu_pool", Arch::Sm90),
        vec!["contraction_simt"]
    );
    assert_eq!(template_of("conv_relu_pool"), vec!["contraction_simt"]);
}

/// The elementwise example's rows (1024 fp16) are whole 16-byte vectors: its three contiguous
/// inputs are vector loads and its output a vector store, for both architectures.
#[test]
fn elementwise_kernels_use_16_byte_vector_accesses() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bias_gelu_residual.json");
    for arch in [Arch::Sm80, Arch::Sm90] {
        let g = generated(&p, arch);
        assert_eq!(g.kernels.len(), 1);
        let cu = &g.emitted.source;
        assert_eq!(cu.matches("dlc_ld_vec<16>").count(), 3, "{cu}");
        assert_eq!(cu.matches("dlc_st_vec<16>").count(), 1, "{cu}");
        assert!(!cu.contains("dlc_f32(in0["), "no scalar load of X: {cu}");
    }
}

#[test]
fn emitted_cuda_matches_golden_files() {
    let source = |ex: &Path| generated(ex, Arch::Sm90).emitted.source;
    for (ex, got) in common::check_golden_files("cu", "cu", "codegen_examples", "CUDA", &source) {
        assert_eq!(got, source(&ex), "{}: deterministic", ex.display());
    }
}

#[test]
fn optimize_out_dir_writes_the_source_header_and_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_dlc-egg"))
        .args([
            "optimize",
            "examples/gemm_bias_relu.json",
            "--explain",
            "-o",
        ])
        .arg(&out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("runs");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    for f in ["kernels.cu", "dlc_kernel.cuh", "manifest.json"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let m: Manifest =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap())
            .expect("manifest parses");
    assert_eq!(m.source, "kernels.cu");
    assert_eq!(m.outputs, vec![("C2".to_string(), "C2".to_string())]);
    let cu = std::fs::read_to_string(out.join("kernels.cu")).unwrap();
    assert!(cu.contains("#include \"dlc_kernel.cuh\""));
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(stderr.contains("wrote 1 kernel(s)"), "{stderr}");
}

#[test]
fn dump_gpu_and_cu() {
    let run = |layers: &str| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_dlc-egg"))
            .args(["optimize", "examples/layernorm.json", "--dump", layers])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).expect("utf-8")
    };
    let gpu: serde_json::Value = serde_json::from_str(&run("gpu")).expect("json");
    let k = &gpu["gpu_ir"]["kernels"][0];
    assert_eq!(k["template"], "row");
    assert!(k["body"].to_string().contains("WarpReduce"));
    let cu = run("cu");
    assert!(cu.starts_with("// Generated by dlc-egg"));
    assert!(cu.contains("dlc_warp_sum"));
    let both: serde_json::Value = serde_json::from_str(&run("plan,cu")).expect("json");
    assert!(both["cu"]
        .as_str()
        .is_some_and(|s| s.contains("__global__")));
}
