//! What real exports do with symbolic sizes beyond reshaping: a shape value with symbolic
//! entries used as data (the `batch_idx * seq + kv_idx` of transformers' padding masks), `Slice`
//! with symbolic bounds (`position_ids[:, :seq]` of a constant buffer), and the boolean ops
//! (`And`, `Or`, `Xor`, `IsNaN`) of attention-mask construction.

use super::fold::norm_axis;
use super::import::{unsupported, Importer, NResult, Opnd};
use super::ops::{dims_attr, scalar_param, shape_input};
use super::proto::NodeProto;
use super::value::{et, TInfo, Val};
use crate::ir::dim::{Atom, Dim};
use crate::ir::dtype::DType;
use serde_json::json;

/// The runtime value (i32) of the size expression `d` (rank 0): each monomial `c·s₁·s₂⋯` is the
/// sum of a one-element constant expanded to `[s₁, s₂, ⋯]`, scaled by `c`.
fn dim_value(imp: &mut Importer<'_>, d: &Dim, out: &str) -> NResult<TInfo> {
    let mut acc: Option<TInfo> = None;
    let mut constant = 0i64;
    for (atoms, coef) in d.monomials() {
        if atoms.is_empty() {
            constant += coef;
            continue;
        }
        let dims: Vec<Dim> = atoms
            .iter()
            .map(|a| match a {
                Atom::Sym(s) => Ok(Dim::sym(s)),
                _ => Err(unsupported(format!(
                    "the size {d} used as data (only sums of products of symbols are)"
                ))),
            })
            .collect::<NResult<_>>()?;
        let one = scalar_param(imp, &format!("{out}_one"), et::INT32, 1.0)?;
        let shape_attr = serde_json::Value::Array(dims.iter().map(|d| json!(d)).collect());
        let filled = imp.emit(
            "Expand",
            vec![json!(one.name)],
            json!({"shape": shape_attr}),
            out,
            DType::I32,
            dims.clone(),
        );
        let axes: Vec<usize> = (0..dims.len()).collect();
        let attrs = json!({"fn": "sum", "axes": axes, "keepdim": false});
        let mut t = imp.emit(
            "Reduce",
            vec![json!(filled.name)],
            attrs,
            out,
            DType::I32,
            vec![],
        );
        if coef != 1 {
            t = ew(imp, "mul", &[Opnd::T(t), Opnd::S(coef as f64)], out);
        }
        acc = Some(match acc {
            None => t,
            Some(a) => ew(imp, "add", &[Opnd::T(a), Opnd::T(t)], out),
        });
    }
    match acc {
        None => Err(unsupported(format!("the constant size {d} as symbolic"))),
        Some(t) if constant == 0 => Ok(t),
        Some(t) => Ok(ew(imp, "add", &[Opnd::T(t), Opnd::S(constant as f64)], out)),
    }
}

/// An elementwise node of same-shaped (or scalar) i32 operands.
fn ew(imp: &mut Importer<'_>, f: &str, ops: &[Opnd], out: &str) -> TInfo {
    let mut shape = Vec::new();
    let mut dtype = DType::I32;
    let inputs = ops
        .iter()
        .map(|o| match o {
            Opnd::T(t) => {
                if t.shape.len() > shape.len() {
                    shape = t.shape.clone();
                }
                dtype = t.dtype;
                json!(t.name)
            }
            Opnd::S(v) => json!(v),
        })
        .collect();
    imp.emit("Elementwise", inputs, json!({"fn": f}), out, dtype, shape)
}

/// A shape value with symbolic entries as a runtime i32 tensor (rank 0 when `scalar`, else a
/// vector): integer entries are constants, symbolic ones [`dim_value`]s, concatenated.
pub(super) fn shape_value_tensor(
    imp: &mut Importer<'_>,
    name: &str,
    dims: &[Dim],
    scalar: bool,
) -> NResult<TInfo> {
    let mut parts = Vec::new();
    for d in dims {
        let t = match d.as_int() {
            Some(v) => scalar_param(imp, &format!("{name}_entry"), et::INT64, v as f64)?,
            None => {
                let v = dim_value(imp, d, name)?;
                if scalar {
                    return Ok(v);
                }
                imp.emit(
                    "Reshape",
                    vec![json!(v.name)],
                    json!({"shape": [1]}),
                    name,
                    DType::I32,
                    vec![Dim::int(1)],
                )
            }
        };
        parts.push(t);
    }
    if parts.len() == 1 {
        return Ok(parts.remove(0));
    }
    let n = Dim::int(parts.len() as i64);
    let ins = parts.iter().map(|p| json!(p.name)).collect();
    Ok(imp.emit("Concat", ins, json!({"axis": 0}), name, DType::I32, vec![n]))
}

/// `[0, 1, …, n-1]` (i32) as an exclusive scan of ones; `n` an integer or a symbol.
pub(super) fn iota(imp: &mut Importer<'_>, node: &NodeProto, n: &Dim, out: &str) -> NResult<TInfo> {
    let one = scalar_param(imp, &format!("{out}_one"), et::INT32, 1.0)?;
    let attr = dims_attr(node, std::slice::from_ref(n), false)?;
    let filled = imp.emit(
        "Expand",
        vec![json!(one.name)],
        json!({"shape": attr}),
        out,
        DType::I32,
        vec![n.clone()],
    );
    let attrs = json!({"fn": "sum", "axis": 0, "exclusive": true, "reverse": false});
    Ok(imp.emit(
        "Cumulative",
        vec![json!(filled.name)],
        attrs,
        out,
        DType::I32,
        vec![n.clone()],
    ))
}

