//! Movement ops as index-environment transformers: given the environment (one index per result
//! dimension) at which a movement node is evaluated, the environment of its operand (and, for
//! PAD, the guard under which the operand is read). Views never compute (seed 001 §6.5). The
//! index maps are the index algebra's ([`crate::index::movement`]); this module adds synthesis's
//! floordiv policy (a floor by a symbolic size is not affine) and its PAD/READ guards.

use super::ix::{Extents, Ix};
use crate::index::movement as mv;
use crate::index::{IndexError, Quasi};
use crate::ir::axis::{axis_name, AccessMap, AxisExpr, CmpOp, Pred};
use crate::ir::dim::Dim;
use crate::ir::tiny::AffineIndex;

type Form = Quasi<Dim, String>;

fn forms(env: &[Ix]) -> Vec<Form> {
    env.iter().map(|e| e.form().clone()).collect()
}

fn ixs(forms: Vec<Form>) -> Vec<Ix> {
    forms.into_iter().map(Ix::of_form).collect()
}

/// Index arithmetic over sizes does not overflow ([`Dim`] is exact); kept as a message.
fn arith(e: IndexError) -> String {
    e.to_string()
}

/// PERMUTE: result dim `i` is operand dim `perm[i]`.
pub(super) fn permute(env: &[Ix], perm: &[usize]) -> Result<Vec<Ix>, String> {
    mv::permute(&forms(env), perm)
        .map(ixs)
        .map_err(|e| e.to_string())
}

/// EXPAND (and any size-1 operand dim): index 0 where the operand has size 1.
pub(super) fn expand(env: &[Ix], in_shape: &[Dim]) -> Vec<Ix> {
    ixs(mv::expand(&forms(env), in_shape))
}

/// SHRINK: `lo + step · i`.
pub(super) fn shrink(env: &[Ix], lo: &[Dim], step: &[i64]) -> Result<Vec<Ix>, String> {
    mv::shrink(&forms(env), lo, step).map(ixs).map_err(arith)
}

/// FLIP: `size - 1 - i` on the flipped dims.
pub(super) fn flip(env: &[Ix], axes: &[usize], in_shape: &[Dim]) -> Result<Vec<Ix>, String> {
    mv::flip(&forms(env), axes, in_shape)
        .map(ixs)
        .map_err(arith)
}

/// VIEW: `offset + Σ coeff · i_axis` per operand dim.
pub(super) fn view(env: &[Ix], map: &[AffineIndex]) -> Result<Vec<Ix>, String> {
    mv::view(&forms(env), map.iter().map(AffineIndex::row))
        .map(ixs)
        .map_err(|e| e.to_string())
}

/// PAD: the operand index `i - lo` and the guard `lo <= i < lo + size` (only the bounds a pad
/// can violate). The guard is `None` when nothing is padded.
pub(super) fn pad(
    env: &[Ix],
    pads: &[(i64, i64)],
    in_shape: &[Dim],
) -> Result<(Vec<Ix>, Option<Pred>), String> {
    let out = ixs(mv::pad(&forms(env), pads).map_err(arith)?);
    let mut conj = Vec::new();
    for ((e, (lo, hi)), size) in env.iter().zip(pads).zip(in_shape) {
        if *lo > 0 {
            conj.push(Pred::Cmp(CmpOp::Ge, e.to_axis()?, Ix::int(*lo).to_axis()?));
        }
        if *hi > 0 {
            let end = Ix::konst(size.add_int(*lo));
            conj.push(Pred::Cmp(CmpOp::Lt, e.to_axis()?, end.to_axis()?));
        }
    }
    let guard = match conj.len() {
        0 => None,
        1 => conj.pop(),
        _ => Some(Pred::And(conj)),
    };
    Ok((out, guard))
}

/// An access-map index with its output axes `i0…` replaced by `env` (other names are sizes).
fn substitute(e: &AxisExpr, env: &[Ix], ext: Extents) -> Result<Ix, String> {
    Ok(match e {
        AxisExpr::Const(c) => Ix::int(*c),
        AxisExpr::Name(n) => match (0..env.len()).find(|k| axis_name(*k) == *n) {
            Some(k) => env[k].clone(),
            None => Ix::konst(Dim::sym(n)),
        },
        AxisExpr::Add(l) => l.iter().try_fold(Ix::default(), |acc, x| {
            substitute(x, env, ext).map(|v| acc.add(&v))
        })?,
        AxisExpr::Mul(a, b) => {
            let (a, b) = (substitute(a, env, ext)?, substitute(b, env, ext)?);
            match (a.as_konst(), b.as_konst()) {
                (Some(k), _) => b.scale(k),
                (_, Some(k)) => a.scale(k),
                _ => return Err(format!("`{e}` multiplies two axes")),
            }
        }
        AxisExpr::FloorDiv(x, c) => substitute(x, env, ext)?.floordiv(&Dim::int(*c), ext)?,
        AxisExpr::Min(a, b) | AxisExpr::Max(a, b) => {
            let (a, b) = (substitute(a, env, ext)?, substitute(b, env, ext)?);
            match (a.as_konst(), b.as_konst()) {
                (Some(x), Some(y)) if matches!(e, AxisExpr::Min(..)) => Ix::konst(x.min_of(y)),
                (Some(x), Some(y)) => Ix::konst(x.max_of(y)),
                _ => return Err(format!("`{e}` takes the min/max of an axis")),
            }
        }
    })
}

