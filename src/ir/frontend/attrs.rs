//! The attribute table of every op (`graph-json.md` § Ops) and the typed, not yet normalized,
//! attribute values the parser produces. Normalization (per-spatial lists, axes) needs the input
//! ranks and happens in inference.

use super::diagnose::{diag, did_you_mean, node_loc};
use super::ops::EwFn;
use crate::diag::codes;
use crate::diag::{Diagnostic, Location};
use crate::ir::dtype::DType;
use serde_json::Value;
use std::collections::BTreeMap;

/// The JSON shape an attribute must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Bool,
    /// Any JSON number.
    Num,
    Int,
    IntList,
    /// One integer or a list of integers.
    IntOrList,
    /// Spatial pad: integer, list of integers, or list of `[lo, hi]` pairs.
    SpatialPad,
    /// List of `[lo, hi]` pairs.
    PadPairs,
    /// List of integers (`-1` allowed) and symbol names.
    DimList,
    DType,
    /// Elementwise function name.
    EwFn,
    /// One of the listed names.
    Enum(&'static [&'static str]),
}

/// One entry of a target shape (`Reshape.shape`, `Expand.shape`).
#[derive(Clone, Debug, PartialEq)]
pub(super) enum DimSpec {
    Int(i64),
    Sym(String),
}

/// A spatial pad as written.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum PadSpec {
    /// Same before and after on every spatial dim.
    All(i64),
    /// Symmetric, one per spatial dim.
    PerDim(Vec<i64>),
    /// `[lo, hi]` per dim.
    Pairs(Vec<(i64, i64)>),
}

/// A typed attribute value.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum AttrVal {
    Bool(bool),
    Num(f64),
    Int(i64),
    /// From `IntList` and `IntOrList`; `scalar` tells whether one integer was written.
    Ints {
        v: Vec<i64>,
        scalar: bool,
    },
    Pad(PadSpec),
    Dims(Vec<DimSpec>),
    DType(DType),
    EwFn(EwFn),
    Name(&'static str),
}

const REDUCE_FNS: &[&str] = &["sum", "max", "min", "mean", "prod"];
const CUM_FNS: &[&str] = &["sum", "prod", "max", "min"];
const POOL_MODES: &[&str] = &["max", "avg"];

/// `(name, kind, required)` for every attribute of `op`; `None` for an unknown op.
pub(super) fn specs(op: &str) -> Option<&'static [(&'static str, Kind, bool)]> {
    use Kind::*;
    Some(match op {
        "MatMul" => &[("acc_dtype", DType, false)],
        "GEMM" => &[
            ("trans_a", Bool, false),
            ("trans_b", Bool, false),
            ("alpha", Num, false),
            ("beta", Num, false),
            ("acc_dtype", DType, false),
        ],
        "Conv" => &[
            ("stride", IntOrList, false),
            ("pad", SpatialPad, false),
            ("dilation", IntOrList, false),
            ("groups", Int, false),
            ("acc_dtype", DType, false),
        ],
        "ConvTranspose" => &[
            ("stride", IntOrList, false),
            ("pad", SpatialPad, false),
            ("output_padding", IntOrList, false),
            ("dilation", IntOrList, false),
            ("groups", Int, false),
            ("acc_dtype", DType, false),
        ],
        "Pool" => &[
            ("mode", Enum(POOL_MODES), true),
            ("kernel", IntOrList, true),
            ("stride", IntOrList, false),
            ("pad", SpatialPad, false),
            ("dilation", IntOrList, false),
            ("count_include_pad", Bool, false),
        ],
        "Attention" => &[
            ("causal", Bool, false),
            ("scale", Num, false),
            ("acc_dtype", DType, false),
        ],
        "Softmax" => &[("axis", Int, false), ("acc_dtype", DType, false)],
        "LayerNorm" => &[
            ("axis", Int, false),
            ("eps", Num, false),
            ("acc_dtype", DType, false),
        ],
        "RMSNorm" => &[
            ("axis", Int, false),
            ("eps", Num, false),
            ("acc_dtype", DType, false),
        ],
        "Elementwise" => &[("fn", EwFn, true)],
        "Reduce" => &[
            ("fn", Enum(REDUCE_FNS), true),
            ("axes", IntOrList, true),
            ("keepdim", Bool, false),
            ("acc_dtype", DType, false),
        ],
        "Cumulative" => &[
            ("fn", Enum(CUM_FNS), true),
            ("axis", Int, false),
            ("reverse", Bool, false),
            ("exclusive", Bool, false),
        ],
        "Cast" => &[("to", DType, true)],
        "Reshape" => &[("shape", DimList, true)],
        "Permute" => &[("perm", IntList, true)],
        "Expand" => &[("shape", DimList, true)],
        "Pad" => &[("pad", PadPairs, true), ("value", Num, false)],
        "Slice" => &[
            ("starts", IntList, true),
            ("ends", IntList, true),
            ("axes", IntList, false),
            ("steps", IntList, false),
        ],
        "Flip" => &[("axes", IntOrList, true)],
        "Concat" => &[("axis", Int, true)],
        "Repeat" => &[("repeats", IntList, true)],
        "Unfold" => &[
            ("axis", Int, true),
            ("size", Int, true),
            ("step", Int, true),
        ],
        "Gather" => &[("axis", Int, true)],
        _ => return None,
    })
}

