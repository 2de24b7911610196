//! Direct convolution (im2col-free): a contraction whose column operand is a sliding window
//! over one region input (`x[..., h + kh − p, w + kw − p]`, a convolution's image) reads that
//! input in place instead of packing an im2col block per work item.
//!
//! The input is copied once per call into a zero-padded fp32 buffer `cxp` (its padding made
//! explicit, fp16/bf16 converted once), whose every axis is widened by the window's reach
//! below zero and past the end. In that copy the column operand's element at column point
//! `(outer…, h, w)` and reduce point `k` lives at `base(outer) + h·P + w·S + koff[k]`: the
//! address is affine and separable, `w` moves it by the window's stride `S` along a row (1 or
//! 2: ResNet's halving convolutions and its 7×7 stem), and `P` (the padded row pitch times
//! the row stride) is at least `S` times the number of `w` values.
//!
//! The micro-kernel (`dlc_conv_cv`, `gemm.h`) runs its vector lanes over the output channels
//! (the contraction's rows, packed once per loaded program in panels of `DLC_CR`: 32 on
//! AVX-512) and broadcasts image values read in place: its register tile is `DLC_CR` channels
//! by `DLC_PX` (14) consecutive positions `w` of one output row, with all of K in registers.
//! Work items are whole output rows (about `DLC_CV_COLS` positions together; a longer row is
//! cut into chunks of whole tiles) by a group of channel panels; tiles never span two rows,
//! so no junk positions are computed beyond a row's last partial tile (a tail of at most
//! `DLC_PX / 2` positions takes a half-width tile). The item's results stay in the thread's
//! block `cCt` (channel-major), where the region's block epilogue reads them (bias,
//! activation, residual, the output stores); without a block epilogue they are copied into
//! the contraction's buffer. Measured on Intel Emerald Rapids, one thread, the 3×3 64→64 56²
//! conv + bias + ReLU in a C harness (CPU-time minima of 100 calls, three interleaved rounds,
//! loaded machine): 1.73–1.78 ms with the previous row-major tile over virtual columns (2 junk
//! columns of 58, results copied into the buffer), 1.58–1.62 ms now; onnxruntime 1.47 ms.
//! A contraction with fewer than 16 rows known at emission keeps the packed path (its channel
//! vectors would be mostly padding).
//!
//! Taken when (checked here, at emission): the contraction has no batch iters and its column
//! operand is not a kept pack; the operand is a pointwise function of reads of region inputs
//! of one shape through one index map `idx` (a bare read `x[idx]`, or a prologue such as
//! ResNet's `relu(t[idx] + x[idx])`, evaluated once per element by the padded copy instead of
//! once per window tap; further reads may index each of their axes by an integer or by one of
//! `idx`'s entries over an axis of the same size, as the per-channel bias of
//! `relu(t[idx] + b[k])`), bare or guarded by bound checks of that index (`pred ? v(idx) : 0`,
//! each conjunct `idx_d ≥ 0` or `idx_d ≤ size_d − 1`); every index is affine in the column iters and reduce axes with
//! integer coefficients; the innermost column iter appears only in the last axis, with
//! coefficient 1 or 2 (the next one is the row iter `h` when it appears only in the axis before,
//! with a positive coefficient, beside a reduce axis; else it is an outer iter like the batch); and
//! some axis mixes a column iter with a reduce axis (a window: the im2col would duplicate
//! data). A plain GEMM or a 1×1 convolution keeps its packed column blocks (their rows are
//! whole tensor rows apart: in place they would alias in L1).

use super::contraction::Contraction;
use super::emit::{Emitter, Scope};
use super::CpuError;
use crate::index::access::dim_to_expr;
use crate::index::{Atom, Quasi};
use crate::ir::axis::{AxisExpr, CmpOp};
use crate::ir::region::kind::Kind;
use crate::ir::region::{Expr, Pred};
use crate::poly::affine::expr::quasi_of_axis;
use std::collections::BTreeSet;

