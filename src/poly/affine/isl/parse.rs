//! The parser of the isl notation subset that [`super`] prints.

use super::super::core::{Col, Poly};
use super::super::expr::Aff;
use super::super::map::{BasicMap, Map, MapSpace};
use super::super::set::{BasicSet, Set, SetSpace, Tuple};
use super::super::AffineError;
use crate::index::isl::{Cursor, IslError, Tok};

/// A conjunction of the DNF: its existential names and `(aff, is_eq)` constraints.
#[derive(Clone, Debug, Default)]
struct Conj {
    exists: Vec<String>,
    cons: Vec<(Aff, bool)>,
    falsum: bool,
}

/// The set and map grammar over the index algebra's token cursor (which reads expressions).
struct Parser(Cursor);

impl std::ops::Deref for Parser {
    type Target = Cursor;
    fn deref(&self) -> &Cursor {
        &self.0
    }
}

impl std::ops::DerefMut for Parser {
    fn deref_mut(&mut self) -> &mut Cursor {
        &mut self.0
    }
}

type PResult<T> = Result<T, AffineError>;

impl From<IslError> for AffineError {
    fn from(e: IslError) -> AffineError {
        match e.cause {
            Some(c) => c.into(),
            None => AffineError::Parse {
                pos: e.pos,
                msg: e.msg,
            },
        }
    }
}

impl Parser {
    fn err<T>(&self, msg: &str) -> PResult<T> {
        Ok(self.0.err(msg)?)
    }

    fn expr(&mut self) -> PResult<Aff> {
        Aff::from_quasi(self.0.expr()?)
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
                        .all(|(a, c)| c == 1 && matches!(a, super::super::expr::Atom::Var(_)));
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
    let mut p = Parser(Cursor::new(s)?);
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
