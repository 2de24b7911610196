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
//! the guarded loop). Staging reads the row contiguously (a strided row is then split by phase
//! with plain copies), and both vector loops run in blocks of [`STAGE_BLOCK`] points whose last
//! block overlaps the one before instead of leaving a scalar remainder (GCC 12 ran 8 of 56
//! points in scalar code, the prologue's NaN selects included: MobileNetV2's stride-2 3×3
//! depthwise convolution over 96×112² went 0.54 → 0.31 ms on two threads with both).
//! A rows-form work item of a whole plane (short rows, `emit.rs`) stages each image row once
//! ([`Plane`]), not once per output row and window row.
//!
//! A pooling window (`max`, `min` or `sum` whose body is the window itself, padded with its
//! own value: −∞ for ResNet's max pool) is staged the same way, padded with that value.
//!
//! Taken when: the reduce is an fp32 sum of a product of two float factors, or an fp32 sum, max
//! or min of one (the pooling window); one factor is a
//! pointwise function of reads (the image read, whose map mentions the vector iter, and others
//! indexed by the image's axis maps: a per-channel bias), bare or guarded by bounds of the
//! image; every image axis is affine; the vector iter appears only in the last axis, with a
//! coefficient of 1 to [`STENCIL_MAX_STRIDE`]; the reduce axes in the last axis (at least one
//! with more than one point) appear in no other and come after all others of more than one
//! point; and the staging pays — a stride above 1, a prologue or padding (a bare unguarded
//! stride-1 read already streams from the image).

use super::cvalue::{binary_float, fold, fold_elementwise, init_lit, to_dtype};
use super::direct::{affine, bounds_only, coef, guarded_value, pointwise_reads};
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

/// The points of one block of [`Emitter::emit_blocked`]'s vector loops (one AVX-512 vector,
/// two AVX2 ones).
const STAGE_BLOCK: i64 = 16;

/// The `dlc_scratch` slot of the staged rows (`gemm.h`).
const STENCIL_SLOT: usize = 8;

/// A window reduce to stage (see the module doc).
pub(super) struct Stencil {
    /// The window factor is the product's left operand.
    window_first: bool,
    /// The other factor (the weights), evaluated per tap; `None` when the window is the whole
    /// body (a pooling window: `max` or `sum` of the window itself).
    other: Option<Expr>,
    /// The value folded at points outside the image (the guard's other branch: 0 for a
    /// convolution, −∞ for a max pool).
    pad: f64,
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
    /// The reduce axes' extents when all are known and the window has at most
    /// [`STENCIL_MAX_TAPS`] points: the register form, which folds each output element from
    /// the reduce's init without reading the let's buffer (left uninitialized).
    pub(super) register: Option<Vec<i64>>,
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

/// A plane's staged image rows (the register form over inner iters `[m, n]`): the image row of
/// output row `m` and window row point `r` is `sh·m + Σ coefs·r + base`; rows `lo..lo + count`
/// (relative to `base`) are staged once per work item.
pub(super) struct Plane {
    /// The output row iter's name.
    m: String,
    /// Its coefficient in the image's row axis.
    sh: i64,
    /// Per window row axis, its coefficient there.
    coefs: Vec<i64>,
    /// The lowest row offset `Σ min(0, coef·(extent − 1))`.
    lo: i64,
    /// How many rows, as C.
    count: String,
}

impl Emitter<'_> {
    /// The staged form of interchanged reduce `red` over `inner` (the vector iter last), when
    /// it has one.
    pub(super) fn stencil_of(&self, red: &Reduce, inner: &[usize]) -> Option<Stencil> {
        if red.dtype != Some(DType::F32)
            || !matches!(red.op, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min)
        {
            return None;
        }
        if let Expr::Binary(BinaryFn::Mul, a, b) = &red.body {
            if red.op == ReduceOp::Sum && self.operands_kind(&[a, b]) == Kind::Float {
                // a convolution: the window times the weights, zero outside the image
                let product =
                    [(true, a, b), (false, b, a)]
                        .into_iter()
                        .find_map(|(first, win, other)| {
                            let s = self.window(red, inner, win)?;
                            (s.pad.to_bits() == 0).then(|| Stencil {
                                window_first: first,
                                other: Some((**other).clone()),
                                ..s
                            })
                        });
                if product.is_some() {
                    return product;
                }
            }
        }
        // a pooling window: the body is the window itself
        self.window(red, inner, &red.body)
    }

