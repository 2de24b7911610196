//! The native CPU backend (issue 16, seed 004 "SIMD化", "並列化"): the optimized region program
//! as C — one function per region ([`emit`]), SIMD loops over the innermost axis with the
//! compiler's scalar tails, OpenMP threads over the outer parallel axes — compiled at run time by
//! the system C compiler with the detected ISA, loaded with `libloading` and cached per
//! (program source, ISA) beside the plan cache ([`build`]), and run on tensors ([`exec`]).
//!
//! The CPU cost model, its measurement log and `calibrate` are [`calibrate`]; extraction for the
//! CPU prices kernels with it ([`pricing`]). Threads spin briefly at OpenMP barriers on a machine
//! with idle cores and sleep at once on a loaded one ([`build::WAIT_POLICY`]).
//!
//! A contraction runs as work items of one column block by one row group (`src/cpu/block.rs`):
//! each packs its block of the column operand while it sits in the thread's cache and applies the
//! region's pointwise epilogue (bias, GELU, ReLU, residual, the output stores) on its block of
//! the result while it is hot. Constant weights (`role: param` inputs) are packed once per
//! [`exec::run_loaded`] call and kept ([`contraction`]).
//!
//! A convolution with a stride-1 or stride-2 window along its innermost axis reads its image in
//! place from a zero-padded copy instead of packing im2col blocks (`direct.rs`).
//!
//! A contraction without batch iters also keeps its index arrays (its points' iter values and
//! buffer offsets) per epoch, so that its steady-state call is one fork and one join (no
//! barriers). Outputs of at least 16 MB in rows form leave through non-temporal stores
//! (`dlc_put_row`).
//!
//! `optimize --target cpu --explain` prints each kernel's loop form, what the emitter chose
//! inside it (packed GEMM and its register tile, kept weight packs, the fused block epilogue,
//! lane reductions, streamed rows, ...) and the CPU roofline's time with what bounds it
//! ([`explain`]).
//!
//! Not yet (TODO(issue 16)): a CPU plan space priced by the roofline — the block width and the
//! row groups (a split over M as well as N when there are fewer column blocks than threads) are
//! chosen at run time by `dlc_gemm_plan` in `gemm.h` (load balance only), the micro-tile and
//! the K slice are fixed; streaming attention (an attention region runs through the generic row
//! form); a depthwise-conv loop; a direct convolution for windows with a row stride
//! past 2 (they pack an im2col); the chunked scan's totals pass is a sequential walk (vectorizable with
//! reassociation).
//!
//! A kernel is priced with every let counted once per point of its free iters, as the C runs it
//! ([`work`]): priced per output element (the GPU analysis' count), LayerNorm's per-row rsqrt and
//! divisions made the fused kernel look dearer than a two-kernel cover at `--threads 1`, whose
//! variance kernel (then a serial fold per row) ran 28 ms against the fused kernel's few. A row's
//! pointwise pass and the fp32 reduction of it that follows share one loop (`emit_fuse.rs`).
//!
//! Diagnostic codes (`E0800`–`E0849`):
//!
//! | code | kind | when |
//! | --- | --- | --- |
//! | E0800 | CCompilerMissing | no `cc`, `gcc` or `clang` (nor `$DLC_CC`) is found |
//! | E0801 | CCompileFailed | internal: the C compiler rejected the generated source |
//! | E0802 | SharedObjectLoadFailed | internal: the compiled shared object does not load |
//! | E0803 | NativeGatherOutOfRange | a gather index is outside its tensor at run time |
//! | E0804 | NativeOutOfMemory | a kernel's scratch buffers cannot be allocated |
//! | E0805 | NativeCodegenFailed | internal: a region cannot be emitted as C |
//! | E0806 | NativeUnboundSymbol | internal: a symbol of the program has no value |
//! | E0807 | NativeCacheFailed | the shared-object cache directory cannot be written |
//! | E0808 | CpuCostFileInvalid | the CPU cost-parameter file cannot be read or is not one |
//! | E0809 | PerfLogInvalid | the measurement log cannot be read, written, or has a malformed row |
//! | E0810 | CalibrationTooFewRows | `calibrate`: fewer than 2 timed kernel rows in the log |

