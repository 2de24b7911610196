//! The IndexBook analysis (seed 001 §4): the facts every e-class carries. A tensor class knows its
//! dtype and (symbolic) shape; an attribute class its value. Facts are computed by Tiny IR's typing
//! rules ([`crate::ir::tiny::infer_node`] through [`tiny_parts`]), so the e-graph and Tiny IR can
//! never disagree on what a node means. Two classes with different facts never merge: a rewrite that
//! would merge them is unsound, and the merge asserts.
//!
//! TODO(issue 3): axis kinds (iter/broadcast/reduce), access maps (affine + floordiv), piecewise
//! domain facts, FLOPs and bytes join [`TensorFacts`] with the movement and contraction rules.

use super::attr::Attr;
use super::kernel::kernel_parts;
use super::lang::TensorLang;
use crate::ir::dim::Shape;
use crate::ir::dtype::DType;
use crate::ir::tiny::{infer_node, Node, NodeId, Program, Src, UOp};
use egg::{Analysis, DidMerge, EGraph, Id};

/// Facts of a tensor-valued e-class.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorFacts {
    /// Element type.
    pub dtype: DType,
    /// Shape (symbolic sizes allowed).
    pub shape: Shape,
}

/// Facts of an e-class.
#[derive(Clone, Debug, PartialEq)]
pub enum Facts {
    /// An attribute leaf: its value.
    Attr(Attr),
    /// A tensor: its dtype and shape.
    Tensor(TensorFacts),
    /// An ill-typed e-node that a rewrite rule built while the phase runner checks rules
    /// ([`crate::rules::try_run_phase`]): why Tiny IR's typing rules reject it. The runner stops
    /// the phase and reports the rule ([`crate::rules::RuleError`]); no other code sees it.
    Invalid(String),
}

impl Facts {
    /// The attribute of an attribute class.
    pub fn attr(&self) -> Option<&Attr> {
        match self {
            Facts::Attr(a) => Some(a),
            _ => None,
        }
    }

    /// The dtype and shape of a tensor class.
    pub fn tensor(&self) -> Option<&TensorFacts> {
        match self {
            Facts::Tensor(t) => Some(t),
            _ => None,
        }
    }
}

/// What a rewrite did wrong, found by the analysis while a checked phase runs
/// ([`crate::rules::try_run_phase`] turns it into a [`crate::rules::RuleError`] naming the rule).
#[derive(Clone, Debug, PartialEq)]
pub enum FactError {
    /// A new e-node Tiny IR's typing rules reject.
    IllTyped {
        /// The e-node, printed.
        node: String,
        /// Why it is ill-typed.
        why: String,
    },
    /// A union of two e-classes with different facts (dtype or shape): an unsound rewrite.
    Conflict {
        /// The facts of the two classes, printed.
        left: String,
        /// See `left`.
        right: String,
    },
}

thread_local! {
    /// `Some` while a checked phase runs on this thread: the analysis records ill-typed nodes
    /// and conflicting merges here instead of panicking. egg runs rules on the calling thread.
    static FACT_ERRORS: std::cell::RefCell<Option<Vec<FactError>>> = const { std::cell::RefCell::new(None) };
}

/// Starts recording [`FactError`]s on this thread (instead of panicking); returns whether
/// recording was already on (nested checked phases keep the outer recording).
pub fn record_fact_errors() -> bool {
    FACT_ERRORS.with(|e| {
        let mut e = e.borrow_mut();
        let was = e.is_some();
        if !was {
            *e = Some(Vec::new());
        }
        was
    })
}

/// Number of [`FactError`]s recorded so far on this thread.
pub fn fact_error_count() -> usize {
    FACT_ERRORS.with(|e| e.borrow().as_ref().map_or(0, Vec::len))
}

/// The [`FactError`]s recorded so far on this thread (recording stays on).
pub fn fact_errors() -> Vec<FactError> {
    FACT_ERRORS.with(|e| e.borrow().clone().unwrap_or_default())
}

/// Stops recording and returns what was recorded (empty when recording was off).
pub fn take_fact_errors() -> Vec<FactError> {
    FACT_ERRORS.with(|e| e.borrow_mut().take().unwrap_or_default())
}

