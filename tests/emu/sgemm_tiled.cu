// fp32 C[M,N] = A[M,K] * B[K,N], 16x16 tiles in static shared memory, one output per thread;
// tails (M, N, K not multiples of 16) are predicated: out-of-range tile elements load 0.
#include "dlc_kernel.cuh"

#define TS 16

__global__ void __launch_bounds__(256)
    sgemm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int K, int M, int N) {
  __shared__ __align__(16) float As[TS][TS];
  __shared__ __align__(16) float Bs[TS][TS + 1];
  const int tx = (int)threadIdx.x, ty = (int)threadIdx.y;
  const int row = (int)blockIdx.y * TS + ty;
  const int col = (int)blockIdx.x * TS + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TS) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TS; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

// The same kernel without the barrier after the tile loads: threads read tile elements other
// threads have not stored yet.
__global__ void __launch_bounds__(256)
    sgemm_no_barrier(const float* __restrict__ A, const float* __restrict__ B,
                     float* __restrict__ C, int K, int M, int N) {
  __shared__ __align__(16) float As2[TS][TS];
  __shared__ __align__(16) float Bs2[TS][TS + 1];
  const int tx = (int)threadIdx.x, ty = (int)threadIdx.y;
  const int row = (int)blockIdx.y * TS + ty;
  const int col = (int)blockIdx.x * TS + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TS) {
    As2[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs2[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    for (int k = 0; k < TS; ++k) acc += As2[ty][k] * Bs2[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
