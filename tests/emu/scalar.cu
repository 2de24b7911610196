// Conversions and math, one element per thread: F[k * n + i] is float result k of X[i] (and
// Y[i] for the binary ones), I[k * n + i] integer result k.
#include "dlc_kernel.cuh"

__global__ void __launch_bounds__(64)
    scalar_ops(const float* __restrict__ X, const float* __restrict__ Y, float* __restrict__ F,
               int* __restrict__ I, int n) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const float x = X[i], y = Y[i];
  const float f[] = {
      dlc_round_f16(x), dlc_round_bf16(x), dlc_f32(dlc_cvt<__half>(x)),
      dlc_f32(dlc_cvt<__nv_bfloat16>(x)), dlc_max(x, y), dlc_min(x, y), dlc_relu(x),
      dlc_f32(dlc_cvt<bool>(x)), dlc_exp(x), dlc_exp2(x), dlc_log(x), dlc_log2(x), dlc_sqrt(x),
      dlc_rsqrt(x), dlc_recip(x), dlc_erf(x), dlc_tanh(x), dlc_sigmoid(x), dlc_abs(x),
      dlc_pow(x, y), dlc_f32(dlc_cvt<float>(x)), dlc_f32(dlc_cvt<int>(x)), dlc_f32(x > y),
      dlc_inf(), dlc_nan()};
  for (int k = 0; k < (int)(sizeof f / sizeof f[0]); ++k) F[k * n + i] = f[k];
  I[i] = dlc_cvt<int>(x);
  I[n + i] = (int)dlc_pack_half2(x, y);
  I[2 * n + i] = (int)dlc_pack_bf162(x, y);
}
