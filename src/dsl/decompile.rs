//! `decompile`: any frontend graph printed as a DSL program with entry `main` (seed 004 §
//! Decompile). Deterministic: statements follow the graph's topological node order, attributes
//! are printed in their normal form (every default spelled out). Names that are not identifiers
//! or are reserved words are rewritten (`conv1.out` → `conv1_out`, `graph` → `graph_`).
//! Elementwise broadcasts, implicit in graph.json, become explicit `expand` statements (seed 004's
//! shape rule).

use super::builtins::dsl_name;
use super::parse::{dtype_name, RESERVED};
use crate::diag::codes;
use crate::diag::{Diagnostic, Diagnostics, Location};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::frontend::{
    ConvAttrs, CumFn, Graph, Mutability, Node, Op, Operand, PoolAttrs, PoolMode, ReduceFn, Role,
    Storage,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// Prints `g` as a DSL program whose `main` has the same semantics.
pub fn decompile(g: &Graph) -> Result<String, Diagnostics> {
    let mut d = Decompiler {
        g,
        names: BTreeMap::new(),
        taken: BTreeSet::new(),
        body: String::new(),
    };
    d.run().map_err(Diagnostics::one)
}

struct Decompiler<'g> {
    g: &'g Graph,
    names: BTreeMap<String, String>,
    taken: BTreeSet<String>,
    body: String,
}

fn undecompilable(what: String) -> Diagnostic {
    Diagnostic::error(
        codes::UNDECOMPILABLE,
        Location::Document,
        what,
        "keep this graph in graph.json form",
    )
}

/// A valid, unreserved identifier close to `raw`.
fn sanitize(raw: &str) -> String {
    let mut s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        s.insert(0, '_');
    }
    if RESERVED.contains(&s.as_str()) {
        s.push('_');
    }
    s
}

/// A float literal that parses back to exactly `v`.
fn num(v: f64) -> String {
    let s = format!("{v:?}");
    if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
        s
    } else {
        format!("{s}.0")
    }
}

