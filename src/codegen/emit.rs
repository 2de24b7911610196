//! A whole optimized program → `kernels.cu` + [`Manifest`]: one kernel per region, built by the
//! template its plan names (`templates`), verified (`gpu::verify`) and rendered — except that an
//! attention pair (`crate::cost::program::find_pairs`: scores + softmax into a deferred buffer,
//! then its product with `V`) is one `attention` kernel, launched at the second region's step;
//! the deferred buffer stays declared in the manifest's `buffers` but is never written or read.

use super::gpu::{self, Kernel};
use super::manifest::{BufferDecl, BufferRole, KernelArg, KernelLaunch, Manifest, ManifestStep};
use super::scalar::Emitter;
use super::templates;
use super::{CodegenError, Emitted, Generated, HEADER_NAME};
use crate::ir::region::program::{RegionProgram, Step};
use crate::ir::region::{Region, Size};
use crate::plan::priced::PlanChoice;
pub use crate::plan::priced::PlannedKernel;
use crate::plan::space::{Algo, GemvBlock, Knobs};
use crate::plan::work::Shape;
use crate::target::Target;
use std::collections::BTreeSet;

/// One emitted kernel: its GPU IR, the plan it implements, the program step it launches at and
/// its arguments (buffers, then symbols).
#[derive(Clone, Debug)]
pub struct EmittedKernel {
    /// The kernel in the GPU dialect (before rendering to CUDA C).
    pub kernel: Kernel,
    /// The plan it implements (template, knobs, predicted time).
    pub choice: PlanChoice,
    /// Index of the region program step it launches at.
    pub step: usize,
    /// Its launch arguments: buffers read, buffers written, then symbols.
    pub args: Vec<KernelArg>,
}

/// A kernel's arguments: `inputs` read, `outputs` written, then the symbols.
fn launch_args<'a>(
    inputs: impl Iterator<Item = &'a str>,
    outputs: impl Iterator<Item = &'a str>,
    symbols: &BTreeSet<String>,
) -> Vec<KernelArg> {
    let buffer = |name: &str, write| KernelArg::Buffer {
        name: name.to_string(),
        write,
    };
    inputs
        .map(|n| buffer(n, false))
        .chain(outputs.map(|n| buffer(n, true)))
        .chain(
            symbols
                .iter()
                .map(|name| KernelArg::Symbol { name: name.clone() }),
        )
        .collect()
}

/// `k` verified for `target` (`name` says whose kernel it is).
fn verified(k: Kernel, name: &str, target: &Target) -> Result<Kernel, CodegenError> {
    gpu::verify::verify(&k, target).map_err(|e| CodegenError::Unsupported {
        kernel: name.to_string(),
        why: format!("GPU IR does not verify: {e}"),
    })?;
    Ok(k)
}

/// The error of a plan the region's template cannot emit.
fn not_emittable(r: &Region, choice: &PlanChoice, why: &str) -> CodegenError {
    CodegenError::PlanNotEmittable {
        kernel: r.name.clone(),
        plan: choice.best.plan.summary(),
        why: why.to_string(),
    }
}

