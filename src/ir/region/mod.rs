//! Region Buffer SSA (seed 001 §6): one [`Region`] is one kernel — a pure function from input
//! MemRefs to output MemRefs, written as a list of SSA `let`s over an iteration space.
//!
//! # JSON form (seed 001 §6.8)
//!
//! `{"region": {"name", "iters": [{"name", "size"?}], "inputs": [{"name", "dtype", "memref"}],
//! "outputs": [{"name", "dtype", "memref", "materialize": "gmem"|"deferred"}],
//! "lets": [{"let", "expr"}], "yield": [{"from", "to", "cast"?}]}}` with
//! `memref = {"shape", "alignment", "noalias", "layout": {"kind": "row_major"|"col_major"|
//! "swizzled", "params"?}}`. Sizes are JSON integers or strings holding a size expression over
//! symbols (`"M"`, `"H+2"`, `"(H-1)//2+1"`), printed in [`Dim`]'s canonical form.
//!
//! Expressions ([`Expr`], parsed and printed by hand in [`json`]): a number is a constant (the
//! strings `"INF"`, `"-INF"`, `"NAN"` too), any other string names a `let`;
//! `{"read": {"tensor", "map": [AxisExpr…]}}`; unary `{"relu": [x]}` and binary `{"add": [a, b]}`
//! by the names of [`UnaryFn`] / [`BinaryFn`]; `{"select": {"pred", "then", "else"}}`;
//! `{"reduce": {"op", "axes", "extents"?, "init"?, "dtype", "body"}}`;
//! `{"BroadcastInDim": {"operand", "result_shape", "broadcast_dimensions"}}`;
//! `{"transpose": {"operand", "permutation"}}`; `{"cast": {"to", "x"}}`.
//! Axis expressions ([`AxisExpr`], affine + floordiv): integers, axis or symbol names,
//! `{"add": [e, e, …]}`, `{"mul": [a, b]}` (one side free of axes), `{"floordiv": [e, c]}` (`c` a
//! positive integer). Predicates ([`Pred`]): `{"and": [..]}`, `{"or": [..]}`,
//! `{"ge"|"gt"|"le"|"lt"|"eq": [AxisExpr, AxisExpr]}`.
//!
//! Differences from the seed's dumps (all additive):
//! - `dtype` on every input and output (the seed leaves element types implicit).
//! - **Three value expressions** the seed's vocabulary lacks, needed to express every Tiny op
//!   ([`synth`](crate::synth)): `{"index": AxisExpr}` (the integer value of an index expression: Tiny's RANGE),
//!   `{"where": [c, a, b]}` (value select `c != 0 ? a : b`: Tiny's WHERE; the seed's `select` is
//!   over axis predicates) and `{"gather": {"tensor", "map", "axis", "index"}}` (Tiny's GATHER:
//!   like `read`, except that dimension `axis` reads `map[axis] + trunc(index)`, where `index` is
//!   a value expression). A gather is a data-dependent, non-affine access — `non_scop` in the
//!   seed's terms (§6.5): polyhedral analyses must treat it as an opaque read of the whole
//!   dimension. Its out-of-range index is a run-time error (`E1220`), never guarded.
//! - **Scans** (seed 004's cumulative ops): `{"scan": {"op", "axis", "exclusive", "reverse",
//!   "dtype", "body"}}` — at a point `p`, the fold (`op` ∈ sum, max, min, prod, from its
//!   identity, rounding to `dtype` at every step) of `body` evaluated with iter `axis` rebound to
//!   each `j` of the window `j ≤ p[axis]` (`<` when `exclusive`; `≥` / `>` when `reverse`), in
//!   scan order (ascending, descending when `reverse`). A scan is always the whole expression of
//!   a top-level let whose free iters include `axis`, and its body holds no reduce or scan
//!   (`E1211` otherwise): the let is one scan over the lines of `axis`, computed in linear work
//!   by the playback and by the scan template.
//! - **Reduce extents.** A reduce axis needs an extent. It is, in this order: the explicit
//!   `"extents": {"k": "K"}` entry of the reduce; the size of the iter of the same name (a reduce
//!   axis named like an iter shadows it inside the body, as seed §6.8.3 reduces over `n`); the
//!   size of every input dimension that a `read` directly in the body indexes with exactly that
//!   axis — these must all agree (else `E1207`). So the seed's three dumps need no `extents`.
//! - **Iter sizes.** An iter without `size` takes the size of the same position of the first
//!   output's shape (seed §6.8.2/§6.8.3 leave iter sizes out).
//! - Constants print as JSON floats (`0.0`); the strings above stand for non-finite values.
//!   Size strings print in [`Dim`]'s canonical form (`"(H-1)//2+1"` prints as `"(H+1)//2"`), so
//!   only canonical sizes (plain symbols, as in the seed) round-trip verbatim.
//!
//! Seed points this module settles:
//! - Binary ops broadcast implicitly by axis name (seed §6.8.3 writes `sub(S, Mrow)` with no
//!   `BroadcastInDim`); an explicit `BroadcastInDim` is checked (`BroadcastMismatch`) but is a
//!   pass-through, like `transpose`.
//! - The seed's conv guard `< H+2` is wrong for the unpadded index `2·ho + kh − 1`: the test
//!   dump uses `< H` (PyTorch semantics); with `H+2` the region is rejected (`UnguardedAccess`).
//!
//! # Semantics
//!
//! - The iteration space is the box of `iters`. Every `let` is a value at every point of it (in
//!   practice it only depends on its *free axes*, the iters its expression mentions); a `let` name
//!   used inside a reduce that rebinds one of its free iters is evaluated at the rebound value
//!   (dynamic scoping of axis names: seed §6.8.3 `Mrow = max_n S`).
//! - `read` loads `tensor[map(point)]`. An out-of-bounds read is an error (`E1220`): guards must
//!   be explicit `select`s (seed §6.7 "unguarded 禁止"); `select` evaluates only the taken branch.
//! - `reduce` folds its body over the row-major box of its axes, starting from `init` (or the op's
//!   identity), rounding each value and the accumulator to `dtype` at every step, like Tiny's
//!   REDUCE (an i32 product is exact).
//! - `BroadcastInDim` and `transpose` are logical views: with named-axis point semantics they pass
//!   values through; the verifier checks their shapes against the operand's free axes.
//! - Every value has a *kind* ([`kind`]): fp32, i32 or bool. A `read`/`gather` has its input's
//!   dtype, a `reduce` its `dtype`, a `cast` its `to`, an `index` is i32, a comparison bool. A
//!   constant is exact when it is an integer in the i32 range and fp32 otherwise, and is *weak*: it
//!   adopts the kind of the other operands of its op. Every other unary / binary op computes in
//!   the join of its operands' kinds (fp32 over i32 over bool) and rounds its result to it: fp32
//!   ops round to fp32, i32 ops wrap (products exactly), bool ops give non-zero → 1; `where` and
//!   `select` pass the taken value through. So i32 values beyond fp32's exact range survive, as
//!   in Tiny, whose ops compute in their dtype. Comparisons give 1.0 / 0.0.
//! - `yield` rounds (casts) a let to its output's dtype and writes it to the output, whose shape
//!   is the iters' sizes, row-major in iters order (a let missing some iters is broadcast).
//!
//! Layers: [`json`] and [`size`] (the wire form), [`mod@verify`] (structural and shape checks,
//! `E12xx`, with the interval analysis of `bounds`; errors in `error`), [`eval`] (CPU playback,
//! seed §6.11), [`synth`](crate::synth) (kernel body → region, seed §6.7) and [`program`] (a list of regions and
//! buffer aliases: a whole optimized graph).

