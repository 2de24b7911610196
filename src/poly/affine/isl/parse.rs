//! The parser of the isl notation subset that [`super`] prints.

use super::super::core::{Col, Poly};
use super::super::expr::Aff;
use super::super::map::{BasicMap, Map, MapSpace};
use super::super::set::{BasicSet, Set, SetSpace, Tuple};
use super::super::AffineError;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Id(String),
    Int(i64),
    Sym(&'static str),
}

fn tokenize(s: &str) -> Result<Vec<(usize, Tok)>, AffineError> {
    const SYMS: [&str; 17] = [
        "->", "<=", ">=", "[", "]", "{", "}", "(", ")", ",", ":", ";", "+", "-", "*", "/", "<",
    ];
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let st = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let v = s[st..i].parse().map_err(|_| AffineError::Parse {
                pos: st,
                msg: "integer too large".into(),
            })?;
            out.push((st, Tok::Int(v)));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let st = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'\'') {
                i += 1;
            }
            out.push((st, Tok::Id(s[st..i].to_string())));
        } else if let Some(sym) = SYMS
            .iter()
            .chain(&[">", "="])
            .find(|y| s[i..].starts_with(**y))
        {
            out.push((i, Tok::Sym(sym)));
            i += sym.len();
        } else {
            return Err(AffineError::Parse {
                pos: i,
                msg: format!("unexpected character `{}`", c as char),
            });
        }
    }
    Ok(out)
}

/// A conjunction of the DNF: its existential names and `(aff, is_eq)` constraints.
#[derive(Clone, Debug, Default)]
struct Conj {
    exists: Vec<String>,
    cons: Vec<(Aff, bool)>,
    falsum: bool,
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    pos: usize,
    end: usize,
}

type PResult<T> = Result<T, AffineError>;

