//! What one kernel e-node costs by itself ([`kernel_own_cost`]), and the same for every kernel
//! e-node of an e-graph at once ([`kernel_own_costs`], what extraction prices).
//!
//! A kernel's cost is its best plan's time, bytes, one launch, narrow roundings, flops and ops:
//! all of it depends only on the body, the input facts and the cost model, so it is cached on
//! the body ([`KernelBody::derived`]) and the kernels of identical layers (and the many kernel
//! e-nodes of one body) are priced once. The exceptions are the two kernels of an attention
//! pair (`P·V` and the scores-and-softmax kernel it reads), whose times depend on the e-graph
//! ([`attention_pair_of`], [`first_share`]); the batched pricing lists the first kernels once
//! per input class instead of once per reader.

use super::kernels::{
    body_flops, finite_sum, kernel_inputs, kernel_plan_fp, kernel_plan_of, plan_key, CostModel,
    KernelCost,
};
use super::pricing::PairRole;
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
    let firsts = |class| Arc::new(first_kernels(eg, class, model, fingerprint));
    let Some(cost) = own.standalone() else {
        return KernelCost::INFINITY;
    };
    if let Some(p) = own.pair(model, fingerprint, &firsts) {
        let share = first_share(p.first_time, pair_readers(eg, &p, model, fingerprint));
        return KernelCost {
            time: Time(p.fused.0.saturating_sub(share.0)),
            ..cost
        };
    }
    // A first kernel of some pair: its share of the fused time (`first_share`); any other
    // kernel (a first kernel no second kernel pairs with too) at the time it runs by itself.
    let Some(unfused) = own.unfused() else {
        return KernelCost::INFINITY;
    };
    let Some(class) = eg.lookup(node.clone()) else {
        return unfused;
    };
    let firsts_here = firsts(class);
    let Some(f) = firsts_here.iter().find(|f| f.node == *node) else {
        return unfused;
    };
    let as_first = Paired {
        first: f.node.clone(),
        first_class: eg.find(class),
        first_time: f.time,
        fused: Time(0),
    };
    let readers = pair_readers(eg, &as_first, model, fingerprint);
    if readers.is_empty() {
        return unfused;
    }
    KernelCost {
        time: first_share(cost.time, readers),
        ..cost
    }
}

/// `(fused time, standalone time)` of every second kernel e-node of `eg` that pairs with the
/// first kernel of `p` (a scan of the e-graph's kernels reading its class: the single-node
/// pricing, [`kernel_own_cost`]; the batched one has them at hand).
fn pair_readers(
    eg: &TensorGraph,
    p: &Paired,
    model: &CostModel,
    fingerprint: u64,
) -> Vec<(Time, Time)> {
    let firsts = |class| Arc::new(first_kernels(eg, class, model, fingerprint));
    let mut out = Vec::new();
    for c in eg.classes() {
        for n in &c.nodes {
            let TensorLang::Kernel(ch) = n else { continue };
            if !ch[1..].iter().any(|i| eg.find(*i) == p.first_class) {
                continue;
            }
            let Some(own) = Own::of(eg, n, model, fingerprint) else {
                continue;
            };
            let (Some(alone), Some(q)) = (own.standalone(), own.pair(model, fingerprint, &firsts))
            else {
                continue;
            };
            if q.first == p.first {
                out.push((q.fused, alone.time));
            }
        }
    }
    out
}

/// The price of a first kernel (standalone time `first_time`) that the second kernels with
/// `(fused time, standalone time)` in `readers` pair with: the least of its own time and, per
/// reader, the fused time less the reader's standalone time (at least 0). Each such second
/// kernel is then priced at its fused time less this share, so that a cover choosing both
/// pays exactly the fused kernel, while a cover reading the first kernel's class through another
/// e-node (the scores materialized by a separate `QKᵀ` kernel, then a row softmax) pays for
/// the second kernel at least `min(standalone, fused)`, not `fused − first time` (which is
/// near 0 when the first kernel alone is slower than the fused one, e.g. d = 256 on sm80: a
/// 3-pass row softmax of 3.9 ms against a 2.5 ms fused kernel; the extractor then kept the
/// split `QKᵀ` + softmax and ran the `P·V` kernel unpaired, 19 ms, priced at 0). And the
/// class chooses the first kernel by its share, so the pair is found whenever it pays.
///
/// Not exact either: a cover reading the class through another e-node pays `min(standalone,
/// fused)` for the second kernel where it runs `standalone` — but then that cover only wins
/// when it is cheaper than the pair at the true price too, since the pair is priced exactly
/// (the first kernel's inputs cost at least nothing). A cover where the first kernel has a
/// reader other than its second kernel, or is a graph output (then it is not fused), would pay
/// only its share for it: the extractor checks every cover for that and reprices such a first
/// kernel at its unfused time ([`super::pair_check`], from [`PairRole`]).
fn first_share(first_time: Time, readers: impl IntoIterator<Item = (Time, Time)>) -> Time {
    readers.into_iter().fold(first_time, |t, (fused, alone)| {
        t.min(Time(fused.0.saturating_sub(alone.0)))
    })
}

