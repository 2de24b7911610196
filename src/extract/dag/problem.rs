//! The extraction problem: a compact, index-based view of an e-graph with a cost per e-node.
//!
//! A [`Problem`] holds e-classes ([`Class`]), e-nodes ([`Node`]) and root classes. Every index is
//! checked when it is added, so a `Problem` is always well formed: a node's class and child classes
//! exist, its cost is a number `≥ 0` (`+∞` allowed: the node is unusable), a class lists exactly
//! the nodes whose class it is, in the order they were added.
//!
//! Built from an `egraph-serialize` document by [`Problem::from_serialized`], or node by node
//! ([`Problem::add_class`], [`Problem::add_node`], [`Problem::add_root`]).

use egraph_serialize::{ClassId, NodeId};
use std::collections::HashMap;
use thiserror::Error;

/// Index of an e-class in its [`Problem`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClassIx(pub u32);

/// Index of an e-node in its [`Problem`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeIx(pub u32);

impl ClassIx {
    /// The index as a `usize`.
    pub fn ix(self) -> usize {
        self.0 as usize
    }
}

impl NodeIx {
    /// The index as a `usize`.
    pub fn ix(self) -> usize {
        self.0 as usize
    }
}

/// An e-node: its class, the classes of its children (in order, repeats kept: a tree counts a
/// child once per occurrence) and its own cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The node's id in the source document (`"<class>.<k>"` for nodes added with
    /// [`Problem::add_node`]).
    pub name: String,
    /// Operator text, for display only.
    pub op: String,
    /// The class the node belongs to.
    pub class: ClassIx,
    /// The child classes, in order (a class may repeat).
    pub children: Vec<ClassIx>,
    /// The node's own cost: finite and `≥ 0`, or `+∞` when the node must not be chosen.
    pub cost: f64,
}

impl Node {
    /// Whether the cost is finite (the node may be chosen).
    pub fn usable(&self) -> bool {
        self.cost.is_finite()
    }

    /// The distinct child classes, sorted.
    pub fn distinct_children(&self) -> Vec<ClassIx> {
        let mut v = self.children.clone();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// An e-class: its id in the source document and its nodes (in the order they were added).
#[derive(Clone, Debug, PartialEq)]
pub struct Class {
    /// Its id in the source document.
    pub name: String,
    /// Its nodes, in the order they were added.
    pub nodes: Vec<NodeIx>,
}

/// What makes a document or a [`Problem::add_node`] call unusable as an extraction problem.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum ProblemError {
    /// A node's child names a node id that is not in the document.
    #[error("node `{node}` has child `{child}`, which is not a node of the e-graph")]
    UnknownChild {
        /// The node.
        node: String,
        /// The unknown child id.
        child: String,
    },
    /// A root names a class no node belongs to.
    #[error("root e-class `{class}` has no e-node")]
    UnknownRoot {
        /// The root class.
        class: String,
    },
    /// The document has no root class, so there is nothing to extract.
    #[error("the e-graph has no root e-class (`root_eclasses` is empty)")]
    NoRoots,
    /// A cost that is negative or NaN.
    #[error("node `{node}` has cost {cost}; costs must be ≥ 0 (or +∞ for unusable nodes)")]
    InvalidCost {
        /// The node.
        node: String,
        /// Its cost.
        cost: f64,
    },
    /// A class or node index outside the problem (builder use only).
    #[error("index {index} is not a class of the problem ({classes} classes)")]
    BadClassIndex {
        /// The index given.
        index: u32,
        /// Classes of the problem.
        classes: usize,
    },
    /// A node index outside the problem (builder use only).
    #[error("index {index} is not a node of the problem ({nodes} nodes)")]
    BadNodeIndex {
        /// The index given.
        index: u32,
        /// Nodes of the problem.
        nodes: usize,
    },
    /// More classes or nodes than fit a `u32` index.
    #[error("the e-graph is too large: more than {0} classes or nodes")]
    TooLarge(u32),
}

/// An extraction problem (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Problem {
    classes: Vec<Class>,
    nodes: Vec<Node>,
    roots: Vec<ClassIx>,
}

impl Problem {
    /// An empty problem.
    pub fn new() -> Problem {
        Problem::default()
    }

    /// Adds an empty class named `name`; returns its index.
    pub fn add_class(&mut self, name: impl Into<String>) -> Result<ClassIx, ProblemError> {
        let ix = u32::try_from(self.classes.len()).map_err(|_| ProblemError::TooLarge(u32::MAX))?;
        self.classes.push(Class {
            name: name.into(),
            nodes: Vec::new(),
        });
        Ok(ClassIx(ix))
    }

    /// Adds a node to `class` with the given child classes and cost; its name is
    /// `"<class name>.<position in the class>"`.
    pub fn add_node(
        &mut self,
        class: ClassIx,
        op: impl Into<String>,
        cost: f64,
        children: &[ClassIx],
    ) -> Result<NodeIx, ProblemError> {
        let k = self
            .classes
            .get(class.ix())
            .map(|c| c.nodes.len())
            .ok_or(self.bad_class(class))?;
        let name = format!("{}.{k}", self.classes[class.ix()].name);
        self.add_named_node(name, class, op, cost, children)
    }

