//! Compiling CUDA C to a cubin with NVRTC, with no GPU and no CUDA toolkit needed.
//!
//! [`compile`] always compiles for a real target (`sm_80`, `sm_90a`), so that ptxas runs inside
//! NVRTC: bad inline PTX, too much static shared memory and register spills are compile errors
//! here rather than surprises at launch. The flags ([`nvrtc_options`]):
//!
//! - `--gpu-architecture=sm_80` / `sm_90a`, `-std=c++17`, `-I<CUDA include dir>`;
//! - `-Xptxas=-v` (registers, shared memory and spills of every kernel, parsed into
//!   [`KernelResources`]), `-Xptxas=--warn-on-spills` and `-Xptxas=-Werror` (a spill fails the
//!   compilation: [`NvrtcError::RegisterSpill`]);
//! - `--use_fast_math` and `-lineinfo` only when [`CompileOptions`] asks.
//!
//! The headers of [`CompileOptions::headers`] (by default the device header under
//! [`crate::codegen::HEADER_NAME`]) are given to NVRTC by name, so `#include "dlc_kernel.cuh"`
//! needs no file on disk. Kernels should be `extern "C" __global__` so that their names in
//! [`Compiled::kernels`] and in the cubin are the manifest's names.
//!
//! Static shared memory over 48 KiB is an error for both targets
//! ([`NvrtcError::StaticSharedMemory`]; ptxas itself only rejects it for sm_80). Under
//! `-Xptxas=-v` NVRTC's log keeps ptxas's info lines but drops its error messages, so a failed
//! compilation whose log has no error is compiled again without `-v` for the message.
//!
//! With a driver present, NVRTC (seen with 13.0 on an H100) may answer a compilation from the
//! CUDA cache, across processes too; ptxas then does not run and [`Compiled::kernels`] is empty.
//! [`crate::cuda::run_manifest`] then reads the launched kernels' registers and static shared
//! memory from the loaded module (`cuFuncGetAttribute`) before checking the launches; a cached
//! cubin has no spills, since the compilation that made it passed `-Werror` on spills.
//!
//! Dynamic shared memory is only known at launch: [`check_manifest_resources`] adds each
//! launch's `dyn_smem_bytes` to its kernel's static shared memory and checks the sum against the
//! architecture's per-block limit (163 KiB on sm_80, 227 KiB on sm_90).

