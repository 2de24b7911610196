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

mod library;
mod resources;

pub use library::{choose_include_dir, choose_library, toolchain, LibChoice, Toolchain};
pub use resources::{check_manifest_resources, parse_ptxas_log, REGS_PER_BLOCK};

use crate::target::Arch;
use cudarc::nvrtc::sys;
use std::ffi::{c_char, c_int, CString};
use std::path::Path;

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

/// The `--gpu-architecture` value: a real target, so that ptxas runs.
pub fn gpu_architecture(arch: Arch) -> &'static str {
    match arch {
        Arch::Sm80 => "sm_80",
        Arch::Sm90 => "sm_90a",
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
