//! What one kernel e-node costs by itself ([`kernel_own_cost`]), and the same for every kernel
//! e-node of an e-graph at once ([`kernel_own_costs`], what extraction prices).
//!
//! A kernel's cost is its best plan's time, bytes, one launch, narrow roundings, flops and ops:
//! all of it depends only on the body, the input facts and the cost model, so it is cached on
//! the body ([`KernelBody::derived`]) and the kernels of identical layers (and the many kernel
//! e-nodes of one body) are priced once. The exception is the second kernel of an attention
//! pair (`P·V`), whose time depends on the first kernels the e-graph offers for its input
//! ([`attention_second_time`]); the batched pricing lists those first kernels once per input
//! class instead of once per reader.

use super::kernels::{
    body_flops, finite_sum, kernel_inputs, kernel_plan_fp, kernel_plan_of, plan_key, CostModel,
    KernelCost,
};
use crate::cost::model::synthesize_deferred;
use crate::cost::Time;
use crate::ir::dtype::DType;
use crate::ir::egraph::kernel::{kernel_parts, KernelBody};
use crate::ir::egraph::{Facts, TensorFacts, TensorGraph, TensorLang};
use crate::ir::region::{Expr, Region};
use egg::Id;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// What one kernel e-node costs by itself (without its inputs' costs): its best plan's time
/// ([`super::kernels::kernel_plan`]), bytes, one launch, narrow roundings, flops and ops.
///
/// Everything but the attention-pair time is cached on the body (`body_cost`).
pub fn kernel_own_cost(eg: &TensorGraph, node: &TensorLang, model: &CostModel) -> KernelCost {
    let fingerprint = model.fingerprint();
    let Some(own) = Own::of(eg, node, model, fingerprint) else {
        return KernelCost::INFINITY;
    };
    own.cost(model, fingerprint, |class| {
        Arc::new(first_kernels(eg, class, model, fingerprint))
    })
}

/// [`kernel_own_cost`] of every node of `nodes` (e-nodes of `eg`), in order and in parallel:
/// exactly the same costs, with the first kernels of attention pairs listed once per class.
pub fn kernel_own_costs(
    eg: &TensorGraph,
    nodes: &[&TensorLang],
    model: &CostModel,
) -> Vec<KernelCost> {
    let fingerprint = model.fingerprint();
    let owns: Vec<Option<Own>> = nodes
        .par_iter()
        .map(|n| Own::of(eg, n, model, fingerprint))
        .collect();
    // The input classes of every possible second kernel, in id order (deterministic).
    let mut classes: Vec<Id> = owns
        .iter()
        .flatten()
        .filter(|o| o.second().is_some())
        .flat_map(|o| o.inputs.iter().copied())
        .collect();
    classes.sort_unstable();
    classes.dedup();
    let firsts: FxHashMap<Id, Arc<Vec<FirstKernel>>> = classes
        .par_iter()
        .map(|c| (*c, Arc::new(first_kernels(eg, *c, model, fingerprint))))
        .collect();
    owns.par_iter()
        .map(|o| match o {
            Some(o) => o.cost(model, fingerprint, |c| firsts[&c].clone()),
            None => KernelCost::INFINITY,
        })
        .collect()
}

/// A kernel e-node's parts and its cached [`BodyCost`].
struct Own<'a> {
    body: &'a KernelBody,
    inputs: Vec<Id>,
    facts: Vec<&'a TensorFacts>,
    cached: Arc<Option<BodyCost>>,
}

impl<'a> Own<'a> {
    /// The parts of `node`; `None` when it is not a kernel with typed inputs (infinite cost).
    fn of(
        eg: &'a TensorGraph,
        node: &'a TensorLang,
        model: &CostModel,
        fingerprint: u64,
    ) -> Option<Own<'a>> {
        let TensorLang::Kernel(children) = node else {
            return None;
        };
        let attr = |id: Id| eg[id].data.attr();
        let (body, inputs) = kernel_parts(children, &attr).ok()?;
        // The facts by reference: a cached cost (the common case) needs no copy of them.
        let facts = inputs
            .iter()
            .map(|i| eg[*i].data.tensor())
            .collect::<Option<Vec<&TensorFacts>>>()?;
        let cached = body.derived(plan_key(fingerprint ^ BODY_COST_TAG, &facts), || {
            let owned: Vec<TensorFacts> = facts.iter().map(|f| (*f).clone()).collect();
            body_cost(body, &owned, model)
        });
        Some(Own {
            body,
            inputs: inputs.to_vec(),
            facts,
            cached,
        })
    }

    /// The region, when the kernel may be the second of an attention pair.
    fn second(&self) -> Option<&Region> {
        self.cached.as_ref().as_ref()?.contraction.as_deref()
    }

    /// The cost, with the first kernels of each input class from `firsts`.
    fn cost(
        &self,
        model: &CostModel,
        fingerprint: u64,
        firsts: impl Fn(Id) -> Arc<Vec<FirstKernel>>,
    ) -> KernelCost {
        let Some(BodyCost { cost, contraction }) = self.cached.as_ref() else {
            return KernelCost::INFINITY;
        };
        let Some(second) = contraction else {
            return *cost;
        };
        let lists: Vec<Arc<Vec<FirstKernel>>> = self.inputs.iter().map(|c| firsts(*c)).collect();
        let pair = SecondKernel {
            body: self.body,
            facts: &self.facts,
            region: second,
        };
        match attention_second_time(&lists, &pair, model, fingerprint) {
            Some(time) => KernelCost { time, ..*cost },
            None => *cost,
        }
    }
}

