// Divergent barriers and warp collectives, which the emulation reports.
#include "dlc_kernel.cuh"

__global__ void __launch_bounds__(32) divergent_barrier(float* __restrict__ Y) {
  if (threadIdx.x < 16) __syncthreads();
  Y[threadIdx.x] = 1.0f;
}

__global__ void __launch_bounds__(32) divergent_shfl(float* __restrict__ Y) {
  float v = (float)threadIdx.x;
  if (threadIdx.x < 16) v = dlc_shfl_xor(v, 1);
  Y[threadIdx.x] = v;
}

// Every thread reaches a barrier, but not the same one.
__global__ void __launch_bounds__(64) two_barriers(float* __restrict__ Y) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  Y[threadIdx.x] = 1.0f;
}