mod bounds;
mod error;
pub mod eval;
pub mod json;
pub mod kind;
pub mod program;
pub mod size;
pub mod verify;

pub use crate::ir::axis::{AxisExpr, CmpOp, Pred};
pub use eval::evaluate_region;
pub use verify::{verify, verify_with, RegionError};

use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::tiny::ReduceOp;
use serde::{Deserialize, Serialize};

/// The document wrapper `{"region": {...}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionDoc {
    /// The region.
    pub region: Region,
}

/// One kernel: iteration space, inputs, outputs, SSA lets and yields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Region {
    /// Kernel name.
    pub name: String,
    /// The iteration space, outermost first; also the output shape.
    pub iters: Vec<Iter>,
    /// Input MemRefs.
    pub inputs: Vec<Input>,
    /// Output MemRefs.
    pub outputs: Vec<Output>,
    /// SSA definitions, in order.
    pub lets: Vec<Let>,
    /// Output writes.
    #[serde(rename = "yield")]
    pub yields: Vec<Yield>,
}

/// A size (`Dim`) on the wire: a JSON integer or a size-expression string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Size(pub Dim);

/// One axis of the iteration space.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Iter {
    /// Axis name (`m`, `n`, …).
    pub name: String,
    /// Extent; when absent, the first output's size at this position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
}

