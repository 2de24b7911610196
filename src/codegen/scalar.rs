//! Region expressions → GPU IR statements: the scalar code every template shares. A template
//! binds the region's axes to C expressions (thread and tile indices), may *provide* lets it
//! computes itself (a contraction's accumulator, a row reduction's cooperative result), and asks
//! for let values; the [`Emitter`] writes the statements that compute them, following the
//! region semantics (module doc of `crate::ir::region`):
//!
//! - a let is computed where it is first needed and reused while its free axes keep their
//!   binding; inside a `reduce` that rebinds one of its free axes it is recomputed at the
//!   rebound value (the reference's dynamic scoping);
//! - `select` / `where` evaluate only the taken branch (an `if`, or `?:` when both branches
//!   need no statements);
//! - values are fp32, i32 or bool ([`Kind`]); ops compute in the join of their operands' kinds,
//!   i32 arithmetic wraps, `cast` rounds (`dlc_round_f16`), reductions round value and
//!   accumulator to their dtype at every step, and `yield` converts to the output's dtype.

use super::cexpr::{self, float};
use super::gpu::{CType, Div, Stmt, Unroll};
use super::CodegenError;
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::kind::{Kind, Kinds};
use crate::ir::region::verify::{reduce_extents, verify};
use crate::ir::region::{AxisExpr, BinaryFn, Expr, Reduce, Region, UnaryFn};
use crate::ir::tiny::ReduceOp;
use std::collections::{BTreeMap, BTreeSet};

/// A computed value: C expression text and its kind.
#[derive(Clone, Debug, PartialEq)]
pub struct Val {
    /// The C expression computing the value.
    pub code: String,
    /// The kind (precision class) it is computed in; [`ctype`] gives its C type.
    pub kind: Kind,
}

/// The C type a kind computes in.
pub fn ctype(k: Kind) -> CType {
    match k {
        Kind::Float => CType::F32,
        Kind::I32 => CType::I32,
        Kind::Bool => CType::Bool,
    }
}

/// `v` converted to kind `to`.
pub fn convert(v: &Val, to: Kind) -> String {
    match (v.kind, to) {
        (a, b) if a == b => v.code.clone(),
        (Kind::Bool, Kind::Float) => format!("({} ? 1.0f : 0.0f)", v.code),
        (Kind::Bool, Kind::I32) => format!("({} ? 1 : 0)", v.code),
        (Kind::I32, Kind::Float) => format!("((float){})", v.code),
        (Kind::Float, Kind::I32) => format!("dlc_cvt<int>({})", v.code),
        (_, Kind::Bool) => format!("({} != 0)", v.code),
        _ => v.code.clone(),
    }
}

/// `v` as the storage type of `dt` (what a `yield` writes).
pub fn store_value(v: &Val, dt: DType) -> String {
    match dt {
        DType::I32 => convert(v, Kind::I32),
        DType::Bool => convert(v, Kind::Bool),
        DType::F32 => convert(v, Kind::Float),
        DType::F16 => format!("dlc_cvt<__half>({})", convert(v, Kind::Float)),
        DType::BF16 => format!("dlc_cvt<__nv_bfloat16>({})", convert(v, Kind::Float)),
    }
}

#[derive(Default)]
struct Scope {
    axes: BTreeMap<String, String>,
    memo: BTreeMap<String, Val>,
    /// The block statements of this scope go to.
    block: usize,
}

/// Writes the statements computing region values; see the module doc.
pub struct Emitter<'a> {
    /// The region whose values are emitted.
    pub region: &'a Region,
    lets: BTreeMap<&'a str, &'a Expr>,
    free: BTreeMap<String, BTreeSet<String>>,
    kinds: BTreeMap<String, Kind>,
    /// Extents of the region's iteration axes, in order.
    pub iter_sizes: Vec<Dim>,
    /// Input name → (C parameter, shape as C sizes).
    inputs: BTreeMap<String, (String, Vec<String>, DType)>,
    scopes: Vec<Scope>,
    blocks: Vec<Vec<Stmt>>,
    fresh: usize,
    prefix: String,
    /// Reads already in registers: (C parameter, C offset) → the register holding that element
    /// (a vector load's lane). Keyed by the offset's spelling, which names the scope's
    /// variables, so a read inside a reduce that rebinds one of its axes never matches.
    preloaded: BTreeMap<(String, String), String>,
}

