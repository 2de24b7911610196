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
    for (v, d) in vars.iter().zip(dims).rev() {
        s = vec![Stmt::unrolled(v, *d, s)];
    }
    s.remove(0)
}

/// Split-K's end of a CTA, then `epilogue` (on `acc`, a register array of extents `dims`) in
/// the last CTA of the tile: every CTA stores its accumulators to its slot of [`WS_PARTIAL`],
/// fences, and counts itself in the tile's [`WS_COUNTER`]; the CTA that counts last (it sees
/// `splits - 1`) resets the counter for the next launch, reads the `splits` partial tiles back
/// in split order and runs the epilogue. `threads`: the block's threads (`tid` in C).
pub fn fixup(splits: u64, acc: &str, dims: &[u64], threads: u64, epilogue: Vec<Stmt>) -> Vec<Stmt> {
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
    let add = each(acc, dims, |place, flat| {
        vec![Stmt::Assign {
            place: place.to_string(),
            value: format!("{place} + dlc_ld_cg({WS_PARTIAL} + {})", slot("q", flat)),
        }]
    });
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
    let store = each(acc, dims, |place, flat| {
        vec![Stmt::Store {
            buffer: WS_PARTIAL.into(),
            index: slot("(int)blockIdx.z", flat),
            value: place.to_string(),
            ty: CType::F32,
            vector: 1,
        }]
    });
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