impl Parser {
    fn err<T>(&self, msg: &str) -> PResult<T> {
        Err(AffineError::Parse {
            pos: self.toks.get(self.pos).map_or(self.end, |t| t.0),
            msg: msg.to_string(),
        })
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.1)
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Sym(y)) if *y == s)
    }

    fn is_id(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Id(y)) if y == s)
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.is_sym(s) || self.is_id(s) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> PResult<()> {
        if self.eat(s) {
            Ok(())
        } else {
            self.err(&format!("expected `{s}`"))
        }
    }

    fn ident(&mut self) -> PResult<String> {
        match self.peek() {
            Some(Tok::Id(n)) => {
                let n = n.clone();
                self.pos += 1;
                Ok(n)
            }
            _ => self.err("expected a name"),
        }
    }

    fn int(&mut self) -> PResult<i64> {
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

    fn names_list(&mut self, close: &str) -> PResult<Vec<String>> {
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

    fn expr(&mut self) -> PResult<Aff> {
        let mut acc = if self.eat("-") {
            self.term()?.scale(-1)?
        } else {
            self.term()?
        };
        loop {
            if self.eat("+") {
                acc = acc.add(&self.term()?)?;
            } else if self.eat("-") {
                acc = acc.sub(&self.term()?)?;
            } else {
                return Ok(acc);
            }
        }
    }

    fn term(&mut self) -> PResult<Aff> {
        let mut acc = self.factor()?;
        loop {
            let juxt = acc.as_const().is_some()
                && matches!(self.peek(), Some(Tok::Id(n)) if n != "and" && n != "or")
                || acc.as_const().is_some() && self.is_sym("(");
            if self.eat("*") || juxt {
                let f = self.factor()?;
                acc = match (acc.as_const(), f.as_const()) {
                    (Some(k), _) => f.scale(k)?,
                    (_, Some(k)) => acc.scale(k)?,
                    _ => return Err(AffineError::NonAffine(format!("({acc}) * ({f})"))),
                };
            } else {
                return Ok(acc);
            }
        }
    }

    fn factor(&mut self) -> PResult<Aff> {
        if self.eat("-") {
            return self.factor()?.scale(-1);
        }
        match self.peek().cloned() {
            Some(Tok::Int(v)) => {
                self.pos += 1;
                Ok(Aff::constant(v))
            }
            Some(Tok::Id(n)) if n == "floor" => {
                self.pos += 1;
                self.expect("(")?;
                let e = self.expr()?;
                self.expect("/")?;
                let d = self.int()?;
                self.expect(")")?;
                e.floordiv(d)
            }
            Some(Tok::Id(n)) => {
                self.pos += 1;
                Ok(Aff::var(&n))
            }
            Some(Tok::Sym("(")) => {
                self.pos += 1;
                let e = self.expr()?;
                if self.eat("/") {
                    // `(e)/d` outside floor is rejected: isl reads it as a rational.
                    return self.err("division outside floor()");
                }
                self.expect(")")?;
                Ok(e)
            }
            _ => self.err("expected an expression"),
        }
    }

    fn cmp_op(&mut self) -> Option<&'static str> {
        ["<=", ">=", "<", ">", "="]
            .into_iter()
            .find(|op| self.eat(op))
    }

    fn expr_list(&mut self) -> PResult<Vec<Aff>> {
        let mut v = vec![self.expr()?];
        while self.eat(",") {
            v.push(self.expr()?);
        }
        Ok(v)
    }

    /// `a op b op c ..` with comma lists: a conjunction.
    fn chain(&mut self) -> PResult<Conj> {
        let mut prev = self.expr_list()?;
        let mut conj = Conj::default();
        let mut any = false;
        while let Some(op) = self.cmp_op() {
            let next = self.expr_list()?;
            for a in &prev {
                for b in &next {
                    let (d, eq) = match op {
                        "<=" => (b.sub(a)?, false),
                        "<" => (b.sub(a)?.add_const(-1)?, false),
                        ">=" => (a.sub(b)?, false),
                        ">" => (a.sub(b)?.add_const(-1)?, false),
                        _ => (a.sub(b)?, true),
                    };
                    conj.cons.push((d, eq));
                }
            }
            prev = next;
            any = true;
        }
        if !any {
            return self.err("expected a comparison");
        }
        Ok(conj)
    }

    fn atom(&mut self) -> PResult<Vec<Conj>> {
        if self.eat("true") {
            return Ok(vec![Conj::default()]);
        }
        if self.eat("false") {
            return Ok(vec![Conj {
                falsum: true,
                ..Conj::default()
            }]);
        }
        if self.eat("exists") {
            self.expect("(")?;
            let mut names = Vec::new();
            loop {
                names.push(self.ident()?);
                if self.eat(":") {
                    break;
                }
                self.expect(",")?;
            }
            let mut f = self.formula()?;
            self.expect(")")?;
            for c in &mut f {
                c.exists.splice(0..0, names.iter().cloned());
            }
            return Ok(f);
        }
        if self.is_sym("(") {
            let save = self.pos;
            if let Ok(c) = self.chain() {
                return Ok(vec![c]);
            }
            self.pos = save + 1;
            let f = self.formula()?;
            self.expect(")")?;
            return Ok(f);
        }
        Ok(vec![self.chain()?])
    }

    fn conjunction(&mut self) -> PResult<Vec<Conj>> {
        let mut acc = self.atom()?;
        while self.eat("and") {
            let rhs = self.atom()?;
            let mut next = Vec::new();
            for a in &acc {
                for b in &rhs {
                    let mut c = a.clone();
                    c.exists.extend(b.exists.iter().cloned());
                    c.cons.extend(b.cons.iter().cloned());
                    c.falsum |= b.falsum;
                    next.push(c);
                }
            }
            acc = next;
        }
        Ok(acc)
    }

    fn formula(&mut self) -> PResult<Vec<Conj>> {
        let mut acc = self.conjunction()?;
        while self.eat("or") {
            acc.extend(self.conjunction()?);
        }
        Ok(acc)
    }

    /// A tuple `Name[e, ..]`: plain fresh names become dimensions; other entries become fresh
    /// dimensions with an equality. `taken`: names not available as new dimensions.
    fn tuple(&mut self, taken: &[String], fresh: &str) -> PResult<(Tuple, Vec<(usize, Aff)>)> {
        let name = match self.peek() {
            Some(Tok::Id(_)) => self.ident()?,
            _ => String::new(),
        };
        if name.is_empty() && self.is_sym(":") {
            // `{ : constraints }`: a parameter set.
            return Ok((
                Tuple {
                    name,
                    dims: Vec::new(),
                },
                Vec::new(),
            ));
        }
        self.expect("[")?;
        let mut dims: Vec<String> = Vec::new();
        let mut defs = Vec::new();
        if !self.eat("]") {
            loop {
                let e = self.expr()?;
                let plain = e.terms().count() == 1
                    && e.constant_term() == 0
                    && e.terms()
                        .all(|(a, c)| c == 1 && matches!(a, super::super::expr::Atom::Name(_)));
                let n = e.names().pop().unwrap_or_default();
                if plain && !taken.contains(&n) && !dims.contains(&n) {
                    dims.push(n);
                } else {
                    let mut k = dims.len();
                    let mut f = format!("{fresh}{k}");
                    while taken.contains(&f) || dims.contains(&f) {
                        k += 1;
                        f = format!("{fresh}{k}");
                    }
                    defs.push((dims.len(), e));
                    dims.push(f);
                }
                if self.eat("]") {
                    break;
                }
                self.expect(",")?;
            }
        }
        Ok((Tuple { name, dims }, defs))
    }
}

