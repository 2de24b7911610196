//! Structural checks of a parsed document and a topological order of its nodes: every signature
//! tensor is declared, node names are unique, every tensor has exactly one producer (a node or the
//! signature), every consumed tensor is produced, and the nodes form a DAG.

use super::diagnose::{diag, field, tensor_loc};
use super::parse::{RawDoc, RawNode};
use super::Operand;
use crate::diag::codes;
use crate::diag::{Diagnostic, Diagnostics};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// Who produces a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Producer {
    Signature,
    Node(usize),
}

/// Checks the structure; on success the nodes are in topological order (stable: among ready
/// nodes, document order).
pub(super) fn check_structure(mut doc: RawDoc) -> Result<RawDoc, Diagnostics> {
    let mut errs: Vec<Diagnostic> = Vec::new();
    let declared: BTreeSet<&str> = doc.tensors.iter().map(|(n, _)| n.as_str()).collect();

    // Signature tensors are declared.
    for (kind, names) in [
        (
            "input",
            doc.signature
                .inputs
                .iter()
                .map(|i| i.tensor.as_str())
                .collect::<Vec<_>>(),
        ),
        (
            "output",
            doc.signature
                .outputs
                .iter()
                .map(|o| o.tensor.as_str())
                .collect(),
        ),
    ] {
        for t in names {
            if !declared.contains(t) {
                errs.push(diag(
                    codes::UNDECLARED_TENSOR,
                    tensor_loc(t),
                    format!("signature {kind} `{t}` is not declared in `tensors`"),
                    format!(
                        "add `\"{t}\": {{\"dtype\": …, \"shape\": […]}}` to `tensors` (signature tensors need a declared dtype and shape)"
                    ),
                ));
            }
        }
    }

    // Unique node names.
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, n) in doc.nodes.iter().enumerate() {
        if let Some(first) = names.insert(n.name.as_str(), i) {
            errs.push(
                diag(
                    codes::DUPLICATE_NODE_NAME,
                    n.loc(),
                    format!(
                        "two nodes are named `{}` (graph[{first}] and graph[{i}])",
                        n.name
                    ),
                    "give every node a unique name",
                )
                .with("first", format!("graph[{first}]"))
                .with("second", format!("graph[{i}]")),
            );
            names.insert(n.name.as_str(), first);
        }
    }

    // Exactly one producer per tensor.
    let mut producer: BTreeMap<&str, Producer> = BTreeMap::new();
    for i in &doc.signature.inputs {
        if producer.insert(&i.tensor, Producer::Signature).is_some() {
            errs.push(diag(
                codes::DOUBLY_PRODUCED_TENSOR,
                tensor_loc(&i.tensor),
                format!(
                    "tensor `{}` is listed twice in `signature.inputs`",
                    i.tensor
                ),
                "list each input once",
            ));
        }
    }
    for (idx, n) in doc.nodes.iter().enumerate() {
        for o in &n.outputs {
            match producer.get(o.as_str()) {
                Some(p) => {
                    let first = match p {
                        Producer::Signature => "the signature (it is an input)".to_string(),
                        Producer::Node(j) => doc
                            .nodes
                            .get(*j)
                            .map(|m| format!("node `{}`", m.name))
                            .unwrap_or_default(),
                    };
                    errs.push(
                        diag(
                            codes::DOUBLY_PRODUCED_TENSOR,
                            n.loc(),
                            format!(
                                "tensor `{o}` is produced by node `{}` and also by {first}",
                                n.name
                            ),
                            "every tensor has exactly one producer: rename one of the outputs",
                        )
                        .with("tensor", o)
                        .with("first_producer", first),
                    );
                }
                None => {
                    producer.insert(o, Producer::Node(idx));
                }
            }
        }
    }

    // Consumed tensors are produced.
    for n in &doc.nodes {
        for t in n.inputs.iter().filter_map(|o| match o {
            Operand::Tensor(t) => Some(t),
            Operand::Scalar(_) => None,
        }) {
            if !producer.contains_key(t.as_str()) {
                let known = producer.keys().copied();
                errs.push(
                    diag(
                        codes::DANGLING_REFERENCE,
                        n.loc(),
                        format!(
                            "node `{}` reads tensor `{t}`, which no node produces and which is not a signature input",
                            n.name
                        ),
                        match super::diagnose::closest(t, known) {
                            Some(c) => format!("did you mean `{c}`? Otherwise add a node producing `{t}` or list it in `signature.inputs`"),
                            None => format!("add a node producing `{t}`, or list it in `signature.inputs`"),
                        },
                    )
                    .with("tensor", t),
                );
            }
        }
    }

    // Signature outputs and declared tensors are produced.
    for o in &doc.signature.outputs {
        if !producer.contains_key(o.tensor.as_str()) {
            errs.push(diag(
                codes::UNPRODUCED_TENSOR,
                tensor_loc(&o.tensor),
                format!("signature output `{}` is produced by no node", o.tensor),
                format!("add a node with `\"outputs\": [\"{}\"]`", o.tensor),
            ));
        }
    }
    let consumed: BTreeSet<&str> = doc
        .nodes
        .iter()
        .flat_map(|n| n.inputs.iter())
        .filter_map(|o| match o {
            Operand::Tensor(t) => Some(t.as_str()),
            Operand::Scalar(_) => None,
        })
        .collect();
    let outputs: BTreeSet<&str> = doc
        .signature
        .outputs
        .iter()
        .map(|o| o.tensor.as_str())
        .collect();
    for (t, _) in &doc.tensors {
        // Consumed ones are already reported as dangling references.
        if !producer.contains_key(t.as_str())
            && !outputs.contains(t.as_str())
            && !consumed.contains(t.as_str())
        {
            errs.push(diag(
                codes::UNPRODUCED_TENSOR,
                tensor_loc(t),
                format!("tensor `{t}` is declared but no node produces it and it is not a signature input"),
                format!("list `{t}` in `signature.inputs`, produce it with a node, or remove its declaration"),
            ));
        }
    }
    if !errs.is_empty() {
        return Err(Diagnostics(errs));
    }

    let order = topo_order(&doc.nodes, &producer)?;
    let mut slots: Vec<Option<RawNode>> = doc.nodes.drain(..).map(Some).collect();
    doc.nodes = order
        .into_iter()
        .filter_map(|i| slots.get_mut(i).and_then(Option::take))
        .collect();
    Ok(doc)
}

