//! Sizes on the wire: JSON integers or size-expression strings parsed into [`Dim`].

use super::Size;
use crate::ir::dim::Dim;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

type R<T> = Result<T, String>;

// ---------------------------------------------------------------- sizes

/// Parses a size expression: integers, symbol names, `+ - *`, `//` by a positive integer,
/// parentheses, unary minus, and `min(a, b)` / `max(a, b)` (how [`Dim`] prints its min/max
/// atoms, so that every printed size reads back).
pub fn parse_dim(s: &str) -> R<Dim> {
    let toks = tokenize(s)?;
    let mut p = DimParser { toks, pos: 0 };
    let d = p.sum()?;
    if p.pos != p.toks.len() {
        return Err(format!("unexpected `{}` in size `{s}`", p.toks[p.pos]));
    }
    Ok(d)
}

fn tokenize(s: &str) -> R<Vec<String>> {
    let cs: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let st = i;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            out.push(cs[st..i].iter().collect());
        } else if c == '/' && cs.get(i + 1) == Some(&'/') {
            out.push("//".into());
            i += 2;
        } else if "+-*(),".contains(c) {
            out.push(c.to_string());
            i += 1;
        } else {
            return Err(format!("unexpected character `{c}` in size `{s}`"));
        }
    }
    Ok(out)
}

struct DimParser {
    toks: Vec<String>,
    pos: usize,
}

impl DimParser {
    fn peek(&self) -> Option<&str> {
        self.toks.get(self.pos).map(|s| s.as_str())
    }

    fn sum(&mut self) -> R<Dim> {
        let mut d = self.product()?;
        while let Some(op) = self.peek().filter(|t| *t == "+" || *t == "-") {
            let neg = op == "-";
            self.pos += 1;
            let r = self.product()?;
            d = if neg { d.sub(&r) } else { d.add(&r) };
        }
        Ok(d)
    }

    fn product(&mut self) -> R<Dim> {
        let mut d = self.atom()?;
        while let Some(op) = self.peek().filter(|t| *t == "*" || *t == "//") {
            let div = op == "//";
            self.pos += 1;
            let r = self.atom()?;
            d = if div {
                match r.as_int() {
                    Some(c) if c > 0 => d.floordiv(c),
                    _ => return Err(format!("`//` needs a positive integer divisor, found {r}")),
                }
            } else {
                d.mul(&r)
            };
        }
        Ok(d)
    }

    fn atom(&mut self) -> R<Dim> {
        let t = self
            .toks
            .get(self.pos)
            .cloned()
            .ok_or("size expression ends early")?;
        self.pos += 1;
        match t.as_str() {
            "-" => Ok(self.atom()?.neg()),
            "(" => {
                let d = self.sum()?;
                if self.peek() != Some(")") {
                    return Err("missing `)` in size".into());
                }
                self.pos += 1;
                Ok(d)
            }
            _ if t.chars().all(|c| c.is_ascii_digit()) => t
                .parse::<i64>()
                .map(Dim::int)
                .map_err(|e| format!("size `{t}`: {e}")),
            "min" | "max" if self.peek() == Some("(") => {
                self.pos += 1;
                let a = self.sum()?;
                if self.peek() != Some(",") {
                    return Err(format!("`{t}` takes two sizes: missing `,`"));
                }
                self.pos += 1;
                let b = self.sum()?;
                if self.peek() != Some(")") {
                    return Err(format!("missing `)` after `{t}(`"));
                }
                self.pos += 1;
                Ok(if t == "min" {
                    a.min_of(&b)
                } else {
                    a.max_of(&b)
                })
            }
            _ if t
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_') =>
            {
                Ok(Dim::sym(&t))
            }
            _ => Err(format!("unexpected `{t}` in size")),
        }
    }
}

impl Size {
    /// Parses a JSON integer or size-expression string.
    pub fn from_json(v: &Value) -> R<Size> {
        match v {
            Value::Number(n) => n
                .as_i64()
                .map(|i| Size(Dim::int(i)))
                .ok_or_else(|| format!("size {n} is not an integer")),
            Value::String(s) => parse_dim(s).map(Size),
            _ => Err(format!("a size must be an integer or a string, found {v}")),
        }
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        Size::from_json(&Value::deserialize(d)?).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_and_max_read_back() {
        for text in ["max(1, (N+63)//64)", "min(S, 1000)", "max(1, B*H*S)"] {
            let d = parse_dim(text).expect(text);
            assert_eq!(parse_dim(&d.to_string()).expect("reparses"), d, "{text}");
        }
        assert!(parse_dim("max(1)").is_err());
        assert!(parse_dim("max(1, 2").is_err());
    }

    #[test]
    fn sizes_parse_to_canonical_dims() {
        assert_eq!(parse_dim("H+2"), Ok(Dim::sym("H").add_int(2)));
        assert_eq!(
            parse_dim("2*(M+1)").map(|d| d.to_string()),
            Ok("2*M+2".into())
        );
        assert_eq!(
            // Canonical form: a non-canonical string does not print back verbatim.
            parse_dim("(H-1)//2+1").map(|d| d.to_string()),
            Ok("(H+1)//2".into())
        );
        assert!(parse_dim("H//0").is_err());
        assert!(parse_dim("H+").is_err());
        assert!(parse_dim("H$").is_err());
    }
}
