//! Region errors (`E12xx`) and their diagnostics (seed 001 §6.10).

use crate::diag::codes;
use crate::diag::{Diagnostic, Diagnostics, Location};

/// Why a region is malformed or cannot be evaluated (codes `E12xx`, [`RegionError::code`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RegionError {
    /// Error: Invalid region JSON: *0*.
    #[error("invalid region JSON: {0}")]
    Json(String),
    /// Error: The name *name* is declared twice (*what*).
    #[error("the name `{name}` is declared twice ({what})")]
    DuplicateName {
        /// The name.
        name: String,
        /// What it is.
        what: &'static str,
    },
    /// Error: *name* is not a let defined before *at*.
    #[error("`{name}` is not a let defined before `{at}`")]
    UndefinedLet {
        /// The name.
        name: String,
        /// Where in the region (a let, read or yield).
        at: String,
    },
    /// Error: *at* reads *tensor*, which is not a region input.
    #[error("`{at}` reads `{tensor}`, which is not a region input")]
    UnknownTensor {
        /// The tensor.
        tensor: String,
        /// Where in the region (a let, read or yield).
        at: String,
    },
    /// Error: *at* reads *tensor* with *got* indices, but it has rank *rank*.
    #[error("`{at}` reads `{tensor}` with {got} indices, but it has rank {rank}")]
    ReadRankMismatch {
        /// The tensor.
        tensor: String,
        /// Where in the region (a let, read or yield).
        at: String,
        /// The expected rank.
        rank: usize,
        /// What was found.
        got: usize,
    },
    /// Error: *name* in *at* is neither an axis in scope nor a size symbol of the region.
    #[error("`{name}` in `{at}` is neither an axis in scope nor a size symbol of the region")]
    UnboundName {
        /// The name.
        name: String,
        /// Where in the region (a let, read or yield).
        at: String,
    },
    /// Error: Index expression in *at* is not affine + floordiv: *why*.
    #[error("index expression in `{at}` is not affine + floordiv: {why}")]
    NonAffineMap {
        /// Where in the region (a let, read or yield).
        at: String,
        /// Why.
        why: String,
    },
    /// Error: Reduce axis *axis* in *at* has no extent: *why*.
    #[error("reduce axis `{axis}` in `{at}` has no extent: {why}")]
    ReduceExtentUnknown {
        /// The axis.
        axis: String,
        /// Where in the region (a let, read or yield).
        at: String,
        /// Why.
        why: String,
    },
    /// Error: The reduce in *at* has no accumulation `dtype`.
    #[error("the reduce in `{at}` has no accumulation `dtype`")]
    AccDtypeMissing {
        /// Where in the region (a let, read or yield).
        at: String,
    },
    /// Error: *at* reads *tensor* axis *axis* at indices [*lo*, *hi*] outside [0, *size*) without a guarding select.
    #[error("`{at}` reads `{tensor}` axis {axis} at indices [{lo}, {hi}] outside [0, {size}) without a guarding select")]
    UnguardedAccess {
        /// The tensor.
        tensor: String,
        /// Where in the region (a let, read or yield).
        at: String,
        /// The axis.
        axis: usize,
        /// Lowest index reached.
        lo: i64,
        /// Highest index reached.
        hi: i64,
        /// The axis size.
        size: i64,
    },
    /// Error: BroadcastInDim in *at*: operand shape *operand* does not fit result shape *result* along broadcast_dimensions *dims*.
    #[error("BroadcastInDim in `{at}`: operand shape {operand} does not fit result shape {result} along broadcast_dimensions {dims:?}")]
    BroadcastMismatch {
        /// Where in the region (a let, read or yield).
        at: String,
        /// The operand's shape.
        operand: String,
        /// The result's shape.
        result: String,
        /// The mismatching axes.
        dims: Vec<usize>,
    },
    /// Error: *at*: *why*.
    #[error("`{at}`: {why}")]
    AxisAlignmentMismatch {
        /// Where in the region (a let, read or yield).
        at: String,
        /// Why.
        why: String,
    },
    /// Error: The reduce (*op*) in *at* selects the neutral *got*, but its identity is *want*.
    #[error("the reduce ({op}) in `{at}` selects the neutral {got}, but its identity is {want}")]
    NeutralInvalid {
        /// Where in the region (a let, read or yield).
        at: String,
        /// The op.
        op: &'static str,
        /// What was found.
        got: f64,
        /// What was expected.
        want: f64,
    },
    /// Error: Yield: *why*.
    #[error("yield: {why}")]
    BadYield {
        /// Why.
        why: String,
    },
    /// Error: Output *output* has shape *got*, but the iteration space is *want*.
    #[error("output `{output}` has shape {got}, but the iteration space is {want}")]
    OutputShapeMismatch {
        /// The output.
        output: String,
        /// What was found.
        got: String,
        /// What was expected.
        want: String,
    },
    /// Error: Yield casts to *cast* but output *output* is *dtype*.
    #[error("yield casts to {cast} but output `{output}` is {dtype}")]
    YieldDtypeMismatch {
        /// The output.
        output: String,
        /// The yield's cast.
        cast: String,
        /// The dtype.
        dtype: String,
    },
    /// Error: Iter *iter* has no size and no output gives one.
    #[error("iter `{iter}` has no size and no output gives one")]
    IterSizeMissing {
        /// The iteration axis.
        iter: String,
    },
    /// Error: *at* reads *tensor* at *index*, outside its shape *shape*.
    #[error("`{at}` reads `{tensor}` at {index:?}, outside its shape {shape:?}")]
    OutOfBounds {
        /// The tensor.
        tensor: String,
        /// Where in the region (a let, read or yield).
        at: String,
        /// The index.
        index: Vec<i64>,
        /// The shape.
        shape: Vec<usize>,
    },
    /// Error: Symbol *0* has no value (or a size overflows).
    #[error("symbol `{0}` has no value (or a size overflows)")]
    UnboundSymbol(String),
    /// Error: Input *name*: *why*.
    #[error("input `{name}`: {why}")]
    InputMismatch {
        /// The name.
        name: String,
        /// Why.
        why: String,
    },
    /// Error: Size of *what* is negative or too large: *value*.
    #[error("size of `{what}` is negative or too large: {value}")]
    BadSize {
        /// What it is.
        what: String,
        /// The value.
        value: i64,
    },
}

