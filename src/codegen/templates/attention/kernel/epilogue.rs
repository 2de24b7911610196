//! The end of the attention kernel: the row sums, `o / l` through `second`'s epilogue, stored
//! element by element from the accumulators or staged through shared memory and stored in
//! 16-byte chunks ([`store_lanes`]).

use super::super::super::super::gpu::verify::BARRIER_TOKEN;
use super::super::super::super::gpu::{CType, Div, Stmt};
use super::super::super::super::scalar::{store_value, Emitter};
use super::super::super::super::CodegenError;
use super::super::super::{store_yields, yield_output};
use super::super::{pad16, store_lanes, AttentionPair};
use super::{assign, Cx, ACC};

/// The end: `l_i` summed over the quad, `o / l_i` provided as `second`'s accumulator and its
/// yields stored (`q2`: `second`'s query axis), predicated on the row and column bounds.
pub(super) fn store_output(
    cx: &Cx,
    e1: &mut Emitter,
    e2: &mut Emitter,
    q2: &str,
) -> Result<(), CodegenError> {
    let p = cx.p;
    for r in 0..2 * cx.plan.frags() {
        for off in [1, 2] {
            e1.emit(assign(
                format!("l_i[{r}]"),
                format!("l_i[{r}] + dlc_shfl_xor(l_i[{r}], {off})"),
            ));
        }
    }
    if let Some(lanes) = store_lanes(p) {
        return store_staged(cx, e1, e2, q2, lanes);
    }
    e2.open();
    e2.push_scope();
    e2.bind(q2, "row");
    e2.bind(&p.col, "col");
    e2.provide(&p.acc2, "ov");
    let stored = store_yields(e2);
    e2.pop_scope();
    let stores = e2.close();
    stored?;
    e1.emit(Stmt::Epilogue {
        after: ACC.into(),
        token: "stored".into(),
        body: vec![fragment_walk(cx, false, stores)],
    });
    Ok(())
}

/// The walk over the output accumulator fragments shared by both epilogues: per `m16`
/// fragment `mf`, column block `ci` and register `e` (the `mma` layout), its `row` (with `rl`,
/// the row within the warp's rows, when `staged`), `col` and row sum `l`; inside the row and
/// column bounds, `ov = oacc / l` and then `then`, the per-element statements (which read `ov`).
fn fragment_walk(cx: &Cx, staged: bool, then: Vec<Stmt>) -> Stmt {
    let p = cx.p;
    let mut per = if staged {
        vec![
            Stmt::int("rl", "mf * 16 + (lane >> 2) + (e >> 1) * 8"),
            Stmt::int("row", "wrow + rl"),
        ]
    } else {
        vec![Stmt::int(
            "row",
            "wrow + mf * 16 + (lane >> 2) + (e >> 1) * 8",
        )]
    };
    let l = normalizer(p);
    per.extend([
        Stmt::int("col", "ci * 8 + (lane & 3) * 2 + (e & 1)"),
        Stmt::f32("l", "l_i[mf * 2 + (e >> 1)]", false),
        Stmt::If {
            cond: format!("row < {} && col < {}", cx.mc, p.value_dim),
            div: Div::Thread,
            then: [
                vec![Stmt::f32("ov", format!("oacc[mf][ci][e] / {l}"), false)],
                then,
            ]
            .concat(),
            otherwise: vec![],
        },
    ]);
    Stmt::unrolled(
        "mf",
        cx.plan.frags(),
        vec![Stmt::unrolled(
            "ci",
            pad16(p.value_dim) / 8,
            vec![Stmt::unrolled("e", 4, per)],
        )],
    )
}

/// The divisor of the output accumulators (`l`: the row's sum; 1 for an empty guarded row).
fn normalizer(p: &AttentionPair) -> &'static str {
    if p.safe_sum {
        "(l == 0.0f ? 1.0f : l)"
    } else {
        "l"
    }
}

/// The staged epilogue ([`store_lanes`]): after a barrier (every warp is past its last key
/// tile), each warp computes `second`'s yield on its `rows × DV` accumulators and writes the
/// values, in the output type, to its own `rows × DV` slice of the dynamic shared memory (from
/// `Qs` on, which the key loop no longer reads), 16-byte chunks of a row rotated by the row
/// index (`(chunk + row) mod chunks`, so the eight rows of a fragment store hit distinct
/// banks); after a second barrier each lane stores whole 16-byte chunks (`lanes` columns of one
/// row) to the output, predicated on the row and column bounds (the value dimension is a
/// multiple of the chunk, so a chunk is all inside or all outside).
fn store_staged(
    cx: &Cx,
    e1: &mut Emitter,
    e2: &mut Emitter,
    q2: &str,
    lanes: u64,
) -> Result<(), CodegenError> {
    let p = cx.p;
    let [y] = p.second.yields.as_slice() else {
        return Err(CodegenError::Unsupported {
            kernel: p.second.name.clone(),
            why: "a staged attention epilogue stores exactly one yield".into(),
        });
    };
    let (j, dt) = yield_output(p.second, y)?;
    let ty = CType::of(dt);
    let dvp = pad16(p.value_dim);
    let chunks = dvp / lanes;
    let rows = cx.plan.rows;
    let stage = |row: &str, col: &str| -> String {
        format!(
            "reinterpret_cast<{t}*>(&Qs[0][0])[(warp * {rows} + {row}) * {dvp} + \
             ((({col}) / {lanes} + {row}) % {chunks}) * {lanes} + ({col}) % {lanes}]",
            t = ty.c()
        )
    };
    e2.open();
    e2.push_scope();
    e2.bind(q2, "row");
    e2.bind(&p.col, "col");
    e2.provide(&p.acc2, "ov");
    let v = e2.let_value(&y.from);
    e2.pop_scope();
    let mut values = e2.close();
    values.push(assign(stage("rl", "col"), store_value(&v?, dt)));
    e1.emit(Stmt::Comment(format!(
        "the output tile staged through shared memory, stored in {lanes}-element (16-byte) chunks"
    )));
    e1.emit(Stmt::Barrier);
    let mut stores = vec![
        Stmt::Barrier,
        Stmt::SmemUse {
            token: BARRIER_TOKEN.into(),
        },
    ];
    e2.open();
    e2.push_scope();
    e2.bind(q2, "row");
    e2.bind(&p.col, "col");
    let off = e2.output_offset();
    e2.pop_scope();
    let mut chunk = e2.close();
    chunk.push(Stmt::Store {
        buffer: format!("out{j}"),
        index: off,
        value: format!("(&{})", stage("rl", "col")),
        ty,
        vector: lanes as u32,
    });
    let per_chunk = vec![
        Stmt::int("c", "lane + i * 32"),
        Stmt::int("rl", format!("c / {chunks}")),
        Stmt::int("row", "wrow + rl"),
        Stmt::int("col", format!("c % {chunks} * {lanes}")),
        Stmt::If {
            cond: format!(
                "c < {} && row < {} && col < {}",
                rows * chunks,
                cx.mc,
                p.value_dim
            ),
            div: Div::Thread,
            then: chunk,
            otherwise: vec![],
        },
    ];
    stores.push(Stmt::unrolled("i", (rows * chunks).div_ceil(32), per_chunk));
    e1.emit(Stmt::Epilogue {
        after: ACC.into(),
        token: "stored".into(),
        body: [vec![fragment_walk(cx, true, values)], stores].concat(),
    });
    Ok(())
}
