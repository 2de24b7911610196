//! Running a loaded native program: graph inputs converted to their storage types (fp16/bf16 as
//! 16-bit words), one call per region in step order, aliases as shared buffers, outputs converted
//! back to [`Tensor`]s; with `repeat > 0`, a warm-up run and `repeat` timed runs (mean per run and
//! per kernel, the `timing.json` of `--device cuda`).

use super::build::{build_and_load, cache_dir, Loaded};
use super::calibrate::{append_log, log_path, CpuCostParams, KernelFeatures, LogRow};
use super::program::{emit_program_with_params, NativeProgram};
use super::{CpuError, Isa};
use crate::cuda::Timings;
use crate::ir::dtype::DType;
use crate::ir::region::program::{RegionProgram, Step};
use crate::tensor::{Tensor, TensorData};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// How to run.
#[derive(Clone, Debug)]
pub struct NativeOptions {
    /// Threads per kernel.
    pub threads: usize,
    /// Timed runs after a warm-up (0: one untimed run).
    pub repeat: u32,
    /// Graph inputs that are constant parameters (weights; `role: param`): contraction
    /// operands reading only these are packed once per [`run_loaded`] call, not per run.
    pub params: BTreeSet<String>,
}

/// A buffer in its storage type, aligned to a cache line (64 bytes: an AVX-512 vector), so a
/// kernel's vector accesses line up the same way whatever the allocator returns (glibc's large
/// blocks start 16 bytes into a page, mimalloc's on a page).
struct Buf {
    dtype: DType,
    shape: Vec<usize>,
    lines: Vec<Line>,
}

/// One cache line of a [`Buf`].
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

fn elem_bytes(d: DType) -> usize {
    match d {
        DType::F32 | DType::I32 => 4,
        DType::F16 | DType::BF16 => 2,
        DType::Bool => 1,
    }
}

impl Buf {
    fn zeroed(dtype: DType, shape: Vec<usize>) -> Buf {
        let bytes = shape.iter().product::<usize>() * elem_bytes(dtype);
        Buf {
            dtype,
            shape,
            lines: vec![Line([0; 64]); bytes.div_ceil(64).max(1)],
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let n = self.shape.iter().product::<usize>() * elem_bytes(self.dtype);
        // SAFETY: `lines` holds at least `n` bytes; u8 has no alignment requirement.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr() as *mut u8, n) }
    }

    fn bytes(&self) -> &[u8] {
        let n = self.shape.iter().product::<usize>() * elem_bytes(self.dtype);
        // SAFETY: as in `bytes_mut`.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr() as *const u8, n) }
    }

    fn from_tensor(t: &Tensor) -> Buf {
        let mut b = Buf::zeroed(t.dtype, t.shape.clone());
        let out = b.bytes_mut();
        match (&t.data, t.dtype) {
            (TensorData::F32(v), DType::F16) => {
                for (o, x) in out.chunks_exact_mut(2).zip(v) {
                    o.copy_from_slice(&half::f16::from_f32(*x).to_bits().to_le_bytes());
                }
            }
            (TensorData::F32(v), DType::BF16) => {
                for (o, x) in out.chunks_exact_mut(2).zip(v) {
                    o.copy_from_slice(&half::bf16::from_f32(*x).to_bits().to_le_bytes());
                }
            }
            (TensorData::F32(v), _) => {
                for (o, x) in out.chunks_exact_mut(4).zip(v) {
                    o.copy_from_slice(&x.to_le_bytes());
                }
            }
            (TensorData::I32(v), _) => {
                for (o, x) in out.chunks_exact_mut(4).zip(v) {
                    o.copy_from_slice(&x.to_le_bytes());
                }
            }
            (TensorData::Bool(v), _) => {
                for (o, x) in out.iter_mut().zip(v) {
                    *o = u8::from(*x);
                }
            }
        }
        b
    }

    /// The buffer as a tensor of `shape` (its own, or an alias's).
    fn to_tensor(&self, shape: &[usize]) -> Tensor {
        let b = self.bytes();
        let two = || b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
        let four = || b.chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]);
        let data = match self.dtype {
            DType::F16 => {
                TensorData::F32(two().map(|x| half::f16::from_bits(x).to_f32()).collect())
            }
            DType::BF16 => {
                TensorData::F32(two().map(|x| half::bf16::from_bits(x).to_f32()).collect())
            }
            DType::F32 => TensorData::F32(four().map(f32::from_le_bytes).collect()),
            DType::I32 => TensorData::I32(four().map(i32::from_le_bytes).collect()),
            DType::Bool => TensorData::Bool(b.iter().map(|x| *x != 0).collect()),
        };
        Tensor {
            dtype: self.dtype,
            shape: shape.to_vec(),
            data,
        }
    }
}

