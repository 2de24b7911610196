//! The DSL's diagnostic constructor, which locates a diagnostic at a source position (the DSL's
//! codes, `E07xx`, are in the registry `crate::diag::codes`; `docs/diagnostics.md`).

use super::lex::Pos;
use crate::diag::codes::Code;
use crate::diag::{Diagnostic, Location};

/// An error diagnostic at `file:line:column`.
pub fn dsl_diag(
    c: Code,
    file: &str,
    pos: Pos,
    why: impl Into<String>,
    suggestion: impl Into<String>,
) -> Diagnostic {
    Diagnostic::error(c, source(file, pos), why, suggestion)
}

/// `Location::Source` of a position.
pub fn source(file: &str, pos: Pos) -> Location {
    Location::Source {
        file: file.to_string(),
        line: pos.line,
        column: pos.column,
    }
}
