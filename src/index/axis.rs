//! Index expressions shared by the layers that address tensors by named axes: RB-SSA regions
//! (`read` maps and `select` predicates, seed 001 §6.3) and the e-graph's `read` node
//! ([`AccessMap`]). Affine in axes with axis-free coefficients, plus `floordiv` by a positive
//! constant (seed 001 §4.3 invariant 1); the axis-free parts may use `min`/`max` of sizes (a
//! slice start clamped to a symbolic size, `min(1000, S)`). JSON forms live in
//! `crate::ir::region::json`.

use crate::index::dim::Dim;
use crate::index::num::Num;

/// An index expression: affine in axes (with axis-free coefficients) plus floordiv.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AxisExpr {
    /// An integer.
    Const(i64),
    /// An axis in scope, else a symbol.
    Name(String),
    /// A sum of two or more terms.
    Add(Vec<AxisExpr>),
    /// A product; one side must be free of axes.
    Mul(Box<AxisExpr>, Box<AxisExpr>),
    /// `floor(e / c)`, `c > 0`.
    FloorDiv(Box<AxisExpr>, i64),
    /// `min(a, b)` of two axis-free expressions (a size clamped against a symbolic size).
    Min(Box<AxisExpr>, Box<AxisExpr>),
    /// `max(a, b)` of two axis-free expressions.
    Max(Box<AxisExpr>, Box<AxisExpr>),
}

/// Comparison operators of predicates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CmpOp {
    /// `≥ 0`.
    Ge,
    /// `> 0`.
    Gt,
    /// `≤ 0`.
    Le,
    /// `< 0`.
    Lt,
    /// `= 0`.
    Eq,
}

impl CmpOp {
    /// `a op b`.
    pub fn holds(self, a: i64, b: i64) -> bool {
        match self {
            CmpOp::Ge => a >= b,
            CmpOp::Gt => a > b,
            CmpOp::Le => a <= b,
            CmpOp::Lt => a < b,
            CmpOp::Eq => a == b,
        }
    }
}

/// A predicate over axes and symbols.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pred {
    /// Conjunction.
    And(Vec<Pred>),
    /// Disjunction.
    Or(Vec<Pred>),
    /// `a op b`.
    Cmp(CmpOp, AxisExpr, AxisExpr),
}

/// The access of a `read` e-node (seed 001 §6.5: a movement chain folded into one map):
/// `out[i] = guard(i) ? x[index(i)] : fill`. Output axes are the names `i0`, `i1`, … (one per
/// entry of `shape`); every other name in `index` / `guard` is a size symbol.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccessMap {
    /// Shape of the result.
    pub shape: Vec<Dim>,
    /// One index expression per dimension of the operand.
    pub index: Vec<AxisExpr>,
    /// Where the read is valid; `None` means everywhere.
    pub guard: Option<Pred>,
    /// Value outside the guard (PAD's value).
    pub fill: Num,
}

/// The name of output axis `k` in an [`AccessMap`].
pub fn axis_name(k: usize) -> String {
    format!("i{k}")
}

impl std::fmt::Display for AxisExpr {
    /// Compact infix form (`2*i0+i1+-1`, `(i0+i1)//4`), used in printed e-nodes and messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AxisExpr::Const(c) => write!(f, "{c}"),
            AxisExpr::Name(n) => f.write_str(n),
            AxisExpr::Add(ts) => {
                for (k, t) in ts.iter().enumerate() {
                    if k > 0 {
                        f.write_str("+")?;
                    }
                    write!(f, "{t}")?;
                }
                Ok(())
            }
            AxisExpr::Mul(a, b) => {
                let wrap = |e: &AxisExpr| match e {
                    AxisExpr::Add(_) | AxisExpr::FloorDiv(..) => format!("({e})"),
                    _ => e.to_string(),
                };
                write!(f, "{}*{}", wrap(a), wrap(b))
            }
            AxisExpr::FloorDiv(e, c) => match **e {
                AxisExpr::Const(_) | AxisExpr::Name(_) | AxisExpr::Min(..) | AxisExpr::Max(..) => {
                    write!(f, "{e}//{c}")
                }
                _ => write!(f, "({e})//{c}"),
            },
            AxisExpr::Min(a, b) => write!(f, "min({a},{b})"),
            AxisExpr::Max(a, b) => write!(f, "max({a},{b})"),
        }
    }
}

impl std::fmt::Display for CmpOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CmpOp::Ge => ">=",
            CmpOp::Gt => ">",
            CmpOp::Le => "<=",
            CmpOp::Lt => "<",
            CmpOp::Eq => "==",
        })
    }
}

impl std::fmt::Display for Pred {
    /// `(a>=0&a<H)`, `(p|q)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |f: &mut std::fmt::Formatter<'_>, ps: &[Pred], sep: &str| {
            f.write_str("(")?;
            for (k, p) in ps.iter().enumerate() {
                if k > 0 {
                    f.write_str(sep)?;
                }
                write!(f, "{p}")?;
            }
            f.write_str(")")
        };
        match self {
            Pred::And(ps) => list(f, ps, "&"),
            Pred::Or(ps) => list(f, ps, "|"),
            Pred::Cmp(op, a, b) => write!(f, "{a}{op}{b}"),
        }
    }
}

