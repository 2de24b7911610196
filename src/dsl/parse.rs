//! The recursive-descent parser of the `.graph` DSL (tokens → [`Program`]). Grammar (seed 004 §
//! DSL構文, `README.md` § The graph DSL):
//!
//! ```text
//! program  := graph*
//! graph    := "graph" ("<" var ("=" INT)? ("," …)* ">")? NAME "(" params ")" "->" "(" params ")"
//!             "{" stmt* "}"
//! param    := NAME ":" DTYPE "[" (INT | var) ("," …)* "]" qualifier*
//! stmt     := NAME "=" expr | "(" NAME ("," NAME)* ")" "=" expr | "return" expr ("," expr)*
//! expr     := sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)?
//! sum      := term (("+" | "-") term)*      term := unary (("*" | "/") unary)*
//! unary    := "-" unary | atom              atom := NUMBER | NAME | call | "(" expr ")"
//! call     := NAME "(" (expr ",")* (NAME "=" attr ",")* ")"
//! attr     := "-"? NUMBER | "true" | "false" | NAME | "[" (attr ",")* "]"
//! ```

use super::ast::*;
use super::lex::{lex, Pos, Tok, Token};
use super::located::dsl_diag;
use crate::diag::codes;
use crate::diag::Diagnostic;
use crate::ir::dtype::DType;

/// Words that cannot name a graph, variable, parameter or shape variable (seed 004 § 予約語).
pub const RESERVED: [&str; 7] = [
    "graph",
    "return",
    "fused",
    "fused_reduce",
    "fused_cumulative",
    "true",
    "false",
];

/// Input qualifiers accepted after a parameter's type.
pub const QUALIFIERS: [&str; 3] = ["param", "mutable", "const_pool"];

/// The DSL's dtype names (`f16`…), also accepted in graph.json spelling (`fp16`…).
pub fn dtype_of(name: &str) -> Option<DType> {
    match name {
        "f16" | "fp16" => Some(DType::F16),
        "bf16" => Some(DType::BF16),
        "f32" | "fp32" => Some(DType::F32),
        "i32" => Some(DType::I32),
        "bool" => Some(DType::Bool),
        _ => None,
    }
}

/// The DSL spelling of a dtype.
pub fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::F32 => "f32",
        DType::I32 => "i32",
        DType::Bool => "bool",
    }
}

/// Parses a program.
pub fn parse_program(text: &str, file: &str) -> Result<Program, Diagnostic> {
    let tokens = lex(text, file)?;
    let mut p = Parser {
        toks: tokens,
        at: 0,
        file,
    };
    let mut prog = Program::default();
    p.skip_newlines();
    while p.peek() != &Tok::Eof {
        prog.graphs.push(p.graph()?);
        p.skip_newlines();
    }
    Ok(prog)
}

struct Parser<'a> {
    toks: Vec<Token>,
    at: usize,
    file: &'a str,
}

