//! From the extracted kernel cover to a [`RegionProgram`]: a post-order walk from the outputs
//! names one buffer per materialized value, synthesizes one region per kernel and records what
//! each kernel covers (for `--explain`).

use super::load_steps::{load_time, LoadSteps};
use super::OptimizeError;
use crate::codegen::emit::PlannedKernel;
use crate::cost::program::plan_program;
use crate::cost::PlanReport;
use crate::extract::derived::Derived;
use crate::extract::kernels::{kernel_own_cost, CostModel, KernelCost};
use crate::ir::egraph::kernel::{body_classes, kernel_parts};
use crate::ir::egraph::{Attr, TensorGraph, TensorLang};
use crate::ir::region::program::{Buffer, RegionProgram, Step};
use crate::ir::region::Materialize;
use crate::ir::tiny::{Program, Src, UOp};
use crate::synth::{synthesize_traced, SynthArg};
use egg::{Id, RecExpr};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What one kernel of the optimized program is, for `--explain` and `--report`.
#[derive(Clone, Debug, Serialize)]
pub struct KernelInfo {
    /// Region name.
    pub name: String,
    /// Buffers read, in region-input order.
    pub inputs: Vec<String>,
    /// Buffer written.
    pub output: String,
    /// Frontend nodes whose values this kernel computes (graph order).
    pub covers: Vec<String>,
    /// Why these ops are one kernel.
    pub fused_because: Vec<String>,
    /// The kernel body as an e-graph term (`$i` = input `i`).
    pub body: String,
    /// Its own cost (without its inputs).
    pub cost: KernelCost,
    /// Its plan and predicted time (`None` with the reason when the cost model has none: the
    /// kernel would not have been chosen, so this is a bug).
    pub plan: Result<PlanReport, String>,
    /// Compute-at (seed 003): for a kernel embedding a producer reduction, the legality
    /// argument (pre-image, halo, footprint) and, with `OptimizeOptions::explain`, the
    /// profitability numbers; with `explain`, for a consumer kept apart from its producer, why
    /// (`super::compute_at`).
    pub compute_at: Vec<String>,
    /// Whether the kernel embeds a producer reduction (compute-at).
    pub embeds: bool,
}

/// One step of the walk: a class and how it is realized.
pub(super) enum Realized {
    Input(String),
    Alias(Id),
    Kernel(TensorLang),
}

pub(super) fn kernel_name(index: usize, body: &RecExpr<TensorLang>) -> String {
    let mut names: Vec<&'static str> = Vec::new();
    for n in body.as_ref().iter().rev() {
        let s = op_word(n);
        if let Some(s) = s {
            if !names.contains(&s) && names.len() < 4 {
                names.push(s);
            }
        }
    }
    if names.is_empty() {
        names.push("copy");
    }
    format!("k{index}_{}", names.join("_"))
}

fn op_word(n: &TensorLang) -> Option<&'static str> {
    use TensorLang as T;
    Some(match n {
        T::Reduce(_) => "reduce",
        T::Where(_) => "where",
        T::Gather(_) => "gather",
        T::Scan(_) => "scan",
        T::Range(_) => "range",
        T::Const(_) => "const",
        n => {
            if let Some((op, _)) = n.unary_op() {
                return Some(lower_static(crate::ir::tiny::UOp::Unary(op).name()));
            }
            if let Some((op, _)) = n.binary_op() {
                return Some(lower_static(crate::ir::tiny::UOp::Binary(op).name()));
            }
            return None;
        }
    })
}

