//! A candidate's resource estimate ([`resources`]: registers, shared memory, CTAs per SM) and
//! the STOP conditions that reject it ([`check`], in the order of the module documentation of
//! [`super`]).

use super::*;
/// Registers, shared memory and the resulting CTAs per SM.
pub fn resources(k: &Knobs, work: &KernelWork, target: &Target) -> Resources {
    let threads = k.threads() as u32;
    let (regs, smem) = match *k {
        Knobs::Contraction {
            algo,
            bm,
            bn,
            bk,
            stages,
            warps_m,
            warps_n,
            async_,
            splits,
            ..
        } => {
            let Shape::Contraction(g) = &work.shape else {
                unreachable!("contraction knobs come from a contraction")
            };
            let t = regs::Tile {
                bm,
                bn,
                bk,
                stages,
                warps_m,
                warps_n,
                async_,
            };
            let regs = match algo {
                Algo::MmaSync if splits > 1 => regs::mma_sync(g.fill, &t) + regs::SPLIT_K_REGS,
                Algo::MmaSync => regs::mma_sync(g.fill, &t),
                Algo::Simt => regs::simt_summing(
                    &t,
                    g.pattern == crate::plan::work::Pattern::Conv,
                    1 + u32::from(g.second.is_some()),
                ),
                // wgmma reads its operands from shared memory (a conv's image gathered by
                // the producer warpgroup).
                Algo::Wgmma => regs::wgmma(g.fill, &t),
                Algo::Gemv => regs::gemv(bm),
            };
            let smem = match algo {
                // The slices' partial sums (`part[slices][bn][bm]` fp32).
                Algo::Gemv if warps_m > 1 => warps_m * bn * bm * 4,
                Algo::Gemv => 0,
                Algo::Simt => regs::simt_smem_bytes(bm, bn, bk),
                _ => stages as u64 * bk * (bm * g.a_elem + bn * g.b_elem),
            };
            // Split-K adds the block's `split_last` flag (an int); a pooled tile its epilogue
            // values (`[bm][bn + 1]` fp32, `codegen::templates::contraction_simt`).
            let smem = smem
                + if splits > 1 { 4 } else { 0 }
                + if g.pool.is_some() {
                    regs::pooled_smem_bytes(bm, bn)
                } else {
                    0
                };
            (regs, smem)
        }
        Knobs::Reduction {
            threads_per_row,
            rows_per_block,
            ..
        } => {
            // Partial results of each warp for the cross-warp step; the walk's loads in
            // flight (up to 8 16-byte chunks: 32 registers per thread).
            // A cooperative compute-at window too: a thread walks its window points in a loop,
            // the producer's fold an inner loop (ptxas: 31–37 registers for ResNet-18's tail).
            let warps = (threads_per_row * rows_per_block).div_ceil(32);
            (regs::ROW, warps * 4 * 2)
        }
        Knobs::Elementwise {
            items, vec_bytes, ..
        } => {
            let lanes = (vec_bytes / work.out_elem_bytes.max(1)).max(1);
            match &work.shape {
                Shape::ComputeAt(c) => (regs::compute_at(c, items * lanes), 0),
                _ => (BASE_REGS + (items * lanes) as u32, 0),
            }
        }
    };
    let by_regs = target.regs_per_sm / (regs.max(1) * threads.max(1));
    let by_smem = (target.smem_per_sm as u64)
        .checked_div(smem)
        .map_or(u32::MAX, |n| n as u32);
    let by_threads = target.threads_per_sm / threads.max(1);
    let mut limits = [
        (by_regs, "registers"),
        (by_smem, "smem"),
        (by_threads, "threads"),
        (target.blocks_per_sm, "blocks"),
    ];
    limits.sort_by_key(|(n, _)| *n);
    Resources {
        threads,
        regs_per_thread: regs,
        smem_bytes: smem.min(u32::MAX as u64) as u32,
        ctas_per_sm: limits[0].0,
        limited_by: limits[0].1,
    }
}

/// Registers per thread the row template's walk holds its loads in flight in (8 chunks of
/// 16 bytes, `cost::roofline::CHUNKS_IN_FLIGHT`).
pub const RESIDENT_PER_THREAD: u64 = 32;

/// The widest vector (in bytes, ≤ 16) whose elements split `extent` elements of `elem` bytes.
pub fn widest_vector(extent: f64, elem: u64) -> u64 {
    widest_vector_upto(extent, elem, 16)
}

/// [`widest_vector`] of at most `cap` bytes (a power of two).
pub fn widest_vector_upto(extent: f64, elem: u64, cap: u64) -> u64 {
    let bytes = (extent.max(1.0) as u64).saturating_mul(elem.max(1));
    let mut w = cap.max(1);
    while w > elem.max(1) && !bytes.is_multiple_of(w) {
        w /= 2;
    }
    w.max(elem.max(1))
}

