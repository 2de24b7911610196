//! The IndexBook of a Tiny program (seed 001 §4): for every compute value its axes (`i0`, `i1`, …
//! with size and kind), its domain (per-axis bounds, piecewise when a PAD can be read out of
//! bounds), and for every operand the nearest compute/INPUT value it reads with the movement
//! chain in between composed into ONE AxisMap (affine + floordiv by positive constants,
//! seed §4.3). Dumped in the seed §4.5 form by [`IndexBook::to_json`].
//!
//! Conventions:
//! - Values are the non-movement nodes (INPUT, CONST, RANGE, elementwise, REDUCE, GATHER) plus
//!   program outputs that are movement nodes (they read their own chain). Ids: the tensor name
//!   for INPUTs and outputs, `nK` otherwise.
//! - Axis ids are global sequence numbers in node order.
//! - An axis of size other than 1 is `broadcast` when the value has operands and none of their
//!   maps mentions it (the value is constant along it: it came from an EXPAND), else `iter`.
//! - A REDUCE reads its operand with reduce axes `k0`, `k1`, … (bounded in its domain);
//!   `reduce_axes` lists, per reduced axis, the id of the operand value's axis it reads as a plain
//!   `kj` (the seed's "id before deletion"), or else (a window read through a VIEW, a reshape)
//!   the id of a fresh axis of kind `reduce` named `kj` listed in the REDUCE's own `axes`.
//! - A PAD whose bounds can be violated makes the domain two pieces: the in-bounds piece and the
//!   pad piece (`["else_pad_piece"]`, seed §4.5); the padded read carries `pad_value`.
//! - `%` of a reshape is `e-c*(e//c)` with the guard `0<=e-c*(e//c)<c` in the domain.
//! - A floordiv by a symbolic size or a GATHER index marks the value `non_scop`.

mod chain;
mod lin;
#[cfg(test)]
pub(crate) use chain::compose as compose_chain;
pub(crate) use lin::{Lin, Ranges, Var};

use crate::ir::dim::Dim;
use crate::ir::tiny::{self, scalar_json, NodeId, Program, Src, TinyError, UOp};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Why an IndexBook could not be built.
#[derive(Debug, thiserror::Error)]
pub enum IndexBookError {
    /// Error: The Tiny program does not verify: *0*.
    #[error("the Tiny program does not verify: {0}")]
    Invalid(#[from] TinyError),
    /// Error: Value id *0* names two values.
    #[error("value id `{0}` names two values")]
    DuplicateValue(String),
    /// Error: Node *0* does not exist.
    #[error("node {0} does not exist")]
    UnknownNode(NodeId),
    /// Error: *node*: *detail*.
    #[error("{node}: {detail}")]
    Malformed {
        /// The node.
        node: NodeId,
        /// What is wrong.
        detail: String,
    },
}

/// What an axis ranges over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AxisKind {
    /// Error: Iter.
    Iter,
    /// Error: Reduce.
    Reduce,
    /// Error: Broadcast.
    Broadcast,
}

impl AxisKind {
    /// The kind's name in dumps (`iter`, `reduce`, `broadcast`).
    pub fn name(self) -> &'static str {
        match self {
            AxisKind::Iter => "iter",
            AxisKind::Reduce => "reduce",
            AxisKind::Broadcast => "broadcast",
        }
    }
}

/// An AxisVar: a global id, its name in the value (`i0`, or `k0` for a REDUCE's fresh reduce
/// axis), its size and kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxisVar {
    /// Its position.
    pub id: usize,
    /// Its name (`i0`, `r0`, …).
    pub name: String,
    /// Its extent.
    pub size: Dim,
    /// Iteration, reduction or broadcast.
    pub kind: AxisKind,
}

/// A conjunction of constraint groups (one group per axis or guard): `[["0<=i0","i0<M"], …]`.
pub type Constraints = Vec<Vec<String>>;

/// The domain of a value: one box, or pieces (a PAD's in-bounds piece and its pad piece).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Domain {
    /// Error: Constraints.
    Constraints(Constraints),
    /// Error: Pieces.
    Pieces(Vec<Constraints>),
}

/// One operand read: the value read and the composed map, one expression per axis of it.
#[derive(Clone, Debug, PartialEq)]
pub struct InputRead {
    /// The value read.
    pub value_id: String,
    /// Its index, one expression per axis of the value read.
    pub map: Vec<String>,
    /// The fill outside the in-bounds piece when the read goes through a PAD.
    pub pad_value: Option<f64>,
}

/// The IndexInfo of one value.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexInfo {
    /// The value's axes (reduction axes last).
    pub axes: Vec<AxisVar>,
    /// Its iteration domain.
    pub domain: Domain,
    /// The values it reads, with their index maps.
    pub inputs: Vec<InputRead>,
    /// Positions of its reduction axes in `axes`.
    pub reduce_axes: Vec<usize>,
    /// True when an index is not affine (outside the polyhedral fragment).
    pub non_scop: bool,
}

