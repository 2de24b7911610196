//! Runs an emitted program on the CPU: the kernels' logic, not their speed.
//!
//! [`run_on_host`] takes the CUDA source (`kernels.cu`) and its [`Manifest`], writes them into a
//! fresh temporary directory beside [`EMU_HEADER`] (saved as `dlc_kernel.cuh`, so the source
//! compiles unchanged) and a generated `main.cpp`, compiles with `g++ -std=c++17`, and runs the
//! binary: it allocates every buffer (an alias shares its target's storage; buffers written by
//! kernels start as `0xFF` bytes, NaN for floats, so an element no kernel writes shows), reads the
//! inputs from raw little-endian files, launches every
//! [`ManifestStep::Launch`](crate::codegen::manifest::ManifestStep::Launch) in order through
//! `dlc_emu::launch` and writes every graph output back. The binary depends only on the
//! manifest's structure: sizes, grids and symbol values travel in a parameter file, so one
//! compiled program serves every binding, and binaries are cached by a hash of the header, the
//! source, `main.cpp` and the compiler flags ([`HostOptions::cache_dir`]).
//!
//! What the emulation runs and checks (blocks one after another, the threads of a block as
//! deterministic fibers, barriers and warp collectives that must be reached by every thread, the
//! tensor-core fragment layouts of the PTX ISA, cp.async copies that land only when waited for)
//! and what it cannot catch (memory-model races beyond barrier placement, timing, bank conflicts,
//! register and shared-memory limits, …) is set out in `docs/gpu-codegen.md`, "CPU execution of
//! kernel logic". A launch whose grid has a zero dimension (an empty tensor) is skipped: CUDA
//! rejects such a launch, so the runtime must skip it too.

mod build;
mod program;

use crate::codegen::gpu::verify::GridLimitError;
use crate::codegen::manifest::Manifest;
use crate::codegen::{EMU_HEADER, HEADER_NAME};
use crate::ir::dtype::DType;
use crate::tensor::{Tensor, TensorData};
use build::{binary, run, TempDir};
use program::{generate, layout};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The optimization level of the host build. Measured on the tensor-core GEMM of
/// `tests/emu/gemm_mma.cu` at 256³ (compile + run, 2 shared cores): `-O0` 2.0 s + 0.57 s, `-O1`
/// 2.9 s + 0.18 s, `-O2` 4.2 s + 0.14 s. Compilation dominates small tests and is cached;
/// `-O1` keeps larger kernels' runs short at little extra compile time.
const OPT_LEVEL: &str = "-O1";

/// Changes whenever the generated `main.cpp` or the flags change meaning (part of the cache key).
const CACHE_VERSION: &str = "dlc-host/1";

/// How to build and run the host program.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// Build with `-fsanitize=address,undefined`: out-of-bounds global and shared-memory accesses
    /// and undefined behaviour abort the run ([`HostError::Run`]). Slower to build and run.
    pub sanitize: bool,
    /// Where compiled programs are cached; `None`: `$CARGO_TARGET_DIR/dlc-host-cache`, else the
    /// crate's `target/dlc-host-cache` when it exists, else a folder in the system temp dir.
    pub cache_dir: Option<PathBuf>,
    /// The C++ compiler (default: `$DLC_HOST_CXX`, else `g++`).
    pub compiler: String,
    /// The longest a run may take before it is killed ([`HostError::Timeout`]).
    pub timeout: Duration,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            sanitize: false,
            cache_dir: None,
            compiler: std::env::var("DLC_HOST_CXX").unwrap_or_else(|_| "g++".to_string()),
            timeout: Duration::from_secs(300),
        }
    }
}