/// A region input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Tensor name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape and physical layout.
    pub memref: MemRef,
}

/// A region output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// Tensor name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape and physical layout.
    pub memref: MemRef,
    /// Where the output goes.
    pub materialize: Materialize,
}

/// `MemRef{shape, alignment, noalias, layout}` (seed §6.2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemRef {
    /// Logical shape.
    pub shape: Vec<Size>,
    /// Base alignment in bytes.
    pub alignment: u64,
    /// Whether the buffer aliases no other.
    pub noalias: bool,
    /// Physical layout (no effect on the logical value).
    pub layout: Layout,
}

/// Physical layout of a MemRef.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    /// Layout family.
    pub kind: LayoutKind,
    /// Free-form parameters (`{"swizzle": "xor32", "vec_bytes": 16}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Layout families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayoutKind {
    /// Last axis contiguous.
    RowMajor,
    /// First axis contiguous.
    ColMajor,
    /// Swizzled tiles, described by `params`.
    Swizzled,
}

/// Where an output is materialized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Materialize {
    /// Written to global memory.
    Gmem,
    /// Handed to the next region without a GMEM round trip (a hint).
    Deferred,
}

/// `{"let": name, "expr": e}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Let {
    /// SSA name.
    #[serde(rename = "let")]
    pub name: String,
    /// Its definition.
    pub expr: Expr,
}

/// `{"from": let, "to": output, "cast"?: dtype}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Yield {
    /// The let written.
    pub from: String,
    /// The output written to.
    pub to: String,
    /// The element type the value is cast to (must be the output's dtype).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cast: Option<DType>,
}

/// A value expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A constant: exact when an i32-range integer, else fp32 (see [`kind`]).
    Const(f64),
    /// A reference to an earlier `let`.
    Let(String),
    /// `tensor[map(point)]`.
    Read {
        /// Input name.
        tensor: String,
        /// One index expression per input dimension.
        map: Vec<AxisExpr>,
    },
    /// An elementwise unary op.
    Unary(UnaryFn, Box<Expr>),
    /// An elementwise binary op.
    Binary(BinaryFn, Box<Expr>, Box<Expr>),
    /// `pred ? then : else`, only the taken branch is evaluated.
    Select {
        /// The condition over axes.
        pred: Pred,
        /// Value where `pred` holds.
        then: Box<Expr>,
        /// Value elsewhere (the neutral).
        otherwise: Box<Expr>,
    },
    /// A reduction.
    Reduce(Box<Reduce>),
    /// A non-materialized broadcast (a view).
    BroadcastInDim {
        /// The broadcast value.
        operand: Box<Expr>,
        /// The shape of the result.
        result_shape: Vec<Size>,
        /// Result dimension of each operand dimension (strictly increasing).
        broadcast_dimensions: Vec<usize>,
    },
    /// A non-materialized transpose (a view).
    Transpose {
        /// The transposed value.
        operand: Box<Expr>,
        /// `result dim i = operand dim permutation[i]`.
        permutation: Vec<usize>,
    },
    /// A rounding to `to`.
    Cast {
        /// Target dtype.
        to: DType,
        /// The value.
        x: Box<Expr>,
    },
    /// The value of an index expression (Tiny's RANGE seen at an index): `{"index": e}`.
    Index(AxisExpr),
    /// A data-dependent read (Tiny's GATHER, non-affine: `non_scop`): `tensor[map]` except that
    /// dimension `axis` reads `map[axis] + int(index)`. `{"gather": {"tensor", "map", "axis",
    /// "index"}}`.
    Gather {
        /// Input name.
        tensor: String,
        /// One index expression per input dimension (`map[axis]` is an offset).
        map: Vec<AxisExpr>,
        /// The dimension addressed by data.
        axis: usize,
        /// The data index (truncated to an integer).
        index: Box<Expr>,
    },
    /// Value select `c != 0 ? a : b` (Tiny's WHERE): `{"where": [c, a, b]}`; only the taken branch
    /// is evaluated.
    Where(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A prefix fold along an iter (Tiny's SCAN), `{"scan": {…}}`; see the module doc.
    Scan(Box<Scan>),
}

/// `Scan(op, axis, exclusive, reverse, dtype, body)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Scan {
    /// The fold operation.
    pub op: ReduceOp,
    /// The scanned iter.
    pub axis: String,
    /// The window leaves out the point itself.
    pub exclusive: bool,
    /// The window is the suffix (`j ≥ i`), folded from the end.
    pub reverse: bool,
    /// Accumulation dtype.
    pub dtype: DType,
    /// The folded value, evaluated with `axis` rebound to each window point.
    pub body: Expr,
}

