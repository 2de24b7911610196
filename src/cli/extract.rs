//! `dlc-egg extract FILE.json [--extractor fast|exact] [--timeout SECS] [--json]`: runs a
//! DAG-aware extractor (`dlc_egg::extract::dag`) on any `egraph-serialize` JSON file and reports
//! the tree cost, the DAG cost, the number of chosen e-nodes, the time and whether the result is
//! proven optimal.

use super::internal_error;
use clap::ValueEnum;
use dlc_egg::diag::codes;
use dlc_egg::diag::{Diagnostic, Location};
use dlc_egg::extract::dag::{
    self, dag_cost, tree_cost, ExtractError, ExtractOptions, Extraction, Problem, ProblemError,
    Status,
};
use dlc_egg::extract::serialize;
use dlc_egg::run::Failure;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Arguments of `dlc-egg extract`.
#[derive(Debug, clap::Args)]
pub struct ExtractArgs {
    /// The e-graph, an egraph-serialize JSON file (extraction-gym's format, or `dlc-egg optimize
    /// --dump egraph`).
    pub file: PathBuf,

    /// `fast`: greedy DAG extraction plus local improvement (large e-graphs, no optimality
    /// claim); `exact`: integer linear program with cycle cuts, proven optimal when it finishes.
    #[arg(long, value_enum, default_value_t = ExtractorArg::Fast)]
    pub extractor: ExtractorArg,

    /// Time limit of the exact extractor in seconds; when it passes, the best solution so far is
    /// reported as not proven optimal.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub timeout: f64,

    /// Print the result as JSON (with the chosen e-node of every needed e-class) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `--extractor` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExtractorArg {
    /// Greedy DAG fixpoint and local improvement.
    Fast,
    /// ILP (microlp) with lazy cycle cuts.
    Exact,
}

/// `dlc-egg extract`.
pub fn cmd_extract(a: &ExtractArgs) -> Result<(), Failure> {
    // `--timeout` bounds the whole command: reading and building the problem count against it.
    let started = Instant::now();
    if !a.timeout.is_finite() || a.timeout <= 0.0 || a.timeout > 1e9 {
        return Err(Failure::user(Diagnostic::error(
            codes::INVALID_ARGUMENT,
            Location::Argument {
                argument: format!("--timeout {}", a.timeout),
            },
            "--timeout must be a positive number of seconds",
            "for example `--timeout 60`",
        )));
    }
    let file = a.file.display().to_string();
    let g = serialize::load(&a.file)?;
    let problem = Problem::from_serialized(&g).map_err(|e| problem_diagnostic(&file, &e))?;
    let name = match a.extractor {
        ExtractorArg::Fast => "fast",
        ExtractorArg::Exact => "exact",
    };
    let extractor = dag::by_name(name)
        .ok_or_else(|| Failure::internal(internal_error("unknown extractor name")))?;
    let limit = Duration::from_secs_f64(a.timeout);
    let opts = ExtractOptions {
        time_limit: Some(
            limit
                .saturating_sub(started.elapsed())
                .max(Duration::from_millis(1)),
        ),
    };
    let t = Instant::now();
    let e = extractor
        .extract(&problem, &opts)
        .map_err(|err| extract_diagnostic(&file, a.timeout, &err))?;
    let secs = t.elapsed().as_secs_f64();
    let bad = |v: dag::ValidationError| {
        Failure::internal(internal_error(&format!("invalid extraction: {v}")))
    };
    let dag = dag_cost(&problem, &e).map_err(bad)?;
    let tree = tree_cost(&problem, &e).map_err(bad)?;
    let text = if a.json {
        let doc = json_report(&file, name, &problem, &e, tree, dag, secs);
        serde_json::to_string_pretty(&doc)
            .map_err(|err| Failure::internal(internal_error(&err.to_string())))?
            + "\n"
    } else {
        text_report(&file, name, &problem, &e, tree, dag, secs)
    };
    let _ = write!(std::io::stdout().lock(), "{text}");
    Ok(())
}

fn status_text(e: &Extraction) -> String {
    match e.status {
        Status::Optimal => "yes (proven)".to_string(),
        Status::Heuristic => "not proven (heuristic)".to_string(),
        Status::TimeLimit => match e.lower_bound {
            Some(b) => format!("not proven (time limit; lower bound {b})"),
            None => "not proven (time limit)".to_string(),
        },
    }
}