/// [`kernel_own_cost`] of every node of `nodes` (e-nodes of `eg`), in order and in parallel:
/// exactly the same costs, with the first kernels of attention pairs listed once per class.
pub fn kernel_own_costs(
    eg: &TensorGraph,
    nodes: &[&TensorLang],
    model: &CostModel,
) -> Vec<KernelCost> {
    kernel_own_costs_paired(eg, nodes, model).0
}

/// [`kernel_own_costs`] with each node's part in an attention pair ([`PairRole`]; `None`: it
/// is in none), by which the extractor checks a cover's pairs ([`super::cover`]).
pub fn kernel_own_costs_paired(
    eg: &TensorGraph,
    nodes: &[&TensorLang],
    model: &CostModel,
) -> (Vec<KernelCost>, Vec<Option<PairRole>>) {
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
    let lists = |c: Id| firsts[&c].clone();
    let pairs: Vec<Option<Paired>> = owns
        .par_iter()
        .map(|o| o.as_ref().and_then(|o| o.pair(model, fingerprint, &lists)))
        .collect();
    // Each first kernel's share ([`first_share`]), keyed by its e-node.
    let mut shares: FxHashMap<&TensorLang, Time> = FxHashMap::default();
    for (o, p) in owns.iter().zip(&pairs) {
        let (Some(o), Some(p)) = (o, p) else { continue };
        let Some(alone) = o.standalone() else {
            continue;
        };
        let s = shares.entry(&p.first).or_insert(p.first_time);
        *s = first_share(*s, [(p.fused, alone.time)]);
    }
    owns.iter()
        .zip(&pairs)
        .zip(nodes)
        .map(|((o, p), n)| {
            let (Some(cost), Some(unfused)) = (
                o.as_ref().and_then(Own::standalone),
                o.as_ref().and_then(Own::unfused),
            ) else {
                return (KernelCost::INFINITY, None);
            };
            match (p, shares.get(*n)) {
                (Some(p), _) => {
                    let share = shares.get(&p.first).copied().unwrap_or(p.first_time);
                    let role = PairRole::Second {
                        first: p.first.clone(),
                        alone: unfused,
                    };
                    let time = Time(p.fused.0.saturating_sub(share.0));
                    (KernelCost { time, ..cost }, Some(role))
                }
                (None, Some(share)) => {
                    let time = cost.time.min(*share);
                    let role = (time < unfused.time).then_some(PairRole::First { alone: unfused });
                    (KernelCost { time, ..cost }, role)
                }
                (None, None) => (unfused, None),
            }
        })
        .unzip()
}

/// The pair a second kernel forms ([`attention_pair_of`]): its first kernel e-node, that
/// e-node's class and standalone time, and the fused kernel's time.
struct Paired {
    first: TensorLang,
    first_class: Id,
    first_time: Time,
    fused: Time,
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

    /// The cost as a kernel of its own (its plan's time); `None`: no plan (infinite).
    fn standalone(&self) -> Option<KernelCost> {
        self.cached.as_ref().as_ref().map(|b| b.cost)
    }

    /// [`Own::standalone`] with the time it runs in when no attention pair fuses it
    /// ([`BodyCost::unfused`]).
    fn unfused(&self) -> Option<KernelCost> {
        self.cached.as_ref().as_ref().map(|b| KernelCost {
            time: b.unfused,
            ..b.cost
        })
    }

    /// The attention pair the kernel forms as its second kernel, with the first kernels of
    /// each input class from `firsts` ([`attention_pair_of`]).
    fn pair(
        &self,
        model: &CostModel,
        fingerprint: u64,
        firsts: &dyn Fn(Id) -> Arc<Vec<FirstKernel>>,
    ) -> Option<Paired> {
        let second = self.second()?;
        let lists: Vec<Arc<Vec<FirstKernel>>> = self.inputs.iter().map(|c| firsts(*c)).collect();
        let pair = SecondKernel {
            body: self.body,
            facts: &self.facts,
            region: second,
        };
        attention_pair_of(&lists, &pair, model, fingerprint)
    }
}

/// Distinguishes [`body_cost`]'s key from the plan choice's among a body's derived values.
const BODY_COST_TAG: u64 = 0x6b63_6f73_745f_7631;

/// What a kernel costs by itself from its body and input facts alone: the cost with its plan's
/// time, and its region when it contracts (a reduction `let`: it may be the second region of
/// an attention pair, whose time depends on the e-graph, [`attention_pair_of`]).
struct BodyCost {
    cost: KernelCost,
    /// The time of the kernel when no attention pair fuses it: `cost.time` but for a
    /// contraction with a row epilogue (the scores and softmax of attention, or a part of
    /// them), which extraction prices as the fused attention kernel would run it
    /// ([`crate::cost::choose_plan_for_extraction`]) and which by itself runs as
    /// [`crate::cost::choose_plan`] plans it (a d = 256 masked `exp2(scores − max)` kernel:
    /// 21 µs against 1578 µs pointwise).
    unfused: Time,
    contraction: Option<Arc<Region>>,
}

