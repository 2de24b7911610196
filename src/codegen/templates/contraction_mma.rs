//! The SM80 tensor-core contraction template (`mma_sync`): a `BM×BN` output tile per block of
//! `warps_m × warps_n` warps, each warp owning a `WM×WN` sub-tile of `mma.sync.m16n8k16`
//! fragments (fp16 or bf16 operands, fp32 accumulators), `K` walked in `BK` steps through a
//! ring of `stages` shared-memory buffers.
//!
//! **Staging.** Each operand tile is kept in shared memory in the direction its global rows
//! run: `[outer][BK]` when the operand walks `K` fastest (row-major `A[m, k]`, `Bᵀ[n, k]`),
//! else `[BK][outer]` (`B[k, n]`, `Aᵀ[k, m]`), rows back to back without padding
//! (`stages · BK · (BM + BN) · 2` bytes in all, the plan space's estimate for 2-byte operands).
//! The 16-byte chunks of each row are XOR-swizzled by the row index (`smem`: `c ^ (r % 8)`
//! for 128-byte rows, `c ^ ((r / 2) % 4)` for 64-byte rows, …), so the eight rows of an
//! `ldmatrix` phase, a quarter-warp of `cp.async` copies and a warp of 4-byte stores each hit
//! distinct banks; every writer and reader addresses the tile through `smem::Tile::place`
//! (the swizzled column), with coordinates from `smem::Tile::run` and
//! `smem::ldmatrix_lane`. An operand that is a plain read of an fp16/bf16 input whose rows
//! are contiguous and 16-byte aligned in 8-element chunks (provable from the sizes with
//! `Dim::div_exact`, symbolic ones included: a ShapeSet specialization's `8*T_8`) is copied
//! with `cp.async` 16-byte chunks (zero-filled outside the operand); when a symbolic size is
//! not provably a multiple of 8, the kernel tests it at run time and a launch failing the test
//! loads that operand element by element into the stage instead; any other operand (a
//! padded conv's guarded gather, a cast of an fp32 tensor, row lengths not provably multiples
//! of 8) is computed element by element with its prologue (`View::load`), converted, packed in
//! pairs into registers and stored to shared memory: held in registers across a step's
//! fragment loop when the tile needs at most `plan::space::REG_HELD_MAX` registers per
//! thread, else stored as loaded (a *direct* stage, 4 runs unrolled at a time so that the
//! loads are not all hoisted: spill-free at 128×128×64).
//!
//! **Blocks.** Every tile of a batch entry is on `grid.x` in the grouped order of
//! [`View::open_tile`] (8 tile rows walked column by column, for L2 reuse), the batch on
//! `grid.y` when it provably fits 65535, else folded into `grid.x`.
//!
//! **Pipeline** (one barrier per step): the prologue fills stages `0..S-1`; step `kt` waits for
//! tile `kt` (`cp.async.wait_group S-2`), synchronizes, issues tile `kt+S-1` into the stage step
//! `kt-1` read (copies, register loads, or a direct stage's loads and stores), runs the `BK/16`
//! fragment steps on stage `kt % S`, then stores the held register-staged part of tile
//! `kt+S-1`. A synchronous plan
//! (`async_ = false`) stages both operands through registers.
//!
//! **Fragments** (PTX ISA, `mma.m16n8k16`, `ldmatrix`): `A` is loaded per 16×16 block by
//! `ldmatrix.x4` (matrices: rows 0–7/8–15 × `k` 0–7, then × `k` 8–15; `.trans` from `[k][m]`
//! tiles), `B` per 16(`k`)×16(`n`) block by `ldmatrix.x4` giving the two 2-register fragments
//! of `n` 0–7 and 8–15 (`.trans` from `[k][n]` tiles). Lane `l` supplies row `l % 8` of matrix
//! `l / 8`. Accumulator register `e` of lane `l` holds row `l/4 + 8·(e/2)`, column
//! `2·(l%4) + e%2` of its 16×8 fragment; the epilogue runs there, on the fp32 values. When the
//! output's contiguous axis is the innermost `N` (or `M`) axis and the contiguous run of the
//! trailing axes is a multiple of a 16-byte chunk (`View::store_chunk`: proved, or for a
//! symbolic run tested at run time, a failing launch storing each chunk's elements one by
//! one), the values are staged per warp through the (then idle) operand ring and stored in
//! 16-byte chunks (`epilogue`); otherwise each element is stored, predicated on the output's
//! bounds.

