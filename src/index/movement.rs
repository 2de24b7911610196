//! Movement ops as index transformers (seed 001 §4.4, §6.5; Tiny IR semantics,
//! `docs/tiny-ir.md`): given the index at which a movement op's *result* is read (one
//! [`Quasi`] per result axis, the environment), the index at which its *operand* is read. This is
//! the one statement of what RESHAPE / PERMUTE / EXPAND / PAD / SHRINK / FLIP / VIEW mean for
//! indices; region synthesis, the IndexBook's chain composition and the rbssa rules' `read` maps
//! all call it and differ only in the floordiv policy they pass (what a floor that cannot be
//! simplified away means to them) and in how they state PAD's guard.
//!
//! Assumptions: a result axis and an operand axis of size 1 carry index 0; RESHAPE is
//! row-major; `permute(x, p)` has `out[i] = x[j]` with `j[p[k]] = i_k`; EXPAND resizes size-1
//! axes only; PAD's operand index is `i − lo` (its guard `lo <= i < lo + size` is the caller's).

use super::{Coeff, IndexError, Quasi};

/// One index per axis.
type Env<C, V> = [Quasi<C, V>];

/// The caller's floordiv: `floor(e / d)` under its facts, or why the floor is not allowed.
pub type FloorFn<'a, C, V, E> = &'a dyn Fn(&Quasi<C, V>, &C) -> Result<Quasi<C, V>, E>;

/// A RESHAPE group: operand axes `ins` and result axes `outs` (size-1 axes left out) whose
/// sizes have the same product; inside a group the result indices form a row-major linear
/// index that the operand axes split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// Operand axes, outermost first.
    pub ins: Vec<usize>,
    /// Result axes, outermost first.
    pub outs: Vec<usize>,
}

/// Axes of `shape` whose size is not 1.
fn non_unit<C: Coeff>(shape: &[C]) -> Vec<usize> {
    (0..shape.len()).filter(|a| !shape[*a].is_int(1)).collect()
}

/// The running products of `shape` over `axes` (`None` on overflow).
fn prefix_products<C: Coeff>(shape: &[C], axes: &[usize]) -> Option<Vec<C>> {
    let mut acc = C::int(1);
    axes.iter()
        .map(|a| {
            acc = acc.checked_mul(&shape[*a])?;
            Some(acc.clone())
        })
        .collect()
}

/// The finest RESHAPE grouping from `in_shape` (operand) to `out_shape` (result): a group ends
/// wherever the running products of both shapes agree. `None` when the shapes never agree again
/// (their products differ, or symbolic products are not provably equal).
pub fn reshape_groups<C: Coeff>(in_shape: &[C], out_shape: &[C]) -> Option<Vec<Group>> {
    let (ins, outs) = (non_unit(in_shape), non_unit(out_shape));
    let (pin, pout) = (
        prefix_products(in_shape, &ins)?,
        prefix_products(out_shape, &outs)?,
    );
    let mut groups = Vec::new();
    let (mut i0, mut j0) = (0, 0);
    for i in 0..ins.len() {
        let Some(j) = (j0..outs.len()).find(|j| pout[*j] == pin[i]) else {
            continue;
        };
        groups.push(Group {
            ins: ins[i0..=i].to_vec(),
            outs: outs[j0..=j].to_vec(),
        });
        (i0, j0) = (i + 1, j + 1);
    }
    (i0 == ins.len() && j0 == outs.len()).then_some(groups)
}

/// One group of every non-unit axis: always a correct RESHAPE (linearize everything, split
/// everything), the coarsest form.
pub fn whole_group<C: Coeff>(in_shape: &[C], out_shape: &[C]) -> Group {
    Group {
        ins: non_unit(in_shape),
        outs: non_unit(out_shape),
    }
}

/// RESHAPE: the operand index of every operand axis over the `groups` (from
/// [`reshape_groups`]). Within a group operand axis `d` reads `(L // stride_d) mod size_d`, the
/// outermost axis of the group just `L // stride_d`; size-1 operand axes read 0. `floor` is the
/// caller's floordiv; `visit(d, e)` sees each operand axis's index as it is made (groups in
/// order, the axes of a group innermost first).
pub fn reshape<C, V, E>(
    env: &Env<C, V>,
    in_shape: &[C],
    out_shape: &[C],
    groups: &[Group],
    floor: FloorFn<'_, C, V, E>,
    visit: &mut dyn FnMut(usize, &Quasi<C, V>),
) -> Result<Vec<Quasi<C, V>>, E>
where
    C: Coeff,
    V: Clone + Ord,
    E: From<IndexError>,
{
    let mut res = vec![Quasi::default(); in_shape.len()];
    for g in groups {
        let mut lin = Quasi::default();
        let mut stride = C::int(1);
        for d in g.outs.iter().rev() {
            lin = lin.try_add(&env[*d].try_scale(&stride)?)?;
            stride = mul(&stride, &out_shape[*d])?;
        }
        let mut stride = C::int(1);
        for (k, d) in g.ins.iter().enumerate().rev() {
            let q = floor(&lin, &stride)?;
            let e = if k == 0 {
                q
            } else {
                q.try_sub(&floor(&q, &in_shape[*d])?.try_scale(&in_shape[*d])?)?
            };
            visit(*d, &e);
            res[*d] = e;
            stride = mul(&stride, &in_shape[*d])?;
        }
    }
    Ok(res)
}