/// Parsed attributes of one node, by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Attrs(pub BTreeMap<&'static str, AttrVal>);

/// A valid symbol name: `[A-Za-z_][A-Za-z0-9_']*`.
pub(super) fn is_symbol_name(s: &str) -> bool {
    let mut it = s.chars();
    match it.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    it.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '\'')
}

/// Common misspellings of dtype names.
pub(super) fn dtype_alias(s: &str) -> Option<DType> {
    match s.to_ascii_lowercase().as_str() {
        "float16" | "half" | "f16" | "fp16" => Some(DType::F16),
        "bfloat16" | "bf16" => Some(DType::BF16),
        "float32" | "float" | "f32" | "fp32" => Some(DType::F32),
        "int32" | "int" | "i32" => Some(DType::I32),
        "boolean" | "bool" | "b1" => Some(DType::Bool),
        _ => None,
    }
}

/// The diagnostic for an unknown dtype name at `at`.
pub(super) fn unknown_dtype(name: &str, at: Location, what: &str) -> Diagnostic {
    let names = DType::ALL.map(|d| d.name());
    let sugg = match dtype_alias(name) {
        Some(d) => format!("did you mean `{}`?", d.name()),
        None => did_you_mean(name, names.iter().copied(), "dtypes"),
    };
    diag(
        codes::UNKNOWN_DTYPE,
        at,
        format!("{what}: `{name}` is not a dtype (fp16, bf16, fp32, i32, bool)"),
        sugg,
    )
}

fn int_of(v: &Value) -> Option<i64> {
    v.as_i64()
}

fn ints_of(v: &Value) -> Option<Vec<i64>> {
    v.as_array()?.iter().map(int_of).collect()
}

fn pair_of(v: &Value) -> Option<(i64, i64)> {
    match v.as_array()?.as_slice() {
        [a, b] => Some((int_of(a)?, int_of(b)?)),
        _ => None,
    }
}

fn kind_text(k: Kind) -> &'static str {
    match k {
        Kind::Bool => "a boolean",
        Kind::Num => "a number",
        Kind::Int => "an integer",
        Kind::IntList => "a list of integers",
        Kind::IntOrList => "an integer or a list of integers",
        Kind::SpatialPad => {
            "an integer, a list of integers (one per spatial dim) or a list of [lo, hi] pairs"
        }
        Kind::PadPairs => "a list of [lo, hi] integer pairs, one per dim",
        Kind::DimList => "a list of integers (-1 allowed) and symbol names",
        Kind::DType => "a dtype name",
        Kind::EwFn => "an elementwise function name",
        Kind::Enum(_) => "a name",
    }
}

