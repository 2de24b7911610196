//! The price of the GEMV template (`codegen::templates::gemv`, `Algo::Gemv`): a warp per output
//! column and `K`-slice, `BM ≤ 8` rows, lanes striding `K`.
//!
//! - Compute: `2 · batch · BM · ⌈N / BN⌉ · BN · K` FMAs on the CUDA cores (padding rows and
//!   columns count), the epilogue's ops and the `A` prologue recomputed by every column block.
//! - Traffic: the operands' unique bytes from DRAM; `A` re-read from L2 by every column block
//!   (the block's warps share it through L1), `B` once (a weight repeated along `K`, as a pool
//!   absorbed into the FC reads it, is one broadcast address per warp load).
//! - Latency: a warp walks `K` in rounds of `32 · slices · GEMV_UNROLL` elements whose loads are
//!   in flight together, each round waiting one load latency ([`LOAD_LATENCY_CYCLES`]), then
//!   the shuffle butterfly (five dependent [`SHUFFLE_CYCLES`] steps, the rows' interleaved) and, with several slices, the
//!   shared-memory combine after a barrier; waves of blocks run one after the other.

use super::roofline::{
    finish, occupancy, unit_time, Estimate, BARRIER_CYCLES, LOAD_LATENCY_CYCLES, SHUFFLE_CYCLES,
    SMEM_CYCLES,
};
use super::work::{Gemm, KernelWork, Role};
use crate::codegen::templates::gemv::GEMV_UNROLL;
use crate::plan::space::{Knobs, Resources};
use crate::target::Target;

/// Prices `work` (a contraction `g`) under GEMV knobs.
pub fn estimate(
    work: &KernelWork,
    g: &Gemm,
    knobs: &Knobs,
    res: &Resources,
    target: &Target,
) -> Estimate {
    let Knobs::Contraction {
        bm,
        bn: cols,
        bk,
        warps_m: slices,
        ..
    } = *knobs
    else {
        unreachable!("contraction knobs")
    };
    let (bm, cols) = (bm as f64, cols as f64);
    let tiles_n = (g.n / cols).ceil().max(1.0);
    let ctas = g.batch.max(1.0) * tiles_n;
    let (occ, waves) = occupancy(ctas, res.threads as f64 / 32.0, res, target);

    let core = 2.0 * g.batch.max(1.0) * bm * tiles_n * cols * g.k;
    let elems_a = g.batch * g.m * g.k;
    let reload = (tiles_n - 1.0).max(0.0);
    let simt = work.ops.simt + g.prologue[0].simt * elems_a * reload;
    let sfu = work.ops.sfu + g.prologue[0].sfu * elems_a * reload;
    let compute_s = unit_time(core + simt, sfu, target, occ);

    let bytes_of = |role: Role| -> f64 {
        work.inputs
            .iter()
            .filter(|i| i.role == role)
            .map(|i| i.bytes)
            .sum()
    };
    let (a, b, other) = (bytes_of(Role::A), bytes_of(Role::B), bytes_of(Role::Other));
    let dram = a + b + other + work.out_bytes;
    let l2 = a * tiles_n + b + other + work.out_bytes;
    let stream_s =
        ((dram - work.out_bytes) / target.dram_bw).max(l2 / target.l2_bw) / occ.max(1e-9);
    let rounds = (g.k / (bk * GEMV_UNROLL) as f64).ceil().max(1.0);
    let combine = if slices > 1 {
        BARRIER_CYCLES + SMEM_CYCLES * slices as f64
    } else {
        0.0
    };
    // The rows' butterflies are independent: five dependent steps, one issue per row and step.
    let walk_cycles = rounds * LOAD_LATENCY_CYCLES + 5.0 * (SHUFFLE_CYCLES + bm) + combine;
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
