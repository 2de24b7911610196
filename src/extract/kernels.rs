//! Choosing a cover of the graph by kernels (`docs/egraph-design.md` §4): only `kernel`, `input`
//! and `reshape` e-nodes are realizable — a kernel is a launch, an input is given, and a reshape of
//! a materialized row-major buffer is an alias (same bytes, new shape). Every other e-node costs
//! [`KernelCost::INFINITY`], so the extracted DAG is a program of kernels.
//!
//! A kernel's price is its best plan's predicted time (seed 001 §11, `crate::cost`).

pub(super) use crate::cost::model::finite_sum;
pub use crate::cost::model::{synthesize_kernel, CostModel, RegionCache};
use crate::cost::{choose_plan_for_extraction, PlanChoice, Time};
use crate::ir::egraph::kernel::{kernel_parts, KernelBody};
use crate::ir::egraph::{Facts, TensorFacts, TensorGraph, TensorLang};
use egg::Id;
use serde::Serialize;
use std::sync::Arc;

/// Cost of realizing a value: predicted time ([`Time`], seed 001 §11 through
/// [`crate::cost::choose_plan`]), then as tie-breakers bytes moved to and from global memory,
/// kernel launches, roundings to a narrow float type inside kernel bodies (fewer means the
/// epilogue runs on the fp32 accumulator), arithmetic ([`body_flops`]) and body ops. The
/// derived order is lexicographic in that order; extractors add costs as `KernelCost::scalar`.
/// Sums saturate; [`KernelCost::INFINITY`] marks an unrealizable e-node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct KernelCost {
    /// Predicted time of the best plan.
    pub time: Time,
    /// Bytes moved to and from global memory.
    pub bytes: u64,
    /// Kernel launches.
    pub kernels: u64,
    /// Roundings to fp16/bf16 inside kernel bodies.
    pub roundings: u64,
    /// Arithmetic, in element operations ([`body_flops`]).
    pub flops: u64,
    /// Body ops.
    pub ops: u64,
}

impl KernelCost {
    /// Unrealizable.
    pub const INFINITY: KernelCost = KernelCost {
        time: Time::INFINITY,
        bytes: u64::MAX,
        kernels: u64::MAX,
        roundings: u64::MAX,
        flops: u64::MAX,
        ops: u64::MAX,
    };

    /// Nothing to pay.
    pub const ZERO: KernelCost = KernelCost {
        time: Time::ZERO,
        bytes: 0,
        kernels: 0,
        roundings: 0,
        flops: 0,
        ops: 0,
    };

    /// True for [`KernelCost::INFINITY`] (or anything saturated to it).
    pub fn is_infinite(&self) -> bool {
        self.time.is_infinite() || self.bytes == u64::MAX
    }

    /// Saturating sum.
    pub fn plus(self, o: KernelCost) -> KernelCost {
        if self.is_infinite() || o.is_infinite() {
            return KernelCost::INFINITY;
        }
        KernelCost {
            time: self.time.plus(o.time),
            bytes: finite_sum(self.bytes, o.bytes),
            kernels: self.kernels.saturating_add(o.kernels),
            roundings: self.roundings.saturating_add(o.roundings),
            flops: self.flops.saturating_add(o.flops),
            ops: self.ops.saturating_add(o.ops),
        }
    }
}

pub use super::own_cost::kernel_own_cost;

/// The body and input facts of a kernel e-node.
pub(super) fn kernel_inputs(
    eg: &TensorGraph,
    node: &TensorLang,
) -> Option<(KernelBody, Vec<TensorFacts>)> {
    let TensorLang::Kernel(children) = node else {
        return None;
    };
    let attr = |id: Id| eg[id].data.attr();
    let (body, inputs) = kernel_parts(children, &attr).ok()?;
    let in_facts: Vec<TensorFacts> = inputs
        .iter()
        .map(|i| eg[*i].data.tensor().cloned())
        .collect::<Option<_>>()?;
    Some((body.clone(), in_facts))
}

/// The plan choice of a kernel e-node: its region (inputs `in0`, `in1`, …, output `out`)
/// through [`crate::cost::choose_plan_for_extraction`], cached on the body for `model`. `Err` says why the
/// kernel has no region or no plan.
pub fn kernel_plan(
    eg: &TensorGraph,
    node: &TensorLang,
    model: &CostModel,
) -> Arc<Result<PlanChoice, String>> {
    kernel_plan_fp(eg, node, model, model.fingerprint())
}

/// [`kernel_plan`] with the model's fingerprint computed by the caller (once for many nodes).
pub(super) fn kernel_plan_fp(
    eg: &TensorGraph,
    node: &TensorLang,
    model: &CostModel,
    fingerprint: u64,
) -> Arc<Result<PlanChoice, String>> {
    let not_kernel = || Arc::new(Err("not a kernel e-node with typed inputs".into()));
    let TensorLang::Kernel(children) = node else {
        return not_kernel();
    };
    let attr = |id: Id| eg[id].data.attr();
    let Ok((body, inputs)) = kernel_parts(children, &attr) else {
        return not_kernel();
    };
    // The facts by reference: a cached plan (the common case) needs no copy of them.
    let Some(facts) = inputs
        .iter()
        .map(|i| eg[*i].data.tensor())
        .collect::<Option<Vec<&TensorFacts>>>()
    else {
        return not_kernel();
    };
    body.derived(plan_key(fingerprint, &facts), || {
        let owned: Vec<TensorFacts> = facts.iter().map(|f| (*f).clone()).collect();
        plan_of(body, &owned, model)
    })
}

