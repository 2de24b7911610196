//! Running an emitted program on a GPU from its manifest alone, through the CUDA driver API
//! (cudarc, loaded at run time: no CUDA is needed to build, and a machine without a driver or a
//! GPU gets [`CudaError::NoDevice`], never a panic).
//!
//! [`run_manifest`]: pick the architecture from the device's compute capability (8.x → sm_80,
//! 9.x → sm_90a), compile with NVRTC and check every launch's resources, load the cubin, allocate
//! every buffer (an alias shares its target's storage; buffers kernels write start filled with
//! `0xFF` bytes — NaN for floats — so that an element no kernel writes shows), upload the inputs,
//! launch every step in order, synchronize and copy the outputs back. With `repeat > 0` the first
//! run is the warm-up and `repeat` more runs are timed with CUDA events.
//!
//! The pure parts — buffer layout ([`plan_buffers`]), launch configuration ([`plan_launches`]),
//! tensor ↔ bytes ([`tensor_bytes`], [`tensor_from_bytes`]) — are public and tested without a GPU.

use super::nvrtc::{self, CompileOptions, NvrtcError};
use crate::codegen::gpu::verify::{check_grid, GridLimitError};
use crate::codegen::manifest::{BufferRole, KernelArg, Manifest, ManifestStep};
use crate::codegen::Emitted;
use crate::ir::dtype::DType;
use crate::target::Arch;
use crate::tensor::{Tensor, TensorData};
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use std::collections::BTreeMap;
use std::ffi::{c_void, CString};

/// Why a program could not run on the GPU.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// No usable CUDA driver or GPU on this machine.
    #[error("no CUDA device: {why}; {suggestion}")]
    NoDevice {
        /// What failed (the driver library, `cuInit`, no device).
        why: String,
        /// What to install or check.
        suggestion: String,
    },
    /// The GPU's compute capability is neither 8.x nor 9.x.
    #[error("{device} has compute capability {major}.{minor}; only 8.x (sm_80) and 9.x (sm_90a) are supported")]
    UnsupportedArch {
        /// The device's name.
        device: String,
        /// Compute capability, major.
        major: i32,
        /// Compute capability, minor.
        minor: i32,
    },
    /// `run --arch` asked for kernels of a newer architecture than the device's.
    #[error("{device} is {device_arch}; it cannot run {wanted} kernels")]
    ArchTooNew {
        /// The device's name.
        device: String,
        /// The device's architecture.
        device_arch: &'static str,
        /// The architecture asked for.
        wanted: &'static str,
    },
    /// Compiling the program, or checking its launches' resources, failed.
    #[error(transparent)]
    Nvrtc(#[from] NvrtcError),
    /// A driver call failed.
    #[error("{call} failed: {error}")]
    Driver {
        /// The driver API function.
        call: String,
        /// Its error.
        error: String,
    },
    /// A launch's grid, at the bound sizes, exceeds the hardware's grid limits (diagnostic
    /// `E0404`): checked before anything is allocated or launched.
    #[error(transparent)]
    GridLimit(#[from] GridLimitError),
    /// The manifest is inconsistent (unknown buffer, alias cycle, unbound symbol, bad grid).
    #[error("invalid manifest: {why}")]
    Manifest {
        /// What is inconsistent.
        why: String,
    },
    /// An input tensor is missing or does not have its buffer's dtype and shape.
    #[error("input `{name}`: {why}")]
    Input {
        /// The input's name.
        name: String,
        /// The mismatch (missing, dtype, shape).
        why: String,
    },
}

/// How to run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunCudaOptions {
    /// Timed runs after the first (warm-up) run; 0 runs once, untimed.
    pub repeat: u32,
    /// The device's ordinal.
    pub device: u32,
    /// NVRTC options (fast math, line info, headers).
    pub compile: CompileOptions,
    /// The architecture to compile for instead of the device's (`run --arch`): an older one
    /// than the device's runs as PTX the driver compiles at load time (sm80 kernels on an H100);
    /// a newer one is [`CudaError::ArchTooNew`].
    pub arch: Option<Arch>,
}

