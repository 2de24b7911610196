// ---- Contractions: packed, register-blocked fp32 GEMM (C = A·B, fp32 accumulation) ----
// A is packed by the caller into row panels of DLC_MR rows (Ap[panel][k][DLC_MR], rows past M
// zero), B into column panels of DLC_NR columns (Bp[panel][k][DLC_NR], columns past N zero).
// The micro-kernel keeps a DLC_MR x DLC_NR tile in vector registers over a DLC_KC slice of k;
// C's element (i, j) lives at C[rowoff[i] + coloff[j]] (any layout of the let's free iters).
#if defined(__AVX512F__)
#define DLC_VL 16
#elif defined(__AVX__)
#define DLC_VL 8
#else
#define DLC_VL 4
#endif
typedef float dlc_vf __attribute__((vector_size(DLC_VL * 4), aligned(4)));
#define DLC_MR 6
#define DLC_NR (2 * DLC_VL)
#define DLC_KC 256
#define DLC_MC (DLC_MR * 16)

// The tile starts from C's partial sums (zero for the first k slice), so every element folds
// its k terms in order, as the reference's sequential fp32 sum does.
static inline __attribute__((always_inline)) void dlc_micro(int64_t kc, const float *restrict a,
        const float *restrict b, float *restrict tile) {
    dlc_vf c[DLC_MR][2];
    for (int r = 0; r < DLC_MR; r++) {
        memcpy(&c[r][0], tile + r * DLC_NR, sizeof c[r][0]);
        memcpy(&c[r][1], tile + r * DLC_NR + DLC_VL, sizeof c[r][1]);
    }
    for (int64_t k = 0; k < kc; k++) {
        dlc_vf b0, b1;
        memcpy(&b0, b + k * DLC_NR, sizeof b0);
        memcpy(&b1, b + k * DLC_NR + DLC_VL, sizeof b1);
        for (int r = 0; r < DLC_MR; r++) {
            dlc_vf av = (dlc_vf){0} + a[k * DLC_MR + r];
            c[r][0] += av * b0;
            c[r][1] += av * b1;
        }
    }
    for (int r = 0; r < DLC_MR; r++) {
        memcpy(tile + r * DLC_NR, &c[r][0], sizeof c[r][0]);
        memcpy(tile + r * DLC_NR + DLC_VL, &c[r][1], sizeof c[r][1]);
    }
}

/// C = Ap·Bp for an M x N result over K (Ap, Bp packed as above).
static void dlc_gemm(int64_t M, int64_t N, int64_t K, const float *restrict Ap,
        const float *restrict Bp, float *restrict C, const int64_t *restrict rowoff,
        const int64_t *restrict coloff, int nt) {
    int64_t mp = (M + DLC_MR - 1) / DLC_MR, np = (N + DLC_NR - 1) / DLC_NR;
    int64_t mblocks = (mp + 15) / 16;
    (void)nt;
    for (int64_t pc = 0; pc < K || (pc == 0 && K == 0); pc += DLC_KC) {
        int64_t kc = K - pc < DLC_KC ? K - pc : DLC_KC;
        int first = pc == 0;
        #pragma omp parallel for num_threads(nt) schedule(dynamic, 1) collapse(2) if(mp * np > 4)
        for (int64_t jb = 0; jb < (np + 3) / 4; jb++) {
            for (int64_t ib = 0; ib < mblocks; ib++) {
                float tile[DLC_MR * DLC_NR] __attribute__((aligned(64)));
                for (int64_t jp = jb * 4; jp < np && jp < jb * 4 + 4; jp++) {
                    const float *b = Bp + jp * K * DLC_NR + pc * DLC_NR;
                    for (int64_t ip = ib * 16; ip < mp && ip < ib * 16 + 16; ip++) {
                        const float *a = Ap + ip * K * DLC_MR + pc * DLC_MR;
                        int64_t i0 = ip * DLC_MR, j0 = jp * DLC_NR;
                        int64_t mr = M - i0 < DLC_MR ? M - i0 : DLC_MR;
                        int64_t nr = N - j0 < DLC_NR ? N - j0 : DLC_NR;
                        memset(tile, 0, sizeof tile);
                        if (!first)
                            for (int64_t r = 0; r < mr; r++)
                                for (int64_t q = 0; q < nr; q++)
                                    tile[r * DLC_NR + q] = C[rowoff[i0 + r] + coloff[j0 + q]];
                        dlc_micro(kc, a, b, tile);
                        for (int64_t r = 0; r < mr; r++) {
                            float *crow = C + rowoff[i0 + r];
                            const int64_t *co = coloff + j0;
                            const float *t = tile + r * DLC_NR;
                            for (int64_t q = 0; q < nr; q++) crow[co[q]] = t[q];
                        }
                    }
                }
            }
        }
        if (K == 0) break;
    }
}
