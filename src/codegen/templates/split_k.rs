//! Split-K's end of a tiled contraction (`plan::space::split_k_grid`): the `S` CTAs of one
//! output tile (on `grid.z`) each walk their share of the `K` steps
//! (`contraction::View::open_split_tile`), then meet in two workspaces of the launch — the
//! partial accumulators ([`WS_PARTIAL`]) and one arrival counter per tile ([`WS_COUNTER`], zero
//! between launches) — and the last CTA of the tile to arrive sums the partials in split order
//! (the same sum whichever CTA is last: deterministic) and runs the epilogue ([`fixup`]). Shared
//! by the SIMT and `mma_sync` templates.

use super::super::gpu::{CType, Div, Param, ParamKind, Smem, Stmt, Unroll, WorkspaceParam};
use crate::ir::dim::Dim;
use crate::ir::region::Size;

/// The workspace parameter of the partial tiles: per tile, per split, each thread's
/// accumulators, thread-fastest (a warp's stores and loads coalesce).
pub const WS_PARTIAL: &str = "ws_partial";
/// The workspace parameter of the arrival counters, one per tile (zero between launches).
pub const WS_COUNTER: &str = "ws_count";
/// The shared flag that tells a CTA it arrived last.
const LAST: &str = "split_last";

/// Declares what a kernel split `splits` ways needs: the two workspaces among `params` (after
/// the outputs, before the symbols) for a grid `grid` (tiles on `x`, `y`) of tiles of
/// `tile_elems` fp32 accumulators, and the shared flag in `smem` (4 bytes, which the plan's
/// resources count).
pub fn declare(
    params: &mut Vec<Param>,
    smem: &mut Vec<Smem>,
    grid: &[Dim; 3],
    splits: u64,
    tile_elems: u64,
) {
    smem.push(Smem {
        name: LAST.into(),
        ty: CType::I32,
        dims: vec![1],
        dynamic: false,
    });
    let tiles = grid[0].mul(&grid[1]);
    let at = params
        .iter()
        .position(|p| p.kind == ParamKind::Symbol)
        .unwrap_or(params.len());
    let partial = tiles.mul(&Dim::int((splits * tile_elems) as i64));
    let workspace = [
        (WS_PARTIAL, CType::F32, partial, false),
        (WS_COUNTER, CType::I32, tiles, true),
    ]
    .map(|(name, ty, elems, zeroed)| Param {
        name: name.into(),
        ty,
        kind: ParamKind::Workspace,
        tmap: None,
        workspace: Some(WorkspaceParam {
            elems: Size(elems),
            zeroed,
        }),
    });
    params.splice(at..at, workspace);
}

/// The loops over every element of the register array `acc` of extents `dims`, around `body`
/// (loop variables `sk0`, `sk1`, …), and that element's C place and flat index.
fn each(acc: &str, dims: &[u64], body: impl Fn(&str, &str) -> Vec<Stmt>) -> Stmt {
    each_rows(acc, dims, (0, dims.first().copied().unwrap_or(1)), body)
}

/// [`each`] over the rows `rows.0..rows.1` of the first extent only.
fn each_rows(
    acc: &str,
    dims: &[u64],
    rows: (u64, u64),
    body: impl Fn(&str, &str) -> Vec<Stmt>,
) -> Stmt {
    let vars: Vec<String> = (0..dims.len()).map(|i| format!("sk{i}")).collect();
    let place = format!(
        "{acc}{}",
        vars.iter().map(|v| format!("[{v}]")).collect::<String>()
    );
    let mut flat = String::from("0");
    for (v, d) in vars.iter().zip(dims) {
        flat = format!("({flat}) * {d} + {v}");
    }
    let mut s = body(&place, &flat);
    for (i, (v, d)) in vars.iter().zip(dims).enumerate().rev() {
        let (start, end) = if i == 0 { rows } else { (0, *d) };
        s = vec![Stmt::For {
            var: v.clone(),
            start: start.to_string(),
            end: end.to_string(),
            step: "1".into(),
            unroll: Unroll::Full,
            div: Div::Block,
            body: s,
        }];
    }
    s.remove(0)
}

/// One half of [`halves`]: its accumulator rows and whether split `q` (C) wrote them (C).
type Half = ((u64, u64), fn(&str) -> String);

/// The accumulator rows of a tile summing two contractions (`plan::work::Gemm::second`):
/// rows `0..main_rows` hold the main contraction's sums, which only the splits walking some of
/// its `kt_main` steps write; the rest the second's, which only the splits walking some of the
/// steps after `kt_main` write. `(rows, condition on split q)` per half (C, the names of
/// `contraction::View::open_split_tile` and the SIMT template in scope).
fn halves(main_rows: u64, rows: u64) -> [Half; 2] {
    [
        ((0, main_rows), |q| format!("{q} * kt_per < kt_main")),
        ((main_rows, rows), |q| {
            format!("{q} * kt_per < kt_total && dlc_imin(({q} + 1) * kt_per, kt_total) > kt_main")
        }),
    ]
}

/// How many half-tiles the splits of a tile summing two contractions store (what the last CTA
/// reads back): per half, the splits whose share of the `steps` (`main` of them the main
/// contraction's) overlaps it — `splits + 1` or fewer, not `2·splits`.
pub fn halves_written(splits: u64, steps: u64, main: u64) -> u64 {
    let per = steps.div_ceil(splits.max(1)).max(1);
    let used = steps.div_ceil(per);
    let first = main.div_ceil(per);
    let second = used - (main / per).min(used);
    first + second
}