fn ints<T: std::fmt::Display>(v: &[T]) -> String {
    let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

fn pairs(p: &[(i64, i64)]) -> String {
    let parts: Vec<String> = p.iter().map(|(a, b)| format!("[{a}, {b}]")).collect();
    format!("[{}]", parts.join(", "))
}

impl Decompiler<'_> {
    fn name_of(&mut self, tensor: &str) -> String {
        if let Some(n) = self.names.get(tensor) {
            return n.clone();
        }
        let base = sanitize(tensor);
        let mut n = base.clone();
        let mut k = 1;
        while self.taken.contains(&n) {
            n = format!("{base}_{k}");
            k += 1;
        }
        self.taken.insert(n.clone());
        self.names.insert(tensor.to_string(), n.clone());
        n
    }

    fn fresh(&mut self, base: &str) -> String {
        let mut k = 0;
        loop {
            let n = format!("{base}_x{k}");
            if !self.taken.contains(&n) && !self.g.tensors.contains_key(&n) {
                self.taken.insert(n.clone());
                return n;
            }
            k += 1;
        }
    }

    fn dim(&self, d: &Dim) -> Result<String, Diagnostic> {
        match (d.as_int(), d.as_symbol()) {
            (Some(v), _) => Ok(v.to_string()),
            (None, Some(s)) => Ok(sanitize(s)),
            _ => Err(undecompilable(format!(
                "a declared size `{d}` is neither an integer nor a symbol"
            ))),
        }
    }

    fn ty(&self, tensor: &str) -> Result<String, Diagnostic> {
        let t = self
            .g
            .tensor(tensor)
            .ok_or_else(|| undecompilable(format!("tensor `{tensor}` has no type")))?;
        let dims: Result<Vec<String>, Diagnostic> = t.shape.iter().map(|d| self.dim(d)).collect();
        Ok(format!("{}[{}]", dtype_name(t.dtype), dims?.join(", ")))
    }

    fn run(&mut self) -> Result<String, Diagnostic> {
        let g = self.g;
        let mut symbols: BTreeSet<String> = g.symbols.keys().cloned().collect();
        for t in g.tensors.values() {
            for d in &t.shape {
                symbols.extend(d.symbols());
            }
        }
        let vars: Vec<String> = symbols
            .iter()
            .map(|s| match g.symbols.get(s) {
                Some(v) => format!("{}={v}", sanitize(s)),
                None => sanitize(s),
            })
            .collect();
        for s in &symbols {
            self.taken.insert(sanitize(s));
        }
        let mut params = Vec::new();
        for i in &g.signature.inputs {
            let mut p = format!("{}: {}", self.name_of(&i.tensor), self.ty(&i.tensor)?);
            if i.role == Role::Param {
                p.push_str(" param");
            }
            if i.mutability == Mutability::Mutable {
                p.push_str(" mutable");
            }
            if i.storage == Storage::ConstPool {
                p.push_str(" const_pool");
            }
            params.push(p);
        }
        // Outputs keep their names: reserve them before intermediates are named.
        let mut outs = Vec::new();
        for o in &g.signature.outputs {
            outs.push(format!(
                "{}: {}",
                self.name_of(&o.tensor),
                self.ty(&o.tensor)?
            ));
        }
        for n in &g.nodes {
            self.node(n)?;
        }
        let rets: Vec<String> = g
            .signature
            .outputs
            .iter()
            .map(|o| self.name_of(&o.tensor))
            .collect();
        let mut text = String::new();
        let head = if vars.is_empty() {
            "graph".to_string()
        } else {
            format!("graph<{}>", vars.join(", "))
        };
        let _ = writeln!(
            text,
            "{head} main({}) -> ({}) {{",
            params.join(", "),
            outs.join(", ")
        );
        text.push_str(&self.body);
        let _ = writeln!(text, "    return {}", rets.join(", "));
        text.push_str("}\n");
        Ok(text)
    }

    fn shape_of(&self, t: &str) -> Vec<Dim> {
        self.g
            .tensor(t)
            .map(|i| i.shape.clone())
            .unwrap_or_default()
    }

    /// An operand as an expression; broadcast tensors get an explicit `expand` first.
    fn operand(&mut self, o: &Operand, out_shape: &[Dim]) -> Result<String, Diagnostic> {
        match o {
            Operand::Scalar(v) => Ok(num(*v)),
            Operand::Tensor(t) => {
                let name = self.name_of(t);
                let shape = self.shape_of(t);
                if shape.is_empty() || shape == out_shape {
                    return Ok(name);
                }
                let target = self.expand_shape(&shape, out_shape)?;
                let tmp = self.fresh(&name);
                let _ = writeln!(self.body, "    {tmp} = expand({name}, shape={target})");
                Ok(tmp)
            }
        }
    }

    /// `Expand.shape` for `to` from `from`: integers, symbols, and -1 where the dim is kept.
    fn expand_shape(&self, from: &[Dim], to: &[Dim]) -> Result<String, Diagnostic> {
        let lead = to.len().saturating_sub(from.len());
        let mut parts = Vec::with_capacity(to.len());
        for (i, d) in to.iter().enumerate() {
            let kept = i >= lead && from.get(i - lead) == Some(d);
            parts.push(match (d.as_int(), d.as_symbol()) {
                (Some(v), _) => v.to_string(),
                (None, Some(s)) => sanitize(s),
                _ if kept => "-1".to_string(),
                _ => {
                    return Err(undecompilable(format!(
                        "a broadcast to the computed size `{d}` cannot be written as an expand"
                    )))
                }
            });
        }
        Ok(format!("[{}]", parts.join(", ")))
    }

    fn node(&mut self, n: &Node) -> Result<(), Diagnostic> {
        let out_t = n.outputs.first().cloned().unwrap_or_default();
        let out_shape = self.shape_of(&out_t);
        let rhs = match &n.op {
            Op::Elementwise { func } => {
                let mut args = Vec::with_capacity(n.inputs.len());
                for o in &n.inputs {
                    args.push(self.operand(o, &out_shape)?);
                }
                let infix = match func.name() {
                    "add" => Some("+"),
                    "sub" => Some("-"),
                    "mul" => Some("*"),
                    "div" => Some("/"),
                    "lt" => Some("<"),
                    "le" => Some("<="),
                    "gt" => Some(">"),
                    "ge" => Some(">="),
                    "eq" => Some("=="),
                    "ne" => Some("!="),
                    _ => None,
                };
                match (infix, args.as_slice()) {
                    (Some(op), [a, b]) => format!("{a} {op} {b}"),
                    _ => format!("{}({})", func.name(), args.join(", ")),
                }
            }
            op => {
                let mut args: Vec<String> = Vec::new();
                for o in &n.inputs {
                    match o {
                        Operand::Tensor(t) => args.push(self.name_of(t)),
                        Operand::Scalar(_) => {
                            return Err(undecompilable(format!(
                                "node `{}` ({}) has a scalar operand",
                                n.name,
                                op.name()
                            )))
                        }
                    }
                }
                args.extend(self.attrs(n, op)?);
                format!("{}({})", dsl_name(op.name()), args.join(", "))
            }
        };
        let lhs = self.name_of(&out_t);
        let _ = writeln!(self.body, "    {lhs} = {rhs}");
        Ok(())
    }

    fn attrs(&self, n: &Node, op: &Op) -> Result<Vec<String>, Diagnostic> {
        let dt = |d: &DType| dtype_name(*d).to_string();
        let kw = |k: &str, v: String| format!("{k}={v}");
        Ok(match op {
            Op::MatMul { acc } => vec![kw("acc_dtype", dt(acc))],
            Op::Gemm {
                trans_a,
                trans_b,
                alpha,
                beta,
                acc,
            } => vec![
                kw("trans_a", trans_a.to_string()),
                kw("trans_b", trans_b.to_string()),
                kw("alpha", num(*alpha)),
                kw("beta", num(*beta)),
                kw("acc_dtype", dt(acc)),
            ],
            Op::Conv(c) => conv(c, false),
            Op::ConvTranspose(c) => conv(c, true),
            Op::Pool(p) => pool_attrs(p),
            Op::Attention { causal, scale, acc } => vec![
                kw("causal", causal.to_string()),
                kw("scale", num(*scale)),
                kw("acc_dtype", dt(acc)),
            ],
            Op::Softmax { axis, acc } => {
                vec![kw("axis", axis.to_string()), kw("acc_dtype", dt(acc))]
            }
            Op::LayerNorm { axis, eps, acc } | Op::RmsNorm { axis, eps, acc } => vec![
                kw("axis", axis.to_string()),
                kw("eps", num(*eps)),
                kw("acc_dtype", dt(acc)),
            ],
            Op::Elementwise { .. } => Vec::new(),
            Op::Reduce {
                func,
                axes,
                keepdim,
                acc,
            } => vec![
                kw("fn", reduce_fn_name(*func).into()),
                kw("axes", ints(axes)),
                kw("keepdim", keepdim.to_string()),
                kw("acc_dtype", dt(acc)),
            ],
            Op::Cumulative {
                func,
                axis,
                reverse,
                exclusive,
            } => vec![
                kw("fn", cum_fn_name(*func).into()),
                kw("axis", axis.to_string()),
                kw("reverse", reverse.to_string()),
                kw("exclusive", exclusive.to_string()),
            ],
            Op::Cast { to } => vec![kw("to", dt(to))],
            Op::Reshape { shape } => vec![kw("shape", self.reshape_shape(shape)?)],
            Op::Permute { perm } => vec![kw("perm", ints(perm))],
            Op::Expand { shape } => {
                let from = match n.inputs.first() {
                    Some(Operand::Tensor(t)) => self.shape_of(t),
                    _ => Vec::new(),
                };
                vec![kw("shape", self.expand_shape(&from, shape)?)]
            }
            Op::Pad { pad, value } => vec![kw("pad", pairs(pad)), kw("value", num(*value))],
            Op::Slice {
                starts,
                ends,
                steps,
            } => self.slice_attrs(n, starts, ends, steps)?,
            Op::Flip { axes } => vec![kw("axes", ints(axes))],
            Op::Concat { axis } => vec![kw("axis", axis.to_string())],
            Op::Repeat { repeats } => vec![kw("repeats", ints(repeats))],
            Op::Unfold { axis, size, step } => vec![
                kw("axis", axis.to_string()),
                kw("size", size.to_string()),
                kw("step", step.to_string()),
            ],
            Op::Gather { axis } => vec![kw("axis", axis.to_string())],
        })
    }

    /// `Slice`'s `starts`, `ends` and `steps`; a symbolic bound is written as an integer that
    /// clamps to it on its axis (an undecompilable-graph diagnostic when none does).
    fn slice_attrs(
        &self,
        n: &Node,
        starts: &[Dim],
        ends: &[Dim],
        steps: &[i64],
    ) -> Result<Vec<String>, Diagnostic> {
        let kw = |k: &str, v: String| format!("{k}={v}");
        let dims = match n.inputs.first() {
            Some(Operand::Tensor(t)) => self.shape_of(t),
            _ => Vec::new(),
        };
        let bound = |b: &Dim, d: Option<&Dim>| -> Result<String, Diagnostic> {
            if let Some(v) = b.as_int() {
                return Ok(v.to_string());
            }
            // A symbolic bound is a written integer clamped to the axis: find one that
            // clamps to it (the integers in its printed form, either sign, 0, the end).
            let text = b.to_string();
            let mut cands: Vec<i64> = vec![0, i64::MAX];
            for tok in text.split(|c: char| !c.is_ascii_digit()) {
                if let Ok(v) = tok.parse::<i64>() {
                    cands.extend([v, -v]);
                }
            }
            d.and_then(|d| cands.into_iter().find(|c| clamp_bound(*c, d) == *b))
                .map(|c| c.to_string())
                .ok_or_else(|| {
                    undecompilable(format!(
                        "slice bound `{b}` of node `{}` is no clamped integer",
                        n.name
                    ))
                })
        };
        let mut s = Vec::with_capacity(starts.len());
        let mut e = Vec::with_capacity(ends.len());
        for (i, (a, b)) in starts.iter().zip(ends).enumerate() {
            s.push(bound(a, dims.get(i))?);
            e.push(bound(b, dims.get(i))?);
        }
        Ok(vec![
            kw("starts", ints(&s)),
            kw("ends", ints(&e)),
            kw("steps", ints(steps)),
        ])
    }

    /// `Reshape.shape`: integers and symbols; one computed size becomes -1.
    fn reshape_shape(&self, shape: &[Dim]) -> Result<String, Diagnostic> {
        let mut parts = Vec::with_capacity(shape.len());
        let mut inferred = false;
        for d in shape {
            parts.push(match (d.as_int(), d.as_symbol()) {
                (Some(v), _) => v.to_string(),
                (None, Some(s)) => sanitize(s),
                _ if !inferred => {
                    inferred = true;
                    "-1".to_string()
                }
                _ => {
                    return Err(undecompilable(format!(
                        "a reshape to {} has two computed sizes",
                        crate::ir::dim::fmt_shape(shape)
                    )))
                }
            });
        }
        Ok(format!("[{}]", parts.join(", ")))
    }
}

