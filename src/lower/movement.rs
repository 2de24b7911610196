//! Movement ops and the ops built only from them: `Cast`, `Reshape`, `Permute`, `Expand`, `Pad`
//! (negative pads crop: SHRINK then PAD), `Slice` (SHRINK with steps), `Flip`, `Concat` (tinygrad's
//! `cat`: pad every part to the full size along the axis and add), `Repeat` (tinygrad: reshape →
//! expand → reshape), `Unfold` (a sliding-window VIEW) and `Gather` (the index-dependent view).

use super::util::{bcast, pad_signed};
use super::{LResult, LowerError, Lowerer};
use crate::ir::dim::{Dim, Shape};
use crate::ir::dtype::DType;
use crate::ir::frontend::{Node, Op};
use crate::ir::tiny::{AffineIndex, BinaryOp, NodeId};

/// Lowers every op of this family.
pub fn lower(lw: &mut Lowerer, node: &Node) -> LResult<NodeId> {
    if let Op::Concat { axis } = node.op {
        return concat(lw, node, axis);
    }
    let x = lw.input(node, 0)?;
    let b = &mut lw.b;
    let shape = b.shape(x).clone();
    let r = shape.len();
    Ok(match &node.op {
        Op::Cast { to } => b.cast(x, *to)?,
        Op::Reshape { shape } => b.reshape(x, shape.clone())?,
        Op::Permute { perm } => b.permute(x, perm.clone())?,
        Op::Expand { shape } => bcast(b, x, shape)?,
        Op::Pad { pad, value } => {
            let list: Vec<(usize, i64, i64)> = pad
                .iter()
                .enumerate()
                .map(|(i, (l, h))| (i, *l, *h))
                .collect();
            pad_signed(b, x, &list, *value)?
        }
        Op::Slice {
            starts,
            ends,
            steps,
        } => {
            // An empty range (end <= start) has size 0. `start + range_len` (not `max(end,
            // start)`) so that SHRINK's size is the frontend's exactly, also symbolically.
            let hi: Shape = starts
                .iter()
                .zip(ends)
                .zip(&shape)
                .map(|((s, e), d)| s.add(&s.range_len(e, d)))
                .collect();
            b.shrink(x, starts.clone(), hi, steps.clone())?
        }
        Op::Flip { axes } => {
            let mut a = axes.clone();
            a.sort_unstable();
            a.dedup();
            b.flip(x, a)?
        }
        Op::Repeat { repeats } => {
            // base = (1,)*(len(repeats) − ndim) + shape; reshape to [1, s]…, expand to [r, s]…,
            // reshape to [r·s]….
            let extra = repeats.len().saturating_sub(r);
            let mut base: Shape = vec![Dim::int(1); extra];
            base.extend(shape.iter().cloned());
            let lead = repeats.len().saturating_sub(base.len());
            let reps: Vec<i64> = std::iter::repeat_n(1, lead)
                .chain(repeats.iter().copied())
                .collect();
            let mut s1 = Vec::new();
            let mut s2 = Vec::new();
            let mut s3 = Vec::new();
            for (d, rep) in base.iter().zip(&reps) {
                s1.extend([Dim::int(1), d.clone()]);
                s2.extend([Dim::int(*rep), d.clone()]);
                s3.push(d.mul_int(*rep));
            }
            let x1 = b.reshape(x, s1)?;
            let x2 = b.expand(x1, s2)?;
            b.reshape(x2, s3)?
        }
        Op::Unfold { axis, size, step } => {
            // y[…, w, …, k] = x[…, step·w + k, …]
            let mut out = shape.clone();
            out[*axis] = shape[*axis].add_int(-size).floordiv(*step).add_int(1);
            out.push(Dim::int(*size));
            let map = (0..r)
                .map(|a| {
                    if a == *axis {
                        AffineIndex::new(vec![(a, *step), (r, 1)], 0)
                    } else {
                        AffineIndex::new(vec![(a, 1)], 0)
                    }
                })
                .collect();
            b.view(x, out, map)?
        }
        Op::Gather { axis } => {
            let idx = lw.input(node, 1)?;
            lw.b.gather(x, idx, *axis)?
        }
        other => {
            return Err(LowerError::Unsupported(format!(
                "{} is not a movement op",
                other.name()
            )))
        }
    })
}

/// `Concat`: each part padded with (negative) zeros to the full size along `axis`, then summed
/// (bool parts are summed as i32). Pad amounts must be concrete.
fn concat(lw: &mut Lowerer, node: &Node, axis: usize) -> LResult<NodeId> {
    let parts: Vec<NodeId> = (0..node.inputs.len())
        .map(|i| lw.input(node, i))
        .collect::<LResult<_>>()?;
    let b = &mut lw.b;
    let sizes: Vec<i64> = parts
        .iter()
        .map(|p| {
            b.shape(*p)[axis].as_int().ok_or_else(|| {
                LowerError::Unsupported(format!(
                    "Concat along axis {axis} needs concrete sizes on that axis (got {})",
                    b.shape(*p)[axis]
                ))
            })
        })
        .collect::<LResult<_>>()?;
    let total: i64 = sizes.iter().sum();
    let dt = b.dtype(parts[0]);
    let sum_dt = if dt == DType::Bool { DType::I32 } else { dt };
    let mut acc: Option<NodeId> = None;
    let mut offset = 0;
    for (p, n) in parts.iter().zip(&sizes) {
        // Padding with −0.0 keeps the sum exact: x + (−0.0) = x for every x, −0.0 included
        // (+0.0 would turn a −0.0 element into +0.0).
        let padded = pad_signed(b, *p, &[(axis, offset, total - offset - n)], -0.0)?;
        let padded = b.cast(padded, sum_dt)?;
        acc = Some(match acc {
            None => padded,
            Some(a) => b.binary(BinaryOp::Add, a.into(), padded.into())?,
        });
        offset += n;
    }
    let y = acc.ok_or_else(|| LowerError::Unsupported("Concat needs at least one input".into()))?;
    Ok(b.cast(y, dt)?)
}
