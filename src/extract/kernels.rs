//! Choosing a cover of the graph by kernels (`docs/egraph-design.md` §4): only `kernel`, `input`
//! and `reshape` e-nodes are realizable — a kernel is a launch, an input is given, and a reshape of
//! a materialized row-major buffer is an alias (same bytes, new shape). Every other e-node costs
//! [`KernelCost::INFINITY`], so the extracted DAG is a program of kernels.
//!
//! TODO(cost model): issue 4 replaces [`BytesCost`] (bytes to and from global memory, then kernel
//! count) with the roofline cost model and a DAG-aware extractor; this one is egg's tree
//! extractor, so a kernel shared by two consumers is counted once per consumer while choosing
//! (the reported [`dag_cost`] counts it once).

use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::egraph::kernel::{body_node_facts, kernel_parts};
use crate::ir::egraph::{Facts, TensorFacts, TensorGraph, TensorLang};
use egg::{CostFunction, Id};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Cost of realizing a value: compared lexicographically — bytes moved to and from global
/// memory, then kernel launches, then roundings to a narrow float type inside kernel bodies
/// (fewer means the epilogue runs on the fp32 accumulator), then ops inside reductions (work
/// repeated per reduction step: an elementwise producer recomputed in a matmul's prologue),
/// then body ops. Sums saturate;
/// [`KernelCost::INFINITY`] marks an unrealizable e-node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct KernelCost {
    pub bytes: u64,
    pub kernels: u64,
    pub roundings: u64,
    pub inner_ops: u64,
    pub ops: u64,
}

impl KernelCost {
    /// Unrealizable.
    pub const INFINITY: KernelCost = KernelCost {
        bytes: u64::MAX,
        kernels: u64::MAX,
        roundings: u64::MAX,
        inner_ops: u64::MAX,
        ops: u64::MAX,
    };

    /// Nothing to pay.
    pub const ZERO: KernelCost = KernelCost {
        bytes: 0,
        kernels: 0,
        roundings: 0,
        inner_ops: 0,
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
            inner_ops: self.inner_ops.saturating_add(o.inner_ops),
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
    let Ok(facts) = body_node_facts(body.expr(), &in_facts) else {
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
        .zip(&facts)
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
        inner_ops: ops_under_reduce(body.expr()),
        ops: body.op_count() as u64,
    }
}

/// Compute ops strictly inside a reduction's operand (a mul feeding the sum counts: it is the
/// same in every contraction, so it never decides between two).
fn ops_under_reduce(body: &egg::RecExpr<TensorLang>) -> u64 {
    let nodes = body.as_ref();
    let mut under = vec![false; nodes.len()];
    for (k, n) in nodes.iter().enumerate().rev() {
        if under[k] || matches!(n, TensorLang::Reduce(_)) {
            for c in egg::Language::children(n) {
                under[usize::from(*c)] = true;
            }
        }
    }
    nodes
        .iter()
        .zip(&under)
        .filter(|(n, u)| **u && !n.is_attr() && !n.is_movement())
        .count() as u64
}

/// The extraction cost: kernels pay [`kernel_own_cost`] plus their inputs, inputs are free,
/// reshapes cost their operand (an alias), anything else is unrealizable.
pub struct BytesCost<'a> {
    eg: &'a TensorGraph,
    sizes: CostSizes,
    memo: HashMap<TensorLang, KernelCost>,
}

impl<'a> BytesCost<'a> {
    pub fn new(eg: &'a TensorGraph, sizes: CostSizes) -> BytesCost<'a> {
        BytesCost {
            eg,
            sizes,
            memo: HashMap::new(),
        }
    }
}

impl CostFunction<TensorLang> for BytesCost<'_> {
    type Cost = KernelCost;

    fn cost<C>(&mut self, enode: &TensorLang, mut costs: C) -> KernelCost
    where
        C: FnMut(Id) -> KernelCost,
    {
        match enode {
            TensorLang::Input(_) | TensorLang::Attr(_) => KernelCost::ZERO,
            TensorLang::Reshape([x, _]) => costs(*x),
            TensorLang::Kernel(children) => {
                let own = match self.memo.get(enode) {
                    Some(c) => *c,
                    None => {
                        let c = kernel_own_cost(self.eg, enode, &self.sizes);
                        self.memo.insert(enode.clone(), c);
                        c
                    }
                };
                children[1..].iter().fold(own, |acc, c| acc.plus(costs(*c)))
            }
            _ => KernelCost::INFINITY,
        }
    }
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
