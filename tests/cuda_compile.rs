//! NVRTC compile path (no GPU needed): hand-written kernels in `tests/data/cuda/` for success
//! and every failure kind, the manifest resource check, and every example through optimize →
//! emit → compile for sm_80 and sm_90a.
//!
//! libnvrtc comes from `scripts/install-cuda-wheels.sh` (`bash .ci/run` runs it). Without it
//! these tests fail with that suggestion, unless `DLC_SKIP_NVRTC=1`, where they print a skip
//! line and pass.

mod common;

use dlc_egg::codegen::manifest::{Manifest, ManifestStep};
use dlc_egg::cuda::nvrtc::STATIC_SMEM_LIMIT;
use dlc_egg::cuda::{check_manifest_resources, compile, toolchain, CompileOptions, NvrtcError};
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::target::Arch;
use dlc_egg::{ir::frontend, lower};
use std::path::Path;

const ARCHS: [Arch; 2] = [Arch::Sm80, Arch::Sm90];

/// Whether NVRTC is here; panics with the install suggestion when it is not, unless
/// `DLC_SKIP_NVRTC=1`.
fn nvrtc_here(test: &str) -> bool {
    match toolchain() {
        Ok(_) => true,
        Err(e) if std::env::var("DLC_SKIP_NVRTC").is_ok_and(|v| v == "1") => {
            eprintln!("skipping {test} (DLC_SKIP_NVRTC=1): {e}");
            false
        }
        Err(e) => panic!("{e} (or set DLC_SKIP_NVRTC=1 to skip the NVRTC tests)"),
    }
}

