//! A whole region program as one C translation unit plus its manifest (what
//! `optimize --target cpu -o DIR` writes: `kernels.c`, `manifest.json`).

use super::emit::emit_region;
use super::plan::NativePlan;
use super::{CpuError, PRELUDE};
use crate::ir::region::program::{verify_program, RegionProgram, Step};
use std::collections::BTreeSet;

/// One kernel of the program.
#[derive(Clone, Debug, PartialEq)]
pub struct NativeKernel {
    /// The region's name.
    pub region: String,
    /// The C function.
    pub function: String,
    /// Its input buffers, then its output buffers (the order of `dlc_buf`).
    pub inputs: Vec<String>,
    /// Output buffers.
    pub outputs: Vec<String>,
    /// Loop organization (`rows(m)`, `flat` or `gemm`).
    pub form: String,
    /// What the emitter chose inside that form ([`super::emit::EmittedRegion::notes`]).
    pub notes: Vec<String>,
}

/// The generated C program.
#[derive(Clone, Debug, PartialEq)]
pub struct NativeProgram {
    /// The C source (prelude + one function per region).
    pub source: String,
    /// Kernels in step order (aliases are not kernels).
    pub kernels: Vec<NativeKernel>,
    /// The symbol table: `dlc_sym[i]` is the value of `symbols[i]`.
    pub symbols: Vec<String>,
    /// Whether some kernel keeps packed weights between runs (static buffers of the loaded
    /// library: [`super::exec::run_loaded`] runs such a program under a lock).
    pub keeps_packs: bool,
}

/// Emits `p` as C. A region the emitter cannot spell is `E0805`.
pub fn emit_program(p: &RegionProgram) -> Result<NativeProgram, CpuError> {
    emit_program_with_params(p, &BTreeSet::new())
}

/// [`emit_program`], where the graph inputs named in `params` are constant parameters
/// (weights, ONNX initializers): contraction operands that read only these (or their aliases)
/// are packed once per [`super::exec::run_loaded`] and kept for its runs.
pub fn emit_program_with_params(
    p: &RegionProgram,
    params: &BTreeSet<String>,
) -> Result<NativeProgram, CpuError> {
    verify_program(p).map_err(|e| CpuError::Codegen {
        region: "<program>".into(),
        why: e.to_string(),
    })?;
    let mut source = String::from(PRELUDE);
    let mut kernels = Vec::new();
    let mut symbols = Vec::new();
    let mut params: BTreeSet<String> = p
        .inputs
        .iter()
        .filter(|b| params.contains(&b.name))
        .map(|b| b.name.clone())
        .collect();
    for (i, s) in p.steps.iter().enumerate() {
        if let Step::Alias { name, of, .. } = s {
            if params.contains(of) {
                params.insert(name.clone());
            }
        }
        if let Step::Region(r) = s {
            let function = format!("dlc_k{i}");
            let e = emit_region(r, &function, &mut symbols, &params)?;
            source.push('\n');
            source.push_str(&e.code);
            kernels.push(NativeKernel {
                region: r.name.clone(),
                function,
                inputs: r.inputs.iter().map(|x| x.name.clone()).collect(),
                outputs: r.outputs.iter().map(|x| x.name.clone()).collect(),
                form: e.form,
                notes: e.notes,
            });
        }
    }
    Ok(NativeProgram {
        keeps_packs: source.contains(super::contraction::KEPT_PACK),
        source,
        kernels,
        symbols,
    })
}

impl NativeProgram {
    /// `manifest.json`: the ISA, the compile flags, the symbol table and every kernel with its
    /// buffers and its entry of `plan` ([`super::plan::NativePlan::of`] of this program: loop
    /// form, emitted choices, `estimate_ms` and the roofline's terms; the plan's cost parameters
    /// in `cost_params`, its thread count in `threads`); the program's steps (aliases included)
    /// in `steps`.
    pub fn manifest(&self, p: &RegionProgram, plan: &NativePlan) -> serde_json::Value {
        let kernels: Vec<serde_json::Value> = self
            .kernels
            .iter()
            .zip(&plan.kernels)
            .map(|(k, kp)| {
                serde_json::json!({
                    "region": k.region, "function": k.function, "inputs": k.inputs,
                    "outputs": k.outputs, "form": kp.form, "notes": kp.notes,
                    "estimate_ms": kp.roofline.map(|r| r.predicted_ms), "roofline": kp.roofline,
                })
            })
            .collect();
        let steps: Vec<serde_json::Value> = p
            .steps
            .iter()
            .map(|s| match s {
                Step::Region(r) => serde_json::json!({"kernel": r.name}),
                Step::Alias { name, of, .. } => serde_json::json!({"alias": name, "of": of}),
            })
            .collect();
        serde_json::json!({
            "calling_convention": "int fn(void *const *dlc_buf, const int64_t *dlc_sym, int dlc_nt): \
                dlc_buf = the kernel's inputs, then its outputs, then a pointer to the run's int64 \
                pack epoch (packed param weights are kept while it stays the same); dlc_sym = \
                values of `symbols`; dlc_nt = threads; returns 0, 1 (gather index out of range) \
                or 2 (out of memory)",
            "keeps_packs": self.keeps_packs,
            "isa": plan.isa.name(),
            "flags": super::build::base_flags(plan.isa),
            "symbols": self.symbols,
            "inputs": p.inputs,
            "outputs": p.outputs,
            "steps": steps,
            "kernels": kernels,
            "cost_params": plan.cost_params,
            "threads": plan.threads,
        })
    }
}
