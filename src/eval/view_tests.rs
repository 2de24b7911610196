//! Unit tests of views.
use super::*;

#[test]
fn placeholder() {
    let v = View::contiguous(&[2, 3]);
    assert!(v.is_dense_row_major(6));
}