/// Distinguishes [`body_cost`]'s key from the plan choice's among a body's derived values.
const BODY_COST_TAG: u64 = 0x6b63_6f73_745f_7631;

/// What a kernel costs by itself from its body and input facts alone: the cost with its plan's
/// time, and its region when it contracts (a reduction `let`: it may be the second region of
/// an attention pair, whose time depends on the e-graph, [`attention_second_time`]).
struct BodyCost {
    cost: KernelCost,
    contraction: Option<Arc<Region>>,
}

/// [`BodyCost`] of a body over inputs of these facts (uncached); `None`: no region, no plan, or
/// not a tensor.
fn body_cost(body: &KernelBody, in_facts: &[TensorFacts], model: &CostModel) -> Option<BodyCost> {
    let facts = body.node_facts(in_facts).ok()?;
    let out = match facts.last() {
        Some(Facts::Tensor(t)) => model.bytes(t),
        _ => return None,
    };
    let time = match kernel_plan_of(body, in_facts, model).as_ref() {
        Ok(choice) => choice.best.time,
        Err(_) => return None,
    };
    // The plan exists, so the region does (cached by the plan choice).
    let contraction = match &model.regions {
        Some(cache) => cache.region(body.expr(), in_facts).ok(),
        None => super::kernels::synthesize_kernel(body.expr(), in_facts)
            .ok()
            .map(Arc::new),
    }
    .filter(|r| r.lets.iter().any(|l| matches!(l.expr, Expr::Reduce(_))));
    let read: u64 = in_facts
        .iter()
        .fold(0, |acc, f| finite_sum(acc, model.bytes(f)));
    let root = body.expr().as_ref().len() - 1;
    let roundings = body
        .expr()
        .as_ref()
        .iter()
        .zip(facts.iter())
        .enumerate()
        .filter(|(k, (n, f))| {
            *k != root
                && !n.is_attr()
                && !n.is_movement()
                && matches!(f, Facts::Tensor(t) if matches!(t.dtype, DType::F16 | DType::BF16))
        })
        .count() as u64;
    Some(BodyCost {
        cost: KernelCost {
            time,
            bytes: finite_sum(read, out),
            kernels: 1,
            roundings,
            flops: body_flops(body.expr(), &facts, model),
            ops: body.op_count() as u64,
        },
        contraction,
    })
}

/// A kernel that may be the first of an attention pair (the scores and softmax: a contraction
/// with a row epilogue), with its extraction time.
struct FirstKernel {
    time: Time,
    body: KernelBody,
    facts: Vec<TensorFacts>,
    /// [`super::kernels::RegionCache::kernel_id`] of body and facts (with a region cache).
    id: Option<u32>,
}

/// Distinguishes [`FirstKernel::may_pair`]'s key among a body's derived values.
const FIRST_SIDE_TAG: u64 = 0x6669_7273_745f_7631;

impl FirstKernel {
    /// Whether the kernel's deferred region as input `i` of a second kernel (`first` makes it)
    /// matches the first side of an attention pair
    /// ([`crate::codegen::templates::attention::is_first`]): when it does not, `pair` fails for
    /// every second kernel. Cached on the body by its input facts and `i` (the deferred region
    /// depends on nothing else), so each distinct first kernel is matched once per position, not
    /// once per second kernel.
    fn may_pair(&self, i: usize, first: &dyn Fn() -> Option<Arc<Region>>) -> bool {
        let key = plan_key(FIRST_SIDE_TAG ^ i as u64, &self.facts);
        *self.body.derived(key, || {
            first().is_some_and(|r| crate::codegen::templates::attention::is_first(&r))
        })
    }
}

