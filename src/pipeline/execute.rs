//! The pipeline's last steps (issue 20): compile a graph through the plan cache for what runs
//! it, bind the derived constants, then execute — on the GPU, as native C on the CPU, as the
//! region program played back, or with the reference evaluator. `dlc-egg run`, the ShapeSet
//! tests and library users call [`execute`]; `run` only reads the inputs and writes the outputs.

use super::cuda::evaluate_cuda_plan;
use crate::cuda::{DeviceInfo, Timings};
use crate::diag::codes;
use crate::diag::{optimizer_bug, Diagnostics, Failure};
use crate::eval;
use crate::ir::frontend::Graph;
use crate::ir::region::program::{self, RegionProgram};
use crate::ir::tiny::Program;
use crate::optimize::OptimizeOptions;
use crate::shapes::{CacheOutcome, PlanCache};
use crate::tensor::Tensor;
use std::collections::BTreeMap;
use std::path::Path;

/// Concrete inputs of a run: symbol values and one tensor per signature input.
#[derive(Clone, Debug, PartialEq)]
pub struct PreparedInputs {
    /// Value of every symbol.
    pub bindings: BTreeMap<String, i64>,
    /// Every signature input by tensor name.
    pub tensors: BTreeMap<String, Tensor>,
}

/// What executes a graph.
#[derive(Clone, Debug, PartialEq)]
pub enum Executor {
    /// The reference evaluator on the Tiny IR (the oracle; nothing is optimized).
    Reference,
    /// The optimized region program played back on the CPU (`run --optimized`).
    Playback,
    /// The native CPU backend (`crate::cpu`) with this many threads per kernel.
    Native {
        /// Threads per kernel.
        threads: usize,
    },
    /// Generated CUDA on this GPU.
    Cuda(DeviceInfo),
}

/// How [`execute`] compiles and times.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExecuteOptions<'a> {
    /// The graph's identity in the plan cache (the hash of its file's bytes, or
    /// `crate::shapes::cache::loaded_graph_hash`).
    pub graph_hash: &'a str,
    /// `--plan-cache DIR`; `None` caches in memory only.
    pub plan_cache: Option<&'a Path>,
    /// Timed runs after a warm-up (native and CUDA); 0 runs once, untimed.
    pub repeat: u32,
}

/// What [`execute`] produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Executed {
    /// Every output of the program by tensor name.
    pub outputs: BTreeMap<String, Tensor>,
    /// With `repeat > 0` (native or CUDA): the mean times.
    pub timings: Option<Timings>,
    /// Whether the shape cluster's plan was cached (every executor but the reference).
    pub plan_cache: Option<CacheOutcome>,
}

/// Runs `graph` (lowered to `prog`) on `prepared` with `executor`: compiled through the plan
/// cache for the executor's target, the derived constants bound into `prepared`, then run.
pub fn execute(
    graph: &Graph,
    prog: &Program,
    prepared: &mut PreparedInputs,
    executor: &Executor,
    opts: &ExecuteOptions,
) -> Result<Executed, Failure> {
    let cache = match opts.plan_cache {
        Some(dir) => PlanCache::on_disk(dir),
        None => PlanCache::in_memory(),
    };
    let timed = |t: Timings| (opts.repeat > 0).then_some(t);
    let (outputs, timings, outcome) = match executor {
        Executor::Reference => {
            let outputs = eval::evaluate(prog, &prepared.bindings, &prepared.tensors)?;
            return Ok(Executed {
                outputs,
                timings: None,
                plan_cache: None,
            });
        }
        Executor::Cuda(d) => {
            let oo = OptimizeOptions {
                target: d.arch.target(),
                ..OptimizeOptions::default()
            };
            let c = cache.compile(graph, opts.graph_hash, &prepared.bindings, &oo)?;
            bind_derived(&c.plan.program, prepared)?;
            let (outputs, t) = evaluate_cuda_plan(&c, &oo, prepared, d, opts.repeat)?;
            (outputs, timed(t), c.outcome)
        }
        Executor::Native { threads } => {
            // Extraction priced by the CPU model (issue 16): the cover that runs here.
            let oo = crate::cpu::pricing::cpu_optimize_options(
                OptimizeOptions::default(),
                opts.plan_cache,
                *threads,
            )?;
            let c = cache.compile(graph, opts.graph_hash, &prepared.bindings, &oo)?;
            bind_derived(&c.plan.program, prepared)?;
            // Derived constants are parameters too (packed once like the weights).
            let mut params = crate::cpu::exec::param_inputs(graph);
            params.extend(c.plan.program.derived_inputs());
            let native = crate::cpu::exec::NativeOptions {
                threads: *threads,
                repeat: opts.repeat,
                params,
            };
            let (outputs, t) = crate::cpu::exec::evaluate_native(
                &c.plan.program,
                &c.bindings,
                &prepared.tensors,
                &native,
                opts.plan_cache,
            )?;
            (outputs, timed(t), c.outcome)
        }
        Executor::Playback => {
            let oo = OptimizeOptions::default();
            let c = cache.compile(graph, opts.graph_hash, &prepared.bindings, &oo)?;
            let outputs =
                program::evaluate_program(&c.plan.program, &c.bindings, &prepared.tensors)
                    .map_err(|d| classify_optimized_failure(prog, prepared, d))?;
            (outputs, None, c.outcome)
        }
    };
    Ok(Executed {
        outputs,
        timings,
        plan_cache: Some(outcome),
    })
}

/// Computes the derived constants of `program` (issue 23: kernels over the bound weights,
/// `RegionProgram::derived`) from `prepared`'s weights, once, before the runs, and adds them to
/// `prepared.tensors`: the compiled program reads them as inputs. A failure is a compiler bug
/// (the weights were validated).
pub fn bind_derived(program: &RegionProgram, prepared: &mut PreparedInputs) -> Result<(), Failure> {
    let derived = program::bind_derived(program, &prepared.bindings, &prepared.tensors)
        .map_err(Failure::internal)?;
    prepared.tensors.extend(derived);
    Ok(())
}

/// Optimizes `prog` and plays the extracted region program back on the CPU. Failures here are
/// compiler bugs (the inputs were already validated), so they exit with status 1.
pub fn evaluate_optimized(
    prog: &Program,
    prepared: &PreparedInputs,
) -> Result<BTreeMap<String, Tensor>, Failure> {
    let o = crate::optimize::optimize(prog, &OptimizeOptions::default())
        .map_err(|e| Failure::internal(optimizer_bug(&e.to_string())))?;
    program::evaluate_program(&o.program, &prepared.bindings, &prepared.tensors)
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
        Err(reference)
            if reference
                .0
                .iter()
                .all(|r| codes::is_eval_user_error(r.code)) =>
        {
            Failure::user(reference)
        }
        _ => Failure::internal(d),
    }
}