#![allow(clippy::result_large_err)]

mod block;
pub mod build;
pub mod calibrate;
pub mod contraction;
mod cvalue;
mod direct;
pub mod emit;
mod emit_border;
mod emit_expr;
mod emit_fuse;
mod emit_hoist;
mod emit_loops;
mod emit_split;
mod emit_stencil;
pub mod exec;
pub mod explain;
pub mod plan;
mod prefetch;
pub mod pricing;
pub mod program;
mod unshadow;
pub mod work;

use crate::diag::codes;
use crate::diag::Failure;
use crate::diag::{Diagnostic, Location};

/// The C prelude every generated source starts with.
pub const PRELUDE: &str = concat!(include_str!("prelude.h"), include_str!("gemm.h"));

/// The vector ISA the generated code is compiled for (detected at run time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512F (16 fp32 lanes), with F16C.
    Avx512,
    /// AVX2 with FMA (8 fp32 lanes), with F16C.
    Avx2Fma,
    /// Anything else: the compiler's default vectors for the host.
    Scalar,
}

/// The environment variable that compiles for AVX2 with FMA on an AVX-512 machine
/// (`DLC_CPU_ISA=avx2fma`), so that the AVX2 code paths (`gemm.h`'s 16 × 6 channel-vector
/// convolution tile, the 8-lane vectors) run and are tested there. Any other value, or one the
/// machine cannot run, is reported on stderr and the detected ISA is used.
pub const ENV_ISA: &str = "DLC_CPU_ISA";

impl Isa {
    /// The ISA the generated code is compiled for: this machine's ([`Isa::host`]), or AVX2 with
    /// FMA where [`ENV_ISA`] asks for it and the machine has AVX2 and FMA.
    pub fn detect() -> Isa {
        let host = Isa::host();
        let Ok(v) = std::env::var(ENV_ISA) else {
            return host;
        };
        match v.trim() {
            "avx2fma" if host != Isa::Scalar => Isa::Avx2Fma,
            n if n == host.name() => host,
            _ => {
                eprintln!(
                    "warning: {ENV_ISA}=`{v}` is not `avx2fma` on a machine with AVX2 and FMA; \
                     compiling for {}",
                    host.name()
                );
                host
            }
        }
    }

    /// The ISA of this machine.
    pub fn host() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
            {
                return Isa::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Isa::Avx2Fma;
            }
        }
        Isa::Scalar
    }

    /// Its name in cache keys and manifests.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512",
            Isa::Avx2Fma => "avx2fma",
            Isa::Scalar => "scalar",
        }
    }

    /// fp32 lanes of one vector register.
    pub fn lanes(self) -> usize {
        match self {
            Isa::Avx512 => 16,
            Isa::Avx2Fma => 8,
            Isa::Scalar => 4,
        }
    }

    /// The compiler flags selecting it.
    pub fn flags(self) -> Vec<&'static str> {
        match self {
            Isa::Avx512 => vec!["-march=native", "-mprefer-vector-width=512"],
            // without AVX-512 even where the machine has it (`ENV_ISA`)
            Isa::Avx2Fma => vec!["-march=native", "-mno-avx512f", "-mprefer-vector-width=256"],
            Isa::Scalar => vec!["-march=native"],
        }
    }
}

