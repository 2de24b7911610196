//! `dlc-egg run` (`graph-json.md` § `dlc-egg run`): load a graph, read its inputs from `.npy` files
//! (or fill them with seeded random values), bind symbols, lower to Tiny IR, verify, evaluate with
//! the reference evaluator and write every signature output to `<out-dir>/<tensor>.npy`.
//!
//! The steps are public functions so that tests and library users can run parts of the pipeline
//! on a [`Graph`] they built themselves: [`prepare_inputs`] (input names, arrays, dtypes, missing
//! inputs, symbols, shapes, random fill), [`lower_and_verify`], [`write_outputs`].
//!
//! Diagnostic codes raised here (`E03xx`: run inputs and outputs, `E04xx`: devices):
//!
//! | code | kind | when |
//! | --- | --- | --- |
//! | E0300 | NpyUnreadable | an input file is missing, unreadable or not a valid `.npy` |
//! | E0301 | NpyDtypeMismatch | an array's element type does not fit its tensor's dtype |
//! | E0302 | NpyShapeMismatch | an array's shape differs from its tensor's concrete shape |
//! | E0303 | MissingInput | a signature input has no `--input` and `--random` is not given |
//! | E0309 | UnknownInput | `--input` names a tensor that is not a signature input |
//! | E0310 | InvalidInputArgument | `--input` is not `TENSOR=FILE`, or names a tensor twice |
//! | E0311 | InvalidBindArgument | `--bind` is not `SYMBOL=INTEGER`, or binds a symbol twice |
//! | E0312 | OutputWriteFailed | the output directory or an output file cannot be written |
//! | E0313 | InvalidArgument | any other malformed command line |
//! | E0314 | UnresolvedSize | a signature tensor's size cannot be computed from the symbols |
//! | E0315 | OutputNotComputed | internal: the evaluator returned no value for an output |
//! | E0316 | OutputMismatch | internal: an output's dtype or shape is not the declared one |
//! | E0400 | DeviceUnavailable | `--device cuda` without a usable GPU, driver or NVRTC |
//!
//! `--device cuda` (E0400–E0403) lives in `run/cuda.rs`.

// A `Diagnostic` is the project's user-facing error (crate::diag); it is large by design and
// returned only on cold failure paths, so boxing it would only add noise.
#![allow(clippy::result_large_err)]

use crate::cuda::{DeviceInfo, Timings};
use crate::diag::{Diagnostic, Diagnostics, Location};
use crate::eval;
use crate::ir::dim::{fmt_shape, Dim};
use crate::ir::dtype::DType;
use crate::ir::frontend::{self, Graph, TensorInfo};
use crate::ir::lower;
use crate::ir::tiny::{self, Program};
use crate::npy;
use crate::tensor::Tensor;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod cuda;
mod random;
pub use cuda::{
    check_cuda, check_device_memory, cuda_failure, evaluate_cuda, evaluate_cuda_plan, timing_json,
    write_timing,
};
pub use random::{gather_index_bounds, random_inputs, random_tensor, try_random_tensor};

/// Largest tensor `run` materializes (elements), so that a huge binding is a diagnostic rather
/// than an out-of-memory abort.
pub const MAX_ELEMENTS: usize = 1 << 32;

/// Where the program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Device {
    /// The reference evaluator (CPU playback of Tiny IR), the oracle of every test.
    #[default]
    Reference,
    /// The native CPU backend (`crate::cpu`): the optimized program as C, compiled at run time.
    Cpu,
    /// Generated CUDA kernels on the GPU (NVRTC and the driver API, `crate::cuda`).
    Cuda,
}

/// Everything `dlc-egg run` is given.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// The `graph.json` file.
    pub graph: PathBuf,
    /// `--input TENSOR=FILE`, in command-line order.
    pub inputs: Vec<(String, PathBuf)>,
    /// `--bind SYMBOL=VALUE`.
    pub binds: BTreeMap<String, i64>,
    /// `--out-dir`.
    pub out_dir: PathBuf,
    /// `--device`.
    pub device: Device,
    /// `--random SEED`: fill missing inputs with seeded values.
    pub random: Option<u64>,
    /// `--optimized`: evaluate the optimizer's region program instead of the Tiny IR.
    pub optimized: bool,
    /// `--repeat N` (`cuda` only): time N runs after a warm-up, write `timing.json`.
    pub repeat: u32,
    /// `--plan-cache DIR`: where optimized programs are cached per shape cluster
    /// (`crate::shapes`); `None` caches in memory only (nothing survives the run).
    pub plan_cache: Option<PathBuf>,
    /// `--threads N` (`--device cpu`): threads per kernel; `None`: the machine's cores.
    pub threads: Option<usize>,
    /// Memory and input-file budgets (`crate::budget`), checked before any work.
    pub budgets: crate::budget::RunBudgets,
}

