//! The command-line interface: `dlc-egg run | lower | optimize | extract | check`. `main.rs` only calls
//! [`main_with_args`]; this module parses arguments (clap derive), wires the pipeline's passes
//! together and turns every failure into diagnostics on stderr.
//!
//! Exit status: 0 on success, 2 when the user's input is at fault (diagnostics printed), 1 for
//! internal errors (a compiler bug: a broken invariant or a panic).

// A `Diagnostic` is the project's user-facing error (crate::diag); it is large by design and
// returned only on cold failure paths, so boxing it would only add noise.
#![allow(clippy::result_large_err)]

mod cpu;
mod extract;
mod frontend_json;
mod import;
mod optimize;

pub use extract::{ExtractArgs, ExtractorArg};
pub use frontend_json::graph_to_json;
pub use optimize::OptimizeArgs;

use crate::diag::{Diagnostic, Diagnostics, Location};
use crate::ir::frontend::Graph;
use crate::ir::tiny::{self, Program};
use crate::run::{self, Device, Failure, RunOptions, WrittenOutput};
use clap::{Parser, Subcommand, ValueEnum};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// Exit status of a successful command.
pub const EXIT_OK: i32 = 0;
/// Exit status of a compiler bug (internal error).
pub const EXIT_INTERNAL: i32 = 1;
/// Exit status when diagnostics about the user's input were printed.
pub const EXIT_USER: i32 = 2;

/// dlc-egg: a deep-learning compiler built on e-graphs (graph.json → Tiny IR → e-graph → CUDA).
#[derive(Debug, Parser)]
#[command(name = "dlc-egg", version, about, long_about = None)]
pub struct Cli {
    /// How failures are printed on stderr: `text` (readable) or `json` (`{"diagnostics": [...]}`,
    /// one object per problem with code, kind, at, why and suggestion).
    #[arg(long, global = true, value_enum, default_value_t = DiagFormat::Text)]
    pub diagnostics: DiagFormat,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Format of diagnostics on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DiagFormat {
    /// Human-readable text.
    Text,
    /// A JSON document `{"diagnostics": [...]}`.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a graph on concrete inputs with the reference evaluator and write every signature
    /// output to `<out-dir>/<tensor>.npy`.
    Run(RunArgs),
    /// Load and lower a graph and print its intermediate representations as JSON on stdout.
    Lower(LowerArgs),
    /// Optimize a graph: e-graph rewriting, kernel fusion and extraction into RB-SSA regions.
    Optimize(OptimizeArgs),
    /// Extract a least-cost term DAG from any egraph-serialize e-graph (extraction-gym's format)
    /// with the fast or the exact DAG-aware extractor; print tree cost, DAG cost and time.
    Extract(ExtractArgs),
    /// Load, lower and verify a graph; print `ok` and a one-line summary.
    Check(CheckArgs),
    /// Import an ONNX model: write graph.json and its weights sidecar (`.safetensors`).
    Import(import::ImportArgs),
    /// Print a graph (graph.json or a `.graph` program) as a `.graph` DSL program with entry
    /// `main`, subgraphs inlined; deterministic.
    Decompile(DecompileArgs),
}

/// How the graph file of a command is read: graph.json, or a `.graph` DSL program.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct GraphInputArgs {
    /// For `.graph` programs: the deepest nesting of subgraph calls inlined (`main` is depth 0);
    /// deeper calls (endless recursion) are E0707.
    #[arg(long, value_name = "N", default_value_t = crate::dsl::DEFAULT_MAX_DEPTH)]
    pub max_depth: usize,

    /// Budget: the largest graph file (and `.npy` input of `run`) read, in bytes (suffixes K, M,
    /// G, T); a larger file is E1400 before it is read whole.
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = crate::budget::parse_bytes)]
    pub max_file_bytes: u64,

    /// Budget: the most nodes a graph may have (E1401 above it).
    #[arg(long, value_name = "N", default_value_t = crate::budget::LoadBudgets::default().max_nodes)]
    pub max_nodes: usize,

    /// Budget: the most inputs one Concat may have (E1402 above it).
    #[arg(long, value_name = "N", default_value_t = crate::budget::LoadBudgets::default().max_concat_inputs)]
    pub max_concat_inputs: usize,

    /// Budget: the largest rank of a tensor (E1403 above it).
    #[arg(long, value_name = "N", default_value_t = crate::budget::LoadBudgets::default().max_rank)]
    pub max_rank: usize,
}

