//! Kernel e-nodes (`docs/egraph-design.md` §4): `(kernel {body} in0 in1 …)` sits in the e-class of
//! the value it computes. `{body}` is an [`Attr::Body`] leaf holding a term over Tiny e-nodes whose
//! leaves are attribute leaves and placeholders `$i` ([`Attr::Arg`]) standing for the kernel's
//! `i`-th input class. Its meaning is the body with every `$i` replaced by input `i`; its facts are
//! computed from the body by the same Tiny typing rules as every other e-node ([`body_facts`]).
//!
//! Bodies are kept canonical ([`canonical`]): structurally equal subterms shared, placeholders
//! numbered by first use, inputs distinct — so two fusions that build the same kernel build the same
//! e-node and hash-consing merges them.

use super::attr::Attr;
use super::book::{infer_facts, tiny_parts, Facts, TensorFacts};
use super::lang::TensorLang;
use egg::{Id, Language, RecExpr};
use rustc_hash::{FxHashMap, FxHasher};
use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

/// The body of a kernel: a term over Tiny e-nodes with `$i` placeholders. Compared and ordered
/// as a term (canonical, see [`canonical`], so equal bodies are equal terms) and hashed by a
/// fingerprint of the term computed once; its printed form is made on first use.
#[derive(Clone)]
pub struct KernelBody(Arc<BodyInner>);

struct BodyInner {
    expr: RecExpr<TensorLang>,
    fingerprint: u64,
    text: OnceLock<String>,
    /// [`body_node_facts`] for the first input facts asked about (a kernel's input classes
    /// keep their facts, so the analysis and the cost ask with the same ones).
    facts: OnceLock<(Vec<TensorFacts>, NodeFacts)>,
    /// Values a later layer derives from the body (the cost model's plan choice), by the
    /// fingerprint of what else each was derived from (input facts and cost model: one body is
    /// shared by every kernel e-node of that term, e.g. `add($0, $1)` over many shapes).
    derived: Mutex<FxHashMap<u64, Arc<dyn Any + Send + Sync>>>,
}

/// Facts of every node of a body, shared.
pub type NodeFacts = Result<Arc<Vec<Facts>>, String>;

impl KernelBody {
    /// Wraps a body term (callers pass canonical terms, see [`canonical`]).
    pub fn new(expr: RecExpr<TensorLang>) -> KernelBody {
        let mut h = FxHasher::default();
        expr.hash(&mut h);
        KernelBody(Arc::new(BodyInner {
            fingerprint: h.finish(),
            expr,
            text: OnceLock::new(),
            facts: OnceLock::new(),
            derived: Mutex::default(),
        }))
    }

    /// [`body_node_facts`] of the body, cached for one input facts vector.
    pub fn node_facts(&self, inputs: &[TensorFacts]) -> NodeFacts {
        if let Some((ins, r)) = self.0.facts.get() {
            if ins.as_slice() == inputs {
                return r.clone();
            }
        }
        let r = body_node_facts(&self.0.expr, inputs).map(Arc::new);
        let _ = self.0.facts.set((inputs.to_vec(), r.clone()));
        r
    }

    /// The value `make` derives from the body and whatever `key` fingerprints, cached per key
    /// (computed outside the lock: two threads asking at once may both compute it, and the
    /// first stored value is kept). A later layer's cache on the body (the cost model's plan
    /// choice), typed by that layer; a key holding another type is recomputed, not cached.
    pub fn derived<T: Any + Send + Sync>(&self, key: u64, make: impl FnOnce() -> T) -> Arc<T> {
        let lock = || self.0.derived.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = lock().get(&key) {
            if let Ok(t) = v.clone().downcast::<T>() {
                return t;
            }
        }
        let v = Arc::new(make());
        let stored = lock()
            .entry(key)
            .or_insert_with(|| v.clone() as Arc<dyn Any + Send + Sync>)
            .clone();
        stored.downcast::<T>().unwrap_or(v)
    }

    /// Dtype and shape of the kernel's value ([`body_facts`], cached as [`KernelBody::node_facts`]).
    pub fn facts(&self, inputs: &[TensorFacts]) -> Result<TensorFacts, String> {
        root_facts(&self.node_facts(inputs)?)
    }

    /// The term; its last node is the root.
    pub fn expr(&self) -> &RecExpr<TensorLang> {
        &self.0.expr
    }

    /// The printed term.
    pub fn text(&self) -> &str {
        self.0.text.get_or_init(|| self.0.expr.to_string())
    }

    /// The root node.
    pub fn root(&self) -> &TensorLang {
        &self.0.expr[Id::from(self.0.expr.as_ref().len() - 1)]
    }