    /// [`Problem::add_node`] with an explicit node name.
    pub fn add_named_node(
        &mut self,
        name: impl Into<String>,
        class: ClassIx,
        op: impl Into<String>,
        cost: f64,
        children: &[ClassIx],
    ) -> Result<NodeIx, ProblemError> {
        let name = name.into();
        if cost.is_nan() || cost < 0.0 {
            return Err(ProblemError::InvalidCost { node: name, cost });
        }
        for c in std::iter::once(&class).chain(children) {
            if c.ix() >= self.classes.len() {
                return Err(self.bad_class(*c));
            }
        }
        let ix = u32::try_from(self.nodes.len()).map_err(|_| ProblemError::TooLarge(u32::MAX))?;
        self.nodes.push(Node {
            name,
            op: op.into(),
            class,
            children: children.to_vec(),
            cost,
        });
        self.classes[class.ix()].nodes.push(NodeIx(ix));
        Ok(NodeIx(ix))
    }

    /// Replaces the own cost of node `n` (`≥ 0`, or `+∞`: unusable), e.g. to reprice a node
    /// between extractions ([`crate::extract::cover`] repairs attention-pair shares this way).
    pub fn set_cost(&mut self, n: NodeIx, cost: f64) -> Result<(), ProblemError> {
        let Some(node) = self.nodes.get_mut(n.ix()) else {
            return Err(ProblemError::BadNodeIndex {
                index: n.0,
                nodes: self.nodes.len(),
            });
        };
        if cost.is_nan() || cost < 0.0 {
            return Err(ProblemError::InvalidCost {
                node: node.name.clone(),
                cost,
            });
        }
        node.cost = cost;
        Ok(())
    }

    /// Makes `class` a root (a class listed twice is a root once).
    pub fn add_root(&mut self, class: ClassIx) -> Result<(), ProblemError> {
        if class.ix() >= self.classes.len() {
            return Err(self.bad_class(class));
        }
        if !self.roots.contains(&class) {
            self.roots.push(class);
        }
        Ok(())
    }

    fn bad_class(&self, c: ClassIx) -> ProblemError {
        ProblemError::BadClassIndex {
            index: c.0,
            classes: self.classes.len(),
        }
    }

    /// The problem of an `egraph-serialize` document.
    ///
    /// Classes are numbered in the order their first node appears in `nodes` (the document's
    /// order, so the same file always gives the same problem), nodes in document order. A child
    /// is a node id; the child class is that node's `eclass` (any node of it may be chosen).
    /// Costs: a `subsumed` node (egglog) is unusable (`+∞`), and so is a node whose cost is
    /// `f64::MAX` or more (how [`crate::extract::serialize::to_serialized`] writes `+∞`, which JSON
    /// cannot hold); a negative cost is an error. Roots: `root_eclasses` in order, duplicates once;
    /// at least one is required.
    pub fn from_serialized(g: &egraph_serialize::EGraph) -> Result<Problem, ProblemError> {
        let mut p = Problem::new();
        let mut class_of: HashMap<&ClassId, ClassIx> = HashMap::new();
        for node in g.nodes.values() {
            if !class_of.contains_key(&node.eclass) {
                let ix = p.add_class(node.eclass.to_string())?;
                class_of.insert(&node.eclass, ix);
            }
        }
        let node_class = |id: &NodeId| g.nodes.get(id).and_then(|n| class_of.get(&n.eclass));
        for (id, node) in &g.nodes {
            let mut children = Vec::with_capacity(node.children.len());
            for ch in &node.children {
                let c = node_class(ch).ok_or_else(|| ProblemError::UnknownChild {
                    node: id.to_string(),
                    child: ch.to_string(),
                })?;
                children.push(*c);
            }
            let raw = node.cost.into_inner();
            let cost = if node.subsumed || raw >= f64::MAX {
                f64::INFINITY
            } else {
                raw
            };
            let class = class_of[&node.eclass];
            p.add_named_node(id.to_string(), class, node.op.clone(), cost, &children)?;
        }
        if g.root_eclasses.is_empty() {
            return Err(ProblemError::NoRoots);
        }
        for r in &g.root_eclasses {
            let c = class_of.get(r).ok_or_else(|| ProblemError::UnknownRoot {
                class: r.to_string(),
            })?;
            p.add_root(*c)?;
        }
        Ok(p)
    }

    /// All classes, by index.
    pub fn classes(&self) -> &[Class] {
        &self.classes
    }

    /// All nodes, by index.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The root classes (distinct, in the order added).
    pub fn roots(&self) -> &[ClassIx] {
        &self.roots
    }

