//! The command-line interface: `dlc-egg run | lower | optimize | extract | check`. `main.rs` only calls
//! [`main_with_args`]; this module parses arguments (clap derive), wires the pipeline's passes
//! together and turns every failure into diagnostics on stderr.
//!
//! Exit status: 0 on success, 2 when the user's input is at fault (diagnostics printed), 1 for
//! internal errors (a compiler bug: a broken invariant or a panic).

// A `Diagnostic` is the project's user-facing error (dlc_egg::diag); it is large by design and
// returned only on cold failure paths, so boxing it would only add noise.
#![allow(clippy::result_large_err)]

mod cpu;
mod extract;
mod import;
mod input;
mod optimize;
mod run;

pub use extract::ExtractArgs;
pub use input::GraphInputArgs;
pub use optimize::OptimizeArgs;
pub use run::RunArgs;

use clap::{Parser, Subcommand, ValueEnum};
use dlc_egg::diag::codes;
use dlc_egg::diag::{Diagnostic, Location};
use dlc_egg::dump::{dump_document, parse_dump, plain_text, DumpLayer};
use dlc_egg::run::Failure;
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
    /// Fit the CPU cost model to the measurement log of `run --device cpu --repeat N`.
    Calibrate(dlc_egg::cpu::calibrate::CalibrateArgs),
}

/// Arguments of `dlc-egg decompile`.
#[derive(Debug, clap::Args)]
pub struct DecompileArgs {
    /// The graph.json file or `.graph` program to print as DSL.
    pub graph: PathBuf,

    #[command(flatten)]
    pub input: GraphInputArgs,
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
        Command::Run(a) => run::cmd_run(a),
        Command::Lower(a) => cmd_lower(a),
        Command::Optimize(a) => optimize::cmd_optimize(a),
        Command::Extract(a) => extract::cmd_extract(a),
        Command::Check(a) => cmd_check(a),
        Command::Import(a) => import::cmd_import(a),
        Command::Decompile(a) => cmd_decompile(a),
        Command::Calibrate(a) => dlc_egg::cpu::calibrate::cmd_calibrate(a),
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
        codes::INVALID_ARGUMENT,
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
        codes::INTERNAL_ERROR,
        Location::Document,
        format!("the compiler panicked: {msg}"),
        "this is a compiler bug; please report it with the command line and the graph.json",
    )
}

/// `dlc-egg lower`.
fn cmd_lower(a: &LowerArgs) -> Result<(), Failure> {
    let layers = parse_dump(&a.dump, DumpLayer::LOWER)?;
    let graph = a.input.load(&a.graph)?;
    let prog = if layers.iter().any(|l| *l != DumpLayer::Frontend) {
        Some(dlc_egg::pipeline::lower_and_verify(&graph)?)
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

/// `dlc-egg check`.
fn cmd_check(a: &CheckArgs) -> Result<(), Failure> {
    let graph = a.input.load(&a.graph)?;
    let prog = dlc_egg::pipeline::lower_and_verify(&graph)?;
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
    let text = dlc_egg::dsl::decompile(&graph)?;
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
