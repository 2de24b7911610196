//! `dlc-egg optimize --target cpu -o DIR`: the optimized program as C for the native CPU backend
//! (`dlc_egg::cpu`): `DIR/kernels.c` (the prelude and one function per region) and
//! `DIR/manifest.json` (ISA, compile flags, symbol table, steps and kernels).

use clap::ValueEnum;
use dlc_egg::cpu::plan::NativePlan;
use dlc_egg::cpu::program::NativeProgram;
use dlc_egg::diag::codes;
use dlc_egg::diag::{Diagnostic, Location};
use dlc_egg::ir::region::program::RegionProgram;
use dlc_egg::run::Failure;
use std::io::Write as _;
use std::path::Path;

/// `optimize --target`: what `-o DIR` generates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TargetArg {
    /// CUDA for the GPU of --arch.
    Cuda,
    /// C for the native CPU backend (the ISA of this machine).
    Cpu,
}

/// The native program of `p` and its plan (`optimize --target cpu`): emitted as `run --device
/// cpu` emits it (contractions over the graph's `param` inputs keeping their packed weights),
/// at the default thread count, priced by the cost parameters in effect (`--plan-cache`'s
/// calibration, else the default cache's), sizes bound by the graph's symbols. `-o`'s manifest,
/// `--explain` and `--dump plan` all print this one plan.
pub fn native_plan(
    graph: &dlc_egg::ir::frontend::Graph,
    p: &RegionProgram,
    plan_cache: Option<&Path>,
) -> Result<(NativeProgram, NativePlan), Failure> {
    use dlc_egg::cpu;
    let prog = cpu::program::emit_program_with_params(p, &cpu::exec::param_inputs(graph))?;
    let params = cpu::calibrate::CpuCostParams::load(&cpu::build::cache_dir(plan_cache))?;
    let plan = NativePlan::of(
        &prog,
        p,
        cpu::Isa::detect(),
        &params,
        cpu::default_threads(),
        &graph.symbols,
    );
    Ok((prog, plan))
}

/// Writes `kernels.c` and `manifest.json` of `prog` (emitted from `p`, planned as `plan`) into
/// `dir`: the C `run --device cpu` compiles.
pub fn write_native(
    dir: &Path,
    p: &RegionProgram,
    (prog, plan): (&NativeProgram, &NativePlan),
) -> Result<(), Failure> {
    let manifest = serde_json::to_string_pretty(&prog.manifest(p, plan)).unwrap_or_default();
    let failed = |e: std::io::Error| {
        Failure::user(Diagnostic::error(
            codes::OUTPUT_WRITE_FAILED,
            Location::Argument {
                argument: format!("-o {}", dir.display()),
            },
            format!("cannot write the generated C: {e}"),
            "check that the directory can be created and written",
        ))
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    let c = dir.join("kernels.c");
    let m = dir.join("manifest.json");
    std::fs::write(&c, &prog.source).map_err(failed)?;
    std::fs::write(&m, manifest + "\n").map_err(failed)?;
    let _ = writeln!(
        std::io::stderr().lock(),
        "wrote {} kernel(s) for cpu ({}): {}, {}",
        prog.kernels.len(),
        plan.isa.name(),
        c.display(),
        m.display()
    );
    Ok(())
}