    /// Number of non-attribute nodes (ops) in the body.
    pub fn op_count(&self) -> usize {
        self.0.expr.as_ref().iter().filter(|n| !n.is_attr()).count()
    }
}

impl PartialEq for KernelBody {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.fingerprint == other.0.fingerprint && self.0.expr == other.0.expr)
    }
}
impl Eq for KernelBody {}
impl PartialOrd for KernelBody {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for KernelBody {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.0, &other.0) {
            return std::cmp::Ordering::Equal;
        }
        self.0.expr.as_ref().cmp(other.0.expr.as_ref())
    }
}
impl Hash for KernelBody {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.fingerprint.hash(state)
    }
}
impl fmt::Debug for KernelBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KernelBody({})", self.text())
    }
}

/// The body and input classes of a kernel e-node, given the attribute of its first child.
pub fn kernel_parts<'a>(
    children: &'a [Id],
    attr: &dyn Fn(Id) -> Option<&'a Attr>,
) -> Result<(&'a KernelBody, &'a [Id]), String> {
    let (first, inputs) = children
        .split_first()
        .ok_or("a kernel e-node needs a body child")?;
    match attr(*first) {
        Some(Attr::Body(b)) => Ok((b, inputs)),
        _ => Err("the first child of a kernel e-node must be a body leaf".into()),
    }
}

/// Facts of every node of a body, given the facts of the kernel's inputs.
pub fn body_node_facts(
    body: &RecExpr<TensorLang>,
    inputs: &[TensorFacts],
) -> Result<Vec<Facts>, String> {
    let mut facts: Vec<Facts> = Vec::with_capacity(body.as_ref().len());
    for node in body.as_ref() {
        let f = match node {
            TensorLang::Attr(Attr::Arg(i)) => Facts::Tensor(
                inputs
                    .get(*i as usize)
                    .cloned()
                    .ok_or_else(|| format!("placeholder ${i} has no input"))?,
            ),
            TensorLang::Attr(a) => Facts::Attr(a.clone()),
            TensorLang::Kernel(_) => return Err("a kernel body cannot contain a kernel".into()),
            op => {
                let attr = |id: Id| facts[usize::from(id)].attr();
                let parts = tiny_parts(op, &attr)?;
                let f = infer_facts(&parts, &|id| facts[usize::from(id)].tensor().cloned())?;
                Facts::Tensor(f)
            }
        };
        facts.push(f);
    }
    Ok(facts)
}

/// Dtype and shape of a kernel's value.
pub fn body_facts(
    body: &RecExpr<TensorLang>,
    inputs: &[TensorFacts],
) -> Result<TensorFacts, String> {
    root_facts(&body_node_facts(body, inputs)?)
}

/// The facts of a body's root (its last node), which must be a tensor.
fn root_facts(facts: &[Facts]) -> Result<TensorFacts, String> {
    match facts.last() {
        Some(Facts::Tensor(t)) => Ok(t.clone()),
        _ => Err("a kernel body must end in a tensor-valued node".into()),
    }
}

/// Copies `body` into `out`, replacing `$i` by `args[i]` (node ids of `out`). Returns the id of
/// the copied root.
pub fn graft(out: &mut RecExpr<TensorLang>, body: &RecExpr<TensorLang>, args: &[Id]) -> Id {
    let mut map: Vec<Id> = Vec::with_capacity(body.as_ref().len());
    for node in body.as_ref() {
        let id = match node {
            TensorLang::Attr(Attr::Arg(i)) => args[*i as usize],
            n => out.add(n.clone().map_children(|c| map[usize::from(c)])),
        };
        map.push(id);
    }
    *map.last().expect("bodies are non-empty")
}

