//! Preprocessing shared by both extractors: which nodes can be part of a finite acyclic
//! extraction at all, and which are dominated by a sibling.
//!
//! - A node is *live* when its cost is finite, no child is its own class (a self-loop can never be
//!   chosen), and every child class is *derivable*: has a live node whose children are derivable
//!   (least fixpoint, computed by unit propagation). A derivable class always has a finite acyclic
//!   term; a class that is not has none.
//! - A live node `b` is *dominated* by a live sibling `a` when `cost(a) ≤ cost(b)` and the child
//!   classes of `a` are a subset of those of `b` (ties broken by node index). Replacing `b` by `a`
//!   in any valid extraction keeps it valid (fewer edges, so no new cycle) and does not raise its
//!   DAG cost (fewer classes needed), so some optimum uses no dominated node.

use super::{ClassIx, Problem};

/// Distinct child classes of every node, in compressed rows.
#[derive(Clone, Debug)]
pub(crate) struct Children {
    start: Vec<u32>,
    list: Vec<u32>,
}

impl Children {
    pub(crate) fn of(p: &Problem) -> Children {
        let mut start = Vec::with_capacity(p.num_nodes() + 1);
        let mut list = Vec::new();
        start.push(0);
        for n in p.nodes() {
            let from = list.len();
            list.extend(n.children.iter().map(|c| c.0));
            list[from..].sort_unstable();
            let mut k = from;
            for i in from..list.len() {
                if k == from || list[i] != list[k - 1] {
                    list[k] = list[i];
                    k += 1;
                }
            }
            list.truncate(k);
            start.push(list.len() as u32);
        }
        Children { start, list }
    }

    /// The distinct child classes of node `n`, sorted.
    pub(crate) fn get(&self, n: u32) -> &[u32] {
        &self.list[self.start[n as usize] as usize..self.start[n as usize + 1] as usize]
    }
}

/// The preprocessed problem.
#[derive(Clone, Debug)]
pub(crate) struct Reduced {
    pub(crate) children: Children,
    /// Live and not dominated.
    pub(crate) keep: Vec<bool>,
    /// Per class, its kept nodes (in node order).
    pub(crate) class_nodes: Vec<Vec<u32>>,
    /// Per class, whether it has a finite acyclic term.
    pub(crate) derivable: Vec<bool>,
}

impl Reduced {
    /// Preprocesses `p`; `dominance` also drops dominated nodes.
    pub(crate) fn new(p: &Problem, dominance: bool) -> Reduced {
        let children = Children::of(p);
        let (live, derivable) = live_nodes(p, &children);
        let mut keep = live;
        if dominance {
            drop_dominated(p, &children, &mut keep);
        }
        let class_nodes = p
            .classes()
            .iter()
            .map(|c| {
                c.nodes
                    .iter()
                    .map(|n| n.0)
                    .filter(|n| keep[*n as usize])
                    .collect()
            })
            .collect();
        Reduced {
            children,
            keep,
            class_nodes,
            derivable,
        }
    }

    /// Per class, the kept nodes that have it among their children, as compressed rows
    /// (`start` has one entry per class plus one).
    pub(crate) fn parents(&self, p: &Problem) -> (Vec<u32>, Vec<u32>) {
        parent_rows(p.num_classes(), &self.children, &self.keep)
    }

    /// The first root that has no finite acyclic term, if any.
    pub(crate) fn underivable_root(&self, p: &Problem) -> Option<ClassIx> {
        p.roots().iter().copied().find(|r| !self.derivable[r.ix()])
    }
}

/// Live nodes and derivable classes (unit propagation over "all children derivable").
fn live_nodes(p: &Problem, ch: &Children) -> (Vec<bool>, Vec<bool>) {
    let nn = p.num_nodes();
    let nc = p.num_classes();
    let cand: Vec<bool> = (0..nn)
        .map(|n| {
            let node = &p.nodes()[n];
            node.cost.is_finite() && !ch.get(n as u32).contains(&node.class.0)
        })
        .collect();
    // parents[d]: candidate nodes with d among their distinct children.
    let (pcount, parents) = parent_rows(nc, ch, &cand);
    let mut pending: Vec<u32> = (0..nn).map(|n| ch.get(n as u32).len() as u32).collect();
    let mut derivable = vec![false; nc];
    let mut queue: Vec<u32> = Vec::new();
    for (n, node) in p.nodes().iter().enumerate() {
        let c = node.class.ix();
        if cand[n] && pending[n] == 0 && !derivable[c] {
            derivable[c] = true;
            queue.push(c as u32);
        }
    }
    while let Some(d) = queue.pop() {
        for &m in &parents[pcount[d as usize] as usize..pcount[d as usize + 1] as usize] {
            pending[m as usize] -= 1;
            let c = p.nodes()[m as usize].class.ix();
            if pending[m as usize] == 0 && !derivable[c] {
                derivable[c] = true;
                queue.push(c as u32);
            }
        }
    }
    let live = (0..nn).map(|n| cand[n] && pending[n] == 0).collect();
    (live, derivable)
}

