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
//! result is the reference's bit for bit), and a reduce to a scalar is a vectorized horizontal
//! reduction (`omp simd reduction`, fp32 sums). In *flat* form (`O` empty: 1-D regions, global
//! reductions) each let is a whole array and its loop nest is `omp parallel for` over its
//! outermost iter. Values compute in their kind ([`crate::ir::region::kind`]): fp32 as `float`
//! (fp16/bf16 storage converted on load and store), i32 and bool as `int32_t`, i32/bool ops
//! through `double` exactly as the reference rounds them.

use super::contraction::{recognize, Contraction};
use super::CpuError;
use crate::codegen::cexpr;
use crate::ir::axis::AxisExpr;
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::kind::{const_value, Kind, Kinds};
use crate::ir::region::verify::{reduce_extents, verify, Checked};
use crate::ir::region::{BinaryFn, Expr, Pred, Reduce, Region, UnaryFn};
use crate::ir::tiny::ReduceOp;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// What the emitter made of one region.
#[derive(Clone, Debug, PartialEq)]
pub struct EmittedRegion {
    /// The C function.
    pub code: String,
    /// How its loops are organized: `rows(m)` (parallel over the named outer iters) or `flat`.
    pub form: String,
}

/// The C element type of a tensor of `dt`.
pub fn storage_type(dt: DType) -> &'static str {
    match dt {
        DType::F32 => "float",
        DType::F16 => "dlc_f16",
        DType::BF16 => "uint16_t",
        DType::I32 => "int32_t",
        DType::Bool => "uint8_t",
    }
}

fn kind_type(k: Kind) -> &'static str {
    match k {
        Kind::Float => "float",
        _ => "int32_t",
    }
}

/// `x` (a C value of kind `k`) as kind `to` (a widening: bool → i32 → fp32).
fn widen(x: &str, k: Kind, to: Kind) -> String {
    if k == to || to != Kind::Float {
        x.to_string()
    } else {
        format!("((float)({x}))")
    }
}

/// `x` (kind `k`) rounded to dtype `d`, as a value of `d`'s kind.
fn to_dtype(x: &str, k: Kind, d: DType) -> String {
    match (d, k) {
        (DType::F32, Kind::Float) => x.to_string(),
        (DType::F32, _) => format!("((float)({x}))"),
        (DType::F16, _) => format!("dlc_round_f16({})", widen(x, k, Kind::Float)),
        (DType::BF16, _) => format!("dlc_round_bf16({})", widen(x, k, Kind::Float)),
        (DType::I32, Kind::Float) => format!("dlc_wrap_i32((double)({x}))"),
        (DType::I32, _) => x.to_string(),
        (DType::Bool, _) => format!("((int32_t)(({x}) != 0))"),
    }
}

/// `x` (kind `k`) converted for a store into a tensor of `d`.
fn store(x: &str, k: Kind, d: DType) -> String {
    match d {
        DType::F16 => format!("dlc_st_f16({})", widen(x, k, Kind::Float)),
        DType::BF16 => format!("dlc_st_bf16({})", widen(x, k, Kind::Float)),
        DType::Bool => format!("((uint8_t)(({x}) != 0))"),
        _ => to_dtype(x, k, d),
    }
}

fn load(x: String, d: DType) -> String {
    match d {
        DType::F16 => format!("dlc_ld_f16({x})"),
        DType::BF16 => format!("dlc_ld_bf16({x})"),
        DType::Bool => format!("((int32_t)({x}))"),
        _ => x,
    }
}

/// A constant as a C value of kind `k` (`Float`: fp32; else an exact `double`).
fn constant(c: f64, k: Kind) -> String {
    let v = const_value(c);
    match k {
        Kind::Float => cexpr::float(v),
        _ => double_lit(v),
    }
}

fn double_lit(v: f64) -> String {
    if v.is_nan() {
        "((double)dlc_nan())".into()
    } else if v.is_infinite() {
        if v > 0.0 { "((double)dlc_inf())" } else { "(-(double)dlc_inf())" }.into()
    } else {
        format!("({v:?})")
    }
}

fn acc_type(d: DType) -> &'static str {
    kind_type(Kind::of(d))
}

