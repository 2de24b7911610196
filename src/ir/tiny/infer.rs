//! Typing rules of Tiny IR (seed 002 §3–4) and the verifier. [`infer_node`] is the single source of
//! truth for a node's result dtype and shape; the builder calls it when a node is created and
//! [`verify`] re-checks a whole program after every pass.

use super::{AffineIndex, BinaryOp, Node, NodeId, Program, Src, UOp, UnaryOp};
use crate::diag::codes;
use crate::diag::{Diagnostic, Location};
use crate::ir::dim::{fmt_shape, numel, Dim, Shape};
use crate::ir::dtype::DType;

/// A violated Tiny IR rule. `node` is the offending node's id.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TinyError {
    /// Binary operands of different shapes.
    #[error("{node}: operand shapes {lhs} and {rhs} differ (binary operands must have equal shapes; insert EXPAND)")]
    BroadcastMismatch {
        /// The node.
        node: NodeId,
        /// Left operand shape.
        lhs: String,
        /// Right operand shape.
        rhs: String,
    },
    /// A RESHAPE that changes the element count.
    #[error("{node}: RESHAPE from {from} to {to} changes the element count")]
    AxisSizeMismatch {
        /// The node.
        node: NodeId,
        /// Size before.
        from: String,
        /// Size after.
        to: String,
    },
    /// Not a permutation.
    #[error("{node}: {perm:?} is not a permutation of 0..{rank}")]
    InvalidPermutation {
        /// The node.
        node: NodeId,
        /// The permutation.
        perm: Vec<usize>,
        /// The operand rank.
        rank: usize,
    },
    /// An axis outside the rank.
    #[error("{node}: axis {axis} out of range for rank {rank}")]
    AxisOutOfRange {
        /// The node.
        node: NodeId,
        /// The axis.
        axis: usize,
        /// The rank.
        rank: usize,
    },
    /// Wrong number of operands.
    #[error("{node}: {uop} takes {expected} operands, got {found}")]
    BadArity {
        /// The node.
        node: NodeId,
        /// The op.
        uop: &'static str,
        /// Operands expected.
        expected: usize,
        /// Operands found.
        found: usize,
    },
    /// Operand dtypes that do not fit the op.
    #[error("{node}: dtype mismatch: {detail}")]
    DtypeMismatch {
        /// The node.
        node: NodeId,
        /// What differs.
        detail: String,
    },
    /// An EXPAND changing a size other than 1, or the rank.
    #[error("{node}: EXPAND from {from} to {to}: only size-1 axes may change, rank must stay")]
    InvalidExpand {
        /// The node.
        node: NodeId,
        /// Shape before.
        from: String,
        /// Shape after.
        to: String,
    },
    /// An index or range outside a tensor.
    #[error("{node}: {detail}")]
    OutOfBounds {
        /// The node.
        node: NodeId,
        /// What is out of bounds.
        detail: String,
    },
    /// A REDUCE whose accumulator is not the node dtype.
    #[error("{node}: REDUCE accumulation dtype {acc} must be the node dtype {dtype}")]
    AccDtypeMismatch {
        /// The node.
        node: NodeId,
        /// The accumulator dtype.
        acc: DType,
        /// The node dtype.
        dtype: DType,
    },
    /// A node whose attributes do not fit its op.
    #[error("{node}: malformed node: {detail}")]
    Malformed {
        /// The node.
        node: NodeId,
        /// What is wrong.
        detail: String,
    },
}

impl TinyError {
    /// The offending node.
    pub fn node(&self) -> NodeId {
        match self {
            TinyError::BroadcastMismatch { node, .. }
            | TinyError::AxisSizeMismatch { node, .. }
            | TinyError::InvalidPermutation { node, .. }
            | TinyError::AxisOutOfRange { node, .. }
            | TinyError::BadArity { node, .. }
            | TinyError::DtypeMismatch { node, .. }
            | TinyError::InvalidExpand { node, .. }
            | TinyError::OutOfBounds { node, .. }
            | TinyError::AccDtypeMismatch { node, .. }
            | TinyError::Malformed { node, .. } => *node,
        }
    }