/// A column operand read in place (see the module doc).
#[derive(Clone, Debug)]
pub(super) struct Direct {
    /// The operand's value at one in-bounds point of its image, its reads re-indexed by the
    /// padded copy's variables `cdv<d>` (one per axis of the image): reads of region inputs of
    /// the image's shape through its index map ([`Direct::maps`]), and of tensors indexed by
    /// some of the image's axes (a per-channel bias `b[k]`), combined pointwise (a bare read,
    /// or a prologue such as `relu(t + x)` or `relu(t + b[k])`); the padded copy evaluates it
    /// once per image element.
    value: Expr,
    /// Per axis of the input: its index, affine over column iter and reduce axis names.
    maps: Vec<Quasi<i64, String>>,
    /// Per axis of the input: its size as C.
    dims: Vec<String>,
    /// The innermost column iter (`w`).
    w: usize,
    /// `w`'s coefficient in the image's last axis: the window's stride along a row (1 or 2).
    sw: i64,
    /// The column iter before it (`h`), if any, with its coefficient in the axis before the
    /// last (the stride between output rows).
    h: Option<(usize, i64)>,
    /// The other column iters, outermost first.
    outer: Vec<usize>,
}

/// `e` as an affine form over names with integer coefficients (variables only: no floors,
/// `min`, `max` or opaque atoms).
pub(super) fn affine(e: &AxisExpr) -> Option<Quasi<i64, String>> {
    let q = quasi_of_axis(e).ok()?;
    q.terms
        .keys()
        .all(|a| matches!(a, Atom::Var(_)))
        .then_some(q)
}

/// The coefficient of variable `n` in `q` (0 when absent).
pub(super) fn coef(q: &Quasi<i64, String>, n: &str) -> i64 {
    q.terms.get(&Atom::Var(n.to_string())).copied().unwrap_or(0)
}

/// The conjuncts of `p` (nested `And`s flattened); `None` for a disjunction.
fn conjuncts<'p>(p: &'p Pred, out: &mut Vec<&'p Pred>) -> Option<()> {
    match p {
        Pred::And(ps) => ps.iter().try_for_each(|q| conjuncts(q, out)),
        Pred::Or(_) => None,
        Pred::Cmp(..) => {
            out.push(p);
            Some(())
        }
    }
}

/// `a op b` as `L ≥ 0` (integers: `a > b` is `a − b − 1 ≥ 0`); `None` for `=` or a
/// non-affine side.
fn non_negative(op: CmpOp, a: &AxisExpr, b: &AxisExpr) -> Option<Quasi<i64, String>> {
    let (a, b) = (quasi_of_axis(a).ok()?, quasi_of_axis(b).ok()?);
    Some(match op {
        CmpOp::Ge => a.sub(&b),
        CmpOp::Gt => a.sub(&b).sub(&Quasi::int(1)),
        CmpOp::Le => b.sub(&a),
        CmpOp::Lt => b.sub(&a).sub(&Quasi::int(1)),
        CmpOp::Eq => return None,
    })
}

/// `Some` when every conjunct of guard `p` is a bound of one axis of an image read through
/// `maps` (`idx_d ≥ 0` or `idx_d ≤ size_d − 1`, in any spelling): the guard then only says
/// "inside the image", and a zero-padded copy of the image evaluates it.
pub(super) fn bounds_only(
    p: &Pred,
    maps: &[Quasi<i64, String>],
    shape: &[crate::ir::region::Size],
) -> Option<()> {
    let mut cs = Vec::new();
    conjuncts(p, &mut cs)?;
    for cj in cs {
        let Pred::Cmp(op, a, b) = cj else {
            return None;
        };
        let l = non_negative(*op, a, b)?;
        let bound = maps.iter().zip(shape).any(|(m, s)| {
            let upper = dim_to_expr(&s.0)
                .and_then(|e| quasi_of_axis(&e).ok())
                .map(|s| s.sub(&Quasi::int(1)).sub(m));
            &l == m || upper.as_ref() == Some(&l)
        });
        if !bound {
            return None;
        }
    }
    Some(())
}

/// `e` as a value under an optional guard, with the value it takes outside: `pred ? v : c` (a
/// constant `c`: a window's padding, 0 for a convolution, −∞ for a max pool) is
/// `(v, Some(pred), c)`, anything else `(e, None, 0)`.
pub(super) fn guarded_value(e: &Expr) -> (&Expr, Option<&Pred>, f64) {
    match e {
        Expr::Select {
            pred,
            then,
            otherwise,
        } => match **otherwise {
            Expr::Const(c) => (&**then, Some(pred), c),
            _ => (e, None, 0.0),
        },
        e => (e, None, 0.0),
    }
}