fn init_lit(op: ReduceOp, init: Option<f64>, d: DType) -> String {
    let v = d.round(init.unwrap_or_else(|| op.identity(d)));
    match Kind::of(d) {
        Kind::Float => cexpr::float(v),
        _ if v == i32::MIN as f64 => "(-2147483647 - 1)".into(),
        _ => format!("{}", v as i64),
    }
}

/// One accumulation step `acc ∘ v` in dtype `d` (both already values of `d`).
fn fold(op: ReduceOp, d: DType, acc: &str, v: &str) -> String {
    let raw = match (Kind::of(d), op) {
        (Kind::Float, ReduceOp::Sum) => format!("({acc} + {v})"),
        (Kind::Float, ReduceOp::Prod) => format!("({acc} * {v})"),
        (Kind::Float, ReduceOp::Max) => format!("dlc_fmax({acc}, {v})"),
        (Kind::Float, ReduceOp::Min) => format!("dlc_fmin({acc}, {v})"),
        (Kind::I32, ReduceOp::Sum) => format!("dlc_iadd({acc}, {v})"),
        (Kind::I32, ReduceOp::Prod) => format!("dlc_imul({acc}, {v})"),
        (Kind::Bool, ReduceOp::Sum) => format!("((int32_t)(({acc} | {v}) != 0))"),
        (Kind::Bool, ReduceOp::Prod) => format!("((int32_t)({acc} && {v}))"),
        (_, ReduceOp::Max) => format!("dlc_smax({acc}, {v})"),
        (_, ReduceOp::Min) => format!("dlc_smin({acc}, {v})"),
    };
    match d {
        DType::F16 => format!("dlc_round_f16({raw})"),
        DType::BF16 => format!("dlc_round_bf16({raw})"),
        _ => raw,
    }
}

/// A float unary op. Transcendental functions compute in double and round to fp32, as the
/// reference does (an fp32 `erff` can differ by an ulp, which an fp16 store can turn into a
/// visible difference); they stay vectorized (libmvec has the double variants).
fn unary_float(f: UnaryFn, x: &str) -> String {
    let d = |name: &str| format!("((float){name}((double)({x})))");
    match f {
        UnaryFn::Neg => format!("(-{x})"),
        UnaryFn::Exp => d("exp"),
        UnaryFn::Exp2 => d("exp2"),
        UnaryFn::Log => d("log"),
        UnaryFn::Log2 => d("log2"),
        UnaryFn::Sqrt => format!("sqrtf({x})"),
        UnaryFn::Rsqrt => format!("((float)(1.0 / sqrt((double)({x}))))"),
        UnaryFn::Recip => format!("(1.0f / {x})"),
        UnaryFn::Relu => format!("dlc_relu({x})"),
        UnaryFn::Abs => format!("fabsf({x})"),
        UnaryFn::Erf => d("erf"),
        UnaryFn::Sigmoid => format!("((float)(1.0 / (1.0 + exp(-(double)({x})))))"),
        UnaryFn::Tanh => d("tanh"),
    }
}

fn unary_double(f: UnaryFn, x: &str) -> String {
    match f {
        UnaryFn::Neg => format!("(-{x})"),
        UnaryFn::Exp => format!("exp({x})"),
        UnaryFn::Exp2 => format!("exp2({x})"),
        UnaryFn::Log => format!("log({x})"),
        UnaryFn::Log2 => format!("log2({x})"),
        UnaryFn::Sqrt => format!("sqrt({x})"),
        UnaryFn::Rsqrt => format!("(1.0 / sqrt({x}))"),
        UnaryFn::Recip => format!("(1.0 / {x})"),
        UnaryFn::Relu => format!("({x} > 0.0 ? {x} : 0.0)"),
        UnaryFn::Abs => format!("fabs({x})"),
        UnaryFn::Erf => format!("erf({x})"),
        UnaryFn::Sigmoid => format!("(1.0 / (1.0 + exp(-{x})))"),
        UnaryFn::Tanh => format!("tanh({x})"),
    }
}

