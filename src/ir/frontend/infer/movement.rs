//! Movement and indexing: `Reshape`, `Permute`, `Expand`, `Pad`, `Slice`, `Flip`, `Concat`,
//! `Repeat`, `Unfold`, `Gather`.

use super::{Ctx, Inferred};
use crate::diag::codes;
use crate::diag::Diagnostic;
use crate::ir::dim::{fmt_shape, numel, Dim, Shape};
use crate::ir::dtype::DType;
use crate::ir::frontend::attrs::{DimSpec, PadSpec};
use crate::ir::frontend::{Op, TensorInfo};

fn out(x: &TensorInfo, shape: Shape) -> TensorInfo {
    TensorInfo {
        dtype: x.dtype,
        shape,
    }
}

fn invalid(cx: &Ctx, why: String, sugg: &str) -> Diagnostic {
    cx.err(codes::INVALID_FIELD, why, sugg)
}

fn spec_dim(s: &DimSpec) -> Option<Dim> {
    match s {
        DimSpec::Int(v) if *v >= 0 => Some(Dim::int(*v)),
        DimSpec::Int(_) => None,
        DimSpec::Sym(s) => Some(Dim::sym(s)),
    }
}

fn fmt_specs(specs: &[DimSpec]) -> String {
    let parts: Vec<String> = specs
        .iter()
        .map(|s| match s {
            DimSpec::Int(v) => v.to_string(),
            DimSpec::Sym(s) => s.clone(),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// The `-1` entry of a reshape: `numel(x) / Π(other entries)`, cancelling symbolic factors
/// against the input's axes. `None` when it cannot be computed exactly.
fn infer_minus_one(x: &[Dim], others: &[Dim]) -> Option<Dim> {
    let mut remaining: Vec<Dim> = x.to_vec();
    let mut constant: i64 = 1;
    for d in others {
        match d.as_int() {
            Some(v) => constant = constant.checked_mul(v)?,
            None => {
                let pos = remaining.iter().position(|r| r == d)?;
                remaining.remove(pos);
            }
        }
    }
    if constant <= 0 {
        return None;
    }
    let rest = numel(&remaining);
    let q = rest.floordiv(constant);
    (q.mul_int(constant) == rest).then_some(q)
}

/// `Reshape` (row-major); the target may hold one `-1` and symbol names.
pub(super) fn reshape(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, 1, "X")?;
    let (xn, x) = cx.t(0)?;
    let specs = cx.node.attrs.dims("shape").unwrap_or(&[]);
    let minus: Vec<usize> = specs
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == DimSpec::Int(-1))
        .map(|(i, _)| i)
        .collect();
    if minus.len() > 1 {
        return Err(invalid(
            cx,
            format!("Reshape target {} has more than one -1", fmt_specs(specs)),
            "at most one entry may be -1: spell the other sizes out (symbol names are allowed)",
        ));
    }
    let others: Vec<Dim> = specs.iter().filter_map(spec_dim).collect();
    let mismatch = |why: String| {
        cx.err(
            codes::AXIS_SIZE_MISMATCH,
            why,
            "the target must have as many elements as the input: check the sizes",
        )
        .with("from", fmt_shape(&x.shape))
        .with("to", fmt_specs(specs))
    };
    let mut shape = Vec::with_capacity(specs.len());
    let filled = match minus.first() {
        Some(_) => match infer_minus_one(&x.shape, &others) {
            Some(d) => Some(d),
            None => {
                return Err(mismatch(format!(
                    "Reshape of `{xn}` {} to {}: the -1 entry cannot be computed ({} elements are not divisible by the other entries)",
                    fmt_shape(&x.shape),
                    fmt_specs(specs),
                    numel(&x.shape)
                )))
            }
        },
        None => None,
    };
    for s in specs {
        match (spec_dim(s), &filled) {
            (Some(d), _) => shape.push(d),
            (None, Some(f)) => shape.push(f.clone()),
            (None, None) => {}
        }
    }
    let (from, to) = (numel(&x.shape), numel(&shape));
    if from != to {
        return Err(mismatch(format!(
            "Reshape of `{xn}` {} ({from} elements) to {} ({to} elements) changes the element count",
            fmt_shape(&x.shape),
            fmt_shape(&shape)
        )));
    }
    Ok((
        Op::Reshape {
            shape: shape.clone(),
        },
        out(x, shape),
    ))
}

/// `Permute`: `perm` must be a permutation of `0..rank` (negative entries count from the end).
pub(super) fn permute(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, 1, "X")?;
    let (xn, x) = cx.t(0)?;
    let (given, _) = cx.node.attrs.ints("perm").unwrap_or((&[], false));
    let rank = x.shape.len();
    let r = i64::try_from(rank).unwrap_or(i64::MAX);
    let bad = || {
        cx.err(
            codes::INVALID_PERMUTATION,
            format!(
                "perm {given:?} is not a permutation of 0..{rank} (the axes of `{xn}` {})",
                fmt_shape(&x.shape)
            ),
            format!("list every axis 0..{rank} exactly once"),
        )
        .with("perm", format!("{given:?}"))
        .with("rank", rank)
    };
    if given.len() != rank {
        return Err(bad());
    }
    let mut perm = Vec::with_capacity(rank);
    let mut seen = vec![false; rank];
    for p in given {
        let a = if *p < 0 { p.saturating_add(r) } else { *p };
        let Some(slot) = usize::try_from(a).ok().and_then(|a| seen.get_mut(a)) else {
            return Err(bad());
        };
        if *slot {
            return Err(bad());
        }
        *slot = true;
        perm.push(a as usize);
    }
    let shape = perm
        .iter()
        .filter_map(|p| x.shape.get(*p).cloned())
        .collect();
    Ok((Op::Permute { perm }, out(x, shape)))
}

