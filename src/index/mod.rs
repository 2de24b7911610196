//! The index algebra (issue 20): the one canonical quasi-affine form of the compiler's index
//! expressions, on the ground floor (this module imports nothing else from the crate).
//!
//! * [`dim`] (symbolic sizes, [`dim::Dim`]) and [`axis`] (the wire form: [`axis::AxisExpr`],
//!   predicates, access maps; [`axis::AxisExpr::of_dim`], the one size → index conversion);
//!   [`access`]: the normal form of an access map's index expressions and guards.
//! * [`Quasi`]: `konst + Σ coeff · atom`, canonical (zero coefficients never stored, atoms in a
//!   sorted map, so equal expressions compare equal), generic over its coefficients ([`Coeff`]:
//!   `i64`, or a symbolic size such as [`dim::Dim`]) and its variables. An [`Atom`] is
//!   a variable, `floor(e / d)`, the `min` / `max` of two expressions, or an opaque atom (a
//!   data-dependent gather index).
//! * [`simplify`]: the one floordiv simplifier over range facts ([`Facts`]): exact division,
//!   multiples leave the floor, gcd reduction, range collapse, nested `(e//a)//c = e//(a·c)`,
//!   symbolic divisors where the division is provably exact.
//! * [`movement`]: movement ops (RESHAPE, PERMUTE, EXPAND, PAD, SHRINK, FLIP, VIEW) as index
//!   transformers — the one statement of which operand index a result index reads.
//! * [`isl`]: the one isl printer ([`Quasi::isl`]) and the token reader and expression parser
//!   that the set and map grammars of `poly` build on.
//!
//! The reference evaluator keeps its own independent implementation (it is the oracle).

pub mod access;
pub mod axis;
pub mod coeff;
pub mod dim;
pub mod isl;
pub mod movement;
pub mod num;
pub mod quasi;
pub mod simplify;

pub use coeff::{gcd, Coeff};
pub use quasi::{quasi_of_axis, Atom, NotQuasiAffine, Quasi};
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
    /// A product of two non-constant forms.
    #[error("`{0}` is not affine (a product of variables)")]
    NonAffine(String),
    /// An opaque atom has no value.
    #[error("the opaque index `{0}` has no value")]
    Opaque(String),
}

/// A test hook: while a collection is active, every `floor(e / d)` the simplifier answers is
/// recorded as a [`trace::Sample`] (variables renumbered, their range facts attached), so that
/// `tests/index_algebra.rs` can check the answers the consumers really produce. Off (one atomic
/// load per floordiv) unless started.
pub mod trace {
    use super::{Coeff, Facts, Quasi};
    use std::any::Any;
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    static ACTIVE: AtomicBool = AtomicBool::new(false);
    static SINK: Mutex<Vec<Box<dyn Any + Send>>> = Mutex::new(Vec::new());

    /// One simplifier answer: `floor(input / divisor) = output` wherever variable `j` lies in
    /// `ranges[j]` (unbounded when `None`).
    #[derive(Clone, Debug)]
    pub struct Sample<C> {
        /// The dividend, variables numbered `0..`.
        pub input: Quasi<C, usize>,
        /// The divisor.
        pub divisor: C,
        /// The range fact of each variable.
        pub ranges: Vec<Option<(C, C)>>,
        /// The simplified floor.
        pub output: Quasi<C, usize>,
    }

    /// Starts recording (all threads; clears earlier records).
    pub fn start() {
        if let Ok(mut s) = SINK.lock() {
            s.clear();
        }
        ACTIVE.store(true, Ordering::SeqCst);
    }

    /// Stops recording and returns the samples recorded (downcast them to `Sample<C>`).
    pub fn take() -> Vec<Box<dyn Any + Send>> {
        ACTIVE.store(false, Ordering::SeqCst);
        SINK.lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }

    /// Records one answer (no-op unless recording).
    pub(crate) fn record<C: Coeff + Send + 'static, V: Clone + Ord>(
        input: &Quasi<C, V>,
        divisor: &C,
        facts: &dyn Facts<C, V>,
        output: &Quasi<C, V>,
    ) {
        if !ACTIVE.load(Ordering::Relaxed) {
            return;
        }
        let mut vars = BTreeSet::new();
        input.vars(&mut vars);
        output.vars(&mut vars);
        let vars: Vec<V> = vars.into_iter().collect();
        let num = |v: &V| vars.iter().position(|x| x == v).unwrap_or(vars.len());
        let sample = Sample {
            input: input.map_vars(&num),
            divisor: divisor.clone(),
            ranges: vars.iter().map(|v| facts.range(v)).collect(),
            output: output.map_vars(&num),
        };
        if let Ok(mut s) = SINK.lock() {
            s.push(Box::new(sample));
        }
    }
}