/// The signature inputs of `g` with `role: param` (an imported model's initializers).
pub fn param_inputs(g: &crate::ir::frontend::Graph) -> BTreeSet<String> {
    g.signature
        .inputs
        .iter()
        .filter(|i| i.role == crate::ir::frontend::Role::Param)
        .map(|i| i.tensor.clone())
        .collect()
}

/// Emits, compiles (or finds in the cache beside `plan_cache`) and loads `p` for this machine;
/// `params`: the graph inputs that are constant parameters (see [`NativeOptions::params`]).
pub fn prepare(
    p: &RegionProgram,
    params: &BTreeSet<String>,
    plan_cache: Option<&Path>,
) -> Result<(NativeProgram, Loaded), CpuError> {
    let prog = emit_program_with_params(p, params)?;
    let isa = Isa::detect();
    let loaded = build_and_load(&prog, isa, &cache_dir(plan_cache))?;
    Ok((prog, loaded))
}

fn bind_shape(
    shape: &[crate::ir::dim::Dim],
    bindings: &BTreeMap<String, i64>,
) -> Result<Vec<usize>, CpuError> {
    shape
        .iter()
        .map(|d| {
            d.eval_with(bindings)
                .ok()
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| CpuError::UnboundSymbol(d.to_string()))
        })
        .collect()
}

/// Runs the loaded program on `inputs` (graph inputs by buffer name) with `bindings`; returns
/// the graph outputs and, with `opts.repeat > 0`, the timings: the inputs are converted to their
/// storage once, then each run allocates its buffers and calls every kernel (the time per run
/// and per kernel, means of the timed runs after one warm-up run). Packed weights
/// ([`NativeOptions::params`]) are kept from the first run to the next within one call (a new
/// pack epoch per call); a program that keeps them runs under a process-wide lock, as its
/// packs are static buffers of the loaded library.
pub fn run_loaded(
    p: &RegionProgram,
    prog: &NativeProgram,
    loaded: &Loaded,
    bindings: &BTreeMap<String, i64>,
    inputs: &BTreeMap<String, Tensor>,
    opts: &NativeOptions,
) -> Result<(BTreeMap<String, Tensor>, Timings), CpuError> {
    let syms: Vec<i64> = prog
        .symbols
        .iter()
        .map(|s| {
            bindings
                .get(s)
                .copied()
                .ok_or_else(|| CpuError::UnboundSymbol(s.clone()))
        })
        .collect::<Result<_, _>>()?;
    let mut ins = Vec::new();
    for b in &p.inputs {
        let t = inputs
            .get(&b.name)
            .ok_or_else(|| CpuError::UnboundSymbol(format!("input {}", b.name)))?;
        ins.push(Buf::from_tensor(t));
    }
    static EPOCH: AtomicI64 = AtomicI64::new(0);
    static KEPT_PACKS: Mutex<()> = Mutex::new(());
    let _guard = prog
        .keeps_packs
        .then(|| KEPT_PACKS.lock().unwrap_or_else(|e| e.into_inner()));
    let cx = RunCx {
        p,
        prog,
        loaded,
        bindings,
        syms: &syms,
        threads: opts.threads,
        epoch: EPOCH.fetch_add(1, Ordering::Relaxed) + 1,
    };
    let mut per_kernel = vec![0f64; prog.kernels.len()];
    let runs = if opts.repeat > 0 { opts.repeat + 1 } else { 1 };
    let mut total = 0f64;
    let mut last = None;
    for run in 0..runs {
        // Timed runs reuse the previous run's buffers (as onnxruntime's arena does): their
        // pages are mapped, so a kernel's time is not its first-touch page faults.
        let reuse = last.take().map(|(b, _)| b);
        let t0 = Instant::now();
        let (bufs, names, times) = cx.run_once(&mut ins, reuse)?;
        if run > 0 {
            total += t0.elapsed().as_secs_f64() * 1e3;
            for (acc, t) in per_kernel.iter_mut().zip(times) {
                *acc += t;
            }
        }
        last = Some((bufs, names));
    }
    let (bufs, names) = last.unwrap_or_default();
    let mut outputs = BTreeMap::new();
    for (g, b) in &p.outputs {
        let (slot, shape) = names
            .get(b)
            .ok_or_else(|| CpuError::UnboundSymbol(format!("buffer {b}")))?;
        let buf = match *slot {
            Slot::Input(k) => &ins[k],
            Slot::Step(k) => &bufs[k],
        };
        outputs.insert(g.clone(), buf.to_tensor(shape));
    }
    let n = opts.repeat.max(1) as f64;
    let timings = Timings {
        total_ms: total / n,
        kernels: prog
            .kernels
            .iter()
            .zip(per_kernel)
            .map(|(k, t)| (k.region.clone(), t / n))
            .collect(),
    };
    Ok((outputs, timings))
}

