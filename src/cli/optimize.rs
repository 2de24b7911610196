//! `dlc-egg optimize graph.json [--explain] [--report FILE] [--dump LAYERS] [--timings]
//! [--extractor fast|exact] [--extract-timeout SECS] [--arch sm80|sm90] [--fast-math]`.

use super::extract::ExtractorArg;
use super::internal_error;
use dlc_egg::codegen::{generate, Generated};
use dlc_egg::diag::codes;
use dlc_egg::diag::{Diagnostic, Location};
use dlc_egg::dump::{dump_document, parse_dump, plain_text, DumpLayer};
use dlc_egg::ir::frontend;
use dlc_egg::ir::tiny::Program;
use dlc_egg::optimize::{explain, ExtractorKind, OptimizeOptions, Optimized, Report, StepTime};
use dlc_egg::run::Failure;
use dlc_egg::target::Arch;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `dlc-egg optimize`.
#[derive(Debug, clap::Args)]
pub struct OptimizeArgs {
    /// The graph.json file or `.graph` DSL program to optimize.
    pub graph: PathBuf,

    #[command(flatten)]
    pub input: super::GraphInputArgs,

    /// Print, readably: each kernel with the frontend nodes it covers and why they fused, the
    /// rewrite chain of every output (the rules that mattered, from egg's explanations), and
    /// e-graph statistics per phase. Printed on stdout, or on stderr when --dump prints JSON.
    #[arg(long)]
    pub explain: bool,

    /// Write the same information as JSON to FILE (byte-identical across runs unless --timings).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    /// Comma-separated layers to print as JSON on stdout: `frontend`, `tiny`, `indexbook` (seed
    /// 001 §4.5 form, of the Tiny program), `egraph` (the final e-graph, egraph-serialize JSON,
    /// kernel nodes priced by the extraction cost), `region` (the extracted program: one RB-SSA
    /// region per kernel, seed 001 §6.8 form, plus buffer aliases), `poly_view` (the regions'
    /// SCoP domains, access relations and RAW edges in isl notation, seed 001 §5), `poly_core` (seed
    /// 001 §7.1: per region its RAW/WAR/WAW dependences, parallel, reduce and tail axes, barrier
    /// and bank-conflict hints for --arch; per producer → consumer pair compute-at legality with
    /// halo and pre-image, and the minimal buffer `reg`/`smem_ring`/`gmem`), `plan` (each kernel's
    /// Schedule Plan, seed 001 §8.1 form, with its predicted time; with `--target cpu` the native
    /// plan: per kernel its loop form, what the emitter chose and the CPU roofline's terms, the
    /// same plan `--explain` and `-o`'s manifest print). One layer prints its
    /// document; several print an object keyed by layer name.
    #[arg(long, value_name = "LAYERS")]
    pub dump: Option<String>,

    /// Include wall-clock times in --explain and --report (they differ between runs): per
    /// e-graph phase, and per pipeline step (e-graph build, each phase, pricing, extraction,
    /// cover cost, regions and plans, explain); without --explain the step times go to stderr.
    #[arg(long)]
    pub timings: bool,

    /// Which DAG-aware extractor chooses the kernel cover: `fast` (greedy fixpoint plus local
    /// improvement) or `exact` (ILP, proven optimal when it finishes within --extract-timeout).
    #[arg(long, value_enum, default_value_t = ExtractorArg::Fast)]
    pub extractor: ExtractorArg,

    /// Time limit of the exact extractor in seconds; at it, the best cover so far is used (never
    /// worse than the fast extractor's, which seeds it) and the report says `time_limit`. Per
    /// extraction: a cover that runs an attention pair's first kernel unfused is repriced and
    /// extracted again (at most 8 more times; the report's `repriced_pairs`).
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub extract_timeout: f64,

