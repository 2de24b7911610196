// Times one emitted kernel with one fp32 input and one fp32 output of N elements (softmax,
// LayerNorm without params, cumsum) outside dlc-egg: CPU-time (both threads' with 2) and wall
// minima over R calls after a warm-up call, and a weighted checksum of the output to compare
// variants bit for bit. The kernel file and its flags come from `dlc-egg optimize M --target
// cpu -o DIR` (manifest.json):
//   gcc -O3 -fopenmp -fno-math-errno -ffp-contract=fast -std=gnu11 -march=native \
//       -mprefer-vector-width=512 -DDLC_GEMM_WIDE -DKFILE='"DIR/kernels.c"' -DKFN=dlc_k0 \
//       -DKTAG='"name"' bench/cpu/harness.c -o h -lm
//   OMP_WAIT_POLICY=passive ./h THREADS CALLS N
#include <stdio.h>
#include <time.h>
#include KFILE
static double ms(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}
int main(int argc, char **argv) {
    if (argc < 4) return 2;
    int nt = atoi(argv[1]), calls = atoi(argv[2]);
    int64_t n = atoll(argv[3]), ep = 0;
    float *x = dlc_alloc(n * 4), *y = dlc_alloc(n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = (float)((i * 7919) % 1000) / 100.0f - 5.0f;
    void *b[3] = {x, y, &ep};
    KFN(b, NULL, nt);
    double bc = 1e30, bw = 1e30;
    for (int r = 0; r < calls; r++) {
        double c = ms(CLOCK_PROCESS_CPUTIME_ID), w = ms(CLOCK_MONOTONIC);
        KFN(b, NULL, nt);
        c = ms(CLOCK_PROCESS_CPUTIME_ID) - c;
        w = ms(CLOCK_MONOTONIC) - w;
        if (c < bc) bc = c;
        if (w < bw) bw = w;
    }
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += y[i] * (double)(i % 13 + 1);
    printf("%-14s threads %d: cpu %.3f ms, wall %.3f ms (minima of %d); checksum %.9g\n", KTAG,
           nt, bc, bw, calls, s);
    return 0;
}