use super::{wheel_dir, ENV_CUDA_INCLUDE, ENV_NVRTC_LIB, INSTALL_SUGGESTION};
use crate::codegen::manifest::{Manifest, ManifestStep};
use crate::target::Arch;
use cudarc::nvrtc::sys;
use std::ffi::{c_char, c_int, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Why compiling failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NvrtcError {
    /// libnvrtc or the CUDA headers cannot be found or loaded.
    #[error("NVRTC is not available: {why}; {suggestion}")]
    Unavailable {
        /// What is missing or failed to load.
        why: String,
        /// How to install or point to it.
        suggestion: String,
    },
    /// The source or an option cannot be passed to NVRTC (a NUL byte).
    #[error("invalid NVRTC input: {what} contains a NUL byte")]
    InvalidInput {
        /// The source or the option holding the NUL byte.
        what: String,
    },
    /// The source does not compile (front end, or ptxas on the generated PTX).
    #[error("compilation for {target} failed:\n{log}")]
    Compile {
        /// The target (`sm_80`, `sm_90a`).
        target: String,
        /// NVRTC's (or ptxas's) log.
        log: String,
    },
    /// ptxas spilled registers of a kernel to local memory (an error under `-Werror`).
    #[error("kernel `{kernel}` spills registers on {target} ({spill_bytes} bytes):\n{log}")]
    RegisterSpill {
        /// The kernel's name.
        kernel: String,
        /// The target (`sm_80`, `sm_90a`).
        target: String,
        /// Bytes spilled (stores to local memory).
        spill_bytes: u32,
        /// ptxas's log.
        log: String,
    },
    /// A kernel declares more static shared memory than a block may (48 KiB; more must be
    /// dynamic). ptxas rejects it for sm_80; for sm_90a the compile path does.
    #[error(
        "kernel `{kernel}` declares {static_bytes} B of static shared memory on {target}, over \
         the {limit} B a block may declare statically (use dynamic shared memory)"
    )]
    StaticSharedMemory {
        /// The kernel's name.
        kernel: String,
        /// The target.
        target: String,
        /// Static shared memory declared, bytes.
        static_bytes: u32,
        /// The static limit per block, bytes (48 KiB).
        limit: u32,
    },
    /// Static plus dynamic shared memory of a launch exceed the architecture's per-block limit.
    #[error(
        "kernel `{kernel}` needs {static_bytes} B static + {dyn_bytes} B dynamic shared memory \
         per block, over the {limit} B limit of {target}"
    )]
    SharedMemory {
        /// The kernel's name.
        kernel: String,
        /// The target.
        target: String,
        /// Static shared memory, bytes.
        static_bytes: u32,
        /// Dynamic shared memory of the launch, bytes.
        dyn_bytes: u32,
        /// The architecture's per-block limit, bytes.
        limit: u32,
    },
    /// A launch cannot start: its block shape or its registers per block exceed the limits.
    #[error("kernel `{kernel}` cannot be launched on {target}: {why}")]
    LaunchResources {
        /// The kernel's name.
        kernel: String,
        /// The target.
        target: String,
        /// Which limit the launch exceeds.
        why: String,
    },
    /// The manifest launches a kernel the compiled source does not define.
    #[error("the manifest launches `{kernel}`, which the compiled source does not define (defined: {defined})")]
    MissingKernel {
        /// The kernel the manifest launches.
        kernel: String,
        /// The kernels the source defines, comma-separated.
        defined: String,
    },
    /// An NVRTC call other than the compilation itself failed.
    #[error("{call} failed: {code}")]
    Api {
        /// The NVRTC function.
        call: String,
        /// Its result code.
        code: String,
    },
}

/// How to compile.
#[derive(Clone, Debug, PartialEq)]
pub struct CompileOptions {
    /// `--use_fast_math` (approximate division, square root and transcendentals; flush to zero).
    pub fast_math: bool,
    /// `-lineinfo` (source lines for profilers).
    pub line_info: bool,
    /// Headers given to NVRTC by include name, as `(name, contents)`.
    pub headers: Vec<(String, String)>,
}

impl Default for CompileOptions {
    /// No fast math, no line info, the device header under `dlc_kernel.cuh`.
    fn default() -> CompileOptions {
        CompileOptions {
            fast_math: false,
            line_info: false,
            headers: vec![(
                crate::codegen::HEADER_NAME.to_string(),
                crate::codegen::DEVICE_HEADER.to_string(),
            )],
        }
    }
}

/// What ptxas reports for one kernel (`-Xptxas=-v`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelResources {
    /// The entry function's name (mangled unless the kernel is `extern "C"`).
    pub name: String,
    /// 32-bit registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_smem_bytes: u32,
    /// Spill stores plus spill loads, bytes (0 unless the compilation failed on spills).
    pub spill_bytes: u32,
}

/// A compiled program.
#[derive(Clone, Debug, PartialEq)]
pub struct Compiled {
    /// The architecture compiled for.
    pub arch: Arch,
    /// The cubin (an ELF image for `cuModuleLoadData`).
    pub cubin: Vec<u8>,
    /// NVRTC's log, ptxas's `-v` lines included.
    pub log: String,
    /// Every entry function, sorted by name.
    pub kernels: Vec<KernelResources>,
}

impl Compiled {
    /// The resources of kernel `name`.
    pub fn kernel(&self, name: &str) -> Option<&KernelResources> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// The instruction mix of every kernel of the cubin (`cuobjdump -sass`, see
    /// [`super::sass`]), sorted by name.
    pub fn sass(&self) -> Result<Vec<super::sass::SassSummary>, super::sass::SassError> {
        super::sass::sass_summary(&self.cubin)
    }
}

