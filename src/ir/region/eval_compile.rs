//! Compiling a region's expressions for playback: names become env slots (iters, then reduce
//! axes), lets become strided addresses into their arrays, and every index expression gets its
//! class along the row iter of a row evaluation ([`Cls`]).

use super::super::kind::{const_value, Kind, Kinds};
use super::super::verify::{reduce_extents, RegionError};
use super::super::{AxisExpr, Expr, Pred, Reduce};
use super::affine::{self, class};
use super::{bind, let_strides, CAxis, CExpr, CPred, Class, Cls, Compiler, EResult};

fn lookup(scope: &[(String, usize)], n: &str) -> Option<usize> {
    scope.iter().rev().find(|(m, _)| m == n).map(|(_, s)| *s)
}

impl Compiler<'_> {
    /// The kind of `e`'s value.
    pub(super) fn kind(&self, e: &Expr) -> Kind {
        self.with_kinds(&|k| k.of(e))
    }

    /// The kind the operands `es` of one op compute in.
    fn kinds_of(&self, es: &[&Expr]) -> Kind {
        self.with_kinds(&|k| k.operands(es))
    }

    fn with_kinds(&self, f: &dyn Fn(&Kinds) -> Kind) -> Kind {
        let input = |n: &str| self.r.input(n).map(|i| i.dtype);
        let let_kind = |n: &str| {
            let li = self.r.lets.iter().position(|l| l.name == n)?;
            self.let_kinds.get(li).copied()
        };
        f(&Kinds {
            input: &input,
            let_kind: &let_kind,
        })
    }

    /// The position of input `tensor` and its bound shape.
    fn input_slot(&self, tensor: &str) -> EResult<(usize, Vec<usize>)> {
        let input = self
            .r
            .inputs
            .iter()
            .position(|i| i.name == tensor)
            .ok_or_else(|| RegionError::UnknownTensor {
                tensor: tensor.to_string(),
                at: self.at.clone(),
            })?;
        let shape = self.r.inputs[input]
            .memref
            .shape
            .iter()
            .map(|s| bind(&s.0, tensor, self.b))
            .collect::<EResult<_>>()?;
        Ok((input, shape))
    }

    pub(super) fn expr(&mut self, e: &Expr, scope: &mut Vec<(String, usize)>) -> EResult<CExpr> {
        Ok(match e {
            Expr::Const(c) => CExpr::Const(const_value(*c)),
            Expr::Let(n) => self.let_ref(n, scope)?,
            Expr::Read { tensor, map } => {
                let (input, shape) = self.input_slot(tensor)?;
                let map: Vec<CAxis> = map
                    .iter()
                    .map(|m| self.axis(m, scope))
                    .collect::<EResult<_>>()?;
                let cls = map.iter().map(|m| self.class(m)).collect();
                CExpr::Read {
                    input,
                    map,
                    cls,
                    shape,
                }
            }
            Expr::Unary(f, x) => CExpr::Unary(*f, self.kind(x), Box::new(self.expr(x, scope)?)),
            Expr::Binary(f, a, b) => CExpr::Binary(
                *f,
                self.kinds_of(&[a, b]),
                Box::new(self.expr(a, scope)?),
                Box::new(self.expr(b, scope)?),
            ),
            Expr::Select {
                pred,
                then,
                otherwise,
            } => CExpr::Select(
                self.pred(pred, scope)?,
                Box::new(self.expr(then, scope)?),
                Box::new(self.expr(otherwise, scope)?),
            ),
            Expr::Reduce(red) => self.reduce(red, scope)?,
            Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => {
                self.expr(operand, scope)?
            }
            Expr::Cast { to, x } => CExpr::Cast(*to, Box::new(self.expr(x, scope)?)),
            Expr::Index(m) => {
                let m = self.axis(m, scope)?;
                let c = self.class(&m);
                CExpr::Index(m, c)
            }
            Expr::Where(c, a, b) => CExpr::Where(
                Box::new(self.expr(c, scope)?),
                Box::new(self.expr(a, scope)?),
                Box::new(self.expr(b, scope)?),
            ),
            Expr::Scan(_) => {
                return Err(RegionError::AxisAlignmentMismatch {
                    at: self.at.clone(),
                    why: "a scan must be a let's whole expression".into(),
                })
            }
            Expr::Gather {
                tensor,
                map,
                axis,
                index,
            } => {
                let (input, shape) = self.input_slot(tensor)?;
                let map = map
                    .iter()
                    .map(|m| self.axis(m, scope))
                    .collect::<EResult<_>>()?;
                CExpr::Gather {
                    input,
                    map,
                    shape,
                    axis: *axis,
                    index: Box::new(self.expr(index, scope)?),
                }
            }
        })
    }

    /// A let read at the current point: its array addressed by the slots of its free iters.
    fn let_ref(&self, n: &str, scope: &[(String, usize)]) -> EResult<CExpr> {
        let li = self
            .r
            .lets
            .iter()
            .position(|l| l.name == n)
            .ok_or_else(|| RegionError::UndefinedLet {
                name: n.to_string(),
                at: self.at.clone(),
            })?;
        let strides = let_strides(&self.let_free[li], self.sizes);
        let mut addr = Vec::new();
        for i in &self.let_free[li] {
            let name = &self.r.iters[*i].name;
            let slot = lookup(scope, name).ok_or_else(|| RegionError::UnboundName {
                name: name.clone(),
                at: self.at.clone(),
            })?;
            addr.push((slot, strides[*i]));
        }
        Ok(CExpr::Let(li, addr))
    }

    /// A reduce: fresh env slots for its axes (in scope for its body), bound extents, and the
    /// accumulator's dtype and rounded initial value.
    fn reduce(&mut self, red: &Reduce, scope: &mut Vec<(String, usize)>) -> EResult<CExpr> {
        let ext = reduce_extents(self.r, red, self.iter_sizes, &self.at)?;
        let extents = ext
            .iter()
            .zip(&red.axes)
            .map(|(d, a)| bind(d, a, self.b).map(|v| v as i64))
            .collect::<EResult<Vec<_>>>()?;
        let dtype = red.dtype.ok_or_else(|| RegionError::AccDtypeMissing {
            at: self.at.clone(),
        })?;
        let base = scope.len();
        let mut slots = Vec::new();
        for a in &red.axes {
            slots.push(self.nslots);
            scope.push((a.clone(), self.nslots));
            self.nslots += 1;
            let e = extents.get(slots.len() - 1).copied().unwrap_or(0);
            self.slot_max.push(e.saturating_sub(1).max(0));
        }
        let body = self.expr(&red.body, scope);
        scope.truncate(base);
        Ok(CExpr::Reduce {
            op: red.op,
            slots,
            extents,
            init: dtype.round(red.init.unwrap_or_else(|| red.op.identity(dtype))),
            dtype,
            body: Box::new(body?),
        })
    }

    fn pred(&self, p: &Pred, scope: &[(String, usize)]) -> EResult<CPred> {
        Ok(match p {
            Pred::And(ps) => CPred::And(
                ps.iter()
                    .map(|q| self.pred(q, scope))
                    .collect::<EResult<_>>()?,
            ),
            Pred::Or(ps) => CPred::Or(
                ps.iter()
                    .map(|q| self.pred(q, scope))
                    .collect::<EResult<_>>()?,
            ),
            Pred::Cmp(op, a, b) => {
                let (a, b) = (self.axis(a, scope)?, self.axis(b, scope)?);
                let (ca, cb) = (self.class(&a), self.class(&b));
                CPred::Cmp(*op, a, b, ca, cb)
            }
        })
    }

    /// How `e` varies along the row iter (`Uniform` without one).
    fn class(&self, e: &CAxis) -> Cls {
        match self.row {
            Some(row) => Cls {
                class: class(e, row),
                aff: affine::affine(e, &self.slot_max),
            },
            None => Cls {
                class: Class::Uniform,
                aff: None,
            },
        }
    }

    fn axis(&self, e: &AxisExpr, scope: &[(String, usize)]) -> EResult<CAxis> {
        Ok(match e {
            AxisExpr::Const(c) => CAxis::Const(*c),
            AxisExpr::Name(n) => match lookup(scope, n) {
                Some(s) => CAxis::Slot(s),
                None => CAxis::Const(
                    *self
                        .b
                        .get(n)
                        .ok_or_else(|| RegionError::UnboundSymbol(n.clone()))?,
                ),
            },
            AxisExpr::Add(l) => CAxis::Add(
                l.iter()
                    .map(|x| self.axis(x, scope))
                    .collect::<EResult<_>>()?,
            ),
            AxisExpr::Mul(a, b) => CAxis::Mul(
                Box::new(self.axis(a, scope)?),
                Box::new(self.axis(b, scope)?),
            ),
            AxisExpr::FloorDiv(x, c) => CAxis::FloorDiv(Box::new(self.axis(x, scope)?), *c),
            AxisExpr::Min(a, b) => CAxis::Min(
                Box::new(self.axis(a, scope)?),
                Box::new(self.axis(b, scope)?),
            ),
            AxisExpr::Max(a, b) => CAxis::Max(
                Box::new(self.axis(a, scope)?),
                Box::new(self.axis(b, scope)?),
            ),
        })
    }
}
