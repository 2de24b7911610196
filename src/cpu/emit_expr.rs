//! The expressions of a region's lets as C ([`super::emit`]): reads, gathers, unary and binary
//! ops in each value kind, nested reduces as statement expressions.

use super::cvalue::{
    acc_type, binary_float, binary_int, constant, fold, init_lit, load, to_dtype, unary_double,
    unary_float, widen,
};
use super::emit::{Emitter, Scope};
use super::CpuError;
use crate::ir::axis::AxisExpr;
use crate::ir::region::kind::Kind;
use crate::ir::region::verify::reduce_extents;
use crate::ir::region::{BinaryFn, Expr, Reduce};
use std::fmt::Write as _;

impl Emitter<'_> {
    /// `e` as a C expression of kind `self.kind_of(e)`.
    pub(super) fn expr(&mut self, e: &Expr, scope: &mut Scope) -> Result<String, CpuError> {
        Ok(match e {
            Expr::Scan(_) => {
                return Err(CpuError::Codegen {
                    region: self.r.name.clone(),
                    why: "a scan inside an expression (a scan is a let's whole expression)".into(),
                })
            }
            Expr::Const(c) => constant(*c, crate::ir::region::kind::const_kind(*c)),
            Expr::Let(n) => {
                let li = self
                    .r
                    .lets
                    .iter()
                    .position(|l| &l.name == n)
                    .ok_or_else(|| CpuError::Codegen {
                        region: self.r.name.clone(),
                        why: format!("undefined let `{n}`"),
                    })?;
                self.let_ref(li, scope)
            }
            Expr::Read { tensor, map } => {
                let (x, dt) = self.read(tensor, map, scope, None)?;
                load(x, dt)
            }
            Expr::Unary(f, x) => {
                let k = self.kind_of(x);
                let xs = self.expr(x, scope)?;
                match k {
                    Kind::Float => unary_float(*f, &xs),
                    Kind::I32 => format!(
                        "dlc_wrap_i32({})",
                        unary_double(*f, &format!("((double){xs})"))
                    ),
                    Kind::Bool => {
                        format!("dlc_bool({})", unary_double(*f, &format!("((double){xs})")))
                    }
                }
            }
            Expr::Binary(f, a, b) => self.binary(*f, a, b, scope)?,
            Expr::Select {
                pred,
                then,
                otherwise,
            } => {
                let k = self.operands_kind(&[then, otherwise]);
                let p = self.pred(pred, scope);
                if let (true, Expr::Read { tensor, map }, Expr::Const(_)) =
                    (self.clamp_guards, &**then, &**otherwise)
                {
                    let o = self.operand(otherwise, k, scope)?;
                    let (x, dt) = self.read(tensor, map, scope, None)?;
                    // `in<k>[idx]` → `in<k>[(p) ? (idx) : 0]`
                    if let (Some(b), true) = (x.find('['), x.ends_with(']')) {
                        let clamped =
                            format!("{}[({p}) ? ({}) : 0]", &x[..b], &x[b + 1..x.len() - 1]);
                        let t = load(clamped, dt);
                        if k == Kind::Float && self.kind_of(then) == k {
                            return Ok(format!("({p} ? {t} : {o})"));
                        }
                    }
                }
                let t = self.operand(then, k, scope)?;
                let o = self.operand(otherwise, k, scope)?;
                format!("({p} ? {t} : {o})")
            }
            Expr::Where(c, a, b) => {
                let k = self.operands_kind(&[a, b]);
                let cs = self.expr(c, scope)?;
                let t = self.operand(a, k, scope)?;
                let o = self.operand(b, k, scope)?;
                format!("(({cs}) != 0 ? {t} : {o})")
            }
            Expr::Reduce(red) => self.reduce_expr(red, scope)?,
            Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => {
                self.expr(operand, scope)?
            }
            Expr::Cast { to, x } => {
                let k = self.kind_of(x);
                let xs = self.expr(x, scope)?;
                to_dtype(&xs, k, *to)
            }
            Expr::Index(m) => format!("((int32_t)({}))", self.axis(m, scope)),
            Expr::Gather {
                tensor,
                map,
                axis,
                index,
            } => self.gather(tensor, map, *axis, index, scope)?,
        })
    }

    /// A gather: the data index checked against the gathered axis (error flag 1 and index 0
    /// outside it), then the load.
    pub(super) fn gather(
        &mut self,
        tensor: &str,
        map: &[AxisExpr],
        axis: usize,
        index: &Expr,
        scope: &mut Scope,
    ) -> Result<String, CpuError> {
        let k = self.kind_of(index);
        let iv = self.expr(index, scope)?;
        let iv = match k {
            Kind::Float => format!("dlc_trunc_i64((double)({iv}))"),
            _ => format!("(int64_t)({iv})"),
        };
        let inp = self.r.input(tensor).ok_or_else(|| CpuError::Codegen {
            region: self.r.name.clone(),
            why: format!("gather from unknown tensor `{tensor}`"),
        })?;
        let size = inp
            .memref
            .shape
            .get(axis)
            .map(|d| self.dim(&d.0))
            .ok_or_else(|| CpuError::Codegen {
                region: self.r.name.clone(),
                why: format!("gather axis {axis} beyond `{tensor}`'s rank"),
            })?;
        let base = map
            .get(axis)
            .map(|m| self.axis(m, scope))
            .unwrap_or_default();
        let var = self.fresh("g");
        let (x, dt) = self.read(tensor, map, scope, Some((axis, &var)))?;
        Ok(format!(
            "({{ int64_t {var} = dlc_sat_add({base}, {iv}); if ({var} < 0 || {var} >= {size}) {{ dlc_err_flag(&dlc_err, 1); {var} = 0; }} {}; }})",
            load(x, dt)
        ))
    }

    /// `e` as a value of kind `k` (`Float`: a `float`; i32/bool: a `double`, see [`binary_int`]).
    pub(super) fn operand(
        &mut self,
        e: &Expr,
        k: Kind,
        scope: &mut Scope,
    ) -> Result<String, CpuError> {
        if let Expr::Const(c) = e {
            return Ok(constant(*c, k));
        }
        let ek = self.kind_of(e);
        let x = self.expr(e, scope)?;
        Ok(match k {
            Kind::Float => widen(&x, ek, Kind::Float),
            _ => format!("((double)({x}))"),
        })
    }

    pub(super) fn binary(
        &mut self,
        f: BinaryFn,
        a: &Expr,
        b: &Expr,
        scope: &mut Scope,
    ) -> Result<String, CpuError> {
        let mut k = self.operands_kind(&[a, b]);
        let strong_int = |e: &Expr| !matches!(e, Expr::Const(_)) && self.kind_of(e) != Kind::Float;
        if f.is_comparison() && k == Kind::Float && (strong_int(a) || strong_int(b)) {
            // The reference compares the raw values: an i32 beyond 2^24 against a float
            // compares exactly, in double.
            k = Kind::I32;
        }
        let x = self.operand(a, k, scope)?;
        let y = self.operand(b, k, scope)?;
        if f == BinaryFn::Div && k == Kind::Float && self.invariant(b) && !self.invariant(a) {
            // A varying dividend over a per-row (or global) scalar: `DLC_DIV_INV` multiplies by
            // the reciprocal, which the compiler hoists out of the vector loop (a zmm division
            // is ~16 cycles, a multiply 0.5: softmax's normalization); exact division under
            // `DLC_CPU_FMA=0` (prelude.h, docs/numerics.md).
            self.note("a division by a row's scalar as a multiplication by its reciprocal");
            return Ok(format!("DLC_DIV_INV({x}, {y})"));
        }
        Ok(if k == Kind::Float {
            binary_float(f, &x, &y)
        } else {
            binary_int(f, k, &x, &y)
        })
    }

    /// Whether `e`'s value is the same at every point of the innermost loop around it: a
    /// constant, or a let held as one scalar (a row's reduce in rows form, a global one in flat
    /// form) — not a per-point local nor a buffer.
    fn invariant(&self, e: &Expr) -> bool {
        match e {
            Expr::Const(_) => true,
            Expr::Let(n) => self
                .r
                .lets
                .iter()
                .position(|l| &l.name == n)
                .is_some_and(|li| {
                    let info = &self.lets[li];
                    info.inner.is_empty() && !info.local && info.gemm.is_none()
                }),
            _ => false,
        }
    }

    pub(super) fn extents(&self, red: &Reduce) -> Result<Vec<String>, CpuError> {
        let ext = reduce_extents(self.r, red, &self.checked.iter_sizes, "").map_err(|e| {
            CpuError::Codegen {
                region: self.r.name.clone(),
                why: e.to_string(),
            }
        })?;
        Ok(ext.iter().map(|d| self.dim(d)).collect())
    }

    /// A nested reduce as a statement expression.
    pub(super) fn reduce_expr(
        &mut self,
        red: &Reduce,
        scope: &mut Scope,
    ) -> Result<String, CpuError> {
        let dtype = red.dtype.ok_or_else(|| CpuError::Codegen {
            region: self.r.name.clone(),
            why: "reduce without an accumulation dtype".into(),
        })?;
        let ext = self.extents(red)?;
        let acc = self.fresh("acc");
        let base = scope.len();
        let mut s = format!(
            "({{ {} {acc} = {}; ",
            acc_type(dtype),
            init_lit(red.op, red.init, dtype)
        );
        for (a, e) in red.axes.iter().zip(&ext) {
            let v = self.fresh("r");
            let _ = write!(s, "for (int64_t {v} = 0; {v} < {e}; {v}++) ");
            scope.push((a.clone(), v));
        }
        let k = self.kind_of(&red.body);
        let body = self.expr(&red.body, scope);
        scope.truncate(base);
        let v = to_dtype(&body?, k, dtype);
        let _ = write!(
            s,
            "{{ {acc} = {}; }} {acc}; }})",
            fold(red.op, dtype, &acc, &v)
        );
        Ok(s)
    }
}
