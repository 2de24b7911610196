//! Import-time evaluation: constant folding of nodes whose inputs are all constants, and symbolic
//! folding of shape computations (`Shape` of a tensor with `dim_param` sizes gives symbol
//! expressions, carried through Gather/Concat/Unsqueeze/arithmetic into Reshape and Expand).

use super::import::{invalid, unsupported, Importer, NResult, NodeError};
use super::proto::{attribute_proto::AttributeType, AttributeProto, NodeProto};
use super::value::{decode_tensor, et, is_float_elem, round_elem, CTensor, Val};
use crate::ir::dim::Dim;

/// An attribute by name.
pub(super) fn attr<'n>(node: &'n NodeProto, name: &str) -> Option<&'n AttributeProto> {
    node.attribute
        .iter()
        .find(|a| a.name.as_deref() == Some(name))
}

/// An integer attribute.
pub(super) fn attr_i(node: &NodeProto, name: &str) -> Option<i64> {
    attr(node, name).and_then(|a| a.i)
}

/// A float attribute.
pub(super) fn attr_f(node: &NodeProto, name: &str) -> Option<f64> {
    attr(node, name).and_then(|a| a.f).map(f64::from)
}

/// An integer-list attribute.
pub(super) fn attr_ints(node: &NodeProto, name: &str) -> Option<Vec<i64>> {
    attr(node, name).map(|a| a.ints.clone())
}

/// A string attribute.
pub(super) fn attr_s(node: &NodeProto, name: &str) -> Option<String> {
    attr(node, name)
        .and_then(|a| a.s.as_ref())
        .map(|s| String::from_utf8_lossy(s).into_owned())
}

/// A shape value: int64 entries that may be symbolic; rank 0 (`scalar`) or 1.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Dv {
    pub dims: Vec<Dim>,
    pub scalar: bool,
}

impl Dv {
    fn into_val(self) -> Val {
        let ints: Option<Vec<i64>> = self.dims.iter().map(Dim::as_int).collect();
        match ints {
            Some(v) => {
                let mut c = CTensor::vec_i64(&v);
                if self.scalar {
                    c.shape.clear();
                }
                Val::Const(c)
            }
            None => Val::Sym {
                dims: self.dims,
                scalar: self.scalar,
            },
        }
    }
}

/// The shape value of input `name` (a symbolic one, or an int constant of rank ≤ 1).
fn dv(imp: &Importer<'_>, name: &str) -> NResult<Option<Dv>> {
    if let Some(Val::Sym { dims, scalar }) = imp.val(name) {
        return Ok(Some(Dv {
            dims: dims.clone(),
            scalar: *scalar,
        }));
    }
    Ok(imp.konst(name)?.and_then(|c| {
        (!is_float_elem(c.elem) && c.shape.len() <= 1).then(|| Dv {
            dims: c.ints().into_iter().map(Dim::int).collect(),
            scalar: c.shape.is_empty(),
        })
    }))
}

/// Normalizes a possibly negative axis against `rank`.
pub(super) fn norm_axis(node: &NodeProto, axis: i64, rank: usize) -> NResult<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r.max(1)).contains(&a) || (rank == 0 && a == 0) {
        Ok(a as usize)
    } else {
        Err(invalid(
            node,
            format!("axis {axis} is out of range for rank {rank}"),
        ))
    }
}

/// Tries to evaluate `node` at import time. `Some(values)` (one per output) when it folded.
pub(super) fn try_fold(imp: &mut Importer<'_>, node: &NodeProto) -> NResult<Option<Vec<Val>>> {
    let op = node.op_type.as_deref().unwrap_or("");
    match op {
        "Constant" => return constant_node(imp, node).map(|c| Some(vec![Val::Const(c)])),
        "Shape" => {
            let dims = shape_of(imp, &node.input[0])?;
            let r = dims.len() as i64;
            let clampi = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let s = clampi(attr_i(node, "start").unwrap_or(0));
            let e = clampi(attr_i(node, "end").unwrap_or(r));
            let dims = dims.get(s..e.max(s)).unwrap_or_default().to_vec();
            return Ok(Some(vec![Dv {
                dims,
                scalar: false,
            }
            .into_val()]));
        }
        "Size" => {
            let dims = shape_of(imp, &node.input[0])?;
            let n = Dim::product(dims.iter());
            return Ok(Some(vec![Dv {
                dims: vec![n],
                scalar: true,
            }
            .into_val()]));
        }
        _ => {}
    }
    let present: Vec<&String> = node.input.iter().filter(|i| !i.is_empty()).collect();
    if present
        .iter()
        .any(|i| matches!(imp.val(i), Some(Val::T(_)) | Some(Val::Poison) | None))
    {
        return Ok(None);
    }
    // Symbolic shape values first (they are not constants).
    if present.iter().any(|i| matches!(imp.val(i), Some(Val::Sym { dims, .. }) if dims.iter().any(|d| d.as_int().is_none())))
    {
        if let Some(v) = fold_select(imp, node)? {
            return Ok(Some(vec![v]));
        }
        // Ops that mix symbolic shape values with data, or that these folds do not cover, are
        // imported as graph nodes (the shape values become run-time tensors).
        return match fold_dims(imp, node) {
            Err(NodeError::Unsupported(_)) => Ok(None),
            r => r.map(|o| o.map(|d| vec![d.into_val()])),
        };
    }
    // Every input is a constant.
    let mut ins: Vec<Option<CTensor>> = Vec::new();
    for i in &node.input {
        ins.push(if i.is_empty() { None } else { imp.konst(i)? });
    }
    // Large weight-only computations are folded as well (e.g. a transposed weight).
    super::constfold::fold_const(imp, node, &ins)
        .map(|o| o.map(|v| v.into_iter().map(|c| Val::Const(c.normalized())).collect()))
}