/// `Reduce(op, axes, init, dtype, body)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduce {
    /// The fold operation.
    pub op: ReduceOp,
    /// Reduced axes, outermost first.
    pub axes: Vec<String>,
    /// Explicit extents (the documented extension); others are derived.
    pub extents: Vec<(String, Size)>,
    /// Initial accumulator; the op's identity when absent.
    pub init: Option<f64>,
    /// Accumulation dtype (mandatory, `AccDtypeMissing` otherwise).
    pub dtype: Option<DType>,
    /// The folded value.
    pub body: Expr,
}

/// Elementwise unary functions (Tiny's set, lower case, plus `exp`, `log`, `sigmoid`, `tanh`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryFn {
    /// `-x`.
    Neg,
    /// `e^x`.
    Exp,
    /// `2^x`.
    Exp2,
    /// `ln x`.
    Log,
    /// `log2 x`.
    Log2,
    /// `√x`.
    Sqrt,
    /// `1/√x`.
    Rsqrt,
    /// `1/x`.
    Recip,
    /// `max(x, 0)`.
    Relu,
    /// `|x|`.
    Abs,
    /// The error function.
    Erf,
    /// `1/(1+e^-x)`.
    Sigmoid,
    /// `tanh x`.
    Tanh,
}

/// Elementwise binary functions (Tiny's set, lower case; `div` is float division).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryFn {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a · b`.
    Mul,
    /// `a / b`.
    Div,
    /// Integer division (toward zero).
    Idiv,
    /// `max(a, b)`.
    Max,
    /// `min(a, b)`.
    Min,
    /// `a^b`.
    Pow,
    /// `a < b`.
    Cmplt,
    /// `a ≤ b`.
    Cmple,
    /// `a = b`.
    Cmpeq,
    /// `a ≠ b`.
    Cmpne,
}

impl BinaryFn {
    /// Comparisons give 1.0 / 0.0 (a bool value).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryFn::Cmplt | BinaryFn::Cmple | BinaryFn::Cmpeq | BinaryFn::Cmpne
        )
    }
}

impl Region {
    /// Parses `{"region": {...}}`.
    pub fn from_json_str(s: &str) -> Result<Region, RegionError> {
        serde_json::from_str::<RegionDoc>(s)
            .map(|d| d.region)
            .map_err(|e| RegionError::Json(e.to_string()))
    }

    /// Parses `{"region": {...}}` from a JSON value.
    pub fn from_json_value(v: serde_json::Value) -> Result<Region, RegionError> {
        serde_json::from_value::<RegionDoc>(v)
            .map(|d| d.region)
            .map_err(|e| RegionError::Json(e.to_string()))
    }

    /// `{"region": {...}}` as a JSON value.
    pub fn to_json_value(&self) -> serde_json::Value {
        serde_json::json!({ "region": self })
    }

    /// `{"region": {...}}`, pretty-printed.
    pub fn to_json_string(&self) -> String {
        serde_json::to_string_pretty(&self.to_json_value()).unwrap_or_default()
    }

    /// The input named `name`.
    pub fn input(&self, name: &str) -> Option<&Input> {
        self.inputs.iter().find(|i| i.name == name)
    }

    /// The output named `name`.
    pub fn output(&self, name: &str) -> Option<&Output> {
        self.outputs.iter().find(|o| o.name == name)
    }
}
