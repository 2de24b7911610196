//! Phase "kernels": kernel nodes (`docs/egraph-design.md` §4). Every value gets a single-op
//! kernel, and kernels grow by absorbing their producers' kernels — epilogue fusion (an
//! elementwise consumer absorbs a reduction: `relu(add(acc, bias))` on the accumulator), prologue
//! fusion (a consumer absorbs an elementwise producer or a movement chain, which becomes part of
//! its reads) and row-reduction fusion (softmax, LayerNorm: reductions whose results are
//! broadcast back along the kernel's own iteration space).
//!
//! Assumptions:
//! - A kernel node's meaning is its body with placeholders replaced by its inputs, so adding a
//!   kernel to the class of the value its body computes is sound by construction (the analysis
//!   re-derives its type from the body and asserts it equals the class's).
//! - Whether a body can be ONE kernel — one RB-SSA region without recomputing a reduction — is
//!   decided by a [`Legality`] oracle: region synthesis in the pipeline
//!   (`crate::ir::region::synth`), which rejects a reduction evaluated inside another reduction
//!   over a fresh axis (the MLP's second matmul reading `relu(matmul1)`), a reduction needed at
//!   two index environments, and non-affine maps.
//! - Growth is greedy, breadth-first and deterministic: starting from each single-op kernel, the
//!   input classes are visited in order and each absorbs its first op e-node that keeps the body
//!   legal. Every intermediate body is a kernel too, so the extractor chooses where a kernel
//!   stops (fusion that does not pay stays optional). Kernel nodes are linear in e-nodes times
//!   the body limit. A second, maximal growth absorbs, input by input, the largest legal kernel
//!   of the input's class (built on the producers' own growth, so it reaches across alternative
//!   spellings the first path does not take); it depends on other kernels, so the phase runs
//!   until no kernel grows (two to four iterations on the examples).
//!
//! Budget: bodies are capped at [`FusionLimits::max_body_ops`] ops; the phase saturates once no
//! kernel can grow (the examples and the encoder: a few iterations, see the tests).

use super::Rule;
use crate::ir::egraph::kernel::{body_facts, fuse, kernel_parts, single_op_body};
use crate::ir::egraph::{Attr, IndexBook, KernelBody, TensorFacts, TensorGraph, TensorLang};
use egg::{Applier, Id, PatternAst, RecExpr, Rewrite, SearchMatches, Searcher, Subst, Symbol, Var};
use std::sync::Arc;

/// Decides whether a body (with inputs of the given facts) can be one kernel; `Err` says why not.
pub type Legality =
    Arc<dyn Fn(&RecExpr<TensorLang>, &[TensorFacts]) -> Result<(), String> + Send + Sync>;

/// Limits of kernel growth.
#[derive(Clone, Debug, PartialEq)]
pub struct FusionLimits {
    /// Largest body, in ops (attribute leaves and placeholders not counted). 160 covers a fused
    /// LayerNorm or softmax-with-mask with room; bigger bodies only come from long elementwise
    /// chains, where splitting costs one extra round trip.
    pub max_body_ops: usize,
}

impl Default for FusionLimits {
    fn default() -> FusionLimits {
        FusionLimits { max_body_ops: 160 }
    }
}

/// The phase's rules: `kernel-wrap` and `kernel-fuse`, with `legal` as the legality oracle.
pub fn rules(legal: Legality, limits: FusionLimits) -> Vec<Rule> {
    vec![
        // v ⇒ kernel{op($0, …)}(children): every value computed by one op is a one-op kernel.
        Rewrite::new("kernel-wrap", OpNodes, Wrap).expect("static rule"),
        // kernel{B}(…, d, …) ⇒ kernel{B[$d := op(…)]}(…, inputs of op, …) for an op e-node of d
        // that keeps B legal: producers absorbed into their consumer, breadth-first.
        Rewrite::new("kernel-fuse", OpNodes, Grow { legal, limits }).expect("static rule"),
    ]
}

/// True for e-nodes that compute or move a value (not attributes, inputs, reads of nothing, or
/// kernels themselves).
fn is_op(n: &TensorLang) -> bool {
    !matches!(
        n,
        TensorLang::Attr(_) | TensorLang::Input(_) | TensorLang::Kernel(_)
    )
}

/// Matches every e-class holding at least one op e-node.
struct OpNodes;

