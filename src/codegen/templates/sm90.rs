//! The SM90 (Hopper) GEMM template (`sm90_gemm`, plan algorithm `wgmma`): TMA loads into a
//! ring of shared-memory stages guarded by mbarriers, warp-specialized into one producer
//! warpgroup and `consumers` consumer warpgroups that multiply with `wgmma.mma_async`.
//!
//! **Operands.** Each operand is a plain read of an fp16/bf16 input whose every dimension is
//! indexed by one axis: its `K` axis, its outer axis (`M` for `A`, `N` for `B`) or a batch
//! axis (or a constant). The innermost dimension is `K` (a *K-major* operand, e.g. `A[m, k]`,
//! `Bᵀ[n, k]`) or the outer axis (*MN-major*, e.g. `B[k, n]`, transposed for `wgmma`); its
//! rows are multiples of 8 elements (TMA strides are multiples of 16 bytes). A tensor map per
//! operand (`KernelArg::TensorMap`, encoded on the host with `cuTensorMapEncodeTiled`, symbolic
//! sizes evaluated at launch) loads boxes of 64 elements (128 bytes) along the innermost
//! dimension with the 128-byte swizzle; out-of-bounds elements are zero, so the `M`, `N` and `K`
//! tails need no predicate until the stores.
//!
//! **Convolutions** (an implicit GEMM whose `A` is a conv's guarded NCHW image): `B`, the
//! filter `W[co, ci, kh, kw]`, is the 2-D K-major TMA operand `[Co, Ci·Kh·Kw]`; `A` is gathered
//! by the whole producer warpgroup into the same swizzled K-major stage layout a TMA box
//! would write, fenced for the async proxy and published on the stage's `full` barrier
//! (128 arrivals more than a TMA stage's one): `conv`.
//!
//! **Shared memory** (dynamic, aligned to 1024 bytes in the kernel): `stages` stages of `A`
//! (`BM × 64` elements) and of `B` (`BN × 64`), then `2 · stages` mbarriers (`full[s]`: one
//! arrival, the producer's, plus the stage's transaction bytes; `empty[s]`: one arrival per
//! consumer thread). A K-major tile is `rows × 128 B` (8-row swizzle atoms of 1024 B: wgmma
//! descriptor SBO 1024, `K` steps of 16 by 32 bytes of start address); an MN-major tile is
//! `outer / 64` blocks of `64 (k) × 128 B` (descriptor LBO = one block, SBO 1024, `K` steps
//! by 2048 bytes).
//!
//! **Pipeline.** Thread 0 of the producer warpgroup walks the `K` tiles: for tile `kt` in stage
//! `s = kt % stages` it waits until the consumers released the stage's previous round
//! (`empty[s]`, parity `(kt / stages + 1) & 1`, from round 1 on), arms `full[s]` with the
//! stage's bytes (`arrive.expect_tx`) and issues the TMA loads. Each consumer warpgroup owns
//! `BM / consumers` rows (`m64nBNk16` instructions per 64 rows): it waits on `full[s]` (parity
//! `(kt / stages) & 1`), issues `BK / 16` wgmma steps, commits them, waits until at most the
//! newest group is in flight (`wgmma.wait_group 1`) and then releases the previous tile's stage
//! (`empty`), so one wgmma group overlaps the next tile's wait. With two consumer warpgroups the
//! producer gives registers away (`setmaxnreg.dec 40`) and the consumers take them
//! (`setmaxnreg.inc 232`).
//!
//! **Epilogue.** After `wgmma.wait_group 0` every consumer thread runs the region's epilogue
//! (bias, activation, residual, casts: the `View` epilogue the other contraction templates
//! use) on its accumulators — register `4j + e` of warp `w`, lane `l` of a 64-row block is
//! row `16w + l/4 + 8(e/2)`, column `8j + 2(l%4) + e%2`. When the output's contiguous axis
//! is provably a multiple of 16 bytes (`View::store_chunk`), each warp stages its values through
//! its slot of the (reused) TMA ring and stores 16-byte chunks (`epilogue::staged`, synchronized
//! by named barriers, the producer warpgroup not taking part); otherwise it stores element by
//! element, predicated on the output's bounds. TODO(issue 21): overlap the epilogue with the
//! next tile's loads (persistent tiles).
//!
//! Blocks: the grouped tile order of [`View::open_tile`], as the SM80 templates.