impl<'a> Emitter<'a> {
    /// An emitter for `region`, whose input `i` is the C parameter `in{i}`; fresh names start
    /// with `prefix`.
    pub fn new(region: &'a Region, prefix: &str) -> Result<Emitter<'a>, CodegenError> {
        let checked = verify(region).map_err(|e| CodegenError::Unsupported {
            kernel: region.name.clone(),
            why: format!("the region does not verify: {e}"),
        })?;
        let mut free = BTreeMap::new();
        for (l, f) in region.lets.iter().zip(&checked.let_free) {
            let names: BTreeSet<String> = f.iter().map(|i| region.iters[*i].name.clone()).collect();
            free.insert(l.name.clone(), names);
        }
        let input_dt = |n: &str| region.input(n).map(|i| i.dtype);
        let mut kinds: BTreeMap<String, Kind> = BTreeMap::new();
        for l in &region.lets {
            let k = {
                let lk = |n: &str| kinds.get(n).copied();
                Kinds {
                    input: &input_dt,
                    let_kind: &lk,
                }
                .of(&l.expr)
            };
            kinds.insert(l.name.clone(), k);
        }
        let inputs = region
            .inputs
            .iter()
            .enumerate()
            .map(|(i, inp)| {
                let shape = inp.memref.shape.iter().map(|s| cexpr::dim(&s.0)).collect();
                (inp.name.clone(), (format!("in{i}"), shape, inp.dtype))
            })
            .collect();
        Ok(Emitter {
            region,
            lets: region
                .lets
                .iter()
                .map(|l| (l.name.as_str(), &l.expr))
                .collect(),
            free,
            kinds,
            iter_sizes: checked.iter_sizes,
            inputs,
            scopes: vec![Scope::default()],
            blocks: vec![Vec::new()],
            fresh: 0,
            prefix: prefix.to_string(),
            preloaded: BTreeMap::new(),
        })
    }

    fn err(&self, why: impl Into<String>) -> CodegenError {
        CodegenError::Unsupported {
            kernel: self.region.name.clone(),
            why: why.into(),
        }
    }

    /// A fresh C name `{prefix}{base}{n}`.
    pub fn fresh(&mut self, base: &str) -> String {
        self.fresh += 1;
        format!("{}{}_{}", self.prefix, cexpr::ident(base), self.fresh)
    }

    /// The kind of let `name`.
    pub fn let_kind(&self, name: &str) -> Kind {
        self.kinds.get(name).copied().unwrap_or(Kind::Float)
    }

    /// The iters let `name` depends on.
    pub fn let_free(&self, name: &str) -> BTreeSet<String> {
        self.free.get(name).cloned().unwrap_or_default()
    }

    /// Opens a scope (axis bindings and computed lets made in it end with it).
    pub fn push_scope(&mut self) {
        let block = self.blocks.len() - 1;
        self.scopes.push(Scope {
            block,
            ..Scope::default()
        });
    }

    /// Closes the innermost scope.
    pub fn pop_scope(&mut self) {
        self.scopes.pop();
    }

    /// Binds axis `axis` to the C expression `code` in the innermost scope.
    pub fn bind(&mut self, axis: &str, code: impl Into<String>) {
        if let Some(s) = self.scopes.last_mut() {
            s.axes.insert(axis.to_string(), code.into());
        }
    }

    /// Makes let `name` available as `code` in the innermost scope.
    pub fn provide(&mut self, name: &str, code: impl Into<String>) {
        let kind = self.let_kind(name);
        if let Some(s) = self.scopes.last_mut() {
            s.memo.insert(
                name.to_string(),
                Val {
                    code: code.into(),
                    kind,
                },
            );
        }
    }

    /// Starts collecting statements into a new block.
    pub fn open(&mut self) {
        self.blocks.push(Vec::new());
    }

    /// Ends the innermost block and returns its statements.
    pub fn close(&mut self) -> Vec<Stmt> {
        if self.blocks.len() > 1 {
            self.blocks.pop().unwrap_or_default()
        } else {
            std::mem::take(&mut self.blocks[0])
        }
    }

    /// Appends a statement to the innermost block.
    pub fn emit(&mut self, s: Stmt) {
        if let Some(b) = self.blocks.last_mut() {
            b.push(s);
        }
    }

    /// A block assigning `e`, as fp32, to `place`: computed in a new scope that `setup` binds
    /// (axes, provided lets).
    pub fn assign_f32(
        &mut self,
        place: &str,
        e: &Expr,
        setup: impl FnOnce(&mut Self),
    ) -> Result<Vec<Stmt>, CodegenError> {
        self.open();
        self.push_scope();
        setup(self);
        let v = self.value(e);
        self.pop_scope();
        if let Ok(v) = &v {
            self.emit(Stmt::Assign {
                place: place.to_string(),
                value: convert(v, Kind::Float),
            });
        }
        let block = self.close();
        v.map(|_| block)
    }

    /// The C spelling of axis (or symbol) `n` in the current scope.
    pub fn name(&self, n: &str) -> String {
        for s in self.scopes.iter().rev() {
            if let Some(c) = s.axes.get(n) {
                return c.clone();
            }
        }
        cexpr::sym(n)
    }

    /// An index expression in the current scope.
    pub fn axis(&self, e: &AxisExpr) -> String {
        cexpr::axis(e, &|n| self.name(n))
    }

    /// The C parameter, element type and row-major offset (C, in the current scope) of `map`
    /// into input `tensor`.
    pub fn read_offset(
        &self,
        tensor: &str,
        map: &[AxisExpr],
    ) -> Result<(String, DType, String), CodegenError> {
        let (param, shape, dt) = self
            .inputs
            .get(tensor)
            .ok_or_else(|| self.err(format!("read of unknown input `{tensor}`")))?;
        let idx: Vec<String> = map.iter().map(|a| self.axis(a)).collect();
        Ok((param.clone(), *dt, horner(&idx, shape)))
    }

    /// From now on, a read of `param` at offset `off` (both C, as [`Self::read_offset`] spells
    /// them) is the register `reg`; [`Self::forget_preloaded`] ends it.
    pub fn preload(&mut self, param: &str, off: &str, reg: impl Into<String>) {
        self.preloaded
            .insert((param.to_string(), off.to_string()), reg.into());
    }

    /// Ends every [`Self::preload`] (the registers go out of scope).
    pub fn forget_preloaded(&mut self) {
        self.preloaded.clear();
    }

    /// The row-major offset of the current point in the output (the iters' sizes).
    pub fn output_offset(&self) -> String {
        let idx: Vec<String> = self
            .region
            .iters
            .iter()
            .map(|i| self.name(&i.name))
            .collect();
        let sizes: Vec<String> = self.iter_sizes.iter().map(cexpr::dim).collect();
        horner(&idx, &sizes)
    }

    /// The value of let `name` at the current point.
    pub fn let_value(&mut self, name: &str) -> Result<Val, CodegenError> {
        let free = self.let_free(name);
        // Innermost scope first; a memo is valid while no inner scope rebinds a free axis.
        let mut rebound = false;
        for s in self.scopes.iter().rev() {
            if let Some(v) = s.memo.get(name) {
                if !rebound {
                    return Ok(v.clone());
                }
            }
            if s.axes.keys().any(|a| free.contains(a)) {
                rebound = true;
            }
        }
        let e = *self
            .lets
            .get(name)
            .ok_or_else(|| self.err(format!("unknown let `{name}`")))?;
        // Hoisted: computed in the innermost scope that binds one of its free axes (a let is
        // defined at every point of its free axes, so computing it outside a branch or a
        // loop that does not move them is exact), and memoized there — but not above a scope
        // that holds a let it reads: a template's provided value (a row's cooperative sum, a
        // tile's accumulator) would be folded again, serially, where it is not visible.
        let mut deps = BTreeSet::new();
        self.let_deps(e, &mut deps);
        let t = (0..self.scopes.len())
            .rev()
            .find(|&i| {
                let s = &self.scopes[i];
                s.axes.keys().any(|a| free.contains(a)) || s.memo.keys().any(|m| deps.contains(m))
            })
            .unwrap_or(0);
        let inner_scopes = self.scopes.split_off(t + 1);
        let inner_blocks = self.blocks.split_off(self.scopes[t].block + 1);
        let v = self.value(e).map(|v| self.materialize(name, v));
        if let Ok(v) = &v {
            self.scopes[t].memo.insert(name.to_string(), v.clone());
        }
        self.scopes.extend(inner_scopes);
        self.blocks.extend(inner_blocks);
        v
    }

    /// The lets `e` reads, transitively through the definitions of those not memoized (a
    /// memoized let is read as its value, whatever it was computed from).
    fn let_deps(&self, e: &Expr, out: &mut BTreeSet<String>) {
        if let Expr::Let(n) = e {
            let memoized = self.scopes.iter().any(|s| s.memo.contains_key(n));
            if out.insert(n.clone()) && !memoized {
                if let Some(d) = self.lets.get(n.as_str()) {
                    self.let_deps(d, out);
                }
            }
        }
        for c in crate::ir::region::verify::children(e) {
            self.let_deps(c, out);
        }
    }

    /// Binds `v` to a fresh `const` variable unless it is a name or a literal already.
    pub fn materialize(&mut self, base: &str, v: Val) -> Val {
        if is_atom(&v.code) {
            return v;
        }
        let name = self.fresh(base);
        self.emit(Stmt::Let {
            ty: ctype(v.kind),
            name: name.clone(),
            value: v.code,
            mutable: false,
        });
        Val {
            code: name,
            kind: v.kind,
        }
    }

    fn kinds_of(&self, es: &[&Expr]) -> Kind {
        let input_dt = |n: &str| self.region.input(n).map(|i| i.dtype);
        let lk = |n: &str| self.kinds.get(n).copied();
        Kinds {
            input: &input_dt,
            let_kind: &lk,
        }
        .operands(es)
    }

    /// A constant in kind `k`.
    fn constant(c: f64, k: Kind) -> String {
        match k {
            Kind::Float => float(c),
            Kind::I32 => {
                let v = crate::ir::dtype::wrap_i32(c);
                if v == i32::MIN {
                    "(-2147483647 - 1)".into()
                } else if v < 0 {
                    format!("({v})")
                } else {
                    v.to_string()
                }
            }
            Kind::Bool => (if c != 0.0 { "true" } else { "false" }).into(),
        }
    }

    /// The value of `e` at the current point (statements go to the innermost block).
    pub fn value(&mut self, e: &Expr) -> Result<Val, CodegenError> {
        Ok(match e {
            Expr::Const(c) => {
                let k = crate::ir::region::kind::const_kind(*c);
                Val {
                    code: Self::constant(*c, k),
                    kind: k,
                }
            }
            Expr::Let(n) => self.let_value(n)?,
            Expr::Read { tensor, map } => {
                let (param, dt, off) = self.read_offset(tensor, map)?;
                match self.preloaded.get(&(param.clone(), off.clone())) {
                    Some(reg) => element(reg.clone(), dt),
                    None => load(&param, dt, &off),
                }
            }
            Expr::Gather {
                tensor,
                map,
                axis,
                index,
            } => {
                let iv = self.value(index)?;
                let i = convert(&iv, Kind::I32);
                let offs = self.axis(&map[*axis]);
                let (param, shape, dt) = self
                    .inputs
                    .get(tensor)
                    .cloned()
                    .ok_or_else(|| self.err(format!("gather of unknown input `{tensor}`")))?;
                let idx: Vec<String> = map
                    .iter()
                    .enumerate()
                    .map(|(d, a)| {
                        if d == *axis {
                            format!("({offs} + {i})")
                        } else {
                            self.axis(a)
                        }
                    })
                    .collect();
                load(&param, dt, &horner(&idx, &shape))
            }
            Expr::Index(a) => Val {
                code: self.axis(a),
                kind: Kind::I32,
            },
            Expr::Cast { to, x } => {
                let v = self.value(x)?;
                let code = match to {
                    DType::F16 => format!("dlc_round_f16({})", convert(&v, Kind::Float)),
                    DType::BF16 => format!("dlc_round_bf16({})", convert(&v, Kind::Float)),
                    DType::F32 => convert(&v, Kind::Float),
                    DType::I32 => convert(&v, Kind::I32),
                    DType::Bool => convert(&v, Kind::Bool),
                };
                Val {
                    code,
                    kind: Kind::of(*to),
                }
            }
            Expr::Unary(f, x) => {
                let v = self.value(x)?;
                unary(*f, &v)
            }
            Expr::Binary(f, a, b) => {
                let k = self.kinds_of(&[a, b]);
                let va = self.value(a)?;
                let vb = self.value(b)?;
                binary(*f, k, &va, &vb)
            }
            Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => {
                self.value(operand)?
            }
            Expr::Where(c, a, b) => {
                let k = self.kinds_of(&[a, b]);
                let vc = self.value(c)?;
                let cond = convert(&vc, Kind::Bool);
                self.branch(cond, Div::Thread, k, a, b)?
            }
            Expr::Select {
                pred,
                then,
                otherwise,
            } => {
                let k = self.kinds_of(&[then, otherwise]);
                let cond = cexpr::pred(pred, &|n| self.name(n));
                self.branch(cond, Div::Thread, k, then, otherwise)?
            }
            Expr::Reduce(r) => self.reduce(r)?,
            // A scan's value exists only inside the scan template, which binds the running
            // accumulator as the scan let's value (`templates::scan`).
            Expr::Scan(_) => {
                return Err(CodegenError::Unsupported {
                    kernel: self.region.name.clone(),
                    why: "a scan outside the scan template".into(),
                })
            }
        })
    }

    fn arm(&mut self, e: &Expr, k: Kind) -> Result<(Vec<Stmt>, String), CodegenError> {
        self.open();
        self.push_scope();
        let v = self.value(e);
        self.pop_scope();
        let stmts = self.close();
        Ok((stmts, convert(&v?, k)))
    }

    fn branch(
        &mut self,
        cond: String,
        div: Div,
        k: Kind,
        a: &Expr,
        b: &Expr,
    ) -> Result<Val, CodegenError> {
        let (sa, va) = self.arm(a, k)?;
        let (sb, vb) = self.arm(b, k)?;
        if sa.is_empty() && sb.is_empty() {
            return Ok(Val {
                code: format!("({cond} ? {va} : {vb})"),
                kind: k,
            });
        }
        let out = self.fresh("sel");
        self.emit(Stmt::Let {
            ty: ctype(k),
            name: out.clone(),
            value: Self::constant(0.0, k),
            mutable: true,
        });
        let mut then = sa;
        then.push(Stmt::Assign {
            place: out.clone(),
            value: va,
        });
        let mut otherwise = sb;
        otherwise.push(Stmt::Assign {
            place: out.clone(),
            value: vb,
        });
        self.emit(Stmt::If {
            cond,
            div,
            then,
            otherwise,
        });
        Ok(Val { code: out, kind: k })
    }

    /// The extents of `r`'s axes as C sizes.
    pub fn reduce_extents(&self, r: &Reduce) -> Result<Vec<Dim>, CodegenError> {
        reduce_extents(self.region, r, &self.iter_sizes, &self.region.name)
            .map_err(|e| self.err(e.to_string()))
    }

    /// The accumulator's initial value and kind.
    pub fn reduce_init(r: &Reduce) -> (String, Kind) {
        let dt = r.dtype.unwrap_or(DType::F32);
        let k = Kind::of(dt);
        let init = r.init.unwrap_or_else(|| identity(r.op, dt));
        (Self::constant(init, k), k)
    }

    /// `acc ⊕ v` in `r`'s dtype (value and result rounded to it).
    pub fn fold(r: &Reduce, acc: &str, v: &Val) -> String {
        let dt = r.dtype.unwrap_or(DType::F32);
        let k = Kind::of(dt);
        let x = round_to(dt, &convert(v, k));
        let combined = match (r.op, k) {
            (ReduceOp::Sum, Kind::Float) => format!("{acc} + {x}"),
            (ReduceOp::Prod, Kind::Float) => format!("{acc} * {x}"),
            (ReduceOp::Max, Kind::Float) => format!("dlc_max({acc}, {x})"),
            (ReduceOp::Min, Kind::Float) => format!("dlc_min({acc}, {x})"),
            (ReduceOp::Sum, Kind::I32) => format!("dlc_iadd({acc}, {x})"),
            (ReduceOp::Prod, Kind::I32) => format!("dlc_imul({acc}, {x})"),
            (ReduceOp::Max, _) => format!("({x} > {acc} ? {x} : {acc})"),
            (ReduceOp::Min, _) => format!("({x} < {acc} ? {x} : {acc})"),
            (ReduceOp::Sum, Kind::Bool) => format!("({acc} || {x})"),
            (ReduceOp::Prod, Kind::Bool) => format!("({acc} && {x})"),
        };
        round_to(dt, &combined)
    }

    /// A reduction as nested loops at the current point.
    fn reduce(&mut self, r: &Reduce) -> Result<Val, CodegenError> {
        let (init, k) = Self::reduce_init(r);
        let acc = self.fresh("acc");
        self.emit(Stmt::Let {
            ty: ctype(k),
            name: acc.clone(),
            value: init,
            mutable: true,
        });
        let dims = self.reduce_extents(r)?;
        let unrolls = fold_unrolls(&dims);
        let extents: Vec<String> = dims.iter().map(cexpr::dim).collect();
        let vars: Vec<String> = r.axes.iter().map(|a| self.fresh(a)).collect();
        self.open();
        self.push_scope();
        for (a, v) in r.axes.iter().zip(&vars) {
            self.bind(a, v.clone());
        }
        let v = self.value(&r.body);
        self.pop_scope();
        let v = v?;
        self.emit(Stmt::Assign {
            place: acc.clone(),
            value: Self::fold(r, &acc, &v),
        });
        let mut body = self.close();
        for ((v, e), unroll) in vars.iter().zip(&extents).zip(unrolls).rev() {
            body = vec![Stmt::For {
                var: v.clone(),
                start: "0".into(),
                end: e.clone(),
                step: "1".into(),
                unroll,
                div: Div::Block,
                body,
            }];
        }
        for s in body {
            self.emit(s);
        }
        Ok(Val { code: acc, kind: k })
    }
}

/// Iterations of a serial fold nest whose loads are in flight together: the innermost loops
/// of constant trip count are unrolled fully while their product stays within it, the next
/// one by what is left, the outer ones not at all. The compiler left alone unrolls a long
/// constant loop deeply (a 1×1 convolution's 256-step fold: 96 registers, 40 at 8) and fully
/// a window of taps (5×5: 64 registers, 29 with the outer loop kept), past the registers the
/// plan prices ([`crate::plan::space::BASE_REGS`] per thread for a pointwise kernel).
pub const FOLD_UNROLL: u64 = 8;

/// The unroll of each loop of a fold nest over `extents` (trip counts, outermost first; a
/// symbolic one is not a constant trip count).
fn fold_unrolls(extents: &[Dim]) -> Vec<Unroll> {
    let mut left = FOLD_UNROLL;
    let mut out: Vec<Unroll> = extents
        .iter()
        .rev()
        .map(|e| match e.as_int().and_then(|t| u64::try_from(t).ok()) {
            Some(t) if t <= left => {
                left /= t.max(1);
                Unroll::Full
            }
            _ if left >= 2 => {
                let by = left as u32;
                left = 1;
                Unroll::By(by)
            }
            _ => Unroll::Never,
        })
        .collect();
    out.reverse();
    out
}

/// The neutral element of `op` in `dt`.
pub fn identity(op: ReduceOp, dt: DType) -> f64 {
    match (op, dt) {
        (ReduceOp::Sum, _) => 0.0,
        (ReduceOp::Prod, _) => 1.0,
        (ReduceOp::Max, DType::I32) => i32::MIN as f64,
        (ReduceOp::Min, DType::I32) => i32::MAX as f64,
        (ReduceOp::Max, DType::Bool) => 0.0,
        (ReduceOp::Min, DType::Bool) => 1.0,
        (ReduceOp::Max, _) => f64::NEG_INFINITY,
        (ReduceOp::Min, _) => f64::INFINITY,
    }
}

fn round_to(dt: DType, x: &str) -> String {
    match dt {
        DType::F16 => format!("dlc_round_f16({x})"),
        DType::BF16 => format!("dlc_round_bf16({x})"),
        _ => x.to_string(),
    }
}

/// An element of input `param` (dtype `dt`) at offset `off`, as its value kind.
pub fn load(param: &str, dt: DType, off: &str) -> Val {
    element(format!("{param}[{off}]"), dt)
}

/// An element `e` (C) of dtype `dt`, as its value kind.
fn element(e: String, dt: DType) -> Val {
    match dt {
        DType::I32 => Val {
            code: e,
            kind: Kind::I32,
        },
        DType::Bool => Val {
            code: e,
            kind: Kind::Bool,
        },
        _ => Val {
            code: format!("dlc_f32({e})"),
            kind: Kind::Float,
        },
    }
}

/// `((i0 * s1 + i1) * s2 + i2)`: the row-major offset of `idx` in `shape`.
pub fn horner(idx: &[String], shape: &[String]) -> String {
    let mut acc = String::new();
    for (d, i) in idx.iter().enumerate() {
        if d == 0 || acc == "0" {
            acc = i.clone();
        } else {
            acc = format!("({acc} * {} + {i})", shape[d]);
        }
    }
    if acc.is_empty() {
        "0".into()
    } else {
        acc
    }
}

fn is_atom(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        || s.parse::<f64>().is_ok()
}

fn unary(f: UnaryFn, v: &Val) -> Val {
    let x = &v.code;
    match v.kind {
        Kind::Float => {
            let code = match f {
                UnaryFn::Neg => format!("(-{x})"),
                UnaryFn::Exp => format!("dlc_exp({x})"),
                UnaryFn::Exp2 => format!("dlc_exp2({x})"),
                UnaryFn::Log => format!("dlc_log({x})"),
                UnaryFn::Log2 => format!("dlc_log2({x})"),
                UnaryFn::Sqrt => format!("dlc_sqrt({x})"),
                UnaryFn::Rsqrt => format!("dlc_rsqrt({x})"),
                UnaryFn::Recip => format!("dlc_recip({x})"),
                UnaryFn::Relu => format!("dlc_relu({x})"),
                UnaryFn::Abs => format!("dlc_abs({x})"),
                UnaryFn::Erf => format!("dlc_erf({x})"),
                UnaryFn::Sigmoid => format!("dlc_sigmoid({x})"),
                UnaryFn::Tanh => format!("dlc_tanh({x})"),
            };
            Val {
                code,
                kind: Kind::Float,
            }
        }
        Kind::I32 => {
            let code = match f {
                UnaryFn::Neg => format!("dlc_isub(0, {x})"),
                UnaryFn::Abs => format!("({x} < 0 ? dlc_isub(0, {x}) : {x})"),
                UnaryFn::Relu => format!("({x} > 0 ? {x} : 0)"),
                _ => {
                    let fv = unary(
                        f,
                        &Val {
                            code: format!("((float){x})"),
                            kind: Kind::Float,
                        },
                    );
                    format!("dlc_cvt<int>({})", fv.code)
                }
            };
            Val {
                code,
                kind: Kind::I32,
            }
        }
        Kind::Bool => {
            let fv = unary(
                f,
                &Val {
                    code: format!("({x} ? 1.0f : 0.0f)"),
                    kind: Kind::Float,
                },
            );
            Val {
                code: format!("({} != 0.0f)", fv.code),
                kind: Kind::Bool,
            }
        }
    }
}

fn binary(f: BinaryFn, k: Kind, a: &Val, b: &Val) -> Val {
    if f.is_comparison() {
        // Compared in the join of the operands' kinds.
        let ck = a.kind.join(b.kind);
        let (x, y) = (convert(a, ck), convert(b, ck));
        let op = match f {
            BinaryFn::Cmplt => "<",
            BinaryFn::Cmple => "<=",
            BinaryFn::Cmpeq => "==",
            _ => "!=",
        };
        return Val {
            code: format!("({x} {op} {y})"),
            kind: Kind::Bool,
        };
    }
    let (x, y) = (convert(a, k), convert(b, k));
    let code = match k {
        Kind::Float => match f {
            BinaryFn::Add => format!("({x} + {y})"),
            BinaryFn::Sub => format!("({x} - {y})"),
            BinaryFn::Mul => format!("({x} * {y})"),
            BinaryFn::Div => format!("({x} / {y})"),
            BinaryFn::Idiv => format!("truncf({x} / {y})"),
            BinaryFn::Max => format!("dlc_max({x}, {y})"),
            BinaryFn::Min => format!("dlc_min({x}, {y})"),
            _ => format!("dlc_pow({x}, {y})"),
        },
        Kind::I32 => match f {
            BinaryFn::Add => format!("dlc_iadd({x}, {y})"),
            BinaryFn::Sub => format!("dlc_isub({x}, {y})"),
            BinaryFn::Mul => format!("dlc_imul({x}, {y})"),
            BinaryFn::Div | BinaryFn::Idiv => format!("dlc_idiv({x}, {y})"),
            BinaryFn::Max => format!("({x} > {y} ? {x} : {y})"),
            BinaryFn::Min => format!("({x} < {y} ? {x} : {y})"),
            _ => format!("dlc_cvt<int>(dlc_pow((float){x}, (float){y}))"),
        },
        Kind::Bool => match f {
            BinaryFn::Add | BinaryFn::Max => format!("({x} || {y})"),
            BinaryFn::Mul | BinaryFn::Min => format!("({x} && {y})"),
            BinaryFn::Sub => format!("({x} != {y})"),
            _ => {
                let fx = convert(a, Kind::Float);
                let fy = convert(b, Kind::Float);
                format!("(dlc_pow({fx}, {fy}) != 0.0f)")
            }
        },
    };
    Val { code, kind: k }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unrolls(extents: &[&str]) -> Vec<Unroll> {
        let dims: Vec<Dim> = extents
            .iter()
            .map(|e| e.parse::<i64>().map_or_else(|_| Dim::sym(e), Dim::from))
            .collect();
        fold_unrolls(&dims)
    }

    #[test]
    fn a_fold_nest_unrolls_a_bounded_number_of_iterations() {
        // A long channel fold: unrolled by the whole budget.
        assert_eq!(unrolls(&["256"]), [Unroll::By(8)]);
        // A 5×5 window: the inner taps fully, the rows kept a loop.
        assert_eq!(unrolls(&["5", "5"]), [Unroll::Never, Unroll::Full]);
        // A 3×3 convolution over 64 channels: taps 3, then rows by what is left (8 / 3 = 2).
        assert_eq!(
            unrolls(&["64", "3", "3"]),
            [Unroll::Never, Unroll::By(2), Unroll::Full]
        );
        // A 2×2 window and a symbolic extent.
        assert_eq!(unrolls(&["2", "2"]), [Unroll::Full, Unroll::Full]);
        assert_eq!(unrolls(&["K", "2"]), [Unroll::By(4), Unroll::Full]);
    }
}