/// Lower-case names of Tiny ops (static, so kernel names need no allocation per op).
fn lower_static(s: &'static str) -> &'static str {
    const NAMES: &[(&str, &str)] = &[
        ("NEG", "neg"),
        ("EXP2", "exp2"),
        ("LOG2", "log2"),
        ("SQRT", "sqrt"),
        ("RSQRT", "rsqrt"),
        ("RECIP", "recip"),
        ("RELU", "relu"),
        ("ABS", "abs"),
        ("ERF", "erf"),
        ("ADD", "add"),
        ("SUB", "sub"),
        ("MUL", "mul"),
        ("FDIV", "div"),
        ("IDIV", "idiv"),
        ("MAX", "max"),
        ("MIN", "min"),
        ("POW", "pow"),
        ("CMPLT", "cmplt"),
        ("CMPLE", "cmple"),
        ("CMPEQ", "cmpeq"),
        ("CMPNE", "cmpne"),
    ];
    NAMES
        .iter()
        .find(|(u, _)| *u == s)
        .map(|(_, l)| *l)
        .unwrap_or("op")
}

/// Reasons a body is one kernel, read off its structure.
pub fn fusion_reasons(body: &RecExpr<TensorLang>, embedded: usize) -> Vec<String> {
    use TensorLang as T;
    let nodes = body.as_ref();
    let mut reasons = Vec::new();
    let mut under_reduce = vec![false; nodes.len()];
    for (k, n) in nodes.iter().enumerate().rev() {
        let inside = under_reduce[k] || matches!(n, T::Reduce(_));
        if inside {
            for c in egg::Language::children(n) {
                under_reduce[usize::from(*c)] = true;
            }
        }
    }
    let reduces: Vec<&TensorLang> = nodes.iter().filter(|n| matches!(n, T::Reduce(_))).collect();
    let contractions = nodes
        .iter()
        .filter(|n| match n {
            T::Reduce([op, _, _, x]) => {
                matches!(
                    &body[*op],
                    T::Attr(Attr::Op(crate::ir::tiny::ReduceOp::Sum))
                ) && matches!(&body[*x], T::Mul(_))
            }
            _ => false,
        })
        .count();
    if contractions > 0 {
        reasons.push(
            "contraction: a sum of a product of reads (C-CON1), the accumulator in registers"
                .into(),
        );
    }
    // Two contractions side by side (neither reads the other): the SIMT tile sums both, each
    // in accumulators of its own (`plan::work::Gemm::second`), or the pointwise fold both.
    let nested = nodes
        .iter()
        .enumerate()
        .any(|(k, n)| matches!(n, T::Reduce(_)) && under_reduce[k]);
    let side_by_side = contractions == 2 && reduces.len() == 2 && !nested;
    if side_by_side {
        reasons.push(
            "a second contraction over the same output (e.g. a residual block's projection \
             shortcut), summed with the first in this kernel"
                .into(),
        );
    }
    if embedded > 0 {
        reasons.push(format!(
            "compute-at: {embedded} producer reduction(s) embedded in the consumer's window \
             reduction and computed at each window point (seed 003: by the nest, or as the rows \
             of a pooled contraction tile, per the plan); no intermediate buffer"
        ));
    }
    if reduces.len() > embedded + 1 && !side_by_side {
        reasons.push(format!(
            "{} reductions share the kernel's iteration space (row reductions whose results are \
             broadcast back: softmax / normalization)",
            reduces.len() - embedded
        ));
    }
    let words = |pred: &dyn Fn(usize) -> bool| -> Vec<&'static str> {
        let mut w: Vec<&'static str> = Vec::new();
        for (k, n) in nodes.iter().enumerate() {
            if pred(k) {
                if let Some(s) = op_word(n) {
                    if s != "reduce" && !w.contains(&s) {
                        w.push(s);
                    }
                }
            }
        }
        w
    };
    if !reduces.is_empty() {
        let post = words(&|k| !under_reduce[k]);
        if !post.is_empty() {
            reasons.push(format!(
                "epilogue: {} applied to the accumulator before the single store",
                post.join(", ")
            ));
        }
        let pre = words(&|k| under_reduce[k] && !matches!(nodes[k], T::Mul(_)));
        if !pre.is_empty() {
            reasons.push(format!(
                "prologue: elementwise producers ({}) recomputed at the reads",
                pre.join(", ")
            ));
        }
    } else {
        let all = words(&|_| true);
        if all.len() > 1 {
            reasons.push(format!(
                "elementwise chain ({}) in one pass over memory",
                all.join(", ")
            ));
        }
    }
    let moves = nodes.iter().filter(|n| n.is_movement()).count();
    if moves > 0 {
        reasons.push(format!(
            "{moves} movement op(s) folded into the reads' index maps (no copy kernel)"
        ));
    }
    reasons
}

