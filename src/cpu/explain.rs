//! `optimize --target cpu --explain`: what the native backend makes of each kernel — its loop
//! form, what the emitter chose inside it ([`super::emit::EmittedRegion::notes`]), the register
//! tile of its GEMM on this ISA, and the CPU roofline's time ([`super::calibrate`]) with what
//! bounds it — in place of the GPU plan lines of [`crate::optimize::explain::render`].

use super::calibrate::{CpuCostParams, KernelFeatures};
use super::program::{NativeKernel, NativeProgram};
use super::Isa;
use crate::ir::region::program::{RegionProgram, Step};
use crate::ir::region::Region;
use crate::optimize::explain::TargetExplain;
use std::collections::BTreeMap;

/// The CPU account of `prog` (emitted from `p`) at `threads` threads on `isa`, sizes bound by
/// `bindings` (unbound symbols sized 1024, as extraction sizes them).
pub fn explain(
    prog: &NativeProgram,
    p: &RegionProgram,
    isa: Isa,
    params: &CpuCostParams,
    threads: usize,
    bindings: &BTreeMap<String, i64>,
) -> TargetExplain {
    let regions = p.steps.iter().filter_map(|s| match s {
        Step::Region(r) => Some(r),
        Step::Alias { .. } => None,
    });
    let mut total = 0.0;
    let mut kernels = BTreeMap::new();
    for (k, r) in prog.kernels.iter().zip(regions) {
        let features = KernelFeatures::of(r, bindings);
        if let Some(f) = &features {
            total += params.predict_ms(f, threads);
        }
        let lines = kernel_lines(k, r, isa, params, threads, features.as_ref());
        kernels.insert(k.region.clone(), lines);
    }
    let header = format!(
        "{} kernel(s) for cpu ({}, {threads} thread(s)); predicted {total:.3} ms by the CPU \
         roofline ({:.1} GB/s, {:.1} GFLOP/s per thread, {:.2} ns per transcendental, {:.0} µs \
         per kernel)",
        prog.kernels.len(),
        isa.name(),
        params.bandwidth_gbs,
        params.gflops_per_thread,
        params.transcendental_ns,
        params.overhead_us
    );
    TargetExplain { header, kernels }
}

/// The lines of one kernel: form, emitted choices, predicted time.
fn kernel_lines(
    k: &NativeKernel,
    r: &Region,
    isa: Isa,
    params: &CpuCostParams,
    threads: usize,
    features: Option<&KernelFeatures>,
) -> Vec<String> {
    let mut lines = vec![format!("form: {}", describe_form(&k.form, r))];
    for n in &k.notes {
        if n.starts_with("packed GEMM") {
            lines.push(format!("emits: {n} ({})", gemm_tile(isa)));
        } else {
            lines.push(format!("emits: {n}"));
        }
    }
    lines.push(match features {
        Some(f) => predicted(f, params, threads),
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
        Isa::Avx512 | Isa::Avx2Fma => "8×16 fp32 tile in 16 ymm accumulators",
        Isa::Scalar => "4×16 fp32 tile in 128-bit vectors",
    }
}

/// `predicted: T ms, <bound>-bound: …` from the roofline's terms.
fn predicted(f: &KernelFeatures, params: &CpuCostParams, threads: usize) -> String {
    let (compute_ms, memory_ms, overhead_ms) = params.terms_ms(f, threads);
    let bound = if compute_ms >= memory_ms {
        "compute"
    } else {
        "memory"
    };
    format!(
        "predicted: {:.3} ms on {threads} thread(s), {bound}-bound (compute {compute_ms:.3} ms, \
         memory {memory_ms:.3} ms, overhead {overhead_ms:.3} ms); {:.4e} FLOP, {:.4e} \
         transcendental(s), {:.4e} B",
        params.predict_ms(f, threads),
        f.flops,
        f.transcendentals,
        f.bytes
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_roofline_terms_add_up_to_the_prediction() {
        let params = CpuCostParams::default();
        let f = KernelFeatures {
            flops: 2e9,
            transcendentals: 0.0,
            bytes: 1e6,
        };
        let line = predicted(&f, &params, 2);
        let want = format!("predicted: {:.3} ms", params.predict_ms(&f, 2));
        assert!(line.starts_with(&want), "{line}");
        assert!(line.contains("compute-bound"), "{line}");
        let g = KernelFeatures {
            flops: 1.0,
            transcendentals: 0.0,
            bytes: 1e9,
        };
        assert!(predicted(&g, &params, 2).contains("memory-bound"));
    }
}