    /// `(code, kind)` shared with the frontend's checks of the same rules.
    pub fn code_kind(&self) -> (&'static str, &'static str) {
        match self {
            TinyError::BroadcastMismatch { .. } => codes::BROADCAST_MISMATCH,
            TinyError::AxisSizeMismatch { .. } => codes::AXIS_SIZE_MISMATCH,
            TinyError::InvalidPermutation { .. } => codes::INVALID_PERMUTATION,
            TinyError::AxisOutOfRange { .. } => codes::AXIS_OUT_OF_RANGE,
            TinyError::BadArity { .. } => codes::WRONG_INPUT_COUNT,
            TinyError::DtypeMismatch { .. } => codes::DTYPE_MISMATCH,
            TinyError::InvalidExpand { .. } => codes::INVALID_EXPAND,
            TinyError::OutOfBounds { .. } => codes::INDEX_OUT_OF_BOUNDS,
            TinyError::AccDtypeMismatch { .. } => codes::ACC_DTYPE_MISSING,
            TinyError::Malformed { .. } => codes::MALFORMED_TINY,
        }
    }

    /// A diagnostic located at the Tiny node (callers may re-locate it at a frontend node).
    pub fn to_diagnostic(&self) -> Diagnostic {
        Diagnostic::error(
            self.code_kind(),
            Location::TinyNode {
                tiny_node: self.node().to_string(),
            },
            self.to_string(),
            "this is a Tiny IR invariant; if the graph.json is valid, please report it as a compiler bug",
        )
    }
}

fn src_node<'a>(prog: &'a Program, n: &Node, i: usize) -> Result<&'a Node, TinyError> {
    match n.src.get(i) {
        Some(Src::Node(id)) if id.index() < prog.nodes.len() && *id < n.id => Ok(prog.node(*id)),
        Some(Src::Node(id)) => Err(TinyError::Malformed {
            node: n.id,
            detail: format!("operand {id} is not an earlier node"),
        }),
        Some(Src::Imm(_)) => Err(TinyError::Malformed {
            node: n.id,
            detail: format!("{} does not take immediate operands", n.uop.name()),
        }),
        None => Err(TinyError::BadArity {
            node: n.id,
            uop: n.uop.name(),
            expected: i + 1,
            found: n.src.len(),
        }),
    }
}

fn arity(n: &Node, expected: usize) -> Result<(), TinyError> {
    if n.src.len() != expected {
        return Err(TinyError::BadArity {
            node: n.id,
            uop: n.uop.name(),
            expected,
            found: n.src.len(),
        });
    }
    Ok(())
}

fn check_axis(n: &Node, axis: usize, rank: usize) -> Result<(), TinyError> {
    if axis >= rank {
        return Err(TinyError::AxisOutOfRange {
            node: n.id,
            axis,
            rank,
        });
    }
    Ok(())
}

/// `a <= b` is provable (their difference is a non-negative constant, or `b - a` has no negative
/// coefficient). Unprovable comparisons of symbolic sizes are accepted here and checked once sizes
/// are bound.
fn not_provably_greater(a: &Dim, b: &Dim) -> bool {
    match b.sub(a).as_int() {
        Some(v) => v >= 0,
        None => true,
    }
}