/// Mean times of the timed runs (CUDA events on the default stream).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timings {
    /// The whole program per run, milliseconds.
    pub total_ms: f64,
    /// Each launch, in manifest order, `(kernel, milliseconds per run)`.
    pub kernels: Vec<(String, f64)>,
}

/// The GPU a program runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device's ordinal.
    pub ordinal: u32,
    /// Its name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Compute capability `(major, minor)`.
    pub compute_capability: (i32, i32),
    /// The architecture compiled for.
    pub arch: Arch,
    /// The driver's CUDA version (`13000` for 13.0).
    pub driver_version: i32,
    /// The largest shared memory a block may opt in to, bytes.
    pub max_smem_per_block_optin: i32,
}

const NO_GPU_SUGGESTION: &str =
    "run on a machine with an NVIDIA GPU (sm_80 or sm_90) and its driver, or use --device cpu";

fn no_device(why: impl Into<String>) -> CudaError {
    CudaError::NoDevice {
        why: why.into(),
        suggestion: NO_GPU_SUGGESTION.to_string(),
    }
}

fn driver(call: &str, e: cu::DriverError) -> CudaError {
    CudaError::Driver {
        call: call.to_string(),
        error: format!("{e}"),
    }
}

/// Every driver entry point used here (checked before the first call, since cudarc panics on a
/// missing symbol). `cuEventElapsedTime_v2` is optional: older drivers have `cuEventElapsedTime`.
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDeviceGetName",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuCtxSynchronize",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuFuncSetAttribute",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    "cuMemsetD8_v2",
    "cuLaunchKernel",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventDestroy_v2",
    "cuGetErrorString",
    "cuGetErrorName",
];

/// Whether the loaded driver library exports `name`.
fn has_symbol(name: &str) -> bool {
    // SAFETY: only called once the library is known to load; looking a symbol up runs nothing.
    unsafe { sys::culib().get::<*const c_void>(name.as_bytes()).is_ok() }
}

/// Finds the driver and device `ordinal` and describes it; [`CudaError::NoDevice`] (no driver
/// library, a driver lacking an entry point, no GPU) or [`CudaError::UnsupportedArch`] otherwise.
pub fn probe(ordinal: u32) -> Result<DeviceInfo, CudaError> {
    // SAFETY: only tries to dlopen the driver's library names.
    if !unsafe { sys::is_culib_present() } {
        return Err(no_device(
            "no CUDA driver library (libcuda.so.1) was found: this machine has no NVIDIA driver",
        ));
    }
    if let Some(missing) = REQUIRED_SYMBOLS.iter().find(|s| !has_symbol(s)) {
        return Err(no_device(format!(
            "the CUDA driver library lacks `{missing}`; the driver is too old"
        )));
    }
    match cu::init() {
        Ok(()) => {}
        Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => {
            return Err(no_device(
                "the CUDA driver is installed but found no GPU (CUDA_ERROR_NO_DEVICE)",
            ));
        }
        Err(e) => return Err(no_device(format!("cuInit failed: {e}"))),
    }
    let count = cu::device::get_count().map_err(|e| driver("cuDeviceGetCount", e))?;
    let index = i32::try_from(ordinal).unwrap_or(i32::MAX);
    if count <= 0 || index >= count {
        return Err(no_device(format!(
            "device {ordinal} does not exist ({count} CUDA devices)"
        )));
    }
    let dev = cu::device::get(index).map_err(|e| driver("cuDeviceGet", e))?;
    let attr = |a: sys::CUdevice_attribute| {
        // SAFETY: `dev` came from cuDeviceGet.
        unsafe { cu::device::get_attribute(dev, a) }.map_err(|e| driver("cuDeviceGetAttribute", e))
    };
    use sys::CUdevice_attribute as A;
    let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let smem = attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    let name = cu::device::get_name(dev).map_err(|e| driver("cuDeviceGetName", e))?;
    let mut version = 0;
    // SAFETY: the pointer is valid for a write.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(|e| driver("cuDriverGetVersion", e))?;
    let arch = match major {
        8 => Arch::Sm80,
        9 => Arch::Sm90,
        _ => {
            return Err(CudaError::UnsupportedArch {
                device: name,
                major,
                minor,
            })
        }
    };
    Ok(DeviceInfo {
        ordinal,
        name,
        compute_capability: (major, minor),
        arch,
        driver_version: version,
        max_smem_per_block_optin: smem,
    })
}

