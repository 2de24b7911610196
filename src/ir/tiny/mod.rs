//! Tiny IR (seed 002, seed 001 §3): a pure DAG of UOps addressed by node ids, with the minimal
//! vocabulary — movement views (RESHAPE PERMUTE EXPAND PAD SHRINK FLIP VIEW), elementwise unary /
//! binary / ternary ops, CAST, REDUCE with a mandatory accumulation dtype, and INPUT. Two helpers
//! beyond the seed's table come from tinygrad's UOp set: CONST (a rank-0 constant) and RANGE (the
//! index along a 1-D axis, used for index comparisons such as causal masks). GATHER is the
//! index-dependent view of seed 004 (`LoadIndex`). SCAN is seed 004's cumulative op (並列スキャン):
//! a prefix fold along one axis, linear work, kept as one op so that every later layer sees a
//! scan rather than a reduce over a triangular window.
//!
//! Every node records its dtype and (possibly symbolic) shape. The typing rules live in one place,
//! [`infer::infer_node`], used by the [`Builder`] when nodes are created and by [`verify`] after
//! every pass.

mod dump;
mod infer;

pub use dump::{scalar_json, to_json};
pub use infer::{infer_node, verify, TinyError};

use crate::ir::axis::AccessMap;
use crate::ir::dim::{Dim, Shape};
use crate::ir::dtype::DType;
use std::collections::BTreeMap;
use std::fmt;

/// A node id; printed as `n12`. Ids are dense indices into [`Program::nodes`], in topological order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The node's position in [`Program::nodes`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// An operand: another node, or an immediate scalar (elementwise ops only, seed 002 §1.1). An
/// immediate has the dtype of the node's tensor operands (for WHERE: of the other branch).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Src {
    /// The value of a node.
    Node(NodeId),
    /// An immediate number (an elementwise operand).
    Imm(f64),
}

impl From<NodeId> for Src {
    fn from(n: NodeId) -> Src {
        Src::Node(n)
    }
}

/// Elementwise unary ops. All compute in `f64` and round to the node dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `2^x`.
    Exp2,
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
    /// The error function (exact `gelu` needs it; tinygrad approximates it by a polynomial).
    Erf,
}

/// Elementwise binary ops. Comparisons produce `bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a · b`.
    Mul,
    /// Float division.
    Fdiv,
    /// Integer division truncating toward zero (i32); division by zero is an evaluation error.
    Idiv,
    /// `max(a, b)`.
    Max,
    /// `min(a, b)`.
    Min,
    /// `a^b` (floats).
    Pow,
    /// `a < b` (bool).
    CmpLt,
    /// `a ≤ b` (bool).
    CmpLe,
    /// `a = b` (bool).
    CmpEq,
    /// `a ≠ b` (bool).
    CmpNe,
}

impl BinaryOp {
    /// True for the four comparisons (bool results).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::CmpLt | BinaryOp::CmpLe | BinaryOp::CmpEq | BinaryOp::CmpNe
        )
    }
}

/// Reduction ops of REDUCE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Product.
    Prod,
}

impl ReduceOp {
    /// The neutral element for a given accumulation dtype.
    pub fn identity(self, acc: DType) -> f64 {
        match self {
            ReduceOp::Sum => 0.0,
            ReduceOp::Prod => 1.0,
            ReduceOp::Max => acc.lowest(),
            ReduceOp::Min => acc.highest(),
        }
    }
}

/// What a SCAN folds: op, axis and window flags (everything but the accumulation dtype).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScanSpec {
    /// The fold.
    pub op: ReduceOp,
    /// The scanned axis.
    pub axis: usize,
    /// The window leaves out the point itself.
    pub exclusive: bool,
    /// The window is the suffix, folded from the end.
    pub reverse: bool,
}

/// One input axis of a VIEW's index map: `offset + Σ coeff · out_axis`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AffineIndex {
    /// `(output axis, coefficient)` pairs, output axes ascending and distinct, no zero coefficient.
    pub terms: Vec<(usize, i64)>,
    /// The constant term.
    pub offset: i64,
}

impl AffineIndex {
    /// `(offset, terms)`: the row the index algebra's VIEW transformer reads
    /// ([`crate::index::movement::view`]).
    pub fn row(&self) -> (i64, &[(usize, i64)]) {
        (self.offset, &self.terms)
    }