fn binary_float(f: BinaryFn, a: &str, b: &str) -> String {
    match f {
        BinaryFn::Add => format!("({a} + {b})"),
        BinaryFn::Sub => format!("({a} - {b})"),
        BinaryFn::Mul => format!("({a} * {b})"),
        BinaryFn::Div => format!("({a} / {b})"),
        BinaryFn::Idiv => format!("((float)trunc((double)({a}) / (double)({b})))"),
        BinaryFn::Max => format!("dlc_fmax({a}, {b})"),
        BinaryFn::Min => format!("dlc_fmin({a}, {b})"),
        BinaryFn::Pow => format!("((float)pow((double)({a}), (double)({b})))"),
        BinaryFn::Cmplt => format!("((int32_t)({a} < {b}))"),
        BinaryFn::Cmple => format!("((int32_t)({a} <= {b}))"),
        BinaryFn::Cmpeq => format!("((int32_t)({a} == {b}))"),
        BinaryFn::Cmpne => format!("((int32_t)({a} != {b}))"),
    }
}

/// An i32 or bool op: operands are `double`s, the result rounded to `k` as the reference does.
fn binary_int(f: BinaryFn, k: Kind, a: &str, b: &str) -> String {
    let round = |x: String| match k {
        Kind::Bool => format!("dlc_bool({x})"),
        _ => format!("dlc_wrap_i32({x})"),
    };
    match f {
        BinaryFn::Cmplt => format!("((int32_t)({a} < {b}))"),
        BinaryFn::Cmple => format!("((int32_t)({a} <= {b}))"),
        BinaryFn::Cmpeq => format!("((int32_t)({a} == {b}))"),
        BinaryFn::Cmpne => format!("((int32_t)({a} != {b}))"),
        BinaryFn::Mul => round(format!(
            "(double)dlc_imul(dlc_wrap_i32({a}), dlc_wrap_i32({b}))"
        )),
        BinaryFn::Idiv => round(format!(
            "(double)dlc_idiv(dlc_wrap_i32({a}), dlc_wrap_i32({b}))"
        )),
        BinaryFn::Add => round(format!("({a} + {b})")),
        BinaryFn::Sub => round(format!("({a} - {b})")),
        BinaryFn::Div => round(format!("({a} / {b})")),
        BinaryFn::Max => round(format!("fmax({a}, {b})")),
        BinaryFn::Min => round(format!("fmin({a}, {b})")),
        BinaryFn::Pow => round(format!("pow({a}, {b})")),
    }
}

/// Per let: its kind, its free iters that are not outer, its buffer.
struct LetInfo {
    kind: Kind,
    /// The iters its buffer is over: its free iters less the outer ones (all of them for a
    /// contraction, whose buffer is one array shared by all threads).
    inner: Vec<usize>,
    has_reduce: bool,
    /// Computed by the GEMM micro-kernel before the loop nests.
    gemm: Option<Contraction>,
}

struct Emitter<'a> {
    r: &'a Region,
    checked: Checked,
    /// `O`: outer iters (ascending).
    outer: Vec<usize>,
    lets: Vec<LetInfo>,
    symbols: RefCell<BTreeSet<String>>,
    fresh: usize,
    has_gather: bool,
    body: String,
    indent: usize,
}

type Scope = Vec<(String, String)>;

fn lookup<'s>(scope: &'s Scope, n: &str) -> Option<&'s str> {
    scope
        .iter()
        .rev()
        .find(|(m, _)| m == n)
        .map(|(_, v)| v.as_str())
}