/// Where a named buffer lives: a graph input or a buffer a step allocated.
#[derive(Clone, Copy, Debug)]
enum Slot {
    Input(usize),
    Step(usize),
}

/// Buffer names (aliases included) → (slot, shape).
type Names = BTreeMap<String, (Slot, Vec<usize>)>;

/// One run's buffers, their names and the kernel times in ms.
type RunOnce = (Vec<Buf>, Names, Vec<f64>);

struct RunCx<'a> {
    p: &'a RegionProgram,
    prog: &'a NativeProgram,
    loaded: &'a Loaded,
    bindings: &'a BTreeMap<String, i64>,
    syms: &'a [i64],
    threads: usize,
    /// This call's pack epoch (passed after the buffers, see [`super::emit::emit_region`]).
    epoch: i64,
}

impl RunCx<'_> {
    /// One run: every step's buffers allocated (or taken from `reuse`, the previous run's
    /// buffers: same program, same shapes, every element rewritten), every kernel called.
    fn run_once(&self, ins: &mut [Buf], reuse: Option<Vec<Buf>>) -> Result<RunOnce, CpuError> {
        let mut reuse = reuse.map(|v| v.into_iter());
        let mut names: Names = BTreeMap::new();
        for (k, b) in self.p.inputs.iter().enumerate() {
            names.insert(b.name.clone(), (Slot::Input(k), ins[k].shape.clone()));
        }
        let mut bufs: Vec<Buf> = Vec::new();
        let mut times = Vec::new();
        let mut k = 0;
        for s in &self.p.steps {
            match s {
                Step::Region(r) => {
                    for o in &r.outputs {
                        let shape: Vec<crate::ir::dim::Dim> =
                            o.memref.shape.iter().map(|d| d.0.clone()).collect();
                        let shape = bind_shape(&shape, self.bindings)?;
                        names.insert(o.name.clone(), (Slot::Step(bufs.len()), shape.clone()));
                        let old = reuse.as_mut().and_then(|r| r.next());
                        bufs.push(match old {
                            Some(b) if b.dtype == o.dtype && b.shape == shape => b,
                            _ => Buf::zeroed(o.dtype, shape),
                        });
                    }
                    times.push(self.call(k, r, &names, ins, &mut bufs)?);
                    k += 1;
                }
                Step::Alias {
                    name, of, shape, ..
                } => {
                    // Same bytes, a new shape: the alias shares its buffer.
                    let (slot, _) = *names
                        .get(of)
                        .ok_or_else(|| CpuError::UnboundSymbol(format!("buffer {of}")))?;
                    names.insert(name.clone(), (slot, bind_shape(shape, self.bindings)?));
                }
            }
        }
        Ok((bufs, names, times))
    }

    /// Calls kernel `k` (region `r`); its time in ms.
    fn call(
        &self,
        k: usize,
        r: &crate::ir::region::Region,
        names: &Names,
        ins: &mut [Buf],
        bufs: &mut [Buf],
    ) -> Result<f64, CpuError> {
        let kernel = &self.prog.kernels[k];
        let mut ptrs: Vec<*mut u8> = Vec::new();
        for n in kernel.inputs.iter().chain(&kernel.outputs) {
            let (slot, _) = names
                .get(n)
                .ok_or_else(|| CpuError::UnboundSymbol(format!("buffer {n}")))?;
            ptrs.push(match *slot {
                Slot::Input(i) => ins[i].lines.as_mut_ptr() as *mut u8,
                Slot::Step(i) => bufs[i].lines.as_mut_ptr() as *mut u8,
            });
        }
        let epoch = self.epoch;
        ptrs.push(&epoch as *const i64 as *mut u8);
        let t0 = Instant::now();
        // SAFETY: the pointers cover every buffer at its bound shape (inputs checked by the
        // caller, outputs allocated by `run_once`); the kernel reads its inputs and writes only
        // its outputs, within the shapes the verifier checked.
        let rc = unsafe {
            (self.loaded.kernels[k])(ptrs.as_ptr(), self.syms.as_ptr(), self.threads as i32)
        };
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let kernel = r.name.clone();
        match rc {
            0 => Ok(ms),
            1 => Err(CpuError::GatherOutOfRange { kernel }),
            _ => Err(CpuError::OutOfMemory { kernel }),
        }
    }
}