/// Records `e` when recording is on; returns false when it is off (the caller panics).
fn record(e: FactError) -> bool {
    FACT_ERRORS.with(|slot| match slot.borrow_mut().as_mut() {
        Some(v) => {
            v.push(e);
            true
        }
        None => false,
    })
}

/// The IndexBook analysis.
#[derive(Clone, Debug, Default)]
pub struct IndexBook;

/// The e-graph type of dlc-egg.
pub type TensorGraph = EGraph<TensorLang, IndexBook>;

/// An operand of a Tiny node seen from an e-node: a tensor class or an immediate number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand {
    /// A tensor e-class.
    Tensor(Id),
    /// An immediate number.
    Imm(f64),
}

/// A Tiny node's op, operands and declared result, read off an e-node (attribute children resolved
/// through `attr`). The declared dtype/shape matter only for ops whose result is an argument.
#[derive(Clone, Debug, PartialEq)]
pub struct TinyParts {
    /// The Tiny op.
    pub uop: UOp,
    /// Its operands.
    pub operands: Vec<Operand>,
    /// Result dtype.
    pub dtype: DType,
    /// Result shape.
    pub shape: Shape,
}

fn want<T>(v: Option<T>, what: &str, n: &TensorLang) -> Result<T, String> {
    v.ok_or_else(|| format!("{n}: expected {what}"))
}