/// The result `(dtype, shape)` of `n` given its operands in `prog`, or the rule it breaks.
pub fn infer_node(prog: &Program, n: &Node) -> Result<(DType, Shape), TinyError> {
    match &n.uop {
        UOp::Input { .. } => {
            arity(n, 0)?;
            Ok((n.dtype, n.shape.clone()))
        }
        UOp::Const { .. } => {
            arity(n, 0)?;
            if !n.shape.is_empty() {
                return Err(TinyError::Malformed {
                    node: n.id,
                    detail: "CONST is rank 0; EXPAND it".into(),
                });
            }
            Ok((n.dtype, vec![]))
        }
        UOp::Range => {
            arity(n, 0)?;
            if n.shape.len() != 1 {
                return Err(TinyError::Malformed {
                    node: n.id,
                    detail: "RANGE is rank 1".into(),
                });
            }
            Ok((DType::I32, n.shape.clone()))
        }
        UOp::Reshape => {
            arity(n, 1)?;
            let x = src_node(prog, n, 0)?;
            if numel(&x.shape) != numel(&n.shape) {
                return Err(TinyError::AxisSizeMismatch {
                    node: n.id,
                    from: fmt_shape(&x.shape),
                    to: fmt_shape(&n.shape),
                });
            }
            Ok((x.dtype, n.shape.clone()))
        }
        UOp::Permute { perm } => infer_permute(prog, n, perm),
        UOp::Expand => infer_expand(prog, n),
        UOp::Pad { pad, .. } => infer_pad(prog, n, pad),
        UOp::Shrink { lo, hi, step } => infer_shrink(prog, n, lo, hi, step),
        UOp::Flip { axes } => infer_flip(prog, n, axes),
        UOp::View { map } => infer_view(prog, n, map),
        UOp::Read { access } => {
            arity(n, 1)?;
            let x = src_node(prog, n, 0)?;
            access
                .check(x.shape.len())
                .map_err(|detail| TinyError::Malformed { node: n.id, detail })?;
            Ok((x.dtype, access.shape.clone()))
        }
        UOp::Unary(op) => infer_unary(prog, n, op),
        UOp::Binary(op) => infer_binary(prog, n, op),
        UOp::Where => infer_where(prog, n),
        UOp::Cast => {
            arity(n, 1)?;
            let x = src_node(prog, n, 0)?;
            Ok((n.dtype, x.shape.clone()))
        }
        UOp::Reduce { axes, acc, .. } => infer_reduce(prog, n, axes, acc),
        UOp::Scan { axis, acc, .. } => infer_scan(prog, n, axis, acc),
        UOp::Gather { axis } => infer_gather(prog, n, axis),
    }
}

/// `EXPAND`: same rank, each input axis equal to the result's or 1.
fn infer_expand(prog: &Program, n: &Node) -> Result<(DType, Shape), TinyError> {
    arity(n, 1)?;
    let x = src_node(prog, n, 0)?;
    let ok = x.shape.len() == n.shape.len()
        && x.shape
            .iter()
            .zip(&n.shape)
            .all(|(a, b)| a == b || a.is_int(1));
    if !ok {
        return Err(TinyError::InvalidExpand {
            node: n.id,
            from: fmt_shape(&x.shape),
            to: fmt_shape(&n.shape),
        });
    }
    Ok((x.dtype, n.shape.clone()))
}

/// A unary op on a float (neg, relu and abs also on i32); the shape is kept.
fn infer_unary(prog: &Program, n: &Node, op: &UnaryOp) -> Result<(DType, Shape), TinyError> {
    arity(n, 1)?;
    let x = src_node(prog, n, 0)?;
    let int_ok = matches!(op, UnaryOp::Neg | UnaryOp::Relu | UnaryOp::Abs);
    if !(x.dtype.is_float() || (int_ok && x.dtype == DType::I32)) {
        return Err(TinyError::DtypeMismatch {
            node: n.id,
            detail: format!("{} is not defined on {}", n.uop.name(), x.dtype),
        });
    }
    Ok((x.dtype, x.shape.clone()))
}

/// `PERMUTE`: `perm` is a permutation of the input axes.
fn infer_permute(prog: &Program, n: &Node, perm: &[usize]) -> Result<(DType, Shape), TinyError> {
    arity(n, 1)?;
    let x = src_node(prog, n, 0)?;
    let rank = x.shape.len();
    let mut seen = vec![false; rank];
    let valid = perm.len() == rank
        && perm
            .iter()
            .all(|p| *p < rank && !std::mem::replace(&mut seen[*p], true));
    if !valid {
        return Err(TinyError::InvalidPermutation {
            node: n.id,
            perm: perm.to_vec(),
            rank,
        });
    }
    Ok((x.dtype, perm.iter().map(|p| x.shape[*p].clone()).collect()))
}

