//! Tiny IR ⇄ e-graph. [`add_program`] adds every Tiny node as an e-node (hash-consing merges
//! structurally identical nodes); [`extract_program`] rebuilds a verified Tiny program from the
//! e-nodes an extractor chose, keeping sharing (each e-class becomes at most one Tiny node).

use super::attr::Attr;
use super::book::{tiny_parts, Operand, TensorGraph};
use super::kernel::kernel_parts;
use super::lang::TensorLang;
use crate::ir::num::Num;
use crate::ir::tiny::{Builder, NodeId, Program, Src, TinyError, UOp};
use egg::{Id, RecExpr};
use std::collections::HashMap;

/// The attribute leaves and e-node of one Tiny node, given the classes of its operands.
fn enode_of(
    eg: &mut TensorGraph,
    prog: &Program,
    n: &crate::ir::tiny::Node,
    class: &[Id],
) -> TensorLang {
    use TensorLang as T;
    let mut leaf = |a: Attr| eg.add(T::Attr(a));
    let mut ops: Vec<Id> = Vec::with_capacity(n.src.len());
    for s in &n.src {
        ops.push(match s {
            Src::Node(id) => class[id.index()],
            Src::Imm(v) => leaf(Attr::Num(Num(*v))),
        });
    }
    let _ = prog;
    match &n.uop {
        UOp::Input { tensor_id } => T::Input([
            leaf(Attr::Name(tensor_id.clone())),
            leaf(Attr::DType(n.dtype)),
            leaf(Attr::Shape(n.shape.clone().into())),
        ]),
        UOp::Const { value } => T::Const([leaf(Attr::num(*value)), leaf(Attr::DType(n.dtype))]),
        UOp::Range => T::Range(leaf(Attr::Shape(n.shape.clone().into()))),
        UOp::Reshape => T::Reshape([ops[0], leaf(Attr::Shape(n.shape.clone().into()))]),
        UOp::Permute { perm } => T::Permute([ops[0], leaf(Attr::usizes(perm))]),
        UOp::Expand => T::Expand([ops[0], leaf(Attr::Shape(n.shape.clone().into()))]),
        UOp::Pad { pad, value } => T::Pad([
            ops[0],
            leaf(Attr::Pads(pad.clone())),
            leaf(Attr::num(*value)),
        ]),
        UOp::Shrink { lo, hi, step } => T::Shrink([
            ops[0],
            leaf(Attr::Shape(lo.clone().into())),
            leaf(Attr::Shape(hi.clone().into())),
            leaf(Attr::Ints(step.clone())),
        ]),
        UOp::Flip { axes } => T::Flip([ops[0], leaf(Attr::usizes(axes))]),
        UOp::View { map } => T::View([
            ops[0],
            leaf(Attr::Shape(n.shape.clone().into())),
            leaf(Attr::Map(map.clone())),
        ]),
        UOp::Read { access } => T::Read([ops[0], leaf(Attr::Access(access.clone()))]),
        UOp::Unary(op) => T::unary(*op, ops[0]),
        UOp::Binary(op) => T::binary(*op, [ops[0], ops[1]]),
        UOp::Where => T::Where([ops[0], ops[1], ops[2]]),
        UOp::Cast => T::Cast([ops[0], leaf(Attr::DType(n.dtype))]),
        UOp::Reduce { op, axes, acc } => T::Reduce([
            leaf(Attr::Op(*op)),
            leaf(Attr::usizes(axes)),
            leaf(Attr::DType(*acc)),
            ops[0],
        ]),
        UOp::Gather { axis } => T::Gather([ops[0], ops[1], leaf(Attr::usizes(&[*axis]))]),
        UOp::Scan {
            op,
            axis,
            exclusive,
            reverse,
            acc,
        } => T::Scan([
            leaf(Attr::Op(*op)),
            leaf(Attr::usizes(&[
                *axis,
                usize::from(*exclusive),
                usize::from(*reverse),
            ])),
            leaf(Attr::DType(*acc)),
            ops[0],
        ]),
    }
}

/// Adds a verified Tiny program; returns the e-class of every Tiny node (by node index).
pub fn add_program(eg: &mut TensorGraph, prog: &Program) -> Vec<Id> {
    let mut class = Vec::with_capacity(prog.nodes.len());
    for n in &prog.nodes {
        let e = enode_of(eg, prog, n, &class);
        class.push(eg.add(e));
    }
    class
}

/// Rebuilds a Tiny program with the signature of `original` (whose node `i` is in e-class
/// `class[i]`), choosing at every e-class the e-node `choose` returns. The result is verified.
pub fn extract_program(
    eg: &TensorGraph,
    original: &Program,
    class: &[Id],
    choose: &dyn Fn(Id) -> TensorLang,
) -> Result<Program, TinyError> {
    let mut b = Builder::new();
    let mut memo: HashMap<Id, NodeId> = HashMap::new();
    // Signature inputs first, in signature order.
    for inp in &original.inputs {
        let n = original.node(inp.node);
        let id = b.input(&inp.tensor, n.dtype, n.shape.clone())?;
        memo.insert(eg.find(class[inp.node.index()]), id);
    }
    for out in &original.outputs {
        let root = eg.find(class[out.node.index()]);
        let id = build(eg, root, choose, &mut b, &mut memo)?;
        b.output(&out.tensor, id);
    }
    let mut prog = b.finish();
    prog.symbols = original.symbols.clone();
    crate::ir::tiny::verify(&prog)?;
    Ok(prog)
}