impl Searcher<TensorLang, IndexBook> for OpNodes {
    fn search_eclass_with_limit(
        &self,
        egraph: &TensorGraph,
        eclass: Id,
        limit: usize,
    ) -> Option<SearchMatches<'_, TensorLang>> {
        let class = &egraph[eclass];
        if limit == 0 || class.data.tensor().is_none() || !class.nodes.iter().any(is_op) {
            return None;
        }
        Some(SearchMatches {
            eclass,
            substs: vec![Subst::default()],
            ast: None,
        })
    }

    fn vars(&self) -> Vec<Var> {
        vec![]
    }
}

fn attr_of(eg: &TensorGraph, id: Id) -> Option<Attr> {
    eg[id].data.attr().cloned()
}

/// Adds `kernel{body}(inputs)` and unions it into `eclass` (justified by `rule`).
fn add_kernel(
    eg: &mut TensorGraph,
    eclass: Id,
    body: RecExpr<TensorLang>,
    inputs: &[Id],
    rule: Symbol,
) -> Option<Id> {
    let leaf = eg.add(TensorLang::Attr(Attr::Body(KernelBody::new(body))));
    let mut children = vec![leaf];
    children.extend(inputs.iter().map(|i| eg.find(*i)));
    let id = eg.add(TensorLang::Kernel(children.into_boxed_slice()));
    if eg.union_trusted(eclass, id, rule) {
        Some(eclass)
    } else {
        None
    }
}

/// The single-op body of every op e-node of `eclass`, except identities on the class itself
/// (`x = permute(x)` for a permute of unit axes, `x = reshape(x, shape(x))`, an identity `read`):
/// a kernel computing a value from itself is useless, and absorbing one into a consumer would
/// leave the same input behind, so growth would repeat it until the body limit.
fn single_op_bodies(eg: &TensorGraph, eclass: Id) -> Vec<(RecExpr<TensorLang>, Vec<Id>)> {
    let eclass = eg.find(eclass);
    let nodes: Vec<TensorLang> = eg[eclass]
        .nodes
        .iter()
        .filter(|n| {
            is_op(n)
                && !egg::Language::children(*n)
                    .iter()
                    .any(|c| eg.find(*c) == eclass)
        })
        .cloned()
        .collect();
    nodes
        .iter()
        .map(|n| {
            let (b, ins) = single_op_body(n, &|c| attr_of(eg, c));
            (b, ins.into_iter().map(|i| eg.find(i)).collect())
        })
        .collect()
}

struct Wrap;

impl Applier<TensorLang, IndexBook> for Wrap {
    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        _subst: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let mut changed = Vec::new();
        for (body, ins) in single_op_bodies(eg, eclass) {
            changed.extend(add_kernel(eg, eclass, body, &ins, rule));
        }
        changed
    }
}

struct Grow {
    legal: Legality,
    limits: FusionLimits,
}

fn input_facts(eg: &TensorGraph, ins: &[Id]) -> Option<Vec<TensorFacts>> {
    ins.iter().map(|i| eg[*i].data.tensor().cloned()).collect()
}

impl Grow {
    /// `fuse` of a producer into the consumer's input `pos`, kept only when the result is within
    /// the body limit, well-typed and legal.
    fn try_fuse(
        &self,
        eg: &TensorGraph,
        body: &RecExpr<TensorLang>,
        ins: &[Id],
        pos: usize,
        p: &RecExpr<TensorLang>,
        p_ins: &[Id],
    ) -> Option<(RecExpr<TensorLang>, Vec<Id>)> {
        let (b, i) = fuse(body, ins, pos, p, p_ins);
        let ops = b.as_ref().iter().filter(|n| !n.is_attr()).count();
        if ops > self.limits.max_body_ops {
            return None;
        }
        let facts = input_facts(eg, &i)?;
        if body_facts(&b, &facts).is_err() || (self.legal)(&b, &facts).is_err() {
            return None;
        }
        Some((b, i))
    }

