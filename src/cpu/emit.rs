//! One region → one C function (seed 004 "SIMD化", "並列化").
//!
//! Every `let` of a region is a value over its free iters. The emitter splits the iters into the
//! **outer** set `O` (iters every heavy let depends on and no reduce rebinds; the innermost iter
//! is kept inside so that there is a vector loop) and the rest. In *rows* form (`O` non-empty)
//! the points of `O` are one flat `omp for` loop; inside, each let is materialized in a
//! thread-local buffer over its remaining free iters, pointwise lets with the same iters share one
//! loop whose innermost axis is an `omp simd` loop (vectors plus the compiler's scalar tail), a
//! top-level reduce over remaining iters is interchanged (reduce axes outside, the vector loop
//! over the free iters inside: every element still folds its axes in row-major order, so the
//! result is the reference's bit for bit), and an fp32 reduce to a scalar is a vectorized
//! horizontal reduction (64 lane accumulators, `emit_loops.rs`). In *flat* form (`O` empty:
//! 1-D regions, global reductions) each let is a whole array and its loop nest is one collapsed `omp parallel for` over its
//! leading iters (all but the vector loop: `emit_loops::flat_collapse`). Values compute in their kind ([`crate::ir::region::kind`]): fp32 as `float`
//! (fp16/bf16 storage converted on load and store), i32 and bool as `int32_t`, i32/bool ops
//! through `double` exactly as the reference rounds them.

use super::contraction::{recognize, Contraction};
pub use super::cvalue::storage_type;
use super::CpuError;
use crate::codegen::cexpr;
use crate::ir::axis::AxisExpr;
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::kind::{Kind, Kinds};
use crate::ir::region::verify::{verify, Checked};
use crate::ir::region::{Expr, Pred, Region};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// What the emitter made of one region.
#[derive(Clone, Debug, PartialEq)]
pub struct EmittedRegion {
    /// The C function.
    pub code: String,
    /// How its loops are organized: `rows(m)` (parallel over the named outer iters), `flat`, or
    /// `gemm` (a contraction's work items with the region's epilogue on their blocks).
    pub form: String,
    /// What the emitter chose inside that form, one phrase each in emission order (packed GEMM,
    /// kept weight packs, a fused block epilogue, lane reductions, ...): `--explain` and the
    /// manifest print them.
    pub notes: Vec<String>,
}

/// Per let: its kind, its free iters that are not outer, its buffer.
pub(super) struct LetInfo {
    pub(super) kind: Kind,
    /// The iters its buffer is over: its free iters less the outer ones (all of them for a
    /// contraction, whose buffer is one array shared by all threads).
    pub(super) inner: Vec<usize>,
    pub(super) has_reduce: bool,
    /// Computed by the GEMM micro-kernel before the loop nests.
    pub(super) gemm: Option<Contraction>,
    /// A pointwise let read only inside its own loop nest (by later lets of its group and the
    /// yields stored there): a C local per point, never stored to a buffer.
    pub(super) local: bool,
}

pub(super) struct Emitter<'a> {
    pub(super) r: &'a Region,
    pub(super) checked: Checked,
    /// `O`: outer iters (ascending).
    pub(super) outer: Vec<usize>,
    pub(super) lets: Vec<LetInfo>,
    pub(super) symbols: RefCell<BTreeSet<String>>,
    pub(super) fresh: usize,
    pub(super) has_gather: bool,
    pub(super) body: String,
    pub(super) indent: usize,
    /// Guarded reads (`pred ? in[i] : c`) load unconditionally from a clamped index
    /// (`in[pred ? i : 0]`), so that a loop whose addresses are not affine (an im2col pack)
    /// vectorizes with gathers. Element 0 exists in every buffer (`exec`'s buffers hold at
    /// least one word, even when empty).
    pub(super) clamp_guards: bool,
    /// Region inputs that are constant parameters (weights): a contraction operand that reads
    /// only these is packed once per run of the loaded program and kept ([`super::contraction`]).
    pub(super) params: BTreeSet<String>,
    /// The region's pointwise lets and stores run on each contraction work item's hot block
    /// ([`super::block`]), not as loop nests after the contraction.
    pub(super) fused_epilogue: bool,
    /// Yields (indices into the region's yields) whose rows are staged in a thread buffer `S<y>`
    /// and written by `dlc_put_row` (non-temporal stores for outputs of at least
    /// `DLC_STREAM_MIN_BYTES`, decided at run time by `dlc_stream`): see [`Emitter::plan_streams`].
    pub(super) streamed: Vec<usize>,
    /// Inputs whose next rows the first pointwise loop over a row prefetches
    /// ([`super::prefetch`]).
    pub(super) prefetch: Vec<usize>,
    /// A direct convolution's let and how its block epilogue reads it: the thread's result
    /// block `cCt` in place of the let's buffer ([`super::direct`]).
    pub(super) direct_block: Option<(usize, String)>,
    /// [`EmittedRegion::notes`].
    pub(super) notes: Vec<String>,
    /// Flat form: scan lets written straight into the fp32 output a yield copies them to
    /// (let, yield, output): no buffer, no copy ([`Emitter::plan_scan_outputs`]).
    pub(super) scan_out: Vec<(usize, usize, usize)>,
    /// The output a lone contraction let is computed in place of its buffer (with the fused
    /// epilogue: the region is that let and one yield of it, [`Emitter::emit_gemm_buffers`]).
    pub(super) gemm_out: Option<usize>,
}