/// Split-K's end of a CTA, then `epilogue` (on `acc`, a register array of extents `dims`) in
/// the last CTA of the tile: every CTA stores its accumulators to its slot of [`WS_PARTIAL`],
/// fences, and counts itself in the tile's [`WS_COUNTER`]; the CTA that counts last (it sees
/// `splits - 1`) resets the counter for the next launch, reads the `splits` partial tiles back
/// in split order and runs the epilogue. `threads`: the block's threads (`tid` in C).
pub fn fixup(splits: u64, acc: &str, dims: &[u64], threads: u64, epilogue: Vec<Stmt>) -> Vec<Stmt> {
    fixup_halves(splits, acc, dims, threads, epilogue, None)
}

/// [`fixup`] where, with `main_rows`, the accumulators are two halves along the first extent
/// that only some splits write (the main contraction's rows by the splits walking its steps,
/// the second's by those walking steps after `kt_main`): each CTA stores, and the last one
/// sums, only those (a half no split wrote stays 0).
pub fn fixup_halves(
    splits: u64,
    acc: &str,
    dims: &[u64],
    threads: u64,
    epilogue: Vec<Stmt>,
    main_rows: Option<u64>,
) -> Vec<Stmt> {
    let per_thread: u64 = dims.iter().product();
    // The CTA's tile's slots start at `split_base` (64-bit); within a tile's `splits` slots the
    // offsets fit 32 bits (16 splits of a 128×128 tile: 2¹⁸ elements).
    let slot = |split: &str, flat: &str| {
        format!("split_base + ({split} * {per_thread} + {flat}) * {threads}")
    };
    // Summed split by split (the loop kept: one split's loads live at a time), in split order.
    let zero = each(acc, dims, |place, _| {
        vec![Stmt::Assign {
            place: place.to_string(),
            value: "0.0f".into(),
        }]
    });
    let add_rows = |rows| {
        each_rows(acc, dims, rows, |place, flat| {
            vec![Stmt::Assign {
                place: place.to_string(),
                value: format!("{place} + dlc_ld_cg({WS_PARTIAL} + {})", slot("q", flat)),
            }]
        })
    };
    let store_rows = |rows| {
        each_rows(acc, dims, rows, |place, flat| {
            vec![Stmt::Store {
                buffer: WS_PARTIAL.into(),
                index: slot("(int)blockIdx.z", flat),
                value: place.to_string(),
                ty: CType::F32,
                vector: 1,
            }]
        })
    };
    let all = (0, dims.first().copied().unwrap_or(1));
    let (add, store) = match main_rows {
        None => (add_rows(all), store_rows(all)),
        Some(h) => {
            let only = |q: &str, f: &dyn Fn((u64, u64)) -> Stmt| -> Stmt {
                Stmt::Block(
                    halves(h, all.1)
                        .into_iter()
                        .map(|(rows, touched)| Stmt::If {
                            cond: touched(q),
                            div: Div::Block,
                            then: vec![f(rows)],
                            otherwise: vec![],
                        })
                        .collect(),
                )
            };
            (only("q", &add_rows), only("(int)blockIdx.z", &store_rows))
        }
    };
    let sum = vec![
        zero,
        Stmt::For {
            var: "q".into(),
            start: "0".into(),
            end: splits.to_string(),
            step: "1".into(),
            unroll: Unroll::Never,
            div: Div::Block,
            body: vec![add],
        },
    ];
    let mut last = vec![Stmt::Fence];
    last.extend(sum);
    last.extend(epilogue);
    let arrive = vec![
        Stmt::int(
            "arrived",
            format!("dlc_atomic_add({WS_COUNTER} + tile_id, 1)"),
        ),
        Stmt::Assign {
            place: format!("{LAST}[0]"),
            value: format!("arrived == {}", splits - 1),
        },
        Stmt::If {
            cond: format!("arrived == {}", splits - 1),
            div: Div::Thread,
            then: vec![Stmt::Store {
                buffer: WS_COUNTER.into(),
                index: "tile_id".into(),
                value: "0".into(),
                ty: CType::I32,
                vector: 1,
            }],
            otherwise: vec![],
        },
    ];
    vec![
        Stmt::int("tile_id", "(int)(blockIdx.x + gridDim.x * blockIdx.y)"),
        Stmt::Let {
            ty: CType::I64,
            name: "split_base".into(),
            value: format!(
                "(long long)tile_id * {} + tid",
                splits * per_thread * threads
            ),
            mutable: false,
        },
        store,
        Stmt::Fence,
        Stmt::Barrier,
        Stmt::If {
            cond: "tid == 0".into(),
            div: Div::Thread,
            then: arrive,
            otherwise: vec![],
        },
        Stmt::Barrier,
        Stmt::If {
            cond: format!("{LAST}[0]"),
            div: Div::Block,
            then: last,
            otherwise: vec![],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::halves_written;

    #[test]
    fn a_summed_tile_stores_about_one_half_tile_per_split() {
        // 144 main steps and 8 of the second's over 16 splits of 10: the split walking steps
        // 140..150 stores both halves, the others one.
        assert_eq!(halves_written(16, 152, 144), 17);
        // 11 + 1 steps over 8 splits of 2: six splits walk steps, the sixth both halves.
        assert_eq!(halves_written(8, 12, 11), 7);
        // A share boundary at `kt_main`: no split stores both.
        assert_eq!(halves_written(4, 16, 8), 4);
    }
}