/// Where one buffer lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferPlan {
    /// The buffer's name.
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// Its concrete shape.
    pub shape: Vec<usize>,
    /// Its bytes.
    pub bytes: usize,
    /// Index of the storage it uses (aliases share their target's).
    pub storage: usize,
    /// Its role in the manifest.
    pub role: BufferRole,
}

/// Buffers and the storages they share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferLayout {
    /// Every buffer, in manifest order.
    pub buffers: Vec<BufferPlan>,
    /// Bytes of each storage (the largest of the buffers sharing it).
    pub storage_bytes: Vec<usize>,
}

impl BufferLayout {
    /// The buffer called `name`.
    pub fn get(&self, name: &str) -> Option<&BufferPlan> {
        self.buffers.iter().find(|b| b.name == name)
    }
}

fn manifest_error(why: impl Into<String>) -> CudaError {
    CudaError::Manifest { why: why.into() }
}

fn eval_size(
    what: &str,
    size: &crate::ir::region::Size,
    bindings: &BTreeMap<String, i64>,
) -> Result<i64, CudaError> {
    size.0
        .eval_with(bindings)
        .map_err(|e| manifest_error(format!("{what}: size `{}` cannot be computed: {e}", size.0)))
}

/// Evaluates every buffer's shape under `bindings` and gives each non-alias buffer its own
/// storage; an alias (`Alias { of }`, followed through chains) uses its target's storage and must
/// have as many elements.
pub fn plan_buffers(
    manifest: &Manifest,
    bindings: &BTreeMap<String, i64>,
) -> Result<BufferLayout, CudaError> {
    let mut buffers = Vec::with_capacity(manifest.buffers.len());
    for b in &manifest.buffers {
        let mut shape = Vec::with_capacity(b.shape.len());
        for s in &b.shape {
            let v = eval_size(&format!("buffer `{}`", b.name), s, bindings)?;
            let v = usize::try_from(v)
                .map_err(|_| manifest_error(format!("buffer `{}` has size {v}", b.name)))?;
            shape.push(v);
        }
        let bytes = shape
            .iter()
            .try_fold(b.dtype.size_bytes() as usize, |acc, d| acc.checked_mul(*d))
            .ok_or_else(|| manifest_error(format!("buffer `{}` is too large", b.name)))?;
        buffers.push(BufferPlan {
            name: b.name.clone(),
            dtype: b.dtype,
            shape,
            bytes,
            storage: usize::MAX,
            role: b.role.clone(),
        });
    }
    let index: BTreeMap<&str, usize> = manifest
        .buffers
        .iter()
        .enumerate()
        .map(|(i, b)| (b.name.as_str(), i))
        .collect();
    if index.len() != manifest.buffers.len() {
        return Err(manifest_error("a buffer name is declared twice"));
    }
    // The root of every buffer: itself, or the end of its alias chain.
    let mut roots = Vec::with_capacity(buffers.len());
    for (i, b) in manifest.buffers.iter().enumerate() {
        let (mut at, mut hops) = (i, 0);
        while let BufferRole::Alias { of } = &manifest.buffers[at].role {
            at = *index.get(of.as_str()).ok_or_else(|| {
                manifest_error(format!("buffer `{}` aliases unknown `{of}`", b.name))
            })?;
            hops += 1;
            if hops > manifest.buffers.len() {
                return Err(manifest_error(format!("alias cycle through `{}`", b.name)));
            }
        }
        let numel = |p: &BufferPlan| p.shape.iter().product::<usize>();
        if numel(&buffers[at]) != numel(&buffers[i]) || buffers[at].dtype != buffers[i].dtype {
            return Err(manifest_error(format!(
                "alias `{}` ({} {:?}) does not match `{}` ({} {:?})",
                b.name,
                buffers[i].dtype,
                buffers[i].shape,
                buffers[at].name,
                buffers[at].dtype,
                buffers[at].shape
            )));
        }
        roots.push(at);
    }
    let mut storage_of_root = BTreeMap::new();
    let mut storage_bytes = Vec::new();
    for (i, root) in roots.iter().enumerate() {
        let s = *storage_of_root.entry(*root).or_insert_with(|| {
            storage_bytes.push(0);
            storage_bytes.len() - 1
        });
        storage_bytes[s] = storage_bytes[s].max(buffers[i].bytes);
        buffers[i].storage = s;
    }
    for step in &manifest.steps {
        if let ManifestStep::Alias { name, of } = step {
            let same = |a: &str| index.get(a).map(|i| buffers[*i].storage);
            if same(name).is_none() || same(name) != same(of) {
                return Err(manifest_error(format!(
                    "alias step `{name}` of `{of}` is not a declared alias"
                )));
            }
        }
    }
    Ok(BufferLayout {
        buffers,
        storage_bytes,
    })
}

