//! Spelling region-level things in C: identifiers for symbols, axes and lets, size expressions
//! ([`Dim`]) and index expressions ([`AxisExpr`], [`Pred`]) as C `int` expressions.
//!
//! Names: symbol `M` is the kernel parameter `s_M`; a region's inputs and outputs are the
//! parameters `in0…`, `out0…` (tensor names may hold any character); loop variables and lets get
//! fresh names from the emitter. `floordiv` rounds toward −∞ (`dlc_floordiv`), as the reference
//! does, even for negative numerators (a padded conv's `h − 1`).

use crate::ir::axis::{AxisExpr, CmpOp, Pred};
use crate::ir::dim::{Atom, Dim};

/// A C identifier made of `s`'s alphanumerics (others become `_`).
pub fn ident(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The kernel parameter holding symbol `s`.
pub fn sym(s: &str) -> String {
    format!("s_{}", ident(s))
}

/// `d` as a C `int` expression over symbol parameters.
pub fn dim(d: &Dim) -> String {
    if let Some(v) = d.as_int() {
        return v.to_string();
    }
    let mut terms: Vec<String> = Vec::new();
    for (atoms, coeff) in d.monomials() {
        let mut factors: Vec<String> = atoms.iter().map(atom).collect();
        if factors.is_empty() || coeff != 1 {
            factors.insert(0, coeff.to_string());
        }
        terms.push(factors.join(" * "));
    }
    if terms.is_empty() {
        return "0".into();
    }
    format!("({})", terms.join(" + "))
}

fn atom(a: &Atom) -> String {
    match a {
        Atom::Sym(s) => sym(s),
        Atom::FloorDiv(e, d) => format!("dlc_floordiv({}, {d})", dim(e)),
        Atom::Min(a, b) => format!("dlc_imin({}, {})", dim(a), dim(b)),
        Atom::Max(a, b) => format!("dlc_imax({}, {})", dim(a), dim(b)),
    }
}

/// `e` as a C `int` expression; `name` spells an axis or symbol.
pub fn axis(e: &AxisExpr, name: &dyn Fn(&str) -> String) -> String {
    match e {
        AxisExpr::Const(c) => {
            if *c < 0 {
                format!("({c})")
            } else {
                c.to_string()
            }
        }
        AxisExpr::Name(n) => name(n),
        AxisExpr::Add(ts) => {
            let parts: Vec<String> = ts.iter().map(|t| axis(t, name)).collect();
            format!("({})", parts.join(" + "))
        }
        AxisExpr::Mul(a, b) => format!("({} * {})", axis(a, name), axis(b, name)),
        AxisExpr::FloorDiv(x, c) => format!("dlc_floordiv({}, {c})", axis(x, name)),
        AxisExpr::Min(a, b) => format!("dlc_imin({}, {})", axis(a, name), axis(b, name)),
        AxisExpr::Max(a, b) => format!("dlc_imax({}, {})", axis(a, name), axis(b, name)),
    }
}

/// `p` as a C `bool` expression.
pub fn pred(p: &Pred, name: &dyn Fn(&str) -> String) -> String {
    match p {
        Pred::And(ps) if ps.is_empty() => "true".into(),
        Pred::Or(ps) if ps.is_empty() => "false".into(),
        Pred::And(ps) => {
            let v: Vec<String> = ps.iter().map(|q| pred(q, name)).collect();
            format!("({})", v.join(" && "))
        }
        Pred::Or(ps) => {
            let v: Vec<String> = ps.iter().map(|q| pred(q, name)).collect();
            format!("({})", v.join(" || "))
        }
        Pred::Cmp(op, a, b) => {
            let o = match op {
                CmpOp::Ge => ">=",
                CmpOp::Gt => ">",
                CmpOp::Le => "<=",
                CmpOp::Lt => "<",
                CmpOp::Eq => "==",
            };
            format!("({} {o} {})", axis(a, name), axis(b, name))
        }
    }
}

/// A float constant as C (`1.5f`, `dlc_inf()`, `-dlc_inf()`, `dlc_nan()`), exactly the fp32
/// value the reference uses.
pub fn float(c: f64) -> String {
    let f = c as f32;
    if f.is_nan() {
        "dlc_nan()".into()
    } else if f.is_infinite() {
        if f > 0.0 {
            "dlc_inf()".into()
        } else {
            "(-dlc_inf())".into()
        }
    } else {
        // `{:?}` prints the shortest string that reads back as the same f32.
        let s = format!("{f:?}");
        let s = if s.contains('.') || s.contains('e') {
            s
        } else {
            format!("{s}.0")
        };
        if f < 0.0 {
            format!("({s}f)")
        } else {
            format!("{s}f")
        }
    }
}

/// The helpers emitted code uses beyond `dlc_kernel.cuh`, at the top of `kernels.cu`.
pub const PRELUDE: &str = r#"// Integer helpers of the code generator (floor division rounds toward -inf, as the reference).
__device__ __forceinline__ int dlc_floordiv(int a, int c) { return a >= 0 ? a / c : -((-a + c - 1) / c); }
__device__ __forceinline__ int dlc_imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int dlc_imax(int a, int b) { return a > b ? a : b; }
// i32 arithmetic wraps, as Tiny's i32 ops do.
__device__ __forceinline__ int dlc_iadd(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
__device__ __forceinline__ int dlc_isub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
__device__ __forceinline__ int dlc_imul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
__device__ __forceinline__ int dlc_idiv(int a, int b) { return b == 0 ? 0 : (a == (-2147483647 - 1) && b == -1) ? a : a / b; }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_read_back_exactly() {
        assert_eq!(float(0.125), "0.125f");
        assert_eq!(float(1.0), "1.0f");
        assert_eq!(float(-2.5), "(-2.5f)");
        assert_eq!(float(f64::NEG_INFINITY), "(-dlc_inf())");
        let c = 1.4426950216293335;
        let s = float(c);
        let back: f32 = s.trim_end_matches('f').parse().unwrap();
        assert_eq!(back, c as f32);
    }

    #[test]
    fn sizes_and_axes_spell_as_c() {
        let m = Dim::sym("M");
        assert_eq!(
            dim(&m.add_int(63).floordiv(64)),
            "(dlc_floordiv((63 + s_M), 64))"
        );
        let e = AxisExpr::Add(vec![AxisExpr::Name("h".into()), AxisExpr::Const(-1)]);
        assert_eq!(axis(&e, &|n| format!("i_{n}")), "(i_h + (-1))");
    }
}
