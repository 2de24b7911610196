//! Which template can emit a region, decided once when its plan space is built
//! (`crate::cost::choose_plan`) so that every plan the extractor can choose is one code
//! generation emits exactly (`crate::codegen::emit::kernel_of` has no fallback).
//!
//! A contraction runs on `mma_sync` only when the tiled GEMM view exists
//! ([`super::contraction::view`]) and both operands are fp16 or both bf16
//! ([`super::contraction_mma::mma_dtype`]), on the SIMT skeleton when only the view exists, and
//! otherwise as a pointwise kernel (one thread per output point, the reduction serial); a
//! reduction runs on the row template when [`super::row::cooperative`] accepts it, on the
//! plain-reduction template when [`super::reduce::plain`] does (priced against the pointwise
//! kernel too, `crate::cost::choose_plan`), otherwise pointwise.

use super::contraction::{self, Side};
use super::contraction_mma::{self, Staging};
use super::{reduce, row};
use crate::codegen::scalar::Emitter;
use crate::ir::region::Region;
use crate::plan::work::{Fill, KernelWork, Shape};
use crate::target::LOAD_ISSUE;

/// What code generation can emit for one region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emits {
    /// The tiled contraction templates: tensor cores (`mma_sync`) when `mma`, else SIMT;
    /// `staging` says how the tensor-core template fills each operand's tile (`[A, B]`);
    /// `wgmma`: the SM90 template ([`super::sm90`]) accepts it too.
    Contraction {
        /// Tensor cores (`mma.sync`) rather than SIMT FMAs.
        mma: bool,
        /// How each operand's tile is filled, `[A, B]`.
        staging: [Staging; 2],
        /// The SM90 wgmma template accepts the contraction too.
        wgmma: bool,
        /// The output is stored staged in 16-byte chunks ([`contraction::View::store_chunk`]),
        /// else element by element from the fragments.
        staged_store: bool,
    },
    /// The cooperative row template, loading a row at most `vec_bytes` at a time
    /// ([`row::lanes`], or the vector walk of [`row::vector_guard`] where the priced sizes
    /// take it).
    Row {
        /// The widest vector access of the row walk, bytes.
        vec_bytes: u64,
    },
    /// The plain-reduction template ([`super::reduce`]): the row template's fold per output
    /// point, one walk of the row (no output pass), loading at most `vec_bytes` at a time
    /// ([`reduce::lanes`]).
    Reduce {
        /// The widest vector access of the row walk, bytes.
        vec_bytes: u64,
    },
    /// The pointwise template (one thread per output point).
    Pointwise,
}

/// What the templates can emit for `r`, whose cost-model analysis is `work`. With
/// `attention_first`, a contraction with a row epilogue that no tiled template accepts (the
/// scores and softmax of attention) counts as the tensor-core contraction the fused attention
/// kernel runs it as (what the extractor prices: it does not see the pair; a program whose
/// pair does not fuse plans that region strictly, as the pointwise kernel it runs as).
pub fn emits(r: &Region, work: &KernelWork, attention_first: bool) -> Emits {
    match &work.shape {
        Shape::Contraction(g) => {
            let fused = Emits::Contraction {
                mma: g.tensor_cores,
                staging: [Staging::CpAsync; 2],
                wgmma: false,
                staged_store: true,
            };
            let fallback = if attention_first && g.row_extent.is_some() {
                fused
            } else {
                Emits::Pointwise
            };
            let Ok(em) = Emitter::new(r, "") else {
                return fallback;
            };
            match contraction::view(r, work, &em) {
                Some(v) => {
                    let mma = contraction_mma::mma_dtype(r, &v).is_some();
                    let staging = [
                        contraction_mma::operand_staging(r, &v, Side::A),
                        contraction_mma::operand_staging(r, &v, Side::B),
                    ];
                    let wgmma = mma && g.row_extent.is_none() && super::sm90::accepts(r, &v);
                    Emits::Contraction {
                        mma,
                        staging,
                        wgmma,
                        staged_store: v.store_chunk(r, &em).is_some(),
                    }
                }
                None => fallback,
            }
        }
        Shape::Reduction { .. } if row::cooperative(r).is_some() => {
            // The element the plan space's vector widths count (`plan::space::vector_extent`).
            let elem = work.inputs.iter().map(|i| i.elem_bytes).max().unwrap_or(4);
            let want = u32::try_from(16 / elem.max(1)).unwrap_or(1);
            Emits::Row {
                vec_bytes: u64::from(row_lanes(r, work, want)) * elem.max(1),
            }
        }
        // A compute-at region whose consumer is a plain reduction (a global pool over a
        // convolution): the threads of a consumer point split its window (scalar walk).
        Shape::ComputeAt(_) if reduce::plain(r).is_some() => Emits::Reduce {
            vec_bytes: work.out_elem_bytes.max(1),
        },
        Shape::Reduction { .. } if reduce::plain(r).is_some() => {
            let elem = work.inputs.iter().map(|i| i.elem_bytes).max().unwrap_or(4);
            let want = u32::try_from(16 / elem.max(1)).unwrap_or(1);
            Emits::Reduce {
                vec_bytes: u64::from(reduce::lanes(r, want)) * elem.max(1),
            }
        }
        _ => Emits::Pointwise,
    }
}

