
// ---- SM90 (sm_90a): mbarrier, TMA (cp.async.bulk.tensor), wgmma -----------------------------------
// Used by the `sm90_gemm` template only (emitted for --arch sm90); on older targets the functions
// compile to nothing. Their host emulation is dlc_emu_sm90.h (docs/gpu-codegen.md, "SM90").
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DLC_SM90 1
#else
#define DLC_SM90 0
#endif

// A TMA descriptor as cuTensorMapEncodeTiled writes it (the driver's CUtensorMap: 128 opaque
// bytes, 64-byte aligned), passed by value as a `const __grid_constant__` kernel parameter.
struct __align__(64) dlc_tmap {
  unsigned long long opaque[16];
};

// `p` rounded up to the next 1024-byte boundary of the shared address space (the 128-byte swizzle
// repeats every 8 rows of 128 bytes, so TMA destinations and wgmma descriptors start there).
__device__ __forceinline__ unsigned char* dlc_align1024(unsigned char* p) {
  const unsigned s = dlc_smem_addr(p);
  return p + ((1024u - (s & 1023u)) & 1023u);
}

__device__ __forceinline__ void dlc_mbar_init(unsigned long long* bar, unsigned count) {
#if DLC_SM90
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(dlc_smem_addr(bar)), "r"(count)
               : "memory");
#endif
}
// Makes initialized mbarriers visible to the other threads and to the async (TMA) proxy.
__device__ __forceinline__ void dlc_mbar_fence_init() {
#if DLC_SM90
  asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::
                   : "memory");
#endif
}
__device__ __forceinline__ void dlc_mbar_arrive(unsigned long long* bar) {
#if DLC_SM90
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(
                   dlc_smem_addr(bar))
               : "memory");
#endif
}
// Arrives and raises the barrier's transaction count by `bytes` (what the TMA loads deliver).
__device__ __forceinline__ void dlc_mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
#if DLC_SM90
  asm volatile(
      "{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(
          dlc_smem_addr(bar)),
      "r"(bytes)
      : "memory");
#endif
}
// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void dlc_mbar_wait(unsigned long long* bar, unsigned parity) {
#if DLC_SM90
  asm volatile(
      "{\n.reg .pred p;\nDLC_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra DLC_MBAR_WAIT;\n}\n" ::"r"(dlc_smem_addr(bar)),
      "r"(parity)
      : "memory");
#endif
}