pub(super) type Scope = Vec<(String, String)>;

pub(super) fn lookup<'s>(scope: &'s Scope, n: &str) -> Option<&'s str> {
    scope
        .iter()
        .rev()
        .find(|(m, _)| m == n)
        .map(|(_, v)| v.as_str())
}

fn contains_reduce(e: &Expr) -> bool {
    let mut hit = false;
    visit(e, &mut |x| {
        hit |= matches!(x, Expr::Reduce(_) | Expr::Scan(_))
    });
    hit
}

/// Calls `f` on `e` and every subexpression.
pub(crate) fn visit_expr(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    visit(e, f)
}

fn visit(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match e {
        Expr::Unary(_, x) | Expr::Cast { x, .. } => visit(x, f),
        Expr::Binary(_, a, b) => {
            visit(a, f);
            visit(b, f);
        }
        Expr::Select {
            then, otherwise, ..
        } => {
            visit(then, f);
            visit(otherwise, f);
        }
        Expr::Reduce(r) => visit(&r.body, f),
        Expr::Scan(sc) => visit(&sc.body, f),
        Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => visit(operand, f),
        Expr::Gather { index, .. } => visit(index, f),
        Expr::Where(c, a, b) => {
            visit(c, f);
            visit(a, f);
            visit(b, f);
        }
        Expr::Const(_) | Expr::Let(_) | Expr::Read { .. } | Expr::Index(_) => {}
    }
}

/// Whether [`emit_region`] runs some let of `r` as a packed contraction (`gemm.h`, after the
/// same renaming of shadowing reduce axes): what the CPU cost model may price by the GEMM view.
/// A contraction whose operands read lets or gather (attention's `softmax · V` with the softmax
/// fused in) is not one: it runs as loop nests, each let once per point of its free iters.
pub fn runs_packed_contraction(r: &Region) -> bool {
    let Ok(mut checked) = verify(r) else {
        return false;
    };
    let renamed = super::unshadow::unshadow(r, &checked.iter_sizes);
    if let Some(r2) = &renamed {
        match verify(r2) {
            Ok(c) => checked = c,
            Err(_) => return false,
        }
    }
    let r = renamed.as_ref().unwrap_or(r);
    recognized(r, &checked).iter().any(Option::is_some)
}

/// Per let of `r`, the packed contraction it runs as (`gemm.h`), if the recognizer takes it.
fn recognized(r: &Region, checked: &Checked) -> Vec<Option<Contraction>> {
    let input = |nm: &str| r.input(nm).map(|i| i.dtype);
    let no_let = |_: &str| None;
    let kinds = Kinds {
        input: &input,
        let_kind: &no_let,
    };
    let float_kind = |e: &Expr| kinds.of(e) == Kind::Float && !matches!(e, Expr::Const(_));
    (0..r.lets.len())
        .map(|li| recognize(r, li, &checked.let_free[li], &float_kind))
        .collect()
}

