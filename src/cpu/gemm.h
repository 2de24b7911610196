// ---- Contractions: packed, register-blocked fp32 GEMM (C = A·B, fp32 accumulation) ----
// A is packed by the caller into row panels of DLC_MR rows (Ap[panel][k][DLC_MR], rows past M
// zero), B into column panels of DLC_NR columns (Bp[panel][k][DLC_NR], columns past N zero).
// C's element (i, j) lives at C[rowoff[i] + coloff[j]] (any layout of the let's free iters).
//
// Blocking (GotoBLAS/BLIS order): the emitter cuts C into work items of one column block
// (`nc` columns, `dlc_gemm_plan`) by one row group, shared by the threads (`omp for`). An item
// packs its B block into the thread's scratch (`[K][ldb]`, rows `ldb` floats apart: the block
// is packed and consumed while it sits in the thread's L2, and an im2col's columns are copied
// along contiguous image rows) unless B is a kept pack (whole-K column panels); then it runs
// the row blocks of DLC_MC rows (`dlc_gemm_rows`), and the region's pointwise epilogue on the
// item's C block while it is hot (the emitter's block epilogue). Inside a row block, k goes in
// DLC_KC slices, then column panels (one B micro-panel, kc x DLC_NR, stays in L1), then row
// panels (A micro-panels stream from L2), and the micro-kernel keeps the DLC_MR x DLC_NR tile of
// C in registers over the slice.
//
// The register tile: DLC_MR rows x DLC_NR columns of DLC_GVL-lane vectors. With DLC_GEMM_WIDE
// (AVX-512 with FMA contraction, or AVX-512 on Intel cores: src/cpu/build.rs `wide_gemm`) it is
// 8 x 32 in 16 zmm accumulators (Intel Emerald Rapids, one thread: 120 GFLOP/s with FMA, 69
// without, against 47 for the 8 x 16 ymm tile). Otherwise 256-bit vectors even where AVX-512
// exists: without FMA (DLC_CPU_FMA=0: products and sums rounded as the reference rounds them,
// bit-identical results) a 256-bit multiply and a 256-bit add issue to separate pipes on AMD Zen
// (FMUL on FP0/1, FADD on FP2/3) and reach the FMA peak, where 512-bit ones issue at half that
// rate (Zen 4: 8x16 ymm tile 106-112 GFLOP/s per core, 6x32 zmm 75-81, FMA zmm 109-114).
// Without AVX-512 (16 ymm registers, an AVX2-only machine) the tile is 6 x 16: 12 accumulators.
// Every element folds its k terms in order (C's partial sums reload between k slices), as the
// reference's sequential fp32 sum does.
// TODO(issue 16): prefetch of the next A micro-panel; the A side of an activation x activation
// GEMM is still packed whole, before the items (a barrier), by gathers down A's columns.
#if defined(__AVX512F__) && defined(DLC_GEMM_WIDE)
#define DLC_GVL 16
#define DLC_MR 8
#define DLC_NR 32
#elif defined(__AVX512F__)
#define DLC_GVL 8
#define DLC_MR 8
#define DLC_NR 16
#elif defined(__AVX__)
// 16 ymm registers only (no AVX-512): 12 accumulators, 2 B vectors and the broadcast A value.
// The 8 x 16 tile's 16 accumulators spilled, and GCC kept the whole tile in memory, stored on
// every k step (Zen 3, fp32 1024^3, one thread: 13 -> 53-66 GFLOP/s with the loads below).
#define DLC_GVL 8
#define DLC_MR 6
#define DLC_NR 16
#else
#define DLC_GVL 4
#define DLC_MR 4
#define DLC_NR 16
#endif
typedef float dlc_gv __attribute__((vector_size(DLC_GVL * 4), aligned(4)));
// Unaligned vector loads and stores are dereferences of this type, not memcpy: GCC 12 tuned
// for Zen (-march=native on an AVX2-only EPYC) expands a 32-byte memcpy into two 16-byte moves
// through the stack, and the 32-byte reload of the two 16-byte stores stalls store forwarding
// on every k step of the micro-kernel.
typedef float dlc_gvu __attribute__((vector_size(DLC_GVL * 4), aligned(4), may_alias));
#define DLC_NV (DLC_NR / DLC_GVL)
#define DLC_KC 256
#define DLC_MC (DLC_MR * 16)
#define DLC_NC (DLC_NR * 8)

