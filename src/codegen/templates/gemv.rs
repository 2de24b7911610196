//! The GEMV template for small-`M` contractions (issue 23): a classifier's FC at batch 1, a
//! matrix–vector product, a global average pool absorbed into the FC. A block of
//! `warps_n × slices` warps owns `BN = lanes_n · warps_n` output columns and all `BM ≤ 8`
//! output rows ([`GemvBlock`]): each warp spreads its lanes over `lanes_n` consecutive columns
//! × `lanes_k = 32 / lanes_n` consecutive `K` indices and walks `K` in steps of
//! `BK = lanes_k · slices` (split-K across the block's `slices` warps per column). With
//! `lanes_n = 1` a warp reads 32 consecutive `K` of one column (coalesced when `K` is the
//! weight's contiguous axis, `[N, K]`); with `lanes_n ≥ 8` it reads whole 32-byte sectors of
//! consecutive columns (coalesced when `N` is contiguous, `[K, N]`); `A` is then one broadcast
//! address per `K` row. Each lane keeps `BM` fp32 accumulators, the lanes of a column fold
//! them with shuffle butterflies. With one slice per column the column's first lane applies
//! the epilogue (bias, activation, cast) once per output; with several, each warp's partials
//! go to shared memory and the first slice sums the slices in a fixed order (deterministic)
//! before the epilogue. Operand prologues are computed at the loads; tails load 0.
//!
//! The plan space (`plan::space`, `Algo::Gemv`) offers it for `M ≤ 8`; `cost::gemv` prices
//! exactly this walk, with the sectors each warp request touches from the operands' strides.
//! TODO(issue 23): 16-byte vector loads of aligned plain weights and split-K across CTAs with a
//! deterministic second pass (a workspace buffer and a second launch) are not emitted yet.

use super::super::cexpr;
use super::super::gpu::{CType, Div, Kernel, Launch, Smem, Stmt, Unroll, WarpOp};
use super::super::scalar::Emitter;
use super::super::CodegenError;
use super::contraction::{Side, View};
use super::params;
use crate::ir::dim::Dim;
use crate::ir::region::{Region, Size};
use crate::plan::space::GemvBlock;
use crate::target::Arch;

pub use crate::plan::space::{GEMV_MAX_ROWS, GEMV_UNROLL};

/// The GEMV kernel of `r`: `bm` rows (at least `M`), the block shape `block`.
pub fn build(
    r: &Region,
    em: &mut Emitter,
    v: &View,
    arch: Arch,
    bm: u64,
    block: GemvBlock,
) -> Result<Kernel, CodegenError> {
    let bad = |why: String| CodegenError::Unsupported {
        kernel: r.name.clone(),
        why,
    };
    let GemvBlock {
        lanes_n: ln,
        warps_n,
        slices,
    } = block;
    if bm == 0 || bm > GEMV_MAX_ROWS || ![1, 8, 16, 32].contains(&ln) || warps_n == 0 || slices == 0
    {
        return Err(bad(format!("no GEMV block of {bm} rows and {block:?}")));
    }
    // The rows must all fit one block: a symbolic or larger `M` runs on a tiled template.
    match v.m.extent().as_int() {
        Some(m) if m as u64 <= bm => {}
        _ => {
            return Err(bad(format!(
                "M = {} is not known to fit {bm} GEMV rows",
                cexpr::dim(&v.m.extent())
            )))
        }
    }
    let lk = block.lanes_k();
    let (cols, step) = (ln * warps_n, lk * slices);
    let threads = 32 * warps_n * slices;
    let k_total = cexpr::dim(&v.k.extent());
    em.emit(Stmt::int("tid", "(int)threadIdx.x"));
    em.emit(Stmt::int("lane", "tid & 31"));
    em.emit(Stmt::int("warp", "tid >> 5"));
    // This lane's column in the block and its first `K` index within a step.
    let (col, kl) = match ln {
        1 => (format!("warp % {warps_n}"), "lane".to_string()),
        32 => (format!("warp % {warps_n} * 32 + lane"), "0".to_string()),
        _ => (
            format!("warp % {warps_n} * {ln} + lane % {ln}"),
            format!("lane / {ln}"),
        ),
    };
    em.emit(Stmt::int("col", col));
    em.emit(Stmt::int("slice", format!("warp / {warps_n}")));
    // Column tiles on `grid.x`, the batch folded in above them.
    let tiles_n = v.n.extent().ceildiv(cols as i64).max_of(&Dim::int(1));
    em.emit(Stmt::int("tiles_n", cexpr::dim(&tiles_n)));
    em.emit(Stmt::int(
        "n",
        format!("(int)blockIdx.x % tiles_n * {cols} + col"),
    ));
    em.push_scope();
    v.bind_batch(em, "(int)blockIdx.x / tiles_n");
    em.emit(Stmt::Array {
        ty: CType::F32,
        name: "acc".into(),
        dims: vec![bm],
        zero: true,
    });
    // One step of the walk: this lane's `B[n][k]`, then every row's `A[i][k]`.
    em.open();
    em.emit(Stmt::Let {
        ty: CType::F32,
        name: "bv".into(),
        value: "0.0f".into(),
        mutable: true,
    });
    v.load(em, Side::B, "n", "k", "bv")?;
    em.open();
    em.emit(Stmt::Let {
        ty: CType::F32,
        name: "av".into(),
        value: "0.0f".into(),
        mutable: true,
    });
    v.load(em, Side::A, "i", "k", "av")?;
    em.emit(Stmt::Assign {
        place: "acc[i]".into(),
        value: "acc[i] + av * bv".into(),
    });
    let row = em.close();
    em.emit(Stmt::unrolled("i", bm, row));
    let walk = em.close();
    em.emit(Stmt::For {
        var: "k".into(),
        start: if lk == 1 {
            "slice".into()
        } else {
            format!("slice * {lk} + {kl}")
        },
        end: k_total,
        step: step.to_string(),
        unroll: Unroll::By(GEMV_UNROLL as u32),
        div: Div::Thread,
        body: walk,
    });
    fold_lanes(em, bm, ln);
    // The column's lanes that hold its sums (every lane of the butterfly's group does).
    let first = match ln {
        32 => "slice == 0".to_string(),
        1 => "lane == 0 && slice == 0".to_string(),
        _ => format!("lane < {ln} && slice == 0"),
    };
    let mut smem = Vec::new();
    if slices > 1 {
        smem.push(Smem {
            name: "part".into(),
            ty: CType::F32,
            dims: vec![slices, cols, bm],
            dynamic: false,
        });
        sum_slices(em, bm, ln, slices);
    }
    // The epilogue, once per output: the column's first lane of the first slice.
    em.open();
    em.open();
    v.epilogue(em, "i", "n", "acc[i]")?;
    let one = em.close();
    em.emit(Stmt::unrolled("i", bm, one));
    let epi = em.close();
    em.emit(Stmt::If {
        cond: first,
        div: Div::Thread,
        then: epi,
        otherwise: vec![],
    });
    em.pop_scope();
    let body = em.close();
    let one = Dim::int(1);
    let blocks = tiles_n.mul(&v.batch.extent().max_of(&one));
    let grid = [blocks, one.clone(), one];
    Ok(Kernel {
        name: cexpr::ident(&r.name),
        arch,
        template: "gemv".into(),
        params: params(r),
        launch: Launch {
            grid: grid.map(Size),
            block: [threads as u32, 1, 1],
            dyn_smem_bytes: 0,
        },
        smem,
        body,
        max_regs: None,
    })
}

