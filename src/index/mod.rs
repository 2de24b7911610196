//! The index algebra (issue 20): the one canonical quasi-affine form of the compiler's index
//! expressions, on the ground floor (this module imports nothing else from the crate).
//!
//! * [`Quasi`]: `konst + Σ coeff · atom`, canonical (zero coefficients never stored, atoms in a
//!   sorted map, so equal expressions compare equal), generic over its coefficients ([`Coeff`]:
//!   `i64`, or a symbolic size such as [`crate::ir::dim::Dim`]) and its variables. An [`Atom`] is
//!   a variable, `floor(e / d)`, the `min` / `max` of two expressions, or an opaque atom (a
//!   data-dependent gather index).
//! * [`simplify`]: the one floordiv simplifier over range facts ([`Facts`]): exact division,
//!   multiples leave the floor, gcd reduction, range collapse, nested `(e//a)//c = e//(a·c)`,
//!   symbolic divisors where the division is provably exact.
//! * [`isl`]: the one isl printer ([`Quasi::isl`]) and the token reader and expression parser
//!   that the set and map grammars of `poly` build on.
//!
//! The reference evaluator keeps its own independent implementation (it is the oracle).

pub mod coeff;
pub mod isl;
pub mod quasi;
pub mod simplify;

pub use coeff::{gcd, Coeff};
pub use quasi::{Atom, Quasi};
pub use simplify::{Facts, NoFacts};

/// Errors of the index algebra.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// Integer overflow in checked arithmetic.
    #[error("integer overflow in affine arithmetic")]
    Overflow,
    /// A floordiv by a divisor that is not provably positive.
    #[error("floordiv by {0}: the divisor must be positive")]
    BadDivisor(String),
    /// An opaque atom has no value.
    #[error("the opaque index `{0}` has no value")]
    Opaque(String),
}

/// A test hook: every expression handed to the simplifier is recorded while a collection is
/// active (`tests/index_algebra.rs` feeds them to the property test). Off unless started.
pub mod trace {
    use std::cell::RefCell;

    thread_local! {
        static SINK: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
    }

    /// Starts recording on this thread (clears earlier records).
    pub fn start() {
        SINK.with(|s| *s.borrow_mut() = Some(Vec::new()));
    }

    /// Stops recording and returns what was recorded.
    pub fn take() -> Vec<String> {
        SINK.with(|s| s.borrow_mut().take().unwrap_or_default())
    }

    /// True while recording.
    pub fn active() -> bool {
        SINK.with(|s| s.borrow().is_some())
    }

    /// Records one entry (no-op unless recording).
    pub fn record(f: impl FnOnce() -> String) {
        SINK.with(|s| {
            if let Some(v) = s.borrow_mut().as_mut() {
                v.push(f());
            }
        });
    }
}