/// `Expand`: size-1 axes broadcast (right-aligned), new leading axes allowed, `-1` keeps an axis.
pub(super) fn expand(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, 1, "X")?;
    let (xn, x) = cx.t(0)?;
    let specs = cx.node.attrs.dims("shape").unwrap_or(&[]);
    let bad = |why: String| {
        cx.err(
            codes::INVALID_EXPAND,
            why,
            "only size-1 axes may grow; new axes go in front; -1 keeps an existing axis",
        )
        .with("from", fmt_shape(&x.shape))
        .with("to", fmt_specs(specs))
    };
    let (r, t) = (x.shape.len(), specs.len());
    if t < r {
        return Err(bad(format!(
            "Expand of `{xn}` {} to {} would drop axes",
            fmt_shape(&x.shape),
            fmt_specs(specs)
        )));
    }
    let mut shape = Vec::with_capacity(t);
    for (i, s) in specs.iter().enumerate() {
        let src = (i + r).checked_sub(t).and_then(|j| x.shape.get(j));
        let d = match (spec_dim(s), src) {
            (None, Some(sd)) => sd.clone(),
            (None, None) => {
                return Err(bad(format!(
                    "Expand target {}: -1 at new leading axis {i} has no size to keep",
                    fmt_specs(specs)
                )))
            }
            (Some(d), Some(sd)) if *sd != d && !sd.is_int(1) => {
                return Err(bad(format!(
                    "Expand of `{xn}` {} to {}: axis {i} has size {sd}, which is not 1 and differs from {d}",
                    fmt_shape(&x.shape),
                    fmt_specs(specs)
                )))
            }
            (Some(d), _) => d,
        };
        shape.push(d);
    }
    Ok((
        Op::Expand {
            shape: shape.clone(),
        },
        out(x, shape),
    ))
}