/// The lanes, at most `want`, of the row walk of `r` at the sizes `work` was priced at: those
/// [`row::lanes`] proves, or more where the template's run-time test on the row's length
/// ([`row::vector_guard`]) takes its vector walk at the priced innermost extent (a softmax
/// over a symbolic `sequence` priced at 1024: 4 fp32 lanes; at 1022: 2).
fn row_lanes(r: &Region, work: &KernelWork, want: u32) -> u32 {
    let proven = row::lanes(r, want);
    let mut l = want;
    while l > proven {
        if row::vector_guard(r, l).is_some_and(|g| g.holds_at(work.inner_extent)) {
            return l;
        }
        l /= 2;
    }
    proven
}

/// `work` as what will run: a contraction without tensor cores when `mma_sync` cannot emit
/// it, a contraction or reduction no tiled/row template accepts as elementwise over its
/// output points.
pub fn as_emitted(mut work: KernelWork, e: Emits) -> KernelWork {
    match (&mut work.shape, e) {
        (
            Shape::Contraction(g),
            Emits::Contraction {
                mma,
                staging,
                staged_store,
                ..
            },
        ) => {
            g.tensor_cores &= mma;
            g.staged_store = staged_store;
            g.fill = staging.map(|s| match s {
                Staging::CpAsync => Fill::CpAsync,
                Staging::CpAsyncChecked => Fill::CpAsyncChecked,
                Staging::Registers => Fill::Registers,
                Staging::Gather => Fill::Gather,
            });
        }
        (Shape::Reduction { vec_cap, .. }, Emits::Row { vec_bytes }) => {
            *vec_cap = (*vec_cap).min(vec_bytes);
        }
        (
            Shape::Reduction {
                vec_cap,
                passes,
                plain,
                ..
            },
            Emits::Reduce { vec_bytes },
        ) => {
            // One walk of the row: its reductions fold in it (`reduce::plain` admits no
            // dependent one) and the row's single output is stored once, not in a second pass.
            *vec_cap = (*vec_cap).min(vec_bytes);
            *passes = 1;
            *plain = true;
        }
        (Shape::ComputeAt(ca), Emits::Reduce { .. }) => ca.cooperative = true,
        (Shape::Contraction(_) | Shape::Reduction { .. }, Emits::Pointwise) => {
            // One thread per output point folds serially: every multiply-accumulate runs on
            // CUDA cores and every folded element is a load (mostly an L1 hit). A reduction
            // whose result is broadcast to more output points than it has (a normalization's
            // row sum under every element of the row) is folded again at each of them: the
            // analysis priced it once per point of its free iters.
            // A second contraction summed beside the main one ([`crate::plan::work::Gemm::second`])
            // folds at its output point once: its product and accumulation (which the analysis
            // left to the tiled template) and a load per folded element.
            let (second_ops, second_loads) = match &work.shape {
                Shape::Contraction(g) => (
                    2.0 * g.batch * g.m * g.n * g.k_second,
                    work.out_elems * g.k_second,
                ),
                _ => (0.0, 0.0),
            };
            let (folded, ops_once) = match &work.shape {
                Shape::Contraction(g) => (
                    2.0 * g.batch * g.m * g.n * (g.k - g.k_second),
                    g.batch * g.m * g.n,
                ),
                Shape::Reduction {
                    rows, len, passes, ..
                } => (rows * len * f64::from(*passes), *rows),
                _ => (0.0, work.out_elems),
            };
            let again = (work.out_elems / ops_once.max(1.0)).max(1.0);
            let loads = folded * again;
            // The folds repeated at the other points: a multiply-add (or an add) per element.
            let refolds = folded * (again - 1.0);
            // The other reduce lets (a normalization's row sums in the contraction's
            // epilogue), priced once per row by the analysis, are folded at every point too:
            // those along the fastest axis here, the others per thread (`cost::roofline`
            // divides them by the plan's lanes).
            let lane = work.pointwise_refolds.lane;
            work.pointwise_refolds.lane = Default::default();
            // A contraction's own product, which the analysis leaves to the template's price
            // (a multiply and an add per multiply-accumulate), and its operands' prologues (a
            // convolution input's `relu(x + b)`), which run at every multiply-accumulate, not
            // once per staged element as a tiled kernel runs them — their reads beyond the
            // operand's own (the `b`) included.
            if let Shape::Contraction(g) = &work.shape {
                let extra = g.pointwise_prologue;
                work.ops.simt += folded + extra.lane.ops + extra.lane.loads * LOAD_ISSUE;
                work.pointwise_refolds.thread.add(&extra.thread);
            }
            work.ops.simt += work.ops.tensor
                + refolds
                + lane.ops
                + second_ops
                + (loads + lane.loads + second_loads) * LOAD_ISSUE;
            work.ops.tensor = 0.0;
            work.shape = Shape::Elementwise {
                elems: work.out_elems,
            };
        }
        _ => {}
    }
    work
}