type R<T> = Result<T, Diagnostic>;

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        self.toks.get(self.at).map(|t| &t.tok).unwrap_or(&Tok::Eof)
    }

    fn peek_at(&self, k: usize) -> &Tok {
        self.toks
            .get(self.at + k)
            .map(|t| &t.tok)
            .unwrap_or(&Tok::Eof)
    }

    fn pos(&self) -> Pos {
        self.toks
            .get(self.at)
            .or_else(|| self.toks.last())
            .map(|t| t.pos)
            .unwrap_or_default()
    }

    fn bump(&mut self) -> Token {
        let t = self.toks.get(self.at).cloned().unwrap_or(Token {
            tok: Tok::Eof,
            pos: self.pos(),
        });
        self.at += 1;
        t
    }

    fn is(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == w)
    }

    fn skip_newlines(&mut self) {
        while matches!(self.peek(), Tok::Newline) || self.is(";") {
            self.at += 1;
        }
    }

    fn unexpected(&self, wanted: &str) -> Diagnostic {
        dsl_diag(
            codes::DSL_SYNTAX,
            self.file,
            self.pos(),
            format!("expected {wanted}, found {}", self.peek().describe()),
            format!("write {wanted} here (see README § The graph DSL)"),
        )
    }

    fn expect(&mut self, p: &str) -> R<Pos> {
        if self.is(p) {
            Ok(self.bump().pos)
        } else {
            Err(self.unexpected(&format!("`{p}`")))
        }
    }

    /// Any identifier (keywords included).
    fn word(&mut self, what: &str) -> R<Ident> {
        match self.peek().clone() {
            Tok::Ident(name) => {
                let pos = self.bump().pos;
                Ok(Ident { name, pos })
            }
            _ => Err(self.unexpected(what)),
        }
    }

    /// An identifier that names something: reserved words are rejected.
    fn name(&mut self, what: &str) -> R<Ident> {
        let id = self.word(what)?;
        check_not_reserved(&id, self.file)?;
        Ok(id)
    }

    fn graph(&mut self) -> R<GraphDef> {
        if !self.is_word("graph") {
            return Err(self.unexpected("`graph`"));
        }
        self.bump();
        let mut shape_vars = Vec::new();
        if self.is("<") {
            self.bump();
            loop {
                let name = self.name("a shape variable name")?;
                let default = if self.is("=") {
                    self.bump();
                    match self.bump().tok {
                        Tok::Int(v) if v >= 0 => Some(v),
                        _ => {
                            self.at -= 1;
                            return Err(self.unexpected("a non-negative integer default"));
                        }
                    }
                } else {
                    None
                };
                shape_vars.push(ShapeVar { name, default });
                if self.is(",") {
                    self.bump();
                } else {
                    break;
                }
            }
            self.expect(">")?;
        }
        let name = self.name("the graph's name")?;
        let params = self.params()?;
        self.expect("->")?;
        let outputs = self.params()?;
        self.expect("{")?;
        let mut body = Vec::new();
        self.skip_newlines();
        while !self.is("}") {
            if self.peek() == &Tok::Eof {
                return Err(self.unexpected("`}`"));
            }
            body.push(self.stmt()?);
            if !self.is("}") {
                if !matches!(self.peek(), Tok::Newline) && !self.is(";") {
                    return Err(self.unexpected("the end of the statement (a new line or `;`)"));
                }
                self.skip_newlines();
            }
        }
        self.bump();
        Ok(GraphDef {
            name,
            shape_vars,
            params,
            outputs,
            body,
        })
    }

    fn params(&mut self) -> R<Vec<Param>> {
        self.expect("(")?;
        let mut out = Vec::new();
        while !self.is(")") {
            let name = self.name("a parameter name")?;
            self.expect(":")?;
            let dt = self.word("a dtype (f16, bf16, f32, i32, bool)")?;
            let Some(dtype) = dtype_of(&dt.name) else {
                return Err(dsl_diag(
                    codes::DSL_SYNTAX,
                    self.file,
                    dt.pos,
                    format!("`{}` is not a dtype", dt.name),
                    "write one of f16, bf16, f32, i32, bool",
                ));
            };
            self.expect("[")?;
            let mut shape = Vec::new();
            while !self.is("]") {
                match self.peek().clone() {
                    Tok::Int(v) if v >= 0 => {
                        self.bump();
                        shape.push(DimExpr::Int(v));
                    }
                    Tok::Ident(_) => shape.push(DimExpr::Var(self.name("a shape variable")?)),
                    _ => return Err(self.unexpected("a size or a shape variable")),
                }
                if !self.is("]") {
                    self.expect(",")?;
                }
            }
            self.bump();
            let mut quals = Vec::new();
            while let Tok::Ident(w) = self.peek() {
                if !QUALIFIERS.contains(&w.as_str()) {
                    break;
                }
                quals.push(self.word("a qualifier")?);
            }
            out.push(Param {
                name,
                dtype,
                shape,
                quals,
            });
            if !self.is(")") {
                self.expect(",")?;
            }
        }
        self.bump();
        Ok(out)
    }

    fn stmt(&mut self) -> R<Stmt> {
        if self.is_word("return") {
            let pos = self.bump().pos;
            let mut values = vec![self.expr()?];
            while self.is(",") {
                self.bump();
                values.push(self.expr()?);
            }
            return Ok(Stmt::Return { values, pos });
        }
        let (targets, tuple) = if self.is("(") {
            self.bump();
            let mut t = vec![self.name("a variable name")?];
            while self.is(",") {
                self.bump();
                t.push(self.name("a variable name")?);
            }
            self.expect(")")?;
            (t, true)
        } else {
            (
                vec![self.name("a statement (`name = …` or `return …`)")?],
                false,
            )
        };
        self.expect("=")?;
        let value = self.expr()?;
        Ok(Stmt::Assign {
            targets,
            tuple,
            value,
        })
    }

    fn expr(&mut self) -> R<Expr> {
        let lhs = self.sum()?;
        let op = match self.peek() {
            Tok::Punct("<") => BinOp::Lt,
            Tok::Punct("<=") => BinOp::Le,
            Tok::Punct(">") => BinOp::Gt,
            Tok::Punct(">=") => BinOp::Ge,
            Tok::Punct("==") => BinOp::Eq,
            Tok::Punct("!=") => BinOp::Ne,
            _ => return Ok(lhs),
        };
        let pos = self.bump().pos;
        let rhs = self.sum()?;
        Ok(Expr::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
            pos,
        })
    }

    fn sum(&mut self) -> R<Expr> {
        let mut lhs = self.term()?;
        loop {
            let op = match self.peek() {
                Tok::Punct("+") => BinOp::Add,
                Tok::Punct("-") => BinOp::Sub,
                _ => return Ok(lhs),
            };
            let pos = self.bump().pos;
            let rhs = self.term()?;
            lhs = Expr::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
                pos,
            };
        }
    }

    fn term(&mut self) -> R<Expr> {
        let mut lhs = self.unary()?;
        loop {
            let op = match self.peek() {
                Tok::Punct("*") => BinOp::Mul,
                Tok::Punct("/") => BinOp::Div,
                _ => return Ok(lhs),
            };
            let pos = self.bump().pos;
            let rhs = self.unary()?;
            lhs = Expr::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
                pos,
            };
        }
    }

    fn unary(&mut self) -> R<Expr> {
        if self.is("-") {
            let pos = self.bump().pos;
            let arg = self.unary()?;
            // A negative literal is a literal.
            if let Expr::Num { value, .. } = arg {
                return Ok(Expr::Num { value: -value, pos });
            }
            return Ok(Expr::Neg {
                arg: Box::new(arg),
                pos,
            });
        }
        self.atom()
    }

    fn atom(&mut self) -> R<Expr> {
        let pos = self.pos();
        match self.peek().clone() {
            Tok::Int(v) => {
                self.bump();
                Ok(Expr::Num {
                    value: v as f64,
                    pos,
                })
            }
            Tok::Float(v) => {
                self.bump();
                Ok(Expr::Num { value: v, pos })
            }
            Tok::Punct("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Ident(w) if w == "true" || w == "false" => {
                self.bump();
                Ok(Expr::Bool {
                    value: w == "true",
                    pos,
                })
            }
            Tok::Ident(_) => {
                let id = self.name("a value")?;
                if self.is("(") {
                    self.call(id)
                } else {
                    Ok(Expr::Var(id))
                }
            }
            _ => Err(self.unexpected("a value (a name, a number, a call or `(`)")),
        }
    }

    fn call(&mut self, func: Ident) -> R<Expr> {
        self.bump();
        let mut args = Vec::new();
        let mut kwargs: Vec<KwArg> = Vec::new();
        while !self.is(")") {
            let is_kw =
                matches!(self.peek(), Tok::Ident(_)) && matches!(self.peek_at(1), Tok::Punct("="));
            if is_kw {
                let name = self.word("an attribute name")?;
                self.bump();
                let value = self.attr()?;
                kwargs.push(KwArg { name, value });
            } else {
                if let Some(k) = kwargs.first() {
                    return Err(dsl_diag(
                        codes::INVALID_KEYWORD_ARGUMENT,
                        self.file,
                        self.pos(),
                        format!(
                            "a positional argument follows the keyword argument `{}`",
                            k.name.name
                        ),
                        "put the tensor arguments first, then the attributes as name=value",
                    ));
                }
                args.push(self.expr()?);
            }
            if !self.is(")") {
                self.expect(",")?;
            }
        }
        self.bump();
        Ok(Expr::Call { func, args, kwargs })
    }

    fn attr(&mut self) -> R<AttrValue> {
        let neg = if self.is("-") {
            self.bump();
            true
        } else {
            false
        };
        let sign = if neg { -1 } else { 1 };
        match self.peek().clone() {
            Tok::Int(v) => {
                self.bump();
                Ok(AttrValue::Int(sign * v))
            }
            Tok::Float(v) => {
                self.bump();
                Ok(AttrValue::Num(sign as f64 * v))
            }
            Tok::Ident(w) if !neg => {
                self.bump();
                Ok(match w.as_str() {
                    "true" => AttrValue::Bool(true),
                    "false" => AttrValue::Bool(false),
                    _ => AttrValue::Name(w),
                })
            }
            Tok::Punct("[") if !neg => {
                self.bump();
                let mut items = Vec::new();
                while !self.is("]") {
                    items.push(self.attr()?);
                    if !self.is("]") {
                        self.expect(",")?;
                    }
                }
                self.bump();
                Ok(AttrValue::List(items))
            }
            _ => Err(self.unexpected("an attribute value (a number, a name, true/false or [...])")),
        }
    }
}

