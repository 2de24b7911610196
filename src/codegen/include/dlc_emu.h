// dlc_emu.h: the host (g++ -std=c++17, x86-64 or any POSIX target) emulation of the API of
// dlc_kernel.cuh, so that an emitted kernels.cu compiles unchanged and its kernels' logic runs on
// the CPU. The host harness provides this file under the name "dlc_kernel.cuh".
//
// Execution model (see docs/gpu-codegen.md, "CPU execution of kernel logic"):
// - dlc_emu::launch runs the blocks of a grid one after another (x fastest); the threads of a
//   block are cooperative fibers on one OS thread, each with its own stack, scheduled round-robin
//   in linear thread order. A fiber runs until it blocks at __syncthreads() or a warp collective,
//   or returns. Everything is deterministic.
// - __syncthreads() releases when every thread of the block arrived at the same barrier (same
//   source line); warp collectives (shuffles, reductions, ldmatrix, mma) complete when the 32
//   lanes of the warp arrived at the same collective (same kind, same line). Divergence (a thread
//   exits while others wait, or threads wait at different barriers) aborts with a message on
//   stderr naming the barrier, block and thread, exit code 86.
// - Shared memory (the dynamic buffer and the static __shared__ variables it can place, see
//   below) is filled with 0xFF bytes (NaN for fp16/bf16/fp32) before every block. cp.async
//   copies read global memory when issued but are written to shared memory only by the issuing
//   thread's dlc_cp_async_wait<N>() for all but its newest N committed groups (or when the thread
//   exits), so reading a stage before waiting sees stale data. ldmatrix rejects rows with a copy
//   still in flight, and rows another warp copied with cp.async that no __syncthreads() has
//   published since the copy landed. Global buffers registered with dlc_emu::register_global
//   bound cp.async sources.
#pragma once

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define DLC_EMU_ASAN 1
#endif

#if defined(__x86_64__) && !defined(DLC_EMU_UCONTEXT)
#define DLC_EMU_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

// ---------------------------------------------------------------------------------------------
// CUDA keywords
// ---------------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
// Blocks never overlap, so a __shared__ variable is static storage. Built with -fno-weak (as the
// host runner does) and without ASan, every such variable outside a template lives in the section
// dlc_emu_smem, which the launcher poisons before each block and which ldmatrix and cp.async know
// as shared memory. (Without -fno-weak, GCC rejects that section for statics of inline functions;
// it ignores section attributes inside templates; and it leaves variables in named sections out of
// ASan's redzones. In those cases __shared__ variables are plain statics: not poisoned, and their
// addresses count as shared memory when they are neither global buffers nor fiber stacks.)
// The header is meant for exactly one translation unit (main.cpp includes kernels.cu).
#if defined(DLC_EMU_ASAN) || __GXX_WEAK__
#define __shared__ static
#else
#define DLC_EMU_SMEM_SECTION 1
#define __shared__ static __attribute__((section("dlc_emu_smem")))
#endif
#define DLC_DYN_SMEM(name) unsigned char* name = ::dlc_emu::detail::dyn_smem()

// ---------------------------------------------------------------------------------------------
// Element and index types
// ---------------------------------------------------------------------------------------------
struct __half {
  unsigned short __x;
};
struct __nv_bfloat16 {
  unsigned short __x;
};
struct __align__(16) uint4 {
  unsigned x, y, z, w;
};
struct __align__(8) uint2 {
  unsigned x, y;
};
struct __align__(16) float4 {
  float x, y, z, w;
};
struct __align__(8) float2 {
  float x, y;
};
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
static_assert(sizeof(__half) == 2 && sizeof(__nv_bfloat16) == 2, "16-bit element types");
static_assert(alignof(uint4) == 16 && alignof(float4) == 16 && alignof(uint2) == 8, "vectors");

namespace dlc_emu {
namespace detail {
static uint3 g_thread_idx{0, 0, 0};
static uint3 g_block_idx{0, 0, 0};
static dim3 g_block_dim;
static dim3 g_grid_dim;
}  // namespace detail
}  // namespace dlc_emu

static const uint3& threadIdx = dlc_emu::detail::g_thread_idx;
static const uint3& blockIdx = dlc_emu::detail::g_block_idx;
static const dim3& blockDim = dlc_emu::detail::g_block_dim;
static const dim3& gridDim = dlc_emu::detail::g_grid_dim;

// ---------------------------------------------------------------------------------------------
// Conversions (bit-exact with the device: round to nearest even)
// ---------------------------------------------------------------------------------------------
namespace dlc_emu {
namespace detail {
inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned short f32_to_f16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // NaN
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax >= 0x38800000u) {                                          // normal half (>= 2^-14)
    const uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);
    return (unsigned short)(sign | ((r - 0x38000000u) >> 13));
  }
  // Subnormal half: a multiple of 2^-24; scaling by 2^24 is exact, nearbyint rounds to even.
  const float q = std::nearbyint(std::fabs(f) * 16777216.0f);
  return (unsigned short)(sign | (uint32_t)q);
}
inline float f16_to_f32(unsigned short h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0) {
    const float v = (float)m * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}
