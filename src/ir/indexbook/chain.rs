//! Composition of a movement chain (seed 001 §4.4) into one AxisMap: starting from the index
//! expressions of a compute value's operand, walk RESHAPE / PERMUTE / EXPAND / PAD / SHRINK /
//! FLIP / VIEW nodes down to the nearest non-movement node, rewriting the expressions over each
//! node's input axes. PAD contributes in-bounds constraints (the piecewise domain), RESHAPE's
//! `%` contributes guards.

use super::lin::{provably_le, Lin, Ranges};
use super::IndexBookError;
use crate::index::movement as mv;
use crate::index::IndexError;
use crate::ir::dim::Dim;
use crate::ir::tiny::{AffineIndex, Node, NodeId, Program, Src, UOp};

/// The result of composing one chain.
pub(crate) struct Read {
    /// The non-movement node that is read.
    pub target: NodeId,
    /// One expression per axis of `target`.
    pub map: Vec<Lin>,
    /// PAD in-bounds conditions `0 <= e < size`, one per padded axis whose bounds the axis
    /// ranges do not already imply.
    pub pad_bounds: Vec<(Lin, Dim)>,
    /// `%` guards of reshapes (`["0<=e", "e<c"]`).
    pub mod_guards: Vec<Vec<String>>,
    /// The fill of the outermost PAD (nearest the consumer) whose bounds can be violated.
    pub pad_value: Option<f64>,
}

fn malformed(n: &Node, detail: impl std::fmt::Display) -> IndexBookError {
    IndexBookError::Malformed {
        node: n.id,
        detail: detail.to_string(),
    }
}

fn src_node<'p>(prog: &'p Program, n: &Node) -> Result<&'p Node, IndexBookError> {
    match n.src.first() {
        Some(Src::Node(id)) => prog
            .nodes
            .get(id.index())
            .ok_or_else(|| malformed(n, "source out of range")),
        _ => Err(malformed(n, "a movement op needs a node source")),
    }
}

/// Composes the chain that starts at `start`, whose axes are indexed by `idx`.
pub(crate) fn compose(
    prog: &Program,
    start: NodeId,
    mut idx: Vec<Lin>,
    r: &Ranges,
) -> Result<Read, IndexBookError> {
    let mut read = Read {
        target: start,
        map: Vec::new(),
        pad_bounds: Vec::new(),
        mod_guards: Vec::new(),
        pad_value: None,
    };
    let mut cur = prog
        .nodes
        .get(start.index())
        .ok_or(IndexBookError::UnknownNode(start))?;
    while cur.uop.is_movement() {
        let x = src_node(prog, cur)?;
        if idx.len() != cur.shape.len() {
            return Err(malformed(cur, "rank differs from its shape"));
        }
        let rank = x.shape.len();
        idx = match &cur.uop {
            UOp::Permute { perm } => mv::permute(&idx, perm).map_err(|e| malformed(cur, e))?,
            UOp::Expand => mv::expand(&idx, &x.shape),
            UOp::Pad { pad, value } => {
                let out = mv::pad(&idx, pad).map_err(|e| malformed(cur, e))?;
                for ((e, (lo, hi)), size) in out.iter().zip(pad).zip(&x.shape) {
                    if (*lo, *hi) != (0, 0) && !bounds_group(e, size, r).is_empty() {
                        read.pad_bounds.push((e.clone(), size.clone()));
                        read.pad_value.get_or_insert(*value);
                    }
                }
                out
            }
            UOp::Shrink { lo, step, .. } => {
                mv::shrink(&idx, lo, step).map_err(|e| malformed(cur, e))?
            }
            UOp::Flip { axes } => mv::flip(&idx, axes, &x.shape).map_err(|e| malformed(cur, e))?,
            UOp::View { map } => {
                mv::view(&idx, map.iter().map(AffineIndex::row)).map_err(|e| malformed(cur, e))?
            }
            UOp::Reshape => reshape(&idx, &cur.shape, &x.shape, r, &mut read.mod_guards)
                .map_err(|e| malformed(cur, e))?,
            _ => return Err(malformed(cur, "not a movement op")),
        };
        if idx.len() != rank {
            return Err(malformed(cur, "rank differs from its source"));
        }
        cur = x;
    }
    read.target = cur.id;
    read.map = idx;
    Ok(read)
}

/// `["0<=e", "e<size"]` without the halves the ranges already imply.
pub(crate) fn bounds_group(e: &Lin, size: &Dim, r: &Ranges) -> Vec<String> {
    let range = e.range(r);
    let mut g = Vec::new();
    if !range
        .as_ref()
        .is_some_and(|(lo, _)| provably_le(&Dim::int(0), lo))
    {
        g.push(format!("0<={e}"));
    }
    if !range
        .as_ref()
        .is_some_and(|(_, hi)| provably_le(&hi.add_int(1), size))
    {
        g.push(format!("{e}<{size}"));
    }
    g
}

/// RESHAPE from `in_shape` to `out_shape`, indexed by `idx` over `out_shape` (the index
/// algebra's [`mv::reshape`] over the finest grouping, one group of everything when the shapes
/// share no grouping); every operand index with a floor gets its `%` guard.
fn reshape(
    idx: &[Lin],
    out_shape: &[Dim],
    in_shape: &[Dim],
    r: &Ranges,
    guards: &mut Vec<Vec<String>>,
) -> Result<Vec<Lin>, IndexError> {
    let groups = mv::reshape_groups(in_shape, out_shape)
        .unwrap_or_else(|| vec![mv::whole_group(in_shape, out_shape)]);
    let floor = |e: &Lin, d: &Dim| -> Result<Lin, IndexError> { Ok(e.floordiv(d, r)) };
    mv::reshape(idx, in_shape, out_shape, &groups, &floor, &mut |p, e| {
        if e.has_floor() {
            guards.push(vec![format!("0<={e}"), format!("{e}<{}", in_shape[p])]);
        }
    })
}

/// The data-dependent index variable of a GATHER reading the index value `index_id`.
pub(crate) fn gather_var(index_id: &str) -> Lin {
    Lin::atom(super::lin::Atom::Opaque(index_id.to_string()))
}
