//! The value of a region expression at the current point ([`Emitter::value`]): reads and
//! gathers, casts, ops, and `select` / `where` as a branch that evaluates only the taken arm.

use super::ops::{binary, element, horner, load, unary};
use super::{convert, ctype, CodegenError, Emitter, Val};
use crate::codegen::cexpr;
use crate::codegen::gpu::{Div, Stmt};
use crate::ir::dtype::DType;
use crate::ir::region::kind::Kind;
use crate::ir::region::{AxisExpr, Expr};

impl Emitter<'_> {
    /// The value of `e` at the current point (statements go to the innermost block).
    pub fn value(&mut self, e: &Expr) -> Result<Val, CodegenError> {
        Ok(match e {
            Expr::Const(c) => {
                let k = crate::ir::region::kind::const_kind(*c);
                Val {
                    code: Self::constant(*c, k),
                    kind: k,
                }
            }
            Expr::Let(n) => self.let_value(n)?,
            Expr::Read { tensor, map } => {
                let (param, dt, off) = self.read_offset(tensor, map)?;
                match self.preloaded.get(&(param.clone(), off.clone())) {
                    Some(reg) => element(reg.clone(), dt),
                    None => load(&param, dt, &off),
                }
            }
            Expr::Gather {
                tensor,
                map,
                axis,
                index,
            } => self.gather(tensor, map, *axis, index)?,
            Expr::Index(a) => Val {
                code: self.axis(a),
                kind: Kind::I32,
            },
            Expr::Cast { to, x } => {
                let v = self.value(x)?;
                cast(&v, *to)
            }
            Expr::Unary(f, x) => {
                let v = self.value(x)?;
                unary(*f, &v)
            }
            Expr::Binary(f, a, b) => {
                let k = self.kinds_of(&[a, b]);
                let va = self.value(a)?;
                let vb = self.value(b)?;
                binary(*f, k, &va, &vb)
            }
            Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => {
                self.value(operand)?
            }
            Expr::Where(c, a, b) => {
                let k = self.kinds_of(&[a, b]);
                let vc = self.value(c)?;
                let cond = convert(&vc, Kind::Bool);
                self.branch(cond, Div::Thread, k, a, b)?
            }
            Expr::Select {
                pred,
                then,
                otherwise,
            } => {
                let k = self.kinds_of(&[then, otherwise]);
                let cond = cexpr::pred(pred, &|n| self.name(n));
                self.branch(cond, Div::Thread, k, then, otherwise)?
            }
            Expr::Reduce(r) => match self.provided_reduce(r) {
                Some(v) => v,
                None => self.reduce(r)?,
            },
            // A scan's value exists only inside the scan template, which binds the running
            // accumulator as the scan let's value (`templates::scan`).
            Expr::Scan(_) => {
                return Err(CodegenError::Unsupported {
                    kernel: self.region.name.clone(),
                    why: "a scan outside the scan template".into(),
                })
            }
        })
    }

    /// `tensor[map]` with the index along `axis` offset by the value of `index`.
    fn gather(
        &mut self,
        tensor: &str,
        map: &[AxisExpr],
        axis: usize,
        index: &Expr,
    ) -> Result<Val, CodegenError> {
        let iv = self.value(index)?;
        let i = convert(&iv, Kind::I32);
        let offs = self.axis(&map[axis]);
        let (param, shape, dt) = self
            .inputs
            .get(tensor)
            .cloned()
            .ok_or_else(|| self.err(format!("gather of unknown input `{tensor}`")))?;
        let idx: Vec<String> = map
            .iter()
            .enumerate()
            .map(|(d, a)| {
                if d == axis {
                    format!("({offs} + {i})")
                } else {
                    self.axis(a)
                }
            })
            .collect();
        Ok(load(&param, dt, &horner(&idx, &shape)))
    }

    fn arm(&mut self, e: &Expr, k: Kind) -> Result<(Vec<Stmt>, String), CodegenError> {
        self.open();
        self.push_scope();
        let v = self.value(e);
        self.pop_scope();
        let stmts = self.close();
        Ok((stmts, convert(&v?, k)))
    }

    fn branch(
        &mut self,
        cond: String,
        div: Div,
        k: Kind,
        a: &Expr,
        b: &Expr,
    ) -> Result<Val, CodegenError> {
        let (sa, va) = self.arm(a, k)?;
        let (sb, vb) = self.arm(b, k)?;
        if sa.is_empty() && sb.is_empty() {
            return Ok(Val {
                code: format!("({cond} ? {va} : {vb})"),
                kind: k,
            });
        }
        let out = self.fresh("sel");
        self.emit(Stmt::Let {
            ty: ctype(k),
            name: out.clone(),
            value: Self::constant(0.0, k),
            mutable: true,
        });
        let mut then = sa;
        then.push(Stmt::Assign {
            place: out.clone(),
            value: va,
        });
        let mut otherwise = sb;
        otherwise.push(Stmt::Assign {
            place: out.clone(),
            value: vb,
        });
        self.emit(Stmt::If {
            cond,
            div,
            then,
            otherwise,
        });
        Ok(Val { code: out, kind: k })
    }
}

/// `v` cast to `to`: rounded to a 16-bit float's precision, or converted to `to`'s kind.
fn cast(v: &Val, to: DType) -> Val {
    let code = match to {
        DType::F16 => format!("dlc_round_f16({})", convert(v, Kind::Float)),
        DType::BF16 => format!("dlc_round_bf16({})", convert(v, Kind::Float)),
        DType::F32 => convert(v, Kind::Float),
        DType::I32 => convert(v, Kind::I32),
        DType::Bool => convert(v, Kind::Bool),
    };
    Val {
        code,
        kind: Kind::of(to),
    }
}
