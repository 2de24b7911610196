//! Runs an emitted program on the CPU: the kernels' logic, not their speed.
//!
//! [`run_on_host`] takes the CUDA source (`kernels.cu`) and its [`Manifest`], writes them into a
//! fresh temporary directory beside [`EMU_HEADER`] (saved as `dlc_kernel.cuh`, so the source
//! compiles unchanged) and a generated `main.cpp`, compiles with `g++ -std=c++17`, and runs the
//! binary: it allocates every buffer (an alias shares its target's storage; buffers written by
//! kernels start as `0xFF` bytes, NaN for floats, so an element no kernel writes shows), reads the
//! inputs from raw little-endian files, launches every [`ManifestStep::Launch`] in order through
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

use crate::codegen::gpu::verify::{check_grid, GridLimitError};
use crate::codegen::manifest::{BufferRole, KernelArg, Manifest, ManifestStep};
use crate::codegen::{EMU_HEADER, HEADER_NAME};
use crate::ir::dtype::DType;
use crate::tensor::{Tensor, TensorData};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
}

/// The program's buffers, evaluated under the bindings.
struct Layout {
    bufs: BTreeMap<String, Buf>,
    storages: Vec<Storage>,
}

fn c_type(d: DType) -> &'static str {
    match d {
        DType::F16 => "__half",
        DType::BF16 => "__nv_bfloat16",
        DType::F32 => "float",
        DType::I32 => "int",
        DType::Bool => "bool",
    }
}

fn eval(
    size: &crate::ir::region::Size,
    b: &BTreeMap<String, i64>,
    what: &str,
) -> Result<i64, HostError> {
    size.0.eval_with(b).map_err(|e| HostError::Size {
        what: what.to_string(),
        why: e.to_string(),
    })
}

fn layout(m: &Manifest, bindings: &BTreeMap<String, i64>) -> Result<Layout, HostError> {
    let decls: BTreeMap<&str, _> = m.buffers.iter().map(|b| (b.name.as_str(), b)).collect();
    if decls.len() != m.buffers.len() {
        return Err(HostError::Manifest(
            "a buffer name is declared twice".into(),
        ));
    }
    let mut storages = Vec::new();
    let mut storage_of: BTreeMap<&str, usize> = BTreeMap::new();
    for b in &m.buffers {
        if matches!(b.role, BufferRole::Alias { .. }) {
            continue;
        }
        storage_of.insert(&b.name, storages.len());
        storages.push(Storage {
            bytes: 0,
            input: (b.role == BufferRole::Input).then(|| b.name.clone()),
        });
    }
    let mut bufs = BTreeMap::new();
    for b in &m.buffers {
        let mut shape = Vec::with_capacity(b.shape.len());
        for (i, s) in b.shape.iter().enumerate() {
            let what = format!("buffer `{}` dimension {i}", b.name);
            let v = eval(s, bindings, &what)?;
            shape.push(usize::try_from(v).map_err(|_| HostError::Size {
                what,
                why: format!("{v} is negative"),
            })?);
        }
        let numel = shape
            .iter()
            .try_fold(1usize, |a, d| a.checked_mul(*d))
            .ok_or_else(|| HostError::Size {
                what: format!("buffer `{}`", b.name),
                why: "element count overflows".into(),
            })?;
        // Follow aliases to the storage, refusing cycles and unknown targets.
        let mut root = b;
        for _ in 0..=m.buffers.len() {
            let BufferRole::Alias { of } = &root.role else {
                break;
            };
            root = decls.get(of.as_str()).ok_or_else(|| {
                HostError::Manifest(format!("buffer `{}` aliases unknown `{of}`", root.name))
            })?;
        }
        let storage = *storage_of
            .get(root.name.as_str())
            .ok_or_else(|| HostError::Manifest(format!("alias cycle through `{}`", b.name)))?;
        if root.dtype != b.dtype {
            return Err(HostError::Manifest(format!(
                "alias `{}` is {} but its storage `{}` is {}",
                b.name, b.dtype, root.name, root.dtype
            )));
        }
        let bytes = (numel as u64).saturating_mul(b.dtype.size_bytes());
        let st = &mut storages[storage];
        st.bytes = st.bytes.max(bytes);
        bufs.insert(
            b.name.clone(),
            Buf {
                dtype: b.dtype,
                shape,
                numel,
                storage,
            },
        );
    }
    // Every alias views the whole storage: its element count is its target's.
    for b in &m.buffers {
        let buf = &bufs[&b.name];
        if (buf.numel as u64) * b.dtype.size_bytes() != storages[buf.storage].bytes {
            return Err(HostError::Manifest(format!(
                "buffer `{}` ({} elements) does not cover its storage",
                b.name, buf.numel
            )));
        }
    }
    Ok(Layout { bufs, storages })
}

