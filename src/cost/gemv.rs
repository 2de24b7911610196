//! The price of the GEMV template (`codegen::templates::gemv`, `Algo::Gemv`): a block of warps
//! over `BN` output columns and `K`-slices, `BM ≤ 8` rows, each warp's lanes over `lanes_n`
//! columns × `32 / lanes_n` `K` indices ([`GemvBlock`]).
//!
//! - Compute: `2 · batch · BM · ⌈N / BN⌉ · BN · K` FMAs on the CUDA cores (padding rows and
//!   columns count), the epilogue's ops and the `A` prologue recomputed by every column block.
//! - Traffic: the bytes the reads touch from DRAM, once; through L2 every warp request's sectors
//!   ([`sector_waste`]: the sectors its 32 lanes touch over the fewest their distinct bytes
//!   fill, from the operand's real strides along `N` and `K`, `InputUse::strides`). `A` is
//!   re-read by every column block (the block's warps share it through L1), `B` once; no
//!   reuse of a wasted sector by another warp is assumed.
//! - Latency: a warp walks `K` in rounds of `BK · GEMV_UNROLL` indices whose loads are in
//!   flight together, each round waiting one load latency ([`LOAD_LATENCY_CYCLES`]), then the
//!   shuffle butterfly over its `K` lanes (`log2(32 / lanes_n)` dependent [`SHUFFLE_CYCLES`]
//!   steps, the rows' interleaved) and, with several slices, the shared-memory combine after a
//!   barrier; waves of blocks run one after the other.

use super::roofline::{
    finish, occupancy, unit_time, Estimate, BARRIER_CYCLES, LOAD_LATENCY_CYCLES, SHUFFLE_CYCLES,
    SMEM_CYCLES,
};
use super::work::{Gemm, InputUse, KernelWork, Role};
use crate::plan::space::{GemvBlock, Knobs, Resources, GEMV_UNROLL};
use crate::target::Target;
use std::collections::BTreeSet;

/// Bytes of a DRAM/L2 sector.
const SECTOR_BYTES: f64 = 32.0;

/// The sectors one warp request touches over the fewest sectors its distinct bytes could fill
/// (1: every byte fetched is used, a coalesced or broadcast read): lanes over `lanes_n`
/// columns × `32 / lanes_n` `K` indices of an operand whose consecutive columns are `s_n`
/// elements apart and consecutive `K` indices `s_k`, of `elem` bytes, from a sector-aligned
/// base. A `[K, N]` fp32 weight read by a warp along `K` (`s_k = N ≥ 8`): 32 sectors for 128
/// bytes, 8.
pub fn sector_waste(lanes_n: u64, s_n: f64, s_k: f64, elem: u64) -> f64 {
    let lanes_n = lanes_n.clamp(1, 32);
    let mut sectors = BTreeSet::new();
    let mut elems = BTreeSet::new();
    for c in 0..lanes_n {
        for j in 0..32 / lanes_n {
            let at = c as f64 * s_n + j as f64 * s_k;
            elems.insert(at as u64);
            sectors.insert((at * elem as f64 / SECTOR_BYTES) as u64);
        }
    }
    let fewest = (elems.len() as f64 * elem as f64 / SECTOR_BYTES)
        .ceil()
        .max(1.0);
    sectors.len() as f64 / fewest
}

/// Bytes of `i` the kernel reads: the elements its reads touch (a CLS-token slice of a
/// `[B, S, H]` input reads `B · H`), all of it when unknown.
fn read_bytes(i: &InputUse) -> f64 {
    let touched = i.strides.touched * i.elem_bytes as f64;
    if touched > 0.0 {
        touched.min(i.bytes)
    } else {
        i.bytes
    }
}

/// Bytes `i` moves through L2 under `block`: its read bytes times its [`sector_waste`], `A`'s
/// once per column block (`tiles_n`).
fn l2_bytes(i: &InputUse, block: GemvBlock, tiles_n: f64) -> f64 {
    let s = i.strides;
    let bytes = read_bytes(i);
    match i.role {
        // Every lane of a column reads the same row of `A`: it moves only along `K`.
        Role::A => bytes * sector_waste(block.lanes_n, 0.0, s.k, i.elem_bytes) * tiles_n,
        Role::B => bytes * sector_waste(block.lanes_n, s.n, s.k, i.elem_bytes),
        Role::Other => bytes,
    }
}

