//! Evaluation plan: which nodes are materialized, and the fused expression (a small register
//! program) each materialized elementwise/REDUCE node evaluates.
//!
//! A node is materialized only if it is REDUCE, GATHER, INPUT/CONST/RANGE, a signature output,
//! used by more than one node, or an elementwise node consumed by a movement op or GATHER. Other
//! elementwise nodes are inlined into their single consumer's expression. Movement ops are views.

use crate::ir::dtype::DType;
use crate::ir::tiny::{BinaryOp, NodeId, Program, Src, UOp, UnaryOp};
use std::collections::HashMap;

/// How a node is evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not needed by any output.
    Dead,
    /// INPUT, CONST, RANGE.
    Leaf,
    /// A movement op: a view of its source.
    View,
    Gather,
    /// A SCAN over its materialized operand ([`super::scan`]).
    Scan,
    /// Materialized by a fused kernel (elementwise root or REDUCE).
    Kernel,
    /// Evaluated inside its consumer's kernel.
    Inline,
}

/// Roles of all nodes.
pub fn roles(prog: &Program) -> Vec<Role> {
    let n = prog.nodes.len();
    let mut needed = vec![false; n];
    let mut is_output = vec![false; n];
    for o in &prog.outputs {
        if let Some(f) = needed.get_mut(o.node.index()) {
            *f = true;
            is_output[o.node.index()] = true;
        }
    }
    for node in prog.nodes.iter().rev() {
        if needed[node.id.index()] {
            for s in src_nodes(&node.src) {
                needed[s.index()] = true;
            }
        }
    }
    // Uses by needed consumers, and the last such consumer.
    let mut uses = vec![0usize; n];
    let mut consumer: Vec<Option<NodeId>> = vec![None; n];
    for node in prog.nodes.iter().filter(|x| needed[x.id.index()]) {
        for s in src_nodes(&node.src) {
            uses[s.index()] += 1;
            consumer[s.index()] = Some(node.id);
        }
    }
    prog.nodes
        .iter()
        .map(|node| {
            let i = node.id.index();
            if !needed[i] {
                return Role::Dead;
            }
            match &node.uop {
                UOp::Input { .. } | UOp::Const { .. } | UOp::Range => Role::Leaf,
                UOp::Gather { .. } => Role::Gather,
                UOp::Scan { .. } => Role::Scan,
                UOp::Reduce { .. } => Role::Kernel,
                u if u.is_movement() => Role::View,
                _ => {
                    let fusable = !is_output[i]
                        && uses[i] == 1
                        && consumer[i].is_some_and(|c| {
                            let u = &prog.node(c).uop;
                            u.is_elementwise() || matches!(u, UOp::Reduce { .. })
                        });
                    if fusable {
                        Role::Inline
                    } else {
                        Role::Kernel
                    }
                }
            }
        })
        .collect()
}

/// Node operands of a source list.
pub fn src_nodes(src: &[Src]) -> impl Iterator<Item = NodeId> + '_ {
    src.iter().filter_map(|s| match s {
        Src::Node(id) => Some(*id),
        Src::Imm(_) => None,
    })
}

/// An instruction operand: a register or an immediate (already rounded).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    Reg(usize),
    Imm(f64),
}

/// One register instruction; instruction `i` writes register `i`.
#[derive(Clone, Debug, PartialEq)]
pub enum Inst {
    /// Load a row of leaf `leaf` (index into [`Expr::leaves`]).
    Load {
        leaf: usize,
    },
    Unary {
        op: UnaryOp,
        dt: DType,
        x: Arg,
    },
    Binary {
        op: BinaryOp,
        operand_dt: DType,
        out_dt: DType,
        a: Arg,
        b: Arg,
        node: NodeId,
    },
    Where {
        dt: DType,
        c: Arg,
        a: Arg,
        b: Arg,
    },
    Cast {
        to: DType,
        x: Arg,
    },
}

/// A fused elementwise expression over one index space; the result is the last register.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub insts: Vec<Inst>,
    /// Materialized (or view) nodes the loads read.
    pub leaves: Vec<NodeId>,
}

impl Expr {
    /// The expression that just reads `leaf`.
    pub fn load(leaf: NodeId) -> Expr {
        Expr {
            insts: vec![Inst::Load { leaf: 0 }],
            leaves: vec![leaf],
        }
    }
}