impl GraphInputArgs {
    /// The load budgets these flags set.
    pub fn budgets(&self) -> crate::budget::LoadBudgets {
        crate::budget::LoadBudgets {
            max_file_bytes: self.max_file_bytes,
            max_nodes: self.max_nodes,
            max_concat_inputs: self.max_concat_inputs,
            max_rank: self.max_rank,
        }
    }

    /// Loads `path`: `.graph` as the DSL (seed 004), `.onnx` as ONNX, anything else as
    /// graph.json; the file is read within `--max-file-bytes` and the graph checked against the
    /// node, Concat and rank budgets (`crate::budget`).
    pub fn load(&self, path: &std::path::Path) -> Result<Graph, Failure> {
        let opts = crate::dsl::Options {
            max_depth: self.max_depth,
        };
        let budgets = self.budgets();
        let bytes = crate::budget::read_file_limited(path, budgets.max_file_bytes)?;
        let is_onnx = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("onnx"));
        let graph = if is_onnx {
            crate::budget::set_external_data_budget(budgets.max_file_bytes);
            crate::onnx::load(path)?
        } else {
            let file = path.display().to_string();
            let text = String::from_utf8(bytes).map_err(|e| {
                Diagnostic::error(
                    "E0000",
                    "UnreadableInput",
                    Location::Argument {
                        argument: file.clone(),
                    },
                    format!("cannot read the file: it is not UTF-8 text ({e})"),
                    "check the path and the file's permissions",
                )
            })?;
            if crate::dsl::is_dsl_path(path) {
                crate::dsl::load_str(&text, &file, opts)?
            } else {
                let base = path.parent().unwrap_or(std::path::Path::new(""));
                crate::ir::frontend::load_str_in(&text, &file, base)?
            }
        };
        crate::budget::check_load(&graph, &budgets).map_err(|d| Failure::user(Diagnostics(d)))?;
        Ok(graph)
    }
}

/// Arguments of `dlc-egg decompile`.
#[derive(Debug, clap::Args)]
pub struct DecompileArgs {
    /// The graph.json file or `.graph` program to print as DSL.
    pub graph: PathBuf,

    #[command(flatten)]
    pub input: GraphInputArgs,
}

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
    #[arg(long, value_name = "BYTES", default_value = "4G", value_parser = crate::budget::parse_bytes)]
    pub max_tensor_bytes: u64,

    /// Budget: the most bytes the evaluator may hold at once (values alive together, inputs
    /// included), checked for the binding before anything is computed (E1405).
    #[arg(long, value_name = "BYTES", default_value = "16G", value_parser = crate::budget::parse_bytes)]
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

/// Arguments of `dlc-egg lower`.
#[derive(Debug, clap::Args)]
pub struct LowerArgs {
    /// The graph.json file or `.graph` DSL program to lower.
    pub graph: PathBuf,

    #[command(flatten)]
    pub input: GraphInputArgs,

    /// Comma-separated layers to print: `frontend` (the normalized, inferred graph), `tiny`
    /// (Tiny IR, seed 002 JSON), `egraph` (the Tiny program as an e-graph, before any rewrite,
    /// in the public egraph-serialize JSON format), `indexbook` (seed 001 §4.5 form). One layer
    /// prints its document; several print an object keyed by layer name, in pipeline order.
    #[arg(long, value_name = "LAYERS", default_value = "tiny")]
    pub dump: String,
}

/// Arguments of `dlc-egg check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The graph.json file or `.graph` DSL program to check.
    pub graph: PathBuf,

    #[command(flatten)]
    pub input: GraphInputArgs,
}

/// Runs the CLI with process arguments (the program name first); returns the exit status.
pub fn main_with_args(args: Vec<String>) -> i32 {
    let format = diag_format_from_raw(&args);
    // Panics are reported as one internal-error diagnostic (exit 1), not the default message.
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(|| dispatch(args));
    std::panic::set_hook(previous_hook);
    match result {
        Ok(code) => code,
        Err(payload) => {
            let msg = panic_message(payload.as_ref());
            report(&Failure::internal(internal_error(&msg)), format)
        }
    }
}

