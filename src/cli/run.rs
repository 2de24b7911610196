//! `dlc-egg run`: its arguments, their validation into [`RunOptions`] and the command itself
//! (reference evaluator, optimized playback, native CPU or CUDA), with the summary and timing lines
//! it prints.

use super::GraphInputArgs;
use clap::ValueEnum;
use dlc_egg::diag::codes;
use dlc_egg::diag::{Diagnostic, Diagnostics, Location};
use dlc_egg::run::{self, Device, Failure, RunOptions, WrittenOutput};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `dlc-egg run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The graph.json file or `.graph` DSL program to run.
    pub graph: PathBuf,

    #[command(flatten)]
    pub input: GraphInputArgs,

    /// Value of a signature input, as TENSOR=FILE.npy (repeat for each input). Float tensors
    /// accept `<f4` or `<f2` arrays, i32 needs `<i4`, bool needs `|b1`.
    #[arg(long = "input", value_name = "TENSOR=FILE")]
    pub inputs: Vec<String>,

    /// Value of a symbol, as SYMBOL=INTEGER (repeatable); takes precedence over the shapes of the
    /// input arrays and over the document's `symbols` defaults.
    #[arg(long = "bind", value_name = "SYMBOL=VALUE")]
    pub binds: Vec<String>,

    /// Directory the output .npy files are written to (created if missing).
    #[arg(long, value_name = "DIR", default_value = "out")]
    pub out_dir: PathBuf,

    /// Where to run: `reference` (default) is the reference evaluator; `cpu` optimizes the graph,
    /// emits the regions as vectorized, multithreaded C, compiles it with the system C compiler
    /// (E0800 without one) and runs it natively; `cuda` optimizes for the GPU found here (sm_80
    /// or sm_90, from its compute capability), emits CUDA, compiles it with NVRTC and runs it
    /// (E0400 when the driver, the GPU or NVRTC is missing).
    #[arg(long, value_enum, default_value_t = DeviceArg::Reference)]
    pub device: DeviceArg,

    /// With --device cpu or cuda: after a warm-up run, time N runs of the program and of each
    /// kernel, print one line per kernel and write `<out-dir>/timing.json`.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub repeat: u32,

    /// With --device cuda: compile for this architecture instead of the GPU's own. An older
    /// one runs as PTX that the driver compiles at load (`--arch sm80` on an H100 runs the
    /// mma.sync kernels an A100 would get); a newer one is E0400.
    #[arg(long, value_enum)]
    pub arch: Option<dlc_egg::target::Arch>,

    /// With --device cpu: threads per kernel (default: the machine's cores).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: Option<u32>,

    /// Fill every input not given with --input with seeded random values (floats uniform in
    /// [-1, 1), i32 in [0, 4) or a valid Gather index range, bool fair coin flips); the same SEED
    /// always gives the same values.
    #[arg(long, value_name = "SEED")]
    pub random: Option<u64>,

    /// Evaluate the optimized program (the RB-SSA regions `dlc-egg optimize` extracts, played
    /// back on the CPU) instead of the Tiny IR. The program is compiled for the shape cluster of
    /// the binding (per symbol a power-of-two size bucket and divisibility by 2..16) and reused
    /// for every binding of the same cluster (see --plan-cache).
    #[arg(long)]
    pub optimized: bool,

    /// With --optimized or --device cuda: keep the optimized program of each shape cluster in
    /// DIR (created if missing) and reuse it when a later run's binding falls into the same
    /// cluster; prints `plan cache: hit KEY` or `plan cache: miss KEY` on stderr.
    #[arg(long, value_name = "DIR")]
    pub plan_cache: Option<PathBuf>,

    /// Budget: the most bytes one tensor (input, intermediate or output) may take (suffixes K,
    /// M, G, T); checked for the binding before anything is computed (E1404).
    #[arg(long, value_name = "BYTES", default_value = "4G", value_parser = dlc_egg::budget::parse_bytes)]
    pub max_tensor_bytes: u64,

    /// Budget: the most bytes the evaluator may hold at once (values alive together, inputs
    /// included), checked for the binding before anything is computed (E1405).
    #[arg(long, value_name = "BYTES", default_value = "16G", value_parser = dlc_egg::budget::parse_bytes)]
    pub max_memory: u64,
}

/// `--device` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DeviceArg {
    /// The reference evaluator on the CPU (the oracle).
    Reference,
    /// The native CPU backend: generated C, compiled at run time.
    Cpu,
    /// Generated CUDA kernels on the GPU (NVRTC and the CUDA driver).
    Cuda,
}

/// `dlc-egg run`.
pub fn cmd_run(a: &RunArgs) -> Result<(), Failure> {
    let opts = run_options(a)?;
    let graph = a.input.load(&a.graph)?;
    // The plan cache keys on the file's bytes.
    let hash = match std::fs::read(&a.graph) {
        Ok(bytes) => dlc_egg::shapes::cache::graph_hash(&bytes),
        Err(_) => dlc_egg::shapes::cache::loaded_graph_hash(&graph),
    };
    let report = run::run_report_loaded(&graph, &opts, &hash)?;
    if let (Some(_), Some(outcome)) = (&opts.plan_cache, &report.plan_cache) {
        let _ = writeln!(std::io::stderr().lock(), "{outcome}");
    }
    print_summary(&report.outputs);
    if let Some((t, path)) = &report.timings {
        print_timings(t, opts.repeat, path);
    }
    Ok(())
}

/// One line per kernel launch and one for the whole program (`--repeat N`).
fn print_timings(t: &dlc_egg::cuda::Timings, repeat: u32, path: &std::path::Path) {
    let mut out = std::io::stdout().lock();
    for (name, ms) in &t.kernels {
        let _ = writeln!(out, "kernel {name}: {ms:.4} ms");
    }
    let _ = writeln!(
        out,
        "total: {:.4} ms per run (mean of {repeat} runs) -> {}",
        t.total_ms,
        path.display()
    );
}

/// Validates the raw `run` arguments into [`RunOptions`] (every bad `--input`/`--bind` reported).
pub fn run_options(a: &RunArgs) -> Result<RunOptions, Failure> {
    let mut diags = Vec::new();
    let mut inputs = Vec::new();
    for raw in &a.inputs {
        match parse_input_arg(raw) {
            Ok(pair) => inputs.push(pair),
            Err(d) => diags.push(d),
        }
    }
    let binds = match parse_binds(&a.binds) {
        Ok(b) => b,
        Err(mut ds) => {
            diags.append(&mut ds);
            BTreeMap::new()
        }
    };
    if a.repeat > 0 && a.device == DeviceArg::Reference {
        diags.push(Diagnostic::error(
            codes::INVALID_ARGUMENT,
            Location::Argument {
                argument: format!("--repeat {}", a.repeat),
            },
            "--repeat times the generated kernels, which only run with --device cpu or cuda",
            "add --device cpu or --device cuda, or drop --repeat",
        ));
    }
    if a.arch.is_some() && a.device != DeviceArg::Cuda {
        diags.push(Diagnostic::error(
            codes::INVALID_ARGUMENT,
            Location::Argument {
                argument: "--arch".into(),
            },
            "--arch picks the GPU architecture the kernels are compiled for; it only applies to \
             --device cuda",
            "add --device cuda, or drop --arch",
        ));
    }
    if !diags.is_empty() {
        return Err(Failure::user(Diagnostics(diags)));
    }
    Ok(RunOptions {
        graph: a.graph.clone(),
        inputs,
        binds,
        out_dir: a.out_dir.clone(),
        device: match a.device {
            DeviceArg::Reference => Device::Reference,
            DeviceArg::Cpu => Device::Cpu,
            DeviceArg::Cuda => Device::Cuda,
        },
        threads: a.threads.map(|t| t as usize),
        random: a.random,
        optimized: a.optimized,
        repeat: a.repeat,
        plan_cache: a.plan_cache.clone(),
        arch: a.arch,
        budgets: dlc_egg::budget::RunBudgets {
            max_tensor_bytes: a.max_tensor_bytes,
            max_memory: a.max_memory,
            max_file_bytes: a.input.max_file_bytes,
        },
    })
}

/// Parses `TENSOR=FILE` (`E0310 InvalidInputArgument` otherwise).
pub fn parse_input_arg(raw: &str) -> Result<(String, PathBuf), Diagnostic> {
    match raw.split_once('=') {
        Some((t, f)) if !t.trim().is_empty() && !f.is_empty() => {
            Ok((t.trim().to_string(), PathBuf::from(f)))
        }
        _ => Err(Diagnostic::error(
            codes::INVALID_INPUT_ARGUMENT,
            Location::Argument {
                argument: format!("--input {raw}"),
            },
            "an input must be given as TENSOR=FILE",
            "write it like --input A=a.npy",
        )),
    }
}

/// Parses `SYMBOL=INTEGER` (`E0311 InvalidBindArgument` otherwise); only the syntax is checked.
pub fn parse_bind_arg(raw: &str) -> Result<(String, i64), Diagnostic> {
    let bad = |why: String| {
        Diagnostic::error(
            codes::INVALID_BIND_ARGUMENT,
            Location::Argument {
                argument: format!("--bind {raw}"),
            },
            why,
            "write it like --bind M=128 (a symbol name, `=`, an integer)",
        )
    };
    let Some((sym, value)) = raw.split_once('=') else {
        return Err(bad("a binding must be given as SYMBOL=VALUE".into()));
    };
    let sym = sym.trim();
    if !is_identifier(sym) {
        return Err(bad(format!("`{sym}` is not a symbol name")));
    }
    let v: i64 = value
        .trim()
        .parse()
        .map_err(|_| bad(format!("`{value}` is not an integer")))?;
    // The value's meaning (negative sizes: E0205, unknown symbols: E0204) is checked by
    // `frontend::resolve_symbols`, which knows the graph.
    Ok((sym.to_string(), v))
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

/// Parses every `--bind`; a symbol bound twice to different values is `E0311`.
pub fn parse_binds(raw: &[String]) -> Result<BTreeMap<String, i64>, Vec<Diagnostic>> {
    let mut binds = BTreeMap::new();
    let mut diags = Vec::new();
    for r in raw {
        match parse_bind_arg(r) {
            Ok((s, v)) => match binds.insert(s.clone(), v) {
                Some(old) if old != v => diags.push(Diagnostic::error(
                    codes::INVALID_BIND_ARGUMENT,
                    Location::Argument {
                        argument: format!("--bind {r}"),
                    },
                    format!("symbol `{s}` is bound twice ({old} and {v})"),
                    "bind each symbol once",
                )),
                _ => {}
            },
            Err(d) => diags.push(d),
        }
    }
    if diags.is_empty() {
        Ok(binds)
    } else {
        Err(diags)
    }
}

/// One line per output: `Y fp16 [128, 32] -> out/Y.npy`.
fn print_summary(written: &[WrittenOutput]) {
    let mut out = std::io::stdout().lock();
    for w in written {
        let _ = writeln!(
            out,
            "{} {} {:?} -> {}",
            w.tensor,
            w.dtype,
            w.shape,
            w.path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_parse_and_reject() {
        assert_eq!(parse_bind_arg("M=128").expect("ok"), ("M".into(), 128));
        assert_eq!(parse_bind_arg("M=-1").expect("syntax ok"), ("M".into(), -1));
        for bad in ["M", "M=x", "=3", "1M=3", "M=1.5", "M=99999999999999999999"] {
            assert_eq!(parse_bind_arg(bad).expect_err(bad).code, "E0311", "{bad}");
        }
        let twice = vec!["M=1".to_string(), "M=2".to_string()];
        assert_eq!(parse_binds(&twice).expect_err("twice")[0].code, "E0311");
        let same = vec!["M=1".to_string(), "M=1".to_string()];
        assert!(parse_binds(&same).is_ok());
    }

    #[test]
    fn inputs_parse_and_reject() {
        assert_eq!(
            parse_input_arg("A=dir/a=b.npy").expect("ok"),
            ("A".into(), PathBuf::from("dir/a=b.npy"))
        );
        for bad in ["A", "=a.npy", "A="] {
            assert_eq!(parse_input_arg(bad).expect_err(bad).code, "E0310");
        }
    }
}
