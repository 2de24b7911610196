//! Evaluation of ONNX nodes whose inputs are all constants (shape subgraphs, weight
//! preprocessing). Ops not listed here are emitted as graph nodes instead.

use super::fold::{attr_i, attr_ints, broadcast_map, norm_axis, take, transpose};
use super::import::{invalid, Importer, NResult};
use super::proto::NodeProto;
use super::value::{et, is_float_elem, CTensor};

fn elem_of_to(to: i64) -> i32 {
    to as i32
}

/// Reshape target sizes for a concrete input shape: `0` copies (unless `allowzero`), `-1` infers.
pub(super) fn reshape_sizes(
    node: &NodeProto,
    input: &[usize],
    spec: &[i64],
    allowzero: bool,
) -> NResult<Vec<usize>> {
    let n: usize = input.iter().product();
    let mut out: Vec<i64> = spec
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            if s == 0 && !allowzero {
                input.get(i).map_or(0, |d| *d as i64)
            } else {
                s
            }
        })
        .collect();
    let known: i64 = out.iter().filter(|s| **s >= 0).product();
    if let Some(p) = out.iter().position(|s| *s == -1) {
        if known == 0 || n as i64 % known != 0 {
            return Err(invalid(
                node,
                "the reshape size does not divide the element count",
            ));
        }
        out[p] = n as i64 / known;
    }
    if out.iter().any(|s| *s < 0) || out.iter().product::<i64>() != n as i64 {
        return Err(invalid(
            node,
            format!("cannot reshape {input:?} to {spec:?}"),
        ));
    }
    Ok(out.into_iter().map(|s| s as usize).collect())
}

/// Folds `node` over constant inputs; `None` when the op is not folded here.
pub(super) fn fold_const(
    imp: &Importer<'_>,
    node: &NodeProto,
    ins: &[Option<CTensor>],
) -> NResult<Option<Vec<CTensor>>> {
    let op = node.op_type.as_deref().unwrap_or("");
    let Some(x) = ins.first().and_then(Option::as_ref) else {
        return Ok(None);
    };
    let out = match fold_pointwise(node, op, x, ins) {
        Some(r) => r,
        None => match fold_layout(node, op, x, ins)? {
            Some(r) => r,
            None => match fold_other(imp, node, op, x, ins)? {
                Some(r) => r,
                None => return Ok(None),
            },
        },
    };
    out.map(|c| Some(vec![c]))
        .ok_or_else(|| invalid(node, "the constant operands do not broadcast"))
}

/// Elementwise ops over constants (`None`: not one of them; `Some(None)`: no broadcast).
fn fold_pointwise(
    node: &NodeProto,
    op: &str,
    x: &CTensor,
    ins: &[Option<CTensor>],
) -> Option<Option<CTensor>> {
    let inp = |i: usize| ins.get(i).and_then(Option::as_ref);
    let un = |f: &dyn Fn(f64) -> f64| broadcast_map(&[x], x.elem, &|a| f(a[0]));
    let bin = |elem: i32, f: &dyn Fn(f64, f64) -> f64| match inp(1) {
        Some(y) => broadcast_map(&[x, y], elem, &|a| f(a[0], a[1])),
        None => None,
    };
    let float = is_float_elem(x.elem);
    Some(match op {
        "Identity" | "Dropout" => Some(x.clone()),
        "Cast" => {
            let to = elem_of_to(attr_i(node, "to").unwrap_or(et::FLOAT as i64));
            Some(CTensor {
                elem: to,
                ..x.clone()
            })
        }
        "CastLike" => inp(1).map(|y| CTensor {
            elem: y.elem,
            ..x.clone()
        }),
        "Neg" => un(&|a| -a),
        "Abs" => un(&f64::abs),
        "Sqrt" => un(&f64::sqrt),
        "Exp" => un(&f64::exp),
        "Log" => un(&f64::ln),
        "Reciprocal" => un(&|a| 1.0 / a),
        "Floor" => un(&f64::floor),
        "Ceil" => un(&f64::ceil),
        "Relu" => un(&|a| a.max(0.0)),
        "Not" => un(&|a| f64::from(u8::from(a == 0.0))),
        "Add" => bin(x.elem, &|a, b| a + b),
        "Sub" => bin(x.elem, &|a, b| a - b),
        "Mul" => bin(x.elem, &|a, b| a * b),
        "Div" if float => bin(x.elem, &|a, b| a / b),
        "Div" => bin(x.elem, &|a, b| if b == 0.0 { 0.0 } else { (a / b).trunc() }),
        "Pow" => bin(x.elem, &f64::powf),
        // fmod = 1: the sign of the dividend (C's fmod); else the divisor's (Python's %).
        "Mod" if attr_i(node, "fmod") == Some(1) => bin(x.elem, &|a, b| a % b),
        "Mod" if !float => bin(x.elem, &|a, b| {
            if b == 0.0 {
                0.0
            } else {
                a - b * (a / b).floor()
            }
        }),
        "Max" if ins.len() == 2 => bin(x.elem, &f64::max),
        "Min" if ins.len() == 2 => bin(x.elem, &f64::min),
        "Equal" => bin(et::BOOL, &|a, b| f64::from(u8::from(a == b))),
        "Less" => bin(et::BOOL, &|a, b| f64::from(u8::from(a < b))),
        "Greater" => bin(et::BOOL, &|a, b| f64::from(u8::from(a > b))),
        "LessOrEqual" => bin(et::BOOL, &|a, b| f64::from(u8::from(a <= b))),
        "GreaterOrEqual" => bin(et::BOOL, &|a, b| f64::from(u8::from(a >= b))),
        "And" => bin(et::BOOL, &|a, b| f64::from(u8::from(a != 0.0 && b != 0.0))),
        "Or" => bin(et::BOOL, &|a, b| f64::from(u8::from(a != 0.0 || b != 0.0))),
        "Where" => match (inp(1), inp(2)) {
            (Some(a), Some(b)) => broadcast_map(&[x, a, b], a.elem, &|v| {
                if v[0] != 0.0 {
                    v[1]
                } else {
                    v[2]
                }
            }),
            _ => None,
        },
        _ => return None,
    })
}

