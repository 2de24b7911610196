//! Choosing a cover of the graph by kernels (`docs/egraph-design.md` §4): only `kernel`, `input`
//! and `reshape` e-nodes are realizable — a kernel is a launch, an input is given, and a reshape of
//! a materialized row-major buffer is an alias (same bytes, new shape). Every other e-node costs
//! [`KernelCost::INFINITY`], so the extracted DAG is a program of kernels.
//!
//! TODO(cost model): issue 4 replaces [`KernelCost`] (bytes to and from global memory, launches,
//! then an estimate of the arithmetic) with the roofline cost model of seed 001 §11.

use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::egraph::kernel::kernel_parts;
use crate::ir::egraph::{Facts, TensorFacts, TensorGraph, TensorLang};
use egg::Id;
use serde::Serialize;
use std::collections::BTreeMap;

/// Cost of realizing a value: bytes moved to and from global memory, kernel launches, roundings
/// to a narrow float type inside kernel bodies (fewer means the epilogue runs on the fp32
/// accumulator), arithmetic ([`body_flops`]: recomputation of an elementwise producer inlined
/// under a broadcast is paid per use), then body ops. The derived order is lexicographic in
/// that order; extractors add costs as `KernelCost::scalar`. Sums saturate;
/// [`KernelCost::INFINITY`] marks an unrealizable e-node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct KernelCost {
    pub bytes: u64,
    pub kernels: u64,
    pub roundings: u64,
    pub flops: u64,
    pub ops: u64,
}

impl KernelCost {
    /// Unrealizable.
    pub const INFINITY: KernelCost = KernelCost {
        bytes: u64::MAX,
        kernels: u64::MAX,
        roundings: u64::MAX,
        flops: u64::MAX,
        ops: u64::MAX,
    };

    /// Nothing to pay.
    pub const ZERO: KernelCost = KernelCost {
        bytes: 0,
        kernels: 0,
        roundings: 0,
        flops: 0,
        ops: 0,
    };

    /// True for [`KernelCost::INFINITY`] (or anything saturated to it).
    pub fn is_infinite(&self) -> bool {
        self.bytes == u64::MAX
    }

    /// Saturating sum.
    pub fn plus(self, o: KernelCost) -> KernelCost {
        if self.is_infinite() || o.is_infinite() {
            return KernelCost::INFINITY;
        }
        KernelCost {
            bytes: self.bytes.saturating_add(o.bytes),
            kernels: self.kernels.saturating_add(o.kernels),
            roundings: self.roundings.saturating_add(o.roundings),
            flops: self.flops.saturating_add(o.flops),
            ops: self.ops.saturating_add(o.ops),
        }
    }
}

/// Sizes used to price symbolic shapes: the program's bound symbols, and `default_size` for
/// every other symbol (TODO(cost model): ShapeSets, issue 6).
#[derive(Clone, Debug)]
pub struct CostSizes {
    pub bindings: BTreeMap<String, i64>,
    pub default_size: i64,
}

impl CostSizes {
    /// Number of elements of `shape` (saturating; unbound symbols take `default_size`).
    pub fn numel(&self, shape: &[Dim]) -> u64 {
        let mut b = self.bindings.clone();
        for d in shape {
            for s in d.symbols() {
                b.entry(s).or_insert(self.default_size);
            }
        }
        shape.iter().fold(1u64, |acc, d| {
            let v = d.eval_with(&b).unwrap_or(self.default_size).max(0) as u64;
            acc.saturating_mul(v)
        })
    }

    /// Bytes of a tensor with these facts.
    pub fn bytes(&self, t: &TensorFacts) -> u64 {
        self.numel(&t.shape).saturating_mul(t.dtype.size_bytes())
    }
}

/// What one kernel e-node costs by itself (without its inputs' costs).
pub fn kernel_own_cost(eg: &TensorGraph, node: &TensorLang, sizes: &CostSizes) -> KernelCost {
    let TensorLang::Kernel(children) = node else {
        return KernelCost::INFINITY;
    };
    let attr = |id: Id| eg[id].data.attr();
    let Ok((body, inputs)) = kernel_parts(children, &attr) else {
        return KernelCost::INFINITY;
    };
    let Some(in_facts): Option<Vec<TensorFacts>> = inputs
        .iter()
        .map(|i| eg[*i].data.tensor().cloned())
        .collect()
    else {
        return KernelCost::INFINITY;
    };
    let Ok(facts) = body.node_facts(&in_facts) else {
        return KernelCost::INFINITY;
    };
    let out = match facts.last() {
        Some(Facts::Tensor(t)) => sizes.bytes(t),
        _ => return KernelCost::INFINITY,
    };
    let read: u64 = in_facts.iter().map(|f| sizes.bytes(f)).sum();
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
    KernelCost {
        bytes: read.saturating_add(out),
        kernels: 1,
        roundings,
        flops: body_flops(body.expr(), &facts, sizes),
        ops: body.op_count() as u64,
    }
}

/// Arithmetic of a body, in element operations: each computing node (not an attribute, a
/// placeholder, movement or a cast) counts once per evaluation, and a reduction once per
/// element of its operand (the accumulation). A reduction is evaluated once per element of its
/// own value (region synthesis makes it a `let`); any other node once per evaluation of each of
/// its users, so an elementwise producer read under a broadcast by a contraction (attention's
/// softmax in the P·V prologue) is paid once per element of the contraction, and one used twice
/// inline is paid twice.
pub fn body_flops(body: &egg::RecExpr<TensorLang>, facts: &[Facts], sizes: &CostSizes) -> u64 {
    let nodes = body.as_ref();
    let numel = |k: usize| match &facts[k] {
        Facts::Tensor(t) => sizes.numel(&t.shape),
        Facts::Attr(_) => 0,
    };
    let mut evals = vec![0u64; nodes.len()];
    let mut flops = 0u64;
    for (k, n) in nodes.iter().enumerate().rev() {
        if n.is_attr() {
            continue;
        }
        let is_reduce = matches!(n, TensorLang::Reduce(_));
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

/// The cost of a chosen cover counted as a DAG: every distinct kernel once.
pub fn dag_cost(
    eg: &TensorGraph,
    roots: &[Id],
    choose: &dyn Fn(Id) -> TensorLang,
    sizes: &CostSizes,
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
                total = total.plus(kernel_own_cost(eg, &n, sizes));
                stack.extend(ch[1..].iter().map(|i| eg.find(*i)));
            }
            TensorLang::Reshape([x, _]) => stack.push(eg.find(*x)),
            _ => {}
        }
    }
    total
}
