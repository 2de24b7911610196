//! The SIMT contraction template (seed 000 §6–7): a `BM×BN` output tile per block, `K` walked
//! in `BK` steps. Each step's operand tiles are loaded cooperatively (consecutive threads take
//! consecutive `K` elements of `A` and `N` elements of `B`), their prologue computed on the way,
//! and stored to shared memory `K`-major (rows padded by `plan::regs::SIMT_ROW_PAD`, so that
//! the stores of an operand loaded `K` fastest do not conflict); the next step's tiles are
//! loaded into registers while the current one is multiplied (two buffers, synchronous: the
//! plan's `stages = 2`). Each
//! thread owns a `TM×TN` micro-tile of fp32 accumulators, strided over the tile so that a
//! warp's shared-memory reads are conflict-free and its stores coalesce; the epilogue runs on
//! the accumulators and stores predicated on the output's bounds.

use super::super::cexpr;
use super::super::gpu::{CType, Div, Kernel, Launch, Smem, Stmt, Unroll};
use super::super::scalar::Emitter;
use super::super::CodegenError;
use super::contraction::{Side, View};
use super::{params, split_k};
use crate::ir::region::{Region, Size};
use crate::plan::regs::{simt_micro_tile, SIMT_ROW_PAD};
use crate::target::Arch;

/// The tile coordinates (outer, k) of a tile's `e`-th element (C), `K` fastest or not.
fn tile_index(k_fastest: bool, rows: u64, bk: u64) -> (String, String) {
    if k_fastest {
        (format!("e / {bk}"), format!("e % {bk}"))
    } else {
        (format!("e % {rows}"), format!("e / {rows}"))
    }
}

