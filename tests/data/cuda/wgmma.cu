// A wgmma instruction (sm_90a only): fence, one m64n8k16 fp16 MMA from registers/descriptor,
// commit and wait. Compiles for sm_90a; ptxas rejects it for sm_80.
extern "C" __global__ void __launch_bounds__(128) wgmma_probe(float* __restrict__ out,
                                                             unsigned long long desc_b) {
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    unsigned a0 = threadIdx.x, a1 = 0, a2 = 0, a3 = 0;
    asm volatile("wgmma.fence.sync.aligned;\n" ::);
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "%8, 1, 1, 1, 1;\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::);
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::);
    out[threadIdx.x * 4 + 0] = d0;
    out[threadIdx.x * 4 + 1] = d1;
    out[threadIdx.x * 4 + 2] = d2;
    out[threadIdx.x * 4 + 3] = d3;
}