    /// The GPU kernels are planned and priced for: `sm80` (A100-SXM4-80GB) or `sm90`
    /// (H100-SXM5-80GB). Changes the plans, the predicted times and so the fusion choices.
    #[arg(long, value_enum, default_value_t = Arch::Sm90)]
    pub arch: Arch,

    /// Also apply the rewrites that are exact for finite values only: hoisting a factor or a
    /// divisor out of a sum (`Σ x·g = (Σ x)·g`), which differs when a term is infinite, NaN or
    /// overflows. Off by default: the optimized program then matches the reference on every
    /// input, infinities and NaN included.
    #[arg(long)]
    pub fast_math: bool,

    /// Do not embed a producer reduction in a consumer's window reduction (compute-at fusion,
    /// seed 003: Conv → ReLU → Pool as one kernel). On by default, where the cost model says it
    /// pays; `--explain` gives the legality argument and the price either way.
    #[arg(long)]
    pub no_compute_at: bool,

    /// Do not run the graph substitutions (phase "subst": MatMuls that share an input merged
    /// into one with concatenated weights, e.g. Q/K/V), to compare covers with and without them.
    #[arg(long)]
    pub no_subst: bool,

    /// Generate CUDA: write `kernels.cu` (one kernel per region, from the template its plan
    /// names), `dlc_kernel.cuh` (the helpers it includes) and `manifest.json` (buffers, launches
    /// with arguments, grid and block, plans) into DIR, created if needed.
    #[arg(short = 'o', long = "out-dir", value_name = "DIR")]
    pub out_dir: Option<PathBuf>,

    /// What -o DIR generates: `cuda` (default, above) or `cpu`: `kernels.c` (the regions as
    /// vectorized, multithreaded C for this machine's ISA, what `run --device cpu` compiles) and
    /// `manifest.json` (ISA, flags, symbols, steps, kernels).
    #[arg(long, value_enum, default_value_t = super::cpu::TargetArg::Cuda)]
    pub target: super::cpu::TargetArg,

    /// Shape sets: SYMBOL=V1,V2,... (repeatable; other symbols keep their `symbols` defaults or
    /// stay symbolic). Prints the shape clusters the bindings fall into (per symbol a
    /// power-of-two size bucket and divisibility by 2..16) and, per cluster, the specialization
    /// (`T = 8*T_8`), the binding its kernels were priced with and each kernel's template,
    /// predicted time and plan. Replaces the default output; not with --dump, --explain,
    /// --report or -o.
    #[arg(long = "shape-set", value_name = "SYMBOL=V1,V2,...", conflicts_with_all = ["dump", "explain", "report", "out_dir"])]
    pub shape_set: Vec<String>,

    /// With --shape-set: keep each cluster's optimized program in DIR (created if missing) and
    /// reuse it (shared with `dlc-egg run --plan-cache`); prints `plan cache: hit KEY` or
    /// `plan cache: miss KEY` on stderr.
    #[arg(long, value_name = "DIR", requires = "shape_set")]
    pub plan_cache: Option<PathBuf>,

    /// Budget: the most memory optimizing may take, in bytes (suffixes K, M, G, T), estimated
    /// before any work from the Tiny IR node count (about 256 KiB each) and the Concat inputs
    /// (about 4 MiB each); over it is E1405.
    #[arg(long, value_name = "BYTES", default_value = "16G", value_parser = dlc_egg::budget::parse_bytes)]
    pub max_memory: u64,
}

