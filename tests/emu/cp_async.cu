// cp.async semantics: copies land only when waited for; groups; zero-filled tails; ldmatrix
// checks for copies still in flight and for copies no __syncthreads() has published.
#include "dlc_kernel.cuh"

__device__ __forceinline__ int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// 32 threads; each copies 8 halves of X[256] into shared memory. `early` reads its own slot back
// before waiting (a bug: stale shared memory); `late` waits and synchronizes, then copies the
// slot of its neighbour to Y.
__global__ void __launch_bounds__(32) copy_early(const __half* __restrict__ X, __half* __restrict__ Y) {
  __shared__ __align__(16) __half buf_e[256];
  const int l = (int)threadIdx.x;
  dlc_cp_async_16(buf_e + l * 8, X + l * 8, 16);
  dlc_cp_async_commit();
  for (int i = 0; i < 8; ++i) Y[l * 8 + i] = buf_e[l * 8 + i];
  dlc_cp_async_wait<0>();
}

__global__ void __launch_bounds__(32) copy_late(const __half* __restrict__ X, __half* __restrict__ Y) {
  __shared__ __align__(16) __half buf_l[256];
  const int l = (int)threadIdx.x;
  dlc_cp_async_16(buf_l + l * 8, X + l * 8, 16);
  dlc_cp_async_commit();
  dlc_cp_async_wait<0>();
  __syncthreads();
  const int n = (l + 1) % 32;
  for (int i = 0; i < 8; ++i) Y[n * 8 + i] = buf_l[n * 8 + i];
}

// Two groups per thread (X[0..128) then X[128..256)); after wait<1> only the first has landed.
// Y[0..128) and Y[128..256) are read after wait<1>, Y[256..384) after wait<0>.
__global__ void __launch_bounds__(32) copy_groups(const float* __restrict__ X, float* __restrict__ Y) {
  __shared__ __align__(16) float g0[128];
  __shared__ __align__(16) float g1[128];
  const int l = (int)threadIdx.x;
  dlc_cp_async_16(g0 + l * 4, X + l * 4, 16);
  dlc_cp_async_commit();
  dlc_cp_async_16(g1 + l * 4, X + 128 + l * 4, 16);
  dlc_cp_async_commit();
  dlc_cp_async_wait<1>();
  for (int i = 0; i < 4; ++i) {
    Y[l * 4 + i] = g0[l * 4 + i];
    Y[128 + l * 4 + i] = g1[l * 4 + i];
  }
  dlc_cp_async_wait<0>();
  for (int i = 0; i < 4; ++i) Y[256 + l * 4 + i] = g1[l * 4 + i];
}

// Copies the n (<= 64) halves of X into three 64-element buffers with 16-, 8- and 4-byte copies,
// each zero-filling past n; Y[k * 64 + i] is buffer k's element i.
__global__ void __launch_bounds__(32) copy_tail(const __half* __restrict__ X, __half* __restrict__ Y, int n) {
  __shared__ __align__(16) __half t16[64];
  __shared__ __align__(16) __half t8[64];
  __shared__ __align__(16) __half t4[64];
  const int l = (int)threadIdx.x;
  if (l < 8) {
    const int e = l * 8, v = clamp_int(n - e, 0, 8);
    dlc_cp_async_16(t16 + e, v > 0 ? X + e : X, v * 2);
  }
  if (l < 16) {
    const int e = l * 4, v = clamp_int(n - e, 0, 4);
    dlc_cp_async_8(t8 + e, v > 0 ? X + e : X, v * 2);
  }
  {
    const int e = l * 2, v = clamp_int(n - e, 0, 2);
    dlc_cp_async_4(t4 + e, v > 0 ? X + e : X, v * 2);
  }
  dlc_cp_async_commit();
  dlc_cp_async_wait<0>();
  __syncthreads();
  for (int i = l; i < 64; i += 32) {
    Y[i] = t16[i];
    Y[64 + i] = t8[i];
    Y[128 + i] = t4[i];
  }
}

// ldmatrix of rows whose cp.async has not been waited for.
__global__ void __launch_bounds__(32) ldmatrix_before_wait(const __half* __restrict__ X, int* __restrict__ Y) {
  __shared__ __align__(16) __half tile_w[64];
  const int l = (int)threadIdx.x;
  if (l < 8) dlc_cp_async_16(tile_w + l * 8, X + l * 8, 16);
  dlc_cp_async_commit();
  unsigned r[1];
  dlc_ldmatrix_x1(r, tile_w + (l % 8) * 8);
  dlc_cp_async_wait<0>();
  Y[l] = (int)r[0];
}

// Warp 0 copies an 8x8 tile, warp 1 loads it with ldmatrix: with a __syncthreads() between them
// (`published`), or without (`unpublished`, a race on the device).
__global__ void __launch_bounds__(64) ldmatrix_published(const __half* __restrict__ X, int* __restrict__ Y) {
  __shared__ __align__(16) __half tile_p[64];
  const int t = (int)threadIdx.x;
  if (t < 8) dlc_cp_async_16(tile_p + t * 8, X + t * 8, 16);
  dlc_cp_async_commit();
  dlc_cp_async_wait<0>();
  __syncthreads();
  if (dlc_warp() == 1) {
    unsigned r[1];
    dlc_ldmatrix_x1(r, tile_p + (dlc_lane() % 8) * 8);
    Y[dlc_lane()] = (int)r[0];
  }
}

__global__ void __launch_bounds__(64) ldmatrix_unpublished(const __half* __restrict__ X, int* __restrict__ Y) {
  __shared__ __align__(16) __half tile_u[64];
  const int t = (int)threadIdx.x;
  if (t < 8) dlc_cp_async_16(tile_u + t * 8, X + t * 8, 16);
  dlc_cp_async_commit();
  dlc_cp_async_wait<0>();
  if (dlc_warp() == 1) {
    unsigned r[1];
    dlc_ldmatrix_x1(r, tile_u + (dlc_lane() % 8) * 8);
    Y[dlc_lane()] = (int)r[0];
  }
}

// A 16-byte copy whose source runs past the end of X (n halves): the emulation reports it.
__global__ void __launch_bounds__(32) copy_overrun(const __half* __restrict__ X, __half* __restrict__ Y, int n) {
  __shared__ __align__(16) __half t_over[8];
  if (threadIdx.x == 0) dlc_cp_async_16(t_over, X + (n - 4), 16);
  dlc_cp_async_commit();
  dlc_cp_async_wait<0>();
  __syncthreads();
  if (threadIdx.x < 8) Y[threadIdx.x] = t_over[threadIdx.x];
}
