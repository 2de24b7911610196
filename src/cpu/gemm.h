// ---- Contractions: packed, register-blocked fp32 GEMM (C = A·B, fp32 accumulation) ----
// A is packed by the caller into row panels of DLC_MR rows (Ap[panel][k][DLC_MR], rows past M
// zero), B into column panels of DLC_NR columns (Bp[panel][k][DLC_NR], columns past N zero).
// C's element (i, j) lives at C[rowoff[i] + coloff[j]] (any layout of the let's free iters).
//
// Blocking (GotoBLAS/BLIS order, the packed panels being whole-K): C is cut into DLC_MC x DLC_NC
// blocks, the threads' work items (column-block major, so that a thread's consecutive blocks
// share their B panels in its L2); inside a block, k goes in DLC_KC slices, then column panels
// (one B micro-panel, kc x DLC_NR, stays in L1), then row panels (A micro-panels stream from
// L2), and the micro-kernel keeps the DLC_MR x DLC_NR tile of C in registers over the slice.
//
// The register tile uses 256-bit vectors even where AVX-512 exists: without FMA (products and
// sums rounded as the reference rounds them, bit-identical results), a 256-bit multiply and a
// 256-bit add issue to separate pipes on current x86 cores (AMD Zen: FMUL on FP0/1, FADD on
// FP2/3) and reach the FMA peak, where 512-bit ones issue at half that rate (measured on the
// Zen 4 development VM: 8x16 ymm tile 106-112 GFLOP/s per core, 6x32 zmm 75-81, FMA zmm 109-114).
// Every element folds its k terms in order (C's partial sums reload between k slices), as the
// reference's sequential fp32 sum does.
// TODO(issue 16): the region's epilogue (bias, GELU, residual) on the C tile while it is hot, and
// prefetch of the next A micro-panel (today the epilogue is the region's next loop nest).
#if defined(__AVX__)
#define DLC_GVL 8
#define DLC_MR 8
#else
#define DLC_GVL 4
#define DLC_MR 4
#endif
typedef float dlc_gv __attribute__((vector_size(DLC_GVL * 4), aligned(4)));
#define DLC_NR 16
#define DLC_NV (DLC_NR / DLC_GVL)
#define DLC_KC 256
#define DLC_MC (DLC_MR * 16)
#define DLC_NC (DLC_NR * 8)

// tile[r] (r < DLC_MR) is the row at c + ro[r], DLC_NR contiguous floats; `first`: the k slice
// starts the sum (zero partial sums), else the tile reloads C's.
DLC_INLINE void dlc_micro(int64_t kc, const float *restrict a, const float *restrict b,
        float *restrict c, const int64_t *restrict ro, int first) {
    dlc_gv acc[DLC_MR][DLC_NV];
    for (int r = 0; r < DLC_MR; r++)
        for (int v = 0; v < DLC_NV; v++) {
            if (first) acc[r][v] = (dlc_gv){0};
            else memcpy(&acc[r][v], c + ro[r] + v * DLC_GVL, sizeof acc[r][v]);
        }
    for (int64_t k = 0; k < kc; k++) {
        dlc_gv bv[DLC_NV];
        for (int v = 0; v < DLC_NV; v++) memcpy(&bv[v], b + k * DLC_NR + v * DLC_GVL, sizeof bv[v]);
        for (int r = 0; r < DLC_MR; r++) {
            const float av = a[k * DLC_MR + r];
            for (int v = 0; v < DLC_NV; v++) acc[r][v] += av * bv[v];
        }
    }
    for (int r = 0; r < DLC_MR; r++)
        for (int v = 0; v < DLC_NV; v++) memcpy(c + ro[r] + v * DLC_GVL, &acc[r][v], sizeof acc[r][v]);
}

// Rows [i0, i1) x columns [j0, j1) of C (i0, j0 multiples of DLC_MR, DLC_NR), all of K.
static void dlc_gemm_block(int64_t M, int64_t N, int64_t K, const float *restrict Ap,
        const float *restrict Bp, float *restrict C, const int64_t *restrict rowoff,
        const int64_t *restrict coloff, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
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
            const float *b = Bp + (j / DLC_NR) * K * DLC_NR + pc * DLC_NR;
            for (int64_t i = i0; i < i1; i += DLC_MR) {
                const int64_t mr = M - i < DLC_MR ? M - i : DLC_MR;
                const float *a = Ap + (i / DLC_MR) * K * DLC_MR + pc * DLC_MR;
                if (contig && mr == DLC_MR) {
                    dlc_micro(kc, a, b, C + coloff[j], rowoff + i, first);
                    continue;
                }
                if (!first)
                    for (int64_t r = 0; r < mr; r++)
                        for (int64_t q = 0; q < nr; q++)
                            tile[r * DLC_NR + q] = C[rowoff[i + r] + coloff[j + q]];
                dlc_micro(kc, a, b, tile, tro, first);
                for (int64_t r = 0; r < mr; r++)
                    for (int64_t q = 0; q < nr; q++)
                        C[rowoff[i + r] + coloff[j + q]] = tile[r * DLC_NR + q];
            }
        }
        if (K == 0) break;
    }
}

/// C = Ap·Bp for an M x N result over K (Ap, Bp packed as above). `ws`: called by every thread
/// of a parallel region, which share the blocks (an orphaned `omp for`, ending in a barrier);
/// else by one thread alone.
static void dlc_gemm(int64_t M, int64_t N, int64_t K, const float *restrict Ap,
        const float *restrict Bp, float *restrict C, const int64_t *restrict rowoff,
        const int64_t *restrict coloff, int ws) {
    const int64_t mb = (M + DLC_MC - 1) / DLC_MC, nb = (N + DLC_NC - 1) / DLC_NC;
    if (!ws) {
        for (int64_t jb = 0; jb < nb; jb++)
            for (int64_t ib = 0; ib < mb; ib++) {
                const int64_t i0 = ib * DLC_MC, j0 = jb * DLC_NC;
                dlc_gemm_block(M, N, K, Ap, Bp, C, rowoff, coloff, i0,
                    M - i0 < DLC_MC ? M : i0 + DLC_MC, j0, N - j0 < DLC_NC ? N : j0 + DLC_NC);
            }
        return;
    }
    #pragma omp for schedule(static) collapse(2)
    for (int64_t jb = 0; jb < nb; jb++)
        for (int64_t ib = 0; ib < mb; ib++) {
            const int64_t i0 = ib * DLC_MC, j0 = jb * DLC_NC;
            dlc_gemm_block(M, N, K, Ap, Bp, C, rowoff, coloff, i0,
                M - i0 < DLC_MC ? M : i0 + DLC_MC, j0, N - j0 < DLC_NC ? N : j0 + DLC_NC);
        }
}

// Per-thread scratch for packed panels and index arrays, kept between calls (slot < 8): the
// same buffers serve every run of the program instead of fresh pages faulted in each time.
// Threads of OpenMP's pool persist, so do their buffers (up to the largest contraction run).
DLC_INLINE void *dlc_scratch(int slot, int64_t bytes) {
    static __thread void *buf[8];
    static __thread int64_t cap[8];
    if (bytes < 64) bytes = 64;
    if (bytes > cap[slot]) {
        free(buf[slot]);
        int64_t want = bytes + bytes / 4;
        buf[slot] = dlc_alloc(want);
        cap[slot] = buf[slot] ? want : 0;
    }
    return buf[slot];
}