/// Reads the Tiny meaning of a non-attribute e-node.
pub fn tiny_parts<'a>(
    n: &TensorLang,
    attr: &dyn Fn(Id) -> Option<&'a Attr>,
) -> Result<TinyParts, String> {
    use TensorLang as T;
    let name = |id: Id| match attr(id) {
        Some(Attr::Name(s)) => Some(s.clone()),
        _ => None,
    };
    let dtype = |id: Id| match attr(id) {
        Some(Attr::DType(d)) => Some(*d),
        _ => None,
    };
    let shape = |id: Id| match attr(id) {
        Some(Attr::Shape(s)) => Some(s.to_vec()),
        _ => None,
    };
    let num = |id: Id| match attr(id) {
        Some(Attr::Num(v)) => Some(v.0),
        _ => None,
    };
    let usizes = |id: Id| attr(id).and_then(|a| a.as_usizes());
    let operand = |id: Id| match attr(id) {
        Some(Attr::Num(v)) => Operand::Imm(v.0),
        _ => Operand::Tensor(id),
    };
    let (uop, operands, dt, sh): (UOp, Vec<Operand>, DType, Shape) = match n {
        T::Attr(_) => return Err("attribute leaves have no Tiny meaning".into()),
        T::Kernel(_) => {
            return Err("kernel nodes have no single Tiny meaning (see kernel::body_facts)".into())
        }
        T::Read([x, a]) => {
            let access = match attr(*a) {
                Some(Attr::Access(acc)) => acc.clone(),
                _ => return Err(format!("{n}: expected an access map")),
            };
            let shape = access.shape.clone();
            (
                UOp::Read { access },
                vec![Operand::Tensor(*x)],
                DType::F32,
                shape,
            )
        }
        T::Input([nm, d, s]) => (
            UOp::Input {
                tensor_id: want(name(*nm), "a name", n)?,
            },
            vec![],
            want(dtype(*d), "a dtype", n)?,
            want(shape(*s), "a shape", n)?,
        ),
        T::Const([v, d]) => (
            UOp::Const {
                value: want(num(*v), "a number", n)?,
            },
            vec![],
            want(dtype(*d), "a dtype", n)?,
            vec![],
        ),
        T::Range(s) => (
            UOp::Range,
            vec![],
            DType::I32,
            want(shape(*s), "a shape", n)?,
        ),
        T::Reshape([x, s]) => (
            UOp::Reshape,
            vec![Operand::Tensor(*x)],
            DType::F32,
            want(shape(*s), "a shape", n)?,
        ),
        T::Permute([x, p]) => (
            UOp::Permute {
                perm: want(usizes(*p), "a permutation", n)?,
            },
            vec![Operand::Tensor(*x)],
            DType::F32,
            vec![],
        ),
        T::Expand([x, s]) => (
            UOp::Expand,
            vec![Operand::Tensor(*x)],
            DType::F32,
            want(shape(*s), "a shape", n)?,
        ),
        T::Pad([x, p, v]) => {
            let pad = match attr(*p) {
                Some(Attr::Pads(p)) => p.clone(),
                _ => return Err(format!("{n}: expected pads")),
            };
            (
                UOp::Pad {
                    pad,
                    value: want(num(*v), "a number", n)?,
                },
                vec![Operand::Tensor(*x)],
                DType::F32,
                vec![],
            )
        }
        T::Shrink([x, lo, hi, st]) => {
            let step = match attr(*st) {
                Some(Attr::Ints(v)) => v.clone(),
                _ => return Err(format!("{n}: expected steps")),
            };
            let uop = UOp::Shrink {
                lo: want(shape(*lo), "lo", n)?,
                hi: want(shape(*hi), "hi", n)?,
                step,
            };
            (uop, vec![Operand::Tensor(*x)], DType::F32, vec![])
        }
        T::Flip([x, a]) => (
            UOp::Flip {
                axes: want(usizes(*a), "axes", n)?,
            },
            vec![Operand::Tensor(*x)],
            DType::F32,
            vec![],
        ),
        T::View([x, s, m]) => {
            let map = match attr(*m) {
                Some(Attr::Map(m)) => m.clone(),
                _ => return Err(format!("{n}: expected an index map")),
            };
            (
                UOp::View { map },
                vec![Operand::Tensor(*x)],
                DType::F32,
                want(shape(*s), "a shape", n)?,
            )
        }
        T::Where([c, a, b]) => (
            UOp::Where,
            vec![Operand::Tensor(*c), operand(*a), operand(*b)],
            DType::F32,
            vec![],
        ),
        T::Cast([x, d]) => (
            UOp::Cast,
            vec![Operand::Tensor(*x)],
            want(dtype(*d), "a dtype", n)?,
            vec![],
        ),
        T::Reduce([op, ax, acc, x]) => {
            let op = match attr(*op) {
                Some(Attr::Op(o)) => *o,
                _ => return Err(format!("{n}: expected a reduce op")),
            };
            let acc = want(dtype(*acc), "an accumulation dtype", n)?;
            (
                UOp::Reduce {
                    op,
                    axes: want(usizes(*ax), "axes", n)?,
                    acc,
                },
                vec![Operand::Tensor(*x)],
                acc,
                vec![],
            )
        }
        T::Scan([op, spec, acc, x]) => {
            let op = match attr(*op) {
                Some(Attr::Op(o)) => *o,
                _ => return Err(format!("{n}: expected a scan op")),
            };
            let acc = want(dtype(*acc), "an accumulation dtype", n)?;
            let (axis, exclusive, reverse) = match usizes(*spec).as_deref() {
                Some(&[a, e, r]) if e <= 1 && r <= 1 => (a, e == 1, r == 1),
                _ => return Err(format!("{n}: expected #[axis,exclusive,reverse]")),
            };
            (
                UOp::Scan {
                    op,
                    axis,
                    exclusive,
                    reverse,
                    acc,
                },
                vec![Operand::Tensor(*x)],
                acc,
                vec![],
            )
        }
        T::Gather([x, i, a]) => {
            let axis = want(usizes(*a).and_then(|v| v.first().copied()), "an axis", n)?;
            (
                UOp::Gather { axis },
                vec![Operand::Tensor(*x), Operand::Tensor(*i)],
                DType::F32,
                vec![],
            )
        }
        other => {
            if let Some((op, x)) = other.unary_op() {
                (UOp::Unary(op), vec![Operand::Tensor(x)], DType::F32, vec![])
            } else if let Some((op, [a, b])) = other.binary_op() {
                (
                    UOp::Binary(op),
                    vec![operand(a), operand(b)],
                    DType::F32,
                    vec![],
                )
            } else {
                return Err(format!("{other}: no Tiny meaning"));
            }
        }
    };
    Ok(TinyParts {
        uop,
        operands,
        dtype: dt,
        shape: sh,
    })
}

