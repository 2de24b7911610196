// Uses every function of the dlc_kernel.cuh API once, so that the same source is compiled by g++
// against the emulation header (tests/codegen_emu.rs) and by NVRTC against the device header.
// `x` holds 32 floats, `h`/`b` 64 fp16/bf16 values, `out` 64 floats, `bits` 64 words.
#include "dlc_kernel.cuh"

__device__ __forceinline__ float api_scalar(float x, float y) {
  float s = 0.0f;
  s += dlc_f32(dlc_cvt<__half>(x)) + dlc_f32(dlc_cvt<__nv_bfloat16>(x)) + dlc_f32(dlc_cvt<float>(x));
  s += dlc_f32(dlc_cvt<int>(x)) + dlc_f32(dlc_cvt<bool>(x));
  s += dlc_round_f16(x) + dlc_round_bf16(x);
  s += dlc_exp(x) + dlc_exp2(x) + dlc_exp2_approx(x) + dlc_log(dlc_abs(x) + 1.0f) + dlc_log2(dlc_abs(x) + 1.0f);
  s += dlc_sqrt(dlc_abs(x)) + dlc_rsqrt(dlc_abs(x) + 1.0f) + dlc_recip(x + 100.0f);
  s += dlc_erf(x) + dlc_tanh(x) + dlc_sigmoid(x) + dlc_pow(dlc_abs(x), y);
  s += dlc_max(x, y) + dlc_min(x, y) + dlc_relu(x);
  s += (dlc_inf() > 0.0f ? 1.0f : 0.0f) + (dlc_nan() != dlc_nan() ? 1.0f : 0.0f);
  return s;
}

__global__ void __launch_bounds__(32)
    dlc_api_all(const float* __restrict__ x, const __half* __restrict__ h,
                const __nv_bfloat16* __restrict__ b, float* __restrict__ out,
                int* __restrict__ bits, int n) {
  __shared__ __align__(16) __half sh[64];
  __shared__ __align__(16) __nv_bfloat16 sb[64];
  DLC_DYN_SMEM(dyn);
  const unsigned lane = dlc_lane();
  const unsigned i = threadIdx.x + blockIdx.x * blockDim.x;
  const float xv = i < (unsigned)n ? x[i] : 0.0f;
  out[lane] = api_scalar(xv, 0.5f) + (float)(dlc_warp() + gridDim.x + blockDim.y - 2u + blockIdx.y +
                                             threadIdx.y + threadIdx.z + blockIdx.z + gridDim.y +
                                             gridDim.z + blockDim.z - 3u);
  const float red = dlc_warp_sum(xv) + dlc_warp_max(xv) + dlc_warp_min(xv) +
                    dlc_shfl_xor(xv, 1) + dlc_shfl(xv, 0);
  out[32 + lane] = red;
  // 64 halves (128 bytes) per tile: 8 lanes copy 16 bytes each; 4- and 8-byte copies too.
  if (lane < 8) dlc_cp_async_16(sh + lane * 8, h + lane * 8, 16);
  dlc_cp_async_commit();
  if (lane < 8) dlc_cp_async_8(sb + lane * 8, b + lane * 8, 8);
  if (lane < 8) dlc_cp_async_8(sb + lane * 8 + 4, b + lane * 8 + 4, 8);
  if (lane < 16) dlc_cp_async_4(dyn + lane * 4, h + lane * 2, lane < 15 ? 4 : 2);
  dlc_cp_async_commit();
  dlc_cp_async_wait<1>();
  dlc_cp_async_wait<0>();
  __syncthreads();
  unsigned ra[4], rb[2], r1[1], r2[2], r4[4];
  const __half* row = sh + (lane % 8) * 8;
  dlc_ldmatrix_x4(ra, row);
  dlc_ldmatrix_x2(rb, row);
  dlc_ldmatrix_x1(r1, row);
  dlc_ldmatrix_x1_trans(r1, sb + (lane % 8) * 8);
  dlc_ldmatrix_x2_trans(r2, row);
  dlc_ldmatrix_x4_trans(r4, sb + (lane % 8) * 8);
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  dlc_mma_m16n8k16_f16(c, ra, rb, c);
  const unsigned bf[4] = {r4[0], r4[1], r4[2], r4[3]};
  dlc_mma_m16n8k16_bf16(c, bf, r2, c);
  bits[lane] = (int)(dlc_pack_half2(c[0], c[1]) ^ dlc_pack_bf162(c[2], c[3]) ^ r1[0]);
  bits[32 + lane] = (int)(dyn[lane] | (dyn[lane + 32] << 8));
}