/// The (symbolic) shape of any value.
pub(super) fn shape_of(imp: &Importer<'_>, name: &str) -> NResult<Vec<Dim>> {
    Ok(match imp.val(name) {
        Some(Val::T(t)) => t.shape.clone(),
        Some(Val::Sym { dims, scalar }) => {
            if *scalar {
                Vec::new()
            } else {
                vec![Dim::int(dims.len() as i64)]
            }
        }
        Some(Val::Poison) => return Err(unsupported(String::new())),
        _ => imp
            .konst(name)?
            .map(|c| c.shape.iter().map(|d| Dim::int(*d as i64)).collect())
            .ok_or_else(|| unsupported(format!("`{name}` is not defined")))?,
    })
}

fn constant_node(imp: &Importer<'_>, node: &NodeProto) -> NResult<CTensor> {
    let a = node
        .attribute
        .first()
        .ok_or_else(|| invalid(node, "Constant without a value"))?;
    let ty = a.r#type.unwrap_or(0);
    Ok(match a.name.as_deref().unwrap_or("") {
        "value" => decode_tensor(
            a.t.as_ref().ok_or_else(|| invalid(node, "no tensor"))?,
            imp.dir,
        )
        .map_err(|w| invalid(node, w))?,
        "value_float" => CTensor::scalar(et::FLOAT, f64::from(a.f.unwrap_or(0.0))),
        "value_int" => CTensor::scalar(et::INT64, a.i.unwrap_or(0) as f64),
        "value_floats" if ty == AttributeType::Floats as i32 => CTensor {
            elem: et::FLOAT,
            shape: vec![a.floats.len()],
            data: a.floats.iter().map(|x| f64::from(*x)).collect(),
        },
        "value_ints" => CTensor::vec_i64(&a.ints),
        other => return Err(unsupported(format!("Constant `{other}` attribute"))),
    })
}

/// Shape-value ops with symbolic entries.
fn fold_dims(imp: &Importer<'_>, node: &NodeProto) -> NResult<Option<Dv>> {
    let op = node.op_type.as_deref().unwrap_or("");
    let get = |i: usize| -> NResult<Dv> {
        let name = node.input.get(i).map(String::as_str).unwrap_or("");
        dv(imp, name)?
            .ok_or_else(|| unsupported(format!("input `{name}` mixes symbolic sizes with data")))
    };
    let bin = |f: &dyn Fn(&Dim, &Dim) -> Option<Dim>| -> NResult<Option<Dv>> {
        let (a, b) = (get(0)?, get(1)?);
        let n = a.dims.len().max(b.dims.len());
        let pick = |v: &Dv, i: usize| {
            if v.dims.len() == 1 {
                v.dims[0].clone()
            } else {
                v.dims[i].clone()
            }
        };
        if (a.dims.len() != n && a.dims.len() != 1) || (b.dims.len() != n && b.dims.len() != 1) {
            return Err(invalid(node, "shape values do not broadcast"));
        }
        let dims: Option<Vec<Dim>> = (0..n).map(|i| f(&pick(&a, i), &pick(&b, i))).collect();
        Ok(dims.map(|dims| Dv {
            dims,
            scalar: a.scalar && b.scalar,
        }))
    };
    Ok(match op {
        "Identity" | "Cast" | "CastLike" => Some(get(0)?),
        "Add" => bin(&|a, b| Some(a.add(b)))?,
        "Sub" => bin(&|a, b| Some(a.sub(b)))?,
        "Mul" => bin(&|a, b| Some(a.mul(b)))?,
        "Div" => bin(&|a, b| b.as_int().filter(|d| *d > 0).map(|d| a.floordiv(d)))?,
        "Max" => bin(&|a, b| Some(a.max_of(b)))?,
        "Min" => bin(&|a, b| Some(a.min_of(b)))?,
        "Unsqueeze" | "Squeeze" | "Reshape" | "Flatten" => {
            let a = get(0)?;
            let to_scalar = op == "Squeeze" && a.dims.len() == 1;
            Some(Dv {
                dims: a.dims,
                scalar: to_scalar,
            })
        }
        "Concat" => {
            let mut dims = Vec::new();
            for i in 0..node.input.len() {
                dims.extend(get(i)?.dims);
            }
            Some(Dv {
                dims,
                scalar: false,
            })
        }
        "Gather" | "Slice" => index_dims(node, op, &get)?,
        _ => None,
    })
}