/// `dlc-egg optimize`.
pub fn cmd_optimize(a: &OptimizeArgs) -> Result<(), Failure> {
    let layers = match &a.dump {
        Some(raw) => parse_dump(raw, DumpLayer::ALL)?,
        None => Vec::new(),
    };
    let start = std::time::Instant::now();
    let cpu0 = dlc_egg::optimize::process_cpu_seconds();
    let graph = a.input.load(&a.graph)?;
    let loaded = (
        start.elapsed().as_secs_f64(),
        dlc_egg::optimize::process_cpu_seconds(),
    );
    let prog = dlc_egg::pipeline::lower_and_verify(&graph)?;
    let lowered = (
        start.elapsed().as_secs_f64(),
        dlc_egg::optimize::process_cpu_seconds(),
    );
    dlc_egg::pipeline::check_device_memory(&graph)?;
    let defaults = |s: &str| graph.symbols.get(s).copied();
    dlc_egg::budget::check_target_sizes(&graph, &defaults).map_err(Failure::user)?;
    dlc_egg::budget::check_optimize(&graph, &prog, a.max_memory).map_err(Failure::user)?;
    let mut opts = optimize_options(a)?;
    if a.target == super::cpu::TargetArg::Cpu {
        // The CPU program's cover is chosen by the CPU model (issue 16).
        opts = dlc_egg::cpu::pricing::cpu_optimize_options(
            opts,
            a.plan_cache.as_deref(),
            dlc_egg::cpu::default_threads(),
        )?;
    }
    if !a.shape_set.is_empty() {
        return shape_sets(a, &graph, &opts);
    }
    // Kernels over the weights bound at load time are derived constants (issue 23).
    let o = dlc_egg::pipeline::optimize_graph(&graph, &prog, &opts)
        .map_err(|e| Failure::internal(internal_error(&e.to_string())))?;
    let mut report = o.report();
    if a.timings {
        let step =
            |name: &str, (t0, c0): (f64, Option<f64>), (t1, c1): (f64, Option<f64>)| StepTime {
                step: name.to_string(),
                seconds: t1 - t0,
                cpu_seconds: c1.zip(c0).map(|(b, a)| (b - a).max(0.0)),
            };
        report.steps = vec![
            step("load", (0.0, cpu0), loaded),
            step("lower and verify", loaded, lowered),
        ];
        report.steps.extend(o.steps.iter().cloned());
    } else {
        for p in &mut report.phases {
            p.time = 0.0;
        }
    }
    if let Some(path) = &a.report {
        write_report(path, &report)?;
    }
    let native = a.target == super::cpu::TargetArg::Cpu;
    // One native plan for `-o`'s manifest, `--explain` and `--dump plan` (`--target cpu`).
    let native_plan =
        if native && (a.out_dir.is_some() || a.explain || layers.contains(&DumpLayer::Plan)) {
            Some(super::cpu::native_plan(
                &graph,
                &o.program,
                a.plan_cache.as_deref(),
            )?)
        } else {
            None
        };
    if let (Some(dir), Some((prog, plan))) = (&a.out_dir, &native_plan) {
        super::cpu::write_native(dir, &o.program, (prog, plan))?;
    }
    let needs_code = (a.out_dir.is_some() && !native)
        || layers
            .iter()
            .any(|l| matches!(l, DumpLayer::Gpu | DumpLayer::Cu));
    let code = if needs_code {
        Some(generate(&o).map_err(|e| Failure::internal(internal_error(&e.to_string())))?)
    } else {
        None
    };
    if let (Some(dir), Some(c), false) = (&a.out_dir, &code, native) {
        write_code(dir, c)?;
    }
    let cpu_explain = match (&native_plan, a.explain) {
        (Some((_, plan)), true) => Some(dlc_egg::cpu::explain::explain(plan, &o.program)),
        _ => None,
    };
    let printed = print_outputs(
        a,
        &layers,
        (&graph, &prog, &o),
        code.as_ref(),
        (&report, cpu_explain.as_ref()),
        native_plan.as_ref().map(|(_, plan)| plan),
    );
    // The command ends the process: freeing the e-graph, its kernel bodies, the region cache
    // and the weights one allocation at a time only costs time (~4 % of a BERT export's
    // `optimize`), so they are left to the process exit.
    std::mem::forget(o);
    std::mem::forget(graph);
    printed
}

