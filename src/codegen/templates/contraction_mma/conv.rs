//! Convolution operands of the tensor-core template (an implicit GEMM).
//!
//! **Filters (`W`) by `cp.async`.** [`contiguous_read`] generalizes the plain-read check of
//! the template to a *run* of axes: when the last `j` indices of a read are exactly the
//! innermost `j` axes of the direction the tile's rows run (in order, over dimensions of the
//! same sizes) and no other index mentions them, a flat index along those axes is a flat
//! offset in memory. A conv filter `W[co, ci, kh, kw]` read with `K = (ci, kh, kw)` is such a
//! run of `Ci·Kh·Kw` elements; when that product is a multiple of 8, every aligned 8-element
//! chunk is 16 contiguous, 16-byte aligned bytes inside one run (every outer stride is a
//! multiple of the run), so it is copied by `cp.async` with zero-fill outside the operand.
//!
//! **Images (`X`) by a hoisted gather.** The im2col operand of a conv is
//! `pred ? X[map] : 0` where every index of `map` and both sides of every comparison of
//! `pred` are affine and *separable*: a part over the tile's outer axes (`M` = batch and
//! output pixels, plus symbols and constants) plus a part over the `K` axes (input channel,
//! filter tap) — stride, dilation, padding and groups all take this form. [`Gather`] splits
//! them once; the kernel then computes, per thread and per row it loads (its tile rows are
//! fixed across `K` steps when the run layout allows), the row's base offset, the outer part
//! of each comparison and the row's validity **once per tile, before the `K` loop**; per `K`
//! step and per run only the `K` decomposition, read from a shared-memory table (offset and
//! comparison parts of each `K` position of the tile, [`Gather::table`]: written for the first
//! `stages` tiles before the prologue and for one tile per step by `BK` threads, one
//! constant-division chain each, so the loads do no division), and per element an add per
//! comparison and one predicated 2-byte load of the raw bits (no conversion: they are packed
//! straight into the register pair that is stored to shared memory).
//!
//! With NCHW input the contiguous axis is the output column, so the gathered tile runs along
//! `M` (the `[BK][BM]` layout, read back with `ldmatrix.trans`) whenever the last index of the
//! read moves with the innermost `M` axis: a warp's 2-byte loads then cover consecutive
//! columns (128 contiguous bytes at stride 1) instead of the 3-element filter-row fragments
//! that walking `K` gives. Alignment of a shifted window is not provable (`wo·s + kw·d − p`),
//! so the loads are 2-byte; a channels-last input makes the last index the channel axis and
//! the tile run along `K`.
//!
//! A padding's two bounds of one input coordinate, `outer + k ≥ 0` and `outer' + k < 0` with
//! `outer − outer'` a positive constant `d` (the input extent), are tested as one unsigned
//! comparison `(unsigned)(outer + k) < d` (only `outer` is hoisted); the row validity is left
//! out when the outer extent is a whole number of tiles, and `gk < K` when `K` is a whole
//! number of steps.
//!
//! The filter's copies take their offset from the flat `K` index (`co·Ci·Kh·Kw + k`,
//! [`run_offset`]), without decomposing it.
//!
//! TODO(issue 15): the per-step cost is still dominated by the per-element address and
//! predicate work (about 21 issued instructions per gathered element in the conv 3×3
//! benchmark's SASS, 365 per `K` step of 16 HMMA on sm_80): integer-issue bound. The price
//! does not count it yet (an added issue term made tiny convs leave the tensor cores, since
//! the SIMT template's own index work is not priced either). Left: per-row tap masks (one
//! bit test per element instead of two range compares), wider runs along `M` (8 rows per
//! thread, one table read for 8 loads), and a channels-last (NHWC) path with 16-byte
//! `cp.async` of the image.

use super::super::super::cexpr;
use super::super::super::gpu::verify::BARRIER_TOKEN;
use super::super::super::gpu::{CType, Div, Smem, Stmt};
use super::super::super::scalar::Emitter;
use super::super::super::CodegenError;
use super::super::bind_flat;
use super::super::contraction::{Side, View};
use super::{runs, MmaPlan, Stage};
use crate::ir::axis::{AxisExpr, CmpOp, Pred};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::{Expr, Region};
use smem::CHUNK;

use super::smem;

