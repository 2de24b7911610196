//! The cost model (seed 001 §11, seed 000 §5 and §10): a kernel's region → its work
//! ([`work`]) → the plan space of its template (`crate::plan::space`) → each surviving plan's
//! roofline time ([`roofline`]) → the fastest plan ([`choose_plan`]), whose time is the kernel's
//! [`Time`].
//!
//! Assumptions, stated once: every kernel runs alone on the whole GPU (no concurrent kernels);
//! kernels start [`crate::target::Target::launch_s`] apart; sizes of unbound symbols are
//! `CostModel::default_size`; the constants of [`roofline`] are model constants, not
//! measurements (`bench/gpu` measures when a GPU is lent).

pub mod attention;
pub mod conv90;
pub mod gemv;
pub mod model;
pub mod program;
pub mod roofline;

use crate::ir::region::Region;
use crate::plan::space::{candidates, plan_of, Algo, Candidate, Knobs, Stop};
pub use crate::plan::work;
use crate::plan::Plan;
use crate::target::Target;
pub use model::{CostModel, RegionCache};
use roofline::{estimate, Estimate};
use serde::Serialize;
use work::{analyze, KernelWork, Shape, WorkError};

pub use crate::plan::priced::{PlanChoice, Priced, Rejected, Time, KEEP_PRICED};

/// Why a kernel has no plan.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// The region's work could not be read (no template runs it).
    #[error(transparent)]
    Work(#[from] WorkError),
    #[error("every plan of the {template} template is stopped: {why}")]
    /// Every plan of the template is rejected by a STOP condition.
    NoPlan {
        /// The template (`contraction`, `reduction`, …).
        template: &'static str,
        /// The STOP condition that rejected the last candidates.
        why: String,
    },
}

/// The fastest plan of `region` on the model's target, among the plans code generation can
/// emit for it (`crate::codegen::templates::applicability`): a contraction the tiled templates
/// do not accept, or a reduction the row template does not, is priced as the pointwise kernel
/// it runs as; a tensor-core contraction none of whose operands takes `cp.async` gets only the
/// synchronous plans (what its kernel runs).
pub fn choose_plan(region: &Region, model: &CostModel) -> Result<PlanChoice, PlanError> {
    choose_plan_as(region, model, false, true)
}

/// [`choose_plan`] for the extractor, which prices kernels one by one and does not see
/// attention pairs: the scores-and-softmax region of a pair is priced as the tensor-core
/// contraction the fused kernel runs it as. Extraction prices such a kernel at this price only
/// as the first kernel of a pair it may fuse into, and at [`choose_plan`]'s otherwise
/// (`extract::own_cost`); a cover that runs it unfused is repriced (`extract::pair_check`).
pub fn choose_plan_for_extraction(
    region: &Region,
    model: &CostModel,
) -> Result<PlanChoice, PlanError> {
    choose_plan_as(region, model, true, true)
}

/// GEMM sides below this many elements (one `mma` fragment's 16) leave most of a tile empty:
/// a contraction with such a K and such an M or N is priced as the pointwise fold too.
pub const THIN_SIDE: f64 = 16.0;

/// [`choose_plan`] among the tiled templates' plans only, for a contraction they accept: what
/// the plan is without the pointwise fold a thin contraction is also priced as (for tests
/// of the tiled templates on such shapes, e.g. the tensor-core depthwise convolution).
pub fn choose_tiled_plan(region: &Region, model: &CostModel) -> Result<PlanChoice, PlanError> {
    choose_plan_as(region, model, false, false)
}

