//! Reference evaluator (CPU playback) of Tiny IR: the semantic oracle of every test.
//!
//! Semantics: every node's value is computed in `f64` and rounded to the node dtype
//! ([`DType::round`](crate::ir::dtype::DType::round)); REDUCE rounds its accumulator to `acc` after
//! every step, in row-major order of the reduced axes.
//!
//! Design:
//! - `bind` turns every symbolic size into an integer up front (unbound → `E0201`).
//! - `plan` decides what is materialized; elementwise chains with one consumer are fused into it.
//! - Movement ops are views (`view`): stacks of affine layers with validity guards, never copies;
//!   READ (affine + floordiv) is materialized element by element (`read`).
//! - Materialized elementwise/REDUCE nodes run as fused `kernel`s: a vectorized interpreter that
//!   evaluates a whole row per instruction, parallel over output rows with rayon (deterministic).
//! - Values (`value`) borrow input tensors and share owned buffers through `Arc`; a buffer is
//!   released as soon as its last consumer has run.

pub mod bench_programs;
mod bind;
mod error;
mod gather;
#[cfg(test)]
mod indexbook_oracle;
mod kernel;
mod nodes;
mod ops;
mod plan;
mod read;
pub mod scan;
mod value;
mod view;

use crate::diag::Diagnostics;
use crate::ir::tiny::{verify, NodeId, Program, UOp};
use crate::tensor::Tensor;
use error::{internal, EvalResult};
use plan::{Expr, Role};
use std::collections::BTreeMap;
use value::Value;

/// Which nodes of `prog` the reference evaluator stores (`true`): leaves, gathers, scans,
/// reductions and elementwise roots; `false` for views, dead nodes and elementwise values fused
/// into their one consumer (a MatMul's broadcast product is never stored, only its reduction).
pub(crate) fn materialized_nodes(prog: &crate::ir::tiny::Program) -> Vec<bool> {
    plan::roles(prog)
        .iter()
        .map(|r| !matches!(r, plan::Role::Inline | plan::Role::Dead | plan::Role::View))
        .collect()
}

/// Evaluates `prog` with concrete symbol values and signature inputs (by tensor name); returns
/// every signature output by tensor name.
///
/// Symbol values come from `bindings`, falling back to the program's defaults
/// ([`Program::symbols`]). Inputs must have their INPUT node's dtype and bound shape.
pub fn evaluate(
    prog: &Program,
    bindings: &BTreeMap<String, i64>,
    inputs: &BTreeMap<String, Tensor>,
) -> Result<BTreeMap<String, Tensor>, Diagnostics> {
    verify(prog).map_err(|e| Diagnostics::one(e.to_diagnostic()))?;
    let syms = bind::symbol_table(prog, bindings);
    let bound = bind::bind_program(prog, &syms)?;
    let roles = plan::roles(prog);
    let exprs = compile_kernels(prog, &roles);
    let mut remaining = read_counts(prog, &roles, &exprs);
    let mut values: Vec<Option<Value>> = vec![None; prog.nodes.len()];
    for node in &prog.nodes {
        let i = node.id.index();
        let role = roles[i];
        let reads = reads_of(prog, role, node.id, &exprs);
        let v = match role {
            Role::Dead | Role::Inline => continue,
            Role::Leaf => nodes::leaf(node, &bound.shapes[i], inputs)?,
            Role::View => {
                nodes::movement(node, operand(&values, nth(&reads, 0, node.id)?)?, &bound)?
            }
            Role::Gather => {
                let axis = match node.uop {
                    UOp::Gather { axis } => axis,
                    _ => 0,
                };
                let x = operand(&values, nth(&reads, 0, node.id)?)?;
                let idx = operand(&values, nth(&reads, 1, node.id)?)?;
                gather::gather(node.id, x, idx, axis, &bound.shapes[i])?
            }
            Role::Scan => {
                let UOp::Scan {
                    op,
                    axis,
                    exclusive,
                    reverse,
                    acc,
                } = node.uop
                else {
                    return Err(internal(node.id, "not a SCAN"));
                };
                let spec = crate::ir::tiny::ScanSpec {
                    op,
                    axis,
                    exclusive,
                    reverse,
                };
                let x = operand(&values, nth(&reads, 0, node.id)?)?;
                scan::scan(node.id, x, spec, acc)?
            }
            Role::Kernel => {
                let expr = exprs[i]
                    .as_ref()
                    .ok_or_else(|| internal(node.id, "no kernel"))?;
                let leaves = reads
                    .iter()
                    .map(|r| operand(&values, *r))
                    .collect::<EvalResult<Vec<_>>>()?;
                let row_major = prog.outputs.iter().any(|o| o.node == node.id);
                nodes::kernel(node, expr, leaves, &bound, row_major)?
            }
        };
        values[i] = Some(v);
        for r in reads {
            let c = &mut remaining[r.index()];
            *c = c.saturating_sub(1);
            if *c == 0 {
                values[r.index()] = None;
            }
        }
    }
    let mut out = BTreeMap::new();
    for o in &prog.outputs {
        let v = operand(&values, o.node)?.clone();
        let c = &mut remaining[o.node.index()];
        *c = c.saturating_sub(1);
        if *c == 0 {
            values[o.node.index()] = None;
        }
        out.insert(o.tensor.clone(), nodes::to_tensor(o.node, v)?);
    }
    Ok(out)
}

/// The expression of every kernel node.
fn compile_kernels(prog: &Program, roles: &[Role]) -> Vec<Option<Expr>> {
    prog.nodes
        .iter()
        .map(|n| {
            if roles[n.id.index()] != Role::Kernel {
                return None;
            }
            Some(match (&n.uop, plan::src_nodes(&n.src).next()) {
                (UOp::Reduce { .. }, Some(s)) if roles[s.index()] == Role::Inline => {
                    plan::compile(prog, roles, s)
                }
                (UOp::Reduce { .. }, Some(s)) => Expr::load(s),
                _ => plan::compile(prog, roles, n.id),
            })
        })
        .collect()
}

/// The values node `id` reads when it is evaluated.
fn reads_of(prog: &Program, role: Role, id: NodeId, exprs: &[Option<Expr>]) -> Vec<NodeId> {
    match role {
        Role::View | Role::Gather | Role::Scan => plan::src_nodes(&prog.node(id).src).collect(),
        Role::Kernel => exprs[id.index()]
            .as_ref()
            .map(|e| e.leaves.clone())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// How many times each value is read (outputs count once each), for early release.
fn read_counts(prog: &Program, roles: &[Role], exprs: &[Option<Expr>]) -> Vec<usize> {
    let mut c = vec![0usize; prog.nodes.len()];
    for n in &prog.nodes {
        for r in reads_of(prog, roles[n.id.index()], n.id, exprs) {
            c[r.index()] += 1;
        }
    }
    for o in &prog.outputs {
        c[o.node.index()] += 1;
    }
    c
}

fn operand<'v, 'a>(values: &'v [Option<Value<'a>>], id: NodeId) -> EvalResult<&'v Value<'a>> {
    values
        .get(id.index())
        .and_then(|v| v.as_ref())
        .ok_or_else(|| internal(id, "value used before it was computed or after release"))
}

fn nth(reads: &[NodeId], i: usize, id: NodeId) -> EvalResult<NodeId> {
    reads
        .get(i)
        .copied()
        .ok_or_else(|| internal(id, "missing operand"))
}
