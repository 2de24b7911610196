//! The work items of a contraction ([`super::contraction`]): column blocks by row groups
//! (`dlc_gemm_plan` in `gemm.h`), each packing its block of the column operand into the
//! thread's buffer and running the micro-kernel over it, then — when the region's other lets
//! are pointwise — the region's epilogue (bias, activation, residual, the stores of its
//! outputs) on the item's block of the result while it is still in the thread's cache, instead
//! of a second pass over the whole result.
//!
//! Both the block pack and the block epilogue walk the item's column points in *runs*: a run
//! is a stretch of consecutive points along which only the innermost column iter moves (by 1),
//! so the loop over a run is a SIMD loop with affine addresses (an im2col copies contiguous
//! image rows, its padding guard a masked load) instead of per-lane index loads and gathers.

use super::contraction::Contraction;
use super::cvalue::{kind_type, widen};
use super::direct::Direct;
use super::emit::Emitter;
use super::CpuError;
use std::collections::BTreeSet;

impl Emitter<'_> {
    /// Whether let `li`'s contraction takes the region's epilogue on its hot blocks: it is the
    /// region's only contraction, every other let is pointwise (no reduce, scan or gather), and
    /// the innermost iter of the region is the innermost column iter (the runs' SIMD axis).
    pub(super) fn block_epilogue_ok(&self, li: usize) -> bool {
        let n = self.r.iters.len();
        let gemms = self.lets.iter().filter(|l| l.gemm.is_some()).count();
        let pointwise = self
            .lets
            .iter()
            .enumerate()
            .all(|(g, l)| g == li || (l.gemm.is_none() && !l.has_reduce));
        let yields_from_lets = self
            .r
            .yields
            .iter()
            .all(|y| self.r.lets.iter().any(|l| l.name == y.from))
            && self
                .r
                .yields
                .iter()
                .all(|y| self.r.outputs.iter().any(|o| o.name == y.to));
        let innermost = self
            .oriented(li)
            .is_some_and(|c| n > 0 && c.cols.last() == Some(&(n - 1)));
        gemms == 1 && pointwise && yields_from_lets && innermost && !self.has_gather
    }

    /// The work items of let `li`'s contraction `c` (after its packs): per item, the column
    /// operand's block packed `[K][ldb]` into the thread's `cBw` (unless `keep_b`: the kept
    /// whole-K panels `cBp` are read in place), `dlc_gemm_rows`, and the block epilogue when
    /// `fused_epilogue` is set. `ws`: the items are a worksharing loop; `last`: the last
    /// worksharing loop of its parallel region (no barrier of its own). `direct`: the column
    /// operand is read in place from a padded copy ([`super::direct`]; only with `ws`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit_items(
        &mut self,
        li: usize,
        c: &Contraction,
        axes: &[(String, String)],
        ws: bool,
        keep_b: bool,
        last: bool,
        direct: Option<&Direct>,
    ) -> Result<(), CpuError> {
        self.line("{");
        self.indent += 1;
        let nt = if ws { "omp_get_num_threads()" } else { "1" };
        if let Some(d) = direct {
            return self.emit_direct_items(li, c, d, nt, last);
        }
        self.line(&format!(
            "int64_t cNC, cMG, cRG; dlc_gemm_plan(cM, cN, {nt}, &cNC, &cMG, &cRG);"
        ));
        self.line("const int64_t cnb = (cN + cNC - 1) / cNC;");
        if !keep_b {
            self.line(
                "float *cBw = (float *)dlc_scratch(1, 4 * (cK > 0 ? cK : 1) * (DLC_NC + DLC_NR));",
            );
            self.line("if (!cBw) dlc_err_flag(&dlc_err, 2);");
        }
        if ws && last {
            // the parallel region ends right after: its end is the barrier
            self.line("#pragma omp for schedule(static) nowait");
        } else if ws {
            self.line("#pragma omp for schedule(static)");
        }
        self.line("for (int64_t cw = 0; cw < cnb * cMG; cw++) {");
        self.indent += 1;
        if !keep_b {
            self.line("if (!cBw) continue;");
        }
        self.line("const int64_t cj0 = cw / cMG * cNC, cj1 = cN - cj0 < cNC ? cN : cj0 + cNC;");
        self.line("const int64_t ci0 = cw % cMG * cRG, ci1 = cM - ci0 < cRG ? cM : ci0 + cRG;");
        if keep_b {
            self.line(&format!(
                "dlc_gemm_rows(cM, cN, cK, cA, cBp + cj0 / DLC_NR * cK * DLC_NR, cK * DLC_NR, DLC_NR, L{li}, cro, cco, ci0, ci1, cj0, cj1);"
            ));
        } else {
            self.line("const int64_t cldb = (cj1 - cj0 + DLC_NR - 1) / DLC_NR * DLC_NR + DLC_NR;");
            self.emit_block_pack(c, axes)?;
            self.line(&format!(
                "dlc_gemm_rows(cM, cN, cK, cA, cBw, DLC_NR, cldb, L{li}, cro, cco, ci0, ci1, cj0, cj1);"
            ));
        }
        self.close_item(li, c)
    }

    /// The end of a work item (the block epilogue when `fused_epilogue` is set) and of the item
    /// loop's block.
    fn close_item(&mut self, li: usize, c: &Contraction) -> Result<(), CpuError> {
        if self.fused_epilogue {
            self.emit_block_epilogue(li, c)?;
        }
        self.direct_block = None;
        self.indent -= 1;
        self.line("}");
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// [`Self::emit_items`] for a direct convolution: the padded copy, then per item (an outer
    /// point by a block of output rows or a chunk of one row, by a group of channel panels)
    /// `dlc_conv_cv` into the thread's `cCt`, the item's values copied into `L<li>`, the block
    /// epilogue. Items are whole rows of about `DLC_CV_COLS` positions together (a row longer
    /// than that is cut into chunks of whole tiles); the channels are split too when there are
    /// fewer items than threads.
    fn emit_direct_items(
        &mut self,
        li: usize,
        c: &Contraction,
        d: &Direct,
        nt: &str,
        last: bool,
    ) -> Result<(), CpuError> {
        self.emit_direct_fill(d)?;
        for l in [
            "const int64_t cdcw = cdW <= DLC_CV_COLS ? cdW : DLC_CV_COLS / DLC_PX * DLC_PX;",
            "const int64_t cdnc = (cdW + cdcw - 1) / cdcw, cdcwp = (cdcw + DLC_PX - 1) / DLC_PX * DLC_PX;",
            "const int64_t cdri = cdnc > 1 || DLC_CV_COLS / cdW < 1 ? 1 : DLC_CV_COLS / cdW;",
            "const int64_t cdnh = (cdH + cdri - 1) / cdri, cdni = cdG * cdnh * cdnc, cdq = cdri * cdcwp;",
            "const int64_t cnpn = (cM + DLC_CR - 1) / DLC_CR;",
        ] {
            self.line(l);
        }
        self.line(&format!(
            "int64_t cMG = cdni >= {nt} ? 1 : ({nt} + cdni - 1) / (cdni > 0 ? cdni : 1); if (cMG > cnpn) cMG = cnpn; if (cMG < 1) cMG = 1;"
        ));
        self.line("const int64_t cRG = (cnpn + cMG - 1) / cMG * DLC_CR;");
        self.line("cMG = (cnpn * DLC_CR + cRG - 1) / cRG; if (cMG < 1) cMG = 1;");
        self.line("float *cCt = (float *)dlc_scratch(1, 4 * cdq * cRG);");
        self.line("if (!cCt) dlc_err_flag(&dlc_err, 2);");
        if last {
            self.line("#pragma omp for schedule(static) nowait");
        } else {
            self.line("#pragma omp for schedule(static)");
        }
        self.line("for (int64_t cw = 0; cw < cdni * cMG; cw++) {");
        self.indent += 1;
        self.line("if (!cCt) continue;");
        self.emit_direct_item(li, d);
        self.close_item(li, c)
    }

    /// Opens the loop over the runs of columns `[cj0, cj1)` (see the module doc): the column
    /// iters but the innermost from `cpb`, the innermost as `cs_b + cl` over the run's `csn`
    /// points (`cl`: the SIMD loop, left open).
    fn open_runs(&mut self, cols: &[usize]) {
        self.line("for (int64_t cs = cj0; cs < cj1;) {");
        self.indent += 1;
        let Some((last, rest)) = cols.split_last() else {
            self.line("const int64_t csn = cj1 - cs;");
            self.line("#pragma omp simd");
            self.line("for (int64_t cl = 0; cl < csn; cl++) {");
            self.indent += 1;
            return;
        };
        for (t, i) in rest.iter().enumerate() {
            let v = Self::iter_var(*i);
            self.line(&format!(
                "const int64_t {v} = cpb[{t} * cN + cs]; (void){v};"
            ));
        }
        let z = Self::size_var(*last);
        self.line(&format!(
            "const int64_t cs_b = cpb[{} * cN + cs];",
            rest.len()
        ));
        self.line(&format!(
            "const int64_t csn = cj1 - cs < {z} - cs_b ? cj1 - cs : {z} - cs_b;"
        ));
        self.line("#pragma omp simd");
        self.line("for (int64_t cl = 0; cl < csn; cl++) {");
        self.indent += 1;
        let v = Self::iter_var(*last);
        self.line(&format!("const int64_t {v} = cs_b + cl; (void){v};"));
    }

    /// Closes [`Self::open_runs`].
    fn close_runs(&mut self) {
        self.indent -= 1;
        self.line("}");
        self.line("cs += csn;");
        self.indent -= 1;
        self.line("}");
    }

    /// Packs columns `[cj0, cj1)` of the column operand into `cBw`, row `k` at `cBw + k *
    /// cldb`, the columns up to the next multiple of `DLC_NR` zero.
    fn emit_block_pack(
        &mut self,
        c: &Contraction,
        axes: &[(String, String)],
    ) -> Result<(), CpuError> {
        self.line("{");
        self.indent += 1;
        self.line("const int64_t cpw = (cj1 - cj0 + DLC_NR - 1) / DLC_NR * DLC_NR;");
        self.line("int64_t ck = 0;");
        let mut scope = self.base_scope();
        for (a, e) in axes {
            let v = self.fresh("r");
            self.line(&format!("for (int64_t {v} = 0; {v} < {e}; {v}++) {{"));
            self.indent += 1;
            scope.push((a.clone(), v));
        }
        self.line("float *restrict cd = cBw + ck * cldb - cj0;");
        self.open_runs(&c.cols);
        let x = self.expr(&c.y, &mut scope)?;
        self.line(&format!("cd[cs + cl] = {x};"));
        self.close_runs();
        self.line("for (int64_t cl = cj1; cl < cj0 + cpw; cl++) cd[cl] = 0.0f;");
        self.line("ck++;");
        self.close_loops(axes.len());
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// The region's pointwise lets and output stores at the item's points (rows `[ci0, ci1)`
    /// by columns `[cj0, cj1)`, every value of the iters the contraction does not have), the
    /// lets as C locals.
    fn emit_block_epilogue(&mut self, li: usize, c: &Contraction) -> Result<(), CpuError> {
        if self.gemm_out.is_some() {
            // the contraction wrote the output itself: nothing left to store
            return Ok(());
        }
        let mine: BTreeSet<usize> = c
            .rows
            .iter()
            .chain(&c.cols)
            .chain(&c.batch)
            .copied()
            .collect();
        let extras: Vec<usize> = (0..self.r.iters.len())
            .filter(|i| !mine.contains(i))
            .collect();
        self.line("{");
        self.indent += 1;
        self.open_loops(&extras, false, false)?;
        self.line("for (int64_t cr = ci0; cr < ci1; cr++) {");
        self.indent += 1;
        for (t, i) in c.rows.iter().enumerate() {
            let v = Self::iter_var(*i);
            self.line(&format!(
                "const int64_t {v} = cpa[{t} * cM + cr]; (void){v};"
            ));
        }
        self.open_runs(&c.cols);
        let mut scope = self.base_scope();
        for g in 0..self.r.lets.len() {
            if g == li {
                continue;
            }
            let e = self.r.lets[g].expr.clone();
            let x = self.expr(&e, &mut scope)?;
            let k = self.kind_of(&e);
            let t = kind_type(self.lets[g].kind);
            let v = widen(&x, k, self.lets[g].kind);
            self.line(&format!("const {t} L{g} = {v};"));
        }
        for y in 0..self.r.yields.len() {
            self.emit_yield_store(y, &scope);
        }
        self.close_runs();
        self.indent -= 1;
        self.line("}");
        self.close_loops(extras.len());
        self.indent -= 1;
        self.line("}");
        Ok(())
    }
}