    /// The window factor `win` analysed (see the module doc); `window_first` and `other` are
    /// left for the caller.
    fn window(&self, red: &Reduce, inner: &[usize], win: &Expr) -> Option<Stencil> {
        let (&vi, rest) = inner.split_last()?;
        let vn = self.r.iters[vi].name.as_str();
        let (value, guard, pad) = guarded_value(win);
        let mut reads = Vec::new();
        pointwise_reads(value, &mut reads)?;
        let at = reads
            .iter()
            .position(|(_, m)| m.iter().any(|e| e.mentions(&|n| n == vn)))?;
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
        let register = ext
            .iter()
            .map(|e| e.parse::<i64>().ok())
            .collect::<Option<Vec<i64>>>()
            .filter(|c| (1..=STENCIL_MAX_TAPS).contains(&c.iter().product::<i64>()));
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
            other: None,
            pad,
            value: super::direct::reindex(value, &remap),
            rows: map[..l].to_vec(),
            last: maps[l].clone(),
            dims: inp.memref.shape.iter().map(|s| self.dim(&s.0)).collect(),
            stride,
            row_axes,
            col_axes,
            register,
        })
    }

    /// The plane form of the register form (see [`Plane`]), when the other inner iters are one
    /// output row iter `m` that, like the window's rows, moves only the image's row axis (the
    /// one before the last) and does not appear elsewhere; `c`: the reduce extents.
    fn plane_rows(&self, red: &Reduce, s: &Stencil, rest: &[usize], c: &[i64]) -> Option<Plane> {
        let [m] = rest else {
            return None;
        };
        let mn = &self.r.iters[*m].name;
        let qs: Vec<Quasi<i64, String>> = s.rows.iter().map(affine).collect::<Option<_>>()?;
        let (row, others) = qs.split_last()?;
        let sh = coef(row, mn);
        let names =
            || std::iter::once(mn.as_str()).chain(s.row_axes.iter().map(|&k| red.axes[k].as_str()));
        if sh < 1 || others.iter().any(|q| names().any(|n| coef(q, n) != 0)) {
            return None;
        }
        let coefs: Vec<i64> = s
            .row_axes
            .iter()
            .map(|&k| coef(row, &red.axes[k]))
            .collect();
        let reach = |neg: bool| -> i64 {
            coefs
                .iter()
                .zip(&s.row_axes)
                .map(|(k, &a)| k * (c[a] - 1))
                .filter(|t| (*t < 0) == neg)
                .sum()
        };
        let (lo, hi) = (reach(true), reach(false));
        Some(Plane {
            m: mn.clone(),
            sh,
            coefs,
            lo,
            count: format!("{sh} * ({} - 1) + {}", Self::size_var(*m), hi - lo + 1),
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

    /// The staged reduce `s` of let `li` (its buffer initialized to the reduce's init unless
    /// `s.register`; `ext`: the reduce axes' extents as C). Leaves `scope` as it was.
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
        // the rows staged at once: every point of the window's rows in the register form, or
        // every image row of the work item's plane
        let plane = s
            .register
            .as_ref()
            .and_then(|c| self.plane_rows(red, s, rest, c));
        let rows_at_once: String = match (&s.register, &plane) {
            (_, Some(p)) => format!("({})", p.count),
            (Some(c), None) => s
                .row_axes
                .iter()
                .map(|&k| c[k])
                .product::<i64>()
                .to_string(),
            _ => "1".into(),
        };
        self.note(format!(
            "the window's image rows staged once per row (stride {sw}): the operand evaluated once per element, {}",
            if s.register.is_some() {
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
        // the staged rows, then one raw row (a strided row before its split by phase)
        self.line(&format!(
            "float *restrict cst = (float *)dlc_scratch({STENCIL_SLOT}, 4 * ({rows_at_once} + 1) * {sw} * cst_J);"
        ));
        self.line("if (!cst) dlc_err_flag(&dlc_err, 2);");
        self.line("else {");
        self.indent += 1;
        self.line(&format!(
            "float *restrict cst_tmp = cst + {rows_at_once} * {sw} * cst_J; (void)cst_tmp;"
        ));
        let depth = scope.len();
        let w = Window {
            li,
            red,
            s,
            ext,
            cols: &cols,
            v: &v,
            z: &z,
            vn: &vn,
        };
        match &s.register {
            Some(c) => self.emit_taps_in_registers(&w, rest, c, plane.as_ref(), scope)?,
            None => self.emit_taps_outside(&w, rest, scope)?,
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

    /// The tap's product at the vector iter with the staged value `staged` (the staged value
    /// itself for a pooling window), and `acc ⊕` it; `register`: `acc` is the register of the
    /// register form.
    fn tap_fold(
        &mut self,
        w: &Window<'_>,
        acc: &str,
        staged: String,
        register: bool,
        scope: &mut Scope,
    ) -> Result<String, CpuError> {
        let prod = match &w.s.other {
            Some(o) => {
                let other = self.operand(o, Kind::Float, scope)?;
                let (x, y) = if w.s.window_first {
                    (staged, other)
                } else {
                    (other, staged)
                };
                binary_float(BinaryFn::Mul, &x, &y)
            }
            None => staged,
        };
        let prod = to_dtype(&prod, Kind::Float, DType::F32);
        // a register's fold across taps is elementwise (the reduction spelling of max became
        // scalar branches in the unrolled tap chain: ResNet's max pool 1.5 → 2.1 ms)
        Ok(if register {
            fold_elementwise(w.red.op, DType::F32, acc, &prod)
        } else {
            fold(w.red.op, DType::F32, acc, &prod)
        })
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
        w: &Window<'_>,
        rest: &[usize],
        scope: &mut Scope,
    ) -> Result<(), CpuError> {
        let sw = w.s.stride;
        let rows = self.open_taps(w, &w.s.row_axes.clone(), scope);
        self.open_loops(rest, false, false)?;
        self.line("float *restrict cst_row = cst;");
        self.emit_stage_row(w, scope, None)?;
        let col_axes = w.s.col_axes.clone();
        self.open_taps(w, &col_axes, scope);
        self.tap_offset(w, scope);
        self.line(&format!(
            "const float *restrict cstr = cst + (cst_d % {sw}) * cst_J + cst_d / {sw};"
        ));
        let t = self.let_ref(w.li, scope);
        let f = self.tap_fold(w, &t, format!("cstr[{}]", w.v), false, scope)?;
        if !self.has_gather {
            self.line("#pragma omp simd");
        }
        self.line(&format!(
            "for (int64_t {v} = 0; {v} < {z}; {v}++) {{",
            v = w.v,
            z = w.z
        ));
        self.indent += 1;
        self.line(&format!("{t} = {f};"));
        self.close_loops(1 + col_axes.len() + rest.len() + rows.len());
        Ok(())
    }

    /// The register form (a window of at most [`STENCIL_MAX_TAPS`] known points, extents
    /// `c`): per point of the other inner iters, every row of the window staged, then one
    /// vector loop whose element folds all taps in a register, in the reduce's order.
    fn emit_taps_in_registers(
        &mut self,
        w: &Window<'_>,
        rest: &[usize],
        c: &[i64],
        plane: Option<&Plane>,
        scope: &mut Scope,
    ) -> Result<(), CpuError> {
        let sw = w.s.stride;
        let row_axes = w.s.row_axes.clone();
        let row_index = |vars: &[String]| -> String {
            match plane {
                // the image row's place in the plane's staged rows
                Some(p) => {
                    let mut s = format!("{} * {} - ({})", p.sh, Self::iter_var(rest[0]), p.lo);
                    for (v, k) in vars.iter().zip(&p.coefs) {
                        s.push_str(&format!(" + {k} * {v}"));
                    }
                    s
                }
                None => {
                    let mut s = "0".to_string();
                    for (v, &k) in vars.iter().zip(&row_axes) {
                        s = format!("({s}) * {} + {v}", c[k]);
                    }
                    s
                }
            }
        };
        if let Some(p) = plane {
            // every image row of the plane once, before the plane's output rows
            self.line(&format!(
                "for (int64_t cst_q = 0; cst_q < {}; cst_q++) {{",
                p.count
            ));
            self.indent += 1;
            self.line(&format!(
                "float *restrict cst_row = cst + cst_q * {sw} * cst_J;"
            ));
            let mut at_zero = scope.clone();
            at_zero.push((p.m.clone(), "0".into()));
            for &k in &row_axes {
                at_zero.push((w.red.axes[k].clone(), "0".into()));
            }
            let shift = format!("({}) + cst_q", p.lo);
            self.emit_stage_row(w, &at_zero, Some(&shift))?;
            self.close_loops(1);
            self.open_loops(rest, false, false)?;
        } else {
            self.open_loops(rest, false, false)?;
            let vars = self.open_taps(w, &row_axes, scope);
            self.line(&format!(
                "float *restrict cst_row = cst + ({}) * {sw} * cst_J;",
                row_index(&vars)
            ));
            self.emit_stage_row(w, scope, None)?;
            self.close_loops(row_axes.len());
            scope.truncate(scope.len() - row_axes.len());
        }
        // each output element folds from the reduce's init (the buffer is only written): an
        // element computed twice by the overlapping last block gets the same value
        let init = init_lit(w.red.op, w.red.init, DType::F32);
        let (v, z) = (w.v.to_string(), w.z.to_string());
        let col_axes = w.s.col_axes.clone();
        self.emit_blocked(&v, "0", &z, &mut |em: &mut Self| {
            let t = em.let_ref(w.li, scope);
            em.line(&format!("float cst_a = {init};"));
            let vars = em.open_taps(w, &row_axes, scope);
            em.open_taps(w, &col_axes, scope);
            em.tap_offset(w, scope);
            let staged = format!(
                "cst[(({}) * {sw} + cst_d % {sw}) * cst_J + cst_d / {sw} + {v}]",
                row_index(&vars)
            );
            let f = em.tap_fold(w, "cst_a", staged, true, scope)?;
            em.line(&format!("cst_a = {f};"));
            em.close_loops(row_axes.len() + col_axes.len());
            scope.truncate(scope.len() - row_axes.len() - col_axes.len());
            em.line(&format!("{t} = cst_a;"));
            Ok(())
        })?;
        self.close_loops(rest.len());
        Ok(())
    }

    /// A vector loop of `var` over `[lo, hi)` running `body`: with at least [`STAGE_BLOCK`]
    /// points, blocks of that many points of constant trip count, the last one moved back to
    /// end at `hi` (it recomputes some points: `body` must be idempotent), so that no scalar
    /// remainder is left (GCC 12 runs an `omp simd` loop's remainder in scalar code: 8 of a
    /// 56-point row, each with the prologue's scalar NaN selects); shorter, one plain loop.
    fn emit_blocked(
        &mut self,
        var: &str,
        lo: &str,
        hi: &str,
        body: &mut dyn FnMut(&mut Self) -> Result<(), CpuError>,
    ) -> Result<(), CpuError> {
        let simd = !self.has_gather;
        let b = STAGE_BLOCK;
        self.line(&format!("if (({hi}) - ({lo}) >= {b}) {{"));
        self.indent += 1;
        self.line(&format!(
            "for (int64_t {var}_b = {lo}; {var}_b < ({hi}); {var}_b += {b}) {{"
        ));
        self.indent += 1;
        self.line(&format!(
            "const int64_t {var}_k = ({hi}) - {var}_b >= {b} ? {var}_b : ({hi}) - {b};"
        ));
        if simd {
            self.line("#pragma omp simd");
        }
        self.line(&format!(
            "for (int64_t {var}_l = 0; {var}_l < {b}; {var}_l++) {{"
        ));
        self.indent += 1;
        self.line(&format!("const int64_t {var} = {var}_k + {var}_l;"));
        body(self)?;
        self.close_loops(2);
        self.indent -= 1;
        self.line("} else {");
        self.indent += 1;
        if simd {
            self.line("#pragma omp simd");
        }
        self.line(&format!(
            "for (int64_t {var} = {lo}; {var} < ({hi}); {var}++) {{"
        ));
        self.indent += 1;
        body(self)?;
        self.close_loops(2);
        Ok(())
    }

    /// The staging of one image row into `cst_row` (phases `cst_p` of `cst_J` points each): the
    /// window operand where the row and the point lie inside the image, zero elsewhere. `shift`
    /// is added to the row axis' index (a plane's row `cst_q`).
    fn emit_stage_row(
        &mut self,
        w: &Window<'_>,
        scope: &Scope,
        shift: Option<&str>,
    ) -> Result<(), CpuError> {
        let (s, vn, cols) = (w.s, w.vn, w.cols);
        let l = s.rows.len();
        let sw = s.stride;
        let mut rows: Vec<String> = s.rows.iter().map(|e| self.axis(e, scope)).collect();
        if let (Some(q), Some(last)) = (shift, rows.last_mut()) {
            *last = format!("({last}) + {q}");
        }
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
        let pad = super::cvalue::constant(s.pad, Kind::Float);
        // the row's points u = 0 .. sw·J from cst_b, contiguous (a strided row is split by
        // phase afterwards, by plain copies): inside the image for u in [cst_u0, cst_u1)
        let raw = if sw == 1 { "cst_row" } else { "cst_tmp" };
        for line in [
            format!("const int64_t cst_n = {sw} * cst_J;"),
            "int64_t cst_u0 = dlc_imin(dlc_imax(-cst_b, 0), cst_n);".into(),
            format!("int64_t cst_u1 = dlc_imin(dlc_imax(({last}) - cst_b, cst_u0), cst_n);"),
            "if (!cst_in) cst_u0 = cst_u1 = 0;".into(),
            format!("float *restrict cstd = {raw};"),
            format!("for (int64_t cst_u = 0; cst_u < cst_u0; cst_u++) cstd[cst_u] = {pad};"),
        ] {
            self.line(&line);
        }
        let body = [
            "const int64_t cst_t = cst_b + cst_u;".to_string(),
            format!("cstd[cst_u] = {x};"),
        ];
        self.emit_blocked("cst_u", "cst_u0", "cst_u1", &mut |em: &mut Self| {
            body.iter().for_each(|l| em.line(l));
            Ok(())
        })?;
        self.line(&format!(
            "for (int64_t cst_u = cst_u1; cst_u < cst_n; cst_u++) cstd[cst_u] = {pad};"
        ));
        if sw > 1 {
            self.line(&format!(
                "for (int64_t cst_p = 0; cst_p < {sw}; cst_p++) {{"
            ));
            self.indent += 1;
            self.line("#pragma omp simd");
            self.line(&format!(
                "for (int64_t cst_j = 0; cst_j < cst_J; cst_j++) cst_row[cst_p * cst_J + cst_j] = cst_tmp[{sw} * cst_j + cst_p];"
            ));
            self.close_loops(1);
        }
        Ok(())
    }
}