/// What [`build_program`] returns: the program, its per-run kernels (one per planned kernel),
/// the planned kernels, and the derived-constant kernels (precomputed at load time, in
/// [`RegionProgram::derived`] order).
pub type Built = (
    RegionProgram,
    Vec<KernelInfo>,
    Vec<PlannedKernel>,
    Vec<KernelInfo>,
);

/// Builds the region program of the cover `choose` picks for `roots` (the program's outputs).
/// The chosen kernels `derived` calls derived constants go to [`RegionProgram::derived`]
/// (computed once when the weights are bound), their buffers read by the per-run steps become
/// inputs of the program.
#[allow(clippy::too_many_arguments)]
pub fn build_program(
    eg: &TensorGraph,
    prog: &Program,
    class: &[Id],
    roots: &[Id],
    choose: &dyn Fn(Id) -> TensorLang,
    sizes: &CostModel,
    derived: &Derived,
    explain_kept_apart: bool,
) -> Result<Built, OptimizeError> {
    let attr = |id: Id| eg[id].data.attr();
    // Post-order from the outputs, in signature order.
    let mut order: Vec<(Id, Realized)> = Vec::new();
    let mut seen: BTreeSet<Id> = BTreeSet::new();
    let mut stack: Vec<(Id, bool)> = roots.iter().rev().map(|r| (*r, false)).collect();
    while let Some((c, expanded)) = stack.pop() {
        let c = eg.find(c);
        if seen.contains(&c) && !expanded {
            continue;
        }
        let node = choose(c);
        let deps: Vec<Id> = match &node {
            TensorLang::Kernel(ch) => ch[1..].iter().map(|i| eg.find(*i)).collect(),
            TensorLang::Reshape([x, _]) => vec![eg.find(*x)],
            _ => vec![],
        };
        if !expanded {
            seen.insert(c);
            stack.push((c, true));
            for d in deps.iter().rev() {
                if !seen.contains(d) {
                    stack.push((*d, false));
                }
            }
            continue;
        }
        let r = match &node {
            TensorLang::Kernel(_) => Realized::Kernel(node.clone()),
            TensorLang::Reshape([x, _]) => Realized::Alias(eg.find(*x)),
            TensorLang::Input([n, _, _]) => match attr(*n) {
                Some(Attr::Name(s)) => Realized::Input(s.clone()),
                _ => return Err(OptimizeError::Program("an input without a name".into())),
            },
            other => {
                return Err(OptimizeError::Program(format!(
                    "the cover chose `{other}`, which no kernel computes"
                )))
            }
        };
        order.push((c, r));
    }
    let at_load = load_time(eg, &order, derived);

    // Buffer names: inputs keep theirs, outputs take the first output name of their class,
    // everything else `_tK` (skipping names the graph uses).
    let taken: BTreeSet<String> = prog
        .inputs
        .iter()
        .map(|i| i.tensor.clone())
        .chain(prog.outputs.iter().map(|o| o.tensor.clone()))
        .collect();
    let mut out_name: HashMap<Id, String> = HashMap::new();
    for (o, r) in prog.outputs.iter().zip(roots) {
        let c = eg.find(*r);
        // A derived constant is an input of the per-run program: an output that is one is
        // an alias of it.
        if !at_load.contains(&c) {
            out_name.entry(c).or_insert_with(|| o.tensor.clone());
        }
    }
    let mut buf: HashMap<Id, String> = HashMap::new();
    let mut fresh = 0usize;
    for (c, r) in &order {
        let name = match r {
            Realized::Input(n) => n.clone(),
            _ => match out_name.get(c) {
                Some(n) => n.clone(),
                None => loop {
                    let n = format!("_t{fresh}");
                    fresh += 1;
                    if !taken.contains(&n) {
                        break n;
                    }
                },
            },
        };
        buf.insert(*c, name);
    }
    let facts = |c: Id| {
        eg[c]
            .data
            .tensor()
            .cloned()
            .ok_or_else(|| OptimizeError::Program(format!("class {c} is not a tensor")))
    };
    // Consumers per materialized class, in step order (for `deferred`).
    let mut consumers: HashMap<Id, Vec<usize>> = HashMap::new();
    for (k, (_, r)) in order.iter().enumerate() {
        match r {
            Realized::Kernel(TensorLang::Kernel(ch)) => {
                for i in &ch[1..] {
                    consumers.entry(eg.find(*i)).or_default().push(k);
                }
            }
            Realized::Alias(x) => consumers.entry(*x).or_default().push(k),
            _ => {}
        }
    }
    let outputs: BTreeSet<Id> = roots.iter().map(|r| eg.find(*r)).collect();

    let mut steps = Vec::new();
    let mut infos = Vec::new();
    let mut info_steps: Vec<usize> = Vec::new();
    let mut load = LoadSteps::default();
    let covers = cover_map(eg, prog, class, &order);
    // Kernel names by the class they compute (for compute-at notes).
    let mut kernel_of: HashMap<Id, String> = HashMap::new();
    for (k, (c, r)) in order.iter().enumerate() {
        let name = buf[c].clone();
        let f = facts(*c)?;
        let here = at_load.contains(c);
        match r {
            Realized::Input(_) => {}
            Realized::Alias(x) => {
                let alias = Step::Alias {
                    name,
                    of: buf[x].clone(),
                    dtype: f.dtype,
                    shape: f.shape.clone(),
                };
                if here {
                    load.steps.push(alias);
                } else {
                    steps.push(alias);
                }
            }
            Realized::Kernel(node) if here => {
                load.kernel(eg, *c, node, &order, &buf, sizes)?;
            }
            Realized::Kernel(node) => {
                let TensorLang::Kernel(ch) = node else {
                    unreachable!("Realized::Kernel holds kernels")
                };
                let (body, inputs) = kernel_parts(ch, &attr).map_err(OptimizeError::Program)?;
                let args: Vec<SynthArg> = inputs
                    .iter()
                    .map(|i| {
                        let i = eg.find(*i);
                        facts(i).map(|t| SynthArg {
                            name: buf[&i].clone(),
                            dtype: t.dtype,
                            shape: t.shape,
                        })
                    })
                    .collect::<Result<_, _>>()?;
                let kname = kernel_name(infos.len(), body.expr());
                // Deferred: the only consumer is the next step that runs (inputs and derived
                // constants are not per-run steps).
                let next_step = order[k + 1..]
                    .iter()
                    .position(|(c, r)| !matches!(r, Realized::Input(_)) && !at_load.contains(c))
                    .map(|j| k + 1 + j);
                let deferred = !outputs.contains(c)
                    && consumers
                        .get(c)
                        .is_some_and(|v| v.len() == 1 && Some(v[0]) == next_step);
                let mat = if deferred {
                    Materialize::Deferred
                } else {
                    Materialize::Gmem
                };
                let (region, embeddings) =
                    synthesize_traced(&kname, body.expr(), &args, &name, mat).map_err(|e| {
                        OptimizeError::Region {
                            kernel: kname.clone(),
                            why: e.to_string(),
                        }
                    })?;
                let mut notes = super::compute_at::embedding_lines(
                    &region,
                    &embeddings,
                    sizes,
                    f.dtype.size_bytes(),
                );
                if explain_kept_apart {
                    notes.extend(super::compute_at::kept_apart(
                        eg, node, choose, &kernel_of, sizes,
                    ));
                }
                kernel_of.insert(*c, kname.clone());
                infos.push(KernelInfo {
                    name: kname,
                    inputs: args.iter().map(|a| a.name.clone()).collect(),
                    output: name,
                    covers: covers.get(c).cloned().unwrap_or_default(),
                    fused_because: fusion_reasons(body.expr(), embeddings.len())
                        .into_iter()
                        .chain(crate::rules::subst::explain(eg, *c))
                        .collect(),
                    compute_at: notes,
                    embeds: !embeddings.is_empty(),
                    body: body.text().to_string(),
                    cost: kernel_own_cost(eg, node, sizes),
                    // Filled from the planned program below.
                    plan: Err("not planned".into()),
                });
                info_steps.push(steps.len());
                steps.push(Step::Region(region));
            }
        }
    }
    // Outputs whose class is an input or shared with an earlier output get an alias.
    let mut outs = Vec::new();
    for (o, r) in prog.outputs.iter().zip(roots) {
        let c = eg.find(*r);
        let b = buf[&c].clone();
        if b != o.tensor {
            let f = facts(c)?;
            steps.push(Step::Alias {
                name: o.tensor.clone(),
                of: b,
                dtype: f.dtype,
                shape: f.shape.clone(),
            });
        }
        outs.push((o.tensor.clone(), o.tensor.clone()));
    }
    let mut inputs: Vec<Buffer> = prog
        .inputs
        .iter()
        .map(|i| {
            let n = prog.node(i.node);
            Buffer {
                name: i.tensor.clone(),
                dtype: n.dtype,
                shape: n.shape.clone(),
            }
        })
        .collect();
    inputs.extend(load.exports(&steps));
    let program = RegionProgram {
        inputs,
        steps,
        outputs: outs,
        derived: load.steps,
    };
    let planned = plan_program(&program, sizes);
    let infos = planned_infos(infos, &info_steps, &planned);
    Ok((program, infos, planned, load.infos))
}