fn dispatch(args: Vec<String>) -> i32 {
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return handle_clap_error(e, diag_format_from_raw(&args)),
    };
    let format = cli.diagnostics;
    let outcome = match &cli.command {
        Command::Run(a) => cmd_run(a),
        Command::Lower(a) => cmd_lower(a),
        Command::Optimize(a) => optimize::cmd_optimize(a),
        Command::Extract(a) => extract::cmd_extract(a),
        Command::Check(a) => cmd_check(a),
        Command::Import(a) => import::cmd_import(a),
        Command::Decompile(a) => cmd_decompile(a),
    };
    match outcome {
        Ok(()) => EXIT_OK,
        Err(f) => report(&f, format),
    }
}

/// Prints a failure's diagnostics on stderr in `format`; returns its exit status.
pub fn report(f: &Failure, format: DiagFormat) -> i32 {
    let text = match format {
        DiagFormat::Text => f.diagnostics.to_string(),
        DiagFormat::Json => f.diagnostics.to_json(),
    };
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
    if f.internal {
        EXIT_INTERNAL
    } else {
        EXIT_USER
    }
}

/// `--diagnostics` read from raw arguments (used before, or when, clap parsing fails).
fn diag_format_from_raw(args: &[String]) -> DiagFormat {
    let mut format = DiagFormat::Text;
    let mut iter = args.iter().peekable();
    while let Some(a) = iter.next() {
        let value = if a == "--diagnostics" {
            iter.peek().map(|s| s.as_str())
        } else {
            a.strip_prefix("--diagnostics=")
        };
        if value == Some("json") {
            format = DiagFormat::Json;
        } else if value == Some("text") {
            format = DiagFormat::Text;
        }
    }
    format
}

/// Help and version print normally (exit 0); every other parse error becomes an `E0313
/// InvalidArgument` diagnostic (exit 2).
fn handle_clap_error(e: clap::Error, format: DiagFormat) -> i32 {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return EXIT_OK;
    }
    let rendered = e.render().to_string();
    let why = if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        "a command is required: run, lower or check".to_string()
    } else {
        first_error_line(&rendered)
    };
    let usage = rendered
        .lines()
        .find(|l| l.starts_with("Usage:"))
        .map(|u| format!("{}; ", u.trim()))
        .unwrap_or_default();
    let d = Diagnostic::error(
        "E0313",
        "InvalidArgument",
        Location::Argument {
            argument: "command line".into(),
        },
        why,
        format!("{usage}see `dlc-egg --help` or `dlc-egg <command> --help`"),
    );
    report(&Failure::user(d), format)
}