/// The NVRTC found on this machine.
#[derive(Debug)]
pub struct Toolchain {
    /// The library loaded: a path, or `system` when found by the loader's search.
    pub library: String,
    /// The CUDA include directory passed as `-I`.
    pub include_dir: PathBuf,
    /// NVRTC's version, `(major, minor)`.
    pub version: (i32, i32),
    /// Keeps the preloaded library mapped for the life of the process.
    _preloaded: Option<libloading::Library>,
}

/// Where libnvrtc is, before loading it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LibChoice {
    /// A file given by `DLC_NVRTC_LIB` or installed under `.cuda/`.
    Path(PathBuf),
    /// The loader's search by library name.
    System,
}

/// The `--gpu-architecture` value: a real target, so that ptxas runs.
pub fn gpu_architecture(arch: Arch) -> &'static str {
    match arch {
        Arch::Sm80 => "sm_80",
        Arch::Sm90 => "sm_90a",
    }
}

/// Loads (once per process) and describes NVRTC; [`NvrtcError::Unavailable`] with the
/// suggestion to run `scripts/install-cuda-wheels.sh` when it is missing.
pub fn toolchain() -> Result<&'static Toolchain, NvrtcError> {
    static TOOLCHAIN: OnceLock<Result<Toolchain, NvrtcError>> = OnceLock::new();
    TOOLCHAIN
        .get_or_init(|| {
            let env_lib = std::env::var(ENV_NVRTC_LIB).ok();
            let env_include = std::env::var(ENV_CUDA_INCLUDE).ok();
            load_toolchain(env_lib.as_deref(), env_include.as_deref(), &wheel_dir())
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn unavailable(why: impl Into<String>) -> NvrtcError {
    NvrtcError::Unavailable {
        why: why.into(),
        suggestion: INSTALL_SUGGESTION.to_string(),
    }
}

/// Chooses the libnvrtc to load: `env_lib` (which must exist), else `<wheels>/lib/libnvrtc.so.13`
/// when present, else the system's.
pub fn choose_library(env_lib: Option<&str>, wheels: &Path) -> Result<LibChoice, NvrtcError> {
    if let Some(p) = env_lib.filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(LibChoice::Path(p))
        } else {
            Err(unavailable(format!(
                "{ENV_NVRTC_LIB}={} is not a file",
                p.display()
            )))
        };
    }
    let wheel_lib = wheels.join("lib").join("libnvrtc.so.13");
    if wheel_lib.is_file() {
        Ok(LibChoice::Path(wheel_lib))
    } else {
        Ok(LibChoice::System)
    }
}