// A 16-byte store of four packed words to shared memory (the conv template's gathered im2col
// tiles: a plain store, so the compiler may issue the global loads of later chunks first).
__device__ __forceinline__ void dlc_sts128(void* dst, unsigned a, unsigned b, unsigned c,
                                           unsigned d) {
  *reinterpret_cast<uint4*>(dst) = make_uint4(a, b, c, d);
}
// Orders this thread's generic-proxy shared-memory stores before later async-proxy reads
// (wgmma operands): `fence.proxy.async` before the mbarrier arrival that publishes them.
__device__ __forceinline__ void dlc_fence_proxy_async() {
#if DLC_SM90
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Named barrier `id` (1..15; 0 is __syncthreads) over `count` threads (a multiple of 32): syncs
// the consumer warpgroups (or one warp's epilogue staging) without the producer warpgroup.
__device__ __forceinline__ void dlc_bar_sync(unsigned id, unsigned count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// TMA: the box of `map` at coordinates (c0 innermost, …) into shared memory `dst` (128-byte
// aligned), out-of-bounds elements zero; completes `bytes` of transactions on `bar`.
__device__ __forceinline__ void dlc_tma_load_2d(void* dst, const dlc_tmap* map,
                                                unsigned long long* bar, int c0, int c1) {
#if DLC_SM90
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dlc_smem_addr(dst)),
      "l"((unsigned long long)map), "r"(dlc_smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
#endif
}
// TMA: the box of `map` at coordinates (c0 innermost, …) into shared memory `dst` (128-byte
// aligned), out-of-bounds elements zero; completes `bytes` of transactions on `bar`.
__device__ __forceinline__ void dlc_tma_load_3d(void* dst, const dlc_tmap* map,
                                                unsigned long long* bar, int c0, int c1, int c2) {
#if DLC_SM90
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dlc_smem_addr(dst)),
      "l"((unsigned long long)map), "r"(dlc_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#endif
}
// TMA: the box of `map` at coordinates (c0 innermost, …) into shared memory `dst` (128-byte
// aligned), out-of-bounds elements zero; completes `bytes` of transactions on `bar`.
__device__ __forceinline__ void dlc_tma_load_4d(void* dst, const dlc_tmap* map,
                                                unsigned long long* bar, int c0, int c1, int c2, int c3) {
#if DLC_SM90
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dlc_smem_addr(dst)),
      "l"((unsigned long long)map), "r"(dlc_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#endif
}
// TMA: the box of `map` at coordinates (c0 innermost, …) into shared memory `dst` (128-byte
// aligned), out-of-bounds elements zero; completes `bytes` of transactions on `bar`.
__device__ __forceinline__ void dlc_tma_load_5d(void* dst, const dlc_tmap* map,
                                                unsigned long long* bar, int c0, int c1, int c2, int c3, int c4) {
#if DLC_SM90
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n" ::"r"(dlc_smem_addr(dst)),
      "l"((unsigned long long)map), "r"(dlc_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
#endif
}

__device__ __forceinline__ void dlc_wgmma_fence() {
#if DLC_SM90
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void dlc_wgmma_commit() {
#if DLC_SM90
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void dlc_wgmma_wait() {
#if DLC_SM90
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving accesses of the accumulators across wgmma fences and waits.
template <int N>
__device__ __forceinline__ void dlc_fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Register budget of a warpgroup (warp specialization: the producer gives, the consumers take).
template <int N>
__device__ __forceinline__ void dlc_setmaxnreg_dec() {
#if DLC_SM90
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void dlc_setmaxnreg_inc() {
#if DLC_SM90
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
// A wgmma shared-memory matrix descriptor with the 128-byte swizzle: start address, leading and
// stride byte offsets (PTX ISA "Matrix Descriptor Format"; each field in 16-byte units).
__device__ __forceinline__ unsigned long long dlc_wgmma_desc(const void* smem, unsigned lbo,
                                                             unsigned sbo) {
  return (unsigned long long)((dlc_smem_addr(smem) & 0x3FFFFu) >> 4) |
         ((unsigned long long)((lbo & 0x3FFFFu) >> 4) << 16) |
         ((unsigned long long)((sbo & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}
// The accumulator operands of a wgmma with n/2 fp32 registers: their PTX list and "+f" constraints.
#define DLC_WGMMA_F8(i)                                                                      \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define DLC_WGMMA_REGS_32 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define DLC_WGMMA_OUT_32 DLC_WGMMA_F8(0), DLC_WGMMA_F8(8), DLC_WGMMA_F8(16), DLC_WGMMA_F8(24)
#define DLC_WGMMA_REGS_64 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define DLC_WGMMA_OUT_64 DLC_WGMMA_F8(0), DLC_WGMMA_F8(8), DLC_WGMMA_F8(16), DLC_WGMMA_F8(24), DLC_WGMMA_F8(32), DLC_WGMMA_F8(40), DLC_WGMMA_F8(48), DLC_WGMMA_F8(56)
#define DLC_WGMMA_REGS_128 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
#define DLC_WGMMA_OUT_128 DLC_WGMMA_F8(0), DLC_WGMMA_F8(8), DLC_WGMMA_F8(16), DLC_WGMMA_F8(24), DLC_WGMMA_F8(32), DLC_WGMMA_F8(40), DLC_WGMMA_F8(48), DLC_WGMMA_F8(56), DLC_WGMMA_F8(64), DLC_WGMMA_F8(72), DLC_WGMMA_F8(80), DLC_WGMMA_F8(88), DLC_WGMMA_F8(96), DLC_WGMMA_F8(104), DLC_WGMMA_F8(112), DLC_WGMMA_F8(120)
// wgmma.mma_async m64nNk16, fp32 += A·B, both operands from shared-memory descriptors; TA/TB: the
// operand is stored MN-major (transposed). d[4j + e] of thread (warp w of the warpgroup, lane l)
// is D[16w + l/4 + 8(e/2)][8j + 2(l%4) + e%2]. One definition per width N (R = N/2 accumulators,
// whose PTX operands are %0..%R-1; the descriptors %R, %R+1, the transposes %R+2, %R+3) and type.
#if DLC_SM90
#define DLC_WGMMA_ASM(N, R, PTX, DA, DB, TA_, TB_)                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX "." PTX " {"                 \
               DLC_WGMMA_REGS_##R "}, %" #DA ", %" #DB ", p, 1, 1, %" #TA_ ", %" #TB_ ";\n}\n"    \
               : DLC_WGMMA_OUT_##R                                                             \
               : "l"(da), "l"(db), "n"(TA), "n"(TB))
#else
#define DLC_WGMMA_ASM(N, R, PTX, DA, DB, TA_, TB_) (void)d, (void)da, (void)db
#endif
#define DLC_WGMMA_DEF(N, R, TY, PTX, DA, DB, TA_, TB_)                                          \
  template <int TA, int TB>                                                                    \
  __device__ __forceinline__ void dlc_wgmma_m64n##N##k16_##TY(                                 \
      float(&d)[R], unsigned long long da, unsigned long long db) {                            \
    DLC_WGMMA_ASM(N, R, PTX, DA, DB, TA_, TB_);                                                \
  }
DLC_WGMMA_DEF(64, 32, f16, "f16", 32, 33, 34, 35)
DLC_WGMMA_DEF(64, 32, bf16, "bf16", 32, 33, 34, 35)
DLC_WGMMA_DEF(128, 64, f16, "f16", 64, 65, 66, 67)
DLC_WGMMA_DEF(128, 64, bf16, "bf16", 64, 65, 66, 67)
DLC_WGMMA_DEF(256, 128, f16, "f16", 128, 129, 130, 131)
DLC_WGMMA_DEF(256, 128, bf16, "bf16", 128, 129, 130, 131)
#undef DLC_WGMMA_DEF
#undef DLC_WGMMA_ASM
