//! isl notation: deterministic printing of sets and maps (`[N] -> { S[i] : 0 <= i < N }`,
//! `{ S[h, rh] -> T[2*h + rh] }`, existentials as `exists (e0 : ...)`), and a parser for the
//! same subset (parameters, named tuples with names or affine entries, `and`/`or`, chained and
//! comma-listed comparisons, `exists`, `floor(e/d)`, `true`/`false`, `;`-separated pieces of one
//! space).

use super::core::{Col, Poly};
use super::expr::Aff;
use super::linear::Row;
use super::map::{BasicMap, Map, MapSpace};
use super::set::{BasicSet, Set, SetSpace, Tuple};
use super::AffineError;
use std::fmt;

// ---------------------------------------------------------------- printing

/// The names of a poly's columns: parameters, dimensions, then `e0, e1, ..` (fresh).
fn col_names(p: &Poly, params: &[String], dims: &[String]) -> Vec<String> {
    let mut names: Vec<String> = params.iter().chain(dims).cloned().collect();
    let mut k = 0;
    for _ in 0..p.n_exist {
        while names.contains(&format!("e{k}")) {
            k += 1;
        }
        names.push(format!("e{k}"));
    }
    names
}

fn row_aff(r: &Row, names: &[String], skip: Option<usize>) -> Aff {
    let mut a = Aff::constant(r[0]);
    for (c, n) in names.iter().enumerate() {
        if Some(c) != skip && r[1 + c] != 0 {
            // Rows are normalised; these cannot overflow for printable systems.
            a = a
                .add(&Aff::var(n).scale(r[1 + c]).unwrap_or_default())
                .unwrap_or_default();
        }
    }
    a
}

fn coef_var(c: i64, n: &str) -> String {
    if c == 1 {
        n.to_string()
    } else {
        format!("{c}*{n}")
    }
}

/// The leading column of a row: the first dimension, else the first existential, else the
/// first parameter with a non-zero coefficient.
fn lead(r: &Row, np: usize, n: usize) -> Option<usize> {
    (np..n).chain(0..np).find(|c| r[1 + c] != 0)
}

/// `x <= U` printed as `x < U + 1` when `U` has terms and a negative constant.
fn upper_text(x: &str, u: &Aff) -> String {
    if u.as_const().is_none() && u.constant_term() < 0 {
        if let Ok(v) = u.add_const(1) {
            return format!("{x} < {v}");
        }
    }
    format!("{x} <= {u}")
}

/// The constraints of a poly as text (`and`-joined), `None` when there are none.
fn constraints_text(p: &Poly, names: &[String]) -> Option<String> {
    let mut sys = p.sys.clone();
    if !sys.simplify() {
        return Some("false".into());
    }
    let (np, n) = (p.n_param, p.n_cols());
    let mut out: Vec<(usize, String)> = Vec::new();
    for r in &sys.eqs {
        let Some(c) = lead(r, np, n) else { continue };
        let (a, r) = if r[1 + c] < 0 {
            (-r[1 + c], r.iter().map(|x| -x).collect::<Row>())
        } else {
            (r[1 + c], r.clone())
        };
        let rest = row_aff(&r, names, Some(c)).scale(-1).unwrap_or_default();
        out.push((c, format!("{} = {rest}", coef_var(a, &names[c]))));
    }
    // Inequalities grouped by leading column: `L <= x <= U` for unit ones.
    let mut used = vec![false; sys.ineqs.len()];
    // Unit lower bounds first, so that they find their upper bounds wherever those sort.
    let mut order: Vec<usize> = (0..sys.ineqs.len()).collect();
    order.sort_by_key(|i| {
        let r = &sys.ineqs[*i];
        !lead(r, np, n).is_some_and(|c| r[1 + c] == 1)
    });
    for i in order {
        let r = &sys.ineqs[i];
        if used[i] {
            continue;
        }
        let Some(c) = lead(r, np, n) else { continue };
        let a = r[1 + c];
        let rest = row_aff(r, names, Some(c));
        let x = &names[c];
        if a == 1 {
            let low = rest.scale(-1).unwrap_or_default();
            // A matching upper bound with coefficient -1.
            let up = (0..sys.ineqs.len()).find(|j| {
                *j != i
                    && !used[*j]
                    && lead(&sys.ineqs[*j], np, n) == Some(c)
                    && sys.ineqs[*j][1 + c] == -1
            });
            if let Some(j) = up {
                used[j] = true;
                let u = row_aff(&sys.ineqs[j], names, Some(c));
                out.push((c, format!("{low} <= {}", upper_text(x, &u))));
            } else {
                out.push((c, format!("{x} >= {low}")));
            }
        } else if a == -1 {
            out.push((c, upper_text(x, &rest)));
        } else if a > 0 {
            let low = rest.scale(-1).unwrap_or_default();
            out.push((c, format!("{} >= {low}", coef_var(a, x))));
        } else {
            out.push((c, format!("{} <= {rest}", coef_var(-a, x))));
        }
        used[i] = true;
    }
    if out.is_empty() {
        return None;
    }
    // Dimensions in tuple order, then existentials, then parameter-only constraints.
    out.sort_by_key(|(c, _)| if *c >= np { c - np } else { n + c });
    let out: Vec<String> = out.into_iter().map(|(_, t)| t).collect();
    let body = out.join(" and ");
    if p.n_exist > 0 {
        let ex: Vec<&str> = names[n - p.n_exist..].iter().map(String::as_str).collect();
        Some(format!("exists ({} : {body})", ex.join(", ")))
    } else {
        Some(body)
    }
}

