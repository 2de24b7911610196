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
//! `--device cuda` (E0400–E0405) lives in `crate::pipeline::cuda`; compiling and executing the
//! program, in [`crate::pipeline::execute`].

// A `Diagnostic` is the project's user-facing error (crate::diag); it is large by design and
// returned only on cold failure paths, so boxing it would only add noise.
#![allow(clippy::result_large_err)]

use crate::cuda::{DeviceInfo, Timings};
use crate::diag::codes;
use crate::diag::{Diagnostic, Location};
use crate::ir::dim::{fmt_shape, Dim};
use crate::ir::dtype::DType;
use crate::ir::frontend::{self, Graph, TensorInfo};
use crate::npy;
/// Lowering and verification live in [`crate::pipeline`]; re-exported here for library users.
pub use crate::pipeline::lower_and_verify;
use crate::tensor::Tensor;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub use crate::diag::Failure;

mod inputs;
mod outputs;
mod random;
mod timing;
/// Compiling and executing the program live in [`crate::pipeline`]; re-exported here.
pub use crate::pipeline::{
    bind_derived, check_cuda, check_device_memory, cuda_failure, evaluate_cuda, evaluate_cuda_plan,
    evaluate_optimized, PreparedInputs,
};
use crate::pipeline::{ExecuteOptions, Executor};
use inputs::tensor_info;
pub use inputs::{
    check_input_names, check_shapes, check_static_shapes, concrete_shape, missing_inputs,
    prepare_inputs, prepare_inputs_budgeted,
};
use outputs::missing_output;
pub use outputs::{output_file_name, write_outputs};
pub use random::{gather_index_bounds, random_inputs, random_tensor, try_random_tensor};
pub use timing::{timing_json, write_timing};

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
    /// `--arch` (`cuda` only): compile for this architecture instead of the GPU's own (an older
    /// one runs as PTX the driver compiles, e.g. the sm80 kernels on an H100).
    pub arch: Option<crate::target::Arch>,
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

/// Runs `dlc-egg run` end to end and returns the outputs written, in signature order.
pub fn run(opts: &RunOptions) -> Result<Vec<WrittenOutput>, Failure> {
    run_report(opts).map(|r| r.outputs)
}

/// [`run`], also returning the timings of `--device cuda --repeat N`.
pub fn run_report(opts: &RunOptions) -> Result<RunReport, Failure> {
    let device = target_device(opts)?;
    let graph = crate::pipeline::load_file(&opts.graph)?;
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
    let device = target_device(opts)?;
    run_graph_on(graph, opts, device.as_ref(), graph_hash)
}

/// [`run`] on an already loaded graph (`opts.graph` is not read).
pub fn run_graph(graph: &Graph, opts: &RunOptions) -> Result<Vec<WrittenOutput>, Failure> {
    let device = target_device(opts)?;
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
    let mut prepared = prepare_inputs_budgeted(
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
    let executor = match device {
        Some(d) => Executor::Cuda(d.clone()),
        None if opts.device == Device::Cpu => Executor::Native {
            threads: opts.threads.unwrap_or_else(crate::cpu::default_threads),
        },
        None if opts.optimized => Executor::Playback,
        None => Executor::Reference,
    };
    let exec = ExecuteOptions {
        graph_hash,
        plan_cache: opts.plan_cache.as_deref(),
        repeat: opts.repeat,
    };
    let executed = crate::pipeline::execute(graph, &prog, &mut prepared, &executor, &exec)?;
    let outputs = executed.outputs;
    check_outputs(graph, &outputs, &prepared.bindings)?;
    let written = write_outputs(graph, &outputs, &opts.out_dir)?;
    let timings = match executed.timings {
        Some(t) => {
            let path = write_timing(&opts.out_dir, opts.repeat, &t)?;
            Some((t, path))
        }
        None => None,
    };
    Ok(RunReport {
        outputs: written,
        timings,
        plan_cache: executed.plan_cache,
    })
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
                    codes::OUTPUT_MISMATCH,
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

/// [`check_device`] with `opts.arch` as the architecture compiled for (E0400 when the GPU cannot
/// run it).
fn target_device(opts: &RunOptions) -> Result<Option<DeviceInfo>, Failure> {
    let mut device = check_device(opts.device)?;
    if let (Some(d), Some(wanted)) = (device.as_mut(), opts.arch) {
        d.arch = crate::cuda::compile_arch(d, Some(wanted)).map_err(cuda_failure)?;
    }
    Ok(device)
}

/// For `cuda`, the GPU the program will run on; `E0400 DeviceUnavailable` (saying whether the
/// driver library, the GPU or NVRTC is missing) when there is none.
pub fn check_device(device: Device) -> Result<Option<DeviceInfo>, Failure> {
    match device {
        Device::Reference | Device::Cpu => Ok(None),
        Device::Cuda => check_cuda().map(Some),
    }
}

#[cfg(test)]
mod tests;
