//! The per-op evaluation of a body node at an index environment (see the module doc of
//! `synth`): movement ops transform the environment, compute ops build value expressions, REDUCE
//! and shared values become lets.

use super::ix::Ix;
use super::{movement, show_env, Cx, SynthError, Val, R};
use crate::ir::axis::{AxisExpr, Pred};
use crate::ir::dtype::DType;
use crate::ir::egraph::book::{Operand, TinyParts};
use crate::ir::egraph::{Attr, TensorLang};
use crate::ir::region::kind::Kind;
use crate::ir::region::{BinaryFn, Expr, Reduce, Size, UnaryFn};
use crate::ir::tiny::{BinaryOp, ReduceOp, UOp, UnaryOp};
use std::collections::BTreeSet;

fn unary_fn(op: UnaryOp) -> UnaryFn {
    match op {
        UnaryOp::Neg => UnaryFn::Neg,
        UnaryOp::Exp2 => UnaryFn::Exp2,
        UnaryOp::Log2 => UnaryFn::Log2,
        UnaryOp::Sqrt => UnaryFn::Sqrt,
        UnaryOp::Rsqrt => UnaryFn::Rsqrt,
        UnaryOp::Recip => UnaryFn::Recip,
        UnaryOp::Relu => UnaryFn::Relu,
        UnaryOp::Abs => UnaryFn::Abs,
        UnaryOp::Erf => UnaryFn::Erf,
    }
}

fn binary_fn(op: BinaryOp) -> BinaryFn {
    match op {
        BinaryOp::Add => BinaryFn::Add,
        BinaryOp::Sub => BinaryFn::Sub,
        BinaryOp::Mul => BinaryFn::Mul,
        BinaryOp::Fdiv => BinaryFn::Div,
        BinaryOp::Idiv => BinaryFn::Idiv,
        BinaryOp::Max => BinaryFn::Max,
        BinaryOp::Min => BinaryFn::Min,
        BinaryOp::Pow => BinaryFn::Pow,
        BinaryOp::CmpLt => BinaryFn::Cmplt,
        BinaryOp::CmpLe => BinaryFn::Cmple,
        BinaryOp::CmpEq => BinaryFn::Cmpeq,
        BinaryOp::CmpNe => BinaryFn::Cmpne,
    }
}

/// Rounds a computed (fp32) value to the op's Tiny dtype.
fn round_to(e: Expr, dt: DType) -> Expr {
    if dt == DType::F32 {
        e
    } else {
        Expr::Cast {
            to: dt,
            x: Box::new(e),
        }
    }
}

/// The names (axes and symbols) a predicate mentions.
fn pred_names(p: &Pred, out: &mut BTreeSet<String>) {
    match p {
        Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|q| pred_names(q, out)),
        Pred::Cmp(_, a, b) => {
            axis_names(a, out);
            axis_names(b, out);
        }
    }
}

fn axis_names(e: &AxisExpr, out: &mut BTreeSet<String>) {
    match e {
        AxisExpr::Const(_) => {}
        AxisExpr::Name(n) => {
            out.insert(n.clone());
        }
        AxisExpr::Add(ts) => ts.iter().for_each(|t| axis_names(t, out)),
        AxisExpr::Mul(a, b) | AxisExpr::Min(a, b) | AxisExpr::Max(a, b) => {
            axis_names(a, out);
            axis_names(b, out);
        }
        AxisExpr::FloorDiv(a, _) => axis_names(a, out),
    }
}

fn union(a: &BTreeSet<String>, b: &BTreeSet<String>) -> BTreeSet<String> {
    a.union(b).cloned().collect()
}

