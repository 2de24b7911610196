//! A library user's kernel pricer inside the real pipeline: "one op per kernel" (every fusion
//! priced out, e.g. to bisect a numerical difference kernel by kernel) changes the cover of
//! `examples/bias_gelu_residual.json` from one fused kernel to one kernel per operation; both
//! programs are checked against the reference evaluator and emitted as CUDA.
//!
//! Run: `cargo run --release --example custom_cost`.

use dlc_egg::codegen::emit_program;
use dlc_egg::cost::Time;
use dlc_egg::extract::kernels::{CostModel, KernelCost};
use dlc_egg::extract::pricing::{KernelPricer, Roofline};
use dlc_egg::ir::egraph::{TensorGraph, TensorLang};
use dlc_egg::ir::frontend::load_file;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::rules::testing::check_optimized;
use dlc_egg::run::lower_and_verify;
use std::error::Error;
use std::path::Path;

/// The roofline price plus one second per body op beyond the first: a kernel of one operation
/// always beats any fusion.
struct OneOpPerKernel;

impl KernelPricer for OneOpPerKernel {
    fn name(&self) -> &str {
        "one-op-per-kernel"
    }

    fn price(&self, eg: &TensorGraph, kernel: &TensorLang, model: &CostModel) -> KernelCost {
        let roofline = Roofline.price(eg, kernel, model);
        if roofline.is_infinite() {
            return roofline; // no region or no plan: cannot be emitted
        }
        let extra = roofline.ops.saturating_sub(1) as f64;
        KernelCost {
            time: roofline.time.plus(Time::from_secs(extra)),
            ..roofline
        }
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bias_gelu_residual.json");
    let prog = lower_and_verify(&load_file(&path)?)?;

    let fused = optimize(&prog, &OptimizeOptions::default())?;
    let split = optimize(
        &prog,
        &OptimizeOptions::default().with_pricer(OneOpPerKernel),
    )?;
    println!("roofline:          {} kernel(s)", fused.kernels.len());
    println!("one-op-per-kernel: {} kernel(s)", split.kernels.len());
    for k in &split.kernels {
        println!("  {}: {}  covers: {}", k.name, k.body, k.covers.join(", "));
    }
    if split.kernels.len() <= fused.kernels.len() {
        return Err("the pricer did not change the cover".into());
    }
    println!("report: {:?}", split.report().extraction.custom);

    for (what, o) in [("fused", &fused), ("split", &split)] {
        check_optimized(&prog, o, &Default::default(), &[0])?;
        let cuda = emit_program(o)?;
        println!(
            "{what}: matches the reference evaluator; CUDA {} lines",
            cuda.source.lines().count()
        );
    }
    Ok(())
}