/// The operand expression of `side`, through views and lets.
fn operand<'r>(r: &'r Region, v: &View<'r>, side: Side) -> Option<&'r Expr> {
    let mut e = match side {
        Side::A => v.a,
        Side::B => v.b,
    };
    loop {
        e = match e {
            Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => operand,
            Expr::Let(n) => &r.lets.iter().find(|l| &l.name == n)?.expr,
            _ => return Some(e),
        };
    }
}

/// A plain read of a `dtype` input whose last `j ≥ 1` indices are the innermost `j` axes of
/// the direction the tile's rows run, over dimensions of their sizes, with a product that is a
/// multiple of 8, and whose other indices do not mention them (see the module doc): what
/// `cp.async` can copy in aligned 16-byte chunks.
pub(super) fn contiguous_read<'r>(
    r: &'r Region,
    v: &View<'r>,
    side: Side,
    dtype: DType,
) -> Option<(&'r str, &'r [AxisExpr])> {
    contiguous(r, v, side, dtype).map(|(t, m, _)| (t, m))
}

/// The contiguous run of a [`contiguous_read`]: its last `indices` indices, `len` elements,
/// `whole` when it spans the whole direction the tile's rows run (all of `K`, say).
#[derive(Clone, Copy, Debug)]
pub(super) struct Run {
    /// Trailing indices of the read's map that form the run.
    pub(super) indices: usize,
    /// Elements of the run.
    pub(super) len: i64,
    /// Whether the run is the whole direction (its flat index is the tile's flat index).
    pub(super) whole: bool,
}

/// The [`Run`] of `side`'s [`contiguous_read`]: a copy's offset is then the offset of the
/// other indices plus the flat index within the run (`gk % len`, or `gk` when whole), with
/// no decomposition of the flat index into the run's axes.
pub(super) fn flat_run(r: &Region, v: &View, side: Side, dtype: DType) -> Option<Run> {
    contiguous(r, v, side, dtype).map(|(_, _, run)| run)
}

fn contiguous<'r>(
    r: &'r Region,
    v: &View<'r>,
    side: Side,
    dtype: DType,
) -> Option<(&'r str, &'r [AxisExpr], Run)> {
    let Expr::Read { tensor, map } = operand(r, v, side)? else {
        return None;
    };
    let input = r.input(tensor)?;
    if input.dtype != dtype {
        return None;
    }
    let axes = if v.k_fastest(side) {
        &v.k
    } else {
        match side {
            Side::A => &v.m,
            Side::B => &v.n,
        }
    };
    // Trailing indices 0 into dimensions of size 1 (a 1×1 filter's taps) move nothing.
    let mut shape = &input.memref.shape[..];
    let mut map_all = &map[..];
    while let (Some((AxisExpr::Const(0), m)), Some((d, sh))) =
        (map_all.split_last(), shape.split_last())
    {
        if d.0.as_int() != Some(1) {
            break;
        }
        (map_all, shape) = (m, sh);
    }
    let map = map_all;
    // Axes of size 1 the read does not index (a 1×1 filter's taps) move nothing either.
    let (names, sizes): (Vec<String>, Vec<Dim>) = axes
        .names
        .iter()
        .zip(&axes.sizes)
        .filter(|(n, s)| s.as_int() != Some(1) || map.iter().any(|a| a.mentions(&|x| x == *n)))
        .map(|(n, s)| (n.clone(), s.clone()))
        .unzip();
    for j in 1..=names.len().min(map.len()) {
        let names = &names[names.len() - j..];
        let sizes = &sizes[sizes.len() - j..];
        let (rest, last) = map.split_at(map.len() - j);
        let dims = &shape[shape.len() - j..];
        let exact = last
            .iter()
            .zip(names)
            .all(|(a, n)| matches!(a, AxisExpr::Name(x) if x == n));
        let same = dims
            .iter()
            .zip(sizes)
            .all(|(d, s)| d.0.as_int().is_some_and(|d| s.as_int() == Some(d) && d > 0));
        let elsewhere = rest
            .iter()
            .any(|a| a.mentions(&|x| names.iter().any(|n| n == x)));
        let run = Dim::product(sizes).as_int();
        if let (true, true, false, Some(len)) = (exact, same, elsewhere, run) {
            if len % CHUNK as i64 == 0 {
                let whole = axes.extent().as_int() == Some(len);
                let run = Run {
                    indices: j,
                    len,
                    whole,
                };
                return Some((tensor.as_str(), map, run));
            }
        }
    }
    None
}

