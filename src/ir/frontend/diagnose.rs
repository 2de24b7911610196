//! Diagnostic codes of the front end (`docs/diagnostics.md`) and small helpers to build them.

use crate::diag::{Diagnostic, Location};

/// `(code, kind)` pairs of the front end. `E1001`–`E1007` are shared with Tiny IR's
/// `TinyError::code_kind`.
pub(crate) mod code {
    pub type Code = (&'static str, &'static str);
    pub const MALFORMED_JSON: Code = ("E0001", "MalformedJson");
    pub const UNKNOWN_OP: Code = ("E0002", "UnknownOp");
    pub const UNKNOWN_ATTRIBUTE: Code = ("E0003", "UnknownAttribute");
    pub const UNKNOWN_DTYPE: Code = ("E0004", "UnknownDtype");
    pub const INVALID_FIELD: Code = ("E0005", "InvalidField");
    pub const UNDECLARED_TENSOR: Code = ("E0101", "UndeclaredTensor");
    pub const DOUBLY_PRODUCED: Code = ("E0102", "DoublyProducedTensor");
    pub const DANGLING_REFERENCE: Code = ("E0103", "DanglingReference");
    pub const CYCLE: Code = ("E0104", "Cycle");
    pub const DUPLICATE_NODE_NAME: Code = ("E0105", "DuplicateNodeName");
    pub const UNPRODUCED_TENSOR: Code = ("E0106", "UnproducedTensor");
    pub const UNBOUND_SYMBOL: Code = ("E0201", "UnboundSymbol");
    pub const CONFLICTING_BINDING: Code = ("E0202", "ConflictingSymbolBinding");
    pub const SHAPE_OVERFLOW: Code = ("E0203", "ShapeOverflow");
    pub const UNKNOWN_SYMBOL: Code = ("E0204", "UnknownSymbol");
    pub const NEGATIVE_SIZE: Code = ("E0205", "NegativeSize");
    pub const NPY_SHAPE_MISMATCH: Code = ("E0302", "NpyShapeMismatch");
    pub const BROADCAST_MISMATCH: Code = ("E1001", "BroadcastMismatch");
    pub const AXIS_SIZE_MISMATCH: Code = ("E1002", "AxisSizeMismatch");
    pub const INVALID_PERMUTATION: Code = ("E1003", "InvalidPermutation");
    pub const AXIS_OUT_OF_RANGE: Code = ("E1004", "AxisOutOfRange");
    pub const WRONG_INPUT_COUNT: Code = ("E1005", "WrongInputCount");
    pub const DTYPE_MISMATCH: Code = ("E1006", "DtypeMismatch");
    pub const INVALID_EXPAND: Code = ("E1007", "InvalidExpand");
    pub const RANK_MISMATCH: Code = ("E1011", "RankMismatch");
    pub const SYMBOLIC_HEAD_DIM: Code = ("E1012", "SymbolicHeadDim");
    pub const UNSUPPORTED_DTYPE: Code = ("E1013", "UnsupportedDtype");
}

/// Builds an error diagnostic from a `(code, kind)` pair.
pub(crate) fn diag(
    c: code::Code,
    at: Location,
    why: impl Into<String>,
    suggestion: impl Into<String>,
) -> Diagnostic {
    Diagnostic::error(c.0, c.1, at, why, suggestion)
}

/// `Location::Field`.
pub(crate) fn field(path: impl Into<String>) -> Location {
    Location::Field { path: path.into() }
}

/// `Location::Tensor`.
pub(crate) fn tensor_loc(name: &str) -> Location {
    Location::Tensor {
        tensor: name.to_string(),
    }
}

/// `Location::Node`.
pub(crate) fn node_loc(node: &str, op: &str) -> Location {
    Location::Node {
        node: node.to_string(),
        op: op.to_string(),
    }
}

/// Levenshtein distance (by chars).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The candidate closest to `name` (case-insensitive equality first, then edit distance within
/// a third of the longer name, at least 2).
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = name.to_ascii_lowercase();
    let mut best: Option<(usize, &'a str)> = None;
    for c in candidates {
        let d = if c.to_ascii_lowercase() == lower {
            0
        } else {
            edit_distance(&lower, &c.to_ascii_lowercase())
        };
        let limit = (name.chars().count().max(c.chars().count()) / 3).max(2);
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// "did you mean `x`?" or a list of the valid names.
pub(crate) fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str> + Clone,
    what: &str,
) -> String {
    match closest(name, candidates.clone()) {
        Some(c) => format!("did you mean `{c}`?"),
        None => {
            let all: Vec<String> = candidates.into_iter().map(|c| format!("`{c}`")).collect();
            if all.is_empty() {
                format!("remove it: this op takes no {what}")
            } else {
                format!("valid {what}: {}", all.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_names() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(closest("Matmul", ["MatMul", "GEMM"]), Some("MatMul"));
        assert_eq!(closest("Gemm", ["MatMul", "GEMM"]), Some("GEMM"));
        assert_eq!(closest("strides", ["stride", "pad"]), Some("stride"));
        assert_eq!(closest("zzzzzz", ["stride", "pad"]), None);
    }
}
