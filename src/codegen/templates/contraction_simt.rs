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
use super::{params, pooled, split_k};
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
    // A second contraction ([`View::second`]) sums in rows `tm..2·tm` of the accumulators,
    // over the `K` steps after the main contraction's `kt_main`.
    let sums = 1 + u64::from(v.second.is_some());
    if v.second.is_some() {
        em.emit(Stmt::int("kt_main", v.main_steps(bk)));
    }
    em.emit(Stmt::Array {
        ty: CType::F32,
        name: "acc".into(),
        dims: vec![tm * sums, tn],
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
    let tiles = Tiles {
        v,
        threads,
        rows: [bm, bn],
        bk,
        counts: [la, lb],
    };
    // The global `K` step of local step `kt`, and whether it is the second contraction's.
    let global = |kt: &str| format!("({kt_first}{kt})");
    let first = tiles.loads_of_step(em, &global("0"))?;
    em.emit(Stmt::If {
        cond: "kt_count > 0".into(),
        div: Div::Block,
        then: first,
        otherwise: vec![],
    });
    for s in tiles.stores_of_step(&global("0")) {
        em.emit(s);
    }
    em.emit(Stmt::Barrier);
    // The main loop.
    let next = tiles.loads_of_step(em, &global("(kt + 1)"))?;
    let micro = |row0: u64| {
        vec![
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
                        place: format!("acc[{}][j]", row(row0, "i")),
                        value: format!("acc[{}][j] + a_frag[i] * b_frag[j]", row(row0, "i")),
                    }],
                )],
            ),
        ]
    };
    let multiply = match v.second {
        None => Stmt::unrolled("kk", bk, micro(0)),
        Some(_) => Stmt::If {
            cond: format!("{} < kt_main", global("kt")),
            div: Div::Block,
            then: vec![Stmt::unrolled("kk", bk, micro(0))],
            otherwise: vec![Stmt::unrolled("kk", bk, micro(tm))],
        },
    };
    let mut main = vec![
        Stmt::If {
            cond: "kt + 1 < kt_count".into(),
            div: Div::Block,
            then: next,
            otherwise: vec![],
        },
        multiply,
        Stmt::Barrier,
    ];
    main.push(Stmt::If {
        cond: "kt + 1 < kt_count".into(),
        div: Div::Block,
        then: tiles.stores_of_step(&global("(kt + 1)")),
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
    // The epilogue on the accumulators (a pooled tile's folds its windows).
    let layout = pooled::Layout {
        tile: [bm, bn],
        micro: [tm, tn],
        threads: [tm_threads, tn_threads],
    };
    let epi = match &v.pool {
        Some(p) => pooled::epilogue(em, v, p, &layout)?,
        None => per_accumulator(em, [tm, tn], |em| {
            v.epilogue_summed(
                em,
                &format!("m0 + tr + i * {tm_threads}"),
                &format!("n0 + tc + j * {tn_threads}"),
                "acc[i][j]",
                Some(&format!("acc[{}][j]", row(tm, "i"))),
            )
        })?,
    };
    if splits > 1 {
        let halves = v.second.as_ref().map(|_| tm);
        for s in split_k::fixup_halves(splits, "acc", &[tm * sums, tn], threads, epi, halves) {
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
    if v.pool.is_some() {
        smem.push(pooled::smem(&layout));
    }
    let mut ps = params(r);
    if splits > 1 {
        split_k::declare(&mut ps, &mut smem, &grid, splits, bm * bn * sums);
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

/// The statements `body` emits once per accumulator `acc[i][j]` of a `tm×tn` micro-tile, in
/// the unrolled loops over `i` and `j`.
pub(super) fn per_accumulator(
    em: &mut Emitter,
    [tm, tn]: [u64; 2],
    body: impl FnOnce(&mut Emitter) -> Result<(), CodegenError>,
) -> Result<Vec<Stmt>, CodegenError> {
    em.open();
    em.open();
    em.open();
    let r = body(em);
    let inner = em.close();
    em.emit(Stmt::unrolled("j", tn, inner));
    let rows = em.close();
    em.emit(Stmt::unrolled("i", tm, rows));
    let out = em.close();
    r.map(|_| out)
}

/// Accumulator row `row0 + i` (C): the second contraction's rows follow the main one's.
fn row(row0: u64, i: &str) -> String {
    if row0 == 0 {
        i.to_string()
    } else {
        format!("{row0} + {i}")
    }
}

/// The operand tiles of one CTA: `counts[s]` elements per thread of side `s`'s
/// `rows[s] × bk` tile, loaded into `ra`/`rb` and stored to `As`/`Bs`, `K`-major.
struct Tiles<'v, 'r> {
    v: &'v View<'r>,
    threads: u64,
    rows: [u64; 2],
    bk: u64,
    counts: [u64; 2],
}

impl Tiles<'_, '_> {
    const SIDES: [(Side, &'static str, &'static str); 2] =
        [(Side::A, "ra", "As"), (Side::B, "rb", "Bs")];

    /// Whether side `s` of the main contraction (`second`: of the second) walks `K` fastest.
    fn fastest(&self, s: usize, second: bool) -> bool {
        let side = Self::SIDES[s].0;
        if second {
            self.v.second_k_fastest(side)
        } else {
            self.v.k_fastest(side)
        }
    }

    /// The loads of global `K` step `step` (C) into `ra`/`rb`: the main contraction's, or
    /// the second's past `kt_main` (a block-uniform branch).
    fn loads_of_step(&self, em: &mut Emitter, step: &str) -> Result<Vec<Stmt>, CodegenError> {
        if self.v.second.is_none() {
            return self.loads(em, step, false);
        }
        let main = self.loads(em, step, false)?;
        let second = self.loads(em, &format!("({step} - kt_main)"), true)?;
        Ok(vec![Stmt::If {
            cond: format!("{step} < kt_main"),
            div: Div::Block,
            then: main,
            otherwise: second,
        }])
    }

    /// The loads of one contraction's `K` step `kt` (C, counted from its first step).
    fn loads(&self, em: &mut Emitter, kt: &str, second: bool) -> Result<Vec<Stmt>, CodegenError> {
        let (threads, bk) = (self.threads, self.bk);
        em.open();
        for (s, (side, regs, _)) in Self::SIDES.into_iter().enumerate() {
            let (count, rows) = (self.counts[s], self.rows[s]);
            em.open();
            em.emit(Stmt::int("e", format!("tid + l * {threads}")));
            let origin = if side == Side::A { "m0" } else { "n0" };
            let (outer, k) = tile_index(self.fastest(s, second), rows, bk);
            em.open();
            let (outer, k, dst) = (
                format!("{origin} + {outer}"),
                format!("{kt} * {bk} + {k}"),
                format!("{regs}[l]"),
            );
            if second {
                self.v.load_second(em, side, &outer, &k, &dst)?;
            } else {
                self.v.load(em, side, &outer, &k, &dst)?;
            }
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
    }

    /// The stores of global step `step`'s tiles (C) from `ra`/`rb` to shared memory, in the
    /// element order its loads used.
    fn stores_of_step(&self, step: &str) -> Vec<Stmt> {
        let main = self.stores(false);
        if self.v.second.is_none()
            || (0..2).all(|s| self.fastest(s, false) == self.fastest(s, true))
        {
            return main;
        }
        vec![Stmt::If {
            cond: format!("{step} < kt_main"),
            div: Div::Block,
            then: main,
            otherwise: self.stores(true),
        }]
    }

    fn stores(&self, second: bool) -> Vec<Stmt> {
        let (threads, bk) = (self.threads, self.bk);
        let mut out = Vec::new();
        for (s, (_, regs, sm)) in Self::SIDES.into_iter().enumerate() {
            let (count, rows) = (self.counts[s], self.rows[s]);
            let (outer, k) = tile_index(self.fastest(s, second), rows, bk);
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
    }
}