use super::super::gpu::{CType, Div, Kernel, Launch, Smem, Stmt, TensorMapParam, Unroll};
use super::super::manifest::KernelArg;
use super::super::scalar::Emitter;
use super::super::{cexpr, CodegenError};
use super::contraction::{Side, View};
use super::params;
use crate::ir::axis::AxisExpr;
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::{Expr, Region, Size};
use crate::target::Arch;

mod conv;
mod epilogue;

/// `K` elements per stage (one 128-byte swizzle row of 2-byte elements).
pub const BK: u64 = 64;
/// The `wgmma` widths (`N`) the device header implements.
pub const WIDTHS: [u64; 3] = [64, 128, 256];

/// The plan's knobs this template implements.
#[derive(Clone, Copy, Debug)]
pub struct Sm90Plan {
    /// `[BM, BN, BK]`.
    pub tile: [u64; 3],
    /// Consumer warpgroups (each `BM / consumers` rows, a multiple of 64).
    pub consumers: u64,
    /// Shared-memory stages (≥ 2).
    pub stages: u64,
}

impl Sm90Plan {
    /// Threads per block: the producer warpgroup and the consumers.
    pub fn threads(&self) -> u64 {
        (self.consumers + 1) * 128
    }
}

/// How one input dimension of a TMA operand is indexed.
#[derive(Clone, Debug, PartialEq)]
enum Coord {
    K,
    Outer,
    /// A batch axis (its C value once the batch is bound).
    Batch(String),
    Const(i64),
}

/// A TMA operand: input `input`, its dimensions innermost first with what indexes each.
#[derive(Clone, Debug)]
pub struct TmaOperand {
    /// Index of the region input.
    pub input: usize,
    coords: Vec<Coord>,
    dims: Vec<Dim>,
    /// The innermost dimension is the outer axis (stored MN-major, `wgmma` transposes it).
    pub mn_major: bool,
}

/// The operand expression of `side`, through views and lets.
fn operand_expr<'r>(r: &'r Region, v: &View<'r>, side: Side) -> Option<&'r Expr> {
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

/// What both TMA operand forms start from: `side`'s operand as a read of a `dtype` input, its
/// index map, the input (index and declaration) and the side's outer axes (exactly one).
struct OperandRead<'r> {
    map: &'r [AxisExpr],
    input: usize,
    decl: &'r crate::ir::region::Input,
    outer: &'r super::contraction::Axes,
}

fn operand_read<'r>(
    r: &'r Region,
    v: &'r View<'r>,
    side: Side,
    dtype: DType,
) -> Option<OperandRead<'r>> {
    let Expr::Read { tensor, map } = operand_expr(r, v, side)? else {
        return None;
    };
    let input = r.inputs.iter().position(|i| &i.name == tensor)?;
    let decl = &r.inputs[input];
    let outer = match side {
        Side::A => &v.m,
        Side::B => &v.n,
    };
    (decl.dtype == dtype && outer.names.len() == 1).then_some(OperandRead {
        map,
        input,
        decl,
        outer,
    })
}

/// The TMA operand of `side`, when the template can load it (see the module doc): a plain
/// read indexed by one axis per dimension, or (`flat_k_operand`) a conv filter read whose
/// `K` axes run contiguously.
pub fn tma_operand(r: &Region, v: &View, side: Side, dtype: DType) -> Option<TmaOperand> {
    plain_operand(r, v, side, dtype).or_else(|| flat_k_operand(r, v, side, dtype))
}

/// A read `W[o, k1, …, kj]` of a `dtype` input whose outer index is the single outer axis and
/// whose other indices are exactly the `K` axes in order over dimensions of their sizes (a
/// conv filter `W[co, ci, kh, kw]`): the 2-D K-major operand `[outer, K]` (`K` flat, a
/// multiple of 8 for TMA's 16-byte strides).
fn flat_k_operand(r: &Region, v: &View, side: Side, dtype: DType) -> Option<TmaOperand> {
    let OperandRead {
        map,
        input,
        decl,
        outer,
    } = operand_read(r, v, side, dtype)?;
    let shape = &decl.memref.shape;
    if v.k.names.len() < 2
        || map.len() != 1 + v.k.names.len()
        || shape.len() != map.len()
        || map[0] != AxisExpr::Name(outer.names[0].clone())
    {
        return None;
    }
    let exact = map[1..]
        .iter()
        .zip(v.k.names.iter().zip(&v.k.sizes))
        .zip(&shape[1..])
        .all(|((a, (n, size)), d)| *a == AxisExpr::Name(n.clone()) && d.0 == *size);
    let k = Dim::product(&v.k.sizes);
    k.div_exact(&Dim::int(8))?;
    exact.then(|| TmaOperand {
        input,
        coords: vec![Coord::K, Coord::Outer],
        dims: vec![k, shape[0].0.clone()],
        mn_major: false,
    })
}