/// `Pad`: `[lo, hi]` per axis, negative entries crop.
pub(super) fn pad(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, 1, "X")?;
    let (xn, x) = cx.t(0)?;
    let pads = match cx.node.attrs.pad("pad") {
        Some(PadSpec::Pairs(p)) => p.clone(),
        _ => Vec::new(),
    };
    if pads.len() != x.shape.len() {
        return Err(invalid(
            cx,
            format!(
                "`pad` has {} [lo, hi] pairs but `{xn}` has rank {}",
                pads.len(),
                x.shape.len()
            ),
            "give one [lo, hi] pair per axis ([0, 0] for axes left alone)",
        ));
    }
    let mut shape = Vec::with_capacity(pads.len());
    for (i, (d, (lo, hi))) in x.shape.iter().zip(&pads).enumerate() {
        let o = d.add_int(*lo).add_int(*hi);
        if o.as_int().is_some_and(|v| v < 0) {
            return Err(cx
                .err(
                    codes::AXIS_SIZE_MISMATCH,
                    format!("Pad crops axis {i} of size {d} by more than its size ([{lo}, {hi}])"),
                    "crop at most the axis' size",
                )
                .with("axis", i)
                .with("size", d));
        }
        shape.push(o);
    }
    let value = cx.node.attrs.num_or("value", 0.0);
    Ok((Op::Pad { pad: pads, value }, out(x, shape)))
}

/// numpy clamping of a slice bound (step > 0): negative counts from the end, then `[0, dim]`.
fn clamp_bound(v: i64, dim: &Dim) -> Dim {
    if let Some(d) = dim.as_int() {
        let b = if v < 0 { v.saturating_add(d) } else { v };
        return Dim::int(b.clamp(0, d));
    }
    if v == i64::MAX {
        // Every axis size is at most i64::MAX.
        return dim.clone();
    }
    if v <= -i64::MAX {
        return Dim::int(0);
    }
    if v == 0 {
        return Dim::int(0);
    }
    if v > 0 {
        Dim::int(v).min_of(dim)
    } else {
        dim.add_int(v).max_of(&Dim::int(0))
    }
}

/// `Slice`, resolved per input axis.
pub(super) fn slice(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, 1, "X")?;
    let (xn, x) = cx.t(0)?;
    let a = &cx.node.attrs;
    let (starts, _) = a.ints("starts").unwrap_or((&[], false));
    let (ends, _) = a.ints("ends").unwrap_or((&[], false));
    let n = starts.len();
    let rank = x.shape.len();
    if ends.len() != n {
        return Err(invalid(
            cx,
            format!("`starts` has {n} entries but `ends` has {}", ends.len()),
            "give one start and one end per sliced axis",
        ));
    }
    let axes: Vec<i64> = match a.ints("axes") {
        Some((v, _)) => v.to_vec(),
        None => (0..n as i64).collect(),
    };
    let steps: Vec<i64> = match a.ints("steps") {
        Some((v, _)) => v.to_vec(),
        None => vec![1; n],
    };
    if axes.len() != n || steps.len() != n {
        return Err(invalid(
            cx,
            format!(
                "`starts` has {n} entries but `axes` has {} and `steps` {}",
                axes.len(),
                steps.len()
            ),
            "give `axes` and `steps` one entry per start",
        ));
    }
    if n > rank {
        return Err(cx
            .err(
                codes::AXIS_OUT_OF_RANGE,
                format!("Slice lists {n} axes but `{xn}` has rank {rank}"),
                "give at most one start/end per axis",
            )
            .with("rank", rank));
    }
    let mut r_starts: Vec<Dim> = vec![Dim::int(0); rank];
    let mut r_ends: Vec<Dim> = x.shape.clone();
    let mut r_steps: Vec<i64> = vec![1; rank];
    let mut seen = vec![false; rank];
    let mut shape = x.shape.clone();
    for i in 0..n {
        let ax = cx.axis(axes[i], rank, "axis")?;
        if std::mem::replace(&mut seen[ax], true) {
            return Err(invalid(
                cx,
                format!("axis {ax} is sliced twice"),
                "list each axis once in `axes`",
            ));
        }
        let step = steps[i];
        if step <= 0 {
            return Err(invalid(
                cx,
                format!("Slice step {step} on axis {ax} must be positive"),
                "use Flip for reversed order, then a positive step",
            ));
        }
        let dim = &x.shape[ax];
        let s = clamp_bound(starts[i], dim);
        let e = clamp_bound(ends[i], dim);
        shape[ax] = s.range_len(&e, dim).ceildiv(step);
        r_starts[ax] = s;
        r_ends[ax] = e;
        r_steps[ax] = step;
    }
    Ok((
        Op::Slice {
            starts: r_starts,
            ends: r_ends,
            steps: r_steps,
        },
        out(x, shape),
    ))
}

