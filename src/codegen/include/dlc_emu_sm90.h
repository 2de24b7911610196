// dlc_emu_sm90.h: the fourth part of the host emulation header (EMU_HEADER is dlc_emu.h,
// dlc_emu_runtime.h, dlc_emu_warp.h and this file): the SM90 instructions of the `sm90_gemm`
// template, modelled on the PTX ISA.
//
// - mbarrier: an expected arrival count, pending arrivals, a transaction count and a phase. A
//   phase completes when its pending arrivals and its transaction count are both zero; the
//   arrivals are then re-armed and the phase advances. try_wait.parity P succeeds once the phase
//   of parity P has completed (the current phase's parity differs from P). A thread waiting on an
//   incomplete phase blocks (a block where nobody can go on is a deadlock).
// - TMA (cp.async.bulk.tensor, tile mode): the box of a tensor map (cuTensorMapEncodeTiled,
//   emulated with the driver's signature) at the given coordinates is read at issue, out-of-bounds
//   elements zero, and queued on its mbarrier; it lands in shared memory (in the 128-byte swizzle:
//   16-byte chunk bits [4:6] of the shared address XORed with bits [7:9]) and completes the
//   box's bytes of transactions when a thread waits on that barrier. So a thread that reads a
//   stage without waiting sees the 0xFF poison, an expect_tx below the bytes loaded completes the
//   phase while a load is still queued (an error), one above never completes it (a deadlock).
// - wgmma.mma_async: each thread of the warpgroup queues its own part (the accumulator layout of
//   the PTX ISA) with the two shared-memory descriptors; commit_group closes the thread's group,
//   wait_group N executes every committed group but the newest N, reading shared memory then
//   (through the descriptors: start address, LBO, SBO, 128-byte swizzle; K-major or, when
//   transposed, MN-major canonical layouts). A TMA landing on shared memory that a queued
//   wgmma still reads is an error (a stage released before its wgmma completed); a thread that
//   exits with queued wgmma groups is an error.
// - Generic-proxy stores to shared memory (dlc_sts128, the conv template's gathered tiles) stay
//   unpublished to the async proxy until the storing thread's fence.proxy.async: a wgmma issued
//   while a byte it reads is still unpublished is an error (a missing fence).
// - bar.sync id, count (named barriers 1..15, the staged epilogue's): a thread blocks until
//   `count` threads (a multiple of 32, one count per generation) arrived at `id`.
// "Shared addresses" are offsets into the dynamic buffer (allocated 1024-byte aligned).

#include <map>

typedef enum {
  CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0,
  CU_TENSOR_MAP_DATA_TYPE_UINT16,
  CU_TENSOR_MAP_DATA_TYPE_UINT32,
  CU_TENSOR_MAP_DATA_TYPE_INT32,
  CU_TENSOR_MAP_DATA_TYPE_UINT64,
  CU_TENSOR_MAP_DATA_TYPE_INT64,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
} CUtensorMapDataType;
typedef enum { CU_TENSOR_MAP_INTERLEAVE_NONE = 0 } CUtensorMapInterleave;
typedef enum {
  CU_TENSOR_MAP_SWIZZLE_NONE = 0,
  CU_TENSOR_MAP_SWIZZLE_32B,
  CU_TENSOR_MAP_SWIZZLE_64B,
  CU_TENSOR_MAP_SWIZZLE_128B
} CUtensorMapSwizzle;
typedef enum {
  CU_TENSOR_MAP_L2_PROMOTION_NONE = 0,
  CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
  CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
  CU_TENSOR_MAP_L2_PROMOTION_L2_256B
} CUtensorMapL2promotion;
typedef enum {
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
} CUtensorMapFloatOOBfill;
typedef int CUresult;
typedef unsigned long long cuuint64_t;
typedef unsigned int cuuint32_t;

// The emulated tensor map (128 bytes, 64-byte aligned, like the driver's).
struct alignas(64) dlc_tmap {
  uint32_t magic;
  uint32_t rank;
  uint32_t elem;
  uint32_t swizzle;
  const unsigned char* base;
  uint64_t dims[5];
  uint64_t strides[5];  // bytes; strides[0] = elem
  uint32_t box[5];
};
static_assert(sizeof(dlc_tmap) == 128, "a tensor map is 128 bytes");
typedef dlc_tmap CUtensorMap;
constexpr uint32_t kTmapMagic = 0x544d4150u;

