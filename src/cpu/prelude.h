// dlc-egg native CPU backend: helpers every generated kernel uses (src/cpu/prelude.h).
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX__)
#include <immintrin.h>
#endif

// Vectorizable libm (glibc libmvec): declare the SIMD variants so that the loops over the
// innermost axis call expf/logf/... on whole vectors (linked with -lmvec, -fno-math-errno).
#if defined(DLC_LIBMVEC) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DLC_SIMD_FN __attribute__((simd("notinbranch")))
float expf(float) DLC_SIMD_FN;
float logf(float) DLC_SIMD_FN;
float tanhf(float) DLC_SIMD_FN;
float erff(float) DLC_SIMD_FN;
float exp2f(float) DLC_SIMD_FN;
float log2f(float) DLC_SIMD_FN;
float powf(float, float) DLC_SIMD_FN;
double exp(double) DLC_SIMD_FN;
double log(double) DLC_SIMD_FN;
double tanh(double) DLC_SIMD_FN;
double erf(double) DLC_SIMD_FN;
double exp2(double) DLC_SIMD_FN;
double log2(double) DLC_SIMD_FN;
double pow(double, double) DLC_SIMD_FN;
#endif

#define DLC_INLINE static inline __attribute__((always_inline))
DLC_INLINE float dlc_inf(void) { return __builtin_inff(); }
DLC_INLINE float dlc_nan(void) { return __builtin_nanf(""); }

// Integer index helpers (floor division rounds toward -inf, as the reference).
DLC_INLINE int64_t dlc_floordiv(int64_t a, int64_t c) { return a >= 0 ? a / c : -((-a + c - 1) / c); }
DLC_INLINE int64_t dlc_imin(int64_t a, int64_t b) { return a < b ? a : b; }
DLC_INLINE int64_t dlc_imax(int64_t a, int64_t b) { return a > b ? a : b; }