/// What `run` did.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// The outputs written, in signature order.
    pub outputs: Vec<WrittenOutput>,
    /// `--device cuda --repeat N`: the mean times and the `timing.json` written.
    pub timings: Option<(Timings, PathBuf)>,
    /// `--optimized` or `--device cuda`: whether the shape cluster's plan was cached.
    pub plan_cache: Option<crate::shapes::CacheOutcome>,
}

/// One output file `run` wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct WrittenOutput {
    /// The signature output's tensor name.
    pub tensor: String,
    /// Its dtype.
    pub dtype: DType,
    /// Its concrete shape.
    pub shape: Vec<usize>,
    /// The `.npy` file written.
    pub path: PathBuf,
}

/// Why `run` (or another CLI command) failed: diagnostics, and whether the failure is the
/// compiler's fault (exit status 1) rather than the user's (exit status 2).
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// What went wrong.
    pub diagnostics: Diagnostics,
    /// True for compiler bugs (a broken invariant), false for problems in the user's input.
    pub internal: bool,
}

impl std::fmt::Display for Failure {
    /// The diagnostics in their text form; a compiler bug says so first.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.internal {
            f.write_str("internal error (a compiler bug): ")?;
        }
        write!(f, "{}", self.diagnostics)
    }
}

impl std::error::Error for Failure {}

impl Failure {
    /// A problem in the user's input.
    pub fn user(d: impl Into<Diagnostics>) -> Failure {
        Failure {
            diagnostics: d.into(),
            internal: false,
        }
    }

    /// A compiler bug.
    pub fn internal(d: impl Into<Diagnostics>) -> Failure {
        Failure {
            diagnostics: d.into(),
            internal: true,
        }
    }
}

impl From<Diagnostics> for Failure {
    fn from(d: Diagnostics) -> Failure {
        Failure::user(d)
    }
}

impl From<Diagnostic> for Failure {
    fn from(d: Diagnostic) -> Failure {
        Failure::user(d)
    }
}

/// Concrete inputs of a run: symbol values and one tensor per signature input.
#[derive(Clone, Debug, PartialEq)]
pub struct PreparedInputs {
    /// Value of every symbol.
    pub bindings: BTreeMap<String, i64>,
    /// Every signature input by tensor name.
    pub tensors: BTreeMap<String, Tensor>,
}

/// Runs `dlc-egg run` end to end and returns the outputs written, in signature order.
pub fn run(opts: &RunOptions) -> Result<Vec<WrittenOutput>, Failure> {
    run_report(opts).map(|r| r.outputs)
}

/// [`run`], also returning the timings of `--device cuda --repeat N`.
pub fn run_report(opts: &RunOptions) -> Result<RunReport, Failure> {
    let device = check_device(opts.device)?;
    let graph = frontend::load_file(&opts.graph)?;
    // The plan cache keys on the file's bytes (read again: `load_file` keeps no text).
    let hash = match std::fs::read(&opts.graph) {
        Ok(bytes) => crate::shapes::cache::graph_hash(&bytes),
        Err(_) => crate::shapes::cache::loaded_graph_hash(&graph),
    };
    run_graph_on(&graph, opts, device.as_ref(), &hash)
}

/// [`run_report`] on an already loaded graph (`opts.graph` is not read; `graph_hash` keys the
/// plan cache, e.g. the hash of the file's bytes).
pub fn run_report_loaded(
    graph: &Graph,
    opts: &RunOptions,
    graph_hash: &str,
) -> Result<RunReport, Failure> {
    let device = check_device(opts.device)?;
    run_graph_on(graph, opts, device.as_ref(), graph_hash)
}

/// [`run`] on an already loaded graph (`opts.graph` is not read).
pub fn run_graph(graph: &Graph, opts: &RunOptions) -> Result<Vec<WrittenOutput>, Failure> {
    let device = check_device(opts.device)?;
    let hash = crate::shapes::cache::loaded_graph_hash(graph);
    run_graph_on(graph, opts, device.as_ref(), &hash).map(|r| r.outputs)
}