/// Builds the GPU IR kernel of `r` from its chosen plan: exactly the template and knobs the
/// plan names. A plan the template cannot emit is [`CodegenError::PlanNotEmittable`]
/// (`choose_plan` only admits emittable plans, so this is an internal error).
pub fn kernel_of(r: &Region, choice: &PlanChoice, target: &Target) -> Result<Kernel, CodegenError> {
    let arch = target.arch;
    if templates::scan::scan_let(r).is_some() {
        let Knobs::Elementwise { block, items, .. } = choice.best.knobs else {
            return Err(CodegenError::Unsupported {
                kernel: r.name.clone(),
                why: "a scan region's plan is not a scan plan".into(),
            });
        };
        // Capped at the plan's registers: a scan whose per-point epilogue folds rows (bert2's
        // embedding sum and layer norm fused behind its position-id scan) took 56 registers
        // against the 44 priced.
        let k = capped_at_plan(
            templates::scan::build(r, arch, block as u32, items as u32)?,
            choice,
        );
        return verified(k, &r.name, target);
    }
    let width = choice.best.plan.vectorize.width;
    let k = match choice.best.knobs {
        Knobs::Reduction {
            threads_per_row,
            rows_per_block,
            ..
        } => {
            let (threads, rows) = (threads_per_row as u32, rows_per_block as u32);
            if templates::row::cooperative(r).is_some() {
                templates::row::build(r, arch, threads, rows, width)?
            } else if templates::reduce::plain(r).is_some() {
                templates::reduce::build(r, arch, threads, rows, width)?
            } else {
                return Err(not_emittable(
                    r,
                    choice,
                    "neither the row nor the reduce template accepts the region",
                ));
            }
        }
        Knobs::Elementwise { block, items, .. } => {
            templates::pointwise::build(r, arch, block as u32, items as u32, width)?
        }
        Knobs::Contraction {
            algo,
            bm,
            bn,
            bk,
            warps_m,
            warps_n,
            stages,
            async_,
            splits,
            ..
        } => {
            let mut em = Emitter::new(r, "")?;
            let Some(v) = templates::contraction::view(r, &choice.work, &em) else {
                return Err(not_emittable(r, choice, "the region has no GEMM view"));
            };
            let tensor_cores =
                matches!(&choice.work.shape, Shape::Contraction(g) if g.tensor_cores);
            match algo {
                _ if splits > 1 && !matches!(algo, Algo::Simt | Algo::MmaSync) => {
                    return Err(not_emittable(
                        r,
                        choice,
                        "only the SIMT and mma_sync templates split K",
                    ));
                }
                Algo::MmaSync => {
                    let dtype = templates::contraction_mma::mma_dtype(r, &v)
                        .filter(|_| tensor_cores)
                        .ok_or_else(|| {
                            not_emittable(r, choice, "the operands are not both fp16 or bf16")
                        })?;
                    templates::contraction_mma::build(
                        r,
                        &mut em,
                        &v,
                        arch,
                        dtype,
                        templates::contraction_mma::MmaPlan {
                            tile: [bm, bn, bk],
                            warps: [warps_m, warps_n],
                            stages: u64::from(stages),
                            async_,
                            splits,
                        },
                    )?
                }
                Algo::Gemv => {
                    let (bm, block) = GemvBlock::of(&choice.best.knobs).ok_or_else(|| {
                        not_emittable(r, choice, "the GEMV knobs name no block shape")
                    })?;
                    templates::gemv::build(r, &mut em, &v, arch, bm, block)?
                }
                // Capped at the plan's registers (`plan::regs::simt`): left to the launch
                // bounds, ptxas may take every register they allow (a straight-line single
                // k-step), past the occupancy the plan priced.
                Algo::Simt => capped_at_plan(
                    templates::contraction_simt::build(
                        r,
                        &mut em,
                        &v,
                        arch,
                        [bm, bn, bk.min(32)],
                        warps_m * warps_n * 32,
                        splits,
                    )?,
                    choice,
                ),
                Algo::Wgmma => {
                    let dtype = templates::contraction_mma::mma_dtype(r, &v)
                        .filter(|_| tensor_cores)
                        .ok_or_else(|| {
                            not_emittable(r, choice, "the operands are not both fp16 or bf16")
                        })?;
                    templates::sm90::build(
                        r,
                        &mut em,
                        &v,
                        arch,
                        dtype,
                        templates::sm90::Sm90Plan {
                            tile: [bm, bn, bk],
                            consumers: (warps_m * warps_n / 4).max(1),
                            stages: u64::from(stages),
                        },
                    )?
                }
            }
        }
    };
    verified(k, &r.name, target)
}