/// An affine index split as `outer + k` (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct Split {
    /// The part over the outer axes (and symbols, constants).
    pub(crate) outer: AxisExpr,
    /// The part over the `K` axes.
    pub(crate) k: AxisExpr,
}

/// Splits `e` into a part free of the `K` axes and a part over them (and constants), or
/// `None` when a term mixes them non-linearly (a floordiv or min of both).
fn split(e: &AxisExpr, is_k: &dyn Fn(&str) -> bool) -> Option<Split> {
    if !e.mentions(is_k) {
        return Some(Split {
            outer: e.clone(),
            k: AxisExpr::Const(0),
        });
    }
    match e {
        AxisExpr::Name(_) => Some(Split {
            outer: AxisExpr::Const(0),
            k: e.clone(),
        }),
        AxisExpr::Add(ts) => {
            let parts: Option<Vec<Split>> = ts.iter().map(|t| split(t, is_k)).collect();
            let (o, k): (Vec<_>, Vec<_>) = parts?.into_iter().map(|s| (s.outer, s.k)).unzip();
            Some(Split {
                outer: AxisExpr::sum(o),
                k: AxisExpr::sum(k),
            })
        }
        AxisExpr::Mul(a, b) => {
            // One side is free of axes (the IR's rule); it scales both parts of the other.
            let (c, x) = if a.mentions(is_k) { (b, a) } else { (a, b) };
            if c.mentions(is_k) {
                return None;
            }
            let s = split(x, is_k)?;
            Some(Split {
                outer: AxisExpr::product((**c).clone(), s.outer),
                k: AxisExpr::product((**c).clone(), s.k),
            })
        }
        _ => None,
    }
}

/// One comparison of the guard as `outer + k op 0`.
#[derive(Clone, Debug)]
pub(crate) struct Cmp {
    /// The comparison against 0.
    pub(crate) op: CmpOp,
    /// Its left side, split.
    pub(crate) side: Split,
}

fn cmps(p: &Pred, is_k: &dyn Fn(&str) -> bool, out: &mut Vec<Cmp>) -> Option<()> {
    match p {
        Pred::And(ps) => ps.iter().try_for_each(|q| cmps(q, is_k, out)),
        Pred::Or(_) => None,
        Pred::Cmp(op, a, b) => {
            let diff = AxisExpr::sum(vec![
                a.clone(),
                AxisExpr::product(AxisExpr::Const(-1), b.clone()),
            ]);
            out.push(Cmp {
                op: *op,
                side: split(&diff, is_k)?,
            });
            Some(())
        }
    }
}

/// Whether every tile row a block loads lies inside the operand: the outer extent is a known
/// whole number of `tile` rows (no tail tile).
fn rows_in_range(axes: &super::super::contraction::Axes, tile: u64) -> bool {
    axes.extent()
        .as_int()
        .is_some_and(|n| n > 0 && (n as u64).is_multiple_of(tile))
}

/// A conv image operand loaded by the hoisted gather (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct Gather<'r> {
    /// The input read.
    pub(crate) tensor: &'r str,
    /// Its indices, split.
    pub(crate) index: Vec<Split>,
    /// The guard's comparisons (all must hold).
    pub(crate) guard: Vec<Cmp>,
    /// Whether the operand's tile rows run along `K` (else along the outer axis).
    pub k_fastest: bool,
}

