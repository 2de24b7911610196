//! Statements of one region: their domains and access relations (see the module doc of
//! `poly::view` for the model).

use super::aff::{self, Aff, NonAffine, Pieces};
use super::pattern::{self, Pattern};
use crate::ir::axis::AxisExpr;
use crate::ir::dim::Dim;
use crate::ir::region::verify::{iter_sizes, reduce_extents};
use crate::ir::region::{BinaryFn, Expr, Reduce, Region};
use crate::ir::tiny::ReduceOp;
use std::collections::{BTreeMap, BTreeSet};

/// What a statement computes.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// A reduction (`reduce` let): its domain is its free iters then its reduce axes.
    Reduction(ReduceOp),
    /// The region's pointwise lets feeding its outputs, over the iters.
    Pointwise,
}

/// One access of a statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    /// The tensor (an input, an output, or a region-local reduction buffer).
    pub tensor: String,
    /// A write (else a read).
    pub write: bool,
    /// One index per tensor dimension; `None`: the whole dimension (a non-affine index).
    pub index: Vec<Option<Aff>>,
    /// The tensor's dimension sizes (bounds of the opaque dimensions).
    pub shape: Vec<Aff>,
    /// The part of the domain where the access happens (`select` guards); `None`: all of it.
    pub guard: Option<Pieces>,
    /// A region-local buffer (a reduction's accumulator that is no region output).
    pub local: bool,
    /// The accumulation self-read of a reduction.
    pub accumulator: bool,
}

/// One polyhedral statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// `S_<region>_<let>` (reductions) or `S_<region>` (the pointwise statement).
    pub name: String,
    /// The region it belongs to.
    pub region: String,
    /// The reduction's let (`None` for the pointwise statement).
    pub let_name: Option<String>,
    /// What it computes.
    pub kind: StmtKind,
    /// Dimension names: free iters, then reduce axes.
    pub dims: Vec<String>,
    /// How many leading dimensions are free iters (the rest are reduce axes).
    pub out_dims: usize,
    /// `(lower, upper)` of each dimension: `lower <= d < upper`.
    pub bounds: Vec<(Aff, Aff)>,
    /// Reads then writes.
    pub accesses: Vec<Access>,
    /// Why the statement is not a SCoP (each reason once); empty when it is one.
    pub non_scop: Vec<String>,
    /// Sizes printed as an opaque parameter (a product of symbols), with the parameter's name.
    pub notes: Vec<String>,
    /// The contraction pattern of a `sum` of a product of reads.
    pub pattern: Option<Pattern>,
}

/// Where a reduce let accumulates: an output (indexed by all iters) or a local buffer.
#[derive(Clone, Debug)]
struct Buffer {
    tensor: String,
    axes: Vec<String>,
    shape: Vec<Aff>,
    local: bool,
}

/// The substitution of axis names and the guard in force at a point of the walk.
#[derive(Clone)]
struct Scope {
    subst: BTreeMap<String, Aff>,
    guard: Option<Pieces>,
}

/// What the walk collects for one statement.
#[derive(Default)]
pub(crate) struct Collected {
    pub accesses: Vec<Access>,
    pub non_scop: Vec<String>,
    pub gather_indices: Vec<(String, Expr)>,
    /// Dimensions of reductions embedded in the statement's body (compute-at: the producer's
    /// fold inside the consumer's window), with their extents: the statement's domain gains
    /// them after its own reduce axes.
    pub embedded_dims: Vec<(String, Aff)>,
}

impl Collected {
    fn non_scop(&mut self, why: String) {
        if !self.non_scop.contains(&why) {
            self.non_scop.push(why);
        }
    }
}

/// The affine form of a size; a product of symbols becomes an opaque parameter `P_…` (noted).
pub fn dim_aff(d: &Dim, notes: &mut Vec<String>) -> Aff {
    match Aff::from_dim(d) {
        Ok(a) => a,
        Err(NonAffine(why)) => {
            let name: String = d
                .to_string()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            let p = format!("P_{name}");
            let note = format!("{why}: printed as parameter `{p}`");
            if !notes.contains(&note) {
                notes.push(note);
            }
            Aff::var(&p)
        }
    }
}

/// The statements of region `r`.
pub fn region_stmts(r: &Region) -> Vec<Stmt> {
    Builder::new(r).build()
}