// i32 arithmetic wraps, as Tiny's i32 ops do.
DLC_INLINE int32_t dlc_iadd(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
DLC_INLINE int32_t dlc_isub(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }
DLC_INLINE int32_t dlc_imul(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }
DLC_INLINE int32_t dlc_idiv(int32_t a, int32_t b) { return b == 0 ? 0 : (a == INT32_MIN && b == -1) ? a : a / b; }
DLC_INLINE int32_t dlc_ineg(int32_t a) { return (int32_t)(0u - (uint32_t)a); }
// A real value to i32 as the reference's wrap_i32: NaN -> 0, truncate, wrap modulo 2^32.
DLC_INLINE int32_t dlc_wrap_i32(double x) {
    if (x != x) return 0;
    double t = trunc(x);
    if (t >= -2147483648.0 && t <= 2147483647.0) return (int32_t)t;
    if (fabs(t) < 9.0e18) return (int32_t)(uint32_t)(uint64_t)(int64_t)t;
    return 0;
}
DLC_INLINE int32_t dlc_bool(double x) { return x != 0.0; }

// x / s for an s invariant in the vector loop (a row's sum): times the reciprocal, hoisted out
// of the loop by the compiler (within 1.5 ulp of the quotient; a subnormal s below 2^-128, whose
// reciprocal overflows, gives inf), or the exact quotient under DLC_EXACT_DIV (`DLC_CPU_FMA=0`).
#ifdef DLC_EXACT_DIV
#define DLC_DIV_INV(x, s) ((x) / (s))
#else
#define DLC_DIV_INV(x, s) ((x) * (1.0f / (s)))
#endif

// NaN-propagating max / min (the reference's `nan_or`) as reduction steps: the spelling GCC
// vectorizes as a max / min reduction.
DLC_INLINE float dlc_fmax_acc(float a, float b) { return (a > b || a != a) ? a : b; }
DLC_INLINE float dlc_fmin_acc(float a, float b) { return (a < b || a != a) ? a : b; }
// The same values as elementwise ops, branch-free: the larger (smaller) by a plain compare, then
// `a` where it is NaN by a bit select. In scalar loops (the remainder iterations of a vector
// loop, a strided window's borders) GCC turned the spelling above into two data-dependent
// branches: relu6 `fmin(fmax(x, 0), 6)` over random data took 5–11 ns per element, 2–5 this
// way; vectorized, 0.17 against 0.11 (GCC 12, AVX-512). Bit-identical, ±0 and NaN included.
DLC_INLINE float dlc_f_bits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
DLC_INLINE uint32_t dlc_bits_f(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
DLC_INLINE float dlc_nan_or(float a, float m) {
    const uint32_t k = -(uint32_t)(a != a);
    return dlc_f_bits((dlc_bits_f(a) & k) | (dlc_bits_f(m) & ~k));
}
DLC_INLINE float dlc_fmax(float a, float b) { return dlc_nan_or(a, a > b ? a : b); }
DLC_INLINE float dlc_fmin(float a, float b) { return dlc_nan_or(a, a < b ? a : b); }
DLC_INLINE int32_t dlc_smax(int32_t a, int32_t b) { return a > b ? a : b; }
DLC_INLINE int32_t dlc_smin(int32_t a, int32_t b) { return a < b ? a : b; }
DLC_INLINE float dlc_relu(float x) { return dlc_nan_or(x, x > 0.0f ? x : 0.0f); }
DLC_INLINE float dlc_rsqrt(float x) { return 1.0f / sqrtf(x); }

// fp32 transcendental functions (docs/numerics.md, "The native CPU backend"): branch-free so
// that `omp simd` loops vectorize them, with explicit FMAs (one instruction with -march=native;
// not subject to -ffp-contract). Max errors against the correctly rounded value, measured over
// every 97th fp32 bit pattern: see docs/numerics.md. Infinities and NaN behave as libm's.
// p·2^a for an integer a in [-151, 129]: two normal factors applied one after the other
// (gradual underflow, overflow to inf, no intermediate overflow for p in [0.5, 2]). Any other a
// (the bits of a NaN's shifter sum) gives some finite factor: a NaN p stays NaN.
DLC_INLINE float dlc_ldexpf(float p, int32_t a) {
    int32_t h = a >> 1, l = a - h;
    return p * dlc_f_bits((uint32_t)(h + 127) << 23) * dlc_f_bits((uint32_t)(l + 127) << 23);
}
// e^r for r in [-ln2/2, ln2/2] (Cephes expf polynomial).
DLC_INLINE float dlc_exp_poly(float r) {
    float p = 1.9875691500e-4f;
    p = __builtin_fmaf(p, r, 1.3981999507e-3f);
    p = __builtin_fmaf(p, r, 8.3334519073e-3f);
    p = __builtin_fmaf(p, r, 4.1665795894e-2f);
    p = __builtin_fmaf(p, r, 1.6666665459e-1f);
    p = __builtin_fmaf(p, r, 5.0000001201e-1f);
    return __builtin_fmaf(p, r * r, r) + 1.0f;
}
// x clamped to [lo, hi] (lo < 0 < hi) as two integer minima of its bits (vpminud, vpminsd):
// a float's bits order negative values by unsigned magnitude and non-negative ones as signed
// integers. GCC turns a float select into compares and blends (and specializes the code after
// it per branch); an integer minimum stays one instruction. A NaN x comes out as a bound.
DLC_INLINE float dlc_clampf(float x, float lo, float hi) {
    uint32_t b = dlc_bits_f(x), l = dlc_bits_f(lo);
    b = b > l ? l : b;
    int32_t sb = (int32_t)b, h = (int32_t)dlc_bits_f(hi);
    return dlc_f_bits((uint32_t)(sb > h ? h : sb));
}
// n = rint(v) for |v| < 2^22 by the 1.5·2^23 shifter t = v + 1.5·2^23 (ties to even, as rintf):
// n = t - 1.5·2^23, and t's low mantissa bits hold n as an integer (no float-to-int conversion).
#define DLC_SHIFTER 12582912.0f
#define DLC_SHIFTER_BITS 0x4B400000u
DLC_INLINE float dlc_expf(float x) {
    float c = dlc_clampf(x, -104.0f, 89.0f);
    float t = __builtin_fmaf(c, 1.44269504088896341f, DLC_SHIFTER), n = t - DLC_SHIFTER;
    float r = __builtin_fmaf(n, -0.693359375f, c);
    r = __builtin_fmaf(n, 2.12194440e-4f, r);
    float y = dlc_ldexpf(dlc_exp_poly(r), (int32_t)(dlc_bits_f(t) - DLC_SHIFTER_BITS));
    return x != x ? x : y;
}
DLC_INLINE float dlc_exp2f(float x) {
    float c = dlc_clampf(x, -151.0f, 129.0f);
    float t = c + DLC_SHIFTER, n = t - DLC_SHIFTER;
    float r = (c - n) * 0.693147180559945309f;
    float y = dlc_ldexpf(dlc_exp_poly(r), (int32_t)(dlc_bits_f(t) - DLC_SHIFTER_BITS));
    return x != x ? x : y;
}
DLC_INLINE float dlc_erff(float a) {
    float t = fabsf(a), s = a * a;
    // |a| > 0.927734375: 1 - e^(p(t))
    float r = __builtin_fmaf(-1.72853470e-5f, t, 3.83197126e-4f);
    float u = __builtin_fmaf(-3.88396438e-3f, t, 2.42546219e-2f);
    r = __builtin_fmaf(r, s, u);
    r = __builtin_fmaf(r, t, -1.06777877e-1f);
    r = __builtin_fmaf(r, t, -6.34846687e-1f);
    r = __builtin_fmaf(r, t, -1.28717512e-1f);
    r = __builtin_fmaf(r, t, -t);
    float big = copysignf(1.0f - dlc_expf(r), a);
    // |a| <= 0.927734375: a + a·q(a²)
    float q = -5.96761703e-4f;
    q = __builtin_fmaf(q, s, 4.99119423e-3f);
    q = __builtin_fmaf(q, s, -2.67681349e-2f);
    q = __builtin_fmaf(q, s, 1.12819925e-1f);
    q = __builtin_fmaf(q, s, -3.76125336e-1f);
    q = __builtin_fmaf(q, s, 1.28379166e-1f);
    float small = __builtin_fmaf(q, a, a);
    return t > 0.927734375f ? big : small;
}
DLC_INLINE float dlc_tanhf(float x) {
    float t = fabsf(x), z = x * x;
    float p = __builtin_fmaf(-5.70498872745e-3f, z, 2.06390887954e-2f);
    p = __builtin_fmaf(p, z, -5.37397155531e-2f);
    p = __builtin_fmaf(p, z, 1.33314422036e-1f);
    p = __builtin_fmaf(p, z, -3.33332819422e-1f);
    float small = __builtin_fmaf(p * z, x, x);
    float e = dlc_expf(2.0f * (t > 20.0f ? 20.0f : t));
    float big = copysignf(1.0f - 2.0f / (e + 1.0f), x);
    return t < 0.625f ? small : big;
}
// 1 / (1 + e^-x), as e^x / (1 + e^x) for x < 0 (no overflow of e^-x).
DLC_INLINE float dlc_sigmoidf(float x) {
    float e = dlc_expf(-fabsf(x)), s = 1.0f / (1.0f + e);
    return x >= 0.0f ? s : e * s;
}

// v[i] = dlc_expf(v[i]) / dlc_exp2f(v[i]) for i < n, in place: the emitter splits a strip's
// `omp simd` loop at a let that is one exponential (`src/cpu/emit_fuse.rs`), the compiler merges
// the pieces again (the strip buffer stays in registers). With AVX-512 the scaling p·2^n is one
// `vscalefps` (single rounding: the same value as dlc_ldexpf's two exact-or-once-rounded
// products) and the clamp two NaN-propagating `vmaxps`/`vminps` (no final NaN select): the
// same operations as the scalar functions otherwise, so the results are bit-identical to them
// (checked over all 2^32 inputs, bench/cpu/expf_check.c); ~18 instead of ~32 vector
// instructions per 16 elements. Elsewhere: the scalar functions in an `omp simd` loop.
#if defined(__AVX512F__)
DLC_INLINE __m512 dlc_exp_poly_v16(__m512 r) {
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    return _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
}
// x clamped to [lo, hi]; a NaN x stays NaN (vmaxps / vminps return their second operand then).
DLC_INLINE __m512 dlc_clamp_v16(__m512 x, float lo, float hi) {
    return _mm512_min_ps(_mm512_set1_ps(hi), _mm512_max_ps(_mm512_set1_ps(lo), x));
}
DLC_INLINE __m512 dlc_expf_v16(__m512 x) {
    __m512 c = dlc_clamp_v16(x, -104.0f, 89.0f), s = _mm512_set1_ps(DLC_SHIFTER);
    __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(c, _mm512_set1_ps(1.44269504088896341f), s), s);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), c);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
    return _mm512_scalef_ps(dlc_exp_poly_v16(r), n);
}
DLC_INLINE __m512 dlc_exp2f_v16(__m512 x) {
    __m512 c = dlc_clamp_v16(x, -151.0f, 129.0f), s = _mm512_set1_ps(DLC_SHIFTER);
    __m512 n = _mm512_sub_ps(_mm512_add_ps(c, s), s);
    __m512 r = _mm512_mul_ps(_mm512_sub_ps(c, n), _mm512_set1_ps(0.693147180559945309f));
    return _mm512_scalef_ps(dlc_exp_poly_v16(r), n);
}
#endif
// dlc_expf_strip / dlc_exp2f_strip: `scalar` over v[0..n) in place, by 16-lane `vector` steps
// where AVX-512 is there.
#if defined(__AVX512F__)
#define DLC_STRIP_V16(vector) \
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(v + i, vector(_mm512_loadu_ps(v + i)));
#else
#define DLC_STRIP_V16(vector)
#endif
#define DLC_STRIP(name, vector, scalar)                          \
    DLC_INLINE void name(float *restrict v, int64_t n) {         \
        int64_t i = 0;                                           \
        DLC_STRIP_V16(vector)                                    \
        _Pragma("omp simd")                                      \
        for (int64_t j = i; j < n; j++) v[j] = scalar(v[j]);     \
    }