/// [`run_graph`] on the CPU (`device: None`) or the given GPU.
fn run_graph_on(
    graph: &Graph,
    opts: &RunOptions,
    device: Option<&DeviceInfo>,
    graph_hash: &str,
) -> Result<RunReport, Failure> {
    let prog = lower_and_verify(graph)?;
    let prepared = prepare_inputs_budgeted(
        graph,
        Some(&prog),
        &opts.inputs,
        &opts.binds,
        opts.random,
        &opts.budgets,
    )?;
    if device.is_some() || opts.optimized {
        let lookup = |s: &str| prepared.bindings.get(s).copied();
        crate::budget::check_target_sizes(graph, &lookup).map_err(Failure::user)?;
        crate::budget::check_axis_extents(graph, &lookup).map_err(Failure::user)?;
    }
    let cache = match &opts.plan_cache {
        Some(dir) => crate::shapes::PlanCache::on_disk(dir),
        None => crate::shapes::PlanCache::in_memory(),
    };
    let (outputs, timings, outcome) = match device {
        Some(d) => {
            let oo = crate::optimize::OptimizeOptions {
                target: d.arch.target(),
                ..crate::optimize::OptimizeOptions::default()
            };
            let c = cache.compile(graph, graph_hash, &prepared.bindings, &oo)?;
            let (outputs, t) = evaluate_cuda_plan(&c, &oo, &prepared, d, opts.repeat)?;
            (outputs, (opts.repeat > 0).then_some(t), Some(c.outcome))
        }
        None if opts.device == Device::Cpu => {
            let threads = opts.threads.unwrap_or_else(crate::cpu::default_threads);
            // Extraction priced by the CPU model (issue 16): the cover that runs here.
            let oo = crate::cpu::pricing::cpu_optimize_options(
                crate::optimize::OptimizeOptions::default(),
                opts.plan_cache.as_deref(),
                threads,
            )?;
            let c = cache.compile(graph, graph_hash, &prepared.bindings, &oo)?;
            let (outputs, t) = crate::cpu::exec::evaluate_native(
                &c.plan.program,
                &c.bindings,
                &prepared.tensors,
                &crate::cpu::exec::NativeOptions {
                    threads,
                    repeat: opts.repeat,
                },
                opts.plan_cache.as_deref(),
            )?;
            (outputs, (opts.repeat > 0).then_some(t), Some(c.outcome))
        }
        None if opts.optimized => {
            let oo = crate::optimize::OptimizeOptions::default();
            let c = cache.compile(graph, graph_hash, &prepared.bindings, &oo)?;
            let outputs = crate::ir::region::program::evaluate_program(
                &c.plan.program,
                &c.bindings,
                &prepared.tensors,
            )
            .map_err(|d| classify_optimized_failure(&prog, &prepared, d))?;
            (outputs, None, Some(c.outcome))
        }
        None => (
            eval::evaluate(&prog, &prepared.bindings, &prepared.tensors)?,
            None,
            None,
        ),
    };
    check_outputs(graph, &outputs, &prepared.bindings)?;
    let written = write_outputs(graph, &outputs, &opts.out_dir)?;
    let timings = match timings {
        Some(t) => {
            let path = write_timing(&opts.out_dir, opts.repeat, &t)?;
            Some((t, path))
        }
        None => None,
    };
    Ok(RunReport {
        outputs: written,
        timings,
        plan_cache: outcome,
    })
}

/// Optimizes `prog` and plays the extracted region program back on the CPU. Failures here are
/// compiler bugs (the inputs were already validated), so they exit with status 1.
pub fn evaluate_optimized(
    prog: &Program,
    prepared: &PreparedInputs,
) -> Result<BTreeMap<String, Tensor>, Failure> {
    let o = crate::optimize::optimize(prog, &crate::optimize::OptimizeOptions::default())
        .map_err(|e| Failure::internal(optimizer_bug(&e.to_string())))?;
    crate::ir::region::program::evaluate_program(&o.program, &prepared.bindings, &prepared.tensors)
        .map_err(Failure::internal)
}

/// A failure of the optimized program on validated inputs is the user's when the reference
/// evaluator fails on the same inputs with a user error (a Gather index out of range is `E0304`
/// through every path); otherwise it is the compiler's (`d`, exit 1).
fn classify_optimized_failure(
    prog: &Program,
    prepared: &PreparedInputs,
    d: impl Into<Diagnostics>,
) -> Failure {
    match eval::evaluate(prog, &prepared.bindings, &prepared.tensors) {
        Err(reference) if reference.0.iter().all(|r| is_user_code(r.code)) => {
            Failure::user(reference)
        }
        _ => Failure::internal(d),
    }
}

/// Whether a reference-evaluator code is about the user's input rather than a compiler bug.
fn is_user_code(code: &str) -> bool {
    matches!(
        code,
        "E0304" | "E0208" | "E0209" | "E0303" | "E0307" | "E1407"
    )
}

pub(crate) fn optimizer_bug(why: &str) -> Diagnostic {
    Diagnostic::error(
        "E0317",
        "OptimizerFailed",
        Location::Document,
        format!("the optimizer could not compile this graph: {why}"),
        "this is a compiler bug; run without --optimized to get the reference result, and \
         report the graph.json",
    )
}

