//! The e-graph language: Tiny UOps as egg e-nodes whose attributes are [`Attr`] leaf children.
//! Operand order follows Tiny IR; attribute children come after the tensor operands, except
//! REDUCE, which reads like seed 001 §6.3: `(reduce op axes acc body)`.
//!
//! RB-SSA's `read` (an access map with a guard, seed 001 §6.3) and kernel nodes
//! (`(kernel {body} in…)`, [`super::kernel`]) live in the same enum (`docs/egraph-design.md`).

use super::attr::Attr;
use crate::ir::tiny::{BinaryOp, UnaryOp};
use egg::{define_language, Id};

define_language! {
    /// Tiny IR as an egg language: the **pattern vocabulary** of rewrite rules.
    ///
    /// A pattern is an s-expression `(op child…)` over these nodes; `?x` binds any e-class.
    /// Tensor operands come first, attribute leaves ([`Attr`], written in their text form)
    /// after them — except `reduce`, which reads like seed 001 §6.3. Every node is typed by Tiny
    /// IR's rules (`docs/tiny-ir.md`); a rule that builds an ill-typed node or equates values of
    /// different dtype or shape is reported by the phase runner (`rules::RuleError`).
    ///
    /// | node | operands and attribute leaves | meaning |
    /// | --- | --- | --- |
    /// | `(input @name dtype shape)` | name `@X`, dtype `fp16`, shape `[T,64]` | a signature input |
    /// | `(const value dtype)` | number `0.5`, dtype | a scalar constant (rank 0) |
    /// | `(range shape)` | shape `[n]` | `0, 1, …, n-1` (i32) |
    /// | `(reshape x shape)` | tensor, shape | row-major reshape |
    /// | `(permute x #perm)` | tensor, ints `#[1,0]` | transpose |
    /// | `(expand x shape)` | tensor, shape | broadcast size-1 axes |
    /// | `(pad x pads value)` | tensor, pads `pad[0:0,1:1]`, number | pad with a constant |
    /// | `(shrink x lo hi #step)` | tensor, shape, shape, ints | strided slice `[lo, hi)` |
    /// | `(flip x #axes)` | tensor, ints | reverse axes |
    /// | `(view x shape map)` | tensor, shape, map `map[i0,2*i1]` | affine view (built by rules) |
    /// | `(neg x)` `(exp2 x)` `(log2 x)` `(sqrt x)` `(rsqrt x)` `(recip x)` `(relu x)` `(abs x)` `(erf x)` | tensor | unary elementwise |
    /// | `(add a b)` `(sub a b)` `(mul a b)` `(fdiv a b)` `(idiv a b)` `(max a b)` `(min a b)` `(pow a b)` | tensors of one dtype and shape, or a number leaf `2` as an immediate | binary elementwise |
    /// | `(cmplt a b)` `(cmple a b)` `(cmpeq a b)` `(cmpne a b)` | as binary | comparison (bool) |
    /// | `(where c a b)` | bool tensor, tensors | select |
    /// | `(cast x dtype)` | tensor, dtype | convert (round to nearest even) |
    /// | `(reduce op #axes acc x)` | `sum`/`max`/`min`/`prod`, ints, accumulator dtype, tensor | reduce axes (kept as size 1) |
    /// | `(gather x index #axis)` | tensor, i32 tensor, ints `#[a]` | gather along an axis |
    /// | `(read x access)` | tensor, access map | RB-SSA read (built by the rbssa rules) |
    /// | `(kernel {body} in…)` | body leaf, input tensors | a fused kernel (built by the kernels phase) |
    /// | attribute leaf | see [`Attr`]'s text forms | names, dtypes, numbers, shapes, lists |
    ///
    /// Example: `(relu (relu ?x)) => (relu ?x)`, `(cast (cast ?x fp32) fp16)`,
    /// `(reduce sum ?axes fp32 (mul ?a ?b))`.
    #[allow(missing_docs)] // the variants are the table above
    pub enum TensorLang {
        // I/O and helpers
        "input" = Input([Id; 3]),     // @name dtype shape
        "const" = Const([Id; 2]),     // value dtype
        "range" = Range(Id),          // shape [n]
        // movement
        "reshape" = Reshape([Id; 2]), // x shape
        "permute" = Permute([Id; 2]), // x #perm
        "expand" = Expand([Id; 2]),   // x shape
        "pad" = Pad([Id; 3]),         // x pads value
        "shrink" = Shrink([Id; 4]),   // x lo hi #step
        "flip" = Flip([Id; 2]),       // x #axes
        "view" = View([Id; 3]),       // x shape map
        // unary
        "neg" = Neg(Id),
        "exp2" = Exp2(Id),
        "log2" = Log2(Id),
        "sqrt" = Sqrt(Id),
        "rsqrt" = Rsqrt(Id),
        "recip" = Recip(Id),
        "relu" = Relu(Id),
        "abs" = Abs(Id),
        "erf" = Erf(Id),
        // binary (an operand may be a number leaf: an immediate)
        "add" = Add([Id; 2]),
        "sub" = Sub([Id; 2]),
        "mul" = Mul([Id; 2]),
        "fdiv" = Fdiv([Id; 2]),
        "idiv" = Idiv([Id; 2]),
        "max" = Max([Id; 2]),
        "min" = Min([Id; 2]),
        "pow" = Pow([Id; 2]),
        "cmplt" = CmpLt([Id; 2]),
        "cmple" = CmpLe([Id; 2]),
        "cmpeq" = CmpEq([Id; 2]),
        "cmpne" = CmpNe([Id; 2]),
        "where" = Where([Id; 3]),     // cond a b
        "cast" = Cast([Id; 2]),       // x dtype
        "reduce" = Reduce([Id; 4]),   // op #axes acc x
        "gather" = Gather([Id; 3]),   // x index #axis
        "scan" = Scan([Id; 4]),       // op #[axis,exclusive,reverse] acc x
        // RB-SSA
        "read" = Read([Id; 2]),       // x access
        // kernels
        "kernel" = Kernel(Box<[Id]>), // {body} inputs...
        Attr(Attr),
    }
}

