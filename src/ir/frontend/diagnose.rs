//! Small helpers that build the front end's diagnostics (its codes are in the registry,
//! `crate::diag::codes`; `docs/diagnostics.md`).

use crate::diag::codes::Code;
use crate::diag::{Diagnostic, Location};

/// Builds an error diagnostic from a `(code, kind)` pair.
pub(crate) fn diag(
    c: Code,
    at: Location,
    why: impl Into<String>,
    suggestion: impl Into<String>,
) -> Diagnostic {
    Diagnostic::error(c, at, why, suggestion)
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
