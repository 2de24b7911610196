//! The native program's plan: per kernel, the loop form and what the emitter chose inside it
//! ([`super::emit::EmittedRegion::notes`]) with the CPU roofline's prediction and its terms —
//! computed once ([`NativePlan::of`]) and printed by every view of it: `optimize --target cpu
//! --explain` ([`super::explain`]), `--dump plan` and the kernels of `manifest.json`
//! ([`super::program::NativeProgram::manifest`]), so that the three cannot disagree.

use super::calibrate::{CpuCostParams, KernelFeatures};
use super::program::NativeProgram;
use super::Isa;
use crate::ir::region::program::RegionProgram;
use serde::Serialize;
use std::collections::BTreeMap;

/// The roofline's account of one kernel ([`CpuCostParams::terms_ms`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Roofline {
    /// The prediction: overhead plus the larger of compute and memory, ms.
    pub predicted_ms: f64,
    /// Arithmetic and transcendental time, ms.
    pub compute_ms: f64,
    /// Memory time, ms.
    pub memory_ms: f64,
    /// Per-kernel overhead, ms.
    pub overhead_ms: f64,
    /// Arithmetic operations (an FMA counts 2).
    pub flops: f64,
    /// Transcendental operations.
    pub transcendentals: f64,
    /// Bytes read and written.
    pub bytes: f64,
}

impl Roofline {
    /// Whether the compute term bounds the kernel (else memory).
    pub fn compute_bound(&self) -> bool {
        self.compute_ms >= self.memory_ms
    }
}

/// One kernel of the plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelPlan {
    /// The region's name.
    pub kernel: String,
    /// The C function.
    pub function: String,
    /// Loop organization (`rows(m)`, `flat` or `gemm`).
    pub form: String,
    /// What the emitter chose inside that form.
    pub notes: Vec<String>,
    /// The roofline's prediction; `None` where the work analysis does not cover the region.
    pub roofline: Option<Roofline>,
}

/// The plan of a whole native program.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NativePlan {
    /// The ISA the C is compiled for (serialized as its name).
    #[serde(serialize_with = "isa_name")]
    pub isa: Isa,
    /// Threads the prediction assumes.
    pub threads: usize,
    /// The cost model's parameters.
    pub cost_params: CpuCostParams,
    /// Kernels in step order.
    pub kernels: Vec<KernelPlan>,
}

impl NativePlan {
    /// The plan of `prog` (emitted from `p`) at `threads` threads on `isa`, priced by `params`
    /// with sizes bound by `bindings` (unbound symbols sized 1024, as extraction sizes them).
    pub fn of(
        prog: &NativeProgram,
        p: &RegionProgram,
        isa: Isa,
        params: &CpuCostParams,
        threads: usize,
        bindings: &BTreeMap<String, i64>,
    ) -> NativePlan {
        let regions = p.regions();
        let kernels = prog
            .kernels
            .iter()
            .zip(regions)
            .map(|(k, r)| KernelPlan {
                kernel: k.region.clone(),
                function: k.function.clone(),
                form: k.form.clone(),
                notes: k.notes.clone(),
                roofline: KernelFeatures::of(r, bindings).map(|f| roofline(&f, params, threads)),
            })
            .collect();
        NativePlan {
            isa,
            threads,
            cost_params: *params,
            kernels,
        }
    }

    /// The predicted time of the whole program (the priced kernels), ms.
    pub fn total_ms(&self) -> f64 {
        self.kernels
            .iter()
            .filter_map(|k| k.roofline.map(|r| r.predicted_ms))
            .sum()
    }

    /// `--dump plan` with `--target cpu`: `{"target": "cpu", "isa", "threads", "cost_params",
    /// "predicted_ms", "kernels": [{"kernel", "function", "form", "notes", "roofline"}]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("target".into(), "cpu".into());
            o.insert("predicted_ms".into(), self.total_ms().into());
        }
        v
    }
}

fn isa_name<S: serde::Serializer>(isa: &Isa, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(isa.name())
}

fn roofline(f: &KernelFeatures, params: &CpuCostParams, threads: usize) -> Roofline {
    let (compute_ms, memory_ms, overhead_ms) = params.terms_ms(f, threads);
    Roofline {
        predicted_ms: params.predict_ms(f, threads),
        compute_ms,
        memory_ms,
        overhead_ms,
        flops: f.flops,
        transcendentals: f.transcendentals,
        bytes: f.bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_roofline_terms_add_up_to_the_prediction() {
        let params = CpuCostParams::default();
        let f = KernelFeatures {
            flops: 2e9,
            transcendentals: 1e6,
            bytes: 1e6,
        };
        let r = roofline(&f, &params, 2);
        assert_eq!(r.predicted_ms, params.predict_ms(&f, 2));
        assert_eq!(
            r.predicted_ms,
            r.overhead_ms + r.compute_ms.max(r.memory_ms)
        );
        assert!(r.compute_bound());
        let g = KernelFeatures {
            flops: 1.0,
            transcendentals: 0.0,
            bytes: 1e9,
        };
        assert!(!roofline(&g, &params, 2).compute_bound());
    }
}
