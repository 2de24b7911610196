//! Leaf e-nodes carrying op attributes. Attributes are children (leaves), not payloads of the op
//! node, so `rw!` string patterns stay generic over them — `(reduce ?op ?axes ?acc (mul ?a ?b))`
//! matches every reduction — and conditions/appliers read the values from the analysis.
//!
//! Text forms (used by patterns and by printed terms; none contains spaces or parentheses except
//! symbolic sizes): `@A` tensor name, `fp32` dtype, `0.5` / `-inf` number, `[M,1,K]` shape,
//! `#[0,2,1]` integer list (perm, axes, steps), `pad[0:0,1:1]` pads, `sum` reduce op,
//! `map[i0,2*i2+i4]` affine index map.

use super::kernel::KernelBody;
use crate::ir::axis::AccessMap;
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::num::Num;
use crate::ir::tiny::{AffineIndex, ReduceOp};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// An attribute value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Attr {
    /// A tensor name (INPUT).
    Name(String),
    /// A dtype (CAST target, INPUT dtype, CONST dtype).
    DType(DType),
    /// A scalar: CONST value, PAD value, or an immediate operand of an elementwise op.
    /// Compared by bits: `0.0` and `-0.0` are distinct leaves.
    Num(Num),
    /// A shape, or SHRINK's `lo`/`hi`.
    Shape(Arc<[Dim]>),
    /// Permutation, axes, steps.
    Ints(Vec<i64>),
    /// PAD amounts, `(before, after)` per axis.
    Pads(Vec<(i64, i64)>),
    /// A reduction op (`sum`, `max`, `min`, `prod`).
    Op(ReduceOp),
    /// An affine index map (VIEW).
    Map(Vec<AffineIndex>),
    /// The access map of a `read` node.
    Access(AccessMap),
    /// Placeholder `$i` for a kernel body's `i`-th input.
    Arg(u32),
    /// The body of a `kernel` node.
    Body(KernelBody),
}

impl Attr {
    /// A number leaf.
    pub fn num(v: f64) -> Attr {
        Attr::Num(Num(v))
    }

    /// An integer-list leaf.
    pub fn usizes(v: &[usize]) -> Attr {
        Attr::Ints(v.iter().map(|x| *x as i64).collect())
    }

    /// The integer list as `usize`s (`None` for other attributes or negative entries).
    pub fn as_usizes(&self) -> Option<Vec<usize>> {
        match self {
            Attr::Ints(v) => v.iter().map(|x| usize::try_from(*x).ok()).collect(),
            _ => None,
        }
    }
}

fn reduce_name(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "sum",
        ReduceOp::Max => "max",
        ReduceOp::Min => "min",
        ReduceOp::Prod => "prod",
    }
}

fn join<T: fmt::Display>(v: &[T]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl fmt::Display for Attr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Attr::Name(n) => write!(f, "@{n}"),
            Attr::DType(d) => write!(f, "{d}"),
            Attr::Num(v) => write!(f, "{}", v.0),
            Attr::Shape(s) => write!(f, "[{}]", join(s)),
            Attr::Ints(v) => write!(f, "#[{}]", join(v)),
            Attr::Pads(p) => {
                let parts: Vec<String> = p.iter().map(|(l, h)| format!("{l}:{h}")).collect();
                write!(f, "pad[{}]", parts.join(","))
            }
            Attr::Op(op) => f.write_str(reduce_name(*op)),
            Attr::Map(m) => write!(f, "map[{}]", join(m)),
            Attr::Access(a) => {
                write!(
                    f,
                    "access[{}]{}",
                    join(&a.index),
                    crate::ir::dim::fmt_shape(&a.shape)
                )?;
                if let Some(g) = &a.guard {
                    write!(f, "?{g}:{}", a.fill.0)?;
                }
                Ok(())
            }
            Attr::Arg(i) => write!(f, "${i}"),
            Attr::Body(b) => write!(f, "{{{}}}", b.text()),
        }
    }
}

fn parse_list<T: FromStr>(inner: &str) -> Result<Vec<T>, String> {
    if inner.is_empty() {
        return Ok(Vec::new());
    }
    inner
        .split(',')
        .map(|x| {
            x.trim()
                .parse::<T>()
                .map_err(|_| format!("bad list entry `{x}`"))
        })
        .collect()
}

impl FromStr for Attr {
    type Err = String;

    /// Parses the forms patterns use: names, dtypes, reduce ops, numbers, integer lists and shapes
    /// of integers and plain symbols. Pads, maps and compound sizes are built by code, not parsed.
    fn from_str(s: &str) -> Result<Attr, String> {
        if let Some(i) = s.strip_prefix('$').and_then(|i| i.parse::<u32>().ok()) {
            return Ok(Attr::Arg(i));
        }
        if let Some(n) = s.strip_prefix('@') {
            return Ok(Attr::Name(n.to_string()));
        }
        if let Some(d) = DType::parse(s) {
            return Ok(Attr::DType(d));
        }
        match s {
            "sum" => return Ok(Attr::Op(ReduceOp::Sum)),
            "max" => return Ok(Attr::Op(ReduceOp::Max)),
            "min" => return Ok(Attr::Op(ReduceOp::Min)),
            "prod" => return Ok(Attr::Op(ReduceOp::Prod)),
            _ => {}
        }
        if let Some(inner) = s.strip_prefix("#[").and_then(|r| r.strip_suffix(']')) {
            return parse_list::<i64>(inner).map(Attr::Ints);
        }
        if let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            let dims = inner
                .split(',')
                .filter(|x| !x.is_empty())
                .map(|x| match x.parse::<i64>() {
                    Ok(v) => Ok(Dim::int(v)),
                    Err(_) if x.chars().all(|c| c.is_alphanumeric() || c == '_') => Ok(Dim::sym(x)),
                    Err(_) => Err(format!("bad size `{x}`")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Attr::Shape(dims.into()));
        }
        if let Ok(v) = s.parse::<f64>() {
            return Ok(Attr::num(v));
        }
        Err(format!("`{s}` is not an attribute"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_forms_round_trip() {
        for s in [
            "@A", "$3", "fp16", "sum", "0.5", "-inf", "#[0,2,1]", "[M,1,K]", "[]", "#[]",
        ] {
            let a: Attr = s.parse().expect(s);
            assert_eq!(a.to_string(), s);
        }
        assert!("(x)".parse::<Attr>().is_err());
    }
}
