// 1024 threads per block leave 64 registers per thread; 96 values live at once (the loops are
// fully unrolled, so all would be registers) do not fit, and ptxas spills on sm_80 and sm_90a.
extern "C" __global__ void __launch_bounds__(1024, 1) spills(const float* __restrict__ in,
                                                            float* __restrict__ out, int n) {
    float v[96];
#pragma unroll
    for (int i = 0; i < 96; ++i) v[i] = in[threadIdx.x + i * n];
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < 96; ++i) acc += v[i] * v[95 - i];
#pragma unroll
    for (int i = 0; i < 96; ++i) out[threadIdx.x + i * n] = v[i] * acc;
}
