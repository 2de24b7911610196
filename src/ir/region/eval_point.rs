//! Point playback of compiled expressions: the value of a [`CExpr`] at one env (the original
//! evaluator; rows fall back to it lane by lane, and scans use it at every step).

use super::ops::{self, fold, unary};
use super::{advance, CAxis, CExpr, CPred, Ctx, EResult};
use crate::ir::region::verify::RegionError;

pub(super) fn axis(e: &CAxis, env: &[i64]) -> i64 {
    match e {
        CAxis::Const(c) => *c,
        CAxis::Slot(s) => env[*s],
        CAxis::Add(l) => l.iter().fold(0i64, |a, x| a.saturating_add(axis(x, env))),
        CAxis::Mul(a, b) => axis(a, env).saturating_mul(axis(b, env)),
        CAxis::FloorDiv(x, c) if *c > 0 => axis(x, env).div_euclid(*c),
        CAxis::FloorDiv(..) => 0,
        CAxis::Min(a, b) => axis(a, env).min(axis(b, env)),
        CAxis::Max(a, b) => axis(a, env).max(axis(b, env)),
    }
}

pub(super) fn pred(p: &CPred, env: &[i64]) -> bool {
    match p {
        CPred::And(ps) => ps.iter().all(|q| pred(q, env)),
        CPred::Or(ps) => ps.iter().any(|q| pred(q, env)),
        CPred::Cmp(op, a, b, ..) => op.holds(axis(a, env), axis(b, env)),
    }
}

impl Ctx<'_> {
    pub(super) fn eval(&self, e: &CExpr, env: &mut [i64]) -> EResult<f64> {
        Ok(match e {
            CExpr::Const(c) => *c,
            CExpr::Let(li, addr) => {
                let idx: usize = addr.iter().map(|(s, st)| env[*s] as usize * st).sum();
                self.lets
                    .get(*li)
                    .and_then(|v| v.get(idx))
                    .copied()
                    .unwrap_or(f64::NAN)
            }
            CExpr::Read {
                input, map, shape, ..
            } => self.load(*input, map, env, shape, None)?,
            CExpr::Gather {
                input,
                map,
                shape,
                axis: g,
                index,
            } => {
                // A non-finite or huge index saturates, then fails the bounds check.
                let v = self.eval(index, env)?.trunc() as i64;
                self.load(*input, map, env, shape, Some((*g, v)))?
            }
            CExpr::Unary(f, k, x) => k.round(unary(*f, self.eval(x, env)?)),
            CExpr::Binary(f, k, a, b) => {
                let a = self.eval(a, env)?;
                ops::binary(*f, *k, a, self.eval(b, env)?)
            }
            CExpr::Select(p, t, f) => {
                if pred(p, env) {
                    self.eval(t, env)?
                } else {
                    self.eval(f, env)?
                }
            }
            CExpr::Reduce {
                op,
                slots,
                extents,
                init,
                dtype,
                body,
            } => {
                let mut acc = *init;
                if extents.iter().all(|e| *e > 0) {
                    for s in slots {
                        env[*s] = 0;
                    }
                    loop {
                        let v = dtype.round(self.eval(body, env)?);
                        acc = dtype.round(fold(*op, *dtype, acc, v));
                        if !advance(env, slots, extents) {
                            break;
                        }
                    }
                }
                acc
            }
            CExpr::Index(m, _) => axis(m, env) as f64,
            CExpr::Where(c, a, b) => {
                if self.eval(c, env)? != 0.0 {
                    self.eval(a, env)?
                } else {
                    self.eval(b, env)?
                }
            }
            CExpr::Cast(to, x) => to.round(self.eval(x, env)?),
        })
    }

    /// Loads input `input` at `map(env)`, dimension `shift.0` moved by `shift.1` (a gather);
    /// an error outside `shape`.
    pub(super) fn load(
        &self,
        input: usize,
        map: &[CAxis],
        env: &[i64],
        shape: &[usize],
        shift: Option<(usize, i64)>,
    ) -> EResult<f64> {
        let at = |j: usize, m: &CAxis| match shift {
            Some((g, v)) if g == j => axis(m, env).saturating_add(v),
            _ => axis(m, env),
        };
        let mut flat = 0usize;
        for (j, (m, s)) in map.iter().zip(shape).enumerate() {
            let i = at(j, m);
            if i < 0 || i as usize >= *s {
                return Err(RegionError::OutOfBounds {
                    tensor: self.names.get(input).cloned().unwrap_or_default(),
                    at: self.at.to_string(),
                    index: map.iter().enumerate().map(|(j, m)| at(j, m)).collect(),
                    shape: shape.to_vec(),
                });
            }
            flat = flat * s + i as usize;
        }
        Ok(self.inputs[input].get_f64(flat))
    }
}