fn choose_plan_as(
    region: &Region,
    model: &CostModel,
    attention_first: bool,
    fold_too: bool,
) -> Result<PlanChoice, PlanError> {
    use crate::codegen::templates::applicability::{as_emitted, emits, Emits};
    use crate::codegen::templates::contraction_mma::Staging;
    let raw = analyze(region, model)?;
    if !crate::codegen::templates::scan::fits(region) {
        return Err(PlanError::NoPlan {
            template: "scan",
            why: "the scan template emits one scan per kernel, a let of its own".into(),
        });
    }
    let e = emits(region, &raw, attention_first);
    // The scores and softmax of an attention pair, which only the fused kernel emits: it walks
    // the keys once with an online softmax (running max and sum in registers), not once per
    // dependent reduction as a multi-pass row epilogue would.
    let online = attention_first
        && matches!(&raw.shape, Shape::Contraction(g) if g.row_extent.is_some())
        && emits(region, &raw, false) == Emits::Pointwise
        && crate::codegen::templates::attention::is_first(region);
    // A contraction whose K and one of M, N are under one MMA fragment ([`THIN_SIDE`]) fills
    // little of any tile — a depthwise convolution (N = 1, K = 9) a 64×64×32 one to 1/64 and
    // 9/32 — and may run faster as the pointwise fold (one thread per output, the taps in
    // registers). Both are priced; the faster is the plan (its knobs select the template
    // codegen emits). Only then is the work analysis kept for the second pricing.
    let thin = matches!(&raw.shape, Shape::Contraction(g)
        if g.row_extent.is_none() && g.k < THIN_SIDE && g.m.min(g.n) < THIN_SIDE);
    // A tile summing a second contraction runs on SIMT only; the pointwise fold (both sums per
    // output point) is priced too, as it was the only form before the tile summed both (a
    // 1×1 projection beside another at MobileNetV2's small sizes folds faster).
    let summed = matches!(&raw.shape, Shape::Contraction(g) if g.second.is_some());
    // A plain reduction ([`crate::codegen::templates::reduce`]) is priced as the pointwise fold too.
    let plain = matches!(e, Emits::Reduce { .. });
    // A compute-at nest that is also a pooled tile (`crate::plan::work::PoolTile`): both are
    // priced, the faster is the plan.
    let pooled = match &raw.shape {
        Shape::ComputeAt(ca) => ca.tiled.as_deref().cloned(),
        _ => None,
    };
    let fold_work = (fold_too
        && (plain || (thin || summed) && !online && matches!(e, Emits::Contraction { .. })))
    .then(|| raw.clone());
    let mut work = as_emitted(raw, e);
    if let (true, Shape::Contraction(g)) = (online, &mut work.shape) {
        g.row_passes = 1;
    }
    // When no operand takes `cp.async`, the tensor-core kernel of an asynchronous plan issues
    // none: its loads go through registers one step ahead, whatever the stages, so only the
    // synchronous plans are what it runs (priced one tile ahead, with the held registers).
    // With one operand by `cp.async` (the other register-staged or gathered) the asynchronous
    // plans stay: that operand is pipelined `stages - 1` tiles ahead. TODO(issue 15): price the
    // register-staged operand of such a mixed plan (one tile ahead, its held registers).
    let no_copy = matches!(e, Emits::Contraction { mma: true, staging, .. } if !staging.iter().any(|s| matches!(s, Staging::CpAsync | Staging::CpAsyncChecked)));
    // The SM90 template (`wgmma`) emits only the GEMMs it accepts (`templates::sm90`).
    let wgmma = matches!(e, Emits::Contraction { wgmma: true, .. });
    // A pointwise kernel (a single contraction no tiled template accepts, a convolution at
    // batch 1, or any other region) gets the widths its template emits (issue 15).
    let space = if e == Emits::Pointwise {
        emitted_candidates(region, &work, &model.target)
    } else {
        candidates(&work, &model.target)
    };
    let all = space
        .into_iter()
        .filter(|c| match c.knobs {
            Knobs::Contraction {
                algo: Algo::Wgmma, ..
            } => wgmma,
            // The GEMV template runs a GEMM view whose `M` is known to fit its rows.
            Knobs::Contraction {
                algo: Algo::Gemv,
                bm,
                ..
            } => {
                matches!(e, Emits::Contraction { .. })
                    && matches!(&work.shape, Shape::Contraction(g)
                        if crate::codegen::templates::gemv::rows_fit(region, &g.axes.m, bm))
            }
            Knobs::Contraction { async_, .. } => !(no_copy && async_),
            _ => true,
        })
        .collect();
    let mut tiled = choose_among(work, all, &model.target);
    if let Some(pw) = pooled {
        let all = candidates(&pw, &model.target);
        tiled = faster(tiled, choose_among(pw, all, &model.target));
    }
    let Some(raw) = fold_work else {
        return tiled;
    };
    let folded = as_emitted(raw, Emits::Pointwise);
    let all = emitted_candidates(region, &folded, &model.target);
    faster(tiled, choose_among(folded, all, &model.target))
}