/// Folds the `K` lanes of each column (`32 / ln` of them, lanes `ln` apart): a full warp sum
/// for `ln = 1`, a butterfly over the lane bits above `ln` otherwise, none for `ln = 32`.
fn fold_lanes(em: &mut Emitter, bm: u64, ln: u64) {
    let body = if ln == 1 {
        vec![Stmt::WarpReduce {
            op: WarpOp::Sum,
            dst: "acc[i]".into(),
            value: "acc[i]".into(),
        }]
    } else {
        // Offsets 16, 8, … down to `ln`, in that order on every lane: the same sums everywhere.
        std::iter::successors(Some(16u64), |o| Some(o / 2))
            .take_while(|o| *o >= ln)
            .map(|o| Stmt::Assign {
                place: "acc[i]".into(),
                value: format!("acc[i] + dlc_shfl_xor(acc[i], {o})"),
            })
            .collect()
    };
    if !body.is_empty() {
        em.emit(Stmt::unrolled("i", bm, body));
    }
}

/// Sums the `slices` partials of each column through shared memory `part[slice][col][i]`: the
/// column's first lanes store, a barrier, then every thread adds its column's slices in a fixed
/// order (the same sum on every run).
fn sum_slices(em: &mut Emitter, bm: u64, ln: u64, slices: u64) {
    let store = Stmt::unrolled(
        "i",
        bm,
        vec![Stmt::Assign {
            place: "part[slice][col][i]".into(),
            value: "acc[i]".into(),
        }],
    );
    if ln == 32 {
        em.emit(store);
    } else {
        em.emit(Stmt::If {
            cond: format!("lane < {ln}"),
            div: Div::Thread,
            then: vec![store],
            otherwise: vec![],
        });
    }
    em.emit(Stmt::Barrier);
    em.emit(Stmt::unrolled(
        "i",
        bm,
        vec![
            Stmt::Assign {
                place: "acc[i]".into(),
                value: "part[0][col][i]".into(),
            },
            Stmt::For {
                var: "s".into(),
                start: "1".into(),
                end: slices.to_string(),
                step: "1".into(),
                unroll: Unroll::Full,
                div: Div::Block,
                body: vec![Stmt::Assign {
                    place: "acc[i]".into(),
                    value: "acc[i] + part[s][col][i]".into(),
                }],
            },
        ],
    ));
}

/// Whether the template can run `r` with `bm` rows: the product of its `M` axes (`m_axes`) is
/// a known number of at most `bm` (a symbolic `M` runs on a tiled template).
pub fn rows_fit(r: &Region, m_axes: &[String], bm: u64) -> bool {
    let Ok(em) = Emitter::new(r, "") else {
        return false;
    };
    let mut sizes = Vec::new();
    for a in m_axes {
        let Some(i) = r.iters.iter().position(|it| &it.name == a) else {
            return false;
        };
        sizes.push(em.iter_sizes[i].clone());
    }
    Dim::product(&sizes)
        .as_int()
        .is_some_and(|m| m >= 0 && m as u64 <= bm)
}
