//! Frontend graph → Tiny IR (stub; being written).
use crate::diag::Diagnostics;
use crate::ir::frontend::Graph;
use crate::ir::tiny::Program;

/// Lowers a loaded graph to Tiny IR.
pub fn lower(graph: &Graph) -> Result<Program, Diagnostics> {
    let _ = graph;
    Ok(Program::default())
}
