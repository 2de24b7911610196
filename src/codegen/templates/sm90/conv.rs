//! The im2col operand `A` of the SM90 template for a convolution (an implicit GEMM:
//! `M = N·OH·OW`, `N = Co`, `K = Ci·Kh·Kw`).
//!
//! An NCHW image rules out TMA's im2col mode (it needs channels innermost), and the window's
//! start (`ow·s + kw·d − p`) is not provably aligned, so the producer warpgroup *gathers* the
//! tile: the image operand is the SM80 template's separable gather
//! ([`contraction_mma::conv::gather`](super::super::contraction_mma::conv)): every index and
//! guard comparison splits into a part over the `M` axes and a part over the `K` axes (stride,
//! dilation, padding). The tile is stored **K-major**, in the layout a TMA box of
//! `64 (k) × BM (m)` rows with the 128-byte swizzle would write (the GEMM's `A`): row `m` at
//! `128·m` bytes, the 16-byte chunk `j` (its `k` columns `8j..8j+8`) at chunk `j ^ (m % 8)`;
//! the consumers' `wgmma` reads it untransposed, descriptor SBO 1024, `K` steps of 32 bytes.
//!
//! **Gather (coalesced).** Producer thread `t` (lane `t % 32` of warp `t / 32`) owns the row
//! `32·b + t % 32` of every group `b` of 32 rows and the chunks `j = t / 32 + 4·c`: the 32
//! lanes of a warp walk 32 consecutive `M` rows (output pixels, a run of `x` along one
//! `(n, h)` image row for stride 1) at the same `k`, so each 2-byte load of a warp reads one
//! contiguous 64-byte run of one `(n, c, h)` row of the image (2–3 sectors, not 16). The rows'
//! base offsets, validity and the `M` parts of the guard comparisons are computed **once per
//! CTA**, before the `K` loop; per `k` (warp-uniform) the decomposition into the `K` axes,
//! its offset and the negated `K` parts of the guard are computed once for all the thread's
//! `BM / 32` rows, whose loads then take one comparison per guard (`rc op −kc`, combined
//! without short-circuit branches), the address and one predicated load. After all the
//! tile's loads, one 16-byte `st.shared` per chunk: the 8 lanes of a quarter warp write 8
//! consecutive rows, whose chunk `j ^ (m % 8)` lands in 8 distinct bank groups (no bank
//! conflict). Each producer thread then fences the generic-proxy stores for the async proxy
//! (`fence.proxy.async`) and arrives on the stage's `full` mbarrier, which counts the 128
//! producer threads plus the arrival that arms the weights' TMA transaction bytes.
//! TODO(issue 21): 4- or 16-byte loads need `x`-aligned windows (not provable for a padded
//! window: `ow − p + kw` is odd for every other `kw`), and the `k` parts could come from a
//! per-CTA table instead of per-element divisions.

use super::super::super::gpu::{CType, Stmt};
use super::super::super::scalar::Emitter;
use super::super::super::{cexpr, CodegenError};
use super::super::bind_flat;
use super::super::contraction::{Side, View};
use super::super::contraction_mma::conv::{gather, Gather};
use super::{sm90, BK};
use crate::ir::axis::AxisExpr;
use crate::ir::dtype::DType;
use crate::ir::region::Region;

/// Elements of one 16-byte chunk.
const CHUNK: u64 = 8;
/// Threads of the producer warpgroup (all of them gather).
pub(super) const PRODUCERS: u64 = 128;
/// Lanes of a warp: the rows one warp gathers at once.
const LANES: u64 = 32;
/// Warps of the producer warpgroup.
const WARPS: u64 = PRODUCERS / LANES;

/// The gathered image operand `A` of `v`, when it is a conv's separable gather running along
/// `M` (an NCHW image); TODO(issue 21): a channels-last image (the gather running along `K`)
/// and grouped convolutions stay on `mma_sync`.
pub(super) fn image<'r>(r: &'r Region, v: &View<'r>, dtype: DType) -> Option<Gather<'r>> {
    gather(r, v, Side::A, dtype).filter(|g| !g.k_fastest)
}

/// The gathered `A` tiles of a `BM`-row block tile.
pub(super) struct Image<'r> {
    /// The gather.
    pub(super) g: Gather<'r>,
    /// `BM` (64, 128 or 256).
    pub(super) bm: u64,
}

