// Row sum and row max of X[R, C] (fp32): one block of 128 threads (32 x 4: one warp per y) per
// row; each thread strides over the columns, warps reduce with dlc_warp_sum / dlc_warp_max, warp
// 0 combines the four partials through shared memory.
#include "dlc_kernel.cuh"

__global__ void __launch_bounds__(128)
    row_sum_max(const float* __restrict__ X, float* __restrict__ S, float* __restrict__ Mx,
                int C, int R) {
  __shared__ float part_sum[4];
  __shared__ float part_max[4];
  const int r = (int)blockIdx.x;
  const unsigned t = threadIdx.x + blockDim.x * threadIdx.y;
  float s = 0.0f;
  float m = -dlc_inf();
  if (r < R) {
    for (int c = (int)t; c < C; c += 128) {
      const float v = X[r * C + c];
      s += v;
      m = dlc_max(m, v);
    }
  }
  s = dlc_warp_sum(s);
  m = dlc_warp_max(m);
  if (dlc_lane() == 0) {
    part_sum[dlc_warp()] = s;
    part_max[dlc_warp()] = m;
  }
  __syncthreads();
  if (dlc_warp() == 0) {
    const unsigned l = dlc_lane();
    float s2 = l < 4 ? part_sum[l] : 0.0f;
    float m2 = l < 4 ? part_max[l] : -dlc_inf();
    s2 = dlc_warp_sum(s2);
    m2 = dlc_warp_max(m2);
    if (l == 0 && r < R) {
      S[r] = s2;
      Mx[r] = m2;
    }
  }
}