/// `Flip` along `axes`.
pub(super) fn flip(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, 1, "X")?;
    let (_, x) = cx.t(0)?;
    let (given, _) = cx.node.attrs.ints("axes").unwrap_or((&[], false));
    let axes = cx.axes(given, x.shape.len(), "axes")?;
    Ok((Op::Flip { axes }, x.clone()))
}

/// `Concat` along `axis`: other axes must agree.
pub(super) fn concat(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, usize::MAX, "X1 … Xn")?;
    let idx: Vec<usize> = (0..cx.ins.len()).collect();
    let dtype = cx.same_dtype(&idx)?;
    let (x0n, x0) = cx.t(0)?;
    let rank = x0.shape.len();
    let axis = cx.axis(cx.node.attrs.int("axis").unwrap_or(0), rank, "axis")?;
    let mut shape = x0.shape.clone();
    for i in 1..cx.ins.len() {
        let (xn, x) = cx.t(i)?;
        if x.shape.len() != rank {
            return Err(cx
                .err(
                    codes::RANK_MISMATCH,
                    format!(
                        "Concat operands `{x0n}` {} and `{xn}` {} have different ranks",
                        fmt_shape(&x0.shape),
                        fmt_shape(&x.shape)
                    ),
                    "Reshape the operands to the same rank",
                )
                .with("lhs_shape", fmt_shape(&x0.shape))
                .with("rhs_shape", fmt_shape(&x.shape)));
        }
        for (j, (a, b)) in x0.shape.iter().zip(&x.shape).enumerate() {
            if j == axis {
                shape[j] = shape[j].add(b);
            } else if a != b {
                return Err(cx
                    .err(
                        codes::AXIS_SIZE_MISMATCH,
                        format!(
                            "Concat along axis {axis}: `{x0n}` {} and `{xn}` {} differ on axis {j}",
                            fmt_shape(&x0.shape),
                            fmt_shape(&x.shape)
                        ),
                        "all axes other than the concatenation axis must be equal",
                    )
                    .with("lhs_shape", fmt_shape(&x0.shape))
                    .with("rhs_shape", fmt_shape(&x.shape)));
            }
        }
    }
    Ok((Op::Concat { axis }, TensorInfo { dtype, shape }))
}

/// `Repeat` (PyTorch `Tensor.repeat`): more entries than the rank prepend axes.
pub(super) fn repeat(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, 1, "X")?;
    let (xn, x) = cx.t(0)?;
    let (repeats, _) = cx.node.attrs.ints("repeats").unwrap_or((&[], false));
    let rank = x.shape.len();
    if repeats.len() < rank {
        return Err(invalid(
            cx,
            format!(
                "`repeats` has {} entries but `{xn}` has rank {rank}",
                repeats.len()
            ),
            "give at least one repeat count per axis (1 leaves an axis alone)",
        ));
    }
    if let Some(r) = repeats.iter().find(|r| **r < 0) {
        return Err(invalid(
            cx,
            format!("repeat count {r} is negative"),
            "use counts >= 0",
        ));
    }
    let lead = repeats.len() - rank;
    let shape = repeats
        .iter()
        .enumerate()
        .map(
            |(i, r)| match i.checked_sub(lead).and_then(|j| x.shape.get(j)) {
                Some(d) => d.mul_int(*r),
                None => Dim::int(*r),
            },
        )
        .collect();
    Ok((
        Op::Repeat {
            repeats: repeats.to_vec(),
        },
        out(x, shape),
    ))
}