/// The IndexBook: values in node order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IndexBook {
    /// Every compute value, in node order.
    pub values: Vec<(String, IndexInfo)>,
}

impl IndexBook {
    /// The IndexInfo of a value id.
    pub fn get(&self, id: &str) -> Option<&IndexInfo> {
        self.values.iter().find(|(v, _)| v == id).map(|(_, i)| i)
    }

    /// The seed §4.5 form: `{"index_book": {"<value>": {"axes", "domain", "inputs", …}}}`.
    pub fn to_json(&self) -> Value {
        let mut book = Map::new();
        for (id, info) in &self.values {
            book.insert(id.clone(), info.to_json());
        }
        json!({ "index_book": book })
    }
}

impl IndexInfo {
    fn to_json(&self) -> Value {
        let axes: Vec<Value> = self
            .axes
            .iter()
            .map(|a| json!({"id": a.id, "name": a.name, "size": a.size, "kind": a.kind.name()}))
            .collect();
        let domain = match &self.domain {
            Domain::Constraints(c) => json!({ "constraints": c }),
            Domain::Pieces(ps) => {
                let ps: Vec<Value> = ps.iter().map(|c| json!({ "constraints": c })).collect();
                json!({ "pieces": ps })
            }
        };
        let inputs: Vec<Value> = self
            .inputs
            .iter()
            .map(|i| {
                let mut o = Map::new();
                o.insert("value_id".into(), json!(i.value_id));
                o.insert("map".into(), json!(i.map));
                if let Some(v) = i.pad_value {
                    o.insert("pad_value".into(), scalar_json(v));
                }
                Value::Object(o)
            })
            .collect();
        let mut o = Map::new();
        o.insert("axes".into(), Value::Array(axes));
        o.insert("domain".into(), domain);
        o.insert("inputs".into(), Value::Array(inputs));
        if !self.reduce_axes.is_empty() {
            o.insert("reduce_axes".into(), json!(self.reduce_axes));
        }
        if self.non_scop {
            o.insert("flags".into(), json!(["non_scop"]));
        }
        Value::Object(o)
    }
}

/// The group `["0<=x", "x<size"]` of an axis named `x`.
fn axis_bounds(name: &str, size: &Dim) -> Vec<String> {
    vec![format!("0<={name}"), format!("{name}<{size}")]
}

/// Value ids of the program's values: INPUT tensor names, then output names, `nK` otherwise;
/// movement nodes only when they are outputs.
fn value_ids(prog: &Program) -> Result<BTreeMap<NodeId, String>, IndexBookError> {
    let mut ids = BTreeMap::new();
    for n in &prog.nodes {
        if let UOp::Input { tensor_id } = &n.uop {
            ids.insert(n.id, tensor_id.clone());
        }
    }
    for o in &prog.outputs {
        ids.entry(o.node).or_insert_with(|| o.tensor.clone());
    }
    for n in &prog.nodes {
        if !n.uop.is_movement() {
            ids.entry(n.id).or_insert_with(|| n.id.to_string());
        }
    }
    let mut seen = BTreeSet::new();
    for id in ids.values() {
        if !seen.insert(id.as_str()) {
            return Err(IndexBookError::DuplicateValue(id.clone()));
        }
    }
    Ok(ids)
}

/// Builds the IndexBook of a verified Tiny program.
pub fn index_book(prog: &Program) -> Result<IndexBook, IndexBookError> {
    tiny::verify(prog)?;
    let ids = value_ids(prog)?;
    let mut book = IndexBook::default();
    // Per value node: its index in `book.values` (to find the axis ids a REDUCE reduces).
    let mut slot: BTreeMap<NodeId, usize> = BTreeMap::new();
    let mut next_id = 0usize;
    for n in &prog.nodes {
        let Some(id) = ids.get(&n.id) else { continue };
        let info = value_info(prog, n, &ids, &book, &slot, &mut next_id)?;
        slot.insert(n.id, book.values.len());
        book.values.push((id.clone(), info));
    }
    Ok(book)
}

/// The operands a value reads and the index expressions of each operand's axes.
fn operands(n: &tiny::Node) -> Vec<(NodeId, Vec<Lin>)> {
    let ident = |rank: usize| (0..rank).map(|j| Lin::var(Var::I(j))).collect::<Vec<_>>();
    if n.uop.is_movement() {
        // An output that is a view reads its own chain.
        return vec![(n.id, ident(n.shape.len()))];
    }
    n.src
        .iter()
        .filter_map(|s| match s {
            Src::Node(x) => Some(*x),
            Src::Imm(_) => None,
        })
        .map(|x| (x, ident(n.shape.len())))
        .collect()
}