/// The C function `fname(void *const *dlc_buf, const int64_t *dlc_sym, int dlc_nt)` for region
/// `r`: `dlc_buf` holds its inputs then its outputs, `dlc_sym` the values of `symbols` (the
/// program's symbol table, extended with the symbols this region uses). Returns 0, 1 (a gather
/// index out of range) or 2 (out of memory). After the outputs, `dlc_buf` holds a pointer to the
/// run's pack epoch (an `int64_t`, [`super::exec`]): packed `params` operands of contractions
/// are kept while it stays the same.
pub fn emit_region(
    r: &Region,
    fname: &str,
    symbols: &mut Vec<String>,
    params: &BTreeSet<String>,
) -> Result<EmittedRegion, CpuError> {
    let verified = |r: &Region| {
        verify(r).map_err(|e| CpuError::Codegen {
            region: r.name.clone(),
            why: e.to_string(),
        })
    };
    let mut checked = verified(r)?;
    // Reduce axes that shadow iters renamed apart (`unshadow.rs`): the contraction recognizer
    // classifies iters by name.
    let renamed = super::unshadow::unshadow(r, &checked.iter_sizes);
    if let Some(r2) = &renamed {
        checked = verified(r2)?;
    }
    let r = renamed.as_ref().unwrap_or(r);
    let mut em = Emitter::new(r, checked);
    em.params = params.clone();
    em.emit_body()?;
    let mut code = String::new();
    let _ = writeln!(
        code,
        "// region `{}`\nint {fname}(void *const *dlc_buf, const int64_t *dlc_sym, int dlc_nt) {{",
        r.name.replace('\n', " ")
    );
    code.push_str("    (void)dlc_sym; (void)dlc_nt;\n");
    for s in em.symbols.borrow().iter() {
        let idx = match symbols.iter().position(|x| x == s) {
            Some(i) => i,
            None => {
                symbols.push(s.clone());
                symbols.len() - 1
            }
        };
        let _ = writeln!(
            code,
            "    const int64_t {} = dlc_sym[{idx}];",
            cexpr::sym(s)
        );
    }
    for (i, inp) in r.inputs.iter().enumerate() {
        let t = storage_type(inp.dtype);
        let _ = writeln!(
            code,
            "    const {t} *restrict in{i} = (const {t} *)dlc_buf[{i}];"
        );
    }
    for (i, o) in r.outputs.iter().enumerate() {
        let t = storage_type(o.dtype);
        let _ = writeln!(
            code,
            "    {t} *restrict out{i} = ({t} *)dlc_buf[{}];",
            r.inputs.len() + i
        );
    }
    let _ = writeln!(
        code,
        "    const int64_t dlc_epoch = *(const int64_t *)dlc_buf[{}]; (void)dlc_epoch;",
        r.inputs.len() + r.outputs.len()
    );
    code.push_str(&em.body);
    code.push_str("}\n");
    let form = if em.fused_epilogue {
        "gemm".to_string()
    } else if em.outer.is_empty() {
        "flat".to_string()
    } else {
        let names: Vec<&str> = em.outer.iter().map(|i| r.iters[*i].name.as_str()).collect();
        format!("rows({})", names.join(","))
    };
    Ok(EmittedRegion {
        code,
        form,
        notes: em.notes,
    })
}

/// The longest vector loop (a known size) whose rows are merged into planes by [`short_rows`].
const SHORT_ROW: i64 = 32;
/// The fewest outer points [`short_rows`] leaves (the work items of the threads).
const SHORT_ROW_MIN_ITEMS: i64 = 32;

/// Whether rows form's work items grow from rows to planes: the vector loop (the innermost iter
/// `n − 1`, inner) is shorter than [`SHORT_ROW`], the last outer iter is the one before it, at
/// least [`SHORT_ROW_MIN_ITEMS`] outer points stay, and every heavy let in `pool` is over the
/// vector loop's iter (interchanged reduces, as a depthwise convolution's at 14² or 7²: one
/// work item per 14-point row spent more on the item than on its 126 multiply-adds).
fn short_rows(outer: &[usize], n: usize, checked: &Checked, pool: &[usize]) -> bool {
    let size = |i: usize| checked.iter_sizes[i].as_int();
    let (Some(&last), Some(inner)) = (outer.last(), n.checked_sub(1)) else {
        return false;
    };
    let items: Option<i64> = outer[..outer.len() - 1].iter().map(|i| size(*i)).product();
    last + 1 == inner
        && size(inner).is_some_and(|z| z < SHORT_ROW)
        && items.is_some_and(|p| p >= SHORT_ROW_MIN_ITEMS)
        && pool.iter().all(|li| checked.let_free[*li].contains(&inner))
}