impl RegionError {
    /// `(code, kind)`.
    pub fn code(&self) -> codes::Code {
        use RegionError as E;
        match self {
            E::Json(_) => codes::REGION_INVALID_REGION,
            E::DuplicateName { .. } => codes::REGION_DUPLICATE_NAME,
            E::UndefinedLet { .. } => codes::REGION_UNDEFINED_LET,
            E::UnknownTensor { .. } => codes::REGION_UNKNOWN_TENSOR,
            E::ReadRankMismatch { .. } => codes::REGION_READ_RANK_MISMATCH,
            E::UnboundName { .. } => codes::REGION_UNBOUND_AXIS,
            E::NonAffineMap { .. } => codes::REGION_NON_AFFINE_MAP,
            E::ReduceExtentUnknown { .. } => codes::REGION_REDUCE_EXTENT_UNKNOWN,
            E::AccDtypeMissing { .. } => codes::REGION_ACC_DTYPE_MISSING,
            E::UnguardedAccess { .. } => codes::REGION_UNGUARDED_ACCESS,
            E::BroadcastMismatch { .. } => codes::REGION_BROADCAST_MISMATCH,
            E::AxisAlignmentMismatch { .. } => codes::REGION_AXIS_ALIGNMENT_MISMATCH,
            E::NeutralInvalid { .. } => codes::REGION_NEUTRAL_INVALID,
            E::BadYield { .. } => codes::REGION_BAD_YIELD,
            E::OutputShapeMismatch { .. } => codes::REGION_OUTPUT_SHAPE_MISMATCH,
            E::YieldDtypeMismatch { .. } => codes::REGION_YIELD_DTYPE_MISMATCH,
            E::IterSizeMissing { .. } => codes::REGION_ITER_SIZE_MISSING,
            E::OutOfBounds { .. } => codes::REGION_OUT_OF_BOUNDS,
            E::UnboundSymbol(_) => codes::REGION_UNBOUND_SYMBOL,
            E::InputMismatch { .. } => codes::REGION_INPUT_MISMATCH,
            E::BadSize { .. } => codes::REGION_BAD_SIZE,
        }
    }

