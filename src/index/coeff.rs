//! Coefficients of a [`super::Quasi`]: the operations the canonical form and the simplifier need.

use std::fmt::{Debug, Display};
use std::hash::Hash;

/// The greatest common divisor of `|a|` and `|b|` (`gcd(0, 0) = 0`).
pub fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    i64::try_from(a).unwrap_or(1)
}

/// A coefficient ring: integers, or symbolic sizes (every symbol a size `>= 0`).
pub trait Coeff: Clone + Debug + Display + Default + Ord + Eq + Hash + Send + 'static {
    /// The integer `v`.
    fn int(v: i64) -> Self;
    /// The value when constant.
    fn as_int(&self) -> Option<i64>;
    /// `self + o`, `None` on overflow.
    fn checked_add(&self, o: &Self) -> Option<Self>;
    /// `self · o`, `None` on overflow.
    fn checked_mul(&self, o: &Self) -> Option<Self>;
    /// `self / d` when provably exact (`None` does not prove it inexact).
    fn div_exact(&self, d: &Self) -> Option<Self>;
    /// `(q, r)` with `self = d·q + r` and `q` integer-valued, the multiples of `d > 0` in `q`
    /// (for integers: Euclidean quotient and remainder).
    fn split_int(&self, d: i64) -> (Self, Self);
    /// `floor(self / d)`, `d > 0`.
    fn floordiv_int(&self, d: i64) -> Self;
    /// Provably `>= 0`.
    fn is_nonneg(&self) -> bool;

    /// True when the value is the integer `v`.
    fn is_int(&self, v: i64) -> bool {
        self.as_int() == Some(v)
    }
    /// `-self`, `None` on overflow.
    fn checked_neg(&self) -> Option<Self> {
        self.checked_mul(&Self::int(-1))
    }
    /// Provably `a <= b`.
    fn provably_le(a: &Self, b: &Self) -> bool {
        match (a.as_int(), b.as_int()) {
            (Some(x), Some(y)) => x <= y,
            _ => a
                .checked_neg()
                .and_then(|n| b.checked_add(&n))
                .is_some_and(|d| d.is_nonneg()),
        }
    }
}

impl Coeff for i64 {
    fn int(v: i64) -> i64 {
        v
    }
    fn as_int(&self) -> Option<i64> {
        Some(*self)
    }
    fn checked_add(&self, o: &i64) -> Option<i64> {
        i64::checked_add(*self, *o)
    }
    fn checked_mul(&self, o: &i64) -> Option<i64> {
        i64::checked_mul(*self, *o)
    }
    fn div_exact(&self, d: &i64) -> Option<i64> {
        (*d != 0 && self.checked_rem(*d) == Some(0)).then(|| self / d)
    }
    fn split_int(&self, d: i64) -> (i64, i64) {
        (self.div_euclid(d), self.rem_euclid(d))
    }
    fn floordiv_int(&self, d: i64) -> i64 {
        self.div_euclid(d)
    }
    fn is_nonneg(&self) -> bool {
        *self >= 0
    }
}