struct Builder<'a> {
    r: &'a Region,
    lets: BTreeMap<&'a str, &'a Expr>,
    iter_names: Vec<String>,
    iter_dims: Vec<Dim>,
    free: BTreeMap<String, BTreeSet<String>>,
    buffers: BTreeMap<String, Buffer>,
    notes: Vec<String>,
}

impl<'a> Builder<'a> {
    fn new(r: &'a Region) -> Builder<'a> {
        let iter_names: Vec<String> = r.iters.iter().map(|i| i.name.clone()).collect();
        // An unverified region may miss an iter size: the symbol `<iter>_size` stands for it.
        let iter_dims = iter_sizes(r).unwrap_or_else(|_| {
            iter_names
                .iter()
                .map(|n| Dim::sym(&format!("{n}_size")))
                .collect()
        });
        let mut b = Builder {
            r,
            lets: r.lets.iter().map(|l| (l.name.as_str(), &l.expr)).collect(),
            iter_names,
            iter_dims,
            free: BTreeMap::new(),
            buffers: BTreeMap::new(),
            notes: Vec::new(),
        };
        for l in &r.lets {
            let f = b.free_of(&l.expr);
            b.free.insert(l.name.clone(), f);
        }
        b.assign_buffers();
        b
    }

    fn is_iter(&self, n: &str) -> bool {
        self.iter_names.iter().any(|i| i == n)
    }

    fn iter_aff(&mut self, name: &str) -> Aff {
        let i = self.iter_names.iter().position(|n| n == name).unwrap_or(0);
        let d = self.iter_dims.get(i).cloned().unwrap_or_default();
        dim_aff(&d, &mut self.notes)
    }

    /// Iters `e` depends on (through lets; reduce axes shadow iters inside their body).
    fn free_of(&self, e: &Expr) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let names = |x: &AxisExpr, out: &mut BTreeSet<String>| {
            x.for_each_name(&mut |n| {
                if self.is_iter(n) {
                    out.insert(n.to_string());
                }
            })
        };
        match e {
            Expr::Let(n) => {
                if let Some(f) = self.free.get(n) {
                    out.extend(f.iter().cloned());
                }
            }
            Expr::Read { map, .. } => map.iter().for_each(|x| names(x, &mut out)),
            Expr::Gather { map, index, .. } => {
                map.iter().for_each(|x| names(x, &mut out));
                out.extend(self.free_of(index));
            }
            Expr::Index(x) => names(x, &mut out),
            Expr::Select {
                pred,
                then,
                otherwise,
            } => {
                pred.for_each_expr(&mut |x| names(x, &mut out));
                out.extend(self.free_of(then));
                out.extend(self.free_of(otherwise));
            }
            Expr::Reduce(red) => {
                out = self.free_of(&red.body);
                for a in &red.axes {
                    out.remove(a);
                }
            }
            _ => {
                for c in crate::ir::region::verify::children(e) {
                    out.extend(self.free_of(c));
                }
            }
        }
        out
    }

    /// Lets reachable from `name` outside reduce bodies, stopping at reduce lets.
    fn pointwise_reach(&self, name: &str, out: &mut BTreeSet<String>) {
        if !out.insert(name.to_string()) {
            return;
        }
        if matches!(self.lets.get(name), Some(Expr::Reduce(_))) {
            return;
        }
        let mut refs = Vec::new();
        if let Some(e) = self.lets.get(name) {
            let_refs_outside_reduce(e, &mut refs);
        }
        for n in refs {
            self.pointwise_reach(&n, out);
        }
    }

