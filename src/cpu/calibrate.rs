//! The CPU cost model, its measurement log and `dlc-egg calibrate` (issue 16 item 6; seed 001
//! §6.11, §13).
//!
//! **Model** (a CPU roofline): a kernel run with `T` threads takes
//!
//! ```text
//! time = overhead + max(flops / (T · gflops_per_thread) + transcendentals · transcendental_ns / T,
//!                       bytes / bandwidth_gbs)
//! ```
//!
//! with `flops` the kernel's arithmetic (every let once per point of its free iters,
//! [`super::work::region_ops`]; a contraction's GEMM view from [`crate::cost::work::analyze`]),
//! `transcendentals` its special-function operations (exp, erf, tanh,
//! rsqrt, …: the GPU model's SFU count), `bytes` every input read once plus the outputs written.
//! The four parameters ([`CpuCostParams`]) are read from a JSON file: `$DLC_CPU_COST`, else
//! `cpu-cost.json` in the native cache directory (`<plan-cache>/native`, else
//! `<tmp>/dlc-egg-native`); without one, [`CpuCostParams::default`] (uncalibrated guesses).
//!
//! **Log**: every timed native run (`run --device cpu --repeat N`) appends one CSV row per kernel
//! to `$DLC_CPU_LOG`, else `perf-log.csv` in the native cache directory:
//! `kernel,form,threads,flops,transcendentals,bytes,estimate_ms,actual_ms` (header written once).
//!
//! **Calibration**: `dlc-egg calibrate LOG [-o FILE]` fits the four parameters to the log's rows
//! (coordinate search in log space minimizing the median relative error `|pred − meas| / meas`),
//! writes them to `FILE` (default: `cpu-cost.json` beside `LOG`, where the next run reads them)
//! and prints the median error of the logged estimates (before) and of the fitted model (after).
//!
//! **Extraction**: `run --device cpu` and `optimize --target cpu` choose their kernel cover with
//! this model ([`super::pricing::CpuPricer`]), at the run's thread count.

use super::CpuError;
use crate::cost::work::{analyze, Shape};
use crate::extract::kernels::CostModel;
use crate::ir::region::Region;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The environment variable naming the cost-parameter file.
pub const ENV_COST: &str = "DLC_CPU_COST";
/// The environment variable naming the measurement log.
pub const ENV_LOG: &str = "DLC_CPU_LOG";
/// The parameter file's name in the native cache directory.
pub const COST_FILE: &str = "cpu-cost.json";
/// The log's name in the native cache directory.
pub const LOG_FILE: &str = "perf-log.csv";
/// The log's header.
pub const LOG_HEADER: &str =
    "kernel,form,threads,flops,transcendentals,bytes,estimate_ms,actual_ms";

/// The CPU roofline's parameters (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuCostParams {
    /// Sustained memory bandwidth of the whole kernel (all threads), GB/s.
    pub bandwidth_gbs: f64,
    /// Arithmetic rate of one thread, GFLOP/s.
    pub gflops_per_thread: f64,
    /// Time of one transcendental operation on one thread, ns.
    pub transcendental_ns: f64,
    /// Fixed cost per kernel call (thread team start, buffers), µs.
    pub overhead_us: f64,
}

impl Default for CpuCostParams {
    /// The fit of `dlc-egg calibrate` to the benchmark set run on the idle 2-vCPU development VM
    /// (Zen 4, 2 threads, bench/results/cpu-2026-11-26-5-idle.md: 23 kernel rows, median error
    /// 233 % → 13 %): 21.2 GB/s, 77.3 GFLOP/s per thread, 0.19 ns per transcendental, 350 µs
    /// per kernel (that run's threads slept at every barrier: the wake-ups of idle vCPUs, see
    /// [`super::build::WAIT_POLICY`]). The earlier guesses (10 GB/s, 16 GFLOP/s, 1 ns, 20 µs)
    /// came from runs under load 15–30, 4–6× the idle times, and priced a 4-kernel LayerNorm
    /// (a quadratic variance) below the fused one at 1 thread.
    fn default() -> Self {
        CpuCostParams {
            bandwidth_gbs: 21.21,
            gflops_per_thread: 77.28,
            transcendental_ns: 0.19,
            overhead_us: 350.0,
        }
    }
}

/// What the model needs of one kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelFeatures {
    /// Arithmetic operations (an FMA counts 2), transcendentals excluded.
    pub flops: f64,
    /// Transcendental operations.
    pub transcendentals: f64,
    /// Bytes read and written.
    pub bytes: f64,
}

