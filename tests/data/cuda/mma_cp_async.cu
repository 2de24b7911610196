// One warp: cp.async 16-byte copies of A (16x16 fp16) and B (16x8 fp16) into shared memory,
// ldmatrix, one mma.sync m16n8k16 (fp16 in, fp32 accumulate), result to C (16x8 fp32).
#include <cuda_fp16.h>

extern "C" __global__ void __launch_bounds__(32) mma_cp_async(
    const __half* __restrict__ A, const __half* __restrict__ B, float* __restrict__ C) {
    __shared__ __align__(128) __half sa[16 * 16];
    __shared__ __align__(128) __half sb[16 * 8];
    const int lane = threadIdx.x;
    // 256 + 128 halves = 48 + ... 16-byte chunks: A has 32, B has 16.
    {
        unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(sa + lane * 8));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(A + lane * 8));
        if (lane < 16) {
            unsigned dstb = static_cast<unsigned>(__cvta_generic_to_shared(sb + lane * 8));
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dstb), "l"(B + lane * 8));
        }
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 0;\n" ::);
    }
    __syncthreads();
    unsigned a0, a1, a2, a3, b0, b1;
    {
        unsigned addr = static_cast<unsigned>(
            __cvta_generic_to_shared(sa + (lane % 16) * 16 + (lane / 16) * 8));
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3)
                     : "r"(addr));
        unsigned addrb = static_cast<unsigned>(__cvta_generic_to_shared(sb + (lane % 16) * 8));
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                     : "=r"(b0), "=r"(b1)
                     : "r"(addrb));
    }
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    const int row = lane / 4, col = (lane % 4) * 2;
    C[row * 8 + col] = d0;
    C[row * 8 + col + 1] = d1;
    C[(row + 8) * 8 + col] = d2;
    C[(row + 8) * 8 + col + 1] = d3;
}
