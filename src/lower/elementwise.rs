//! `Elementwise`: broadcast operands to the output shape (RESHAPE + EXPAND), then one primitive
//! UOp, or a composite (sigmoid, tanh, silu, gelu, …) computed in fp32 for fp16/bf16 tensors.
//! Scalar operands become immediates (they adopt the tensor operands' dtype).

use super::util::{add_imm, bcast, bin, compute_dtype, exp, mul_imm, LN_2};
use super::{LResult, LowerError, Lowerer};
use crate::ir::dim::Shape;
use crate::ir::dtype::DType;
use crate::ir::frontend::{EwFn, Node, Operand};
use crate::ir::tiny::{BinaryOp, Builder, NodeId, Src, UnaryOp};

/// Lowers one Elementwise node.
pub fn lower(lw: &mut Lowerer, node: &Node, func: EwFn) -> LResult<NodeId> {
    let out = lw.out_info(node)?.clone();
    let srcs = operands(lw, node, &out.shape)?;
    let b = &mut lw.b;
    match func.arity() {
        1 => unary(b, func, node_src(&srcs[0])?),
        2 => binary(b, func, srcs[0], srcs[1]),
        _ => {
            let c = match srcs[0] {
                Src::Node(id) => id,
                // A scalar condition adopts bool (non-zero is true), as scalars adopt the dtype
                // their position calls for.
                Src::Imm(v) => {
                    let c = b.constant(DType::Bool.round(v), DType::Bool)?;
                    bcast(b, c, &out.shape)?
                }
            };
            Ok(b.where_(c, srcs[1], srcs[2])?)
        }
    }
}

/// Operands broadcast to `shape`; scalars stay immediates.
fn operands(lw: &mut Lowerer, node: &Node, shape: &Shape) -> LResult<Vec<Src>> {
    let mut out = Vec::with_capacity(node.inputs.len());
    for op in &node.inputs {
        out.push(match op {
            Operand::Tensor(t) => {
                let id = lw.tensor(t)?;
                Src::Node(bcast(&mut lw.b, id, shape)?)
            }
            Operand::Scalar(v) => Src::Imm(*v),
        });
    }
    // Values are operands 0.. (1.. for `where`, whose operand 0 is the condition). With no tensor
    // among them the first becomes an fp32 CONST (graph-json: scalars alone are fp32).
    let first = usize::from(node.inputs.len() == 3);
    let any_node = out[first..].iter().any(|s| matches!(s, Src::Node(_)));
    if let (false, Some(Src::Imm(v))) = (any_node, out.get(first).copied()) {
        let c = lw.b.constant(v, DType::F32)?;
        out[first] = Src::Node(bcast(&mut lw.b, c, shape)?);
    }
    Ok(out)
}

fn node_src(s: &Src) -> LResult<NodeId> {
    match s {
        Src::Node(id) => Ok(*id),
        Src::Imm(_) => Err(LowerError::Unsupported(
            "this operand must be a tensor".into(),
        )),
    }
}

/// Unary functions: primitives map to one UOp; composites compute in fp32.
fn unary(b: &mut Builder, func: EwFn, x: NodeId) -> LResult<NodeId> {
    let prim = match func {
        EwFn::Neg => Some(UnaryOp::Neg),
        EwFn::Abs => Some(UnaryOp::Abs),
        EwFn::Exp2 => Some(UnaryOp::Exp2),
        EwFn::Sqrt => Some(UnaryOp::Sqrt),
        EwFn::Rsqrt => Some(UnaryOp::Rsqrt),
        EwFn::Recip => Some(UnaryOp::Recip),
        EwFn::Relu => Some(UnaryOp::Relu),
        _ => None,
    };
    if let Some(op) = prim {
        return Ok(b.unary(op, x)?);
    }
    let dt = b.dtype(x);
    let xf = b.cast(x, compute_dtype(dt))?;
    let y = match func {
        EwFn::Exp => exp(b, xf)?,
        EwFn::Log => {
            let l = b.unary(UnaryOp::Log2, xf)?;
            mul_imm(b, l, LN_2)?
        }
        EwFn::Sigmoid => sigmoid(b, xf)?,
        EwFn::Tanh => tanh(b, xf)?,
        EwFn::Silu => {
            let s = sigmoid(b, xf)?;
            bin(b, BinaryOp::Mul, xf, s)?
        }
        EwFn::Gelu => {
            // 0.5 · x · (1 + erf(x / √2))
            let t = mul_imm(b, xf, std::f64::consts::FRAC_1_SQRT_2)?;
            let e = b.unary(UnaryOp::Erf, t)?;
            half_x_one_plus(b, xf, e)?
        }
        EwFn::GeluTanh => {
            // 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 x³)))
            let x2 = bin(b, BinaryOp::Mul, xf, xf)?;
            let x3 = bin(b, BinaryOp::Mul, x2, xf)?;
            let c = mul_imm(b, x3, 0.044715)?;
            let inner = bin(b, BinaryOp::Add, xf, c)?;
            let k = (2.0 / std::f64::consts::PI).sqrt();
            let s = mul_imm(b, inner, k)?;
            let t = tanh(b, s)?;
            half_x_one_plus(b, xf, t)?
        }
        other => {
            return Err(LowerError::Unsupported(format!(
                "`{}` is not a unary function",
                other.name()
            )))
        }
    };
    Ok(b.cast(y, dt)?)
}

