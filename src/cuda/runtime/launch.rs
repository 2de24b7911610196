//! The driver-facing half of [`super::run_manifest`]: one context, one module, the storages,
//! launches and event timing, released in reverse order when the [`Session`] is dropped.

use super::{c_name, driver, has_symbol, ArgValue, CudaError, DeviceInfo, LaunchPlan, Timings};
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use std::ffi::c_void;

/// Dynamic shared memory a kernel may use without opting in, bytes.
const DEFAULT_DYN_SMEM: u32 = 48 * 1024;

/// A context (the device's primary one), a loaded module and device storages.
pub(super) struct Session {
    dev: sys::CUdevice,
    ctx: Option<sys::CUcontext>,
    module: Option<sys::CUmodule>,
    storages: Vec<sys::CUdeviceptr>,
}

impl Drop for Session {
    fn drop(&mut self) {
        // Errors while releasing cannot be acted on; the process keeps going either way.
        for p in self.storages.drain(..) {
            // SAFETY: allocated by cuMemAlloc in this context and freed only here.
            let _ = unsafe { sys::cuMemFree_v2(p) };
        }
        if let Some(m) = self.module.take() {
            // SAFETY: loaded by cuModuleLoadData and unloaded only here.
            let _ = unsafe { cu::module::unload(m) };
        }
        if self.ctx.take().is_some() {
            // SAFETY: the primary context was retained once in `open`.
            let _ = unsafe { cu::primary_ctx::release(self.dev) };
        }
    }
}

/// Destroys an event when dropped.
struct Event(sys::CUevent);

impl Event {
    fn new() -> Result<Event, CudaError> {
        cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map(Event)
            .map_err(|e| driver("cuEventCreate", e))
    }

    fn record(&self) -> Result<(), CudaError> {
        // SAFETY: a live event, the default stream of the current context.
        unsafe { cu::event::record(self.0, cu::stream::null()) }
            .map_err(|e| driver("cuEventRecord", e))
    }

    fn synchronize(&self) -> Result<(), CudaError> {
        // SAFETY: a live, recorded event.
        unsafe { cu::event::synchronize(self.0) }.map_err(|e| driver("cuEventSynchronize", e))
    }

    /// Milliseconds from `self` to `end` (both recorded and complete).
    fn elapsed_to(&self, end: &Event) -> Result<f64, CudaError> {
        let ms = if has_symbol("cuEventElapsedTime_v2") {
            // SAFETY: two live, completed events of one context.
            unsafe { cu::event::elapsed(self.0, end.0) }
                .map_err(|e| driver("cuEventElapsedTime_v2", e))?
        } else {
            // Drivers before CUDA 12.8 only have the first version (same signature).
            type ElapsedFn =
                unsafe extern "C" fn(*mut f32, sys::CUevent, sys::CUevent) -> sys::CUresult;
            // SAFETY: the driver library is loaded; the symbol has this C signature.
            let f =
                unsafe { sys::culib().get::<ElapsedFn>(b"cuEventElapsedTime") }.map_err(|e| {
                    CudaError::Driver {
                        call: "cuEventElapsedTime".into(),
                        error: e.to_string(),
                    }
                })?;
            let mut ms = 0f32;
            // SAFETY: as above; `ms` is valid for a write.
            unsafe { f(&mut ms, self.0, end.0) }
                .result()
                .map_err(|e| driver("cuEventElapsedTime", e))?;
            ms
        };
        Ok(f64::from(ms))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate and destroyed only here.
        let _ = unsafe { cu::event::destroy(self.0) };
    }
}

/// A launch ready to enqueue: its plan, function and parameter values.
pub(super) struct Prepared<'a> {
    plan: &'a LaunchPlan,
    function: sys::CUfunction,
    slots: Vec<Slot>,
}

/// One kernel parameter's storage for `cuLaunchKernel`.
enum Slot {
    Ptr(sys::CUdeviceptr),
    Int(i32),
    Tmap(Box<sys::CUtensorMap>),
}

