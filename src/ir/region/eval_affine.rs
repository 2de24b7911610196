//! How an index expression varies along the row iter of a row evaluation: its [`Class`]
//! (uniform, linear with a slope, general) and, where every intermediate value fits `i64` over
//! the iteration domain, its exact affine form ([`Affine`]); and checked evaluation.

use super::{CAxis, Class};

/// The class of `e` along iter slot `row`.
pub(super) fn class(e: &CAxis, row: usize) -> Class {
    let join = |cs: &mut dyn Iterator<Item = Class>| {
        let mut slope = 0i64;
        for c in cs {
            match c {
                Class::Uniform => {}
                Class::Linear(s) => match slope.checked_add(s) {
                    Some(v) => slope = v,
                    None => return Class::General,
                },
                Class::General => return Class::General,
            }
        }
        if slope == 0 {
            // A sum whose slopes cancel still mentions the row iter: keep it checked.
            Class::Linear(0)
        } else {
            Class::Linear(slope)
        }
    };
    let uniform = |e: &CAxis| class(e, row) == Class::Uniform;
    match e {
        CAxis::Const(_) => Class::Uniform,
        CAxis::Slot(s) if *s == row => Class::Linear(1),
        CAxis::Slot(_) => Class::Uniform,
        CAxis::Add(l) => {
            if l.iter().all(uniform) {
                Class::Uniform
            } else {
                join(&mut l.iter().map(|x| class(x, row)))
            }
        }
        CAxis::Mul(a, b) => match (class(a, row), class(b, row), &**a, &**b) {
            (Class::Uniform, Class::Uniform, ..) => Class::Uniform,
            (Class::Linear(s), Class::Uniform, _, CAxis::Const(c))
            | (Class::Uniform, Class::Linear(s), CAxis::Const(c), _) => {
                s.checked_mul(*c).map_or(Class::General, Class::Linear)
            }
            _ => Class::General,
        },
        CAxis::FloorDiv(x, _) => {
            if uniform(x) {
                Class::Uniform
            } else {
                Class::General
            }
        }
        CAxis::Min(a, b) | CAxis::Max(a, b) => {
            if uniform(a) && uniform(b) {
                Class::Uniform
            } else {
                Class::General
            }
        }
    }
}

/// An index expression as `c + Σ coef·env[slot]`: one without floordiv, min or max of slots
/// whose every intermediate value fits `i64` over the whole iteration domain (so the point
/// evaluator's saturating arithmetic is exact there, and so is this form).
#[derive(Clone, Debug)]
pub(super) struct Affine {
    pub(super) c: i64,
    pub(super) terms: Vec<(usize, i64)>,
}

/// The range of `e`'s values with every slot `s` in `0..=max[s]`; `None` if an intermediate
/// value may leave `i64`.
fn range(e: &CAxis, max: &[i64]) -> Option<(i64, i64)> {
    Some(match e {
        CAxis::Const(c) => (*c, *c),
        CAxis::Slot(s) => (0, *max.get(*s)?),
        CAxis::Add(l) => l.iter().try_fold((0i64, 0i64), |(a, b), x| {
            let (c, d) = range(x, max)?;
            Some((a.checked_add(c)?, b.checked_add(d)?))
        })?,
        CAxis::Mul(a, b) => {
            let ((p, q), (r, t)) = (range(a, max)?, range(b, max)?);
            let c = [
                p.checked_mul(r)?,
                p.checked_mul(t)?,
                q.checked_mul(r)?,
                q.checked_mul(t)?,
            ];
            (*c.iter().min()?, *c.iter().max()?)
        }
        CAxis::FloorDiv(x, c) if *c > 0 => {
            let (a, b) = range(x, max)?;
            (a.div_euclid(*c), b.div_euclid(*c))
        }
        CAxis::FloorDiv(..) => (0, 0),
        CAxis::Min(a, b) => {
            let ((p, q), (r, t)) = (range(a, max)?, range(b, max)?);
            (p.min(r), q.min(t))
        }
        CAxis::Max(a, b) => {
            let ((p, q), (r, t)) = (range(a, max)?, range(b, max)?);
            (p.max(r), q.max(t))
        }
    })
}

/// `e`'s affine form when it has one that is exact over slots bounded by `max` (see [`Affine`]).
pub(super) fn affine(e: &CAxis, max: &[i64]) -> Option<Affine> {
    range(e, max)?;
    fn go(e: &CAxis) -> Option<Affine> {
        let konst = |c: i64| Affine {
            c,
            terms: Vec::new(),
        };
        Some(match e {
            CAxis::Const(c) => konst(*c),
            CAxis::Slot(s) => Affine {
                c: 0,
                terms: vec![(*s, 1)],
            },
            CAxis::Add(l) => {
                let mut acc = konst(0);
                for x in l {
                    let a = go(x)?;
                    acc.c = acc.c.checked_add(a.c)?;
                    for (s, k) in a.terms {
                        match acc.terms.iter_mut().find(|(t, _)| *t == s) {
                            Some(t) => t.1 = t.1.checked_add(k)?,
                            None => acc.terms.push((s, k)),
                        }
                    }
                }
                acc
            }
            CAxis::Mul(a, b) => {
                let (a, b) = (go(a)?, go(b)?);
                let (k, mut x) = match (a.terms.is_empty(), b.terms.is_empty()) {
                    (true, _) => (a.c, b),
                    (_, true) => (b.c, a),
                    _ => return None,
                };
                x.c = x.c.checked_mul(k)?;
                for t in &mut x.terms {
                    t.1 = t.1.checked_mul(k)?;
                }
                x
            }
            CAxis::FloorDiv(x, c) => {
                let x = go(x)?;
                if !x.terms.is_empty() {
                    return None;
                }
                konst(if *c > 0 { x.c.div_euclid(*c) } else { 0 })
            }
            CAxis::Min(a, b) | CAxis::Max(a, b) => {
                let (a, b) = (go(a)?, go(b)?);
                if !a.terms.is_empty() || !b.terms.is_empty() {
                    return None;
                }
                konst(match e {
                    CAxis::Min(..) => a.c.min(b.c),
                    _ => a.c.max(b.c),
                })
            }
        })
    }
    go(e)
}

/// [`axis`] with checked arithmetic: `None` where the saturating evaluation would saturate.
pub(super) fn axis_checked(e: &CAxis, env: &[i64]) -> Option<i64> {
    Some(match e {
        CAxis::Const(c) => *c,
        CAxis::Slot(s) => env[*s],
        CAxis::Add(l) => l
            .iter()
            .try_fold(0i64, |a, x| a.checked_add(axis_checked(x, env)?))?,
        CAxis::Mul(a, b) => axis_checked(a, env)?.checked_mul(axis_checked(b, env)?)?,
        CAxis::FloorDiv(x, c) if *c > 0 => axis_checked(x, env)?.div_euclid(*c),
        CAxis::FloorDiv(..) => 0,
        CAxis::Min(a, b) => axis_checked(a, env)?.min(axis_checked(b, env)?),
        CAxis::Max(a, b) => axis_checked(a, env)?.max(axis_checked(b, env)?),
    })
}
