//! Kernel bodies cut out of a Tiny program (tests and tools: the same terms the e-graph's kernel
//! nodes hold, built without running any rule).

use crate::ir::egraph::kernel::canonical;
use crate::ir::egraph::{add_program, Attr, TensorGraph, TensorLang};
use crate::ir::tiny::{NodeId, Program, UOp};
use egg::{Id, Language, RecExpr};
use std::collections::HashMap;

/// The canonical kernel body of `root` in `prog`: INPUT nodes and every node other than `root`
/// for which `cut` holds become placeholders. Returns the body and, in placeholder order, the
/// Tiny node each `$i` stands for. Structurally equal nodes are shared (hash-consing), so two
/// identical cut nodes become one placeholder (the first such node is returned).
pub fn body_from_program(
    prog: &Program,
    root: NodeId,
    cut: &dyn Fn(NodeId) -> bool,
) -> (RecExpr<TensorLang>, Vec<NodeId>) {
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, prog);
    let mut node_of: HashMap<Id, NodeId> = HashMap::new();
    for (i, c) in class.iter().enumerate() {
        node_of.entry(eg.find(*c)).or_insert(NodeId(i as u32));
    }
    let root_class = eg.find(class[root.index()]);
    let is_leaf = |c: Id| -> bool {
        if c == root_class {
            return false;
        }
        match node_of.get(&c) {
            Some(n) => matches!(prog.node(*n).uop, UOp::Input { .. }) || cut(*n),
            None => false,
        }
    };
    let mut out: RecExpr<TensorLang> = RecExpr::default();
    let mut inputs: Vec<Id> = Vec::new();
    let mut memo: HashMap<Id, Id> = HashMap::new();
    let mut stack: Vec<(Id, bool)> = vec![(root_class, false)];
    while let Some((c, expanded)) = stack.pop() {
        if memo.contains_key(&c) {
            continue;
        }
        if is_leaf(c) {
            let k = inputs.len() as u32;
            inputs.push(c);
            memo.insert(c, out.add(TensorLang::Attr(Attr::Arg(k))));
            continue;
        }
        let node = eg[c].nodes[0].clone();
        if !expanded {
            stack.push((c, true));
            for ch in node.children().iter().rev() {
                stack.push((eg.find(*ch), false));
            }
            continue;
        }
        let n = node.map_children(|ch| memo[&eg.find(ch)]);
        memo.insert(c, out.add(n));
    }
    let (body, classes) = canonical(&out, &inputs);
    let nodes = classes
        .iter()
        .filter_map(|c| node_of.get(c).copied())
        .collect();
    (body, nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::dim::Dim;
    use crate::ir::dtype::DType;
    use crate::ir::tiny::{Builder, UnaryOp};

    #[test]
    fn cuts_become_placeholders() {
        let mut b = Builder::new();
        let x = b.input("x", DType::F32, vec![Dim::int(4)]).expect("input");
        let r = b.unary(UnaryOp::Relu, x).expect("relu");
        let e = b.unary(UnaryOp::Exp2, r).expect("exp2");
        let n = b.unary(UnaryOp::Neg, e).expect("neg");
        let p = b.finish();
        let (body, ins) = body_from_program(&p, n, &|_| false);
        assert_eq!(body.to_string(), "(neg (exp2 (relu $0)))");
        assert_eq!(ins, vec![x]);
        let (body, ins) = body_from_program(&p, n, &|id| id == r);
        assert_eq!(body.to_string(), "(neg (exp2 $0))");
        assert_eq!(ins, vec![r]);
    }
}