pub(crate) mod conv;
mod epilogue;
pub(super) mod smem;

use super::super::cexpr;
use super::super::gpu::verify::BARRIER_TOKEN;
use super::super::gpu::{CType, Div, Kernel, Launch, Smem, Stmt, Unroll};
use super::super::scalar::Emitter;
use super::super::CodegenError;
use super::contraction::{Side, View};
use super::{bind_flat, params, split_k};
use crate::ir::axis::AxisExpr;
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::{Expr, Region, Size};
use crate::plan::space::held_regs;
use crate::target::Arch;
use smem::{ldmatrix_lane, Tile, C, CHUNK};

/// The load token of the tiles a step consumes (committed by the prologue and the refills).
const TILE: &str = "tile";
/// The load token of the refill a step issues (consumed `stages - 1` steps later).
const REFILL: &str = "tile_refill";
/// The compute token of the accumulators.
const ACC: &str = "acc_ready";

/// The plan's knobs this template implements.
#[derive(Clone, Copy, Debug)]
pub struct MmaPlan {
    /// `[BM, BN, BK]`.
    pub tile: [u64; 3],
    /// Warps along `M` and along `N`.
    pub warps: [u64; 2],
    /// Shared-memory stages (≥ 2).
    pub stages: u64,
    /// Whether plain operands are copied with `cp.async`.
    pub async_: bool,
    /// CTAs per tile, each over its share of the `K` steps (split-K, [`super::split_k`]; 1:
    /// none).
    pub splits: u64,
}

impl MmaPlan {
    /// Threads per block.
    pub fn threads(&self) -> u64 {
        self.warps[0] * self.warps[1] * 32
    }

    /// The global `K` tile (C) of the CTA's local step `kt` (C): a split's share starts at
    /// `kt0`. Shared-memory stages and the conv gather's table slots stay local.
    fn k_tile(&self, kt: &str) -> String {
        if self.splits > 1 {
            format!("(kt0 + {kt})")
        } else {
            kt.to_string()
        }
    }
}

/// The element type an operand is multiplied in: a cast's target, a read's input type
/// (through guards, views and lets); `None` for computed values.
fn operand_dtype(r: &Region, e: &Expr) -> Option<DType> {
    match e {
        Expr::Cast { to, .. } => Some(*to),
        Expr::Read { tensor, .. } | Expr::Gather { tensor, .. } => r.input(tensor).map(|i| i.dtype),
        Expr::Select { then, .. } => operand_dtype(r, then),
        Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => {
            operand_dtype(r, operand)
        }
        Expr::Let(n) => r
            .lets
            .iter()
            .find(|l| &l.name == n)
            .and_then(|l| operand_dtype(r, &l.expr)),
        _ => None,
    }
}

/// The tensor-core input type of `v`: both operands fp16 or both bf16 after their prologue.
pub fn mma_dtype(r: &Region, v: &View) -> Option<DType> {
    if v.second.is_some() {
        return None; // a second contraction's accumulators: the SIMT template's
    }
    match (operand_dtype(r, v.a), operand_dtype(r, v.b)) {
        (Some(DType::F16), Some(DType::F16)) => Some(DType::F16),
        (Some(DType::BF16), Some(DType::BF16)) => Some(DType::BF16),
        _ => None,
    }
}

/// A plain read of an input: its tensor and index map.
type Read<'r> = (&'r str, &'r [AxisExpr]);