/// [`BodyCost`] of a body over inputs of these facts (uncached); `None`: no region, no plan, or
/// not a tensor.
fn body_cost(body: &KernelBody, in_facts: &[TensorFacts], model: &CostModel) -> Option<BodyCost> {
    use crate::cost::work::Shape;
    let facts = body.node_facts(in_facts).ok()?;
    let out = match facts.last() {
        Some(Facts::Tensor(t)) => model.bytes(t),
        _ => return None,
    };
    let (time, row_contraction, read) = match kernel_plan_of(body, in_facts, model).as_ref() {
        Ok(choice) => (
            choice.best.time,
            matches!(&choice.work.shape, Shape::Contraction(g) if g.row_extent.is_some()),
            // What the reads touch (`plan::work`'s footprint): a kernel reading one column
            // block of a merged Q‖K‖V GEMM's output moves that block, not the whole output.
            choice
                .work
                .inputs
                .iter()
                .fold(0, |acc, i| finite_sum(acc, i.bytes.round() as u64)),
        ),
        Err(_) => return None,
    };
    // The plan exists, so the region does (cached by the plan choice).
    let region = match &model.regions {
        Some(cache) => cache.region(body.expr(), in_facts).ok(),
        None => super::kernels::synthesize_kernel(body.expr(), in_facts)
            .ok()
            .map(Arc::new),
    };
    let unfused = match &region {
        Some(r) if row_contraction => {
            crate::cost::choose_plan(r, model).map_or(Time::INFINITY, |c| c.best.time)
        }
        _ => time,
    };
    let contraction = region.filter(|r| r.lets.iter().any(|l| matches!(l.expr, Expr::Reduce(_))));
    Some(BodyCost {
        cost: KernelCost {
            time,
            bytes: finite_sum(read, out),
            kernels: 1,
            roundings: narrow_roundings(body, &facts),
            flops: body_flops(body.expr(), &facts, model),
            ops: body.op_count() as u64,
        },
        unfused,
        contraction,
    })
}

/// The body's fp16/bf16 values other than its result (each is rounded to the narrow type).
fn narrow_roundings(body: &KernelBody, facts: &[Facts]) -> u64 {
    let root = body.expr().as_ref().len() - 1;
    body.expr()
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
        .count() as u64
}

/// A kernel that may be the first of an attention pair (the scores and softmax: a contraction
/// with a row epilogue), with its extraction time.
struct FirstKernel {
    time: Time,
    /// The e-node and its (canonical) class.
    node: TensorLang,
    class: Id,
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
/// order: a stable sort), so that [`attention_pair_of`] stops at the first that pairs.
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
        // Cheap test before the plan lookup (which hashes the input facts) and the deferred
        // region's synthesis (a tenth of BERT's pricing).
        let may_be_first = match n {
            TensorLang::Kernel(ch) => kernel_parts(ch, &attr).is_ok_and(|(b, _)| {
                crate::codegen::templates::attention::body_may_be_first(b.expr())
            }),
            _ => false,
        };
        if !may_be_first {
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
            node: n.clone(),
            class: eg.find(class),
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

/// The attention pair a kernel forms as its second region (`P·V`, its `P` the
/// scores-and-softmax kernel of an input class; `firsts[i]` lists input `i`'s candidates): that
/// first kernel and the fused kernel's time ([`crate::cost::attention::choose_attention_plan`],
/// the plan code generation emits for the pair). The kernel is priced at the fused time less
/// the first kernel's share ([`first_share`]), so that a cover choosing both pays exactly the
/// one kernel that runs. Among several first kernels of the class the cheapest is taken (the
/// one the extractor keeps; ties: the first input, then e-node order). `None` when no input is
/// such a kernel.
///
/// Each list is sorted cheapest first ([`first_kernels`]), so only the first kernel that pairs
/// is fused and priced per input: the same choice as pricing every pair and keeping the
/// cheapest first kernel, without the pairs that could not win (on an encoder, most of them).
fn attention_pair_of(
    firsts: &[Arc<Vec<FirstKernel>>],
    second: &SecondKernel,
    model: &CostModel,
    fingerprint: u64,
) -> Option<Paired> {
    use crate::codegen::templates::attention::pair;
    let mut best: Option<Paired> = None;
    // The second kernel's id, given on its first pair lookup (once, not per pair).
    let mut second_id: Option<u32> = None;
    for (i, list) in firsts.iter().enumerate() {
        for f in list.iter() {
            if best.as_ref().is_some_and(|b| f.time >= b.first_time) {
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
            if best.as_ref().is_none_or(|b| f.time < b.first_time) {
                best = Some(Paired {
                    first: f.node.clone(),
                    first_class: f.class,
                    first_time: f.time,
                    fused: fused_time,
                });
            }
            // The rest of this list costs at least as much: none of it can replace `best`.
            break;
        }
    }
    best
}