/// Chooses the include directory (the first holding `cuda_fp16.h`): `env_include` (which must
/// hold it), `include/` beside the library's directory, `<wheels>/include`, `$CUDA_HOME/include`,
/// `/usr/local/cuda/include`.
pub fn choose_include_dir(
    env_include: Option<&str>,
    lib: &LibChoice,
    wheels: &Path,
) -> Result<PathBuf, NvrtcError> {
    let has_headers = |d: &Path| d.join("cuda_fp16.h").is_file();
    if let Some(d) = env_include.filter(|d| !d.is_empty()) {
        let d = PathBuf::from(d);
        return if has_headers(&d) {
            Ok(d)
        } else {
            Err(unavailable(format!(
                "{ENV_CUDA_INCLUDE}={} holds no cuda_fp16.h",
                d.display()
            )))
        };
    }
    let mut candidates = Vec::new();
    if let LibChoice::Path(p) = lib {
        if let Some(root) = p.parent().and_then(Path::parent) {
            candidates.push(root.join("include"));
        }
    }
    candidates.push(wheels.join("include"));
    if let Ok(home) = std::env::var("CUDA_HOME") {
        candidates.push(PathBuf::from(home).join("include"));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/include"));
    candidates
        .into_iter()
        .find(|d| has_headers(d))
        .ok_or_else(|| {
            unavailable(format!(
                "the CUDA headers (cuda_fp16.h) are not in {}/include, $CUDA_HOME/include or \
             /usr/local/cuda/include, and {ENV_CUDA_INCLUDE} is not set",
                wheels.display()
            ))
        })
}

fn load_toolchain(
    env_lib: Option<&str>,
    env_include: Option<&str>,
    wheels: &Path,
) -> Result<Toolchain, NvrtcError> {
    let choice = choose_library(env_lib, wheels)?;
    let (library, preloaded) = match &choice {
        LibChoice::Path(p) => {
            // SAFETY: loading libnvrtc runs only its initializers; cudarc then finds the mapped
            // library by its soname (dlopen returns the already loaded object).
            let lib = unsafe { libloading::Library::new(p) }
                .map_err(|e| unavailable(format!("{} cannot be loaded: {e}", p.display())))?;
            (p.display().to_string(), Some(lib))
        }
        LibChoice::System => ("system".to_string(), None),
    };
    // SAFETY: only tries to dlopen the candidate names.
    if !unsafe { sys::is_culib_present() } {
        let why = match &choice {
            LibChoice::Path(p) => format!(
                "{} loads, but not under any name cudarc looks for (libnvrtc.so.13, …)",
                p.display()
            ),
            LibChoice::System => format!(
                "libnvrtc was not found: {ENV_NVRTC_LIB} is not set, {} does not exist, and no \
                 system libnvrtc (libnvrtc.so.13, …) is on the loader's path",
                wheels.join("lib").join("libnvrtc.so.13").display()
            ),
        };
        return Err(unavailable(why));
    }
    if let (LibChoice::Path(p), Some(lib)) = (&choice, &preloaded) {
        // cudarc opens libnvrtc by name (`libnvrtc.so` first): make sure that name found the
        // preloaded file, not another libnvrtc on the loader's path.
        let address = |l: &libloading::Library| {
            // SAFETY: looking a symbol up runs nothing.
            unsafe { l.get::<*const std::ffi::c_void>(b"nvrtcVersion") }
                .ok()
                .map(|s| *s)
        };
        // SAFETY: cudarc's library handle; present (checked above).
        let theirs = address(unsafe { sys::culib() });
        if theirs.is_none() || theirs != address(lib) {
            return Err(unavailable(format!(
                "{} is loaded, but cudarc resolved libnvrtc to another library on the loader's \
                 path; remove that one from LD_LIBRARY_PATH, or point {ENV_NVRTC_LIB} at it",
                p.display()
            )));
        }
    }
    let include_dir = choose_include_dir(env_include, &choice, wheels)?;
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: the library is loaded (checked above); the pointers are valid for writes.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| api("nvrtcVersion", e))?;
    if major < 12 {
        return Err(unavailable(format!(
            "{library} is NVRTC {major}.{minor}; sm_90a needs NVRTC 12 or newer"
        )));
    }
    Ok(Toolchain {
        library,
        include_dir,
        version: (major, minor),
        _preloaded: preloaded,
    })
}

fn api(call: &str, e: cudarc::nvrtc::result::NvrtcError) -> NvrtcError {
    NvrtcError::Api {
        call: call.to_string(),
        code: format!("{:?}", e.0),
    }
}

/// The NVRTC options [`compile`] passes.
pub fn nvrtc_options(arch: Arch, opts: &CompileOptions, include_dir: &Path) -> Vec<String> {
    let mut o = vec![
        format!("--gpu-architecture={}", gpu_architecture(arch)),
        "-std=c++17".to_string(),
        format!("-I{}", include_dir.display()),
        "-Xptxas=-v".to_string(),
        "-Xptxas=--warn-on-spills".to_string(),
        "-Xptxas=-Werror".to_string(),
    ];
    if opts.fast_math {
        o.push("--use_fast_math".to_string());
    }
    if opts.line_info {
        o.push("-lineinfo".to_string());
    }
    o
}

