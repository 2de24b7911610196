//! Frontend graph → Tiny IR, the naive way the seeds describe (seed 000 §0, seed 002 §5): every
//! contraction is movement (reshape → permute → expand) + MUL + REDUCE(SUM) in tinygrad's order,
//! every window (conv, pool) is PAD + a sliding-window VIEW, masks and scans are index comparisons
//! (RANGE + CMP + WHERE). Nothing is fused or optimized here; that is the e-graph's job.
//!
//! Numerics follow `graph-json.md`: composite functions of fp16/bf16 tensors are computed in fp32
//! (CAST up, compute, CAST down) so only graph tensors are rounded to their dtype; reductions
//! accumulate in `acc_dtype`. CASTs to the accumulation dtype are placed *after* the movement ops,
//! right before the arithmetic, so views stay views.
//!
//! Submodules by op family: `elementwise`, `contraction` (MatMul, GEMM, Attention), `window`
//! (Conv, ConvTranspose, Pool), `reduction` (Reduce, Softmax, norms, Cumulative), `movement`.

mod contraction;
mod elementwise;
mod movement;
mod reduction;
mod util;
mod window;

pub use reduction::cumulative_window;

#[cfg(test)]
mod tests;

use crate::diag::codes;
use crate::diag::{Diagnostic, Diagnostics, Location};
use crate::ir::frontend::{Graph, Node, Op, Operand, TensorInfo};
use crate::ir::tiny::{verify, Builder, NodeId, Program, TinyError};
use std::collections::HashMap;

/// Why lowering a node failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LowerError {
    #[error(transparent)]
    Tiny(#[from] TinyError),
    #[error("{0}")]
    Unsupported(String),
    #[error("tensor `{0}` is not available (the frontend should have rejected this graph)")]
    MissingTensor(String),
}

pub(crate) type LResult<T> = Result<T, LowerError>;

/// State of one lowering: the builder and the Tiny node holding each graph tensor.
pub(crate) struct Lowerer<'g> {
    pub g: &'g Graph,
    pub b: Builder,
    vals: HashMap<String, NodeId>,
}

impl<'g> Lowerer<'g> {
    /// The node holding a tensor operand.
    pub fn tensor(&self, name: &str) -> LResult<NodeId> {
        self.vals
            .get(name)
            .copied()
            .ok_or_else(|| LowerError::MissingTensor(name.to_string()))
    }

    /// Dtype and shape of a graph tensor.
    pub fn info(&self, name: &str) -> LResult<&'g TensorInfo> {
        self.g
            .tensor(name)
            .ok_or_else(|| LowerError::MissingTensor(name.to_string()))
    }

    /// The `i`-th operand of `node`, which must be a tensor.
    pub fn input(&self, node: &Node, i: usize) -> LResult<NodeId> {
        match node.inputs.get(i) {
            Some(Operand::Tensor(t)) => self.tensor(t),
            Some(Operand::Scalar(_)) => Err(LowerError::Unsupported(format!(
                "operand {i} of {} must be a tensor",
                node.op.name()
            ))),
            None => Err(LowerError::Unsupported(format!(
                "{} is missing operand {i}",
                node.op.name()
            ))),
        }
    }

    /// The optional `i`-th tensor operand.
    pub fn opt_input(&self, node: &Node, i: usize) -> LResult<Option<NodeId>> {
        if node.inputs.len() > i {
            self.input(node, i).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Info of the node's first output tensor.
    pub fn out_info(&self, node: &Node) -> LResult<&'g TensorInfo> {
        let name = node
            .outputs
            .first()
            .ok_or_else(|| LowerError::Unsupported(format!("{} has no output", node.name)))?;
        self.info(name)
    }
}

/// Lowers `graph` to Tiny IR ([`lower`]) and verifies the result (`tiny::verify`): a lowering
/// error is the user's (the graph is not lowerable), a verifier failure is a compiler bug (an
/// internal failure). The pipeline's step (`crate::pipeline::lower_and_verify`).
///
/// ```
/// let g = dlc_egg::pipeline::load_file("examples/bias_gelu_residual.json".as_ref()).unwrap();
/// let prog = dlc_egg::pipeline::lower_and_verify(&g).unwrap();
/// assert!(!prog.outputs.is_empty());
/// ```
#[allow(clippy::result_large_err)]
pub fn lower_and_verify(graph: &Graph) -> Result<Program, crate::diag::Failure> {
    let prog = lower(graph)?;
    verify(&prog).map_err(|e| crate::diag::Failure::internal(e.to_diagnostic()))?;
    Ok(prog)
}

