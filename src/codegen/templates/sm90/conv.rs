//! The im2col operand `A` of the SM90 template for a convolution (an implicit GEMM:
//! `M = N·OH·OW`, `N = Co`, `K = Ci·Kh·Kw`).
//!
//! An NCHW image rules out TMA's im2col mode (it needs channels innermost), and the window's
//! start (`ow·s + kw·d − p`) is not provably aligned, so the producer warpgroup *gathers* the
//! tile: the image operand is the SM80 template's separable gather
//! ([`contraction_mma::conv::gather`](super::super::contraction_mma::conv)): every index and
//! guard comparison splits into a part over the `M` axes and a part over the `K` axes (stride,
//! dilation, padding). The tile is stored **MN-major** (`M` contiguous, as the image is), in
//! the layout a TMA box of `64 (m) × 64 (k)` with the 128-byte swizzle would write: per 64
//! rows a block of 64 `k` rows of 128 bytes, the 16-byte chunk `c` of row `k` at chunk
//! `c ^ (k % 8)`; the consumers' `wgmma` reads it transposed (`tnspA`), descriptor LBO one
//! block, SBO 1024.
//!
//! **Gather.** Producer thread `t` owns the 8 consecutive rows `8·(t % (BM/8)) + 0..8` (one
//! 16-byte chunk of a `k` row) for the whole tile: their base offsets, validity and the `M`
//! parts of the guard comparisons are computed **once per tile**, before the `K` loop. Per `K`
//! tile it walks the `k` rows `t / (BM/8) + i·(128·8/BM)`: per row one decomposition of `k`
//! into the `K` axes (constant divisions), its offset and guard parts, then 8 predicated
//! 2-byte loads of the raw bits (zero for padding and tails), packed into four words; after
//! all the tile's loads, one 16-byte `st.shared` per row. Each producer thread then fences the
//! generic-proxy stores for the async proxy (`fence.proxy.async`) and arrives on the stage's
//! `full` mbarrier, which counts the 128 producer threads plus the arrival that arms the
//! weights' TMA transaction bytes.

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
/// Bytes of one 64-row block of the MN-major tile (64 `k` rows of 128 bytes).
const BLOCK: u64 = BK * 128;

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

    /// 16-byte chunks along `M` of one `k` row.
    fn chunks_m(&self) -> u64 {
        self.bm / CHUNK
    }

    /// `k` rows the producer threads cover at once.
    fn k_rows(&self) -> u64 {
        PRODUCERS / self.chunks_m()
    }

    /// Rows per thread and tile.
    fn passes(&self) -> u64 {
        BK / self.k_rows()
    }

    /// The `wgmma` descriptor (C) of k-step `ks` of stage `s`, 64-row block `row0` (C).
    pub(super) fn desc(&self, row0: &str) -> String {
        format!(
            "dlc_wgmma_desc(sm + s * {} + ({row0}) / 64 * {BLOCK} + ks * 2048, {BLOCK}, 1024)",
            self.stage_bytes()
        )
    }

    /// The row data of the thread's 8 rows, once per tile (before the `K` loop).
    pub(super) fn hoist(&self, em: &mut Emitter, v: &View) -> Result<(), CodegenError> {
        let mut names = vec!["ca_off".to_string(), "ca_ok".to_string()];
        names.extend((0..self.g.guard.len()).map(|j| format!("ca_rc{j}")));
        for n in &names {
            em.emit(Stmt::Array {
                ty: CType::I32,
                name: n.clone(),
                dims: vec![CHUNK],
                zero: false,
            });
        }
        em.emit(Stmt::int("ca_mc", format!("tid % {}", self.chunks_m())));
        em.emit(Stmt::int("ca_kr", format!("tid / {}", self.chunks_m())));
        em.open();
        em.push_scope();
        let go = em.fresh("go");
        em.emit(Stmt::int(&go, format!("m0 + ca_mc * {CHUNK} + e")));
        bind_flat(em, &v.m.names, &v.m.c_sizes(), &go, "o_");
        let outer: Vec<AxisExpr> = self.g.index.iter().map(|x| x.outer.clone()).collect();
        let (_, _, off) = em.read_offset(self.g.tensor, &outer)?;
        em.emit(Stmt::Assign {
            place: "ca_off[e]".into(),
            value: off,
        });
        em.emit(Stmt::Assign {
            place: "ca_ok[e]".into(),
            value: format!("{go} < {} ? 1 : 0", cexpr::dim(&v.m.extent())),
        });
        for (j, c) in self.g.guard.iter().enumerate() {
            em.emit(Stmt::Assign {
                place: format!("ca_rc{j}[e]"),
                value: em.axis(&c.side.outer),
            });
        }
        em.pop_scope();
        let body = em.close();
        em.emit(Stmt::unrolled("e", CHUNK, body));
        Ok(())
    }

    /// The gather of tile `kt` into stage `s` (both C in scope): the loads of every row of the
    /// thread, then its 16-byte stores and the proxy fence.
    pub(super) fn fill(&self, em: &mut Emitter, v: &View) -> Result<Vec<Stmt>, CodegenError> {
        let (passes, rows) = (self.passes(), self.k_rows());
        em.open();
        em.emit(Stmt::Array {
            ty: CType::U32,
            name: "ca_x".into(),
            dims: vec![passes, 4],
            zero: false,
        });
        em.open();
        em.push_scope();
        let gk = em.fresh("gk");
        em.emit(Stmt::int(&gk, format!("kt * {BK} + ca_kr + i * {rows}")));
        bind_flat(em, &v.k.names, &v.k.c_sizes(), &gk, "k_");
        let kidx: Vec<AxisExpr> = self.g.index.iter().map(|x| x.k.clone()).collect();
        let (param, _, koff) = em.read_offset(self.g.tensor, &kidx)?;
        let ko = em.fresh("ko");
        em.emit(Stmt::int(&ko, koff));
        let mut kcs = Vec::new();
        for c in &self.g.guard {
            let kc = em.fresh("kc");
            em.emit(Stmt::int(&kc, em.axis(&c.side.k)));
            kcs.push(kc);
        }
        let kin = format!("{gk} < {}", cexpr::dim(&v.k.extent()));
        let mut xs = Vec::new();
        for e in 0..CHUNK {
            let mut ok = vec![kin.clone(), format!("ca_ok[{e}] != 0")];
            for (j, (c, kc)) in self.g.guard.iter().zip(&kcs).enumerate() {
                ok.push(format!("ca_rc{j}[{e}] + {kc} {} 0", c.op));
            }
            let x = em.fresh("x");
            em.emit(Stmt::Let {
                ty: CType::U32,
                name: x.clone(),
                value: format!(
                    "({}) ? dlc_bits({param}[ca_off[{e}] + {ko}]) : 0u",
                    ok.join(" && ")
                ),
                mutable: false,
            });
            xs.push(x);
        }
        for w in 0..4 {
            em.emit(Stmt::Assign {
                place: format!("ca_x[i][{w}]"),
                value: format!("{} | ({} << 16)", xs[2 * w], xs[2 * w + 1]),
            });
        }
        em.pop_scope();
        let loads = em.close();
        em.emit(Stmt::unrolled("i", passes, loads));
        let ck = format!("(ca_kr + i * {rows})");
        let store = sm90(format!(
            "dlc_sts128(sm + s * {} + ca_mc / 8 * {BLOCK} + {ck} * 128 + ((ca_mc % 8) ^ ({ck} % 8)) * 16, \
             ca_x[i][0], ca_x[i][1], ca_x[i][2], ca_x[i][3])",
            self.stage_bytes()
        ));
        em.emit(Stmt::unrolled("i", passes, vec![store]));
        em.emit(sm90("dlc_fence_proxy_async()"));
        Ok(em.close())
    }
}