fn cstring(what: &str, s: &str) -> Result<CString, NvrtcError> {
    CString::new(s).map_err(|_| NvrtcError::InvalidInput {
        what: what.to_string(),
    })
}

/// Destroys an NVRTC program when dropped.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram and destroyed only here.
        let _ = unsafe { sys::nvrtcDestroyProgram(&mut self.0) };
    }
}

/// Static shared memory one block may declare, bytes (more must be dynamic, on every arch).
pub const STATIC_SMEM_LIMIT: u32 = 48 * 1024;

/// Compiles `source` for `arch` into a cubin; see the module documentation for the flags and
/// errors.
pub fn compile(source: &str, arch: Arch, opts: &CompileOptions) -> Result<Compiled, NvrtcError> {
    let tc = toolchain()?;
    let target = gpu_architecture(arch).to_string();
    let options = nvrtc_options(arch, opts, &tc.include_dir);
    let (outcome, log) = run_nvrtc(source, &opts.headers, &options, false)?;
    let mut kernels = parse_ptxas_log(&log);
    kernels.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(k) = kernels.iter().find(|k| k.spill_bytes > 0) {
        return Err(NvrtcError::RegisterSpill {
            kernel: k.name.clone(),
            target,
            spill_bytes: k.spill_bytes,
            log,
        });
    }
    // ptxas rejects too much static shared memory for sm_80 but not for sm_90a.
    if let Some(k) = kernels
        .iter()
        .find(|k| k.static_smem_bytes > STATIC_SMEM_LIMIT)
    {
        return Err(NvrtcError::StaticSharedMemory {
            kernel: k.name.clone(),
            target,
            static_bytes: k.static_smem_bytes,
            limit: STATIC_SMEM_LIMIT,
        });
    }
    match outcome {
        Some(cubin) => Ok(Compiled {
            arch,
            cubin,
            log,
            kernels,
        }),
        None => {
            // Under `-Xptxas=-v` NVRTC's log keeps ptxas's info lines but loses its error
            // messages; compile again without it for them.
            let log = if log.contains("error") {
                log
            } else {
                let quiet: Vec<String> =
                    options.into_iter().filter(|o| o != "-Xptxas=-v").collect();
                let (_, again) = run_nvrtc(source, &opts.headers, &quiet, false)?;
                format!("{log}{again}")
            };
            Err(NvrtcError::Compile { target, log })
        }
    }
}

/// The PTX of `source` for `arch`'s virtual architecture (`compute_80`, `compute_90a`): what
/// inline assembly and intrinsics the kernels issue (`wgmma.mma_async`, `cp.async.bulk.tensor`,
/// `mbarrier`), before ptxas.
pub fn ptx(source: &str, arch: Arch, opts: &CompileOptions) -> Result<String, NvrtcError> {
    let tc = toolchain()?;
    let virt = gpu_architecture(arch).replace("sm_", "compute_");
    let options = vec![
        format!("--gpu-architecture={virt}"),
        "-std=c++17".to_string(),
        format!("-I{}", tc.include_dir.display()),
    ];
    match run_nvrtc(source, &opts.headers, &options, true)? {
        (Some(bytes), _) => Ok(String::from_utf8_lossy(&bytes)
            .trim_end_matches('\0')
            .to_string()),
        (None, log) => Err(NvrtcError::Compile { target: virt, log }),
    }
}