/// Lowers a loaded (validated, normalized) graph to a verified Tiny IR program.
pub fn lower(graph: &Graph) -> Result<Program, Diagnostics> {
    let mut lw = Lowerer {
        g: graph,
        b: Builder::new(),
        vals: HashMap::new(),
    };
    for inp in &graph.signature.inputs {
        let info = graph.tensor(&inp.tensor).ok_or_else(|| {
            Diagnostics::one(internal(&format!(
                "signature input `{}` has no tensor info",
                inp.tensor
            )))
        })?;
        let id =
            lw.b.input(&inp.tensor, info.dtype, info.shape.clone())
                .map_err(|e| Diagnostics::one(e.to_diagnostic()))?;
        lw.vals.insert(inp.tensor.clone(), id);
    }
    // Equal small constants are one value (issue 23; declared inputs unchanged).
    for (dup, rep) in crate::ir::frontend::equal_constants(graph) {
        if let Some(id) = lw.vals.get(&rep).copied() {
            lw.vals.insert(dup, id);
        }
    }
    for node in &graph.nodes {
        lw.b.tag = Some(node.name.clone());
        let outs = lower_node(&mut lw, node).map_err(|e| Diagnostics::one(at_node(node, e)))?;
        for (name, id) in node.outputs.iter().zip(outs) {
            lw.vals.insert(name.clone(), id);
        }
    }
    lw.b.tag = None;
    for out in &graph.signature.outputs {
        let id = lw
            .tensor(&out.tensor)
            .map_err(|e| Diagnostics::one(internal(&e.to_string())))?;
        lw.b.output(&out.tensor, id);
    }
    let mut prog = lw.b.finish();
    prog.symbols = graph.symbols.clone();
    verify(&prog).map_err(|e| Diagnostics::one(e.to_diagnostic()))?;
    Ok(prog)
}

/// Dispatches on the op; returns the node(s) holding the outputs, already in the output dtype.
fn lower_node(lw: &mut Lowerer, node: &Node) -> LResult<Vec<NodeId>> {
    let out = match &node.op {
        Op::Elementwise { func } => elementwise::lower(lw, node, *func)?,
        Op::MatMul { acc } => contraction::matmul(lw, node, *acc)?,
        Op::Gemm { .. } => contraction::gemm(lw, node)?,
        Op::Attention { .. } => contraction::attention(lw, node)?,
        Op::Conv(a) => window::conv(lw, node, a)?,
        Op::ConvTranspose(a) => window::conv_transpose(lw, node, a)?,
        Op::Pool(a) => window::pool(lw, node, a)?,
        Op::Reduce { .. } => reduction::reduce(lw, node)?,
        Op::Softmax { axis, acc } => reduction::softmax(lw, node, *axis, *acc)?,
        Op::LayerNorm { axis, eps, acc } => reduction::layer_norm(lw, node, *axis, *eps, *acc)?,
        Op::RmsNorm { axis, eps, acc } => reduction::rms_norm(lw, node, *axis, *eps, *acc)?,
        Op::Cumulative { .. } => reduction::cumulative(lw, node)?,
        _ => movement::lower(lw, node)?,
    };
    let want = lw.out_info(node)?;
    let out = lw.b.cast(out, want.dtype)?;
    if *lw.b.shape(out) != want.shape {
        return Err(LowerError::Unsupported(format!(
            "lowering produced shape {} but the frontend inferred {}",
            crate::ir::dim::fmt_shape(lw.b.shape(out)),
            crate::ir::dim::fmt_shape(&want.shape)
        )));
    }
    Ok(vec![out])
}

fn at_node(node: &Node, e: LowerError) -> Diagnostic {
    let at = Location::Node {
        node: node.name.clone(),
        op: node.op.name().to_string(),
    };
    match e {
        LowerError::Tiny(t) => t.to_diagnostic().at(at),
        LowerError::Unsupported(why) => Diagnostic::error(
            codes::UNSUPPORTED_LOWERING,
            at,
            why,
            "this combination is not supported yet; make the size concrete with `symbols` or --bind, or split the op",
        ),
        LowerError::MissingTensor(t) => internal(&format!("tensor `{t}` is not available")).at(at),
    }
}

fn internal(why: &str) -> Diagnostic {
    Diagnostic::error(
        codes::INTERNAL_ERROR,
        Location::Document,
        why,
        "this is a compiler bug; please report it with the graph.json",
    )
}
