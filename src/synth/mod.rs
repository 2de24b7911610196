//! Region synthesis (seed 001 §6.7): a kernel body (a term over Tiny e-nodes with placeholders
//! `$i`, `crate::ir::egraph::kernel`) becomes one RB-SSA [`Region`] — or an error saying why it
//! cannot be one region. The fusion rules use [`synthesize`] as the legality oracle of a candidate
//! fused kernel.
//!
//! # Algorithm: index-environment evaluation
//!
//! The iteration space is the root's shape (iters named by rank: `i`; `m,n`; `b,m,n`; `b,h,m,n`;
//! `i0…`). The body is evaluated top-down: a node is evaluated at an *environment* — one index
//! expression (`ix::Ix`, affine + floordiv) per dimension of its shape; the root at the iters.
//!
//! - A placeholder `$i` is `read(args[i], env)`; CONST a constant; RANGE `{"index": env[0]}`.
//! - Movement ops transform the environment (`movement`): PERMUTE permutes it, EXPAND and unit
//!   dims read 0, RESHAPE goes through row-major linear indices (floordiv only by positive
//!   constants, else [`SynthError::NonAffine`]), PAD guards with a `select`, SHRINK/FLIP/VIEW are
//!   affine.
//! - Elementwise ops evaluate their operands at the same environment. A region op computes in
//!   its operands' kind (fp32, i32 or bool: `crate::ir::region::kind`), which synthesis keeps
//!   equal to the kind of the Tiny dtype: a CAST to fp32 disappears only from an fp32 value,
//!   operands whose kinds would make an fp32 op compute in i32 (integral fp32 constants) are
//!   cast, and every op whose Tiny dtype is not fp32 is wrapped in `cast` (Tiny rounds every op
//!   to its dtype). A binary op whose
//!   non-let operand depends on a strict subset of the other side's axes gets an explicit
//!   `BroadcastInDim` (seed §6.4).
//! - REDUCE evaluates its operand at the environment extended by one reduce variable per reduced
//!   dim: named after an iter the environment does not use and whose extent is the same (it
//!   shadows the iter, as seed §6.8.3's `Mrow = max_n S`), else `k`, `k1`, …
//!
//! SSA sharing (seed §6.7 step 6): every REDUCE is a `let` (`acc`, `acc1`, …), and so is every node
//! evaluated at an *aligned* environment (each index a plain iter name — or a variable shadowing
//! one — or 0) that contains a REDUCE or is used more than once (`c1`, `c2`, …). Lets are keyed by
//! (node, environment): a value needed twice at the same point is computed once. Dynamic scoping of
//! axis names (see the `region` module) makes a let defined over iter `n` read at a shadowing
//! reduce variable `n` inside a reduce body.
//!
//! Legality: a REDUCE must be evaluated at an aligned environment — anything else means one
//! reduction per point of an inner loop, i.e. recomputation ([`SynthError::Recompute`]: the second
//! matmul of an MLP reading `relu(matmul1)` inside its reduce over `k`) — unless it is embedded in
//! an enclosing window reduction by compute-at (`compute_at`: a pooling window over a
//! convolution, seed 003), where it is inlined into the consumer's reduce body instead of being
//! a let — and at one environment only ([`SynthError::MultiEnv`]). Reduce-free subterms may be
//! evaluated anywhere (recomputing an elementwise producer is fine).

mod body;
mod compute_at;
mod ix;
mod movement;
mod scan;
mod walk;

pub use body::body_from_program;
pub use compute_at::{Embedding, MAX_WINDOW};

use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::egraph::book::{tiny_parts, TinyParts};
use crate::ir::egraph::kernel::body_node_facts;
use crate::ir::egraph::{Facts, TensorFacts, TensorLang};
use crate::ir::region::kind::{Kind, Kinds};
use crate::ir::region::verify::{iter_sizes, reduce_extents, verify, RegionError};
use crate::ir::region::{
    Expr, Input, Iter, Layout, LayoutKind, Let, Materialize, MemRef, Output, Reduce,
};
use crate::ir::region::{Region, Size, Yield};
use crate::ir::tiny::UOp;
use egg::RecExpr;
use ix::Ix;
use std::collections::{BTreeSet, HashMap};

/// A kernel input as the region sees it: the buffer name and its type.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthArg {
    /// Region input (buffer) name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<Dim>,
}