/// The SIMT kernel of `r` with tile `bm×bn×bk`, `threads` threads and `splits` CTAs per tile
/// (split-K; 1: none).
pub fn build(
    r: &Region,
    em: &mut Emitter,
    v: &View,
    arch: Arch,
    [bm, bn, bk]: [u64; 3],
    threads: u64,
    splits: u64,
) -> Result<Kernel, CodegenError> {
    let bad = |why: String| CodegenError::Unsupported {
        kernel: r.name.clone(),
        why,
    };
    if (bm * bn) % threads != 0 {
        return Err(bad(format!(
            "{threads} threads do not divide a {bm}x{bn} tile"
        )));
    }
    let (tm, tn) = simt_micro_tile(bm * bn / threads);
    let (tm_threads, tn_threads) = (bm / tm, bn / tn);
    if tm_threads * tn_threads != threads || bm % tm != 0 || bn % tn != 0 {
        return Err(bad(format!(
            "no {tm}x{tn} micro-tile layout of {bm}x{bn} over {threads} threads"
        )));
    }
    let (la, lb) = ((bm * bk).div_ceil(threads), (bn * bk).div_ceil(threads));
    em.emit(Stmt::int("tid", "(int)threadIdx.x"));
    em.emit(Stmt::int("tr", format!("tid / {tn_threads}")));
    em.emit(Stmt::int("tc", format!("tid % {tn_threads}")));
    v.open_split_tile(em, [bm, bn, bk], splits);
    // The first `K` step of this CTA's share.
    let kt_first = if splits > 1 { "kt0 + " } else { "" };
    em.emit(Stmt::Array {
        ty: CType::F32,
        name: "acc".into(),
        dims: vec![tm, tn],
        zero: true,
    });
    em.emit(Stmt::Array {
        ty: CType::F32,
        name: "ra".into(),
        dims: vec![la],
        zero: false,
    });
    em.emit(Stmt::Array {
        ty: CType::F32,
        name: "rb".into(),
        dims: vec![lb],
        zero: false,
    });
    // Loads step `kt`'s tiles into `ra`/`rb`; stores them to shared memory.
    let loads = |em: &mut Emitter, kt: &str| -> Result<Vec<Stmt>, CodegenError> {
        em.open();
        for (side, regs, count, rows) in [(Side::A, "ra", la, bm), (Side::B, "rb", lb, bn)] {
            em.open();
            em.emit(Stmt::int("e", format!("tid + l * {threads}")));
            let origin = if side == Side::A { "m0" } else { "n0" };
            let (outer, k) = tile_index(v.k_fastest(side), rows, bk);
            em.open();
            v.load(
                em,
                side,
                &format!("{origin} + {outer}"),
                &format!("({kt_first}{kt}) * {bk} + {k}"),
                &format!("{regs}[l]"),
            )?;
            let body = em.close();
            em.emit(Stmt::If {
                cond: format!("e < {}", rows * bk),
                div: Div::Thread,
                then: body,
                otherwise: vec![],
            });
            let per = em.close();
            em.emit(Stmt::unrolled("l", count, per));
        }
        Ok(em.close())
    };
    let fastest = [v.k_fastest(Side::A), v.k_fastest(Side::B)];
    let stores = |_: ()| -> Vec<Stmt> {
        let mut out = Vec::new();
        for (side, (sm, regs, count, rows)) in [("As", "ra", la, bm), ("Bs", "rb", lb, bn)]
            .into_iter()
            .enumerate()
        {
            let (outer, k) = tile_index(fastest[side], rows, bk);
            out.push(Stmt::unrolled(
                "l",
                count,
                vec![
                    Stmt::int("e", format!("tid + l * {threads}")),
                    Stmt::If {
                        cond: format!("e < {}", rows * bk),
                        div: Div::Thread,
                        then: vec![Stmt::Assign {
                            place: format!("{sm}[{k}][{outer}]"),
                            value: format!("{regs}[l]"),
                        }],
                        otherwise: vec![],
                    },
                ],
            ));
        }
        out
    };
    let first = loads(em, "0")?;
    em.emit(Stmt::If {
        cond: "kt_count > 0".into(),
        div: Div::Block,
        then: first,
        otherwise: vec![],
    });
    for s in stores(()) {
        em.emit(s);
    }
    em.emit(Stmt::Barrier);
    // The main loop.
    let next = loads(em, "(kt + 1)")?;
    let micro = vec![
        Stmt::Array {
            ty: CType::F32,
            name: "a_frag".into(),
            dims: vec![tm],
            zero: false,
        },
        Stmt::Array {
            ty: CType::F32,
            name: "b_frag".into(),
            dims: vec![tn],
            zero: false,
        },
        Stmt::unrolled(
            "i",
            tm,
            vec![Stmt::Assign {
                place: "a_frag[i]".into(),
                value: format!("As[kk][tr + i * {tm_threads}]"),
            }],
        ),
        Stmt::unrolled(
            "j",
            tn,
            vec![Stmt::Assign {
                place: "b_frag[j]".into(),
                value: format!("Bs[kk][tc + j * {tn_threads}]"),
            }],
        ),
        Stmt::unrolled(
            "i",
            tm,
            vec![Stmt::unrolled(
                "j",
                tn,
                vec![Stmt::Assign {
                    place: "acc[i][j]".into(),
                    value: "acc[i][j] + a_frag[i] * b_frag[j]".into(),
                }],
            )],
        ),
    ];
    let mut main = vec![
        Stmt::If {
            cond: "kt + 1 < kt_count".into(),
            div: Div::Block,
            then: next,
            otherwise: vec![],
        },
        Stmt::unrolled("kk", bk, micro),
        Stmt::Barrier,
    ];
    main.push(Stmt::If {
        cond: "kt + 1 < kt_count".into(),
        div: Div::Block,
        then: stores(()),
        otherwise: vec![],
    });
    main.push(Stmt::Barrier);
    em.emit(Stmt::For {
        var: "kt".into(),
        start: "0".into(),
        end: "kt_count".into(),
        step: "1".into(),
        unroll: Unroll::Compiler,
        div: Div::Block,
        body: main,
    });
    // The epilogue on the accumulators.
    em.open();
    em.open();
    em.open();
    v.epilogue(
        em,
        &format!("m0 + tr + i * {tm_threads}"),
        &format!("n0 + tc + j * {tn_threads}"),
        "acc[i][j]",
    )?;
    let inner = em.close();
    em.emit(Stmt::unrolled("j", tn, inner));
    let rows = em.close();
    em.emit(Stmt::unrolled("i", tm, rows));
    let epi = em.close();
    if splits > 1 {
        for s in split_k::fixup(splits, "acc", &[tm, tn], threads, epi) {
            em.emit(s);
        }
    } else {
        em.emit(Stmt::Block(epi));
    }
    em.pop_scope();
    let body = em.close();
    let grid = v.split_grid(bm, bn, splits);
    let mut smem = vec![
        Smem {
            name: "As".into(),
            ty: CType::F32,
            dims: vec![bk, bm + SIMT_ROW_PAD],
            dynamic: false,
        },
        Smem {
            name: "Bs".into(),
            ty: CType::F32,
            dims: vec![bk, bn + SIMT_ROW_PAD],
            dynamic: false,
        },
    ];
    let mut ps = params(r);
    if splits > 1 {
        split_k::declare(&mut ps, &mut smem, &grid, splits, bm * bn);
    }
    Ok(Kernel {
        name: cexpr::ident(&r.name),
        arch,
        template: "contraction_simt".into(),
        params: ps,
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