impl TensorLang {
    /// The unary op of a unary e-node.
    pub fn unary_op(&self) -> Option<(UnaryOp, Id)> {
        use TensorLang as T;
        Some(match self {
            T::Neg(x) => (UnaryOp::Neg, *x),
            T::Exp2(x) => (UnaryOp::Exp2, *x),
            T::Log2(x) => (UnaryOp::Log2, *x),
            T::Sqrt(x) => (UnaryOp::Sqrt, *x),
            T::Rsqrt(x) => (UnaryOp::Rsqrt, *x),
            T::Recip(x) => (UnaryOp::Recip, *x),
            T::Relu(x) => (UnaryOp::Relu, *x),
            T::Abs(x) => (UnaryOp::Abs, *x),
            T::Erf(x) => (UnaryOp::Erf, *x),
            _ => return None,
        })
    }

    /// The binary op of a binary e-node.
    pub fn binary_op(&self) -> Option<(BinaryOp, [Id; 2])> {
        use TensorLang as T;
        Some(match self {
            T::Add(c) => (BinaryOp::Add, *c),
            T::Sub(c) => (BinaryOp::Sub, *c),
            T::Mul(c) => (BinaryOp::Mul, *c),
            T::Fdiv(c) => (BinaryOp::Fdiv, *c),
            T::Idiv(c) => (BinaryOp::Idiv, *c),
            T::Max(c) => (BinaryOp::Max, *c),
            T::Min(c) => (BinaryOp::Min, *c),
            T::Pow(c) => (BinaryOp::Pow, *c),
            T::CmpLt(c) => (BinaryOp::CmpLt, *c),
            T::CmpLe(c) => (BinaryOp::CmpLe, *c),
            T::CmpEq(c) => (BinaryOp::CmpEq, *c),
            T::CmpNe(c) => (BinaryOp::CmpNe, *c),
            _ => return None,
        })
    }

    /// The e-node of a unary op.
    pub fn unary(op: UnaryOp, x: Id) -> TensorLang {
        use TensorLang as T;
        match op {
            UnaryOp::Neg => T::Neg(x),
            UnaryOp::Exp2 => T::Exp2(x),
            UnaryOp::Log2 => T::Log2(x),
            UnaryOp::Sqrt => T::Sqrt(x),
            UnaryOp::Rsqrt => T::Rsqrt(x),
            UnaryOp::Recip => T::Recip(x),
            UnaryOp::Relu => T::Relu(x),
            UnaryOp::Abs => T::Abs(x),
            UnaryOp::Erf => T::Erf(x),
        }
    }

    /// The e-node of a binary op.
    pub fn binary(op: BinaryOp, c: [Id; 2]) -> TensorLang {
        use TensorLang as T;
        match op {
            BinaryOp::Add => T::Add(c),
            BinaryOp::Sub => T::Sub(c),
            BinaryOp::Mul => T::Mul(c),
            BinaryOp::Fdiv => T::Fdiv(c),
            BinaryOp::Idiv => T::Idiv(c),
            BinaryOp::Max => T::Max(c),
            BinaryOp::Min => T::Min(c),
            BinaryOp::Pow => T::Pow(c),
            BinaryOp::CmpLt => T::CmpLt(c),
            BinaryOp::CmpLe => T::CmpLe(c),
            BinaryOp::CmpEq => T::CmpEq(c),
            BinaryOp::CmpNe => T::CmpNe(c),
        }
    }

    /// True for [`Attr`] leaves.
    pub fn is_attr(&self) -> bool {
        matches!(self, TensorLang::Attr(_))
    }

    /// True for movement ops (views and `read`s): inside a kernel they become access maps and
    /// compute nothing.
    pub fn is_movement(&self) -> bool {
        use TensorLang as T;
        matches!(
            self,
            T::Reshape(_)
                | T::Permute(_)
                | T::Expand(_)
                | T::Pad(_)
                | T::Shrink(_)
                | T::Flip(_)
                | T::View(_)
                | T::Read(_)
        )
    }
}