fn substitute_pred(p: &Pred, env: &[Ix], ext: Extents) -> Result<Pred, String> {
    Ok(match p {
        Pred::And(ps) => Pred::And(
            ps.iter()
                .map(|q| substitute_pred(q, env, ext))
                .collect::<Result<_, _>>()?,
        ),
        Pred::Or(ps) => Pred::Or(
            ps.iter()
                .map(|q| substitute_pred(q, env, ext))
                .collect::<Result<_, _>>()?,
        ),
        Pred::Cmp(op, a, b) => Pred::Cmp(
            *op,
            substitute(a, env, ext)?.to_axis()?,
            substitute(b, env, ext)?.to_axis()?,
        ),
    })
}

/// READ (Tiny's general view): the operand index `access.index` and guard `access.guard` with
/// `i_k := env[k]`.
pub(super) fn read(
    env: &[Ix],
    access: &AccessMap,
    ext: Extents,
) -> Result<(Vec<Ix>, Option<Pred>), String> {
    let index = access
        .index
        .iter()
        .map(|e| substitute(e, env, ext))
        .collect::<Result<_, _>>()?;
    let guard = match &access.guard {
        Some(g) => Some(substitute_pred(g, env, ext)?),
        None => None,
    };
    Ok((index, guard))
}

/// RESHAPE: dims are grouped into runs of equal element count (unit dims aside: an operand unit
/// dim reads 0). Within a group the result indices form a row-major linear index `L`, and operand
/// dim `j` reads `(L // stride_j) mod size_j`; splitting one operand dim is affine (symbolic
/// strides are fine), merging needs `floordiv` by a positive constant (`Err` otherwise).
pub(super) fn reshape(
    env: &[Ix],
    in_shape: &[Dim],
    out_shape: &[Dim],
    ext: Extents,
) -> Result<Vec<Ix>, String> {
    let groups = mv::reshape_groups(in_shape, out_shape).ok_or_else(|| {
        format!("no matching dimension groups from {in_shape:?} to {out_shape:?}")
    })?;
    let floor = |e: &Form, d: &Dim| -> Result<Form, Floor> {
        Ix::of_form(e.clone())
            .floordiv(d, ext)
            .map(|q| q.form().clone())
            .map_err(Floor::Why)
    };
    let res = mv::reshape(
        &forms(env),
        in_shape,
        out_shape,
        &groups,
        &floor,
        &mut |_, _| {},
    );
    res.map(ixs).map_err(|e| match e {
        Floor::Why(w) => w,
        Floor::Arith(e) => arith(e),
    })
}

/// Why a reshape's floordiv failed.
enum Floor {
    Why(String),
    Arith(IndexError),
}

impl From<IndexError> for Floor {
    fn from(e: IndexError) -> Floor {
        Floor::Arith(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(v: &str) -> Option<Dim> {
        match v {
            "m" => Some(Dim::sym("M")),
            "n" => Some(Dim::sym("N")),
            "i" => Some(Dim::int(24)),
            "a" => Some(Dim::int(4)),
            "b" => Some(Dim::int(6)),
            _ => None,
        }
    }

    fn show(v: &[Ix]) -> Vec<String> {
        v.iter().map(|e| e.show()).collect()
    }

    #[test]
    fn reshape_split_and_unit_dims() {
        // [M*N] viewed as [M, 1, N]: operand index m*N + n.
        let env = [Ix::var("m"), Ix::default(), Ix::var("n")];
        let mn = Dim::sym("M").mul(&Dim::sym("N"));
        let r = reshape(
            &env,
            &[mn],
            &[Dim::sym("M"), Dim::int(1), Dim::sym("N")],
            &ext,
        );
        assert_eq!(r.map(|v| show(&v)), Ok(vec!["N*m+n".to_string()]));
    }

    #[test]
    fn reshape_merge_needs_constant_strides() {
        let mn = Dim::sym("M").mul(&Dim::sym("N"));
        let r = reshape(
            &[Ix::var("i")],
            &[Dim::sym("M"), Dim::sym("N")],
            &[mn],
            &ext,
        );
        assert!(r.is_err());
        let r = reshape(
            &[Ix::var("i")],
            &[Dim::int(4), Dim::int(6)],
            &[Dim::int(24)],
            &ext,
        );
        assert_eq!(
            r.map(|v| show(&v)),
            Ok(vec!["i//6".to_string(), "i+-6*(i//6)".to_string()])
        );
        // [4, 6] as [6, 4]: one group, through the linear index.
        let r = reshape(
            &[Ix::var("b"), Ix::var("a")],
            &[Dim::int(4), Dim::int(6)],
            &[Dim::int(6), Dim::int(4)],
            &ext,
        )
        .expect("constant sizes");
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn read_substitutes_output_axes() {
        let access = AccessMap {
            shape: vec![Dim::int(3)],
            index: vec![AxisExpr::Add(vec![
                AxisExpr::Mul(
                    Box::new(AxisExpr::Const(2)),
                    Box::new(AxisExpr::Name("i0".into())),
                ),
                AxisExpr::Const(-1),
            ])],
            guard: Some(Pred::Cmp(
                CmpOp::Ge,
                AxisExpr::Name("i0".into()),
                AxisExpr::Const(1),
            )),
            fill: 0.0.into(),
        };
        let (idx, g) = read(&[Ix::var("m")], &access, &ext).expect("read");
        assert_eq!(show(&idx), vec!["2*m+-1".to_string()]);
        assert_eq!(g.map(|p| p.to_string()), Some("m>=1".to_string()));
    }

    #[test]
    fn pad_guards_only_padded_sides() {
        let (e, g) = pad(&[Ix::var("i")], &[(1, 0)], &[Dim::int(23)]).expect("pad");
        assert_eq!(show(&e), vec!["i+-1".to_string()]);
        assert_eq!(g.map(|p| p.to_string()), Some("i>=1".to_string()));
        let (_, g) = pad(&[Ix::var("i")], &[(0, 0)], &[Dim::int(24)]).expect("pad");
        assert!(g.is_none());
    }
}
