//! The epilogue of the tensor-core contraction template: on the accumulator fragments, stored
//! element by element ([`direct`]) or staged through the operand ring and stored in 16-byte
//! chunks ([`staged`], when `View::store_chunk` allows it).

use super::super::super::gpu::verify::BARRIER_TOKEN;
use super::super::super::gpu::{CType, Div, Stmt};
use super::super::super::scalar::Emitter;
use super::super::super::CodegenError;
use super::super::contraction::{StoreChunk, View};
use super::{MmaPlan, ACC};

/// The epilogue of the accumulator fragments, stored element by element.
pub(super) fn direct(em: &mut Emitter, v: &View, p: &MmaPlan) -> Result<(), CodegenError> {
    let (mi_n, ni_n) = (p.tile[0] / p.warps[0] / 16, p.tile[1] / p.warps[1] / 8);
    em.open();
    em.open();
    em.open();
    em.open();
    v.epilogue(
        em,
        "m0 + wr + mi * 16 + (lane >> 2) + (e >> 1) * 8",
        "n0 + wc + ni * 8 + (lane & 3) * 2 + (e & 1)",
        "acc[mi][ni][e]",
    )?;
    let per = em.close();
    em.emit(Stmt::unrolled("e", 4, per));
    let cols = em.close();
    em.emit(Stmt::unrolled("ni", ni_n, cols));
    let rows = em.close();
    em.emit(Stmt::unrolled("mi", mi_n, rows));
    let epi = em.close();
    em.emit(Stmt::Epilogue {
        after: ACC.into(),
        token: "stored".into(),
        body: epi,
    });
    Ok(())
}

/// The staged epilogue ([`View::store_chunk`]): after a barrier (every warp is past the main
/// loop, whose last refills were empty), per 16-row fragment row `mi`, each warp computes the
/// epilogue of its `16 × WN` accumulators and writes the values, in the output type, to its own
/// slot of the (reused) operand ring — `[16][WN]` when the chunks run along `N`, `[WN][16]`
/// along `M`, the 16-byte chunks of a slot row rotated by the row (`(chunk + row) mod
/// chunks`, spreading a fragment store over the banks) — then, after a barrier, stores whole
/// 16-byte chunks to the output, predicated on the chunk's row and column being inside (the
/// chunk axis' size is a multiple of the chunk, so a chunk is all inside or all outside).
/// When that multiple is only tested at run time (`StoreChunk::aligned`: a symbolic `N`), a
/// launch failing the test stores each chunk element by element, each on its own bounds.
pub(super) fn staged(
    em: &mut Emitter,
    v: &View,
    p: &MmaPlan,
    c: StoreChunk,
) -> Result<(), CodegenError> {
    let wn = p.tile[1] / p.warps[1];
    let (mi_n, ni_n) = (p.tile[0] / p.warps[0] / 16, wn / 8);
    let lanes = c.lanes;
    let ty = CType::of(c.dtype);
    // Slot rows: `rows × len` elements, `len / lanes` chunks a row.
    let (rows, len) = if c.along_n { (16, wn) } else { (wn, 16) };
    let chunks = len / lanes;
    let slot = |row: &str, col: &str| -> String {
        format!(
            "reinterpret_cast<{t}*>(&As[0][0][0])[(warp * {rows} + {row}) * {len} + \
             ((({col}) / {lanes} + {row}) % {chunks}) * {lanes} + ({col}) % {lanes}]",
            t = ty.c()
        )
    };
    em.emit(Stmt::Comment(format!(
        "the output tile staged through shared memory (the operand ring), stored in \
         {lanes}-element (16-byte) chunks along {}",
        if c.along_n { "N" } else { "M" }
    )));
    if let Some(test) = &c.aligned {
        em.emit(Stmt::Let {
            ty: CType::Bool,
            name: "aligned".into(),
            value: test.clone(),
            mutable: false,
        });
    }
    em.emit(Stmt::Barrier);
    let mut per_mi = Vec::new();
    em.open();
    em.emit(Stmt::int("rl", "(lane >> 2) + (e >> 1) * 8"));
    em.emit(Stmt::int("cl", "ni * 8 + (lane & 3) * 2 + (e & 1)"));
    let place = if c.along_n {
        slot("rl", "cl")
    } else {
        slot("cl", "rl")
    };
    v.epilogue_to(
        em,
        ["m0 + wr + mi * 16 + rl", "n0 + wc + cl", "acc[mi][ni][e]"],
        &place,
    )?;
    let per = em.close();
    per_mi.push(Stmt::Epilogue {
        after: ACC.into(),
        token: "stored".into(),
        body: vec![Stmt::unrolled(
            "ni",
            ni_n,
            vec![Stmt::unrolled("e", 4, per)],
        )],
    });
    per_mi.push(Stmt::Barrier);
    per_mi.push(Stmt::SmemUse {
        token: BARRIER_TOKEN.into(),
    });
    let (m, n) = if c.along_n {
        (
            "m0 + wr + mi * 16 + sr".to_string(),
            format!("n0 + wc + sc * {lanes}"),
        )
    } else {
        (
            format!("m0 + wr + mi * 16 + sc * {lanes}"),
            "n0 + wc + sr".to_string(),
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
    if c.aligned.is_some() {
        // A launch whose run is not a multiple of the lanes (`aligned` false) stores the
        // chunk's elements one by one, each predicated on its own bounds (the tail of a row).
        let (gm, gn) = if c.along_n {
            ("gm", "gn + j")
        } else {
            ("gm + j", "gn")
        };
        let (mut one, off) = v.output_offset_at(em, gm, gn);
        one.push(Stmt::Store {
            buffer: format!("out{}", c.out),
            index: off,
            value: slot("sr", &format!("sc * {lanes} + j")),
            ty,
            vector: 1,
        });
        let each = Stmt::If {
            cond: v.inside(gm, gn),
            div: Div::Thread,
            then: one,
            otherwise: vec![],
        };
        chunk = vec![Stmt::If {
            cond: "aligned".into(),
            div: Div::Thread,
            then: chunk,
            otherwise: vec![Stmt::unrolled("j", lanes, vec![each])],
        }];
    }
    let total = rows * chunks;
    let per_chunk = vec![
        Stmt::int("ch", "lane + i * 32"),
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
    per_mi.push(Stmt::Barrier);
    em.emit(Stmt::unrolled("mi", mi_n, per_mi));
    Ok(())
}