/// Canonical form of a body whose placeholder `$i` stands for class `inputs[i]`: nodes in
/// depth-first post-order from the root (children left to right), equal subterms shared,
/// placeholders bound to the same class merged and numbered by first use in that order, unused
/// inputs dropped. Returns the body and its input classes in placeholder order.
pub fn canonical(body: &RecExpr<TensorLang>, inputs: &[Id]) -> (RecExpr<TensorLang>, Vec<Id>) {
    // Sized for the body up front: fused bodies are large, and growing the node list, the memo
    // and the stack node by node was a third of this function's time (issue 23).
    let len = body.as_ref().len();
    let mut out: Vec<TensorLang> = Vec::with_capacity(len);
    let mut memo: FxHashMap<TensorLang, Id> =
        FxHashMap::with_capacity_and_hasher(len, Default::default());
    let mut new_inputs: Vec<Id> = Vec::new();
    let mut map: Vec<Option<Id>> = vec![None; len];
    let root = Id::from(len - 1);
    let mut stack: Vec<(Id, bool)> = Vec::with_capacity(len);
    stack.push((root, false));
    while let Some((k, expanded)) = stack.pop() {
        if map[usize::from(k)].is_some() {
            continue;
        }
        let node = &body[k];
        if !expanded {
            stack.push((k, true));
            for c in node.children().iter().rev() {
                stack.push((*c, false));
            }
            continue;
        }
        let n = match node {
            TensorLang::Attr(Attr::Arg(i)) => {
                let class = inputs[*i as usize];
                let pos = match new_inputs.iter().position(|c| *c == class) {
                    Some(p) => p,
                    None => {
                        new_inputs.push(class);
                        new_inputs.len() - 1
                    }
                };
                TensorLang::Attr(Attr::Arg(pos as u32))
            }
            n => n
                .clone()
                .map_children(|c| map[usize::from(c)].expect("children come first")),
        };
        // Looked up before cloning: most nodes of a fused body repeat its parts' nodes.
        let id = match memo.get(&n) {
            Some(id) => *id,
            None => {
                // `RecExpr::add`: children (mapped above) come before the node.
                out.push(n.clone());
                let id = Id::from(out.len() - 1);
                memo.insert(n, id);
                id
            }
        };
        map[usize::from(k)] = Some(id);
    }
    (RecExpr::from(out), new_inputs)
}

/// The e-class of a body node, given the classes of the nodes before it (`None` when it or a
/// child is not an e-node of the e-graph `class_of` looks up).
fn node_class(
    node: &TensorLang,
    inputs: &[Id],
    classes: &[Option<Id>],
    class_of: &dyn Fn(&TensorLang) -> Option<Id>,
) -> Option<Id> {
    match node {
        TensorLang::Attr(Attr::Arg(i)) => inputs.get(*i as usize).copied(),
        n => {
            let mut known = true;
            let looked = n.clone().map_children(|c| {
                let cc = classes[usize::from(c)];
                known &= cc.is_some();
                cc.unwrap_or(c)
            });
            if known {
                class_of(&looked)
            } else {
                None
            }
        }
    }
}

/// The e-class of every node of a body whose placeholder `$i` stands for class `inputs[i]`
/// (`class_of` looks a node up in the e-graph, its children given as e-class ids).
pub fn body_classes(
    body: &RecExpr<TensorLang>,
    inputs: &[Id],
    class_of: &dyn Fn(&TensorLang) -> Option<Id>,
) -> Vec<Option<Id>> {
    let mut classes: Vec<Option<Id>> = Vec::with_capacity(body.as_ref().len());
    for node in body.as_ref() {
        let c = node_class(node, inputs, &classes, class_of);
        classes.push(c);
    }
    classes
}

/// Merges the nodes of a body that compute the same e-class, and replaces a node computing one
/// of the kernel's input classes by that input's placeholder. `class_of` looks a node up in the
/// e-graph, its children given as e-class ids (`None`: not an e-node there). Growth builds bodies
/// from different producers' kernels, which may spell one value two ways (the QK contraction of
/// attention inside the row max and beside it); without the merge the body recomputes it, and
/// region synthesis sees two reductions where there is one. Sound because nodes of one e-class
/// denote the same value. `body` must be canonical (as [`fuse`] returns it; the first node of
/// a class in its order is the one kept), and so is the result. The body is kept unmerged when
/// the merge would reduce it to a bare placeholder.
pub fn merge_same_class(
    body: &RecExpr<TensorLang>,
    inputs: &[Id],
    class_of: &dyn Fn(&TensorLang) -> Option<Id>,
) -> (RecExpr<TensorLang>, Vec<Id>) {
    let nodes = body.as_ref();
    // First the class of every node and the first node of each class (the classes of a node's
    // children are the original nodes', merged or not); the merged body is built only when two
    // nodes share a class, which most bodies do not.
    let mut classes: Vec<Option<Id>> = Vec::with_capacity(nodes.len());
    let mut first: Vec<usize> = Vec::with_capacity(nodes.len());
    let mut by_class: FxHashMap<Id, usize> = FxHashMap::default();
    for (k, node) in nodes.iter().enumerate() {
        let class = node_class(node, inputs, &classes, class_of);
        classes.push(class);
        first.push(class.map_or(k, |c| *by_class.entry(c).or_insert(k)));
    }
    if first.iter().enumerate().all(|(k, f)| *f == k) {
        return (body.clone(), inputs.to_vec());
    }
    let mut out: RecExpr<TensorLang> = RecExpr::default();
    let mut map: Vec<Id> = Vec::with_capacity(nodes.len());
    for (k, node) in nodes.iter().enumerate() {
        let id = if first[k] == k {
            out.add(node.clone().map_children(|c| map[usize::from(c)]))
        } else {
            map[first[k]]
        };
        map.push(id);
    }
    let root = *map.last().expect("bodies are non-empty");
    if matches!(out[root], TensorLang::Attr(_)) {
        return (body.clone(), inputs.to_vec());
    }
    // `out` may hold nodes no longer reachable from the root: canonical keeps only the root's.
    let mut trimmed: RecExpr<TensorLang> = RecExpr::default();
    let mut keep: Vec<Id> = Vec::with_capacity(usize::from(root) + 1);
    for node in &out.as_ref()[..=usize::from(root)] {
        keep.push(trimmed.add(node.clone().map_children(|c| keep[usize::from(c)])));
    }
    canonical(&trimmed, inputs)
}