impl Image<'_> {
    fn stage_bytes(&self) -> u64 {
        self.bm * BK * 2
    }

    /// Row groups of 32 (one row per lane): each thread owns one row of each.
    fn blocks(&self) -> u64 {
        self.bm / LANES
    }

    /// Chunks per thread: the tile's `BK / 8` chunks over the 4 producer warps.
    fn chunks(&self) -> u64 {
        BK / CHUNK / WARPS
    }

    /// The `wgmma` descriptor (C) of k-step `ks` of stage `s`, 64-row block `row0` (C).
    pub(super) fn desc(&self, row0: &str) -> String {
        format!(
            "dlc_wgmma_desc(sm + s * {} + ({row0}) * 128 + ks * 32, 16, 1024)",
            self.stage_bytes()
        )
    }

    /// The row data of the thread's rows, once per CTA (before the `K` loop).
    pub(super) fn hoist(&self, em: &mut Emitter, v: &View) -> Result<(), CodegenError> {
        let mut names = vec!["ca_off".to_string(), "ca_ok".to_string()];
        names.extend((0..self.g.guard.len()).map(|j| format!("ca_rc{j}")));
        for n in &names {
            em.emit(Stmt::Array {
                ty: CType::I32,
                name: n.clone(),
                dims: vec![self.blocks()],
                zero: false,
            });
        }
        em.emit(Stmt::int("ca_m", format!("tid % {LANES}")));
        em.emit(Stmt::int("ca_w", format!("tid / {LANES}")));
        em.open();
        em.push_scope();
        let go = em.fresh("go");
        em.emit(Stmt::int(&go, format!("m0 + b * {LANES} + ca_m")));
        bind_flat(em, &v.m.names, &v.m.c_sizes(), &go, "o_");
        let outer: Vec<AxisExpr> = self.g.index.iter().map(|x| x.outer.clone()).collect();
        let (_, _, off) = em.read_offset(self.g.tensor, &outer)?;
        em.emit(Stmt::Assign {
            place: "ca_off[b]".into(),
            value: off,
        });
        em.emit(Stmt::Assign {
            place: "ca_ok[b]".into(),
            value: format!("{go} < {} ? 1 : 0", cexpr::dim(&v.m.extent())),
        });
        for (j, c) in self.g.guard.iter().enumerate() {
            em.emit(Stmt::Assign {
                place: format!("ca_rc{j}[b]"),
                value: em.axis(&c.side.outer),
            });
        }
        em.pop_scope();
        let body = em.close();
        em.emit(Stmt::unrolled("b", self.blocks(), body));
        Ok(())
    }

    /// The gather of tile `kt` into stage `s` (both C in scope): per chunk and `k` the `K`
    /// parts once, then the loads of the thread's rows; then its 16-byte stores and the proxy
    /// fence.
    pub(super) fn fill(&self, em: &mut Emitter, v: &View) -> Result<Vec<Stmt>, CodegenError> {
        let (blocks, chunks) = (self.blocks(), self.chunks());
        em.open();
        em.emit(Stmt::Array {
            ty: CType::U32,
            name: "ca_x".into(),
            dims: vec![blocks, chunks, 4],
            zero: false,
        });
        em.open();
        for e in 0..CHUNK {
            em.push_scope();
            let gk = em.fresh("gk");
            em.emit(Stmt::int(
                &gk,
                format!("kt * {BK} + (ca_w + {WARPS} * c) * {CHUNK} + {e}"),
            ));
            bind_flat(em, &v.k.names, &v.k.c_sizes(), &gk, "k_");
            let kidx: Vec<AxisExpr> = self.g.index.iter().map(|x| x.k.clone()).collect();
            let (param, _, koff) = em.read_offset(self.g.tensor, &kidx)?;
            let ko = em.fresh("ko");
            em.emit(Stmt::int(&ko, koff));
            let kin = em.fresh("kin");
            em.emit(Stmt::Let {
                ty: CType::Bool,
                name: kin.clone(),
                value: format!("{gk} < {}", cexpr::dim(&v.k.extent())),
                mutable: false,
            });
            // `rc + kc op 0` as `rc op −kc`: one comparison per row.
            let mut ok = vec![kin, "(ca_ok[b] != 0)".to_string()];
            for (j, c) in self.g.guard.iter().enumerate() {
                let nk = em.fresh("nk");
                em.emit(Stmt::int(&nk, format!("-({})", em.axis(&c.side.k))));
                ok.push(format!("(ca_rc{j}[b] {} {nk})", c.op));
            }
            let x = em.fresh("x");
            let (w, shift) = (e / 2, 16 * (e % 2));
            let load = Stmt::Let {
                ty: CType::U32,
                name: x.clone(),
                value: format!(
                    "({}) ? dlc_bits({param}[ca_off[b] + {ko}]) : 0u",
                    ok.join(" & ")
                ),
                mutable: false,
            };
            let pack = Stmt::Assign {
                place: format!("ca_x[b][c][{w}]"),
                value: if shift == 0 {
                    x
                } else {
                    format!("ca_x[b][c][{w}] | ({x} << 16)")
                },
            };
            em.emit(Stmt::unrolled("b", blocks, vec![load, pack]));
            em.pop_scope();
        }
        let loads = em.close();
        em.emit(Stmt::unrolled("c", chunks, loads));
        let store = sm90(format!(
            "dlc_sts128(sm + s * {} + (b * {LANES} + ca_m) * 128 + (((ca_w + {WARPS} * c) ^ (ca_m % 8)) * 16), \
             ca_x[b][c][0], ca_x[b][c][1], ca_x[b][c][2], ca_x[b][c][3])",
            self.stage_bytes()
        ));
        em.emit(Stmt::unrolled(
            "b",
            blocks,
            vec![Stmt::unrolled("c", chunks, vec![store])],
        ));
        em.emit(sm90("dlc_fence_proxy_async()"));
        Ok(em.close())
    }
}