/// [`tma_operand`]'s first form: a plain read indexed by one axis (or constant) per dimension.
fn plain_operand(r: &Region, v: &View, side: Side, dtype: DType) -> Option<TmaOperand> {
    let OperandRead {
        map,
        input,
        decl,
        outer,
    } = operand_read(r, v, side, dtype)?;
    if v.k.names.len() != 1 || map.len() != decl.memref.shape.len() || !(2..=5).contains(&map.len())
    {
        return None;
    }
    let mut coords = Vec::new();
    for a in map.iter().rev() {
        coords.push(match a {
            AxisExpr::Name(n) if *n == v.k.names[0] => Coord::K,
            AxisExpr::Name(n) if *n == outer.names[0] => Coord::Outer,
            AxisExpr::Name(n) if v.batch.names.contains(n) => Coord::Batch(n.clone()),
            AxisExpr::Const(c) if *c >= 0 => Coord::Const(*c),
            _ => return None,
        });
    }
    let once = |c: Coord| coords.iter().filter(|x| **x == c).count() == 1;
    if !once(Coord::K) || !once(Coord::Outer) {
        return None;
    }
    let mn_major = match coords[0] {
        Coord::K => false,
        Coord::Outer => true,
        _ => return None,
    };
    let dims: Vec<Dim> = decl
        .memref
        .shape
        .iter()
        .rev()
        .map(|d| d.0.clone())
        .collect();
    // Global strides are multiples of 16 bytes: the rows hold multiples of 8 elements.
    dims[0].div_exact(&Dim::int(8))?;
    Some(TmaOperand {
        input,
        coords,
        dims,
        mn_major,
    })
}

/// Whether the template emits `r` (viewed as `v`): both operands fp16 or both bf16, `B` a
/// TMA operand, `A` a TMA operand or a convolution's gathered image (`conv::image`).
pub fn accepts(r: &Region, v: &View) -> bool {
    super::contraction_mma::mma_dtype(r, v).is_some_and(|d| {
        (tma_operand(r, v, Side::A, d).is_some() || conv::image(r, v, d).is_some())
            && tma_operand(r, v, Side::B, d).is_some()
    })
}

/// The box of `op` for a tile of `outer` rows (innermost first).
fn box_dims(op: &TmaOperand, outer: u64) -> Vec<u32> {
    op.coords
        .iter()
        .enumerate()
        .map(|(d, c)| match (c, d) {
            (_, 0) => 64,
            (Coord::K, _) => BK as u32,
            (Coord::Outer, _) => outer as u32,
            _ => 1,
        })
        .collect()
}

/// The manifest arguments of the tensor-map parameters of `k` (none for other templates).
pub fn tensor_map_args(r: &Region, k: &Kernel) -> Vec<KernelArg> {
    k.params
        .iter()
        .filter_map(|p| p.tmap.as_ref())
        .map(|t| KernelArg::TensorMap {
            buffer: r.inputs[t.input].name.clone(),
            dims: t.dims.clone(),
            box_dims: t.box_dims.clone(),
        })
        .collect()
}

fn sm90(code: impl Into<String>) -> Stmt {
    Stmt::Sm90 {
        code: code.into(),
        warpgroup: false,
    }
}

fn collective(code: impl Into<String>) -> Stmt {
    Stmt::Sm90 {
        code: code.into(),
        warpgroup: true,
    }
}

/// One operand's stage layout and loads.
struct Operand {
    op: TmaOperand,
    /// `BM` or `BN`.
    outer: u64,
    /// Byte offset of stage 0 in the aligned shared memory.
    base: u64,
    /// The tensor-map parameter.
    map: String,
    /// The C origin of the tile along the outer axis.
    origin: &'static str,
}

impl Operand {
    fn stage_bytes(&self) -> u64 {
        self.outer * BK * 2
    }

