//! Composition of a movement chain (seed 001 §4.4) into one AxisMap: starting from the index
//! expressions of a compute value's operand, walk RESHAPE / PERMUTE / EXPAND / PAD / SHRINK /
//! FLIP / VIEW nodes down to the nearest non-movement node, rewriting the expressions over each
//! node's input axes. PAD contributes in-bounds constraints (the piecewise domain), RESHAPE's
//! `%` contributes guards.

use super::lin::{provably_le, Lin, Ranges};
use super::IndexBookError;
use crate::ir::dim::Dim;
use crate::ir::tiny::{Node, NodeId, Program, Src, UOp};

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

fn malformed(n: &Node, detail: &str) -> IndexBookError {
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
            UOp::Permute { perm } => {
                let mut out = vec![Lin::default(); rank];
                for (j, p) in perm.iter().enumerate() {
                    let slot = out
                        .get_mut(*p)
                        .ok_or_else(|| malformed(cur, "permutation out of range"))?;
                    *slot = idx[j].clone();
                }
                out
            }
            UOp::Expand => idx
                .iter()
                .zip(x.shape.iter().zip(&cur.shape))
                .map(|(e, (a, b))| if a == b { e.clone() } else { Lin::default() })
                .collect(),
            UOp::Pad { pad, value } => {
                let mut out = Vec::with_capacity(rank);
                for ((e, (lo, hi)), size) in idx.iter().zip(pad).zip(&x.shape) {
                    let e = e.add_dim(&Dim::int(-lo));
                    if (*lo, *hi) != (0, 0) && !bounds_group(&e, size, r).is_empty() {
                        read.pad_bounds.push((e.clone(), size.clone()));
                        read.pad_value.get_or_insert(*value);
                    }
                    out.push(e);
                }
                out
            }
            UOp::Shrink { lo, step, .. } => idx
                .iter()
                .zip(lo.iter().zip(step))
                .map(|(e, (l, s))| e.scale(&Dim::int(*s)).add_dim(l))
                .collect(),
            UOp::Flip { axes } => idx
                .iter()
                .enumerate()
                .map(|(p, e)| {
                    if axes.contains(&p) {
                        Lin::constant(x.shape[p].add_int(-1)).sub(e)
                    } else {
                        e.clone()
                    }
                })
                .collect(),
            UOp::View { map } => map
                .iter()
                .map(|a| {
                    a.terms
                        .iter()
                        .try_fold(Lin::constant(Dim::int(a.offset)), |acc, (j, c)| {
                            match idx.get(*j) {
                                Some(e) => Ok(acc.add(&e.scale(&Dim::int(*c)))),
                                None => Err(malformed(cur, "VIEW map names a missing axis")),
                            }
                        })
                })
                .collect::<Result<_, _>>()?,
            UOp::Reshape => reshape(&idx, &cur.shape, &x.shape, r, &mut read.mod_guards),
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

/// RESHAPE from `in_shape` to `out_shape`, indexed by `idx` over `out_shape`: axes are split
/// into groups of equal products (size-1 axes read 0); inside a group the index is linearized
/// and delinearized (`floor(L/stride) mod size`).
fn reshape(
    idx: &[Lin],
    out_shape: &[Dim],
    in_shape: &[Dim],
    r: &Ranges,
    guards: &mut Vec<Vec<String>>,
) -> Vec<Lin> {
    let one = Dim::int(1);
    let outs: Vec<usize> = (0..out_shape.len())
        .filter(|j| out_shape[*j] != one)
        .collect();
    let ins: Vec<usize> = (0..in_shape.len())
        .filter(|p| in_shape[*p] != one)
        .collect();
    let mut result = vec![Lin::default(); in_shape.len()];
    let (mut a, mut b) = (0, 0);
    while a < outs.len() || b < ins.len() {
        // Grow one group until both products agree (the side whose product divides the other
        // grows); when neither divides, the group takes everything that is left.
        let (a0, b0) = (a, b);
        let (mut po, mut pi) = (one.clone(), one.clone());
        if a < outs.len() {
            po = out_shape[outs[a]].clone();
            a += 1;
        }
        if b < ins.len() {
            pi = in_shape[ins[b]].clone();
            b += 1;
        }
        while po != pi {
            let (more_out, more_in) = (a < outs.len(), b < ins.len());
            if !more_out && !more_in {
                break;
            }
            let in_is_multiple = pi.div_exact(&po).is_some();
            let out_is_multiple = po.div_exact(&pi).is_some();
            if more_out && (!more_in || in_is_multiple || !out_is_multiple) {
                po = po.mul(&out_shape[outs[a]]);
                a += 1;
            } else {
                pi = pi.mul(&in_shape[ins[b]]);
                b += 1;
            }
        }
        let group_out = &outs[a0..a];
        let group_in = &ins[b0..b];
        // Linearize the output indices of the group.
        let mut lin = Lin::default();
        let mut stride = Dim::int(1);
        for j in group_out.iter().rev() {
            lin = lin.add(&idx[*j].scale(&stride));
            stride = stride.mul(&out_shape[*j]);
        }
        // Delinearize over the input axes of the group.
        let mut stride = Dim::int(1);
        for (k, p) in group_in.iter().enumerate().rev() {
            let q = lin.floordiv(&stride, r);
            let e = if k == 0 {
                q
            } else {
                q.modulo(&in_shape[*p], r)
            };
            if e.has_floor() {
                guards.push(vec![format!("0<={e}"), format!("{e}<{}", in_shape[*p])]);
            }
            result[*p] = e;
            stride = stride.mul(&in_shape[*p]);
        }
    }
    result
}

/// The data-dependent index variable of a GATHER reading the index value `index_id`.
pub(crate) fn gather_var(index_id: &str) -> Lin {
    Lin::atom(super::lin::Atom::Opaque(index_id.to_string()))
}