/// The read `cp.async` can copy for `side`: the operand is (a view or let of) a plain read of
/// a `dtype` input, its last index is exactly the innermost axis of the direction the tile's
/// rows run, that axis' extent and the input's last dimension are multiples of 8, so an
/// aligned 8-element chunk of the axis is 16 contiguous, 16-byte aligned bytes, all inside or
/// all outside the operand (the tails are zero-filled by `cp.async`'s source size 0).
///
/// The multiples are proved on the sizes where they can be (`Dim::div_exact`: numbers, or
/// symbolic sizes such as a ShapeSet's `8*T_8`); a symbolic size that is not provably one is
/// tested at run time: the second value is that test (C), under which the kernel copies with
/// `cp.async`, and otherwise loads the tile element by element ([`copies`]).
fn async_read<'r>(
    r: &'r Region,
    v: &View<'r>,
    side: Side,
    dtype: DType,
) -> Option<(Read<'r>, Option<String>)> {
    let mut e = match side {
        Side::A => v.a,
        Side::B => v.b,
    };
    loop {
        e = match e {
            Expr::BroadcastInDim { operand, .. } | Expr::Transpose { operand, .. } => operand,
            Expr::Let(n) => &r.lets.iter().find(|l| &l.name == n)?.expr,
            _ => break,
        };
    }
    let Expr::Read { tensor, map } = e else {
        return None;
    };
    let input = r.input(tensor)?;
    if input.dtype != dtype {
        return None;
    }
    let outer = match side {
        Side::A => &v.m,
        Side::B => &v.n,
    };
    let (axis, extent) = if v.k_fastest(side) {
        (v.k.names.last()?, v.k.sizes.last()?)
    } else {
        (outer.names.last()?, outer.sizes.last()?)
    };
    let (last, rest) = map.split_last()?;
    let is_axis = matches!(last, AxisExpr::Name(n) if n == axis);
    let elsewhere = rest.iter().any(|a| a.mentions(&|n| n == axis.as_str()));
    let row = &input.memref.shape.last()?.0;
    if !is_axis || elsewhere {
        return None;
    }
    // Proved on the sizes, symbolic ones included (a ShapeSet specialization writes `T` as
    // `8*T_8`, which divides exactly); a symbolic size that does not divide provably is
    // tested at run time, a number that does not divide rules the copy out.
    let mut tests = Vec::new();
    for d in [extent, row] {
        if d.div_exact(&Dim::int(CHUNK as i64)).is_some() {
            continue;
        }
        if d.as_int().is_some() {
            return None;
        }
        let test = format!("{} % {CHUNK} == 0", cexpr::dim(d));
        if !tests.contains(&test) {
            tests.push(test);
        }
    }
    let test = (!tests.is_empty()).then(|| tests.join(" && "));
    Some(((tensor.as_str(), map.as_slice()), test))
}

/// How the tensor-core template fills one operand's shared-memory tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Staging {
    /// 16-byte `cp.async` copies straight from global memory (zero-filled outside the operand).
    CpAsync,
    /// Element-wise loads with the operand's prologue, converted and stored through registers.
    Registers,
    /// [`Staging::CpAsync`] under a run-time alignment test, element by element otherwise.
    CpAsyncChecked,
    /// A convolution's im2col gather (`conv`): row bases, validity and guard parts hoisted
    /// out of the `K` loop, per element a predicated 2-byte load packed through registers.
    Gather,
}

/// How [`build`] stages `side` of `v` (what the plan space prices: a register-staged operand
/// costs its scalar loads and conversions).
pub fn operand_staging(r: &Region, v: &View, side: Side) -> Staging {
    match mma_dtype(r, v) {
        // A copy aligned only under a run-time test is priced as one (the launches the test
        // sends element by element are the slow path; TODO(issue 15): price that path's time),
        // its registers hold both paths.
        Some(d) if async_read(r, v, side, d).is_some_and(|(_, t)| t.is_some()) => {
            Staging::CpAsyncChecked
        }
        Some(d) if async_read(r, v, side, d).is_some() => Staging::CpAsync,
        Some(d) if conv::contiguous_read(r, v, side, d).is_some() => Staging::CpAsync,
        Some(d) if conv::gather(r, v, side, d).is_some() => Staging::Gather,
        _ => Staging::Registers,
    }
}

