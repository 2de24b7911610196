//! The ONNX activation functions that compose exactly from graph.json's elementwise functions:
//! `Elu`, `Selu`, `Celu`, `Softsign`, `Softplus`, `ThresholdedRelu`, `Mish`, `Shrink`, `PRelu`
//! (each as its ONNX function body defines it).

use super::fold::attr_f;
use super::import::{unsupported, Importer, NResult, Opnd};
use super::proto::NodeProto;
use super::value::TInfo;
use crate::ir::dtype::DType;

/// The ops of this module.
pub(super) const OPS: [&str; 9] = [
    "Elu",
    "Selu",
    "Celu",
    "Softsign",
    "Softplus",
    "ThresholdedRelu",
    "Mish",
    "Shrink",
    "PRelu",
];

/// Imports one of [`OPS`].
pub(super) fn activation(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    op: &str,
    out: &str,
) -> NResult<TInfo> {
    let x = imp.tensor(&node.input[0])?;
    if !matches!(x.dtype, DType::F32 | DType::F16 | DType::BF16) {
        return Err(unsupported(format!("{op} of {} data", x.dtype.name())));
    }
    let xs = Opnd::T(x.clone());
    let a = |d: f64| attr_f(node, "alpha").unwrap_or(d);
    Ok(match op {
        "Elu" | "Selu" | "Celu" => {
            let (alpha, gamma) = match op {
                "Selu" => (
                    a(1.673_263_192_176_818_8),
                    attr_f(node, "gamma").unwrap_or(1.050_701_022_148_132_3),
                ),
                _ => (a(1.0), 1.0),
            };
            // alpha·(exp(x / alpha) - 1) for Celu, alpha·(exp(x) - 1) otherwise.
            let arg = if op == "Celu" {
                Opnd::T(imp.ew(node, "div", &[xs.clone(), Opnd::S(alpha)], out)?)
            } else {
                xs.clone()
            };
            let e = imp.ew(node, "exp", &[arg], out)?;
            let em1 = imp.ew(node, "sub", &[Opnd::T(e), Opnd::S(1.0)], out)?;
            let neg = imp.ew(node, "mul", &[Opnd::T(em1), Opnd::S(alpha * gamma)], out)?;
            let pos = if gamma == 1.0 {
                x.clone()
            } else {
                imp.ew(node, "mul", &[xs.clone(), Opnd::S(gamma)], out)?
            };
            let c = imp.ew(node, "gt", &[xs.clone(), Opnd::S(0.0)], out)?;
            imp.ew(
                node,
                "where",
                &[Opnd::T(c), Opnd::T(pos), Opnd::T(neg)],
                out,
            )?
        }
        "Softsign" => {
            let ab = imp.ew(node, "abs", std::slice::from_ref(&xs), out)?;
            let d = imp.ew(node, "add", &[Opnd::T(ab), Opnd::S(1.0)], out)?;
            imp.ew(node, "div", &[xs, Opnd::T(d)], out)?
        }
        "Softplus" => softplus(imp, node, &x, out)?,
        "Mish" => {
            let sp = softplus(imp, node, &x, out)?;
            let th = imp.ew(node, "tanh", &[Opnd::T(sp)], out)?;
            imp.ew(node, "mul", &[xs, Opnd::T(th)], out)?
        }
        "ThresholdedRelu" => {
            let c = imp.ew(node, "gt", &[xs.clone(), Opnd::S(a(1.0))], out)?;
            imp.ew(node, "where", &[Opnd::T(c), xs, Opnd::S(0.0)], out)?
        }
        "Shrink" => {
            let bias = attr_f(node, "bias").unwrap_or(0.0);
            let lambd = attr_f(node, "lambd").unwrap_or(0.5);
            let lo = imp.ew(node, "lt", &[xs.clone(), Opnd::S(-lambd)], out)?;
            let hi = imp.ew(node, "gt", &[xs.clone(), Opnd::S(lambd)], out)?;
            let plus = imp.ew(node, "add", &[xs.clone(), Opnd::S(bias)], out)?;
            let minus = imp.ew(node, "sub", &[xs, Opnd::S(bias)], out)?;
            let inner = imp.ew(
                node,
                "where",
                &[Opnd::T(hi), Opnd::T(minus), Opnd::S(0.0)],
                out,
            )?;
            imp.ew(
                node,
                "where",
                &[Opnd::T(lo), Opnd::T(plus), Opnd::T(inner)],
                out,
            )?
        }
        "PRelu" => {
            let slope = imp.opnd(&node.input[1], x.shape.len())?;
            let neg = imp.ew(node, "mul", &[xs.clone(), slope], out)?;
            let c = imp.ew(node, "lt", &[xs.clone(), Opnd::S(0.0)], out)?;
            imp.ew(node, "where", &[Opnd::T(c), Opnd::T(neg), xs], out)?
        }
        _ => return Err(unsupported(format!("activation {op}"))),
    })
}

/// `log(exp(x) + 1)`.
fn softplus(imp: &mut Importer<'_>, node: &NodeProto, x: &TInfo, out: &str) -> NResult<TInfo> {
    let e = imp.ew(node, "exp", &[Opnd::T(x.clone())], out)?;
    let e1 = imp.ew(node, "add", &[Opnd::T(e), Opnd::S(1.0)], out)?;
    imp.ew(node, "log", &[Opnd::T(e1)], out)
}