/// Kahn's algorithm with a min-heap of document indices; a cycle is reported at one of its nodes.
fn topo_order(
    nodes: &[RawNode],
    producer: &BTreeMap<&str, Producer>,
) -> Result<Vec<usize>, Diagnostics> {
    // preds[i]: node indices whose outputs node i reads.
    let preds: Vec<BTreeSet<usize>> = nodes
        .iter()
        .map(|n| {
            n.inputs
                .iter()
                .filter_map(|o| match o {
                    Operand::Tensor(t) => match producer.get(t.as_str()) {
                        Some(Producer::Node(j)) => Some(*j),
                        _ => None,
                    },
                    Operand::Scalar(_) => None,
                })
                .collect()
        })
        .collect();
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut indeg: Vec<usize> = vec![0; nodes.len()];
    for (i, ps) in preds.iter().enumerate() {
        indeg[i] = ps.len();
        for p in ps {
            if let Some(s) = succs.get_mut(*p) {
                s.push(i);
            }
        }
    }
    let mut ready: BinaryHeap<std::cmp::Reverse<usize>> = indeg
        .iter()
        .enumerate()
        .filter(|(_, d)| **d == 0)
        .map(|(i, _)| std::cmp::Reverse(i))
        .collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(std::cmp::Reverse(i)) = ready.pop() {
        order.push(i);
        for s in succs.get(i).into_iter().flatten() {
            if let Some(d) = indeg.get_mut(*s) {
                *d -= 1;
                if *d == 0 {
                    ready.push(std::cmp::Reverse(*s));
                }
            }
        }
    }
    if order.len() == nodes.len() {
        return Ok(order);
    }
    // Walk predecessors among the unfinished nodes until one repeats: that node is on a cycle.
    let done: BTreeSet<usize> = order.into_iter().collect();
    let start = (0..nodes.len()).find(|i| !done.contains(i)).unwrap_or(0);
    let mut path = vec![start];
    let mut seen: BTreeMap<usize, usize> = BTreeMap::new();
    seen.insert(start, 0);
    let mut cur = start;
    let cycle: Vec<usize> = loop {
        let Some(next) = preds
            .get(cur)
            .and_then(|ps| ps.iter().copied().find(|p| !done.contains(p)))
        else {
            break vec![cur];
        };
        if let Some(pos) = seen.get(&next) {
            break path.get(*pos..).map(<[usize]>::to_vec).unwrap_or_default();
        }
        seen.insert(next, path.len());
        path.push(next);
        cur = next;
    };
    // `cycle` lists nodes against the data flow; print it along the flow.
    let flow: Vec<&RawNode> = cycle.iter().rev().filter_map(|i| nodes.get(*i)).collect();
    let Some(at_node) = flow.first().copied() else {
        return Err(Diagnostics::one(diag(
            codes::CYCLE,
            field("graph"),
            "the graph has a cycle",
            "break the cycle",
        )));
    };
    let mut names: Vec<&str> = flow.iter().map(|n| n.name.as_str()).collect();
    names.push(at_node.name.as_str());
    Err(Diagnostics::one(
        diag(
            codes::CYCLE,
            at_node.loc(),
            format!(
                "the graph has a cycle through node `{}`: {}",
                at_node.name,
                names.join(" -> ")
            ),
            "a graph must be a DAG: one of these nodes must read a tensor produced outside the cycle",
        )
        .with("cycle", names.join(" -> ")),
    ))
}