    /// The TMA loads of tile `kt` into stage `s` (C), on barrier `bar`.
    fn loads(&self, em: &Emitter) -> Vec<Stmt> {
        let rank = self.op.coords.len();
        let blocks = if self.op.mn_major { self.outer / 64 } else { 1 };
        (0..blocks)
            .map(|b| {
                let coords: Vec<String> = self
                    .op
                    .coords
                    .iter()
                    .map(|c| match c {
                        Coord::K => format!("kt * {BK}"),
                        Coord::Outer if self.op.mn_major => format!("{} + {}", self.origin, b * 64),
                        Coord::Outer => self.origin.to_string(),
                        Coord::Batch(n) => em.axis(&AxisExpr::Name(n.clone())),
                        Coord::Const(c) => c.to_string(),
                    })
                    .collect();
                sm90(format!(
                    "dlc_tma_load_{rank}d(sm + {} + s * {} + {}, &{}, &bars[s], {})",
                    self.base,
                    self.stage_bytes(),
                    b * BK * 128,
                    self.map,
                    coords.join(", ")
                ))
            })
            .collect()
    }

    /// The descriptor of k-step `ks` (C) of stage `s`, rows `row0` (C) on (64 rows of `A`, or
    /// all of `B`).
    fn desc(&self, row0: &str) -> String {
        if self.op.mn_major {
            format!(
                "dlc_wgmma_desc(sm + {} + s * {} + ({row0}) / 64 * {} + ks * 2048, {}, 1024)",
                self.base,
                self.stage_bytes(),
                BK * 128,
                BK * 128
            )
        } else {
            format!(
                "dlc_wgmma_desc(sm + {} + s * {} + ({row0}) * 128 + ks * 32, 16, 1024)",
                self.base,
                self.stage_bytes()
            )
        }
    }
}

