//! The affine engine (issue 6 item 1, seed 003): a small pure-Rust Presburger layer for the
//! polyhedral analyses of regions — iteration domains, access relations, dependences, tile
//! footprints — in the notation of isl.
//!
//! # Objects
//! * [`Aff`]: `c + Σ k·x + Σ k·floor(aff / d)` over named loop dimensions and parameters,
//!   integer coefficients (checked `i64`; overflow is [`AffineError::Overflow`]), from
//!   [`crate::ir::axis::AxisExpr`] via [`Aff::from_axis_expr`] (products of two variables and
//!   `min`/`max` of variables are [`AffineError::NonAffine`]).
//! * [`Constraint`] (`aff = 0`, `aff >= 0`), [`BasicSet`] (a conjunction over a named tuple
//!   `S[i, j]` plus parameters and existential variables), [`Set`] (a union: a piecewise domain).
//! * [`BasicMap`] / [`Map`]: relations `S[i..] -> T[..]`, e.g. accesses from
//!   [`BasicMap::from_multi_aff`]; [`Map::reverse`], [`Map::apply_range`] (composition, so a
//!   flow dependence is `W.apply_range(R.reverse())`), [`Set::apply`] (image),
//!   [`Set::preimage`], domain/range restriction.
//! * [`isl`]: printing in isl notation (`[N] -> { S[i] : 0 <= i < N }`, deterministic) and a
//!   parser for the same subset.
//!
//! # Semantics and limits
//! Every *construction* is exact: floordivs, projections and compositions introduce
//! existential variables, which are eliminated afterwards only where that is exact (unit
//! equalities, Fourier–Motzkin steps whose real and dark shadows agree). *Queries* say how
//! sure they are:
//! * emptiness and containment return [`Answer`] `Yes | No | Unknown`. Emptiness follows the
//!   Omega test's exact cases (module `linear`): exact equality elimination, exact
//!   Fourier–Motzkin steps, real shadow empty ⇒ empty, dark shadow non-empty ⇒ non-empty,
//!   enumeration of a variable with at most 64 constant values. Outside those (non-unit
//!   strides against unbounded parameters) the answer is `Unknown`, never a guess.
//!   Parameters are existential: "empty" means empty for every parameter value.
//! * containment `A ⊆ B` is `A \ B = ∅`; subtraction needs `B` free of existentials after
//!   exact elimination (a congruence such as `i = 4e` has no conjunctive complement): else
//!   `Unknown`.
//! * per-dimension bounds ([`Set::dim_bounds`]) are symbolic in the parameters: `max` of
//!   lower candidates, `min` of upper candidates (dominated candidates pruned under the set's
//!   own parameter domain), valid where the set is non-empty. They are
//!   [`Exactness::Exact`] when the projection onto the parameters and that dimension is exact
//!   (then the bounds are attained), otherwise [`Exactness::Over`] (an enclosing interval:
//!   e.g. `i = 4e, 0 <= i < N` gives `i <= N - 1`, while the true maximum is the largest
//!   multiple of 4 below `N`).
//! * [`simplify`]: redundant-constraint removal, gist against a context, coalescing of the
//!   pieces of a union, all under a [`SimplifyBudget`] whose excess is
//!   [`AffineError::PiecewiseOverBudget`] (the later W2101 ExcessivePiecewise diagnostic).
//!
//! Strides, kernels and dilations are constants (isl cannot express `h * S` with a parametric
//! `S` either): specialise on them when the graph is built. Sizes may be parameters.
//!
//! The engine's answers are cross-checked against isl (islpy) by `tests/poly_islpy.rs`.
//!
//! # Open
//! * TODO(issue 6): dependences are memory-based (`W ; R⁻¹`); exact last-writer (value-based)
//!   dependences, lexmin/lexmax, schedules and AST generation are not provided.
//! * TODO(issue 6): bounds of sets with congruences are `Over` where isl answers with `mod`
//!   forms (`N - 1 - (N + 3) mod 4`); bounds of unions are `max`/`min` expressions, not isl's
//!   piecewise partition of the parameter space.
//! * TODO(issue 6): emptiness stays `Unknown` for non-unit strides against unbounded
//!   parameters (no Omega splinters over parametric ranges); subtraction (hence containment)
//!   of sets with congruences works only when their existentials have small constant ranges.
//! * TODO(issue 6): coalescing merges existential-free pieces only (no hull of floordiv
//!   pieces). `PiecewiseOverBudget` is reported as `W2101 ExcessivePiecewise` by the
//!   Poly-View and Poly Core dumps (`poly::view::diag`, `poly::core`).
//! * TODO(issue 6): the isl parser reads the printed subset only (no `mod`, `min`/`max` in
//!   constraints, no union sets/maps over several spaces).