// tile[r] (r < DLC_MR) is the row at c + ro[r], DLC_NR contiguous floats; B's row k of the
// micro-panel is at b + k * ldb; `first`: the k slice starts the sum (zero partial sums), else
// the tile reloads C's.
DLC_INLINE void dlc_micro(int64_t kc, const float *restrict a, const float *restrict b,
        int64_t ldb, float *restrict c, const int64_t *restrict ro, int first) {
    dlc_gv acc[DLC_MR][DLC_NV];
    for (int r = 0; r < DLC_MR; r++)
        for (int v = 0; v < DLC_NV; v++) {
            if (first) acc[r][v] = (dlc_gv){0};
            else acc[r][v] = *(const dlc_gvu *)(c + ro[r] + v * DLC_GVL);
        }
    for (int64_t k = 0; k < kc; k++) {
        dlc_gv bv[DLC_NV];
        const float *bk = b + k * ldb;
        for (int v = 0; v < DLC_NV; v++) bv[v] = *(const dlc_gvu *)(bk + v * DLC_GVL);
        for (int r = 0; r < DLC_MR; r++) {
            const float av = a[k * DLC_MR + r];
            for (int v = 0; v < DLC_NV; v++) acc[r][v] += av * bv[v];
        }
    }
    for (int r = 0; r < DLC_MR; r++)
        for (int v = 0; v < DLC_NV; v++) *(dlc_gvu *)(c + ro[r] + v * DLC_GVL) = acc[r][v];
}

// Rows [i0, i1) x columns [j0, j1) of C (i0, j0 multiples of DLC_MR, DLC_NR), all of K. Bb is
// the B block of column j0: the micro-panel of column j starts at Bb + (j - j0) / DLC_NR * bps,
// its row k ldb floats after row k - 1 (whole-K panels: bps = K * DLC_NR, ldb = DLC_NR; a
// block packed `[K][ldb]`: bps = DLC_NR).
static void dlc_gemm_block(int64_t M, int64_t N, int64_t K, const float *restrict Ap,
        const float *restrict Bb, int64_t bps, int64_t ldb, float *restrict C,
        const int64_t *restrict rowoff, const int64_t *restrict coloff, int64_t i0, int64_t i1,
        int64_t j0, int64_t j1) {
    float tile[DLC_MR * DLC_NR] __attribute__((aligned(64)));
    int64_t tro[DLC_MR];
    for (int r = 0; r < DLC_MR; r++) tro[r] = r * DLC_NR;
    for (int64_t pc = 0; pc < K || pc == 0; pc += DLC_KC) {
        const int64_t kc = K - pc < DLC_KC ? K - pc : DLC_KC;
        const int first = pc == 0;
        for (int64_t j = j0; j < j1; j += DLC_NR) {
            const int64_t nr = N - j < DLC_NR ? N - j : DLC_NR;
            int contig = nr == DLC_NR;
            for (int64_t q = 1; contig && q < DLC_NR; q++) contig = coloff[j + q] == coloff[j] + q;
            const float *b = Bb + (j - j0) / DLC_NR * bps + pc * ldb;
            for (int64_t i = i0; i < i1; i += DLC_MR) {
                const int64_t mr = M - i < DLC_MR ? M - i : DLC_MR;
                const float *a = Ap + (i / DLC_MR) * K * DLC_MR + pc * DLC_MR;
                if (contig && mr == DLC_MR) {
                    dlc_micro(kc, a, b, ldb, C + coloff[j], rowoff + i, first);
                    continue;
                }
                if (!first)
                    for (int64_t r = 0; r < mr; r++)
                        for (int64_t q = 0; q < nr; q++)
                            tile[r * DLC_NR + q] = C[rowoff[i + r] + coloff[j + q]];
                dlc_micro(kc, a, b, ldb, tile, tro, first);
                for (int64_t r = 0; r < mr; r++)
                    for (int64_t q = 0; q < nr; q++)
                        C[rowoff[i + r] + coloff[j + q]] = tile[r * DLC_NR + q];
            }
        }
        if (K == 0) break;
    }
}

