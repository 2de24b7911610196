//! The lexer of the `.graph` DSL: text → tokens with 1-based line and column. Newlines are tokens
//! (they end statements) except inside parentheses and brackets; `//` starts a comment.

use super::located::dsl_diag;
use crate::diag::codes;
use crate::diag::Diagnostic;

/// A position in the source (1-based line and column, columns counted in characters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
}

/// A token kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// An identifier or keyword.
    Ident(String),
    /// An integer literal (no `.` and no exponent).
    Int(i64),
    /// A float literal.
    Float(f64),
    /// One of `( ) [ ] { } < > <= >= == != = , : + - * / ; ->`.
    Punct(&'static str),
    /// The end of a statement line.
    Newline,
    /// The end of the input.
    Eof,
}

impl Tok {
    /// How the token is shown in diagnostics.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(v) => format!("`{v}`"),
            Tok::Float(v) => format!("`{v:?}`"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Newline => "the end of the line".into(),
            Tok::Eof => "the end of the file".into(),
        }
    }
}

/// A token with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// What it is.
    pub tok: Tok,
    /// Where it starts.
    pub pos: Pos,
}

const PUNCT2: [&str; 5] = ["<=", ">=", "==", "!=", "->"];
const PUNCT1: [&str; 16] = [
    "(", ")", "[", "]", "{", "}", "<", ">", "=", ",", ":", "+", "-", "*", "/", ";",
];

/// Splits `text` into tokens; `file` names it in diagnostics.
pub fn lex(text: &str, file: &str) -> Result<Vec<Token>, Diagnostic> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1usize, 1usize);
    let mut depth: i64 = 0;
    while let Some(&c) = chars.get(i) {
        let pos = Pos { line, column: col };
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            if depth <= 0
                && !matches!(
                    out.last(),
                    Some(Token {
                        tok: Tok::Newline,
                        ..
                    }) | None
                )
            {
                out.push(Token {
                    tok: Tok::Newline,
                    pos,
                });
            }
            i += 1;
            line += 1;
            col = 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if c == '/' && next == Some('/') {
            while chars.get(i).is_some_and(|c| *c != '\n') {
                i += 1;
                col += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
            {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            col += i - start;
            out.push(Token {
                tok: Tok::Ident(s),
                pos,
            });
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && next.is_some_and(|d| d.is_ascii_digit())) {
            let (tok, end) = number(&chars, i, pos, file)?;
            col += end - i;
            i = end;
            out.push(Token { tok, pos });
            continue;
        }
        let two: String = [c, next.unwrap_or(' ')].iter().collect();
        let p = PUNCT2
            .iter()
            .find(|p| **p == two)
            .or_else(|| PUNCT1.iter().find(|p| p.starts_with(c)));
        let Some(p) = p else {
            return Err(dsl_diag(
                codes::DSL_SYNTAX,
                file,
                pos,
                format!("unexpected character `{c}`"),
                "the DSL has identifiers, numbers, `+ - * /`, comparisons, `( ) [ ] { } , : = ->` and `//` comments",
            ));
        };
        match *p {
            "(" | "[" => depth += 1,
            ")" | "]" => depth -= 1,
            _ => {}
        }
        i += p.len();
        col += p.len();
        out.push(Token {
            tok: Tok::Punct(p),
            pos,
        });
    }
    out.push(Token {
        tok: Tok::Eof,
        pos: Pos { line, column: col },
    });
    Ok(out)
}

/// The number starting at `chars[start]` (an integer, or a float with a `.` or an exponent) and
/// the index just past it; `E0700 DslSyntax` when it does not parse.
fn number(chars: &[char], start: usize, pos: Pos, file: &str) -> Result<(Tok, usize), Diagnostic> {
    let mut i = start;
    let mut float = false;
    while let Some(&d) = chars.get(i) {
        let exp_sign = (d == '+' || d == '-')
            && i > start
            && matches!(chars.get(i - 1), Some('e') | Some('E'));
        if d.is_ascii_digit() || exp_sign {
            i += 1;
        } else if d == '.' || d == 'e' || d == 'E' {
            float = true;
            i += 1;
        } else {
            break;
        }
    }
    let s: String = chars[start..i].iter().collect();
    let bad = || {
        dsl_diag(
            codes::DSL_SYNTAX,
            file,
            pos,
            format!("`{s}` is not a number"),
            "write an integer like `3` or a float like `0.5`, `1e-5`",
        )
    };
    let tok = if float {
        Tok::Float(s.parse::<f64>().map_err(|_| bad())?)
    } else {
        Tok::Int(s.parse::<i64>().map_err(|_| bad())?)
    };
    Ok((tok, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_positions() {
        let t = lex("a = b+1.5e-3 // c\n(x,\n y) <= 2", "f").expect("lexes");
        let toks: Vec<&Tok> = t.iter().map(|t| &t.tok).collect();
        assert_eq!(toks[0], &Tok::Ident("a".into()));
        assert_eq!(toks[4], &Tok::Float(1.5e-3));
        assert_eq!(toks[5], &Tok::Newline);
        // No newline inside the parentheses.
        assert_eq!(toks[10], &Tok::Punct(")"));
        assert_eq!(toks[11], &Tok::Punct("<="));
        assert_eq!(t[11].pos, Pos { line: 3, column: 5 });
        assert_eq!(lex("a $", "f").expect_err("bad").code, "E0700");
    }
}
