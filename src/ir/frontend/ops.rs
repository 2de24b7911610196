//! The typed op vocabulary of `graph.json` (`graph-json.md` § Ops). After loading, ops are in the
//! normal form documented on [`crate::ir::frontend`].

use crate::ir::dim::Dim;
use crate::ir::dtype::DType;

/// Elementwise functions (`Elementwise.fn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EwFn {
    // unary
    Neg,
    Abs,
    Exp,
    Exp2,
    Log,
    Sqrt,
    Rsqrt,
    Recip,
    Relu,
    Sigmoid,
    Tanh,
    Silu,
    /// Exact erf form.
    Gelu,
    GeluTanh,
    // binary
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Pow,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    // ternary
    Where,
}

impl EwFn {
    /// Every function with its wire name.
    pub const ALL: [(EwFn, &'static str); 28] = [
        (EwFn::Neg, "neg"),
        (EwFn::Abs, "abs"),
        (EwFn::Exp, "exp"),
        (EwFn::Exp2, "exp2"),
        (EwFn::Log, "log"),
        (EwFn::Sqrt, "sqrt"),
        (EwFn::Rsqrt, "rsqrt"),
        (EwFn::Recip, "recip"),
        (EwFn::Relu, "relu"),
        (EwFn::Sigmoid, "sigmoid"),
        (EwFn::Tanh, "tanh"),
        (EwFn::Silu, "silu"),
        (EwFn::Gelu, "gelu"),
        (EwFn::GeluTanh, "gelu_tanh"),
        (EwFn::Add, "add"),
        (EwFn::Sub, "sub"),
        (EwFn::Mul, "mul"),
        (EwFn::Div, "div"),
        (EwFn::Max, "max"),
        (EwFn::Min, "min"),
        (EwFn::Pow, "pow"),
        (EwFn::Lt, "lt"),
        (EwFn::Le, "le"),
        (EwFn::Gt, "gt"),
        (EwFn::Ge, "ge"),
        (EwFn::Eq, "eq"),
        (EwFn::Ne, "ne"),
        (EwFn::Where, "where"),
    ];

    pub fn parse(s: &str) -> Option<EwFn> {
        EwFn::ALL.iter().find(|(_, n)| *n == s).map(|(f, _)| *f)
    }

    pub fn name(self) -> &'static str {
        EwFn::ALL
            .iter()
            .find(|(f, _)| *f == self)
            .map(|(_, n)| *n)
            .unwrap_or("?")
    }

    /// Number of operands (1, 2 or 3).
    pub fn arity(self) -> usize {
        use EwFn::*;
        match self {
            Neg | Abs | Exp | Exp2 | Log | Sqrt | Rsqrt | Recip | Relu | Sigmoid | Tanh | Silu
            | Gelu | GeluTanh => 1,
            Where => 3,
            _ => 2,
        }
    }

    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            EwFn::Lt | EwFn::Le | EwFn::Gt | EwFn::Ge | EwFn::Eq | EwFn::Ne
        )
    }
}

/// `Reduce.fn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceFn {
    Sum,
    Max,
    Min,
    Mean,
    Prod,
}

/// `Cumulative.fn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CumFn {
    Sum,
    Prod,
    Max,
    Min,
}

/// `Pool.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolMode {
    Max,
    Avg,
}

/// Attributes shared by `Conv` and `ConvTranspose`, normalized: one entry per spatial dim.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvAttrs {
    pub stride: Vec<i64>,
    /// `[lo, hi]` per spatial dim.
    pub pad: Vec<(i64, i64)>,
    pub dilation: Vec<i64>,
    pub groups: i64,
    pub acc: DType,
    /// ConvTranspose only (all zeros for Conv).
    pub output_padding: Vec<i64>,
}

/// `Pool` attributes, normalized.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolAttrs {
    pub mode: PoolMode,
    pub kernel: Vec<i64>,
    pub stride: Vec<i64>,
    pub pad: Vec<(i64, i64)>,
    pub dilation: Vec<i64>,
    pub count_include_pad: bool,
}