/// `Unfold` (PyTorch `Tensor.unfold`): windows of `size` every `step` along `axis`, as a new last
/// axis.
pub(super) fn unfold(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(1, 1, "X")?;
    let (xn, x) = cx.t(0)?;
    let a = &cx.node.attrs;
    let axis = cx.axis(a.int("axis").unwrap_or(0), x.shape.len(), "axis")?;
    let size = a.int("size").unwrap_or(1);
    let step = a.int("step").unwrap_or(1);
    if size < 1 || step < 1 {
        return Err(invalid(
            cx,
            format!("Unfold `size` ({size}) and `step` ({step}) must be >= 1"),
            "use a positive window size and step",
        ));
    }
    let dim = &x.shape[axis];
    if dim.as_int().is_some_and(|d| d < size) {
        return Err(cx
            .err(
                codes::AXIS_SIZE_MISMATCH,
                format!("Unfold window size {size} exceeds axis {axis} of `{xn}` (size {dim})"),
                "use a window no larger than the axis",
            )
            .with("size", dim));
    }
    let mut shape = x.shape.clone();
    shape[axis] = dim.add_int(-size).floordiv(step).add_int(1);
    shape.push(Dim::int(size));
    Ok((Op::Unfold { axis, size, step }, out(x, shape)))
}

/// `Gather` (PyTorch `torch.gather`): Y has the index's shape.
pub(super) fn gather(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    cx.count(2, 2, "X, index")?;
    let (xn, x) = cx.t(0)?;
    let (iname, ix) = cx.t(1)?;
    if ix.dtype != DType::I32 {
        return Err(cx
            .err(
                codes::DTYPE_MISMATCH,
                format!("Gather index `{iname}` must be i32, found {}", ix.dtype),
                format!("Cast `{iname}` to i32"),
            )
            .with("index_dtype", ix.dtype));
    }
    if ix.shape.len() != x.shape.len() {
        return Err(cx
            .err(
                codes::RANK_MISMATCH,
                format!(
                    "Gather index `{iname}` {} must have the rank of `{xn}` {}",
                    fmt_shape(&ix.shape),
                    fmt_shape(&x.shape)
                ),
                "Reshape or Expand the index to the input's rank",
            )
            .with("lhs_shape", fmt_shape(&x.shape))
            .with("rhs_shape", fmt_shape(&ix.shape)));
    }
    let axis = cx.axis(
        cx.node.attrs.int("axis").unwrap_or(0),
        x.shape.len(),
        "axis",
    )?;
    for (j, (xd, id)) in x.shape.iter().zip(&ix.shape).enumerate() {
        if j == axis {
            continue;
        }
        let diff = xd.sub(id);
        let fits = match diff.as_int() {
            Some(v) => v >= 0,
            None => diff.is_nonneg(),
        };
        if !fits {
            return Err(cx
                .err(
                    codes::AXIS_SIZE_MISMATCH,
                    format!(
                        "Gather index `{iname}` {} is larger than `{xn}` {} on axis {j} (or cannot be shown not to be)",
                        fmt_shape(&ix.shape),
                        fmt_shape(&x.shape)
                    ),
                    "on every axis but `axis`, the index must be no larger than the input",
                )
                .with("lhs_shape", fmt_shape(&x.shape))
                .with("rhs_shape", fmt_shape(&ix.shape)));
        }
    }
    Ok((
        Op::Gather { axis },
        TensorInfo {
            dtype: x.dtype,
            shape: ix.shape.clone(),
        },
    ))
}
