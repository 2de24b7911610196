//! The syntax tree of a `.graph` program.

use super::lex::Pos;
use crate::ir::dtype::DType;

/// A name with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    /// The name.
    pub name: String,
    /// Where it is written.
    pub pos: Pos,
}

/// One axis of a declared type.
#[derive(Clone, Debug, PartialEq)]
pub enum DimExpr {
    /// A literal size.
    Int(i64),
    /// A shape variable.
    Var(Ident),
}

/// A parameter or declared output: `x: f32[B, N]`, optionally followed by the input qualifiers
/// `param`, `mutable`, `const_pool` (graph.json's `role`, `mutability`, `storage`).
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Its name.
    pub name: Ident,
    /// Its dtype.
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<DimExpr>,
    /// Qualifiers, as written.
    pub quals: Vec<Ident>,
}

/// A shape variable of `graph<…>` with its default value.
#[derive(Clone, Debug, PartialEq)]
pub struct ShapeVar {
    /// Its name.
    pub name: Ident,
    /// `=value`, if given.
    pub default: Option<i64>,
}

/// An attribute value of a keyword argument.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    /// An integer.
    Int(i64),
    /// A float.
    Num(f64),
    /// `true` / `false`.
    Bool(bool),
    /// A name: a dtype, a mode, a reduction function, a shape variable.
    Name(String),
    /// `[…]`.
    List(Vec<AttrValue>),
}

/// A keyword argument `name=value`.
#[derive(Clone, Debug, PartialEq)]
pub struct KwArg {
    /// The attribute name.
    pub name: Ident,
    /// Its value.
    pub value: AttrValue,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl BinOp {
    /// The elementwise function it denotes.
    pub fn func(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::Lt => "lt",
            BinOp::Le => "le",
            BinOp::Gt => "gt",
            BinOp::Ge => "ge",
            BinOp::Eq => "eq",
            BinOp::Ne => "ne",
        }
    }
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A number literal.
    Num {
        /// Its value.
        value: f64,
        /// Where.
        pos: Pos,
    },
    /// `true` / `false` (attribute values only; reported in expressions).
    Bool {
        /// Its value.
        value: bool,
        /// Where.
        pos: Pos,
    },
    /// A variable.
    Var(Ident),
    /// `-e`.
    Neg {
        /// The operand.
        arg: Box<Expr>,
        /// Where the `-` is.
        pos: Pos,
    },
    /// `l op r`.
    Binary {
        /// The operator.
        op: BinOp,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand.
        rhs: Box<Expr>,
        /// Where the operator is.
        pos: Pos,
    },
    /// `f(args, kw=value)`.
    Call {
        /// The callee.
        func: Ident,
        /// Positional arguments.
        args: Vec<Expr>,
        /// Keyword arguments.
        kwargs: Vec<KwArg>,
    },
}

impl Expr {
    /// Where the expression is reported.
    pub fn pos(&self) -> Pos {
        match self {
            Expr::Num { pos, .. }
            | Expr::Bool { pos, .. }
            | Expr::Neg { pos, .. }
            | Expr::Binary { pos, .. } => *pos,
            Expr::Var(i) => i.pos,
            Expr::Call { func, .. } => func.pos,
        }
    }
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `x = e` or `(a, b) = e`.
    Assign {
        /// The names bound.
        targets: Vec<Ident>,
        /// Whether the targets are a parenthesized tuple.
        tuple: bool,
        /// The value.
        value: Expr,
    },
    /// `return e1, e2`.
    Return {
        /// The values, bound to the declared outputs in order.
        values: Vec<Expr>,
        /// Where `return` is.
        pos: Pos,
    },
}

/// `graph<…> name(params) -> (outputs) { body }`.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphDef {
    /// Its name.
    pub name: Ident,
    /// `graph<…>` declarations.
    pub shape_vars: Vec<ShapeVar>,
    /// Inputs.
    pub params: Vec<Param>,
    /// Declared outputs.
    pub outputs: Vec<Param>,
    /// Statements, the last one a `return` once checked.
    pub body: Vec<Stmt>,
}

/// A parsed program: graph definitions in source order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Program {
    /// The graphs.
    pub graphs: Vec<GraphDef>,
}