/// Reshapes over constants.
fn fold_layout(
    node: &NodeProto,
    op: &str,
    x: &CTensor,
    ins: &[Option<CTensor>],
) -> NResult<Option<Option<CTensor>>> {
    let inp = |i: usize| ins.get(i).and_then(Option::as_ref);
    let rank = x.shape.len();
    Ok(Some(match op {
        "Reshape" => {
            let Some(s) = inp(1) else { return Ok(None) };
            let shape = reshape_sizes(
                node,
                &x.shape,
                &s.ints(),
                attr_i(node, "allowzero") == Some(1),
            )?;
            Some(CTensor { shape, ..x.clone() })
        }
        "Flatten" => {
            let a = super::ops::flatten_axis(node, attr_i(node, "axis").unwrap_or(1), rank)?;
            let lo: usize = x.shape[..a].iter().product();
            Some(CTensor {
                shape: vec![lo, x.data.len() / lo.max(1)],
                ..x.clone()
            })
        }
        "Unsqueeze" => {
            let axes = inp(1)
                .map(CTensor::ints)
                .or_else(|| attr_ints(node, "axes"))
                .unwrap_or_default();
            let r = rank + axes.len();
            let mut axes: Vec<usize> = axes
                .iter()
                .map(|a| norm_axis(node, *a, r))
                .collect::<NResult<_>>()?;
            axes.sort_unstable();
            let mut shape = x.shape.clone();
            for a in axes {
                shape.insert(a.min(shape.len()), 1);
            }
            Some(CTensor { shape, ..x.clone() })
        }
        "Squeeze" => {
            let axes = inp(1)
                .map(CTensor::ints)
                .or_else(|| attr_ints(node, "axes"));
            let axes: Vec<usize> = match axes {
                Some(a) => a
                    .iter()
                    .map(|v| norm_axis(node, *v, rank))
                    .collect::<NResult<_>>()?,
                None => (0..rank).filter(|i| x.shape[*i] == 1).collect(),
            };
            let shape = x
                .shape
                .iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, d)| *d)
                .collect();
            Some(CTensor { shape, ..x.clone() })
        }
        _ => return Ok(None),
    }))
}