    fn suggestion(&self) -> &'static str {
        use RegionError as E;
        match self {
            E::Json(_) => "write the seed 001 §6.8 form: {\"region\": {\"name\", \"iters\", \"inputs\", \"outputs\", \"lets\", \"yield\"}}",
            E::DuplicateName { .. } => "rename one of them",
            E::UndefinedLet { .. } => "define the let earlier (lets are SSA, in order)",
            E::UnknownTensor { .. } => "declare the tensor in `inputs`",
            E::ReadRankMismatch { .. } | E::AxisAlignmentMismatch { .. } => {
                "give one index (or dimension) per axis"
            }
            E::UnboundName { .. } => "bind the axis with an iter or an enclosing reduce, or use a symbol of a shape",
            E::NonAffineMap { .. } => "keep one side of `mul` free of axes and divide by a positive integer",
            E::ReduceExtentUnknown { .. } => "add `\"extents\": {\"k\": \"K\"}` to the reduce",
            E::AccDtypeMissing { .. } => "add `\"dtype\": \"fp32\"` to the reduce",
            E::UnguardedAccess { .. } | E::OutOfBounds { .. } => {
                "wrap the read in a `select` whose predicate keeps the index inside the tensor"
            }
            E::BroadcastMismatch { .. } => "make every operand dimension equal its result dimension (or 1)",
            E::NeutralInvalid { .. } => "select the reduce op's identity (0 for sum, -INF for max, …)",
            E::BadYield { .. } => "yield every output exactly once from a let",
            E::OutputShapeMismatch { .. } => "make the output shape the iters' sizes",
            E::YieldDtypeMismatch { .. } => "cast to the output's dtype",
            E::IterSizeMissing { .. } => "give the iter a `size`",
            E::UnboundSymbol(_) => "pass a value for the symbol",
            E::InputMismatch { .. } => "pass every input with its declared dtype and shape",
            E::BadSize { .. } => "bind symbols so that sizes are non-negative",
        }
    }

    /// The user-facing diagnostic.
    pub fn to_diagnostic(&self) -> Diagnostic {
        let at = match self {
            RegionError::UnknownTensor { tensor, .. }
            | RegionError::UnguardedAccess { tensor, .. }
            | RegionError::OutOfBounds { tensor, .. }
            | RegionError::ReadRankMismatch { tensor, .. } => Location::Tensor {
                tensor: tensor.clone(),
            },
            RegionError::InputMismatch { name, .. } => Location::Tensor {
                tensor: name.clone(),
            },
            RegionError::OutputShapeMismatch { output, .. }
            | RegionError::YieldDtypeMismatch { output, .. } => Location::Tensor {
                tensor: output.clone(),
            },
            RegionError::UnboundSymbol(s) => Location::Symbol { symbol: s.clone() },
            _ => Location::Document,
        };
        Diagnostic::error(self.code(), at, self.to_string(), self.suggestion())
    }
}

impl From<RegionError> for Diagnostic {
    fn from(e: RegionError) -> Diagnostic {
        e.to_diagnostic()
    }
}

impl From<RegionError> for Diagnostics {
    fn from(e: RegionError) -> Diagnostics {
        Diagnostics::one(e.to_diagnostic())
    }
}