/// `main.cpp` and the values of its parameter file.
struct Program {
    main_cpp: String,
    params: Vec<i64>,
    /// `(graph output, buffer, file)`.
    outputs: Vec<(String, String, String)>,
}

/// The emulated `cuTensorMapEncodeTiled` call of a [`KernelArg::TensorMap`] into `CUtensorMap
/// name` (the manifest's encoding: dense row-major strides, 128-byte swizzle, zero fill).
fn tensor_map(
    body: &mut String,
    name: &str,
    b: &Buf,
    dims: &[String],
    box_dims: &[u32],
    kernel: &str,
) -> Result<(), HostError> {
    let dtype = match b.dtype {
        DType::F16 => "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
        DType::BF16 => "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
        d => {
            return Err(HostError::Manifest(format!(
                "`{kernel}`: a tensor map over a {d:?} buffer"
            )))
        }
    };
    if dims.len() != box_dims.len() || dims.is_empty() || dims.len() > 5 {
        return Err(HostError::Manifest(format!(
            "`{kernel}`: a tensor map of rank {} with a box of rank {}",
            dims.len(),
            box_dims.len()
        )));
    }
    let rank = dims.len();
    let elem = b.dtype.size_bytes();
    let _ = writeln!(body, "  CUtensorMap {name};");
    let _ = writeln!(body, "  {{");
    let _ = writeln!(
        body,
        "    const cuuint64_t dims[] = {{{}}};",
        dims.iter()
            .map(|d| format!("(cuuint64_t){d}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(body, "    cuuint64_t strides[5] = {{0, 0, 0, 0, 0}};");
    let _ = writeln!(body, "    cuuint64_t st = {elem};");
    let _ = writeln!(
        body,
        "    for (int d = 0; d + 1 < {rank}; ++d) {{ st *= dims[d]; strides[d] = st; }}"
    );
    let boxes: Vec<String> = box_dims.iter().map(|b| format!("{b}u")).collect();
    let _ = writeln!(
        body,
        "    const cuuint32_t box[] = {{{}}};",
        boxes.join(", ")
    );
    let _ = writeln!(body, "    const cuuint32_t es[] = {{1u, 1u, 1u, 1u, 1u}};");
    let _ = writeln!(
        body,
        "    if (cuTensorMapEncodeTiled(&{name}, {dtype}, {rank}u, s{}, dims, strides, box, es, \
         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, \
         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != 0) {{",
        b.storage
    );
    let _ = writeln!(
        body,
        "      std::fprintf(stderr, \"dlc_emu: cuTensorMapEncodeTiled rejects the tensor map of \
         `{kernel}`\\n\"); return 86;\n    }}\n  }}"
    );
    Ok(())
}

fn generate(
    m: &Manifest,
    lay: &Layout,
    bindings: &BTreeMap<String, i64>,
) -> Result<Program, HostError> {
    let mut params = Vec::new();
    let mut body = String::new();
    let param = |v: i64, params: &mut Vec<i64>| {
        params.push(v);
        format!("P[{}]", params.len() - 1)
    };
    for (i, s) in lay.storages.iter().enumerate() {
        let bytes = i64::try_from(s.bytes).map_err(|_| HostError::Size {
            what: format!("storage {i}"),
            why: "too large".into(),
        })?;
        let p = param(bytes, &mut params);
        let poison = if s.input.is_some() { "false" } else { "true" };
        let _ = writeln!(
            body,
            "  unsigned char* s{i} = dlc_host::alloc({p}, {poison});"
        );
        let _ = writeln!(body, "  dlc_emu::register_global(s{i}, (size_t){p});");
        if s.input.is_some() {
            let _ = writeln!(body, "  dlc_host::read_file(\"in{i}.bin\", s{i}, {p});");
        }
    }
    for (li, step) in m.steps.iter().enumerate() {
        let ManifestStep::Launch(l) = step else {
            if let ManifestStep::Alias { name, of } = step {
                for n in [name, of] {
                    if !lay.bufs.contains_key(n) {
                        return Err(HostError::Manifest(format!(
                            "alias step names unknown `{n}`"
                        )));
                    }
                }
            }
            continue;
        };
        let mut evaluated = [0i64; 3];
        for (d, s) in l.grid.iter().enumerate() {
            let what = format!("launch {li} (`{}`) grid dimension {d}", l.kernel);
            evaluated[d] = eval(s, bindings, &what)?;
        }
        // The GPU's limits, so that the emulation refuses what the GPU would.
        let grid: Vec<String> = check_grid(&l.kernel, evaluated)?
            .iter()
            .map(|v| param(i64::from(*v), &mut params))
            .collect();
        let mut args = Vec::with_capacity(l.args.len());
        for a in &l.args {
            match a {
                KernelArg::Buffer { name, write } => {
                    let b = lay.bufs.get(name).ok_or_else(|| {
                        HostError::Manifest(format!(
                            "launch of `{}` uses unknown buffer `{name}`",
                            l.kernel
                        ))
                    })?;
                    let cst = if *write { "" } else { "const " };
                    args.push(format!("({cst}{}*)s{}", c_type(b.dtype), b.storage));
                }
                KernelArg::Symbol { name } => {
                    let v = *bindings.get(name).ok_or_else(|| HostError::Size {
                        what: format!("symbol `{name}` of `{}`", l.kernel),
                        why: "no value bound".into(),
                    })?;
                    if i32::try_from(v).is_err() {
                        return Err(HostError::Size {
                            what: format!("symbol `{name}`"),
                            why: format!("{v} does not fit an int"),
                        });
                    }
                    args.push(format!("(int){}", param(v, &mut params)));
                }
                KernelArg::TensorMap {
                    buffer,
                    dims,
                    box_dims,
                } => {
                    let b = lay.bufs.get(buffer).ok_or_else(|| {
                        HostError::Manifest(format!(
                            "launch of `{}` maps unknown buffer `{buffer}`",
                            l.kernel
                        ))
                    })?;
                    let name = format!("tm{}_{}", li, args.len());
                    let mut vals = Vec::with_capacity(dims.len());
                    for d in dims {
                        let what = format!("tensor map of `{buffer}` in launch {li}");
                        vals.push(param(eval(d, bindings, &what)?, &mut params));
                    }
                    tensor_map(&mut body, &name, b, &vals, box_dims, &l.kernel)?;
                    args.push(name);
                }
            }
        }
        let [bx, by, bz] = l.block;
        let (g, kernel, smem) = (&grid, &l.kernel, l.dyn_smem_bytes);
        let _ = writeln!(body, "  {{ // launch {li}: {kernel}");
        let _ = writeln!(
            body,
            "    dim3 grid((unsigned){}, (unsigned){}, (unsigned){});",
            g[0], g[1], g[2]
        );
        let _ = writeln!(body, "    if (grid.x != 0 && grid.y != 0 && grid.z != 0)");
        let _ = writeln!(
            body,
            "      dlc_emu::launch(grid, dim3({bx}u, {by}u, {bz}u), {smem}u,"
        );
        let _ = writeln!(
            body,
            "                      [&] {{ {kernel}({}); }});\n  }}",
            args.join(", ")
        );
    }
    let mut outputs = Vec::with_capacity(m.outputs.len());
    for (k, (out, buf)) in m.outputs.iter().enumerate() {
        let b = lay.bufs.get(buf).ok_or_else(|| {
            HostError::Manifest(format!("graph output `{out}` is unknown buffer `{buf}`"))
        })?;
        let file = format!("out{k}.bin");
        let bytes = param((b.numel as u64 * b.dtype.size_bytes()) as i64, &mut params);
        let _ = writeln!(
            body,
            "  dlc_host::write_file(\"{file}\", s{}, {bytes});",
            b.storage
        );
        outputs.push((out.clone(), buf.clone(), file));
    }
    let n = params.len().max(1);
    let main_cpp = format!(
        "// Generated by dlc_egg::codegen::host: runs the manifest's launches on the CPU.\n\
         #include \"{HEADER_NAME}\"\n#include \"kernels.cu\"\n{MAIN_SUPPORT}\
         int main(int argc, char** argv) {{\n  if (argc != 2) return 2;\n\
         \x20 dlc_host::dir = argv[1];\n  long long P[{n}];\n  dlc_host::read_params(P, {n});\n\
         {body}  return 0;\n}}\n",
    );
    Ok(Program {
        main_cpp,
        params,
        outputs,
    })
}

/// The fixed part of `main.cpp`: parameter, input and output files, allocation.
const MAIN_SUPPORT: &str = r#"#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
namespace dlc_host {
static std::string dir;
[[noreturn]] static void die(const char* what, const std::string& path) {
  std::fprintf(stderr, "dlc_host: %s %s\n", what, path.c_str());
  std::exit(2);
}
static void read_params(long long* p, int n) {
  const std::string path = dir + "/params.txt";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) die("cannot open", path);
  for (int i = 0; i < n; ++i)
    if (std::fscanf(f, "%lld", &p[i]) != 1) die("short parameter file", path);
  std::fclose(f);
}
// 256-byte aligned like cudaMalloc, exactly `bytes` long so ASan sees overruns.
static unsigned char* alloc(long long bytes, bool poison) {
  void* p = nullptr;
  if (posix_memalign(&p, 256, bytes > 0 ? (size_t)bytes : 1) != 0)
    die("out of memory for", "a buffer");
  if (poison) std::memset(p, 0xff, (size_t)bytes);
  return static_cast<unsigned char*>(p);
}
static void read_file(const char* name, unsigned char* p, long long bytes) {
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) die("cannot open", path);
  if (std::fread(p, 1, (size_t)bytes, f) != (size_t)bytes) die("short input file", path);
  std::fclose(f);
}
static void write_file(const char* name, const unsigned char* p, long long bytes) {
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) die("cannot create", path);
  if (std::fwrite(p, 1, (size_t)bytes, f) != (size_t)bytes) die("cannot write", path);
  std::fclose(f);
}
}  // namespace dlc_host
"#;

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

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, HostError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        loop {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let p = base.join(format!("dlc-host-{}-{n}-{nanos}", std::process::id()));
            match std::fs::create_dir(&p) {
                Ok(()) => return Ok(TempDir(p)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err(&base)(e)),
            }
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn default_cache_dir() -> PathBuf {
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(t).join("dlc-host-cache");
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    if target.is_dir() {
        return target.join("dlc-host-cache");
    }
    std::env::temp_dir().join("dlc-host-cache")
}

/// FNV-1a, 64 bits, over length-prefixed parts (a cache key, not a security measure).
fn cache_key(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in (p.len() as u64).to_le_bytes().iter().chain(p.as_bytes()) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

fn flags(opts: &HostOptions) -> Vec<&'static str> {
    // -fno-weak lets the emulation keep every non-template __shared__ variable in one section
    // (poisoned before each block); one translation unit, so nothing else changes.
    let mut f = vec!["-std=c++17", OPT_LEVEL, "-fno-strict-aliasing", "-fno-weak"];
    if opts.sanitize {
        f.extend([
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=undefined",
        ]);
        f.extend(["-fno-omit-frame-pointer", "-g1"]);
    }
    f
}

/// Compiles `dir/main.cpp` into `out`.
fn compile(dir: &Path, out: &Path, opts: &HostOptions) -> Result<(), HostError> {
    let result = Command::new(&opts.compiler)
        .args(flags(opts))
        .arg("-o")
        .arg(out)
        .arg("main.cpp")
        .current_dir(dir)
        .output();
    let output = match result {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(HostError::CompilerMissing {
                compiler: opts.compiler.clone(),
            })
        }
        Err(e) => return Err(io_err(Path::new(&opts.compiler))(e)),
    };
    if output.status.success() {
        return Ok(());
    }
    let mut log = String::from_utf8_lossy(&output.stderr).into_owned();
    log.push_str(&String::from_utf8_lossy(&output.stdout));
    Err(HostError::Compile { log })
}

