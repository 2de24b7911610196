// dlc_kernel.cuh: the device helpers every emitted kernels.cu includes. Compiled by NVRTC (no
// host standard library) and nvcc for sm_80 and sm_90a. Its API is mirrored on the CPU by
// dlc_emu.h (docs/gpu-codegen.md, "CPU execution of kernel logic"); keep the two in step.
//
// Numerics: fp32 is the compute type; conversions round to nearest even; the math functions are
// libdevice's precise ones (do not compile with --use_fast_math); dlc_max/dlc_min/dlc_relu follow
// the reference evaluator (NaN-propagating), not fmaxf/fminf.
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "dlc_kernel.cuh needs sm_80 or newer (cp.async, ldmatrix, bf16 mma.sync)"
#endif

// `unsigned char* name`: the block's dynamic shared memory, 16-byte aligned.
#define DLC_DYN_SMEM(name)                                          \
  extern __shared__ __align__(16) unsigned char dlc_dyn_smem_[]; \
  unsigned char* name = dlc_dyn_smem_

// ---- conversions -----------------------------------------------------------------------------
__device__ __forceinline__ float dlc_f32(__half h) { return __half2float(h); }
__device__ __forceinline__ float dlc_f32(__nv_bfloat16 h) { return __bfloat162float(h); }
__device__ __forceinline__ float dlc_f32(float x) { return x; }
__device__ __forceinline__ float dlc_f32(int x) { return (float)x; }
__device__ __forceinline__ float dlc_f32(bool x) { return x ? 1.0f : 0.0f; }

template <class T>
__device__ T dlc_cvt(float x);
template <>
__device__ __forceinline__ __half dlc_cvt<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 dlc_cvt<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ float dlc_cvt<float>(float x) {
  return x;
}
// Truncation toward zero; NaN gives 0; out-of-range values wrap modulo 2^32 while |x| < 9e18,
// beyond that 0 (the reference evaluator's wrap_i32), not cvt.rzi's saturation.
template <>
__device__ __forceinline__ int dlc_cvt<int>(float x) {
  if (x != x) return 0;
  const float t = truncf(x);
  if (!((double)fabsf(t) < 9.0e18)) return 0;
  return (int)(unsigned)(unsigned long long)(long long)t;
}
template <>
__device__ __forceinline__ bool dlc_cvt<bool>(float x) {
  return x != 0.0f;
}

