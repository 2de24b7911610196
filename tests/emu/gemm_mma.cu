// Tensor-core GEMM C[M,N] (fp32) = A[M,K] * B, fp16 or bf16 inputs, fp32 accumulation.
// 64x64x32 block tile, 4 warps of 32x32, a two-stage cp.async pipeline (zero-filled tails),
// ldmatrix.x4 for A, ldmatrix.x4.trans for B[K,N] (row-major) or ldmatrix.x2 for Bt[N,K], and
// mma.sync m16n8k16. Needs K % 8 == 0 and, for B[K,N], N % 8 == 0 (16-byte rows of 8 elements).
#include "dlc_kernel.cuh"

#define BM 64
#define BN 64
#define BK 32
#define A_LD (BK + 8)  // 40 elements: 80-byte rows, 16-byte aligned, staggered banks
#define B_LD (BN + 8)  // 72 elements: 144-byte rows
#define A_STAGE (BM * A_LD)
#define B_STAGE (BK * B_LD)
#define BT_STAGE (BN * A_LD)

// One stage: A[m0.., k0..] into As, and B[k0.., n0..] (or Bt[n0.., k0..]) into Bs. A 16-byte
// chunk is all in range or all out (K % 8 == 0); out of range copies 0 bytes from the base.
template <class T, bool BT>
__device__ __forceinline__ void load_stage(T* As, T* Bs, const T* A, const T* B, int M, int N,
                                           int K, int m0, int n0, int k0, int tid) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int c = tid + i * 128;
    const int r = c / 4, kc = (c % 4) * 8;
    const bool ok = m0 + r < M && k0 + kc < K;
    const T* src = ok ? A + (m0 + r) * K + k0 + kc : A;
    dlc_cp_async_16(As + r * A_LD + kc, src, ok ? 16 : 0);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int c = tid + i * 128;
    if (BT) {
      const int r = c / 4, kc = (c % 4) * 8;
      const bool ok = n0 + r < N && k0 + kc < K;
      const T* src = ok ? B + (n0 + r) * K + k0 + kc : B;
      dlc_cp_async_16(Bs + r * A_LD + kc, src, ok ? 16 : 0);
    } else {
      const int r = c / 8, nc = (c % 8) * 8;
      const bool ok = k0 + r < K && n0 + nc < N;
      const T* src = ok ? B + (k0 + r) * N + n0 + nc : B;
      dlc_cp_async_16(Bs + r * B_LD + nc, src, ok ? 16 : 0);
    }
  }
}

template <class T, bool BF16, bool BT>
__device__ __forceinline__ void gemm_tc(const T* A, const T* B, float* C, int K, int M, int N) {
  DLC_DYN_SMEM(smem);
  T* As = reinterpret_cast<T*>(smem);
  T* Bs = As + 2 * A_STAGE;
  const int b_stage = BT ? BT_STAGE : B_STAGE;
  const int tid = (int)threadIdx.x;
  const int lane = (int)dlc_lane(), warp = (int)dlc_warp();
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  const int m0 = (int)blockIdx.y * BM, n0 = (int)blockIdx.x * BN;
  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
  const int KT = (K + BK - 1) / BK;
  load_stage<T, BT>(As, Bs, A, B, M, N, K, m0, n0, 0, tid);
  dlc_cp_async_commit();
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt & 1;
    if (kt + 1 < KT)
      load_stage<T, BT>(As + (s ^ 1) * A_STAGE, Bs + (s ^ 1) * b_stage, A, B, M, N, K, m0, n0,
                        (kt + 1) * BK, tid);
    dlc_cp_async_commit();
    dlc_cp_async_wait<1>();  // stage s landed; the next one may still be in flight
    __syncthreads();
    const T* as = As + s * A_STAGE;
    const T* bs = Bs + s * b_stage;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned af[2][4], bfrag[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        dlc_ldmatrix_x4(af[mi], as + (wm + mi * 16 + lane % 16) * A_LD + kk + (lane / 16) * 8);
      if (BT) {
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
          dlc_ldmatrix_x2(bfrag[ni], bs + (wn + ni * 8 + lane % 8) * A_LD + kk + ((lane / 8) % 2) * 8);
      } else {
#pragma unroll
        for (int nj = 0; nj < 2; ++nj) {
          unsigned r[4];
          dlc_ldmatrix_x4_trans(r, bs + (kk + lane % 16) * B_LD + wn + nj * 16 + (lane / 16) * 8);
          bfrag[2 * nj][0] = r[0];
          bfrag[2 * nj][1] = r[1];
          bfrag[2 * nj + 1][0] = r[2];
          bfrag[2 * nj + 1][1] = r[3];
        }
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          if (BF16)
            dlc_mma_m16n8k16_bf16(acc[mi][ni], af[mi], bfrag[ni], acc[mi][ni]);
          else
            dlc_mma_m16n8k16_f16(acc[mi][ni], af[mi], bfrag[ni], acc[mi][ni]);
        }
    }
    __syncthreads();  // every warp is done with stage s before it is refilled
  }
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = m0 + wm + mi * 16 + g + (e / 2) * 8;
        const int col = n0 + wn + ni * 8 + 2 * t + (e % 2);
        if (row < M && col < N) C[row * N + col] = acc[mi][ni][e];
      }
}

__global__ void __launch_bounds__(128)
    gemm_f16(const __half* __restrict__ A, const __half* __restrict__ B, float* __restrict__ C,
             int K, int M, int N) {
  gemm_tc<__half, false, false>(A, B, C, K, M, N);
}

__global__ void __launch_bounds__(128)
    gemm_bf16(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
              float* __restrict__ C, int K, int M, int N) {
  gemm_tc<__nv_bfloat16, true, false>(A, B, C, K, M, N);
}

__global__ void __launch_bounds__(128)
    gemm_bf16_nt(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ Bt,
                 float* __restrict__ C, int K, int M, int N) {
  gemm_tc<__nv_bfloat16, true, true>(A, Bt, C, K, M, N);
}