/// Why a body is not one region.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SynthError {
    /// A reduction would be computed once per point of an inner loop (illegal fusion).
    #[error("body node {node} ({op}) would be recomputed: it is needed at [{env}], which is not one point per iteration, and it cannot be computed at its consumer: {why}")]
    Recompute {
        /// The node.
        node: usize,
        /// The op.
        op: &'static str,
        /// The environment, printed.
        env: String,
        /// Why compute-at embedding (`compute_at`) does not apply.
        why: String,
    },
    /// A reduction needed at two different index environments.
    #[error("the reduction at body node {node} is needed at [{first}] and at [{second}]; one region computes it once")]
    MultiEnv {
        /// The node.
        node: usize,
        /// The first binding.
        first: String,
        /// The second binding.
        second: String,
    },
    /// An access that is not affine + floordiv by a positive constant.
    #[error(
        "body node {node} ({op}): {why} (not affine + floordiv by a constant; a region boundary)"
    )]
    NonAffine {
        /// The node.
        node: usize,
        /// The op.
        op: &'static str,
        /// Why.
        why: String,
    },
    /// Something regions cannot express (yet).
    #[error("body node {node} ({op}): {what} is not supported")]
    Unsupported {
        /// The node.
        node: usize,
        /// The op.
        op: &'static str,
        /// What it is.
        what: String,
    },
    /// An ill-typed body or bad arguments.
    #[error("kernel body: {0}")]
    Typing(String),
    /// The synthesized region fails the verifier (a synthesis bug or a verifier limitation).
    #[error("the synthesized region fails verification: {0}")]
    Verify(RegionError),
}

type R<T> = Result<T, SynthError>;

/// A value expression and the axis names it depends on.
#[derive(Clone, Debug)]
struct Val {
    e: Expr,
    free: BTreeSet<String>,
}

impl Val {
    fn konst(v: f64) -> Val {
        Val {
            e: Expr::Const(v),
            free: BTreeSet::new(),
        }
    }
}

/// Synthesis state.
struct Cx<'a> {
    nodes: &'a [TensorLang],
    facts: Vec<Facts>,
    parts: Vec<Option<TinyParts>>,
    has_reduce: Vec<bool>,
    uses: Vec<usize>,
    args: &'a [SynthArg],
    /// Iters (name, extent).
    iters: Vec<(String, Dim)>,
    /// Axes in scope: the iters, then reduce variables (innermost last).
    scope: Vec<(String, Dim)>,
    /// Names fresh reduce variables avoid: iters and size symbols.
    reserved: BTreeSet<String>,
    lets: Vec<Let>,
    let_free: HashMap<String, BTreeSet<String>>,
    /// The value kind of each let.
    let_kinds: HashMap<String, Kind>,
    keyed: HashMap<(usize, Vec<Ix>), String>,
    reduce_at: HashMap<usize, Vec<Ix>>,
    /// Producer reductions embedded by compute-at, by (node, environment).
    embedded: HashMap<(usize, Vec<Ix>), Val>,
    /// The embeddings, in synthesis order.
    embeddings: Vec<Embedding>,
    n_acc: usize,
    n_c: usize,
}

/// The iter names of a rank (`i`; `m,n`; `b,m,n`; `b,h,m,n`; `i0…`), suffixed with `_` while one
/// collides with a size symbol.
fn iter_names(rank: usize, symbols: &BTreeSet<String>) -> Vec<String> {
    let base: Vec<String> = match rank {
        1 => vec!["i".into()],
        2 => vec!["m".into(), "n".into()],
        3 => vec!["b".into(), "m".into(), "n".into()],
        4 => vec!["b".into(), "h".into(), "m".into(), "n".into()],
        _ => (0..rank).map(|k| format!("i{k}")).collect(),
    };
    base.into_iter()
        .map(|mut n| {
            while symbols.contains(&n) {
                n.push('_');
            }
            n
        })
        .collect()
}

fn memref(shape: &[Dim]) -> MemRef {
    MemRef {
        shape: shape.iter().cloned().map(Size).collect(),
        alignment: 128,
        noalias: true,
        layout: Layout {
            kind: LayoutKind::RowMajor,
            params: None,
        },
    }
}

/// Synthesizes the region `name` computing `body` (whose `$i` is `args[i]`) into the output
/// buffer `output`. See the module doc for the algorithm and the errors.
pub fn synthesize(
    name: &str,
    body: &RecExpr<TensorLang>,
    args: &[SynthArg],
    output: &str,
    materialize: Materialize,
) -> Result<Region, SynthError> {
    synthesize_traced(name, body, args, output, materialize).map(|(r, _)| r)
}