/// Dtype and shape of an e-node by Tiny IR's typing rules, given its operands' facts.
pub fn infer_facts(
    parts: &TinyParts,
    operand_facts: &dyn Fn(Id) -> Option<TensorFacts>,
) -> Result<TensorFacts, String> {
    // A two-level Tiny program: one INPUT per tensor operand, then the node itself.
    let mut prog = Program::default();
    let mut src = Vec::with_capacity(parts.operands.len());
    for op in &parts.operands {
        match op {
            Operand::Imm(v) => src.push(Src::Imm(*v)),
            Operand::Tensor(id) => {
                let f =
                    operand_facts(*id).ok_or_else(|| format!("operand {id} is not a tensor"))?;
                let nid = NodeId(prog.nodes.len() as u32);
                prog.nodes.push(Node {
                    id: nid,
                    uop: UOp::Input {
                        tensor_id: format!("operand{}", nid.0),
                    },
                    src: vec![],
                    dtype: f.dtype,
                    shape: f.shape,
                    tag: None,
                });
                src.push(Src::Node(nid));
            }
        }
    }
    let node = Node {
        id: NodeId(prog.nodes.len() as u32),
        uop: parts.uop.clone(),
        src,
        dtype: parts.dtype,
        shape: parts.shape.clone(),
        tag: None,
    };
    let (dtype, shape) = infer_node(&prog, &node).map_err(|e| e.to_string())?;
    Ok(TensorFacts { dtype, shape })
}

impl Analysis<TensorLang> for IndexBook {
    type Data = Facts;

    /// An ill-typed e-node (only a buggy rewrite can build one) is [`Facts::Invalid`] while a
    /// checked phase records errors ([`record_fact_errors`]); outside one it panics.
    fn make(egraph: &mut TensorGraph, enode: &TensorLang, _id: Id) -> Facts {
        if let TensorLang::Attr(a) = enode {
            return Facts::Attr(a.clone());
        }
        let attr = |id: Id| egraph[id].data.attr();
        let facts = if let TensorLang::Kernel(children) = enode {
            kernel_parts(children, &attr).and_then(|(body, inputs)| {
                let ins = inputs
                    .iter()
                    .map(|c| {
                        egraph[*c]
                            .data
                            .tensor()
                            .cloned()
                            .ok_or("a kernel input is not a tensor")
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                body.facts(&ins)
            })
        } else {
            tiny_parts(enode, &attr)
                .and_then(|p| infer_facts(&p, &|id| egraph[id].data.tensor().cloned()))
        };
        match facts {
            Ok(f) => Facts::Tensor(f),
            Err(e) => {
                let err = FactError::IllTyped {
                    node: enode.to_string(),
                    why: e.clone(),
                };
                if !record(err) {
                    panic!(
                        "ill-typed e-node `{enode}` (a rewrite built a node Tiny IR's rules reject): {e}"
                    );
                }
                Facts::Invalid(e)
            }
        }
    }

    /// Equal e-classes have equal facts; anything else is an unsound rewrite (recorded while a
    /// checked phase runs, a panic otherwise).
    fn merge(&mut self, a: &mut Facts, b: Facts) -> DidMerge {
        if *a != b {
            let err = FactError::Conflict {
                left: fmt_facts(a),
                right: fmt_facts(&b),
            };
            if !record(err) {
                panic!(
                    "merging e-classes with different IndexBook facts (an unsound rewrite): {a:?} vs {b:?}"
                );
            }
        }
        DidMerge(false, false)
    }
}

/// Facts as text for diagnostics: `f16[4, 8]`, `attr 3`, `invalid (...)`.
pub fn fmt_facts(f: &Facts) -> String {
    match f {
        Facts::Tensor(t) => format!("{}{}", t.dtype, crate::ir::dim::fmt_shape(&t.shape)),
        Facts::Attr(a) => format!("attribute {a}"),
        Facts::Invalid(why) => format!("ill-typed ({why})"),
    }
}