impl KernelFeatures {
    /// The features of `r` with its symbols bound by `bindings` (unbound ones sized 1024).
    pub fn of(r: &Region, bindings: &BTreeMap<String, i64>) -> Option<KernelFeatures> {
        let model = CostModel {
            bindings: bindings.clone(),
            default_size: 1024,
            target: crate::target::Target::a100_sxm4_80gb(),
            regions: None,
        };
        Self::with_model(r, &model)
    }

    /// The features of `r` sized by `model`'s bindings and default size (extraction's sizes).
    pub fn with_model(r: &Region, model: &CostModel) -> Option<KernelFeatures> {
        let w = analyze(r, model).ok()?;
        // A contraction's multiply-adds are in its GEMM view, not in `ops` (its epilogue runs
        // per output element and its prologue at packing, as the GPU analysis counts them) when
        // the C runs it as a packed GEMM; any other region's lets run once per point of their
        // free iters (`super::work`). BERT's `softmax · V` with the masked softmax fused into
        // its operand was priced by the GEMM view (exp per score: 0.76 ms predicted at
        // sequence 128) while the C recomputed the softmax per output element (1224 ms).
        let (gemm, ops) = match &w.shape {
            Shape::Contraction(g) if super::emit::runs_packed_contraction(r) => {
                (2.0 * g.batch * g.m * g.n * g.k, w.ops)
            }
            _ => (0.0, super::work::region_ops(r, model)?),
        };
        Some(KernelFeatures {
            flops: gemm + ops.tensor + ops.simt,
            transcendentals: ops.sfu,
            bytes: w.in_bytes() + w.out_bytes,
        })
    }
}

impl CpuCostParams {
    /// The predicted time of a kernel with `f` on `threads` threads, ms.
    pub fn predict_ms(&self, f: &KernelFeatures, threads: usize) -> f64 {
        let (compute, memory, overhead) = self.terms_ms(f, threads);
        overhead + compute.max(memory)
    }

    /// The roofline's terms in ms at `threads` threads: compute (arithmetic and
    /// transcendentals), memory, per-kernel overhead; [`Self::predict_ms`] is the overhead plus
    /// the larger of the other two.
    pub fn terms_ms(&self, f: &KernelFeatures, threads: usize) -> (f64, f64, f64) {
        let t = threads.max(1) as f64;
        let compute = f.flops / (t * self.gflops_per_thread * 1e9)
            + f.transcendentals * self.transcendental_ns * 1e-9 / t;
        let memory = f.bytes / (self.bandwidth_gbs * 1e9);
        (compute * 1e3, memory * 1e3, self.overhead_us * 1e-3)
    }

    /// The parameter file in effect: `$DLC_CPU_COST`, else `cpu-cost.json` in `cache_dir`.
    pub fn path(cache_dir: &Path) -> PathBuf {
        match std::env::var(ENV_COST) {
            Ok(p) if !p.is_empty() => PathBuf::from(p),
            _ => cache_dir.join(COST_FILE),
        }
    }

    /// Reads the parameters from [`CpuCostParams::path`]; the defaults when there is no file
    /// (`E0808` when it exists but is not a parameter file).
    pub fn load(cache_dir: &Path) -> Result<CpuCostParams, CpuError> {
        let path = Self::path(cache_dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(cost_err(&path, e)),
        };
        let p: CpuCostParams = serde_json::from_str(&text).map_err(|e| cost_err(&path, e))?;
        if p.as_array().iter().all(|v| v.is_finite() && *v > 0.0) {
            Ok(p)
        } else {
            Err(cost_err(&path, "every parameter must be a positive number"))
        }
    }

    fn as_array(&self) -> [f64; 4] {
        [
            self.bandwidth_gbs,
            self.gflops_per_thread,
            self.transcendental_ns,
            self.overhead_us,
        ]
    }

    fn from_array(a: [f64; 4]) -> CpuCostParams {
        CpuCostParams {
            bandwidth_gbs: a[0],
            gflops_per_thread: a[1],
            transcendental_ns: a[2],
            overhead_us: a[3],
        }
    }
}

fn cost_err(path: &Path, e: impl std::fmt::Display) -> CpuError {
    CpuError::CostFile {
        path: path.display().to_string(),
        why: e.to_string(),
    }
}

fn log_err(path: &Path, e: impl std::fmt::Display) -> CpuError {
    CpuError::PerfLog {
        path: path.display().to_string(),
        why: e.to_string(),
    }
}

/// One row of the measurement log.
#[derive(Clone, Debug, PartialEq)]
pub struct LogRow {
    /// The region's name.
    pub kernel: String,
    /// Its loop form (`rows(..)`, `flat`).
    pub form: String,
    /// Threads it ran with.
    pub threads: usize,
    /// Its features.
    pub features: KernelFeatures,
    /// The model's prediction when it ran, ms.
    pub estimate_ms: f64,
    /// The measured mean time, ms.
    pub actual_ms: f64,
}