/// One NVRTC compilation: the cubin (the PTX with `ptx`; `None` when the compilation failed)
/// and the log.
fn run_nvrtc(
    source: &str,
    headers: &[(String, String)],
    options: &[String],
    ptx: bool,
) -> Result<(Option<Vec<u8>>, String), NvrtcError> {
    let src = cstring("the source", source)?;
    let name = cstring("the program name", "kernels.cu")?;
    let header_names = headers
        .iter()
        .map(|(n, _)| cstring(&format!("header name `{n}`"), n))
        .collect::<Result<Vec<_>, _>>()?;
    let header_texts = headers
        .iter()
        .map(|(n, t)| cstring(&format!("header `{n}`"), t))
        .collect::<Result<Vec<_>, _>>()?;
    let options = options
        .iter()
        .map(|o| cstring(&format!("option `{o}`"), o))
        .collect::<Result<Vec<_>, _>>()?;
    let name_ptrs: Vec<*const c_char> = header_names.iter().map(|c| c.as_ptr()).collect();
    let text_ptrs: Vec<*const c_char> = header_texts.iter().map(|c| c.as_ptr()).collect();
    let option_ptrs: Vec<*const c_char> = options.iter().map(|c| c.as_ptr()).collect();
    let count = |n: usize, what: &str| {
        c_int::try_from(n).map_err(|_| NvrtcError::InvalidInput {
            what: format!("the number of {what}"),
        })
    };
    let mut raw: sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer refers to a live NUL-terminated string; the arrays have `count`
    // entries; NVRTC copies what it keeps.
    unsafe {
        sys::nvrtcCreateProgram(
            &mut raw,
            src.as_ptr(),
            name.as_ptr(),
            count(text_ptrs.len(), "headers")?,
            text_ptrs.as_ptr(),
            name_ptrs.as_ptr(),
        )
    }
    .result()
    .map_err(|e| api("nvrtcCreateProgram", e))?;
    let prog = Program(raw);
    // SAFETY: `prog` is a live program; the options outlive the call.
    let compiled = unsafe {
        sys::nvrtcCompileProgram(
            prog.0,
            count(option_ptrs.len(), "options")?,
            option_ptrs.as_ptr(),
        )
    }
    .result();
    let log = program_log(&prog)?;
    match compiled {
        Ok(()) if ptx => Ok((Some(program_ptx(&prog)?), log)),
        Ok(()) => Ok((Some(program_cubin(&prog)?), log)),
        Err(e) if e.0 == sys::nvrtcResult::NVRTC_ERROR_COMPILATION => Ok((None, log)),
        Err(e) => Err(api("nvrtcCompileProgram", e)),
    }
}