    /// A reduce let accumulates into output `O` when its free iters are all the iters, `O`'s
    /// yielded let reaches it through pointwise lets only and reaches no other reduce let (the
    /// seed's `Out[n, k, h, w] += …`); else into a region-local buffer over its free iters.
    fn assign_buffers(&mut self) {
        let reduce_lets: Vec<String> = self
            .r
            .lets
            .iter()
            .filter(|l| matches!(l.expr, Expr::Reduce(_)))
            .map(|l| l.name.clone())
            .collect();
        let mut taken: BTreeSet<String> = BTreeSet::new();
        for l in &reduce_lets {
            let free = self.free.get(l).cloned().unwrap_or_default();
            let axes: Vec<String> = self
                .iter_names
                .iter()
                .filter(|i| free.contains(*i))
                .cloned()
                .collect();
            let mut target = None;
            if axes.len() == self.iter_names.len() {
                for y in &self.r.yields {
                    if taken.contains(&y.to) {
                        continue;
                    }
                    let mut reach = BTreeSet::new();
                    self.pointwise_reach(&y.from, &mut reach);
                    let reds: Vec<&String> =
                        reach.iter().filter(|n| reduce_lets.contains(n)).collect();
                    if reds == [l] {
                        target = Some(y.to.clone());
                        break;
                    }
                }
            }
            let buf = match target {
                Some(o) => {
                    taken.insert(o.clone());
                    let shape = self.tensor_shape(&o);
                    Buffer {
                        tensor: o,
                        axes,
                        shape,
                        local: false,
                    }
                }
                None => {
                    let mut tensor = l.clone();
                    while self.r.input(&tensor).is_some() || self.r.output(&tensor).is_some() {
                        tensor.insert(0, '_');
                    }
                    let shape = axes.clone().iter().map(|a| self.iter_aff(a)).collect();
                    Buffer {
                        tensor,
                        axes,
                        shape,
                        local: true,
                    }
                }
            };
            self.buffers.insert(l.clone(), buf);
        }
    }

    fn tensor_shape(&mut self, t: &str) -> Vec<Aff> {
        let shape: Vec<Dim> = match (self.r.input(t), self.r.output(t)) {
            (Some(i), _) => i.memref.shape.iter().map(|s| s.0.clone()).collect(),
            (None, Some(o)) => o.memref.shape.iter().map(|s| s.0.clone()).collect(),
            _ => Vec::new(),
        };
        shape.iter().map(|d| dim_aff(d, &mut self.notes)).collect()
    }