fn contains_reduce(e: &Expr) -> bool {
    let mut hit = false;
    visit(e, &mut |x| hit |= matches!(x, Expr::Reduce(_)));
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

/// The C function `fname(void *const *dlc_buf, const int64_t *dlc_sym, int dlc_nt)` for region
/// `r`: `dlc_buf` holds its inputs then its outputs, `dlc_sym` the values of `symbols` (the
/// program's symbol table, extended with the symbols this region uses). Returns 0, 1 (a gather
/// index out of range) or 2 (out of memory).
pub fn emit_region(
    r: &Region,
    fname: &str,
    symbols: &mut Vec<String>,
) -> Result<EmittedRegion, CpuError> {
    let checked = verify(r).map_err(|e| CpuError::Codegen {
        region: r.name.clone(),
        why: e.to_string(),
    })?;
    let mut em = Emitter::new(r, checked);
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
        let _ = writeln!(code, "    const int64_t {} = dlc_sym[{idx}];", cexpr::sym(s));
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
    code.push_str(&em.body);
    code.push_str("}\n");
    let form = if em.outer.is_empty() {
        "flat".to_string()
    } else {
        let names: Vec<&str> = em.outer.iter().map(|i| r.iters[*i].name.as_str()).collect();
        format!("rows({})", names.join(","))
    };
    Ok(EmittedRegion { code, form })
}

impl<'a> Emitter<'a> {
    fn new(r: &'a Region, checked: Checked) -> Emitter<'a> {
        let n = r.iters.len();
        let input = |nm: &str| r.input(nm).map(|i| i.dtype);
        let no_let = |_: &str| None;
        let kinds = Kinds {
            input: &input,
            let_kind: &no_let,
        };
        let float_kind = |e: &Expr| kinds.of(e) == Kind::Float && !matches!(e, Expr::Const(_));
        let gemms: Vec<Option<Contraction>> = (0..r.lets.len())
            .map(|li| recognize(r, li, &checked.let_free[li], &float_kind))
            .collect();
        // Iters a reduce rebinds cannot be outer: a let read at a rebound value needs the
        // whole range of that iter inside one outer point.
        let mut rebound = BTreeSet::new();
        for (li, l) in r.lets.iter().enumerate() {
            if gemms[li].is_some() {
                continue;
            }
            visit(&l.expr, &mut |e| {
                if let Expr::Reduce(red) = e {
                    rebound.extend(red.axes.iter().cloned());
                }
            });
        }
        let heavy: Vec<usize> = (0..r.lets.len())
            .filter(|li| gemms[*li].is_none() && contains_reduce(&r.lets[*li].expr))
            .collect();
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
        if outer.len() == n {
            outer.pop();
        }
        let mut has_gather = false;
        for l in &r.lets {
            visit(&l.expr, &mut |e| has_gather |= matches!(e, Expr::Gather { .. }));
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
            });
        }
        em
    }

    fn kind_of(&self, e: &Expr) -> Kind {
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

    fn operands_kind(&self, es: &[&Expr]) -> Kind {
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

    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.body.push_str("    ");
        }
        self.body.push_str(s);
        self.body.push('\n');
    }

    fn fresh(&mut self, p: &str) -> String {
        self.fresh += 1;
        format!("{p}{}", self.fresh)
    }

    /// A size as C over symbol parameters (recording the symbols).
    fn dim(&self, d: &Dim) -> String {
        self.symbols.borrow_mut().extend(d.symbols());
        cexpr::dim(d)
    }

    fn axis(&self, e: &AxisExpr, scope: &Scope) -> String {
        cexpr::axis(e, &|n| match lookup(scope, n) {
            Some(v) => v.to_string(),
            None => {
                self.symbols.borrow_mut().insert(n.to_string());
                cexpr::sym(n)
            }
        })
    }

    fn pred(&self, p: &Pred, scope: &Scope) -> String {
        cexpr::pred(p, &|n| match lookup(scope, n) {
            Some(v) => v.to_string(),
            None => {
                self.symbols.borrow_mut().insert(n.to_string());
                cexpr::sym(n)
            }
        })
    }

    fn iter_var(i: usize) -> String {
        format!("i{i}")
    }

    fn size_var(i: usize) -> String {
        format!("z{i}")
    }

    /// `buf[Σ var·stride]` over `iters` (row-major over their sizes), vars from `scope`.
    fn flat_index(&self, iters: &[usize], scope: &Scope) -> String {
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

    fn let_ref(&self, li: usize, scope: &Scope) -> String {
        let info = &self.lets[li];
        if info.inner.is_empty() && info.gemm.is_none() {
            format!("L{li}")
        } else {
            format!("L{li}[{}]", self.flat_index(&info.inner, scope))
        }
    }

    /// `in<k>[row-major index]` for input `tensor` at `map`; dimension `shift.0` is addressed by
    /// the C variable `shift.1` instead (a gather's checked position).
    fn read(&self, tensor: &str, map: &[AxisExpr], scope: &Scope, shift: Option<(usize, &str)>) -> Result<(String, DType), CpuError> {
        let ii = self.r.inputs.iter().position(|i| i.name == tensor).ok_or_else(|| CpuError::Codegen {
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

    /// `e` as a C expression of kind `self.kind_of(e)`.
    fn expr(&mut self, e: &Expr, scope: &mut Scope) -> Result<String, CpuError> {
        Ok(match e {
            Expr::Const(c) => constant(*c, crate::ir::region::kind::const_kind(*c)),
            Expr::Let(n) => {
                let li = self.r.lets.iter().position(|l| &l.name == n).ok_or_else(|| {
                    CpuError::Codegen {
                        region: self.r.name.clone(),
                        why: format!("undefined let `{n}`"),
                    }
                })?;
                self.let_ref(li, scope)
            }
            Expr::Read { tensor, map } => {
                let (x, dt) = self.read(tensor, map, scope, None)?;
                load(x, dt)
            }
            Expr::Unary(f, x) => {
                let k = self.kind_of(x);
                let xs = self.expr(x, scope)?;
                match k {
                    Kind::Float => unary_float(*f, &xs),
                    Kind::I32 => format!("dlc_wrap_i32({})", unary_double(*f, &format!("((double){xs})"))),
                    Kind::Bool => format!("dlc_bool({})", unary_double(*f, &format!("((double){xs})"))),
                }
            }
            Expr::Binary(f, a, b) => self.binary(*f, a, b, scope)?,
            Expr::Select {
                pred,
                then,
                otherwise,
            } => {
                let k = self.operands_kind(&[then, otherwise]);
                let p = self.pred(pred, scope);
                let t = self.operand(then, k, scope)?;
                let o = self.operand(otherwise, k, scope)?;
                format!("({p} ? {t} : {o})")
            }
            Expr::Where(c, a, b) => {
                let k = self.operands_kind(&[a, b]);
                let cs = self.expr(c, scope)?;
                let t = self.operand(a, k, scope)?;
                let o = self.operand(b, k, scope)?;
                format!("(({cs}) != 0 ? {t} : {o})")
            }
            Expr::Reduce(red) => self.reduce_expr(red, scope)?,
            Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => {
                self.expr(operand, scope)?
            }
            Expr::Cast { to, x } => {
                let k = self.kind_of(x);
                let xs = self.expr(x, scope)?;
                to_dtype(&xs, k, *to)
            }
            Expr::Index(m) => format!("((int32_t)({}))", self.axis(m, scope)),
            Expr::Gather {
                tensor,
                map,
                axis,
                index,
            } => {
                let k = self.kind_of(index);
                let iv = self.expr(index, scope)?;
                let iv = match k {
                    Kind::Float => format!("dlc_trunc_i64((double)({iv}))"),
                    _ => format!("(int64_t)({iv})"),
                };
                let inp = self.r.input(tensor).ok_or_else(|| CpuError::Codegen {
                    region: self.r.name.clone(),
                    why: format!("gather from unknown tensor `{tensor}`"),
                })?;
                let size = inp.memref.shape.get(*axis).map(|d| self.dim(&d.0)).ok_or_else(|| {
                    CpuError::Codegen {
                        region: self.r.name.clone(),
                        why: format!("gather axis {axis} beyond `{tensor}`'s rank"),
                    }
                })?;
                let base = map.get(*axis).map(|m| self.axis(m, scope)).unwrap_or_default();
                let var = self.fresh("g");
                let (x, dt) = self.read(tensor, map, scope, Some((*axis, &var)))?;
                format!(
                    "({{ int64_t {var} = dlc_sat_add({base}, {iv}); if ({var} < 0 || {var} >= {size}) {{ dlc_err_flag(&dlc_err, 1); {var} = 0; }} {}; }})",
                    load(x, dt)
                )
            }
        })
    }

    /// `e` as a value of kind `k` (`Float`: a `float`; i32/bool: a `double`, see [`binary_int`]).
    fn operand(&mut self, e: &Expr, k: Kind, scope: &mut Scope) -> Result<String, CpuError> {
        if let Expr::Const(c) = e {
            return Ok(constant(*c, k));
        }
        let ek = self.kind_of(e);
        let x = self.expr(e, scope)?;
        Ok(match k {
            Kind::Float => widen(&x, ek, Kind::Float),
            _ => format!("((double)({x}))"),
        })
    }

    fn binary(&mut self, f: BinaryFn, a: &Expr, b: &Expr, scope: &mut Scope) -> Result<String, CpuError> {
        let mut k = self.operands_kind(&[a, b]);
        let strong_int = |e: &Expr| !matches!(e, Expr::Const(_)) && self.kind_of(e) != Kind::Float;
        if f.is_comparison() && k == Kind::Float && (strong_int(a) || strong_int(b)) {
            // The reference compares the raw values: an i32 beyond 2^24 against a float
            // compares exactly, in double.
            k = Kind::I32;
        }
        let x = self.operand(a, k, scope)?;
        let y = self.operand(b, k, scope)?;
        Ok(if k == Kind::Float {
            binary_float(f, &x, &y)
        } else {
            binary_int(f, k, &x, &y)
        })
    }

    fn extents(&self, red: &Reduce) -> Result<Vec<String>, CpuError> {
        let ext = reduce_extents(self.r, red, &self.checked.iter_sizes, "").map_err(|e| {
            CpuError::Codegen {
                region: self.r.name.clone(),
                why: e.to_string(),
            }
        })?;
        Ok(ext.iter().map(|d| self.dim(d)).collect())
    }

    /// A nested reduce as a statement expression.
    fn reduce_expr(&mut self, red: &Reduce, scope: &mut Scope) -> Result<String, CpuError> {
        let dtype = red.dtype.ok_or_else(|| CpuError::Codegen {
            region: self.r.name.clone(),
            why: "reduce without an accumulation dtype".into(),
        })?;
        let ext = self.extents(red)?;
        let acc = self.fresh("acc");
        let base = scope.len();
        let mut s = format!(
            "({{ {} {acc} = {}; ",
            acc_type(dtype),
            init_lit(red.op, red.init, dtype)
        );
        for (a, e) in red.axes.iter().zip(&ext) {
            let v = self.fresh("r");
            let _ = write!(s, "for (int64_t {v} = 0; {v} < {e}; {v}++) ");
            scope.push((a.clone(), v));
        }
        let k = self.kind_of(&red.body);
        let body = self.expr(&red.body, scope);
        scope.truncate(base);
        let v = to_dtype(&body?, k, dtype);
        let _ = write!(s, "{{ {acc} = {}; }} {acc}; }})", fold(red.op, dtype, &acc, &v));
        Ok(s)
    }

    fn emit_body(&mut self) -> Result<(), CpuError> {
        let n = self.r.iters.len();
        for i in 0..n {
            let d = self.dim(&self.checked.iter_sizes[i].clone());
            self.line(&format!("const int64_t {} = {d};", Self::size_var(i)));
        }
        self.line("int dlc_err = 0;");
        let gemms: Vec<usize> = (0..self.lets.len())
            .filter(|li| self.lets[*li].gemm.is_some())
            .collect();
        for li in &gemms {
            let size: Vec<String> = self.lets[*li].inner.iter().map(|i| Self::size_var(*i)).collect();
            let size = if size.is_empty() { "1".to_string() } else { size.join(" * ") };
            self.line(&format!("float *restrict L{li} = (float *)dlc_alloc(4 * {size});"));
            self.line(&format!("if (!L{li}) return 2;"));
        }
        for li in &gemms {
            self.emit_contraction(*li)?;
        }
        let buffered: Vec<usize> = (0..self.lets.len())
            .filter(|li| !self.lets[*li].inner.is_empty() && self.lets[*li].gemm.is_none())
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
            self.emit_lets(false)?;
            self.indent -= 1;
            self.line("}");
            self.free_buffers(&buffered);
            self.indent -= 1;
            self.line("}");
        }
        for li in &gemms {
            self.line(&format!("free(L{li});"));
        }
        self.line("return dlc_err;");
        Ok(())
    }

    /// `Σ var·stride` of `iters` in let `li`'s buffer (loop vars `i<k>`).
    fn offset_in(&self, li: usize, iters: &[usize]) -> String {
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
    fn decode(&mut self, q: &str, iters: &[usize]) {
        for i in iters.iter().rev() {
            self.line(&format!(
                "const int64_t {v} = {q} % {z}; {q} /= {z};",
                v = Self::iter_var(*i),
                z = Self::size_var(*i)
            ));
        }
        self.line(&format!("(void){q};"));
    }

    fn prod(&self, iters: &[usize]) -> String {
        let v: Vec<String> = iters.iter().map(|i| Self::size_var(*i)).collect();
        if v.is_empty() { "1".into() } else { v.join(" * ") }
    }

    /// Packs one operand of a contraction: `dst` panels of `width` (`DLC_MR`/`DLC_NR`) over
    /// `count` points of `iters`, `K` values each from `e` over the reduce axes.
    fn emit_pack(&mut self, dst: &str, width: &str, count: &str, iters: &[usize], e: &Expr, axes: &[(String, String)]) -> Result<(), CpuError> {
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

    fn emit_contraction(&mut self, li: usize) -> Result<(), CpuError> {
        let Some(c) = self.lets[li].gemm.clone() else {
            return Ok(());
        };
        let Expr::Reduce(red) = &self.r.lets[li].expr else {
            return Ok(());
        };
        let red = red.clone();
        let ext = self.extents(&red)?;
        let axes: Vec<(String, String)> = red.axes.iter().cloned().zip(ext.iter().cloned()).collect();
        self.line(&format!("// contraction `{}`: packed GEMM", self.r.lets[li].name));
        self.line("{");
        self.indent += 1;
        let (m, n, b) = (self.prod(&c.rows), self.prod(&c.cols), self.prod(&c.batch));
        let k = if ext.is_empty() { "1".to_string() } else { ext.join(" * ") };
        self.line(&format!("const int64_t cM = {m}, cN = {n}, cK = {k}, cB = {b};"));
        self.line("float *cA = (float *)dlc_alloc(4 * ((cM + DLC_MR - 1) / DLC_MR) * DLC_MR * cK);");
        self.line("float *cBp = (float *)dlc_alloc(4 * ((cN + DLC_NR - 1) / DLC_NR) * DLC_NR * cK);");
        self.line("int64_t *cro = (int64_t *)dlc_alloc(8 * cM), *cco = (int64_t *)dlc_alloc(8 * cN);");
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
            let off = if arr == "cro" { format!("{off} + {boff}") } else { off };
            self.line(&format!("{arr}[ci] = {off};"));
            self.indent -= 1;
            self.line("}");
        }
        self.line(&format!("dlc_gemm(cM, cN, cK, cA, cBp, L{li}, cro, cco, dlc_nt);"));
        self.indent -= 1;
        self.line("}");
        self.line("free(cA); free(cBp); free(cro); free(cco);");
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    fn alloc_buffers(&mut self, buffered: &[usize]) {
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
        self.line("if (!dlc_ok) dlc_err_flag(&dlc_err, 2);");
    }

    fn free_buffers(&mut self, buffered: &[usize]) {
        for li in buffered {
            self.line(&format!("free(L{li});"));
        }
    }

    /// The non-outer iters, in order: the output's inner loop nest.
    fn inner_iters(&self) -> Vec<usize> {
        (0..self.r.iters.len())
            .filter(|i| !self.outer.contains(i))
            .collect()
    }

    fn base_scope(&self) -> Scope {
        self.r
            .iters
            .iter()
            .enumerate()
            .map(|(i, it)| (it.name.clone(), Self::iter_var(i)))
            .collect()
    }

    fn emit_lets(&mut self, flat: bool) -> Result<(), CpuError> {
        let nl = self.r.lets.len();
        let inner_all = self.inner_iters();
        let mut done_yields = vec![false; self.r.yields.len()];
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
            let mut group = vec![li];
            let mut nx = li + 1;
            while nx < nl
                && !self.lets[nx].has_reduce
                && self.lets[nx].gemm.is_none()
                && self.lets[nx].inner == iters
            {
                group.push(nx);
                nx += 1;
            }
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
            self.open_loops(&iters, flat, true)?;
            for g in &group {
                let x = self.expr(&self.r.lets[*g].expr.clone(), &mut scope)?;
                let k = self.kind_of(&self.r.lets[*g].expr.clone());
                let target = self.let_ref(*g, &scope);
                let v = widen(&x, k, self.lets[*g].kind);
                self.line(&format!("{target} = {v};"));
            }
            for y in &fused {
                self.emit_yield_store(*y, &scope);
                done_yields[*y] = true;
            }
            self.close_loops(iters.len());
            li = nx;
        }
        for (y, done) in done_yields.iter().enumerate() {
            if !done {
                let scope = self.base_scope();
                self.open_loops(&inner_all, flat, true)?;
                self.emit_yield_store(y, &scope);
                self.close_loops(inner_all.len());
            }
        }
        Ok(())
    }

    fn emit_yield_store(&mut self, y: usize, scope: &Scope) {
        let yl = &self.r.yields[y];
        let Some(li) = self.r.lets.iter().position(|l| l.name == yl.from) else {
            return;
        };
        let Some(oi) = self.r.outputs.iter().position(|o| o.name == yl.to) else {
            return;
        };
        let all: Vec<usize> = (0..self.r.iters.len()).collect();
        let idx = self.flat_index(&all, scope);
        let v = self.let_ref(li, scope);
        let st = store(&v, self.lets[li].kind, self.r.outputs[oi].dtype);
        self.line(&format!("out{oi}[{idx}] = {st};"));
    }

    /// Opens one loop per iter of `iters` (loop vars `i<k>`); in flat form the outermost is an
    /// `omp parallel for`, the innermost an `omp simd` loop when `simd`.
    fn open_loops(&mut self, iters: &[usize], flat: bool, simd: bool) -> Result<(), CpuError> {
        let n = iters.len();
        for (k, i) in iters.iter().enumerate() {
            let v = Self::iter_var(*i);
            let z = Self::size_var(*i);
            if flat && k == 0 {
                let rest: Vec<String> = iters.iter().map(|j| Self::size_var(*j)).collect();
                self.line(&format!(
                    "#pragma omp parallel for num_threads(dlc_nt) schedule(static) if({} >= 4096)",
                    rest.join(" * ")
                ));
            } else if simd && k + 1 == n && !self.has_gather {
                self.line("#pragma omp simd");
            }
            self.line(&format!("for (int64_t {v} = 0; {v} < {z}; {v}++) {{"));
            self.indent += 1;
        }
        Ok(())
    }

    fn close_loops(&mut self, n: usize) {
        for _ in 0..n {
            self.indent -= 1;
            self.line("}");
        }
    }

    fn emit_reduce_let(&mut self, li: usize, flat: bool) -> Result<(), CpuError> {
        let expr = self.r.lets[li].expr.clone();
        let inner = self.lets[li].inner.clone();
        let lk = self.lets[li].kind;
        let mut scope = self.base_scope();
        match &expr {
            Expr::Reduce(red) if !flat && !inner.is_empty() => {
                // Interchanged: reduce axes outside, the vector loop over the free iters inside.
                let dtype = red.dtype.ok_or_else(|| CpuError::Codegen {
                    region: self.r.name.clone(),
                    why: "reduce without an accumulation dtype".into(),
                })?;
                let init = init_lit(red.op, red.init, dtype);
                self.open_loops(&inner, false, true)?;
                let t = self.let_ref(li, &scope);
                self.line(&format!("{t} = {init};"));
                self.close_loops(inner.len());
                let ext = self.extents(red)?;
                for (a, e) in red.axes.iter().zip(&ext) {
                    let v = self.fresh("r");
                    self.line(&format!("for (int64_t {v} = 0; {v} < {e}; {v}++) {{"));
                    self.indent += 1;
                    scope.push((a.clone(), v));
                }
                // The free iters keep their own loop vars: shadowing by reduce axes cannot
                // reach them (a free iter is never a reduce axis of its own let).
                self.open_loops(&inner, false, true)?;
                let k = self.kind_of(&red.body);
                let body = self.expr(&red.body, &mut scope)?;
                let v = to_dtype(&body, k, dtype);
                let t = self.let_ref(li, &scope);
                let f = fold(red.op, dtype, &t, &v);
                self.line(&format!("{t} = {f};"));
                self.close_loops(inner.len());
                self.close_loops(red.axes.len());
            }
            Expr::Reduce(red) if inner.is_empty() => {
                // A scalar per point: a vectorized horizontal reduction for fp32 sums.
                let dtype = red.dtype.ok_or_else(|| CpuError::Codegen {
                    region: self.r.name.clone(),
                    why: "reduce without an accumulation dtype".into(),
                })?;
                let acc = self.fresh("acc");
                let ty = acc_type(dtype);
                self.line(&format!("{ty} {acc} = {};", init_lit(red.op, red.init, dtype)));
                let ext = self.extents(red)?;
                let na = red.axes.len();
                for (j, (a, e)) in red.axes.iter().zip(&ext).enumerate() {
                    let v = self.fresh("r");
                    if j + 1 == na && dtype == DType::F32 && !self.has_gather {
                        match red.op {
                            ReduceOp::Sum => self.line(&format!("#pragma omp simd reduction(+:{acc})")),
                            ReduceOp::Prod => self.line(&format!("#pragma omp simd reduction(*:{acc})")),
                            _ => {}
                        }
                    }
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
}
