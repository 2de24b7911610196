//! The epilogue of the SM90 GEMM template on the `wgmma` accumulators: element by element
//! ([`direct`]) or staged through the (reused) TMA ring and stored in 16-byte chunks
//! ([`staged`], when `View::store_chunk` allows it).

use super::super::super::gpu::{CType, Div, Stmt};
use super::super::super::scalar::Emitter;
use super::super::super::CodegenError;
use super::super::contraction::{StoreChunk, View};
use super::{sm90, Sm90Plan};

/// The flat row (C) of a consumer thread's accumulator `e` of 64-row block `mi`: warp `w` of
/// the warpgroup holds rows `16w + l/4 + 8(e/2)` of the block.
const ROW: &str = "m0 + row0 + mi * 64 + lane / 32 * 16 + lane % 32 / 4 + (e >> 1) * 8";
/// The flat column (C) of accumulator `4j + e`: `8j + 2(l%4) + e%2`.
const COL: &str = "n0 + j * 8 + lane % 4 * 2 + (e & 1)";

/// The epilogue of every consumer thread's accumulators, stored element by element
/// (predicated on the output's bounds).
pub(super) fn direct(em: &mut Emitter, v: &View, p: &Sm90Plan) -> Result<(), CodegenError> {
    let (mi_n, bn) = (p.tile[0] / p.consumers / 64, p.tile[1]);
    em.open();
    em.open();
    em.open();
    v.epilogue(em, ROW, COL, "acc[mi][j * 4 + e]")?;
    let per = em.close();
    em.emit(Stmt::unrolled("e", 4, per));
    let cols = em.close();
    em.emit(Stmt::unrolled("j", bn / 8, cols));
    let blocks = em.close();
    em.emit(Stmt::unrolled("mi", mi_n, blocks));
    Ok(())
}

/// Shared-memory bytes of the staged epilogue's slots (one per consumer warp: its 16 rows of
/// a 64-row block, `BN` columns, in the output type), which must fit in the TMA ring.
pub(super) fn staged_bytes(p: &Sm90Plan, c: &StoreChunk) -> u64 {
    p.consumers * 4 * 16 * p.tile[1] * c.dtype.size_bytes()
}

/// The staged epilogue ([`View::store_chunk`]). Once every consumer warpgroup is past its last
/// `wgmma` (named barrier 1 over the consumer threads: the ring's last stages may still be
/// read by the other warpgroup's wgmma; every TMA load has landed, each was waited for), per
/// 64-row block `mi`, each consumer warp computes the epilogue of its `16 × BN` accumulators
/// and writes the values, in the output type, to its own slot of the ring — `[16][BN]` when the
/// chunks run along `N`, `[BN][16]` along `M`, the 16-byte chunks of a slot row rotated by the
/// row (`(chunk + row) mod chunks`: the fragment's 8 rows × 4 lanes hit 32 distinct banks) —
/// then, after the warp's named barrier (`2 + warp`, 32 threads), stores whole 16-byte chunks
/// to the output (a warp writes 512 contiguous bytes of a row per instruction when a row holds
/// 32 chunks), predicated on the chunk's row and column being inside (the chunk axis' size is a
/// multiple of the chunk, so a chunk is all inside or all outside).
pub(super) fn staged(
    em: &mut Emitter,
    v: &View,
    p: &Sm90Plan,
    c: StoreChunk,
) -> Result<(), CodegenError> {
    let bn = p.tile[1];
    let mi_n = p.tile[0] / p.consumers / 64;
    let lanes = c.lanes;
    let ty = CType::of(c.dtype);
    let (rows, len) = if c.along_n { (16, bn) } else { (bn, 16) };
    let chunks = len / lanes;
    let slot = |row: &str, col: &str| -> String {
        format!(
            "reinterpret_cast<{t}*>(sm)[(cw * {rows} + {row}) * {len} + \
             ((({col}) / {lanes} + {row}) % {chunks}) * {lanes} + ({col}) % {lanes}]",
            t = ty.c()
        )
    };
    em.emit(Stmt::Comment(format!(
        "the output tile staged per warp through shared memory (the TMA ring), stored in \
         {lanes}-element (16-byte) chunks along {}",
        if c.along_n { "N" } else { "M" }
    )));
    em.emit(Stmt::int("cw", "tid / 32 - 4"));
    em.emit(sm90(format!("dlc_bar_sync(1, {})", p.consumers * 128)));
    let mut per_mi = Vec::new();
    em.open();
    em.emit(Stmt::int("rl", "lane % 32 / 4 + (e >> 1) * 8"));
    em.emit(Stmt::int("cl", "j * 8 + lane % 4 * 2 + (e & 1)"));
    let place = if c.along_n {
        slot("rl", "cl")
    } else {
        slot("cl", "rl")
    };
    v.epilogue_to(
        em,
        [
            "m0 + row0 + mi * 64 + lane / 32 * 16 + rl",
            "n0 + cl",
            "acc[mi][j * 4 + e]",
        ],
        &place,
    )?;
    let per = em.close();
    per_mi.push(Stmt::unrolled(
        "j",
        bn / 8,
        vec![Stmt::unrolled("e", 4, per)],
    ));
    let warp_sync = sm90("dlc_bar_sync(2 + cw, 32)");
    per_mi.push(warp_sync.clone());
    let (m, n) = if c.along_n {
        (
            "m0 + row0 + mi * 64 + lane / 32 * 16 + sr".to_string(),
            format!("n0 + sc * {lanes}"),
        )
    } else {
        (
            format!("m0 + row0 + mi * 64 + lane / 32 * 16 + sc * {lanes}"),
            "n0 + sr".to_string(),
        )
    };
    let (mut chunk, off) = v.output_offset_at(em, "gm", "gn");
    chunk.push(Stmt::Store {
        buffer: format!("out{}", c.out),
        index: off,
        value: format!("(&{})", slot("sr", &format!("sc * {lanes}"))),
        ty,
        vector: lanes as u32,
    });
    let total = rows * chunks;
    let per_chunk = vec![
        Stmt::int("ch", "lane % 32 + i * 32"),
        Stmt::int("sr", format!("ch / {chunks}")),
        Stmt::int("sc", format!("ch % {chunks}")),
        Stmt::int("gm", m),
        Stmt::int("gn", n),
        Stmt::If {
            cond: format!("ch < {total} && {}", v.inside("gm", "gn")),
            div: Div::Thread,
            then: chunk,
            otherwise: vec![],
        },
    ];
    per_mi.push(Stmt::unrolled("i", total.div_ceil(32), per_chunk));
    if mi_n > 1 {
        // The next block's writes wait until every lane stored this block's chunks.
        per_mi.push(warp_sync);
    }
    em.emit(Stmt::unrolled("mi", mi_n, per_mi));
    Ok(())
}
