//! ONNX ops that graph.json has no single node for, imported as small subgraphs of existing
//! nodes: `Erf` (a rational-exponential approximation), `Einsum` (permute, reduce, reshape and a
//! batched `MatMul`) and nearest `Resize` by integer factors (reshape + expand).

use super::fold::{attr_i, attr_ints, attr_s};
use super::import::{invalid, unsupported, Importer, NResult, NodeError, Opnd};
use super::ops::reshape_to;
use super::proto::NodeProto;
use super::value::TInfo;
use crate::ir::dim::Dim;
use serde_json::json;

/// Coefficients of Abramowitz & Stegun 7.1.26: `erf(a) ≈ 1 − t·(a1 + t·(a2 + …))·exp(−a²)` with
/// `t = 1 / (1 + p·a)` for `a ≥ 0`; absolute error at most 1.5e-7.
const ERF_P: f64 = 0.327_591_1;
const ERF_A: [f64; 5] = [
    0.254_829_592,
    -0.284_496_736,
    1.421_413_741,
    -1.453_152_027,
    1.061_405_429,
];

/// `Erf` outside the GELU pattern: Abramowitz & Stegun 7.1.26 on `|x|`, sign restored with
/// `where` (absolute error ≤ 1.5e-7 plus f32 rounding). TODO(issue 17): a native `erf` function
/// in graph.json (evaluator, rules, code generation) would make this exact.
pub(super) fn erf(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    let x = imp.tensor(&node.input[0])?;
    if !x.dtype.is_float() {
        return Err(unsupported("Erf of a non-float tensor"));
    }
    let t = |v: TInfo| Opnd::T(v);
    let a = imp.ew(node, "abs", &[t(x.clone())], out)?;
    let pa = imp.ew(node, "mul", &[t(a.clone()), Opnd::S(ERF_P)], out)?;
    let den = imp.ew(node, "add", &[t(pa), Opnd::S(1.0)], out)?;
    let tt = imp.ew(node, "recip", &[t(den)], out)?;
    // Horner: poly = t·(a1 + t·(a2 + t·(a3 + t·(a4 + t·a5))))
    let mut poly = imp.ew(node, "mul", &[t(tt.clone()), Opnd::S(ERF_A[4])], out)?;
    for c in ERF_A[..4].iter().rev() {
        let s = imp.ew(node, "add", &[t(poly), Opnd::S(*c)], out)?;
        poly = imp.ew(node, "mul", &[t(s), t(tt.clone())], out)?;
    }
    let sq = imp.ew(node, "mul", &[t(a.clone()), t(a)], out)?;
    let nsq = imp.ew(node, "neg", &[t(sq)], out)?;
    let e = imp.ew(node, "exp", &[t(nsq)], out)?;
    let pe = imp.ew(node, "mul", &[t(poly), t(e)], out)?;
    let y = imp.ew(node, "sub", &[Opnd::S(1.0), t(pe)], out)?;
    let neg = imp.ew(node, "lt", &[t(x), Opnd::S(0.0)], out)?;
    let ny = imp.ew(node, "neg", &[t(y.clone())], out)?;
    imp.ew(node, "where", &[t(neg), t(ny), t(y)], out)
}

/// A parsed `Einsum` equation: the labels of each operand and of the output.
#[derive(Debug, PartialEq)]
struct Equation {
    inputs: Vec<Vec<char>>,
    output: Vec<char>,
}

/// Parses an equation without ellipses or repeated labels within one term; an implicit output
/// is the labels that occur once, in alphabetical order.
fn parse_equation(eq: &str) -> Result<Equation, String> {
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    if eq.contains('.') {
        return Err("Einsum with an ellipsis".into());
    }
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let inputs: Vec<Vec<char>> = lhs.split(',').map(|s| s.chars().collect()).collect();
    let mut all: Vec<char> = inputs.iter().flatten().copied().collect();
    let output: Vec<char> = match rhs {
        Some(r) => r.chars().collect(),
        None => {
            let mut once: Vec<char> = all
                .iter()
                .copied()
                .filter(|c| all.iter().filter(|d| *d == c).count() == 1)
                .collect();
            once.sort_unstable();
            once
        }
    };
    for term in inputs.iter().chain([&output]) {
        if term.iter().any(|c| !c.is_ascii_alphabetic()) {
            return Err(format!("Einsum label that is not a letter in `{eq}`"));
        }
        let mut seen = term.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != term.len() {
            return Err("Einsum with a repeated label in one term (a diagonal)".into());
        }
    }
    all.sort_unstable();
    if output.iter().any(|c| all.binary_search(c).is_err()) {
        return Err(format!("Einsum output label not in any input in `{eq}`"));
    }
    Ok(Equation { inputs, output })
}