/// The log in effect: `$DLC_CPU_LOG`, else `perf-log.csv` in `cache_dir`.
pub fn log_path(cache_dir: &Path) -> PathBuf {
    match std::env::var(ENV_LOG) {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => cache_dir.join(LOG_FILE),
    }
}

/// Appends `rows` to the log at `path` (its header first when the file is new); `E0810` when
/// it cannot be written.
pub fn append_log(path: &Path, rows: &[LogRow]) -> Result<(), CpuError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| log_err(path, e))?;
    }
    let new = !path.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| log_err(path, e))?;
    let mut text = String::new();
    if new {
        text.push_str(LOG_HEADER);
        text.push('\n');
    }
    for r in rows {
        let name = r.kernel.replace([',', '\n', '"'], " ");
        let form = r.form.replace(',', ";");
        text.push_str(&format!(
            "{name},{form},{},{},{},{},{},{}\n",
            r.threads,
            r.features.flops,
            r.features.transcendentals,
            r.features.bytes,
            r.estimate_ms,
            r.actual_ms
        ));
    }
    f.write_all(text.as_bytes()).map_err(|e| log_err(path, e))
}

/// Reads a log written by [`append_log`] (`E0809` for a malformed row).
pub fn read_log(path: &Path) -> Result<Vec<LogRow>, CpuError> {
    let text = std::fs::read_to_string(path).map_err(|e| log_err(path, e))?;
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line == LOG_HEADER {
            continue;
        }
        let c: Vec<&str> = line.split(',').collect();
        let num = |i: usize| -> Result<f64, CpuError> {
            c.get(i)
                .and_then(|s| s.trim().parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    log_err(
                        path,
                        format!("line {}: column {} is not a number ≥ 0", n + 1, i + 1),
                    )
                })
        };
        if c.len() != 8 {
            return Err(log_err(
                path,
                format!("line {}: {} columns, want 8 ({LOG_HEADER})", n + 1, c.len()),
            ));
        }
        rows.push(LogRow {
            kernel: c[0].to_string(),
            form: c[1].to_string(),
            threads: num(2)? as usize,
            features: KernelFeatures {
                flops: num(3)?,
                transcendentals: num(4)?,
                bytes: num(5)?,
            },
            estimate_ms: num(6)?,
            actual_ms: num(7)?,
        });
    }
    Ok(rows)
}

/// The median of `|pred − meas| / meas` over rows with a positive measured time.
pub fn median_error(rows: &[LogRow], pred: &dyn Fn(&LogRow) -> f64) -> f64 {
    let mut e: Vec<f64> = rows
        .iter()
        .filter(|r| r.actual_ms > 0.0)
        .map(|r| (pred(r) - r.actual_ms).abs() / r.actual_ms)
        .collect();
    if e.is_empty() {
        return f64::NAN;
    }
    e.sort_by(f64::total_cmp);
    let m = e.len() / 2;
    if e.len() % 2 == 1 {
        e[m]
    } else {
        (e[m - 1] + e[m]) / 2.0
    }
}

/// How far a fitted parameter may move from its default (either way).
pub const FIT_RANGE: f64 = 1000.0;

/// The result of a calibration.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// The fitted parameters.
    pub params: CpuCostParams,
    /// Rows used.
    pub rows: usize,
    /// Median relative error of the logged estimates.
    pub before: f64,
    /// Median relative error of the fitted model on the same rows.
    pub after: f64,
}

/// Fits the parameters to `rows`, starting from `start`: a coordinate search over each
/// parameter's multiplicative steps (×4 down to ×1.01), each kept within [`FIT_RANGE`]× of its
/// default, minimizing the mean `|ln(pred / meas)|` (every row counts; the median alone is
/// flat in most directions with few rows). `E0810` with fewer than 2 timed rows.
pub fn fit(rows: &[LogRow], start: CpuCostParams) -> Result<Calibration, CpuError> {
    let timed: Vec<LogRow> = rows.iter().filter(|r| r.actual_ms > 0.0).cloned().collect();
    if timed.len() < 2 {
        return Err(CpuError::Calibration(format!(
            "{} timed kernel row(s) in the log; at least 2 are needed",
            timed.len()
        )));
    }
    let score = |p: &CpuCostParams| {
        let pred = |r: &LogRow| p.predict_ms(&r.features, r.threads);
        let med = median_error(&timed, &pred);
        let mean_log = timed
            .iter()
            .map(|r| (pred(r) / r.actual_ms).ln().abs())
            .sum::<f64>()
            / timed.len() as f64;
        (med, mean_log)
    };
    let better = |a: (f64, f64), b: (f64, f64)| a.1 < b.1 - 1e-12;
    let d = CpuCostParams::default().as_array();
    let inside = |a: &[f64; 4]| {
        a.iter()
            .zip(d)
            .all(|(v, d)| *v <= d * FIT_RANGE && *v >= d / FIT_RANGE)
    };
    let mut best = start.as_array();
    let mut best_s = score(&start);
    for step in [4.0, 2.0, 1.4, 1.15, 1.05, 1.01] {
        for _round in 0..40 {
            let mut moved = false;
            for k in 0..4 {
                for f in [step, 1.0 / step] {
                    let mut a = best;
                    a[k] *= f;
                    if !inside(&a) {
                        continue;
                    }
                    let s = score(&CpuCostParams::from_array(a));
                    if better(s, best_s) {
                        best = a;
                        best_s = s;
                        moved = true;
                    }
                }
            }
            if !moved {
                break;
            }
        }
    }
    Ok(Calibration {
        params: CpuCostParams::from_array(best),
        rows: timed.len(),
        before: median_error(&timed, &|r| r.estimate_ms),
        after: best_s.0,
    })
}