fn program_log(prog: &Program) -> Result<String, NvrtcError> {
    // SAFETY: `prog` is a live program.
    let raw = unsafe { cudarc::nvrtc::result::get_program_log(prog.0) }
        .map_err(|e| api("nvrtcGetProgramLog", e))?;
    let bytes: Vec<u8> = raw
        .iter()
        .map(|c| *c as u8)
        .take_while(|b| *b != 0)
        .collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn program_cubin(prog: &Program) -> Result<Vec<u8>, NvrtcError> {
    let mut size = 0usize;
    // SAFETY: `prog` is a live, compiled program; `size` is valid for writes.
    unsafe { sys::nvrtcGetCUBINSize(prog.0, &mut size) }
        .result()
        .map_err(|e| api("nvrtcGetCUBINSize", e))?;
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` has the size NVRTC asked for.
    unsafe { sys::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr().cast::<c_char>()) }
        .result()
        .map_err(|e| api("nvrtcGetCUBIN", e))?;
    Ok(cubin)
}

fn program_ptx(prog: &Program) -> Result<Vec<u8>, NvrtcError> {
    let mut size = 0usize;
    // SAFETY: `prog` is a live, compiled program; `size` is valid for writes.
    unsafe { sys::nvrtcGetPTXSize(prog.0, &mut size) }
        .result()
        .map_err(|e| api("nvrtcGetPTXSize", e))?;
    let mut ptx = vec![0u8; size];
    // SAFETY: `ptx` has the size NVRTC asked for.
    unsafe { sys::nvrtcGetPTX(prog.0, ptx.as_mut_ptr().cast::<c_char>()) }
        .result()
        .map_err(|e| api("nvrtcGetPTX", e))?;
    Ok(ptx)
}

/// The first `'…'`-quoted word after `keyword` in `line`.
fn quoted_after(line: &str, keyword: &str) -> Option<String> {
    let rest = &line[line.find(keyword)? + keyword.len()..];
    let start = rest.find('\'')? + 1;
    let len = rest[start..].find('\'')?;
    Some(rest[start..start + len].to_string())
}

/// The number just before `unit` in `line` (`"20 registers"`, `"768 bytes smem"`).
fn number_before(line: &str, unit: &str) -> Option<u32> {
    let head = line[..line.find(unit)?].trim_end();
    let digits = head.rsplit(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok()
}

/// Parses ptxas's `-v` lines into one [`KernelResources`] per entry function:
///
/// ```text
/// ptxas info    : Compiling entry function 'gemm' for 'sm_80'
/// ptxas info    : Function properties for gemm
///     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
/// ptxas info    : Used 20 registers, used 1 barriers, 768 bytes smem, 356 bytes cmem[0]
/// ```
pub fn parse_ptxas_log(log: &str) -> Vec<KernelResources> {
    let mut kernels: Vec<KernelResources> = Vec::new();
    // The function whose "Function properties" block is being read, if it is an entry.
    let mut properties_of: Option<usize> = None;
    let mut current: Option<usize> = None;
    for line in log.lines() {
        if line.contains("Compiling entry function") {
            let Some(name) = quoted_after(line, "function") else {
                continue;
            };
            let at = match kernels.iter().position(|k| k.name == name) {
                Some(i) => i,
                None => {
                    kernels.push(KernelResources {
                        name,
                        ..KernelResources::default()
                    });
                    kernels.len() - 1
                }
            };
            current = Some(at);
            properties_of = None;
        } else if let Some(i) = line.find("Function properties for ") {
            let name = line[i + "Function properties for ".len()..].trim();
            properties_of = kernels.iter().position(|k| k.name == name);
        } else if line.contains("spill stores") {
            if let Some(k) = properties_of.and_then(|i| kernels.get_mut(i)) {
                k.spill_bytes = number_before(line, "bytes spill stores").unwrap_or(0)
                    + number_before(line, "bytes spill loads").unwrap_or(0);
            }
        } else if line.contains("Used ") && line.contains(" registers") {
            if let Some(k) = current.and_then(|i| kernels.get_mut(i)) {
                k.registers = number_before(line, " registers").unwrap_or(0);
                k.static_smem_bytes = number_before(line, " bytes smem").unwrap_or(0);
            }
        }
    }
    kernels
}

/// Threads of one block may hold at most this many registers (sm_80 and sm_90).
pub const REGS_PER_BLOCK: u32 = 65536;

/// Registers are allocated per warp in units of this many.
const REG_ALLOC_UNIT: u32 = 256;

/// Checks every launch of `manifest` against what `compiled` says of its kernel: the kernel
/// exists; static plus dynamic shared memory fit the per-block limit of `compiled.arch` (163 KiB
/// on sm_80, 227 KiB on sm_90); the block has 1 to 1024 threads within the per-axis limits; its
/// warps' registers fit the 64 Ki registers of a block.
pub fn check_manifest_resources(
    compiled: &Compiled,
    manifest: &Manifest,
) -> Result<(), NvrtcError> {
    let target = gpu_architecture(compiled.arch).to_string();
    let limit = compiled.arch.target().smem_per_block;
    for step in &manifest.steps {
        let ManifestStep::Launch(l) = step else {
            continue;
        };
        let k = compiled
            .kernel(&l.kernel)
            .ok_or_else(|| NvrtcError::MissingKernel {
                kernel: l.kernel.clone(),
                defined: compiled
                    .kernels
                    .iter()
                    .map(|k| k.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let total = u64::from(k.static_smem_bytes) + u64::from(l.dyn_smem_bytes);
        if total > u64::from(limit) {
            return Err(NvrtcError::SharedMemory {
                kernel: l.kernel.clone(),
                target,
                static_bytes: k.static_smem_bytes,
                dyn_bytes: l.dyn_smem_bytes,
                limit,
            });
        }
        let launch_error = |why: String| NvrtcError::LaunchResources {
            kernel: l.kernel.clone(),
            target: target.clone(),
            why,
        };
        let [x, y, z] = l.block;
        let threads = u64::from(x) * u64::from(y) * u64::from(z);
        if threads == 0 || threads > 1024 || x > 1024 || y > 1024 || z > 64 {
            return Err(launch_error(format!(
                "block {:?} must have 1 to 1024 threads (x, y ≤ 1024, z ≤ 64)",
                l.block
            )));
        }
        let warps = threads.div_ceil(32);
        let per_warp = (u64::from(k.registers) * 32).div_ceil(u64::from(REG_ALLOC_UNIT))
            * u64::from(REG_ALLOC_UNIT);
        if warps * per_warp > u64::from(REGS_PER_BLOCK) {
            return Err(launch_error(format!(
                "{threads} threads × {} registers need {} registers, over the {REGS_PER_BLOCK} of a block",
                k.registers,
                warps * per_warp
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptxas_log_is_parsed_per_entry() {
        let log = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'a' for 'sm_80'
ptxas info    : Function properties for a
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 20 registers, used 1 barriers, 768 bytes smem, 356 bytes cmem[0]
ptxas info    : Function properties for helper
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function 'b' for 'sm_80'
ptxas info    : Function properties for b
    16 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 255 registers, 356 bytes cmem[0]
";
        let ks = parse_ptxas_log(log);
        assert_eq!(
            ks,
            vec![
                KernelResources {
                    name: "a".into(),
                    registers: 20,
                    static_smem_bytes: 768,
                    spill_bytes: 0
                },
                KernelResources {
                    name: "b".into(),
                    registers: 255,
                    static_smem_bytes: 0,
                    spill_bytes: 20
                },
            ]
        );
    }

    #[test]
    fn library_and_include_choice() {
        let dir = tempfile::tempdir().expect("temp dir");
        let wheels = dir.path().join("cu13");
        // Nothing installed: the system's library; no headers anywhere under the wheels.
        assert_eq!(choose_library(None, &wheels), Ok(LibChoice::System));
        let missing = dir.path().join("nope.so");
        let err = choose_library(missing.to_str(), &wheels).expect_err("missing file");
        assert!(
            matches!(&err, NvrtcError::Unavailable { suggestion, .. } if suggestion == INSTALL_SUGGESTION),
            "{err}"
        );
        assert!(err
            .to_string()
            .contains("run scripts/install-cuda-wheels.sh"));
        // Installed wheels: their library and headers.
        std::fs::create_dir_all(wheels.join("lib")).expect("mkdir");
        std::fs::create_dir_all(wheels.join("include")).expect("mkdir");
        let lib = wheels.join("lib").join("libnvrtc.so.13");
        std::fs::write(&lib, b"").expect("write");
        std::fs::write(wheels.join("include").join("cuda_fp16.h"), b"").expect("write");
        let choice = choose_library(None, &wheels).expect("wheel library");
        assert_eq!(choice, LibChoice::Path(lib));
        assert_eq!(
            choose_include_dir(None, &choice, &wheels).expect("headers"),
            wheels.join("include")
        );
        let err = choose_include_dir(dir.path().to_str(), &choice, &wheels).expect_err("no h");
        assert!(err.to_string().contains(ENV_CUDA_INCLUDE), "{err}");
    }

    #[test]
    fn options_follow_the_request() {
        let inc = Path::new("/inc");
        let base = nvrtc_options(Arch::Sm90, &CompileOptions::default(), inc);
        assert!(base.contains(&"--gpu-architecture=sm_90a".to_string()));
        assert!(base.contains(&"-Xptxas=-Werror".to_string()));
        assert!(!base
            .iter()
            .any(|o| o == "--use_fast_math" || o == "-lineinfo"));
        let fast = CompileOptions {
            fast_math: true,
            line_info: true,
            ..CompileOptions::default()
        };
        let o = nvrtc_options(Arch::Sm80, &fast, inc);
        assert!(o.contains(&"--gpu-architecture=sm_80".to_string()));
        assert!(o.contains(&"--use_fast_math".to_string()));
        assert!(o.contains(&"-lineinfo".to_string()));
    }
}