inline unsigned short f32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);  // NaN
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float bf16_to_f32(unsigned short b) { return bits_f32((uint32_t)b << 16); }
}  // namespace detail
}  // namespace dlc_emu

inline float dlc_f32(__half h) { return dlc_emu::detail::f16_to_f32(h.__x); }
inline float dlc_f32(__nv_bfloat16 h) { return dlc_emu::detail::bf16_to_f32(h.__x); }
inline float dlc_f32(float x) { return x; }
inline float dlc_f32(int x) { return (float)x; }
inline float dlc_f32(bool x) { return x ? 1.0f : 0.0f; }

template <class T>
T dlc_cvt(float x);
template <>
inline __half dlc_cvt<__half>(float x) {
  return __half{dlc_emu::detail::f32_to_f16(x)};
}
template <>
inline __nv_bfloat16 dlc_cvt<__nv_bfloat16>(float x) {
  return __nv_bfloat16{dlc_emu::detail::f32_to_bf16(x)};
}
template <>
inline float dlc_cvt<float>(float x) {
  return x;
}
// Truncation toward zero; NaN gives 0; out-of-range values wrap modulo 2^32 while |x| < 9e18,
// beyond that 0 (the reference evaluator's wrap_i32).
template <>
inline int dlc_cvt<int>(float x) {
  if (x != x) return 0;
  const float t = std::trunc(x);
  if (!((double)std::fabs(t) < 9.0e18)) return 0;
  return (int)(unsigned)(unsigned long long)(long long)t;
}
template <>
inline bool dlc_cvt<bool>(float x) {
  return x != 0.0f;
}

inline float dlc_round_f16(float x) {
  return dlc_emu::detail::f16_to_f32(dlc_emu::detail::f32_to_f16(x));
}
inline float dlc_round_bf16(float x) {
  return dlc_emu::detail::bf16_to_f32(dlc_emu::detail::f32_to_bf16(x));
}
inline unsigned dlc_bits(__half h) { return h.__x; }
inline unsigned dlc_bits(__nv_bfloat16 h) { return h.__x; }
inline unsigned dlc_pack_half2(float lo, float hi) {
  return (unsigned)dlc_emu::detail::f32_to_f16(lo) |
         ((unsigned)dlc_emu::detail::f32_to_f16(hi) << 16);
}
inline unsigned dlc_pack_bf162(float lo, float hi) {
  return (unsigned)dlc_emu::detail::f32_to_bf16(lo) |
         ((unsigned)dlc_emu::detail::f32_to_bf16(hi) << 16);
}

// ---------------------------------------------------------------------------------------------
// Math on float (glibc's libm here, libdevice's precise functions on the device)
// ---------------------------------------------------------------------------------------------
inline float dlc_exp(float x) { return std::exp(x); }
inline float dlc_exp2(float x) { return std::exp2(x); }
// The device's `ex2.approx.ftz.f32`: 2^x with subnormal results flushed to 0 (NaN stays NaN).
inline float dlc_exp2_approx(float x) {
  const float y = std::exp2(x);
  return y < 1.17549435e-38f ? 0.0f : y;
}
inline float dlc_log(float x) { return std::log(x); }
inline float dlc_log2(float x) { return std::log2(x); }
inline float dlc_sqrt(float x) { return std::sqrt(x); }
inline float dlc_rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float dlc_recip(float x) { return 1.0f / x; }
inline float dlc_erf(float x) { return std::erf(x); }
inline float dlc_tanh(float x) { return std::tanh(x); }
inline float dlc_sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float dlc_abs(float x) { return std::fabs(x); }
inline float dlc_pow(float x, float y) { return std::pow(x, y); }
inline float dlc_nan() { return std::numeric_limits<float>::quiet_NaN(); }
inline float dlc_inf() { return std::numeric_limits<float>::infinity(); }
// NaN-propagating, as the reference evaluator: NaN if either is NaN, else a >= b ? a : b.
inline float dlc_max(float a, float b) { return (a != a || b != b) ? dlc_nan() : (a >= b ? a : b); }
inline float dlc_min(float a, float b) { return (a != a || b != b) ? dlc_nan() : (a <= b ? a : b); }
// x < 0 ? 0 : x: NaN stays NaN, -0 stays -0 (the reference evaluator's relu).
inline float dlc_relu(float x) { return x < 0.0f ? 0.0f : x; }

// Grid-wide memory ordering and atomics (split-K's partial tiles). Blocks run one after
// another here, so every write of an earlier block is visible: the fence orders nothing, the
// atomic is a plain read-modify-write and the L2 load a plain load.
inline void dlc_fence() {}
inline int dlc_atomic_add(int* p, int v) {
  const int old = *p;
  *p = old + v;
  return old;
}
inline float dlc_ld_cg(const float* p) { return *p; }

// Continued in dlc_emu_runtime.h and dlc_emu_warp.h: EMU_HEADER concatenates the three files.
