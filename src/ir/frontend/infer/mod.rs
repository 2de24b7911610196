//! Shape and dtype inference: every node's inputs are validated, its output dtype and (symbolic)
//! shape inferred, its attributes normalized (see [`crate::ir::frontend`]). Declared
//! intermediates and signature outputs are checked against inference.
//!
//! A node whose check fails poisons its output: nodes reading it are skipped, so independent
//! errors are all reported but none cascades.

mod contraction;
mod conv;
mod elementwise;
mod movement;
mod norm;

use super::attrs::PadSpec;
use super::diagnose::{diag, tensor_loc};
use super::parse::{RawDoc, RawNode};
use super::{Graph, Node, Op, Operand, TensorInfo};
use crate::diag::codes;
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::dim::{fmt_shape, Dim, Shape};
use crate::ir::dtype::DType;
use std::collections::{BTreeMap, BTreeSet};

/// One operand of a node during inference.
#[derive(Clone, Copy, Debug)]
pub(super) enum In<'a> {
    Tensor(&'a str, &'a TensorInfo),
    Scalar,
}

/// The node being inferred and its operands.
pub(super) struct Ctx<'a> {
    pub node: &'a RawNode,
    pub ins: Vec<In<'a>>,
}

/// What a node's inference produces.
pub(super) type Inferred = (Op, TensorInfo);

impl<'a> Ctx<'a> {
    /// An error located at the node.
    pub fn err(
        &self,
        c: codes::Code,
        why: impl Into<String>,
        sugg: impl Into<String>,
    ) -> Diagnostic {
        diag(c, self.node.loc(), why, sugg)
    }

    /// Checks `lo <= #inputs <= hi` (E1005).
    pub fn count(&self, lo: usize, hi: usize, what: &str) -> Result<(), Diagnostic> {
        let n = self.ins.len();
        if n < lo || n > hi {
            let expected = if lo == hi {
                format!("{lo}")
            } else if hi == usize::MAX {
                format!("at least {lo}")
            } else {
                format!("{lo} to {hi}")
            };
            return Err(self
                .err(
                    codes::WRONG_INPUT_COUNT,
                    format!(
                        "{} takes {expected} inputs ({what}), node `{}` has {n}",
                        self.node.op, self.node.name
                    ),
                    format!("give exactly the inputs {what}"),
                )
                .with("expected", expected)
                .with("found", n));
        }
        Ok(())
    }

    /// Tensor operand `i` (non-Elementwise ops take tensors only; the parser checked it).
    pub fn t(&self, i: usize) -> Result<(&'a str, &'a TensorInfo), Diagnostic> {
        match self.ins.get(i) {
            Some(In::Tensor(n, t)) => Ok((n, t)),
            _ => Err(self.err(
                codes::WRONG_INPUT_COUNT,
                format!("input {i} of {} must be a tensor", self.node.op),
                "give a tensor name",
            )),
        }
    }

    /// Normalizes `axis` for `rank` (E1004).
    pub fn axis(&self, axis: i64, rank: usize, what: &str) -> Result<usize, Diagnostic> {
        let r = i64::try_from(rank).unwrap_or(i64::MAX);
        let a = if axis < 0 {
            axis.saturating_add(r)
        } else {
            axis
        };
        if a < 0 || a >= r {
            return Err(self
                .err(
                    codes::AXIS_OUT_OF_RANGE,
                    format!(
                        "{what} {axis} is out of range for a rank-{rank} tensor (valid: {} to {})",
                        -r,
                        r - 1
                    ),
                    if rank == 0 {
                        "a rank-0 tensor has no axes: reshape it first".to_string()
                    } else {
                        format!("use an axis in [{}, {}]", -r, r - 1)
                    },
                )
                .with("axis", axis)
                .with("rank", rank));
        }
        Ok(a as usize)
    }

    /// Normalizes a list of axes: non-negative, sorted; duplicates are an error.
    pub fn axes(&self, axes: &[i64], rank: usize, what: &str) -> Result<Vec<usize>, Diagnostic> {
        let mut out = BTreeSet::new();
        for a in axes {
            let n = self.axis(*a, rank, what)?;
            if !out.insert(n) {
                return Err(self.err(
                    codes::INVALID_FIELD,
                    format!("axis {n} appears twice in `{what}`"),
                    "list each axis once",
                ));
            }
        }
        Ok(out.into_iter().collect())
    }