/// The compiled program for `dir`'s sources: from the cache, or built (and cached when possible).
fn binary(
    dir: &Path,
    prog: &Program,
    source: &str,
    opts: &HostOptions,
) -> Result<PathBuf, HostError> {
    let f = flags(opts);
    let key = cache_key(&[
        CACHE_VERSION,
        EMU_HEADER,
        source,
        &prog.main_cpp,
        &f.join(" "),
    ]);
    let cache = opts.cache_dir.clone().unwrap_or_else(default_cache_dir);
    let cached = cache.join(format!("{key}.bin"));
    if cached.is_file() {
        return Ok(cached);
    }
    if std::fs::create_dir_all(&cache).is_err() {
        let local = dir.join("prog");
        compile(dir, &local, opts)?;
        return Ok(local);
    }
    // Built under a private name and renamed, so concurrent runs never see a partial binary.
    let tmp = cache.join(format!(
        "{key}.tmp-{}-{}",
        std::process::id(),
        dir_suffix(dir)
    ));
    let built = compile(dir, &tmp, opts);
    if let Err(e) = built {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, &cached).map_err(io_err(&cached))?;
    Ok(cached)
}

fn dir_suffix(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Runs `exe dir`, killing it after `timeout`; returns (success, status text, stderr).
fn run(exe: &Path, dir: &Path, opts: &HostOptions) -> Result<(bool, String, String), HostError> {
    let mut child = Command::new(exe)
        .arg(dir)
        .env("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=0")
        .env("UBSAN_OPTIONS", "print_stacktrace=1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err(exe))?;
    let mut pipe = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(p) = pipe.as_mut() {
            let _ = p.read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).into_owned()
    });
    let start = Instant::now();
    let mut nap = Duration::from_millis(1);
    let status = loop {
        if let Some(s) = child.try_wait().map_err(io_err(exe))? {
            break s;
        }
        if start.elapsed() > opts.timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(HostError::Timeout {
                secs: opts.timeout.as_secs(),
            });
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(20));
    };
    let stderr = reader.join().unwrap_or_default();
    Ok((status.success(), status.to_string(), stderr))
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