/// Collects the reads of `e` (tensor, index map) when `e` combines them pointwise: constants,
/// unary and binary ops, casts; `None` for anything else (a let, a select, a reduce, a gather).
pub(super) fn pointwise_reads<'e>(
    e: &'e Expr,
    out: &mut Vec<(&'e str, &'e [AxisExpr])>,
) -> Option<()> {
    match e {
        Expr::Read { tensor, map } => {
            out.push((tensor, map));
            Some(())
        }
        Expr::Const(_) => Some(()),
        Expr::Unary(_, x) | Expr::Cast { x, .. } => pointwise_reads(x, out),
        Expr::Binary(_, a, b) => {
            pointwise_reads(a, out)?;
            pointwise_reads(b, out)
        }
        _ => None,
    }
}

/// Per read: its tensor, its index map, and that map over the padded copy's variables.
pub(super) type Remap<'e> = Vec<(&'e str, &'e [AxisExpr], Vec<AxisExpr>)>;

/// `e` with each read's index map replaced by `remap`'s (tensor, old map) → new map.
pub(super) fn reindex(e: &Expr, remap: &Remap<'_>) -> Expr {
    let r = |x: &Expr| Box::new(reindex(x, remap));
    match e {
        Expr::Read { tensor, map } => Expr::Read {
            tensor: tensor.clone(),
            map: remap
                .iter()
                .find(|(t, m, _)| t == tensor && *m == map.as_slice())
                .map_or_else(|| map.clone(), |(_, _, n)| n.clone()),
        },
        Expr::Unary(f, x) => Expr::Unary(*f, r(x)),
        Expr::Cast { to, x } => Expr::Cast { to: *to, x: r(x) },
        Expr::Binary(f, a, b) => Expr::Binary(*f, r(a), r(b)),
        other => other.clone(),
    }
}

/// `Σ coefficient · C variable` as C (`0` when empty).
fn lin_c(terms: &[(i64, String)]) -> String {
    let parts: Vec<String> = terms
        .iter()
        .filter(|(k, _)| *k != 0)
        .map(|(k, v)| format!("{k} * {v}"))
        .collect();
    if parts.is_empty() {
        "0".into()
    } else {
        parts.join(" + ")
    }
}

/// `Σ_d cdp<d> · (Σ coefficient · C variable)` over the input's axes: the padded copy's offset
/// of the named iters or reduce axes (`vars`: name, C variable) with every other name at 0.
fn padded_offset(d: &Direct, vars: &[(String, String)]) -> String {
    let per_axis: Vec<String> = d
        .maps
        .iter()
        .enumerate()
        .map(|(k, q)| {
            let t: Vec<(i64, String)> = vars.iter().map(|(a, v)| (coef(q, a), v.clone())).collect();
            format!("cdp{k} * ({})", lin_c(&t))
        })
        .collect();
    per_axis.join(" + ")
}