    /// The common dtype of the given tensor inputs (E1006).
    pub fn same_dtype(&self, idx: &[usize]) -> Result<DType, Diagnostic> {
        let mut first: Option<(&str, DType)> = None;
        for i in idx {
            let (name, t) = self.t(*i)?;
            match first {
                None => first = Some((name, t.dtype)),
                Some((fname, d)) if d != t.dtype => {
                    return Err(self
                        .err(
                            codes::DTYPE_MISMATCH,
                            format!(
                                "operands `{fname}` ({d}) and `{name}` ({}) of {} have different dtypes; there is no implicit promotion",
                                t.dtype, self.node.op
                            ),
                            format!("insert a Cast of `{name}` to {d} (or of `{fname}` to {})", t.dtype),
                        )
                        .with("lhs_dtype", d)
                        .with("rhs_dtype", t.dtype));
                }
                Some(_) => {}
            }
        }
        first.map(|(_, d)| d).ok_or_else(|| {
            self.err(
                codes::WRONG_INPUT_COUNT,
                format!("{} needs a tensor operand", self.node.op),
                "give a tensor input",
            )
        })
    }

    /// Rejects non-float dtypes for float-only ops (E1013).
    pub fn float_only(&self, d: DType, what: &str) -> Result<(), Diagnostic> {
        if d.is_float() {
            return Ok(());
        }
        Err(self
            .err(
                codes::UNSUPPORTED_DTYPE,
                format!("{what} is defined on floating-point tensors, not {d}"),
                "Cast the input to fp32 (or fp16/bf16) first",
            )
            .with("dtype", d))
    }

    /// `acc_dtype` (default fp32) for a float op on `d`.
    pub fn acc(&self, d: DType) -> Result<DType, Diagnostic> {
        let acc = self.node.attrs.dtype("acc_dtype").unwrap_or(DType::F32);
        if d.is_float() && !acc.is_float() {
            return Err(self.err(
                codes::INVALID_FIELD,
                format!("`acc_dtype` {acc} is not a floating-point type"),
                "use fp32 (the default) or fp16",
            ));
        }
        Ok(acc)
    }

    /// A per-spatial-dim list (`stride`, `dilation`, `kernel`, `output_padding`): one integer or
    /// one per spatial dim, each `>= min`.
    pub fn spatial(
        &self,
        name: &str,
        nsp: usize,
        default: Option<i64>,
        min: i64,
    ) -> Result<Vec<i64>, Diagnostic> {
        let v = match (self.node.attrs.ints(name), default) {
            (Some((v, true)), _) => vec![v.first().copied().unwrap_or(0); nsp],
            (Some((v, false)), _) => {
                if v.len() != nsp {
                    return Err(self.err(
                        codes::INVALID_FIELD,
                        format!(
                            "`{name}` has {} entries but the input has {nsp} spatial dims",
                            v.len()
                        ),
                        format!("give one integer, or {nsp} (one per spatial dim)"),
                    ));
                }
                v.to_vec()
            }
            (None, Some(d)) => vec![d; nsp],
            (None, None) => {
                return Err(self.err(
                    codes::INVALID_FIELD,
                    format!("{} needs the attribute `{name}`", self.node.op),
                    format!("add `\"{name}\"`"),
                ))
            }
        };
        if let Some(bad) = v.iter().find(|x| **x < min) {
            return Err(self.err(
                codes::INVALID_FIELD,
                format!("`{name}` must be >= {min}, found {bad}"),
                format!("use values >= {min}"),
            ));
        }
        Ok(v)
    }

    /// A spatial pad normalized to `[lo, hi]` per spatial dim, every entry `>= 0`.
    pub fn spatial_pad(&self, nsp: usize) -> Result<Vec<(i64, i64)>, Diagnostic> {
        let pads = match self.node.attrs.pad("pad") {
            None => vec![(0, 0); nsp],
            Some(PadSpec::All(p)) => vec![(*p, *p); nsp],
            Some(PadSpec::PerDim(v)) if v.len() == nsp => v.iter().map(|p| (*p, *p)).collect(),
            Some(PadSpec::Pairs(v)) if v.len() == nsp => v.clone(),
            Some(other) => {
                let n = match other {
                    PadSpec::PerDim(v) => v.len(),
                    PadSpec::Pairs(v) => v.len(),
                    PadSpec::All(_) => 1,
                };
                return Err(self.err(
                    codes::INVALID_FIELD,
                    format!("`pad` has {n} entries but the input has {nsp} spatial dims"),
                    format!("give one integer, {nsp} integers, or {nsp} [lo, hi] pairs"),
                ));
            }
        };
        if let Some((lo, hi)) = pads.iter().find(|(lo, hi)| *lo < 0 || *hi < 0) {
            return Err(self.err(
                codes::INVALID_FIELD,
                format!("`pad` must be non-negative, found [{lo}, {hi}]"),
                "use non-negative pads (crop with Slice or Pad instead)",
            ));
        }
        Ok(pads)
    }
}