/// The faster of two plan choices (`first` on a tie), or the one that exists.
fn faster(
    first: Result<PlanChoice, PlanError>,
    other: Result<PlanChoice, PlanError>,
) -> Result<PlanChoice, PlanError> {
    match (first, other) {
        (Ok(t), Ok(f)) if f.best.time < t.best.time => Ok(f),
        (Err(_), Ok(f)) => Ok(f),
        (t, _) => t,
    }
}

/// The plan space of `work` (the analysis of `region` as the pointwise fold of a contraction:
/// one thread per output, the taps in registers) whose vector widths are the ones its template
/// emits. The space offers a
/// pointwise kernel one width, the widest whose lanes split the innermost extent (narrower ones
/// stop at `Stop::VectorShrinks`), while the pointwise template loads a read as one vector only
/// at some widths (`templates::vector::loads_vectors`; never for the taps of a fold, which sit
/// in a reduce body). The space is built for the widest lane count, at most the space's own
/// (`plan::space::vector_cap`: 16 bytes of the narrowest input), at which some read is
/// vector-loaded and a plan of 16 output bytes or more loads 16 bytes of its narrowest
/// vector read (`templates::vector::narrowest_vector_read`: a bf16 fold with fp32 output
/// takes 8 lanes, not 4, whose bf16 loads would be 8 bytes), or for one lane: the kernel
/// always keeps its scalar plan
/// (dropping the unemitted widths alone left none, E9000 on a depthwise conv), and its plan
/// never claims vector loads the kernel lacks. Every pointwise kernel's space is built here
/// (the folds' and the others': an unfused attention's score kernel over one query, whose
/// reads run along the head axis). Other templates: the space as it is.
fn emitted_candidates(region: &Region, work: &KernelWork, target: &Target) -> Vec<Candidate> {
    if !matches!(work.shape, Shape::Elementwise { .. }) {
        return candidates(work, target);
    }
    let elem = work.out_elem_bytes.max(1);
    let widest = crate::plan::space::widest_vector_of(work) / elem;
    let mut lanes = u32::try_from(widest).unwrap_or(1);
    while lanes > 1 && !emits_lanes(region, lanes, elem) {
        lanes /= 2;
    }
    if u64::from(lanes) == widest {
        return candidates(work, target);
    }
    // The innermost extent is read only for vector widths (`plan::space`): `lanes` elements
    // make `lanes` the widest.
    let space = KernelWork {
        inner_extent: f64::from(lanes),
        ..work.clone()
    };
    candidates(&space, target)
}

/// Whether the pointwise kernel of `region` at `lanes` lanes (of `elem`-byte outputs) loads
/// some read as one vector per chunk, and, when the plan claims 16 bytes or more, 16 bytes of
/// its narrowest such read: exactly 16 when the output chunk is wider (more lanes than that
/// would only take registers).
fn emits_lanes(region: &Region, lanes: u32, elem: u64) -> bool {
    let Some(read) = crate::codegen::templates::vector::narrowest_vector_read(region, lanes) else {
        return false;
    };
    let (out, read) = (u64::from(lanes) * elem, u64::from(lanes) * read);
    match out.cmp(&16) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Equal => read >= 16,
        std::cmp::Ordering::Greater => read == 16,
    }
}

/// The fastest plan of `work` on `target` over its whole plan space (no region: no
/// applicability filter). Ties in time go to the earlier point of the grid (smaller tiles
/// first), so the choice is deterministic.
pub fn choose_plan_for(work: KernelWork, target: &Target) -> Result<PlanChoice, PlanError> {
    let all = candidates(&work, target);
    choose_among(work, all, target)
}

