//! Costs of an extraction, and its validator.
//!
//! Only the classes reachable from the roots through chosen nodes count; choices for other
//! classes are ignored by all three functions.

use super::{ClassIx, Extraction, NodeIx, Problem};
use thiserror::Error;

/// Why an extraction is not a valid answer to its problem.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum ValidationError {
    /// The choice vector does not have one entry per class.
    #[error("the extraction has {got} class entries, the problem {expected}")]
    WrongLength {
        /// Entries given.
        got: usize,
        /// Classes of the problem.
        expected: usize,
    },
    /// A root class has no chosen node.
    #[error("root e-class `{class}` has no chosen e-node")]
    MissingRoot {
        /// The root class.
        class: String,
    },
    /// A chosen node's child class has no chosen node.
    #[error("e-node `{node}` needs e-class `{child}`, which has no chosen e-node")]
    MissingChild {
        /// The chosen node.
        node: String,
        /// Its child class without a choice.
        child: String,
    },
    /// A chosen node is not a node of the class it is chosen for (or not a node at all).
    #[error("e-class `{class}` is given node index {node}, which is not one of its e-nodes")]
    WrongClass {
        /// The class.
        class: String,
        /// The node index chosen for it.
        node: u32,
    },
    /// A chosen node has infinite cost.
    #[error("e-node `{node}` is chosen but has infinite cost")]
    InfiniteCost {
        /// The node.
        node: String,
    },
    /// The chosen nodes form a cycle through `class`.
    #[error("the chosen e-nodes form a cycle through e-class `{class}`")]
    Cycle {
        /// A class on the cycle.
        class: String,
    },
}

/// Checks that `e` is a valid extraction of `p`: every root, and every child class of a chosen
/// reachable node, has a chosen node of that class; chosen reachable nodes have finite cost; the
/// chosen nodes form no cycle. Returns the reachable classes in post-order (children first).
pub fn validate(p: &Problem, e: &Extraction) -> Result<Vec<ClassIx>, ValidationError> {
    if e.choices.len() != p.num_classes() {
        return Err(ValidationError::WrongLength {
            got: e.choices.len(),
            expected: p.num_classes(),
        });
    }
    for (c, n) in e.chosen() {
        if n.ix() >= p.num_nodes() || p.node(n).class != c {
            return Err(ValidationError::WrongClass {
                class: p.class(c).name.clone(),
                node: n.0,
            });
        }
    }
    // Iterative DFS with colours: 0 unseen, 1 on the stack, 2 done.
    let mut colour = vec![0u8; p.num_classes()];
    let mut order = Vec::new();
    for &root in p.roots() {
        if e.choice(root).is_none() {
            return Err(ValidationError::MissingRoot {
                class: p.class(root).name.clone(),
            });
        }
        if colour[root.ix()] == 2 {
            continue;
        }
        // (class, index of the next child to visit)
        let mut stack: Vec<(ClassIx, usize)> = vec![(root, 0)];
        colour[root.ix()] = 1;
        while let Some(top) = stack.last_mut() {
            let (c, i) = *top;
            let n = chosen_node(p, e, c)?;
            let node = p.node(n);
            if let Some(&child) = node.children.get(i) {
                top.1 += 1;
                match colour[child.ix()] {
                    0 => {
                        if e.choice(child).is_none() {
                            return Err(ValidationError::MissingChild {
                                node: node.name.clone(),
                                child: p.class(child).name.clone(),
                            });
                        }
                        colour[child.ix()] = 1;
                        stack.push((child, 0));
                    }
                    1 => {
                        return Err(ValidationError::Cycle {
                            class: p.class(child).name.clone(),
                        })
                    }
                    _ => {}
                }
            } else {
                colour[c.ix()] = 2;
                order.push(c);
                stack.pop();
            }
        }
    }
    Ok(order)
}

fn chosen_node(p: &Problem, e: &Extraction, c: ClassIx) -> Result<NodeIx, ValidationError> {
    let n = e.choice(c).ok_or_else(|| ValidationError::MissingRoot {
        class: p.class(c).name.clone(),
    })?;
    if !p.node(n).cost.is_finite() {
        return Err(ValidationError::InfiniteCost {
            node: p.node(n).name.clone(),
        });
    }
    Ok(n)
}