/// Prices `work` (a contraction `g`) under GEMV knobs.
pub fn estimate(
    work: &KernelWork,
    g: &Gemm,
    knobs: &Knobs,
    res: &Resources,
    target: &Target,
) -> Estimate {
    let (bm, block) = GemvBlock::of(knobs).expect("GEMV knobs name a block shape");
    let cols = (block.lanes_n * block.warps_n) as f64;
    let bk = block.lanes_k() * block.slices;
    let bm = bm as f64;
    let tiles_n = (g.n / cols).ceil().max(1.0);
    let ctas = g.batch.max(1.0) * tiles_n;
    let (occ, waves) = occupancy(ctas, res.threads as f64 / 32.0, res, target);

    let core = 2.0 * g.batch.max(1.0) * bm * tiles_n * cols * g.k;
    let elems_a = g.batch * g.m * g.k;
    let reload = (tiles_n - 1.0).max(0.0);
    let simt = work.ops.simt + g.prologue[0].simt * elems_a * reload;
    let sfu = work.ops.sfu + g.prologue[0].sfu * elems_a * reload;
    let compute_s = unit_time(core + simt, sfu, target, occ);

    let dram = work.inputs.iter().map(read_bytes).sum::<f64>() + work.out_bytes;
    let l2 = work
        .inputs
        .iter()
        .map(|i| l2_bytes(i, block, tiles_n))
        .sum::<f64>()
        + work.out_bytes;
    let stream_s =
        ((dram - work.out_bytes) / target.dram_bw).max(l2 / target.l2_bw) / occ.max(1e-9);
    let rounds = (g.k / (bk * GEMV_UNROLL) as f64).ceil().max(1.0);
    let combine = if block.slices > 1 {
        BARRIER_CYCLES + SMEM_CYCLES * block.slices as f64
    } else {
        0.0
    };
    // The rows' butterflies are independent: one issue per row and step.
    let steps = block.lanes_k().trailing_zeros() as f64;
    let walk_cycles = rounds * LOAD_LATENCY_CYCLES + steps * (SHUFFLE_CYCLES + bm) + combine;
    let latency_s = waves * walk_cycles / (target.clock_ghz * 1e9);
    let memory_s = stream_s.max(latency_s);
    let epilogue_s = work.out_bytes / (target.dram_bw * occ.max(1e-9));
    finish(
        compute_s,
        memory_s,
        epilogue_s,
        0.0,
        core + simt + sfu,
        dram,
        l2,
        occ,
        waves,
        1.0,
        ctas,
        target,
    )
}

#[cfg(test)]
mod tests {
    use super::sector_waste;

    #[test]
    fn sectors_follow_the_strides() {
        // A warp along contiguous `K`: 128 bytes in 4 sectors, nothing wasted (fp32, fp16).
        assert_eq!(sector_waste(1, 512.0, 1.0, 4), 1.0);
        assert_eq!(sector_waste(1, 512.0, 1.0, 2), 1.0);
        // Along `K` of a `[K, N]` weight: a sector per lane, 8× (fp32) and 16× (fp16).
        assert_eq!(sector_waste(1, 1.0, 1000.0, 4), 8.0);
        assert_eq!(sector_waste(1, 1.0, 1000.0, 2), 16.0);
        // 8 columns × 4 `K` rows of the same weight: 4 full sectors.
        assert_eq!(sector_waste(8, 1.0, 1000.0, 4), 1.0);
        // 8 fp16 columns fill half a sector per row: 2×; 16 fill it.
        assert_eq!(sector_waste(8, 1.0, 1000.0, 2), 2.0);
        assert_eq!(sector_waste(16, 1.0, 1024.0, 2), 1.0);
        // … unless the rows are not sector-aligned (2000-byte rows): the second straddles two.
        assert_eq!(sector_waste(16, 1.0, 1000.0, 2), 1.5);
        // A lane per column of `[N, K]`: 8×; a broadcast (no stride) wastes nothing.
        assert_eq!(sector_waste(32, 512.0, 1.0, 4), 8.0);
        assert_eq!(sector_waste(32, 0.0, 1.0, 4), 1.0);
        // Stride 2 (every other fp32): twice the sectors.
        assert_eq!(sector_waste(1, 0.0, 2.0, 4), 2.0);
    }
}