__device__ __forceinline__ float dlc_round_f16(float x) {
  return __half2float(__float2half_rn(x));
}
__device__ __forceinline__ float dlc_round_bf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}
// Two 16-bit values in one register, `lo` in the low half (an mma fragment register).
// The raw bits of a 2-byte element (packed into pairs without a conversion).
__device__ __forceinline__ unsigned dlc_bits(__half h) { return __half_as_ushort(h); }
__device__ __forceinline__ unsigned dlc_bits(__nv_bfloat16 h) { return __bfloat16_as_ushort(h); }
__device__ __forceinline__ unsigned dlc_pack_half2(float lo, float hi) {
  return (unsigned)__half_as_ushort(__float2half_rn(lo)) |
         ((unsigned)__half_as_ushort(__float2half_rn(hi)) << 16);
}
__device__ __forceinline__ unsigned dlc_pack_bf162(float lo, float hi) {
  return (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
         ((unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}

// ---- math on float ---------------------------------------------------------------------------
// Grid-wide memory ordering and atomics (split-K: a CTA publishes its partial tile with
// dlc_fence() before counting it with dlc_atomic_add; the tile's last CTA reads the partials
// with dlc_ld_cg, from L2, past its own SM's L1).
__device__ __forceinline__ void dlc_fence() { __threadfence(); }
__device__ __forceinline__ int dlc_atomic_add(int* p, int v) { return atomicAdd(p, v); }
__device__ __forceinline__ float dlc_ld_cg(const float* p) { return __ldcg(p); }

__device__ __forceinline__ float dlc_exp(float x) { return expf(x); }
__device__ __forceinline__ float dlc_exp2(float x) { return exp2f(x); }
// 2^x on the SFU alone (`ex2.approx.ftz.f32`, one MUFU.EX2; about 2 ulp, subnormal results
// flushed to 0): the attention probabilities, rounded to fp16/bf16 for P*V anyway.
__device__ __forceinline__ float dlc_exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float dlc_log(float x) { return logf(x); }
__device__ __forceinline__ float dlc_log2(float x) { return log2f(x); }
__device__ __forceinline__ float dlc_sqrt(float x) { return sqrtf(x); }
// IEEE sqrt and division (not rsqrtf's 2 ulp), as the CPU emulation computes it.
__device__ __forceinline__ float dlc_rsqrt(float x) { return 1.0f / sqrtf(x); }
__device__ __forceinline__ float dlc_recip(float x) { return 1.0f / x; }
__device__ __forceinline__ float dlc_erf(float x) { return erff(x); }
__device__ __forceinline__ float dlc_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ float dlc_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float dlc_abs(float x) { return fabsf(x); }
__device__ __forceinline__ float dlc_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ float dlc_nan() { return __int_as_float(0x7fffffff); }
__device__ __forceinline__ float dlc_inf() { return __int_as_float(0x7f800000); }
// NaN if either is NaN, else a >= b ? a : b (the reference evaluator's max; not fmaxf).
__device__ __forceinline__ float dlc_max(float a, float b) {
  return (a != a || b != b) ? dlc_nan() : (a >= b ? a : b);
}
__device__ __forceinline__ float dlc_min(float a, float b) {
  return (a != a || b != b) ? dlc_nan() : (a <= b ? a : b);
}
// x < 0 ? 0 : x: NaN stays NaN, -0 stays -0.
__device__ __forceinline__ float dlc_relu(float x) { return x < 0.0f ? 0.0f : x; }

// ---- warp level (full warp) ------------------------------------------------------------------
__device__ __forceinline__ unsigned dlc_linear_tid() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ __forceinline__ unsigned dlc_lane() { return dlc_linear_tid() % 32u; }
__device__ __forceinline__ unsigned dlc_warp() { return dlc_linear_tid() / 32u; }
__device__ __forceinline__ float dlc_shfl_xor(float v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
__device__ __forceinline__ float dlc_shfl(float v, int src_lane) {
  return __shfl_sync(0xffffffffu, v, src_lane);
}
__device__ __forceinline__ int dlc_shfl_i32(int v, int src_lane) {
  return __shfl_sync(0xffffffffu, v, src_lane);
}
// Butterflies: every lane gets the result; the CPU emulation combines in the same order.
__device__ __forceinline__ float dlc_warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = v + __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ __forceinline__ float dlc_warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = dlc_max(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float dlc_warp_min(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = dlc_min(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// ---- tensor cores and async copies (sm_80+) --------------------------------------------------
// D = A * B + C, m16n8k16, A row-major, B "col" (k-major per column), fp32 accumulate; `d` may
// alias `c`. Fragment layouts: PTX ISA "Matrix Fragments for mma.m16n8k16 with floating point
// type" (g = lane >> 2, t = lane & 3; a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..],
// a[2] = A[g][2t+8..], a[3] = A[g+8][2t+8..]; b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g];
// c[0..1] = C[g][2t..2t+1], c[2..3] = C[g+8][2t..2t+1]).
__device__ __forceinline__ void dlc_mma_m16n8k16_f16(float d[4], const unsigned a[4],
                                                     const unsigned b[2], const float c[4]) {
#if defined(__CUDA_ARCH__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#endif
}
__device__ __forceinline__ void dlc_mma_m16n8k16_bf16(float d[4], const unsigned a[4],
                                                      const unsigned b[2], const float c[4]) {
#if defined(__CUDA_ARCH__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#endif
}

__device__ __forceinline__ unsigned dlc_smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

// ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: lane 8m+i passes the address of row i
// of matrix m (16 bytes, 16-byte aligned, shared memory); lanes past the matrices used (x1: 8,
// x2: 16) pass any address, ignored. Register m of lane (g = lane >> 2, t = lane & 3) holds
// M_m[g][2t..2t+1], or with .trans M_m[2t][g] (low half) and M_m[2t+1][g] (high half).
// The "memory" clobbers keep shared-memory stores before these loads.
__device__ __forceinline__ void dlc_ldmatrix_x1(unsigned r[1], const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(dlc_smem_addr(p))
               : "memory");
#endif
}
__device__ __forceinline__ void dlc_ldmatrix_x2(unsigned r[2], const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(dlc_smem_addr(p))
               : "memory");
#endif
}
__device__ __forceinline__ void dlc_ldmatrix_x4(unsigned r[4], const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(dlc_smem_addr(p))
               : "memory");
#endif
}
__device__ __forceinline__ void dlc_ldmatrix_x1_trans(unsigned r[1], const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(dlc_smem_addr(p))
               : "memory");
#endif
}
__device__ __forceinline__ void dlc_ldmatrix_x2_trans(unsigned r[2], const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(dlc_smem_addr(p))
               : "memory");
#endif
}
__device__ __forceinline__ void dlc_ldmatrix_x4_trans(unsigned r[4], const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(dlc_smem_addr(p))
               : "memory");
#endif
}

// cp.async: copies src_bytes (0..size) from global memory and zero-fills the rest of the `size`
// bytes at `smem` (src_bytes == 0 reads nothing; pass a valid pointer anyway, e.g. the buffer's
// base). Both addresses aligned to `size`. 16 bytes bypass L1 (.cg), 4 and 8 bytes use .ca.
__device__ __forceinline__ void dlc_cp_async_16(void* smem, const void* gmem, int src_bytes) {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dlc_smem_addr(smem)),
               "l"(gmem), "r"(src_bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void dlc_cp_async_8(void* smem, const void* gmem, int src_bytes) {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dlc_smem_addr(smem)),
               "l"(gmem), "r"(src_bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void dlc_cp_async_4(void* smem, const void* gmem, int src_bytes) {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dlc_smem_addr(smem)),
               "l"(gmem), "r"(src_bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void dlc_cp_async_commit() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most N of this thread's committed groups are pending.
template <int N>
__device__ __forceinline__ void dlc_cp_async_wait() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// ---- vector global accesses ------------------------------------------------------------------
// One BYTES-wide (2, 4, 8 or 16) access of global memory, to or from a register array; the
// global address must be BYTES-aligned (templates emit these only where they prove it, and the
// CPU emulation checks it). The copy through a word keeps the register array free of any
// alignment requirement; nvcc turns it into register moves.
template <int BYTES>
struct dlc_word_;
template <>
struct dlc_word_<2> {
  typedef unsigned short type;
};
template <>
struct dlc_word_<4> {
  typedef unsigned type;
};
template <>
struct dlc_word_<8> {
  typedef uint2 type;
};
template <>
struct dlc_word_<16> {
  typedef uint4 type;
};
template <int BYTES>
__device__ __forceinline__ void dlc_ld_vec(void* regs, const void* gmem) {
  typedef typename dlc_word_<BYTES>::type W;
  const W w = *reinterpret_cast<const W*>(gmem);
  memcpy(regs, &w, BYTES);
}
template <int BYTES>
__device__ __forceinline__ void dlc_st_vec(void* gmem, const void* regs) {
  typedef typename dlc_word_<BYTES>::type W;
  W w;
  memcpy(&w, regs, BYTES);
  *reinterpret_cast<W*>(gmem) = w;
}
