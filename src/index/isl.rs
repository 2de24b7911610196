//! isl notation for [`Quasi`] forms with integer coefficients: the one printer
//! ([`Quasi::isl`], `Display`) and the one token reader and expression parser ([`Cursor`]) that
//! the set and map grammars of `poly` build on.
//!
//! Printing: terms as `2*h + rh - 1` (first term's sign attached, `1*` omitted, constant last,
//! `0` when empty), floors as `floor((e)/d)`, `min(a, b)` / `max(a, b)`. Reading: the same, plus
//! juxtaposed coefficients (`2h`, `2(h + 1)`), `*` on either side of a constant, and a leading
//! `-` on any factor; `(e)/d` outside `floor` is refused (isl reads it as a rational).

use super::quasi::{Atom, Quasi};
use super::simplify::{floordiv, NoFacts};
use super::IndexError;
use std::fmt::{self, Display, Write as _};

impl<V: Display + PartialEq + Clone + Ord> Quasi<i64, V> {
    /// isl text with variable terms in the order of `order` (variables not in it after, then
    /// the other atoms, each group in atom order), constant last.
    pub fn isl(&self, order: &[V]) -> String {
        let mut terms: Vec<(&Atom<i64, V>, i64)> =
            self.terms.iter().map(|(a, c)| (a, *c)).collect();
        let rank = |a: &Atom<i64, V>| match a {
            Atom::Var(v) => order.iter().position(|o| o == v).unwrap_or(order.len()),
            _ => order.len() + 1,
        };
        terms.sort_by(|(a, _), (b, _)| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
        let mut s = String::new();
        for (a, c) in terms {
            let body = atom_isl(a, order);
            let mag = c.unsigned_abs();
            let t = if mag == 1 {
                body
            } else {
                format!("{mag}*{body}")
            };
            if s.is_empty() {
                if c < 0 {
                    s.push('-');
                }
                s.push_str(&t);
            } else {
                let _ = write!(s, " {} {t}", if c < 0 { '-' } else { '+' });
            }
        }
        if s.is_empty() {
            return self.konst.to_string();
        }
        if self.konst != 0 {
            let sign = if self.konst < 0 { '-' } else { '+' };
            let _ = write!(s, " {sign} {}", self.konst.unsigned_abs());
        }
        s
    }
}

fn atom_isl<V: Display + PartialEq + Clone + Ord>(a: &Atom<i64, V>, order: &[V]) -> String {
    match a {
        Atom::Var(v) => v.to_string(),
        Atom::Floor(e, d) => format!("floor(({})/{d})", e.isl(order)),
        Atom::Min(x, y) => format!("min({}, {})", x.isl(order), y.isl(order)),
        Atom::Max(x, y) => format!("max({}, {})", x.isl(order), y.isl(order)),
        Atom::Opaque(n) => n.clone(),
    }
}

impl<V: Display + PartialEq + Clone + Ord> Display for Quasi<i64, V> {
    /// isl syntax in atom order ([`Quasi::isl`] with no preferred order).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.isl(&[]))
    }
}

/// A token of isl text.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// A name or keyword (`and`, `or`, `exists`, `floor`, `true`, …).
    Id(String),
    /// A non-negative integer.
    Int(i64),
    /// Punctuation or an operator.
    Sym(&'static str),
}

/// Why isl text does not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IslError {
    /// Byte offset.
    pub pos: usize,
    /// What is wrong.
    pub msg: String,
    /// The algebra's error when the text reads but its arithmetic fails (overflow, a bad
    /// divisor, a product of variables).
    pub cause: Option<IndexError>,
}

impl Display for IslError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "isl syntax error at byte {}: {}", self.pos, self.msg)
    }
}

impl From<IslError> for String {
    fn from(e: IslError) -> String {
        e.to_string()
    }
}

/// Longest first, so that `->` is not read as `-` then `>`.
const SYMS: [&str; 20] = [
    "->", "<=", ">=", "==", "[", "]", "{", "}", "(", ")", ",", ":", ";", "+", "-", "*", "/", "<",
    ">", "=",
];