/// The workspace buffers of `k` (its [`gpu::ParamKind::Workspace`] parameters, in order),
/// named `{kernel}_{parameter}`.
pub fn workspace_buffers(k: &Kernel) -> Vec<BufferDecl> {
    k.params
        .iter()
        .filter_map(|p| {
            let ws = p.workspace.as_ref()?;
            let dtype = match p.ty {
                gpu::CType::I32 => crate::ir::dtype::DType::I32,
                _ => crate::ir::dtype::DType::F32,
            };
            Some(BufferDecl {
                name: format!("{}_{}", k.name, p.name),
                dtype,
                shape: vec![ws.elems.clone()],
                role: BufferRole::Workspace { zeroed: ws.zeroed },
            })
        })
        .collect()
}

/// Passes `k`'s workspace buffers ([`workspace_buffers`]) in `args`, after its other buffers
/// and before its symbols (the order of `k`'s parameters).
pub fn splice_workspace_args(args: &mut Vec<KernelArg>, k: &Kernel) {
    let at = args
        .iter()
        .position(|a| matches!(a, KernelArg::Symbol { .. }))
        .unwrap_or(args.len());
    let ws = workspace_buffers(k).into_iter().map(|b| KernelArg::Buffer {
        name: b.name,
        write: true,
    });
    args.splice(at..at, ws);
}

/// `k` with ptxas capped at the registers per thread its plan priced (`__maxnreg__`), for the
/// templates whose register use the launch bounds alone do not hold to the plan's occupancy
/// (the scan and the SIMT contraction; the others' plans price what their launch bounds give).
fn capped_at_plan(mut k: Kernel, choice: &PlanChoice) -> Kernel {
    k.max_regs = Some(choice.best.resources.regs_per_thread.min(255));
    k
}

/// Every kernel of `planned` (the plans of `program`), in order, each built exactly as planned.
pub fn kernels(
    program: &RegionProgram,
    planned: &[PlannedKernel],
    target: &Target,
) -> Result<Vec<EmittedKernel>, CodegenError> {
    let mut out = Vec::new();
    for pk in planned {
        let choice = pk
            .choice
            .as_ref()
            .map_err(|why| CodegenError::Unsupported {
                kernel: pk.name.clone(),
                why: format!("no plan: {why}"),
            })?;
        let ek = match (pk.fused_first, program.steps.get(pk.step)) {
            (Some(f), _) => attention_kernel(program, f, pk.step, choice, target)?,
            (None, Some(Step::Region(r))) => {
                let kernel = kernel_of(r, choice, target)?;
                let mut args = launch_args(
                    r.inputs.iter().map(|i| i.name.as_str()),
                    r.outputs.iter().map(|o| o.name.as_str()),
                    &templates::symbols(r),
                );
                splice_workspace_args(&mut args, &kernel);
                args.extend(templates::sm90::tensor_map_args(r, &kernel));
                EmittedKernel {
                    kernel,
                    choice: choice.clone(),
                    step: pk.step,
                    args,
                }
            }
            (None, _) => {
                return Err(CodegenError::Unsupported {
                    kernel: pk.name.clone(),
                    why: format!("step {} is not a region", pk.step),
                })
            }
        };
        out.push(ek);
    }
    Ok(out)
}