/// E0701 when `id` is a reserved word.
pub fn check_not_reserved(id: &Ident, file: &str) -> R<()> {
    if RESERVED.contains(&id.name.as_str()) {
        return Err(dsl_diag(
            codes::RESERVED_WORD,
            file,
            id.pos,
            format!(
                "`{}` is a reserved word and cannot be used as a name",
                id.name
            ),
            format!(
                "rename it (e.g. `{}_`); reserved: {}",
                id.name,
                RESERVED.join(", ")
            ),
        )
        .with("word", &id.name));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_seed_program() {
        let src = "graph<B=1, N=1> relu(x: f32[B, N]) -> (y: f32[B, N]) {\n  zero = 0.0\n  result = max(x, zero)\n  return result\n}\n";
        let p = parse_program(src, "t").expect("parses");
        assert_eq!(p.graphs.len(), 1);
        assert_eq!(p.graphs[0].shape_vars[1].default, Some(1));
        assert_eq!(p.graphs[0].body.len(), 3);
    }

    #[test]
    fn precedence_and_kwargs() {
        let src = "graph main(x: f32[4]) -> (y: f32[4]) { y = -x + 2 * x < 1\n return softmax(y, axis=-1) }";
        let p = parse_program(src, "t").expect("parses");
        let Stmt::Assign { value, .. } = &p.graphs[0].body[0] else {
            panic!("assign")
        };
        assert!(matches!(value, Expr::Binary { op: BinOp::Lt, .. }));
        let Stmt::Return { values, .. } = &p.graphs[0].body[1] else {
            panic!("return")
        };
        let Expr::Call { kwargs, .. } = &values[0] else {
            panic!("call")
        };
        assert_eq!(kwargs[0].value, AttrValue::Int(-1));
    }

    #[test]
    fn reserved_words_and_syntax_errors() {
        let e = parse_program(
            "graph main(fused: f32[1]) -> (y: f32[1]) { return fused }",
            "t",
        )
        .expect_err("reserved");
        assert_eq!(e.code, "E0701");
        let e = parse_program("graph main(x: f32[1]) -> (y: f32[1]) { y = x +\n }", "t")
            .expect_err("syntax");
        assert_eq!(e.code, "E0700");
    }
}