/// Parses one attribute value of the given kind. The error is already located at the node.
pub(super) fn parse_value(
    node: &str,
    op: &str,
    name: &str,
    kind: Kind,
    v: &Value,
) -> Result<AttrVal, Diagnostic> {
    let at = || node_loc(node, op);
    let bad = || {
        diag(
            codes::INVALID_FIELD,
            at(),
            format!(
                "attribute `{name}` of {op} must be {}, found {v}",
                kind_text(kind)
            ),
            format!("write `{name}` as {}", kind_text(kind)),
        )
    };
    let out = match kind {
        Kind::Bool => AttrVal::Bool(v.as_bool().ok_or_else(bad)?),
        Kind::Num => AttrVal::Num(v.as_f64().filter(|x| x.is_finite()).ok_or_else(bad)?),
        Kind::Int => AttrVal::Int(int_of(v).ok_or_else(bad)?),
        Kind::IntList => AttrVal::Ints {
            v: ints_of(v).ok_or_else(bad)?,
            scalar: false,
        },
        Kind::IntOrList => match int_of(v) {
            Some(i) => AttrVal::Ints {
                v: vec![i],
                scalar: true,
            },
            None => AttrVal::Ints {
                v: ints_of(v).ok_or_else(bad)?,
                scalar: false,
            },
        },
        Kind::SpatialPad => {
            if let Some(i) = int_of(v) {
                AttrVal::Pad(PadSpec::All(i))
            } else if let Some(l) = ints_of(v) {
                AttrVal::Pad(PadSpec::PerDim(l))
            } else {
                let arr = v.as_array().ok_or_else(bad)?;
                let pairs: Option<Vec<(i64, i64)>> = arr.iter().map(pair_of).collect();
                AttrVal::Pad(PadSpec::Pairs(pairs.ok_or_else(bad)?))
            }
        }
        Kind::PadPairs => {
            let arr = v.as_array().ok_or_else(bad)?;
            let pairs: Option<Vec<(i64, i64)>> = arr.iter().map(pair_of).collect();
            AttrVal::Pad(PadSpec::Pairs(pairs.ok_or_else(bad)?))
        }
        Kind::DimList => {
            let arr = v.as_array().ok_or_else(bad)?;
            let mut out = Vec::with_capacity(arr.len());
            for e in arr {
                if let Some(i) = int_of(e) {
                    if i < -1 {
                        return Err(bad());
                    }
                    out.push(DimSpec::Int(i));
                } else if let Some(s) = e.as_str().filter(|s| is_symbol_name(s)) {
                    out.push(DimSpec::Sym(s.to_string()));
                } else {
                    return Err(bad());
                }
            }
            AttrVal::Dims(out)
        }
        Kind::DType => {
            let s = v.as_str().ok_or_else(bad)?;
            match DType::parse(s) {
                Some(d) => AttrVal::DType(d),
                None => {
                    return Err(unknown_dtype(
                        s,
                        at(),
                        &format!("attribute `{name}` of node `{node}`"),
                    ))
                }
            }
        }
        Kind::EwFn => {
            let s = v.as_str().ok_or_else(bad)?;
            match EwFn::parse(s) {
                Some(f) => AttrVal::EwFn(f),
                None => {
                    let names = EwFn::ALL.map(|(_, n)| n);
                    return Err(diag(
                        codes::INVALID_FIELD,
                        at(),
                        format!("`{s}` is not an elementwise function"),
                        did_you_mean(s, names.iter().copied(), "functions"),
                    ));
                }
            }
        }
        Kind::Enum(names) => {
            let s = v.as_str().ok_or_else(bad)?;

            match names.iter().find(|n| **n == s) {
                Some(n) => AttrVal::Name(n),
                None => {
                    return Err(diag(
                        codes::INVALID_FIELD,
                        at(),
                        format!("`{s}` is not a valid `{name}` of {op}"),
                        did_you_mean(s, names.iter().copied(), "values"),
                    ))
                }
            }
        }
    };
    // Slice bounds are clamped to the axis, so any i64 is fine there (`i64::MAX` means "to the
    // end"); elsewhere integers enter size arithmetic and must stay far from i64's limits.
    let clamped = op == "Slice" && (name == "starts" || name == "ends");
    if !clamped && !ints_in_range(&out) {
        return Err(diag(
            codes::INVALID_FIELD,
            at(),
            format!("attribute `{name}` of {op} holds an integer beyond ±2^53: {v}"),
            "use sizes, strides and pads of a realistic magnitude",
        ));
    }
    Ok(out)
}

/// Largest magnitude of an integer attribute (other than Slice bounds).
const MAX_ATTR_INT: i64 = 1 << 53;