    fn build(mut self) -> Vec<Stmt> {
        let mut out = Vec::new();
        let reduce_lets: Vec<(String, &'a Reduce)> = self
            .r
            .lets
            .iter()
            .filter_map(|l| match &l.expr {
                Expr::Reduce(red) => Some((l.name.clone(), &**red)),
                _ => None,
            })
            .collect();
        for (l, red) in reduce_lets {
            out.push(self.reduction(&l, red));
        }
        if let Some(s) = self.pointwise() {
            out.push(s);
        }
        out
    }

    fn reduction(&mut self, l: &str, red: &'a Reduce) -> Stmt {
        let buf = self
            .buffers
            .get(l)
            .cloned()
            .expect("reduce lets have buffers");
        let mut dims: Vec<String> = buf.axes.clone();
        let mut bounds: Vec<(Aff, Aff)> = buf
            .axes
            .clone()
            .iter()
            .map(|a| (Aff::int(0), self.iter_aff(a)))
            .collect();
        let mut subst: BTreeMap<String, Aff> =
            dims.iter().map(|d| (d.clone(), Aff::var(d))).collect();
        let extents = reduce_extents(self.r, red, &self.iter_dims, l).unwrap_or_else(|_| {
            red.axes
                .iter()
                .map(|a| Dim::sym(&format!("{a}_extent")))
                .collect()
        });
        let mut red_dims = Vec::new();
        for (a, ext) in red.axes.iter().zip(&extents) {
            let mut name = a.clone();
            while dims.contains(&name) {
                name.push_str("_r");
            }
            subst.insert(a.clone(), Aff::var(&name));
            dims.push(name.clone());
            red_dims.push(name);
            bounds.push((Aff::int(0), dim_aff(ext, &mut self.notes)));
        }
        let scope = Scope {
            subst: subst.clone(),
            guard: None,
        };
        let mut c = Collected::default();
        self.walk(&red.body, &scope, &mut c);
        let acc_index: Vec<Option<Aff>> = buf.axes.iter().map(|a| Some(Aff::var(a))).collect();
        let mut acc = Access {
            tensor: buf.tensor.clone(),
            write: false,
            index: acc_index,
            shape: buf.shape.clone(),
            guard: None,
            local: buf.local,
            accumulator: true,
        };
        c.accesses.push(acc.clone());
        acc.write = true;
        acc.accumulator = false;
        c.accesses.push(acc);
        let out_dims = buf.axes.len();
        let pattern = if red.op == ReduceOp::Sum {
            pattern::detect(
                &red.body,
                &self.lets,
                &|e| self.index_affs(e, &subst),
                &dims[..out_dims],
                &red_dims,
            )
        } else {
            None
        };
        self.finish(
            Stmt {
                name: format!("S_{}_{l}", self.r.name),
                region: self.r.name.clone(),
                let_name: Some(l.to_string()),
                kind: StmtKind::Reduction(red.op),
                dims,
                out_dims,
                bounds,
                accesses: Vec::new(),
                non_scop: Vec::new(),
                notes: Vec::new(),
                pattern,
            },
            c,
        )
    }

    /// The index of a read's map under `subst`, when affine.
    fn index_affs(&self, map: &[AxisExpr], subst: &BTreeMap<String, Aff>) -> Option<Vec<Aff>> {
        map.iter()
            .map(|x| {
                Aff::from_axis(x)
                    .ok()
                    .map(|a| a.substitute(&|n| subst.get(n).cloned()))
            })
            .collect()
    }

    /// The statement over the iters that computes every output not written by a reduction.
    fn pointwise(&mut self) -> Option<Stmt> {
        let dims = self.iter_names.clone();
        let bounds: Vec<(Aff, Aff)> = dims
            .iter()
            .map(|d| (Aff::int(0), self.iter_aff(d)))
            .collect();
        let subst: BTreeMap<String, Aff> = dims.iter().map(|d| (d.clone(), Aff::var(d))).collect();
        let scope = Scope { subst, guard: None };
        let mut c = Collected::default();
        let mut writes = Vec::new();
        for y in &self.r.yields {
            let direct = self
                .buffers
                .get(&y.from)
                .is_some_and(|b| !b.local && b.tensor == y.to);
            if direct {
                continue;
            }
            self.walk_let(&y.from, &scope, &mut c);
            let shape = self.tensor_shape(&y.to);
            writes.push(Access {
                tensor: y.to.clone(),
                write: true,
                index: dims.iter().map(|d| Some(Aff::var(d))).collect(),
                shape,
                guard: None,
                local: false,
                accumulator: false,
            });
        }
        if writes.is_empty() {
            return None;
        }
        c.accesses.extend(writes);
        let out_dims = dims.len();
        Some(self.finish(
            Stmt {
                name: format!("S_{}", self.r.name),
                region: self.r.name.clone(),
                let_name: None,
                kind: StmtKind::Pointwise,
                dims,
                out_dims,
                bounds,
                accesses: Vec::new(),
                non_scop: Vec::new(),
                notes: Vec::new(),
                pattern: None,
            },
            c,
        ))
    }

    fn finish(&mut self, mut s: Stmt, c: Collected) -> Stmt {
        for (name, ext) in c.embedded_dims {
            s.dims.push(name);
            s.bounds.push((Aff::int(0), ext));
        }
        for a in c.accesses {
            if !s.accesses.contains(&a) {
                s.accesses.push(a);
            }
        }
        // Reads first, then writes (stable).
        s.accesses.sort_by_key(|a| a.write);
        s.non_scop = c.non_scop;
        for (t, idx) in &c.gather_indices {
            if let Some(why) = super::diag::gather_index_mod(idx) {
                let why = format!("gather of `{t}`: {why}");
                if !s.non_scop.contains(&why) {
                    s.non_scop.push(why);
                }
            }
        }
        s.notes = self.notes.clone();
        s
    }

    /// A let reference: a read of a reduction's buffer, or the let inlined.
    fn walk_let(&mut self, n: &str, sc: &Scope, c: &mut Collected) {
        if let Some(b) = self.buffers.get(n).cloned() {
            let index = b
                .axes
                .iter()
                .map(|a| Some(sc.subst.get(a).cloned().unwrap_or_else(|| Aff::var(a))))
                .collect();
            c.accesses.push(Access {
                tensor: b.tensor.clone(),
                write: false,
                index,
                shape: b.shape.clone(),
                guard: sc.guard.clone(),
                local: b.local,
                accumulator: false,
            });
        } else if let Some(x) = self.lets.get(n).copied() {
            self.walk(x, sc, c);
        }
    }

    fn walk(&mut self, e: &'a Expr, sc: &Scope, c: &mut Collected) {
        match e {
            Expr::Const(_) | Expr::Index(_) => {}
            Expr::Let(n) => self.walk_let(n, sc, c),
            Expr::Read { tensor, map } => {
                let a = self.access(tensor, map, None, sc, c);
                c.accesses.push(a);
            }
            Expr::Gather {
                tensor,
                map,
                axis,
                index,
            } => {
                c.non_scop(format!(
                    "gather of `{tensor}` addresses dimension {axis} by data (non-affine)"
                ));
                c.gather_indices.push((tensor.clone(), (**index).clone()));
                let a = self.access(tensor, map, Some(*axis), sc, c);
                c.accesses.push(a);
                self.walk(index, sc, c);
            }
            Expr::Select {
                pred,
                then,
                otherwise,
            } => {
                let subst = |n: &str| sc.subst.get(n).cloned();
                let base = sc.guard.clone().unwrap_or_else(aff::always);
                let guards = aff::from_pred(pred, false, &subst)
                    .and_then(|t| Ok((aff::and(&base, &t)?, aff::from_pred(pred, true, &subst)?)))
                    .and_then(|(t, f)| Ok((t, aff::and(&base, &f)?)));
                match guards {
                    Ok((t, f)) => {
                        let st = Scope {
                            subst: sc.subst.clone(),
                            guard: Some(t),
                        };
                        self.walk(then, &st, c);
                        let sf = Scope {
                            subst: sc.subst.clone(),
                            guard: Some(f),
                        };
                        self.walk(otherwise, &sf, c);
                    }
                    Err(NonAffine(why)) => {
                        c.non_scop(format!("select guard `{pred}`: {why}"));
                        self.walk(then, sc, c);
                        self.walk(otherwise, sc, c);
                    }
                }
            }
            Expr::Reduce(red) => {
                // A reduce embedded in this statement's body (compute-at, seed 003: the conv
                // folded at each point of the pool's window): its axes become dimensions of
                // this statement — the seed's fused 9-D nest — and its accumulator is a
                // register, not a memory access.
                let Ok(extents) = reduce_extents(self.r, red, &self.iter_dims, "") else {
                    c.non_scop(format!(
                        "a reduce over {:?} nested inside an expression has no known extents",
                        red.axes
                    ));
                    return;
                };
                let mut inner = sc.clone();
                for (a, ext) in red.axes.iter().zip(&extents) {
                    let mut name = a.clone();
                    while sc.subst.values().any(|v| *v == Aff::var(&name))
                        || c.embedded_dims.iter().any(|(n, _)| *n == name)
                        || self.is_iter(&name)
                    {
                        name.push_str("_r");
                    }
                    inner.subst.insert(a.clone(), Aff::var(&name));
                    c.embedded_dims.push((name, dim_aff(ext, &mut self.notes)));
                }
                self.walk(&red.body, &inner, c);
            }
            _ => {
                for x in crate::ir::region::verify::children(e) {
                    self.walk(x, sc, c);
                }
            }
        }
    }

    fn access(
        &mut self,
        tensor: &str,
        map: &[AxisExpr],
        opaque_dim: Option<usize>,
        sc: &Scope,
        c: &mut Collected,
    ) -> Access {
        let shape = self.tensor_shape(tensor);
        let is_dim = |n: &str| sc.subst.contains_key(n) || self.is_iter(n);
        let mut index = Vec::new();
        for (j, x) in map.iter().enumerate() {
            if Some(j) == opaque_dim {
                index.push(None);
                continue;
            }
            match Aff::from_axis(x) {
                Ok(a) if a.minmax_of(&is_dim) => {
                    c.non_scop(format!(
                        "index `{x}` of `{tensor}` takes the min/max of a loop variable"
                    ));
                    index.push(None);
                }
                Ok(a) => index.push(Some(a.substitute(&|n| sc.subst.get(n).cloned()))),
                Err(NonAffine(why)) => {
                    c.non_scop(format!("index `{x}` of `{tensor}`: {why}"));
                    index.push(None);
                }
            }
        }
        Access {
            tensor: tensor.to_string(),
            write: false,
            index,
            shape,
            guard: sc.guard.clone(),
            local: false,
            accumulator: false,
        }
    }
}

/// Let names referenced by `e` outside reduce bodies.
fn let_refs_outside_reduce(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::Let(n) => out.push(n.clone()),
        Expr::Reduce(_) => {}
        _ => crate::ir::region::verify::children(e).for_each(|c| let_refs_outside_reduce(c, out)),
    }
}

/// True when `e` computes an integer division (`idiv`) of data-independent values.
pub(crate) fn has_idiv(e: &Expr) -> bool {
    matches!(e, Expr::Binary(BinaryFn::Idiv, ..))
        || crate::ir::region::verify::children(e)
            .into_iter()
            .any(has_idiv)
}