/// Sizes must agree: `a == b` symbolically (E1002 otherwise).
pub(super) fn same_size(
    cx: &Ctx,
    a: &Dim,
    b: &Dim,
    why: impl FnOnce() -> String,
    sugg: &str,
) -> Result<(), Diagnostic> {
    if a == b {
        return Ok(());
    }
    Err(cx
        .err(codes::AXIS_SIZE_MISMATCH, why(), sugg)
        .with("lhs", a)
        .with("rhs", b))
}

/// The broadcast of two shapes (E1001 on mismatch).
pub(super) fn broadcast(cx: &Ctx, a: &[Dim], b: &[Dim], what: &str) -> Result<Shape, Diagnostic> {
    crate::ir::dim::broadcast_shapes(a, b).map_err(|(x, y)| {
        cx.err(
            codes::BROADCAST_MISMATCH,
            format!(
                "{what}: shapes {} and {} do not broadcast (right-aligned, sizes {x} and {y} differ and neither is 1)",
                fmt_shape(a),
                fmt_shape(b)
            ),
            "make the sizes equal, or 1 on one side (Expand or Reshape an operand), or check the order of the operands",
        )
        .with("lhs_shape", fmt_shape(a))
        .with("rhs_shape", fmt_shape(b))
    })
}

/// The element count if it is known to overflow i64: the product of the constant axes.
pub(super) fn constant_numel_overflows(shape: &[Dim]) -> bool {
    let mut acc: i64 = 1;
    for d in shape {
        if let Some(v) = d.as_int() {
            if v == 0 {
                return false;
            }
            match acc.checked_mul(v) {
                Some(x) => acc = x,
                None => return true,
            }
        }
    }
    false
}

fn overflow_diag(name: &str, shape: &[Dim]) -> Diagnostic {
    diag(
        codes::SHAPE_OVERFLOW,
        tensor_loc(name),
        format!(
            "tensor `{name}` of shape {} has more elements than fit in i64",
            fmt_shape(shape)
        ),
        "check the sizes: a tensor must have fewer than 2^63 elements",
    )
    .with("shape", fmt_shape(shape))
}

/// Infers one node.
fn infer_node(cx: &Ctx) -> Result<Inferred, Diagnostic> {
    match cx.node.op {
        "MatMul" => contraction::matmul(cx),
        "GEMM" => contraction::gemm(cx),
        "Attention" => contraction::attention(cx),
        "Conv" => conv::conv(cx),
        "ConvTranspose" => conv::conv_transpose(cx),
        "Pool" => conv::pool(cx),
        "Softmax" => norm::softmax(cx),
        "LayerNorm" => norm::layer_norm(cx),
        "RMSNorm" => norm::rms_norm(cx),
        "Reduce" => norm::reduce(cx),
        "Cumulative" => norm::cumulative(cx),
        "Cast" => norm::cast(cx),
        "Elementwise" => elementwise::elementwise(cx),
        "Reshape" => movement::reshape(cx),
        "Permute" => movement::permute(cx),
        "Expand" => movement::expand(cx),
        "Pad" => movement::pad(cx),
        "Slice" => movement::slice(cx),
        "Flip" => movement::flip(cx),
        "Concat" => movement::concat(cx),
        "Repeat" => movement::repeat(cx),
        "Unfold" => movement::unfold(cx),
        "Gather" => movement::gather(cx),
        other => Err(cx.err(
            codes::UNKNOWN_OP,
            format!("unknown op `{other}`"),
            "this is a front-end bug: the parser accepted an op inference does not know",
        )),
    }
}