/// Why an [`AxisExpr`] or [`Pred`] could not be evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AxisEvalError {
    /// A name has no value.
    Unbound(String),
    /// Arithmetic overflows `i64`, or a floordiv divisor is not positive.
    Overflow,
}

impl AxisExpr {
    /// `Σ terms` as an [`AxisExpr`]: `0` for none, the term itself for one.
    pub fn sum(mut terms: Vec<AxisExpr>) -> AxisExpr {
        match terms.len() {
            0 => AxisExpr::Const(0),
            1 => terms.remove(0),
            _ => AxisExpr::Add(terms),
        }
    }

    /// `a * b`.
    pub fn product(a: AxisExpr, b: AxisExpr) -> AxisExpr {
        AxisExpr::Mul(Box::new(a), Box::new(b))
    }

    /// A size as an axis-free index expression — the one conversion of a [`Dim`] to the wire
    /// form: one term per monomial in the polynomial's order with the constant term last (as
    /// sizes print: `N+1`), a coefficient in front of its product (`2*(M*N)`), `floordiv`,
    /// `min` and `max` atoms as [`AxisExpr::FloorDiv`], [`AxisExpr::Min`] and [`AxisExpr::Max`].
    pub fn of_dim(d: &Dim) -> AxisExpr {
        use crate::index::dim::Atom;
        let atom = |a: &Atom| match a {
            Atom::Sym(s) => AxisExpr::Name(s.clone()),
            Atom::FloorDiv(e, k) => AxisExpr::FloorDiv(Box::new(AxisExpr::of_dim(e)), *k),
            Atom::Min(x, y) => {
                AxisExpr::Min(Box::new(AxisExpr::of_dim(x)), Box::new(AxisExpr::of_dim(y)))
            }
            Atom::Max(x, y) => {
                AxisExpr::Max(Box::new(AxisExpr::of_dim(x)), Box::new(AxisExpr::of_dim(y)))
            }
        };
        let (mut terms, mut konst) = (Vec::new(), None);
        for (atoms, c) in d.monomials() {
            let Some((first, rest)) = atoms.split_first() else {
                konst = Some(AxisExpr::Const(c));
                continue;
            };
            let t = rest
                .iter()
                .fold(atom(first), |t, a| AxisExpr::product(t, atom(a)));
            terms.push(match c {
                1 => t,
                _ => AxisExpr::product(AxisExpr::Const(c), t),
            });
        }
        terms.extend(konst);
        AxisExpr::sum(terms)
    }

    /// Value with names looked up in `env` (checked arithmetic; floordiv rounds toward −∞).
    pub fn eval(&self, env: &dyn Fn(&str) -> Option<i64>) -> Result<i64, AxisEvalError> {
        Ok(match self {
            AxisExpr::Const(c) => *c,
            AxisExpr::Name(n) => env(n).ok_or_else(|| AxisEvalError::Unbound(n.clone()))?,
            AxisExpr::Add(ts) => ts.iter().try_fold(0i64, |acc, t| {
                acc.checked_add(t.eval(env)?).ok_or(AxisEvalError::Overflow)
            })?,
            AxisExpr::Mul(a, b) => a
                .eval(env)?
                .checked_mul(b.eval(env)?)
                .ok_or(AxisEvalError::Overflow)?,
            AxisExpr::FloorDiv(e, c) if *c > 0 => e.eval(env)?.div_euclid(*c),
            AxisExpr::FloorDiv(..) => return Err(AxisEvalError::Overflow),
            AxisExpr::Min(a, b) => a.eval(env)?.min(b.eval(env)?),
            AxisExpr::Max(a, b) => a.eval(env)?.max(b.eval(env)?),
        })
    }

    /// Calls `f` on every name, in order.
    pub fn for_each_name(&self, f: &mut dyn FnMut(&str)) {
        match self {
            AxisExpr::Const(_) => {}
            AxisExpr::Name(n) => f(n),
            AxisExpr::Add(ts) => ts.iter().for_each(|t| t.for_each_name(f)),
            AxisExpr::Mul(a, b) | AxisExpr::Min(a, b) | AxisExpr::Max(a, b) => {
                a.for_each_name(f);
                b.for_each_name(f);
            }
            AxisExpr::FloorDiv(e, _) => e.for_each_name(f),
        }
    }

    /// True when some name satisfies `is_axis`.
    pub fn mentions(&self, is_axis: &dyn Fn(&str) -> bool) -> bool {
        let mut hit = false;
        self.for_each_name(&mut |n| hit |= is_axis(n));
        hit
    }

