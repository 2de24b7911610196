//! The loop nests of a region's lets and yields (the rows and flat forms of [`super::emit`]).

use super::cvalue::{acc_type, binary_float, fold, init_lit, kind_type, store, to_dtype, widen};
use super::emit::{Emitter, Scope};
use super::CpuError;
use crate::ir::dtype::DType;
use crate::ir::region::kind::Kind;
use crate::ir::region::{BinaryFn, Expr};
use crate::ir::tiny::ReduceOp;

/// Lane accumulators of a vectorized fp32 reduction to a scalar: four AVX-512 vectors (eight
/// AVX2), so that four independent fold chains hide the latency of a vector add or of a
/// compare-and-blend (one chain ran softmax's row max and sum at a third of the load rate).
pub(super) const REDUCE_LANES: usize = 64;
/// The second stage's lanes (one AVX-512 vector): the part of a row under [`REDUCE_LANES`] is
/// still folded in vectors, only the last `< 16` elements are scalar.
pub(super) const REDUCE_LANES_TAIL: usize = 16;

impl Emitter<'_> {
    pub(super) fn alloc_buffers(&mut self, buffered: &[usize]) {
        self.line("int dlc_ok = 1;");
        for li in buffered {
            let info = &self.lets[*li];
            let t = kind_type(info.kind);
            let size: Vec<String> = info.inner.iter().map(|i| Self::size_var(*i)).collect();
            let line = format!(
                "{t} *restrict L{li} = ({t} *)dlc_alloc((int64_t)sizeof({t}) * {});",
                size.join(" * ")
            );
            self.line(&line);
            self.line(&format!("if (!L{li}) dlc_ok = 0;"));
        }
        for y in self.streamed.clone() {
            self.line(&format!(
                "float *restrict S{y} = dlc_stream ? (float *)dlc_alloc(4 * dlc_inner) : NULL;"
            ));
            self.line(&format!("if (dlc_stream && !S{y}) dlc_ok = 0;"));
        }
        self.line("if (!dlc_ok) dlc_err_flag(&dlc_err, 2);");
    }

    pub(super) fn free_buffers(&mut self, buffered: &[usize]) {
        for li in buffered {
            self.line(&format!("free(L{li});"));
        }
        for y in self.streamed.clone() {
            self.line(&format!("free(S{y});"));
        }
    }

    /// At the top of an outer point's body: the row pointer `D<y>` each streamed yield `y`
    /// stores into, its thread buffer `S<y>` when the output is streamed (`dlc_stream`), else
    /// the output row itself (stored directly: no staging, no copy).
    pub(super) fn row_targets(&mut self) {
        for y in self.streamed.clone() {
            let to = &self.r.yields[y].to;
            if let Some(oi) = self.r.outputs.iter().position(|o| &o.name == to) {
                self.line(&format!(
                    "float *restrict D{y} = dlc_stream ? S{y} : out{oi} + dlc_o * dlc_inner;"
                ));
            }
        }
    }

    /// After the loop nest that stored the rows of streamed yields `ys`: their `dlc_put_row`
    /// when they were staged (`dlc_stream`).
    fn put_rows(&mut self, ys: &[usize]) {
        let ys: Vec<usize> = ys
            .iter()
            .copied()
            .filter(|y| self.streamed.contains(y))
            .collect();
        for y in ys {
            let to = &self.r.yields[y].to;
            if let Some(oi) = self.r.outputs.iter().position(|o| &o.name == to) {
                self.line(&format!(
                    "if (dlc_stream) dlc_put_row(out{oi} + dlc_o * dlc_inner, S{y}, dlc_inner, 1);"
                ));
            }
        }
    }

    /// The non-outer iters, in order: the output's inner loop nest.
    pub(super) fn inner_iters(&self) -> Vec<usize> {
        (0..self.r.iters.len())
            .filter(|i| !self.outer.contains(i))
            .collect()
    }

    pub(super) fn base_scope(&self) -> Scope {
        self.r
            .iters
            .iter()
            .enumerate()
            .map(|(i, it)| (it.name.clone(), Self::iter_var(i)))
            .collect()
    }

    pub(super) fn emit_lets(&mut self, flat: bool) -> Result<(), CpuError> {
        let nl = self.r.lets.len();
        let inner_all = self.inner_iters();
        let mut done_yields = vec![false; self.r.yields.len()];
        for &(_, y, _) in &self.scan_out {
            done_yields[y] = true;
        }
        let mut pf_pending = !flat && !self.prefetch.is_empty();
        let mut li = 0;
        while li < nl {
            let info = &self.lets[li];
            if info.gemm.is_some() {
                li += 1;
                continue;
            }
            if info.inner.is_empty() {
                let t = kind_type(info.kind);
                self.line(&format!("{t} L{li};"));
            }
            if self.lets[li].has_reduce {
                self.emit_reduce_let(li, flat)?;
                li += 1;
                continue;
            }
            // A group: consecutive pointwise lets over the same iters, one loop nest.
            let iters = self.lets[li].inner.clone();
            let nx = self.group_end(li);
            let group: Vec<usize> = (li..nx).collect();
            for g in &group[1..] {
                if self.lets[*g].inner.is_empty() {
                    let t = kind_type(self.lets[*g].kind);
                    self.line(&format!("{t} L{g};"));
                }
            }
            let fused: Vec<usize> = if iters == inner_all {
                (0..self.r.yields.len())
                    .filter(|y| {
                        let from = &self.r.yields[*y].from;
                        group.iter().any(|g| &self.r.lets[*g].name == from)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let mut scope = self.base_scope();
            // the first pass over a whole row prefetches the next rows (`super::prefetch`)
            let strip = pf_pending && iters == inner_all && iters.len() == 1;
            if strip {
                pf_pending = false;
            }
            for y in &fused {
                done_yields[*y] = true;
            }
            // the row's fp32 reduction right after the pass folds it in the same loop
            if let Some(rl) = self.fusable_reduce(&iters, nx, flat) {
                self.emit_group_with_reduce(&group, &fused, rl, strip)?;
                self.put_rows(&fused);
                li = rl + 1;
                continue;
            }
            if strip {
                self.open_prefetch_strip(iters[0]);
            } else {
                self.open_loops(&iters, flat, true)?;
            }
            self.emit_group_lets(&group, &fused, &mut scope)?;
            self.close_loops(iters.len() + usize::from(strip));
            self.put_rows(&fused);
            li = nx;
        }
        for (y, done) in done_yields.iter().enumerate() {
            if !done {
                let scope = self.base_scope();
                self.open_loops(&inner_all, flat, true)?;
                self.emit_yield_store(y, &scope);
                self.close_loops(inner_all.len());
                self.put_rows(&[y]);
            }
        }
        Ok(())
    }

    /// At the point bound in `scope`: the pointwise lets of `group` (C locals or stores to
    /// their buffers), then the stores of the `fused` yields.
    pub(super) fn emit_group_lets(
        &mut self,
        group: &[usize],
        fused: &[usize],
        scope: &mut Scope,
    ) -> Result<(), CpuError> {
        for g in group {
            let x = self.expr(&self.r.lets[*g].expr.clone(), scope)?;
            let k = self.kind_of(&self.r.lets[*g].expr.clone());
            let target = self.let_ref(*g, scope);
            let v = widen(&x, k, self.lets[*g].kind);
            if self.lets[*g].local {
                let t = kind_type(self.lets[*g].kind);
                self.line(&format!("const {t} {target} = {v};"));
            } else {
                self.line(&format!("{target} = {v};"));
            }
        }
        for y in fused {
            self.emit_yield_store(*y, scope);
        }
        Ok(())
    }

    /// The end (exclusive) of the group of pointwise lets starting at `li`: the consecutive
    /// lets without reduces or contractions over the same iters, emitted as one loop nest.
    pub(super) fn group_end(&self, li: usize) -> usize {
        let iters = &self.lets[li].inner;
        let mut nx = li + 1;
        while nx < self.lets.len()
            && !self.lets[nx].has_reduce
            && self.lets[nx].gemm.is_none()
            && &self.lets[nx].inner == iters
        {
            nx += 1;
        }
        nx
    }

    /// Marks the pointwise lets that stay C locals (see [`super::emit::LetInfo::local`]): read
    /// only by later lets of their own group, and yielded (if at all) only where the group's
    /// loop nest stores the outputs. The others keep a row buffer (read again by a reduce or a
    /// later loop nest: L1/L2-resident, one row per thread).
    pub(super) fn plan_locals(&mut self) {
        let r = self.r;
        let nl = r.lets.len();
        let mut readers: Vec<Vec<usize>> = vec![Vec::new(); nl];
        for (j, l) in r.lets.iter().enumerate() {
            super::emit::visit_expr(&l.expr, &mut |e| {
                if let Expr::Let(n) = e {
                    if let Some(i) = r.lets.iter().position(|m| &m.name == n) {
                        readers[i].push(j);
                    }
                }
            });
        }
        let inner_all = self.inner_iters();
        let mut li = 0;
        while li < nl {
            if self.lets[li].gemm.is_some() || self.lets[li].has_reduce {
                li += 1;
                continue;
            }
            let end = self.group_end(li);
            let stores_yields = self.lets[li].inner == inner_all;
            for (g, rd) in readers.iter().enumerate().take(end).skip(li) {
                if self.lets[g].inner.is_empty() {
                    continue;
                }
                let in_group = rd.iter().all(|j| *j > g && *j < end);
                let yielded = r.yields.iter().any(|y| y.from == r.lets[g].name);
                self.lets[g].local = in_group && (stores_yields || !yielded);
            }
            li = end;
        }
    }

    pub(super) fn emit_yield_store(&mut self, y: usize, scope: &Scope) {
        let yl = &self.r.yields[y];
        let Some(li) = self.r.lets.iter().position(|l| l.name == yl.from) else {
            return;
        };
        let Some(oi) = self.r.outputs.iter().position(|o| o.name == yl.to) else {
            return;
        };
        let v = self.let_ref(li, scope);
        let st = store(&v, self.lets[li].kind, self.r.outputs[oi].dtype);
        if self.streamed.contains(&y) {
            // `D<y>`: the staged row (out by `dlc_put_row` after the loop nest) or the output row
            let idx = self.flat_index(&self.inner_iters(), scope);
            self.line(&format!("D{y}[{idx}] = {st};"));
            return;
        }
        let all: Vec<usize> = (0..self.r.iters.len()).collect();
        let idx = self.flat_index(&all, scope);
        self.line(&format!("out{oi}[{idx}] = {st};"));
    }

    /// Opens one loop per iter of `iters` (loop vars `i<k>`); in flat form the leading loops
    /// are one collapsed `omp parallel for` ([`flat_collapse`]), the innermost an `omp simd`
    /// loop when `simd`.
    pub(super) fn open_loops(
        &mut self,
        iters: &[usize],
        flat: bool,
        simd: bool,
    ) -> Result<(), CpuError> {
        let n = iters.len();
        let simd = simd && !self.has_gather;
        for (k, i) in iters.iter().enumerate() {
            let v = Self::iter_var(*i);
            let z = Self::size_var(*i);
            if flat && k == 0 {
                let rest: Vec<String> = iters.iter().map(|j| Self::size_var(*j)).collect();
                let c = flat_collapse(n, simd);
                let collapse = if c > 1 {
                    format!(" collapse({c})")
                } else {
                    String::new()
                };
                self.line(&format!(
                    "#pragma omp parallel for{collapse} num_threads(dlc_nt) schedule(static) if({} >= 4096)",
                    rest.join(" * ")
                ));
            } else if simd && k + 1 == n {
                self.line("#pragma omp simd");
            }
            self.line(&format!("for (int64_t {v} = 0; {v} < {z}; {v}++) {{"));
            self.indent += 1;
        }
        Ok(())
    }

    pub(super) fn close_loops(&mut self, n: usize) {
        for _ in 0..n {
            self.indent -= 1;
            self.line("}");
        }
    }

    pub(super) fn emit_reduce_let(&mut self, li: usize, flat: bool) -> Result<(), CpuError> {
        let expr = self.r.lets[li].expr.clone();
        let inner = self.lets[li].inner.clone();
        let lk = self.lets[li].kind;
        let mut scope = self.base_scope();
        match &expr {
            Expr::Scan(sc) => self.emit_scan_let(li, sc, &inner, flat)?,
            Expr::Reduce(red) if !flat && !inner.is_empty() => {
                self.emit_interchanged(li, red, &inner, &mut scope)?
            }
            Expr::Reduce(red) if inner.is_empty() => {
                // A scalar per point: a vectorized horizontal reduction for fp32 sums.
                let dtype = red.dtype.ok_or_else(|| CpuError::Codegen {
                    region: self.r.name.clone(),
                    why: "reduce without an accumulation dtype".into(),
                })?;
                let acc = self.fresh("acc");
                let ty = acc_type(dtype);
                self.line(&format!(
                    "{ty} {acc} = {};",
                    init_lit(red.op, red.init, dtype)
                ));
                let ext = self.extents(red)?;
                let na = red.axes.len();
                if dtype == DType::F32 && !self.has_gather && na > 0 {
                    self.emit_lane_reduce(red, &ext, &acc, &format!("L{li}"), &mut scope)?;
                    return Ok(());
                }
                for (a, e) in red.axes.iter().zip(&ext) {
                    let v = self.fresh("r");
                    self.line(&format!("for (int64_t {v} = 0; {v} < {e}; {v}++) {{"));
                    self.indent += 1;
                    scope.push((a.clone(), v));
                }
                let k = self.kind_of(&red.body);
                let body = self.expr(&red.body, &mut scope)?;
                let v = to_dtype(&body, k, dtype);
                let f = fold(red.op, dtype, &acc, &v);
                self.line(&format!("{acc} = {f};"));
                self.close_loops(na);
                self.line(&format!("L{li} = {acc};"));
            }
            Expr::Reduce(red)
                if flat
                    && red.dtype == Some(DType::F32)
                    && !self.has_gather
                    && !red.axes.is_empty() =>
            {
                // Per point of the let's iters (a row's mean or variance as an array): the
                // lane reduction. As a serial fold (one dependent add per element) LayerNorm's
                // variance over [8192, 768] ran 28 ms on one thread, 18 times its price.
                self.open_loops(&inner, flat, false)?;
                let acc = self.fresh("acc");
                self.line(&format!(
                    "float {acc} = {};",
                    init_lit(red.op, red.init, DType::F32)
                ));
                let ext = self.extents(red)?;
                let target = self.let_ref(li, &scope);
                self.emit_lane_reduce(red, &ext, &acc, &target, &mut scope)?;
                self.close_loops(inner.len());
            }
            _ => {
                // Any other let with a reduce inside: per point, nested reduces inline.
                self.open_loops(&inner, flat, false)?;
                let x = self.expr(&expr, &mut scope)?;
                let k = self.kind_of(&expr);
                let t = self.let_ref(li, &scope);
                self.line(&format!("{t} = {};", widen(&x, k, lk)));
                self.close_loops(inner.len());
            }
        }
        Ok(())
    }

    /// An fp32 reduce to a scalar (its accumulator `acc` declared and initialized):
    /// [`REDUCE_LANES`] lane accumulators over the innermost axis in an `omp simd` loop, then
    /// [`REDUCE_LANES_TAIL`] of them over what is left, a scalar tail, then the lanes folded into
    /// `acc` by a tree of halving steps. Lanes start at the op's identity (`acc` keeps the
    /// reduce's init). The order is fixed, so the result is deterministic whatever the thread count; max and min are
    /// order-free (up to the sign of a zero result and which NaN propagates), sums and products
    /// are reassociated like any vectorized reduction (graph-json's fp32 tolerance). The result
    /// is stored to `target` (`L<li>`, or the let's element at the current point).
    fn emit_lane_reduce(
        &mut self,
        red: &crate::ir::region::Reduce,
        ext: &[String],
        acc: &str,
        target: &str,
        scope: &mut Scope,
    ) -> Result<(), CpuError> {
        self.note(format!(
            "fp32 {} to a scalar in {REDUCE_LANES} lane accumulators",
            crate::ir::region::json::reduce_op_name(red.op)
        ));
        let (accv, ln) = self.lane_accumulators(red.op, acc);
        let na = red.axes.len();
        for (a, e) in red.axes.iter().zip(ext).take(na - 1) {
            let v = self.fresh("r");
            self.line(&format!("for (int64_t {v} = 0; {v} < {e}; {v}++) {{"));
            self.indent += 1;
            scope.push((a.clone(), v));
        }
        let (a, e) = (&red.axes[na - 1], &ext[na - 1]);
        let v = self.fresh("r");
        self.line(&format!("int64_t {v} = 0;"));
        for lanes in [REDUCE_LANES, REDUCE_LANES_TAIL] {
            self.line(&format!("for (; {v} + {lanes} <= {e}; {v} += {lanes}) {{"));
            self.indent += 1;
            self.line("#pragma omp simd");
            self.line(&format!("for (int {ln} = 0; {ln} < {lanes}; {ln}++) {{"));
            self.indent += 1;
            scope.push((a.clone(), format!("({v} + {ln})")));
            let x = self.reduce_body_f32(red, scope)?;
            scope.pop();
            let slot = format!("{accv}[{ln}]");
            let f = fold(red.op, DType::F32, &slot, &x);
            self.line(&format!("{slot} = {f};"));
            self.close_loops(2);
        }
        self.line(&format!("for (; {v} < {e}; {v}++) {{"));
        self.indent += 1;
        scope.push((a.clone(), v.clone()));
        let x = self.reduce_body_f32(red, scope)?;
        scope.pop();
        let f = fold(red.op, DType::F32, acc, &x);
        self.line(&format!("{acc} = {f};"));
        self.close_loops(1);
        for _ in 0..na - 1 {
            scope.pop();
        }
        self.close_loops(na - 1);
        self.fold_lanes(red.op, &accv, &ln, acc);
        self.line(&format!("{target} = {acc};"));
        Ok(())
    }

    /// Declares [`REDUCE_LANES`] fp32 lane accumulators of a reduce `op` into the scalar `acc`
    /// (max/min lanes start at `acc`, others at the op's identity); their names: the array and
    /// the lane index.
    pub(super) fn lane_accumulators(&mut self, op: ReduceOp, acc: &str) -> (String, String) {
        let accv = self.fresh("accv");
        let ln = self.fresh("l");
        let lane_init = match op {
            ReduceOp::Max | ReduceOp::Min => acc.to_string(),
            op => init_lit(op, None, DType::F32),
        };
        self.line(&format!(
            "float {accv}[{REDUCE_LANES}] __attribute__((aligned(64)));"
        ));
        self.line("#pragma omp simd");
        self.line(&format!(
            "for (int {ln} = 0; {ln} < {REDUCE_LANES}; {ln}++) {accv}[{ln}] = {lane_init};"
        ));
        (accv, ln)
    }

    /// Folds the lanes `accv` (lane index `ln`) pairwise — a tree of halving vector steps, not
    /// a serial chain — and then into the scalar `acc`.
    pub(super) fn fold_lanes(&mut self, op: ReduceOp, accv: &str, ln: &str, acc: &str) {
        let mut w = REDUCE_LANES / 2;
        while w >= 1 {
            let hi = format!("{accv}[{ln} + {w}]");
            let f = fold(op, DType::F32, &format!("{accv}[{ln}]"), &hi);
            self.line(&format!(
                "for (int {ln} = 0; {ln} < {w}; {ln}++) {accv}[{ln}] = {f};"
            ));
            w /= 2;
        }
        let f = fold(op, DType::F32, acc, &format!("{accv}[0]"));
        self.line(&format!("{acc} = {f};"));
    }

    /// A reduce's body at the point bound in `scope`, as an fp32 value.
    pub(super) fn reduce_body_f32(
        &mut self,
        red: &crate::ir::region::Reduce,
        scope: &mut Scope,
    ) -> Result<String, CpuError> {
        let k = self.kind_of(&red.body);
        let body = self.expr(&red.body, scope)?;
        Ok(to_dtype(&body, k, DType::F32))
    }

    /// A reduce over the let's free iters in rows form, interchanged: reduce axes outside, the
    /// vector loop over the free iters inside (each element still folds in row-major order).
    pub(super) fn emit_interchanged(
        &mut self,
        li: usize,
        red: &crate::ir::region::Reduce,
        inner: &[usize],
        scope: &mut Scope,
    ) -> Result<(), CpuError> {
        let inner = inner.to_vec();
        // Interchanged: reduce axes outside, the vector loop over the free iters inside.
        let dtype = red.dtype.ok_or_else(|| CpuError::Codegen {
            region: self.r.name.clone(),
            why: "reduce without an accumulation dtype".into(),
        })?;
        let ext = self.extents(red)?;
        let hoist = self.hoistable(red, &inner);
        let stencil = match hoist {
            None => self.stencil_of(red, &inner),
            Some(_) => None,
        };
        // the buffer starts at the init (a staged window's register form writes it whole)
        if stencil.as_ref().is_none_or(|s| s.register.is_none()) {
            let init = init_lit(red.op, red.init, dtype);
            self.open_loops(&inner, false, true)?;
            let t = self.let_ref(li, scope);
            self.line(&format!("{t} = {init};"));
            self.close_loops(inner.len());
        }
        if let Some(s) = &stencil {
            return self.emit_stencil(li, red, &inner, s, &ext, scope);
        }
        let staged = match &hoist {
            Some(h) => Some(self.emit_hoist_prepass(h, &red.axes[0], scope)?),
            None => None,
        };
        let mut rv = Vec::new();
        for (a, e) in red.axes.iter().zip(&ext) {
            let v = self.fresh("r");
            self.line(&format!("for (int64_t {v} = 0; {v} < {e}; {v}++) {{"));
            self.indent += 1;
            scope.push((a.clone(), v.clone()));
            rv.push(v);
        }
        // The free iters keep their own loop vars: shadowing by reduce axes cannot
        // reach them (a free iter is never a reduce axis of its own let).
        let vi = inner[inner.len() - 1];
        let border = match &hoist {
            None => super::emit_border::split(&red.body, &self.r.iters[vi].name),
            Some(_) => None,
        };
        if let Some(b) = &border {
            self.open_loops(&inner[..inner.len() - 1], false, false)?;
            self.emit_border_loops(li, red, vi, b, scope)?;
            self.close_loops(inner.len() - 1);
            self.close_loops(red.axes.len());
            return Ok(());
        }
        self.open_loops(&inner, false, true)?;
        let (body, k) = match (&hoist, &staged) {
            (Some(h), Some(buf)) => {
                // `staged · other` with the staged factor read back: the same product
                let y = self.operand(h.other, Kind::Float, scope)?;
                let x = format!("{buf}[{}]", rv[0]);
                let (a, b) = if h.staged_first { (x, y) } else { (y, x) };
                (binary_float(BinaryFn::Mul, &a, &b), Kind::Float)
            }
            _ => (self.expr(&red.body, scope)?, self.kind_of(&red.body)),
        };
        let v = to_dtype(&body, k, dtype);
        let t = self.let_ref(li, scope);
        let f = fold(red.op, dtype, &t, &v);
        self.line(&format!("{t} = {f};"));
        self.close_loops(inner.len());
        self.close_loops(red.axes.len());
        Ok(())
    }

    /// `L<li> = L<li> ⊕ body` at the current point (an interchanged reduce's fold step).
    pub(super) fn emit_fold_stmt(
        &mut self,
        li: usize,
        red: &crate::ir::region::Reduce,
        body: &Expr,
        scope: &mut Scope,
    ) -> Result<(), CpuError> {
        let dtype = red.dtype.ok_or_else(|| CpuError::Codegen {
            region: self.r.name.clone(),
            why: "reduce without an accumulation dtype".into(),
        })?;
        let x = self.expr(body, scope)?;
        let v = to_dtype(&x, self.kind_of(body), dtype);
        let t = self.let_ref(li, scope);
        let f = fold(red.op, dtype, &t, &v);
        self.line(&format!("{t} = {f};"));
        Ok(())
    }

    /// A scan let over one long line (a 1-D cumsum): with at least [`CHUNKED_SCAN_MIN`] points
    /// and more than one thread, a chunked two-pass scan (each thread folds its chunk, the
    /// chunk totals are folded in order into each chunk's offset, each thread walks its chunk
    /// again from its offset: linear work, ~1.5 passes per thread); below that one sequential
    /// walk. Only for folds whose result does not depend on their grouping beyond fp32 sum
    /// rounding ([`chunkable`]).
    fn emit_chunked_scan(
        &mut self,
        li: usize,
        sc: &crate::ir::region::Scan,
        ax: usize,
    ) -> Result<(), CpuError> {
        self.note(format!(
            "a chunked two-pass parallel {} scan along `{}` (each thread folds its chunk, then walks it again from the chunk totals' prefix; sequential below {CHUNKED_SCAN_MIN} points)",
            crate::ir::region::json::reduce_op_name(sc.op),
            sc.axis
        ));
        let (v, z) = (Self::iter_var(ax), Self::size_var(ax));
        let ty = acc_type(sc.dtype);
        let init = init_lit(sc.op, None, sc.dtype);
        let mut scope = self.base_scope();
        let (x, target, kinds) = self.scan_terms(li, sc, &mut scope)?;
        let nt = format!("({z} >= {CHUNKED_SCAN_MIN} && dlc_nt > 1 ? dlc_nt : 1)");
        self.line("{");
        self.indent += 1;
        self.line(&format!("const int csn = {nt};"));
        self.line(&format!("{ty} ctot[csn];"));
        self.line("#pragma omp parallel num_threads(csn) if(csn > 1)");
        self.line("{");
        self.indent += 1;
        self.line("const int ct = omp_get_thread_num(), cnt = omp_get_num_threads();");
        // Chunk ct of a reverse scan is the ct-th from the end: its offset folds the chunks
        // after it, nearest first, as the sequential walk meets them.
        let (lo, hi) = if sc.reverse {
            (
                format!("{z} * (cnt - 1 - ct) / cnt"),
                format!("{z} * (cnt - ct) / cnt"),
            )
        } else {
            (format!("{z} * ct / cnt"), format!("{z} * (ct + 1) / cnt"))
        };
        self.line(&format!("const int64_t c0 = {lo}, c1 = {hi};"));
        let walk = if sc.reverse {
            format!("for (int64_t {v} = c1 - 1; {v} >= c0; {v}--) {{")
        } else {
            format!("for (int64_t {v} = c0; {v} < c1; {v}++) {{")
        };
        let acc = self.fresh("acc");
        let f = fold(sc.op, sc.dtype, &acc, &x);
        self.line(&format!("{ty} {acc} = {init};"));
        // One thread (a short line, or `--threads 1`): the single walk below, no totals pass.
        self.line("if (cnt > 1) {");
        self.indent += 1;
        self.line(&walk);
        self.line(&format!("    {acc} = {f};"));
        self.line("}");
        self.line(&format!("ctot[ct] = {acc};"));
        self.line("#pragma omp barrier");
        self.line(&format!("{acc} = {init};"));
        let ft = fold(sc.op, sc.dtype, &acc, "ctot[u]");
        self.line(&format!("for (int u = 0; u < ct; u++) {acc} = {ft};"));
        self.indent -= 1;
        self.line("}");
        self.line(&walk);
        self.indent += 1;
        self.emit_scan_step(sc.exclusive, &target, &acc, &f, kinds);
        self.close_loops(1);
        self.indent -= 1;
        self.line("}");
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// A scan let: one sequential walk of the scanned iter per line (every other iter of the
    /// let), carrying the fold; O(n) work. Lines are independent (threads over outer iters, or
    /// over the first line iter in flat form).
    fn emit_scan_let(
        &mut self,
        li: usize,
        sc: &crate::ir::region::Scan,
        inner: &[usize],
        flat: bool,
    ) -> Result<(), CpuError> {
        let Some(ax) = self.r.iters.iter().position(|it| it.name == sc.axis) else {
            return Err(CpuError::Codegen {
                region: self.r.name.clone(),
                why: format!("scan over unknown iter `{}`", sc.axis),
            });
        };
        let lines: Vec<usize> = inner.iter().copied().filter(|i| *i != ax).collect();
        if lines.is_empty() && chunkable(sc) {
            return self.emit_chunked_scan(li, sc, ax);
        }
        self.note(format!(
            "a sequential {} scan along `{}` per line (linear work; the lines in parallel)",
            crate::ir::region::json::reduce_op_name(sc.op),
            sc.axis
        ));
        let mut scope = self.base_scope();
        self.open_loops(&lines, flat, false)?;
        let acc = self.fresh("acc");
        let ty = acc_type(sc.dtype);
        self.line(&format!(
            "{ty} {acc} = {};",
            init_lit(sc.op, None, sc.dtype)
        ));
        let (v, z) = (Self::iter_var(ax), Self::size_var(ax));
        if sc.reverse {
            self.line(&format!("for (int64_t {v} = {z} - 1; {v} >= 0; {v}--) {{"));
        } else {
            self.line(&format!("for (int64_t {v} = 0; {v} < {z}; {v}++) {{"));
        }
        self.indent += 1;
        let (x, target, kinds) = self.scan_terms(li, sc, &mut scope)?;
        let f = fold(sc.op, sc.dtype, &acc, &x);
        self.emit_scan_step(sc.exclusive, &target, &acc, &f, kinds);
        self.close_loops(1);
        self.close_loops(lines.len());
        Ok(())
    }

    /// A scan let's element in the scan's dtype, its target (the let's buffer at the point) and
    /// the (scan, let) kinds that [`Self::emit_scan_step`] widens between.
    fn scan_terms(
        &mut self,
        li: usize,
        sc: &crate::ir::region::Scan,
        scope: &mut Scope,
    ) -> Result<(String, String, (Kind, Kind)), CpuError> {
        let k = self.kind_of(&sc.body);
        let body = self.expr(&sc.body, scope)?;
        let x = to_dtype(&body, k, sc.dtype);
        let target = self.let_ref(li, scope);
        let kinds = (
            self.kind_of(&self.r.lets[li].expr.clone()),
            self.lets[li].kind,
        );
        Ok((x, target, kinds))
    }

    /// One point of a scan's walk: the running fold `acc` stored to `target` (widened from the
    /// scan's kind to the let's, `kinds`) after folding `f` in (inclusive) or before (exclusive).
    fn emit_scan_step(
        &mut self,
        exclusive: bool,
        target: &str,
        acc: &str,
        f: &str,
        (sk, lk): (Kind, Kind),
    ) {
        let store = format!("{target} = {};", widen(acc, sk, lk));
        let step = format!("{acc} = {f};");
        if exclusive {
            self.line(&store);
            self.line(&step);
        } else {
            self.line(&step);
            self.line(&store);
        }
    }
}

/// The fewest points of one line scanned by chunks on several threads.
const CHUNKED_SCAN_MIN: i64 = 1 << 15;

/// Whether a scan may be split into chunks whose totals are folded separately: max and min
/// (any dtype) and integer/bool sums and products (wrapping) are exact in any grouping; an fp32
/// sum only changes its rounding (inside graph-json's tolerance; the sequential walk's own
/// error grows with the line too). fp16/bf16 sums (rounded at every step) and float products
/// keep the sequential walk.
fn chunkable(sc: &crate::ir::region::Scan) -> bool {
    match (Kind::of(sc.dtype), sc.op) {
        (_, ReduceOp::Max | ReduceOp::Min) => true,
        (Kind::Float, ReduceOp::Sum) => sc.dtype == DType::F32,
        (Kind::Float, ReduceOp::Prod) => false,
        _ => true,
    }
}

/// How many of a flat let's `n` loops one `omp parallel for` shares among the threads: all of
/// them but the innermost when that is the `omp simd` loop (it stays whole: a vector loop with
/// its tail), else all of them. Collapsing the leading loops splits the work across the threads
/// even when the outermost extent is 1 (BERT's masked softmax over `[1, 12, 128, 128]` ran on one
/// thread when only the outermost loop was parallel). Each point's value (its reductions
/// included) is computed inside one iteration, in the same order whatever the partition, so the
/// results are those of one thread bit for bit.
pub(super) fn flat_collapse(n: usize, simd: bool) -> usize {
    if simd && n > 1 {
        n - 1
    } else {
        n.max(1)
    }
}