fn first_error_line(rendered: &str) -> String {
    rendered
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid command line")
        .trim_start_matches("error: ")
        .to_string()
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

fn internal_error(msg: &str) -> Diagnostic {
    Diagnostic::error(
        "E9000",
        "InternalError",
        Location::Document,
        format!("the compiler panicked: {msg}"),
        "this is a compiler bug; please report it with the command line and the graph.json",
    )
}

/// `dlc-egg run`.
fn cmd_run(a: &RunArgs) -> Result<(), Failure> {
    let opts = run_options(a)?;
    let graph = a.input.load(&a.graph)?;
    // The plan cache keys on the file's bytes.
    let hash = match std::fs::read(&a.graph) {
        Ok(bytes) => crate::shapes::cache::graph_hash(&bytes),
        Err(_) => crate::shapes::cache::loaded_graph_hash(&graph),
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
fn print_timings(t: &crate::cuda::Timings, repeat: u32, path: &std::path::Path) {
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
            "E0313",
            "InvalidArgument",
            Location::Argument {
                argument: format!("--repeat {}", a.repeat),
            },
            "--repeat times the generated kernels, which only run with --device cpu or cuda",
            "add --device cpu or --device cuda, or drop --repeat",
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
        budgets: crate::budget::RunBudgets {
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
            "E0310",
            "InvalidInputArgument",
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
            "E0311",
            "InvalidBindArgument",
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
                    "E0311",
                    "InvalidBindArgument",
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

/// A layer `lower --dump` / `optimize --dump` can print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DumpLayer {
    /// The normalized frontend graph.
    Frontend,
    /// Tiny IR.
    Tiny,
    /// The IndexBook of the Tiny program (seed 001 §4.5).
    Indexbook,
    /// The e-graph, egraph-serialize JSON (`lower`: before any rewrite; `optimize`: final).
    Egraph,
    /// The extracted region program (`optimize` only).
    Region,
    /// The Poly-View of the extracted regions: SCoP domains, access relations and RAW edges in
    /// isl notation (`optimize` only; `crate::poly::view`).
    PolyView,
    /// The Poly Core report of the extracted regions: dependences, parallel / reduce / tail
    /// axes, compute-at legality with halo, minimal buffers, barrier and bank-conflict hints
    /// (`optimize` only; `crate::poly::core`).
    PolyCore,
    /// Each kernel's Schedule Plan (`optimize` only).
    Plan,
    /// The GPU dialect IR of every kernel (`optimize` only).
    Gpu,
    /// The emitted CUDA C (`optimize` only; printed as text when it is the only layer).
    Cu,
    /// Graphviz DOT (`lower`: the frontend graph and the Tiny IR DAG; `optimize`: the kernel
    /// cover); printed as plain DOT text when it is the only layer.
    Dot,
    /// Graphviz DOT of the e-graph (`lower`: before any rewrite; `optimize`: final), e-classes as
    /// clusters, cut to `crate::viz::EGRAPH_CLASS_LIMIT` classes with a note.
    EgraphDot,
}

impl DumpLayer {
    /// Every layer (`optimize`).
    pub const ALL: &'static [DumpLayer] = &[
        DumpLayer::Frontend,
        DumpLayer::Tiny,
        DumpLayer::Indexbook,
        DumpLayer::Egraph,
        DumpLayer::Region,
        DumpLayer::PolyView,
        DumpLayer::PolyCore,
        DumpLayer::Plan,
        DumpLayer::Gpu,
        DumpLayer::Cu,
        DumpLayer::Dot,
        DumpLayer::EgraphDot,
    ];
    /// The layers `lower` can print.
    pub const LOWER: &'static [DumpLayer] = &[
        DumpLayer::Frontend,
        DumpLayer::Tiny,
        DumpLayer::Indexbook,
        DumpLayer::Egraph,
        DumpLayer::Dot,
        DumpLayer::EgraphDot,
    ];

    fn name(self) -> &'static str {
        match self {
            DumpLayer::Frontend => "frontend",
            DumpLayer::Tiny => "tiny",
            DumpLayer::Indexbook => "indexbook",
            DumpLayer::Egraph => "egraph",
            DumpLayer::Region => "region",
            DumpLayer::PolyView => "poly_view",
            DumpLayer::PolyCore => "poly_core",
            DumpLayer::Plan => "plan",
            DumpLayer::Gpu => "gpu",
            DumpLayer::Cu => "cu",
            DumpLayer::Dot => "dot",
            DumpLayer::EgraphDot => "egraph-dot",
        }
    }
}

/// Parses `--dump` (comma-separated layer names, each one of `allowed`) into layers in pipeline
/// order.
pub fn parse_dump(raw: &str, allowed: &[DumpLayer]) -> Result<Vec<DumpLayer>, Diagnostic> {
    let mut layers = Vec::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let layer = allowed.iter().copied().find(|l| l.name() == part);
        let Some(layer) = layer else {
            let names: Vec<&str> = allowed.iter().map(|l| l.name()).collect();
            return Err(Diagnostic::error(
                "E0313",
                "InvalidArgument",
                Location::Argument {
                    argument: format!("--dump {raw}"),
                },
                format!("`{part}` is not a layer this command can dump"),
                format!(
                    "available layers: {} (e.g. --dump {})",
                    names.join(", "),
                    names.join(",")
                ),
            ));
        };
        if !layers.contains(&layer) {
            layers.push(layer);
        }
    }
    if layers.is_empty() {
        layers.push(DumpLayer::Tiny);
    }
    layers.sort();
    Ok(layers)
}

/// `dlc-egg lower`.
fn cmd_lower(a: &LowerArgs) -> Result<(), Failure> {
    let layers = parse_dump(&a.dump, DumpLayer::LOWER)?;
    let graph = a.input.load(&a.graph)?;
    let prog = if layers.iter().any(|l| *l != DumpLayer::Frontend) {
        Some(run::lower_and_verify(&graph)?)
    } else {
        None
    };
    let doc = dump_document(&layers, &graph, prog.as_ref(), None, None);
    if let Some(text) = plain_text(&layers, &doc) {
        let _ = write!(std::io::stdout().lock(), "{text}");
        return Ok(());
    }
    let text = serde_json::to_string_pretty(&doc)
        .map_err(|e| Failure::internal(internal_error(&e.to_string())))?;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
    Ok(())
}