/// The fastest of `all`, the checked candidates of `work`.
fn choose_among(
    work: KernelWork,
    all: Vec<Candidate>,
    target: &Target,
) -> Result<PlanChoice, PlanError> {
    let space = all.len();
    let mut priced: Vec<(Time, Estimate, Candidate)> = Vec::new();
    let mut stopped: Vec<(String, usize)> = Vec::new();
    let mut stop_examples: Vec<Rejected> = Vec::new();
    for c in all {
        match &c.verdict {
            Ok(()) => {
                let e = estimate(&work, &c.knobs, &c.resources, target);
                priced.push((Time::from_secs(e.time_s), e, c));
            }
            Err(stop) => {
                let key = stop_name(stop).to_string();
                match stopped.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, n)) => *n += 1,
                    None => {
                        stopped.push((key, 1));
                        stop_examples.push(Rejected {
                            plan: plan_of(&c.knobs, &work, target).summary(),
                            reason: stop.to_string(),
                        });
                    }
                }
            }
        }
    }
    // Stable: equal times keep grid order.
    priced.sort_by_key(|(t, _, _)| *t);
    if priced.is_empty() {
        let why = stop_examples
            .iter()
            .map(|r| r.reason.clone())
            .collect::<Vec<_>>()
            .join("; ");
        return Err(PlanError::NoPlan {
            template: work.shape.template(),
            why,
        });
    }
    let mut kept = priced
        .into_iter()
        .take(1 + KEEP_PRICED)
        .map(|(time, estimate, c)| Priced {
            plan: plan_of(&c.knobs, &work, target),
            estimate,
            time,
            resources: c.resources,
            knobs: c.knobs,
        });
    let best = kept.next().expect("one plan was priced");
    let runners_up = kept.collect();
    Ok(PlanChoice {
        work,
        best,
        runners_up,
        space,
        stopped,
        stop_examples,
    })
}

/// What `--explain` and `--report` say of a kernel's plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanReport {
    /// The chosen plan.
    pub plan: Plan,
    /// The template the plan runs on.
    pub template: &'static str,
    /// Predicted time, microseconds (launch included).
    pub predicted_us: f64,
    /// Operations as executed, DRAM bytes.
    pub flops: f64,
    /// DRAM bytes moved (each input and output once, plus L2 misses).
    pub bytes: f64,
    /// Whether compute or memory bounds the time.
    pub bound: roofline::Bound,
    /// `occ` of the roofline formula: busy SMs × latency hiding × last-wave fill (0..1).
    pub occupancy: f64,
    /// Shared memory per block, bytes.
    pub smem_bytes: u32,
    /// Registers per thread (estimated).
    pub regs_per_thread: u32,
    /// Blocks resident per SM.
    pub ctas_per_sm: u32,
    /// Points of the plan space, and how many were priced.
    pub space: usize,
    /// Of them, how many were priced (the others were stopped).
    pub priced: usize,
    /// The best rejected alternatives: the fastest losing plans, then one per STOP condition.
    pub rejected: Vec<Rejected>,
}

impl PlanChoice {
    /// The report of this choice.
    pub fn report(&self) -> PlanReport {
        let b = &self.best;
        let stopped: usize = self.stopped.iter().map(|(_, n)| n).sum();
        let mut rejected: Vec<Rejected> = self
            .runners_up
            .iter()
            .map(|p| Rejected {
                plan: p.plan.summary(),
                reason: format!(
                    "slower: {} vs {} ({:+.1} %)",
                    p.time,
                    b.time,
                    100.0 * (p.estimate.time_s / b.estimate.time_s - 1.0)
                ),
            })
            .collect();
        for (ex, (_, n)) in self.stop_examples.iter().zip(&self.stopped) {
            rejected.push(Rejected {
                plan: ex.plan.clone(),
                reason: format!("STOP ({n} plan(s)): {}", ex.reason),
            });
        }
        PlanReport {
            plan: b.plan.clone(),
            template: self.work.shape.template(),
            predicted_us: b.time.micros(),
            flops: b.estimate.flops,
            bytes: b.estimate.bytes,
            bound: b.estimate.bound,
            occupancy: b.estimate.occupancy,
            smem_bytes: b.resources.smem_bytes,
            regs_per_thread: b.resources.regs_per_thread,
            ctas_per_sm: b.resources.ctas_per_sm,
            space: self.space,
            priced: self.space - stopped,
            rejected,
        }
    }
}

fn stop_name(s: &Stop) -> &'static str {
    match s {
        Stop::Sm90Shape { .. } => "sm90_shape",
        Stop::Misaligned { .. } => "misaligned",
        Stop::VectorShrinks { .. } => "vector_shrinks",
        Stop::SmemOver { .. } => "smem_over",
        Stop::RegisterSpill { .. } => "register_spill",
        Stop::OneCtaPerSm { .. } => "one_cta_per_sm",
    }
}

#[cfg(test)]
mod tests;