    /// The expression with every name `n` for which `f(n)` is `Some(e)` replaced by `e`.
    pub fn substitute(&self, f: &dyn Fn(&str) -> Option<AxisExpr>) -> AxisExpr {
        match self {
            AxisExpr::Const(_) => self.clone(),
            AxisExpr::Name(n) => f(n).unwrap_or_else(|| self.clone()),
            AxisExpr::Add(ts) => AxisExpr::Add(ts.iter().map(|t| t.substitute(f)).collect()),
            AxisExpr::Mul(a, b) => AxisExpr::product(a.substitute(f), b.substitute(f)),
            AxisExpr::FloorDiv(e, c) => AxisExpr::FloorDiv(Box::new(e.substitute(f)), *c),
            AxisExpr::Min(a, b) => {
                AxisExpr::Min(Box::new(a.substitute(f)), Box::new(b.substitute(f)))
            }
            AxisExpr::Max(a, b) => {
                AxisExpr::Max(Box::new(a.substitute(f)), Box::new(b.substitute(f)))
            }
        }
    }
}

impl Pred {
    /// Truth value with names looked up in `env`.
    pub fn eval(&self, env: &dyn Fn(&str) -> Option<i64>) -> Result<bool, AxisEvalError> {
        Ok(match self {
            Pred::And(ps) => {
                for p in ps {
                    if !p.eval(env)? {
                        return Ok(false);
                    }
                }
                true
            }
            Pred::Or(ps) => {
                for p in ps {
                    if p.eval(env)? {
                        return Ok(true);
                    }
                }
                false
            }
            Pred::Cmp(op, a, b) => op.holds(a.eval(env)?, b.eval(env)?),
        })
    }

    /// Calls `f` on every expression compared.
    pub fn for_each_expr(&self, f: &mut dyn FnMut(&AxisExpr)) {
        match self {
            Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|p| p.for_each_expr(f)),
            Pred::Cmp(_, a, b) => {
                f(a);
                f(b);
            }
        }
    }

    /// The predicate with names substituted as in [`AxisExpr::substitute`].
    pub fn substitute(&self, f: &dyn Fn(&str) -> Option<AxisExpr>) -> Pred {
        match self {
            Pred::And(ps) => Pred::And(ps.iter().map(|p| p.substitute(f)).collect()),
            Pred::Or(ps) => Pred::Or(ps.iter().map(|p| p.substitute(f)).collect()),
            Pred::Cmp(op, a, b) => Pred::Cmp(*op, a.substitute(f), b.substitute(f)),
        }
    }
}

impl AccessMap {
    /// The output axis named `n` (`i3` → 3), when `n` names one of this map's axes.
    pub fn axis_of(&self, n: &str) -> Option<usize> {
        let k: usize = n.strip_prefix('i')?.parse().ok()?;
        (k < self.shape.len() && axis_name(k) == n).then_some(k)
    }

    /// Checks the map's form against an operand of rank `operand_rank`: one index per operand
    /// axis; names are output axes `i0..i{r-1}` or size symbols (not `i<k>` for `k >= r`);
    /// floordiv divisors positive; every product has an axis-free side.
    pub fn check(&self, operand_rank: usize) -> Result<(), String> {
        if self.index.len() != operand_rank {
            return Err(format!(
                "READ index has {} entries for an operand of rank {operand_rank}",
                self.index.len()
            ));
        }
        let mut err: Option<String> = None;
        let mut check_expr = |e: &AxisExpr| {
            if err.is_none() {
                if let Err(m) = self.check_expr(e) {
                    err = Some(m);
                }
            }
        };
        for e in &self.index {
            check_expr(e);
        }
        if let Some(g) = &self.guard {
            g.for_each_expr(&mut check_expr);
        }
        err.map_or(Ok(()), Err)
    }

    fn check_expr(&self, e: &AxisExpr) -> Result<(), String> {
        let is_axis = |n: &str| self.axis_of(n).is_some();
        match e {
            AxisExpr::Const(_) => Ok(()),
            AxisExpr::Name(n) => {
                let looks_axis = n
                    .strip_prefix('i')
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
                if looks_axis && !is_axis(n) {
                    return Err(format!(
                        "READ names axis `{n}` but the result has rank {}",
                        self.shape.len()
                    ));
                }
                Ok(())
            }
            AxisExpr::Add(ts) => ts.iter().try_for_each(|t| self.check_expr(t)),
            AxisExpr::Mul(a, b) => {
                if a.mentions(&is_axis) && b.mentions(&is_axis) {
                    return Err(format!("READ product `{e}` has axes on both sides"));
                }
                self.check_expr(a)?;
                self.check_expr(b)
            }
            AxisExpr::FloorDiv(x, c) => {
                if *c <= 0 {
                    return Err(format!("READ floordiv `{e}` by a non-positive {c}"));
                }
                self.check_expr(x)
            }
            AxisExpr::Min(a, b) | AxisExpr::Max(a, b) => {
                if e.mentions(&is_axis) {
                    return Err(format!("READ `{e}` takes the min/max of an axis"));
                }
                self.check_expr(a)?;
                self.check_expr(b)
            }
        }
    }
}
