// 64 KiB of static shared memory: over the 48 KiB a block may declare statically (ptxas rejects
// it for sm_80 but accepts it for sm_90a, where the compile path must reject it itself).
extern "C" __global__ void big_static_smem(float* __restrict__ out) {
    __shared__ float tile[16384];
    tile[threadIdx.x] = static_cast<float>(threadIdx.x);
    __syncthreads();
    out[threadIdx.x] = tile[(threadIdx.x * 7) % 16384];
}
