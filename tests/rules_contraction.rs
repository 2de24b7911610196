//! The contraction phase on random movement chains over a cast (per-rule tests live in
//! `src/rules/contraction_tests.rs`): moving the cast up to the top of the chain never changes a
//! bit of the outputs.

use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::tiny::{AffineIndex, Builder, NodeId, Program};
use dlc_egg::rules::contraction;
use dlc_egg::rules::testing::{check, Compare};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn dims(v: &[i64]) -> Vec<Dim> {
    v.iter().map(|x| Dim::int(*x)).collect()
}

fn ints(b: &Builder, x: NodeId) -> Vec<i64> {
    b.shape(x)
        .iter()
        .map(|d| d.as_int().expect("concrete"))
        .collect()
}

/// One movement op chosen by `kind` (parameters from `seed`).
fn step(b: &mut Builder, x: NodeId, kind: u8, seed: u8) -> NodeId {
    let s = ints(b, x);
    let rank = s.len();
    match kind % 5 {
        0 => {
            let mut perm: Vec<usize> = (0..rank).collect();
            perm.rotate_left(seed as usize % rank.max(1));
            b.permute(x, perm).expect("permute")
        }
        1 => {
            // Insert a size-1 axis, then broadcast it.
            let at = seed as usize % (rank + 1);
            let mut t = s.clone();
            t.insert(at, 1);
            let r = b.reshape(x, dims(&t)).expect("reshape");
            t[at] = 1 + seed as i64 % 3;
            b.expand(r, dims(&t)).expect("expand")
        }
        2 => {
            let pad = s.iter().map(|_| ((seed % 2) as i64, 1)).collect();
            b.pad(x, pad, if seed.is_multiple_of(3) { 0.5 } else { 0.0 })
                .expect("pad")
        }
        3 => {
            let n: i64 = s.iter().product();
            b.reshape(x, dims(&[n])).expect("reshape")
        }
        _ => {
            // A width-2 sliding window over the last axis (when it has 2 or more cells).
            let last = s[rank - 1];
            if last < 2 {
                return x;
            }
            let mut out = s.clone();
            out[rank - 1] = last - 1;
            out.push(2);
            let map = (0..rank)
                .map(|a| {
                    if a + 1 == rank {
                        AffineIndex::new(vec![(a, 1), (rank, 1)], 0)
                    } else {
                        AffineIndex::new(vec![(a, 1)], 0)
                    }
                })
                .collect();
            b.view(x, dims(&out), map).expect("view")
        }
    }
}

fn chain(shape: &[i64], lo: bool, ops: &[(u8, u8)]) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, dims(shape)).expect("input");
    let mut y = b
        .cast(x, if lo { DType::F16 } else { DType::BF16 })
        .expect("cast");
    for (kind, seed) in ops {
        if ints(&b, y).iter().product::<i64>() > 2048 {
            break;
        }
        y = step(&mut b, y, *kind, *seed);
    }
    b.output("y", y);
    b.finish()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn random_chains_over_a_cast_keep_their_outputs(
        shape in prop::collection::vec(1i64..=4, 1..=3),
        lo in any::<bool>(),
        ops in prop::collection::vec((any::<u8>(), any::<u8>()), 1..5),
    ) {
        let p = chain(&shape, lo, &ops);
        let o = check(&p, &contraction::rules(), &BTreeMap::new(), Compare::BitExact);
        prop_assert!(o.stats.saturated(), "{:?}", o.stats);
    }
}