/// `cuTensorMapEncodeTiled` of a [`ArgValue::TensorMap`] over device address `base` (the
/// manifest's encoding: dense row-major strides, 128-byte swizzle, out-of-bounds zero).
fn encode_tensor_map(
    base: sys::CUdeviceptr,
    dtype: crate::ir::dtype::DType,
    dims: &[u64],
    box_dims: &[u32],
) -> Result<sys::CUtensorMap, CudaError> {
    use crate::ir::dtype::DType;
    let (ty, elem) = match dtype {
        DType::F16 => (
            sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            2u64,
        ),
        DType::BF16 => (
            sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            2u64,
        ),
        d => {
            return Err(CudaError::Manifest {
                why: format!("a tensor map over a {d:?} buffer"),
            })
        }
    };
    if dims.is_empty() || dims.len() > 5 || dims.len() != box_dims.len() {
        return Err(CudaError::Manifest {
            why: format!(
                "a tensor map of rank {} (box {})",
                dims.len(),
                box_dims.len()
            ),
        });
    }
    let mut strides = [0u64; 5];
    let mut st = elem;
    for d in 0..dims.len() - 1 {
        st *= dims[d];
        strides[d] = st;
    }
    let es = [1u32; 5];
    // SAFETY: CUtensorMap is plain data; the encoder writes all of it.
    let mut map: sys::CUtensorMap = unsafe { std::mem::zeroed() };
    // SAFETY: every array holds at least `rank` (the strides `rank - 1`) entries.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            ty,
            dims.len() as u32,
            base as *mut c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            box_dims.as_ptr(),
            es.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    r.result()
        .map_err(|e| driver("cuTensorMapEncodeTiled", e))?;
    Ok(map)
}

impl Session {
    /// Makes the device's primary context current, loads `cubin` (a cubin for the device, or
    /// NUL-terminated PTX) and allocates one storage per entry of `storage_bytes` (at least one
    /// byte each).
    pub(super) fn open(
        device: &DeviceInfo,
        cubin: &[u8],
        storage_bytes: &[usize],
    ) -> Result<Session, CudaError> {
        let index = i32::try_from(device.ordinal).unwrap_or(i32::MAX);
        let dev = cu::device::get(index).map_err(|e| driver("cuDeviceGet", e))?;
        let mut s = Session {
            dev,
            ctx: None,
            module: None,
            storages: Vec::new(),
        };
        // SAFETY: `dev` came from cuDeviceGet; the context is released in Drop.
        let ctx = unsafe { cu::primary_ctx::retain(dev) }
            .map_err(|e| driver("cuDevicePrimaryCtxRetain", e))?;
        s.ctx = Some(ctx);
        // SAFETY: a retained primary context.
        unsafe { cu::ctx::set_current(ctx) }.map_err(|e| driver("cuCtxSetCurrent", e))?;
        // SAFETY: `cubin` is a complete cubin image or NUL-terminated PTX from NVRTC, alive for the
        // call.
        let module =
            unsafe { cu::module::load_data(cubin.as_ptr().cast::<c_void>()) }.map_err(|e| {
                CudaError::Driver {
                    call: "cuModuleLoadData".into(),
                    error: format!(
                    "{e} (the driver supports CUDA {}.{}; a cubin from NVRTC 13 needs a CUDA 13 \
                     driver, or point DLC_NVRTC_LIB at an NVRTC no newer than the driver)",
                    device.driver_version / 1000,
                    device.driver_version % 1000 / 10
                ),
                }
            })?;
        s.module = Some(module);
        for bytes in storage_bytes {
            // SAFETY: a current context; the memory is freed in Drop.
            let p = unsafe { cu::malloc_sync((*bytes).max(1)) }
                .map_err(|e| driver(&format!("cuMemAlloc ({bytes} bytes)"), e))?;
            s.storages.push(p);
        }
        Ok(s)
    }