fn params_prefix(params: &[String]) -> String {
    if params.is_empty() {
        String::new()
    } else {
        format!("[{}] -> ", params.join(", "))
    }
}

fn set_piece_text(b: &BasicSet) -> String {
    let t = &b.space.tuple;
    let names = col_names(&b.poly, &b.space.params, &t.dims);
    let head = format!("{}[{}]", t.name, t.dims.join(", "));
    match constraints_text(&b.poly, &names) {
        Some(c) => format!("{head} : {c}"),
        None => head,
    }
}

fn map_piece_text(m: &BasicMap) -> String {
    let sp = &m.space;
    let dims: Vec<String> = sp
        .input
        .dims
        .iter()
        .chain(&sp.output.dims)
        .cloned()
        .collect();
    let names = col_names(&m.poly, &sp.params, &dims);
    let (np, ni, no) = (m.poly.n_param, sp.input.len(), sp.output.len());
    let in_head = format!("{}[{}]", sp.input.name, sp.input.dims.join(", "));
    // Multi-affine form: every output dimension defined by a unit equality.
    let mut p = m.poly.clone();
    let mut exprs = Vec::new();
    if p.sys.simplify() {
        for j in 0..no {
            let c = np + ni + j;
            let others = |r: &Row| {
                (0..no).all(|k| k == j || r[1 + np + ni + k] == 0)
                    && (np + ni + no..p.n_cols()).all(|e| r[1 + e] == 0)
            };
            let Some(idx) = p
                .sys
                .eqs
                .iter()
                .position(|r| r[1 + c].abs() == 1 && others(r))
            else {
                break;
            };
            let e = p.sys.eqs.remove(idx);
            let s = -e[1 + c];
            let val: Row = e.iter().map(|x| x * s).collect();
            exprs.push(row_aff(&val, &names, Some(c)));
            let mut ok = true;
            for r in p.sys.eqs.iter_mut().chain(p.sys.ineqs.iter_mut()) {
                let f = r[1 + c];
                if f != 0 {
                    for (x, y) in r.iter_mut().zip(&e) {
                        match f.checked_mul(e[1 + c] * y).and_then(|d| x.checked_sub(d)) {
                            Some(v) => *x = v,
                            None => ok = false,
                        }
                    }
                }
            }
            if !ok {
                break;
            }
        }
    }
    if exprs.len() == no {
        let out: Vec<String> = exprs.iter().map(|a| a.to_string()).collect();
        let head = format!("{in_head} -> {}[{}]", sp.output.name, out.join(", "));
        return match constraints_text(&p, &names) {
            Some(c) => format!("{head} : {c}"),
            None => head,
        };
    }
    let head = format!(
        "{in_head} -> {}[{}]",
        sp.output.name,
        sp.output.dims.join(", ")
    );
    match constraints_text(&m.poly, &names) {
        Some(c) => format!("{head} : {c}"),
        None => head,
    }
}