fn value_info(
    prog: &Program,
    n: &tiny::Node,
    ids: &BTreeMap<NodeId, String>,
    book: &IndexBook,
    slot: &BTreeMap<NodeId, usize>,
    next_id: &mut usize,
) -> Result<IndexInfo, IndexBookError> {
    let iters = n.shape.clone();
    let mut reduces: Vec<Dim> = Vec::new();
    let mut reads: Vec<(NodeId, Vec<Lin>)> = operands(n);
    if let UOp::Reduce { axes, .. } = &n.uop {
        let src = reads
            .first()
            .map(|r| r.0)
            .ok_or(IndexBookError::UnknownNode(n.id))?;
        let shape = &prog
            .nodes
            .get(src.index())
            .ok_or(IndexBookError::UnknownNode(src))?
            .shape;
        let (mut i, mut k) = (0, 0);
        let mut idx = Vec::with_capacity(shape.len());
        for (p, size) in shape.iter().enumerate() {
            if axes.contains(&p) {
                idx.push(Lin::var(Var::K(k)));
                reduces.push(size.clone());
                k += 1;
            } else {
                idx.push(Lin::var(Var::I(i)));
                i += 1;
            }
        }
        reads = vec![(src, idx)];
    }
    let ranges = Ranges {
        iters: &iters,
        reduces: &reduces,
    };
    let mut composed = Vec::with_capacity(reads.len());
    for (start, idx) in reads {
        composed.push(chain::compose(prog, start, idx, &ranges)?);
    }
    if let UOp::Gather { axis } = &n.uop {
        // The data operand's gathered axis is the value of the index operand.
        let index_id = composed
            .get(1)
            .and_then(|r| ids.get(&r.target))
            .cloned()
            .unwrap_or_default();
        if let Some(slot) = composed.first_mut().and_then(|r| r.map.get_mut(*axis)) {
            *slot = chain::gather_var(&index_id);
        }
    }
    let mut info = IndexInfo {
        axes: Vec::new(),
        domain: Domain::Constraints(Vec::new()),
        inputs: Vec::new(),
        reduce_axes: Vec::new(),
        non_scop: false,
    };
    for (j, size) in iters.iter().enumerate() {
        let v = Var::I(j);
        let used = composed
            .iter()
            .any(|r| r.map.iter().any(|e| e.mentions(&|x| *x == v)));
        let kind = if composed.is_empty() || used || size.is_int(1) {
            AxisKind::Iter
        } else {
            AxisKind::Broadcast
        };
        info.axes.push(AxisVar {
            id: *next_id,
            name: format!("i{j}"),
            size: size.clone(),
            kind,
        });
        *next_id += 1;
    }
    // Reduce axes: the operand value's axis when read as a plain `kj` of the same extent.
    for (j, size) in reduces.iter().enumerate() {
        let from_operand = composed.first().and_then(|r| {
            let pos = r.map.iter().position(|e| e.as_var() == Some(&Var::K(j)))?;
            let (_, src) = book.values.get(*slot.get(&r.target)?)?;
            src.axes.get(pos).filter(|a| a.size == *size).map(|a| a.id)
        });
        match from_operand {
            Some(id) => info.reduce_axes.push(id),
            None => {
                info.axes.push(AxisVar {
                    id: *next_id,
                    name: format!("k{j}"),
                    size: size.clone(),
                    kind: AxisKind::Reduce,
                });
                info.reduce_axes.push(*next_id);
                *next_id += 1;
            }
        }
    }
    // Domain: axis bounds, reduce bounds, `%` guards; PAD guards split it into pieces.
    let mut base: Constraints = iters
        .iter()
        .enumerate()
        .map(|(j, s)| axis_bounds(&format!("i{j}"), s))
        .chain(
            reduces
                .iter()
                .enumerate()
                .map(|(j, s)| axis_bounds(&format!("k{j}"), s)),
        )
        .collect();
    let mut pads: Constraints = Vec::new();
    for r in &composed {
        for g in &r.mod_guards {
            if !base.contains(g) {
                base.push(g.clone());
            }
        }
        for (e, size) in &r.pad_bounds {
            let g = chain::bounds_group(e, size, &ranges);
            if !pads.contains(&g) {
                pads.push(g);
            }
        }
    }
    info.domain = if pads.is_empty() {
        Domain::Constraints(base)
    } else {
        let mut inb = base.clone();
        inb.extend(pads);
        let mut other = base;
        other.push(vec!["else_pad_piece".to_string()]);
        Domain::Pieces(vec![inb, other])
    };
    for r in composed {
        info.non_scop |= r.map.iter().any(Lin::is_non_scop);
        let value_id = ids
            .get(&r.target)
            .cloned()
            .ok_or(IndexBookError::UnknownNode(r.target))?;
        info.inputs.push(InputRead {
            value_id,
            map: r.map.iter().map(|e| e.to_string()).collect(),
            pad_value: r.pad_value,
        });
    }
    Ok(info)
}