    /// Grows one single-op body breadth-first: input classes are visited in order (new inputs
    /// queued behind), and each absorbs the first of its op e-nodes whose single-op body keeps
    /// the kernel legal and within limits. Returns every successive body (each one a kernel of
    /// `eclass`): the prefixes give the extractor the choice of where the kernel stops — e.g.
    /// the MLP's second matmul with its operand's movement folded in but the first matmul's
    /// epilogue left to the first kernel.
    fn grow(
        &self,
        eg: &TensorGraph,
        eclass: Id,
        body: RecExpr<TensorLang>,
        ins: Vec<Id>,
    ) -> Vec<(RecExpr<TensorLang>, Vec<Id>)> {
        let eclass = eg.find(eclass);
        let mut out = Vec::new();
        let mut queue: std::collections::VecDeque<Id> = ins.iter().copied().collect();
        let mut visited: std::collections::BTreeSet<Id> = ins.iter().copied().collect();
        visited.insert(eclass);
        let (mut body, mut ins) = (body, ins);
        while let Some(d) = queue.pop_front() {
            let Some(pos) = ins.iter().position(|c| *c == d) else {
                continue;
            };
            for (p, p_ins) in single_op_bodies(eg, d) {
                if p_ins.contains(&eclass) {
                    continue; // would make the kernel its own input
                }
                let Some((b, i)) = self.try_fuse(eg, &body, &ins, pos, &p, &p_ins) else {
                    continue;
                };
                for c in &p_ins {
                    if visited.insert(*c) {
                        queue.push_back(*c);
                    }
                }
                body = b;
                ins = i;
                out.push((body.clone(), ins.clone()));
                break;
            }
        }
        out
    }
}

/// The kernels of a class, largest body first (ties: body text), as (body, inputs).
fn kernels_largest_first(eg: &TensorGraph, class: Id) -> Vec<(KernelBody, Vec<Id>)> {
    let attr = |id: Id| eg[id].data.attr();
    let mut ks: Vec<(KernelBody, Vec<Id>)> = eg[class]
        .nodes
        .iter()
        .filter_map(|n| match n {
            TensorLang::Kernel(ch) => kernel_parts(ch, &attr)
                .ok()
                .map(|(b, ins)| (b.clone(), ins.iter().map(|i| eg.find(*i)).collect())),
            _ => None,
        })
        .collect();
    ks.sort_by(|a, b| {
        b.0.op_count()
            .cmp(&a.0.op_count())
            .then_with(|| a.0.text().cmp(b.0.text()))
            .then_with(|| a.1.cmp(&b.1))
    });
    ks
}

impl Grow {
    /// Grows one single-op body by whole producer kernels: for each input in order, absorbs the
    /// largest kernel of the input's class that keeps the body legal (maximal fusion, built on
    /// the producers' own growth, so it reaches across alternative spellings the breadth-first
    /// growth does not take).
    fn grow_max(
        &self,
        eg: &TensorGraph,
        eclass: Id,
        body: RecExpr<TensorLang>,
        ins: Vec<Id>,
    ) -> Option<(RecExpr<TensorLang>, Vec<Id>)> {
        let eclass = eg.find(eclass);
        let originals = ins.clone();
        let (mut body, mut ins) = (body, ins);
        let mut grew = false;
        for d in originals {
            let Some(pos) = ins.iter().position(|c| *c == d) else {
                continue;
            };
            for (p, p_ins) in kernels_largest_first(eg, d) {
                if p_ins.contains(&eclass) {
                    continue;
                }
                let Some((b, i)) = self.try_fuse(eg, &body, &ins, pos, p.expr(), &p_ins) else {
                    continue;
                };
                body = b;
                ins = i;
                grew = true;
                break;
            }
        }
        grew.then_some((body, ins))
    }
}

impl Applier<TensorLang, IndexBook> for Grow {
    fn apply_one(
        &self,
        eg: &mut TensorGraph,
        eclass: Id,
        _subst: &Subst,
        _ast: Option<&PatternAst<TensorLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let mut changed = Vec::new();
        for (body, ins) in single_op_bodies(eg, eclass) {
            let mut grown = self.grow(eg, eclass, body.clone(), ins.clone());
            grown.extend(self.grow_max(eg, eclass, body, ins));
            for (b, i) in grown {
                changed.extend(add_kernel(eg, eclass, b, &i, rule));
            }
        }
        changed
    }
}

/// The kernel e-nodes of a class (for tests and extraction).
pub fn kernel_nodes(eg: &TensorGraph, class: Id) -> Vec<TensorLang> {
    eg[class]
        .nodes
        .iter()
        .filter(|n| matches!(n, TensorLang::Kernel(_)))
        .cloned()
        .collect()
}

/// A legality oracle that accepts every well-typed body (for tests of the rules themselves).
pub fn any_body() -> Legality {
    Arc::new(|_, _| Ok(()))
}