/// The tokens of `s`, each with its byte offset.
pub fn tokenize(s: &str) -> Result<Vec<(usize, Tok)>, IslError> {
    let mut out = Vec::new();
    let mut it = s.char_indices().peekable();
    while let Some(&(i, c)) = it.peek() {
        if c.is_whitespace() {
            it.next();
        } else if c.is_ascii_digit() {
            let mut end = i;
            while let Some(&(j, d)) = it.peek().filter(|(_, d)| d.is_ascii_digit()) {
                end = j + d.len_utf8();
                it.next();
            }
            let v = s[i..end].parse().map_err(|_| IslError {
                pos: i,
                msg: "integer too large".into(),
                cause: None,
            })?;
            out.push((i, Tok::Int(v)));
        } else if c.is_alphabetic() || c == '_' {
            let mut end = i;
            while let Some(&(j, d)) = it
                .peek()
                .filter(|(_, d)| d.is_alphanumeric() || *d == '_' || *d == '\'')
            {
                end = j + d.len_utf8();
                it.next();
            }
            out.push((i, Tok::Id(s[i..end].to_string())));
        } else if let Some(sym) = SYMS.iter().find(|y| s[i..].starts_with(**y)) {
            out.push((i, Tok::Sym(sym)));
            for _ in 0..sym.len() {
                it.next();
            }
        } else {
            return Err(IslError {
                pos: i,
                msg: format!("unexpected character `{c}`"),
                cause: None,
            });
        }
    }
    Ok(out)
}

/// A position in a token list, with the expression grammar.
pub struct Cursor {
    /// The tokens.
    pub toks: Vec<(usize, Tok)>,
    /// The next token.
    pub pos: usize,
    /// The text's length (the offset reported at its end).
    pub end: usize,
}

/// The result of reading.
pub type IslResult<T> = Result<T, IslError>;

/// An affine form read from isl text (named variables, integer coefficients).
pub type Expr = Quasi<i64, String>;

impl Cursor {
    /// A cursor at the start of `s`.
    pub fn new(s: &str) -> IslResult<Cursor> {
        Ok(Cursor {
            toks: tokenize(s)?,
            pos: 0,
            end: s.len(),
        })
    }

    /// An error at the current token.
    pub fn err<T>(&self, msg: &str) -> IslResult<T> {
        Err(IslError {
            pos: self.toks.get(self.pos).map_or(self.end, |t| t.0),
            msg: msg.to_string(),
            cause: None,
        })
    }

    fn lift<T>(&self, r: Result<T, IndexError>) -> IslResult<T> {
        r.map_err(|e| IslError {
            pos: self.toks.get(self.pos).map_or(self.end, |t| t.0),
            msg: e.to_string(),
            cause: Some(e),
        })
    }