/// The key of a plan choice cached on a body: the model and the input facts (hashed alike
/// whether the facts are owned or borrowed).
pub(super) fn plan_key<F: std::hash::Hash>(fingerprint: u64, in_facts: &[F]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    fingerprint.hash(&mut h);
    in_facts.hash(&mut h);
    h.finish()
}

pub(super) fn kernel_plan_of(
    body: &KernelBody,
    in_facts: &[TensorFacts],
    model: &CostModel,
) -> Arc<Result<PlanChoice, String>> {
    body.derived(plan_key(model.fingerprint(), in_facts), || {
        plan_of(body, in_facts, model)
    })
}

/// The plan choice of a body over inputs of these facts (uncached).
fn plan_of(
    body: &KernelBody,
    in_facts: &[TensorFacts],
    model: &CostModel,
) -> Result<PlanChoice, String> {
    let region = match &model.regions {
        Some(cache) => cache.region(body.expr(), in_facts)?,
        None => Arc::new(synthesize_kernel(body.expr(), in_facts)?),
    };
    choose_plan_for_extraction(&region, model).map_err(|e| e.to_string())
}

/// Arithmetic of a body, in element operations: each computing node (not an attribute, a
/// placeholder, movement or a cast) counts once per evaluation, and a reduction once per
/// element of its operand (the accumulation). A reduction is evaluated once per element of its
/// own value (region synthesis makes it a `let`); any other node once per evaluation of each of
/// its users, so an elementwise producer read under a broadcast by a contraction (attention's
/// softmax in the P·V prologue) is paid once per element of the contraction, and one used twice
/// inline is paid twice. A scan counts as a reduction: one accumulation per element, its
/// operand evaluated once per element (linear, not over a triangular window).
pub fn body_flops(body: &egg::RecExpr<TensorLang>, facts: &[Facts], sizes: &CostModel) -> u64 {
    let nodes = body.as_ref();
    let numel = |k: usize| match &facts[k] {
        Facts::Tensor(t) => sizes.numel(&t.shape),
        Facts::Attr(_) | Facts::Invalid(_) => 0,
    };
    let mut evals = vec![0u64; nodes.len()];
    let mut flops = 0u64;
    for (k, n) in nodes.iter().enumerate().rev() {
        if n.is_attr() {
            continue;
        }
        let is_reduce = matches!(n, TensorLang::Reduce(_) | TensorLang::Scan(_));
        if is_reduce || k + 1 == nodes.len() {
            evals[k] = numel(k);
        }
        let counted = !n.is_movement() && !matches!(n, TensorLang::Cast(_));
        for c in egg::Language::children(n) {
            let c = usize::from(*c);
            if !matches!(facts[c], Facts::Tensor(_)) {
                continue;
            }
            let e = if is_reduce { numel(c) } else { evals[k] };
            evals[c] = evals[c].saturating_add(e);
            if is_reduce && counted {
                flops = flops.saturating_add(e);
            }
        }
        if counted && !is_reduce {
            flops = flops.saturating_add(evals[k]);
        }
    }
    flops
}

/// The cost of a chosen cover counted as a DAG (every distinct kernel once), kernels priced by
/// the roofline model ([`kernel_own_cost`]). Not [`crate::extract::dag::dag_cost`], which sums
/// the node costs of an extraction problem.
pub fn cover_cost(
    eg: &TensorGraph,
    roots: &[Id],
    choose: &dyn Fn(Id) -> TensorLang,
    sizes: &CostModel,
) -> KernelCost {
    cover_cost_with(eg, roots, choose, sizes, &super::pricing::Roofline)
}

/// [`cover_cost`] with kernels priced by `pricer`.
pub fn cover_cost_with(
    eg: &TensorGraph,
    roots: &[Id],
    choose: &dyn Fn(Id) -> TensorLang,
    sizes: &CostModel,
    pricer: &dyn super::pricing::KernelPricer,
) -> KernelCost {
    cover_cost_derived(
        eg,
        roots,
        choose,
        sizes,
        pricer,
        &super::derived::Derived::none(),
    )
}

/// [`cover_cost_with`] per run: the derived-constant kernels of `derived` (computed once at
/// load time, [`super::derived`]) cost nothing.
pub fn cover_cost_derived(
    eg: &TensorGraph,
    roots: &[Id],
    choose: &dyn Fn(Id) -> TensorLang,
    sizes: &CostModel,
    pricer: &dyn super::pricing::KernelPricer,
    derived: &super::derived::Derived,
) -> KernelCost {
    let mut seen: std::collections::BTreeSet<Id> = Default::default();
    let mut stack: Vec<Id> = roots.iter().map(|r| eg.find(*r)).collect();
    let mut total = KernelCost::ZERO;
    while let Some(c) = stack.pop() {
        if !seen.insert(c) {
            continue;
        }
        let n = choose(c);
        match &n {
            TensorLang::Kernel(ch) => {
                if !derived.is_derived_kernel(eg, c, &n) {
                    total = total.plus(pricer.price(eg, &n, sizes));
                }
                stack.extend(ch[1..].iter().map(|i| eg.find(*i)));
            }
            TensorLang::Reshape([x, _]) => stack.push(eg.find(*x)),
            _ => {}
        }
    }
    total
}
