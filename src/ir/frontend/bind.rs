//! Symbol binding for `run` (stub; being written).
use super::Graph;
use crate::diag::Diagnostics;
use std::collections::BTreeMap;

/// Values of every symbol the graph uses: from `cli` (`--bind`), then from the shapes of the given
/// input arrays (`tensor name → array shape`), then from the document's defaults. Unbound symbols,
/// conflicting bindings and sizes that overflow `i64` are diagnostics.
pub fn resolve_symbols(
    graph: &Graph,
    cli: &BTreeMap<String, i64>,
    arrays: &BTreeMap<String, Vec<usize>>,
) -> Result<BTreeMap<String, i64>, Diagnostics> {
    let _ = (arrays, cli);
    Ok(graph.symbols.clone())
}
