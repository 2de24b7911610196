//! Diagnostic codes of the DSL (`E07xx`, `docs/diagnostics.md`) and a constructor that locates a
//! diagnostic at a source position.

use super::lex::Pos;
use crate::diag::{Diagnostic, Location};

/// `(code, kind)`.
pub type Code = (&'static str, &'static str);

/// A token the grammar does not allow there, an unknown character, a malformed number.
pub const SYNTAX: Code = ("E0700", "DslSyntax");
/// A reserved word used as a name.
pub const RESERVED_WORD: Code = ("E0701", "ReservedWord");
/// A variable read before it is assigned.
pub const UNDEFINED_NAME: Code = ("E0702", "UndefinedName");
/// A call of a name that is neither a graph of the program nor a builtin.
pub const UNKNOWN_FUNCTION: Code = ("E0703", "UnknownFunction");
/// The program has no `graph main`.
pub const MISSING_MAIN: Code = ("E0704", "MissingMain");
/// A graph, parameter, output or shape variable defined twice.
pub const DUPLICATE_DEFINITION: Code = ("E0705", "DuplicateDefinition");
/// A shape variable used but not declared in `graph<…>`, or without a value.
pub const UNDECLARED_SHAPE_VARIABLE: Code = ("E0706", "UndeclaredShapeVariable");
/// Subgraph calls nested deeper than the maximum depth (endless recursion).
pub const RECURSION_TOO_DEEP: Code = ("E0707", "RecursionTooDeep");
/// Wrong number of call arguments, destructured names or returned values.
pub const ARITY_MISMATCH: Code = ("E0708", "ArityMismatch");
/// A subgraph argument or result whose dtype or shape differs from the declared type.
pub const TYPE_MISMATCH: Code = ("E0709", "TypeMismatch");
/// Operands of a binary op with different shapes, neither of them a scalar.
pub const IMPLICIT_BROADCAST: Code = ("E0710", "ImplicitBroadcast");
/// A scalar literal where a tensor is needed (a subgraph input or result, a non-elementwise op).
pub const SCALAR_ONLY: Code = ("E0711", "ScalarOnlyExpression");
/// A keyword argument that is malformed, repeated, or given to a subgraph.
pub const INVALID_ARGUMENT: Code = ("E0712", "InvalidKeywordArgument");
/// A graph body without a `return`, or statements after it.
pub const MISSING_RETURN: Code = ("E0713", "MissingReturn");
/// A shape variable bound to a computed size where an attribute needs an integer or a symbol.
pub const COMPLEX_SHAPE_BINDING: Code = ("E0714", "ComplexShapeBinding");
/// A graph that `decompile` cannot express in the DSL.
pub const UNDECOMPILABLE: Code = ("E0720", "Undecompilable");

/// An error diagnostic at `file:line:column`.
pub fn dsl_diag(
    c: Code,
    file: &str,
    pos: Pos,
    why: impl Into<String>,
    suggestion: impl Into<String>,
) -> Diagnostic {
    Diagnostic::error(c.0, c.1, source(file, pos), why, suggestion)
}

/// `Location::Source` of a position.
pub fn source(file: &str, pos: Pos) -> Location {
    Location::Source {
        file: file.to_string(),
        line: pos.line,
        column: pos.column,
    }
}