/// The optimizer's options from the flags (`E0313` for a bad `--extract-timeout`).
fn optimize_options(a: &OptimizeArgs) -> Result<OptimizeOptions, Failure> {
    if !a.extract_timeout.is_finite() || a.extract_timeout <= 0.0 || a.extract_timeout > 1e9 {
        return Err(Failure::user(Diagnostic::error(
            codes::INVALID_ARGUMENT,
            Location::Argument {
                argument: format!("--extract-timeout {}", a.extract_timeout),
            },
            "--extract-timeout must be a positive number of seconds",
            "for example `--extract-timeout 60`",
        )));
    }
    let extract_time_limit = Duration::from_secs_f64(a.extract_timeout);
    Ok(OptimizeOptions {
        explain: a.explain,
        extractor: match a.extractor {
            ExtractorArg::Fast => ExtractorKind::Fast,
            ExtractorArg::Exact => ExtractorKind::Exact,
        },
        extract_time_limit,
        target: a.arch.target(),
        fast_math: a.fast_math,
        compute_at: !a.no_compute_at,
        substitutions: !a.no_subst,
        ..OptimizeOptions::default()
    })
}

/// `--report FILE`: the report as pretty JSON (`E0312` when it cannot be written).
fn write_report(path: &std::path::Path, report: &Report) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(&report)
        .map_err(|e| Failure::internal(internal_error(&e.to_string())))?;
    std::fs::write(path, text + "\n").map_err(|e| {
        Failure::user(Diagnostic::error(
            codes::OUTPUT_WRITE_FAILED,
            Location::Argument {
                argument: format!("--report {}", path.display()),
            },
            format!("cannot write the report: {e}"),
            "check that the directory exists and is writable",
        ))
    })?;
    Ok(())
}

/// What `optimize` prints: the `--dump` layers (JSON, or plain CUDA / DOT text for a lone `cu`
/// / `dot` layer; with `--target cpu`, `plan` is the native plan), then the `--explain` report
/// (on stderr when layers are dumped; with `--target cpu`, the native backend's account of each
/// kernel in place of the GPU plans), or else the one-line-per-kernel summary.
fn print_outputs(
    a: &OptimizeArgs,
    layers: &[DumpLayer],
    (graph, prog, o): (&frontend::Graph, &Program, &Optimized),
    code: Option<&Generated>,
    (report, target): (&Report, Option<&explain::TargetExplain>),
    native_plan: Option<&dlc_egg::cpu::plan::NativePlan>,
) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    if let ([DumpLayer::Cu], Some(c)) = (layers, code) {
        let _ = write!(stdout, "{}", c.emitted.source);
    } else if !layers.is_empty() {
        let mut doc = dump_document(layers, graph, Some(prog), Some(o), code);
        if let Some(plan) = native_plan.filter(|_| layers.contains(&DumpLayer::Plan)) {
            match layers {
                [DumpLayer::Plan] => doc = plan.to_json(),
                _ => doc[DumpLayer::Plan.name()] = plan.to_json(),
            }
        }
        if let Some(text) = plain_text(layers, &doc) {
            let _ = write!(stdout, "{text}");
        } else {
            let text = serde_json::to_string_pretty(&doc)
                .map_err(|e| Failure::internal(internal_error(&e.to_string())))?;
            let _ = writeln!(stdout, "{text}");
        }
    }
    if a.explain {
        let text = explain::render_for(report, a.timings, target);
        if layers.is_empty() {
            let _ = write!(stdout, "{text}");
        } else {
            let _ = write!(std::io::stderr().lock(), "{text}");
        }
    } else if layers.is_empty() {
        let _ = write!(stdout, "{}", summary(o));
    }
    if a.timings && !a.explain {
        let text = explain::render_steps(&report.steps);
        let _ = write!(std::io::stderr().lock(), "{text}");
    }
    Ok(())
}