/// DAG cost: the sum of the costs of the chosen nodes reachable from the roots, each paid once.
pub fn dag_cost(p: &Problem, e: &Extraction) -> Result<f64, ValidationError> {
    let order = validate(p, e)?;
    Ok(order
        .iter()
        .filter_map(|c| e.choice(*c))
        .map(|n| p.node(n).cost)
        .sum())
}

/// Tree cost: the sum over the roots of the cost of the term each root's choice spells out, a
/// sub-term paid once per occurrence (can overflow to `+∞` on deeply shared DAGs).
pub fn tree_cost(p: &Problem, e: &Extraction) -> Result<f64, ValidationError> {
    let order = validate(p, e)?;
    let mut tc = vec![0.0f64; p.num_classes()];
    for c in &order {
        if let Some(n) = e.choice(*c) {
            let node = p.node(n);
            tc[c.ix()] = node.cost + node.children.iter().map(|ch| tc[ch.ix()]).sum::<f64>();
        }
    }
    Ok(p.roots().iter().map(|r| tc[r.ix()]).sum())
}

#[cfg(test)]
mod tests {
    use super::super::Status;
    use super::*;

    /// `r = f(s, s)`, `s = g(x)`, `x` a leaf; `s` also has `h(r)` (a cycle back to the root).
    fn shared() -> (Problem, Vec<NodeIx>) {
        let mut p = Problem::new();
        let r = p.add_class("r").expect("class");
        let s = p.add_class("s").expect("class");
        let x = p.add_class("x").expect("class");
        let f = p.add_node(r, "f", 1.0, &[s, s]).expect("node");
        let g = p.add_node(s, "g", 10.0, &[x]).expect("node");
        let h = p.add_node(s, "h", 0.5, &[r]).expect("node");
        let l = p.add_node(x, "leaf", 2.0, &[]).expect("node");
        p.add_root(r).expect("root");
        (p, vec![f, g, h, l])
    }

    #[test]
    fn tree_and_dag_costs_differ_on_sharing() {
        let (p, n) = shared();
        let e =
            Extraction::from_choices(&p, &[Some(n[0]), Some(n[1]), Some(n[3])], Status::Heuristic);
        assert_eq!(dag_cost(&p, &e), Ok(13.0));
        assert_eq!(tree_cost(&p, &e), Ok(1.0 + 2.0 * 12.0));
    }

    #[test]
    fn cycles_and_missing_choices_are_rejected() {
        let (p, n) = shared();
        let cyc = Extraction::from_choices(&p, &[Some(n[0]), Some(n[2]), None], Status::Heuristic);
        assert!(matches!(
            validate(&p, &cyc),
            Err(ValidationError::Cycle { .. })
        ));
        let missing =
            Extraction::from_choices(&p, &[Some(n[0]), Some(n[1]), None], Status::Heuristic);
        assert!(matches!(
            validate(&p, &missing),
            Err(ValidationError::MissingChild { .. })
        ));
        let none = Extraction::from_choices(&p, &[None, None, None], Status::Heuristic);
        assert!(matches!(
            validate(&p, &none),
            Err(ValidationError::MissingRoot { .. })
        ));
        let mut wrong =
            Extraction::from_choices(&p, &[Some(n[0]), Some(n[1]), Some(n[3])], Status::Heuristic);
        wrong.choices[2] = Some(n[1]);
        assert!(matches!(
            validate(&p, &wrong),
            Err(ValidationError::WrongClass { .. })
        ));
    }

    #[test]
    fn infinite_costs_are_rejected() {
        let mut p = Problem::new();
        let a = p.add_class("a").expect("class");
        let n = p.add_node(a, "x", f64::INFINITY, &[]).expect("node");
        p.add_root(a).expect("root");
        let e = Extraction::from_choices(&p, &[Some(n)], Status::Heuristic);
        assert!(matches!(
            validate(&p, &e),
            Err(ValidationError::InfiniteCost { .. })
        ));
    }
}
