//! The price of the SM90 convolution's gather producer (issue 21): the `wgmma` implicit GEMM of
//! an NCHW convolution (`codegen::templates::sm90::conv`) gathers its image operand `A` with the
//! 128 threads of the producer warpgroup, one k-tile after another, while the consumers'
//! `wgmma`s take a few hundred cycles per tile. The gather, not the multiply nor DRAM, bounds
//! the k-loop; the roofline's operand-fill terms do not see it (they predicted 20 µs for a
//! kernel measured at 179 µs on an H100), so this prices it on its own.
//!
//! **Model.** Per k-tile each producer warp issues [`GatherCode::instrs_per_elem`] warp
//! instructions per element it gathers (`BM · BK / 128` elements per thread: index and guard
//! arithmetic, the predicated 2-byte load, packing, the shared-memory stores, the fence and the
//! arrival), on its own scheduler (the four producer warps on the four schedulers; the
//! consumer warps mostly wait on `wgmma`). Its dependent chains (address → guard predicate →
//! load) leave one warp at [`PRODUCER_CPI`] cycles per instruction; `r` resident CTAs
//! interleave `r` producer warps per scheduler, up to one instruction per cycle. The load
//! requests cost L1 wavefronts, one per 32-byte sector ([`GatherCode::sectors_per_request`],
//! [`L1_SECTORS_PER_CYCLE`] per SM); the tile's loads complete before its stores, so each tile
//! also waits one load latency ([`GATHER_LATENCY_CYCLES`]), hidden only by the other resident
//! CTAs. A wave of CTAs then takes `tiles × max(issue, L1) + latency / r` cycles per CTA slot.
//!
//! **Calibration** (NVIDIA H100 80GB HBM3, `bench/results/gpu-h100-2026-11-26/`, the strided
//! gather of [`STRIDED`], 784 and 100 352 CTAs × 384 threads, 1 CTA/SM, 9 k-tiles each):
//! conv 3×3 N=32 64→64 56² fp16 NCHW 0.1794 ms (`call1-gpu-native.md`: 6 waves, 6 080 cycles
//! per tile at 1.83 GHz) and N=256 224² 22.06 ms (`call2-gpu-big.md`: 761 waves, 5 894 cycles
//! per tile); the loop of that code is 1 160 SASS instructions per warp and tile (NVRTC 13.4,
//! sm_90a; 64 `LDG.E.U16` behind guard branches), so `(5 894 − 700) / 1 160 ≈ 4.5` cycles per
//! instruction. Nsight Compute (`call3-ncu.txt`) agrees: IPC 1.09 per SM (≈ 0.27 per
//! scheduler), 79 % excess global sectors, the ALU the busiest pipe.

use super::work::{Fill, Gemm, Pattern};
use crate::plan::space::{Algo, Knobs, Resources};
use crate::target::Target;

/// Cycles per warp instruction of one producer warp alone on its scheduler (dependent integer
/// and predicate chains, ~4–6 cycles each); calibrated on the H100 measurements of the module
/// doc.
pub const PRODUCER_CPI: f64 = 4.5;
/// Sectors (32 bytes) the L1 serves per cycle and SM (128 bytes per cycle).
pub const L1_SECTORS_PER_CYCLE: f64 = 4.0;
/// Cycles a tile's gathered loads take to return (L1 misses served by L2) before its stores.
pub const GATHER_LATENCY_CYCLES: f64 = 700.0;

/// Threads of the producer warpgroup (all of them gather).
pub const PRODUCERS: f64 = 128.0;

/// What the emitted gather costs per element, from its SASS.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GatherCode {
    /// Warp instructions per gathered element (the whole k-tile loop of a producer warp over
    /// the elements of one thread).
    pub instrs_per_elem: f64,
    /// 32-byte sectors per warp load request.
    pub sectors_per_request: f64,
    /// Gathered elements per load request and thread.
    pub elems_per_request: f64,
}

/// The gather emitted until 2026-11-26 (measured on the H100): each thread owned 8 consecutive `M` rows
/// of one `k` row (16 threads per `k` row, lanes 16 bytes apart: 16 sectors per request for
/// 64 useful bytes), one 2-byte load per element behind a branch, the `k` decomposition and
/// guard per row and element: 1 160 instructions per warp and 64-element tile.
pub const STRIDED: GatherCode = GatherCode {
    instrs_per_elem: 1160.0 / 64.0,
    sectors_per_request: 16.0,
    elems_per_request: 1.0,
};