/// [`synthesize`], also returning the producer reductions embedded by compute-at.
pub fn synthesize_traced(
    name: &str,
    body: &RecExpr<TensorLang>,
    args: &[SynthArg],
    output: &str,
    materialize: Materialize,
) -> Result<(Region, Vec<Embedding>), SynthError> {
    let nodes = body.as_ref();
    let root = nodes
        .len()
        .checked_sub(1)
        .ok_or_else(|| SynthError::Typing("empty body".into()))?;
    let mut names = BTreeSet::new();
    for a in args {
        if !names.insert(a.name.as_str()) {
            return Err(SynthError::Typing(format!("two inputs named `{}`", a.name)));
        }
    }
    if names.contains(output) {
        return Err(SynthError::Typing(format!(
            "the output `{output}` is also an input"
        )));
    }
    for (i, n) in nodes.iter().enumerate() {
        let what = match n {
            TensorLang::Kernel(_) => "a kernel inside a kernel body",
            TensorLang::Input(_) => "an `input` node inside a kernel body (use a placeholder)",
            _ => continue,
        };
        return Err(SynthError::Unsupported {
            node: i,
            op: "node",
            what: what.into(),
        });
    }
    let ins: Vec<TensorFacts> = args
        .iter()
        .map(|a| TensorFacts {
            dtype: a.dtype,
            shape: a.shape.clone(),
        })
        .collect();
    let facts = body_node_facts(body, &ins).map_err(SynthError::Typing)?;
    let mut parts = Vec::with_capacity(nodes.len());
    for n in nodes {
        parts.push(match n {
            TensorLang::Attr(_) => None,
            op => Some(
                tiny_parts(op, &|id| facts[usize::from(id)].attr()).map_err(SynthError::Typing)?,
            ),
        });
    }
    let mut has_reduce = vec![false; nodes.len()];
    let mut uses = vec![0usize; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if n.is_attr() {
            continue;
        }
        let mut h = matches!(
            parts[i].as_ref().map(|p| &p.uop),
            Some(UOp::Reduce { .. } | UOp::Scan { .. })
        );
        for c in egg::Language::children(n) {
            let c = usize::from(*c);
            h |= has_reduce[c];
            uses[c] += 1;
        }
        has_reduce[i] = h;
    }
    let out = facts[root]
        .tensor()
        .cloned()
        .ok_or_else(|| SynthError::Typing("the root is not a tensor".into()))?;
    let mut symbols: BTreeSet<String> = BTreeSet::new();
    for f in &facts {
        if let Some(t) = f.tensor() {
            t.shape.iter().for_each(|d| symbols.extend(d.symbols()));
        }
    }
    let iters: Vec<(String, Dim)> = iter_names(out.shape.len(), &symbols)
        .into_iter()
        .zip(out.shape.iter().cloned())
        .collect();
    let mut reserved = symbols;
    reserved.extend(iters.iter().map(|(n, _)| n.clone()));
    let mut cx = Cx {
        nodes,
        facts,
        parts,
        has_reduce,
        uses,
        args,
        scope: iters.clone(),
        iters,
        reserved,
        lets: Vec::new(),
        let_free: HashMap::new(),
        let_kinds: HashMap::new(),
        keyed: HashMap::new(),
        reduce_at: HashMap::new(),
        embedded: HashMap::new(),
        embeddings: Vec::new(),
        n_acc: 0,
        n_c: 0,
    };
    // The value yielded: the root, or the operand of a root CAST (the yield casts).
    let ynode = match cx.parts[root].as_ref() {
        Some(TinyParts {
            uop: UOp::Cast,
            operands,
            ..
        }) => match operands.first() {
            Some(crate::ir::egraph::book::Operand::Tensor(x)) => usize::from(*x),
            _ => root,
        },
        _ => root,
    };
    let env: Vec<Ix> = cx.iters.iter().map(|(n, _)| Ix::var(n)).collect();
    let v = cx.eval(ynode, &env)?;
    let from = match v.e {
        Expr::Let(n) => n,
        e => {
            let e = match e {
                Expr::Cast { to, x } if to == out.dtype => *x,
                e => e,
            };
            let n = cx.fresh_c();
            cx.push_let(&n, e, v.free);
            n
        }
    };
    let mut region = Region {
        name: name.to_string(),
        iters: cx
            .iters
            .iter()
            .map(|(n, d)| Iter {
                name: n.clone(),
                size: Some(Size(d.clone())),
            })
            .collect(),
        inputs: args
            .iter()
            .map(|a| Input {
                name: a.name.clone(),
                dtype: a.dtype,
                memref: memref(&a.shape),
            })
            .collect(),
        outputs: vec![Output {
            name: output.to_string(),
            dtype: out.dtype,
            memref: memref(&out.shape),
            materialize,
        }],
        lets: std::mem::take(&mut cx.lets),
        yields: vec![Yield {
            from,
            to: output.to_string(),
            cast: (out.dtype != DType::F32).then_some(out.dtype),
        }],
    };
    prune_extents(&mut region);
    verify(&region).map_err(SynthError::Verify)?;
    Ok((region, cx.embeddings))
}