    /// `coeff·axis + offset` helper; builds a canonical term list.
    pub fn new(mut terms: Vec<(usize, i64)>, offset: i64) -> AffineIndex {
        terms.retain(|t| t.1 != 0);
        terms.sort();
        let mut merged: Vec<(usize, i64)> = Vec::new();
        for (a, c) in terms {
            match merged.last_mut() {
                Some(last) if last.0 == a => last.1 += c,
                _ => merged.push((a, c)),
            }
        }
        merged.retain(|t| t.1 != 0);
        AffineIndex {
            terms: merged,
            offset,
        }
    }

    /// Value at an output index.
    pub fn eval(&self, out: &[i64]) -> i64 {
        self.terms
            .iter()
            .fold(self.offset, |acc, (a, c)| acc + c * out[*a])
    }
}

impl fmt::Display for AffineIndex {
    /// `2*i2+i4-1`, `0` for the zero map.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (a, c) in &self.terms {
            let (sign, mag) = if *c < 0 { ("-", -c) } else { ("+", *c) };
            if !first || *c < 0 {
                f.write_str(sign)?;
            }
            if mag != 1 {
                write!(f, "{mag}*")?;
            }
            write!(f, "i{a}")?;
            first = false;
        }
        if first {
            write!(f, "{}", self.offset)
        } else if self.offset != 0 {
            write!(
                f,
                "{}{}",
                if self.offset < 0 { "-" } else { "+" },
                self.offset.abs()
            )
        } else {
            Ok(())
        }
    }
}

/// The UOps. Result shapes of RESHAPE, EXPAND, VIEW, RANGE and INPUT are the node's `shape`.
#[derive(Clone, Debug, PartialEq)]
pub enum UOp {
    /// An external tensor (seed 002: `INPUT{tensor_id, dtype, shape}`).
    Input {
        /// The signature tensor's name.
        tensor_id: String,
    },
    /// A rank-0 constant of the node dtype.
    Const {
        /// The value (rounded to the dtype).
        value: f64,
    },
    /// `[n]` i32 tensor with value `i` at index `i`.
    Range,
    /// Row-major reshape to the node shape.
    Reshape,
    /// Transpose.
    Permute {
        /// Output axis `k` is input axis `perm[k]`.
        perm: Vec<usize>,
    },
    /// Same rank; only size-1 axes change size.
    Expand,
    /// Pad every axis by `(lo, hi)` (non-negative) with `value`.
    Pad {
        /// `(lo, hi)` per axis.
        pad: Vec<(i64, i64)>,
        /// The fill value.
        value: f64,
    },
    /// Keep `lo <= i < hi` with `step`; result size `ceil((hi - lo) / step)`.
    Shrink {
        /// First index kept, per axis.
        lo: Vec<Dim>,
        /// End (exclusive), per axis.
        hi: Vec<Dim>,
        /// Stride, per axis (≥ 1).
        step: Vec<i64>,
    },
    /// Reverse axes.
    Flip {
        /// The reversed axes.
        axes: Vec<usize>,
    },
    /// General affine re-indexing (sliding windows): one [`AffineIndex`] per input axis, over the
    /// output axes. Every output index must map inside the input.
    View {
        /// One index per input axis.
        map: Vec<AffineIndex>,
    },
    /// The general VIEW of seed 002 (affine + floordiv, with a guard):
    /// `out[i] = guard(i) ? x[index(i)] : fill`; result shape `access.shape`, dtype of `x`.
    /// Output axes are named `i0..i{r-1}`; other names are size symbols. An index the guard
    /// admits must lie inside `x` (checked at evaluation).
    Read {
        /// The access map.
        access: AccessMap,
    },
    /// An elementwise unary op.
    Unary(UnaryOp),
    /// An elementwise binary op.
    Binary(BinaryOp),
    /// `WHERE(cond, a, b)`.
    Where,
    /// Convert to the node dtype (round to nearest even; float→int truncates toward zero).
    Cast,
    /// Reduce `axes` away (keepdim = false), accumulating in `acc` (= the node dtype).
    Reduce {
        /// The reduction.
        op: ReduceOp,
        /// The reduced axes.
        axes: Vec<usize>,
        /// Accumulator dtype.
        acc: DType,
    },
    /// `torch.gather(x, axis, index)`: src `[x, index]`, result shape = index shape.
    Gather {
        /// The gathered axis.
        axis: usize,
    },
    /// Prefix fold along `axis` (same shape, node dtype = `acc`): `y[…, i, …] = op` over
    /// `x[…, j, …]` for `j ≤ i` (`j < i` when `exclusive`; `j ≥ i` / `j > i` when `reverse`),
    /// folded in scan order (ascending, descending when `reverse`) from the op's identity,
    /// rounding to `acc` after every step, like REDUCE. An empty window gives the identity.
    Scan {
        /// The fold.
        op: ReduceOp,
        /// The scanned axis.
        axis: usize,
        /// The window leaves out the point itself.
        exclusive: bool,
        /// The window is the suffix, folded from the end.
        reverse: bool,
        /// Accumulation (and result) dtype.
        acc: DType,
    },
}