/// One operand's staging: its shared-memory tile and how it is filled.
struct Stage<'r> {
    side: Side,
    /// The shared-memory buffer, `[stages][rows][len]`, swizzled (`tile`).
    smem: &'static str,
    /// Register array of the register-staged path.
    regs: &'static str,
    /// The layout of one stage.
    tile: Tile,
    /// Tile extent along the outer axis (`BM` or `BN`).
    outer: u64,
    /// The plain read `cp.async` copies, when it can.
    copy: Option<Read<'r>>,
    /// The run-time test (C) under which `copy` is aligned, when the sizes do not prove it
    /// ([`async_read`]); a launch failing it loads the tile element by element.
    aligned: Option<String>,
    /// The contiguous run of a conv filter's `copy` (`conv::flat_run`): its offset is taken
    /// from the flat index, without decomposing it.
    flat: Option<conv::Run>,
    /// The conv gather that loads it otherwise, when the operand is one.
    gather: Option<conv::Gather<'r>>,
    /// A register-staged tile too large to hold across the fragment steps
    /// ([`REG_HELD_MAX`]): each pair is stored to shared memory as soon as it is loaded.
    /// Never for a conv gather, which always holds its tile in registers.
    direct: bool,
}

impl Stage<'_> {
    /// The C place of tile element (`o`, `k`) in stage `st` (the swizzled column).
    fn at(&self, st: &str, o: C, k: C) -> String {
        let (row, col) = self.tile.place(o, k);
        format!("{}[{st}][{row}][{col}]", self.smem)
    }

    /// The C tile coordinates (outer, k) of the start of the `w`-element run number `c`.
    fn run(&self, c: &str, w: u64) -> (String, String) {
        let (o, k) = self.tile.run(C::atom(c), w);
        (o.to_string(), k.to_string())
    }

    /// The origin of the tile along the outer axis (C).
    fn origin(&self) -> &'static str {
        match self.side {
            Side::A => "m0",
            Side::B => "n0",
        }
    }
}

/// Runs of a `direct` stage unrolled together: the loop over them is not unrolled further,
/// so that the compiler does not hoist every load of the tile ahead of its stores (255
/// registers and spills at 128×128×64 otherwise).
const DIRECT_UNROLL: u64 = 4;

/// Per-thread `w`-element runs of a stage's tile, and the loop over them (`c` the run; `l` the
/// thread's run number). A `direct` stage's runs are unrolled [`DIRECT_UNROLL`] at a time.
fn runs(s: &Stage, w: u64, bk: u64, threads: u64, body: Vec<Stmt>) -> Stmt {
    let total = s.outer * bk / w;
    let mut inner = vec![Stmt::int("c", format!("tid + l * {threads}"))];
    if total.is_multiple_of(threads) {
        inner.extend(body);
    } else {
        inner.push(Stmt::If {
            cond: format!("c < {total}"),
            div: Div::Thread,
            then: body,
            otherwise: vec![],
        });
    }
    let count = total.div_ceil(threads);
    if !s.direct || count <= DIRECT_UNROLL || !count.is_multiple_of(DIRECT_UNROLL) {
        return Stmt::unrolled("l", count, inner);
    }
    let mut batch = vec![Stmt::int("l", format!("lb * {DIRECT_UNROLL} + li"))];
    batch.extend(inner);
    Stmt::For {
        var: "lb".into(),
        start: "0".into(),
        end: (count / DIRECT_UNROLL).to_string(),
        step: "1".into(),
        unroll: Unroll::Compiler,
        div: Div::Block,
        body: vec![Stmt::unrolled("li", DIRECT_UNROLL, batch)],
    }
}