/// The widest vector a kernel's vector width may reach, bytes: 16, but for a pointwise kernel
/// (whose width counts output bytes) 16 bytes of its narrowest input element in output
/// elements — a thread's chunk of `lanes` points loads `lanes` elements of each read, so a
/// kernel that reads bf16 and writes fp32 loads 16 bytes at 8 lanes (32 output bytes, two
/// 16-byte stores), where 4 lanes (16 output bytes) would load 8; for a row kernel, what its
/// template loads a row with (`Shape::Reduction::vec_cap`).
pub fn vector_cap(work: &KernelWork) -> u64 {
    let out = work.out_elem_bytes.max(1);
    match work.shape {
        Shape::Elementwise { .. } => {
            let narrowest = work
                .inputs
                .iter()
                .map(|i| i.elem_bytes.max(1))
                .min()
                .unwrap_or(out)
                .min(out);
            16 * out / narrowest
        }
        // The row template's lanes (`Shape::Reduction::vec_cap`).
        Shape::Reduction { vec_cap, .. } => vec_cap,
        _ => 16,
    }
}

/// The widest vector of `work`'s plan space, bytes: [`widest_vector_upto`] its
/// [`vector_cap`] along its vector extent.
pub fn widest_vector_of(work: &KernelWork) -> u64 {
    let (extent, elem) = vector_extent(work);
    widest_vector_upto(extent, elem, vector_cap(work))
}

/// The fastest extent and element size the vector width applies to: `K` of the `A` operand
/// for a contraction, the row for a reduction, the last output axis otherwise.
pub(super) fn vector_extent(work: &KernelWork) -> (f64, u64) {
    match &work.shape {
        Shape::Contraction(g) => (g.k, g.a_elem.max(g.b_elem)),
        Shape::Reduction { len, .. } => {
            let elem = work.inputs.iter().map(|i| i.elem_bytes).max().unwrap_or(4);
            (*len, elem)
        }
        Shape::Elementwise { .. } => (work.inner_extent, work.out_elem_bytes),
        // The compute-at nest loads and stores one element at a time.
        Shape::ComputeAt(_) | Shape::Scan { .. } => (1.0, work.out_elem_bytes),
    }
}

pub(super) fn check(
    k: &Knobs,
    r: &Resources,
    work: &KernelWork,
    target: &Target,
) -> Result<(), Stop> {
    if let Knobs::Contraction {
        algo: Algo::Wgmma,
        bm,
        bn,
        bk,
        async_,
        ..
    } = *k
    {
        let Shape::Contraction(g) = &work.shape else {
            unreachable!("contraction knobs come from a contraction")
        };
        let why = if bm % 64 != 0 {
            Some(format!("BM={bm} is not a multiple of 64"))
        } else if bn % 8 != 0 || bn > 256 {
            Some(format!("BN={bn} is not a multiple of 8 up to 256"))
        } else if bk * g.a_elem != 128 {
            Some(format!(
                "BK rows of {} bytes, not the 128-byte TMA swizzle",
                bk * g.a_elem
            ))
        } else if !async_ {
            Some("wgmma needs asynchronous TMA loads".into())
        } else {
            None
        };
        if let Some(why) = why {
            return Err(Stop::Sm90Shape { why });
        }
    }
    let vec = k.vec_bytes();
    let (extent, elem) = vector_extent(work);
    let widest = match *k {
        Knobs::Contraction {
            algo: Algo::Simt | Algo::Gemv,
            ..
        } => elem.max(1),
        _ => widest_vector_upto(extent, elem, vector_cap(work)),
    };
    if vec > widest {
        return Err(Stop::Misaligned {
            width_bytes: vec,
            extent_bytes: (extent.max(1.0) as u64).saturating_mul(elem),
        });
    }
    if vec < widest {
        return Err(Stop::VectorShrinks {
            from_bytes: widest,
            to_bytes: vec,
        });
    }
    // A warp-specialized `wgmma` kernel is built to run one CTA per SM (its producer warpgroup
    // keeps the tensor cores fed; CUTLASS's SM90 kernels do the same), its epilogue staged
    // through the TMA ring it has drained: the ring may fill the block's shared memory.
    let wgmma = matches!(
        k,
        Knobs::Contraction {
            algo: Algo::Wgmma,
            ..
        }
    );
    let limit = if wgmma {
        u64::from(target.smem_per_block).saturating_sub(WGMMA_RING_OVERHEAD)
    } else {
        (target.smem_per_block as f64 * SMEM_FRACTION) as u64
    };
    if r.smem_bytes as u64 > limit {
        return Err(Stop::SmemOver {
            smem_bytes: r.smem_bytes as u64,
            limit_bytes: target.smem_per_block as u64,
        });
    }
    if r.regs_per_thread > target.regs_per_thread {
        return Err(Stop::RegisterSpill {
            regs: r.regs_per_thread,
            limit: target.regs_per_thread,
        });
    }
    if r.ctas_per_sm <= 1 && r.limited_by == "registers" && !wgmma {
        return Err(Stop::OneCtaPerSm {
            regs: r.regs_per_thread,
        });
    }
    Ok(())
}
