//! The row template's run-time vector branch (issue 15): a row whose innermost size is `c·S`
//! (`S` a symbol, a BERT export's `sequence`) cannot be proved a multiple of the plan's lanes,
//! so the row template emits two walks of the row under one uniform branch: where
//! `S % q == 0` (`q` = lanes / gcd(c, lanes)) the vector walk, else the element walk.
//!
//! The vector walk is the row template run on the region *specialized* to that fact: every size
//! of the region (iters, memref shapes, reduce extents, broadcast shapes) with `S` replaced by
//! `q·S'`, `S'` a fresh symbol the branch defines as `S / q` (as `crate::shapes::specialize`
//! does for a shape cluster). `Dim::div_exact` then proves what the vector template needs —
//! the row's length a multiple of the lanes, and for each read loaded as a vector its last
//! dimension too, so every chunk starts at a multiple of the lanes in a 256-byte aligned buffer
//! (`super::vector`'s module doc) — and reads whose last dimension does not follow `S` stay
//! scalar. Index expressions that name `S` keep the kernel parameter (its value is the same).
//!
//! The plan space prices the walk the priced sizes take (`applicability::Emits::Row`): the
//! priced innermost extent is `c·S` at the priced `S`, so `S % q == 0` there exactly when that
//! extent is a multiple of the lanes ([`VectorGuard::holds_at`]).

use super::super::cexpr;
use super::super::scalar::Emitter;
use crate::index::gcd;
use crate::ir::dim::{Atom, Dim};
use crate::ir::region::verify::children_mut;
use crate::ir::region::{Expr, Region, Size};
use std::collections::BTreeMap;

/// The vector walk of a row under a run-time test: the symbol tested, its divisor, the
/// specialized region and the C definition of the fresh symbol.
#[derive(Clone, Debug)]
pub struct VectorGuard {
    /// The symbol of the row's innermost size (`S`).
    pub symbol: String,
    /// `S` must be a multiple of this (`q`).
    pub divisor: i64,
    /// The fresh symbol `S' = S / q`.
    pub fresh: String,
    /// The lanes the vector walk runs.
    pub lanes: u32,
    /// `r` with `S` replaced by `q·S'` in every size.
    pub region: Region,
}

impl VectorGuard {
    /// The branch condition (C): `S % q == 0`.
    pub fn cond(&self) -> String {
        format!("{} % {} == 0", cexpr::sym(&self.symbol), self.divisor)
    }

    /// The C definition of the fresh symbol inside the branch: (name, value).
    pub fn define(&self) -> (String, String) {
        (
            cexpr::sym(&self.fresh),
            format!("{} / {}", cexpr::sym(&self.symbol), self.divisor),
        )
    }

    /// Whether the vector walk runs when the row's innermost size is `extent` (the priced
    /// `c·S`): `c·S` a multiple of the lanes, i.e. `S % q == 0`.
    pub fn holds_at(&self, extent: f64) -> bool {
        extent >= 0.0 && (extent as u64).is_multiple_of(u64::from(self.lanes))
    }
}

/// The guard under which the row walk of `r` (innermost row size `inner`) runs `lanes` lanes,
/// when the size is `c·S` for one symbol `S` and the specialized region keeps all `lanes`
/// (`keeps(region)`, the row template's own test); `None` otherwise (a number, or a size of
/// several symbols: the element walk only).
pub fn guard(
    r: &Region,
    inner: &Dim,
    lanes: u32,
    keeps: impl Fn(&Region) -> bool,
) -> Option<VectorGuard> {
    if lanes < 2 || inner.as_int().is_some() {
        return None;
    }
    let mut monomials = inner.monomials();
    let (atoms, coeff) = monomials.next()?;
    if monomials.next().is_some() || coeff <= 0 {
        return None;
    }
    let [Atom::Sym(symbol)] = atoms else {
        return None;
    };
    let divisor = i64::from(lanes) / gcd(coeff, i64::from(lanes));
    let taken = super::symbols(r);
    let mut fresh = format!("{symbol}_{divisor}");
    while taken.contains(&fresh) {
        fresh.push('_');
    }
    let sub: BTreeMap<String, Dim> = [(symbol.clone(), Dim::sym(&fresh).mul_int(divisor))].into();
    let region = substitute_region(r, &sub);
    Emitter::new(&region, "").ok()?;
    keeps(&region).then(|| VectorGuard {
        symbol: symbol.clone(),
        divisor,
        fresh,
        lanes,
        region,
    })
}