/// One op with its attributes. Comments give the normal form after loading.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    MatMul {
        acc: DType,
    },
    Gemm {
        trans_a: bool,
        trans_b: bool,
        alpha: f64,
        beta: f64,
        acc: DType,
    },
    Conv(ConvAttrs),
    ConvTranspose(ConvAttrs),
    Pool(PoolAttrs),
    Attention {
        causal: bool,
        /// Resolved: `1/sqrt(D)` when not given.
        scale: f64,
        acc: DType,
    },
    /// `axis` non-negative.
    /// Computed (max, exp, sum, divide) in `acc` (default fp32).
    Softmax {
        axis: usize,
        acc: DType,
    },
    /// Normalizes over `axis..rank`, computed in `acc` (default fp32).
    LayerNorm {
        axis: usize,
        eps: f64,
        acc: DType,
    },
    /// `acc_dtype` is an extension of the graph-json table (as for LayerNorm).
    RmsNorm {
        axis: usize,
        eps: f64,
        acc: DType,
    },
    Elementwise {
        func: EwFn,
    },
    /// `axes` non-negative, sorted, unique.
    Reduce {
        func: ReduceFn,
        axes: Vec<usize>,
        keepdim: bool,
        acc: DType,
    },
    Cumulative {
        func: CumFn,
        axis: usize,
        reverse: bool,
        exclusive: bool,
    },
    Cast {
        to: DType,
    },
    /// Resolved target shape (the `-1` entry computed).
    Reshape {
        shape: Vec<Dim>,
    },
    Permute {
        perm: Vec<usize>,
    },
    /// Resolved target shape (`-1` entries replaced by the kept size).
    Expand {
        shape: Vec<Dim>,
    },
    /// `[lo, hi]` per dim (negative crops).
    Pad {
        pad: Vec<(i64, i64)>,
        value: f64,
    },
    /// Resolved per input axis: numpy-clamped `start`/`end` (symbolic when the dim is) and `step`
    /// (1 for axes not sliced).
    Slice {
        starts: Vec<Dim>,
        ends: Vec<Dim>,
        steps: Vec<i64>,
    },
    Flip {
        axes: Vec<usize>,
    },
    Concat {
        axis: usize,
    },
    /// As given (may be longer than the rank).
    Repeat {
        repeats: Vec<i64>,
    },
    Unfold {
        axis: usize,
        size: i64,
        step: i64,
    },
    Gather {
        axis: usize,
    },
}

impl Op {
    /// The op's wire name.
    pub fn name(&self) -> &'static str {
        match self {
            Op::MatMul { .. } => "MatMul",
            Op::Gemm { .. } => "GEMM",
            Op::Conv(_) => "Conv",
            Op::ConvTranspose(_) => "ConvTranspose",
            Op::Pool(_) => "Pool",
            Op::Attention { .. } => "Attention",
            Op::Softmax { .. } => "Softmax",
            Op::LayerNorm { .. } => "LayerNorm",
            Op::RmsNorm { .. } => "RMSNorm",
            Op::Elementwise { .. } => "Elementwise",
            Op::Reduce { .. } => "Reduce",
            Op::Cumulative { .. } => "Cumulative",
            Op::Cast { .. } => "Cast",
            Op::Reshape { .. } => "Reshape",
            Op::Permute { .. } => "Permute",
            Op::Expand { .. } => "Expand",
            Op::Pad { .. } => "Pad",
            Op::Slice { .. } => "Slice",
            Op::Flip { .. } => "Flip",
            Op::Concat { .. } => "Concat",
            Op::Repeat { .. } => "Repeat",
            Op::Unfold { .. } => "Unfold",
            Op::Gather { .. } => "Gather",
        }
    }

    /// Every op name of the contract, for "unknown op" suggestions.
    pub const NAMES: [&'static str; 23] = [
        "MatMul",
        "GEMM",
        "Conv",
        "ConvTranspose",
        "Pool",
        "Attention",
        "Softmax",
        "LayerNorm",
        "RMSNorm",
        "Elementwise",
        "Reduce",
        "Cumulative",
        "Cast",
        "Reshape",
        "Permute",
        "Expand",
        "Pad",
        "Slice",
        "Flip",
        "Concat",
        "Repeat",
        "Unfold",
        "Gather",
    ];
}