/// The SM90 kernel of `r` (operands of type `dtype`) for plan `p`.
pub fn build(
    r: &Region,
    em: &mut Emitter,
    v: &View,
    arch: Arch,
    dtype: DType,
    p: Sm90Plan,
) -> Result<Kernel, CodegenError> {
    let bad = |why: String| CodegenError::Unsupported {
        kernel: r.name.clone(),
        why,
    };
    let [bm, bn, bk] = p.tile;
    let rows = bm / p.consumers.max(1);
    if arch != Arch::Sm90
        || bk != BK
        || !WIDTHS.contains(&bn)
        || p.consumers == 0
        || rows * p.consumers != bm
        || !rows.is_multiple_of(64)
        || bm > 256
        || p.stages < 2
    {
        return Err(bad(format!(
            "no SM90 layout of a {bm}x{bn}x{bk} tile over {} consumer warpgroups, {} stages on {}",
            p.consumers,
            p.stages,
            arch.name()
        )));
    }
    let operand = |side| {
        tma_operand(r, v, side, dtype)
            .ok_or_else(|| bad(format!("operand {side:?} is not a TMA operand")))
    };
    let ob = operand(Side::B)?;
    let stages = p.stages;
    let a = match tma_operand(r, v, Side::A, dtype) {
        Some(op) => OperandA::Tma(Operand {
            op,
            outer: bm,
            base: 0,
            map: "tm_a".into(),
            origin: "m0",
        }),
        None => OperandA::Image(conv::Image {
            g: conv::image(r, v, dtype)
                .ok_or_else(|| bad("operand A is neither a TMA operand nor a conv image".into()))?,
            bm,
        }),
    };
    let b = Operand {
        op: ob,
        outer: bn,
        base: stages * bm * BK * 2,
        map: "tm_b".into(),
        origin: "n0",
    };
    let bars_at = stages * (bm + bn) * BK * 2;
    let total = bars_at + 16 * stages + 1024;
    let consumer_threads = p.consumers * 128;
    let (mi_n, half) = (rows / 64, bn / 2);
    let ty = if dtype == DType::BF16 { "bf16" } else { "f16" };
    em.emit(Stmt::Comment(format!(
        "SM90: {} A, TMA {}-major B (128-byte swizzle) into {stages} stages, mbarriers \
         full/empty, 1 producer + {} consumer warpgroups of wgmma.m64n{bn}k16",
        match &a {
            OperandA::Tma(o) if o.op.mn_major => "TMA M-major",
            OperandA::Tma(_) => "TMA K-major",
            OperandA::Image(_) => "gathered (im2col, K-major, lanes along M)",
        },
        if b.op.mn_major { "N" } else { "K" },
        p.consumers
    )));
    em.emit(Stmt::int("tid", "(int)threadIdx.x"));
    em.emit(Stmt::int("wg", "tid / 128"));
    em.emit(sm90(
        "unsigned char* const sm = dlc_align1024(reinterpret_cast<unsigned char*>(sm90_smem))",
    ));
    em.emit(sm90(format!(
        "unsigned long long* const bars = reinterpret_cast<unsigned long long*>(sm + {bars_at})"
    )));
    v.open_tile(em, [bm, bn, bk]);
    em.emit(Stmt::If {
        cond: "tid == 0".into(),
        div: Div::Thread,
        then: vec![
            Stmt::unrolled(
                "s",
                stages,
                vec![
                    sm90(format!("dlc_mbar_init(&bars[s], {}u)", a.full_count())),
                    sm90(format!(
                        "dlc_mbar_init(&bars[{stages} + s], {consumer_threads}u)"
                    )),
                ],
            ),
            sm90("dlc_mbar_fence_init()"),
        ],
        otherwise: vec![],
    });
    em.emit(Stmt::Barrier);
    let regs = p.consumers == 2 && matches!(a, OperandA::Tma(_));
    let producer = producer(em, v, &a, &b, stages, regs)?;
    let mut consumer = Vec::new();
    if regs {
        consumer.push(collective("dlc_setmaxnreg_inc<232>()"));
    }
    consumer.push(Stmt::int("row0", format!("(wg - 1) * {rows}")));
    consumer.push(Stmt::Array {
        ty: CType::F32,
        name: "acc".into(),
        dims: vec![mi_n, half],
        zero: true,
    });
    let fence = Stmt::unrolled("mi", mi_n, vec![sm90("dlc_fence_regs(acc[mi])")]);
    consumer.push(fence.clone());
    let tb = u8::from(b.op.mn_major);
    let ta = u8::from(a.mn_major());
    let step = vec![Stmt::unrolled(
        "mi",
        mi_n,
        vec![collective(format!(
            "dlc_wgmma_m64n{bn}k16_{ty}<{ta}, {tb}>(acc[mi], {}, {})",
            a.desc("row0 + mi * 64"),
            b.desc("0")
        ))],
    )];
    let consume = vec![
        Stmt::int("s", format!("kt % {stages}")),
        sm90(format!(
            "dlc_mbar_wait(&bars[s], (unsigned)((kt / {stages}) & 1))"
        )),
        collective("dlc_wgmma_fence()"),
        Stmt::unrolled("ks", BK / 16, step),
        collective("dlc_wgmma_commit()"),
        collective("dlc_wgmma_wait<1>()"),
        Stmt::If {
            cond: "kt > 0".into(),
            div: Div::Block,
            then: vec![sm90(format!(
                "dlc_mbar_arrive(&bars[{stages} + (kt - 1) % {stages}])"
            ))],
            otherwise: vec![],
        },
    ];
    consumer.push(Stmt::range(
        "kt",
        ["0".into(), "kt_count".into(), "1".into()],
        Div::Block,
        Unroll::Never,
        consume,
    ));
    consumer.push(collective("dlc_wgmma_wait<0>()"));
    consumer.push(fence);
    em.open();
    for s in consumer {
        em.emit(s);
    }
    em.emit(Stmt::int("lane", "tid % 128"));
    let ring = bars_at;
    let chunk = v
        .store_chunk(r, em)
        .filter(|c| epilogue::staged_bytes(&p, c) <= ring);
    match chunk {
        Some(c) => epilogue::staged(em, v, &p, c)?,
        None => epilogue::direct(em, v, &p)?,
    }
    let consumer = em.close();
    em.emit(Stmt::If {
        cond: "wg == 0".into(),
        div: Div::Warp,
        then: producer,
        otherwise: consumer,
    });
    em.pop_scope();
    let body = em.close();
    let mut ps = params(r);
    let maps = match &a {
        OperandA::Tma(o) => vec![("tm_a", o), ("tm_b", &b)],
        OperandA::Image(_) => vec![("tm_b", &b)],
    };
    for (name, o) in maps {
        ps.push(super::super::gpu::Param {
            name: name.into(),
            ty: CType::of(dtype),
            kind: super::super::gpu::ParamKind::TensorMap,
            tmap: Some(TensorMapParam {
                input: o.op.input,
                dims: o.op.dims.iter().cloned().map(Size).collect(),
                box_dims: box_dims(&o.op, o.outer),
            }),
            workspace: None,
        });
    }
    let mut k = Kernel {
        name: cexpr::ident(&r.name),
        arch,
        template: "sm90_gemm".into(),
        params: ps,
        launch: Launch {
            grid: v.grid(bm, bn).map(Size),
            block: [p.threads() as u32, 1, 1],
            dyn_smem_bytes: 0,
        },
        smem: vec![Smem {
            name: "sm90_smem".into(),
            ty: CType::U4,
            dims: vec![total.div_ceil(16)],
            dynamic: true,
        }],
        body,
        max_regs: None,
    };
    let dynamic = k.smem_bytes().1;
    k.launch.dyn_smem_bytes =
        u32::try_from(dynamic).map_err(|_| bad(format!("{dynamic} B of shared memory")))?;
    Ok(k)
}

