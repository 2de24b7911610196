//! The GPU steps of the pipeline (`dlc-egg run --device cuda`): emit CUDA for the GPU that is
//! here (its compute capability picks `--arch`), compile it with NVRTC and run it through the
//! driver API ([`crate::cuda::run_manifest`]); with `repeat > 0`, time that many runs after a
//! warm-up (`run` writes them to `<out-dir>/timing.json`).
//!
//! | code | kind | when |
//! | --- | --- | --- |
//! | E0400 | DeviceUnavailable | no CUDA driver library, no GPU, a GPU that is neither sm_80 nor sm_90, or no NVRTC |
//! | E0401 | CodegenFailed | internal: a kernel could not be emitted as CUDA |
//! | E0402 | CudaCompileFailed | internal: NVRTC rejected the emitted CUDA, or a launch exceeds the GPU's limits |
//! | E0403 | CudaRunFailed | internal: a driver call or a kernel failed, or the manifest is inconsistent |
//! | E0404 | GridLimitExceeded | a launch's grid at the bound sizes exceeds the GPU's grid limits |
//! | E0405 | DeviceMemoryExceeded | `optimize`: the signature tensors at their concrete sizes exceed the GPU's memory |

use super::PreparedInputs;
use crate::cuda::{self, CudaError, DeviceInfo, NvrtcError, RunCudaOptions, Timings};
use crate::diag::codes;
use crate::diag::{optimizer_bug, Failure};
use crate::diag::{Diagnostic, Location};
use crate::ir::tiny::Program;
use crate::optimize::{optimize, OptimizeOptions};
use crate::tensor::Tensor;
use std::collections::BTreeMap;

fn device_argument() -> Location {
    Location::Argument {
        argument: "--device cuda".into(),
    }
}

/// `E0405 DeviceMemoryExceeded` when `graph`'s signature tensors, at their concrete sizes,
/// need more memory than the GPUs planned for have
/// ([`crate::codegen::gpu::verify::check_device_memory`]).
pub fn check_device_memory(graph: &crate::ir::frontend::Graph) -> Result<(), Failure> {
    crate::codegen::gpu::verify::check_device_memory(graph).map_err(|e| {
        Failure::user(Diagnostic::error(
            codes::DEVICE_MEMORY_EXCEEDED,
            Location::Tensor {
                tensor: e.largest.clone(),
            },
            e.to_string(),
            "no kernel can run this on one GPU: make the sizes smaller (split the batch) or \
             leave them symbolic and bind smaller values at run time",
        ))
    })
}

/// `E0400 DeviceUnavailable` unless a supported GPU, its driver and NVRTC are all here.
pub fn check_cuda() -> Result<DeviceInfo, Failure> {
    let device = cuda::probe(0).map_err(cuda_failure)?;
    cuda::toolchain().map_err(|e| cuda_failure(CudaError::Nvrtc(e)))?;
    Ok(device)
}

/// The diagnostic for a [`CudaError`]: a missing or unsupported device or NVRTC is the user's
/// environment (`E0400`, exit status 2); anything else is a compiler bug (exit status 1).
pub fn cuda_failure(e: CudaError) -> Failure {
    let unavailable = |why: String, suggestion: String| {
        Failure::user(Diagnostic::error(
            codes::DEVICE_UNAVAILABLE,
            device_argument(),
            why,
            suggestion,
        ))
    };
    match e {
        CudaError::NoDevice { why, suggestion } => unavailable(why, suggestion),
        e @ CudaError::UnsupportedArch { .. } => unavailable(
            e.to_string(),
            "run on an A100/H100-class GPU (sm_80 or sm_90), or use --device cpu".into(),
        ),
        e @ CudaError::ArchTooNew { .. } => unavailable(
            e.to_string(),
            "drop --arch to compile for this GPU, or pass the GPU's own or an older one".into(),
        ),
        CudaError::Nvrtc(NvrtcError::Unavailable { why, suggestion }) => unavailable(
            format!("NVRTC is not available: {why}"),
            format!(
                "{suggestion} (or set {} to libnvrtc.so and {} to the CUDA include directory), \
                 or use --device cpu",
                cuda::ENV_NVRTC_LIB,
                cuda::ENV_CUDA_INCLUDE
            ),
        ),
        CudaError::GridLimit(e) => Failure::user(Diagnostic::error(
            codes::GRID_LIMIT_EXCEEDED,
            device_argument(),
            format!("the sizes bound are too large for the generated launch geometry: {e}"),
            "run smaller sizes (split the batch), or use --device cpu; TODO(issue 15): \
             templates put the largest tile count on grid.x",
        )),
        CudaError::Nvrtc(e) => Failure::internal(Diagnostic::error(
            codes::CUDA_COMPILE_FAILED,
            device_argument(),
            format!("the generated CUDA does not compile or does not fit the GPU: {e}"),
            "this is a compiler bug; use --device reference for the reference result, and report the \
             graph.json",
        )),
        e => Failure::internal(Diagnostic::error(
            codes::CUDA_RUN_FAILED,
            device_argument(),
            format!("running the generated kernels failed: {e}"),
            "this is a compiler bug (or a GPU fault); use --device reference for the reference result, \
             and report the graph.json",
        )),
    }
}