    /// Registers and static shared memory of kernel `name` as the loaded module reports them
    /// (`cuFuncGetAttribute`), for a cubin whose compilation logged nothing; `None` when the
    /// module has no such function.
    pub(super) fn kernel_resources(
        &self,
        name: &str,
    ) -> Result<Option<super::nvrtc::KernelResources>, CudaError> {
        let Some(module) = self.module else {
            return Ok(None);
        };
        // SAFETY: a loaded module.
        let Ok(f) = (unsafe { cu::module::get_function(module, c_name(name)?) }) else {
            return Ok(None);
        };
        let attribute = |a: sys::CUfunction_attribute, what: &str| {
            // SAFETY: `f` is a function of the loaded module.
            unsafe { cu::function::get_function_attribute(f, a) }
                .map(|v| u32::try_from(v).unwrap_or(0))
                .map_err(|e| driver(&format!("cuFuncGetAttribute({name}, {what})"), e))
        };
        Ok(Some(super::nvrtc::KernelResources {
            name: name.to_string(),
            registers: attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS,
                "NUM_REGS",
            )?,
            static_smem_bytes: attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                "SHARED_SIZE_BYTES",
            )?,
            spill_bytes: 0,
        }))
    }

    /// One function handle per launch; each kernel asking for more than 48 KiB of dynamic shared
    /// memory gets `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` set to its largest request.
    pub(super) fn functions(
        &self,
        launches: &[LaunchPlan],
    ) -> Result<Vec<sys::CUfunction>, CudaError> {
        let Some(module) = self.module else {
            return Err(CudaError::Driver {
                call: "cuModuleGetFunction".into(),
                error: "no module is loaded".into(),
            });
        };
        let mut out = Vec::with_capacity(launches.len());
        for l in launches {
            // SAFETY: a loaded module.
            let f = unsafe { cu::module::get_function(module, c_name(&l.kernel)?) }
                .map_err(|e| driver(&format!("cuModuleGetFunction({})", l.kernel), e))?;
            let most = launches
                .iter()
                .filter(|o| o.kernel == l.kernel)
                .map(|o| o.dyn_smem_bytes)
                .max()
                .unwrap_or(0);
            if most > DEFAULT_DYN_SMEM {
                let bytes = i32::try_from(most).unwrap_or(i32::MAX);
                // SAFETY: `f` is a function of the loaded module.
                unsafe {
                    cu::function::set_function_attribute(
                        f,
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        bytes,
                    )
                }
                .map_err(|e| driver(&format!("cuFuncSetAttribute({}, {most} B)", l.kernel), e))?;
            }
            out.push(f);
        }
        Ok(out)
    }

    /// Copies `bytes` to the start of storage `storage`.
    pub(super) fn upload(&self, storage: usize, bytes: &[u8]) -> Result<(), CudaError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let p = self.storage(storage)?;
        // SAFETY: the storage holds at least `bytes.len()` bytes (planned from the same layout).
        unsafe { cu::memcpy_htod_sync(p, bytes) }.map_err(|e| driver("cuMemcpyHtoD", e))
    }

    /// Sets the first `n` bytes of storage `storage` to `value`.
    pub(super) fn fill(&self, storage: usize, value: u8, n: usize) -> Result<(), CudaError> {
        if n == 0 {
            return Ok(());
        }
        let p = self.storage(storage)?;
        // SAFETY: the storage holds at least `n` bytes.
        unsafe { sys::cuMemsetD8_v2(p, value, n) }
            .result()
            .map_err(|e| driver("cuMemsetD8", e))
    }

    /// The first `n` bytes of storage `storage`.
    pub(super) fn download(&self, storage: usize, n: usize) -> Result<Vec<u8>, CudaError> {
        let mut out = vec![0u8; n];
        if n > 0 {
            let p = self.storage(storage)?;
            // SAFETY: the storage holds at least `n` bytes; the copy is synchronous.
            unsafe { cu::memcpy_dtoh_sync(&mut out, p) }.map_err(|e| driver("cuMemcpyDtoH", e))?;
        }
        Ok(out)
    }

    fn storage(&self, i: usize) -> Result<sys::CUdeviceptr, CudaError> {
        self.storages
            .get(i)
            .copied()
            .ok_or_else(|| CudaError::Manifest {
                why: format!("storage {i} was not allocated"),
            })
    }

    /// Each launch with its function and its parameter values, tensor maps encoded once (the
    /// storages do not move between runs, and encoding on the host between two timed launches
    /// would be counted as the kernel's time).
    pub(super) fn prepare<'a>(
        &self,
        launches: &'a [LaunchPlan],
        functions: &[sys::CUfunction],
    ) -> Result<Vec<Prepared<'a>>, CudaError> {
        launches
            .iter()
            .zip(functions)
            .map(|(l, f)| {
                let slots = l
                    .args
                    .iter()
                    .map(|a| match a {
                        ArgValue::Storage(s) => self.storage(*s).map(Slot::Ptr),
                        ArgValue::Int(v) => Ok(Slot::Int(*v)),
                        ArgValue::TensorMap {
                            storage,
                            dtype,
                            dims,
                            box_dims,
                        } => encode_tensor_map(self.storage(*storage)?, *dtype, dims, box_dims)
                            .map(|m| Slot::Tmap(Box::new(m))),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Prepared {
                    plan: l,
                    function: *f,
                    slots,
                })
            })
            .collect()
    }

    /// Launches `p` on the default stream (nothing when its grid is empty).
    fn launch(p: &mut Prepared<'_>) -> Result<(), CudaError> {
        let l = p.plan;
        if l.is_empty() {
            return Ok(());
        }
        let mut params: Vec<*mut c_void> = p
            .slots
            .iter_mut()
            .map(|s| match s {
                Slot::Ptr(p) => (p as *mut sys::CUdeviceptr).cast::<c_void>(),
                Slot::Int(v) => (v as *mut i32).cast::<c_void>(),
                Slot::Tmap(m) => (&mut **m as *mut sys::CUtensorMap).cast::<c_void>(),
            })
            .collect();
        let [gx, gy, gz] = l.grid;
        let [bx, by, bz] = l.block;
        // SAFETY: `function` belongs to the loaded module; `params` holds one pointer per
        // kernel parameter (the manifest's order and types), each to a live slot; the launch
        // copies the values before returning.
        unsafe {
            cu::launch_kernel(
                p.function,
                (gx, gy, gz),
                (bx, by, bz),
                l.dyn_smem_bytes,
                cu::stream::null(),
                &mut params,
            )
        }
        .map_err(|e| driver(&format!("cuLaunchKernel({})", l.kernel), e))
    }

    /// Runs every launch once, synchronizing after each so that a failure names its kernel.
    pub(super) fn run(&self, prepared: &mut [Prepared<'_>]) -> Result<(), CudaError> {
        for p in prepared {
            Self::launch(p)?;
            cu::ctx::synchronize().map_err(|e| {
                driver(&format!("kernel `{}` (cuCtxSynchronize)", p.plan.kernel), e)
            })?;
        }
        Ok(())
    }

    /// `repeat` timed runs of the whole program (the caller has run it once: the warm-up),
    /// enqueued back to back as a framework runs them: an event before the first launch and
    /// after every launch, one synchronization at the end. A kernel's time is the gap between
    /// the events around it, the program's the first to the last over `repeat`.
    pub(super) fn time(
        &self,
        prepared: &mut [Prepared<'_>],
        repeat: u32,
    ) -> Result<Timings, CudaError> {
        let per_run = prepared.len();
        let count = per_run * repeat as usize + 1;
        let events = (0..count)
            .map(|_| Event::new())
            .collect::<Result<Vec<_>, _>>()?;
        events[0].record()?;
        let mut next = 1;
        for _ in 0..repeat {
            for p in prepared.iter_mut() {
                Self::launch(p)?;
                events[next].record()?;
                next += 1;
            }
        }
        let last = &events[count - 1];
        last.synchronize()?;
        let total = events[0].elapsed_to(last)?;
        let mut per = vec![0.0; per_run];
        for (k, pair) in events.windows(2).enumerate() {
            per[k % per_run.max(1)] += pair[0].elapsed_to(&pair[1])?;
        }
        let n = f64::from(repeat.max(1));
        Ok(Timings {
            total_ms: total / n,
            kernels: prepared
                .iter()
                .zip(per)
                .map(|(p, t)| (p.plan.kernel.clone(), t / n))
                .collect(),
        })
    }
}