/// Every signature output must come back from the evaluator with its declared dtype and
/// concrete shape; anything else is a compiler bug (`E0315`, `E0316`).
pub fn check_outputs(
    graph: &Graph,
    outputs: &BTreeMap<String, Tensor>,
    bindings: &BTreeMap<String, i64>,
) -> Result<(), Failure> {
    for o in &graph.signature.outputs {
        let t = outputs
            .get(&o.tensor)
            .ok_or_else(|| Failure::internal(missing_output(&o.tensor)))?;
        let info = tensor_info(graph, &o.tensor).map_err(Failure::internal)?;
        let shape = concrete_shape(&o.tensor, info, bindings).map_err(Failure::internal)?;
        if t.dtype != info.dtype || t.shape != shape {
            return Err(Failure::internal(
                Diagnostic::error(
                    "E0316",
                    "OutputMismatch",
                    Location::Tensor {
                        tensor: o.tensor.clone(),
                    },
                    format!(
                        "the evaluator returned a {} tensor of shape {:?}, but the output is declared {} {:?}",
                        t.dtype, t.shape, info.dtype, shape
                    ),
                    "this is a compiler bug; please report it with the graph.json",
                ),
            ));
        }
    }
    Ok(())
}

/// For `cuda`, the GPU the program will run on; `E0400 DeviceUnavailable` (saying whether the
/// driver library, the GPU or NVRTC is missing) when there is none.
pub fn check_device(device: Device) -> Result<Option<DeviceInfo>, Failure> {
    match device {
        Device::Reference | Device::Cpu => Ok(None),
        Device::Cuda => check_cuda().map(Some),
    }
}

/// Lowers to Tiny IR and verifies the result. A verifier failure is a compiler bug.
pub fn lower_and_verify(graph: &Graph) -> Result<Program, Failure> {
    let prog = lower::lower(graph)?;
    tiny::verify(&prog).map_err(|e| Failure::internal(e.to_diagnostic()))?;
    Ok(prog)
}

/// Checks the `--input` names, reads and converts the given arrays, reports missing inputs
/// (unless `random` is given), resolves symbols, checks the arrays' shapes and fills the missing
/// inputs with seeded random values.
pub fn prepare_inputs(
    graph: &Graph,
    inputs: &[(String, PathBuf)],
    binds: &BTreeMap<String, i64>,
    random: Option<u64>,
) -> Result<PreparedInputs, Failure> {
    let budgets = crate::budget::RunBudgets::default();
    prepare_inputs_budgeted(graph, None, inputs, binds, random, &budgets)
}

/// [`prepare_inputs`] within `budgets`: input files are read within `max_file_bytes`, and, with
/// the lowered `prog`, the binding's tensors are checked against the memory budgets
/// ([`crate::budget::check_run`]) before any random input is generated.
pub fn prepare_inputs_budgeted(
    graph: &Graph,
    prog: Option<&Program>,
    inputs: &[(String, PathBuf)],
    binds: &BTreeMap<String, i64>,
    random: Option<u64>,
    budgets: &crate::budget::RunBudgets,
) -> Result<PreparedInputs, Failure> {
    check_input_names(graph, inputs)?;
    let mut tensors = read_given_inputs(graph, inputs, budgets.max_file_bytes)?;
    // Values that travel with the graph (constants, imported weights) fill inputs not given.
    for (name, t) in &graph.constants {
        tensors.entry(name.clone()).or_insert_with(|| t.clone());
    }
    let missing = missing_inputs(graph, &tensors);
    if random.is_none() && !missing.is_empty() {
        return Err(Failure::user(Diagnostics(
            missing.iter().map(|t| missing_input(t)).collect(),
        )));
    }
    check_static_shapes(graph, &tensors)?;
    let shapes: BTreeMap<String, Vec<usize>> = tensors
        .iter()
        .map(|(k, t)| (k.clone(), t.shape.clone()))
        .collect();
    let bindings = frontend::resolve_symbols(graph, binds, &shapes)?;
    check_shapes(graph, &tensors, &bindings)?;
    if let Some(prog) = prog {
        crate::budget::check_run(prog, &bindings, budgets).map_err(Failure::user)?;
    }
    if let Some(seed) = random {
        tensors.extend(random_inputs(graph, seed, &bindings, &missing)?);
    }
    Ok(PreparedInputs { bindings, tensors })
}