/// One kernel argument's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgValue {
    /// A pointer into storage `n`.
    Storage(usize),
    /// An `int`.
    Int(i32),
    /// A TMA tensor map over storage `storage` (encoded at launch, `KernelArg::TensorMap`).
    TensorMap {
        /// The storage the map addresses.
        storage: usize,
        /// Its element type (fp16 or bf16).
        dtype: DType,
        /// Dimensions, innermost first.
        dims: Vec<u64>,
        /// The box, innermost first.
        box_dims: Vec<u32>,
    },
}

/// One launch, ready to go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchPlan {
    /// The kernel's name.
    pub kernel: String,
    /// Grid (x, y, z); a zero entry means there is no work and the launch is skipped.
    pub grid: [u32; 3],
    /// Block (x, y, z).
    pub block: [u32; 3],
    /// Dynamic shared memory, bytes.
    pub dyn_smem_bytes: u32,
    /// Arguments in parameter order.
    pub args: Vec<ArgValue>,
}

impl LaunchPlan {
    /// Whether the grid is empty (nothing to compute).
    pub fn is_empty(&self) -> bool {
        self.grid.contains(&0)
    }
}

/// Evaluates every launch's grid under `bindings` and resolves its arguments: buffers to their
/// storage, symbols to `int` values. A grid over the hardware's limits (x ≤ 2³¹−1, y and z ≤
/// 65535: [`crate::codegen::gpu::verify::check_grid`]) is [`CudaError::GridLimit`].
pub fn plan_launches(
    manifest: &Manifest,
    layout: &BufferLayout,
    bindings: &BTreeMap<String, i64>,
) -> Result<Vec<LaunchPlan>, CudaError> {
    let mut plans = Vec::new();
    for step in &manifest.steps {
        let ManifestStep::Launch(l) = step else {
            continue;
        };
        let mut evaluated = [0i64; 3];
        for (axis, g) in l.grid.iter().enumerate() {
            evaluated[axis] = eval_size(&format!("grid of `{}`", l.kernel), g, bindings)?;
        }
        let grid = check_grid(&l.kernel, evaluated)?;
        let mut args = Vec::with_capacity(l.args.len());
        for a in &l.args {
            args.push(match a {
                KernelArg::Buffer { name, .. } => {
                    let b = layout.get(name).ok_or_else(|| {
                        manifest_error(format!("`{}` takes unknown buffer `{name}`", l.kernel))
                    })?;
                    ArgValue::Storage(b.storage)
                }
                KernelArg::Symbol { name } => {
                    let v = *bindings.get(name).ok_or_else(|| {
                        manifest_error(format!("`{}` takes unbound symbol `{name}`", l.kernel))
                    })?;
                    ArgValue::Int(i32::try_from(v).map_err(|_| {
                        manifest_error(format!("symbol `{name}` = {v} does not fit an int"))
                    })?)
                }
                KernelArg::TensorMap {
                    buffer,
                    dims,
                    box_dims,
                } => {
                    let b = layout.get(buffer).ok_or_else(|| {
                        manifest_error(format!("`{}` maps unknown buffer `{buffer}`", l.kernel))
                    })?;
                    let mut ds = Vec::with_capacity(dims.len());
                    for d in dims {
                        let v = eval_size(&format!("tensor map of `{buffer}`"), d, bindings)?;
                        ds.push(u64::try_from(v).map_err(|_| {
                            manifest_error(format!("tensor map of `{buffer}`: dimension {v}"))
                        })?);
                    }
                    ArgValue::TensorMap {
                        storage: b.storage,
                        dtype: b.dtype,
                        dims: ds,
                        box_dims: box_dims.clone(),
                    }
                }
            });
        }
        plans.push(LaunchPlan {
            kernel: l.kernel.clone(),
            grid,
            block: l.block,
            dyn_smem_bytes: l.dyn_smem_bytes,
            args,
        });
    }
    Ok(plans)
}