/// Concat, indexing, Range, ConstantOfShape and Expand over constants.
fn fold_other(
    imp: &Importer<'_>,
    node: &NodeProto,
    op: &str,
    x: &CTensor,
    ins: &[Option<CTensor>],
) -> NResult<Option<Option<CTensor>>> {
    let inp = |i: usize| ins.get(i).and_then(Option::as_ref);
    let rank = x.shape.len();
    Ok(Some(match op {
        "Concat" => {
            let parts: Option<Vec<&CTensor>> = ins.iter().map(Option::as_ref).collect();
            let Some(parts) = parts else { return Ok(None) };
            let a = norm_axis(node, attr_i(node, "axis").unwrap_or(0), rank)?;
            let outer: usize = x.shape[..a].iter().product();
            let mut data = Vec::new();
            for o in 0..outer {
                for p in &parts {
                    let inner: usize = p.shape[a..].iter().product();
                    data.extend_from_slice(&p.data[o * inner..(o + 1) * inner]);
                }
            }
            let mut shape = x.shape.clone();
            shape[a] = parts.iter().map(|p| p.shape[a]).sum();
            Some(CTensor {
                elem: x.elem,
                shape,
                data,
            })
        }
        "Gather" => {
            let Some(idx) = inp(1) else { return Ok(None) };
            let a = norm_axis(node, attr_i(node, "axis").unwrap_or(0), rank)?;
            Some(take(x, a, idx).ok_or_else(|| invalid(node, "an index is out of range"))?)
        }
        "Transpose" => {
            let perm: Vec<usize> = attr_ints(node, "perm")
                .map(|p| p.iter().map(|v| *v as usize).collect())
                .unwrap_or_else(|| (0..rank).rev().collect());
            Some(transpose(x, &perm))
        }
        "Slice" => slice_const(node, x, ins)?,
        "ConstantOfShape" => {
            let value = super::fold::attr(node, "value")
                .and_then(|a| a.t.as_ref())
                .map(|t| super::value::decode_tensor(t, imp.dir))
                .transpose()
                .map_err(|w| invalid(node, w))?
                .unwrap_or_else(|| CTensor::scalar(et::FLOAT, 0.0));
            let shape: Vec<usize> = x.ints().iter().map(|v| (*v).max(0) as usize).collect();
            let n: usize = shape.iter().product();
            Some(CTensor {
                elem: value.elem,
                shape,
                data: vec![value.data.first().copied().unwrap_or(0.0); n],
            })
        }
        "Expand" => {
            let Some(s) = inp(1) else { return Ok(None) };
            let shape: Vec<usize> = s.ints().iter().map(|v| (*v).max(0) as usize).collect();
            let ones = CTensor {
                elem: x.elem,
                shape,
                data: Vec::new(),
            };
            let ones = CTensor {
                data: vec![0.0; ones.shape.iter().product()],
                ..ones
            };
            broadcast_map(&[x, &ones], x.elem, &|v| v[0])
        }
        "Range" => range_const(x, inp(1), inp(2)),
        _ => return Ok(None),
    }))
}

/// `Range(start, limit, delta)` over constants.
fn range_const(x: &CTensor, limit: Option<&CTensor>, delta: Option<&CTensor>) -> Option<CTensor> {
    match (limit, delta) {
        (Some(l), Some(d)) => {
            let (s, l, d) = (x.data[0], l.data[0], d.data[0]);
            let n = if d == 0.0 {
                0.0
            } else {
                ((l - s) / d).ceil().max(0.0)
            };
            let data: Vec<f64> = (0..n as usize).map(|i| s + d * i as f64).collect();
            Some(CTensor {
                elem: x.elem,
                shape: vec![data.len()],
                data,
            })
        }
        _ => None,
    }
}

fn slice_const(node: &NodeProto, x: &CTensor, ins: &[Option<CTensor>]) -> NResult<Option<CTensor>> {
    let get = |i: usize| ins.get(i).and_then(Option::as_ref).map(CTensor::ints);
    let (Some(starts), Some(ends)) = (get(1), get(2)) else {
        return Ok(None);
    };
    let rank = x.shape.len();
    let axes = get(3).unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = get(4).unwrap_or_else(|| vec![1; starts.len()]);
    let mut ranges: Vec<Vec<usize>> = x.shape.iter().map(|d| (0..*d).collect()).collect();
    for (k, a) in axes.iter().enumerate() {
        let a = norm_axis(node, *a, rank)?;
        let d = x.shape[a] as i64;
        let st = steps.get(k).copied().unwrap_or(1);
        if st == 0 {
            return Err(invalid(node, "Slice step 0"));
        }
        let clamp = |v: i64, lo: i64, hi: i64| (if v < 0 { v + d } else { v }).clamp(lo, hi);
        let (s, e) = if st > 0 {
            (clamp(starts[k], 0, d), clamp(ends[k], 0, d))
        } else {
            (clamp(starts[k], -1, d - 1), clamp(ends[k], -1, d - 1))
        };
        let mut r = Vec::new();
        let mut i = s;
        while (st > 0 && i < e) || (st < 0 && i > e) {
            r.push(i as usize);
            i += st;
        }
        ranges[a] = r;
    }
    let shape: Vec<usize> = ranges.iter().map(Vec::len).collect();
    let n: usize = shape.iter().product();
    let mut strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * x.shape[i + 1];
    }
    let mut data = Vec::with_capacity(n);
    let mut idx = vec![0usize; rank];
    for _ in 0..n {
        let flat: usize = (0..rank).map(|i| ranges[i][idx[i]] * strides[i]).sum();
        data.push(x.data[flat]);
        for i in (0..rank).rev() {
            idx[i] += 1;
            if idx[i] < shape[i] {
                break;
            }
            idx[i] = 0;
        }
    }
    Ok(Some(CTensor {
        elem: x.elem,
        shape,
        data,
    }))
}