/// Sums `x` (labels `labels`) over the labels not in `keep`; returns the tensor and its labels.
fn sum_out(
    imp: &mut Importer<'_>,
    x: TInfo,
    labels: &[char],
    keep: &dyn Fn(char) -> bool,
    out: &str,
) -> (TInfo, Vec<char>) {
    let axes: Vec<usize> = (0..labels.len()).filter(|i| !keep(labels[*i])).collect();
    if axes.is_empty() {
        return (x, labels.to_vec());
    }
    let kept: Vec<char> = labels.iter().copied().filter(|c| keep(*c)).collect();
    let shape: Vec<Dim> = (0..labels.len())
        .filter(|i| !axes.contains(i))
        .map(|i| x.shape[i].clone())
        .collect();
    let attrs = json!({"fn": "sum", "axes": axes, "keepdim": false});
    let t = imp.emit("Reduce", vec![json!(x.name)], attrs, out, x.dtype, shape);
    (t, kept)
}

/// Permutes `x` (labels `from`) into the label order `to` (a permutation of `from`).
fn permute_to(imp: &mut Importer<'_>, x: TInfo, from: &[char], to: &[char], out: &str) -> TInfo {
    let perm: Vec<usize> = to
        .iter()
        .map(|c| from.iter().position(|d| d == c).unwrap_or(0))
        .collect();
    if perm.iter().enumerate().all(|(i, p)| i == *p) {
        return x;
    }
    let shape = perm.iter().map(|p| x.shape[*p].clone()).collect();
    imp.emit(
        "Permute",
        vec![json!(x.name)],
        json!({"perm": perm}),
        out,
        x.dtype,
        shape,
    )
}

/// `Einsum` of one or two operands: labels in one operand only and not in the output are summed
/// first; two operands become a batched `MatMul` over (shared output labels) × (left-only) ×
/// (contracted) and (contracted) × (right-only), reshaped and permuted to the output.
pub(super) fn einsum(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    let eq = attr_s(node, "equation").ok_or_else(|| invalid(node, "Einsum without equation"))?;
    let eq = parse_equation(&eq).map_err(unsupported)?;
    if eq.inputs.len() != node.input.len() || !(1..=2).contains(&eq.inputs.len()) {
        return Err(unsupported("Einsum of more than two operands"));
    }
    let mut xs = Vec::new();
    for (name, labels) in node.input.iter().zip(&eq.inputs) {
        let x = imp.tensor(name)?;
        if x.shape.len() != labels.len() {
            return Err(invalid(
                node,
                format!(
                    "Einsum term of {} labels for rank {}",
                    labels.len(),
                    x.shape.len()
                ),
            ));
        }
        xs.push(x);
    }
    let o = eq.output.clone();
    if xs.len() == 1 {
        let x = xs.remove(0);
        let (x, labels) = sum_out(imp, x, &eq.inputs[0], &|c| o.contains(&c), out);
        return Ok(permute_to(imp, x, &labels, &o, out));
    }
    let (la, lb) = (eq.inputs[0].clone(), eq.inputs[1].clone());
    let (b, a) = (xs.remove(1), xs.remove(0));
    let (a, la2) = sum_out(imp, a, &la, &|c| o.contains(&c) || lb.contains(&c), out);
    let (b, lb2) = sum_out(imp, b, &lb, &|c| o.contains(&c) || la.contains(&c), out);
    einsum2(imp, node, (a, la2), (b, lb2), &o, out)
}

