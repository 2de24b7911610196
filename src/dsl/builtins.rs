//! The builtin functions of the DSL: every elementwise function of graph.json by its `fn` name
//! (`max(x, zero)`, `exp(x)`, `where(c, a, b)`) and every other op by its snake-case name
//! (`matmul`, `conv`, `softmax`, …), keyword arguments being the op's attributes.

use crate::ir::frontend::EwFn;

/// `(DSL name, graph.json op)` of every non-elementwise op.
pub const OPS: [(&str, &str); 22] = [
    ("matmul", "MatMul"),
    ("gemm", "GEMM"),
    ("conv", "Conv"),
    ("conv_transpose", "ConvTranspose"),
    ("pool", "Pool"),
    ("attention", "Attention"),
    ("softmax", "Softmax"),
    ("layer_norm", "LayerNorm"),
    ("rms_norm", "RMSNorm"),
    ("reduce", "Reduce"),
    ("cumulative", "Cumulative"),
    ("cast", "Cast"),
    ("reshape", "Reshape"),
    ("permute", "Permute"),
    ("expand", "Expand"),
    ("pad", "Pad"),
    ("slice", "Slice"),
    ("flip", "Flip"),
    ("concat", "Concat"),
    ("repeat", "Repeat"),
    ("unfold", "Unfold"),
    ("gather", "Gather"),
];

/// What a builtin name denotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// An `Elementwise` node with this `fn`.
    Elementwise(EwFn),
    /// A node of this graph.json op.
    Op(&'static str),
}

/// Looks a builtin up by its DSL name.
pub fn builtin(name: &str) -> Option<Builtin> {
    if let Some(f) = EwFn::parse(name) {
        return Some(Builtin::Elementwise(f));
    }
    OPS.iter()
        .find(|(n, _)| *n == name)
        .map(|(_, op)| Builtin::Op(op))
}

/// The DSL name of a graph.json op.
pub fn dsl_name(op: &str) -> &'static str {
    OPS.iter()
        .find(|(_, o)| *o == op)
        .map(|(n, _)| *n)
        .unwrap_or("unknown_op")
}

/// Every builtin name (for suggestions).
pub fn names() -> impl Iterator<Item = &'static str> + Clone {
    EwFn::ALL
        .iter()
        .map(|(_, n)| *n)
        .chain(OPS.iter().map(|(n, _)| *n))
}