// cuTensorMapEncodeTiled's checks (CUDA driver API) and encoding; returns 1
// (CUDA_ERROR_INVALID_VALUE) on a violation, 0 on success.
inline CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType dtype,
                                       cuuint32_t rank, void* global, const cuuint64_t* dims,
                                       const cuuint64_t* strides, const cuuint32_t* box,
                                       const cuuint32_t* elem_strides,
                                       CUtensorMapInterleave interleave,
                                       CUtensorMapSwizzle swizzle, CUtensorMapL2promotion,
                                       CUtensorMapFloatOOBfill oob) {
  uint32_t elem = 0;
  switch (dtype) {
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: elem = 2; break;
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_UINT32: elem = 4; break;
    default: return 1;
  }
  if (map == nullptr || rank < 1 || rank > 5 || (uintptr_t)global % 16 != 0) return 1;
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE || oob != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    return 1;
  std::memset(map, 0, sizeof *map);
  map->magic = kTmapMagic;
  map->rank = rank;
  map->elem = elem;
  map->swizzle = (uint32_t)swizzle;
  map->base = static_cast<const unsigned char*>(global);
  map->strides[0] = elem;
  for (uint32_t d = 0; d < rank; ++d) {
    if (dims[d] == 0 || dims[d] > (1ull << 32)) return 1;
    if (box[d] == 0 || box[d] > 256 || elem_strides[d] != 1) return 1;
    map->dims[d] = dims[d];
    map->box[d] = box[d];
    if (d > 0) {
      if (strides[d - 1] % 16 != 0 || strides[d - 1] >= (1ull << 40)) return 1;
      map->strides[d] = strides[d - 1];
    }
  }
  if ((box[0] * elem) % 16 != 0) return 1;
  const uint32_t span[] = {0, 32, 64, 128};
  if (swizzle != CU_TENSOR_MAP_SWIZZLE_NONE && box[0] * elem > span[swizzle]) return 1;
  return 0;
}

