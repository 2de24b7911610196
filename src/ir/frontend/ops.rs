//! The typed op vocabulary of `graph.json` (`graph-json.md` § Ops). After loading, ops are in the
//! normal form documented on [`crate::ir::frontend`].

use crate::ir::dim::Dim;
use crate::ir::dtype::DType;

/// Elementwise functions (`Elementwise.fn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EwFn {
    // unary
    /// `neg`: `-x`.
    Neg,
    /// `abs`: `|x|`.
    Abs,
    /// `exp`: `e^x`.
    Exp,
    /// `exp2`: `2^x`.
    Exp2,
    /// `log`: `ln x`.
    Log,
    /// `sqrt`: `√x`.
    Sqrt,
    /// `rsqrt`: `1/√x`.
    Rsqrt,
    /// `recip`: `1/x`.
    Recip,
    /// `relu`: `max(x, 0)`.
    Relu,
    /// `sigmoid`: `1/(1+e^-x)`.
    Sigmoid,
    /// `tanh`.
    Tanh,
    /// `silu`: `x·sigmoid(x)`.
    Silu,
    /// Exact erf form.
    Gelu,
    /// `gelu_tanh`: the tanh approximation of GELU.
    GeluTanh,
    // binary
    /// `add`: `a + b`.
    Add,
    /// `sub`: `a - b`.
    Sub,
    /// `mul`: `a · b`.
    Mul,
    /// `div`: `a / b` (integers: toward zero).
    Div,
    /// `max`.
    Max,
    /// `min`.
    Min,
    /// `pow`: `a^b` (floats).
    Pow,
    /// `lt`: `a < b`.
    Lt,
    /// `le`: `a ≤ b`.
    Le,
    /// `gt`: `a > b`.
    Gt,
    /// `ge`: `a ≥ b`.
    Ge,
    /// `eq`: `a = b`.
    Eq,
    /// `ne`: `a ≠ b`.
    Ne,
    // ternary
    /// `where`: `cond ? a : b`.
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

    /// The function with wire name `s`.
    pub fn parse(s: &str) -> Option<EwFn> {
        EwFn::ALL.iter().find(|(_, n)| *n == s).map(|(f, _)| *f)
    }

    /// The wire name.
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

    /// True for `lt le gt ge eq ne` (bool results).
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
    /// Sum.
    Sum,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Mean (sum in `acc`, divided by the count).
    Mean,
    /// Product.
    Prod,
}

/// `Cumulative.fn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CumFn {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}

/// `Pool.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolMode {
    /// Max pooling.
    Max,
    /// Average pooling.
    Avg,
}

/// Attributes shared by `Conv` and `ConvTranspose`, normalized: one entry per spatial dim.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvAttrs {
    /// Stride per spatial dim.
    pub stride: Vec<i64>,
    /// `[lo, hi]` per spatial dim.
    pub pad: Vec<(i64, i64)>,
    /// Dilation per spatial dim.
    pub dilation: Vec<i64>,
    /// Channel groups.
    pub groups: i64,
    /// Accumulation dtype (default fp32).
    pub acc: DType,
    /// ConvTranspose only (all zeros for Conv).
    pub output_padding: Vec<i64>,
}

/// `Pool` attributes, normalized.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolAttrs {
    /// Max or average.
    pub mode: PoolMode,
    /// Window size per spatial dim.
    pub kernel: Vec<i64>,
    /// Stride per spatial dim.
    pub stride: Vec<i64>,
    /// Padding `(lo, hi)` per dim.
    pub pad: Vec<(i64, i64)>,
    /// Dilation per spatial dim.
    pub dilation: Vec<i64>,
    /// Average pooling: count padded elements in the divisor.
    pub count_include_pad: bool,
}