// Rows [i0, i1) x columns [j0, j1) of C, row block by row block (DLC_MC rows: A's block of a k
// slice stays in L2 while the column panels go by). Bb, bps, ldb as in dlc_gemm_block.
static void dlc_gemm_rows(int64_t M, int64_t N, int64_t K, const float *restrict Ap,
        const float *restrict Bb, int64_t bps, int64_t ldb, float *restrict C,
        const int64_t *restrict rowoff, const int64_t *restrict coloff, int64_t i0, int64_t i1,
        int64_t j0, int64_t j1) {
    for (int64_t ib = i0; ib < i1; ib += DLC_MC)
        dlc_gemm_block(M, N, K, Ap, Bb, bps, ldb, C, rowoff, coloff, ib,
            i1 - ib < DLC_MC ? i1 : ib + DLC_MC, j0, j1);
}

// ---- Direct convolution, channel-vector form (src/cpu/direct.rs) ----
// The output channels (the contraction's rows) run along the vector lanes: A is packed in
// panels of DLC_CR rows (Ap[panel][k][DLC_CR], rows past M zero), and the register tile is
// DLC_CR channels (two vectors) by DLC_PX output positions (consecutive w of one output row),
// each image value broadcast and read in place from the zero-padded copy at x + koff[k] + p.
// The tile keeps all of K in registers (no k slices: the A panel streams from L2, each image
// value is loaded once per tile and channel panel). Results go to the thread's block T,
// channel-major: channel i of position q at T[(i - i0) * ldt + q] (the tile transposed through
// L1 by plain copies, so that the block epilogue's vector loop over positions reads them
// contiguously: read position-major, with a stride of one channel group, GCC ran the epilogue
// (bias, ReLU6, the output stores) in scalar code, the stem convolution of MobileNetV2 at
// 0.54 ms). Same per-element k order as the reference's sequential sum (and as the row-major
// kernel above): bit-identical sums.
#if DLC_GVL == 16
#define DLC_PX 14
#else
#define DLC_PX 6
#endif
#define DLC_CR (2 * DLC_GVL)
// Output positions per work item (whole rows of at most this many together).
#define DLC_CV_COLS 128

#define DLC_CV_TILE(NAME, NP, S)                                                                \
DLC_INLINE void NAME(int64_t K, const float *restrict a, const float *restrict x,               \
        const int64_t *restrict koff, float *restrict t, int64_t ldt) {                         \
    dlc_gv a0[NP], a1[NP];                                                                      \
    for (int p = 0; p < NP; p++) { a0[p] = (dlc_gv){0}; a1[p] = (dlc_gv){0}; }                  \
    for (int64_t k = 0; k < K; k++) {                                                           \
        dlc_gv w0 = *(const dlc_gvu *)(a + k * DLC_CR);                                         \
        dlc_gv w1 = *(const dlc_gvu *)(a + k * DLC_CR + DLC_GVL);                               \
        const float *xk = x + koff[k];                                                          \
        /* one base register, constant displacements (else gcc keeps a pointer per lane) */     \
        __asm__("" : "+r"(xk));                                                                 \
        for (int p = 0; p < NP; p++) { const float xv = xk[p * (S)]; a0[p] += w0 * xv; a1[p] += w1 * xv; } \
    }                                                                                           \
    float tt[NP][DLC_CR] __attribute__((aligned(64)));                                          \
    for (int p = 0; p < NP; p++) {                                                              \
        *(dlc_gv *)(tt[p]) = a0[p];                                                             \
        *(dlc_gv *)(tt[p] + DLC_GVL) = a1[p];                                                   \
    }                                                                                           \
    for (int c = 0; c < DLC_CR; c++)                                                            \
        for (int p = 0; p < NP; p++) t[c * ldt + p] = tt[p][c];                                 \
}
DLC_CV_TILE(dlc_cv_tile, DLC_PX, 1)
DLC_CV_TILE(dlc_cv_tile_half, DLC_PX / 2, 1)
// stride 2 along the row (a strided convolution: position w reads x + 2 * w + koff[k])
DLC_CV_TILE(dlc_cv_tile_s2, DLC_PX, 2)
DLC_CV_TILE(dlc_cv_tile_s2_half, DLC_PX / 2, 2)

