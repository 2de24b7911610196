//! Compile and load: the system C compiler found at run time (`$DLC_CC`, else `cc`, `gcc`,
//! `clang` on `PATH`), `-O3` with the detected ISA, OpenMP, glibc's vector math (`libmvec`) where
//! it links; the shared object is cached by the hash of (source, flags, ISA) in a cache
//! directory (beside the plan cache, or under the temporary directory) and loaded with
//! `libloading`.

use super::program::NativeProgram;
use super::{CpuError, Isa};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The environment variable naming the C compiler to use.
pub const ENV_CC: &str = "DLC_CC";

/// A kernel entry point: `int k(void *const *bufs, const int64_t *syms, int threads)`.
pub type KernelFn = unsafe extern "C" fn(*const *mut u8, *const i64, i32) -> i32;

/// Set to `0` to keep the C compiler from fusing multiplies and adds (FMA): every product and sum
/// then rounds as the reference rounds it (a contraction whose k order is the reference's is
/// bit-identical to it), at up to half the multiply-add throughput. By default `a·b + c` is
/// contracted: one rounding instead of two, well inside graph-json's fp32 tolerance
/// (`rtol = atol = 1e-3`), and what vendor libraries and the CUDA path do.
pub const ENV_FMA: &str = "DLC_CPU_FMA";

/// Whether generated code may contract `a·b + c` into FMA ([`ENV_FMA`] not `0`).
pub fn fma_enabled() -> bool {
    !std::env::var(ENV_FMA).is_ok_and(|v| v.trim() == "0")
}