impl Cx<'_> {
    /// The value of node `id` at `env`.
    pub(super) fn eval(&mut self, id: usize, env: &[Ix]) -> R<Val> {
        match &self.nodes[id] {
            TensorLang::Attr(Attr::Arg(i)) => return self.read_arg(*i as usize, env),
            TensorLang::Attr(a) => {
                return Err(SynthError::Typing(format!(
                    "attribute `{a}` in a tensor position"
                )))
            }
            _ => {}
        }
        let parts = self.parts[id]
            .clone()
            .ok_or_else(|| SynthError::Typing(format!("node {id} has no Tiny meaning")))?;
        let rank = self.tensor(id)?.shape.len();
        if env.len() != rank {
            return Err(SynthError::Typing(format!(
                "node {id} has rank {rank}, evaluated with {} indices",
                env.len()
            )));
        }
        if parts.uop.is_movement() {
            return self.movement(id, &parts, env);
        }
        if let UOp::Reduce { op, axes, acc } = &parts.uop {
            return self.reduce(id, &parts, env, *op, axes, *acc);
        }
        if let UOp::Scan {
            op,
            axis,
            exclusive,
            reverse,
            acc,
        } = parts.uop
        {
            let spec = crate::ir::tiny::ScanSpec {
                op,
                axis,
                exclusive,
                reverse,
            };
            return self.scan(id, &parts, env, spec, acc);
        }
        self.compute(id, &parts, env)
    }

    fn read_arg(&self, i: usize, env: &[Ix]) -> R<Val> {
        let a = self
            .args
            .get(i)
            .ok_or_else(|| SynthError::Typing(format!("placeholder ${i} has no input")))?;
        if env.len() != a.shape.len() {
            return Err(SynthError::Typing(format!(
                "`{}` has rank {}, read with {} indices",
                a.name,
                a.shape.len(),
                env.len()
            )));
        }
        let map = env
            .iter()
            .map(|e| e.to_axis())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|what| SynthError::Unsupported {
                node: i,
                op: "placeholder",
                what,
            })?;
        let mut free = BTreeSet::new();
        env.iter().for_each(|e| e.vars(&mut free));
        Ok(Val {
            e: Expr::Read {
                tensor: a.name.clone(),
                map,
            },
            free,
        })
    }

    /// The tensor operand `k` of a node.
    fn operand(&self, id: usize, parts: &TinyParts, k: usize) -> R<usize> {
        match parts.operands.get(k) {
            Some(Operand::Tensor(x)) => Ok(usize::from(*x)),
            _ => Err(SynthError::Typing(format!(
                "node {id}: operand {k} is not a tensor"
            ))),
        }
    }

    /// Operand `k` at `env`: an immediate is a constant of dtype `imm_dt`.
    fn operand_val(
        &mut self,
        id: usize,
        parts: &TinyParts,
        k: usize,
        env: &[Ix],
        imm_dt: DType,
    ) -> R<Val> {
        match parts.operands.get(k) {
            Some(Operand::Tensor(x)) => self.eval(usize::from(*x), env),
            Some(Operand::Imm(v)) => Ok(Val::konst(imm_dt.round(*v))),
            None => Err(SynthError::Typing(format!("node {id}: no operand {k}"))),
        }
    }

    /// The dtype of the first tensor operand other than `k`.
    fn other_dtype(&self, parts: &TinyParts, k: usize) -> DType {
        parts
            .operands
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != k)
            .find_map(|(_, o)| match o {
                Operand::Tensor(x) => self.facts[usize::from(*x)].tensor().map(|t| t.dtype),
                Operand::Imm(_) => None,
            })
            .unwrap_or(DType::F32)
    }

    fn movement(&mut self, id: usize, parts: &TinyParts, env: &[Ix]) -> R<Val> {
        let x = self.operand(id, parts, 0)?;
        let in_t = self.tensor(x)?.clone();
        let out_t = self.tensor(id)?.clone();
        let op = parts.uop.name();
        let non_affine = |why: String| SynthError::NonAffine { node: id, op, why };
        let unsupported = |what: String| SynthError::Unsupported { node: id, op, what };
        let in_env = match &parts.uop {
            UOp::Permute { perm } => movement::permute(env, perm).map_err(SynthError::Typing)?,
            UOp::Expand => movement::expand(env, &in_t.shape),
            UOp::Reshape => {
                let ext = |n: &str| self.extent(n);
                movement::reshape(env, &in_t.shape, &out_t.shape, &ext).map_err(non_affine)?
            }
            UOp::Shrink { lo, step, .. } => {
                movement::shrink(env, lo, step).map_err(SynthError::Typing)?
            }
            UOp::Flip { axes } => {
                movement::flip(env, axes, &in_t.shape).map_err(SynthError::Typing)?
            }
            UOp::View { map } => movement::view(env, map).map_err(SynthError::Typing)?,
            UOp::Pad { .. } | UOp::Read { .. } => {
                let (in_env, guard, value) = match &parts.uop {
                    UOp::Pad { pad, value } => {
                        let (e, g) = movement::pad(env, pad, &in_t.shape).map_err(unsupported)?;
                        (e, g, *value)
                    }
                    UOp::Read { access } => {
                        let ext = |n: &str| self.extent(n);
                        let (e, g) = movement::read(env, access, &ext).map_err(non_affine)?;
                        (e, g, access.fill.0)
                    }
                    _ => return Err(SynthError::Typing("not a guarded view".into())),
                };
                let lets_before = self.lets.len();
                let then = self.eval(x, &in_env)?;
                let Some(pred) = guard else {
                    return Ok(then);
                };
                // Lets are evaluated at every point of their environment, guard or not: one
                // made for the guarded operand that varies with a guarded index would read
                // outside its tensor where the guard fails (a softmax read through a conv's
                // padding). Such a body is not one region.
                let mut guarded = BTreeSet::new();
                pred_names(&pred, &mut guarded);
                if let Some(l) = self.lets[lets_before..].iter().find(|l| {
                    self.let_free
                        .get(&l.name)
                        .is_some_and(|f| !f.is_disjoint(&guarded))
                }) {
                    return Err(unsupported(format!(
                        "the value `{}` under the guard `{pred}` (a let is computed where the guard fails)",
                        l.name
                    )));
                }
                let mut free = BTreeSet::new();
                env.iter().for_each(|e| e.vars(&mut free));
                return Ok(Val {
                    free: union(&free, &then.free),
                    e: Expr::Select {
                        pred,
                        then: Box::new(then.e),
                        otherwise: Box::new(Expr::Const(in_t.dtype.round(value))),
                    },
                });
            }
            other => {
                return Err(SynthError::Unsupported {
                    node: id,
                    op: other.name(),
                    what: "this movement op".into(),
                })
            }
        };
        self.eval(x, &in_env)
    }

    /// An elementwise (or leaf) node: a let when it is at an aligned environment and contains a
    /// reduction or is used more than once; inline otherwise.
    fn compute(&mut self, id: usize, parts: &TinyParts, env: &[Ix]) -> R<Val> {
        let letable = self.aligned(env) && (self.has_reduce[id] || self.uses[id] > 1);
        if letable {
            if let Some(n) = self.keyed.get(&(id, env.to_vec())) {
                return Ok(self.let_ref(&n.clone()));
            }
        }
        // A let is defined at the top level, where only the iters are in scope.
        let saved = letable.then(|| std::mem::replace(&mut self.scope, self.iters.clone()));
        let v = self.compute_inner(id, parts, env);
        if let Some(s) = saved {
            self.scope = s;
        }
        let v = v?;
        let trivial = matches!(
            v.e,
            Expr::Const(_) | Expr::Let(_) | Expr::Read { .. } | Expr::Index(_)
        );
        if !letable || trivial {
            return Ok(v);
        }
        let name = self.fresh_c();
        self.push_let(&name, v.e, v.free);
        self.keyed.insert((id, env.to_vec()), name.clone());
        Ok(self.let_ref(&name))
    }

    fn compute_inner(&mut self, id: usize, parts: &TinyParts, env: &[Ix]) -> R<Val> {
        let dt = self.tensor(id)?.dtype;
        let op = parts.uop.name();
        Ok(match &parts.uop {
            UOp::Const { value } => Val::konst(dt.round(*value)),
            UOp::Range => {
                let e = env.first().cloned().unwrap_or_default();
                let mut free = BTreeSet::new();
                e.vars(&mut free);
                let ax =
                    e.to_axis()
                        .map_err(|what| SynthError::Unsupported { node: id, op, what })?;
                Val {
                    e: Expr::Index(ax),
                    free,
                }
            }
            UOp::Unary(u) => {
                let x = self.operand_val(id, parts, 0, env, dt)?;
                let [x] = self.coerce([x], dt);
                Val {
                    e: round_to(Expr::Unary(unary_fn(*u), Box::new(x.e)), dt),
                    free: x.free,
                }
            }
            UOp::Binary(b) => {
                let a = self.operand_val(id, parts, 0, env, self.other_dtype(parts, 0))?;
                let c = self.operand_val(id, parts, 1, env, self.other_dtype(parts, 1))?;
                let odt = if b.is_comparison() {
                    self.other_dtype(parts, usize::MAX)
                } else {
                    dt
                };
                let [a, c] = self.coerce([a, c], odt);
                let free = union(&a.free, &c.free);
                let a2 = self.broadcast(a.clone(), &c.free);
                let c2 = self.broadcast(c, &a.free);
                let e = Expr::Binary(binary_fn(*b), Box::new(a2.e), Box::new(c2.e));
                Val {
                    e: if b.is_comparison() {
                        e
                    } else {
                        round_to(e, dt)
                    },
                    free,
                }
            }
            UOp::Where => {
                let c = self.operand_val(id, parts, 0, env, DType::Bool)?;
                // An immediate branch has the node's dtype (that of the other branch).
                let a = self.operand_val(id, parts, 1, env, dt)?;
                let b = self.operand_val(id, parts, 2, env, dt)?;
                let [a, b] = self.coerce([a, b], dt);
                let free = union(&union(&c.free, &a.free), &b.free);
                Val {
                    e: round_to(Expr::Where(Box::new(c.e), Box::new(a.e), Box::new(b.e)), dt),
                    free,
                }
            }
            UOp::Cast => {
                let x = self.operand_val(id, parts, 0, env, dt)?;
                // A CAST to fp32 of an fp32 (or fp16/bf16) value is a no-op; of an i32 or bool
                // value it changes how later ops compute (see `region::kind`).
                let e = if dt == DType::F32 && self.kind(&x.e) != Kind::Float {
                    Expr::Cast {
                        to: dt,
                        x: Box::new(x.e),
                    }
                } else {
                    round_to(x.e, dt)
                };
                Val { e, free: x.free }
            }
            UOp::Gather { axis } => self.gather(id, parts, env, *axis)?,
            other => {
                return Err(SynthError::Unsupported {
                    node: id,
                    op: other.name(),
                    what: "this op in a kernel body".into(),
                })
            }
        })
    }

    /// The operands of one op, cast to `dt` where their kinds would make the op compute in another
    /// kind than its Tiny dtype's (constants are weak: an op over an integral fp32 constant alone,
    /// as `where(c, 2.0, 0.0)`, would compute in i32).
    fn coerce<const N: usize>(&self, vals: [Val; N], dt: DType) -> [Val; N] {
        let want = Kind::of(dt);
        let es: Vec<&Expr> = vals.iter().map(|v| &v.e).collect();
        if self.operands_kind(&es) == want {
            return vals;
        }
        vals.map(|v| {
            if self.kind(&v.e) == want {
                return v;
            }
            Val {
                e: Expr::Cast {
                    to: dt,
                    x: Box::new(v.e),
                },
                free: v.free,
            }
        })
    }

    fn gather(&mut self, id: usize, parts: &TinyParts, env: &[Ix], axis: usize) -> R<Val> {
        let x = self.operand(id, parts, 0)?;
        let TensorLang::Attr(Attr::Arg(i)) = &self.nodes[x] else {
            return Err(SynthError::Unsupported {
                node: id,
                op: "GATHER",
                what: "a gather from a computed value (only from a kernel input)".into(),
            });
        };
        let mut at = env.to_vec();
        if let Some(slot) = at.get_mut(axis) {
            *slot = Ix::default();
        }
        let read = self.read_arg(*i as usize, &at)?;
        let index = self.operand_val(id, parts, 1, env, DType::I32)?;
        let Expr::Read { tensor, map } = read.e else {
            return Err(SynthError::Typing("a placeholder is not a read".into()));
        };
        Ok(Val {
            e: Expr::Gather {
                tensor,
                map,
                axis,
                index: Box::new(index.e),
            },
            free: union(&read.free, &index.free),
        })
    }

    /// `v` wrapped in `BroadcastInDim` when it is not a let or constant and its axes are a strict
    /// subset of `other` (seed §6.4) — except inside a reduce body, where reads stay plain
    /// (C-CON1: no broadcast tensors in a contraction's body).
    fn broadcast(&self, v: Val, other: &BTreeSet<String>) -> Val {
        if self.scope.len() > self.iters.len()
            || matches!(v.e, Expr::Const(_) | Expr::Let(_))
            || v.free.len() >= other.len()
            || !v.free.is_subset(other)
        {
            return v;
        }
        let pos = |n: &str| self.scope.iter().rposition(|(m, _)| m == n);
        let mut res: Vec<usize> = other.iter().filter_map(|n| pos(n)).collect();
        res.sort_unstable();
        let mut mine: Vec<usize> = v.free.iter().filter_map(|n| pos(n)).collect();
        mine.sort_unstable();
        let dims: Vec<usize> = mine
            .iter()
            .filter_map(|p| res.iter().position(|q| q == p))
            .collect();
        let result_shape = res.iter().map(|p| Size(self.scope[*p].1.clone())).collect();
        Val {
            e: Expr::BroadcastInDim {
                operand: Box::new(v.e),
                result_shape,
                broadcast_dimensions: dims,
            },
            free: v.free,
        }
    }

    /// `env` (a reduction's environment over its input's kept axes) with every index into an
    /// axis of extent 1 replaced by 0, its only value: a reduction reached as `[b, …]` and as
    /// `[0, …]` over a unit axis `b` (a size-1 batch or head folded to 0 by one path of the
    /// graph, issue 15) is one environment, computed once.
    fn unit_axes_zero(
        &self,
        id: usize,
        parts: &TinyParts,
        env: &[Ix],
        axes: &[usize],
    ) -> R<Vec<Ix>> {
        let x = self.operand(id, parts, 0)?;
        let shape = &self.tensor(x)?.shape;
        let mut rest = env.iter();
        let mut out = Vec::with_capacity(env.len());
        for (d, ext) in shape.iter().enumerate() {
            if axes.contains(&d) {
                continue;
            }
            let Some(e) = rest.next() else { break };
            out.push(if ext.as_int() == Some(1) {
                Ix::int(0)
            } else {
                e.clone()
            });
        }
        out.extend(rest.cloned());
        Ok(out)
    }

    fn reduce(
        &mut self,
        id: usize,
        parts: &TinyParts,
        env: &[Ix],
        op: ReduceOp,
        axes: &[usize],
        acc: DType,
    ) -> R<Val> {
        let env = &self.unit_axes_zero(id, parts, env, axes)?;
        // Not at one point per iteration: embedded in the enclosing window reduction
        // (compute-at) or illegal.
        let embed = !self.aligned(env);
        if embed {
            self.compute_at(env).map_err(|why| SynthError::Recompute {
                node: id,
                op: "REDUCE",
                env: show_env(env),
                why,
            })?;
            if let Some(v) = self.embedded.get(&(id, env.to_vec())) {
                return Ok(v.clone());
            }
        }
        if let Some(v) = self.evaluated_once(id, env)? {
            return Ok(v);
        }
        let x = self.operand(id, parts, 0)?;
        let in_shape = self.tensor(x)?.shape.clone();
        let mut axes = axes.to_vec();
        axes.sort_unstable();
        axes.dedup();
        let mut used = BTreeSet::new();
        env.iter().for_each(|e| e.vars(&mut used));
        // Enclosing reduce variables stay visible in an embedded producer's body.
        used.extend(
            self.scope[self.iters.len()..]
                .iter()
                .map(|(n, _)| n.clone()),
        );
        // (name, extent, shadows an iter)
        let mut vars: Vec<(String, crate::ir::dim::Dim, bool)> = Vec::new();
        let mut fresh = 0usize;
        for a in &axes {
            let ext = in_shape
                .get(*a)
                .cloned()
                .ok_or_else(|| SynthError::Typing(format!("node {id}: reduce axis {a}")))?;
            let shadow = self
                .iters
                .iter()
                .find(|(n, d)| !used.contains(n) && *d == ext)
                .map(|(n, _)| n.clone());
            let (name, is_shadow) = match shadow {
                Some(n) => (n, true),
                None => loop {
                    let n = if fresh == 0 {
                        "k".to_string()
                    } else {
                        format!("k{fresh}")
                    };
                    fresh += 1;
                    if !self.reserved.contains(&n) && !used.contains(&n) {
                        break (n, false);
                    }
                },
            };
            used.insert(name.clone());
            vars.push((name, ext, is_shadow));
        }
        let mut in_env = Vec::with_capacity(in_shape.len());
        let mut rest = env.iter();
        for d in 0..in_shape.len() {
            match axes.iter().position(|a| *a == d) {
                Some(j) => in_env.push(Ix::var(&vars[j].0)),
                None => in_env.push(rest.next().cloned().ok_or_else(|| {
                    SynthError::Typing(format!("node {id}: reduce rank mismatch"))
                })?),
            }
        }
        let mut scope = if embed {
            self.scope.clone()
        } else {
            self.iters.clone()
        };
        scope.extend(vars.iter().map(|(n, d, _)| (n.clone(), d.clone())));
        let saved = std::mem::replace(&mut self.scope, scope);
        let body = self.eval(x, &in_env);
        self.scope = saved;
        let body = body?;
        let identity = op.identity(acc);
        let mut body_e = body.e;
        // The verifier reads a top-level select's else-value as the reduce's neutral element;
        // a pad value that is not the identity is a value, not a neutral: hide it behind a cast
        // (to the accumulation dtype, the body's own: a no-op on its values).
        if let Expr::Select { otherwise, .. } = &body_e {
            if let Expr::Const(c) = **otherwise {
                if c != identity && !(c.is_nan() && identity.is_nan()) {
                    body_e = Expr::Cast {
                        to: acc,
                        x: Box::new(body_e),
                    };
                }
            }
        }
        let mut free = body.free;
        for (n, _, _) in &vars {
            free.remove(n);
        }
        let red = Reduce {
            op,
            axes: vars.iter().map(|(n, _, _)| n.clone()).collect(),
            extents: vars
                .iter()
                .filter(|(_, _, s)| !s)
                .map(|(n, d, _)| (n.clone(), Size(d.clone())))
                .collect(),
            init: Some(identity),
            dtype: Some(acc),
            body: body_e,
        };
        if embed {
            self.embeddings.push(super::Embedding {
                node: id,
                point: env
                    .iter()
                    .map(Ix::to_axis)
                    .collect::<Result<_, _>>()
                    .map_err(|why| SynthError::NonAffine {
                        node: id,
                        op: "REDUCE",
                        why,
                    })?,
                window: self.scope[self.iters.len()..].to_vec(),
                iters: self.iters.clone(),
                producer_axes: vars
                    .iter()
                    .map(|(n, d, _)| (n.clone(), d.clone()))
                    .collect(),
            });
            let v = Val {
                e: Expr::Reduce(Box::new(red)),
                free,
            };
            self.embedded.insert((id, env.to_vec()), v.clone());
            return Ok(v);
        }
        let name = self.fresh_acc();
        self.push_let(&name, Expr::Reduce(Box::new(red)), free);
        self.keyed.insert((id, env.to_vec()), name.clone());
        Ok(self.let_ref(&name))
    }
}