fn cat(parts: &[&[char]]) -> Vec<char> {
    parts.concat()
}

/// The contraction of two operands whose every label is in the output or in the other operand.
fn einsum2(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    (a, la): (TInfo, Vec<char>),
    (b, lb): (TInfo, Vec<char>),
    o: &[char],
    out: &str,
) -> NResult<TInfo> {
    let mut size: std::collections::BTreeMap<char, Dim> = std::collections::BTreeMap::new();
    for (x, l) in [(&b, &lb), (&a, &la)] {
        for (c, d) in l.iter().zip(&x.shape) {
            if size.insert(*c, d.clone()).is_some_and(|prev| prev != *d) {
                return Err(unsupported(format!(
                    "Einsum label `{c}` with different sizes (broadcast)"
                )));
            }
        }
    }
    let pick = |from: &[char], f: &dyn Fn(char) -> bool| -> Vec<char> {
        from.iter().copied().filter(|c| f(*c)).collect()
    };
    let batch = pick(o, &|c| la.contains(&c) && lb.contains(&c));
    let left = pick(&la, &|c| !lb.contains(&c));
    let right = pick(&lb, &|c| !la.contains(&c));
    let contr = pick(&la, &|c| lb.contains(&c) && !o.contains(&c));
    let dims = |cs: &[char]| -> Vec<Dim> { cs.iter().map(|c| size[c].clone()).collect() };
    let prod = |cs: &[char]| Dim::product(dims(cs).iter());
    let (m, k, n) = (prod(&left), prod(&contr), prod(&right));
    let a = permute_to(imp, a, &la, &cat(&[&batch, &left, &contr]), out);
    let b = permute_to(imp, b, &lb, &cat(&[&batch, &contr, &right]), out);
    let with = |tail: &[Dim]| -> Vec<Dim> { [dims(&batch).as_slice(), tail].concat() };
    let a = reshape_to(imp, node, &a, with(&[m.clone(), k.clone()]), out)?;
    let b = reshape_to(imp, node, &b, with(&[k, n.clone()]), out)?;
    let mm = imp.emit(
        "MatMul",
        vec![json!(a.name), json!(b.name)],
        json!({}),
        out,
        a.dtype,
        with(&[m, n]),
    );
    let labels = cat(&[&batch, &left, &right]);
    let r = reshape_to(imp, node, &mm, dims(&labels), out)?;
    Ok(permute_to(imp, r, &labels, o, out))
}

/// Nearest `Resize` by integer factors ≥ 1 (constant `scales` or `sizes`): each scaled axis `d`
/// becomes `d × 1`, expanded to `d × k` and merged. Exact for `asymmetric` + `floor` (torch's
/// `Upsample(mode="nearest")`) and for `half_pixel`/`pytorch_half_pixel` + `round_prefer_floor`/
/// `round_prefer_ceil` (ONNX's defaults), where source index = ⌊i / k⌋.
pub(super) fn resize(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    let x = imp.tensor(&node.input[0])?;
    let r = x.shape.len();
    let mode = attr_s(node, "mode").unwrap_or_else(|| "nearest".into());
    let ctm = attr_s(node, "coordinate_transformation_mode").unwrap_or_else(|| "half_pixel".into());
    let nm = attr_s(node, "nearest_mode").unwrap_or_else(|| "round_prefer_floor".into());
    let exact = match ctm.as_str() {
        "asymmetric" => nm == "floor",
        "half_pixel" | "pytorch_half_pixel" => nm.starts_with("round_prefer_"),
        _ => false,
    };
    // Integer-factor nearest upsampling as reshape + expand; everything else by index tables.
    if mode != "nearest"
        || !exact
        || attr_i(node, "antialias").unwrap_or(0) != 0
        || attr_s(node, "keep_aspect_ratio_policy").is_some_and(|p| p != "stretch")
    {
        return super::resize::resize_general(imp, node, &x, out);
    }
    let axes: Vec<usize> = match attr_ints(node, "axes") {
        Some(a) => a
            .iter()
            .map(|v| super::fold::norm_axis(node, *v, r))
            .collect::<NResult<_>>()?,
        None => (0..r).collect(),
    };
    let factors = match resize_factors(imp, node, &x, &axes) {
        Err(NodeError::Unsupported(why)) if why.contains("positive integer") => {
            return super::resize::resize_general(imp, node, &x, out)
        }
        r => r?,
    };
    let mut split: Vec<Dim> = Vec::new();
    let mut expanded: Vec<Dim> = Vec::new();
    let mut merged: Vec<Dim> = Vec::new();
    for (d, k) in x.shape.iter().zip(&factors) {
        split.push(d.clone());
        expanded.push(d.clone());
        if *k > 1 {
            split.push(Dim::int(1));
            expanded.push(Dim::int(*k));
        }
        merged.push(d.mul_int(*k));
    }
    let s = reshape_to(imp, node, &x, split, out)?;
    let attr = super::ops::dims_attr(node, &expanded, false)?;
    let e = imp.emit(
        "Expand",
        vec![json!(s.name)],
        json!({"shape": attr}),
        out,
        x.dtype,
        expanded,
    );
    reshape_to(imp, node, &e, merged, out)
}

