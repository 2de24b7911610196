//! TODO(issue 2): shape and dtype inference (stub; being written).
use super::parse::RawDoc;
use super::Graph;
use crate::diag::Diagnostics;

pub(super) fn infer_graph(doc: RawDoc) -> Result<Graph, Diagnostics> {
    Ok(doc)
}