/// Drops every explicit reduce extent the verifier derives by itself (same value).
fn prune_extents(region: &mut Region) {
    // The region without its lets (not cloned only to be dropped).
    let mut lets = std::mem::take(&mut region.lets);
    let skeleton = region.clone();
    let Ok(sizes) = iter_sizes(&skeleton) else {
        region.lets = lets;
        return;
    };
    for l in &mut lets {
        walk_reduces(&mut l.expr, &mut |red: &mut Reduce| {
            let mut k = 0;
            while k < red.extents.len() {
                // The reduce without extent `k` (taken out in place, not a clone of its body),
                // put back where derivation does not give the same size.
                let (axis, size) = red.extents.remove(k);
                let derived = reduce_extents(&skeleton, red, &sizes, "");
                let pos = red.axes.iter().position(|a| *a == axis);
                match (derived, pos) {
                    (Ok(d), Some(p)) if d.get(p) == Some(&size.0) => {}
                    _ => {
                        red.extents.insert(k, (axis, size));
                        k += 1;
                    }
                }
            }
        });
    }
    region.lets = lets;
}

fn walk_reduces(e: &mut Expr, f: &mut dyn FnMut(&mut Reduce)) {
    match e {
        Expr::Reduce(r) => {
            walk_reduces(&mut r.body, f);
            f(r);
        }
        Expr::Scan(s) => walk_reduces(&mut s.body, f),
        Expr::Const(_) | Expr::Let(_) | Expr::Read { .. } | Expr::Index(_) => {}
        Expr::Unary(_, x) | Expr::Cast { x, .. } => walk_reduces(x, f),
        Expr::Gather { index, .. } => walk_reduces(index, f),
        Expr::Binary(_, a, b) => {
            walk_reduces(a, f);
            walk_reduces(b, f);
        }
        Expr::Where(c, a, b) => {
            walk_reduces(c, f);
            walk_reduces(a, f);
            walk_reduces(b, f);
        }
        Expr::Select {
            then, otherwise, ..
        } => {
            walk_reduces(then, f);
            walk_reduces(otherwise, f);
        }
        Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => {
            walk_reduces(operand, f)
        }
    }
}

fn show_env(env: &[Ix]) -> String {
    env.iter().map(|e| e.show()).collect::<Vec<_>>().join(", ")
}

