//! Plan → GPU dialect IR → CUDA C. Built on `ir` and `extract`, never on `rules`.

pub mod host;
pub mod manifest;

use crate::optimize::Optimized;
use manifest::Manifest;

/// The name every emitted `kernels.cu` includes its helpers by.
pub const HEADER_NAME: &str = "dlc_kernel.cuh";

/// The device header (NVRTC / nvcc): `#include "dlc_kernel.cuh"` in the emitted source.
pub const DEVICE_HEADER: &str = include_str!("include/dlc_kernel.cuh");

/// The host emulation header: the same API for `g++`, provided under [`HEADER_NAME`] when the
/// emitted source is compiled on the CPU ([`host`]). Three files, one header.
pub const EMU_HEADER: &str = concat!(
    include_str!("include/dlc_emu.h"),
    include_str!("include/dlc_emu_runtime.h"),
    include_str!("include/dlc_emu_warp.h")
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
    Unsupported { kernel: String, why: String },
}

/// Emits every kernel of an optimized program. TODO(issue 5): in progress.
pub fn emit_program(opt: &Optimized) -> Result<Emitted, CodegenError> {
    Err(CodegenError::Unsupported {
        kernel: opt
            .kernels
            .first()
            .map(|k| k.name.clone())
            .unwrap_or_default(),
        why: "code generation is not implemented yet".into(),
    })
}
