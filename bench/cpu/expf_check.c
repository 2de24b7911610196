// The prelude's fp32 transcendental functions (src/cpu/prelude.h) checked on this machine:
// 1. the AVX-512 strip functions (dlc_expf_strip / dlc_exp2f_strip) against the scalar ones,
//    bit for bit over all 2^32 fp32 inputs (NaN against NaN);
// 2. the max error of each function in ulp of the correctly rounded result (glibc's double
//    function rounded once), over every 97th fp32 bit pattern plus ±0, ±inf and NaN — the table
//    of docs/numerics.md ("The native CPU backend").
// cc -O2 -march=native -fopenmp -I src/cpu bench/cpu/expf_check.c -lm -o /tmp/expf_check && /tmp/expf_check
#include "prelude.h"
#include <stdio.h>

static double ulp_of(double ref) {
    float f = (float)ref;
    if (f == 0.0f || !isfinite(f)) f = fabsf(f) == 0.0f ? 1e-45f : 3.4028235e38f;
    int e;
    frexpf(f, &e);
    double u = ldexp(1.0, e - 24);
    return u < ldexp(1.0, -149) ? ldexp(1.0, -149) : u;
}

static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

typedef float (*ffn)(float);
typedef double (*dfn)(double);
static float f_exp(float x) { return dlc_expf(x); }
static float f_exp2(float x) { return dlc_exp2f(x); }
static float f_erf(float x) { return dlc_erff(x); }
static float f_tanh(float x) { return dlc_tanhf(x); }
static float f_sig(float x) { return dlc_sigmoidf(x); }

static int same(float a, float b) {
    return (a != a && b != b) || dlc_bits_f(a) == dlc_bits_f(b);
}

static long strip_mismatches(void (*strip)(float *restrict, int64_t), ffn scalar) {
    static float v[4096];
    long bad = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += 4096) {
        for (int i = 0; i < 4096; i++) v[i] = dlc_f_bits((uint32_t)(base + i));
        strip(v, 4096);
        for (int i = 0; i < 4096; i++) {
            float x = dlc_f_bits((uint32_t)(base + i));
            if (!same(v[i], scalar(x)) && bad++ < 5)
                printf("  mismatch at %a: %a vs %a\n", x, v[i], scalar(x));
        }
    }
    return bad;
}

static void max_err(const char *name, ffn f, dfn ref) {
    double worst = 0, at = 0;
    const float special[] = {0.0f, -0.0f, dlc_inf(), -dlc_inf(), dlc_nan()};
    for (uint64_t b = 0; b < (1ull << 32) + 5 * 97; b += 97) {
        float x = b < (1ull << 32) ? dlc_f_bits((uint32_t)b) : special[(b - (1ull << 32)) / 97];
        double r = ref((double)x);
        float y = f(x);
        if (x != x || r != r) {
            if (!(y != y) && printf("  %s: NaN input gives %a\n", name, y)) worst = INFINITY;
            continue;
        }
        if (isinf((float)r) || isinf(y)) {
            if ((float)r != y && printf("  %s(%a) = %a, expected %a\n", name, x, y, (float)r))
                worst = INFINITY;
            continue;
        }
        double e = fabs((double)y - r) / ulp_of(r);
        if (e > worst) worst = e, at = x;
    }
    printf("| `%s` | %.3f | %.4g |\n", name, worst, at);
}

int main(void) {
    long a = strip_mismatches(dlc_expf_strip, f_exp), b = strip_mismatches(dlc_exp2f_strip, f_exp2);
#if defined(__AVX512F__)
    const char *path = "AVX-512 vscalefps";
#else
    const char *path = "scalar (no AVX-512)";
#endif
    printf("strip functions (%s) vs scalar over 2^32 inputs: exp %ld, exp2 %ld mismatches\n", path, a, b);
    printf("| function | max error (ulp) | at |\n| --- | ---: | --- |\n");
    max_err("exp", f_exp, exp);
    max_err("exp2", f_exp2, exp2);
    max_err("erf", f_erf, erf);
    max_err("tanh", f_tanh, tanh);
    max_err("sigmoid", f_sig, sigmoid_d);
    return a || b;
}