impl Emitter<'_> {
    /// The direct form of contraction `c`'s column operand, when it has one (see the module
    /// doc); `axes`: the reduce axes with their extents as C.
    pub(super) fn direct_of(&self, c: &Contraction, axes: &[(String, String)]) -> Option<Direct> {
        if !c.batch.is_empty() {
            return None;
        }
        let (value, guard, pad) = guarded_value(&c.y);
        if pad.to_bits() != 0 {
            return None;
        }
        let mut reads = Vec::new();
        pointwise_reads(value, &mut reads)?;
        let &(tensor, map) = reads.first()?;
        let inp = self.r.input(tensor)?;
        if self.kind_of(value) != Kind::Float || self.params.contains(tensor) {
            return None;
        }
        let maps: Vec<Quasi<i64, String>> = map.iter().map(affine).collect::<Option<_>>()?;
        let remap = self.image_reads(&reads, &maps)?;
        let names = |is: &[usize]| -> Vec<String> {
            is.iter().map(|i| self.r.iters[*i].name.clone()).collect()
        };
        let cols = names(&c.cols);
        let reds: BTreeSet<&str> = axes.iter().map(|(a, _)| a.as_str()).collect();
        let known = |n: &str| cols.iter().any(|x| x == n) || reds.contains(n);
        let all_known = maps.iter().all(|q| {
            q.terms
                .keys()
                .all(|a| matches!(a, Atom::Var(n) if known(n)))
        });
        let (&w, rest) = c.cols.split_last()?;
        let last = maps.len().checked_sub(1)?;
        let wn = &self.r.iters[w].name;
        let sw = coef(&maps[last], wn);
        let w_ok = (1..=2).contains(&sw)
            && maps
                .iter()
                .enumerate()
                .all(|(d, q)| d == last || coef(q, wn) == 0);
        let has = |q: &Quasi<i64, String>, f: &dyn Fn(&str) -> bool| {
            q.terms.keys().any(|a| matches!(a, Atom::Var(n) if f(n)))
        };
        let window = |q: &Quasi<i64, String>| {
            has(q, &|n| cols.iter().any(|x| x == n)) && has(q, &|n| reds.contains(n))
        };
        // `h`: the column iter before `w` when it slides with a positive coefficient (the row
        // stride) along the axis before the last (an image row: virtual rows `P` = the padded
        // width times the stride apart); otherwise it is an outer iter (a batch of images, a
        // 1-D convolution's batch).
        let h = rest.last().copied().and_then(|h| {
            let hn = &self.r.iters[h].name;
            let sh = coef(maps.get(last.checked_sub(1)?)?, hn);
            (sh >= 1
                && window(&maps[last - 1])
                && maps
                    .iter()
                    .enumerate()
                    .all(|(d, q)| d + 1 == last || coef(q, hn) == 0))
            .then_some((h, sh))
        });
        if !(all_known && w_ok && maps.iter().any(window)) {
            return None;
        }
        if let Some(p) = guard {
            bounds_only(p, &maps, &inp.memref.shape)?;
        }
        Some(Direct {
            value: reindex(value, &remap),
            maps,
            dims: inp.memref.shape.iter().map(|s| self.dim(&s.0)).collect(),
            w,
            sw,
            h,
            outer: rest[..rest.len() - usize::from(h.is_some())].to_vec(),
        })
    }

    /// Per read of the operand (`reads[0]` the image, `maps` its index map as affine forms): its
    /// index map over the padded copy's variables `cdv<d>`. A read of a tensor of the image's
    /// shape through the image's map takes `cdv` whole; any other read (a per-channel bias
    /// `b[k]`, a scale `s[0, k, 0, 0]`) must index each of its axes by an integer or by exactly
    /// the image's index of some axis `d` of the same size (then `cdv<d>`). `None` otherwise.
    pub(super) fn image_reads<'e>(
        &self,
        reads: &[(&'e str, &'e [AxisExpr])],
        maps: &[Quasi<i64, String>],
    ) -> Option<Remap<'e>> {
        let (tensor, map) = reads[0];
        let shape = &self.r.input(tensor)?.memref.shape;
        let vars: Vec<AxisExpr> = (0..maps.len())
            .map(|d| AxisExpr::Name(format!("cdv{d}")))
            .collect();
        let mut out = Vec::new();
        for &(t, m) in reads {
            let s = &self.r.input(t)?.memref.shape;
            if m == map && s == shape {
                out.push((t, m, vars.clone()));
                continue;
            }
            let mut new = Vec::new();
            for (j, e) in m.iter().enumerate() {
                let q = affine(e)?;
                if q.terms.is_empty() {
                    new.push(AxisExpr::Const(q.konst));
                    continue;
                }
                let d = maps.iter().position(|p| *p == q)?;
                if s.get(j)? != &shape[d] {
                    return None;
                }
                new.push(vars[d].clone());
            }
            out.push((t, m, new));
        }
        Some(out)
    }

    /// The size of name `n` (a column iter or a reduce axis) as C.
    fn size_of(&self, n: &str, axes: &[(String, String)]) -> String {
        match self.r.iters.iter().position(|i| i.name == n) {
            Some(i) => Self::size_var(i),
            None => axes
                .iter()
                .find(|(a, _)| a == n)
                .map(|(_, e)| format!("({e})"))
                .unwrap_or_else(|| "1".into()),
        }
    }

    /// Before the contraction's parallel region: the padded copy's geometry (per axis `d`: its
    /// low padding `cdl<d>`, extent `cde<d>`, stride `cdp<d>`; the source strides `cds<d>`),
    /// the row pitch `cdP`, the virtual columns `cdV` of each of the `cdG` outer points, the
    /// buffers `cxp` (shared padded copy) and `ckoff` (the reduce points' offsets, filled here in
    /// the A pack's k order), and `cdok`.
    pub(super) fn emit_direct_setup(&mut self, d: &Direct, axes: &[(String, String)]) {
        let n = d.maps.len();
        self.line(
            "// direct convolution: the column operand read in place from a zero-padded copy",
        );
        for (k, q) in d.maps.iter().enumerate() {
            let (mut lo, mut hi) = (vec![q.konst.to_string()], vec![q.konst.to_string()]);
            for (a, c) in &q.terms {
                let Atom::Var(v) = a else { continue };
                let s = self.size_of(v, axes);
                let t = format!("{c} * ({s} - 1)");
                if *c < 0 {
                    lo.push(t);
                } else {
                    hi.push(t);
                }
            }
            let z = &d.dims[k];
            self.line(&format!(
                "const int64_t cdmn{k} = {}, cdmx{k} = {};",
                lo.join(" + "),
                hi.join(" + ")
            ));
            self.line(&format!(
                "const int64_t cdl{k} = cdmn{k} < 0 ? -cdmn{k} : 0, cde{k} = ({z}) + cdl{k} + (cdmx{k} > ({z}) - 1 ? cdmx{k} - (({z}) - 1) : 0);"
            ));
        }
        for k in (0..n).rev() {
            let (p, s) = if k + 1 == n {
                ("1".to_string(), "1".to_string())
            } else {
                (
                    format!("cdp{} * cde{}", k + 1, k + 1),
                    format!("cds{} * ({})", k + 1, d.dims[k + 1]),
                )
            };
            self.line(&format!("const int64_t cdp{k} = {p}, cds{k} = {s};"));
        }
        let pitch = match d.h {
            Some((_, sh)) => format!("{sh} * cdp{}", n - 2),
            None => format!("{} * {}", d.sw, Self::size_var(d.w)),
        };
        let hsize = d.h.map_or("1".to_string(), |(h, _)| Self::size_var(h));
        let base: Vec<String> = (0..n)
            .map(|k| format!("cdp{k} * ({} + cdl{k})", d.maps[k].konst))
            .collect();
        self.line(&format!(
            "const int64_t cdP = {pitch}, cdS = {}, cdW = {}, cdH = {hsize}, cdG = {}, cdb = {};",
            d.sw,
            Self::size_var(d.w),
            self.prod(&d.outer),
            base.join(" + ")
        ));
        self.line(&format!(
            "const int64_t cdR = {}, cdT = cdR * cde{};",
            (0..n - 1)
                .map(|k| format!("cde{k}"))
                .chain(std::iter::once("1".to_string()))
                .collect::<Vec<_>>()
                .join(" * "),
            n - 1
        ));
        // the slack after the copy: the tiles' positions past a row's end read up to
        // cdS * DLC_PX values beyond the last window
        self.line("float *cxp = (float *)dlc_scratch(6, 4 * (cdT + cdP + DLC_NR + 2 * DLC_PX));");
        self.line("int64_t *ckoff = (int64_t *)dlc_scratch(7, 8 * (cK > 0 ? cK : 1));");
        self.line("const int cdok = cxp && ckoff;");
        self.line("if (!cdok) dlc_err_flag(&dlc_err, 2);");
        self.line("if (cdok) {");
        self.indent += 1;
        self.line("int64_t ck = 0;");
        let mut vars = Vec::new();
        for (a, e) in axes {
            let v = self.fresh("r");
            self.line(&format!("for (int64_t {v} = 0; {v} < {e}; {v}++) {{"));
            self.indent += 1;
            vars.push((a.clone(), v));
        }
        self.line(&format!("ckoff[ck++] = {};", padded_offset(d, &vars)));
        self.close_loops(axes.len());
        self.indent -= 1;
        self.line("}");
    }

    /// Inside the parallel region: the zero-padded copy `cxp` (a worksharing loop over its rows,
    /// the slack after its end zeroed too; the loop's barrier ends it).
    pub(super) fn emit_direct_fill(&mut self, d: &Direct) -> Result<(), CpuError> {
        let n = d.maps.len();
        let l = n - 1;
        // the operand's value at source point (cs0, …, cs<l−1>, t): its reads are indexed by
        // the copy's own variables cdv<d>
        let mut scope: Scope = (0..n)
            .map(|k| {
                (
                    format!("cdv{k}"),
                    if k == l { "t".into() } else { format!("cs{k}") },
                )
            })
            .collect();
        let x = self.expr(&d.value, &mut scope)?;
        self.line("#pragma omp for schedule(static)");
        self.line("for (int64_t cq = 0; cq <= cdR; cq++) {");
        self.indent += 1;
        self.line(&format!("float *restrict cd = cxp + cq * cde{l};"));
        self.line(
            "if (cq == cdR) { for (int64_t t = 0; t < cdP + DLC_NR + 2 * DLC_PX; t++) cd[t] = 0.0f; continue; }",
        );
        self.line("int64_t cqq = cq; int cin = 1;");
        for k in (0..l).rev() {
            self.line(&format!(
                "const int64_t cs{k} = cqq % cde{k} - cdl{k}; cqq /= cde{k}; cin &= cs{k} >= 0 && cs{k} < ({});",
                d.dims[k]
            ));
        }
        self.line(&format!(
            "if (!cin) {{ for (int64_t t = 0; t < cde{l}; t++) cd[t] = 0.0f; continue; }}"
        ));
        self.line(&format!(
            "for (int64_t t = 0; t < cdl{l}; t++) cd[t] = 0.0f;"
        ));
        self.line("#pragma omp simd");
        self.line(&format!(
            "for (int64_t t = 0; t < ({}); t++) cd[cdl{l} + t] = {x};",
            d.dims[l]
        ));
        self.line(&format!(
            "for (int64_t t = cdl{l} + ({}); t < cde{l}; t++) cd[t] = 0.0f;",
            d.dims[l]
        ));
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// One work item's contraction in place (inside the item loop, `cw` the item, see
    /// [`Self::emit_direct_items`]): its outer point `cg`, output rows `[ch0, ch1)`, positions
    /// `[cc0, cc1)` of each and channels `[ci0, ci1)`; `dlc_conv_cv` into the thread's `cCt`
    /// (channel-major), then copied into `L<li>` (unless the block epilogue reads `cCt`
    /// directly: [`Emitter::direct_block`]); defines the columns `[cj0, cj1)` and rows
    /// `[ci0, ci1)` the block epilogue walks (contiguous: whole rows, or a chunk of one row).
    pub(super) fn emit_direct_item(&mut self, li: usize, d: &Direct) {
        for l in [
            "const int64_t cg = cw / (cdnh * cdnc * cMG), cwr = cw % (cdnh * cdnc * cMG);",
            "const int64_t ch0 = cwr / (cdnc * cMG) * cdri, ch1 = cdH - ch0 < cdri ? cdH : ch0 + cdri;",
            "const int64_t cc0 = cwr / cMG % cdnc * cdcw, cc1 = cdW - cc0 < cdcw ? cdW : cc0 + cdcw;",
            "const int64_t ci0 = cwr % cMG * cRG, ci1 = cM - ci0 < cRG ? cM : ci0 + cRG;",
            "int64_t cgq = cg;",
        ] {
            self.line(l);
        }
        self.decode("cgq", &d.outer);
        let outer: Vec<(String, String)> = d
            .outer
            .iter()
            .map(|o| (self.r.iters[*o].name.clone(), Self::iter_var(*o)))
            .collect();
        self.line(&format!(
            "dlc_conv_cv(cK, cA, cxp + cdb + {}, ckoff, cdP, cdS, ch0, ch1, cc0, cc1, cCt, cdq, ci0, ci1);",
            padded_offset(d, &outer)
        ));
        self.line("const int64_t cgr = cg * cdH * cdW;");
        self.line("const int64_t cj0 = cgr + ch0 * cdW + cc0, cj1 = cgr + (ch1 - 1) * cdW + cc1;");
        if self.fused_epilogue && self.gemm_out.is_none() {
            // the block epilogue reads the item's values where dlc_conv_cv left them
            let hpos = d.h.map_or(String::new(), |(h, _)| {
                format!("({} - ch0) * cdcwp + ", Self::iter_var(h))
            });
            let e = format!(
                "cCt[(cr - ci0) * cdq + {hpos}{} - cc0]",
                Self::iter_var(d.w)
            );
            self.direct_block = Some((li, e));
            return;
        }
        self.line("for (int64_t cr = ci0; cr < ci1; cr++) {");
        self.indent += 1;
        self.line("for (int64_t ch = ch0; ch < ch1; ch++) {");
        self.indent += 1;
        self.line("const float *restrict ctr = cCt + (cr - ci0) * cdq + (ch - ch0) * cdcwp - cc0;");
        self.line("const int64_t cjr = cgr + ch * cdW;");
        self.line("#pragma omp simd");
        if self.lets[li].inner.last() == Some(&d.w) {
            // w is the buffer's innermost axis: the row's positions are contiguous there
            self.line(&format!(
                "for (int64_t q = cc0; q < cc1; q++) L{li}[cro[cr] + cco[cjr] + q] = ctr[q];"
            ));
        } else {
            self.line(&format!(
                "for (int64_t q = cc0; q < cc1; q++) L{li}[cro[cr] + cco[cjr + q]] = ctr[q];"
            ));
        }
        self.indent -= 1;
        self.line("}");
        self.indent -= 1;
        self.line("}");
    }
}
