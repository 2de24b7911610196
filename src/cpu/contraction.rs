//! Contractions on the CPU: a region `let` that is `sum_R x·y` in fp32 (GEMM, batched GEMM,
//! a convolution as implicit GEMM: `x`, `y` any guarded reads of region inputs) is computed by
//! the packed, register-blocked micro-kernel of `gemm.h` instead of a loop nest. Its free iters
//! split into the iters only `x` reads (rows, `M`), only `y` reads (columns, `N`) and both
//! (batch); the reduce axes are `K`. Per batch point, `x` is packed into row panels and `y` into
//! column panels (an im2col for a convolution), and the micro-kernel writes the let's buffer
//! through per-row and per-column offsets, so any order of the free iters works.
//!
//! An operand that reads only constant parameters (the emitter's `params`: weights), of a
//! contraction without batch iters, is packed once and kept in a static buffer of the kernel
//! while the run's pack epoch (`dlc_epoch`, set per [`super::exec::run_loaded`]) stays the same:
//! a convolution's or a linear layer's weights are packed once per loaded program and inputs,
//! as onnxruntime pre-packs its initializers, not on every run.

use super::direct::Direct;
use super::emit::Emitter;
use super::CpuError;
use crate::ir::axis::AxisExpr;
use crate::ir::dtype::DType;
use crate::ir::region::{BinaryFn, Expr, Region};
use crate::ir::tiny::ReduceOp;
use std::collections::BTreeSet;

/// Marks the static buffers of kept packs in the C source (see [`super::program::NativeProgram::keeps_packs`]).
pub const KEPT_PACK: &str = "dlc_kept_";

/// The fewest rows (output channels) a direct convolution takes: its register tile is
/// `DLC_CR` (32 on AVX-512, 16 on AVX2) channels wide.
const DIRECT_MIN_ROWS: i64 = 16;

/// A let recognized as a contraction.
#[derive(Clone, Debug)]
pub struct Contraction {
    /// The row operand (reads only row iters and reduce axes).
    pub x: Expr,
    /// The column operand.
    pub y: Expr,
    /// Row iters (indices into the region's iters, ascending).
    pub rows: Vec<usize>,
    /// Column iters.
    pub cols: Vec<usize>,
    /// Batch iters (read by both operands).
    pub batch: Vec<usize>,
}

fn names(e: &Expr, out: &mut BTreeSet<String>, ok: &mut bool) {
    let mut add = |a: &AxisExpr| {
        a.for_each_name(&mut |n| {
            out.insert(n.to_string());
        })
    };
    super::emit::visit_expr(e, &mut |x| match x {
        Expr::Read { map, .. } => map.iter().for_each(&mut add),
        Expr::Select { pred, .. } => pred.for_each_expr(&mut add),
        Expr::Index(a) => add(a),
        Expr::Let(_) | Expr::Reduce(_) | Expr::Gather { .. } => *ok = false,
        _ => {}
    });
}

/// `let li` of `r` as a contraction, when it is one: a top-level fp32 `sum` (identity init) of a
/// product of two float operands that read only region inputs (no lets, reduces or gathers),
/// whose reduce axes do not shadow iters. `float_kind(e)` says whether `e` is a float value.
pub fn recognize(
    r: &Region,
    li: usize,
    free: &[usize],
    float_kind: &dyn Fn(&Expr) -> bool,
) -> Option<Contraction> {
    let Expr::Reduce(red) = &r.lets[li].expr else {
        return None;
    };
    if red.op != ReduceOp::Sum || red.dtype != Some(DType::F32) {
        return None;
    }
    if red.init.is_some_and(|v| v != 0.0) {
        return None;
    }
    if red
        .axes
        .iter()
        .any(|a| r.iters.iter().any(|i| &i.name == a))
    {
        return None;
    }
    let Expr::Binary(BinaryFn::Mul, x, y) = &red.body else {
        return None;
    };
    if !float_kind(x) || !float_kind(y) {
        return None;
    }
    let (mut nx, mut ny, mut ok) = (BTreeSet::new(), BTreeSet::new(), true);
    names(x, &mut nx, &mut ok);
    names(y, &mut ny, &mut ok);
    if !ok {
        return None;
    }
    let mut c = Contraction {
        x: (**x).clone(),
        y: (**y).clone(),
        rows: Vec::new(),
        cols: Vec::new(),
        batch: Vec::new(),
    };
    for i in free {
        let n = &r.iters[*i].name;
        match (nx.contains(n), ny.contains(n)) {
            (true, true) => c.batch.push(*i),
            (true, false) => c.rows.push(*i),
            (false, true) => c.cols.push(*i),
            (false, false) => return None,
        }
    }
    // A batched matrix-vector product (a depthwise convolution: batch = channels, no column
    // iters): per batch point the packed tile would be one column of 16; the rows form runs it
    // as an interchanged reduce with the vector loop over the output row.
    if !c.batch.is_empty() && (c.rows.is_empty() || c.cols.is_empty()) {
        return None;
    }
    Some(c)
}