/// `Pool`'s attributes, in the DSL's keyword form.
fn pool_attrs(p: &PoolAttrs) -> Vec<String> {
    let kw = |k: &str, v: String| format!("{k}={v}");
    vec![
        kw(
            "mode",
            match p.mode {
                PoolMode::Max => "max",
                PoolMode::Avg => "avg",
            }
            .into(),
        ),
        kw("kernel", ints(&p.kernel)),
        kw("stride", ints(&p.stride)),
        kw("pad", pairs(&p.pad)),
        kw("dilation", ints(&p.dilation)),
        kw("count_include_pad", p.count_include_pad.to_string()),
    ]
}

/// The `fn=` spelling of a reduction.
fn reduce_fn_name(f: ReduceFn) -> &'static str {
    match f {
        ReduceFn::Sum => "sum",
        ReduceFn::Max => "max",
        ReduceFn::Min => "min",
        ReduceFn::Mean => "mean",
        ReduceFn::Prod => "prod",
    }
}

/// The `fn=` spelling of a cumulative op.
fn cum_fn_name(f: CumFn) -> &'static str {
    match f {
        CumFn::Sum => "sum",
        CumFn::Prod => "prod",
        CumFn::Max => "max",
        CumFn::Min => "min",
    }
}

/// numpy clamping of a slice bound as the frontend normalizes it (mirror of
/// `ir::frontend::infer::movement::clamp_bound`): negative counts from the end, then `[0, dim]`.
fn clamp_bound(v: i64, dim: &Dim) -> Dim {
    if let Some(d) = dim.as_int() {
        let b = if v < 0 { v.saturating_add(d) } else { v };
        return Dim::int(b.clamp(0, d));
    }
    match v {
        i64::MAX => dim.clone(),
        0 => Dim::int(0),
        v if v <= -i64::MAX => Dim::int(0),
        v if v > 0 => Dim::int(v).min_of(dim),
        v => dim.add_int(v).max_of(&Dim::int(0)),
    }
}

fn conv(c: &ConvAttrs, transpose: bool) -> Vec<String> {
    let mut v = vec![
        format!("stride={}", ints(&c.stride)),
        format!("pad={}", pairs(&c.pad)),
        format!("dilation={}", ints(&c.dilation)),
        format!("groups={}", c.groups),
        format!("acc_dtype={}", dtype_name(c.acc)),
    ];
    if transpose {
        v.push(format!("output_padding={}", ints(&c.output_padding)));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(sanitize("conv1.out"), "conv1_out");
        assert_eq!(sanitize("1x"), "_1x");
        assert_eq!(sanitize("graph"), "graph_");
        assert_eq!(num(1.0), "1.0");
        assert_eq!(num(-0.0), "-0.0");
        assert_eq!(num(1e-5), "1e-5");
        assert_eq!(num(0.1).parse::<f64>().ok(), Some(0.1));
    }
}