/// `kernels.cu` and its manifest for `program` planned as `planned`, with the kernels' GPU IR.
pub fn emit_planned(
    program: &RegionProgram,
    planned: &[PlannedKernel],
    target: &Target,
) -> Result<Generated, CodegenError> {
    let ks = kernels(program, planned, target)?;
    let mut source = format!(
        "// Generated by dlc-egg {} for {} ({}). Do not edit.\n#include \"{HEADER_NAME}\"\n\n{}\n",
        env!("CARGO_PKG_VERSION"),
        target.arch.name(),
        target.name,
        super::cexpr::PRELUDE
    );
    let mut buffers: Vec<BufferDecl> = program
        .inputs
        .iter()
        .map(|b| BufferDecl {
            name: b.name.clone(),
            dtype: b.dtype,
            shape: b.shape.iter().cloned().map(Size).collect(),
            role: BufferRole::Input,
        })
        .collect();
    let mut symbols: BTreeSet<String> = BTreeSet::new();
    for b in &program.inputs {
        for d in &b.shape {
            symbols.extend(d.symbols());
        }
    }
    let mut steps = Vec::new();
    let mut next = ks.iter().peekable();
    for (i, s) in program.steps.iter().enumerate() {
        match s {
            Step::Region(r) => {
                // Every region's outputs are buffers; the first region of an attention pair
                // launches nothing (its deferred buffer is never written or read), the second
                // launches the fused kernel.
                for o in &r.outputs {
                    buffers.push(BufferDecl {
                        name: o.name.clone(),
                        dtype: o.dtype,
                        shape: o.memref.shape.clone(),
                        role: BufferRole::Kernel,
                    });
                }
                let Some(ek) = next.next_if(|k| k.step == i) else {
                    continue;
                };
                source.push_str(&gpu::render::kernel(&ek.kernel));
                source.push('\n');
                symbols.extend(ek.args.iter().filter_map(|a| match a {
                    KernelArg::Symbol { name } => Some(name.clone()),
                    KernelArg::Buffer { .. } | KernelArg::TensorMap { .. } => None,
                }));
                let k = &ek.kernel;
                buffers.extend(workspace_buffers(k));
                steps.push(ManifestStep::Launch(KernelLaunch {
                    kernel: k.name.clone(),
                    template: k.template.clone(),
                    args: ek.args.clone(),
                    grid: k.launch.grid.clone(),
                    block: k.launch.block,
                    dyn_smem_bytes: k.launch.dyn_smem_bytes,
                    plan: ek.choice.best.plan.clone(),
                    predicted_us: ek.choice.best.time.micros(),
                }));
            }
            Step::Alias {
                name,
                of,
                dtype,
                shape,
            } => {
                buffers.push(BufferDecl {
                    name: name.clone(),
                    dtype: *dtype,
                    shape: shape.iter().cloned().map(Size).collect(),
                    role: BufferRole::Alias { of: of.clone() },
                });
                steps.push(ManifestStep::Alias {
                    name: name.clone(),
                    of: of.clone(),
                });
            }
        }
    }
    let emitted = Emitted {
        source,
        manifest: Manifest {
            format: super::manifest::FORMAT.into(),
            arch: target.arch,
            source: "kernels.cu".into(),
            header: HEADER_NAME.into(),
            symbols: symbols.into_iter().collect(),
            buffers,
            steps,
            outputs: program.outputs.clone(),
        },
    };
    Ok(Generated {
        kernels: ks,
        emitted,
        arch: target.arch,
    })
}

/// The fused attention kernel of the pair at steps `f` and `s`, built exactly as `choice` (its
/// planned knobs: `cost::program::plan_program` chose them once) says.
fn attention_kernel(
    program: &RegionProgram,
    f: usize,
    s: usize,
    choice: &PlanChoice,
    target: &Target,
) -> Result<EmittedKernel, CodegenError> {
    let p =
        templates::attention::pair_at(program, f, s).ok_or_else(|| CodegenError::Unsupported {
            kernel: format!("step {f}"),
            why: "not an attention pair".into(),
        })?;
    let plan = templates::attention::AttentionPlan::of_priced(&choice.best).ok_or_else(|| {
        CodegenError::PlanNotEmittable {
            kernel: format!("{}_{}", p.first.name, p.second.name),
            plan: choice.best.plan.summary(),
            why: "the attention plan has no attention knobs".into(),
        }
    })?;
    let kernel = templates::attention::build(&p, &plan, target.arch)?;
    let name = kernel.name.clone();
    let kernel = verified(kernel, &name, target)?;
    let args = launch_args(
        templates::attention::inputs(&p)
            .iter()
            .map(|i| i.name.as_str()),
        p.second.outputs.iter().map(|o| o.name.as_str()),
        &templates::attention::kernel_symbols(&p),
    );
    Ok(EmittedKernel {
        kernel,
        choice: choice.clone(),
        step: s,
        args,
    })
}
