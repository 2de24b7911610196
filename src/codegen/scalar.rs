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
use super::gpu::{CType, Stmt};
use super::CodegenError;
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::kind::{Kind, Kinds};
use crate::ir::region::verify::verify;
use crate::ir::region::{AxisExpr, Expr, Region};
use std::collections::{BTreeMap, BTreeSet};

mod ops;
mod reduce;
mod value;

use ops::is_atom;
pub use ops::{horner, load};
pub use reduce::{identity, FOLD_UNROLL};

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
    /// Reductions a template computes itself ([`Emitter::provide_reduce`]), by node address.
    reduces: Vec<(usize, Val)>,
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

    /// Makes the reduction node `r` of the region (by identity) available as the fp32 value
    /// `code` in the innermost scope: a template computed it (a pooled tile's accumulator,
    /// read in the window's body).
    pub fn provide_reduce(&mut self, r: &crate::ir::region::Reduce, code: impl Into<String>) {
        if let Some(s) = self.scopes.last_mut() {
            s.reduces.push((
                r as *const _ as usize,
                Val {
                    code: code.into(),
                    kind: Kind::Float,
                },
            ));
        }
    }

    /// The value a template provided for reduction `r` ([`Emitter::provide_reduce`]).
    pub(crate) fn provided_reduce(&self, r: &crate::ir::region::Reduce) -> Option<Val> {
        let key = r as *const _ as usize;
        self.scopes.iter().rev().find_map(|s| {
            s.reduces
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.clone())
        })
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
}