DLC_STRIP(dlc_expf_strip, dlc_expf_v16, dlc_expf)
DLC_STRIP(dlc_exp2f_strip, dlc_exp2f_v16, dlc_exp2f)

// fp16 / bf16 storage: converted to fp32 on load, rounded to nearest even on store.
#if defined(__FLT16_MAX__) && !defined(DLC_PORTABLE_HALF)
typedef _Float16 dlc_f16;
DLC_INLINE float dlc_ld_f16(dlc_f16 h) { return (float)h; }
DLC_INLINE dlc_f16 dlc_st_f16(float f) { return (dlc_f16)f; }
#else
typedef uint16_t dlc_f16;
DLC_INLINE float dlc_ld_f16(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, bits;
    if (e == 0x1f) bits = s | 0x7f800000u | (m << 13);
    else if (e != 0) bits = s | ((e + 112u) << 23) | (m << 13);
    else if (m == 0) bits = s;
    else { float v = (float)m * 5.9604644775390625e-8f; memcpy(&bits, &v, 4); bits |= s; }
    float f; memcpy(&f, &bits, 4); return f;
}
DLC_INLINE uint16_t dlc_st_f16(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t s = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00u);
    if (a < 0x38800000u) { // subnormal or zero: round |f| * 2^24 to an integer, ties to even
        float v; memcpy(&v, &a, 4); v = v * 16777216.0f;
        return (uint16_t)(s | (uint32_t)nearbyintf(v));
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u;
    return (uint16_t)(s | (r >> 13));
}
#endif
typedef uint16_t dlc_bf16;
DLC_INLINE float dlc_ld_bf16(uint16_t h) { uint32_t b = (uint32_t)h << 16; float f; memcpy(&f, &b, 4); return f; }
DLC_INLINE uint16_t dlc_st_bf16(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
DLC_INLINE float dlc_round_f16(float f) { return dlc_ld_f16(dlc_st_f16(f)); }
DLC_INLINE float dlc_round_bf16(float f) { return dlc_ld_bf16(dlc_st_bf16(f)); }

DLC_INLINE void *dlc_alloc(int64_t bytes) {
    void *p = NULL;
    size_t n = (size_t)(bytes > 0 ? bytes : 1);
    n = (n + 63) & ~(size_t)63;
    return posix_memalign(&p, 64, n) == 0 ? p : NULL;
}

// Outputs larger than this many bytes (half the development VM's 32 MB L3) are written with
// non-temporal stores: they go to memory anyway, and a streaming store does not first read the
// line it overwrites (one third less memory traffic for a read-once, write-once kernel).
// `DLC_CPU_STREAM_MIN_BYTES=N` overrides it (build.rs, for A/B runs).
#ifndef DLC_STREAM_MIN_BYTES
#define DLC_STREAM_MIN_BYTES (16ll << 20)
#endif
// Copies n floats of a row staged in the thread's (L1-hot) buffer src to dst: non-temporal
// vector stores from the first aligned address when `stream`, then a store fence (the stores are
// visible before the barrier that ends the loop); else memcpy.
static inline void dlc_put_row(float *restrict dst, const float *restrict src, int64_t n,
        int stream) {
#if defined(__AVX512F__) || defined(__AVX__)
    if (stream) {
#if defined(__AVX512F__)
        const int64_t w = 16;
#else
        const int64_t w = 8;
#endif
        int64_t i = 0;
        while (i < n && ((uintptr_t)(dst + i) & (uintptr_t)(4 * w - 1))) { dst[i] = src[i]; i++; }
        for (; i + w <= n; i += w) {
#if defined(__AVX512F__)
            _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
#else
            _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
#endif
        }
        for (; i < n; i++) dst[i] = src[i];
        _mm_sfence();
        return;
    }
#endif
    (void)stream;
    memcpy(dst, src, (size_t)n * sizeof(float));
}

// Error flags set from inside parallel loops (1: gather index out of range, 2: out of memory).
DLC_INLINE void dlc_err_flag(int *e, int v) { __atomic_store_n(e, v, __ATOMIC_RELAXED); }
// A data index as the reference truncates it: NaN -> 0, saturating at the i64 range.
DLC_INLINE int64_t dlc_trunc_i64(double x) {
    if (x != x) return 0;
    if (x >= 9.2233720368547758e18) return INT64_MAX;
    if (x <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)trunc(x);
}
DLC_INLINE int64_t dlc_sat_add(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}