/// Per class, the nodes `n` with `include[n]` that have it among their children, as compressed
/// rows (`start` has one entry per class plus one).
fn parent_rows(nc: usize, ch: &Children, include: &[bool]) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; nc + 1];
    let included = || {
        include
            .iter()
            .enumerate()
            .filter(|(_, k)| **k)
            .map(|(n, _)| n as u32)
    };
    for n in included() {
        for &d in ch.get(n) {
            start[d as usize + 1] += 1;
        }
    }
    for i in 0..nc {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut list = vec![0u32; start[nc] as usize];
    for n in included() {
        for &d in ch.get(n) {
            list[fill[d as usize] as usize] = n;
            fill[d as usize] += 1;
        }
    }
    (start, list)
}

/// Whether sorted `a` is a subset of sorted `b`.
fn subset(a: &[u32], b: &[u32]) -> bool {
    let mut j = 0;
    for &x in a {
        while j < b.len() && b[j] < x {
            j += 1;
        }
        if j == b.len() || b[j] != x {
            return false;
        }
        j += 1;
    }
    true
}

/// Clears `keep` for every node dominated by a kept sibling. A class's nodes are visited by
/// (cost, number of children, index), so a node's dominators come before it; comparing with the
/// kept ones suffices (domination is transitive).
fn drop_dominated(p: &Problem, ch: &Children, keep: &mut [bool]) {
    for class in p.classes() {
        let mut nodes: Vec<u32> = class
            .nodes
            .iter()
            .map(|n| n.0)
            .filter(|n| keep[*n as usize])
            .collect();
        if nodes.len() < 2 {
            continue;
        }
        let cost = |n: u32| p.nodes()[n as usize].cost;
        nodes.sort_by(|a, b| {
            cost(*a)
                .total_cmp(&cost(*b))
                .then(ch.get(*a).len().cmp(&ch.get(*b).len()))
                .then(a.cmp(b))
        });
        let mut kept: Vec<u32> = Vec::new();
        for b in nodes {
            if kept.iter().any(|a| subset(ch.get(*a), ch.get(b))) {
                keep[b as usize] = false;
            } else {
                kept.push(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_loops_infinite_costs_and_underivable_classes_are_dead() {
        let mut p = Problem::new();
        let a = p.add_class("a").expect("class");
        let b = p.add_class("b").expect("class");
        let c = p.add_class("c").expect("class");
        p.add_node(a, "loop", 1.0, &[a]).expect("node"); // self-loop
        let a1 = p.add_node(a, "f", 1.0, &[b]).expect("node");
        p.add_node(b, "g", 1.0, &[c]).expect("node"); // c is underivable
        let b1 = p.add_node(b, "leaf", 5.0, &[]).expect("node");
        p.add_node(c, "inf", f64::INFINITY, &[]).expect("node");
        p.add_node(c, "back", 1.0, &[a]).expect("node"); // a cycle c -> a -> b ... fine, derivable
        p.add_root(a).expect("root");
        let r = Reduced::new(&p, false);
        assert_eq!(r.derivable, vec![true, true, true]);
        assert_eq!(r.keep, vec![false, true, true, true, false, true]);
        assert_eq!(r.class_nodes[a.ix()], vec![a1.0]);
        assert_eq!(r.class_nodes[b.ix()], vec![2, b1.0]);
    }

    #[test]
    fn dominated_nodes_are_dropped() {
        let mut p = Problem::new();
        let r = p.add_class("r").expect("class");
        let x = p.add_class("x").expect("class");
        let y = p.add_class("y").expect("class");
        p.add_node(x, "x", 1.0, &[]).expect("node");
        p.add_node(y, "y", 1.0, &[]).expect("node");
        let big = p.add_node(r, "big", 3.0, &[x, y]).expect("node"); // dominated by `small`
        let small = p.add_node(r, "small", 2.0, &[x]).expect("node");
        let cheap = p.add_node(r, "cheap", 1.0, &[y, x]).expect("node"); // cheaper, more children
        let twin = p.add_node(r, "twin", 2.0, &[x, x]).expect("node"); // same as `small`
        p.add_root(r).expect("root");
        let red = Reduced::new(&p, true);
        assert!(!red.keep[big.ix()]);
        assert!(red.keep[small.ix()] && red.keep[cheap.ix()]);
        assert!(!red.keep[twin.ix()]);
    }
}