/// A tensor as its device bytes (little-endian): fp16/bf16 as their bits, fp32, i32, bool as one
/// byte 0/1.
pub fn tensor_bytes(t: &Tensor) -> Vec<u8> {
    match (&t.data, t.dtype) {
        (TensorData::F32(v), DType::F16) => v
            .iter()
            .flat_map(|x| half::f16::from_f32(*x).to_bits().to_le_bytes())
            .collect(),
        (TensorData::F32(v), DType::BF16) => v
            .iter()
            .flat_map(|x| half::bf16::from_f32(*x).to_bits().to_le_bytes())
            .collect(),
        (TensorData::F32(v), _) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        (TensorData::I32(v), _) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        (TensorData::Bool(v), _) => v.iter().map(|b| u8::from(*b)).collect(),
    }
}

/// The inverse of [`tensor_bytes`]: `bytes` must hold exactly `shape`'s elements of `dtype`.
pub fn tensor_from_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Option<Tensor> {
    let n: usize = shape.iter().product();
    if bytes.len() != n.checked_mul(dtype.size_bytes() as usize)? {
        return None;
    }
    let two = || {
        bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
    };
    let four = || bytes.chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]);
    let data = match dtype {
        DType::F16 => TensorData::F32(two().map(|b| half::f16::from_bits(b).to_f32()).collect()),
        DType::BF16 => TensorData::F32(two().map(|b| half::bf16::from_bits(b).to_f32()).collect()),
        DType::F32 => TensorData::F32(four().map(f32::from_le_bytes).collect()),
        DType::I32 => TensorData::I32(four().map(i32::from_le_bytes).collect()),
        DType::Bool => TensorData::Bool(bytes.iter().map(|b| *b != 0).collect()),
    };
    Some(Tensor { dtype, shape, data })
}

/// The input tensors' bytes, one entry per `Input` buffer, checked against its dtype and shape.
pub fn input_bytes(
    layout: &BufferLayout,
    inputs: &BTreeMap<String, Tensor>,
) -> Result<Vec<(usize, Vec<u8>)>, CudaError> {
    let mut out = Vec::new();
    for b in layout
        .buffers
        .iter()
        .filter(|b| b.role == BufferRole::Input)
    {
        let bad = |why: String| CudaError::Input {
            name: b.name.clone(),
            why,
        };
        let t = inputs
            .get(&b.name)
            .ok_or_else(|| bad("no tensor was given".into()))?;
        if t.dtype != b.dtype || t.shape != b.shape {
            return Err(bad(format!(
                "the tensor is {} {:?}, the buffer {} {:?}",
                t.dtype, t.shape, b.dtype, b.shape
            )));
        }
        let bytes = tensor_bytes(t);
        if bytes.len() != b.bytes {
            return Err(bad(format!(
                "{} bytes of data for a {}-byte buffer",
                bytes.len(),
                b.bytes
            )));
        }
        out.push((b.storage, bytes));
    }
    Ok(out)
}

mod launch;

/// A compilation answered from the CUDA cache logs no ptxas report (see [`nvrtc`]): the
/// launched kernels it lacks are read from the loaded module instead.
fn fill_cached_resources(
    compiled: &mut nvrtc::Compiled,
    launches: &[LaunchPlan],
    session: &launch::Session,
) -> Result<(), CudaError> {
    for l in launches {
        if compiled.kernel(&l.kernel).is_none() {
            if let Some(k) = session.kernel_resources(&l.kernel)? {
                compiled.kernels.push(k);
            }
        }
    }
    compiled.kernels.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(())
}

/// The architecture `run_manifest` compiles for: `wanted` when the device can run it (the same
/// or an older architecture), else [`CudaError::ArchTooNew`]; the device's own by default.
pub fn compile_arch(device: &DeviceInfo, wanted: Option<Arch>) -> Result<Arch, CudaError> {
    match wanted {
        None => Ok(device.arch),
        Some(a) if a <= device.arch => Ok(a),
        Some(a) => Err(CudaError::ArchTooNew {
            device: device.name.clone(),
            device_arch: device.arch.name(),
            wanted: a.name(),
        }),
    }
}