fn kernel_source(name: &str) -> String {
    let path = format!("tests/data/cuda/{name}");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn rows_manifest() -> Manifest {
    serde_json::from_str(&kernel_source("rows.manifest.json")).expect("a valid manifest")
}

#[test]
fn mma_sync_cp_async_kernel_compiles_with_resources() {
    if !nvrtc_here("mma_sync_cp_async_kernel_compiles_with_resources") {
        return;
    }
    let src = kernel_source("mma_cp_async.cu");
    for arch in ARCHS {
        let c = compile(&src, arch, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{arch:?}: {e}"));
        assert_eq!(c.arch, arch);
        assert_eq!(
            &c.cubin[..4],
            b"\x7fELF",
            "{arch:?}: a cubin is an ELF image"
        );
        assert_eq!(c.kernels.len(), 1, "{arch:?}: {:?}", c.kernels);
        let k = &c.kernels[0];
        assert_eq!(k.name, "mma_cp_async");
        // 16×16 + 16×8 halves staged in shared memory.
        assert_eq!(k.static_smem_bytes, 768, "{arch:?}");
        assert!((8..=64).contains(&k.registers), "{arch:?}: {k:?}");
        assert_eq!(k.spill_bytes, 0);
        let target = if arch == Arch::Sm80 {
            "'sm_80'"
        } else {
            "'sm_90a'"
        };
        assert!(
            c.log.contains(target),
            "{arch:?}: ptxas ran for the real target\n{}",
            c.log
        );
    }
}

#[test]
fn wgmma_compiles_for_sm90a_and_is_rejected_for_sm80() {
    if !nvrtc_here("wgmma_compiles_for_sm90a_and_is_rejected_for_sm80") {
        return;
    }
    let src = kernel_source("wgmma.cu");
    let c = compile(&src, Arch::Sm90, &CompileOptions::default()).expect("sm_90a has wgmma");
    assert_eq!(c.kernels[0].name, "wgmma_probe");
    match compile(&src, Arch::Sm80, &CompileOptions::default()) {
        Err(NvrtcError::Compile { target, log }) => {
            assert_eq!(target, "sm_80");
            assert!(
                log.contains("wgmma") && log.contains("not supported"),
                "{log}"
            );
        }
        other => panic!("wgmma on sm_80: {other:?}"),
    }
}

#[test]
fn syntax_error_is_reported_with_the_log() {
    if !nvrtc_here("syntax_error_is_reported_with_the_log") {
        return;
    }
    match compile(
        &kernel_source("syntax_error.cu"),
        Arch::Sm80,
        &CompileOptions::default(),
    ) {
        Err(e @ NvrtcError::Compile { .. }) => {
            let text = e.to_string();
            assert!(text.contains("kernels.cu(2): error"), "{text}");
            assert!(text.contains("1.0f +;"), "the log quotes the line: {text}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn static_shared_memory_overuse_is_an_error() {
    if !nvrtc_here("static_shared_memory_overuse_is_an_error") {
        return;
    }
    let src = kernel_source("too_much_smem.cu");
    for arch in ARCHS {
        match compile(&src, arch, &CompileOptions::default()) {
            Err(NvrtcError::StaticSharedMemory {
                kernel,
                static_bytes,
                limit,
                ..
            }) => {
                assert_eq!(kernel, "big_static_smem", "{arch:?}");
                assert_eq!(
                    (static_bytes, limit),
                    (65536, STATIC_SMEM_LIMIT),
                    "{arch:?}"
                );
            }
            other => panic!("{arch:?}: {other:?}"),
        }
    }
}

#[test]
fn register_spill_is_an_error_naming_the_kernel() {
    if !nvrtc_here("register_spill_is_an_error_naming_the_kernel") {
        return;
    }
    let src = kernel_source("spills.cu");
    for arch in ARCHS {
        match compile(&src, arch, &CompileOptions::default()) {
            Err(e @ NvrtcError::RegisterSpill { .. }) => {
                let NvrtcError::RegisterSpill {
                    kernel,
                    spill_bytes,
                    ..
                } = &e
                else {
                    unreachable!()
                };
                assert_eq!(kernel, "spills", "{arch:?}");
                assert!(*spill_bytes > 0, "{arch:?}");
                assert!(e.to_string().contains("`spills` spills registers"), "{e}");
            }
            other => panic!("{arch:?}: {other:?}"),
        }
    }
}

#[test]
fn headers_are_passed_by_name() {
    if !nvrtc_here("headers_are_passed_by_name") {
        return;
    }
    let src = "#include \"helpers.cuh\"\n\
               extern \"C\" __global__ void twice(float* y) { y[threadIdx.x] = dbl(y[threadIdx.x]); }\n";
    let opts = CompileOptions {
        headers: vec![(
            "helpers.cuh".into(),
            "#pragma once\n__device__ inline float dbl(float x) { return 2.0f * x; }\n".into(),
        )],
        ..CompileOptions::default()
    };
    let c = compile(src, Arch::Sm80, &opts).expect("the named header is found");
    assert_eq!(c.kernels[0].name, "twice");
    // Without the header, the include fails.
    let e = compile(src, Arch::Sm80, &CompileOptions::default()).expect_err("no header");
    assert!(e.to_string().contains("helpers.cuh"), "{e}");
    // The project's device header compiles on its own for both targets, fast math included.
    for arch in ARCHS {
        for fast_math in [false, true] {
            let opts = CompileOptions {
                fast_math,
                line_info: true,
                ..CompileOptions::default()
            };
            compile("#include \"dlc_kernel.cuh\"\n", arch, &opts)
                .unwrap_or_else(|e| panic!("{arch:?} fast_math={fast_math}: {e}"));
        }
    }
}

#[test]
fn hand_written_program_fits_its_manifest() {
    if !nvrtc_here("hand_written_program_fits_its_manifest") {
        return;
    }
    let src = kernel_source("rows.cu");
    let manifest = rows_manifest();
    for arch in ARCHS {
        let c = compile(&src, arch, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{arch:?}: {e}"));
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, vec!["scale_rows", "sum_rows"], "{arch:?}");
        check_manifest_resources(&c, &manifest).unwrap_or_else(|e| panic!("{arch:?}: {e}"));
    }
}

#[test]
fn launches_over_the_limits_are_errors() {
    if !nvrtc_here("launches_over_the_limits_are_errors") {
        return;
    }
    let src = kernel_source("rows.cu");
    let with = |f: &dyn Fn(&mut dlc_egg::codegen::manifest::KernelLaunch)| {
        let mut m = rows_manifest();
        for step in &mut m.steps {
            if let ManifestStep::Launch(l) = step {
                if l.kernel == "sum_rows" {
                    f(l);
                }
            }
        }
        m
    };
    // 200 KiB of dynamic shared memory: over sm_80's 163 KiB, within sm_90's 227 KiB.
    let big = with(&|l| l.dyn_smem_bytes = 200 * 1024);
    let c80 = compile(&src, Arch::Sm80, &CompileOptions::default()).expect("compiles");
    match check_manifest_resources(&c80, &big) {
        Err(NvrtcError::SharedMemory {
            kernel,
            dyn_bytes,
            limit,
            ..
        }) => {
            assert_eq!(kernel, "sum_rows");
            assert_eq!((dyn_bytes, limit), (200 * 1024, 163 * 1024));
        }
        other => panic!("{other:?}"),
    }
    let c90 = compile(&src, Arch::Sm90, &CompileOptions::default()).expect("compiles");
    check_manifest_resources(&c90, &big).expect("227 KiB on sm_90");
    let huge = with(&|l| l.dyn_smem_bytes = 228 * 1024);
    assert!(matches!(
        check_manifest_resources(&c90, &huge),
        Err(NvrtcError::SharedMemory { .. })
    ));
    let wide = with(&|l| l.block = [2048, 1, 1]);
    assert!(matches!(
        check_manifest_resources(&c80, &wide),
        Err(NvrtcError::LaunchResources { .. })
    ));
    let renamed = with(&|l| l.kernel = "sum_rows_v2".into());
    match check_manifest_resources(&c80, &renamed) {
        Err(NvrtcError::MissingKernel { kernel, defined }) => {
            assert_eq!(kernel, "sum_rows_v2");
            assert_eq!(defined, "scale_rows, sum_rows");
        }
        other => panic!("{other:?}"),
    }
}

/// The whole path for every example (and `tests/data/vector_access.json`, the vector access
/// forms, and `tests/data/conv_relu_avgpool.json`, a compute-at kernel) and both targets: load, lower, optimize for the target, emit CUDA, compile it with
/// NVRTC for that target (ptxas included: no spills, static shared memory within 48 KiB) and
/// check every launch of the manifest against the kernels' resources.
#[test]
fn every_example_compiles_for_sm80_and_sm90a() {
    if !nvrtc_here("every_example_compiles_for_sm80_and_sm90a") {
        return;
    }
    let mut failures = Vec::new();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let extra = ["vector_access.json", "conv_relu_avgpool.json"].map(|f| data.join(f));
    for path in common::example_paths().into_iter().chain(extra) {
        let graph = frontend::load_file(&path).unwrap_or_else(|d| panic!("{path:?}: {d:?}"));
        let prog = lower::lower(&graph).unwrap_or_else(|d| panic!("{path:?}: {d:?}"));
        for arch in ARCHS {
            let opts = OptimizeOptions {
                target: arch.target(),
                ..OptimizeOptions::default()
            };
            let what = format!("{} for {arch:?}", path.display());
            let optimized = optimize(&prog, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
            let emitted = match dlc_egg::codegen::emit_program(&optimized) {
                Ok(e) => e,
                Err(e) => {
                    failures.push(format!("{what}: emit: {e}"));
                    continue;
                }
            };
            assert_eq!(emitted.manifest.arch, arch, "{what}: the manifest's arch");
            let started = std::time::Instant::now();
            let compiled = match compile(&emitted.source, arch, &CompileOptions::default()) {
                Ok(c) => c,
                Err(e) => {
                    failures.push(format!("{what}: {e}"));
                    continue;
                }
            };
            eprintln!(
                "{what}: {} kernels in {:.0} ms",
                compiled.kernels.len(),
                started.elapsed().as_secs_f64() * 1e3
            );
            if let Err(e) = check_manifest_resources(&compiled, &emitted.manifest) {
                failures.push(format!("{what}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
