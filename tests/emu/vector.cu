// Vector global accesses (dlc_ld_vec / dlc_st_vec): Y[i] = 2 X[i + shift] in chunks of 8 halves,
// one 16-byte load and one 16-byte store per thread. With shift % 8 != 0 the load is misaligned;
// with a shift that runs the last chunk past X the load leaves the buffer. The emulation reports
// both; the device would fault or read garbage.
#include "dlc_kernel.cuh"

__global__ void __launch_bounds__(32) vec_scale(const __half* __restrict__ X, __half* __restrict__ Y, int n,
                                                int shift) {
  const int c = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (c * 8 < n) {
    __half v[8];
    dlc_ld_vec<16>(&v[0], &X[c * 8 + shift]);
    __half o[8];
#pragma unroll
    for (int l = 0; l < 8; ++l) o[l] = dlc_cvt<__half>(2.0f * dlc_f32(v[l]));
    dlc_st_vec<8>(&Y[c * 8], &o[0]);
    dlc_st_vec<8>(&Y[c * 8 + 4], &o[4]);
  }
}
