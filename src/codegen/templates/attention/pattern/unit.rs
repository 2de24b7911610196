//! Size-1 axes in the attention pattern: the optimizer reads an iter of extent 1 (a batch,
//! head or query axis of size 1) as index 0, so neither operand mentions it and the read of `P`
//! in `second` names no axis for it (issue 15).

use crate::ir::region::Region;
use std::collections::BTreeMap;

/// `second`'s output column among `rest` (its iters the read of `P` does not name), the
/// others matched in order to `first`'s unit iters read as index 0 (`unit_firsts`, into
/// `corr`): all of extent 1, one more of them than `unit_firsts`; the column is the last one of
/// extent ≠ 1, else the last.
pub(super) fn unit_corr(
    second: &Region,
    s2: &[crate::ir::dim::Dim],
    rest: &[&str],
    unit_firsts: &[String],
    corr: &mut BTreeMap<String, String>,
) -> Option<String> {
    if rest.len() != unit_firsts.len() + 1 {
        return None;
    }
    let col = rest
        .iter()
        .rposition(|n| !unit_iter(second, s2, n))
        .unwrap_or(rest.len() - 1);
    let units = rest
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != col)
        .map(|(_, n)| *n);
    for (f, x) in unit_firsts.iter().zip(units) {
        if !unit_iter(second, s2, x) {
            return None;
        }
        corr.insert(f.clone(), x.to_string());
    }
    Some(rest[col].to_string())
}

/// Whether iter `name` of `r` has extent 1 (a size-1 batch, head or query axis, whose reads
/// the optimizer may write as index 0 rather than the iter).
pub(super) fn unit_iter(r: &Region, sizes: &[crate::ir::dim::Dim], name: &str) -> bool {
    r.iters
        .iter()
        .position(|i| i.name == name)
        .is_some_and(|i| sizes[i].as_int() == Some(1))
}

/// The query axis among `candidates` (the iters the key side does not mention): the only one,
/// else the only one of extent ≠ 1 (an iter of extent 1 read as index 0 is mentioned by
/// neither side: a batch axis), else, all of extent 1, the last (any choice is the same
/// single point).
pub(super) fn one_query<'a>(r: &Region, candidates: &[&'a str]) -> Option<&'a str> {
    if let [q] = candidates {
        return Some(q);
    }
    let sizes = crate::ir::region::verify::verify(r).ok()?.iter_sizes;
    let wide: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|n| !unit_iter(r, &sizes, n))
        .collect();
    match wide.as_slice() {
        [q] => Some(q),
        [] => candidates.last().copied(),
        _ => None,
    }
}
