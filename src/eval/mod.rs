//! Reference evaluator of Tiny IR (stub; being written).
use crate::diag::Diagnostics;
use crate::ir::tiny::Program;
use crate::tensor::Tensor;
use std::collections::BTreeMap;

/// Evaluates `prog` with concrete symbol values and signature inputs (by tensor name); returns
/// every signature output by tensor name.
pub fn evaluate(
    prog: &Program,
    bindings: &BTreeMap<String, i64>,
    inputs: &BTreeMap<String, Tensor>,
) -> Result<BTreeMap<String, Tensor>, Diagnostics> {
    let _ = (prog, bindings, inputs);
    Ok(BTreeMap::new())
}