/// `Slice` whose starts or ends are symbolic shape values: axes with integer bounds become one
/// graph `Slice`; each axis with a symbolic bound is a take along it of `start + step·iota(len)`.
/// Symbolic bounds are taken as in range (`0 ≤ start ≤ end ≤ size`, no clamping).
pub(super) fn slice_symbolic(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    out: &str,
) -> NResult<TInfo> {
    let mut x = imp.tensor(&node.input[0])?;
    let r = x.shape.len();
    let starts = shape_input(imp, node, 1)?;
    let ends = shape_input(imp, node, 2)?;
    let opt = |i: usize| node.input.get(i).filter(|s| !s.is_empty()).is_some();
    let axes: Vec<i64> = if opt(3) {
        ints(imp, node, 3)?
    } else {
        (0..starts.len() as i64).collect()
    };
    let steps: Vec<i64> = if opt(4) {
        ints(imp, node, 4)?
    } else {
        vec![1; starts.len()]
    };
    if axes.len() != starts.len() || ends.len() != starts.len() || steps.len() != starts.len() {
        return Err(super::import::invalid(
            node,
            "Slice starts, ends, axes and steps differ in length",
        ));
    }
    for k in 0..starts.len() {
        let a = norm_axis(node, axes[k], r)?;
        let step = steps[k];
        if step <= 0 {
            return Err(unsupported(
                "Slice with a symbolic bound and a negative step",
            ));
        }
        let size = x.shape[a].clone();
        let at = |v: &Dim| match v.as_int() {
            Some(i) if i < 0 => size.add_int(i),
            Some(i) if i >= i64::from(i32::MAX) => size.clone(),
            _ => v.clone(),
        };
        let (s, e) = (at(&starts[k]), at(&ends[k]));
        if let (Some(si), Some(ei)) = (s.as_int(), e.as_int()) {
            let mut shape = x.shape.clone();
            shape[a] = Dim::int(((ei - si).max(0) + step - 1) / step);
            let attrs = json!({"starts": [si], "ends": [ei], "axes": [a], "steps": [step]});
            x = imp.emit("Slice", vec![json!(x.name)], attrs, out, x.dtype, shape);
            continue;
        }
        let len = e.sub(&s).ceildiv(step);
        let mut idx = iota(imp, node, &len, out)?;
        if step != 1 {
            idx = ew(imp, "mul", &[Opnd::T(idx), Opnd::S(step as f64)], out);
        }
        match s.as_int() {
            Some(0) => {}
            Some(v) => idx = ew(imp, "add", &[Opnd::T(idx), Opnd::S(v as f64)], out),
            None => {
                let sv = dim_value(imp, &s, out)?;
                idx = ew(imp, "add", &[Opnd::T(idx), Opnd::T(sv)], out);
            }
        }
        x = super::gather::gather_along(imp, node, &x, a, &idx, out)?;
    }
    Ok(x)
}

fn ints(imp: &Importer<'_>, node: &NodeProto, i: usize) -> NResult<Vec<i64>> {
    Ok(imp
        .konst(&node.input[i])?
        .ok_or_else(|| unsupported("Slice axes or steps that are not constants"))?
        .ints())
}

/// Whether Slice input `i` is a shape value with symbolic entries.
pub(super) fn is_symbolic(imp: &Importer<'_>, node: &NodeProto, i: usize) -> bool {
    node.input.get(i).is_some_and(|n| {
        matches!(imp.val(n), Some(Val::Sym { dims, .. }) if dims.iter().any(|d| d.as_int().is_none()))
    })
}

/// `And`, `Or`, `Xor` (bool) and `IsNaN` as `where` / `ne`: `a ∧ b = a ? b : a`,
/// `a ∨ b = a ? a : b`, `a ⊕ b = a ≠ b`, `isnan(x) = x ≠ x`.
pub(super) fn logical(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    op: &str,
    out: &str,
) -> NResult<Option<TInfo>> {
    Ok(Some(match op {
        "IsNaN" => {
            let x = imp.tensor(&node.input[0])?;
            if !x.dtype.is_float() {
                return Err(unsupported("IsNaN of a non-float tensor"));
            }
            imp.ew(node, "ne", &[Opnd::T(x.clone()), Opnd::T(x)], out)?
        }
        "And" | "Or" | "Xor" => {
            let a = imp.tensor(&node.input[0])?;
            let b = imp.tensor(&node.input[1])?;
            if a.dtype != DType::Bool || b.dtype != DType::Bool {
                return Err(unsupported(format!("{op} of non-bool tensors")));
            }
            let ops = match op {
                "And" => vec![Opnd::T(a.clone()), Opnd::T(b), Opnd::T(a)],
                "Or" => vec![Opnd::T(a.clone()), Opnd::T(a), Opnd::T(b)],
                _ => return imp.ew(node, "ne", &[Opnd::T(a), Opnd::T(b)], out).map(Some),
            };
            imp.ew(node, "where", &ops, out)?
        }
        _ => return Ok(None),
    }))
}
