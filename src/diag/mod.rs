//! User-facing diagnostics (seed 001 §14): every problem a user can cause is reported with a stable
//! `code`, a `kind`, where it is (`at`), `why` and an actionable `suggestion`, printed readably or as
//! JSON (`--diagnostics json`). Layers keep their own `thiserror` enums and convert into this type at
//! the boundary.
//!
//! Code ranges: `E00xx` document / JSON, `E01xx` graph structure, `E02xx` symbols and sizes,
//! `E03xx` `run` inputs and outputs, `E1xxx` shape and index rules (seed numbering: E1001
//! BroadcastMismatch, E1203 MissingDivGuard, E1304 AxisAlignmentMismatch), `W2xxx` warnings
//! (W2101 ExcessivePiecewise).

use serde::Serialize;
use std::fmt;

pub mod codes;

pub use codes::Code;

/// Where a diagnostic points. Serialized flat, as seed 001 §14 shows it: `{"node": "mm", "op":
/// "MatMul"}`, `{"tensor": "A"}`, `{"file": …, "line": 3, "column": 5}`, `{"document": true}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A position in the input text (1-based).
    Source {
        /// The file's name as given.
        file: String,
        /// Line, 1-based.
        line: usize,
        /// Column, 1-based (in characters).
        column: usize,
    },
    /// A graph node, by name, with its op.
    Node {
        /// The node's name.
        node: String,
        /// Its op (`MatMul`, `Elementwise`, …).
        op: String,
    },
    /// A tensor, by name.
    Tensor {
        /// The tensor's name.
        tensor: String,
    },
    /// A symbol, by name.
    Symbol {
        /// The symbol's name.
        symbol: String,
    },
    /// A field of the document that is not a node or tensor (e.g. `signature.inputs[2]`).
    Field {
        /// The field's path in the document (`signature.inputs[2]`).
        path: String,
    },
    /// A command-line argument.
    Argument {
        /// The argument as written (`--bind M=x`).
        argument: String,
    },
    /// A Tiny IR node (ids print as `n12`).
    TinyNode {
        /// The node's id as printed (`n12`).
        tiny_node: String,
    },
    /// The whole input.
    Document,
}

impl Serialize for Location {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match self {
            Location::Source { file, line, column } => {
                m.serialize_entry("file", file)?;
                m.serialize_entry("line", line)?;
                m.serialize_entry("column", column)?;
            }
            Location::Node { node, op } => {
                m.serialize_entry("node", node)?;
                m.serialize_entry("op", op)?;
            }
            Location::Tensor { tensor } => m.serialize_entry("tensor", tensor)?,
            Location::Symbol { symbol } => m.serialize_entry("symbol", symbol)?,
            Location::Field { path } => m.serialize_entry("field", path)?,
            Location::Argument { argument } => m.serialize_entry("argument", argument)?,
            Location::TinyNode { tiny_node } => m.serialize_entry("tiny_node", tiny_node)?,
            Location::Document => m.serialize_entry("document", &true)?,
        }
        m.end()
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Source { file, line, column } => write!(f, "{file}:{line}:{column}"),
            Location::Node { node, op } => write!(f, "node `{node}` ({op})"),
            Location::Tensor { tensor } => write!(f, "tensor `{tensor}`"),
            Location::Symbol { symbol } => write!(f, "symbol `{symbol}`"),
            Location::Field { path } => write!(f, "field `{path}`"),
            Location::Argument { argument } => write!(f, "argument `{argument}`"),
            Location::TinyNode { tiny_node } => write!(f, "Tiny IR node {tiny_node}"),
            Location::Document => f.write_str("document"),
        }
    }
}

/// Error or warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The input is rejected (exit status 2).
    Error,
    /// A remark; the input is accepted.
    Warning,
}

/// One diagnostic.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnostic {
    /// Stable code (`E0xxx`), the key tests and tools match on (see `docs/diagnostics.md`).
    pub code: &'static str,
    /// The code's name (`ShapeMismatch`, `UnknownOp`, …).
    pub kind: &'static str,
    /// Error or warning.
    pub severity: Severity,
    /// Where the problem is.
    pub at: Location,
    /// What is wrong, in one sentence.
    pub why: String,
    /// How to fix it.
    pub suggestion: String,
    /// Extra facts (shapes, dtypes, …), shown in JSON and after `why` in text.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub details: serde_json::Map<String, serde_json::Value>,
}

