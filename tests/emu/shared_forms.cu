// __shared__ variables at file scope, in an inline helper and in a template, each read by another
// thread after a barrier. Y[t] = X[t+1 mod 64] + X[t+2 mod 64] + X[t+3 mod 64].
#include "dlc_kernel.cuh"

__shared__ __align__(16) float file_scope[64];

__device__ inline float rotate_inline(float v, int t) {
  __shared__ float in_inline[64];
  in_inline[t] = v;
  __syncthreads();
  return in_inline[(t + 2) % 64];
}

template <int N>
__device__ __forceinline__ float rotate_template(float v, int t) {
  __shared__ float in_template[N];
  in_template[t] = v;
  __syncthreads();
  return in_template[(t + 3) % N];
}

__global__ void __launch_bounds__(64) shared_forms(const float* __restrict__ X, float* __restrict__ Y) {
  const int t = (int)threadIdx.x;
  const float v = X[t];
  file_scope[t] = v;
  __syncthreads();
  const float a = file_scope[(t + 1) % 64];
  Y[t] = a + rotate_inline(v, t) + rotate_template<64>(v, t);
}