impl UOp {
    /// The seed's upper-case name (`RESHAPE`, `EXP2`, `REDUCE`, …).
    pub fn name(&self) -> &'static str {
        match self {
            UOp::Input { .. } => "INPUT",
            UOp::Const { .. } => "CONST",
            UOp::Range => "RANGE",
            UOp::Reshape => "RESHAPE",
            UOp::Permute { .. } => "PERMUTE",
            UOp::Expand => "EXPAND",
            UOp::Pad { .. } => "PAD",
            UOp::Shrink { .. } => "SHRINK",
            UOp::Flip { .. } => "FLIP",
            UOp::View { .. } => "VIEW",
            UOp::Read { .. } => "READ",
            UOp::Unary(u) => match u {
                UnaryOp::Neg => "NEG",
                UnaryOp::Exp2 => "EXP2",
                UnaryOp::Log2 => "LOG2",
                UnaryOp::Sqrt => "SQRT",
                UnaryOp::Rsqrt => "RSQRT",
                UnaryOp::Recip => "RECIP",
                UnaryOp::Relu => "RELU",
                UnaryOp::Abs => "ABS",
                UnaryOp::Erf => "ERF",
            },
            UOp::Binary(b) => match b {
                BinaryOp::Add => "ADD",
                BinaryOp::Sub => "SUB",
                BinaryOp::Mul => "MUL",
                BinaryOp::Fdiv => "FDIV",
                BinaryOp::Idiv => "IDIV",
                BinaryOp::Max => "MAX",
                BinaryOp::Min => "MIN",
                BinaryOp::Pow => "POW",
                BinaryOp::CmpLt => "CMPLT",
                BinaryOp::CmpLe => "CMPLE",
                BinaryOp::CmpEq => "CMPEQ",
                BinaryOp::CmpNe => "CMPNE",
            },
            UOp::Where => "WHERE",
            UOp::Cast => "CAST",
            UOp::Reduce { .. } => "REDUCE",
            UOp::Gather { .. } => "GATHER",
            UOp::Scan { .. } => "SCAN",
        }
    }

    /// Movement ops are views: they never compute values.
    pub fn is_movement(&self) -> bool {
        matches!(
            self,
            UOp::Reshape
                | UOp::Permute { .. }
                | UOp::Expand
                | UOp::Pad { .. }
                | UOp::Shrink { .. }
                | UOp::Flip { .. }
                | UOp::View { .. }
                | UOp::Read { .. }
        )
    }

    /// Elementwise ops (unary, binary, WHERE, CAST).
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            UOp::Unary(_) | UOp::Binary(_) | UOp::Where | UOp::Cast
        )
    }
}

/// One node.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Its id (= its index).
    pub id: NodeId,
    /// What it computes.
    pub uop: UOp,
    /// Its operands.
    pub src: Vec<Src>,
    /// Result dtype.
    pub dtype: DType,
    /// Result shape.
    pub shape: Shape,
    /// The frontend node this came from (debugging; never affects semantics).
    pub tag: Option<String>,
}

/// A graph-signature input bound to an INPUT node.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgramInput {
    /// The signature tensor.
    pub tensor: String,
    /// Its INPUT node.
    pub node: NodeId,
}

/// A graph-signature output.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgramOutput {
    /// The signature tensor.
    pub tensor: String,
    /// The node computing it.
    pub node: NodeId,
}