    /// One class.
    pub fn class(&self, c: ClassIx) -> &Class {
        &self.classes[c.ix()]
    }

    /// One node.
    pub fn node(&self, n: NodeIx) -> &Node {
        &self.nodes[n.ix()]
    }

    /// Number of classes.
    pub fn num_classes(&self) -> usize {
        self.classes.len()
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Appends a copy of `other` (classes and nodes renamed `"<prefix><name>"`, its roots added
    /// as roots): the union of two independent e-graphs, used to build large test inputs.
    pub fn append(&mut self, other: &Problem, prefix: &str) -> Result<(), ProblemError> {
        let base =
            u32::try_from(self.classes.len()).map_err(|_| ProblemError::TooLarge(u32::MAX))?;
        let shift = |c: ClassIx| ClassIx(c.0 + base);
        for c in &other.classes {
            self.add_class(format!("{prefix}{}", c.name))?;
        }
        for n in &other.nodes {
            let children: Vec<ClassIx> = n.children.iter().map(|c| shift(*c)).collect();
            self.add_named_node(
                format!("{prefix}{}", n.name),
                shift(n.class),
                n.op.clone(),
                n.cost,
                &children,
            )?;
        }
        for r in &other.roots {
            self.add_root(shift(*r))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> egraph_serialize::EGraph {
        serde_json::from_str(text).expect("valid test document")
    }

    #[test]
    fn children_are_node_ids_mapped_to_their_classes() {
        let g = doc(r#"{"nodes": {
            "a": {"op": "x", "eclass": "A", "cost": 1.0, "children": []},
            "b": {"op": "y", "eclass": "A", "cost": 2.0, "children": []},
            "c": {"op": "f", "eclass": "C", "cost": 3.0, "children": ["b", "a"]}
        }, "root_eclasses": ["C", "C"]}"#);
        let p = Problem::from_serialized(&g).expect("valid");
        assert_eq!(p.num_classes(), 2);
        assert_eq!(p.class(ClassIx(0)).name, "A");
        assert_eq!(p.class(ClassIx(0)).nodes, vec![NodeIx(0), NodeIx(1)]);
        assert_eq!(p.node(NodeIx(2)).children, vec![ClassIx(0), ClassIx(0)]);
        assert_eq!(p.node(NodeIx(2)).distinct_children(), vec![ClassIx(0)]);
        assert_eq!(p.roots(), &[ClassIx(1)]);
    }

    #[test]
    fn bad_documents_are_errors() {
        let unknown = doc(
            r#"{"nodes": {"a": {"op": "x", "eclass": "A", "children": ["zz"]}},
            "root_eclasses": ["A"]}"#,
        );
        assert!(matches!(
            Problem::from_serialized(&unknown),
            Err(ProblemError::UnknownChild { .. })
        ));
        let no_root = doc(r#"{"nodes": {"a": {"op": "x", "eclass": "A"}}}"#);
        assert_eq!(
            Problem::from_serialized(&no_root),
            Err(ProblemError::NoRoots)
        );
        let bad_root =
            doc(r#"{"nodes": {"a": {"op": "x", "eclass": "A"}}, "root_eclasses": ["B"]}"#);
        assert!(matches!(
            Problem::from_serialized(&bad_root),
            Err(ProblemError::UnknownRoot { .. })
        ));
        let negative = doc(
            r#"{"nodes": {"a": {"op": "x", "eclass": "A", "cost": -1.0}}, "root_eclasses": ["A"]}"#,
        );
        assert!(matches!(
            Problem::from_serialized(&negative),
            Err(ProblemError::InvalidCost { .. })
        ));
    }

    #[test]
    fn subsumed_and_max_costs_are_unusable() {
        let g = doc(r#"{"nodes": {
            "a": {"op": "x", "eclass": "A", "cost": 1.0, "subsumed": true},
            "b": {"op": "y", "eclass": "A", "cost": 1.7976931348623157e308},
            "c": {"op": "z", "eclass": "A"}
        }, "root_eclasses": ["A"]}"#);
        let p = Problem::from_serialized(&g).expect("valid");
        let usable: Vec<bool> = p.nodes().iter().map(Node::usable).collect();
        assert_eq!(usable, vec![false, false, true]);
        assert_eq!(
            p.node(NodeIx(2)).cost,
            1.0,
            "the format's default cost is 1"
        );
    }

    #[test]
    fn builder_checks_indices_and_costs() {
        let mut p = Problem::new();
        let a = p.add_class("a").expect("class");
        assert!(p.add_node(ClassIx(5), "x", 1.0, &[]).is_err());
        assert!(p.add_node(a, "x", 1.0, &[ClassIx(9)]).is_err());
        assert!(p.add_node(a, "x", f64::NAN, &[]).is_err());
        let n = p.add_node(a, "x", f64::INFINITY, &[a]).expect("node");
        assert_eq!(p.node(n).name, "a.0");
        assert!(p.add_root(ClassIx(1)).is_err());
    }
}