/// Builds the poly of one conjunction: `resolve` maps space names; existentials appended.
fn conj_poly(base: Poly, conj: &Conj, resolve: &dyn Fn(&str) -> Option<Col>) -> PResult<Poly> {
    let mut p = base;
    let first = p.add_exists(conj.exists.len());
    let res = |n: &str| {
        conj.exists
            .iter()
            .position(|e| e == n)
            .map(|i| Col::Exist(first + i))
            .or_else(|| resolve(n))
    };
    for (a, eq) in &conj.cons {
        p.add_constraint(a, *eq, &res)?;
    }
    if conj.falsum {
        let mut r = vec![0; 1 + p.n_cols()];
        r[0] = -1;
        p.sys.ineqs.push(r);
    }
    Ok(p)
}

fn start(s: &str) -> PResult<(Parser, Vec<String>)> {
    let toks = tokenize(s)?;
    let mut p = Parser {
        toks,
        pos: 0,
        end: s.len(),
    };
    let mut params = Vec::new();
    if p.eat("[") {
        params = p.names_list("]")?;
        p.expect("->")?;
    }
    p.expect("{")?;
    Ok((p, params))
}

fn finish(p: &Parser) -> PResult<()> {
    if p.pos != p.toks.len() {
        return p.err("trailing input");
    }
    Ok(())
}

/// Parses a set in isl notation (one tuple name and arity for all pieces).
pub fn parse_set(s: &str) -> Result<Set, AffineError> {
    let (mut p, params) = start(s)?;
    let mut space: Option<SetSpace> = None;
    let mut pieces = Vec::new();
    loop {
        let (tuple, defs) = p.tuple(&params, "i")?;
        let conjs = if p.eat(":") {
            p.formula()?
        } else {
            vec![Conj::default()]
        };
        let sp = SetSpace::new(
            &params.iter().map(String::as_str).collect::<Vec<_>>(),
            tuple,
        )?;
        if let Some(s0) = &space {
            if (s0.tuple.name.as_str(), s0.tuple.len()) != (sp.tuple.name.as_str(), sp.tuple.len())
            {
                return Err(AffineError::SpaceMismatch(format!(
                    "{:?} vs {:?}",
                    s0.tuple, sp.tuple
                )));
            }
        }
        for c in &conjs {
            let mut c = c.clone();
            for (k, e) in &defs {
                c.cons.push((Aff::var(&sp.tuple.dims[*k]).sub(e)?, true));
            }
            let base = Poly::universe(params.len(), sp.tuple.len());
            let poly = conj_poly(base, &c, &|n| sp.resolve(n))?;
            pieces.push(BasicSet {
                space: space.clone().unwrap_or_else(|| sp.clone()),
                poly,
            });
        }
        space.get_or_insert(sp);
        if p.eat("}") {
            break;
        }
        p.expect(";")?;
    }
    finish(&p)?;
    let space = space.ok_or_else(|| AffineError::Parse {
        pos: 0,
        msg: "no tuple".into(),
    })?;
    let mut out = Set::empty(space);
    for b in pieces {
        if let Some(b) = b.tidy()? {
            out.pieces.push(b);
        }
    }
    Ok(out)
}

/// Parses a map in isl notation (`S[i, j] -> T[i + 1, j] : ...`; pieces of one space).
pub fn parse_map(s: &str) -> Result<Map, AffineError> {
    let (mut p, params) = start(s)?;
    let mut pieces = Vec::new();
    let mut first_space: Option<MapSpace> = None;
    loop {
        let (input, in_defs) = p.tuple(&params, "i")?;
        p.expect("->")?;
        let mut taken = params.clone();
        taken.extend(input.dims.iter().cloned());
        let (output, out_defs) = p.tuple(&taken, "o")?;
        let conjs = if p.eat(":") {
            p.formula()?
        } else {
            vec![Conj::default()]
        };
        let space = MapSpace::new(&params, input, &output)?;
        let ni = space.input.len();
        for c in &conjs {
            let mut c = c.clone();
            for (k, e) in &in_defs {
                c.cons.push((Aff::var(&space.input.dims[*k]).sub(e)?, true));
            }
            for (k, e) in &out_defs {
                c.cons
                    .push((Aff::var(&space.output.dims[*k]).sub(e)?, true));
            }
            let base = Poly::universe(params.len(), ni + space.output.len());
            let poly = conj_poly(base, &c, &|n| space.resolve(n))?;
            let mut m = BasicMap {
                space: first_space.clone().unwrap_or_else(|| space.clone()),
                poly,
            };
            m.poly.tidy()?;
            pieces.push(m);
        }
        first_space.get_or_insert(space);
        if p.eat("}") {
            break;
        }
        p.expect(";")?;
    }
    finish(&p)?;
    Map::from_pieces(pieces)
}
