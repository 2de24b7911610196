//! Running a loaded native program: graph inputs converted to their storage types (fp16/bf16 as
//! 16-bit words), one call per region in step order, aliases as shared buffers, outputs converted
//! back to [`Tensor`]s; with `repeat > 0`, a warm-up run and `repeat` timed runs (mean per run and
//! per kernel, the `timing.json` of `--device cuda`).

use super::build::{build_and_load, cache_dir, Loaded};
use super::program::{emit_program, NativeProgram};
use super::{CpuError, Isa};
use crate::cuda::Timings;
use crate::ir::dtype::DType;
use crate::ir::region::program::{RegionProgram, Step};
use crate::tensor::{Tensor, TensorData};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// How to run.
#[derive(Clone, Debug)]
pub struct NativeOptions {
    /// Threads per kernel.
    pub threads: usize,
    /// Timed runs after a warm-up (0: one untimed run).
    pub repeat: u32,
}

/// A buffer in its storage type, 8-byte aligned.
struct Buf {
    dtype: DType,
    shape: Vec<usize>,
    words: Vec<u64>,
}

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
            words: vec![0u64; bytes.div_ceil(8).max(1)],
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let n = self.shape.iter().product::<usize>() * elem_bytes(self.dtype);
        // SAFETY: `words` holds at least `n` bytes; u8 has no alignment requirement.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr() as *mut u8, n) }
    }

    fn bytes(&self) -> &[u8] {
        let n = self.shape.iter().product::<usize>() * elem_bytes(self.dtype);
        // SAFETY: as in `bytes_mut`.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr() as *const u8, n) }
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

    fn to_tensor(&self) -> Tensor {
        let b = self.bytes();
        let two = || b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
        let four = || b.chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]);
        let data = match self.dtype {
            DType::F16 => TensorData::F32(two().map(|x| half::f16::from_bits(x).to_f32()).collect()),
            DType::BF16 => {
                TensorData::F32(two().map(|x| half::bf16::from_bits(x).to_f32()).collect())
            }
            DType::F32 => TensorData::F32(four().map(f32::from_le_bytes).collect()),
            DType::I32 => TensorData::I32(four().map(i32::from_le_bytes).collect()),
            DType::Bool => TensorData::Bool(b.iter().map(|x| *x != 0).collect()),
        };
        Tensor {
            dtype: self.dtype,
            shape: self.shape.clone(),
            data,
        }
    }
}

/// Emits, compiles (or finds in the cache beside `plan_cache`) and loads `p` for this machine.
pub fn prepare(
    p: &RegionProgram,
    plan_cache: Option<&Path>,
) -> Result<(NativeProgram, Loaded), CpuError> {
    let prog = emit_program(p)?;
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
/// the graph outputs and, with `opts.repeat > 0`, the timings.
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
    let mut per_kernel = vec![0f64; prog.kernels.len()];
    let runs = if opts.repeat > 0 { opts.repeat + 1 } else { 1 };
    let mut total = 0f64;
    let mut outputs = BTreeMap::new();
    for run in 0..runs {
        let timed = opts.repeat > 0 && run > 0;
        let t0 = Instant::now();
        let (outs, times) = run_once(p, prog, loaded, bindings, inputs, &syms, opts.threads)?;
        if timed {
            total += t0.elapsed().as_secs_f64() * 1e3;
            for (acc, t) in per_kernel.iter_mut().zip(times) {
                *acc += t;
            }
        }
        outputs = outs;
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

type RunOnce = (BTreeMap<String, Tensor>, Vec<f64>);

fn run_once(
    p: &RegionProgram,
    prog: &NativeProgram,
    loaded: &Loaded,
    bindings: &BTreeMap<String, i64>,
    inputs: &BTreeMap<String, Tensor>,
    syms: &[i64],
    threads: usize,
) -> Result<RunOnce, CpuError> {
    // Buffers by index; names (aliases included) map to an index.
    let mut bufs: Vec<Buf> = Vec::new();
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for b in &p.inputs {
        let t = inputs
            .get(&b.name)
            .ok_or_else(|| CpuError::UnboundSymbol(format!("input {}", b.name)))?;
        names.insert(b.name.clone(), bufs.len());
        bufs.push(Buf::from_tensor(t));
    }
    let mut times = Vec::new();
    let mut k = 0;
    for s in &p.steps {
        match s {
            Step::Region(r) => {
                let kernel = &prog.kernels[k];
                for o in &r.outputs {
                    let shape: Vec<crate::ir::dim::Dim> =
                        o.memref.shape.iter().map(|d| d.0.clone()).collect();
                    names.insert(o.name.clone(), bufs.len());
                    bufs.push(Buf::zeroed(o.dtype, bind_shape(&shape, bindings)?));
                }
                let mut ptrs: Vec<*mut u8> = Vec::new();
                for n in kernel.inputs.iter().chain(&kernel.outputs) {
                    let i = *names
                        .get(n)
                        .ok_or_else(|| CpuError::UnboundSymbol(format!("buffer {n}")))?;
                    ptrs.push(bufs[i].words.as_mut_ptr() as *mut u8);
                }
                let t0 = Instant::now();
                // SAFETY: the pointers cover every buffer at its bound shape (inputs were checked
                // by the caller, outputs allocated above); the kernel reads inputs and writes
                // only its outputs, within the shapes the verifier checked.
                let rc = unsafe { (loaded.kernels[k])(ptrs.as_ptr(), syms.as_ptr(), threads as i32) };
                times.push(t0.elapsed().as_secs_f64() * 1e3);
                match rc {
                    0 => {}
                    1 => {
                        return Err(CpuError::GatherOutOfRange {
                            kernel: r.name.clone(),
                        })
                    }
                    _ => {
                        return Err(CpuError::OutOfMemory {
                            kernel: r.name.clone(),
                        })
                    }
                }
                k += 1;
            }
            Step::Alias {
                name, of, shape, ..
            } => {
                let i = *names
                    .get(of)
                    .ok_or_else(|| CpuError::UnboundSymbol(format!("buffer {of}")))?;
                let shape = bind_shape(shape, bindings)?;
                // Same bytes, a new shape: copy the words (aliases are rare and small next to
                // the kernels; sharing would need reference-counted buffers).
                let b = Buf {
                    dtype: bufs[i].dtype,
                    shape,
                    words: bufs[i].words.clone(),
                };
                names.insert(name.clone(), bufs.len());
                bufs.push(b);
            }
        }
    }
    let mut out = BTreeMap::new();
    for (g, b) in &p.outputs {
        let i = *names
            .get(b)
            .ok_or_else(|| CpuError::UnboundSymbol(format!("buffer {b}")))?;
        out.insert(g.clone(), bufs[i].to_tensor());
    }
    Ok((out, times))
}

/// Emits, builds, loads and runs `p` (see [`prepare`], [`run_loaded`]).
pub fn evaluate_native(
    p: &RegionProgram,
    bindings: &BTreeMap<String, i64>,
    inputs: &BTreeMap<String, Tensor>,
    opts: &NativeOptions,
    plan_cache: Option<&Path>,
) -> Result<(BTreeMap<String, Tensor>, Timings), CpuError> {
    let (prog, loaded) = prepare(p, plan_cache)?;
    run_loaded(p, &prog, &loaded, bindings, inputs, opts)
}