/// Whether two sizes are provably equal (`Some(true)`), provably different (`Some(false)`:
/// different integers, or an integer below 0 against a size that is `≥ 0`), or unknown.
fn dims_equal(a: &Dim, b: &Dim) -> Option<bool> {
    if a == b {
        return Some(true);
    }
    match (a.as_int(), b.as_int()) {
        (Some(x), Some(y)) => Some(x == y),
        (Some(x), None) if x < 0 && b.is_nonneg() => Some(false),
        (None, Some(y)) if y < 0 && a.is_nonneg() => Some(false),
        _ => None,
    }
}

/// `Equal` and `Where` over shape values with symbolic entries — torch's `expand(-1)` idiom
/// `Where(Equal(shape, -1), 1, shape)`: the comparison is decided at import when it can be
/// ([`dims_equal`]), and `Where` of a constant condition picks entries. `None` when it cannot.
fn fold_select(imp: &Importer<'_>, node: &NodeProto) -> NResult<Option<Val>> {
    let op = node.op_type.as_deref().unwrap_or("");
    let dvs = |range: std::ops::Range<usize>| -> NResult<Option<Vec<Dv>>> {
        let mut v = Vec::new();
        for i in range {
            match dv(imp, node.input.get(i).map_or("", String::as_str))? {
                Some(d) => v.push(d),
                None => return Ok(None),
            }
        }
        Ok(Some(v))
    };
    let width = |v: &[&Dv]| -> NResult<usize> {
        let n = v.iter().map(|d| d.dims.len()).max().unwrap_or(0);
        if v.iter().any(|d| d.dims.len() != n && d.dims.len() != 1) {
            return Err(invalid(node, "shape values do not broadcast"));
        }
        Ok(n)
    };
    let pick = |d: &Dv, i: usize| d.dims[if d.dims.len() == 1 { 0 } else { i }].clone();
    match op {
        "Equal" => {
            let Some(v) = dvs(0..2)? else { return Ok(None) };
            let n = width(&[&v[0], &v[1]])?;
            let eq: Option<Vec<f64>> = (0..n)
                .map(|i| {
                    dims_equal(&pick(&v[0], i), &pick(&v[1], i)).map(|b| f64::from(u8::from(b)))
                })
                .collect();
            Ok(eq.map(|data| {
                Val::Const(CTensor {
                    elem: et::BOOL,
                    shape: if v[0].scalar && v[1].scalar {
                        vec![]
                    } else {
                        vec![n]
                    },
                    data,
                })
            }))
        }
        "Where" => {
            let Some(cond) = imp.konst(&node.input[0])? else {
                return Ok(None);
            };
            let Some(v) = dvs(1..3)? else { return Ok(None) };
            if cond.shape.len() > 1 {
                return Ok(None);
            }
            let c = Dv {
                dims: cond.ints().into_iter().map(Dim::int).collect(),
                scalar: cond.shape.is_empty(),
            };
            let n = width(&[&c, &v[0], &v[1]])?;
            let dims = (0..n)
                .map(|i| {
                    let take_a = pick(&c, i).as_int() != Some(0);
                    pick(if take_a { &v[0] } else { &v[1] }, i)
                })
                .collect();
            Ok(Some(
                Dv {
                    dims,
                    scalar: c.scalar && v[0].scalar && v[1].scalar,
                }
                .into_val(),
            ))
        }
        _ => Ok(None),
    }
}

