//! CUDA back end: compiling the emitted CUDA C with NVRTC ([`nvrtc`], works without a GPU or a
//! CUDA toolkit) and running a program's manifest on a GPU through the driver API ([`runtime`]).
//!
//! Nothing here is linked against CUDA: libnvrtc and libcuda are loaded at run time (cudarc's
//! `dynamic-loading`). Where they are found:
//!
//! | what | looked for, in order |
//! | --- | --- |
//! | libnvrtc | `$DLC_NVRTC_LIB` (the `.so` file); `<repo>/.cuda/nvidia/cu13/lib/libnvrtc.so.13` (from `scripts/install-cuda-wheels.sh`); the system's library names (`libnvrtc.so.13`, … via `LD_LIBRARY_PATH` / `ld.so.cache`) |
//! | CUDA headers (`cuda_fp16.h`, `cuda_bf16.h`) | `$DLC_CUDA_INCLUDE`; `include/` beside the chosen libnvrtc's `lib/`; `<repo>/.cuda/nvidia/cu13/include`; `$CUDA_HOME/include`, `/usr/local/cuda/include` |
//! | libcuda (driver) | the system's library names (`libcuda.so.1`, …) |
//! | cuobjdump (SASS, [`sass`]) | `$DLC_CUOBJDUMP`; `<repo>/.cuda/nvidia/cu13/bin/cuobjdump`; `cuobjdump` on `PATH` |
//!
//! `<repo>` is the crate's source directory at build time (`CARGO_MANIFEST_DIR`).

pub mod nvrtc;
pub mod runtime;
pub mod sass;

pub use nvrtc::{
    check_manifest_resources, compile, toolchain, CompileOptions, Compiled, KernelResources,
    NvrtcError, Toolchain,
};
pub use runtime::{
    compile_arch, probe, run_manifest, CudaError, DeviceInfo, RunCudaOptions, Timings,
};
pub use sass::{sass_summary, SassError, SassLoop, SassSummary};

use std::path::PathBuf;

/// What to do when NVRTC or the CUDA headers are missing.
pub const INSTALL_SUGGESTION: &str = "run scripts/install-cuda-wheels.sh";

/// The environment variable naming the libnvrtc shared library to use.
pub const ENV_NVRTC_LIB: &str = "DLC_NVRTC_LIB";

/// The environment variable naming the CUDA include directory (`cuda_fp16.h`, `cuda_bf16.h`).
pub const ENV_CUDA_INCLUDE: &str = "DLC_CUDA_INCLUDE";

/// `<repo>/.cuda/nvidia/cu13`: where `scripts/install-cuda-wheels.sh` puts the wheels' files.
pub fn wheel_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(".cuda")
        .join("nvidia")
        .join("cu13")
}
