//! Unit tests of the `UnguardedAccess` check: reads that never run (an empty iteration space, a
//! guard that holds nowhere) are not rejected, and the exact decision by enumeration accepts a
//! strided ConvTranspose's guarded read the intervals cannot bound while still rejecting a real
//! out-of-bounds read with the offending range.

use super::{verify, verify_with, RegionError};
use crate::ir::region::Region;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn memref(shape: Value) -> Value {
    json!({"shape": shape, "alignment": 16, "noalias": true, "layout": {"kind": "row_major"}})
}

/// `Y[i] = expr` over `i < n` (a size or a symbol), reading `X [4]`.
fn region(n: Value, expr: Value) -> Region {
    Region::from_json_value(json!({"region": {
        "name": "t",
        "iters": [{"name": "i", "size": n}],
        "inputs": [{"name": "X", "dtype": "fp32", "memref": memref(json!([4]))}],
        "outputs": [{"name": "Y", "dtype": "fp32", "memref": memref(json!([n])), "materialize": "gmem"}],
        "lets": [{"let": "a", "expr": expr}],
        "yield": [{"from": "a", "to": "Y"}]
    }}))
    .unwrap_or_else(|e| panic!("{e}"))
}

fn read(index: Value) -> Value {
    json!({"read": {"tensor": "X", "map": [index]}})
}

fn unguarded(r: Result<super::Checked, RegionError>) -> Option<(i64, i64)> {
    match r {
        Err(RegionError::UnguardedAccess { lo, hi, .. }) => Some((lo, hi)),
        Err(e) => panic!("unexpected {e}"),
        Ok(_) => None,
    }
}

#[test]
fn an_empty_iteration_space_reads_nothing() {
    // X[i + 4] is outside X for every i, but there is no i (a slice to empty).
    assert_eq!(
        unguarded(verify(&region(json!(0), read(json!({"add": ["i", 4]}))))),
        None
    );
    assert_eq!(
        unguarded(verify(&region(json!(2), read(json!({"add": ["i", 4]}))))),
        Some((4, 5))
    );
    // A symbol bound to 0 at run time (softmax over `T = 0` rows).
    let r = region(json!("T"), read(json!({"add": ["i", -1]})));
    let zero: BTreeMap<String, i64> = [("T".to_string(), 0)].into();
    assert_eq!(unguarded(verify_with(&r, &zero)), None);
    let three: BTreeMap<String, i64> = [("T".to_string(), 3)].into();
    assert_eq!(unguarded(verify_with(&r, &three)), Some((-1, -1)));
}

#[test]
fn a_guard_that_never_holds_makes_its_branch_dead() {
    // A pad covering the whole output: the guard `i + 5 < 4` never holds for i >= 0.
    let dead = json!({"select": {"pred": {"lt": [{"add": ["i", 5]}, 4]},
        "then": read(json!({"add": ["i", 5]})), "else": 0.0}});
    assert_eq!(unguarded(verify(&region(json!(3), dead))), None);
    // Contradictory guards on an axis the index does not use: the read at the constant index 4
    // (outside X) never runs (a pad of an empty tensor, read through a view).
    let contradiction = json!({"select": {"pred": {"and": [{"ge": ["i", 1]}, {"lt": ["i", 1]}]},
        "then": read(json!(4)), "else": 0.0}});
    assert_eq!(unguarded(verify(&region(json!(3), contradiction))), None);
    let satisfiable = json!({"select": {"pred": {"and": [{"ge": ["i", 1]}, {"lt": ["i", 2]}]},
        "then": read(json!(4)), "else": 0.0}});
    assert_eq!(
        unguarded(verify(&region(json!(3), satisfiable))),
        Some((4, 4))
    );
    // An empty `or` is false too.
    let never = json!({"select": {"pred": {"or": []}, "then": read(json!(7)), "else": 0.0}});
    assert_eq!(unguarded(verify(&region(json!(3), never))), None);
}

/// `Y[m] = Σ_k sel(2k + m >= 1 ∧ (m+1) mod 2 < 1, X[k + (m+1)//2 - 1])` over `m < 7`, `k < 2`:
/// ConvTranspose's stride-2 input dilation; the read's lower bound follows from the guards only
/// through the floordiv.
fn strided(rows: i64) -> Region {
    let q = json!({"floordiv": [{"add": ["i", 1]}, 2]});
    let body = json!({"select": {
        "pred": {"and": [
            {"ge": [{"add": [{"mul": [2, "k"]}, "i"]}, 1]},
            {"lt": [{"add": ["i", {"mul": [-2, q]}, 1]}, 1]}
        ]},
        "then": read(json!({"add": ["k", q, -1]})),
        "else": 0.0
    }});
    region(
        json!(rows),
        json!({"reduce": {"op": "sum", "axes": ["k"], "extents": {"k": 2}, "dtype": "fp32", "body": body}}),
    )
}

#[test]
fn guards_through_a_floordiv_are_decided_exactly() {
    // m < 7: the index k + (m+1)//2 - 1 reaches 0..=3 where the guards hold.
    assert_eq!(unguarded(verify(&strided(7))), None);
    // m < 9: it reaches 4 (m = 7, k = 1): a real violation, reported with the exact range.
    assert_eq!(unguarded(verify(&strided(9))), Some((4, 4)));
}
