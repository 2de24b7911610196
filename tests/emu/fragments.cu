// Probes of the tensor-core fragment layouts: every ldmatrix variant on four 8x8 matrices of
// distinct values, and one mma.sync per input type on fragments gathered from global memory by
// the PTX ISA's formulas.
#include "dlc_kernel.cuh"

// X: 4 matrices of 8x8 fp16 (matrix m, row r, column c at m*64 + r*8 + c). O[(v*32 + lane)*4 + j]
// is register j of the lane for variant v = x1, x2, x4, x1.trans, x2.trans, x4.trans (registers
// a variant does not load stay 0).
__global__ void __launch_bounds__(32) ldmatrix_probe(const __half* __restrict__ X, int* __restrict__ O) {
  __shared__ __align__(16) __half mats[256];
  const int l = (int)threadIdx.x;
  for (int i = l; i < 256; i += 32) mats[i] = X[i];
  __syncthreads();
  const __half* row = mats + (l / 8) * 64 + (l % 8) * 8;
  unsigned r[6][4];
  for (int v = 0; v < 6; ++v)
    for (int j = 0; j < 4; ++j) r[v][j] = 0u;
  dlc_ldmatrix_x1(r[0], row);
  dlc_ldmatrix_x2(r[1], row);
  dlc_ldmatrix_x4(r[2], row);
  dlc_ldmatrix_x1_trans(r[3], row);
  dlc_ldmatrix_x2_trans(r[4], row);
  dlc_ldmatrix_x4_trans(r[5], row);
  for (int v = 0; v < 6; ++v)
    for (int j = 0; j < 4; ++j) O[(v * 32 + l) * 4 + j] = (int)r[v][j];
}

// D = A * B + C with A[16][16], B[16][8] (k x n), C, D [16][8], all fp32 in memory; the
// fragments are packed to fp16 (BF16 = false) or bf16 with dlc_pack_*.
template <bool BF16>
__device__ __forceinline__ void mma_probe(const float* A, const float* B, const float* C, float* D) {
  const int l = (int)threadIdx.x, g = l >> 2, t = l & 3;
#define DLC_PACK(lo, hi) (BF16 ? dlc_pack_bf162(lo, hi) : dlc_pack_half2(lo, hi))
  const unsigned a[4] = {
      DLC_PACK(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]),
      DLC_PACK(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]),
      DLC_PACK(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]),
      DLC_PACK(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9]),
  };
  const unsigned b[2] = {
      DLC_PACK(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]),
      DLC_PACK(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]),
  };
#undef DLC_PACK
  float c[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t],
                C[(g + 8) * 8 + 2 * t + 1]};
  if (BF16)
    dlc_mma_m16n8k16_bf16(c, a, b, c);
  else
    dlc_mma_m16n8k16_f16(c, a, b, c);
  D[g * 8 + 2 * t] = c[0];
  D[g * 8 + 2 * t + 1] = c[1];
  D[(g + 8) * 8 + 2 * t] = c[2];
  D[(g + 8) * 8 + 2 * t + 1] = c[3];
}

__global__ void __launch_bounds__(32)
    mma_probe_f16(const float* __restrict__ A, const float* __restrict__ B,
                  const float* __restrict__ C, float* __restrict__ D) {
  mma_probe<false>(A, B, C, D);
}

__global__ void __launch_bounds__(32)
    mma_probe_bf16(const float* __restrict__ A, const float* __restrict__ B,
                   const float* __restrict__ C, float* __restrict__ D) {
  mma_probe<true>(A, B, C, D);
}