/// Pushes the Tiny nodes of a kernel body whose placeholder `$i` is the built node `args[i]`;
/// returns the node of the body's root.
pub fn inline_body(
    body: &RecExpr<TensorLang>,
    args: &[NodeId],
    b: &mut Builder,
) -> Result<NodeId, String> {
    let mut built: Vec<Option<NodeId>> = Vec::with_capacity(body.as_ref().len());
    for node in body.as_ref() {
        let id = match node {
            TensorLang::Attr(Attr::Arg(i)) => Some(
                *args
                    .get(*i as usize)
                    .ok_or_else(|| format!("placeholder ${i} has no input"))?,
            ),
            TensorLang::Attr(_) => None,
            op => {
                let attr = |id: Id| match &body[id] {
                    TensorLang::Attr(a) if !matches!(a, Attr::Arg(_)) => Some(a),
                    _ => None,
                };
                let parts = tiny_parts(op, &attr)?;
                let src: Vec<Src> = parts
                    .operands
                    .iter()
                    .map(|o| match o {
                        Operand::Tensor(id) => built[usize::from(*id)]
                            .map(Src::Node)
                            .ok_or_else(|| format!("operand {id} of `{op}` is not a tensor")),
                        Operand::Imm(v) => Ok(Src::Imm(*v)),
                    })
                    .collect::<Result<_, _>>()?;
                Some(
                    b.push(parts.uop, src, parts.dtype, parts.shape)
                        .map_err(|e| e.to_string())?,
                )
            }
        };
        built.push(id);
    }
    built
        .last()
        .copied()
        .flatten()
        .ok_or_else(|| "a kernel body must end in a tensor-valued node".to_string())
}

/// Post-order construction of e-class `root` without recursion (graphs can be deep).
fn build(
    eg: &TensorGraph,
    root: Id,
    choose: &dyn Fn(Id) -> TensorLang,
    b: &mut Builder,
    memo: &mut HashMap<Id, NodeId>,
) -> Result<NodeId, TinyError> {
    // Errors name the node that would have been built next.
    let malformed = |detail: String| TinyError::Malformed {
        node: NodeId(u32::MAX),
        detail: format!("extraction: {detail}"),
    };
    let mut stack: Vec<(Id, bool)> = vec![(root, false)];
    while let Some((c, expanded)) = stack.pop() {
        let c = eg.find(c);
        if memo.contains_key(&c) {
            continue;
        }
        let node = choose(c);
        let attr = |id: Id| eg[id].data.attr();
        if let TensorLang::Kernel(children) = &node {
            let (body, inputs) = kernel_parts(children, &attr).map_err(&malformed)?;
            let inputs: Vec<Id> = inputs.iter().map(|i| eg.find(*i)).collect();
            if !expanded {
                stack.push((c, true));
                for t in inputs.iter().rev() {
                    if !memo.contains_key(t) {
                        stack.push((*t, false));
                    }
                }
                continue;
            }
            let args: Vec<NodeId> = inputs
                .iter()
                .map(|i| {
                    memo.get(i).copied().ok_or_else(|| {
                        malformed(format!("input {i} of a kernel was not built (a cycle?)"))
                    })
                })
                .collect::<Result<_, _>>()?;
            let id = inline_body(body.expr(), &args, b).map_err(&malformed)?;
            memo.insert(c, id);
            continue;
        }
        let parts = tiny_parts(&node, &attr).map_err(&malformed)?;
        let tensor_ops: Vec<Id> = parts
            .operands
            .iter()
            .filter_map(|o| match o {
                Operand::Tensor(id) => Some(eg.find(*id)),
                Operand::Imm(_) => None,
            })
            .collect();
        if !expanded {
            stack.push((c, true));
            for t in tensor_ops.iter().rev() {
                if !memo.contains_key(t) {
                    stack.push((*t, false));
                }
            }
            continue;
        }
        if matches!(parts.uop, UOp::Input { .. }) {
            return Err(malformed(format!("input `{node}` is not in the signature")));
        }
        let src: Vec<Src> = parts
            .operands
            .iter()
            .map(|o| match o {
                Operand::Tensor(id) => {
                    memo.get(&eg.find(*id))
                        .copied()
                        .map(Src::Node)
                        .ok_or_else(|| {
                            malformed(format!("operand {id} of `{node}` was not built (a cycle?)"))
                        })
                }
                Operand::Imm(v) => Ok(Src::Imm(*v)),
            })
            .collect::<Result<_, _>>()?;
        let id = b.push(parts.uop, src, parts.dtype, parts.shape)?;
        memo.insert(c, id);
    }
    memo.get(&eg.find(root))
        .copied()
        .ok_or_else(|| malformed("root was not built".into()))
}
