//! The reference evaluator as the oracle of the IndexBook's composed movement chains
//! (`crate::ir::indexbook`): the test lives beside the evaluator so that `ir` does not depend on
//! `eval` (no module cycle, issue 20).

use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::indexbook::{compose_chain, Lin, Ranges, Var};
use crate::ir::tiny::{AffineIndex, Builder, NodeId};
use std::collections::BTreeMap;

/// Checks the composed map of a movement chain on `x` against the reference evaluator: `x`
/// holds its own flat index, every PAD fills -1, and the output at each point must be `x` at the
/// map (in the in-bounds piece) or -1 (in the pad piece).
fn check_chain(shape: &[usize], build: impl Fn(&mut Builder, NodeId) -> NodeId) {
    use crate::tensor::Tensor;
    let mut b = Builder::new();
    let dims: Vec<Dim> = shape.iter().map(|d| Dim::int(*d as i64)).collect();
    let x = b.input("x", DType::F32, dims).unwrap();
    let out = build(&mut b, x);
    b.output("y", out);
    let prog = b.finish();
    let n: usize = shape.iter().product();
    let iota: Vec<f64> = (0..n).map(|v| v as f64).collect();
    let inputs = [(
        "x".to_string(),
        Tensor::from_f64(DType::F32, shape.to_vec(), &iota),
    )]
    .into();
    let syms = BTreeMap::new();
    let res = super::evaluate(&prog, &syms, &inputs).expect("evaluates");
    let y = res["y"].to_f64();
    let out_shape: Vec<i64> = prog
        .node(out)
        .shape
        .iter()
        .map(|d| d.as_int().unwrap())
        .collect();
    let ranges = Ranges {
        iters: &prog.node(out).shape,
        reduces: &[],
    };
    let ident = (0..out_shape.len()).map(|j| Lin::var(Var::I(j))).collect();
    let read = compose_chain(&prog, out, ident, &ranges).unwrap();
    assert_eq!(read.target, x);
    assert!(!read.map.iter().any(Lin::is_non_scop));
    let shown: Vec<String> = read.map.iter().map(|e| e.to_string()).collect();
    for (flat, got) in y.iter().enumerate() {
        let mut idx = vec![0i64; out_shape.len()];
        let mut rest = flat as i64;
        for (k, s) in out_shape.iter().enumerate().rev() {
            idx[k] = rest % s;
            rest /= s;
        }
        let inb = read.pad_bounds.iter().all(|(e, s)| {
            let v = e.eval_at(&idx, &[], &syms).unwrap();
            0 <= v && v < s.as_int().unwrap()
        });
        let want = if inb {
            let mut lin = 0i64;
            for (e, s) in read.map.iter().zip(shape) {
                let v = e.eval_at(&idx, &[], &syms).unwrap();
                assert!((0..*s as i64).contains(&v), "{shown:?} at {idx:?}");
                lin = lin * *s as i64 + v;
            }
            lin as f64
        } else {
            -1.0
        };
        assert_eq!(*got, want, "map {shown:?} at {idx:?}");
    }
}

fn ints(v: &[i64]) -> Vec<Dim> {
    v.iter().map(|d| Dim::int(*d)).collect()
}

#[test]
fn composed_maps_agree_with_the_evaluator() {
    // A strided padded window (conv).
    check_chain(&[2, 5, 5], |b, x| {
        let p = b.pad(x, vec![(0, 0), (1, 1), (1, 2)], -1.0).unwrap();
        let map = vec![
            AffineIndex::new(vec![(0, 1)], 0),
            AffineIndex::new(vec![(1, 2), (3, 1)], 0),
            AffineIndex::new(vec![(2, 2), (4, 1)], 0),
        ];
        b.view(p, ints(&[2, 3, 3, 3, 3]), map).unwrap()
    });
    // Reshape, transpose, flip, strided shrink.
    check_chain(&[4, 6], |b, x| {
        let r = b.reshape(x, ints(&[3, 8])).unwrap();
        let t = b.permute(r, vec![1, 0]).unwrap();
        let f = b.flip(t, vec![0]).unwrap();
        b.shrink(f, ints(&[1, 0]), ints(&[7, 3]), vec![2, 1])
            .unwrap()
    });
    // Reshapes that regroup, a broadcast, a permutation.
    check_chain(&[2, 3, 4], |b, x| {
        let r = b.reshape(x, ints(&[6, 4])).unwrap();
        let r = b.reshape(r, ints(&[4, 1, 6])).unwrap();
        let e = b.expand(r, ints(&[4, 5, 6])).unwrap();
        b.permute(e, vec![2, 0, 1]).unwrap()
    });
    // A pad read through merges and splits.
    check_chain(&[3, 4], |b, x| {
        let p = b.pad(x, vec![(1, 0), (0, 2)], -1.0).unwrap();
        let r = b.reshape(p, ints(&[24])).unwrap();
        let r = b.reshape(r, ints(&[2, 12])).unwrap();
        b.shrink(r, ints(&[0, 1]), ints(&[2, 12]), vec![1, 3])
            .unwrap()
    });
    // Flip, pad, step, unsqueeze, broadcast.
    check_chain(&[5], |b, x| {
        let f = b.flip(x, vec![0]).unwrap();
        let p = b.pad(f, vec![(2, 1)], -1.0).unwrap();
        let s = b.shrink(p, ints(&[1]), ints(&[8]), vec![3]).unwrap();
        let r = b.reshape(s, ints(&[3, 1])).unwrap();
        b.expand(r, ints(&[3, 4])).unwrap()
    });
}
