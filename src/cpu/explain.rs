//! `optimize --target cpu --explain`: what the native backend makes of each kernel — its loop
//! form, what the emitter chose inside it ([`super::emit::EmittedRegion::notes`]), the register
//! tile of its GEMM on this ISA, and the CPU roofline's time ([`super::calibrate`]) with what
//! bounds it — in place of the GPU plan lines of [`crate::optimize::explain::render`].

use super::plan::{KernelPlan, NativePlan, Roofline};
use super::Isa;
use crate::ir::region::program::RegionProgram;
use crate::ir::region::Region;
use crate::optimize::explain::TargetExplain;
use std::collections::BTreeMap;

/// The CPU account of `plan` (the plan of the program emitted from `p`).
pub fn explain(plan: &NativePlan, p: &RegionProgram) -> TargetExplain {
    let regions = p.regions();
    let mut kernels = BTreeMap::new();
    for (k, r) in plan.kernels.iter().zip(regions) {
        let lines = kernel_lines(k, r, plan.isa, plan.threads);
        kernels.insert(k.kernel.clone(), lines);
    }
    let c = &plan.cost_params;
    let header = format!(
        "{} kernel(s) for cpu ({}, {} thread(s)); predicted {:.3} ms by the CPU roofline ({:.1} \
         GB/s, {:.1} GFLOP/s per thread, {:.2} ns per transcendental, {:.0} µs per kernel)",
        plan.kernels.len(),
        plan.isa.name(),
        plan.threads,
        plan.total_ms(),
        c.bandwidth_gbs,
        c.gflops_per_thread,
        c.transcendental_ns,
        c.overhead_us
    );
    TargetExplain { header, kernels }
}

/// The lines of one kernel: form, emitted choices, predicted time.
fn kernel_lines(k: &KernelPlan, r: &Region, isa: Isa, threads: usize) -> Vec<String> {
    let mut lines = vec![format!("form: {}", describe_form(&k.form, r))];
    for n in &k.notes {
        if n.starts_with("packed GEMM") {
            lines.push(format!("emits: {n} ({})", gemm_tile(isa)));
        } else {
            lines.push(format!("emits: {n}"));
        }
    }
    lines.push(match &k.roofline {
        Some(f) => predicted(f, threads),
        None => "predicted: not priced (the work analysis does not cover this region)".into(),
    });
    lines
}

/// `rows(i,j)` or `flat` in words.
fn describe_form(form: &str, r: &Region) -> String {
    match form.strip_prefix("rows(").and_then(|f| f.strip_suffix(')')) {
        Some(outer) => {
            let inner: Vec<&str> = r
                .iters
                .iter()
                .map(|i| i.name.as_str())
                .filter(|n| !outer.split(',').any(|o| o == *n))
                .collect();
            format!(
                "{form}: the points of [{outer}] shared among the threads (omp for), per point \
                 SIMD loops over [{}]",
                inner.join(", ")
            )
        }
        None if form == "gemm" => format!(
            "{form}: the contraction's work items (column blocks by row groups) shared among \
             the threads, the rest of the region on each item's block"
        ),
        None => format!(
            "{form}: each value a whole array, its loop nest parallel over its outermost iter"
        ),
    }
}

/// The GEMM register tile `gemm.h` compiles to on `isa` with this process's flags.
fn gemm_tile(isa: Isa) -> &'static str {
    let wide = super::build::wide_gemm(isa, super::build::fma_enabled());
    match isa {
        Isa::Avx512 if wide => "8×32 fp32 tile in 16 zmm accumulators",
        Isa::Avx512 => "8×16 fp32 tile in 16 ymm accumulators",
        Isa::Avx2Fma => "6×16 fp32 tile in 12 ymm accumulators",
        Isa::Scalar => "4×16 fp32 tile in 128-bit vectors",
    }
}

/// `predicted: T ms, <bound>-bound: …` from the roofline's terms.
fn predicted(f: &Roofline, threads: usize) -> String {
    let bound = if f.compute_bound() {
        "compute"
    } else {
        "memory"
    };
    format!(
        "predicted: {:.3} ms on {threads} thread(s), {bound}-bound (compute {:.3} ms, memory \
         {:.3} ms, overhead {:.3} ms); {:.4e} FLOP, {:.4e} transcendental(s), {:.4e} B",
        f.predicted_ms,
        f.compute_ms,
        f.memory_ms,
        f.overhead_ms,
        f.flops,
        f.transcendentals,
        f.bytes
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_predicted_line_prints_the_plans_roofline() {
        let r = Roofline {
            predicted_ms: 1.25,
            compute_ms: 0.9,
            memory_ms: 0.2,
            overhead_ms: 0.35,
            flops: 2e9,
            transcendentals: 0.0,
            bytes: 1e6,
        };
        let line = predicted(&r, 2);
        assert!(
            line.starts_with("predicted: 1.250 ms on 2 thread(s), compute-bound"),
            "{line}"
        );
        assert!(
            line.contains("memory 0.200 ms, overhead 0.350 ms"),
            "{line}"
        );
        let m = Roofline {
            memory_ms: 1.0,
            ..r
        };
        assert!(predicted(&m, 2).contains("memory-bound"));
    }
}