impl Diagnostic {
    /// An error with the given code (one of the registry's, [`codes`]).
    pub fn error(
        (code, kind): Code,
        at: Location,
        why: impl Into<String>,
        suggestion: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            code,
            kind,
            severity: Severity::Error,
            at,
            why: why.into(),
            suggestion: suggestion.into(),
            details: serde_json::Map::new(),
        }
    }

    /// A warning with the given code (one of the registry's, [`codes`]).
    pub fn warning(
        code: Code,
        at: Location,
        why: impl Into<String>,
        suggestion: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, at, why, suggestion)
        }
    }

    /// `E0000 UnreadableInput`: the file at `path` cannot be read (`why`: the OS error, or what
    /// is wrong with its bytes).
    pub fn unreadable_input(path: &std::path::Path, why: impl Into<String>) -> Diagnostic {
        Diagnostic::error(
            codes::UNREADABLE_INPUT,
            Location::Argument {
                argument: path.display().to_string(),
            },
            why,
            "check the path and the file's permissions",
        )
    }

    /// Adds a `key: value` detail.
    pub fn with(mut self, key: &str, value: impl fmt::Display) -> Diagnostic {
        self.details.insert(
            key.to_string(),
            serde_json::Value::String(value.to_string()),
        );
        self
    }

    /// Replaces the location (used when a lower layer's error is attributed to a graph node).
    pub fn at(mut self, at: Location) -> Diagnostic {
        self.at = at;
        self
    }
}

impl fmt::Display for Diagnostic {
    /// `error[E1001] BroadcastMismatch at node `add` (Elementwise): why` then indented details
    /// and `help: suggestion`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        writeln!(
            f,
            "{sev}[{}] {} at {}: {}",
            self.code, self.kind, self.at, self.why
        )?;
        for (k, v) in &self.details {
            match v {
                serde_json::Value::String(s) => writeln!(f, "    {k}: {s}")?,
                other => writeln!(f, "    {k}: {other}")?,
            }
        }
        write!(f, "  help: {}", self.suggestion)
    }
}

/// A non-empty list of diagnostics; the error type of every user-facing entry point.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// A list of one diagnostic.
    pub fn one(d: Diagnostic) -> Diagnostics {
        Diagnostics(vec![d])
    }

    /// The first diagnostic's code (tests match on it).
    pub fn first_code(&self) -> &'static str {
        self.0.first().map(|d| d.code).unwrap_or("")
    }

    /// Every diagnostic's code, in order.
    pub fn codes(&self) -> Vec<&'static str> {
        self.0.iter().map(|d| d.code).collect()
    }

    /// `{"diagnostics": [...]}` as seed 001 §14 shows it.
    pub fn to_json(&self) -> String {
        let v = serde_json::json!({ "diagnostics": self.0 });
        serde_json::to_string_pretty(&v).unwrap_or_else(|_| "{}".to_string())
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Diagnostics {
        Diagnostics::one(d)
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

impl Serialize for Diagnostics {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_serialize_flat() {
        let d = Diagnostic::error(
            codes::BROADCAST_MISMATCH,
            Location::Node {
                node: "add".into(),
                op: "Elementwise".into(),
            },
            "why",
            "fix",
        )
        .with("lhs", "[2, 3]");
        let v = serde_json::to_value(&d).expect("json");
        assert_eq!(
            v["at"],
            serde_json::json!({"node": "add", "op": "Elementwise"})
        );
        assert_eq!(v["details"]["lhs"], "[2, 3]");
        let doc = serde_json::to_value(Location::Document).expect("json");
        assert_eq!(doc, serde_json::json!({"document": true}));
    }

    #[test]
    fn text_form_has_code_kind_location_and_help() {
        let d = Diagnostic::error(
            codes::MISSING_INPUT,
            Location::Tensor { tensor: "W".into() },
            "no value",
            "pass it",
        );
        assert_eq!(
            d.to_string(),
            "error[E0303] MissingInput at tensor `W`: no value\n  help: pass it"
        );
    }
}

/// Why `run` (or another CLI command) failed: diagnostics, and whether the failure is the
/// compiler's fault (exit status 1) rather than the user's (exit status 2).
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// What went wrong.
    pub diagnostics: Diagnostics,
    /// True for compiler bugs (a broken invariant), false for problems in the user's input.
    pub internal: bool,
}

impl std::fmt::Display for Failure {
    /// The diagnostics in their text form; a compiler bug says so first.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.internal {
            f.write_str("internal error (a compiler bug): ")?;
        }
        write!(f, "{}", self.diagnostics)
    }
}

impl std::error::Error for Failure {}

impl Failure {
    /// A problem in the user's input.
    pub fn user(d: impl Into<Diagnostics>) -> Failure {
        Failure {
            diagnostics: d.into(),
            internal: false,
        }
    }

    /// A compiler bug.
    pub fn internal(d: impl Into<Diagnostics>) -> Failure {
        Failure {
            diagnostics: d.into(),
            internal: true,
        }
    }
}

impl From<Diagnostics> for Failure {
    fn from(d: Diagnostics) -> Failure {
        Failure::user(d)
    }
}

impl From<Diagnostic> for Failure {
    fn from(d: Diagnostic) -> Failure {
        Failure::user(d)
    }
}

/// `E0317`: the optimizer could not compile a graph the front end accepted (a compiler bug).
pub(crate) fn optimizer_bug(why: &str) -> Diagnostic {
    Diagnostic::error(
        codes::OPTIMIZER_FAILED,
        Location::Document,
        format!("the optimizer could not compile this graph: {why}"),
        "this is a compiler bug; run without --optimized to get the reference result, and \
         report the graph.json",
    )
}