/// `0.5 · x · (1 + t)`.
fn half_x_one_plus(b: &mut Builder, x: NodeId, t: NodeId) -> LResult<NodeId> {
    let one_plus = add_imm(b, t, 1.0)?;
    let p = bin(b, BinaryOp::Mul, x, one_plus)?;
    mul_imm(b, p, 0.5)
}

/// `σ(x) = 1 / (1 + exp(−x))`.
pub fn sigmoid(b: &mut Builder, x: NodeId) -> LResult<NodeId> {
    let n = b.unary(UnaryOp::Neg, x)?;
    let e = exp(b, n)?;
    let d = add_imm(b, e, 1.0)?;
    Ok(b.unary(UnaryOp::Recip, d)?)
}

/// `tanh(x) = 2σ(2x) − 1`.
fn tanh(b: &mut Builder, x: NodeId) -> LResult<NodeId> {
    let x2 = mul_imm(b, x, 2.0)?;
    let s = sigmoid(b, x2)?;
    let s2 = mul_imm(b, s, 2.0)?;
    add_imm(b, s2, -1.0)
}

/// Binary functions; `gt`/`ge` swap operands of `lt`/`le`, `div` is FDIV or IDIV by dtype.
fn binary(b: &mut Builder, func: EwFn, x: Src, y: Src) -> LResult<NodeId> {
    let (op, swap) = match func {
        EwFn::Add => (BinaryOp::Add, false),
        EwFn::Sub => (BinaryOp::Sub, false),
        EwFn::Mul => (BinaryOp::Mul, false),
        EwFn::Div => {
            let dt = [x, y]
                .iter()
                .find_map(|s| match s {
                    Src::Node(id) => Some(b.dtype(*id)),
                    Src::Imm(_) => None,
                })
                .unwrap_or(DType::F32);
            (
                if dt == DType::I32 {
                    BinaryOp::Idiv
                } else {
                    BinaryOp::Fdiv
                },
                false,
            )
        }
        EwFn::Max => (BinaryOp::Max, false),
        EwFn::Min => (BinaryOp::Min, false),
        EwFn::Pow => (BinaryOp::Pow, false),
        EwFn::Lt => (BinaryOp::CmpLt, false),
        EwFn::Le => (BinaryOp::CmpLe, false),
        EwFn::Gt => (BinaryOp::CmpLt, true),
        EwFn::Ge => (BinaryOp::CmpLe, true),
        EwFn::Eq => (BinaryOp::CmpEq, false),
        EwFn::Ne => (BinaryOp::CmpNe, false),
        other => {
            return Err(LowerError::Unsupported(format!(
                "`{}` is not a binary function",
                other.name()
            )))
        }
    };
    let (mut l, mut r) = if swap { (y, x) } else { (x, y) };
    if matches!(op, BinaryOp::CmpLt | BinaryOp::CmpLe) {
        // Tiny orders numbers only: compare bool operands as i32 (false < true). An immediate
        // first adopts bool (non-zero is true), as it would in the bool comparison.
        let is_bool = |s: &Src| matches!(s, Src::Node(id) if b.dtype(*id) == DType::Bool);
        if is_bool(&l) || is_bool(&r) {
            for s in [&mut l, &mut r] {
                *s = match *s {
                    Src::Node(id) => Src::Node(b.cast(id, DType::I32)?),
                    Src::Imm(v) => Src::Imm(DType::Bool.round(v)),
                };
            }
        }
    }
    Ok(b.binary(op, l, r)?)
}