/// The cover's cost as the planned program runs: its time the sum of the planned kernels'
/// predicted times and one launch per planned kernel (an attention pair is one), the rest of
/// `extracted` (bytes, roundings, flops, ops) as extraction counted it. Unchanged when a kernel
/// has no plan (code generation then fails; the region evaluator runs without plans).
pub fn planned_cost(extracted: KernelCost, planned: &[PlannedKernel]) -> KernelCost {
    let mut time = crate::cost::Time::ZERO;
    for pk in planned {
        match &pk.choice {
            Ok(c) => time = time.plus(c.best.time),
            Err(_) => return extracted,
        }
    }
    KernelCost {
        time,
        kernels: planned.len() as u64,
        ..extracted
    }
}

/// The kernel infos of the planned program: one per planned kernel, with its plan's report; an
/// attention pair's two regions are one entry (the fused kernel's name and plan, both regions'
/// covers, reasons and costs).
fn planned_infos(
    infos: Vec<KernelInfo>,
    info_steps: &[usize],
    planned: &[PlannedKernel],
) -> Vec<KernelInfo> {
    let by_step: BTreeMap<usize, KernelInfo> = info_steps.iter().copied().zip(infos).collect();
    planned
        .iter()
        .filter_map(|pk| {
            let mut info = by_step.get(&pk.step)?.clone();
            if let Some(first) = pk.fused_first.and_then(|f| by_step.get(&f)) {
                let mut inputs: Vec<String> = first.inputs.clone();
                for i in &info.inputs {
                    if *i != first.output && !inputs.contains(i) {
                        inputs.push(i.clone());
                    }
                }
                info.inputs = inputs;
                let mut covers = first.covers.clone();
                covers.extend(info.covers.iter().cloned());
                info.covers = covers;
                let mut because = vec![format!(
                    "attention: `{}` (scores and softmax) and `{}` (its product with V) are one \
                     fused kernel; the scores never reach global memory",
                    first.name, info.name
                )];
                because.extend(first.fused_because.iter().cloned());
                because.extend(info.fused_because.iter().cloned());
                info.fused_because = because;
                info.body = format!("{}; {}", first.body, info.body);
                info.cost = first.cost.plus(info.cost);
                info.compute_at.extend(first.compute_at.iter().cloned());
                info.embeds |= first.embeds;
            }
            info.name = pk.name.clone();
            info.plan = pk.choice.as_ref().map(|c| c.report()).map_err(Clone::clone);
            Some(info)
        })
        .collect()
}