/// The gather of `side` of `v`, when the operand is a (guarded) read of a `dtype` input
/// whose indices and guard are separable and which is a window: guarded, or with an index
/// that mixes `K` with the outer axes or scales an axis (a convolution, a strided 1×1); a
/// plain matrix read is left to the template's other paths.
pub(crate) fn gather<'r>(
    r: &'r Region,
    v: &View<'r>,
    side: Side,
    dtype: DType,
) -> Option<Gather<'r>> {
    let (read, pred) = match operand(r, v, side)? {
        Expr::Select {
            pred,
            then,
            otherwise,
        } if matches!(**otherwise, Expr::Const(z) if z == 0.0) => (&**then, Some(pred)),
        e => (e, None),
    };
    let Expr::Read { tensor, map } = read else {
        return None;
    };
    if r.input(tensor)?.dtype != dtype {
        return None;
    }
    let is_k = |n: &str| v.k.names.iter().any(|k| k == n);
    let outer = match side {
        Side::A => &v.m,
        Side::B => &v.n,
    };
    let index: Vec<Split> = map.iter().map(|a| split(a, &is_k)).collect::<Option<_>>()?;
    let mixed = map.iter().any(|a| {
        a.mentions(&is_k) && a.mentions(&|n| r.iters.iter().any(|i| i.name == n) && !is_k(n))
    });
    let strided = map
        .iter()
        .any(|a| !matches!(a, AxisExpr::Name(_) | AxisExpr::Const(_)));
    if !(mixed || strided || pred.is_some()) {
        return None;
    }
    let mut guard = Vec::new();
    if let Some(p) = pred {
        cmps(p, &is_k, &mut guard)?;
    }
    let inner = outer.names.last()?;
    let k_fastest = !map.last()?.mentions(&|n| n == inner.as_str());
    Some(Gather {
        tensor,
        index,
        guard,
        k_fastest,
    })
}

/// How the loads test one comparison of the guard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CmpUse {
    /// On its own: `outer + k op 0`.
    Single,
    /// The lower end of a range `0 ≤ x < d` with `x = outer + k` (this `≥ 0` and another
    /// comparison `outer' + k < 0` whose `outer − outer'` is the constant `d > 0`, the same
    /// `k`): tested as one unsigned comparison `(unsigned)x < d`.
    Range(i64),
    /// The upper end of a [`CmpUse::Range`]: not tested (nor hoisted) on its own.
    Covered,
}

/// `e`, when it is a constant: evaluated with every name at 0 and at distinct non-zero values
/// (an affine expression is constant iff these agree; the guard's parts are affine).
fn constant(e: &AxisExpr) -> Option<i64> {
    let mut names = Vec::new();
    e.for_each_name(&mut |n| names.push(n.to_string()));
    let at = |f: &dyn Fn(usize) -> i64| e.eval(&|n| names.iter().position(|m| m == n).map(f)).ok();
    let c = at(&|_| 0)?;
    for salt in [1i64, 7, 1000] {
        if at(&|i| salt * (i as i64 + 3) + 11 * i as i64)? != c {
            return None;
        }
    }
    Some(c)
}

/// The use of each guard comparison: `lo ≤ x < hi` pairs (padding's two bounds of one input
/// coordinate) become one unsigned comparison.
fn cmp_uses(guard: &[Cmp]) -> Vec<CmpUse> {
    let mut uses = vec![CmpUse::Single; guard.len()];
    for i in 0..guard.len() {
        if guard[i].op != CmpOp::Ge || uses[i] != CmpUse::Single {
            continue;
        }
        let partner = (0..guard.len()).find_map(|j| {
            let (a, b) = (&guard[i], &guard[j]);
            if j == i || b.op != CmpOp::Lt || uses[j] != CmpUse::Single || a.side.k != b.side.k {
                return None;
            }
            let diff = AxisExpr::sum(vec![
                a.side.outer.clone(),
                AxisExpr::product(AxisExpr::Const(-1), b.side.outer.clone()),
            ]);
            constant(&diff)
                .filter(|d| *d > 0 && *d <= i64::from(i32::MAX))
                .map(|d| (j, d))
        });
        if let Some((j, d)) = partner {
            uses[i] = CmpUse::Range(d);
            uses[j] = CmpUse::Covered;
        }
    }
    uses
}

/// Register names of the hoisted row data.
const ROW_OFF: &str = "g_row";
const ROW_OK: &str = "g_row_ok";
fn row_cmp(j: usize) -> String {
    format!("g_rc{j}")
}

/// The shared-memory table of the `K` decomposition of stage `s` (see [`Gather::table`]).
fn table_name(s: &Stage) -> String {
    format!("{}_ktab", s.regs)
}