/// `PAD`: one non-negative `(lo, hi)` per axis widens it.
fn infer_pad(prog: &Program, n: &Node, pad: &[(i64, i64)]) -> Result<(DType, Shape), TinyError> {
    arity(n, 1)?;
    let x = src_node(prog, n, 0)?;
    if pad.len() != x.shape.len() || pad.iter().any(|(l, h)| *l < 0 || *h < 0) {
        return Err(TinyError::OutOfBounds {
            node: n.id,
            detail: format!("PAD needs one non-negative (lo, hi) per axis, got {pad:?}"),
        });
    }
    let shape = x
        .shape
        .iter()
        .zip(pad)
        .map(|(d, (l, h))| d.add_int(l + h))
        .collect();
    Ok((x.dtype, shape))
}

/// `SHRINK`: `0 <= lo <= hi <= size` per axis (where provable), `ceil((hi - lo) / step)` left.
fn infer_shrink(
    prog: &Program,
    n: &Node,
    lo: &[Dim],
    hi: &[Dim],
    step: &[i64],
) -> Result<(DType, Shape), TinyError> {
    arity(n, 1)?;
    let x = src_node(prog, n, 0)?;
    let r = x.shape.len();
    if lo.len() != r || hi.len() != r || step.len() != r || step.iter().any(|s| *s < 1) {
        return Err(TinyError::OutOfBounds {
            node: n.id,
            detail: "SHRINK needs lo, hi and a positive step per axis".into(),
        });
    }
    let mut shape = Vec::with_capacity(r);
    for i in 0..r {
        let inside = not_provably_greater(&Dim::int(0), &lo[i])
            && not_provably_greater(&lo[i], &hi[i])
            && not_provably_greater(&hi[i], &x.shape[i]);
        if !inside {
            return Err(TinyError::OutOfBounds {
                node: n.id,
                detail: format!(
                    "SHRINK axis {i}: need 0 <= {} <= {} <= {}",
                    lo[i], hi[i], x.shape[i]
                ),
            });
        }
        shape.push(hi[i].sub(&lo[i]).ceildiv(step[i]));
    }
    Ok((x.dtype, shape))
}

/// `FLIP`: distinct axes of the input; the shape is kept.
fn infer_flip(prog: &Program, n: &Node, axes: &[usize]) -> Result<(DType, Shape), TinyError> {
    arity(n, 1)?;
    let x = src_node(prog, n, 0)?;
    let mut seen = vec![false; x.shape.len()];
    for a in axes {
        check_axis(n, *a, x.shape.len())?;
        if std::mem::replace(&mut seen[*a], true) {
            return Err(TinyError::Malformed {
                node: n.id,
                detail: format!("FLIP axis {a} repeated"),
            });
        }
    }
    Ok((x.dtype, x.shape.clone()))
}

/// `VIEW`: one index per input axis over the result axes, in bounds where sizes are constant.
fn infer_view(prog: &Program, n: &Node, map: &[AffineIndex]) -> Result<(DType, Shape), TinyError> {
    arity(n, 1)?;
    let x = src_node(prog, n, 0)?;
    if map.len() != x.shape.len() {
        return Err(TinyError::Malformed {
            node: n.id,
            detail: format!(
                "VIEW index map has {} entries for an input of rank {}",
                map.len(),
                x.shape.len()
            ),
        });
    }
    for (j, e) in map.iter().enumerate() {
        for (a, _) in &e.terms {
            check_axis(n, *a, n.shape.len())?;
        }
        // Bounds: provable only for constant sizes; symbolic ones are checked when bound.
        let out: Option<Vec<i64>> = n.shape.iter().map(|d| d.as_int()).collect();
        if let (Some(out), Some(limit)) = (out, x.shape[j].as_int()) {
            if out.contains(&0) {
                continue;
            }
            let (mut lo, mut hi) = (e.offset, e.offset);
            for (a, c) in &e.terms {
                let span = c * (out[*a] - 1);
                if span < 0 {
                    lo += span;
                } else {
                    hi += span;
                }
            }
            if lo < 0 || hi >= limit {
                return Err(TinyError::OutOfBounds {
                    node: n.id,
                    detail: format!(
                        "VIEW input axis {j} index `{e}` spans [{lo}, {hi}] outside [0, {limit})"
                    ),
                });
            }
        }
    }
    Ok((x.dtype, n.shape.clone()))
}