/// The first-kernel candidates among the e-nodes of `class`, cheapest first (ties in e-node
/// order: a stable sort), so that [`attention_second_time`] stops at the first that pairs.
fn first_kernels(
    eg: &TensorGraph,
    class: Id,
    model: &CostModel,
    fingerprint: u64,
) -> Vec<FirstKernel> {
    use crate::cost::work::Shape;
    let attr = |id: Id| eg[id].data.attr();
    let mut out = Vec::new();
    for n in &eg[class].nodes {
        // A first region contracts: a kernel without a reduction is not one (cheap test
        // before the plan lookup, which hashes the input facts).
        let has_reduce = match n {
            TensorLang::Kernel(ch) => kernel_parts(ch, &attr).is_ok_and(|(b, _)| {
                b.expr()
                    .as_ref()
                    .iter()
                    .any(|m| matches!(m, TensorLang::Reduce(_)))
            }),
            _ => false,
        };
        if !has_reduce {
            continue;
        }
        let plan = kernel_plan_fp(eg, n, model, fingerprint);
        let Ok(first_choice) = plan.as_ref() else {
            continue;
        };
        // The scores and softmax: a contraction with a row epilogue.
        if !matches!(&first_choice.work.shape, Shape::Contraction(g) if g.row_extent.is_some()) {
            continue;
        }
        let Some((body, facts)) = kernel_inputs(eg, n) else {
            continue;
        };
        let id = model
            .regions
            .as_ref()
            .map(|cache| cache.kernel_id(&body, facts.clone()));
        out.push(FirstKernel {
            time: first_choice.best.time,
            body,
            facts,
            id,
        });
    }
    out.sort_by_key(|f| f.time);
    out
}

/// A kernel that may be the second of an attention pair: body, input facts and its region,
/// which contracts.
struct SecondKernel<'a> {
    body: &'a KernelBody,
    facts: &'a [&'a TensorFacts],
    region: &'a Region,
}

/// The price of a kernel as the second region of a fused attention pair (`P·V`, its `P` the
/// scores-and-softmax kernel of an input class; `firsts[i]` lists input `i`'s candidates): the
/// fused kernel's time ([`crate::cost::attention::choose_attention_plan`], the plan code
/// generation emits for the pair) less the extraction price of that first kernel, so that a
/// cover choosing both pays exactly the one kernel that runs. Among several first kernels of
/// the class the cheapest is taken (the one the extractor keeps; ties: the first input, then
/// e-node order). `None` when no input is such a kernel.
///
/// Each list is sorted cheapest first ([`first_kernels`]), so only the first kernel that pairs
/// is fused and priced per input: the same choice as pricing every pair and keeping the
/// cheapest first kernel, without the pairs that could not win (on an encoder, most of them).
fn attention_second_time(
    firsts: &[Arc<Vec<FirstKernel>>],
    second: &SecondKernel,
    model: &CostModel,
    fingerprint: u64,
) -> Option<Time> {
    use crate::codegen::templates::attention::pair;
    let mut best: Option<(Time, Time)> = None;
    // The second kernel's id, given on its first pair lookup (once, not per pair).
    let mut second_id: Option<u32> = None;
    for (i, list) in firsts.iter().enumerate() {
        for f in list.iter() {
            if best.is_some_and(|(t, _)| f.time >= t) {
                // Neither this nor a later (costlier) first kernel could replace `best`.
                break;
            }
            let first = || match &model.regions {
                Some(cache) => cache.deferred(&f.body, &f.facts, i),
                None => synthesize_deferred(&f.body, &f.facts, &format!("in{i}"))
                    .ok()
                    .map(Arc::new),
            };
            if !f.may_pair(i, &first) {
                // No second kernel pairs with it at input `i` (`pair` would fail on the first
                // side): skip it as `pair` would, without matching the pair.
                continue;
            }
            let fused = || {
                let first = first()?;
                let p = pair(&first, second.region)?;
                let fused = crate::cost::attention::choose_attention_plan(&p, model).ok()?;
                Some(fused.best.time)
            };
            let fused_time = match (&model.regions, f.id) {
                (Some(cache), Some(first_id)) => {
                    let sid = *second_id.get_or_insert_with(|| {
                        let facts = second.facts.iter().map(|x| (*x).clone()).collect();
                        cache.kernel_id(second.body, facts)
                    });
                    cache.pair_time((first_id, i, sid, fingerprint), fused)
                }
                _ => fused(),
            };
            let Some(fused_time) = fused_time else {
                continue;
            };
            if best.is_none_or(|(t, _)| f.time < t) {
                best = Some((f.time, Time(fused_time.0.saturating_sub(f.time.0))));
            }
            // The rest of this list costs at least as much: none of it can replace `best`.
            break;
        }
    }
    best.map(|(_, t)| t)
}