/// A Tiny IR program: nodes in topological order (`nodes[i].id == NodeId(i)`), signature inputs
/// and outputs, and default symbol values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    /// Nodes in topological order.
    pub nodes: Vec<Node>,
    /// Signature inputs, in order.
    pub inputs: Vec<ProgramInput>,
    /// Signature outputs, in order.
    pub outputs: Vec<ProgramOutput>,
    /// Default values of symbols (the graph's `symbols`).
    pub symbols: BTreeMap<String, i64>,
}

impl Program {
    /// The node `id`.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }
}

/// Builds a [`Program`] node by node, checking every node with the typing rules as it is added.
#[derive(Debug, Default)]
pub struct Builder {
    /// The program built so far.
    pub prog: Program,
    /// Tag applied to nodes created from now on.
    pub tag: Option<String>,
}

impl Builder {
    /// An empty builder.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// The dtype of node `id`.
    pub fn dtype(&self, id: NodeId) -> DType {
        self.prog.node(id).dtype
    }

    /// The shape of node `id`.
    pub fn shape(&self, id: NodeId) -> &Shape {
        &self.prog.node(id).shape
    }

    /// Adds a node after checking it; `shape`/`dtype` are the declared result for ops whose result
    /// is an argument (RESHAPE, EXPAND, VIEW, RANGE, INPUT, CONST, CAST) and otherwise ignored.
    pub fn push(
        &mut self,
        uop: UOp,
        src: Vec<Src>,
        dtype: DType,
        shape: Shape,
    ) -> Result<NodeId, TinyError> {
        let id = NodeId(self.prog.nodes.len() as u32);
        let mut node = Node {
            id,
            uop,
            src,
            dtype,
            shape,
            tag: self.tag.clone(),
        };
        let (dt, sh) = infer::infer_node(&self.prog, &node)?;
        node.dtype = dt;
        node.shape = sh;
        self.prog.nodes.push(node);
        Ok(id)
    }

    /// Adds an INPUT for signature tensor `tensor`.
    pub fn input(&mut self, tensor: &str, dtype: DType, shape: Shape) -> Result<NodeId, TinyError> {
        let id = self.push(
            UOp::Input {
                tensor_id: tensor.to_string(),
            },
            vec![],
            dtype,
            shape,
        )?;
        self.prog.inputs.push(ProgramInput {
            tensor: tensor.to_string(),
            node: id,
        });
        Ok(id)
    }

    /// Declares `node` the value of signature output `tensor`.
    pub fn output(&mut self, tensor: &str, node: NodeId) {
        self.prog.outputs.push(ProgramOutput {
            tensor: tensor.to_string(),
            node,
        });
    }

    /// Adds a rank-0 constant.
    pub fn constant(&mut self, value: f64, dtype: DType) -> Result<NodeId, TinyError> {
        self.push(UOp::Const { value }, vec![], dtype, vec![])
    }

    /// Adds `RANGE(n)`.
    pub fn range(&mut self, n: Dim) -> Result<NodeId, TinyError> {
        self.push(UOp::Range, vec![], DType::I32, vec![n])
    }

    /// Adds a RESHAPE.
    pub fn reshape(&mut self, x: NodeId, shape: Shape) -> Result<NodeId, TinyError> {
        if *self.shape(x) == shape {
            return Ok(x);
        }
        let dt = self.dtype(x);
        self.push(UOp::Reshape, vec![x.into()], dt, shape)
    }

    /// Adds a PERMUTE.
    pub fn permute(&mut self, x: NodeId, perm: Vec<usize>) -> Result<NodeId, TinyError> {
        if perm.iter().enumerate().all(|(i, p)| i == *p) && perm.len() == self.shape(x).len() {
            return Ok(x);
        }
        let dt = self.dtype(x);
        self.push(UOp::Permute { perm }, vec![x.into()], dt, vec![])
    }

    /// Adds an EXPAND.
    pub fn expand(&mut self, x: NodeId, shape: Shape) -> Result<NodeId, TinyError> {
        if *self.shape(x) == shape {
            return Ok(x);
        }
        let dt = self.dtype(x);
        self.push(UOp::Expand, vec![x.into()], dt, shape)
    }