/// The `A` operand: TMA loads, or a convolution's image gathered by the producer warpgroup.
enum OperandA<'r> {
    Tma(Operand),
    Image(conv::Image<'r>),
}

impl OperandA<'_> {
    /// Whether the tile is stored MN-major (`wgmma` transposes it).
    fn mn_major(&self) -> bool {
        match self {
            OperandA::Tma(o) => o.op.mn_major,
            OperandA::Image(_) => false,
        }
    }

    /// The descriptor of k-step `ks` of stage `s`, 64 rows from `row0` (C).
    fn desc(&self, row0: &str) -> String {
        match self {
            OperandA::Tma(o) => o.desc(row0),
            OperandA::Image(i) => i.desc(row0),
        }
    }

    /// Arrivals on a `full` barrier per phase: the arming thread's, and with a gathered image
    /// every producer thread's after its stores.
    fn full_count(&self) -> u64 {
        match self {
            OperandA::Tma(_) => 1,
            OperandA::Image(_) => 1 + conv::PRODUCERS,
        }
    }
}

/// The producer warpgroup's statements: thread 0 walks the `K` tiles, waits for the stage's
/// release, arms its `full` barrier with the TMA bytes and issues the loads; with a gathered
/// image every producer thread also waits for the release, gathers its part of the tile and
/// arrives on `full` ([`conv`]). `give`: hand registers to two consumer warpgroups.
fn producer(
    em: &mut Emitter,
    v: &View,
    a: &OperandA,
    b: &Operand,
    stages: u64,
    give: bool,
) -> Result<Vec<Stmt>, CodegenError> {
    // The transaction bytes of one stage (every box in full, out-of-bounds elements included).
    let tx = b.stage_bytes()
        + match a {
            OperandA::Tma(o) => o.stage_bytes(),
            OperandA::Image(_) => 0,
        };
    let wait = Stmt::If {
        cond: format!("kt >= {stages}"),
        div: Div::Block,
        then: vec![sm90(format!(
            "dlc_mbar_wait(&bars[{stages} + s], (unsigned)((kt / {stages} + 1) & 1))"
        ))],
        otherwise: vec![],
    };
    let mut arm = vec![sm90(format!("dlc_mbar_arrive_expect_tx(&bars[s], {tx}u)"))];
    if let OperandA::Tma(o) = a {
        arm.extend(o.loads(em));
    }
    arm.extend(b.loads(em));
    let kt_loop = |body| {
        Stmt::range(
            "kt",
            ["0".into(), "kt_count".into(), "1".into()],
            Div::Block,
            Unroll::Never,
            body,
        )
    };
    let s = Stmt::int("s", format!("kt % {stages}"));
    em.open();
    match a {
        OperandA::Tma(_) => {
            if give {
                em.emit(collective("dlc_setmaxnreg_dec<40>()"));
            }
            let mut produce = vec![s, wait];
            produce.extend(arm);
            em.emit(Stmt::If {
                cond: "tid == 0".into(),
                div: Div::Thread,
                then: vec![kt_loop(produce)],
                otherwise: vec![],
            });
        }
        OperandA::Image(image) => {
            image.hoist(em, v)?;
            let mut produce = vec![
                s,
                wait,
                Stmt::If {
                    cond: "tid == 0".into(),
                    div: Div::Thread,
                    then: arm,
                    otherwise: vec![],
                },
            ];
            produce.extend(image.fill(em, v)?);
            produce.push(sm90("dlc_mbar_arrive(&bars[s])"));
            em.emit(kt_loop(produce));
        }
    }
    Ok(em.close())
}
