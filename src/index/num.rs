//! [`Num`]: a float attribute that compares, hashes and orders by its bits, so that `0.0` and
//! `-0.0` are distinct e-graph leaves (`recip(0.0)` is `+inf`, `recip(-0.0)` is `-inf`, and a
//! concat pads with `-0.0`, the exact additive identity). Every NaN is one value (its payload is
//! not part of it).

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

/// A float with bitwise equality (one NaN) and the IEEE total order.
#[derive(Clone, Copy, Debug, Default)]
pub struct Num(pub f64);

impl Num {
    /// The value with every NaN made the canonical NaN.
    fn canonical(self) -> f64 {
        if self.0.is_nan() {
            f64::NAN
        } else {
            self.0
        }
    }
}

impl PartialEq for Num {
    fn eq(&self, o: &Num) -> bool {
        self.canonical().to_bits() == o.canonical().to_bits()
    }
}

impl Eq for Num {}

impl Hash for Num {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.canonical().to_bits().hash(state);
    }
}

impl Ord for Num {
    fn cmp(&self, o: &Num) -> Ordering {
        self.canonical().total_cmp(&o.canonical())
    }
}

impl PartialOrd for Num {
    fn partial_cmp(&self, o: &Num) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl From<f64> for Num {
    fn from(v: f64) -> Num {
        Num(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_zeros_differ_and_nans_agree() {
        assert_ne!(Num(0.0), Num(-0.0));
        assert_eq!(Num(f64::NAN), Num(-f64::NAN));
        assert!(Num(-0.0) < Num(0.0));
        assert_eq!(Num(1.5).cmp(&Num(1.5)), Ordering::Equal);
    }
}