/// Compiles the expression rooted at `root` (evaluated as an op even when it is materialized;
/// every other non-inline node becomes a load). Iterative, so long chains cannot overflow the stack.
pub fn compile(prog: &Program, roles: &[Role], root: NodeId) -> Expr {
    let mut insts = Vec::new();
    let mut leaves: Vec<NodeId> = Vec::new();
    let mut regs: HashMap<NodeId, usize> = HashMap::new();
    let is_op = |id: NodeId| id == root || roles[id.index()] == Role::Inline;
    let mut stack = vec![(root, false)];
    while let Some((id, expanded)) = stack.pop() {
        if regs.contains_key(&id) {
            continue;
        }
        if !is_op(id) {
            let leaf = leaves.len();
            leaves.push(id);
            regs.insert(id, insts.len());
            insts.push(Inst::Load { leaf });
            continue;
        }
        let node = prog.node(id);
        if !expanded {
            stack.push((id, true));
            for s in src_nodes(&node.src).collect::<Vec<_>>().into_iter().rev() {
                if !regs.contains_key(&s) {
                    stack.push((s, false));
                }
            }
            continue;
        }
        let inst = op_inst(prog, id, &regs);
        regs.insert(id, insts.len());
        insts.push(inst);
    }
    Expr { insts, leaves }
}

/// The instruction of elementwise node `id` whose node operands already have registers.
fn op_inst(prog: &Program, id: NodeId, regs: &HashMap<NodeId, usize>) -> Inst {
    let node = prog.node(id);
    let operand_dt = src_nodes(&node.src)
        .last()
        .map(|s| prog.node(s).dtype)
        .unwrap_or(DType::F32);
    let imm_dt = match node.uop {
        UOp::Where => node.dtype,
        _ => operand_dt,
    };
    let arg = |i: usize| match node.src.get(i) {
        Some(Src::Node(s)) => Arg::Reg(regs.get(s).copied().unwrap_or(0)),
        Some(Src::Imm(v)) => Arg::Imm(imm_dt.round(*v)),
        None => Arg::Imm(0.0),
    };
    match &node.uop {
        UOp::Unary(op) => Inst::Unary {
            op: *op,
            dt: node.dtype,
            x: arg(0),
        },
        UOp::Binary(op) => Inst::Binary {
            op: *op,
            operand_dt,
            out_dt: node.dtype,
            a: arg(0),
            b: arg(1),
            node: id,
        },
        UOp::Where => Inst::Where {
            dt: node.dtype,
            c: arg(0),
            a: arg(1),
            b: arg(2),
        },
        UOp::Cast => Inst::Cast {
            to: node.dtype,
            x: arg(0),
        },
        // REDUCE roots evaluate their source; anything else reads itself as a leaf.
        _ => Inst::Load { leaf: 0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::bench_programs::matmul;
    use crate::ir::dim::Dim;
    use crate::ir::tiny::Builder;

    #[test]
    fn matmul_product_is_fused_into_the_reduce() {
        let p = matmul(4, 5, 6, DType::F32, DType::F32).unwrap();
        let roles = roles(&p);
        let kinds: Vec<(&str, Role)> = p
            .nodes
            .iter()
            .map(|n| (n.uop.name(), roles[n.id.index()]))
            .collect();
        assert!(kinds.contains(&("MUL", Role::Inline)));
        assert!(kinds.contains(&("REDUCE", Role::Kernel)));
        assert!(kinds
            .iter()
            .all(|(n, r)| *n != "EXPAND" || *r == Role::View));
        let reduce = p.nodes.iter().find(|n| n.uop.name() == "REDUCE").unwrap();
        let mul = plan_src(reduce);
        let e = compile(&p, &roles, mul);
        assert_eq!(e.leaves.len(), 2);
        assert_eq!(e.insts.len(), 3);
    }

    fn plan_src(n: &crate::ir::tiny::Node) -> NodeId {
        src_nodes(&n.src).next().unwrap()
    }

    #[test]
    fn materializes_shared_moved_and_output_elementwise_nodes() {
        let mut b = Builder::new();
        let x = b.input("x", DType::F32, vec![Dim::int(4)]).unwrap();
        let dead = b.unary(UnaryOp::Sqrt, x).unwrap();
        let e = b.unary(UnaryOp::Exp2, x).unwrap(); // used twice -> kernel
        let a = b.binary(BinaryOp::Add, e.into(), e.into()).unwrap(); // consumed by FLIP -> kernel
        let f = b.flip(a, vec![0]).unwrap();
        let n = b.unary(UnaryOp::Neg, f).unwrap(); // inline into the output MUL
        let m = b.binary(BinaryOp::Mul, n.into(), Src::Imm(2.0)).unwrap();
        b.output("y", m);
        let p = b.finish();
        let r = roles(&p);
        let role = |id: NodeId| r[id.index()];
        assert_eq!(role(dead), Role::Dead);
        assert_eq!(role(e), Role::Kernel);
        assert_eq!(role(a), Role::Kernel);
        assert_eq!(role(f), Role::View);
        assert_eq!(role(n), Role::Inline);
        assert_eq!(role(m), Role::Kernel);
        let ex = compile(&p, &r, m);
        assert_eq!(ex.leaves, vec![f]);
        assert_eq!(ex.insts.len(), 3);
        assert!(matches!(ex.insts[2], Inst::Binary { b: Arg::Imm(v), .. } if v == 2.0));
    }
}