/// `E0309` for names that are not signature inputs, `E0310` for a tensor given twice.
pub fn check_input_names(graph: &Graph, inputs: &[(String, PathBuf)]) -> Result<(), Failure> {
    let known: Vec<&str> = graph
        .signature
        .inputs
        .iter()
        .map(|i| i.tensor.as_str())
        .collect();
    let mut seen = BTreeSet::new();
    let mut diags = Vec::new();
    for (name, path) in inputs {
        if !known.contains(&name.as_str()) {
            diags.push(unknown_input(name, &known, graph));
        } else if !seen.insert(name.as_str()) {
            diags.push(
                Diagnostic::error(
                    "E0310",
                    "InvalidInputArgument",
                    Location::Argument {
                        argument: format!("--input {name}={}", path.display()),
                    },
                    format!("tensor `{name}` is given more than once"),
                    "pass one --input per signature input",
                )
                .with("tensor", name),
            );
        }
    }
    diags_result(diags)
}

fn unknown_input(name: &str, known: &[&str], graph: &Graph) -> Diagnostic {
    let why = if graph.signature.outputs.iter().any(|o| o.tensor == name) {
        format!("`{name}` is a signature output, not an input")
    } else {
        format!("`{name}` is not a signature input of the graph")
    };
    Diagnostic::error(
        "E0309",
        "UnknownInput",
        Location::Argument {
            argument: format!("--input {name}"),
        },
        why,
        format!("the signature inputs are: {}", list_or_none(known)),
    )
}

fn list_or_none(names: &[&str]) -> String {
    if names.is_empty() {
        "(none)".to_string()
    } else {
        names.join(", ")
    }
}

/// Reads every `--input` file and converts it to its tensor's dtype; every bad file is reported.
fn read_given_inputs(
    graph: &Graph,
    inputs: &[(String, PathBuf)],
    max_file_bytes: u64,
) -> Result<BTreeMap<String, Tensor>, Failure> {
    let mut tensors = BTreeMap::new();
    let mut diags = Vec::new();
    for (name, path) in inputs {
        match read_input(graph, name, path, max_file_bytes) {
            Ok(t) => {
                tensors.insert(name.clone(), t);
            }
            Err(d) => diags.push(d),
        }
    }
    diags_result(diags).map(|()| tensors)
}

fn read_input(
    graph: &Graph,
    name: &str,
    path: &Path,
    max_file_bytes: u64,
) -> Result<Tensor, Diagnostic> {
    let info = tensor_info(graph, name)?;
    let array =
        npy::read_array_limited(path, max_file_bytes).map_err(|d| d.with("tensor", name))?;
    npy::to_tensor(array, name, info.dtype)
}

fn tensor_info<'g>(graph: &'g Graph, name: &str) -> Result<&'g TensorInfo, Diagnostic> {
    graph.tensor(name).ok_or_else(|| {
        Diagnostic::error(
            "E0314",
            "UnresolvedSize",
            Location::Tensor {
                tensor: name.to_string(),
            },
            "the tensor has no declared dtype and shape",
            "declare every signature tensor under `tensors` in graph.json",
        )
    })
}

/// Signature inputs without a tensor, in signature order.
pub fn missing_inputs(graph: &Graph, given: &BTreeMap<String, Tensor>) -> Vec<String> {
    graph
        .signature
        .inputs
        .iter()
        .filter(|i| !given.contains_key(&i.tensor))
        .map(|i| i.tensor.clone())
        .collect()
}

fn missing_input(tensor: &str) -> Diagnostic {
    Diagnostic::error(
        "E0303",
        "MissingInput",
        Location::Tensor {
            tensor: tensor.to_string(),
        },
        format!("signature input `{tensor}` has no value"),
        format!(
            "pass it with --input {tensor}=file.npy, or fill missing inputs with --random SEED"
        ),
    )
}

/// The concrete shape of a tensor under `bindings` (`E0314` when a size is unbound, negative,
/// overflows or exceeds [`MAX_ELEMENTS`]).
pub fn concrete_shape(
    name: &str,
    info: &TensorInfo,
    bindings: &BTreeMap<String, i64>,
) -> Result<Vec<usize>, Diagnostic> {
    let fail = |why: String| {
        Diagnostic::error(
            "E0314",
            "UnresolvedSize",
            Location::Tensor {
                tensor: name.to_string(),
            },
            why,
            "bind the symbols with --bind SYMBOL=VALUE (or give arrays whose shapes determine them)",
        )
        .with("shape", fmt_shape(&info.shape))
    };
    let mut shape = Vec::with_capacity(info.shape.len());
    for d in &info.shape {
        let v = d
            .eval_with(bindings)
            .map_err(|e| fail(format!("size `{d}` cannot be computed: {e}")))?;
        let v = usize::try_from(v).map_err(|_| fail(format!("size `{d}` is negative ({v})")))?;
        shape.push(v);
    }
    let numel = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|n| *n <= MAX_ELEMENTS);
    if numel.is_none() {
        return Err(fail(format!(
            "the shape {shape:?} has more than {MAX_ELEMENTS} elements"
        )));
    }
    Ok(shape)
}