/// The integer upscaling factor of every axis from Resize's constant `scales` or `sizes`.
fn resize_factors(
    imp: &Importer<'_>,
    node: &NodeProto,
    x: &TInfo,
    axes: &[usize],
) -> NResult<Vec<i64>> {
    let input = |i: usize| node.input.get(i).filter(|s| !s.is_empty());
    let mut factors = vec![1i64; x.shape.len()];
    let not_int = || unsupported("Resize by a factor that is not a positive integer");
    if let Some(sc) = input(2) {
        let c = imp
            .konst(sc)?
            .ok_or_else(|| unsupported("Resize scales that are not constants"))?;
        if c.numel() != axes.len() {
            return Err(invalid(node, "Resize scales do not match the axes"));
        }
        for (a, s) in axes.iter().zip(&c.data) {
            if s.fract() != 0.0 || *s < 1.0 {
                return Err(not_int());
            }
            factors[*a] = *s as i64;
        }
    } else if let Some(sz) = input(3) {
        let c = imp
            .konst(sz)?
            .ok_or_else(|| unsupported("Resize sizes that are not constants"))?;
        if c.numel() != axes.len() {
            return Err(invalid(node, "Resize sizes do not match the axes"));
        }
        for (a, s) in axes.iter().zip(c.ints()) {
            let d = x.shape[*a].as_int().ok_or_else(not_int)?;
            if d == 0 || s % d != 0 || s < d {
                return Err(not_int());
            }
            factors[*a] = s / d;
        }
    } else {
        return Err(invalid(node, "Resize without scales or sizes"));
    }
    Ok(factors)
}