fn ints_in_range(v: &AttrVal) -> bool {
    let ok = |x: &i64| x.unsigned_abs() <= MAX_ATTR_INT as u64;
    match v {
        AttrVal::Int(x) => ok(x),
        AttrVal::Ints { v, .. } => v.iter().all(ok),
        AttrVal::Pad(PadSpec::All(x)) => ok(x),
        AttrVal::Pad(PadSpec::PerDim(v)) => v.iter().all(ok),
        AttrVal::Pad(PadSpec::Pairs(v)) => v.iter().all(|(a, b)| ok(a) && ok(b)),
        AttrVal::Dims(d) => d.iter().all(|s| match s {
            DimSpec::Int(x) => ok(x),
            DimSpec::Sym(_) => true,
        }),
        _ => true,
    }
}

/// Parses a node's `attrs` object against the op's table: every unknown attribute and every bad
/// value is reported, then missing required attributes.
pub(super) fn parse_attrs(
    node: &str,
    op: &str,
    obj: &serde_json::Map<String, Value>,
    errs: &mut Vec<Diagnostic>,
) -> Attrs {
    let Some(table) = specs(op) else {
        return Attrs::default();
    };
    let mut out = Attrs::default();
    let mut bad_value = false;
    for (k, v) in obj {
        match table.iter().find(|(n, _, _)| n == k) {
            None => {
                let names = table.iter().map(|(n, _, _)| *n);
                errs.push(
                    diag(
                        codes::UNKNOWN_ATTRIBUTE,
                        node_loc(node, op),
                        format!("{op} has no attribute `{k}`"),
                        did_you_mean(k, names, "attributes"),
                    )
                    .with("attribute", k),
                );
            }
            Some((n, kind, _)) => match parse_value(node, op, n, *kind, v) {
                Ok(val) => {
                    out.0.insert(n, val);
                }
                Err(d) => {
                    bad_value = true;
                    errs.push(d);
                }
            },
        }
    }
    if !bad_value {
        for (n, _, required) in table {
            if *required && !obj.contains_key(*n) {
                errs.push(diag(
                    codes::INVALID_FIELD,
                    node_loc(node, op),
                    format!("{op} needs the attribute `{n}`"),
                    format!("add `\"{n}\"` to the node's attrs"),
                ));
            }
        }
    }
    out
}

impl Attrs {
    pub(super) fn get(&self, name: &str) -> Option<&AttrVal> {
        self.0.get(name)
    }

    pub(super) fn bool_or(&self, name: &str, default: bool) -> bool {
        match self.get(name) {
            Some(AttrVal::Bool(b)) => *b,
            _ => default,
        }
    }

    pub(super) fn num_or(&self, name: &str, default: f64) -> f64 {
        match self.get(name) {
            Some(AttrVal::Num(x)) => *x,
            _ => default,
        }
    }

    pub(super) fn num(&self, name: &str) -> Option<f64> {
        match self.get(name) {
            Some(AttrVal::Num(x)) => Some(*x),
            _ => None,
        }
    }

    pub(super) fn int(&self, name: &str) -> Option<i64> {
        match self.get(name) {
            Some(AttrVal::Int(x)) => Some(*x),
            _ => None,
        }
    }

    /// Integer list (an `IntOrList` written as one integer gives a one-element list).
    pub(super) fn ints(&self, name: &str) -> Option<(&[i64], bool)> {
        match self.get(name) {
            Some(AttrVal::Ints { v, scalar }) => Some((v.as_slice(), *scalar)),
            _ => None,
        }
    }

    pub(super) fn dtype(&self, name: &str) -> Option<DType> {
        match self.get(name) {
            Some(AttrVal::DType(d)) => Some(*d),
            _ => None,
        }
    }

    pub(super) fn name(&self, name: &str) -> Option<&'static str> {
        match self.get(name) {
            Some(AttrVal::Name(n)) => Some(n),
            _ => None,
        }
    }

    pub(super) fn ew_fn(&self) -> Option<EwFn> {
        match self.get("fn") {
            Some(AttrVal::EwFn(f)) => Some(*f),
            _ => None,
        }
    }

    pub(super) fn pad(&self, name: &str) -> Option<&PadSpec> {
        match self.get(name) {
            Some(AttrVal::Pad(p)) => Some(p),
            _ => None,
        }
    }

    pub(super) fn dims(&self, name: &str) -> Option<&[DimSpec]> {
        match self.get(name) {
            Some(AttrVal::Dims(d)) => Some(d),
            _ => None,
        }
    }
}