/// Why a program could not be run on the host.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The C++ compiler could not be started.
    #[error("C++ compiler `{compiler}` not found (install g++ or set DLC_HOST_CXX)")]
    CompilerMissing {
        /// The compiler command tried (`g++` or `DLC_HOST_CXX`).
        compiler: String,
    },
    /// The source (with the emulation header) did not compile.
    #[error("the host build of the emitted source failed:\n{log}")]
    Compile {
        /// The compiler's output.
        log: String,
    },
    /// The program failed: a divergent barrier, a bad shared-memory access, a sanitizer report, a
    /// crash. `stderr` says which.
    #[error("the emulated program failed ({status}):\n{stderr}")]
    Run {
        /// The exit status or signal.
        status: String,
        /// The program's stderr.
        stderr: String,
    },
    /// The program ran past [`HostOptions::timeout`] and was killed.
    #[error("the emulated program ran longer than {secs} s and was killed")]
    Timeout {
        /// The limit, seconds.
        secs: u64,
    },
    /// A size, grid or symbol could not be evaluated or is out of range.
    #[error("{what}: {why}")]
    Size {
        /// What was evaluated (a buffer, a grid, a symbol).
        what: String,
        /// Why it failed.
        why: String,
    },
    /// A launch's grid exceeds the GPU's grid limits (as [`crate::cuda::CudaError::GridLimit`]:
    /// diagnostic `E0404` on the GPU path).
    #[error(transparent)]
    GridLimit(#[from] GridLimitError),
    /// The manifest is inconsistent (an unknown buffer, an alias cycle, …).
    #[error("manifest: {0}")]
    Manifest(String),
    /// A graph input the manifest needs was not given.
    #[error("missing input `{name}`")]
    MissingInput {
        /// The input's name.
        name: String,
    },
    /// A given input does not match its buffer.
    #[error("input `{name}`: {why}")]
    BadInput {
        /// The input's name.
        name: String,
        /// The mismatch (dtype, element count).
        why: String,
    },
    /// An output file is missing or has the wrong size.
    #[error("output `{name}`: {why}")]
    BadOutput {
        /// The output's name.
        name: String,
        /// What is wrong with the file.
        why: String,
    },
    /// A file operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        #[source]
        /// The underlying error.
        source: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> HostError + '_ {
    move |source| HostError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One buffer with evaluated sizes.
struct Buf {
    dtype: DType,
    shape: Vec<usize>,
    numel: usize,
    /// Index into [`Layout::storages`].
    storage: usize,
}

/// One allocation: a non-alias buffer.
struct Storage {
    bytes: u64,
    /// The graph input filling it, if any.
    input: Option<String>,
    /// A workspace that must start at zero.
    zeroed: bool,
}

/// The program's buffers, evaluated under the bindings.
struct Layout {
    bufs: BTreeMap<String, Buf>,
    storages: Vec<Storage>,
}

/// `main.cpp` and the values of its parameter file.
struct Program {
    main_cpp: String,
    params: Vec<i64>,
    /// `(graph output, buffer, file)`.
    outputs: Vec<(String, String, String)>,
}

fn encode(t: &Tensor) -> Vec<u8> {
    let mut out = Vec::with_capacity(t.numel() * t.dtype.size_bytes() as usize);
    match (&t.data, t.dtype) {
        (TensorData::F32(v), DType::F16) => v
            .iter()
            .for_each(|x| out.extend(half::f16::from_f32(*x).to_bits().to_le_bytes())),
        (TensorData::F32(v), DType::BF16) => v
            .iter()
            .for_each(|x| out.extend(half::bf16::from_f32(*x).to_bits().to_le_bytes())),
        (TensorData::F32(v), _) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        (TensorData::I32(v), _) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        (TensorData::Bool(v), _) => out.extend(v.iter().map(|b| u8::from(*b))),
    }
    out
}

fn decode(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Tensor {
    let data = match dtype {
        DType::F16 => TensorData::F32(
            bytes
                .chunks_exact(2)
                .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
        ),
        DType::BF16 => TensorData::F32(
            bytes
                .chunks_exact(2)
                .map(|c| half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
        ),
        DType::F32 => TensorData::F32(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        DType::I32 => TensorData::I32(
            bytes
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        DType::Bool => TensorData::Bool(bytes.iter().map(|b| *b != 0).collect()),
    };
    Tensor { dtype, shape, data }
}

fn check_input(name: &str, t: &Tensor, b: &Buf) -> Result<(), HostError> {
    let why = if t.dtype != b.dtype {
        format!("dtype {} but the buffer is {}", t.dtype, b.dtype)
    } else if t.shape != b.shape {
        format!("shape {:?} but the buffer is {:?}", t.shape, b.shape)
    } else {
        let len = match &t.data {
            TensorData::F32(v) if t.dtype.is_float() => v.len(),
            TensorData::I32(v) if t.dtype == DType::I32 => v.len(),
            TensorData::Bool(v) if t.dtype == DType::Bool => v.len(),
            _ => usize::MAX,
        };
        if len == b.numel {
            return Ok(());
        }
        format!("its data does not hold {} {} elements", b.numel, b.dtype)
    };
    Err(HostError::BadInput {
        name: name.to_string(),
        why,
    })
}

/// Runs the program `manifest` describes, with the CUDA `source`, on the CPU (see the module
/// documentation), and returns every graph output (`manifest.outputs`) by name.
pub fn run_on_host(
    source: &str,
    manifest: &Manifest,
    inputs: &BTreeMap<String, Tensor>,
    bindings: &BTreeMap<String, i64>,
    opts: &HostOptions,
) -> Result<BTreeMap<String, Tensor>, HostError> {
    let lay = layout(manifest, bindings)?;
    let prog = generate(manifest, &lay, bindings)?;
    let dir = TempDir::new()?;
    for (i, s) in lay.storages.iter().enumerate() {
        let Some(name) = &s.input else { continue };
        let t = inputs
            .get(name)
            .ok_or_else(|| HostError::MissingInput { name: name.clone() })?;
        check_input(name, t, &lay.bufs[name])?;
        let path = dir.0.join(format!("in{i}.bin"));
        std::fs::write(&path, encode(t)).map_err(io_err(&path))?;
    }
    let params: Vec<String> = prog.params.iter().map(i64::to_string).collect();
    for (name, text) in [
        (HEADER_NAME, EMU_HEADER),
        ("kernels.cu", source),
        ("main.cpp", prog.main_cpp.as_str()),
        ("params.txt", &params.join("\n")),
    ] {
        let path = dir.0.join(name);
        std::fs::write(&path, text).map_err(io_err(&path))?;
    }
    let exe = binary(&dir.0, &prog, source, opts)?;
    let (ok, status, stderr) = run(&exe, &dir.0, opts)?;
    if !ok {
        return Err(HostError::Run { status, stderr });
    }
    let mut result = BTreeMap::new();
    for (out, buf, file) in &prog.outputs {
        let b = &lay.bufs[buf];
        let path = dir.0.join(file);
        let bytes = std::fs::read(&path).map_err(|e| HostError::BadOutput {
            name: out.clone(),
            why: format!("{}: {e}", path.display()),
        })?;
        if bytes.len() as u64 != b.numel as u64 * b.dtype.size_bytes() {
            return Err(HostError::BadOutput {
                name: out.clone(),
                why: format!("{} bytes for {} {} elements", bytes.len(), b.numel, b.dtype),
            });
        }
        result.insert(out.clone(), decode(b.dtype, b.shape.clone(), &bytes));
    }
    Ok(result)
}