/// The `cp.async` copies of tile `kt` (C) of `s` into stage `st` (C); under a run-time
/// alignment test ([`Stage::aligned`]), a launch failing it loads the tile element by element
/// and stores it straight into the stage (a direct register stage: the stage is free, as the
/// copies' is).
#[allow(clippy::too_many_arguments)]
fn copies(
    em: &mut Emitter,
    v: &View,
    s: &Stage,
    p: &MmaPlan,
    kt: &str,
    st: &str,
    token: &str,
    dtype: DType,
) -> Result<Vec<Stmt>, CodegenError> {
    let threads = p.threads();
    let Some((tensor, map)) = s.copy else {
        return Ok(vec![]);
    };
    let bk = p.tile[2];
    let (o, k) = s.run("c", CHUNK);
    let axes = match s.side {
        Side::A => &v.m,
        Side::B => &v.n,
    };
    em.open();
    em.emit(Stmt::int("o", o));
    em.emit(Stmt::int("kk", k));
    em.emit(Stmt::int("go", format!("{} + o", s.origin())));
    em.emit(Stmt::int("gk", format!("{kt} * {bk} + kk")));
    em.emit(Stmt::Let {
        ty: CType::Bool,
        name: "ok".into(),
        value: format!(
            "go < {} && gk < {}",
            cexpr::dim(&axes.extent()),
            cexpr::dim(&v.k.extent())
        ),
        mutable: false,
    });
    em.push_scope();
    bind_flat(em, &axes.names, &axes.c_sizes(), "go", "o_");
    bind_flat(em, &v.k.names, &v.k.c_sizes(), "gk", "k_");
    let off = match s.flat {
        Some(run) => conv::run_offset(em, s, tensor, map, run),
        None => em.read_offset(tensor, map).map(|(p, _, o)| (p, o)),
    };
    em.pop_scope();
    let (param, off) = off?;
    em.emit(Stmt::CpAsync {
        dst: format!("&{}", s.at(st, C::atom("o"), C::atom("kk"))),
        src: format!("(ok ? {param} + ({off}) : {param})"),
        bytes: 16,
        src_bytes: "ok ? 16 : 0".into(),
        token: token.into(),
    });
    let body = em.close();
    let copy = runs(s, CHUNK, bk, threads, body);
    let Some(test) = &s.aligned else {
        return Ok(vec![copy]);
    };
    let elementwise = Stage {
        side: s.side,
        smem: s.smem,
        regs: s.regs,
        tile: s.tile,
        outer: s.outer,
        copy: None,
        aligned: None,
        flat: None,
        gather: None,
        direct: true,
    };
    let otherwise = reg_loads(em, v, &elementwise, p, kt, st, dtype)?;
    Ok(vec![Stmt::If {
        cond: test.clone(),
        div: Div::Block,
        then: vec![copy],
        otherwise,
    }])
}

/// Register-staged loads of tile `kt` (C) of `s`: each run of two elements along the tile's
/// rows is computed with its prologue, rounded to `dtype` and packed into `regs[l]` (stored by
/// [`reg_stores`]), or, for a `direct` stage, stored straight into stage `st` (C).
#[allow(clippy::too_many_arguments)]
fn reg_loads(
    em: &mut Emitter,
    v: &View,
    s: &Stage,
    p: &MmaPlan,
    kt: &str,
    st: &str,
    dtype: DType,
) -> Result<Vec<Stmt>, CodegenError> {
    let threads = p.threads();
    if s.copy.is_some() {
        return Ok(vec![]);
    }
    if let Some(g) = &s.gather {
        return g.loads(em, v, s, p, kt, st);
    }
    let bk = p.tile[2];
    let (o, k) = s.run("c", 2);
    em.open();
    em.emit(Stmt::int("o", o));
    em.emit(Stmt::int("kk", k));
    for (i, name) in ["x0", "x1"].into_iter().enumerate() {
        em.emit(Stmt::Let {
            ty: CType::F32,
            name: name.into(),
            value: "0.0f".into(),
            mutable: true,
        });
        let (go, gk) = match (s.tile.k_fastest, i) {
            (_, 0) => (format!("{} + o", s.origin()), format!("{kt} * {bk} + kk")),
            (true, _) => (
                format!("{} + o", s.origin()),
                format!("{kt} * {bk} + kk + 1"),
            ),
            (false, _) => (
                format!("{} + o + 1", s.origin()),
                format!("{kt} * {bk} + kk"),
            ),
        };
        v.load(em, s.side, &go, &gk, name)?;
    }
    let pack = if dtype == DType::BF16 {
        "dlc_pack_bf162"
    } else {
        "dlc_pack_half2"
    };
    let place = if s.direct {
        format!(
            "*reinterpret_cast<unsigned*>(&{})",
            s.at(st, C::atom("o"), C::atom("kk"))
        )
    } else {
        format!("{}[l]", s.regs)
    };
    em.emit(Stmt::Assign {
        place,
        value: format!("{pack}(x0, x1)"),
    });
    let body = em.close();
    Ok(vec![runs(s, 2, bk, threads, body)])
}