/// `--shape-set`: one block per cluster the bindings fall into (see [`dlc_egg::shapes`]).
fn shape_sets(
    a: &OptimizeArgs,
    graph: &frontend::Graph,
    opts: &OptimizeOptions,
) -> Result<(), Failure> {
    use dlc_egg::shapes::{cache, cluster, specialize, PlanCache, ShapeCluster, ShapeError};
    use std::collections::BTreeMap;
    let symbols = specialize::graph_symbols(graph);
    let mut sets: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut diags = Vec::new();
    for raw in &a.shape_set {
        match cluster::parse_shape_set(raw) {
            Ok((s, _)) if !symbols.contains(&s) => diags.push(
                ShapeError::UnknownSymbol {
                    symbol: s,
                    known: symbols.iter().cloned().collect(),
                }
                .to_diagnostic(),
            ),
            Ok((s, vs)) => {
                let e = sets.entry(s).or_default();
                for v in vs {
                    if !e.contains(&v) {
                        e.push(v);
                    }
                }
            }
            Err(e) => diags.push(e.to_diagnostic()),
        }
    }
    if !diags.is_empty() {
        return Err(Failure::user(dlc_egg::diag::Diagnostics(diags)));
    }
    let fixed: BTreeMap<String, i64> = graph
        .symbols
        .iter()
        .filter(|(s, _)| symbols.contains(*s) && !sets.contains_key(*s))
        .map(|(s, v)| (s.clone(), *v))
        .collect();
    let text = std::fs::read(&a.graph).unwrap_or_default();
    let hash = cache::graph_hash(&text);
    let pc = match &a.plan_cache {
        Some(dir) => PlanCache::on_disk(dir),
        None => PlanCache::in_memory(),
    };
    // Bindings grouped by cluster, clusters in key order.
    let mut groups: BTreeMap<ShapeCluster, Vec<BTreeMap<String, i64>>> = BTreeMap::new();
    for b in cluster::bindings_of(&sets, &fixed) {
        let lookup = |s: &str| b.get(s).copied();
        dlc_egg::budget::check_target_sizes(graph, &lookup).map_err(Failure::user)?;
        groups.entry(ShapeCluster::of(&b)?).or_default().push(b);
    }
    let mut out = format!(
        "{} binding(s) in {} shape cluster(s)\n",
        groups.values().map(Vec::len).sum::<usize>(),
        groups.len()
    );
    for bindings in groups.values() {
        let Some(first) = bindings.first() else {
            continue;
        };
        let c = pc.compile(graph, &hash, first, opts)?;
        if a.plan_cache.is_some() {
            let _ = writeln!(std::io::stderr().lock(), "{}", c.outcome);
        }
        let values: Vec<String> = bindings
            .iter()
            .map(|b| {
                b.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        out.push_str(&dlc_egg::shapes::render_cluster(&c, &values));
    }
    let _ = write!(std::io::stdout().lock(), "{out}");
    Ok(())
}

/// `-o DIR`: the generated files, and one line saying so on stderr.
fn write_code(dir: &std::path::Path, c: &Generated) -> Result<(), Failure> {
    let written = c.write_dir(dir).map_err(|e| {
        Failure::user(Diagnostic::error(
            codes::OUTPUT_WRITE_FAILED,
            Location::Argument {
                argument: format!("-o {}", dir.display()),
            },
            format!("cannot write the generated CUDA: {e}"),
            "check that the directory can be created and written",
        ))
    })?;
    let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    let _ = writeln!(
        std::io::stderr().lock(),
        "wrote {} kernel(s) for {}: {}",
        c.kernels.len(),
        c.arch.name(),
        names.join(", ")
    );
    Ok(())
}

/// The default output: one line per kernel.
fn summary(o: &Optimized) -> String {
    let mut s = format!(
        "{} kernel(s), {} bytes to/from global memory\n",
        o.kernels.len(),
        o.cost.bytes
    );
    for k in &o.kernels {
        s.push_str(&format!(
            "  {}: {} <- {}\n",
            k.name,
            k.output,
            k.inputs.join(", ")
        ));
    }
    s
}
