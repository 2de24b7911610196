//! Plan → GPU dialect IR → CUDA C. Built on `ir`, `plan` and `target`; never on `rules`, and never
//! on `cost`: the cost model asks the templates what they emit (`templates::applicability`),
//! and code generation builds the plans the cost model chose (`crate::plan::priced`).

pub mod cexpr;
pub mod emit;
pub mod gpu;
pub mod host;
pub mod manifest;
pub mod scalar;
pub mod templates;

use crate::ir::region::program::RegionProgram;
use manifest::Manifest;

/// The name every emitted `kernels.cu` includes its helpers by.
pub const HEADER_NAME: &str = "dlc_kernel.cuh";

/// The device header (NVRTC / nvcc): `#include "dlc_kernel.cuh"` in the emitted source.
pub const DEVICE_HEADER: &str = concat!(
    include_str!("include/dlc_kernel.cuh"),
    include_str!("include/dlc_kernel_sm90.cuh")
);

/// The host emulation header: the same API for `g++`, provided under [`HEADER_NAME`] when the
/// emitted source is compiled on the CPU ([`host`]). Three files, one header.
pub const EMU_HEADER: &str = concat!(
    include_str!("include/dlc_emu.h"),
    include_str!("include/dlc_emu_runtime.h"),
    include_str!("include/dlc_emu_warp.h"),
    include_str!("include/dlc_emu_sm90.h")
);

/// An emitted program: the CUDA source and its manifest.
#[derive(Clone, Debug)]
pub struct Emitted {
    /// `kernels.cu`.
    pub source: String,
    /// `manifest.json`.
    pub manifest: Manifest,
}

/// Why code generation failed (always a compiler bug or an unsupported kernel).
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    #[error("kernel `{kernel}`: {why}")]
    /// A kernel no template can emit (an unsupported region shape or op).
    Unsupported {
        /// The kernel's name.
        kernel: String,
        /// What is not supported.
        why: String,
    },
    /// The planned program holds a plan its template cannot emit for the region (the plan
    /// space admitted a point code generation does not implement: an internal error).
    #[error("kernel `{kernel}`: internal error: plan `{plan}` cannot be emitted: {why}")]
    PlanNotEmittable {
        /// The kernel's name.
        kernel: String,
        /// The plan, as printed in `--explain`.
        plan: String,
        /// Why its template cannot emit it.
        why: String,
    },
}

/// What code generation reads of an optimized program (`crate::optimize::Optimized`): its
/// region program, every kernel's plan (chosen once by `crate::cost::program::plan_program`),
/// and the target the plans were chosen for. Code generation never prices or chooses.
pub trait PlannedProgram {
    /// The extracted region program.
    fn program(&self) -> &RegionProgram;
    /// Every kernel of [`PlannedProgram::program`] with its plan, in launch order.
    fn planned(&self) -> &[emit::PlannedKernel];
    /// The target the plans were chosen for.
    fn target(&self) -> &crate::target::Target;
}

/// Emits every kernel of an optimized program exactly as planned (`emit::emit_planned` on its
/// program, its plans and its target).
pub fn emit_program(opt: &impl PlannedProgram) -> Result<Emitted, CodegenError> {
    generate(opt).map(|g| g.emitted)
}

/// Code generation's full result: the GPU IR of every kernel and the emitted files.
#[derive(Clone, Debug)]
pub struct Generated {
    /// Every kernel's GPU IR, plan, program step and arguments, in launch order.
    pub kernels: Vec<emit::EmittedKernel>,
    /// The emitted `kernels.cu` and manifest.
    pub emitted: Emitted,
    /// The architecture the code is generated for.
    pub arch: crate::target::Arch,
}

/// Generates the kernels of an optimized program.
pub fn generate(opt: &impl PlannedProgram) -> Result<Generated, CodegenError> {
    emit::emit_planned(opt.program(), opt.planned(), opt.target())
}

impl Generated {
    /// `--dump gpu`: `{"gpu_ir": {"arch", "kernels": [Kernel…]}}` (seed 001 §9.3, one entry
    /// per kernel).
    pub fn gpu_ir_json(&self) -> serde_json::Value {
        let ks: Vec<&gpu::Kernel> = self.kernels.iter().map(|k| &k.kernel).collect();
        serde_json::json!({"gpu_ir": {"arch": self.arch, "kernels": ks}})
    }

    /// Writes `kernels.cu`, the device header and `manifest.json` into `dir` (created if
    /// needed); returns the paths written.
    pub fn write_dir(&self, dir: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let manifest = serde_json::to_string_pretty(&self.emitted.manifest)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let files = [
            (
                self.emitted.manifest.source.as_str(),
                self.emitted.source.clone(),
            ),
            (HEADER_NAME, DEVICE_HEADER.to_string()),
            ("manifest.json", manifest + "\n"),
        ];
        let mut out = Vec::new();
        for (name, text) in files {
            let p = dir.join(name);
            std::fs::write(&p, text)?;
            out.push(p);
        }
        Ok(out)
    }
}