namespace dlc_emu {
namespace detail {

struct Mbar {
  uint32_t expected = 0, pending = 0, phase = 0;
  int64_t tx = 0;
};

struct TmaXfer {
  const void* bar;
  size_t off;  // shared address of the destination
  std::vector<unsigned char> bytes;  // the box, row-major, innermost first
  uint32_t swizzle;
};

struct WgOp {
  float* d;
  int n;
  uint64_t da, db;
  bool ta, tb, bf16;
  unsigned group;  // 0: not committed yet
  size_t lo[2], hi[2];  // shared-memory bytes it reads, of A and of B
};

// A named barrier (bar.sync id, count): arrivals of the current generation.
struct NamedBar {
  uint32_t count = 0, arrived = 0, gen = 0;
};

struct Sm90 {
  std::map<const void*, Mbar> bars;
  NamedBar named[16];
  std::vector<TmaXfer> xfers;
  std::vector<std::vector<WgOp>> ops;  // per thread
  std::vector<unsigned> next_group;
  // Per thread: shared-memory byte ranges stored through the generic proxy, not yet fenced.
  std::vector<std::vector<std::pair<size_t, size_t>>> generic;
};
static Sm90 g_sm90;

inline size_t smem_off(const void* p, size_t n, const char* what) {
  Runtime& r = rt();
  if (!within(p, n, r.dyn, r.dyn_bytes))
    fail("%s: %p is not in dynamic shared memory (SM90 operands live there)", what, p);
  return (size_t)(static_cast<const unsigned char*>(p) - r.dyn);
}

inline size_t swz128(size_t off) { return off ^ (((off >> 7) & 7u) << 4); }

inline void sm90_block_reset() {
  g_sm90.bars.clear();
  g_sm90.xfers.clear();
  for (NamedBar& b : g_sm90.named) b = NamedBar();
  g_sm90.ops.assign(rt().nthreads, std::vector<WgOp>());
  g_sm90.next_group.assign(rt().nthreads, 1u);
  g_sm90.generic.assign(rt().nthreads, std::vector<std::pair<size_t, size_t>>());
}

inline void sm90_thread_exit() {
  if (g_sm90.ops.empty()) return;
  if (!g_sm90.ops[rt().cur->linear].empty())
    fail("thread exited with %zu wgmma.mma_async not waited for (wgmma.wait_group)",
         g_sm90.ops[rt().cur->linear].size());
}

inline unsigned sm90_mbar_waiters() {
  unsigned n = 0;
  for (const Fiber& f : rt().fibers) n += f.st == St::Mbar;
  return n;
}

inline Mbar& mbar(const void* bar, const char* what) {
  auto it = g_sm90.bars.find(bar);
  if (it == g_sm90.bars.end()) fail("%s: mbarrier %p was not initialized", what, bar);
  return it->second;
}

// Wakes the threads waiting on `bar`; returns whether there were any.
inline bool wake(const void* bar) {
  bool any = false;
  for (Fiber& f : rt().fibers)
    if (f.st == St::Mbar && f.mbar == bar) {
      f.st = St::Ready;
      any = true;
    }
  return any;
}

inline void try_complete(const void* bar, Mbar& m) {
  if (m.pending != 0 || m.tx != 0) return;
  for (const TmaXfer& x : g_sm90.xfers)
    if (x.bar == bar)
      fail("mbarrier %p completed its phase %u while a TMA load to it is still in flight: "
           "expect_tx is below the bytes loaded",
           bar, m.phase);
  m.phase++;
  m.pending = m.expected;
  // The woken threads run before this one goes on (the adversarial order: a stage released
  // early is refilled while its wgmma may still read it).
  if (wake(bar) && rt().cur != nullptr) yield();
}

// A TMA load may write its destination any time from its issue until it lands: none of it may
// be read by a wgmma not yet waited for.
inline void check_overwrite(size_t lo, size_t hi) {
  for (const auto& ops : g_sm90.ops)
    for (const WgOp& o : ops)
      for (int ab = 0; ab < 2; ++ab)
        if (o.lo[ab] < hi && lo < o.hi[ab])
          fail("a TMA load writes shared memory [%zu, %zu) that a wgmma not yet waited for "
               "reads ([%zu, %zu) of its descriptor %#llx): the stage was released before "
               "its wgmma completed",
               lo, hi, o.lo[ab], o.hi[ab], (unsigned long long)(ab == 0 ? o.da : o.db));
}

// Lands the TMA loads queued on `bar`, in issue order.
inline void land(const void* bar) {
  Runtime& r = rt();
  for (size_t i = 0; i < g_sm90.xfers.size();) {
    if (g_sm90.xfers[i].bar != bar) {
      ++i;
      continue;
    }
    TmaXfer x = std::move(g_sm90.xfers[i]);
    g_sm90.xfers.erase(g_sm90.xfers.begin() + (std::ptrdiff_t)i);
    check_overwrite(x.off, x.off + x.bytes.size());
    for (size_t b = 0; b < x.bytes.size(); ++b) {
      const size_t off = x.swizzle == 3 ? swz128(x.off + b) : x.off + b;
      if (off >= r.dyn_bytes) fail("TMA destination byte %zu is past dynamic shared memory", off);
      r.dyn[off] = x.bytes[b];
    }
    Mbar& m = mbar(bar, "TMA complete_tx");
    m.tx -= (int64_t)x.bytes.size();
    try_complete(bar, m);
  }
}

inline void tma_load(void* dst, const dlc_tmap* map, void* bar, const int* c, uint32_t rank) {
  if (!rt().in_kernel) fail("cp.async.bulk.tensor outside a kernel");
  if (map->magic != kTmapMagic) fail("cp.async.bulk.tensor: not a tensor map");
  if (map->rank != rank)
    fail("cp.async.bulk.tensor.%ud with a tensor map of rank %u", rank, map->rank);
  mbar(bar, "cp.async.bulk.tensor");
  uint64_t n = 1;
  for (uint32_t d = 0; d < rank; ++d) n *= map->box[d];
  const size_t bytes = (size_t)(n * map->elem);
  const size_t off = smem_off(dst, bytes, "cp.async.bulk.tensor destination");
  if (off % (map->swizzle == 3 ? 1024 : 128) != 0)
    fail("cp.async.bulk.tensor: destination %zu is not %u-byte aligned", off,
         map->swizzle == 3 ? 1024u : 128u);
  TmaXfer x;
  x.bar = bar;
  x.off = off;
  x.swizzle = map->swizzle;
  x.bytes.assign(bytes, 0);
  uint32_t i[5] = {0, 0, 0, 0, 0};
  for (uint64_t e = 0; e < n; ++e) {
    uint64_t rest = e;
    bool in = true;
    size_t src = 0;
    for (uint32_t d = 0; d < rank; ++d) {
      i[d] = (uint32_t)(rest % map->box[d]);
      rest /= map->box[d];
      const int64_t g = (int64_t)c[d] + i[d];
      if (g < 0 || (uint64_t)g >= map->dims[d]) in = false;
      src += (size_t)g * map->strides[d];
    }
    if (in) std::memcpy(&x.bytes[e * map->elem], map->base + src, map->elem);
  }
  check_overwrite(off, off + bytes);
  g_sm90.xfers.push_back(std::move(x));
  wake(bar);  // a waiter lands it
}

// The shared address of element (mn, k) of a wgmma operand (descriptor `desc`, 2-byte elements).
inline size_t wg_addr(uint64_t desc, int mn, int k, bool mn_major) {
  const size_t start = (size_t)(desc & 0x3FFFu) << 4;
  const size_t lbo = (size_t)((desc >> 16) & 0x3FFFu) << 4;
  const size_t sbo = (size_t)((desc >> 32) & 0x3FFFu) << 4;
  if ((desc >> 62) != 1 || ((desc >> 49) & 7u) != 0)
    fail("wgmma descriptor %#llx: only the 128-byte swizzle with base offset 0 is emulated",
         (unsigned long long)desc);
  const size_t off = mn_major ? start + (size_t)(mn % 64) * 2 + (size_t)(mn / 64) * lbo +
                                    (size_t)(k % 8) * 128 + (size_t)(k / 8) * sbo
                              : start + (size_t)(mn % 8) * 128 + (size_t)(mn / 8) * sbo +
                                    (size_t)k * 2;
  return swz128(off);
}

inline float wg_elem(size_t off, bool bf16) {
  Runtime& r = rt();
  if (off + 2 > r.dyn_bytes) fail("wgmma operand byte %zu is past dynamic shared memory", off);
  unsigned short h;
  std::memcpy(&h, r.dyn + off, 2);
  return bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

inline void wg_execute(const WgOp& o, unsigned linear) {
  const int lane = (int)(linear % 128), w = lane / 32, g = (lane % 32) / 4, t = lane % 4;
  for (int j = 0; j < o.n / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int row = 16 * w + g + 8 * (e >> 1), col = 8 * j + 2 * t + (e & 1);
      double s = o.d[4 * j + e];
      for (int k = 0; k < 16; ++k)
        s += (double)wg_elem(wg_addr(o.da, row, k, o.ta), o.bf16) *
             (double)wg_elem(wg_addr(o.db, col, k, o.tb), o.bf16);
      o.d[4 * j + e] = (float)s;
    }
}

inline void wgmma(float* d, int n, uint64_t da, uint64_t db, bool ta, bool tb, bool bf16) {
  Runtime& r = rt();
  if (!r.in_kernel) fail("wgmma.mma_async outside a kernel");
  const unsigned wg = r.cur->linear / 128;
  if ((wg + 1) * 128 > r.nthreads)
    fail("wgmma.mma_async in a partial warpgroup (block of %u threads)", r.nthreads);
  WgOp o{d, n, da, db, ta, tb, bf16, 0, {~(size_t)0, ~(size_t)0}, {0, 0}};
  for (int mn = 0; mn < 64 || mn < n; ++mn)
    for (int k = 0; k < 16; ++k)
      for (int ab = 0; ab < 2; ++ab) {
        if (mn >= (ab == 0 ? 64 : n)) continue;
        const size_t x = ab == 0 ? wg_addr(da, mn, k, ta) : wg_addr(db, mn, k, tb);
        o.lo[ab] = std::min(o.lo[ab], x);
        o.hi[ab] = std::max(o.hi[ab], x + 2);
      }
  for (size_t t = 0; t < g_sm90.generic.size(); ++t)
    for (const auto& w : g_sm90.generic[t])
      for (int ab = 0; ab < 2; ++ab)
        if (o.lo[ab] < w.second && w.first < o.hi[ab])
          fail("wgmma reads shared memory [%zu, %zu) that thread %zu stored through the generic "
               "proxy without fence.proxy.async",
               w.first, w.second, t);
  g_sm90.ops[r.cur->linear].push_back(o);
}

}  // namespace detail
}  // namespace dlc_emu

// ---- kernel-side API (the names of dlc_kernel_sm90.cuh) ----------------------------------------
inline unsigned char* dlc_align1024(unsigned char* p) {
  const size_t off = dlc_emu::detail::smem_off(p, 1, "dlc_align1024");
  return p + ((1024 - (off & 1023)) & 1023);
}
inline void dlc_mbar_init(unsigned long long* bar, unsigned count) {
  dlc_emu::detail::smem_off(bar, 8, "mbarrier.init");
  if ((uintptr_t)bar % 8 != 0) dlc_emu::detail::fail("mbarrier %p is not 8-byte aligned", bar);
  if (count == 0 || count >= (1u << 20)) dlc_emu::detail::fail("mbarrier.init count %u", count);
  dlc_emu::detail::Mbar m;
  m.expected = m.pending = count;
  dlc_emu::detail::g_sm90.bars[bar] = m;
  *bar = 0;  // the barrier's own word is not data
}
inline void dlc_mbar_fence_init() {}
inline void dlc_mbar_arrive(unsigned long long* bar) {
  using namespace dlc_emu::detail;
  Mbar& m = mbar(bar, "mbarrier.arrive");
  if (m.pending == 0) fail("mbarrier.arrive on %p: more arrivals than its count", (void*)bar);
  m.pending--;
  try_complete(bar, m);
}
inline void dlc_mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  using namespace dlc_emu::detail;
  mbar(bar, "mbarrier.arrive.expect_tx").tx += bytes;
  dlc_mbar_arrive(bar);
}
inline void dlc_mbar_wait(unsigned long long* bar, unsigned parity) {
  using namespace dlc_emu::detail;
  for (;;) {
    land(bar);
    const Mbar& m = mbar(bar, "mbarrier.try_wait.parity");
    if ((m.phase & 1u) != (parity & 1u)) return;
    Fiber& f = *rt().cur;
    f.st = St::Mbar;
    f.mbar = bar;
    yield();
  }
}
// bar.sync id, count: blocks until `count` threads (a multiple of 32, the same count for every
// arrival of a generation) arrived at barrier `id`; 0 is __syncthreads, so 1..15.
inline void dlc_bar_sync(unsigned id, unsigned count) {
  using namespace dlc_emu::detail;
  if (id == 0 || id >= 16) fail("bar.sync %u: named barriers are 1..15 (0 is __syncthreads)", id);
  if (count == 0 || count % 32 != 0 || count > rt().nthreads)
    fail("bar.sync %u, %u: the count is not a multiple of 32 within the block's %u threads", id,
         count, rt().nthreads);
  NamedBar& b = g_sm90.named[id];
  if (b.arrived > 0 && b.count != count)
    fail("bar.sync %u: this thread counts %u threads, an earlier arrival %u", id, count, b.count);
  b.count = count;
  if (++b.arrived == count) {
    b.arrived = 0;
    b.gen++;
    wake(&b);
    return;
  }
  const uint32_t gen = b.gen;
  while (b.gen == gen) {
    Fiber& f = *rt().cur;
    f.st = St::Mbar;
    f.mbar = &b;
    yield();
  }
}
inline void dlc_tma_load_2d(void* dst, const dlc_tmap* map, unsigned long long* bar, int c0,
                            int c1) {
  const int c[] = {c0, c1};
  dlc_emu::detail::tma_load(dst, map, bar, c, 2);
}
inline void dlc_tma_load_3d(void* dst, const dlc_tmap* map, unsigned long long* bar, int c0,
                            int c1, int c2) {
  const int c[] = {c0, c1, c2};
  dlc_emu::detail::tma_load(dst, map, bar, c, 3);
}
inline void dlc_tma_load_4d(void* dst, const dlc_tmap* map, unsigned long long* bar, int c0,
                            int c1, int c2, int c3) {
  const int c[] = {c0, c1, c2, c3};
  dlc_emu::detail::tma_load(dst, map, bar, c, 4);
}
inline void dlc_tma_load_5d(void* dst, const dlc_tmap* map, unsigned long long* bar, int c0,
                            int c1, int c2, int c3, int c4) {
  const int c[] = {c0, c1, c2, c3, c4};
  dlc_emu::detail::tma_load(dst, map, bar, c, 5);
}
inline void dlc_sts128(void* dst, unsigned a, unsigned b, unsigned c, unsigned d) {
  using namespace dlc_emu::detail;
  const size_t off = smem_off(dst, 16, "st.shared.v4");
  if (off % 16 != 0) fail("st.shared.v4 to %zu: not 16-byte aligned", off);
  const unsigned w[4] = {a, b, c, d};
  std::memcpy(rt().dyn + off, w, 16);
  auto& mine = g_sm90.generic[rt().cur->linear];
  if (!mine.empty() && mine.back().second == off)
    mine.back().second = off + 16;
  else
    mine.emplace_back(off, off + 16);
}
inline void dlc_fence_proxy_async() {
  dlc_emu::detail::g_sm90.generic[dlc_emu::detail::rt().cur->linear].clear();
}
inline void dlc_wgmma_fence() {}
inline void dlc_wgmma_commit() {
  using namespace dlc_emu::detail;
  const unsigned me = rt().cur->linear;
  bool any = false;
  for (WgOp& o : g_sm90.ops[me])
    if (o.group == 0) {
      o.group = g_sm90.next_group[me];
      any = true;
    }
  (void)any;
  g_sm90.next_group[me]++;
}
template <int N>
inline void dlc_wgmma_wait() {
  using namespace dlc_emu::detail;
  const unsigned me = rt().cur->linear;
  const unsigned committed = g_sm90.next_group[me] - 1;
  if (committed <= (unsigned)N) return;
  const unsigned upto = committed - (unsigned)N;
  std::vector<WgOp>& ops = g_sm90.ops[me];
  size_t n = 0;
  while (n < ops.size() && ops[n].group != 0 && ops[n].group <= upto) wg_execute(ops[n++], me);
  ops.erase(ops.begin(), ops.begin() + (std::ptrdiff_t)n);
}
template <int N>
inline void dlc_fence_regs(float (&)[N]) {}
template <int N>
inline void dlc_setmaxnreg_dec() {}
template <int N>
inline void dlc_setmaxnreg_inc() {}
inline unsigned long long dlc_wgmma_desc(const void* smem, unsigned lbo, unsigned sbo) {
  const size_t s = dlc_emu::detail::smem_off(smem, 1, "wgmma descriptor");
  return (unsigned long long)((s & 0x3FFFFu) >> 4) |
         ((unsigned long long)((lbo & 0x3FFFFu) >> 4) << 16) |
         ((unsigned long long)((sbo & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}
#define DLC_EMU_WGMMA(N, TY, BF)                                                              \
  template <int TA, int TB>                                                                   \
  inline void dlc_wgmma_m64n##N##k16_##TY(float(&d)[N / 2], unsigned long long da,            \
                                          unsigned long long db) {                            \
    dlc_emu::detail::wgmma(d, N, da, db, TA != 0, TB != 0, BF);                               \
  }
DLC_EMU_WGMMA(64, f16, false)
DLC_EMU_WGMMA(64, bf16, true)
DLC_EMU_WGMMA(128, f16, false)
DLC_EMU_WGMMA(128, bf16, true)
DLC_EMU_WGMMA(256, f16, false)
DLC_EMU_WGMMA(256, bf16, true)
#undef DLC_EMU_WGMMA
