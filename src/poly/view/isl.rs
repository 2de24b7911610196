//! isl text: printing the view's sets and maps, and a small reader of the same subset (with the
//! seed's juxtaposed coefficients `2h`) that canonicalizes a union set or map for structural
//! comparison — variables renamed by tuple position, constraints split into `e >= 0` / `e = 0`
//! with integer coefficients divided by their gcd, as a set per piece — so two texts that differ
//! only in variable names, constraint order, chaining or spelling (`2h`, `2*h`, `h*2`) compare
//! equal. Tuple names are renamed with a caller-given table ("equal up to renaming").

use super::aff::{Aff, Cons};
use super::stmt::{Access, Stmt};
use crate::index::gcd;
use crate::index::isl::{Cursor, Tok};
use std::collections::{BTreeMap, BTreeSet};

/// Parameters (variables that are not in `bound`) in order of first appearance.
pub fn params_of<'a>(affs: impl IntoIterator<Item = &'a Aff>, bound: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for a in affs {
        let mut vs = BTreeSet::new();
        a.vars(&mut vs);
        // Within one expression, the printing order (by `bound`, then by name) is deterministic.
        for v in vs {
            if !bound.contains(&v) && !out.contains(&v) {
                out.push(v);
            }
        }
    }
    out
}

/// `[P, Q] -> { body }`, or `{ body }` without parameters.
pub fn wrap(params: &[String], pieces: &[String]) -> String {
    let body = if pieces.is_empty() {
        "{ }".to_string()
    } else {
        format!("{{ {} }}", pieces.join("; "))
    };
    if params.is_empty() {
        body
    } else {
        format!("[{}] -> {body}", params.join(", "))
    }
}

/// `S[d0, d1]` with dimension names renamed by `rn`.
pub fn tuple(s: &Stmt, rn: &dyn Fn(&str) -> String) -> String {
    let ds: Vec<String> = s.dims.iter().map(|d| rn(d)).collect();
    format!("{}[{}]", s.name, ds.join(", "))
}

/// The box constraints `lo <= d < hi` of `s` (renamed by `rn`), printing order `order`.
pub fn box_constraints(s: &Stmt, rn: &dyn Fn(&str) -> String, order: &[String]) -> Vec<String> {
    s.dims
        .iter()
        .zip(&s.bounds)
        .map(|(d, (lo, hi))| {
            let r = |a: &Aff| a.rename(&|v| s.dims.contains(&v.to_string()).then(|| rn(v)));
            format!("{} <= {} < {}", r(lo).isl(order), rn(d), r(hi).isl(order))
        })
        .collect()
}

/// Every expression of the statement's box (for parameter collection).
pub fn box_affs(s: &Stmt) -> Vec<&Aff> {
    s.bounds.iter().flat_map(|(l, h)| [l, h]).collect()
}

/// The statement's domain `[params] -> { S[dims] : box }`.
pub fn domain_piece(s: &Stmt) -> String {
    let id = |d: &str| d.to_string();
    let cs = box_constraints(s, &id, &s.dims);
    if cs.is_empty() {
        tuple(s, &id)
    } else {
        format!("{} : {}", tuple(s, &id), cs.join(" and "))
    }
}

/// A name for opaque dimension `j` that no dimension or parameter uses.
fn fresh(j: usize, taken: &[String]) -> String {
    let mut n = format!("x{j}");
    while taken.contains(&n) {
        n.push('_');
    }
    n
}

/// The pieces of access `a` of `s`: `S[dims] -> T[index] : guard` (one per guard piece; opaque
/// dimensions are fresh variables bounded by the tensor's size). With `with_box`, the
/// statement's box is added (the access's domain).
pub fn access_pieces(s: &Stmt, a: &Access, with_box: bool) -> Vec<String> {
    let order = &s.dims;
    let id = |d: &str| d.to_string();
    let mut taken = s.dims.clone();
    taken.extend(params_of(a.shape.iter().chain(box_affs(s)), &s.dims));
    let mut idx = Vec::new();
    let mut opaque = Vec::new();
    for (j, ix) in a.index.iter().enumerate() {
        match ix {
            Some(x) => idx.push(x.isl(order)),
            None => {
                let v = fresh(j, &taken);
                let size = a.shape.get(j).map(|z| z.isl(order)).unwrap_or_default();
                opaque.push(format!("0 <= {v} < {size}"));
                idx.push(v);
            }
        }
    }
    let head = format!("{} -> {}[{}]", tuple(s, &id), a.tensor, idx.join(", "));
    let mut base: Vec<String> = Vec::new();
    if with_box {
        base.extend(box_constraints(s, &id, order));
    }
    base.extend(opaque);
    let guards: Vec<Vec<Cons>> = a.guard.clone().unwrap_or_else(|| vec![Vec::new()]);
    guards
        .iter()
        .map(|g| {
            let mut cs = base.clone();
            cs.extend(g.iter().map(|c| c.isl(order)));
            if cs.is_empty() {
                head.clone()
            } else {
                format!("{head} : {}", cs.join(" and "))
            }
        })
        .collect()
}