/// Emits, builds, loads and runs `p` (see [`prepare`], [`run_loaded`]); a timed run
/// (`opts.repeat > 0`) appends its kernels to the measurement log ([`log_timings`]).
pub fn evaluate_native(
    p: &RegionProgram,
    bindings: &BTreeMap<String, i64>,
    inputs: &BTreeMap<String, Tensor>,
    opts: &NativeOptions,
    plan_cache: Option<&Path>,
) -> Result<(BTreeMap<String, Tensor>, Timings), CpuError> {
    let (prog, loaded) = prepare(p, &opts.params, plan_cache)?;
    let (outputs, t) = run_loaded(p, &prog, &loaded, bindings, inputs, opts)?;
    if opts.repeat > 0 {
        let dir = cache_dir(plan_cache);
        let params = CpuCostParams::load(&dir)?;
        log_timings(
            p,
            &prog,
            bindings,
            &t,
            opts.threads,
            &params,
            &log_path(&dir),
        )?;
    }
    Ok((outputs, t))
}

/// Appends one row per kernel of a timed run to the measurement log at `log`: its features,
/// the prediction of `params` and the measured mean time (see [`super::calibrate`]).
pub fn log_timings(
    p: &RegionProgram,
    prog: &NativeProgram,
    bindings: &BTreeMap<String, i64>,
    t: &Timings,
    threads: usize,
    params: &CpuCostParams,
    log: &Path,
) -> Result<(), CpuError> {
    let regions = p.regions();
    let mut rows = Vec::new();
    for ((r, k), (_, ms)) in regions.zip(&prog.kernels).zip(&t.kernels) {
        let Some(features) = KernelFeatures::of(r, bindings) else {
            continue;
        };
        rows.push(LogRow {
            kernel: r.name.clone(),
            form: k.form.clone(),
            threads,
            features,
            estimate_ms: params.predict_ms(&features, threads),
            actual_ms: *ms,
        });
    }
    append_log(log, &rows)
}
