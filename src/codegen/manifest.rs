//! The JSON manifest `dlc-egg optimize -o DIR` writes beside `kernels.cu`: every buffer of the
//! program, every kernel launch in order with its arguments, launch configuration and plan, and
//! which buffer each graph output is. The CUDA runtime (`crate::cuda`) and the CPU emulation
//! harness both execute a program from this manifest alone.
//!
//! Conventions shared by the emitted code and every executor:
//! - A kernel's parameters are its [`KernelLaunch::args`] in order: buffers first (the region's
//!   inputs, then its outputs, as `const T* __restrict__` / `T* __restrict__` of the buffer's
//!   element type), then one `int` per symbol the kernel's sizes mention, sorted by name, then
//!   the TMA tensor maps of an SM90 kernel ([`KernelArg::TensorMap`]).
//! - `grid` entries are size expressions over the program's symbols (`"(M+63)//64"`), evaluated
//!   with the run's bindings; `block` is constant.
//! - Buffers are dense row-major arrays of their dtype (`fp16`/`bf16`: 2 bytes, `fp32`/`i32`: 4,
//!   `bool`: 1 byte). An alias shares its target's storage.

use crate::ir::dtype::DType;
use crate::ir::region::Size;
use crate::plan::Plan;
use crate::target::Arch;
use serde::{Deserialize, Serialize};

/// The manifest's format tag.
pub const FORMAT: &str = "dlc-egg-kernels/1";

/// `manifest.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// The architecture the kernels were planned for.
    pub arch: Arch,
    /// The CUDA source file (`kernels.cu`), relative to the manifest.
    pub source: String,
    /// The header the source includes (`dlc_kernel.cuh`), relative to the manifest.
    pub header: String,
    /// Every symbol a size mentions, sorted.
    pub symbols: Vec<String>,
    /// Every buffer: graph inputs, kernel outputs, aliases.
    pub buffers: Vec<BufferDecl>,
    /// Launches and aliases in execution order.
    pub steps: Vec<ManifestStep>,
    /// `(graph output, buffer)`.
    pub outputs: Vec<(String, String)>,
}

/// One buffer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferDecl {
    /// The buffer's name (a graph tensor, or a generated intermediate).
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Extents as size expressions over the symbols.
    pub shape: Vec<Size>,
    /// Who fills it.
    pub role: BufferRole,
}

/// Where a buffer comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BufferRole {
    /// A graph input, filled by the caller.
    Input,
    /// Written by a kernel (a graph output or an intermediate).
    Kernel,
    /// Scratch memory of one kernel (split-K's partial tiles and tile counters): allocated
    /// once, never read back; all zero bytes before the first launch when `zeroed` (the
    /// kernel leaves it zero again), of any content otherwise.
    Workspace {
        /// Must be zero before the first launch.
        zeroed: bool,
    },
    /// The same storage as buffer `of`, reshaped.
    Alias {
        /// The buffer whose storage it shares.
        of: String,
    },
}

/// One step.
// A manifest has a handful of steps, read once; boxing the launch would only add noise.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ManifestStep {
    /// A kernel launch.
    Launch(KernelLaunch),
    /// Buffer `name` is buffer `of` reshaped (no work).
    Alias {
        /// The new buffer.
        name: String,
        /// The buffer it reshapes.
        of: String,
    },
}

/// One kernel launch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelLaunch {
    /// The `__global__` function's name in the source.
    pub kernel: String,
    /// The template it was emitted from (`contraction_simt`, `contraction_mma_sync`, `row`,
    /// `pointwise`, `attention`).
    pub template: String,
    /// Parameters, in order.
    pub args: Vec<KernelArg>,
    /// Grid size (x, y, z) as size expressions.
    pub grid: [Size; 3],
    /// Block size (x, y, z).
    pub block: [u32; 3],
    /// Dynamic shared memory, bytes (0 when the kernel only uses static shared memory).
    pub dyn_smem_bytes: u32,
    /// The schedule the kernel implements.
    pub plan: Plan,
    /// The cost model's prediction, microseconds.
    pub predicted_us: f64,
}

/// One kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum KernelArg {
    /// A pointer to a buffer; `write` for outputs.
    Buffer {
        /// The buffer's name.
        name: String,
        /// The kernel writes it (an output parameter).
        write: bool,
    },
    /// An `int` symbol value.
    Symbol {
        /// The symbol's name.
        name: String,
    },
    /// A TMA tensor map over buffer `buffer`, passed by value (`const __grid_constant__
    /// CUtensorMap`, 128 bytes). The executor encodes it with the driver's
    /// `cuTensorMapEncodeTiled`: the buffer's dtype (fp16 or bf16), rank `dims.len()`, the
    /// buffer's address, `dims` (innermost first, evaluated under the bindings), the dense
    /// row-major strides in bytes of dimensions 1.., `box_dims`, element strides 1, no
    /// interleave, `CU_TENSOR_MAP_SWIZZLE_128B`, L2 promotion 256 B, out-of-bounds elements
    /// zero (`CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE`).
    TensorMap {
        /// The buffer the map addresses.
        buffer: String,
        /// The tensor's sizes, innermost first.
        dims: Vec<Size>,
        /// The box (one TMA load) in elements, innermost first.
        box_dims: Vec<u32>,
    },
}
