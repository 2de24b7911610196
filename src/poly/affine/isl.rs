//! isl notation: deterministic printing of sets and maps (`[N] -> { S[i] : 0 <= i < N }`,
//! `{ S[h, rh] -> T[2*h + rh] }`, existentials as `exists (e0 : ...)`), and a parser for the
//! same subset (parameters, named tuples with names or affine entries, `and`/`or`, chained and
//! comma-listed comparisons, `exists`, `floor(e/d)`, `true`/`false`, `;`-separated pieces of one
//! space).

use super::core::Poly;
use super::expr::Aff;
use super::linear::Row;
use super::map::{BasicMap, Map};
use super::set::{BasicSet, Set};
use std::fmt;

mod parse;
pub use parse::{parse_map, parse_set};

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
        lead(r, np, n).is_none_or(|c| r[1 + c] != 1)
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