/// `Gather` and `Slice` of shape values with symbolic entries.
fn index_dims(
    node: &NodeProto,
    op: &str,
    get: &dyn Fn(usize) -> NResult<Dv>,
) -> NResult<Option<Dv>> {
    Ok(match op {
        "Gather" => {
            let (a, idx) = (get(0)?, get(1)?);
            let n = a.dims.len() as i64;
            let dims: Option<Vec<Dim>> = idx
                .dims
                .iter()
                .map(|d| {
                    d.as_int()
                        .map(|i| if i < 0 { i + n } else { i })
                        .and_then(|i| a.dims.get(usize::try_from(i).ok()?).cloned())
                })
                .collect();
            dims.map(|dims| Dv {
                dims,
                scalar: idx.scalar,
            })
        }
        "Slice" => {
            let a = get(0)?;
            let n = a.dims.len() as i64;
            let int = |i: usize| -> NResult<Option<i64>> {
                Ok(match node.input.get(i).filter(|s| !s.is_empty()) {
                    Some(_) => get(i)?.dims.first().and_then(Dim::as_int),
                    None => None,
                })
            };
            let (Some(s), Some(e)) = (int(1)?, int(2)?) else {
                return Ok(None);
            };
            if int(4)?.unwrap_or(1) != 1 {
                return Ok(None);
            }
            let c = |v: i64| (if v < 0 { v + n } else { v }).clamp(0, n) as usize;
            let (s, e) = (c(s), c(e));
            Some(Dv {
                dims: a.dims.get(s..e.max(s)).unwrap_or_default().to_vec(),
                scalar: false,
            })
        }
        _ => None,
    })
}

/// Broadcast binary/ternary evaluation over constants.
pub(super) fn broadcast_map(
    ins: &[&CTensor],
    elem: i32,
    f: &dyn Fn(&[f64]) -> f64,
) -> Option<CTensor> {
    let rank = ins.iter().map(|c| c.shape.len()).max().unwrap_or(0);
    let mut shape = vec![1usize; rank];
    for c in ins {
        for (i, d) in c.shape.iter().enumerate() {
            let o = &mut shape[rank - c.shape.len() + i];
            if *o == 1 {
                *o = *d;
            } else if *d != 1 && *d != *o {
                return None;
            }
        }
    }
    let n: usize = shape.iter().product();
    let mut data = Vec::with_capacity(n);
    let mut idx = vec![0usize; rank];
    let mut args = vec![0.0; ins.len()];
    for _ in 0..n {
        for (k, c) in ins.iter().enumerate() {
            let off = rank - c.shape.len();
            let mut flat = 0;
            for (i, d) in c.shape.iter().enumerate() {
                flat = flat * d + if *d == 1 { 0 } else { idx[off + i] };
            }
            args[k] = c.data[flat];
        }
        data.push(round_elem(elem, f(&args)));
        for i in (0..rank).rev() {
            idx[i] += 1;
            if idx[i] < shape[i] {
                break;
            }
            idx[i] = 0;
        }
    }
    Some(CTensor { elem, shape, data })
}

/// Gathers `c` along `axis` with `index` values (take semantics); `None` if an index is out of
/// range.
pub(super) fn take(c: &CTensor, axis: usize, index: &CTensor) -> Option<CTensor> {
    let outer: usize = c.shape[..axis].iter().product();
    let inner: usize = c.shape[axis + 1..].iter().product();
    let n = c.shape[axis] as i64;
    let mut data = Vec::new();
    for o in 0..outer {
        for &i in &index.data {
            let i = i as i64;
            let i = if i < 0 { i + n } else { i };
            if !(0..n).contains(&i) {
                return None;
            }
            let base = (o * n as usize + i as usize) * inner;
            data.extend_from_slice(&c.data[base..base + inner]);
        }
    }
    let mut shape = c.shape[..axis].to_vec();
    shape.extend(&index.shape);
    shape.extend(&c.shape[axis + 1..]);
    Some(CTensor {
        elem: c.elem,
        shape,
        data,
    })
}

/// Permutes the axes of a constant.
pub(super) fn transpose(c: &CTensor, perm: &[usize]) -> CTensor {
    let rank = c.shape.len();
    let shape: Vec<usize> = perm.iter().map(|p| c.shape[*p]).collect();
    let mut strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * c.shape[i + 1];
    }
    let n = c.data.len();
    let mut data = Vec::with_capacity(n);
    let mut idx = vec![0usize; rank];
    for _ in 0..n {
        let flat: usize = (0..rank).map(|i| idx[i] * strides[perm[i]]).sum();
        data.push(c.data[flat]);
        for i in (0..rank).rev() {
            idx[i] += 1;
            if idx[i] < shape[i] {
                break;
            }
            idx[i] = 0;
        }
    }
    CTensor {
        elem: c.elem,
        shape,
        data,
    }
}