/// A single-op body: `node` with each tensor child `c` replaced by a placeholder for `c` and
/// each attribute child copied (its attribute given by `attr`). Returns the canonical body and
/// its input classes.
pub fn single_op_body(
    node: &TensorLang,
    attr: &dyn Fn(Id) -> Option<Attr>,
) -> (RecExpr<TensorLang>, Vec<Id>) {
    let mut out: RecExpr<TensorLang> = RecExpr::default();
    let mut inputs: Vec<Id> = Vec::new();
    let n = node.clone().map_children(|c| match attr(c) {
        Some(a) => out.add(TensorLang::Attr(a)),
        None => {
            inputs.push(c);
            out.add(TensorLang::Attr(Attr::Arg(inputs.len() as u32 - 1)))
        }
    });
    out.add(n);
    canonical(&out, &inputs)
}

/// Fuses producer `(p_body, p_inputs)` into consumer `(k_body, k_inputs)` at the consumer's
/// placeholder `arg`: the consumer's `$arg` becomes the producer's body. Returns the canonical
/// fused body and inputs.
pub fn fuse(
    k_body: &RecExpr<TensorLang>,
    k_inputs: &[Id],
    arg: usize,
    p_body: &RecExpr<TensorLang>,
    p_inputs: &[Id],
) -> (RecExpr<TensorLang>, Vec<Id>) {
    let mut all: Vec<Id> = k_inputs.to_vec();
    all.extend_from_slice(p_inputs);
    let mut out: RecExpr<TensorLang> = RecExpr::default();
    let p_args: Vec<Id> = (0..p_inputs.len())
        .map(|j| out.add(TensorLang::Attr(Attr::Arg((k_inputs.len() + j) as u32))))
        .collect();
    let p_root = graft(&mut out, p_body, &p_args);
    let k_args: Vec<Id> = (0..k_inputs.len())
        .map(|j| {
            if j == arg {
                p_root
            } else {
                out.add(TensorLang::Attr(Attr::Arg(j as u32)))
            }
        })
        .collect();
    graft(&mut out, k_body, &k_args);
    canonical(&out, &all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classes(n: usize) -> Vec<Id> {
        (100..100 + n).map(Id::from).collect()
    }

    #[test]
    fn canonical_merges_inputs_and_renumbers() {
        let body: RecExpr<TensorLang> = "(add (relu $1) (relu $0))".parse().unwrap();
        let c = classes(2);
        let (b, ins) = canonical(&body, &[c[0], c[0]]);
        assert_eq!(b.to_string(), "(add (relu $0) (relu $0))");
        assert_eq!(ins, vec![c[0]]);
        let (b, ins) = canonical(&body, &c);
        assert_eq!(b.to_string(), "(add (relu $0) (relu $1))");
        assert_eq!(ins, vec![c[1], c[0]]);
    }

    #[test]
    fn fuse_substitutes_the_producer() {
        let c = classes(3);
        let k: RecExpr<TensorLang> = "(add $0 $1)".parse().unwrap();
        let p: RecExpr<TensorLang> = "(relu $0)".parse().unwrap();
        let (b, ins) = fuse(&k, &[c[0], c[1]], 1, &p, &[c[2]]);
        assert_eq!(b.to_string(), "(add $0 (relu $1))");
        assert_eq!(ins, vec![c[0], c[2]]);
        // Producer input shared with the consumer: one placeholder.
        let (b, ins) = fuse(&k, &[c[0], c[1]], 1, &p, &[c[0]]);
        assert_eq!(b.to_string(), "(add $0 (relu $0))");
        assert_eq!(ins, vec![c[0]]);
    }
}