/// What can go wrong in the native backend.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CpuError {
    /// No C compiler.
    #[error("no C compiler found (tried {tried})")]
    CompilerMissing {
        /// The compilers tried, comma-separated.
        tried: String,
    },
    /// The compiler rejected the source.
    #[error("the C compiler `{compiler}` failed: {stderr}")]
    Compile {
        /// The compiler command.
        compiler: String,
        /// Its diagnostics.
        stderr: String,
    },
    /// The shared object does not load or lacks a kernel.
    #[error("cannot load {path}: {why}")]
    Load {
        /// The shared object's path.
        path: String,
        /// The loader's error, or the missing symbol.
        why: String,
    },
    /// A gather index out of range at run time.
    #[error("kernel `{kernel}`: a gather index is outside its tensor")]
    GatherOutOfRange {
        /// The kernel (region) that read out of range.
        kernel: String,
    },
    /// Scratch allocation failed.
    #[error("kernel `{kernel}`: out of memory for its scratch buffers")]
    OutOfMemory {
        /// The kernel (region) whose allocation failed.
        kernel: String,
    },
    /// A region the emitter cannot spell.
    #[error("region `{region}` cannot be emitted as C: {why}")]
    Codegen {
        /// The region's name.
        region: String,
        /// What the emitter cannot spell.
        why: String,
    },
    /// A symbol without a value.
    #[error("symbol `{0}` has no value")]
    UnboundSymbol(String),
    /// The cache directory cannot be written.
    #[error("cannot write the native cache {path}: {why}")]
    Cache {
        /// The cache directory or file.
        path: String,
        /// The I/O error.
        why: String,
    },
    /// The cost-parameter file cannot be read, parsed or written.
    #[error("CPU cost parameters {path}: {why}")]
    CostFile {
        /// The parameter file.
        path: String,
        /// What went wrong.
        why: String,
    },
    /// The measurement log cannot be read or written, or a row is malformed.
    #[error("measurement log {path}: {why}")]
    PerfLog {
        /// The CSV log.
        path: String,
        /// What went wrong (with the row where one is malformed).
        why: String,
    },
    /// Too little to calibrate on.
    #[error("cannot calibrate: {0}")]
    Calibration(String),
}

impl CpuError {
    /// The diagnostic, and whether it is the user's environment or input (not a compiler bug).
    pub fn to_failure(&self) -> Failure {
        let arg = Location::Argument {
            argument: "--device cpu".into(),
        };
        let bug = "this is a compiler bug; use --device reference for the reference result, and \
                   report the graph.json";
        let (code, user, hint): (codes::Code, bool, String) = match self {
            CpuError::CompilerMissing { .. } => (
                codes::C_COMPILER_MISSING,
                true,
                "install a C compiler (Debian/Ubuntu: `apt-get install gcc`; or clang) or point \
                 DLC_CC at one; or use --device reference"
                    .into(),
            ),
            CpuError::Compile { .. } => (codes::C_COMPILE_FAILED, false, bug.into()),
            CpuError::Load { .. } => (codes::SHARED_OBJECT_LOAD_FAILED, false, bug.into()),
            CpuError::GatherOutOfRange { .. } => (
                codes::NATIVE_GATHER_OUT_OF_RANGE,
                true,
                "keep every Gather index within [0, size of the gathered axis)".into(),
            ),
            CpuError::OutOfMemory { .. } => (
                codes::NATIVE_OUT_OF_MEMORY,
                true,
                "bind smaller sizes, or use fewer --threads".into(),
            ),
            CpuError::Codegen { .. } => (codes::NATIVE_CODEGEN_FAILED, false, bug.into()),
            CpuError::UnboundSymbol(_) => (codes::NATIVE_UNBOUND_SYMBOL, false, bug.into()),
            CpuError::Cache { .. } => (
                codes::NATIVE_CACHE_FAILED,
                true,
                "make the --plan-cache directory (or the temporary directory) writable".into(),
            ),
            CpuError::CostFile { .. } => (
                codes::CPU_COST_FILE_INVALID,
                true,
                "write it with `dlc-egg calibrate LOG`, or remove it (or unset DLC_CPU_COST) to \
                 use the default parameters"
                    .into(),
            ),
            CpuError::PerfLog { .. } => (
                codes::PERF_LOG_INVALID,
                true,
                "point DLC_CPU_LOG at a writable file; a log is what `run --device cpu --repeat N` \
                 appends (kernel,form,threads,flops,transcendentals,bytes,estimate_ms,actual_ms)"
                    .into(),
            ),
            CpuError::Calibration(_) => (
                codes::CALIBRATION_TOO_FEW_ROWS,
                true,
                "time more kernels first: `dlc-egg run G --device cpu --repeat 10` appends to the \
                 log"
                .into(),
            ),
        };
        let d = Diagnostic::error(code, arg, self.to_string(), hint);
        if user {
            Failure::user(d)
        } else {
            Failure::internal(d)
        }
    }
}

impl From<CpuError> for Failure {
    fn from(e: CpuError) -> Failure {
        e.to_failure()
    }
}

/// The default thread count: the machine's cores.
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