/// `E0302` for every given array whose shape is not its tensor's concrete shape.
pub fn check_shapes(
    graph: &Graph,
    tensors: &BTreeMap<String, Tensor>,
    bindings: &BTreeMap<String, i64>,
) -> Result<(), Failure> {
    let mut diags = Vec::new();
    for (name, t) in tensors {
        let checked = tensor_info(graph, name).and_then(|info| {
            let want = concrete_shape(name, info, bindings)?;
            if want == t.shape {
                Ok(())
            } else {
                Err(shape_mismatch(name, &info.shape, &want, &t.shape))
            }
        });
        if let Err(d) = checked {
            diags.push(d);
        }
    }
    diags_result(diags)
}

/// `E0302` for every given array whose rank or constant sizes contradict its tensor's declared
/// shape; runs before symbols are resolved, so that such arrays are reported as shape mismatches
/// rather than as symbol conflicts.
pub fn check_static_shapes(
    graph: &Graph,
    tensors: &BTreeMap<String, Tensor>,
) -> Result<(), Failure> {
    let mut diags = Vec::new();
    for (name, t) in tensors {
        let Some(info) = graph.tensor(name) else {
            continue;
        };
        let fits = info.shape.len() == t.shape.len()
            && info
                .shape
                .iter()
                .zip(&t.shape)
                .all(|(d, &n)| d.as_int().is_none_or(|v| v == n as i64));
        if !fits {
            diags.push(static_shape_mismatch(name, &info.shape, &t.shape));
        }
    }
    diags_result(diags)
}

fn static_shape_mismatch(name: &str, declared: &[Dim], found: &[usize]) -> Diagnostic {
    Diagnostic::error(
        "E0302",
        "NpyShapeMismatch",
        Location::Tensor {
            tensor: name.to_string(),
        },
        format!(
            "the array has shape {found:?}, but the tensor is declared with shape {}",
            fmt_shape(declared)
        ),
        format!(
            "pass an array of shape {} (symbols may take any size)",
            fmt_shape(declared)
        ),
    )
    .with("expected", fmt_shape(declared))
    .with("found", format!("{found:?}"))
}

fn shape_mismatch(name: &str, declared: &[Dim], want: &[usize], found: &[usize]) -> Diagnostic {
    Diagnostic::error(
        "E0302",
        "NpyShapeMismatch",
        Location::Tensor {
            tensor: name.to_string(),
        },
        format!(
            "the array has shape {found:?}, but the tensor's shape {} is {want:?}",
            fmt_shape(declared)
        ),
        format!("pass an array of shape {want:?}, or bind the symbols (--bind) to match the array"),
    )
    .with("expected", format!("{want:?}"))
    .with("found", format!("{found:?}"))
}

fn diags_result(diags: Vec<Diagnostic>) -> Result<(), Failure> {
    if diags.is_empty() {
        Ok(())
    } else {
        Err(Failure::user(Diagnostics(diags)))
    }
}

/// Writes every signature output to `<out_dir>/<file name>.npy` (see [`output_file_name`]),
/// creating the directory. An output missing from `outputs` is a compiler bug.
pub fn write_outputs(
    graph: &Graph,
    outputs: &BTreeMap<String, Tensor>,
    out_dir: &Path,
) -> Result<Vec<WrittenOutput>, Failure> {
    std::fs::create_dir_all(out_dir).map_err(|e| {
        Failure::user(
            Diagnostic::error(
                npy::E_NPY_WRITE.0,
                npy::E_NPY_WRITE.1,
                Location::Argument {
                    argument: format!("--out-dir {}", out_dir.display()),
                },
                format!("cannot create the output directory: {e}"),
                "choose a writable directory with --out-dir",
            )
            .with("path", out_dir.display()),
        )
    })?;
    let mut written = Vec::new();
    for o in &graph.signature.outputs {
        let t = outputs
            .get(&o.tensor)
            .ok_or_else(|| Failure::internal(missing_output(&o.tensor)))?;
        let path = out_dir.join(format!("{}.npy", output_file_name(&o.tensor)));
        npy::write_tensor(&path, t)?;
        written.push(WrittenOutput {
            tensor: o.tensor.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
            path,
        });
    }
    Ok(written)
}

