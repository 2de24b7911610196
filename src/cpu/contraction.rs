//! Contractions on the CPU: a region `let` that is `sum_R x·y` in fp32 (GEMM, batched GEMM,
//! a convolution as implicit GEMM: `x`, `y` any guarded reads of region inputs) is computed by
//! the packed, register-blocked micro-kernel of `gemm.h` instead of a loop nest. Its free iters
//! split into the iters only `x` reads (rows, `M`), only `y` reads (columns, `N`) and both
//! (batch); the reduce axes are `K`. Per batch point, `x` is packed into row panels and `y` into
//! column panels (an im2col for a convolution), and the micro-kernel writes the let's buffer
//! through per-row and per-column offsets, so any order of the free iters works.

use super::emit::Emitter;
use super::CpuError;
use crate::ir::axis::AxisExpr;
use crate::ir::dtype::DType;
use crate::ir::region::{BinaryFn, Expr, Region};
use crate::ir::tiny::ReduceOp;
use std::collections::BTreeSet;

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
    Some(c)
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

    /// Packs one operand of a contraction: `dst` panels of `width` (`DLC_MR`/`DLC_NR`) over
    /// `count` points of `iters`, `K` values each from `e` over the reduce axes.
    pub(super) fn emit_pack(
        &mut self,
        dst: &str,
        width: &str,
        count: &str,
        iters: &[usize],
        e: &Expr,
        axes: &[(String, String)],
    ) -> Result<(), CpuError> {
        self.line(&format!(
            "#pragma omp parallel for num_threads(dlc_nt) schedule(static) if({count} * cK >= 16384)"
        ));
        self.line(&format!(
            "for (int64_t ci = 0; ci < (({count} + {width} - 1) / {width}) * {width}; ci++) {{"
        ));
        self.indent += 1;
        self.line(&format!(
            "float *dst = {dst} + (ci / {width}) * cK * {width} + ci % {width};"
        ));
        self.line(&format!(
            "if (ci >= {count}) {{ for (int64_t k = 0; k < cK; k++) dst[k * {width}] = 0.0f; continue; }}"
        ));
        self.line("int64_t cq = ci;");
        self.decode("cq", iters);
        self.line("int64_t ck = 0;");
        let mut scope = self.base_scope();
        for (a, e) in axes {
            let v = self.fresh("r");
            self.line(&format!("for (int64_t {v} = 0; {v} < {e}; {v}++) {{"));
            self.indent += 1;
            scope.push((a.clone(), v));
        }
        let x = self.expr(e, &mut scope)?;
        self.line(&format!("dst[ck * {width}] = {x}; ck++;"));
        self.close_loops(axes.len());
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    pub(super) fn emit_contraction(&mut self, li: usize) -> Result<(), CpuError> {
        let Some(c) = self.lets[li].gemm.clone() else {
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
        self.line(
            "float *cA = (float *)dlc_alloc(4 * ((cM + DLC_MR - 1) / DLC_MR) * DLC_MR * cK);",
        );
        self.line(
            "float *cBp = (float *)dlc_alloc(4 * ((cN + DLC_NR - 1) / DLC_NR) * DLC_NR * cK);",
        );
        self.line(
            "int64_t *cro = (int64_t *)dlc_alloc(8 * cM), *cco = (int64_t *)dlc_alloc(8 * cN);",
        );
        self.line("if (!cA || !cBp || !cro || !cco) dlc_err = 2;");
        self.line("else for (int64_t cb = 0; cb < cB; cb++) {");
        self.indent += 1;
        self.line("int64_t cbq = cb;");
        self.decode("cbq", &c.batch.clone());
        self.emit_pack("cA", "DLC_MR", "cM", &c.rows.clone(), &c.x, &axes)?;
        self.emit_pack("cBp", "DLC_NR", "cN", &c.cols.clone(), &c.y, &axes)?;
        let boff = self.offset_in(li, &c.batch);
        for (arr, count, iters) in [("cro", "cM", c.rows.clone()), ("cco", "cN", c.cols.clone())] {
            self.line(&format!("for (int64_t ci = 0; ci < {count}; ci++) {{"));
            self.indent += 1;
            self.line("int64_t cq = ci;");
            self.decode("cq", &iters);
            let off = self.offset_in(li, &iters);
            let off = if arr == "cro" {
                format!("{off} + {boff}")
            } else {
                off
            };
            self.line(&format!("{arr}[ci] = {off};"));
            self.indent -= 1;
            self.line("}");
        }
        self.line(&format!(
            "dlc_gemm(cM, cN, cK, cA, cBp, L{li}, cro, cco, dlc_nt);"
        ));
        self.indent -= 1;
        self.line("}");
        self.line("free(cA); free(cBp); free(cro); free(cco);");
        self.indent -= 1;
        self.line("}");
        Ok(())
    }
}
