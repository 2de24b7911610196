//! An interchanged reduce over a sliding window, its image rows staged once per row.
//!
//! A depthwise convolution in rows form folds `Σ_k x(…, s·n + k − p) · w[k]` with the reduce
//! axes outside and the vector loop over the output column `n` inside. Read in place, each
//! window tap re-evaluates the image operand at `s·n + k − p`: MobileNetV2's prologue
//! `min(max(t + b, 0), 6)` once per tap (nine times per image element), under a padding guard
//! that depends on `n`, and for stride 2 as a strided load that GCC vectorizes with permutes
//! or gathers (the stride-2 3×3 depthwise convolution over 96×112² ran 1.43 ms on two threads,
//! 15 % of the network).
//!
//! Here, for each point of the reduce axes that do not move along the image's last axis (the
//! window's rows) and of the let's other inner iters, the image row the taps read is staged
//! into a thread buffer first: the operand evaluated once per element, zero outside the image
//! (the guard, which must only bound the image's axes), split by phase for a stride `s > 1`
//! (`buf[p·J + j]` holds row position `lo + s·j + p`). Each remaining tap `k` is then one
//! contiguous unguarded vector loop `acc[n] += buf[(d % s)·J + d / s + n] · w[k]` with
//! `d = off(k) − lo`. When the window has at most [`STENCIL_MAX_TAPS`] points of known extents
//! (3×3, 7×7), every row of the window is staged first and one vector loop folds all taps of
//! an output vector in a register (no read-modify-write of the accumulator row per tap: a
//! 14-point row took 9 masked load/store round trips). The same products fold in the same
//! order: the results are bit-identical to the loop it replaces (`emit_border.rs`'s split, or
//! the guarded loop).
//!
//! Taken when: the reduce is an fp32 sum of a product of two float factors; one factor is a
//! pointwise function of reads (the image read, whose map mentions the vector iter, and others
//! indexed by the image's axis maps: a per-channel bias), bare or guarded by bounds of the
//! image; every image axis is affine; the vector iter appears only in the last axis, with a
//! coefficient of 1 to [`STENCIL_MAX_STRIDE`]; the reduce axes in the last axis (at least one
//! with more than one point) appear in no other and come after all others of more than one
//! point; and the staging pays — a stride above 1, a prologue or padding (a bare unguarded
//! stride-1 read already streams from the image).

use super::cvalue::{binary_float, fold, to_dtype};
use super::direct::{affine, bounds_only, coef, pointwise_reads};
use super::emit::{Emitter, Scope};
use super::CpuError;
use crate::index::Quasi;
use crate::ir::axis::AxisExpr;
use crate::ir::dtype::DType;
use crate::ir::region::kind::Kind;
use crate::ir::region::{BinaryFn, Expr, Reduce};
use crate::ir::tiny::ReduceOp;

/// The largest window stride staged (the phases of a staged row).
pub(super) const STENCIL_MAX_STRIDE: i64 = 4;

/// The most window points folded in registers per output vector (all extents known).
pub(super) const STENCIL_MAX_TAPS: i64 = 64;

/// The `dlc_scratch` slot of the staged rows (`gemm.h`).
const STENCIL_SLOT: usize = 8;

/// A window reduce to stage (see the module doc).
pub(super) struct Stencil {
    /// The window factor is the product's left operand.
    window_first: bool,
    /// The other factor (the weights), evaluated per tap.
    other: Expr,
    /// The window operand at one image point, its reads re-indexed by `cdv<d>` per image axis.
    value: Expr,
    /// The image's index maps of every axis but the last.
    rows: Vec<AxisExpr>,
    /// The image's last-axis index as an affine form.
    last: Quasi<i64, String>,
    /// The image's sizes as C.
    dims: Vec<String>,
    /// The vector iter's coefficient in the last axis (the window's stride).
    stride: i64,
    /// The reduce axes (indices into the reduce's) that do not move along the last axis (the
    /// window's rows), in the reduce's order.
    row_axes: Vec<usize>,
    /// The reduce axes that do (the window's columns), in the reduce's order.
    col_axes: Vec<usize>,
}