/// The file stem of an output: the tensor name with every character outside
/// `[A-Za-z0-9_.-]` (and a leading `.`) replaced by `_`, so no name can escape the directory.
pub fn output_file_name(tensor: &str) -> String {
    let mut s: String = tensor
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        s.replace_range(0..0, "_");
    }
    s
}

fn missing_output(tensor: &str) -> Diagnostic {
    Diagnostic::error(
        "E0315",
        "OutputNotComputed",
        Location::Tensor {
            tensor: tensor.to_string(),
        },
        "the evaluator returned no value for this signature output",
        "this is a compiler bug; please report it with the graph.json",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::frontend::{
        Mutability, Node, Op, Operand, Role, SigInput, SigOutput, Signature, Storage,
    };
    use crate::tensor::TensorData;

    fn sig_in(t: &str) -> SigInput {
        SigInput {
            tensor: t.into(),
            role: Role::Data,
            mutability: Mutability::Immutable,
            storage: Storage::Arg,
        }
    }

    fn info(dtype: DType, shape: Vec<Dim>) -> TensorInfo {
        TensorInfo { dtype, shape }
    }

    /// `Y = gather(X[M, 5], I[2, 3], axis 1)`, plus an unused bool input `B`.
    fn graph() -> Graph {
        let mut g = Graph {
            signature: Signature {
                inputs: vec![sig_in("X"), sig_in("I"), sig_in("B")],
                outputs: vec![SigOutput { tensor: "Y".into() }],
            },
            ..Graph::default()
        };
        g.symbols.insert("M".into(), 2);
        g.tensors.insert(
            "X".into(),
            info(DType::F16, vec![Dim::sym("M"), Dim::int(5)]),
        );
        g.tensors
            .insert("I".into(), info(DType::I32, vec![Dim::int(2), Dim::int(3)]));
        g.tensors.insert("B".into(), info(DType::Bool, vec![]));
        g.tensors
            .insert("Y".into(), info(DType::F16, vec![Dim::int(2), Dim::int(3)]));
        g.nodes.push(Node {
            name: "g".into(),
            op: Op::Gather { axis: 1 },
            inputs: vec![Operand::Tensor("X".into()), Operand::Tensor("I".into())],
            outputs: vec!["Y".into()],
        });
        g
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dlc-egg-run-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }

    fn save(dir: &Path, name: &str, t: &Tensor) -> PathBuf {
        let p = dir.join(name);
        npy::write_tensor(&p, t).expect("write");
        p
    }

    #[test]
    fn missing_inputs_are_reported_each() {
        let e = prepare_inputs(&graph(), &[], &BTreeMap::new(), None).expect_err("missing");
        assert!(!e.internal);
        assert_eq!(e.diagnostics.codes(), vec!["E0303"; 3]);
        assert!(e.diagnostics.0[0].suggestion.contains("--random"));
    }

    #[test]
    fn unknown_and_duplicate_inputs() {
        let g = graph();
        let ins = vec![
            ("Y".to_string(), PathBuf::from("y.npy")),
            ("X".to_string(), PathBuf::from("a.npy")),
            ("X".to_string(), PathBuf::from("b.npy")),
        ];
        let e = check_input_names(&g, &ins).expect_err("bad names");
        assert_eq!(e.diagnostics.codes(), vec!["E0309", "E0310"]);
        assert!(e.diagnostics.0[0].why.contains("output"));
    }

    #[test]
    fn dtype_and_shape_are_checked() {
        let dir = temp_dir("checks");
        let x_bad_dtype = save(
            &dir,
            "x.npy",
            &Tensor::from_f64(DType::I32, vec![2, 5], &[0.0; 10]),
        );
        let ins = vec![("X".to_string(), x_bad_dtype)];
        let e = prepare_inputs(&graph(), &ins, &BTreeMap::new(), Some(0)).expect_err("dtype");
        assert_eq!(e.diagnostics.first_code(), "E0301");

        let x_bad_shape = save(
            &dir,
            "x2.npy",
            &Tensor::from_f64(DType::F32, vec![3, 4], &[0.0; 12]),
        );
        let ins = vec![("X".to_string(), x_bad_shape)];
        let e = prepare_inputs(&graph(), &ins, &BTreeMap::new(), Some(0)).expect_err("shape");
        assert_eq!(e.diagnostics.first_code(), "E0302");
        assert!(e.diagnostics.0[0].why.contains("[M, 5]"));

        // Rank and constant sizes fit, but M (bound to 2) does not: a shape mismatch here, or a
        // symbol conflict if resolve_symbols reports it first.
        let x_bad_symbol = save(
            &dir,
            "x3.npy",
            &Tensor::from_f64(DType::F32, vec![3, 5], &[0.0; 15]),
        );
        let ins = vec![("X".to_string(), x_bad_symbol)];
        let bind = BTreeMap::from([("M".to_string(), 2)]);
        let e = prepare_inputs(&graph(), &ins, &bind, Some(0)).expect_err("M");
        let code = e.diagnostics.first_code();
        assert!(code == "E0302" || code.starts_with("E02"), "{code}");

        let ins = vec![("X".to_string(), dir.join("absent.npy"))];
        let e = prepare_inputs(&graph(), &ins, &BTreeMap::new(), Some(0)).expect_err("absent");
        assert_eq!(e.diagnostics.first_code(), "E0300");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn random_fills_only_missing_inputs_deterministically() {
        let dir = temp_dir("random");
        let x = Tensor::from_f64(DType::F32, vec![2, 5], &[0.25; 10]);
        let ins = vec![("X".to_string(), save(&dir, "x.npy", &x))];
        let a = prepare_inputs(&graph(), &ins, &BTreeMap::new(), Some(7)).expect("a");
        let b = prepare_inputs(&graph(), &ins, &BTreeMap::new(), Some(7)).expect("b");
        assert_eq!(a, b);
        let c = prepare_inputs(&graph(), &ins, &BTreeMap::new(), Some(8)).expect("c");
        assert_ne!(a.tensors["I"], c.tensors["I"]);
        // The given input is kept (converted to fp16), not replaced.
        assert_eq!(a.tensors["X"].to_f64(), vec![0.25; 10]);
        assert_eq!(a.tensors["X"].dtype, DType::F16);
        assert_eq!(a.tensors["I"].shape, vec![2, 3]);
        assert_eq!(a.tensors["B"].shape, Vec::<usize>::new());
        let bytes = |t: &Tensor| npy::encode_tensor(t).expect("encode");
        assert_eq!(bytes(&a.tensors["I"]), bytes(&b.tensors["I"]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn gather_indices_stay_in_range() {
        let bounds = gather_index_bounds(&graph(), &BTreeMap::new());
        assert_eq!(bounds.get("I"), Some(&5));
        let t = random_tensor(DType::I32, vec![1000], 3, 1, 5);
        let TensorData::I32(v) = &t.data else {
            panic!("i32 data")
        };
        assert!(v.iter().all(|x| (0..5).contains(x)));
        assert!(v.contains(&4), "covers the range");
    }

    #[test]
    fn unbound_and_huge_sizes_are_diagnostics() {
        let i = info(DType::F32, vec![Dim::sym("N")]);
        let d = concrete_shape("T", &i, &BTreeMap::new()).expect_err("unbound");
        assert_eq!(d.code, "E0314");
        let big = BTreeMap::from([("N".to_string(), i64::MAX)]);
        let i2 = info(DType::F32, vec![Dim::sym("N"), Dim::sym("N")]);
        assert_eq!(
            concrete_shape("T", &i2, &big).expect_err("big").code,
            "E0314"
        );
    }

    #[test]
    fn output_names_cannot_escape_the_directory() {
        assert_eq!(output_file_name("Y"), "Y");
        assert_eq!(output_file_name("../etc/x"), "_.._etc_x");
        assert_eq!(output_file_name(""), "_");
    }

    #[test]
    fn cuda_needs_a_gpu_driver_and_nvrtc() {
        assert_eq!(check_device(Device::Reference), Ok(None));
        // A GPU machine with NVRTC gets its device; any other gets E0400, a user error.
        if let Err(e) = check_device(Device::Cuda) {
            assert_eq!(e.diagnostics.first_code(), "E0400");
            assert!(!e.internal);
        }
    }

    #[test]
    fn evaluator_outputs_are_checked() {
        let g = graph();
        let b = BTreeMap::from([("M".to_string(), 2)]);
        let good = Tensor::from_f64(DType::F16, vec![2, 3], &[0.0; 6]);
        let outs = BTreeMap::from([("Y".to_string(), good)]);
        assert!(check_outputs(&g, &outs, &b).is_ok());
        let bad = Tensor::from_f64(DType::F32, vec![2, 3], &[0.0; 6]);
        let outs = BTreeMap::from([("Y".to_string(), bad)]);
        let e = check_outputs(&g, &outs, &b).expect_err("dtype");
        assert!(e.internal);
        assert_eq!(e.diagnostics.first_code(), "E0316");
        let e = check_outputs(&g, &BTreeMap::new(), &b).expect_err("missing");
        assert_eq!(e.diagnostics.first_code(), "E0315");
    }

    #[test]
    fn missing_evaluator_output_is_internal() {
        let dir = temp_dir("out");
        let e = write_outputs(&graph(), &BTreeMap::new(), &dir).expect_err("no outputs");
        assert!(e.internal);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