fn text_report(
    file: &str,
    name: &str,
    p: &Problem,
    e: &Extraction,
    tree: f64,
    dag: f64,
    secs: f64,
) -> String {
    format!(
        "{file}: {} e-nodes, {} e-classes, {} root(s)\n\
         extractor:      {name}\n\
         tree cost:      {tree}\n\
         DAG cost:       {dag}\n\
         chosen e-nodes: {}\n\
         time:           {secs:.3} s\n\
         optimal:        {}\n",
        p.num_nodes(),
        p.num_classes(),
        p.roots().len(),
        e.len(),
        status_text(e)
    )
}

fn json_report(
    file: &str,
    name: &str,
    p: &Problem,
    e: &Extraction,
    tree: f64,
    dag: f64,
    secs: f64,
) -> serde_json::Value {
    let choices: serde_json::Map<String, serde_json::Value> = e
        .chosen()
        .map(|(c, n)| {
            (
                p.class(c).name.clone(),
                serde_json::Value::String(p.node(n).name.clone()),
            )
        })
        .collect();
    serde_json::json!({
        "file": file,
        "extractor": name,
        "e_nodes": p.num_nodes(),
        "e_classes": p.num_classes(),
        "tree_cost": tree,
        "dag_cost": dag,
        "chosen_nodes": e.len(),
        "time_s": secs,
        "status": e.status,
        "optimal": e.status == Status::Optimal,
        "lower_bound": e.lower_bound,
        "choices": choices,
    })
}

/// `E1300 InvalidEGraph`: the document parses but is not a usable extraction problem.
fn problem_diagnostic(file: &str, e: &ProblemError) -> Failure {
    let (at, suggestion) = match e {
        ProblemError::UnknownChild { node, .. } => (
            format!("nodes.{node}.children"),
            "every child must be the id of an e-node in `nodes`",
        ),
        ProblemError::UnknownRoot { .. } | ProblemError::NoRoots => (
            "root_eclasses".to_string(),
            "list in `root_eclasses` the e-class(es) to extract; each must have an e-node",
        ),
        ProblemError::InvalidCost { node, .. } => (
            format!("nodes.{node}.cost"),
            "give every e-node a cost ≥ 0 (a huge cost such as 1.7976931348623157e308 marks it unusable)",
        ),
        ProblemError::BadClassIndex { .. }
        | ProblemError::BadNodeIndex { .. }
        | ProblemError::TooLarge(_) => (
            "nodes".to_string(),
            "split the e-graph; at most 2^32 - 1 e-nodes and e-classes are supported",
        ),
    };
    Failure::user(
        Diagnostic::error(
            codes::INVALID_EGRAPH,
            Location::Field { path: at },
            e.to_string(),
            suggestion,
        )
        .with("file", file),
    )
}

/// `E1301 NoFiniteExtraction`, `E1302 ExtractionTimeout`, `E1303 SolverFailed`.
fn extract_diagnostic(file: &str, timeout: f64, e: &ExtractError) -> Failure {
    match e {
        ExtractError::NoFiniteSolution { .. } => Failure::user(
            Diagnostic::error(
                codes::NO_FINITE_EXTRACTION,
                Location::Field {
                    path: "root_eclasses".into(),
                },
                e.to_string(),
                "give an e-node of that e-class, and of every e-class it needs, a finite cost, or add an e-node that does not lead back into a cycle",
            )
            .with("file", file),
        ),
        ExtractError::Timeout { .. } => Failure::user(
            Diagnostic::error(
                codes::EXTRACTION_TIMEOUT,
                Location::Argument {
                    argument: format!("--timeout {timeout}"),
                },
                e.to_string(),
                "raise --timeout, or use --extractor fast",
            )
            .with("file", file),
        ),
        ExtractError::Solver(_) => Failure::internal(
            Diagnostic::error(
                codes::SOLVER_FAILED,
                Location::Argument {
                    argument: file.to_string(),
                },
                e.to_string(),
                "use --extractor fast; please report the e-graph file",
            ),
        ),
    }
}