/// `kernels.cu` and its manifest for a program without its plans (a cached shape cluster's):
/// every kernel planned once ([`crate::cost::program::plan_program`]), then emitted exactly as
/// planned ([`crate::codegen::emit::emit_planned`]). An optimized program carries its plans
/// (`crate::codegen::generate`).
pub fn plan_and_emit(
    program: &crate::ir::region::program::RegionProgram,
    model: &crate::cost::CostModel,
) -> Result<crate::codegen::Generated, crate::codegen::CodegenError> {
    let planned = crate::cost::program::plan_program(program, model);
    crate::codegen::emit::emit_planned(program, &planned, &model.target)
}

/// Emits CUDA for a shape cluster's cached plan (`crate::shapes`) and runs it on `prepared`'s
/// inputs with the specialized program's binding (`T_d = T / d`).
pub fn evaluate_cuda_plan(
    c: &crate::shapes::Compiled,
    opts: &OptimizeOptions,
    prepared: &PreparedInputs,
    device: &DeviceInfo,
    repeat: u32,
) -> Result<(BTreeMap<String, Tensor>, Timings), Failure> {
    let generated = plan_and_emit(&c.plan.program, &c.plan.model(opts))
        .map_err(|e| codegen_failed(&e.to_string()))?;
    let run = RunCudaOptions {
        repeat,
        device: device.ordinal,
        arch: Some(device.arch),
        ..RunCudaOptions::default()
    };
    cuda::run_manifest(&generated.emitted, &prepared.tensors, &c.bindings, &run)
        .map_err(cuda_failure)
}

fn codegen_failed(why: &str) -> Failure {
    Failure::internal(Diagnostic::error(
        codes::CODEGEN_FAILED,
        device_argument(),
        format!("the optimized program cannot be emitted as CUDA: {why}"),
        "this is a compiler bug; use --device reference for the reference result, and report the \
         graph.json",
    ))
}

/// Optimizes `prog` for `device`'s architecture (default options otherwise), emits CUDA and
/// runs it on `prepared`'s inputs; `repeat` timed runs follow a warm-up when `repeat > 0`.
pub fn evaluate_cuda(
    prog: &Program,
    prepared: &PreparedInputs,
    device: &DeviceInfo,
    repeat: u32,
) -> Result<(BTreeMap<String, Tensor>, Timings), Failure> {
    let opts = OptimizeOptions {
        target: device.arch.target(),
        ..OptimizeOptions::default()
    };
    let optimized =
        optimize(prog, &opts).map_err(|e| Failure::internal(optimizer_bug(&e.to_string())))?;
    let emitted =
        crate::codegen::emit_program(&optimized).map_err(|e| codegen_failed(&e.to_string()))?;
    let run = RunCudaOptions {
        repeat,
        device: device.ordinal,
        arch: Some(device.arch),
        ..RunCudaOptions::default()
    };
    cuda::run_manifest(&emitted, &prepared.tensors, &prepared.bindings, &run).map_err(cuda_failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_pieces_are_e0400_with_their_reason() {
        let no_gpu = cuda_failure(CudaError::NoDevice {
            why: "no CUDA driver library".into(),
            suggestion: "use --device cpu".into(),
        });
        assert!(!no_gpu.internal);
        assert_eq!(no_gpu.diagnostics.first_code(), "E0400");
        let no_nvrtc = cuda_failure(CudaError::Nvrtc(NvrtcError::Unavailable {
            why: "libnvrtc was not found".into(),
            suggestion: cuda::INSTALL_SUGGESTION.into(),
        }));
        assert_eq!(no_nvrtc.diagnostics.first_code(), "E0400");
        let d = &no_nvrtc.diagnostics.0[0];
        assert!(d.why.contains("libnvrtc was not found"), "{}", d.why);
        assert!(
            d.suggestion.contains("install-cuda-wheels.sh"),
            "{}",
            d.suggestion
        );
        let arch = cuda_failure(CudaError::UnsupportedArch {
            device: "GPU".into(),
            major: 7,
            minor: 5,
        });
        assert_eq!(arch.diagnostics.first_code(), "E0400");
    }

    #[test]
    fn compiler_faults_are_internal() {
        let c = cuda_failure(CudaError::Nvrtc(NvrtcError::Compile {
            target: "sm_80".into(),
            log: "error".into(),
        }));
        assert!(c.internal);
        assert_eq!(c.diagnostics.first_code(), "E0402");
        let r = cuda_failure(CudaError::Driver {
            call: "cuLaunchKernel".into(),
            error: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
        });
        assert!(r.internal);
        assert_eq!(r.diagnostics.first_code(), "E0403");
    }

    #[test]
    fn grids_over_the_limits_are_a_user_diagnostic() {
        let e = crate::codegen::gpu::verify::check_grid("conv", [1, 100352, 1])
            .expect_err("over the limit");
        let f = cuda_failure(CudaError::GridLimit(e));
        assert!(!f.internal);
        assert_eq!(f.diagnostics.first_code(), "E0404");
        assert!(f.diagnostics.0[0].why.contains("grid.y = 100352"));
    }
}