impl Cx<'_> {
    fn fresh_c(&mut self) -> String {
        self.n_c += 1;
        format!("c{}", self.n_c)
    }

    fn fresh_acc(&mut self) -> String {
        let n = if self.n_acc == 0 {
            "acc".to_string()
        } else {
            format!("acc{}", self.n_acc)
        };
        self.n_acc += 1;
        n
    }

    fn push_let(&mut self, name: &str, e: Expr, free: BTreeSet<String>) {
        let k = self.kind(&e);
        self.let_kinds.insert(name.to_string(), k);
        self.lets.push(Let {
            name: name.to_string(),
            expr: e,
        });
        self.let_free.insert(name.to_string(), free);
    }

    /// A reduction or scan node is evaluated at one environment per kernel: at the environment it
    /// was first evaluated at, it is that let again (`Some`); at another, `MultiEnv`; the first
    /// time, `env` is recorded and the caller evaluates it (`None`).
    fn evaluated_once(&mut self, id: usize, env: &[Ix]) -> R<Option<Val>> {
        if let Some(prev) = self.reduce_at.get(&id) {
            if prev.as_slice() != env {
                return Err(SynthError::MultiEnv {
                    node: id,
                    first: show_env(prev),
                    second: show_env(env),
                });
            }
        }
        if let Some(n) = self.keyed.get(&(id, env.to_vec())) {
            return Ok(Some(self.let_ref(&n.clone())));
        }
        self.reduce_at.insert(id, env.to_vec());
        Ok(None)
    }

    fn let_ref(&self, name: &str) -> Val {
        Val {
            e: Expr::Let(name.to_string()),
            free: self.let_free.get(name).cloned().unwrap_or_default(),
        }
    }

    /// The value kind of `e` (see [`crate::ir::region::kind`]).
    fn kind(&self, e: &Expr) -> Kind {
        self.with_kinds(&|k| k.of(e))
    }

    /// The kind the operands `es` of one op compute in.
    fn operands_kind(&self, es: &[&Expr]) -> Kind {
        self.with_kinds(&|k| k.operands(es))
    }

    fn with_kinds(&self, f: &dyn Fn(&Kinds) -> Kind) -> Kind {
        let input = |n: &str| self.args.iter().find(|a| a.name == n).map(|a| a.dtype);
        let let_kind = |n: &str| self.let_kinds.get(n).copied();
        f(&Kinds {
            input: &input,
            let_kind: &let_kind,
        })
    }

    /// Whether a value needed at `env` is computed once per point it is needed at: every index
    /// a plain iter name (or a variable shadowing one) or 0, or, on an axis but the innermost, a
    /// *merge* of iters that no other index mentions — `S·i + j` with `j < S`: a GEMM over
    /// `[B·S, K]` read back as `[B, S, N]` (GPT-2's `Gemm` between two `Reshape`s), an injective
    /// map from the iters, so the reduction there is never recomputed.
    ///
    /// Not on the innermost axis: a head split `[B, S, H·D] → [B, S, H, D]` of a projection
    /// would make the GEMM's columns two iters (the contraction templates tile one), and those
    /// bodies cost BERT-12's `optimize` 0.6 s (+21 % kernel e-nodes) for a 0.04 % cheaper cover.
    fn aligned(&self, env: &[Ix]) -> bool {
        let iter = |v: &str| self.iters.iter().any(|(n, _)| n == v);
        let plain = |e: &Ix| e.is_zero() || e.as_var().is_some_and(iter);
        let Some((last, outer)) = env.split_last() else {
            return true;
        };
        if !plain(last) {
            return false;
        }
        let merges: Vec<&Ix> = outer.iter().filter(|e| !plain(e)).collect();
        if merges.is_empty() {
            return true;
        }
        let mut vars = BTreeSet::new();
        env.iter()
            .filter(|e| e.as_var().is_some())
            .for_each(|e| e.vars(&mut vars));
        merges.iter().all(|e| self.merged_iters(e, &mut vars))
    }

    /// Whether `e` is `Σ cᵢ·iᵢ` over iters not in `seen` (added to it) with the coefficients a
    /// mixed radix: one is 1 and each next one is the previous times its iter's extent.
    fn merged_iters(&self, e: &Ix, seen: &mut BTreeSet<String>) -> bool {
        use crate::index::Atom;
        let q = e.form();
        if !q.konst.is_int(0) || q.terms.len() < 2 {
            return false;
        }
        let mut terms: Vec<(Dim, Dim)> = Vec::with_capacity(q.terms.len());
        for (atom, c) in &q.terms {
            let Atom::Var(v) = atom else {
                return false;
            };
            let Some((_, ext)) = self.iters.iter().find(|(n, _)| n == v) else {
                return false;
            };
            if !seen.insert(v.clone()) {
                return false;
            }
            terms.push((c.clone(), ext.clone()));
        }
        let mut need = Dim::int(1);
        while !terms.is_empty() {
            let Some(at) = terms.iter().position(|(c, _)| *c == need) else {
                return false;
            };
            let (c, ext) = terms.swap_remove(at);
            need = c.mul(&ext);
        }
        true
    }

    /// Extent of an axis in scope.
    fn extent(&self, name: &str) -> Option<Dim> {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, d)| d.clone())
    }

    fn tensor(&self, id: usize) -> R<&TensorFacts> {
        self.facts[id]
            .tensor()
            .ok_or_else(|| SynthError::Typing(format!("node {id} is not a tensor")))
    }
}