/// Arguments of `dlc-egg calibrate`.
#[derive(Debug, Clone, clap::Args)]
pub struct CalibrateArgs {
    /// The measurement log (CSV) that `run --device cpu --repeat N` appends to
    /// (`$DLC_CPU_LOG`, else `perf-log.csv` in the native cache directory).
    pub log: PathBuf,
    /// Where to write the fitted parameters (default: `cpu-cost.json` beside LOG, where
    /// `run --device cpu` and `optimize --target cpu` read them).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `dlc-egg calibrate`: fits the log, writes the parameters, prints the errors before and after.
pub fn cmd_calibrate(a: &CalibrateArgs) -> Result<(), crate::diag::Failure> {
    let rows = read_log(&a.log)?;
    let out = a.output.clone().unwrap_or_else(|| {
        a.log
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .join(COST_FILE)
    });
    let c = fit(&rows, CpuCostParams::default())?;
    let text = serde_json::to_string_pretty(&c.params).unwrap_or_default();
    std::fs::write(&out, text + "\n").map_err(|e| cost_err(&out, e))?;
    println!(
        "calibrated on {} kernel run(s): median |pred - meas| / meas {:.1}% before, {:.1}% after",
        c.rows,
        c.before * 100.0,
        c.after * 100.0
    );
    println!(
        "bandwidth {:.2} GB/s, {:.2} GFLOP/s per thread, {:.3} ns per transcendental, {:.1} us per kernel -> {}",
        c.params.bandwidth_gbs,
        c.params.gflops_per_thread,
        c.params.transcendental_ns,
        c.params.overhead_us,
        out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(flops: f64, bytes: f64, actual: f64) -> LogRow {
        LogRow {
            kernel: "k".into(),
            form: "rows(i)".into(),
            threads: 2,
            features: KernelFeatures {
                flops,
                transcendentals: 0.0,
                bytes,
            },
            estimate_ms: 1.0,
            actual_ms: actual,
        }
    }

    #[test]
    fn fit_recovers_a_bandwidth_and_lowers_the_error() {
        // Memory-bound rows of a 4 GB/s machine with 50 µs per call.
        let truth = CpuCostParams {
            bandwidth_gbs: 4.0,
            overhead_us: 50.0,
            ..CpuCostParams::default()
        };
        let rows: Vec<LogRow> = [1e6, 1e7, 1e8, 3e8]
            .iter()
            .map(|b| {
                let mut r = row(1e3, *b, 0.0);
                r.actual_ms = truth.predict_ms(&r.features, 2);
                r
            })
            .collect();
        let c = fit(&rows, CpuCostParams::default()).unwrap();
        assert!(c.after < 0.02, "{c:?}");
        assert!(c.before > 0.5, "{c:?}");
        assert!((c.params.bandwidth_gbs / 4.0 - 1.0).abs() < 0.05, "{c:?}");
    }

    #[test]
    fn the_log_round_trips_and_rejects_bad_rows() {
        let dir = std::env::temp_dir().join(format!("dlc-cal-{}", std::process::id()));
        let path = dir.join("log.csv");
        let _ = std::fs::remove_file(&path);
        let rows = vec![row(1.0, 2.0, 3.0), row(4.0, 5.0, 6.0)];
        append_log(&path, &rows[..1]).unwrap();
        append_log(&path, &rows[1..]).unwrap();
        assert_eq!(read_log(&path).unwrap(), rows);
        std::fs::write(&path, format!("{LOG_HEADER}\nk,flat,2,x,0,1,1,1\n")).unwrap();
        assert!(matches!(read_log(&path), Err(CpuError::PerfLog { .. })));
        assert!(matches!(
            fit(&rows[..1], CpuCostParams::default()),
            Err(CpuError::Calibration(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