fn mul<C: Coeff>(a: &C, b: &C) -> Result<C, IndexError> {
    a.checked_mul(b).ok_or(IndexError::Overflow)
}

/// Why a permutation or view does not fit its environment.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MoveError {
    /// `perm` is not a permutation of the environment's axes.
    #[error("permutation {perm:?} does not fit rank {rank}")]
    Permutation {
        /// The permutation.
        perm: Vec<usize>,
        /// The environment's rank.
        rank: usize,
    },
    /// A VIEW term names an axis the result does not have.
    #[error("VIEW map names axis {axis} of a rank-{rank} result")]
    ViewAxis {
        /// The axis named.
        axis: usize,
        /// The result's rank.
        rank: usize,
    },
    /// Arithmetic failed.
    #[error(transparent)]
    Index(#[from] IndexError),
}

/// PERMUTE by `perm`: operand axis `perm[k]` is read at result index `k`.
pub fn permute<C: Coeff, V: Clone + Ord>(
    env: &Env<C, V>,
    perm: &[usize],
) -> Result<Vec<Quasi<C, V>>, MoveError> {
    let bad = || MoveError::Permutation {
        perm: perm.to_vec(),
        rank: env.len(),
    };
    let mut out = vec![None; perm.len()];
    for (k, p) in perm.iter().enumerate() {
        *out.get_mut(*p).ok_or_else(bad)? = Some(env.get(k).ok_or_else(bad)?.clone());
    }
    out.into_iter().map(|e| e.ok_or_else(bad)).collect()
}

/// EXPAND (and any size-1 operand axis): index 0 where the operand has size 1.
pub fn expand<C: Coeff, V: Clone + Ord>(env: &Env<C, V>, in_shape: &[C]) -> Vec<Quasi<C, V>> {
    env.iter()
        .zip(in_shape)
        .map(|(e, d)| {
            if d.is_int(1) {
                Quasi::default()
            } else {
                e.clone()
            }
        })
        .collect()
}

/// SHRINK from `lo` with `step`: `lo + step · i`.
pub fn shrink<C: Coeff, V: Clone + Ord>(
    env: &Env<C, V>,
    lo: &[C],
    step: &[i64],
) -> Result<Vec<Quasi<C, V>>, IndexError> {
    env.iter()
        .zip(lo.iter().zip(step))
        .map(|(e, (l, s))| e.try_scale(&C::int(*s))?.try_add_const(l))
        .collect()
}

/// FLIP `axes`: `size − 1 − i` on a flipped axis.
pub fn flip<C: Coeff, V: Clone + Ord>(
    env: &Env<C, V>,
    axes: &[usize],
    in_shape: &[C],
) -> Result<Vec<Quasi<C, V>>, IndexError> {
    env.iter()
        .enumerate()
        .map(|(d, e)| {
            if !axes.contains(&d) {
                return Ok(e.clone());
            }
            let last = in_shape[d]
                .checked_add(&C::int(-1))
                .ok_or(IndexError::Overflow)?;
            Quasi::constant(last).try_sub(e)
        })
        .collect()
}

/// VIEW: operand axis `j` reads `offset_j + Σ coeff · i_axis` (`rows[j] = (offset, terms)`).
pub fn view<'a, C: Coeff, V: Clone + Ord>(
    env: &Env<C, V>,
    rows: impl IntoIterator<Item = (i64, &'a [(usize, i64)])>,
) -> Result<Vec<Quasi<C, V>>, MoveError> {
    rows.into_iter()
        .map(|(offset, terms)| {
            terms.iter().try_fold(Quasi::int(offset), |acc, (a, c)| {
                let e = env.get(*a).ok_or(MoveError::ViewAxis {
                    axis: *a,
                    rank: env.len(),
                })?;
                Ok(acc.try_add(&e.try_scale(&C::int(*c))?)?)
            })
        })
        .collect()
}