// Channels [i0, i1) (i0 a multiple of DLC_CR) of output rows [h0, h1) (row h's position w
// row, into T (channel i's positions ldt floats after channel i - 1's): position w of row h at
// q = (h - h0) * cwp + w - c0, cwp = c1 - c0 rounded up to DLC_PX. Positions past c1 up to the next tile are computed too (from the padded copy's next
// row or zeroed slack, at most S * DLC_PX values past the last window) and left in T; a tail of
// at most DLC_PX / 2 positions takes the half-width tile.
static void dlc_conv_cv(int64_t K, const float *restrict Ap, const float *restrict x,
        const int64_t *restrict koff, int64_t P, int64_t S, int64_t h0, int64_t h1, int64_t c0,
        int64_t c1, float *restrict T, int64_t ldt, int64_t i0, int64_t i1) {
    const int64_t cwp = (c1 - c0 + DLC_PX - 1) / DLC_PX * DLC_PX;
    for (int64_t i = i0; i < i1; i += DLC_CR) {
        const float *a = Ap + (i / DLC_CR) * K * DLC_CR;
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = c0; w < c1; w += DLC_PX) {
                float *t = T + (i - i0) * ldt + (h - h0) * cwp + w - c0;
                const float *xw = x + h * P + w * S;
                const int half = c1 - w <= DLC_PX / 2;
                if (S == 2) {
                    if (half) dlc_cv_tile_s2_half(K, a, xw, koff, t, ldt);
                    else dlc_cv_tile_s2(K, a, xw, koff, t, ldt);
                } else if (half) dlc_cv_tile_half(K, a, xw, koff, t, ldt);
                else dlc_cv_tile(K, a, xw, koff, t, ldt);
            }
    }
}

// The work items of an M x N contraction on nt threads: column blocks of *nc columns (DLC_NC/2
// to DLC_NC, a multiple of DLC_NR: the width whose busiest thread gets the fewest column
// panels, ties to the widest) times *mg row groups of *rg rows (a multiple of DLC_MR; more than
// one only when there are fewer column blocks than threads: a split over M as well as N).
static void dlc_gemm_plan(int64_t M, int64_t N, int nt, int64_t *nc, int64_t *mg, int64_t *rg) {
    const int64_t np = (N + DLC_NR - 1) / DLC_NR, rp = (M + DLC_MR - 1) / DLC_MR;
    int64_t bestp = DLC_NC / DLC_NR, bestload = -1;
    if (nt < 1) nt = 1;
    for (int64_t p = DLC_NC / DLC_NR; p >= DLC_NC / DLC_NR / 2; p--) {
        const int64_t nb = (np + p - 1) / p, load = (nb + nt - 1) / nt * p;
        if (bestload < 0 || load < bestload) { bestload = load; bestp = p; }
    }
    const int64_t nb = (np + bestp - 1) / bestp;
    int64_t g = nb >= nt ? 1 : (nt + nb - 1) / (nb > 0 ? nb : 1);
    if (g > rp) g = rp;
    if (g < 1) g = 1;
    *nc = bestp * DLC_NR;
    *rg = (rp + g - 1) / g * DLC_MR;
    *mg = rp > 0 ? (rp + *rg / DLC_MR - 1) / (*rg / DLC_MR) : 1;
}

// Per-thread scratch for packed panels and index arrays (slots 0-7) and staged window rows
// (slot 8, emit_stencil.rs), kept between calls: the same buffers serve every run of the
// program instead of fresh pages faulted in each time. Threads of OpenMP's pool persist, so do
// their buffers (up to the largest contraction run).
DLC_INLINE void *dlc_scratch(int slot, int64_t bytes) {
    static __thread void *buf[9];
    static __thread int64_t cap[9];
    if (bytes < 64) bytes = 64;
    if (bytes > cap[slot]) {
        free(buf[slot]);
        int64_t want = bytes + bytes / 4;
        buf[slot] = dlc_alloc(want);
        cap[slot] = buf[slot] ? want : 0;
    }
    return buf[slot];
}