/// For each kernel's class, the frontend nodes (Tiny tags) it computes, in program order of
/// their results (last Tiny nodes). A frontend node is covered by kernel K when one of its Tiny
/// nodes
/// - is in the e-class of a node of K's body, and is computing or the frontend node's result
///   (movement and casts that are not results do not count: the same cast of X before three
///   matmuls is one e-class read by all three), or
/// - is reached from the original nodes of K's class by walking the original program down
///   through classes no other step materializes and no other kernel's body computes (what K
///   recomputes under another layout: a bias add spelled on the fp32 accumulator), unless it
///   is a view or cast of a frontend node whose computing nodes another kernel computes.
///
/// A value recomputed by two kernels is covered by both.
fn cover_map(
    eg: &TensorGraph,
    prog: &Program,
    class: &[Id],
    order: &[(Id, Realized)],
) -> HashMap<Id, Vec<String>> {
    let attr = |id: Id| eg[id].data.attr();
    let class_of = |k: usize| eg.find(class[k]);
    let materialized: BTreeSet<Id> = order.iter().map(|(c, _)| *c).collect();
    let mut by_class: BTreeMap<Id, Vec<usize>> = BTreeMap::new();
    for k in 0..prog.nodes.len() {
        by_class.entry(class_of(k)).or_default().push(k);
    }
    // Each tag with its last Tiny node, in the order of those nodes.
    let mut last: BTreeMap<&String, usize> = BTreeMap::new();
    for (k, node) in prog.nodes.iter().enumerate() {
        if let Some(t) = &node.tag {
            last.insert(t, k);
        }
    }
    let mut results: Vec<(&String, usize)> = last.into_iter().collect();
    results.sort_by_key(|(_, k)| *k);
    let result_nodes: BTreeSet<usize> = results.iter().map(|(_, k)| *k).collect();
    let is_result = |k: usize| result_nodes.contains(&k);
    let is_view = |k: usize| {
        let u = &prog.nodes[k].uop;
        u.is_movement() || matches!(u, UOp::Cast)
    };
    // Per tag, the classes of its computing (not view) nodes.
    let mut computing: BTreeMap<&String, Vec<Id>> = BTreeMap::new();
    for (k, node) in prog.nodes.iter().enumerate() {
        if let (Some(t), false) = (&node.tag, is_view(k)) {
            computing.entry(t).or_default().push(class_of(k));
        }
    }
    // The classes each kernel's body computes.
    let mut computed: Vec<(Id, BTreeSet<Id>)> = Vec::new();
    for (c, r) in order {
        let Realized::Kernel(TensorLang::Kernel(ch)) = r else {
            continue;
        };
        let Ok((body, inputs)) = kernel_parts(ch, &attr) else {
            continue;
        };
        let inputs: Vec<Id> = inputs.iter().map(|i| eg.find(*i)).collect();
        let set = body_classes(body.expr(), &inputs, &|n| eg.lookup(n.clone()))
            .into_iter()
            .zip(body.expr().as_ref())
            .filter(|(_, n)| !matches!(n, TensorLang::Attr(_)))
            .filter_map(|(k, _)| k)
            .collect();
        computed.push((*c, set));
    }
    let mut out = HashMap::new();
    for (c, mine) in &computed {
        let elsewhere: BTreeSet<Id> = computed
            .iter()
            .filter(|(o, _)| o != c)
            .flat_map(|(_, s)| s.difference(mine).copied())
            .collect();
        let mut covered: BTreeSet<usize> = (0..prog.nodes.len())
            .filter(|k| mine.contains(&class_of(*k)))
            .filter(|k| !is_view(*k) || is_result(*k))
            .collect();
        let mut stack: Vec<usize> = by_class.get(c).cloned().unwrap_or_default();
        let mut walked: BTreeSet<usize> = BTreeSet::new();
        while let Some(k) = stack.pop() {
            if !walked.insert(k) {
                continue;
            }
            // A view or cast counts unless its frontend node computes elsewhere (the reshape
            // ending a matmul another kernel computes is only read here).
            let computes_elsewhere = prog.nodes[k]
                .tag
                .as_ref()
                .and_then(|t| computing.get(t))
                .is_some_and(|cs| cs.iter().any(|c| elsewhere.contains(c)));
            if !is_view(k) || !computes_elsewhere {
                covered.insert(k);
            }
            for s in &prog.nodes[k].src {
                if let Src::Node(n) = s {
                    let (n, cn) = (n.index(), class_of(n.index()));
                    let open = cn == *c || !(materialized.contains(&cn) || elsewhere.contains(&cn));
                    if open {
                        stack.push(n);
                    }
                }
            }
        }
        let tags: BTreeSet<&String> = covered
            .iter()
            .filter_map(|k| prog.nodes[*k].tag.as_ref())
            .collect();
        let tags: Vec<String> = results
            .iter()
            .filter(|(t, _)| tags.contains(t))
            .map(|(t, _)| (*t).clone())
            .collect();
        out.insert(*c, tags);
    }
    out
}