/// Checks an inferred output against its declaration. A declared axis that is a symbol used by
/// no signature input may name an inferred compound size (e.g. a conv output `(H-1)//2+1`); it
/// must then name the same size everywhere.
fn check_declared(
    node: &RawNode,
    name: &str,
    declared: &TensorInfo,
    inferred: &TensorInfo,
    input_syms: &BTreeSet<String>,
    derived: &mut BTreeMap<String, Dim>,
) -> Result<(), Diagnostic> {
    let mismatch = |why: String| {
        diag(
            codes::AXIS_SIZE_MISMATCH,
            node.loc(),
            why,
            format!(
                "fix the declaration of `{name}` in `tensors` (or remove it and let inference decide)"
            ),
        )
        .with("tensor", name)
        .with("declared_shape", fmt_shape(&declared.shape))
        .with("inferred_shape", fmt_shape(&inferred.shape))
    };
    if declared.dtype != inferred.dtype {
        return Err(diag(
            codes::DTYPE_MISMATCH,
            node.loc(),
            format!(
                "tensor `{name}` is declared {} but node `{}` produces {}",
                declared.dtype, node.name, inferred.dtype
            ),
            format!("declare `{name}` as {} or insert a Cast", inferred.dtype),
        )
        .with("declared_dtype", declared.dtype)
        .with("inferred_dtype", inferred.dtype));
    }
    if declared.shape.len() != inferred.shape.len() {
        return Err(mismatch(format!(
            "tensor `{name}` is declared with rank {} but node `{}` produces rank {}",
            declared.shape.len(),
            node.name,
            inferred.shape.len()
        )));
    }
    for (i, (d, e)) in declared.shape.iter().zip(&inferred.shape).enumerate() {
        if d == e {
            continue;
        }
        let compound = e.as_int().is_none() && !is_plain_symbol(e);
        let fresh = d
            .symbols()
            .into_iter()
            .next()
            .filter(|s| is_plain_symbol(d) && !input_syms.contains(s));
        match fresh {
            Some(s) if compound => match derived.get(&s) {
                Some(prev) if prev != e => {
                    return Err(mismatch(format!(
                        "axis {i} of `{name}`: symbol `{s}` already names {prev}, but node `{}` produces {e}",
                        node.name
                    )))
                }
                Some(_) => {}
                None => {
                    derived.insert(s, e.clone());
                }
            },
            _ => {
                return Err(mismatch(format!(
                    "axis {i} of `{name}` is declared {d} but node `{}` produces {e}",
                    node.name
                )))
            }
        }
    }
    Ok(())
}

fn is_plain_symbol(d: &Dim) -> bool {
    match d.symbols().into_iter().next() {
        Some(s) => d.symbols().len() == 1 && *d == Dim::sym(&s),
        None => false,
    }
}

/// Infers every node of a structurally valid document.
pub(super) fn infer_graph(doc: RawDoc) -> Result<Graph, Diagnostics> {
    let mut errs: Vec<Diagnostic> = Vec::new();
    let declared: BTreeMap<String, TensorInfo> = doc.tensors.iter().cloned().collect();
    for (name, t) in &doc.tensors {
        if constant_numel_overflows(&t.shape) {
            errs.push(overflow_diag(name, &t.shape));
        }
    }
    let mut tensors: BTreeMap<String, TensorInfo> = BTreeMap::new();
    let mut input_syms: BTreeSet<String> = BTreeSet::new();
    for i in &doc.signature.inputs {
        if let Some(t) = declared.get(&i.tensor) {
            for d in &t.shape {
                input_syms.extend(d.symbols());
            }
            tensors.insert(i.tensor.clone(), t.clone());
        }
    }
    let mut derived: BTreeMap<String, Dim> = BTreeMap::new();
    let mut poisoned: BTreeSet<String> = BTreeSet::new();
    let mut nodes = Vec::with_capacity(doc.nodes.len());
    for node in &doc.nodes {
        let mut ins = Vec::with_capacity(node.inputs.len());
        let mut skip = false;
        for o in &node.inputs {
            match o {
                Operand::Scalar(_) => ins.push(In::Scalar),
                Operand::Tensor(t) => match tensors.get(t) {
                    Some(info) => ins.push(In::Tensor(t, info)),
                    None => skip = true,
                },
            }
        }
        if skip
            || node
                .inputs
                .iter()
                .any(|o| matches!(o, Operand::Tensor(t) if poisoned.contains(t)))
        {
            poisoned.extend(node.outputs.iter().cloned());
            continue;
        }
        let cx = Ctx { node, ins };
        let result = infer_node(&cx).and_then(|(op, info)| {
            let out = node.outputs.first().map(String::as_str).unwrap_or("");
            if constant_numel_overflows(&info.shape) {
                return Err(overflow_diag(out, &info.shape));
            }
            if let Some(decl) = declared.get(out) {
                check_declared(node, out, decl, &info, &input_syms, &mut derived)?;
            }
            Ok((op, info))
        });
        match result {
            Ok((op, info)) => {
                for o in &node.outputs {
                    tensors.insert(o.clone(), info.clone());
                }
                nodes.push(Node {
                    name: node.name.clone(),
                    op,
                    inputs: node.inputs.clone(),
                    outputs: node.outputs.clone(),
                });
            }
            Err(d) => {
                errs.push(d);
                poisoned.extend(node.outputs.iter().cloned());
            }
        }
    }
    if !errs.is_empty() {
        return Err(Diagnostics(errs));
    }
    Ok(Graph {
        signature: doc.signature,
        symbols: doc.symbols,
        tensors,
        nodes,
        constants: crate::tensor::Constants::new(),
    })
}
