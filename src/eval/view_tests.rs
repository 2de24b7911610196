//! Unit tests of views: composition, reshape merging/splitting, guards, layers.
use super::*;

/// Every element of `v` over `storage`, row-major (fills where guards fail).
fn dense(v: &View, storage: &[f64]) -> Vec<f64> {
    let shape = v.shape().to_vec();
    let n = numel(&shape);
    let mut idx = vec![0i64; shape.len()];
    let mut scratch = Vec::new();
    let mut out = Vec::with_capacity(n);
    for mut flat in 0..n {
        for (i, d) in idx.iter_mut().zip(&shape).rev() {
            *i = (flat % d) as i64;
            flat /= d;
        }
        out.push(match v.locate(&idx, &mut scratch) {
            Ok(a) => storage[a as usize],
            Err(fill) => fill,
        });
    }
    out
}

fn iota(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

#[test]
fn contiguous_is_dense() {
    let v = View::contiguous(&[2, 3]);
    assert!(v.is_dense_row_major(6));
    assert_eq!(v.top().addr.c, vec![3, 1]);
    assert_eq!(dense(&v, &iota(6)), iota(6));
}

#[test]
fn permute_expand_flip_compose_into_one_layer() {
    let mut v = View::contiguous(&[2, 3]);
    v.permute(&[1, 0]).unwrap();
    assert_eq!(v.top().addr.c, vec![1, 3]);
    assert_eq!(dense(&v, &iota(6)), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    v.flip(&[0]).unwrap();
    assert_eq!(dense(&v, &iota(6)), vec![2.0, 5.0, 1.0, 4.0, 0.0, 3.0]);
    let mut e = View::contiguous(&[1, 3]);
    e.expand(&[2, 3]).unwrap();
    assert_eq!(e.top().addr.c, vec![0, 1]);
    assert_eq!(dense(&e, &iota(3)), vec![0.0, 1.0, 2.0, 0.0, 1.0, 2.0]);
    assert_eq!(v.layers.len(), 1);
    assert!(e.expand(&[2, 4]).is_err());
}

#[test]
fn shrink_with_step_composes() {
    let mut v = View::contiguous(&[10]);
    v.shrink(&[1], &[10], &[4]).unwrap();
    assert_eq!(v.shape(), &[3]);
    assert_eq!(dense(&v, &iota(10)), vec![1.0, 5.0, 9.0]);
    assert!(v.shrink(&[0], &[4], &[1]).is_err());
}

#[test]
fn pad_adds_guards_and_same_fill_composes() {
    let mut v = View::contiguous(&[2]);
    v.pad(&[(1, 2)], 9.0).unwrap();
    assert_eq!(dense(&v, &[5.0, 6.0]), vec![9.0, 5.0, 6.0, 9.0, 9.0]);
    v.pad(&[(1, 0)], 9.0).unwrap();
    assert_eq!(v.layers.len(), 1);
    assert_eq!(v.top().guards.len(), 2);
    assert_eq!(dense(&v, &[5.0, 6.0]), vec![9.0, 9.0, 5.0, 6.0, 9.0, 9.0]);
    v.pad(&[(0, 1)], -1.0).unwrap();
    assert_eq!(v.layers.len(), 2);
    assert_eq!(
        dense(&v, &[5.0, 6.0]),
        vec![9.0, 9.0, 5.0, 6.0, 9.0, 9.0, -1.0]
    );
}

#[test]
fn shrink_of_pad_keeps_guards_in_new_coordinates() {
    let mut v = View::contiguous(&[3, 3]);
    v.pad(&[(1, 1), (1, 1)], 0.5).unwrap();
    v.shrink(&[0, 1], &[5, 5], &[2, 3]).unwrap();
    assert_eq!(v.shape(), &[3, 2]);
    // rows 0, 2, 4 of the padded 5x5; columns 1, 4.
    assert_eq!(dense(&v, &iota(9)), vec![0.5, 0.5, 3.0, 0.5, 0.5, 0.5]);
}

#[test]
fn reshape_split_and_merge_compose() {
    let mut v = View::contiguous(&[6, 4]);
    v.reshape(&[2, 3, 1, 4]).unwrap();
    assert_eq!(v.layers.len(), 1);
    assert_eq!(v.top().addr.c, vec![12, 4, 0, 1]);
    v.reshape(&[24]).unwrap();
    assert_eq!(v.layers.len(), 1);
    assert!(v.is_dense_row_major(24));
    // A permuted view whose merged dims are still contiguous: [2,3,4] -> permute(0,2,1)
    // -> reshape [2, 12] is not contiguous; reshape [2,4,3] -> [8,3] is.
    let mut p = View::contiguous(&[2, 3, 4]);
    p.permute(&[0, 2, 1]).unwrap();
    p.reshape(&[8, 3]).unwrap();
    assert_eq!(
        p.layers.len(),
        2,
        "d0 and d1 of the permuted view are not mergeable"
    );
    let mut q = View::contiguous(&[2, 3, 4]);
    q.permute(&[1, 0, 2]).unwrap();
    q.reshape(&[3, 8]).unwrap();
    assert_eq!(q.layers.len(), 2);
    let mut r = View::contiguous(&[2, 3, 4]);
    r.permute(&[2, 0, 1]).unwrap();
    r.reshape(&[4, 6]).unwrap();
    assert_eq!(
        r.layers.len(),
        1,
        "axes 0 and 1 stay adjacent and contiguous"
    );
    assert_eq!(
        dense(&r, &iota(24))[..7],
        [0.0, 4.0, 8.0, 12.0, 16.0, 20.0, 1.0]
    );
}

#[test]
fn reshape_of_permuted_pushes_a_row_major_layer() {
    let mut v = View::contiguous(&[2, 3]);
    v.permute(&[1, 0]).unwrap();
    v.reshape(&[6]).unwrap();
    assert_eq!(v.layers.len(), 2);
    assert_eq!(dense(&v, &iota(6)), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    // Further ops compose into the new top layer.
    v.flip(&[0]).unwrap();
    v.reshape(&[3, 2]).unwrap();
    assert_eq!(v.layers.len(), 2);
    assert_eq!(dense(&v, &iota(6)), vec![5.0, 2.0, 4.0, 1.0, 3.0, 0.0]);
}

#[test]
fn reshape_across_a_padded_axis_pushes_a_layer() {
    let mut v = View::contiguous(&[2, 2]);
    v.pad(&[(0, 0), (1, 0)], 7.0).unwrap();
    v.reshape(&[6]).unwrap();
    assert_eq!(v.layers.len(), 2);
    assert_eq!(
        dense(&v, &[1.0, 2.0, 3.0, 4.0]),
        vec![7.0, 1.0, 2.0, 7.0, 3.0, 4.0]
    );
    // Splitting or inserting size-1 axes next to a padded axis still composes.
    let mut w = View::contiguous(&[2, 2]);
    w.pad(&[(0, 0), (1, 0)], 7.0).unwrap();
    w.reshape(&[1, 2, 1, 3]).unwrap();
    assert_eq!(w.layers.len(), 1);
    assert_eq!(
        dense(&w, &[1.0, 2.0, 3.0, 4.0]),
        vec![7.0, 1.0, 2.0, 7.0, 3.0, 4.0]
    );
}

#[test]
fn affine_view_windows_and_bounds() {
    let mut v = View::contiguous(&[5]);
    let map = [AffineIndex::new(vec![(0, 2), (1, 1)], 0)];
    v.affine(&map, &[2, 2]).unwrap();
    assert_eq!(dense(&v, &iota(5)), vec![0.0, 1.0, 2.0, 3.0]);
    let mut w = View::contiguous(&[5]);
    assert!(matches!(
        w.affine(&map, &[3, 2]),
        Err(ViewError::OutOfBounds(_))
    ));
    let neg = [AffineIndex::new(vec![(0, -1)], 4)];
    w.affine(&neg, &[5]).unwrap();
    assert_eq!(dense(&w, &iota(5)), vec![4.0, 3.0, 2.0, 1.0, 0.0]);
}

#[test]
fn layout_view_addresses_permuted_storage() {
    // shape [2,3] stored as [3,2] (axis 0 innermost).
    let v = View::with_layout(&[2, 3], &[1, 0]);
    assert_eq!(v.top().addr.c, vec![1, 2]);
    assert!(!v.is_dense_row_major(6));
}

#[test]
fn guard_interval_matches_brute_force() {
    for g0 in -7i64..7 {
        for gc in -3i64..=3 {
            for size in 0i64..5 {
                for len in 0usize..9 {
                    let ok: Vec<usize> = (0..len)
                        .filter(|t| {
                            let v = g0 + gc * *t as i64;
                            v >= 0 && v < size
                        })
                        .collect();
                    let (lo, hi) = guard_interval(g0, gc, size, len);
                    let got: Vec<usize> = (lo..hi).collect();
                    assert_eq!(got, ok, "g0={g0} gc={gc} size={size} len={len}");
                }
            }
        }
    }
}

#[test]
fn empty_reshape_is_fine() {
    let mut v = View::contiguous(&[0, 3]);
    v.reshape(&[3, 0]).unwrap();
    assert_eq!(v.shape(), &[3, 0]);
    assert!(v.reshape(&[1]).is_err());
}
