//! TODO(issue 2): structural checks and topological order (stub; being written).
use super::parse::RawDoc;
use crate::diag::Diagnostics;

pub(super) fn check_structure(doc: RawDoc) -> Result<RawDoc, Diagnostics> {
    Ok(doc)
}
