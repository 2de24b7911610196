//! Per-region hints of the Poly Core report: tail axes, barrier insertion, bank conflicts, and
//! the minimal buffer of a producer → consumer pair.
//!
//! Tail axes (predication targets): an axis whose extent is symbolic is always a tail axis.
//! With a plan of a `matmul` contraction the region's axes map to the plan's tile: output dims
//! indexing the left operand are `M` (tile `BM`), those indexing the right operand `N` (`BN`),
//! the reduce dims `K` (`BK`); a constant extent that is not a multiple of its tile is a tail
//! axis. Otherwise (no plan, or a template whose tile is not per axis) a constant extent that
//! is not a power of two is one (it cannot be covered by power-of-two tiles exactly).

use super::compute_at::ComputeAt;
use crate::ir::region::Region;
use crate::plan::Plan;
use crate::poly::view::pattern::PatternKind;
use crate::poly::view::Stmt;
use crate::target::Arch;
use serde_json::{json, Value};

/// The tile of `axis` from a matmul contraction plan, if the plan has one for it.
fn matmul_tile(axis: &str, stmts: &[&Stmt], plan: Option<&Plan>) -> Option<u64> {
    let plan = plan.filter(|p| p.template == "contraction" && p.tile.len() == 3)?;
    let s = stmts.iter().find(|s| {
        s.pattern
            .as_ref()
            .is_some_and(|p| p.kind == PatternKind::Matmul)
    })?;
    let p = s.pattern.as_ref()?;
    let uses = |ix: &[crate::poly::view::aff::Aff]| {
        ix.iter()
            .any(|a| a.as_var().map(String::as_str) == Some(axis))
    };
    if p.reduce_idx.iter().any(|r| r == axis) {
        Some(plan.tile[2])
    } else if uses(&p.lhs.1) && !uses(&p.rhs.1) {
        Some(plan.tile[0])
    } else if uses(&p.rhs.1) && !uses(&p.lhs.1) {
        Some(plan.tile[1])
    } else {
        None
    }
}

/// The tail axes of a region (iters then reduce axes, each once), by the rule of the module
/// doc.
pub fn tail_axes(stmts: &[&Stmt], plan: Option<&Plan>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in stmts {
        for (d, (lo, hi)) in s.dims.iter().zip(&s.bounds) {
            if out.contains(d) {
                continue;
            }
            let tail = match hi.sub(lo).as_int() {
                None => true,
                Some(e) => match matmul_tile(d, stmts, plan) {
                    Some(t) => t == 0 || e % (t as i64) != 0,
                    None => !(e > 0 && (e as u64).is_power_of_two()),
                },
            };
            if tail {
                out.push(d.clone());
            }
        }
    }
    out
}

/// Whether the plan stages operand tiles through shared memory (a pipelined template).
fn stages_through_smem(plan: &Plan) -> bool {
    plan.stages >= 2 && plan.cache.iter().any(|c| c.where_ == "smem")
}

/// Barrier insertion hints: SM80 `cp_async_group` commit/wait, SM90 `mbarrier`, for a region
/// whose plan stages data through shared memory; `none` otherwise.
pub fn barrier_hints(plan: Option<&Plan>, arch: Arch) -> Value {
    let Some(plan) = plan.filter(|p| stages_through_smem(p)) else {
        return json!({"model": "none",
                      "why": "no shared-memory staging (no pipelined plan for this region)"});
    };
    let s = plan.stages;
    match arch {
        Arch::Sm80 => json!({
            "model": "cp_async_group",
            "stages": s,
            "commit": "cp.async.commit_group after issuing each stage's tile copies",
            "wait": format!("cp.async.wait_group {} then __syncthreads before reading a stage", s - 2),
        }),
        Arch::Sm90 => json!({
            "model": "mbarrier",
            "stages": s,
            "arrive": "mbarrier.arrive.expect_tx with the stage's bytes when its copies are issued",
            "wait": "mbarrier.try_wait.parity on the stage's barrier before reading it \
                     (the phase flips each time the ring wraps)",
        }),
    }
}

/// Shared-memory bank-conflict hints of the plan's staged tiles (contraction: `A` tile
/// `[BM, BK]`, `B` tile `[BK, BN]`): a row pitch that is a multiple of 32 four-byte words puts
/// a column's elements in one bank; the suggested swizzle is `xor_128b` (what the `mma_sync`
/// template applies, the plan's `A_swizzle` / `B_swizzle`).
pub fn bank_conflict_hints(r: &Region, plan: Option<&Plan>) -> Vec<Value> {
    let Some(plan) = plan.filter(|p| p.template == "contraction" && p.tile.len() == 3) else {
        return Vec::new();
    };
    let (bm, bn, bk) = (plan.tile[0], plan.tile[1], plan.tile[2]);
    let staged = plan.cache.iter().filter(|c| c.where_ == "smem");
    staged
        .zip([("A", [bm, bk]), ("B", [bk, bn])])
        .filter_map(|(c, (role, tile))| {
            let elem = r
                .inputs
                .iter()
                .find(|i| i.name == c.tensor)?
                .dtype
                .size_bytes();
            let words = (tile[1] * elem).div_ceil(4);
            let conflict = words > 0 && words % 32 == 0;
            let applied = plan
                .layout_hints
                .get(&format!("{role}_swizzle"))
                .and_then(Value::as_str)
                .unwrap_or("none");
            Some(json!({
                "tensor": c.tensor,
                "operand": role,
                "tile": tile,
                "row_pitch_words": words,
                "conflict": conflict,
                "suggested_swizzle": if conflict { "xor_128b" } else { "none" },
                "plan_swizzle": applied,
            }))
        })
        .collect()
}

/// The minimal buffer between a producer and a consumer: `reg` when no halo is shared (each
/// producer element feeds one consumer point, which folds its pre-image element by element in a
/// register: one-to-one, or a non-overlapping window), `smem_ring` (depth 2; 3 when the pair
/// involves a contraction whose plan has 3 or more stages) when neighbouring consumer points
/// share a halo that a tile keeps instead of recomputing, `gmem` when compute-at is not legal.
/// `reg` and `gmem` report depth 1 (one buffer, no ring).
pub fn min_buffer(c: &ComputeAt, contraction_stages: Option<u32>) -> Value {
    if !c.ok {
        return json!({"buffer": "gmem", "depth": 1});
    }
    if c.halo_bytes == 0 {
        return json!({"buffer": "reg", "depth": 1});
    }
    let depth = if contraction_stages.is_some_and(|s| s >= 3) {
        3
    } else {
        2
    };
    json!({"buffer": "smem_ring", "depth": depth})
}