/// Runs `emitted` on the GPU: see the module documentation. Returns the graph outputs by name
/// and, with `opts.repeat > 0`, the mean times of `repeat` runs after a warm-up (otherwise
/// [`Timings::default`]).
pub fn run_manifest(
    emitted: &Emitted,
    inputs: &BTreeMap<String, Tensor>,
    bindings: &BTreeMap<String, i64>,
    opts: &RunCudaOptions,
) -> Result<(BTreeMap<String, Tensor>, Timings), CudaError> {
    let manifest = &emitted.manifest;
    let layout = plan_buffers(manifest, bindings)?;
    let launches = plan_launches(manifest, &layout, bindings)?;
    let uploads = input_bytes(&layout, inputs)?;
    let outputs: Vec<(&str, &BufferPlan)> = manifest
        .outputs
        .iter()
        .map(|(out, buf)| {
            layout
                .get(buf)
                .map(|b| (out.as_str(), b))
                .ok_or_else(|| manifest_error(format!("output `{out}` is unknown buffer `{buf}`")))
        })
        .collect::<Result<_, _>>()?;
    let device = probe(opts.device)?;
    let arch = compile_arch(&device, opts.arch)?;
    let mut compiled = nvrtc::compile(&emitted.source, arch, &opts.compile)?;
    // A cubin runs only on its own major architecture: an older target's kernels load as PTX
    // (NUL-terminated), which the driver compiles for the device.
    let ptx = if arch == device.arch {
        None
    } else {
        let mut ptx = nvrtc::ptx(&emitted.source, arch, &opts.compile)?.into_bytes();
        ptx.push(0);
        Some(ptx)
    };
    if let Some(l) = launches
        .iter()
        .find(|l| i64::from(l.dyn_smem_bytes) > i64::from(device.max_smem_per_block_optin))
    {
        return Err(manifest_error(format!(
            "`{}` asks for {} B of dynamic shared memory; {} allows {} B per block",
            l.kernel, l.dyn_smem_bytes, device.name, device.max_smem_per_block_optin
        )));
    }
    let image = ptx.as_deref().unwrap_or(&compiled.cubin);
    let session = launch::Session::open(&device, image, &layout.storage_bytes)?;
    fill_cached_resources(&mut compiled, &launches, &session)?;
    nvrtc::check_manifest_resources(&compiled, manifest)?;
    let functions = session.functions(&launches)?;
    for (storage, bytes) in &uploads {
        session.upload(*storage, bytes)?;
    }
    // Kernel outputs start as 0xFF bytes (NaN: an element no kernel wrote shows); zeroed
    // workspaces as zeros (split-K's counters, which each launch leaves zero again).
    for b in &layout.buffers {
        let fill = match b.role {
            BufferRole::Kernel | BufferRole::Workspace { zeroed: false } => 0xFF,
            BufferRole::Workspace { zeroed: true } => 0,
            BufferRole::Input | BufferRole::Alias { .. } => continue,
        };
        session.fill(b.storage, fill, b.bytes)?;
    }
    let mut prepared = session.prepare(&launches, &functions)?;
    session.run(&mut prepared)?;
    let mut result = BTreeMap::new();
    for (out, b) in outputs {
        let bytes = session.download(b.storage, b.bytes)?;
        let t = tensor_from_bytes(b.dtype, b.shape.clone(), &bytes)
            .ok_or_else(|| manifest_error(format!("output `{out}` has the wrong size")))?;
        result.insert(out.to_string(), t);
    }
    let timings = if opts.repeat > 0 {
        session.time(&mut prepared, opts.repeat)?
    } else {
        Timings::default()
    };
    Ok((result, timings))
}

/// The C name of a kernel for `cuModuleGetFunction`.
fn c_name(kernel: &str) -> Result<CString, CudaError> {
    CString::new(kernel).map_err(|_| manifest_error(format!("kernel name `{kernel}` has a NUL")))
}

#[cfg(test)]
mod tests;