/// PAD by `(lo, hi)` per axis: the operand index `i − lo` (the guard is the caller's).
pub fn pad<C: Coeff, V: Clone + Ord>(
    env: &Env<C, V>,
    pads: &[(i64, i64)],
) -> Result<Vec<Quasi<C, V>>, IndexError> {
    env.iter()
        .zip(pads)
        .map(|(e, (lo, _))| e.try_add_const(&C::int(-lo)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::simplify::{self, Facts};

    type Q = Quasi<i64, usize>;

    /// Axis `k` ranges over `[0, sizes[k] − 1]`.
    struct Sizes<'a>(&'a [i64]);

    impl Facts<i64, usize> for Sizes<'_> {
        fn range(&self, v: &usize) -> Option<(i64, i64)> {
            self.0.get(*v).map(|n| (0, n - 1))
        }
    }

    fn vars(n: usize) -> Vec<Q> {
        (0..n).map(Q::var).collect()
    }

    /// The operand's row-major flat offset of `idx`.
    fn flat(idx: &[i64], shape: &[i64]) -> i64 {
        idx.iter().zip(shape).fold(0, |acc, (i, n)| acc * n + i)
    }

    /// Every result point of a reshape reads the operand element with the same flat offset.
    fn check_reshape(in_shape: &[i64], out_shape: &[i64], groups: &[Group]) {
        let facts = Sizes(out_shape);
        let floor = |e: &Q, d: &i64| simplify::floordiv(e, d, &facts);
        let env = vars(out_shape.len());
        let m = reshape(&env, in_shape, out_shape, groups, &floor, &mut |_, _| {})
            .expect("integer reshape");
        let total: i64 = out_shape.iter().product();
        for f in 0..total {
            let mut point = vec![0; out_shape.len()];
            let mut rest = f;
            for (p, n) in point.iter_mut().zip(out_shape).rev() {
                (*p, rest) = (rest % n, rest / n);
            }
            let at: Vec<i64> = m
                .iter()
                .map(|e| {
                    e.eval::<IndexError>(&|v| Ok(point[*v]), &|c| Ok(*c))
                        .expect("value")
                })
                .collect();
            assert_eq!(
                flat(&at, in_shape),
                f,
                "{in_shape:?} -> {out_shape:?} at {point:?}"
            );
        }
    }

    #[test]
    fn reshape_groups_are_the_finest_common_prefixes() {
        let g = reshape_groups(&[4i64, 6, 5], &[24, 1, 5]).expect("groups");
        assert_eq!(
            g,
            vec![
                Group {
                    ins: vec![0, 1],
                    outs: vec![0]
                },
                Group {
                    ins: vec![2],
                    outs: vec![2]
                },
            ]
        );
        assert_eq!(reshape_groups(&[4i64, 6], &[5, 5]), None);
    }

    #[test]
    fn reshape_reads_the_same_flat_offset() {
        for (a, b) in [
            (vec![4i64, 6], vec![24]),
            (vec![24], vec![4, 6]),
            (vec![4, 6], vec![6, 4]),
            (vec![2, 3, 4], vec![3, 1, 8]),
            (vec![1, 6, 1], vec![2, 3]),
        ] {
            let g = reshape_groups(&a, &b).expect("equal products");
            check_reshape(&a, &b, &g);
            check_reshape(&a, &b, &[whole_group(&a, &b)]);
        }
    }

    #[test]
    fn permute_expand_flip_view_pad_shrink() {
        let env = vars(3);
        let p = permute(&env, &[2, 0, 1]).expect("permutation");
        assert_eq!(p, vec![Q::var(1usize), Q::var(2usize), Q::var(0usize)]);
        assert!(permute(&env, &[0, 0, 1]).is_err());
        assert!(permute(&env[..2], &[0, 1, 2]).is_err());
        assert_eq!(expand(&env, &[1, 5, 1])[0], Q::default());
        let f = flip(&env, &[1], &[2, 5, 3]).expect("flip");
        assert_eq!(f[1], Q::int(4).sub(&Q::var(1usize)));
        let terms: &[(usize, i64)] = &[(0, 2), (2, 1)];
        let v = view(&env, [(3, terms)]).expect("view");
        assert_eq!(
            v[0],
            Q::var(0usize).scale(2).add(&Q::var(2usize)).add(&Q::int(3))
        );
        assert!(view(&env, [(0, &[(7, 1)][..])]).is_err());
        let p = pad(&env, &[(1, 0), (0, 0), (2, 2)]).expect("pad");
        assert_eq!(p[2], Q::var(2usize).add(&Q::int(-2)));
        let s = shrink(&env, &[1, 0, 4], &[2, 1, 1]).expect("shrink");
        assert_eq!(s[0], Q::var(0usize).scale(2).add(&Q::int(1)));
    }
}