pub mod bounds;
mod core;
pub mod expr;
pub mod isl;
mod linear;
pub mod map;
pub mod set;
pub mod simplify;

pub use bounds::{Bound, DimBounds, Exactness};
pub use expr::{Aff, Atom};
pub use linear::Emptiness;
pub use map::{BasicMap, Map, MapSpace};
pub use set::{BasicSet, Constraint, ConstraintKind, Set, SetSpace, Tuple};

/// Errors of the affine layer (no panics on user-derived input).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AffineError {
    /// Integer overflow.
    #[error("integer overflow in affine arithmetic")]
    Overflow,
    /// A floordiv by a non-positive number.
    #[error("floordiv by {0}: the divisor must be positive")]
    BadDivisor(i64),
    /// A non-affine expression.
    #[error("`{0}` is not affine (a product of variables, or min/max of variables)")]
    NonAffine(String),
    /// A name that is neither a dimension nor a parameter.
    #[error("unknown name `{0}` (neither a dimension nor a parameter of the space)")]
    UnknownName(String),
    /// A name used twice in one space.
    #[error("name `{0}` is used twice in one space")]
    DuplicateName(String),
    /// A wrong number of dimensions.
    #[error("expected {expected} dimensions, found {found}")]
    Arity {
        /// Dimensions expected.
        expected: usize,
        /// Dimensions found.
        found: usize,
    },
    /// Operands in different spaces.
    #[error("spaces do not match: {0}")]
    SpaceMismatch(String),
    /// Elimination produced too many constraints.
    #[error("too many constraints during elimination (the problem is too large for the engine)")]
    TooComplex,
    /// More pieces than the budget (`W2101 ExcessivePiecewise`).
    #[error("{pieces} pieces exceed the budget of {budget} (ExcessivePiecewise)")]
    PiecewiseOverBudget {
        /// Pieces produced.
        pieces: usize,
        /// The budget.
        budget: usize,
    },
    /// Outside what the engine implements.
    #[error("not supported by the affine engine: {0}")]
    Unsupported(String),
    /// isl text that does not parse.
    #[error("isl syntax error at byte {pos}: {msg}")]
    Parse {
        /// Byte offset.
        pos: usize,
        /// What is wrong.
        msg: String,
    },
}

/// The answer of a yes/no query; `Unknown` when the engine cannot decide exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Answer {
    /// Proven true.
    Yes,
    /// Proven false.
    No,
    /// Not decided.
    Unknown,
}

impl Answer {
    pub(crate) fn from_emptiness(e: Emptiness) -> Answer {
        match e {
            Emptiness::Empty => Answer::Yes,
            Emptiness::NonEmpty => Answer::No,
            Emptiness::Unknown => Answer::Unknown,
        }
    }

    /// Both hold.
    pub fn and(self, o: Answer) -> Answer {
        match (self, o) {
            (Answer::No, _) | (_, Answer::No) => Answer::No,
            (Answer::Yes, Answer::Yes) => Answer::Yes,
            _ => Answer::Unknown,
        }
    }

    /// `Some(bool)` when decided.
    pub fn decided(self) -> Option<bool> {
        match self {
            Answer::Yes => Some(true),
            Answer::No => Some(false),
            Answer::Unknown => None,
        }
    }
}

/// The most pieces a piecewise set, map or guard may have before the analyses give up on it:
/// the default of [`SimplifyBudget::max_pieces`] and the Poly-View's guard expansion limit
/// (`poly::view::aff::MAX_PIECES`). Exceeding it is [`AffineError::PiecewiseOverBudget`] in the
/// engine and a non-SCoP statement in the view, both reported as the warning
/// `W2101 ExcessivePiecewise` (seed 001 §14). 64 pieces keep subtraction and coalescing (which
/// are quadratic in the pieces) fast while covering every pad/slice/concat chain of the examples
/// (the largest guard there has 4 pieces).
pub const PIECEWISE_BUDGET: usize = 64;

/// Limits of the operations that can multiply pieces (subtraction, coalescing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimplifyBudget {
    /// The most pieces a union may have.
    pub max_pieces: usize,
}

impl Default for SimplifyBudget {
    fn default() -> SimplifyBudget {
        SimplifyBudget {
            max_pieces: PIECEWISE_BUDGET,
        }
    }
}
