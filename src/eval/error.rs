//! Diagnostics the evaluator reports. Every problem reachable from user input (a program, symbol
//! values, input tensors) ends here instead of in a panic.
//!
//! Codes: `E0201` UnboundSymbol, `E0206` InvalidBoundShape, `E0203` ShapeOverflow, `E0207`
//! ViewOutOfBounds, `E0208` TensorTooLarge, `E0209` ReadOutOfBounds, `E0303` MissingInput, `E0307` InputShapeMismatch,
//! `E0308` InputDtypeMismatch, `E0304` GatherIndexOutOfRange, `E0305` DivisionByZero, `E0306`
//! EvaluatorInternal.

use crate::diag::codes;
use crate::diag::{Diagnostic, Diagnostics, Location};
use crate::ir::dim::DimError;
use crate::ir::tiny::NodeId;

/// Shorthand result type of the evaluator.
pub type EvalResult<T> = Result<T, Diagnostics>;

/// Location of a Tiny node.
pub fn at_node(node: NodeId) -> Location {
    Location::TinyNode {
        tiny_node: node.to_string(),
    }
}

/// A symbol has no value, or sizes overflow, while binding a node's shape or arguments.
pub fn dim_error(node: NodeId, err: &DimError) -> Diagnostics {
    match err {
        DimError::Unbound(sym) => Diagnostic::error(
            codes::UNBOUND_SYMBOL,
            Location::Symbol {
                symbol: sym.clone(),
            },
            format!("symbol `{sym}` has no value (needed by Tiny IR node {node})"),
            format!("bind `{sym}` to a size (e.g. `--bind {sym}=4`)"),
        )
        .into(),
        DimError::Overflow => overflow(node),
    }
}

/// Size or index arithmetic overflows `i64`.
pub fn overflow(node: NodeId) -> Diagnostics {
    Diagnostic::error(
        codes::SHAPE_OVERFLOW,
        at_node(node),
        format!("size or index arithmetic of Tiny IR node {node} overflows"),
        "use smaller symbol values",
    )
    .into()
}

/// A rule that can only be checked once sizes are bound is broken.
pub fn bad_shape(node: NodeId, why: impl Into<String>) -> Diagnostics {
    Diagnostic::error(
        codes::INVALID_BOUND_SHAPE,
        at_node(node),
        why,
        "check the symbol values: with them the program's sizes are inconsistent",
    )
    .into()
}

/// A VIEW maps some output index outside its input.
pub fn view_out_of_bounds(node: NodeId, why: impl Into<String>) -> Diagnostics {
    Diagnostic::error(
        codes::VIEW_OUT_OF_BOUNDS,
        at_node(node),
        why,
        "with these symbol values the VIEW's index map leaves its input; check the sizes",
    )
    .into()
}

/// A READ index the guard admits lies outside its operand.
pub fn read_out_of_bounds(
    node: NodeId,
    position: &[i64],
    axis: usize,
    value: i64,
    size: usize,
) -> Diagnostics {
    Diagnostic::error(
        codes::READ_OUT_OF_BOUNDS,
        at_node(node),
        format!(
            "READ at output position {position:?} reads index {value} on operand axis {axis}, \
             outside [0, {size}) (Tiny IR node {node})"
        ),
        "with these symbol values the READ's index map leaves its operand where its guard holds",
    )
    .with("index", value)
    .with("size", size)
    .into()
}

/// A buffer could not be allocated.
pub fn too_large(node: NodeId, numel: usize) -> Diagnostics {
    Diagnostic::error(
        codes::TENSOR_TOO_LARGE,
        at_node(node),
        format!("cannot allocate {numel} elements for Tiny IR node {node}"),
        "use smaller symbol values or inputs",
    )
    .into()
}

/// A signature input has no tensor.
pub fn missing_input(tensor: &str) -> Diagnostics {
    Diagnostic::error(
        codes::MISSING_INPUT,
        Location::Tensor {
            tensor: tensor.to_string(),
        },
        format!("no value given for input tensor `{tensor}`"),
        format!("provide a tensor for `{tensor}`"),
    )
    .into()
}

/// An input tensor's shape (or element count) does not match its INPUT node.
pub fn input_shape(tensor: &str, expected: &[usize], found: &[usize], len: usize) -> Diagnostics {
    Diagnostic::error(
        codes::INPUT_SHAPE_MISMATCH,
        Location::Tensor {
            tensor: tensor.to_string(),
        },
        format!("input `{tensor}` has shape {found:?} ({len} elements), expected {expected:?}"),
        "give a tensor of the declared shape (after binding symbols)",
    )
    .with("expected", format!("{expected:?}"))
    .with("found", format!("{found:?}"))
    .into()
}

/// An input tensor's dtype (or storage) does not match its INPUT node.
pub fn input_dtype(tensor: &str, expected: &str, found: &str) -> Diagnostics {
    Diagnostic::error(
        codes::INPUT_DTYPE_MISMATCH,
        Location::Tensor {
            tensor: tensor.to_string(),
        },
        format!("input `{tensor}` is {found}, expected {expected}"),
        "convert the input to the declared dtype",
    )
    .into()
}

/// A GATHER index value lies outside the gathered axis.
pub fn gather_oob(node: NodeId, value: f64, size: usize, position: &[usize]) -> Diagnostics {
    Diagnostic::error(
        codes::GATHER_INDEX_OUT_OF_RANGE,
        at_node(node),
        format!(
            "GATHER index {value} at position {position:?} is outside [0, {size}) (Tiny IR node {node})"
        ),
        "index values must lie in [0, size of the gathered axis)",
    )
    .with("index", value)
    .with("size", size)
    .into()
}

/// IDIV by zero.
pub fn div_by_zero(node: NodeId) -> Diagnostics {
    Diagnostic::error(
        codes::DIVISION_BY_ZERO,
        at_node(node),
        format!("integer division by zero in Tiny IR node {node}"),
        "guard the divisor so that it is never zero",
    )
    .into()
}

/// An evaluator invariant failed (a bug, reported instead of panicking).
pub fn internal(node: NodeId, why: impl Into<String>) -> Diagnostics {
    Diagnostic::error(
        codes::EVALUATOR_INTERNAL,
        at_node(node),
        why,
        "this is an evaluator bug; please report it with the program",
    )
    .into()
}