impl fmt::Display for BasicSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{{ {} }}",
            params_prefix(&self.space.params),
            set_piece_text(self)
        )
    }
}

impl fmt::Display for Set {
    /// `[params] -> { piece; piece }`; the empty set as `{ S[i] : false }`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pieces: Vec<String> = if self.pieces.is_empty() {
            let t = &self.space.tuple;
            vec![format!("{}[{}] : false", t.name, t.dims.join(", "))]
        } else {
            self.pieces.iter().map(set_piece_text).collect()
        };
        write!(
            f,
            "{}{{ {} }}",
            params_prefix(&self.space.params),
            pieces.join("; ")
        )
    }
}

impl fmt::Display for BasicMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{{ {} }}",
            params_prefix(&self.space.params),
            map_piece_text(self)
        )
    }
}

impl fmt::Display for Map {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pieces: Vec<String> = if self.pieces.is_empty() {
            let s = &self.space;
            vec![format!(
                "{}[{}] -> {}[{}] : false",
                s.input.name,
                s.input.dims.join(", "),
                s.output.name,
                s.output.dims.join(", ")
            )]
        } else {
            self.pieces.iter().map(map_piece_text).collect()
        };
        write!(
            f,
            "{}{{ {} }}",
            params_prefix(&self.space.params),
            pieces.join("; ")
        )
    }
}

// ---------------------------------------------------------------- parsing

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
        for op in ["<=", ">=", "<", ">", "="] {
            if self.eat(op) {
                return Some(op);
            }
        }
        None
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
                        .all(|(a, c)| c == 1 && matches!(a, super::expr::Atom::Name(_)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poly::affine::Answer;

    #[test]
    fn prints_seed_003_domain() {
        let s = parse_set(
            "[N, Cout, H_out] -> { S_conv[n, k, h] : 0 <= n < N and 0 <= k < Cout and 0 <= h < H_out }",
        )
        .unwrap();
        assert_eq!(
            s.to_string(),
            "[N, Cout, H_out] -> { S_conv[n, k, h] : 0 <= n < N and 0 <= k < Cout and 0 <= h < H_out }"
        );
    }

    #[test]
    fn prints_multi_aff_maps_and_existentials() {
        let m = parse_map("[S] -> { S_conv[n, h, rh] -> In[n, 2h + rh] }").unwrap();
        assert_eq!(
            m.to_string(),
            "[S] -> { S_conv[n, h, rh] -> In[n, 2*h + rh] }"
        );
        let s = parse_set("{ T[i] : exists (e : i = 4e) and 0 <= i < 16 }").unwrap();
        assert_eq!(
            s.to_string(),
            "{ T[i] : exists (e0 : i = 4*e0 and 0 <= i <= 15) }"
        );
        let round = parse_set(&s.to_string()).unwrap();
        assert_eq!(round.is_equal(&s).unwrap(), Answer::Yes);
    }

    #[test]
    fn parses_unions_lists_and_rejects_garbage() {
        let s = parse_set("[N] -> { A[i, j] : 0 <= i, j < N or i = -1 }").unwrap();
        assert_eq!(s.pieces().len(), 2);
        assert!(parse_set("{ A[i] : i * i >= 0 }").is_err());
        assert!(parse_set("{ A[i] : i >= M }").is_err());
        assert!(parse_set("{ A[i] : i >= 0").is_err());
        assert!(parse_set("{ A[i] : i # 0 }").is_err());
        let e = parse_set("{ A[i] : false }").unwrap();
        assert_eq!(e.is_empty().unwrap(), Answer::Yes);
        assert_eq!(e.to_string(), "{ A[i] : false }");
    }
}
