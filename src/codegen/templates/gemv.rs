//! The GEMV template for small-`M` contractions (issue 23): a classifier's FC at batch 1, a
//! matrix–vector product, a global average pool absorbed into the FC. A block of
//! `warps_n × warps_m` warps owns `BN = warps_n` output columns and all `BM ≤ 8` output rows:
//! warp `w` takes column `n0 + w % BN` and K-slice `w / BN` (split-K across the block's warps,
//! `warps_m` of them per column). Each lane strides `K` by `BK = 32 · warps_m` (consecutive
//! lanes read consecutive `K` elements: coalesced when `K` is the operands' fastest axis, one
//! broadcast address when the weight repeats along `K`), keeps `BM` fp32 accumulators, and the
//! warp folds them with a shuffle butterfly. With one slice per column lane 0 applies the
//! epilogue (bias, activation, cast) once per output; with several, each warp's partial goes to
//! shared memory and the column's first warp sums the slices in a fixed order (deterministic)
//! before the epilogue. Operand prologues are computed at the loads; tails load 0.
//!
//! The plan space (`plan::space`, `Algo::Gemv`) offers it for `M ≤ 8`; `cost::gemv` prices
//! exactly this walk.
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
use crate::target::Arch;

/// The most output rows one GEMV block keeps accumulators for.
pub const GEMV_MAX_ROWS: u64 = 8;

/// The GEMV kernel of `r`: `bm` rows (at least `M`), `cols` columns per block, `slices` warps
/// splitting `K` per column.
pub fn build(
    r: &Region,
    em: &mut Emitter,
    v: &View,
    arch: Arch,
    [bm, cols, slices]: [u64; 3],
) -> Result<Kernel, CodegenError> {
    let bad = |why: String| CodegenError::Unsupported {
        kernel: r.name.clone(),
        why,
    };
    if bm == 0 || bm > GEMV_MAX_ROWS || cols == 0 || slices == 0 {
        return Err(bad(format!(
            "no GEMV block of {bm} rows, {cols} columns and {slices} K-slices"
        )));
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
    let step = 32 * slices;
    let threads = step * cols;
    let k_total = cexpr::dim(&v.k.extent());
    em.emit(Stmt::int("tid", "(int)threadIdx.x"));
    em.emit(Stmt::int("lane", "tid & 31"));
    em.emit(Stmt::int("warp", "tid >> 5"));
    em.emit(Stmt::int("col", format!("warp % {cols}")));
    em.emit(Stmt::int("slice", format!("warp / {cols}")));
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
        start: "slice * 32 + lane".into(),
        end: k_total,
        step: step.to_string(),
        unroll: Unroll::By(GEMV_UNROLL as u32),
        div: Div::Thread,
        body: walk,
    });
    // The warp's butterfly: every lane holds the warp's sums.
    em.emit(Stmt::unrolled(
        "i",
        bm,
        vec![Stmt::WarpReduce {
            op: WarpOp::Sum,
            dst: "acc[i]".into(),
            value: "acc[i]".into(),
        }],
    ));
    let mut smem = Vec::new();
    if slices > 1 {
        smem.push(Smem {
            name: "part".into(),
            ty: CType::F32,
            dims: vec![slices, cols, bm],
            dynamic: false,
        });
        em.emit(Stmt::If {
            cond: "lane == 0".into(),
            div: Div::Thread,
            then: vec![Stmt::unrolled(
                "i",
                bm,
                vec![Stmt::Assign {
                    place: "part[slice][col][i]".into(),
                    value: "acc[i]".into(),
                }],
            )],
            otherwise: vec![],
        });
        em.emit(Stmt::Barrier);
        // The slices in a fixed order: the same sum on every run.
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
    // The epilogue, once per output: lane 0 of the column's first slice.
    em.open();
    em.open();
    v.epilogue(em, "i", "n", "acc[i]")?;
    let one = em.close();
    em.emit(Stmt::unrolled("i", bm, one));
    let epi = em.close();
    em.emit(Stmt::If {
        cond: "lane == 0 && slice == 0".into(),
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
    })
}

/// Iterations of the `K` walk unrolled: each lane's loads of that many steps are in flight at
/// once (what `cost::gemv` counts as one round of latency).
pub const GEMV_UNROLL: u64 = 4;

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