/// One op with its attributes. Comments give the normal form after loading.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `MatMul`: batched matrix product (numpy `matmul`).
    MatMul {
        /// Accumulation dtype (default fp32).
        acc: DType,
    },
    /// `GEMM`: `alpha·op(A)·op(B) + beta·C`.
    Gemm {
        /// Transpose A.
        trans_a: bool,
        /// Transpose B.
        trans_b: bool,
        /// Scale of A·B.
        alpha: f64,
        /// Scale of C.
        beta: f64,
        /// Accumulation dtype (default fp32).
        acc: DType,
    },
    /// `Conv`: N-d convolution (NC…).
    Conv(ConvAttrs),
    /// `ConvTranspose`: transposed convolution.
    ConvTranspose(ConvAttrs),
    /// `Pool`: max or average pooling.
    Pool(PoolAttrs),
    /// `Attention`: `softmax(Q·Kᵀ·scale [+ causal mask])·V`.
    Attention {
        /// Mask future positions.
        causal: bool,
        /// Resolved: `1/sqrt(D)` when not given.
        scale: f64,
        /// Accumulation dtype (default fp32).
        acc: DType,
    },
    /// `axis` non-negative.
    /// Computed (max, exp, sum, divide) in `acc` (default fp32).
    Softmax {
        /// The axis.
        axis: usize,
        /// Accumulation dtype (default fp32).
        acc: DType,
    },
    /// Normalizes over `axis..rank`, computed in `acc` (default fp32).
    LayerNorm {
        /// The axis.
        axis: usize,
        /// Added to the variance.
        eps: f64,
        /// Accumulation dtype (default fp32).
        acc: DType,
    },
    /// `acc_dtype` is an extension of the graph-json table (as for LayerNorm).
    RmsNorm {
        /// The axis.
        axis: usize,
        /// Added to the variance.
        eps: f64,
        /// Accumulation dtype (default fp32).
        acc: DType,
    },
    /// `Elementwise`: one function of 1–3 broadcast operands.
    Elementwise {
        /// The function.
        func: EwFn,
    },
    /// `axes` non-negative, sorted, unique.
    Reduce {
        /// The function.
        func: ReduceFn,
        /// The axes.
        axes: Vec<usize>,
        /// Keep reduced axes as size 1.
        keepdim: bool,
        /// Accumulation dtype (default fp32).
        acc: DType,
    },
    /// `Cumulative`: running sum/product/max/min along an axis.
    Cumulative {
        /// The function.
        func: CumFn,
        /// The axis.
        axis: usize,
        /// Accumulate from the end.
        reverse: bool,
        /// Exclude the current element.
        exclusive: bool,
    },
    /// `Cast`: convert to a dtype.
    Cast {
        /// Target dtype.
        to: DType,
    },
    /// Resolved target shape (the `-1` entry computed).
    Reshape {
        /// Target shape.
        shape: Vec<Dim>,
    },
    /// `Permute`: transpose.
    Permute {
        /// Output axis `k` is input axis `perm[k]`.
        perm: Vec<usize>,
    },
    /// Resolved target shape (`-1` entries replaced by the kept size).
    Expand {
        /// Target shape.
        shape: Vec<Dim>,
    },
    /// `[lo, hi]` per dim (negative crops).
    Pad {
        /// Padding `(lo, hi)` per dim.
        pad: Vec<(i64, i64)>,
        /// Fill value.
        value: f64,
    },
    /// Resolved per input axis: numpy-clamped `start`/`end` (symbolic when the dim is) and `step`
    /// (1 for axes not sliced).
    Slice {
        /// Start per axis.
        starts: Vec<Dim>,
        /// End (exclusive) per axis.
        ends: Vec<Dim>,
        /// Step per axis.
        steps: Vec<i64>,
    },
    /// `Flip`: reverse axes.
    Flip {
        /// The axes.
        axes: Vec<usize>,
    },
    /// `Concat`: join along an axis.
    Concat {
        /// The axis.
        axis: usize,
    },
    /// As given (may be longer than the rank).
    Repeat {
        /// Repeat count per axis.
        repeats: Vec<i64>,
    },
    /// `Unfold`: sliding windows along an axis (a new trailing axis of `size`).
    Unfold {
        /// The axis.
        axis: usize,
        /// Window size.
        size: i64,
        /// Window step.
        step: i64,
    },
    /// `Gather`: pick along an axis by an index tensor.
    Gather {
        /// The axis.
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