impl Gather<'_> {
    /// Rows per run (2 when the tile runs along the outer axis) and `K` positions per run.
    fn shape(&self) -> (u64, u64) {
        if self.k_fastest {
            (1, 2)
        } else {
            (2, 1)
        }
    }

    /// The number of distinct row sets per thread: 1 when a thread's runs all lie in the
    /// same tile rows (the run index `tid + l·threads` moves only along `K`), else one per run.
    fn slots(&self, s: &Stage, p: &MmaPlan) -> u64 {
        let threads = p.threads();
        let loads = (s.outer * p.tile[2] / 2).div_ceil(threads);
        let per_k_row = s.outer / 2;
        if !self.k_fastest && threads.is_multiple_of(per_k_row) {
            1
        } else {
            loads
        }
    }

    /// Values per `K` position in the table: the offset, then the `K` part of each tested
    /// guard comparison.
    fn width(&self) -> u64 {
        1 + cmp_uses(&self.guard)
            .iter()
            .filter(|u| **u != CmpUse::Covered)
            .count() as u64
    }

    /// The `K` decomposition table of stage `s`: `[stages][BK][width]` ints, slot `t % stages`
    /// holding, for each position `kk` of tile `t`, the image offset of `k = t·BK + kk` and the
    /// `K` part of each tested guard comparison. Written by [`Gather::hoist`] (tiles
    /// `0..stages`) and [`Gather::advance`] (one tile per step), read by [`Gather::loads`]: the
    /// loads do no division in the `K` loop.
    pub(super) fn table(&self, s: &Stage, p: &MmaPlan) -> Smem {
        Smem {
            name: table_name(s),
            ty: CType::I32,
            dims: vec![p.stages, p.tile[2], self.width()],
            dynamic: false,
        }
    }

    /// Writes the table entries of tile `kt` (C) into slot `slot` (C): threads `0..BK` each
    /// decompose one position (one constant-division chain per step for the block).
    fn fill(
        &self,
        em: &mut Emitter,
        v: &View,
        s: &Stage,
        p: &MmaPlan,
        kt: &str,
        slot: &str,
    ) -> Result<Stmt, CodegenError> {
        let (bk, threads) = (p.tile[2], p.threads());
        let uses = cmp_uses(&self.guard);
        em.open();
        em.push_scope();
        let gk = em.fresh("gk");
        em.emit(Stmt::int(&gk, format!("({kt}) * {bk} + e")));
        bind_flat(em, &v.k.names, &v.k.c_sizes(), &gk, "k_");
        let kidx: Vec<AxisExpr> = self.index.iter().map(|x| x.k.clone()).collect();
        let (_, _, koff) = em.read_offset(self.tensor, &kidx)?;
        let at = |j: usize| format!("{}[{slot}][e][{j}]", table_name(s));
        em.emit(Stmt::Assign {
            place: at(0),
            value: koff,
        });
        let tested = self
            .guard
            .iter()
            .zip(&uses)
            .filter(|(_, u)| **u != CmpUse::Covered);
        for (j, (c, _)) in tested.enumerate() {
            em.emit(Stmt::Assign {
                place: at(j + 1),
                value: em.axis(&c.side.k),
            });
        }
        em.pop_scope();
        let body = em.close();
        let mut inner = vec![Stmt::int("e", format!("tid + l * {threads}"))];
        if bk.is_multiple_of(threads) {
            inner.extend(body);
        } else {
            inner.push(Stmt::If {
                cond: format!("e < {bk}"),
                div: Div::Thread,
                then: body,
                otherwise: vec![],
            });
        }
        Ok(Stmt::unrolled("l", bk.div_ceil(threads), inner))
    }

    /// The table entries of tile `nt + 1` (the main loop's step `kt` refills tile `nt =
    /// kt + stages − 1`), into slot `(nt + 1) % stages = kt % stages`: that slot's tile `kt`
    /// was loaded `stages − 1` steps ago, before this step's barrier, and the entries are
    /// published by the next step's barrier, before the loads that read them.
    pub(super) fn advance(
        &self,
        em: &mut Emitter,
        v: &View,
        s: &Stage,
        p: &MmaPlan,
    ) -> Result<Stmt, CodegenError> {
        let fill = self.fill(em, v, s, p, &p.k_tile("nt + 1"), "st")?;
        Ok(Stmt::uniform_if("nt + 1 < kt_count", vec![fill]))
    }

    /// The row data of each (slot, row of the run), computed once per tile (before the `K`
    /// loop): base offset, validity and the outer part of each guard comparison.
    pub(super) fn hoist(
        &self,
        em: &mut Emitter,
        v: &View,
        s: &Stage,
        p: &MmaPlan,
    ) -> Result<(), CodegenError> {
        let (rows, _) = self.shape();
        let slots = self.slots(s, p);
        let dims = vec![slots, rows];
        let uses = cmp_uses(&self.guard);
        let axes = match s.side {
            Side::A => &v.m,
            Side::B => &v.n,
        };
        let rows_ok = rows_in_range(axes, s.outer);
        let mut names = vec![ROW_OFF.to_string()];
        if !rows_ok {
            names.push(ROW_OK.to_string());
        }
        names.extend(
            (0..self.guard.len())
                .filter(|j| uses[*j] != CmpUse::Covered)
                .map(row_cmp),
        );
        for n in &names {
            em.emit(Stmt::Array {
                ty: CType::I32,
                name: format!("{}_{}", s.regs, n),
                dims: dims.clone(),
                zero: false,
            });
        }
        em.open();
        let threads = p.threads();
        em.emit(Stmt::int("c", format!("tid + l * {threads}")));
        let (o, _) = s.run("c", 2);
        em.emit(Stmt::int("o", o));
        for e in 0..rows {
            em.push_scope();
            let go = em.fresh("go");
            em.emit(Stmt::int(&go, format!("{} + o + {e}", s.origin())));
            bind_flat(em, &axes.names, &axes.c_sizes(), &go, "o_");
            let outer: Vec<AxisExpr> = self.index.iter().map(|x| x.outer.clone()).collect();
            let (_, _, off) = em.read_offset(self.tensor, &outer)?;
            let at = |n: &str| format!("{}_{n}[l][{e}]", s.regs);
            em.emit(Stmt::Assign {
                place: at(ROW_OFF),
                value: off,
            });
            if !rows_ok {
                em.emit(Stmt::Assign {
                    place: at(ROW_OK),
                    value: format!("{go} < {} ? 1 : 0", cexpr::dim(&axes.extent())),
                });
            }
            for (j, c) in self.guard.iter().enumerate() {
                if uses[j] == CmpUse::Covered {
                    continue;
                }
                em.emit(Stmt::Assign {
                    place: at(&row_cmp(j)),
                    value: em.axis(&c.side.outer),
                });
            }
            em.pop_scope();
        }
        let body = em.close();
        em.emit(Stmt::unrolled("l", slots, body));
        // The `K` table of tiles `0..stages` (the prologue's and the first step's loads).
        for t in 0..p.stages {
            let fill = self.fill(em, v, s, p, &p.k_tile(&t.to_string()), &t.to_string())?;
            em.emit(fill);
        }
        em.emit(Stmt::Barrier);
        Ok(())
    }

    /// The loads of global `K` tile `kt` (C) whose table entries are in slot `tslot` (C: the
    /// CTA's local step modulo the stages, as the shared-memory stage; under split-K the
    /// global tile is `kt0` further): per run, the `K` decomposition once, then per element
    /// the guard and a predicated load of its raw 2-byte bits, packed into `regs[l]`.
    pub(super) fn loads(
        &self,
        em: &mut Emitter,
        v: &View,
        s: &Stage,
        p: &MmaPlan,
        kt: &str,
        tslot: &str,
    ) -> Result<Vec<Stmt>, CodegenError> {
        let bk = p.tile[2];
        let (rows, ks) = self.shape();
        let slot = if self.slots(s, p) == 1 { "0" } else { "l" };
        let (_, k) = s.run("c", 2);
        // Along the outer axis the run's `K` row is `c / (BM/2)`; with `c = tid + l·threads`
        // and `threads` a multiple of `BM/2` it is `tid / (BM/2) + l·threads/(BM/2)`, which the
        // compiler folds into the table loads' immediate offsets (`c / …` of a signed `c` it
        // cannot split).
        let per = s.outer / 2;
        let k = if !self.k_fastest && p.threads().is_multiple_of(per) {
            format!("(int)((unsigned)tid / {per}u) + l * {}", p.threads() / per)
        } else {
            k
        };
        em.open();
        em.emit(Stmt::int("kk", k));
        let param = em.read_offset(self.tensor, &[])?.0;
        let uses = cmp_uses(&self.guard);
        let outer_axes = match s.side {
            Side::A => &v.m,
            Side::B => &v.n,
        };
        let rows_ok = rows_in_range(outer_axes, s.outer);
        // `gk < K` holds for every step of the loop when `K` is a whole number of steps.
        let k_whole =
            v.k.extent()
                .as_int()
                .is_some_and(|k| k > 0 && (k as u64).is_multiple_of(bk));
        // The `K` decomposition of this tile's positions, from the table `fill` wrote (a
        // warp's lanes read the same entry: one broadcast shared load per value).
        em.emit(Stmt::SmemUse {
            token: BARRIER_TOKEN.into(),
        });
        let mut k_parts = Vec::new();
        for kx in 0..ks {
            let entry = |j: usize| format!("{}[{tslot}][kk + {kx}][{j}]", table_name(s));
            let ko = em.fresh("ko");
            em.emit(Stmt::int(&ko, entry(0)));
            let conds: Vec<String> = if k_whole {
                vec![]
            } else {
                vec![format!(
                    "{kt} * {bk} + kk + {kx} < {}",
                    cexpr::dim(&v.k.extent())
                )]
            };
            let mut cmp_k = Vec::new();
            let mut j = 1;
            for u in &uses {
                if *u == CmpUse::Covered {
                    cmp_k.push(String::new());
                    continue;
                }
                let kc = em.fresh("kc");
                em.emit(Stmt::int(&kc, entry(j)));
                j += 1;
                cmp_k.push(kc);
            }
            k_parts.push((ko, conds, cmp_k));
        }
        let mut xs = Vec::new();
        for e in 0..2u64 {
            let (row, kx) = if rows == 2 { (e, 0) } else { (0, e) };
            let (ko, conds, cmp_k) = &k_parts[kx as usize];
            let at = |n: &str| format!("{}_{n}[{slot}][{row}]", s.regs);
            let mut ok = conds.clone();
            if !rows_ok {
                ok.push(format!("{} != 0", at(ROW_OK)));
            }
            for (j, (c, kc)) in self.guard.iter().zip(cmp_k).enumerate() {
                match uses[j] {
                    CmpUse::Single => ok.push(format!("{} + {kc} {} 0", at(&row_cmp(j)), c.op)),
                    CmpUse::Range(d) => {
                        ok.push(format!("(unsigned)({} + {kc}) < {d}u", at(&row_cmp(j))))
                    }
                    CmpUse::Covered => {}
                }
            }
            if ok.is_empty() {
                ok.push("true".into());
            }
            let x = em.fresh("x");
            em.emit(Stmt::Let {
                ty: CType::U32,
                name: x.clone(),
                value: format!(
                    "({}) ? dlc_bits({param}[{} + {ko}]) : 0u",
                    ok.join(" && "),
                    at(ROW_OFF)
                ),
                mutable: false,
            });
            xs.push(x);
        }
        em.emit(Stmt::Assign {
            place: format!("{}[l]", s.regs),
            value: format!("{} | ({} << 16)", xs[0], xs[1]),
        });
        let body = em.close();
        Ok(vec![runs(s, 2, bk, p.threads(), body)])
    }
}

/// The offset (C) of a `cp.async` chunk of a [`Run`] read (`tensor`, `map`) of stage `s`: the
/// offset of the indices outside the run plus the flat index within it (`gk` along `K`, `go`
/// along the outer axis, reduced modulo the run unless it is the whole direction), with the
/// read's parameter.
pub(super) fn run_offset(
    em: &mut Emitter,
    s: &Stage,
    tensor: &str,
    map: &[AxisExpr],
    run: Run,
) -> Result<(String, String), CodegenError> {
    let (rest, _) = map.split_at(map.len() - run.indices);
    let mut idx = rest.to_vec();
    idx.extend(std::iter::repeat_n(AxisExpr::Const(0), run.indices));
    let (param, _, base) = em.read_offset(tensor, &idx)?;
    let flat = if s.tile.k_fastest { "gk" } else { "go" };
    let flat = if run.whole {
        flat.to_string()
    } else {
        format!("{flat} % {}", run.len)
    };
    Ok((param, format!("({base}) + ({flat})")))
}