/// `r` with every size substituted by `sub` (iters, input and output shapes, reduce extents,
/// broadcast result shapes).
pub fn substitute_region(r: &Region, sub: &BTreeMap<String, Dim>) -> Region {
    let size = |s: &mut Size| s.0 = s.0.substitute_dims(sub);
    let mut out = r.clone();
    for it in &mut out.iters {
        if let Some(s) = &mut it.size {
            size(s);
        }
    }
    for s in out.inputs.iter_mut().flat_map(|i| &mut i.memref.shape) {
        size(s);
    }
    for s in out.outputs.iter_mut().flat_map(|o| &mut o.memref.shape) {
        size(s);
    }
    for l in &mut out.lets {
        substitute_expr(&mut l.expr, sub);
    }
    out
}

fn substitute_expr(e: &mut Expr, sub: &BTreeMap<String, Dim>) {
    match e {
        Expr::Reduce(red) => {
            for (_, s) in &mut red.extents {
                s.0 = s.0.substitute_dims(sub);
            }
        }
        Expr::BroadcastInDim { result_shape, .. } => {
            for s in result_shape {
                s.0 = s.0.substitute_dims(sub);
            }
        }
        _ => {}
    }
    for c in children_mut(e) {
        substitute_expr(c, sub);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn softmax(n: &str) -> Region {
        let doc = format!(
            r#"{{"region": {{"name": "k", "iters": [{{"name": "m", "size": 4}}, {{"name": "n", "size": "{n}"}}],
              "inputs": [{{"name": "x", "dtype": "fp32", "memref": {{"shape": [4, "{n}"], "alignment": 16, "noalias": true, "layout": {{"kind": "row_major"}}}}}}],
              "outputs": [{{"name": "y", "dtype": "fp32", "memref": {{"shape": [4, "{n}"], "alignment": 16, "noalias": true, "layout": {{"kind": "row_major"}}}}, "materialize": "gmem"}}],
              "lets": [{{"let": "mx", "expr": {{"reduce": {{"op": "max", "axes": ["n"], "dtype": "fp32",
                          "body": {{"read": {{"tensor": "x", "map": ["m", "n"]}}}}}}}}}},
                       {{"let": "y0", "expr": {{"sub": [{{"read": {{"tensor": "x", "map": ["m", "n"]}}}}, "mx"]}}}}],
              "yield": [{{"from": "y0", "to": "y"}}]}}}}"#
        );
        Region::from_json_str(&doc).expect("test region parses")
    }

    #[test]
    fn a_symbolic_row_gets_a_guard_and_its_sizes_divide() {
        let r = softmax("S");
        let g = guard(&r, &Dim::sym("S"), 4, |_| true).expect("a guard");
        assert_eq!(
            (g.symbol.as_str(), g.divisor, g.fresh.as_str()),
            ("S", 4, "S_4")
        );
        assert_eq!(g.cond(), "s_S % 4 == 0");
        assert_eq!(g.define(), ("s_S_4".to_string(), "s_S / 4".to_string()));
        let last = &g.region.inputs[0].memref.shape[1].0;
        assert!(last.div_exact(&Dim::int(4)).is_some());
        assert!(g.holds_at(512.0) && !g.holds_at(510.0));
        // 2·S needs S even for 4 lanes.
        let g = guard(&r, &Dim::sym("S").mul_int(2), 4, |_| true).expect("a guard");
        assert_eq!(g.divisor, 2);
    }

    #[test]
    fn numbers_sums_and_refused_lanes_get_no_guard() {
        let r = softmax("S");
        assert!(guard(&r, &Dim::int(12), 4, |_| true).is_none());
        assert!(guard(&r, &Dim::sym("S").add_int(1), 4, |_| true).is_none());
        assert!(guard(&r, &Dim::sym("S"), 1, |_| true).is_none());
        assert!(guard(&r, &Dim::sym("S"), 4, |_| false).is_none());
    }
}