/// Stores the register-staged runs of `s` into stage `st` (C).
fn reg_stores(s: &Stage, p: &MmaPlan, st: &str) -> Vec<Stmt> {
    let threads = p.threads();
    if s.copy.is_some() || s.direct {
        return vec![];
    }
    let (o, k) = s.run("c", 2);
    let body = vec![
        Stmt::int("o", o),
        Stmt::int("kk", k),
        Stmt::Assign {
            place: format!(
                "*reinterpret_cast<unsigned*>(&{})",
                s.at(st, C::atom("o"), C::atom("kk"))
            ),
            value: format!("{}[l]", s.regs),
        },
    ];
    vec![runs(s, 2, p.tile[2], threads, body)]
}

/// The `ldmatrix.x4` of a 16×16 block of `s` at outer offset `ob`, `K` offset `kb` (C) in
/// stage `st`, each lane's row from [`ldmatrix_lane`] (bound to `lo`, `lk` first).
fn ldmatrix(s: &Stage, st: &str, ob: &str, kb: &str, dst: &str) -> Vec<Stmt> {
    let (o, k) = ldmatrix_lane(
        s.side,
        s.tile.k_fastest,
        C::expr(ob),
        C::expr(kb),
        C::atom("lane"),
    );
    let load = Stmt::LdMatrix {
        dst: dst.into(),
        num: 4,
        trans: !s.tile.k_fastest,
        addr: format!("&{}", s.at(st, C::atom("lo"), C::atom("lk"))),
        token: if s.copy.is_some() {
            TILE
        } else {
            BARRIER_TOKEN
        }
        .into(),
    };
    vec![
        Stmt::int("lo", o.to_string()),
        Stmt::int("lk", k.to_string()),
        load,
    ]
}