/// Whether the cores are AMD's (Zen): there a 512-bit multiply or add issues at half the rate
/// of two 256-bit ones on separate pipes, so the unfused GEMM tile stays 256 bits wide.
fn amd_cores() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // `cpuid` leaf 0: the vendor string, on every x86-64 processor.
        let r = std::arch::x86_64::__cpuid(0);
        let vendor: Vec<u8> = [r.ebx, r.edx, r.ecx]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        vendor == b"AuthenticAMD"
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the GEMM micro-kernel uses 512-bit registers (`-DDLC_GEMM_WIDE`, an 8 × 32 tile of
/// 16 zmm accumulators): on AVX-512 machines with FMA contraction, and without it except on AMD
/// cores (measured on an Intel Emerald Rapids core, fp32 1024³, one thread: 8 × 16 ymm 47 GFLOP/s
/// unfused, 8 × 32 zmm 69 unfused and 120 with FMA; on a Zen 4 core the unfused ymm tile was
/// the fastest, 106–112 against 75–81 for zmm).
pub fn wide_gemm(isa: Isa, fma: bool) -> bool {
    isa == Isa::Avx512 && (fma || !amd_cores())
}

/// Overrides `DLC_STREAM_MIN_BYTES` of the prelude (outputs of at least this many bytes are
/// staged per row and written with non-temporal stores): a byte count; a huge one turns
/// streaming off (`0..=i64::MAX`). A value that is not a byte count is reported and ignored.
/// For A/B measurements of the streaming policy (issue 16: softmax 1 thread under load, 7.2 ms
/// streamed against 6.0 ms stored directly, bench/cpu/README.md).
pub const ENV_STREAM_MIN_BYTES: &str = "DLC_CPU_STREAM_MIN_BYTES";

/// The flags every compile uses (before the optional `libmvec` ones): `-ffp-contract=fast`, or
/// with `DLC_CPU_FMA=0` `-ffp-contract=off` and `-DDLC_EXACT_DIV` (every op rounds as the
/// reference rounds it, divisions by a row's scalar included); the GEMM tile width ([`wide_gemm`]).
///
/// `-fno-trapping-math`: the generated code never reads the floating-point exception flags, and
/// with trapping math GCC 12 does not if-convert a select between two computed values (`t >
/// 0.93 ? big : small` in `dlc_erff`, `x != x ? x : y` in `dlc_expf`) without AVX-512's masks:
/// on an AVX2 machine every loop with an exponential, erf, tanh or sigmoid stayed scalar (the
/// values computed are the same either way; the flag only lets the compiler evaluate both arms).
pub fn base_flags(isa: Isa) -> Vec<String> {
    let fma = fma_enabled();
    let contract = if fma {
        "-ffp-contract=fast"
    } else {
        "-ffp-contract=off"
    };
    let mut f: Vec<String> = [
        "-O3",
        "-fopenmp",
        "-fno-math-errno",
        "-fno-trapping-math",
        contract,
        "-fPIC",
        "-shared",
        "-std=gnu11",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    f.extend(isa.flags().iter().map(|s| s.to_string()));
    if wide_gemm(isa, fma) {
        f.push("-DDLC_GEMM_WIDE".into());
    }
    if !fma {
        f.push("-DDLC_EXACT_DIV".into());
    }
    if let Ok(v) = std::env::var(ENV_STREAM_MIN_BYTES) {
        match v.trim().parse::<i64>() {
            Ok(n) if n >= 0 => f.push(format!("-DDLC_STREAM_MIN_BYTES=({n}ll)")),
            _ => eprintln!(
                "warning: {ENV_STREAM_MIN_BYTES}=`{v}` is not a byte count; the default threshold is used"
            ),
        }
    }
    f
}

/// The C compiler: `$DLC_CC`, else the first of `cc`, `gcc`, `clang` that runs.
pub fn find_compiler() -> Result<String, CpuError> {
    let mut tried = Vec::new();
    let candidates: Vec<String> = match std::env::var(ENV_CC) {
        Ok(c) if !c.is_empty() => vec![c],
        _ => vec!["cc".into(), "gcc".into(), "clang".into()],
    };
    for c in candidates {
        let ok = Command::new(&c)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if ok {
            return Ok(c);
        }
        tried.push(c);
    }
    Err(CpuError::CompilerMissing {
        tried: tried.join(", "),
    })
}

/// A loaded program: one entry point per kernel.
pub struct Loaded {
    /// Kernel entry points, in the program's kernel order.
    pub kernels: Vec<KernelFn>,
    /// The shared object file.
    pub path: PathBuf,
    /// Whether it came from the cache.
    pub cached: bool,
}

/// Libraries stay loaded for the life of the process: unloading one would unload the OpenMP
/// runtime it pulled in while its worker threads still run (a crash at exit), and a program
/// run again finds its library here without a second `dlopen`.
fn loaded_libraries() -> &'static Mutex<BTreeMap<PathBuf, &'static libloading::Library>> {
    static LIBS: OnceLock<Mutex<BTreeMap<PathBuf, &'static libloading::Library>>> = OnceLock::new();
    LIBS.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// The cache directory: `<plan cache>/native` or `<tmp>/dlc-egg-native`.
pub fn cache_dir(plan_cache: Option<&Path>) -> PathBuf {
    match plan_cache {
        Some(d) => d.join("native"),
        None => std::env::temp_dir().join("dlc-egg-native"),
    }
}

/// Compiles `prog` (or finds it in `dir`) and loads it.
pub fn build_and_load(prog: &NativeProgram, isa: Isa, dir: &Path) -> Result<Loaded, CpuError> {
    let flags = base_flags(isa);
    let key = crate::shapes::cache::graph_hash(
        format!("{}\n{}\n{}", flags.join(" "), isa.name(), prog.source).as_bytes(),
    );
    let so = dir.join(format!("dlc-{}-{key}.so", isa.name()));
    let cached = so.exists();
    if !cached {
        compile(&prog.source, &flags, dir, &so)?;
    }
    load(prog, &so, cached)
}

fn cache_err(path: &Path, e: impl std::fmt::Display) -> CpuError {
    CpuError::Cache {
        path: path.display().to_string(),
        why: e.to_string(),
    }
}

fn compile(source: &str, flags: &[String], dir: &Path, so: &Path) -> Result<(), CpuError> {
    let cc = find_compiler()?;
    std::fs::create_dir_all(dir).map_err(|e| cache_err(dir, e))?;
    let unique = format!("{}-{:?}", std::process::id(), std::thread::current().id())
        .replace(|c: char| !c.is_ascii_alphanumeric(), "");
    let src = dir.join(format!("tmp-{unique}.c"));
    let tmp = dir.join(format!("tmp-{unique}.so"));
    std::fs::write(&src, source).map_err(|e| cache_err(&src, e))?;
    // glibc's vector math first; without it (another libc, clang without the attribute), the
    // same source with scalar libm calls.
    let attempts: [&[&str]; 2] = [&["-DDLC_LIBMVEC"], &[]];
    let mut last = String::new();
    for extra in attempts {
        let mut cmd = Command::new(&cc);
        cmd.args(flags).args(extra).arg(&src).arg("-o").arg(&tmp);
        if !extra.is_empty() {
            cmd.arg("-lmvec");
        }
        cmd.arg("-lm");
        let out = cmd.output().map_err(|e| CpuError::Compile {
            compiler: cc.clone(),
            stderr: e.to_string(),
        })?;
        if out.status.success() {
            let _ = std::fs::remove_file(&src);
            std::fs::rename(&tmp, so).map_err(|e| cache_err(so, e))?;
            return Ok(());
        }
        last = String::from_utf8_lossy(&out.stderr)
            .chars()
            .take(4000)
            .collect();
    }
    let _ = std::fs::remove_file(&tmp);
    Err(CpuError::Compile {
        compiler: cc,
        stderr: format!("{last} (source kept at {})", src.display()),
    })
}

/// How the native programs' threads wait at OpenMP barriers and between parallel regions,
/// unless the user's environment sets it (`OMP_WAIT_POLICY`, `GOMP_SPINCOUNT` or
/// `KMP_BLOCKTIME`), chosen once per process from the machine's load when the first generated
/// library loads (OpenMP runtimes read it once, when they initialize):
///
/// - **idle cores** (1-minute load average below the core count): spin [`SPIN_COUNT`] iterations
///   (~0.5 ms; `KMP_BLOCKTIME` 1 ms for LLVM's libomp), then sleep. A thread that sleeps at once
///   is woken by a futex, and on an idle VM its vCPU has halted: the wake-up is the fixed
///   per-kernel cost seen on the 2-vCPU development VM at load 0.3 (bench/results/
///   cpu-2026-11-26-5-idle.md: a `[128,768]` LayerNorm 0.5 ms, wall times 0.3–0.5 ms above the
///   kernels' CPU time, the 3×3 conv 3.6 ms alone against 1.7 ms between other kernels) and
///   absent from every loaded measurement, where no vCPU halts.
/// - **loaded** (load ≥ cores): `passive`, sleep at once. libgomp's default spins 300 000
///   iterations (~7 ms here, 25 ns a `pause`): with more runnable threads than cores the
///   spinning thread burns the time slice its partner needs to reach the barrier. Measured at
///   load ~16 (bench/results/cpu-2026-11-26-3.md), 2 threads, ms per run: conv 3×3 144–150
///   (default) / 52–59 (spin 10 000) / 18–38 (passive).
pub const WAIT_POLICY: &str = "passive";

/// libgomp spin iterations before a waiting thread sleeps, on a machine with idle cores.
pub const SPIN_COUNT: &str = "20000";

/// Whether the machine has idle cores: its 1-minute load average (`/proc/loadavg`) is below its
/// core count (false where the load cannot be read).
fn cores_idle() -> bool {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
        .is_some_and(|load| load < cores)
}

/// Sets the wait policy ([`WAIT_POLICY`], [`SPIN_COUNT`]) in the environment before the first
/// generated library loads. Nothing when the user set one.
fn set_wait_policy() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let set = ["OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME"]
            .iter()
            .any(|v| std::env::var_os(v).is_some());
        if set {
            return;
        }
        // Read by libgomp (gcc) and LLVM's libomp (clang) alike.
        if cores_idle() {
            std::env::set_var("GOMP_SPINCOUNT", SPIN_COUNT);
            std::env::set_var("KMP_BLOCKTIME", "1");
        } else {
            std::env::set_var("OMP_WAIT_POLICY", WAIT_POLICY);
        }
    });
}

fn load(prog: &NativeProgram, so: &Path, cached: bool) -> Result<Loaded, CpuError> {
    let err = |why: String| CpuError::Load {
        path: so.display().to_string(),
        why,
    };
    let mut libs = loaded_libraries()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let lib: &'static libloading::Library = match libs.get(so) {
        Some(l) => l,
        None => {
            set_wait_policy();
            // SAFETY: the library is our own generated code; its initializers are the C
            // runtime's.
            let l = unsafe { libloading::Library::new(so) }.map_err(|e| err(e.to_string()))?;
            let l: &'static libloading::Library = Box::leak(Box::new(l));
            libs.insert(so.to_path_buf(), l);
            l
        }
    };
    let mut kernels = Vec::new();
    for k in &prog.kernels {
        // SAFETY: every kernel is emitted with exactly the `KernelFn` signature.
        let f: libloading::Symbol<KernelFn> = unsafe { lib.get(k.function.as_bytes()) }
            .map_err(|e| err(format!("{}: {e}", k.function)))?;
        kernels.push(*f);
    }
    Ok(Loaded {
        kernels,
        path: so.to_path_buf(),
        cached,
    })
}