/// Integer `Mod` through truncating division: `r = a - b·(a/b)` has the dividend's sign (fmod =
/// 1); fmod = 0 takes the divisor's sign, `r + b` where `r ≠ 0` and the signs of `r` and `b`
/// differ. Float `Mod` is refused: graph.json has no `fmod` (a composition would not be exact).
pub(super) fn modulo(imp: &mut Importer<'_>, node: &NodeProto, out: &str) -> NResult<TInfo> {
    if node.input.len() != 2 {
        return Err(invalid(node, "Mod takes two inputs"));
    }
    let ops = super::ops::operands(imp, node, &node.input)?;
    let dt = ops.iter().find_map(|o| match o {
        Opnd::T(t) => Some(t.dtype),
        Opnd::S(_) => None,
    });
    if dt.is_some_and(|d| d.is_float()) {
        // TODO(issue 17): a native trunc/fmod in graph.json. x − trunc(x/y)·y is inexact (the
        // quotient rounds, q·y needs twice the mantissa bits); the exact binary long division
        // (Sterbenz steps over the exponent range: 277 for float32, 40 for float16) was tried
        // and takes minutes in `optimize`.
        return Err(unsupported(
            "Mod of floating-point tensors (fmod): graph.json has no trunc/fmod, and \
             x - trunc(x/y)*y in floating point is not exact",
        ));
    }
    if dt != Some(crate::ir::dtype::DType::I32) {
        return Err(unsupported("Mod of a tensor that is not float or integer"));
    }
    let q = imp.ew(node, "div", &ops, out)?;
    let bq = imp.ew(node, "mul", &[ops[1].clone(), Opnd::T(q)], out)?;
    let r = imp.ew(node, "sub", &[ops[0].clone(), Opnd::T(bq)], out)?;
    if attr_i(node, "fmod") == Some(1) {
        return Ok(r);
    }
    let rneg = imp.ew(node, "lt", &[Opnd::T(r.clone()), Opnd::S(0.0)], out)?;
    let rpos = imp.ew(node, "gt", &[Opnd::T(r.clone()), Opnd::S(0.0)], out)?;
    let mismatch = match &ops[1] {
        Opnd::S(v) if *v > 0.0 => rneg,
        Opnd::S(_) => rpos,
        Opnd::T(b) => {
            let bpos = imp.ew(node, "gt", &[Opnd::T(b.clone()), Opnd::S(0.0)], out)?;
            let bneg = imp.ew(node, "lt", &[Opnd::T(b.clone()), Opnd::S(0.0)], out)?;
            // r > 0: b < 0; r = 0: false (rpos); r < 0: b > 0.
            let r_pos_b_neg = imp.ew(
                node,
                "where",
                &[Opnd::T(rpos.clone()), Opnd::T(bneg), Opnd::T(rpos)],
                out,
            )?;
            imp.ew(
                node,
                "where",
                &[Opnd::T(rneg), Opnd::T(bpos), Opnd::T(r_pos_b_neg)],
                out,
            )?
        }
    };
    let shifted = imp.ew(node, "add", &[Opnd::T(r.clone()), ops[1].clone()], out)?;
    imp.ew(
        node,
        "where",
        &[Opnd::T(mismatch), Opnd::T(shifted), Opnd::T(r)],
        out,
    )
}

/// Constant `Pad` by a run-time value `v`: `where(inside, padded, v)`, where `inside` is a
/// `[1 | n, ...]` mask of ones padded with zeros on the padded axes (static sizes only), so the
/// input's elements are kept bit for bit and every padding element is exactly `v`.
pub(super) fn pad_runtime_value(
    imp: &mut Importer<'_>,
    node: &NodeProto,
    x: &TInfo,
    pairs: &[(i64, i64)],
    padded: TInfo,
    v: TInfo,
    out: &str,
) -> NResult<TInfo> {
    if v.shape.iter().any(|d| d.as_int() != Some(1)) {
        return Err(invalid(node, "Pad's constant_value is not one element"));
    }
    let mut mshape = Vec::with_capacity(pairs.len());
    let mut pshape = Vec::with_capacity(pairs.len());
    for (d, (lo, hi)) in x.shape.iter().zip(pairs) {
        if (*lo, *hi) == (0, 0) {
            mshape.push(1usize);
            pshape.push(Dim::int(1));
            continue;
        }
        let n = d
            .as_int()
            .ok_or_else(|| unsupported("Pad by a run-time value on a symbolic size"))?;
        mshape.push(n as usize);
        pshape.push(Dim::int(n + lo + hi));
    }
    let ones = super::value::CTensor {
        elem: super::value::et::FLOAT,
        data: vec![1.0; mshape.iter().product()],
        shape: mshape,
    };
    let mname = imp.fresh(&format!("{out}_inside"));
    let m = imp.materialize(&mname, &ones)?;
    let attr: Vec<[i64; 2]> = pairs.iter().map(|(a, b)| [*a, *b]).collect();
    let mp = imp.emit(
        "Pad",
        vec![json!(m.name)],
        json!({"pad": attr, "value": 0.0}),
        out,
        m.dtype,
        pshape,
    );
    let inside = imp.ew(node, "ne", &[Opnd::T(mp), Opnd::S(0.0)], out)?;
    imp.ew(
        node,
        "where",
        &[Opnd::T(inside), Opnd::T(padded), Opnd::T(v)],
        out,
    )
}