    /// The current token.
    pub fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.1)
    }

    /// True when the current token is the symbol `s`.
    pub fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Sym(y)) if *y == s)
    }

    /// True when the current token is the name `s`.
    pub fn is_id(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Id(y)) if y == s)
    }

    /// Consumes the symbol or keyword `s` when it is next.
    pub fn eat(&mut self, s: &str) -> bool {
        if self.is_sym(s) || self.is_id(s) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Consumes `s` or fails.
    pub fn expect(&mut self, s: &str) -> IslResult<()> {
        if self.eat(s) {
            Ok(())
        } else {
            self.err(&format!("expected `{s}`"))
        }
    }

    /// Consumes a name.
    pub fn ident(&mut self) -> IslResult<String> {
        match self.peek() {
            Some(Tok::Id(n)) => {
                let n = n.clone();
                self.pos += 1;
                Ok(n)
            }
            _ => self.err("expected a name"),
        }
    }

    /// Consumes an optionally negated integer.
    pub fn int(&mut self) -> IslResult<i64> {
        let neg = self.eat("-");
        match self.peek() {
            Some(Tok::Int(v)) => {
                let v = *v;
                self.pos += 1;
                Ok(if neg { -v } else { v })
            }
            _ => self.err("expected an integer"),
        }
    }

    /// A comma-separated list of names up to `close`.
    pub fn names_list(&mut self, close: &str) -> IslResult<Vec<String>> {
        let mut v = Vec::new();
        if self.eat(close) {
            return Ok(v);
        }
        loop {
            v.push(self.ident()?);
            if self.eat(close) {
                return Ok(v);
            }
            self.expect(",")?;
        }
    }

    /// An affine expression: `term (+|- term)*`.
    pub fn expr(&mut self) -> IslResult<Expr> {
        let mut acc = if self.eat("-") {
            let t = self.term()?;
            self.lift(t.try_scale(&-1))?
        } else {
            self.term()?
        };
        loop {
            if self.eat("+") {
                let t = self.term()?;
                acc = self.lift(acc.try_add(&t))?;
            } else if self.eat("-") {
                let t = self.term()?;
                acc = self.lift(acc.try_sub(&t))?;
            } else {
                return Ok(acc);
            }
        }
    }

    fn term(&mut self) -> IslResult<Expr> {
        let mut acc = self.factor()?;
        loop {
            let juxt = acc.as_int().is_some()
                && (matches!(self.peek(), Some(Tok::Id(n)) if n != "and" && n != "or")
                    || self.is_sym("("));
            if self.eat("*") || juxt {
                let f = self.factor()?;
                acc = match (acc.as_int(), f.as_int()) {
                    (Some(k), _) => self.lift(f.try_scale(&k))?,
                    (_, Some(k)) => self.lift(acc.try_scale(&k))?,
                    _ => {
                        let e = IndexError::NonAffine(format!("({acc}) * ({f})"));
                        return self.lift(Err(e));
                    }
                };
            } else {
                return Ok(acc);
            }
        }
    }

    fn factor(&mut self) -> IslResult<Expr> {
        if self.eat("-") {
            let f = self.factor()?;
            return self.lift(f.try_scale(&-1));
        }
        match self.peek().cloned() {
            Some(Tok::Int(v)) => {
                self.pos += 1;
                Ok(Quasi::int(v))
            }
            Some(Tok::Id(n)) if n == "floor" => {
                self.pos += 1;
                self.expect("(")?;
                let e = self.expr()?;
                self.expect("/")?;
                let d = self.int()?;
                self.expect(")")?;
                self.lift(floordiv(&e, &d, &NoFacts))
            }
            Some(Tok::Id(n)) => {
                self.pos += 1;
                Ok(Quasi::var(n))
            }
            Some(Tok::Sym("(")) => {
                self.pos += 1;
                let e = self.expr()?;
                if self.eat("/") {
                    return self.err("division outside floor()");
                }
                self.expect(")")?;
                Ok(e)
            }
            _ => self.err("expected an expression"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &str) -> Expr {
        let mut c = Cursor::new(s).expect("lex");
        let e = c.expr().expect("parse");
        assert_eq!(c.pos, c.toks.len(), "trailing tokens in {s}");
        e
    }

    #[test]
    fn prints_and_reads_back() {
        for s in [
            "2*h + rh - 1",
            "-x + 3",
            "floor((N + 1)/2)",
            "i + floor((j)/4)",
            "0",
            "-7",
        ] {
            assert_eq!(read(s).to_string(), s);
        }
        assert_eq!(read("2h + h*2 - (1)").to_string(), "4*h - 1");
        let order = ["m".to_string(), "k1".to_string()];
        assert_eq!(read("k1 + 2m - 1").isl(&order), "2*m + k1 - 1");
        assert!(Cursor::new("(x/2)").and_then(|mut c| c.expr()).is_err());
        assert!(Cursor::new("x * y").and_then(|mut c| c.expr()).is_err());
        assert!(Cursor::new("floor(x/0)")
            .and_then(|mut c| c.expr())
            .is_err());
        assert!(Cursor::new("x $ y").is_err());
    }
}