/// A binary op: operands agree ([`elementwise_operands`]) and the op is defined on their dtype; comparisons give bool.
fn infer_binary(prog: &Program, n: &Node, op: &BinaryOp) -> Result<(DType, Shape), TinyError> {
    arity(n, 2)?;
    let (dtype, shape) = elementwise_operands(prog, n, &n.src, None)?;
    let ok = match op {
        BinaryOp::Fdiv | BinaryOp::Pow => dtype.is_float(),
        BinaryOp::Idiv => dtype == DType::I32,
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::CmpLt | BinaryOp::CmpLe => {
            dtype != DType::Bool
        }
        BinaryOp::Max | BinaryOp::Min | BinaryOp::CmpEq | BinaryOp::CmpNe => true,
    };
    if !ok {
        return Err(TinyError::DtypeMismatch {
            node: n.id,
            detail: format!("{} is not defined on {dtype}", n.uop.name()),
        });
    }
    let out = if op.is_comparison() {
        DType::Bool
    } else {
        dtype
    };
    Ok((out, shape))
}

/// `WHERE`: a bool condition and two branches of its shape.
fn infer_where(prog: &Program, n: &Node) -> Result<(DType, Shape), TinyError> {
    arity(n, 3)?;
    let c = src_node(prog, n, 0)?;
    if c.dtype != DType::Bool {
        return Err(TinyError::DtypeMismatch {
            node: n.id,
            detail: format!("WHERE condition is {}, not bool", c.dtype),
        });
    }
    let (dtype, shape) = elementwise_operands(prog, n, &n.src[1..], Some(&c.shape))?;
    if shape != c.shape {
        return Err(TinyError::BroadcastMismatch {
            node: n.id,
            lhs: fmt_shape(&c.shape),
            rhs: fmt_shape(&shape),
        });
    }
    Ok((dtype, shape))
}

/// A fold's accumulator (`verb`: reduce, scan): the node's dtype, and of the input's kind
/// (float into float, integer into integer; never bool).
fn check_accumulator(n: &Node, x: &Node, acc: &DType, verb: &str) -> Result<(), TinyError> {
    if *acc != n.dtype {
        return Err(TinyError::AccDtypeMismatch {
            node: n.id,
            acc: *acc,
            dtype: n.dtype,
        });
    }
    if x.dtype == DType::Bool || (x.dtype.is_float() != acc.is_float()) {
        return Err(TinyError::DtypeMismatch {
            node: n.id,
            detail: format!("cannot {verb} {} into a {acc} accumulator", x.dtype),
        });
    }
    Ok(())
}

/// `REDUCE`: the accumulator is the node dtype and fits the input; strictly ascending axes are dropped.
fn infer_reduce(
    prog: &Program,
    n: &Node,
    axes: &[usize],
    acc: &DType,
) -> Result<(DType, Shape), TinyError> {
    arity(n, 1)?;
    let x = src_node(prog, n, 0)?;
    check_accumulator(n, x, acc, "reduce")?;
    for (i, a) in axes.iter().enumerate() {
        check_axis(n, *a, x.shape.len())?;
        if i > 0 && axes[i - 1] >= *a {
            return Err(TinyError::Malformed {
                node: n.id,
                detail: format!("REDUCE axes {axes:?} must be strictly ascending"),
            });
        }
    }
    let shape = x
        .shape
        .iter()
        .enumerate()
        .filter(|(i, _)| !axes.contains(i))
        .map(|(_, d)| d.clone())
        .collect();
    Ok((*acc, shape))
}

/// `SCAN`: the accumulator is the node dtype and fits the input; the shape is kept.
fn infer_scan(
    prog: &Program,
    n: &Node,
    axis: &usize,
    acc: &DType,
) -> Result<(DType, Shape), TinyError> {
    arity(n, 1)?;
    let x = src_node(prog, n, 0)?;
    check_accumulator(n, x, acc, "scan")?;
    check_axis(n, *axis, x.shape.len())?;
    Ok((*acc, x.shape.clone()))
}

