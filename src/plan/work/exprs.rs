//! Expression helpers of the work analysis: reduce-axis and operand queries, predicate atoms,
//! the per-op cost table and epilogue op names.

use super::{Cx, MainContraction};
use crate::ir::dtype::DType;
use crate::ir::region::verify::children;
use crate::ir::region::{AxisExpr, BinaryFn, Expr, Pred, Reduce, UnaryFn};
use crate::ir::tiny::ReduceOp;
use std::collections::{BTreeMap, BTreeSet};

pub(super) fn has_reduce_axis(e: &Expr, n: &str) -> bool {
    match e {
        Expr::Reduce(red) => red.axes.iter().any(|a| a == n) || has_reduce_axis(&red.body, n),
        _ => children(e).into_iter().any(|c| has_reduce_axis(c, n)),
    }
}

/// The depth of the chain of reductions behind a let reading `deps`, given the depth of every
/// earlier let.
pub(super) fn chain_depth(deps: &BTreeSet<String>, depth: &BTreeMap<String, u32>) -> u32 {
    deps.iter()
        .filter_map(|x| depth.get(x))
        .copied()
        .max()
        .unwrap_or(0)
}

/// `(a, b)` when `red` is `sum` of `mul(a, b)`.
pub(super) fn product_operands(red: &Reduce) -> Option<(&Expr, &Expr)> {
    match (&red.op, &red.body) {
        (ReduceOp::Sum, Expr::Binary(BinaryFn::Mul, a, b)) => Some((a, b)),
        _ => None,
    }
}

/// Both operands fp16, or both bf16: a product tensor cores can compute.
pub(super) fn half_pair(cx: &Cx, x: &Expr, y: &Expr) -> bool {
    let (a, b) = (operand_dtype(cx, x), operand_dtype(cx, y));
    a == b && matches!(a, Some(DType::F16 | DType::BF16))
}

pub(super) fn tensor_cores_of(cx: &Cx, mc: &MainContraction) -> bool {
    half_pair(cx, mc.a, mc.b)
}

/// The element type an operand is multiplied in: a cast's target, a read's input type (through
/// guards and views); `None` for computed values (fp32).
pub(super) fn operand_dtype(cx: &Cx, e: &Expr) -> Option<DType> {
    match e {
        Expr::Cast { to, .. } => Some(*to),
        Expr::Read { tensor, .. } | Expr::Gather { tensor, .. } => {
            cx.r.input(tensor).map(|i| i.dtype)
        }
        Expr::Select { then, .. } => operand_dtype(cx, then),
        Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => {
            operand_dtype(cx, operand)
        }
        _ => None,
    }
}

/// Whether some index of `e` mixes a region iter with one of `axes` (a conv's `2·ho + kh − 1`,
/// a pooling window's `2·m + k`).
pub(super) fn mixes_axes(e: &Expr, axes: &[String], iters: &[crate::ir::region::Iter]) -> bool {
    let mixed = |a: &AxisExpr| {
        let (mut it, mut ax) = (false, false);
        a.for_each_name(&mut |n| {
            if axes.iter().any(|k| k == n) {
                ax = true;
            } else if iters.iter().any(|i| i.name == n) {
                it = true;
            }
        });
        it && ax
    };
    match e {
        Expr::Read { map, .. } | Expr::Gather { map, .. } if map.iter().any(mixed) => true,
        Expr::Reduce(red) => mixes_axes(&red.body, axes, iters),
        _ => children(e).into_iter().any(|c| mixes_axes(c, axes, iters)),
    }
}

pub(super) fn pred_atoms(p: &Pred) -> usize {
    match p {
        Pred::And(v) | Pred::Or(v) => v.iter().map(pred_atoms).sum(),
        Pred::Cmp(..) => 1,
    }
}

pub(super) fn pred_axes(p: &Pred, f: &mut dyn FnMut(&AxisExpr)) {
    match p {
        Pred::And(v) | Pred::Or(v) => v.iter().for_each(|q| pred_axes(q, f)),
        Pred::Cmp(_, a, b) => {
            f(a);
            f(b)
        }
    }
}

/// `(simt, sfu)` operations of `e`'s own node, its operands and a reduction's fold aside: the
/// one per-node table of the GPU work analysis and the CPU backend's features (`cpu::work`).
pub fn node_cost(e: &Expr) -> (f64, f64) {
    match e {
        Expr::Unary(f, _) => unary_cost(*f),
        Expr::Binary(f, _, _) => binary_cost(*f),
        Expr::Select { pred, .. } => (1.0 + pred_atoms(pred) as f64, 0.0),
        Expr::Where(..) | Expr::Cast { .. } | Expr::Gather { .. } => (1.0, 0.0),
        // The block scan's own step and the carry added to it (body once per element).
        Expr::Scan(_) => (2.0, 0.0),
        _ => (0.0, 0.0),
    }
}

/// `(simt, sfu)` operations of a unary function.
pub(super) fn unary_cost(f: UnaryFn) -> (f64, f64) {
    match f {
        UnaryFn::Neg | UnaryFn::Relu | UnaryFn::Abs => (1.0, 0.0),
        // ex2/lg2/rsqrt/rcp/sqrt are one MUFU op; exp and log scale by a constant first.
        UnaryFn::Exp2 | UnaryFn::Log2 | UnaryFn::Rsqrt | UnaryFn::Recip | UnaryFn::Sqrt => {
            (0.0, 1.0)
        }
        UnaryFn::Exp | UnaryFn::Log | UnaryFn::Tanh => (1.0, 1.0),
        // 1 / (1 + 2^(-x·log2 e)).
        UnaryFn::Sigmoid => (2.0, 2.0),
        // A rational approximation around one exponential (CUDA's erff: about 10 FMAs).
        UnaryFn::Erf => (20.0, 1.0),
    }
}

/// `(simt, sfu)` operations of a binary function.
pub(super) fn binary_cost(f: BinaryFn) -> (f64, f64) {
    match f {
        // x · rcp(y), with one Newton step.
        BinaryFn::Div => (3.0, 1.0),
        // 2^(y · lg2 x).
        BinaryFn::Pow => (1.0, 2.0),
        // Integer division: about a dozen integer instructions.
        BinaryFn::Idiv => (12.0, 0.0),
        _ => (1.0, 0.0),
    }
}

/// Names of the ops of `e` (epilogue description), appended when new.
pub(super) fn op_names(e: &Expr, out: &mut Vec<String>) {
    let name = match e {
        Expr::Unary(f, _) => Some(f.name()),
        Expr::Binary(f, _, _) => Some(f.name()),
        Expr::Reduce(r) => Some(crate::ir::region::json::reduce_op_name(r.op)),
        Expr::Cast { .. } => Some("cast"),
        Expr::Where(..) => Some("where"),
        _ => None,
    };
    if let Some(n) = name {
        if !out.iter().any(|o| o == n) {
            out.push(n.to_string());
        }
    }
    if let Expr::Reduce(red) = e {
        op_names(&red.body, out);
    }
    for c in children(e) {
        op_names(c, out);
    }
}