impl<'a> Emitter<'a> {
    pub(super) fn new(r: &'a Region, checked: Checked) -> Emitter<'a> {
        let n = r.iters.len();
        let gemms = recognized(r, &checked);
        // Iters a reduce rebinds cannot be outer: a let read at a rebound value needs the
        // whole range of that iter inside one outer point.
        let mut rebound = BTreeSet::new();
        for (li, l) in r.lets.iter().enumerate() {
            if gemms[li].is_some() {
                continue;
            }
            visit(&l.expr, &mut |e| match e {
                Expr::Reduce(red) => rebound.extend(red.axes.iter().cloned()),
                // A scan walks its axis sequentially inside one outer point.
                Expr::Scan(sc) => {
                    rebound.insert(sc.axis.clone());
                }
                _ => {}
            });
        }
        let heavy: Vec<usize> = (0..r.lets.len())
            .filter(|li| gemms[*li].is_none() && contains_reduce(&r.lets[*li].expr))
            .collect();
        let pointwise = heavy.is_empty();
        let pool: Vec<usize> = if heavy.is_empty() {
            (0..r.lets.len())
                .filter(|li| gemms[*li].is_none() && !checked.let_free[*li].is_empty())
                .collect()
        } else {
            heavy
        };
        let mut outer: Vec<usize> = (0..n)
            .filter(|i| !rebound.contains(&r.iters[*i].name))
            .filter(|i| pool.iter().all(|li| checked.let_free[*li].contains(i)))
            .collect();
        if pool.is_empty() {
            outer.clear();
        }
        // All iters outer but the innermost, which stays inner (an interchanged reduce's vector
        // loop); iters of size 1 that no heavy let reads (a convolution's batch) do not count:
        // a depthwise convolution's output column was otherwise outer too, and its 3-point
        // window row the vector loop (a 64-lane accumulator per output point).
        let unit = |i: usize| checked.iter_sizes[i].eval_with(&BTreeMap::new()).ok() == Some(1);
        if outer.len() == n || (outer.len() > 1 && (0..n).all(|i| outer.contains(&i) || unit(i))) {
            outer.pop();
        }
        // Pointwise lets that do not depend on some iter (a conv epilogue's batch, size 1 at
        // its outermost position) would leave that iter alone inner, the innermost memory axis
        // outer: scalar stores through a flat loop. Keep the innermost axis inner (the SIMD loop).
        if pointwise && n > 0 && outer.contains(&(n - 1)) {
            outer.retain(|i| *i != n - 1);
        }
        if !pointwise && short_rows(&outer, n, &checked, &pool) {
            outer.pop();
        }
        let mut has_gather = false;
        for l in &r.lets {
            visit(&l.expr, &mut |e| {
                has_gather |= matches!(e, Expr::Gather { .. })
            });
        }
        let mut em = Emitter {
            r,
            checked,
            outer,
            lets: Vec::new(),
            symbols: RefCell::new(BTreeSet::new()),
            fresh: 0,
            has_gather,
            body: String::new(),
            indent: 1,
            clamp_guards: false,
            params: BTreeSet::new(),
            fused_epilogue: false,
            streamed: Vec::new(),
            prefetch: Vec::new(),
            direct_block: None,
            notes: Vec::new(),
            scan_out: Vec::new(),
            gemm_out: None,
        };
        for (li, gemm) in gemms.into_iter().enumerate() {
            let kind = em.kind_of(&r.lets[li].expr);
            let inner = em.checked.let_free[li]
                .iter()
                .copied()
                .filter(|i| gemm.is_some() || !em.outer.contains(i))
                .collect();
            em.lets.push(LetInfo {
                kind,
                inner,
                has_reduce: contains_reduce(&r.lets[li].expr),
                gemm,
                local: false,
            });
        }
        em
    }

    /// Records a choice for [`EmittedRegion::notes`] (once).
    pub(super) fn note(&mut self, what: impl Into<String>) {
        let what = what.into();
        if !self.notes.contains(&what) {
            self.notes.push(what);
        }
    }

    pub(super) fn kind_of(&self, e: &Expr) -> Kind {
        let input = |n: &str| self.r.input(n).map(|i| i.dtype);
        let let_kind = |n: &str| {
            let li = self.r.lets.iter().position(|l| l.name == n)?;
            self.lets.get(li).map(|l| l.kind)
        };
        Kinds {
            input: &input,
            let_kind: &let_kind,
        }
        .of(e)
    }

    pub(super) fn operands_kind(&self, es: &[&Expr]) -> Kind {
        let input = |n: &str| self.r.input(n).map(|i| i.dtype);
        let let_kind = |n: &str| {
            let li = self.r.lets.iter().position(|l| l.name == n)?;
            self.lets.get(li).map(|l| l.kind)
        };
        Kinds {
            input: &input,
            let_kind: &let_kind,
        }
        .operands(es)
    }

    pub(super) fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.body.push_str("    ");
        }
        self.body.push_str(s);
        self.body.push('\n');
    }

    pub(super) fn fresh(&mut self, p: &str) -> String {
        self.fresh += 1;
        format!("{p}{}", self.fresh)
    }

    /// A size as C over symbol parameters (recording the symbols).
    pub(super) fn dim(&self, d: &Dim) -> String {
        self.symbols.borrow_mut().extend(d.symbols());
        cexpr::dim(d)
    }

    pub(super) fn axis(&self, e: &AxisExpr, scope: &Scope) -> String {
        cexpr::axis(e, &|n| match lookup(scope, n) {
            Some(v) => v.to_string(),
            None => {
                self.symbols.borrow_mut().insert(n.to_string());
                cexpr::sym(n)
            }
        })
    }

    pub(super) fn pred(&self, p: &Pred, scope: &Scope) -> String {
        cexpr::pred(p, &|n| match lookup(scope, n) {
            Some(v) => v.to_string(),
            None => {
                self.symbols.borrow_mut().insert(n.to_string());
                cexpr::sym(n)
            }
        })
    }

    pub(super) fn iter_var(i: usize) -> String {
        format!("i{i}")
    }

    pub(super) fn size_var(i: usize) -> String {
        format!("z{i}")
    }

    /// `buf[Σ var·stride]` over `iters` (row-major over their sizes), vars from `scope`.
    pub(super) fn flat_index(&self, iters: &[usize], scope: &Scope) -> String {
        if iters.is_empty() {
            return "0".into();
        }
        let mut s = String::new();
        for (k, i) in iters.iter().enumerate() {
            let name = &self.r.iters[*i].name;
            let v = lookup(scope, name)
                .map(str::to_string)
                .unwrap_or_else(|| Self::iter_var(*i));
            s = if k == 0 {
                v
            } else {
                format!("({s}) * {} + {v}", Self::size_var(*i))
            };
        }
        s
    }

    pub(super) fn let_ref(&self, li: usize, scope: &Scope) -> String {
        let info = &self.lets[li];
        if let Some((dl, e)) = &self.direct_block {
            if *dl == li {
                return e.clone();
            }
        }
        if let Some(&(_, _, oi)) = self.scan_out.iter().find(|s| s.0 == li) {
            return format!("out{oi}[{}]", self.flat_index(&info.inner, scope));
        }
        if (info.inner.is_empty() || info.local) && info.gemm.is_none() {
            format!("L{li}")
        } else {
            format!("L{li}[{}]", self.flat_index(&info.inner, scope))
        }
    }

    /// `in<k>[row-major index]` for input `tensor` at `map`; dimension `shift.0` is addressed by
    /// the C variable `shift.1` instead (a gather's checked position).
    pub(super) fn read(
        &self,
        tensor: &str,
        map: &[AxisExpr],
        scope: &Scope,
        shift: Option<(usize, &str)>,
    ) -> Result<(String, DType), CpuError> {
        let ii = self
            .r
            .inputs
            .iter()
            .position(|i| i.name == tensor)
            .ok_or_else(|| CpuError::Codegen {
                region: self.r.name.clone(),
                why: format!("read of unknown tensor `{tensor}`"),
            })?;
        let inp = &self.r.inputs[ii];
        let mut idx = "0".to_string();
        for (j, m) in map.iter().enumerate() {
            let a = match shift {
                Some((g, v)) if g == j => v.to_string(),
                _ => self.axis(m, scope),
            };
            idx = if j == 0 {
                a
            } else {
                format!("({idx}) * {} + {a}", self.dim(&inp.memref.shape[j].0))
            };
        }
        Ok((format!("in{ii}[{idx}]"), inp.dtype))
    }

    /// Fills [`Emitter::streamed`]: in rows form whose outer iters are the leading ones (an
    /// outer point's output elements are one contiguous row), the fp32 outputs of fp32 lets
    /// that may reach `DLC_STREAM_MIN_BYTES` (every size constant and the output that large, or
    /// a symbolic size: decided at run time).
    fn plan_streams(&mut self) {
        let n_outer = self.outer.len();
        if n_outer == 0 || self.outer != (0..n_outer).collect::<Vec<_>>() || self.has_gather {
            return;
        }
        let none = std::collections::BTreeMap::new();
        let elems: Option<i64> = self.checked.iter_sizes.iter().try_fold(1i64, |acc, d| {
            d.eval_with(&none).ok().map(|v| acc.saturating_mul(v))
        });
        if elems.is_some_and(|e| e.saturating_mul(4) < 16 << 20) {
            return;
        }
        for (y, yl) in self.r.yields.iter().enumerate() {
            let li = self.r.lets.iter().position(|l| l.name == yl.from);
            let out = self.r.outputs.iter().find(|o| o.name == yl.to);
            if let (Some(li), Some(o)) = (li, out) {
                if o.dtype == DType::F32 && self.lets[li].kind == Kind::Float {
                    self.streamed.push(y);
                }
            }
        }
    }

    /// Flat form: a scan let over every iter in order whose value a yield stores into an fp32
    /// output is scanned straight into that output ([`Emitter::scan_out`]; a 1-D cumsum over
    /// 2^20 points otherwise walks a 4 MiB buffer and copies it). Later reads of the let read
    /// the output, which holds the same values.
    fn plan_scan_outputs(&mut self) {
        let all: Vec<usize> = (0..self.r.iters.len()).collect();
        for (li, l) in self.r.lets.iter().enumerate() {
            let info = &self.lets[li];
            if !matches!(l.expr, Expr::Scan(_))
                || info.inner != all
                || info.kind != Kind::Float
                || info.local
                || info.gemm.is_some()
            {
                continue;
            }
            let Some(y) = self.r.yields.iter().position(|y| y.from == l.name) else {
                continue;
            };
            let to = &self.r.yields[y].to;
            let Some(oi) = self.r.outputs.iter().position(|o| &o.name == to) else {
                continue;
            };
            if self.r.outputs[oi].dtype == DType::F32 && !self.streamed.contains(&y) {
                self.scan_out.push((li, y, oi));
            }
        }
        if !self.scan_out.is_empty() {
            self.note("a scan written straight into its fp32 output (no buffer, no copy)");
        }
    }

    pub(super) fn emit_body(&mut self) -> Result<(), CpuError> {
        let n = self.r.iters.len();
        for i in 0..n {
            let d = self.dim(&self.checked.iter_sizes[i].clone());
            self.line(&format!("const int64_t {} = {d};", Self::size_var(i)));
        }
        self.line("int dlc_err = 0;");
        let gemms: Vec<usize> = (0..self.lets.len())
            .filter(|li| self.lets[*li].gemm.is_some())
            .collect();
        let owned = self.emit_gemm_buffers(&gemms);
        for li in &gemms {
            self.emit_contraction(*li)?;
        }
        if self.fused_epilogue {
            for li in &owned {
                self.line(&format!("free(L{li});"));
            }
            self.line("return dlc_err;");
            return Ok(());
        }
        self.plan_locals();
        if self.outer.is_empty() {
            self.plan_scan_outputs();
        }
        let buffered: Vec<usize> = (0..self.lets.len())
            .filter(|li| {
                let l = &self.lets[*li];
                !l.inner.is_empty()
                    && l.gemm.is_none()
                    && !l.local
                    && !self.scan_out.iter().any(|s| s.0 == *li)
            })
            .collect();
        if self.outer.is_empty() {
            self.alloc_buffers(&buffered);
            self.line("if (dlc_ok) {");
            self.indent += 1;
            self.emit_lets(true)?;
            self.indent -= 1;
            self.line("}");
            self.free_buffers(&buffered);
        } else {
            let total: Vec<String> = self.outer.iter().map(|i| Self::size_var(*i)).collect();
            self.line(&format!("const int64_t dlc_total = {};", total.join(" * ")));
            self.plan_streams();
            if !self.streamed.is_empty() {
                self.note("fp32 output rows staged per thread and written with non-temporal stores once the output reaches DLC_STREAM_MIN_BYTES (16 MiB)");
                let inner = self.prod(&self.inner_iters());
                self.line(&format!("const int64_t dlc_inner = {inner};"));
                self.line(
                    "const int dlc_stream = dlc_total * dlc_inner * 4 >= DLC_STREAM_MIN_BYTES;",
                );
            }
            self.plan_prefetch();
            if !self.prefetch.is_empty() {
                self.note(
                    "the first pointwise pass over a row prefetches the next rows of the inputs",
                );
            }
            self.line("#pragma omp parallel num_threads(dlc_nt) if(dlc_total > 1)");
            self.line("{");
            self.indent += 1;
            self.alloc_buffers(&buffered);
            self.line("#pragma omp for schedule(static)");
            self.line("for (int64_t dlc_o = 0; dlc_o < dlc_total; dlc_o++) {");
            self.indent += 1;
            self.line("if (!dlc_ok) continue;");
            self.line("int64_t dlc_q = dlc_o;");
            for i in self.outer.clone().iter().rev() {
                self.line(&format!(
                    "const int64_t {} = dlc_q % {}; dlc_q /= {};",
                    Self::iter_var(*i),
                    Self::size_var(*i),
                    Self::size_var(*i)
                ));
            }
            self.line("(void)dlc_q;");
            self.row_targets();
            self.prefetch_targets();
            self.emit_lets(false)?;
            self.indent -= 1;
            self.line("}");
            self.free_buffers(&buffered);
            self.indent -= 1;
            self.line("}");
        }
        for li in &owned {
            self.line(&format!("free(L{li});"));
        }
        self.line("return dlc_err;");
        Ok(())
    }

    /// The fused-epilogue choice and the contraction lets' result buffers (one check after
    /// every allocation: a failed one frees those that succeeded); returns the lets whose
    /// buffers were allocated. A region that is one contraction let yielded into an fp32
    /// output over its iters in order (a plain GEMM; iters of size 1 may be missing from the
    /// let, as a batch-1 convolution's) writes that output directly
    /// ([`Emitter::gemm_out`]): no buffer, no copy.
    fn emit_gemm_buffers(&mut self, gemms: &[usize]) -> Vec<usize> {
        if let &[li] = gemms {
            if self.block_epilogue_ok(li) {
                self.fused_epilogue = true;
                for (g, l) in self.lets.iter_mut().enumerate() {
                    l.local = g != li;
                }
                // the let over every iter but those of size 1 (a batch-1 convolution's): the
                // output's layout is the let's
                let sized: Vec<usize> = (0..self.r.iters.len())
                    .filter(|i| !self.checked.iter_sizes[*i].is_int(1))
                    .collect();
                let inner = &self.lets[li].inner;
                let same = inner.windows(2).all(|w| w[0] < w[1])
                    && sized.iter().all(|i| inner.contains(i));
                let oi = match (&self.r.lets[..], &self.r.yields[..]) {
                    ([l], [y]) if y.from == l.name && same => {
                        self.r.outputs.iter().position(|o| o.name == y.to)
                    }
                    _ => None,
                };
                self.gemm_out = oi.filter(|oi| self.r.outputs[*oi].dtype == DType::F32);
            }
        }
        let mut owned = Vec::new();
        for &li in gemms {
            if let Some(oi) = self.gemm_out {
                self.note("the contraction's result written straight into its fp32 output");
                let b = self.r.inputs.len() + oi;
                self.line(&format!("float *restrict L{li} = (float *)dlc_buf[{b}];"));
                continue;
            }
            let size: Vec<String> = self.lets[li]
                .inner
                .iter()
                .map(|i| Self::size_var(*i))
                .collect();
            let size = if size.is_empty() {
                "1".to_string()
            } else {
                size.join(" * ")
            };
            self.line(&format!(
                "float *restrict L{li} = (float *)dlc_alloc(4 * {size});"
            ));
            owned.push(li);
        }
        if !owned.is_empty() {
            let none: Vec<String> = owned.iter().map(|li| format!("!L{li}")).collect();
            let free: Vec<String> = owned.iter().map(|li| format!("free(L{li});")).collect();
            self.line(&format!(
                "if ({}) {{ {} return 2; }}",
                none.join(" || "),
                free.join(" ")
            ));
        }
        owned
    }
}