/// The JSON `lower --dump` / `optimize --dump` prints (`optimized`: the optimizer's result, for
/// `region` and the final `egraph`).
pub fn dump_document(
    layers: &[DumpLayer],
    graph: &Graph,
    prog: Option<&Program>,
    optimized: Option<&crate::optimize::Optimized>,
    code: Option<&crate::codegen::Generated>,
) -> serde_json::Value {
    use serde_json::Value;
    let one = |l: DumpLayer| match (l, prog) {
        (DumpLayer::Frontend, _) => graph_to_json(graph),
        (DumpLayer::Tiny, Some(p)) => tiny::to_json(p),
        (DumpLayer::Indexbook, Some(p)) => crate::ir::indexbook::index_book(p)
            .map(|b| b.to_json())
            .unwrap_or_else(|e| serde_json::json!({"error": e.to_string()})),
        (DumpLayer::Egraph, Some(p)) => match optimized {
            Some(o) => optimized_egraph_json(o),
            None => egraph_json(p),
        },
        (DumpLayer::Region, _) => optimized
            .map(|o| serde_json::to_value(&o.program).unwrap_or(Value::Null))
            .unwrap_or(Value::Null),
        (DumpLayer::PolyView, _) => optimized
            .map(|o| crate::poly::view::build(&o.program).to_json())
            .unwrap_or(Value::Null),
        (DumpLayer::PolyCore, _) => optimized
            .map(|o| crate::poly::core::from_optimized(o).to_json())
            .unwrap_or(Value::Null),
        (DumpLayer::Plan, _) => optimized.map(plan_json).unwrap_or(Value::Null),
        (DumpLayer::Gpu, _) => code.map(|c| c.gpu_ir_json()).unwrap_or(Value::Null),
        (DumpLayer::Cu, _) => code
            .map(|c| Value::String(c.emitted.source.clone()))
            .unwrap_or(Value::Null),
        (DumpLayer::Dot, _) => Value::String(match optimized {
            Some(o) => crate::viz::cover_dot(o),
            None => crate::viz::lower_dot(graph, prog),
        }),
        (DumpLayer::EgraphDot, Some(p)) => Value::String(match optimized {
            Some(o) => crate::viz::egraph_dot(&o.egraph, &o.roots, crate::viz::EGRAPH_CLASS_LIMIT),
            None => {
                let (eg, roots) = initial_egraph(p);
                crate::viz::egraph_dot(&eg, &roots, crate::viz::EGRAPH_CLASS_LIMIT)
            }
        }),
        (_, None) => Value::Null,
    };
    match layers {
        [l] => one(*l),
        _ => {
            let map: serde_json::Map<String, Value> = layers
                .iter()
                .map(|l| (l.name().to_string(), one(*l)))
                .collect();
            Value::Object(map)
        }
    }
}

/// The e-graph of a Tiny program in egraph-serialize form, roots = the signature outputs. Costs:
/// 1 per operation e-node, 0 per attribute leaf (TODO(issue 4): the cost model's kernel costs).
fn egraph_json(p: &Program) -> serde_json::Value {
    let (eg, roots) = initial_egraph(p);
    let s = crate::extract::serialize::to_serialized(&eg, &roots, &|n| {
        if n.is_attr() {
            0.0
        } else {
            1.0
        }
    });
    serde_json::to_value(&s).unwrap_or(serde_json::Value::Null)
}

/// The e-graph of a Tiny program before any rewrite, with the classes of its outputs.
fn initial_egraph(p: &Program) -> (crate::ir::egraph::TensorGraph, Vec<egg::Id>) {
    use crate::ir::egraph::{add_program, TensorGraph};
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, p);
    eg.rebuild();
    let roots: Vec<egg::Id> = p.outputs.iter().map(|o| class[o.node.index()]).collect();
    (eg, roots)
}