/// The tensor-core kernel of `r` (inputs of type `dtype` as multiplied) for plan `p`.
pub fn build(
    r: &Region,
    em: &mut Emitter,
    v: &View,
    arch: Arch,
    dtype: DType,
    p: MmaPlan,
) -> Result<Kernel, CodegenError> {
    let bad = |why: String| CodegenError::Unsupported {
        kernel: r.name.clone(),
        why,
    };
    let [bm, bn, bk] = p.tile;
    let [warps_m, warps_n] = p.warps;
    let (wm, wn) = (bm / warps_m.max(1), bn / warps_n.max(1));
    if warps_m * wm != bm
        || warps_n * wn != bn
        || !wm.is_multiple_of(16)
        || !wn.is_multiple_of(16)
        || !bk.is_multiple_of(16)
        || p.stages < 2
    {
        return Err(bad(format!(
            "no mma.sync layout of a {bm}x{bn}x{bk} tile over {warps_m}x{warps_n} warps, {} stages",
            p.stages
        )));
    }
    let threads = p.threads();
    let (mi_n, ni_n, nj_n) = (wm / 16, wn / 8, wn / 16);
    let stages = p.stages;
    let ty = if dtype == DType::BF16 {
        CType::Bf16
    } else {
        CType::Half
    };
    let mk = |side: Side| {
        let (copy, aligned, flat) = if p.async_ {
            match async_read(r, v, side, dtype) {
                Some((copy, test)) => (Some(copy), test, None),
                None => (
                    conv::contiguous_read(r, v, side, dtype),
                    None,
                    conv::flat_run(r, v, side, dtype),
                ),
            }
        } else {
            (None, None, None)
        };
        let gather = copy
            .is_none()
            .then(|| conv::gather(r, v, side, dtype))
            .flatten();
        let k_fastest = gather.as_ref().map_or(v.k_fastest(side), |g| g.k_fastest);
        let outer = if side == Side::A { bm } else { bn };
        // Held across the fragment steps when small enough (the plan space's estimate),
        // else stored as loaded: the stage being refilled is free after the step's barrier.
        let direct = gather.is_none() && held_regs(outer, bk, threads) == 0;
        Stage {
            side,
            smem: if side == Side::A { "As" } else { "Bs" },
            regs: if side == Side::A { "ra" } else { "rb" },
            tile: Tile::new(k_fastest, outer, bk),
            outer,
            copy,
            aligned,
            flat,
            gather,
            direct,
        }
    };
    let sides = [mk(Side::A), mk(Side::B)];
    let any_async = sides.iter().any(|s| s.copy.is_some());
    for s in &sides {
        let how = if let Some(test) = s.copy.and(s.aligned.as_ref()) {
            format!("cp.async 16-byte chunks when {test} (a plain read), else element by element")
        } else if s.copy.is_some() {
            "cp.async 16-byte chunks (a plain, aligned read)".to_string()
        } else if s.gather.is_some() {
            "through registers by the conv gather (rows hoisted out of the K loop)".to_string()
        } else if p.async_ {
            "through registers: not a plain contiguous, 16-byte aligned read, so cp.async cannot copy it".to_string()
        } else {
            "through registers (the plan is synchronous)".to_string()
        };
        em.emit(Stmt::Comment(format!(
            "operand {}: {}-major tile, loaded {how}",
            if s.side == Side::A { "A" } else { "B" },
            if s.tile.k_fastest { "K" } else { "outer" }
        )));
    }
    em.emit(Stmt::int("tid", "(int)threadIdx.x"));
    em.emit(Stmt::int("lane", "(int)dlc_lane()"));
    em.emit(Stmt::int("warp", "(int)dlc_warp()"));
    em.emit(Stmt::int("wr", format!("warp / {warps_n} * {wm}")));
    em.emit(Stmt::int("wc", format!("warp % {warps_n} * {wn}")));
    v.open_split_tile(em, [bm, bn, bk], p.splits);
    em.emit(Stmt::Array {
        ty: CType::F32,
        name: "acc".into(),
        dims: vec![mi_n, ni_n, 4],
        zero: true,
    });
    for s in sides.iter().filter(|s| s.copy.is_none() && !s.direct) {
        em.emit(Stmt::Array {
            ty: CType::U32,
            name: s.regs.into(),
            dims: vec![if s.gather.is_some() {
                (s.outer * bk / 2).div_ceil(threads)
            } else {
                held_regs(s.outer, bk, threads)
            }],
            zero: false,
        });
        if let Some(g) = &s.gather {
            g.hoist(em, v, s, &p)?;
        }
    }
    // The prologue: tiles 0..S-1 into stages 0..S-1, one commit group each.
    for t in 0..stages - 1 {
        let (kt, st) = (p.k_tile(&t.to_string()), t.to_string());
        em.open();
        for s in &sides {
            let mut fill = copies(em, v, s, &p, &kt, &st, TILE, dtype)?;
            fill.extend(reg_loads(em, v, s, &p, &kt, &st, dtype)?);
            fill.extend(reg_stores(s, &p, &st));
            for f in fill {
                em.emit(f);
            }
        }
        let fill = em.close();
        em.emit(Stmt::uniform_if(format!("{t} < kt_count"), fill));
        if any_async {
            em.emit(Stmt::Commit { token: TILE.into() });
        }
    }
    // The main loop.
    em.open();
    em.emit(Stmt::int("st", format!("kt % {stages}")));
    em.emit(Stmt::int("nt", format!("kt + {}", stages - 1)));
    em.emit(Stmt::int("ns", format!("nt % {stages}")));
    if any_async {
        em.emit(Stmt::Wait {
            tokens: vec![TILE.into()],
            pending: (stages - 2) as u32,
        });
    }
    em.emit(Stmt::Barrier);
    em.open();
    let nt = p.k_tile("nt");
    for s in &sides {
        let mut refill = copies(em, v, s, &p, &nt, "ns", REFILL, dtype)?;
        refill.extend(reg_loads(em, v, s, &p, &nt, "ns", dtype)?);
        for f in refill {
            em.emit(f);
        }
    }
    let refill = em.close();
    em.emit(Stmt::uniform_if("nt < kt_count", refill));
    if any_async {
        em.emit(Stmt::Commit {
            token: REFILL.into(),
        });
    }
    let [sa, sb] = &sides;
    let step = vec![
        Stmt::Array {
            ty: CType::U32,
            name: "af".into(),
            dims: vec![mi_n, 4],
            zero: false,
        },
        Stmt::Array {
            ty: CType::U32,
            name: "bfr".into(),
            dims: vec![nj_n, 4],
            zero: false,
        },
        Stmt::unrolled(
            "mi",
            mi_n,
            ldmatrix(sa, "st", "wr + mi * 16", "ks * 16", "af[mi]"),
        ),
        Stmt::unrolled(
            "nj",
            nj_n,
            ldmatrix(sb, "st", "wc + nj * 16", "ks * 16", "bfr[nj]"),
        ),
        Stmt::unrolled(
            "mi",
            mi_n,
            vec![Stmt::unrolled(
                "ni",
                ni_n,
                vec![Stmt::Mma {
                    bf16: dtype == DType::BF16,
                    d: "acc[mi][ni]".into(),
                    a: "af[mi]".into(),
                    b: "&bfr[ni >> 1][(ni & 1) * 2]".into(),
                    c: "acc[mi][ni]".into(),
                    token: ACC.into(),
                }],
            )],
        ),
    ];
    em.emit(Stmt::unrolled("ks", bk / 16, step));
    let stores: Vec<Stmt> = sides
        .iter()
        .filter(|s| s.copy.is_none())
        .flat_map(|s| reg_stores(s, &p, "ns"))
        .collect();
    if !stores.is_empty() {
        em.emit(Stmt::uniform_if("nt < kt_count", stores));
    }
    for s in &sides {
        if let Some(g) = &s.gather {
            let next = g.advance(em, v, s, &p)?;
            em.emit(next);
        }
    }
    let main = em.close();
    em.emit(Stmt::For {
        var: "kt".into(),
        start: "0".into(),
        end: "kt_count".into(),
        step: "1".into(),
        // The k-loop stays a loop: what the plan's registers price (`Unroll::Never`).
        unroll: Unroll::Never,
        div: Div::Block,
        body: main,
    });
    // The epilogue on the accumulator fragments.
    let ring = stages * bk * (bm + bn) * 2;
    let chunk = v
        .store_chunk(r, em)
        .filter(|c| warps_m * warps_n * 16 * wn * c.dtype.size_bytes() <= ring);
    em.open();
    match chunk {
        Some(c) => epilogue::staged(em, v, &p, c)?,
        None => epilogue::direct(em, v, &p)?,
    }
    let epi = em.close();
    if p.splits > 1 {
        for s in split_k::fixup(p.splits, "acc", &[mi_n, ni_n, 4], threads, epi) {
            em.emit(s);
        }
    } else {
        for s in epi {
            em.emit(s);
        }
    }
    em.pop_scope();
    let body = em.close();
    let mut smem: Vec<Smem> = sides
        .iter()
        .map(|s| Smem {
            name: s.smem.into(),
            ty,
            dims: vec![stages, s.tile.rows, s.tile.len],
            dynamic: true,
        })
        .collect();
    smem.extend(
        sides
            .iter()
            .filter_map(|s| s.gather.as_ref().map(|g| g.table(s, &p))),
    );
    let grid = v.split_grid(bm, bn, p.splits);
    let mut ps = params(r);
    if p.splits > 1 {
        split_k::declare(&mut ps, &mut smem, &grid, p.splits, bm * bn);
    }
    let mut k = Kernel {
        name: cexpr::ident(&r.name),
        arch,
        template: "contraction_mma".into(),
        params: ps,
        launch: Launch {
            grid: grid.map(Size),
            block: [threads as u32, 1, 1],
            dyn_smem_bytes: 0,
        },
        smem,
        body,
        max_regs: None,
    };
    let dynamic = k.smem_bytes().1;
    k.launch.dyn_smem_bytes =
        u32::try_from(dynamic).map_err(|_| bad(format!("{dynamic} B of shared memory")))?;
    Ok(k)
}