/// Whether `c`'s index arrays (its points' iter values and buffer offsets) are kept between
/// calls: a contraction without batch iters, whose arrays depend only on the sizes.
fn keep_ix(c: &Contraction) -> bool {
    c.batch.is_empty()
}

impl Emitter<'_> {
    /// `Σ var·stride` of `iters` in let `li`'s buffer (loop vars `i<k>`).
    pub(super) fn offset_in(&self, li: usize, iters: &[usize]) -> String {
        let inner = &self.lets[li].inner;
        let mut terms = vec!["0".to_string()];
        for i in iters {
            let Some(p) = inner.iter().position(|x| x == i) else {
                continue;
            };
            let mut t = Self::iter_var(*i);
            for later in &inner[p + 1..] {
                t = format!("{t} * {}", Self::size_var(*later));
            }
            terms.push(t);
        }
        terms.join(" + ")
    }

    /// Whether `e` reads at least one input and only inputs that are constant parameters.
    fn reads_only_params(&self, e: &Expr) -> bool {
        let (mut any, mut all) = (false, true);
        super::emit::visit_expr(e, &mut |x| {
            if let Expr::Read { tensor, .. } = x {
                any = true;
                all &= self.params.contains(tensor);
            }
        });
        any && all
    }

    /// Decodes flat index `q` (a C variable, consumed) into the loop vars of `iters`.
    pub(super) fn decode(&mut self, q: &str, iters: &[usize]) {
        for i in iters.iter().rev() {
            self.line(&format!(
                "const int64_t {v} = {q} % {z}; {q} /= {z};",
                v = Self::iter_var(*i),
                z = Self::size_var(*i)
            ));
        }
        self.line(&format!("(void){q};"));
    }

    pub(super) fn prod(&self, iters: &[usize]) -> String {
        let v: Vec<String> = iters.iter().map(|i| Self::size_var(*i)).collect();
        if v.is_empty() {
            "1".into()
        } else {
            v.join(" * ")
        }
    }

    /// The points of `iters` (flattened, `count` of them; `[pv, off, count]` name C variables):
    /// their iter values into `pv`
    /// (`pv[t * count + ci]` for iter `t`) and their offsets in let `li`'s buffer (plus `plus`)
    /// into `off`. `ws`: a worksharing loop of the enclosing parallel region (no barrier).
    fn emit_points(
        &mut self,
        li: usize,
        [pv, off, count]: [&str; 3],
        iters: &[usize],
        plus: &str,
        ws: bool,
    ) {
        if ws {
            self.line("#pragma omp for schedule(static) nowait");
        }
        self.line(&format!("for (int64_t ci = 0; ci < {count}; ci++) {{"));
        self.indent += 1;
        self.line("int64_t cq = ci;");
        self.decode("cq", iters);
        for (t, i) in iters.iter().enumerate() {
            self.line(&format!(
                "{pv}[{t} * {count} + ci] = {};",
                Self::iter_var(*i)
            ));
        }
        let o = self.offset_in(li, iters);
        self.line(&format!("{off}[ci] = {o} + {plus};"));
        self.indent -= 1;
        self.line("}");
    }

    /// Packs one operand of a contraction: `dst` panels of `width` (`DLC_MR`/`DLC_NR`) over
    /// `count` points of `iters` (their values in `pv`, see [`Self::emit_points`]), `K` values
    /// each from `e` over the reduce axes, padded with zeros past `count`. Panel by panel, k by
    /// k, lane by lane: consecutive points read consecutive addresses of a row-major operand
    /// (`B[k, j]` by rows, an im2col by image rows). `ws`: the panels are a worksharing loop.
    /// The lane loop is a SIMD loop whose guarded loads (an im2col's padding) are clamped
    /// ([`Emitter::clamp_guards`]): gathers, 1.9 → 0.8 ms per thread for the 3×3 64→64 56² pack
    /// (gcc 12, Zen 4).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit_pack(
        &mut self,
        dst: &str,
        width: &str,
        count: &str,
        iters: &[usize],
        pv: &str,
        e: &Expr,
        axes: &[(String, String)],
        ws: bool,
    ) -> Result<(), CpuError> {
        self.line("{");
        self.indent += 1;
        self.line(&format!(
            "const int64_t cnp = ({count} + {width} - 1) / {width};"
        ));
        if ws {
            self.line("#pragma omp for schedule(static) nowait");
        }
        self.line("for (int64_t cp = 0; cp < cnp; cp++) {");
        self.indent += 1;
        self.line(&format!("float *dst = {dst} + cp * cK * {width};"));
        self.line(&format!(
            "const int64_t cl0 = cp * {width}, clw = {count} - cl0 < {width} ? {count} - cl0 : {width};"
        ));
        self.line("int64_t ck = 0;");
        let mut scope = self.base_scope();
        for (a, e) in axes {
            let v = self.fresh("r");
            self.line(&format!("for (int64_t {v} = 0; {v} < {e}; {v}++) {{"));
            self.indent += 1;
            scope.push((a.clone(), v));
        }
        // Lanes are independent (the operand reads region inputs only): a SIMD loop, its guarded
        // loads clamped so that the non-affine addresses become gathers.
        self.line("#pragma omp simd");
        self.line("for (int64_t cl = 0; cl < clw; cl++) {");
        self.indent += 1;
        for (t, i) in iters.iter().enumerate() {
            let v = Self::iter_var(*i);
            self.line(&format!(
                "const int64_t {v} = {pv}[{t} * {count} + cl0 + cl]; (void){v};"
            ));
        }
        self.clamp_guards = true;
        let x = self.expr(e, &mut scope);
        self.clamp_guards = false;
        let x = x?;
        self.line(&format!("dst[ck * {width} + cl] = {x};"));
        self.indent -= 1;
        self.line("}");
        self.line(&format!(
            "for (int64_t cl = clw; cl < {width}; cl++) dst[ck * {width} + cl] = 0.0f;"
        ));
        self.line("ck++;");
        self.close_loops(axes.len());
        self.indent -= 1;
        self.line("}");
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// One batch point `cb` of a contraction: index arrays, the row operand's pack (and a kept
    /// column operand's), then the work items ([`Self::emit_items`]). `ws`: run by every thread
    /// of a parallel region (the loops are shared, two barriers), else by one. `keep[s]`:
    /// operand `s` (0: rows, 1: columns) is a kept pack, packed only when `c{A,Bp}_kept` is
    /// false; a column operand that is not kept is packed per work item. `kept_ix`: the index
    /// arrays are kept ([`keep_ix`]), computed only when `cix_kept` is false. `direct`: the
    /// column operand is read in place ([`super::direct`]).
    #[allow(clippy::too_many_arguments)]
    fn emit_batch_point(
        &mut self,
        li: usize,
        c: &Contraction,
        axes: &[(String, String)],
        ws: bool,
        keep: [bool; 2],
        kept_ix: bool,
        direct: Option<&Direct>,
    ) -> Result<(), CpuError> {
        self.line("int64_t cbq = cb;");
        self.decode("cbq", &c.batch);
        let boff = self.offset_in(li, &c.batch);
        // Kept index arrays (a contraction without batch iters, see `emit_scratch`) are
        // computed by the first call of the epoch only; the barriers after them and after the
        // kept packs are skipped with them (every thread takes the same branch).
        if kept_ix {
            self.line("if (!cix_kept) {");
            self.indent += 1;
        }
        self.emit_points(li, ["cpa", "cro", "cM"], &c.rows, &boff, ws);
        self.emit_points(li, ["cpb", "cco", "cN"], &c.cols, "0", ws);
        if ws {
            self.line("#pragma omp barrier");
        }
        if kept_ix {
            self.indent -= 1;
            self.line("}");
        }
        if keep[0] {
            self.line("if (!cA_kept)");
        }
        let aw = if direct.is_some() { "DLC_CR" } else { "DLC_MR" };
        self.emit_pack("cA", aw, "cM", &c.rows, "cpa", &c.x, axes, ws)?;
        if keep[1] {
            self.line("if (!cBp_kept)");
            self.emit_pack("cBp", "DLC_NR", "cN", &c.cols, "cpb", &c.y, axes, ws)?;
        }
        if ws {
            // A row operand that is not kept is packed on every call (a column operand that is
            // not kept, per work item: no barrier).
            let cond = match keep {
                [true, true] => "if (!cA_kept || !cBp_kept) ",
                [true, false] => "if (!cA_kept) ",
                [false, _] => "",
            };
            if cond.is_empty() {
                self.line("#pragma omp barrier");
            } else {
                self.line(&format!("{cond}{{"));
                self.indent += 1;
                self.line("#pragma omp barrier");
                self.indent -= 1;
                self.line("}");
            }
        }
        // One batch point (no batch iters): the end of the parallel region is the items' barrier.
        self.emit_items(li, c, axes, ws, keep[1], kept_ix, direct)
    }

    /// Scratch buffers of a contraction (`dlc_scratch`, per thread) and `cok`; a kept operand
    /// (`keep`, see [`Self::emit_batch_point`]) gets the kernel's static buffer instead, and
    /// `c{A,Bp}_kept` says whether it holds this epoch's pack.
    fn emit_scratch(
        &mut self,
        li: usize,
        nrows: usize,
        ncols: usize,
        keep: [bool; 2],
        ix_kept: bool,
        aw: &str,
    ) {
        let sides = [("cA", aw, "cM", 0), ("cBp", "DLC_NR", "cN", 1)];
        for ((v, w, n, slot), kept) in sides.into_iter().zip(keep) {
            let bytes = format!("4 * (({n} + {w} - 1) / {w}) * {w} * cK");
            if !kept && slot == 1 {
                // packed per work item, in the thread's block buffer (`cBw`)
                self.line("float *cBp = NULL; (void)cBp;");
                continue;
            }
            if !kept {
                self.line(&format!(
                    "float *{v} = (float *)dlc_scratch({slot}, {bytes});"
                ));
                continue;
            }
            let s = format!("{KEPT_PACK}{li}_{slot}");
            self.line(&format!(
                "static float *{s}; static int64_t {s}_cap, {s}_ep = -1, {s}_n = -1, {s}_k = -1;"
            ));
            self.line(&format!(
                "const int {v}_kept = {s} && {s}_ep == dlc_epoch && {s}_n == {n} && {s}_k == cK;"
            ));
            self.line(&format!("if (!{v}_kept) {{"));
            self.indent += 1;
            self.line(&format!("const int64_t cbytes = {bytes};"));
            self.line(&format!("{s}_ep = -1;"));
            self.line(&format!(
                "if (cbytes > {s}_cap || !{s}) {{ free({s}); {s} = (float *)dlc_alloc(cbytes < 64 ? 64 : cbytes); {s}_cap = {s} ? cbytes : 0; }}"
            ));
            self.indent -= 1;
            self.line("}");
            self.line(&format!("float *{v} = {s};"));
        }
        if ix_kept {
            let s = format!("{KEPT_PACK}{li}_ix");
            self.line(&format!(
                "static int64_t *{s}; static int64_t {s}_cap, {s}_ep = -1, {s}_m = -1, {s}_n = -1;"
            ));
            self.line(&format!(
                "const int cix_kept = {s} && {s}_ep == dlc_epoch && {s}_m == cM && {s}_n == cN;"
            ));
            self.line("if (!cix_kept) {");
            self.indent += 1;
            self.line(&format!(
                "const int64_t cbytes = 8 * (cM * {} + cN * {});",
                nrows + 1,
                ncols + 1
            ));
            self.line(&format!("{s}_ep = -1;"));
            self.line(&format!(
                "if (cbytes > {s}_cap || !{s}) {{ free({s}); {s} = (int64_t *)dlc_alloc(cbytes < 64 ? 64 : cbytes); {s}_cap = {s} ? cbytes : 0; }}"
            ));
            self.indent -= 1;
            self.line("}");
            self.line(&format!(
                "int64_t *cro = {s}, *cco = {s} ? {s} + cM : NULL, *cpa = {s} ? {s} + cM + cN : NULL, *cpb = {s} ? {s} + cM * {} + cN : NULL;",
                nrows + 1
            ));
        } else {
            self.line("int64_t *cro = (int64_t *)dlc_scratch(2, 8 * cM), *cco = (int64_t *)dlc_scratch(3, 8 * cN);");
            self.line(&format!(
                "int64_t *cpa = (int64_t *)dlc_scratch(4, 8 * cM * {nrows}), *cpb = (int64_t *)dlc_scratch(5, 8 * cN * {ncols});"
            ));
        }
        let bp = if keep[1] { "cBp && " } else { "" };
        self.line(&format!(
            "const int cok = cA && {bp}cro && cco && cpa && cpb;"
        ));
        self.line("if (!cok) dlc_err_flag(&dlc_err, 2);");
    }

    /// Whether `c` has fewer rows than [`DIRECT_MIN_ROWS`] (sizes known at emission): the
    /// direct convolution's channel vectors would be mostly padding, so it keeps the packed
    /// path (row panels of `DLC_MR`).
    fn few_rows(&self, c: &Contraction) -> bool {
        let none = std::collections::BTreeMap::new();
        let m: Option<i64> = c.rows.iter().try_fold(1i64, |acc, i| {
            self.checked.iter_sizes[*i]
                .eval_with(&none)
                .ok()
                .map(|v| acc.saturating_mul(v))
        });
        m.is_some_and(|m| m < DIRECT_MIN_ROWS)
    }

    /// Let `li`'s contraction with its operands oriented: the operand whose iters include the
    /// buffer's innermost one is the column (vector) side.
    pub(super) fn oriented(&self, li: usize) -> Option<Contraction> {
        let mut c = self.lets[li].gemm.clone()?;
        if self.lets[li]
            .inner
            .last()
            .is_some_and(|i| c.rows.contains(i))
        {
            // x·y = y·x exactly in IEEE arithmetic: the swap keeps the reference's rounding.
            std::mem::swap(&mut c.x, &mut c.y);
            std::mem::swap(&mut c.rows, &mut c.cols);
        }
        Some(c)
    }

    /// The contraction of let `li` (recognized by [`recognize`]) into its buffer `L<li>`: per
    /// batch point, both operands packed and `dlc_gemm` (`gemm.h`) run. The operand whose
    /// iters include the buffer's innermost one becomes the column (vector) side, so that tiles
    /// store whole vectors (a convolution's output pixels, not its channels). With at least
    /// as many batch points as threads, the threads take whole batch points (attention's heads),
    /// each with its own buffers; else all threads share every batch point's loops inside one
    /// parallel region.
    /// The notes of a contraction: its GEMM view, which operands are kept packs, whether the
    /// region's epilogue runs on its hot blocks.
    fn note_contraction(&mut self, c: &Contraction, keep: [bool; 2], direct: bool) {
        let batch = if c.batch.is_empty() {
            String::new()
        } else {
            " per batch point (threads over the batch when it has at least as many points)"
                .to_string()
        };
        if direct {
            self.note("direct convolution: the weights packed in channel panels, the image read in place from a zero-padded copy (no im2col), channel-vector register tiles (dlc_conv_cv)");
        } else {
            self.note(format!(
                "packed GEMM{batch}: A packed in row panels, B packed per column block, the gemm.h register tile"
            ));
        }
        for (slot, what) in [(0, "row"), (1, "column")] {
            if keep[slot] {
                self.note(format!(
                    "the {what} operand (weights) packed once per loaded program and kept"
                ));
            }
        }
        if self.fused_epilogue && self.gemm_out.is_none() {
            self.note("the pointwise epilogue applied to each work item's block while it is hot");
        }
    }

    pub(super) fn emit_contraction(&mut self, li: usize) -> Result<(), CpuError> {
        let Some(c) = self.oriented(li) else {
            return Ok(());
        };
        let Expr::Reduce(red) = &self.r.lets[li].expr else {
            return Ok(());
        };
        let red = red.clone();
        let ext = self.extents(&red)?;
        let axes: Vec<(String, String)> =
            red.axes.iter().cloned().zip(ext.iter().cloned()).collect();
        self.line(&format!(
            "// contraction `{}`: packed GEMM",
            self.r.lets[li].name
        ));
        self.line("{");
        self.indent += 1;
        let (m, n, b) = (self.prod(&c.rows), self.prod(&c.cols), self.prod(&c.batch));
        let k = if ext.is_empty() {
            "1".to_string()
        } else {
            ext.join(" * ")
        };
        self.line(&format!(
            "const int64_t cM = {m}, cN = {n}, cK = {k}, cB = {b};"
        ));
        self.line("if (dlc_nt > 1 && cB >= dlc_nt) {");
        self.indent += 1;
        self.line("#pragma omp parallel num_threads(dlc_nt)");
        self.line("{");
        self.indent += 1;
        self.emit_scratch(li, c.rows.len(), c.cols.len(), [false; 2], false, "DLC_MR");
        self.line("#pragma omp for schedule(static)");
        self.line("for (int64_t cb = 0; cb < cB; cb++) {");
        self.indent += 1;
        self.line("if (!cok) continue;");
        self.emit_batch_point(li, &c, &axes, false, [false; 2], false, None)?;
        self.close_loops(2);
        self.indent -= 1;
        self.line("} else {");
        self.indent += 1;
        let keep = [
            c.batch.is_empty() && self.reads_only_params(&c.x),
            c.batch.is_empty() && self.reads_only_params(&c.y),
        ];
        let direct = if keep[1] || self.few_rows(&c) {
            None
        } else {
            self.direct_of(&c, &axes)
        };
        self.note_contraction(&c, keep, direct.is_some());
        let aw = if direct.is_some() { "DLC_CR" } else { "DLC_MR" };
        self.emit_scratch(li, c.rows.len(), c.cols.len(), keep, keep_ix(&c), aw);
        if let Some(d) = &direct {
            self.emit_direct_setup(d, &axes);
            self.line("if (cok && cdok) {");
        } else {
            self.line("if (cok) {");
        }
        self.indent += 1;
        self.line(
            "#pragma omp parallel num_threads(dlc_nt) if(dlc_nt > 1 && cM * cN * cK >= 65536)",
        );
        self.line("for (int64_t cb = 0; cb < cB; cb++) {");
        self.indent += 1;
        self.emit_batch_point(li, &c, &axes, true, keep, keep_ix(&c), direct.as_ref())?;
        self.close_loops(1);
        if keep_ix(&c) {
            let s = format!("{KEPT_PACK}{li}_ix");
            self.line(&format!(
                "if (!dlc_err) {{ {s}_ep = dlc_epoch; {s}_m = cM; {s}_n = cN; }}"
            ));
        }
        for (slot, n) in [(0, "cM"), (1, "cN")] {
            if keep[slot] {
                let s = format!("{KEPT_PACK}{li}_{slot}");
                self.line(&format!(
                    "if (!dlc_err) {{ {s}_ep = dlc_epoch; {s}_n = {n}; {s}_k = cK; }}"
                ));
            }
        }
        self.close_loops(2);
        self.indent -= 1;
        self.line("}");
        Ok(())
    }
}