/// The guarded part of the domain where access `a` happens: `S[dims] : box and guard`.
pub fn access_domain_pieces(s: &Stmt, a: &Access) -> Vec<String> {
    let id = |d: &str| d.to_string();
    let bx = box_constraints(s, &id, &s.dims);
    a.guard
        .clone()
        .unwrap_or_else(|| vec![Vec::new()])
        .iter()
        .map(|g| {
            let mut cs = bx.clone();
            cs.extend(g.iter().map(|c| c.isl(&s.dims)));
            format!("{} : {}", tuple(s, &id), cs.join(" and "))
        })
        .collect()
}

/// Every expression an access mentions (for parameter collection).
pub fn access_affs(a: &Access) -> Vec<&Aff> {
    let mut v: Vec<&Aff> = a.index.iter().flatten().collect();
    v.extend(
        a.shape
            .iter()
            .enumerate()
            .filter_map(|(j, z)| a.index.get(j).is_some_and(|x| x.is_none()).then_some(z)),
    );
    if let Some(g) = &a.guard {
        v.extend(g.iter().flatten().map(|c| &c.aff));
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// The reader's grammar over the index algebra's token cursor (which reads expressions).
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

impl Parser {
    fn tuple(&mut self) -> Result<(String, Vec<Aff>), String> {
        let name = self.ident().unwrap_or_default();
        self.expect("[")?;
        let mut v = Vec::new();
        if !self.eat("]") {
            loop {
                v.push(self.expr()?);
                if self.eat("]") {
                    break;
                }
                self.expect(",")?;
            }
        }
        Ok((name, v))
    }

    fn constraints(&mut self) -> Result<Vec<Cons>, String> {
        let mut out = Vec::new();
        loop {
            let mut lhs = self.expr()?;
            let mut any = false;
            while let Some(Tok::Sym(op @ ("<=" | "<" | ">=" | ">" | "=" | "=="))) =
                self.peek().cloned()
            {
                self.pos += 1;
                let rhs = self.expr()?;
                let one = Aff::int(1);
                out.push(match op {
                    "<=" => Cons::ge(&rhs, &lhs),
                    "<" => Cons::ge(&rhs, &lhs.add(&one)),
                    ">=" => Cons::ge(&lhs, &rhs),
                    ">" => Cons::ge(&lhs, &rhs.add(&one)),
                    _ => Cons::eq(&lhs, &rhs),
                });
                lhs = rhs;
                any = true;
            }
            if !any {
                return Err("a constraint needs a comparison".into());
            }
            if !matches!(self.peek(), Some(Tok::Id(n)) if n == "and") {
                return Ok(out);
            }
            self.pos += 1;
        }
    }
}

/// One canonical piece: tuple names and arities, and its constraint set over `i<k>` (input
/// tuple) and `o<k>` (output tuple) and the parameters.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct CanonPiece {
    /// Input (or set) tuple name and arity.
    pub input: (String, usize),
    /// Output tuple name and arity (maps).
    pub output: Option<(String, usize)>,
    /// The constraints.
    pub constraints: BTreeSet<Cons>,
}

/// Divides by the gcd of the coefficients (rounding the constant of an inequality down) and
/// gives equalities a positive leading coefficient.
fn canon_cons(c: &Cons) -> Cons {
    let g = c.aff.terms.values().fold(0, |g, k| gcd(g, *k));
    let mut aff = c.aff.clone();
    if g > 1 {
        if c.eq && aff.konst % g != 0 {
            return c.clone();
        }
        aff = Aff {
            terms: aff.terms.iter().map(|(a, k)| (a.clone(), k / g)).collect(),
            konst: aff.konst.div_euclid(g),
        };
    }
    if c.eq && aff.terms.values().next().is_some_and(|k| *k < 0) {
        aff = aff.scale(-1);
    }
    Cons { aff, eq: c.eq }
}

/// Reads a union set or map and canonicalizes it; tuple names are renamed by `rename`.
pub fn canonical(text: &str, rename: &[(&str, &str)]) -> Result<BTreeSet<CanonPiece>, String> {
    let mut p = Parser(Cursor::new(text)?);
    let mut params = Vec::new();
    if p.eat("[") {
        while let Ok(n) = p.ident() {
            params.push(n);
            if !p.eat(",") {
                break;
            }
        }
        p.expect("]")?;
        p.expect("->")?;
    }
    p.expect("{")?;
    let rn = |n: &str| {
        rename
            .iter()
            .find(|(a, _)| *a == n)
            .map(|(_, b)| b.to_string())
            .unwrap_or_else(|| n.to_string())
    };
    let mut out = BTreeSet::new();
    while !p.eat("}") {
        let (in_name, ins) = p.tuple()?;
        let mut names: BTreeMap<String, String> = BTreeMap::new();
        let mut cons = Vec::new();
        let mut bind =
            |x: &Aff, canon: String, names: &mut BTreeMap<String, String>| match x.as_var() {
                Some(v) if !params.contains(&v.to_string()) && !names.contains_key(v) => {
                    names.insert(v.to_string(), canon);
                }
                _ => cons.push(Cons::eq(&Aff::var(&canon), x)),
            };
        for (k, x) in ins.iter().enumerate() {
            bind(x, format!("i{k}"), &mut names);
        }
        let mut output = None;
        if p.eat("->") {
            let (out_name, outs) = p.tuple()?;
            for (k, x) in outs.iter().enumerate() {
                bind(x, format!("o{k}"), &mut names);
            }
            output = Some((rn(&out_name), outs.len()));
        }
        if p.eat(":") {
            cons.extend(p.constraints()?);
        }
        let constraints = cons
            .iter()
            .map(|c| {
                let aff = c.aff.rename(&|v| names.get(v).cloned());
                canon_cons(&Cons { aff, eq: c.eq })
            })
            .filter(|c| c.decided() != Some(true))
            .collect();
        out.insert(CanonPiece {
            input: (rn(&in_name), ins.len()),
            output,
            constraints,
        });
        if !p.eat(";") {
            p.expect("}")?;
            break;
        }
    }
    if p.pos != p.toks.len() {
        return Err(format!("trailing tokens after `}}` at {}", p.pos));
    }
    Ok(out)
}

/// True when `a` and `b` are the same union set or map up to variable names and formatting,
/// tuple names of `a` renamed by `rename`.
pub fn same(a: &str, b: &str, rename: &[(&str, &str)]) -> Result<bool, String> {
    Ok(canonical(a, rename)? == canonical(b, &[])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_spelling_and_ours_agree() {
        let seed = "[N, KH] -> { S_conv[n, k, h, rh] -> In[n, k, h * 2 + rh - 1] : \
                    0 <= h * 2 + rh - 1 < 32 }";
        let ours = "[N, KH] -> { S[a, b, c, d] -> X[a, b, 2*c + d - 1] : 2*c + d >= 1 and \
                    2*c + d <= 32 }";
        assert_eq!(same(seed, ours, &[("S_conv", "S"), ("In", "X")]), Ok(true));
        assert_eq!(same(seed, ours, &[]), Ok(false));
        let juxt = "{ S[h, r] -> T[h', r'] : h = 2h' + r' and 0 <= r' < 2 }";
        let star = "{ S[x, y] -> T[u, v] : x - 2*u - v = 0 and v >= 0 and 1 >= v }";
        assert_eq!(same(juxt, star, &[]), Ok(true));
    }

    #[test]
    fn floors_and_unions_read_back() {
        let a = "[H] -> { S[i] : 0 <= i < floor((H + 1)/2); T[j] : j = 0 }";
        let b = "[H] -> { T[q] : q = 0; S[p] : p >= 0 and floor((H + 1)/2) >= p + 1 }";
        assert_eq!(same(a, b, &[]), Ok(true));
    }
}