/// `GATHER`: an i32 index of the input's rank, no larger than the input off `axis`.
fn infer_gather(prog: &Program, n: &Node, axis: &usize) -> Result<(DType, Shape), TinyError> {
    arity(n, 2)?;
    let x = src_node(prog, n, 0)?;
    let idx = src_node(prog, n, 1)?;
    if idx.dtype != DType::I32 {
        return Err(TinyError::DtypeMismatch {
            node: n.id,
            detail: format!("GATHER index is {}, not i32", idx.dtype),
        });
    }
    check_axis(n, *axis, x.shape.len())?;
    if idx.shape.len() != x.shape.len() {
        return Err(TinyError::BroadcastMismatch {
            node: n.id,
            lhs: fmt_shape(&x.shape),
            rhs: fmt_shape(&idx.shape),
        });
    }
    for (i, (a, b)) in x.shape.iter().zip(&idx.shape).enumerate() {
        if i != *axis && !not_provably_greater(b, a) {
            return Err(TinyError::OutOfBounds {
                node: n.id,
                detail: format!("GATHER index axis {i} has size {b} > input size {a}"),
            });
        }
    }
    Ok((x.dtype, idx.shape.clone()))
}

/// Shared rule of binary ops and WHERE's branches: node operands agree on shape and dtype;
/// immediates take that dtype; all-immediate operands take `scalar_shape` and dtype fp32.
fn elementwise_operands(
    prog: &Program,
    n: &Node,
    srcs: &[Src],
    scalar_shape: Option<&Shape>,
) -> Result<(DType, Shape), TinyError> {
    let mut first: Option<&Node> = None;
    for (i, s) in srcs.iter().enumerate() {
        if let Src::Node(_) = s {
            let offset = n.src.len() - srcs.len();
            let x = src_node(prog, n, offset + i)?;
            match first {
                None => first = Some(x),
                Some(f) => {
                    if f.shape != x.shape {
                        return Err(TinyError::BroadcastMismatch {
                            node: n.id,
                            lhs: fmt_shape(&f.shape),
                            rhs: fmt_shape(&x.shape),
                        });
                    }
                    if f.dtype != x.dtype {
                        return Err(TinyError::DtypeMismatch {
                            node: n.id,
                            detail: format!(
                                "operands are {} and {} (insert CAST)",
                                f.dtype, x.dtype
                            ),
                        });
                    }
                }
            }
        }
    }
    match (first, scalar_shape) {
        (Some(f), _) => Ok((f.dtype, f.shape.clone())),
        (None, Some(s)) => Ok((DType::F32, s.clone())),
        (None, None) => Err(TinyError::Malformed {
            node: n.id,
            detail: "an elementwise op needs at least one node operand".into(),
        }),
    }
}

/// Checks a whole program: dense ids in topological order, every node well-typed with its recorded
/// dtype and shape, inputs and outputs pointing at nodes (inputs at INPUT nodes).
pub fn verify(prog: &Program) -> Result<(), TinyError> {
    for (i, n) in prog.nodes.iter().enumerate() {
        if n.id.index() != i {
            return Err(TinyError::Malformed {
                node: n.id,
                detail: format!("id at position {i}"),
            });
        }
        let (dt, sh) = infer_node(prog, n)?;
        if dt != n.dtype || sh != n.shape {
            return Err(TinyError::Malformed {
                node: n.id,
                detail: format!(
                    "recorded {} {} but the rules give {} {}",
                    n.dtype,
                    fmt_shape(&n.shape),
                    dt,
                    fmt_shape(&sh)
                ),
            });
        }
    }
    for inp in &prog.inputs {
        let ok = inp.node.index() < prog.nodes.len()
            && matches!(&prog.node(inp.node).uop, UOp::Input { tensor_id } if *tensor_id == inp.tensor);
        if !ok {
            return Err(TinyError::Malformed {
                node: inp.node,
                detail: format!("signature input `{}` is not its INPUT node", inp.tensor),
            });
        }
    }
    for out in &prog.outputs {
        if out.node.index() >= prog.nodes.len() {
            return Err(TinyError::Malformed {
                node: out.node,
                detail: format!("signature output `{}` points past the program", out.tensor),
            });
        }
    }
    Ok(())
}