/// The text to print instead of JSON: a lone `dot` / `egraph-dot` layer is plain DOT.
pub fn plain_text(layers: &[DumpLayer], doc: &serde_json::Value) -> Option<String> {
    match (layers, doc) {
        ([DumpLayer::Dot | DumpLayer::EgraphDot], serde_json::Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// `--dump plan`: `{"arch", "target", "kernels": [{"kernel", "predicted_us", "plan"}]}`, the plan
/// in seed 001 §8.1 form.
fn plan_json(o: &crate::optimize::Optimized) -> serde_json::Value {
    let kernels: Vec<serde_json::Value> = o
        .kernels
        .iter()
        .map(|k| match &k.plan {
            Ok(p) => serde_json::json!({
                "kernel": k.name,
                "predicted_us": p.predicted_us,
                "plan": p.plan,
            }),
            Err(why) => serde_json::json!({"kernel": k.name, "error": why}),
        })
        .collect();
    serde_json::json!({
        "arch": o.model.target.arch,
        "target": o.model.target.name,
        "kernels": kernels,
    })
}

/// The optimizer's final e-graph in egraph-serialize form, priced as the optimizer's extraction
/// prices it (`extract::cover::node_price`: kernels their predicted time in ns, inputs, reshapes
/// and attributes nothing, every other e-node not realizable: +∞, written as `f64::MAX`).
fn optimized_egraph_json(o: &crate::optimize::Optimized) -> serde_json::Value {
    use crate::extract::cover::node_price;
    let eg = &o.egraph;
    let s =
        crate::extract::serialize::to_serialized(eg, &o.roots, &|n| node_price(eg, n, &o.model));
    serde_json::to_value(&s).unwrap_or(serde_json::Value::Null)
}

/// `dlc-egg check`.
fn cmd_check(a: &CheckArgs) -> Result<(), Failure> {
    let graph = a.input.load(&a.graph)?;
    let prog = run::lower_and_verify(&graph)?;
    let _ = writeln!(
        std::io::stdout().lock(),
        "ok: {}: {} nodes, {} inputs, {} outputs, {} symbols; Tiny IR: {} uops",
        a.graph.display(),
        graph.nodes.len(),
        graph.signature.inputs.len(),
        graph.signature.outputs.len(),
        graph.symbols.len(),
        prog.nodes.len()
    );
    Ok(())
}

/// `dlc-egg decompile`.
fn cmd_decompile(a: &DecompileArgs) -> Result<(), Failure> {
    let graph = a.input.load(&a.graph)?;
    let text = crate::dsl::decompile(&graph)?;
    let _ = write!(std::io::stdout().lock(), "{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_has_help() {
        let cmd = Cli::command();
        for sub in cmd.get_subcommands() {
            assert!(sub.get_about().is_some(), "{}", sub.get_name());
            for arg in sub.get_arguments() {
                if arg.get_id() == "help" || arg.get_id() == "version" {
                    continue;
                }
                assert!(
                    arg.get_help().is_some(),
                    "{} {}",
                    sub.get_name(),
                    arg.get_id()
                );
            }
        }
    }

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

    #[test]
    fn dump_layers() {
        assert_eq!(
            parse_dump("tiny,frontend", DumpLayer::LOWER).expect("ok"),
            vec![DumpLayer::Frontend, DumpLayer::Tiny]
        );
        assert_eq!(
            parse_dump("", DumpLayer::LOWER).expect("ok"),
            vec![DumpLayer::Tiny]
        );
        assert_eq!(
            parse_dump("cu", DumpLayer::LOWER).expect_err("cu").code,
            "E0313"
        );
        assert_eq!(
            parse_dump("poly_view", DumpLayer::LOWER)
                .expect_err("optimize only")
                .code,
            "E0313"
        );
        assert_eq!(
            parse_dump("plan,poly_view,region", DumpLayer::ALL).expect("ok"),
            vec![DumpLayer::Region, DumpLayer::PolyView, DumpLayer::Plan]
        );
    }

    #[test]
    fn raw_diagnostics_format() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            diag_format_from_raw(&args(&["x", "--diagnostics", "json"])),
            DiagFormat::Json
        );
        assert_eq!(
            diag_format_from_raw(&args(&["x", "--diagnostics=json", "run"])),
            DiagFormat::Json
        );
        assert_eq!(diag_format_from_raw(&args(&["x", "run"])), DiagFormat::Text);
    }
}