/// The coalesced gather `codegen::templates::sm90::conv` emits: the lanes of a warp walk 32
/// consecutive `M` rows at one `k` (64 contiguous bytes of an image row: 2 sectors, 3 when the
/// window start is not 32-byte aligned), the `k` decomposition once per `k` for the thread's
/// `BM / 32` rows, per element one comparison per guard and the validity test, the address
/// (the pointer from the constant bank, `LDC`), the predicated load and packing: 977 SASS
/// instructions per warp and 64-element tile (`BM = 128`, NVRTC 13.4, sm_90a; 120 registers;
/// `tests/codegen_sm90.rs` checks the loop against this price).
pub const EMITTED: GatherCode = GatherCode {
    instrs_per_elem: 980.0 / 64.0,
    sectors_per_request: 3.0,
    elems_per_request: 1.0,
};

/// Whether `knobs` runs `g` as the SM90 convolution with a gathered image (what
/// `templates::sm90::accepts` takes for a convolution: its `A` filled by the gather).
pub fn gathered(g: &Gemm, knobs: &Knobs) -> bool {
    matches!(
        knobs,
        Knobs::Contraction {
            algo: Algo::Wgmma,
            ..
        }
    ) && g.pattern == Pattern::Conv
        && g.fill[0] == Fill::Gather
}

/// Seconds the gather producer of `code` needs for the whole grid of `g` under `knobs` (0 when
/// the plan is not the SM90 gathered convolution): the k-loop's bound, compared with the
/// roofline's compute time.
pub fn producer_s(
    g: &Gemm,
    knobs: &Knobs,
    res: &Resources,
    target: &Target,
    code: GatherCode,
) -> f64 {
    let Knobs::Contraction { bm, bn, bk, .. } = *knobs else {
        return 0.0;
    };
    if !gathered(g, knobs) {
        return 0.0;
    }
    let (bm, bn, bk) = (bm as f64, bn as f64, bk as f64);
    let ctas = g.batch * (g.m / bm).ceil() * (g.n / bn).ceil();
    let tiles = (g.k / bk).ceil();
    let per_sm = f64::from(res.ctas_per_sm.max(1));
    let sms = target.sms as f64;
    // CTA slots: each runs ⌈ctas / slots⌉ CTAs one after another.
    let rounds = (ctas / (sms * per_sm)).ceil().max(1.0);
    let resident = (ctas / sms).min(per_sm).max(1.0);
    let elems = bm * bk / PRODUCERS;
    // One tile of every resident CTA: the schedulers issue `resident` producer warps each.
    let instrs = elems * code.instrs_per_elem;
    let issue = instrs * resident * (PRODUCER_CPI / resident).max(1.0);
    let requests = elems / code.elems_per_request * 4.0 * resident;
    let l1 = requests * code.sectors_per_request / L1_SECTORS_PER_CYCLE;
    let per_tile = issue.max(l1) + GATHER_LATENCY_CYCLES / resident;
    rounds * tiles * per_tile / (target.clock_ghz * 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Measured on the H100 (module doc): the model within 10 % of both.
    #[test]
    fn strided_gather_matches_the_h100_measurements() {
        let h100 = Target::h100_sxm5();
        for (n, hw, measured_s) in [(32.0, 56.0, 0.1794e-3), (256.0, 224.0, 22.06e-3)] {
            let g = conv_gemm(n * hw * hw, 64.0, 576.0);
            let knobs = wgmma_knobs(128, 64);
            let res = one_cta();
            let t = producer_s(&g, &knobs, &res, &h100, STRIDED) + h100.launch_s;
            let ratio = t / measured_s;
            assert!(
                (0.9..1.1).contains(&ratio),
                "N={n}: {t} s vs {measured_s} s"
            );
        }
    }

    fn conv_gemm(m: f64, n: f64, k: f64) -> Gemm {
        Gemm {
            pattern: Pattern::Conv,
            batch: 1.0,
            m,
            n,
            k,
            a_elem: 2,
            b_elem: 2,
            tensor_cores: true,
            second: None,
            k_second: 0.0,
            prologue: Default::default(),
            pointwise_prologue: Default::default(),
            row_passes: 1,
            row_extent: None,
            axes: Default::default(),
            epilogue: vec![],
            fill: [Fill::Gather, Fill::CpAsync],
            staged_store: true,
            pool: None,
        }
    }

    fn wgmma_knobs(bm: u64, bn: u64) -> Knobs {
        Knobs::Contraction {
            algo: Algo::Wgmma,
            bm,
            bn,
            bk: 64,
            stages: 3,
            warps_m: 8,
            warps_n: 1,
            vec_bytes: 8,
            async_: true,
            row_resident: false,
            splits: 1,
        }
    }

    fn one_cta() -> Resources {
        Resources {
            threads: 384,
            regs_per_thread: 141,
            smem_bytes: 73728,
            ctas_per_sm: 1,
            limited_by: "registers",
        }
    }
}
