//! Poly-View diagnostics (seed 001 §14): `E1203 MissingDivGuard` (an index computed with an
//! integer division or modulo at value level, which the view cannot express as an affine access:
//! the division was not lowered to `floordiv` plus a guard) and `E1304 AxisAlignmentMismatch`
//! (an iter whose size disagrees with the output's declared dimension, or an unguarded access
//! whose index range provably leaves the tensor's declared dimension), and the warning
//! `W2101 ExcessivePiecewise` ([`excessive_piecewise`]): a guard that expands to more than
//! [`crate::poly::affine::PIECEWISE_BUDGET`] pieces (the view stops expanding it and marks the
//! statement non-SCoP, `aff::MAX_PIECES`); Poly Core raises the same warning when the affine
//! engine answers `AffineError::PiecewiseOverBudget`.

use super::aff::{Aff, Atom};
use super::stmt::{has_idiv, Stmt};
use crate::diag::codes;
use crate::diag::{Diagnostic, Location};
use crate::ir::region::verify::children;
use crate::ir::region::{Expr, Region};

fn at(region: &str, what: &str) -> Location {
    Location::Field {
        path: format!("poly_view/{region}/{what}"),
    }
}

/// Why a gather's data index is a modulo / division kept at value level, if it is one: it uses
/// `idiv` and reads no tensor (a data-independent index the view could have had affinely).
pub fn gather_index_mod(index: &Expr) -> Option<String> {
    (!reads_data(index) && has_idiv(index)).then(|| {
        "its index is a data-independent `idiv` (a `%`/division kept at value level, \
         not lowered to floordiv + guard)"
            .to_string()
    })
}

fn reads_data(e: &Expr) -> bool {
    matches!(e, Expr::Read { .. } | Expr::Gather { .. } | Expr::Let(_))
        || children(e).into_iter().any(reads_data)
}

/// Every diagnostic of region `r` with statements `stmts`.
pub fn region_diagnostics(r: &Region, stmts: &[Stmt]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    missing_div_guards(r, &mut out);
    iter_alignment(r, &mut out);
    for s in stmts {
        access_alignment(s, &mut out);
        piecewise_budget(s, &mut out);
    }
    out
}

/// `W2101 ExcessivePiecewise` at value `at_value` (a let, or a statement), `why` saying what
/// grew past the budget.
pub fn excessive_piecewise(region: &str, at_value: &str, why: &str) -> Diagnostic {
    Diagnostic::warning(
        codes::EXCESSIVE_PIECEWISE,
        at(region, at_value),
        format!(
            "the piecewise union is too large: {why} (budget: {} pieces, \
             `poly::affine::PIECEWISE_BUDGET`)",
            crate::poly::affine::PIECEWISE_BUDGET
        ),
        "force gist/coalesce/remove_redundancies on the guards and simplify the pad/slice \
         chain (fold consecutive pads and crops into one, or split the kernel at the chain)",
    )
    .with("at_value", at_value)
}

/// `W2101` for each guard of `s` that the view did not expand (over `aff::MAX_PIECES`), at the
/// value `s` computes (its let, else the tensor it writes).
fn piecewise_budget(s: &Stmt, out: &mut Vec<Diagnostic>) {
    let marker = format!(": {}", super::aff::EXCESSIVE_PIECEWISE);
    for why in s.non_scop.iter().filter(|w| w.contains(&marker)) {
        let written = s
            .accesses
            .iter()
            .find(|a| a.write)
            .map(|a| a.tensor.as_str());
        let value = s.let_name.as_deref().or(written).unwrap_or(&s.name);
        out.push(excessive_piecewise(&s.region, value, why).with("statement", &s.name));
    }
}

fn missing_div_guards(r: &Region, out: &mut Vec<Diagnostic>) {
    fn visit(r: &Region, let_name: &str, e: &Expr, out: &mut Vec<Diagnostic>) {
        if let Expr::Gather { tensor, index, .. } = e {
            if let Some(why) = gather_index_mod(index) {
                out.push(Diagnostic::error(
                    codes::REGION_MISSING_DIV_GUARD,
                    at(&r.name, let_name),
                    format!("the gather of `{tensor}` in let `{let_name}`: {why}"),
                    "lower the reshape/view index: linearize, then decompose it with floordiv \
                     and a guard in the read's map instead of an idiv of index values",
                ));
            }
        }
        for c in children(e) {
            visit(r, let_name, c, out);
        }
    }
    for l in &r.lets {
        visit(r, &l.name, &l.expr, out);
    }
}

fn iter_alignment(r: &Region, out: &mut Vec<Diagnostic>) {
    for o in &r.outputs {
        if o.memref.shape.len() != r.iters.len() {
            continue;
        }
        for (k, (it, s)) in r.iters.iter().zip(&o.memref.shape).enumerate() {
            if let Some(size) = &it.size {
                if size.0 != s.0 {
                    out.push(Diagnostic::error(
                        codes::AXIS_ALIGNMENT_MISMATCH,
                        at(&r.name, &it.name),
                        format!(
                            "iter `{}` has size {} but dimension {k} of output `{}` is {}",
                            it.name, size.0, o.name, s.0
                        ),
                        "give the iter the output's size (or leave `size` out to take it), \
                         or fix the output memref's shape",
                    ));
                }
            }
        }
    }
}

/// `(min, max)` of `a` over the statement's box: symbolic in the parameters; `None` with a
/// floordiv or min/max atom.
fn range(a: &Aff, s: &Stmt) -> Option<(Aff, Aff)> {
    let (mut lo, mut hi) = (Aff::int(a.konst), Aff::int(a.konst));
    for (t, c) in &a.terms {
        let Atom::Var(v) = t else { return None };
        match s.dims.iter().position(|d| d == v) {
            Some(i) => {
                let (l, u) = &s.bounds[i];
                let top = u.add(&Aff::int(-1));
                let (at_lo, at_hi) = if *c > 0 { (l, &top) } else { (&top, l) };
                lo = lo.add(&at_lo.scale(*c));
                hi = hi.add(&at_hi.scale(*c));
            }
            None => {
                let p = Aff::var(v).scale(*c);
                lo = lo.add(&p);
                hi = hi.add(&p);
            }
        }
    }
    Some((lo, hi))
}

fn access_alignment(s: &Stmt, out: &mut Vec<Diagnostic>) {
    for a in s.accesses.iter().filter(|a| a.guard.is_none() && !a.local) {
        for (j, (ix, size)) in a.index.iter().zip(&a.shape).enumerate() {
            let Some(ix) = ix else { continue };
            let Some((lo, hi)) = range(ix, s) else {
                continue;
            };
            let below = lo.as_int().is_some_and(|v| v < 0);
            let above = hi.sub(size).as_int().is_some_and(|v| v >= 0);
            if below || above {
                let order = s.dims.clone();
                out.push(
                    Diagnostic::error(
                        codes::AXIS_ALIGNMENT_MISMATCH,
                        at(&s.region, s.let_name.as_deref().unwrap_or(&s.name)),
                        format!(
                            "{} `{}` index {j} `{}` ranges over [{}, {}] in {}, outside \
                             [0, {}) with no guard",
                            if a.write { "write of" } else { "read of" },
                            a.tensor,
                            ix.isl(&order),
                            lo.isl(&order),
                            hi.isl(&order),
                            s.name,
                            size.isl(&order)
                        ),
                        "guard the access with a select on its index (pad), or fix the \
                         tensor's declared shape or the iteration sizes",
                    )
                    .with("dimension", j),
                );
            }
        }
    }
}