    /// Adds a PAD.
    pub fn pad(
        &mut self,
        x: NodeId,
        pad: Vec<(i64, i64)>,
        value: f64,
    ) -> Result<NodeId, TinyError> {
        if pad.iter().all(|p| *p == (0, 0)) {
            return Ok(x);
        }
        let dt = self.dtype(x);
        self.push(UOp::Pad { pad, value }, vec![x.into()], dt, vec![])
    }

    /// Adds a SHRINK.
    pub fn shrink(
        &mut self,
        x: NodeId,
        lo: Vec<Dim>,
        hi: Vec<Dim>,
        step: Vec<i64>,
    ) -> Result<NodeId, TinyError> {
        let sh = self.shape(x);
        if lo.iter().all(|d| d.is_int(0)) && hi == *sh && step.iter().all(|s| *s == 1) {
            return Ok(x);
        }
        let dt = self.dtype(x);
        self.push(UOp::Shrink { lo, hi, step }, vec![x.into()], dt, vec![])
    }

    /// Adds a FLIP.
    pub fn flip(&mut self, x: NodeId, axes: Vec<usize>) -> Result<NodeId, TinyError> {
        if axes.is_empty() {
            return Ok(x);
        }
        let dt = self.dtype(x);
        self.push(UOp::Flip { axes }, vec![x.into()], dt, vec![])
    }

    /// Adds a VIEW.
    pub fn view(
        &mut self,
        x: NodeId,
        shape: Shape,
        map: Vec<AffineIndex>,
    ) -> Result<NodeId, TinyError> {
        let dt = self.dtype(x);
        self.push(UOp::View { map }, vec![x.into()], dt, shape)
    }

    /// READ `x` through `access` (result shape `access.shape`).
    pub fn read(&mut self, x: NodeId, access: AccessMap) -> Result<NodeId, TinyError> {
        let dt = self.dtype(x);
        let shape = access.shape.clone();
        self.push(UOp::Read { access }, vec![x.into()], dt, shape)
    }

    /// Adds a unary op.
    pub fn unary(&mut self, op: UnaryOp, x: NodeId) -> Result<NodeId, TinyError> {
        let dt = self.dtype(x);
        self.push(UOp::Unary(op), vec![x.into()], dt, vec![])
    }

    /// Adds a binary op.
    pub fn binary(&mut self, op: BinaryOp, a: Src, b: Src) -> Result<NodeId, TinyError> {
        self.push(UOp::Binary(op), vec![a, b], DType::F32, vec![])
    }

    /// Adds `WHERE(c, a, b)`.
    pub fn where_(&mut self, c: NodeId, a: Src, b: Src) -> Result<NodeId, TinyError> {
        self.push(UOp::Where, vec![c.into(), a, b], DType::F32, vec![])
    }

    /// Adds a CAST.
    pub fn cast(&mut self, x: NodeId, to: DType) -> Result<NodeId, TinyError> {
        if self.dtype(x) == to {
            return Ok(x);
        }
        let sh = self.shape(x).clone();
        self.push(UOp::Cast, vec![x.into()], to, sh)
    }

    /// Adds a REDUCE.
    pub fn reduce(
        &mut self,
        op: ReduceOp,
        x: NodeId,
        axes: Vec<usize>,
        acc: DType,
    ) -> Result<NodeId, TinyError> {
        self.push(UOp::Reduce { op, axes, acc }, vec![x.into()], acc, vec![])
    }

    /// SCAN of `x` along `axis`, accumulating in `acc` (the result dtype).
    pub fn scan(&mut self, x: NodeId, spec: ScanSpec, acc: DType) -> Result<NodeId, TinyError> {
        let ScanSpec {
            op,
            axis,
            exclusive,
            reverse,
        } = spec;
        self.push(
            UOp::Scan {
                op,
                axis,
                exclusive,
                reverse,
                acc,
            },
            vec![x.into()],
            acc,
            vec![],
        )
    }

    /// Adds a GATHER.
    pub fn gather(&mut self, x: NodeId, index: NodeId, axis: usize) -> Result<NodeId, TinyError> {
        let dt = self.dtype(x);
        self.push(
            UOp::Gather { axis },
            vec![x.into(), index.into()],
            dt,
            vec![],
        )
    }

    /// The program.
    pub fn finish(self) -> Program {
        self.prog
    }
}