/// One staged reduce being emitted: its let, the reduce, the analysis, the reduce axes'
/// extents as C, its column taps (axis, coefficient in the last axis, extent), the vector
/// iter's loop var, size and name.
struct Window<'w> {
    li: usize,
    red: &'w Reduce,
    s: &'w Stencil,
    ext: &'w [String],
    cols: &'w [(String, i64, String)],
    v: &'w str,
    z: &'w str,
    vn: &'w str,
}

fn mentions(e: &AxisExpr, v: &str) -> bool {
    let mut hit = false;
    e.for_each_name(&mut |x| hit |= x == v);
    hit
}

impl Emitter<'_> {
    /// The staged form of interchanged reduce `red` over `inner` (the vector iter last), when
    /// it has one.
    pub(super) fn stencil_of(&self, red: &Reduce, inner: &[usize]) -> Option<Stencil> {
        if red.op != ReduceOp::Sum || red.dtype != Some(DType::F32) {
            return None;
        }
        let Expr::Binary(BinaryFn::Mul, a, b) = &red.body else {
            return None;
        };
        if self.operands_kind(&[a, b]) != Kind::Float {
            return None;
        }
        [(true, a, b), (false, b, a)]
            .into_iter()
            .find_map(|(first, win, other)| {
                let s = self.window(red, inner, win)?;
                Some(Stencil {
                    window_first: first,
                    other: (**other).clone(),
                    ..s
                })
            })
    }

    /// The window factor `win` analysed (see the module doc); `window_first` and `other` are
    /// left for the caller.
    fn window(&self, red: &Reduce, inner: &[usize], win: &Expr) -> Option<Stencil> {
        let (&vi, rest) = inner.split_last()?;
        let vn = self.r.iters[vi].name.as_str();
        let (value, guard) = match win {
            Expr::Select {
                pred,
                then,
                otherwise,
            } if matches!(**otherwise, Expr::Const(z) if z.to_bits() == 0) => (&**then, Some(pred)),
            e => (e, None),
        };
        let mut reads = Vec::new();
        pointwise_reads(value, &mut reads)?;
        let at = reads
            .iter()
            .position(|(_, m)| m.iter().any(|e| mentions(e, vn)))?;
        let image = reads.remove(at);
        reads.insert(0, image);
        let (tensor, map) = image;
        let inp = self.r.input(tensor)?;
        if self.kind_of(value) != Kind::Float {
            return None;
        }
        let maps: Vec<Quasi<i64, String>> = map.iter().map(affine).collect::<Option<_>>()?;
        let l = maps.len().checked_sub(1)?;
        let stride = coef(&maps[l], vn);
        if !(1..=STENCIL_MAX_STRIDE).contains(&stride) || maps[..l].iter().any(|q| coef(q, vn) != 0)
        {
            return None;
        }
        // The window's rows fold outside its columns: the same points in the same order when
        // no column axis comes before a row axis (axes of one point go anywhere).
        let ext = self.extents(red).ok()?;
        let (col_axes, row_axes): (Vec<usize>, Vec<usize>) =
            (0..red.axes.len()).partition(|&k| coef(&maps[l], &red.axes[k]) != 0);
        let many = |k: &usize| ext[*k] != "1";
        let first_col = col_axes.iter().copied().find(many)?;
        let other_inner = rest.iter().map(|i| self.r.iters[*i].name.as_str());
        if row_axes.iter().any(|k| many(k) && *k > first_col)
            || col_axes
                .iter()
                .any(|k| maps[..l].iter().any(|q| coef(q, &red.axes[*k]) != 0))
            || other_inner.clone().any(|n| coef(&maps[l], n) != 0)
        {
            return None;
        }
        if stride == 1 && guard.is_none() && matches!(value, Expr::Read { .. }) {
            return None;
        }
        if let Some(p) = guard {
            bounds_only(p, &maps, &inp.memref.shape)?;
        }
        let remap = self.image_reads(&reads, &maps)?;
        Some(Stencil {
            window_first: true,
            other: Expr::Const(0.0),
            value: super::direct::reindex(value, &remap),
            rows: map[..l].to_vec(),
            last: maps[l].clone(),
            dims: inp.memref.shape.iter().map(|s| self.dim(&s.0)).collect(),
            stride,
            row_axes,
            col_axes,
        })
    }

    /// `Σ c·v` over `terms` (C variables of `scope`, or size symbols) plus `konst`, as C.
    fn affine_c(&self, konst: i64, terms: &[(String, i64)], scope: &Scope) -> String {
        let mut s = konst.to_string();
        for (n, c) in terms {
            let v = self.axis(&AxisExpr::Name(n.clone()), scope);
            s.push_str(&format!(" + {c} * {v}"));
        }
        s
    }

    /// The staged reduce `s` of let `li` (its accumulators already initialized; `ext`: the
    /// reduce axes' extents as C). Leaves `scope` as it was.
    pub(super) fn emit_stencil(
        &mut self,
        li: usize,
        red: &Reduce,
        inner: &[usize],
        s: &Stencil,
        ext: &[String],
        scope: &mut Scope,
    ) -> Result<(), CpuError> {
        let (&vi, rest) = inner.split_last().ok_or_else(|| CpuError::Codegen {
            region: self.r.name.clone(),
            why: "a staged window reduce without a vector iter".into(),
        })?;
        let (v, z, sw) = (Self::iter_var(vi), Self::size_var(vi), s.stride);
        let vn = self.r.iters[vi].name.clone();
        let cols: Vec<(String, i64, String)> = s
            .col_axes
            .iter()
            .map(|&k| {
                (
                    red.axes[k].clone(),
                    coef(&s.last, &red.axes[k]),
                    ext[k].clone(),
                )
            })
            .collect();
        let span = |neg: bool| -> String {
            let t: Vec<String> = cols
                .iter()
                .filter(|(_, c, _)| (*c < 0) == neg)
                .map(|(_, c, e)| format!("{c} * (({e}) - 1)"))
                .collect();
            if t.is_empty() {
                "0".into()
            } else {
                t.join(" + ")
            }
        };
        let consts: Option<Vec<i64>> = ext.iter().map(|e| e.parse::<i64>().ok()).collect();
        let taps = consts
            .as_ref()
            .map(|c| c.iter().product::<i64>())
            .filter(|t| (1..=STENCIL_MAX_TAPS).contains(t));
        // the rows staged at once: every point of the window's rows in the register form
        let rows_at_once: i64 = match (&consts, taps) {
            (Some(c), Some(_)) => s.row_axes.iter().map(|&k| c[k]).product(),
            _ => 1,
        };
        self.note(format!(
            "the window's image rows staged once per row (stride {sw}): the operand evaluated once per element, {}",
            if taps.is_some() {
                "all taps folded in registers per output vector"
            } else {
                "the taps unguarded contiguous vector loops"
            }
        ));
        self.line("{");
        self.indent += 1;
        self.line(&format!(
            "const int64_t cst_lo = {}, cst_J = {z} + ({} - cst_lo) / {sw};",
            span(true),
            span(false)
        ));
        self.line(&format!(
            "float *restrict cst = (float *)dlc_scratch({STENCIL_SLOT}, 4 * {rows_at_once} * {sw} * cst_J);"
        ));
        self.line("if (!cst) dlc_err_flag(&dlc_err, 2);");
        self.line("else {");
        self.indent += 1;
        let depth = scope.len();
        let mut w = Window {
            li,
            red,
            s,
            ext,
            cols: &cols,
            v: &v,
            z: &z,
            vn: &vn,
        };
        match consts.filter(|_| taps.is_some()) {
            Some(c) => self.emit_taps_in_registers(&mut w, rest, &c, scope)?,
            None => self.emit_taps_outside(&mut w, rest, scope)?,
        }
        scope.truncate(depth);
        self.indent -= 1;
        self.line("}");
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// Opens one loop per reduce axis `ks` of `w` (fresh vars bound in `scope`); returns the vars.
    fn open_taps(&mut self, w: &Window<'_>, ks: &[usize], scope: &mut Scope) -> Vec<String> {
        let mut vars = Vec::new();
        for &k in ks {
            let (a, e) = (&w.red.axes[k], &w.ext[k]);
            let r = self.fresh("r");
            self.line(&format!("for (int64_t {r} = 0; {r} < {e}; {r}++) {{"));
            self.indent += 1;
            scope.push((a.clone(), r.clone()));
            vars.push(r);
        }
        vars
    }

    /// The tap's product at the vector iter with the staged value `staged`, and `acc ⊕` it.
    fn tap_fold(
        &mut self,
        w: &Window<'_>,
        acc: &str,
        staged: String,
        scope: &mut Scope,
    ) -> Result<String, CpuError> {
        let other = self.operand(&w.s.other, Kind::Float, scope)?;
        let (x, y) = if w.s.window_first {
            (staged, other)
        } else {
            (other, staged)
        };
        let prod = to_dtype(
            &binary_float(BinaryFn::Mul, &x, &y),
            Kind::Float,
            DType::F32,
        );
        Ok(fold(w.red.op, DType::F32, acc, &prod))
    }

    /// `cst_d`: the column taps' offset in the staged row (bound in `scope`).
    fn tap_offset(&mut self, w: &Window<'_>, scope: &Scope) {
        let off: Vec<(String, i64)> = w.cols.iter().map(|(a, c, _)| (a.clone(), *c)).collect();
        self.line(&format!(
            "const int64_t cst_d = {} - cst_lo;",
            self.affine_c(0, &off, scope)
        ));
    }

    /// The general form: per point of the window's rows (and of the other inner iters) one
    /// staged row, then per column tap one vector loop folding into the let's buffer.
    fn emit_taps_outside(
        &mut self,
        w: &mut Window<'_>,
        rest: &[usize],
        scope: &mut Scope,
    ) -> Result<(), CpuError> {
        let sw = w.s.stride;
        let rows = self.open_taps(w, &w.s.row_axes.clone(), scope);
        self.open_loops(rest, false, false)?;
        self.line("float *restrict cst_row = cst;");
        self.emit_stage_row(w.s, w.vn, w.cols, scope)?;
        let col_axes = w.s.col_axes.clone();
        self.open_taps(w, &col_axes, scope);
        self.tap_offset(w, scope);
        self.line(&format!(
            "const float *restrict cstr = cst + (cst_d % {sw}) * cst_J + cst_d / {sw};"
        ));
        let f = self.tap_fold(
            w,
            &self.let_ref(w.li, scope),
            format!("cstr[{}]", w.v),
            scope,
        )?;
        if !self.has_gather {
            self.line("#pragma omp simd");
        }
        self.line(&format!(
            "for (int64_t {v} = 0; {v} < {z}; {v}++) {{",
            v = w.v,
            z = w.z
        ));
        self.indent += 1;
        let t = self.let_ref(w.li, scope);
        self.line(&format!("{t} = {f};"));
        self.close_loops(1 + col_axes.len() + rest.len() + rows.len());
        Ok(())
    }

    /// The register form (a window of at most [`STENCIL_MAX_TAPS`] known points, extents
    /// `c`): per point of the other inner iters, every row of the window staged, then one
    /// vector loop whose element folds all taps in a register, in the reduce's order.
    fn emit_taps_in_registers(
        &mut self,
        w: &mut Window<'_>,
        rest: &[usize],
        c: &[i64],
        scope: &mut Scope,
    ) -> Result<(), CpuError> {
        let sw = w.s.stride;
        self.open_loops(rest, false, false)?;
        let row_axes = w.s.row_axes.clone();
        let row_index = |vars: &[String]| -> String {
            let mut s = "0".to_string();
            for (v, &k) in vars.iter().zip(&row_axes) {
                s = format!("({s}) * {} + {v}", c[k]);
            }
            s
        };
        let vars = self.open_taps(w, &row_axes, scope);
        self.line(&format!(
            "float *restrict cst_row = cst + ({}) * {sw} * cst_J;",
            row_index(&vars)
        ));
        self.emit_stage_row(w.s, w.vn, w.cols, scope)?;
        self.close_loops(row_axes.len());
        scope.truncate(scope.len() - row_axes.len());
        if !self.has_gather {
            self.line("#pragma omp simd");
        }
        self.line(&format!(
            "for (int64_t {v} = 0; {v} < {z}; {v}++) {{",
            v = w.v,
            z = w.z
        ));
        self.indent += 1;
        let t = self.let_ref(w.li, scope);
        self.line(&format!("float cst_a = {t};"));
        let vars = self.open_taps(w, &row_axes, scope);
        let col_axes = w.s.col_axes.clone();
        self.open_taps(w, &col_axes, scope);
        self.tap_offset(w, scope);
        let staged = format!(
            "cst[(({}) * {sw} + cst_d % {sw}) * cst_J + cst_d / {sw} + {}]",
            row_index(&vars),
            w.v
        );
        let f = self.tap_fold(w, "cst_a", staged, scope)?;
        self.line(&format!("cst_a = {f};"));
        self.close_loops(row_axes.len() + col_axes.len());
        self.line(&format!("{t} = cst_a;"));
        self.close_loops(1 + rest.len());
        Ok(())
    }

    /// The staging of one image row into `cst_row` (phases `cst_p` of `cst_J` points each): the
    /// window operand where the row and the point lie inside the image, zero elsewhere.
    fn emit_stage_row(
        &mut self,
        s: &Stencil,
        vn: &str,
        cols: &[(String, i64, String)],
        scope: &Scope,
    ) -> Result<(), CpuError> {
        let l = s.rows.len();
        let sw = s.stride;
        let rows: Vec<String> = s.rows.iter().map(|e| self.axis(e, scope)).collect();
        let base: Vec<(String, i64)> = s
            .last
            .terms
            .iter()
            .filter_map(|(a, c)| match a {
                crate::index::Atom::Var(n) if n != vn && !cols.iter().any(|(x, _, _)| x == n) => {
                    Some((n.clone(), *c))
                }
                _ => None,
            })
            .collect();
        self.line(&format!(
            "const int64_t cst_b = {} + cst_lo;",
            self.affine_c(s.last.konst, &base, scope)
        ));
        let inside: Vec<String> = rows
            .iter()
            .zip(&s.dims)
            .map(|(r, d)| format!("({r}) >= 0 && ({r}) < ({d})"))
            .collect();
        let inside = if inside.is_empty() {
            "1".to_string()
        } else {
            inside.join(" && ")
        };
        self.line(&format!("const int cst_in = {inside};"));
        let mut vs: Scope = rows
            .iter()
            .enumerate()
            .map(|(d, r)| (format!("cdv{d}"), format!("({r})")))
            .collect();
        vs.push((format!("cdv{l}"), "cst_t".into()));
        let x = self.expr(&s.value, &mut vs)?;
        let last = &s.dims[l];
        self.line(&format!(
            "for (int64_t cst_p = 0; cst_p < {sw}; cst_p++) {{"
        ));
        self.indent += 1;
        for line in [
            "float *restrict cstd = cst_row + cst_p * cst_J;".to_string(),
            "const int64_t cst_o = cst_b + cst_p;".into(),
            format!("int64_t cst_j0 = dlc_imin(dlc_imax(-dlc_floordiv(cst_o, {sw}), 0), cst_J);"),
            format!(
                "int64_t cst_j1 = dlc_imin(dlc_imax(dlc_floordiv(({last}) - 1 - cst_o, {sw}) + 1, cst_j0), cst_J);"
            ),
            "if (!cst_in) cst_j0 = cst_j1 = 0;".into(),
            "for (int64_t cst_j = 0; cst_j < cst_j0; cst_j++) cstd[cst_j] = 0.0f;".into(),
            "#pragma omp simd".into(),
            "for (int64_t cst_j = cst_j0; cst_j < cst_j1; cst_j++) {".into(),
        ] {
            self.line(&line);
        }
        self.indent += 1;
        self.line(&format!("const int64_t cst_t = cst_o + {sw} * cst_j;"));
        self.line(&format!("cstd[cst_j] = {x};"));
        self.indent -= 1;
        self.line("}");
        self.line("for (int64_t cst_j = cst_j1; cst_j < cst_J; cst_j++) cstd[cst_j] = 0.0f;");
        self.indent -= 1;
        self.line("}");
        Ok(())
    }
}
