// dlc_emu_runtime.h: the second half of the host emulation header (EMU_HEADER is dlc_emu.h
// followed by this file): fibers, the block scheduler, barriers, warp collectives, tensor-core
// and async-copy emulation. Not meant to be included on its own.

namespace dlc_emu {
namespace detail {

// Exit status of every emulation failure (divergent barrier, bad address, bad launch).
constexpr int kFailStatus = 86;
constexpr unsigned kFull = 0xffffffffu;

enum class St : unsigned char { Ready, Barrier, Warp, Mbar, Done };
enum class Op : unsigned char { ShflXor, Shfl, Sum, Max, Min, MmaF16, MmaBf16, Ld, LdTrans };

inline const char* op_name(Op op) {
  switch (op) {
    case Op::ShflXor: return "dlc_shfl_xor";
    case Op::Shfl: return "dlc_shfl";
    case Op::Sum: return "dlc_warp_sum";
    case Op::Max: return "dlc_warp_max";
    case Op::Min: return "dlc_warp_min";
    case Op::MmaF16: return "dlc_mma_m16n8k16_f16";
    case Op::MmaBf16: return "dlc_mma_m16n8k16_bf16";
    case Op::Ld: return "dlc_ldmatrix";
    case Op::LdTrans: return "dlc_ldmatrix_trans";
  }
  return "?";
}

// One queued cp.async: the source bytes (read at issue), written to dst when waited for.
struct Copy {
  unsigned char* dst;
  unsigned group;  // 0: not committed yet
  unsigned char size;
  unsigned char data[16];
};

struct Fiber {
  void* sp = nullptr;  // saved stack pointer (assembly switch)
#if !defined(DLC_EMU_ASM_SWITCH)
  ucontext_t ctx;
#endif
  unsigned char* stack = nullptr;
  size_t stack_size = 0;
  uint3 tid{0, 0, 0};
  unsigned linear = 0;
  St st = St::Ready;
  int line = 0;  // where it waits
  std::vector<Copy> copies;
  unsigned next_group = 1;
  const void* mbar = nullptr;  // St::Mbar: the mbarrier it waits on (dlc_emu_sm90.h)
  void* asan_fake = nullptr;
};

// A lane's operands at a warp collective: pointers into the lane's own (suspended) stack.
struct LaneArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  void* out = nullptr;
  int arg = 0;
};

struct Warp {
  unsigned size = 0, arrived = 0, exited = 0;
  Op op = Op::Sum;
  int line = 0;
  int count = 0;  // ldmatrix: matrices
  LaneArgs lanes[32];
};

// Shadow state of one 4-byte shared-memory word, for ldmatrix's checks.
constexpr uint32_t kInFlight = 1u << 31;  // | thread: a cp.async to it is queued
constexpr uint32_t kLanded = 1u << 30;    // | thread: landed, no __syncthreads since

struct Runtime {
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  unsigned nthreads = 0, bar_arrived = 0, exited = 0;
  int bar_line = 0;
  Fiber* cur = nullptr;
  void* sched_sp = nullptr;
#if !defined(DLC_EMU_ASM_SWITCH)
  ucontext_t sched_ctx;
#endif
  const void* main_bottom = nullptr;
  size_t main_size = 0;
  void (*body)(void*) = nullptr;
  void* body_ctx = nullptr;
  unsigned char* dyn = nullptr;
  size_t dyn_bytes = 0;
  unsigned char* stacks = nullptr;
  size_t stacks_bytes = 0, stack_size = 0;
  std::vector<uint32_t> shadow_dyn, shadow_static;
  std::vector<uint32_t*> landed;  // shadow words marked kLanded since the last barrier
  std::vector<std::pair<const unsigned char*, size_t>> globals;  // registered global buffers
  bool in_kernel = false;
};

static Runtime g_rt;
inline Runtime& rt() { return g_rt; }

inline unsigned char* dyn_smem() { return rt().dyn; }

[[noreturn]] __attribute__((format(printf, 1, 2))) inline void fail(const char* fmt, ...) {
  Runtime& r = rt();
  std::fflush(stdout);
  std::fprintf(stderr, "dlc_emu: ");
  if (r.in_kernel && r.cur != nullptr) {
    std::fprintf(stderr, "block (%u,%u,%u) thread (%u,%u,%u): ", g_block_idx.x, g_block_idx.y,
                 g_block_idx.z, r.cur->tid.x, r.cur->tid.y, r.cur->tid.z);
  }
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::_Exit(kFailStatus);
}

// Static shared memory: the section dlc_emu_smem (absent when no kernel declares __shared__ or
// the section is not used).
#if defined(DLC_EMU_SMEM_SECTION)
extern "C" unsigned char __start_dlc_emu_smem[] __attribute__((weak));
extern "C" unsigned char __stop_dlc_emu_smem[] __attribute__((weak));
inline unsigned char* static_smem_begin() { return __start_dlc_emu_smem; }
inline size_t static_smem_bytes() {
  if (__start_dlc_emu_smem == nullptr) return 0;
  return (size_t)(__stop_dlc_emu_smem - __start_dlc_emu_smem);
}
#else
inline unsigned char* static_smem_begin() { return nullptr; }
inline size_t static_smem_bytes() { return 0; }
#endif

inline bool within(const void* p, size_t n, const unsigned char* base, size_t bytes) {
  const unsigned char* q = static_cast<const unsigned char*>(p);
  return base != nullptr && q >= base && q + n <= base + bytes;
}

// The shadow word of a shared-memory address, or null outside the known shared windows.
inline uint32_t* shadow_of(const void* p) {
  Runtime& r = rt();
  const unsigned char* q = static_cast<const unsigned char*>(p);
  if (within(p, 1, r.dyn, r.dyn_bytes)) return &r.shadow_dyn[(size_t)(q - r.dyn) / 4];
  if (within(p, 1, static_smem_begin(), static_smem_bytes()))
    return &r.shadow_static[(size_t)(q - static_smem_begin()) / 4];
  return nullptr;
}

// Whether [p, p+n) lies inside one registered global buffer.
inline bool in_global(const void* p, size_t n) {
  for (const auto& g : rt().globals)
    if (within(p, n, g.first, g.second)) return true;
  return false;
}

// Whether [p, p+n) overlaps [base, base+bytes).
inline bool overlaps(const void* p, size_t n, const unsigned char* base, size_t bytes) {
  const unsigned char* q = static_cast<const unsigned char*>(p);
  return base != nullptr && q < base + bytes && q + n > base;
}

// Whether [p, p+n) may be shared memory: inside the dynamic buffer or the dlc_emu_smem section,
// or else in neither a registered global buffer nor a fiber stack (a __shared__ variable the
// emulation could not place in its section).
inline bool in_smem(const void* p, size_t n) {
  Runtime& r = rt();
  if (within(p, n, r.dyn, r.dyn_bytes) || within(p, n, static_smem_begin(), static_smem_bytes()))
    return true;
  if (overlaps(p, n, r.stacks, r.stacks_bytes)) return false;
  for (const auto& g : r.globals)
    if (overlaps(p, n, g.first, g.second)) return false;
  return true;
}

// ---- context switch ---------------------------------------------------------------------------
#if defined(DLC_EMU_ASM_SWITCH)
extern "C" void dlc_emu_switch(void** save_sp, void* load_sp);
// Saves the callee-saved registers on the current stack, stores the stack pointer in *save_sp,
// loads load_sp and restores the registers saved there.
asm(R"(
  .pushsection .text
  .weak dlc_emu_switch
  .type dlc_emu_switch, @function
dlc_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size dlc_emu_switch, .-dlc_emu_switch
  .popsection
)");
#endif

inline void fiber_main();

#if !defined(DLC_EMU_ASM_SWITCH)
inline void fiber_main_uc() { fiber_main(); }
#endif

// From the scheduler into fiber f, back when f yields or exits.
inline void enter(Fiber& f) {
  Runtime& r = rt();
  r.cur = &f;
  g_thread_idx = f.tid;
#if defined(DLC_EMU_ASAN)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, f.stack_size);
#endif
#if defined(DLC_EMU_ASM_SWITCH)
  dlc_emu_switch(&r.sched_sp, f.sp);
#else
  swapcontext(&r.sched_ctx, &f.ctx);
#endif
  asm volatile("" ::: "memory");
#if defined(DLC_EMU_ASAN)
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

// From the current fiber back to the scheduler; returns when the scheduler enters it again.
inline void yield() {
  Runtime& r = rt();
  Fiber& f = *r.cur;
#if defined(DLC_EMU_ASAN)
  __sanitizer_start_switch_fiber(f.st == St::Done ? nullptr : &f.asan_fake, r.main_bottom,
                                 r.main_size);
#endif
  asm volatile("" ::: "memory");  // other threads read and write shared memory meanwhile
#if defined(DLC_EMU_ASM_SWITCH)
  dlc_emu_switch(&f.sp, r.sched_sp);
#else
  swapcontext(&f.ctx, &r.sched_ctx);
#endif
  asm volatile("" ::: "memory");
#if defined(DLC_EMU_ASAN)
  __sanitizer_finish_switch_fiber(f.asan_fake, &r.main_bottom, &r.main_size);
#endif
}

// Prepares fiber f to start at fiber_main on its stack.
inline void init_fiber(Fiber& f) {
#if defined(DLC_EMU_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(f.stack, f.stack_size);
#endif
#if defined(DLC_EMU_ASM_SWITCH)
  uintptr_t top = ((uintptr_t)(f.stack + f.stack_size)) & ~(uintptr_t)15;
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;  // fiber_main's return address slot (it never returns): rsp = 8 mod 16
  *--sp = reinterpret_cast<void*>(&fiber_main);
  for (int i = 0; i < 6; ++i) *--sp = nullptr;  // rbp rbx r12 r13 r14 r15
  f.sp = sp;
#else
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack;
  f.ctx.uc_stack.ss_size = f.stack_size;
  f.ctx.uc_link = nullptr;
  makecontext(&f.ctx, &fiber_main_uc, 0);
#endif
}

// ---- cp.async -----------------------------------------------------------------------------------
inline void perform(const Copy& c) {
  std::memcpy(c.dst, c.data, c.size);
  Runtime& r = rt();
  for (unsigned o = 0; o < c.size; o += 4) {
    uint32_t* s = shadow_of(c.dst + o);
    if (s != nullptr) {
      *s = kLanded | r.cur->linear;
      r.landed.push_back(s);
    }
  }
}

// Lands the current thread's committed groups except the newest `keep`.
inline void land_groups(Fiber& f, unsigned keep) {
  const unsigned committed = f.next_group - 1;
  if (committed <= keep) return;
  const unsigned upto = committed - keep;
  size_t n = 0;
  while (n < f.copies.size() && f.copies[n].group != 0 && f.copies[n].group <= upto) {
    perform(f.copies[n]);
    ++n;
  }
  f.copies.erase(f.copies.begin(), f.copies.begin() + (std::ptrdiff_t)n);
}

inline void cp_async(void* smem, const void* gmem, int src_bytes, unsigned size) {
  Runtime& r = rt();
  if (!r.in_kernel) fail("cp.async outside a kernel");
  if ((uintptr_t)smem % size != 0 || (uintptr_t)gmem % size != 0)
    fail("dlc_cp_async_%u: addresses must be %u-byte aligned (smem %p, gmem %p)", size, size,
         smem, gmem);
  if (!in_smem(smem, size)) fail("dlc_cp_async_%u: destination %p is not shared memory", size, smem);
  if (src_bytes < 0 || (unsigned)src_bytes > size)
    fail("dlc_cp_async_%u: src_bytes %d is not in [0, %u]", size, src_bytes, size);
  if (src_bytes > 0 && !r.globals.empty() && !in_global(gmem, (size_t)src_bytes))
    fail("dlc_cp_async_%u: source [%p, +%d) is not inside one global buffer", size, gmem,
         src_bytes);
  Copy c;
  c.dst = static_cast<unsigned char*>(smem);
  c.group = 0;
  c.size = (unsigned char)size;
  std::memset(c.data, 0, sizeof c.data);
  if (src_bytes > 0) std::memcpy(c.data, gmem, (size_t)src_bytes);
  r.cur->copies.push_back(c);
  for (unsigned o = 0; o < size; o += 4) {
    uint32_t* s = shadow_of(c.dst + o);
    if (s != nullptr) *s = kInFlight | r.cur->linear;
  }
}

// SM90 state (mbarriers, TMA transfers, wgmma groups): dlc_emu_sm90.h.
inline void sm90_block_reset();
inline void sm90_thread_exit();
inline unsigned sm90_mbar_waiters();

// ---- barriers -----------------------------------------------------------------------------------
inline void release(St from) {
  for (Fiber& f : rt().fibers)
    if (f.st == from) f.st = St::Ready;
}

inline void syncthreads(int line) {
  Runtime& r = rt();
  if (!r.in_kernel) fail("__syncthreads() outside a kernel");
  Fiber& f = *r.cur;
  if (r.exited > 0)
    fail("divergent __syncthreads() at line %d: %u thread(s) of the block already exited, so the "
         "barrier can never complete",
         line, r.exited);
  if (r.bar_arrived > 0 && r.bar_line != line)
    fail("divergent __syncthreads(): this thread is at line %d while %u thread(s) wait at line %d",
         line, r.bar_arrived, r.bar_line);
  r.bar_line = line;
  f.st = St::Barrier;
  f.line = line;
  if (++r.bar_arrived == r.nthreads) {
    r.bar_arrived = 0;
    for (uint32_t* s : r.landed)
      if (*s & kLanded) *s = 0;
    r.landed.clear();
    release(St::Barrier);
  }
  yield();
}

// Computes a completed warp collective for its 32 lanes.
inline void complete(Warp& w);

inline void collective(Op op, int line, const LaneArgs& args, int count = 0) {
  Runtime& r = rt();
  if (!r.in_kernel) fail("%s outside a kernel", op_name(op));
  Fiber& f = *r.cur;
  Warp& w = r.warps[f.linear / 32];
  const unsigned lane = f.linear % 32;
  if (w.size < 32)
    fail("%s at line %d in a partial warp of %u threads: warp collectives need 32 lanes",
         op_name(op), line, w.size);
  if (w.exited > 0)
    fail("divergent %s at line %d: %u lane(s) of warp %u already exited", op_name(op), line,
         w.exited, f.linear / 32);
  if (w.arrived > 0 && (w.op != op || w.line != line || w.count != count))
    fail("divergent warp: lane %u is at %s (line %d) while %u lane(s) wait at %s (line %d)", lane,
         op_name(op), line, w.arrived, op_name(w.op), w.line);
  w.op = op;
  w.line = line;
  w.count = count;
  w.lanes[lane] = args;
  if (++w.arrived == 32) {
    complete(w);
    w.arrived = 0;
    for (unsigned i = 0; i < 32; ++i) {
      Fiber& g = r.fibers[(f.linear / 32) * 32 + i];
      if (g.st == St::Warp) g.st = St::Ready;
    }
    return;
  }
  f.st = St::Warp;
  f.line = line;
  yield();
}

inline void fiber_main() {
  Runtime& r = rt();
#if defined(DLC_EMU_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &r.main_bottom, &r.main_size);
#endif
  r.body(r.body_ctx);
  Fiber& f = *r.cur;
  for (const Copy& c : f.copies) perform(c);  // copies never waited for still land
  f.copies.clear();
  sm90_thread_exit();
  f.st = St::Done;
  ++r.exited;
  Warp& w = r.warps[f.linear / 32];
  ++w.exited;
  if (r.bar_arrived > 0)
    fail("divergent __syncthreads(): this thread exited while %u thread(s) wait at line %d",
         r.bar_arrived, r.bar_line);
  if (w.arrived > 0)
    fail("divergent warp: this lane exited while %u lane(s) of warp %u wait at %s (line %d)",
         w.arrived, f.linear / 32, op_name(w.op), w.line);
  yield();
  fail("internal error: a finished fiber was resumed");
}

// Reports a block in which every unfinished thread waits and none can proceed.
[[noreturn]] inline void deadlock() {
  Runtime& r = rt();
  r.cur = nullptr;
  char msg[512];
  int n = std::snprintf(msg, sizeof msg,
                        "block (%u,%u,%u) cannot make progress: %u thread(s) at __syncthreads() "
                        "(line %d), %u at an mbarrier wait, %u exited",
                        g_block_idx.x, g_block_idx.y, g_block_idx.z, r.bar_arrived, r.bar_line,
                        sm90_mbar_waiters(), r.exited);
  for (size_t i = 0; i < r.warps.size() && n > 0 && (size_t)n < sizeof msg; ++i) {
    const Warp& w = r.warps[i];
    if (w.arrived > 0)
      n += std::snprintf(msg + n, sizeof msg - (size_t)n, "; warp %zu: %u lane(s) at %s (line %d)",
                         i, w.arrived, op_name(w.op), w.line);
  }
  fail("%s", msg);
}

inline void poison_smem() {
  Runtime& r = rt();
  if (r.dyn_bytes > 0) std::memset(r.dyn, 0xff, r.dyn_bytes);
  if (static_smem_bytes() > 0) std::memset(static_smem_begin(), 0xff, static_smem_bytes());
  std::fill(r.shadow_dyn.begin(), r.shadow_dyn.end(), 0u);
  std::fill(r.shadow_static.begin(), r.shadow_static.end(), 0u);
  r.landed.clear();
}

inline void alloc_stacks(unsigned n) {
  Runtime& r = rt();
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
#if defined(DLC_EMU_ASAN)
  size_t kb = 512;
#else
  size_t kb = 128;
#endif
  if (const char* e = std::getenv("DLC_EMU_STACK_KB")) kb = (size_t)std::strtoul(e, nullptr, 10);
  const size_t stack = (kb * 1024 + page - 1) / page * page;
  const size_t need = n * (stack + page);  // each stack with a guard page below it
  if (r.stacks != nullptr && r.stack_size == stack && r.stacks_bytes >= need) return;
  if (r.stacks != nullptr) munmap(r.stacks, r.stacks_bytes);
  void* p = mmap(nullptr, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) fail("cannot map %zu bytes of fiber stacks", need);
  r.stacks = static_cast<unsigned char*>(p);
  r.stacks_bytes = need;
  r.stack_size = stack;
  for (unsigned i = 0; i < n; ++i) mprotect(r.stacks + i * (stack + page), page, PROT_NONE);
}

inline void run_grid(dim3 grid, dim3 block, size_t dyn_bytes, void (*body)(void*), void* ctx) {
  Runtime& r = rt();
  if (r.in_kernel) fail("dlc_emu::launch inside a kernel");
  const unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
  if (nt == 0 || nt > 1024 || block.z > 64)
    fail("invalid block (%u,%u,%u): 1 to 1024 threads, z at most 64", block.x, block.y, block.z);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 ||
      grid.x > 2147483647u)
    fail("invalid grid (%u,%u,%u)", grid.x, grid.y, grid.z);
  const unsigned n = (unsigned)nt;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  alloc_stacks(n);
  void* dyn = nullptr;
  if (posix_memalign(&dyn, 1024, dyn_bytes > 0 ? dyn_bytes : 1) != 0)
    fail("cannot allocate %zu bytes of dynamic shared memory", dyn_bytes);
  r.dyn = static_cast<unsigned char*>(dyn);
  r.dyn_bytes = dyn_bytes;
  r.shadow_dyn.assign((dyn_bytes + 3) / 4, 0u);
  r.shadow_static.assign((static_smem_bytes() + 3) / 4, 0u);
  r.fibers.assign(n, Fiber());
  r.warps.assign((n + 31) / 32, Warp());
  for (unsigned i = 0; i < n; ++i) {
    Fiber& f = r.fibers[i];
    f.linear = i;
    f.tid = uint3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
    f.stack = r.stacks + i * (r.stack_size + page) + page;
    f.stack_size = r.stack_size;
    r.warps[i / 32].size++;
  }
  g_block_dim = block;
  g_grid_dim = grid;
  r.nthreads = n;
  r.body = body;
  r.body_ctx = ctx;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        g_block_idx = uint3{bx, by, bz};
        poison_smem();
        sm90_block_reset();
        r.bar_arrived = 0;
        r.exited = 0;
        for (Warp& w : r.warps) w.arrived = w.exited = 0;
        for (Fiber& f : r.fibers) {
          f.st = St::Ready;
          f.copies.clear();
          f.next_group = 1;
          init_fiber(f);
        }
        r.in_kernel = true;
        unsigned done = 0;
        while (done < n) {
          bool ran = false;
          done = 0;
          for (Fiber& f : r.fibers) {
            if (f.st == St::Ready) {
              enter(f);
              ran = true;
            }
            if (f.st == St::Done) ++done;
          }
          if (!ran && done < n) deadlock();
        }
        r.in_kernel = false;
        r.cur = nullptr;
      }
  std::free(r.dyn);
  r.dyn = nullptr;
  r.dyn_bytes = 0;
  g_thread_idx = uint3{0, 0, 0};
}

// A fault inside a kernel names the block and thread (outside ASan, which has its own report).
inline void on_fault(int sig) {
  Runtime& r = rt();
  char msg[200];
  int n = std::snprintf(msg, sizeof msg, "dlc_emu: signal %d", sig);
  if (r.in_kernel && r.cur != nullptr)
    n += std::snprintf(msg + n, sizeof msg - (size_t)n, " in block (%u,%u,%u) thread (%u,%u,%u)",
                       g_block_idx.x, g_block_idx.y, g_block_idx.z, r.cur->tid.x, r.cur->tid.y,
                       r.cur->tid.z);
  std::snprintf(msg + n, sizeof msg - (size_t)n,
                " (a bad address, or a fiber stack overflow: raise DLC_EMU_STACK_KB)\n");
  ssize_t ignored = write(2, msg, std::strlen(msg));
  (void)ignored;
  signal(sig, SIG_DFL);
  raise(sig);
}

static bool g_fault_handler = false;
static unsigned char g_altstack[65536];

inline void install_fault_handler() {
#if !defined(DLC_EMU_ASAN)
  if (g_fault_handler) return;
  g_fault_handler = true;
  stack_t ss{};
  ss.ss_sp = g_altstack;
  ss.ss_size = sizeof g_altstack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_handler = &on_fault;
  sa.sa_flags = SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
#endif
}

inline int lane_of_current() { return (int)(rt().cur->linear % 32); }

}  // namespace detail

/// Declares [p, p+bytes) a global-memory buffer: cp.async sources must lie in one, and ldmatrix
/// rows and cp.async destinations must not (the host runner registers every buffer).
inline void register_global(const void* p, size_t bytes) {
  detail::rt().globals.emplace_back(static_cast<const unsigned char*>(p), bytes);
}

/// Runs body() once per thread of every block of the grid (see the top of dlc_emu.h).
template <class F>
void launch(dim3 grid, dim3 block, size_t dyn_smem_bytes, F&& body) {
  using B = std::remove_reference_t<F>;
  detail::install_fault_handler();
  detail::run_grid(
      grid, block, dyn_smem_bytes, [](void* p) { (*static_cast<B*>(p))(); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

}  // namespace dlc_emu

// ---------------------------------------------------------------------------------------------
// Kernel-side API: barriers, warp level, tensor cores, async copies
// ---------------------------------------------------------------------------------------------
inline void __syncthreads(int line = __builtin_LINE()) { dlc_emu::detail::syncthreads(line); }

inline unsigned dlc_lane() {
  if (!dlc_emu::detail::rt().in_kernel) dlc_emu::detail::fail("dlc_lane() outside a kernel");
  return dlc_emu::detail::rt().cur->linear % 32;
}
inline unsigned dlc_warp() {
  if (!dlc_emu::detail::rt().in_kernel) dlc_emu::detail::fail("dlc_warp() outside a kernel");
  return dlc_emu::detail::rt().cur->linear / 32;
}

namespace dlc_emu {
namespace detail {
inline float warp_value(Op op, float v, int arg, int line) {
  float out = 0.0f;
  LaneArgs a;
  a.a = &v;
  a.out = &out;
  a.arg = arg;
  collective(op, line, a);
  return out;
}
}  // namespace detail
}  // namespace dlc_emu

inline float dlc_shfl_xor(float v, int lane_mask, int line = __builtin_LINE()) {
  return dlc_emu::detail::warp_value(dlc_emu::detail::Op::ShflXor, v, lane_mask, line);
}
inline float dlc_shfl(float v, int src_lane, int line = __builtin_LINE()) {
  return dlc_emu::detail::warp_value(dlc_emu::detail::Op::Shfl, v, src_lane, line);
}
// An i32 lane value moved bit for bit (the collective carries 32-bit words).
inline int dlc_shfl_i32(int v, int src_lane, int line = __builtin_LINE()) {
  float f;
  __builtin_memcpy(&f, &v, sizeof f);
  float r = dlc_emu::detail::warp_value(dlc_emu::detail::Op::Shfl, f, src_lane, line);
  int out;
  __builtin_memcpy(&out, &r, sizeof out);
  return out;
}
inline float dlc_warp_sum(float v, int line = __builtin_LINE()) {
  return dlc_emu::detail::warp_value(dlc_emu::detail::Op::Sum, v, 0, line);
}
inline float dlc_warp_max(float v, int line = __builtin_LINE()) {
  return dlc_emu::detail::warp_value(dlc_emu::detail::Op::Max, v, 0, line);
}
inline float dlc_warp_min(float v, int line = __builtin_LINE()) {
  return dlc_emu::detail::warp_value(dlc_emu::detail::Op::Min, v, 0, line);
}

inline void dlc_mma_m16n8k16_f16(float d[4], const unsigned a[4], const unsigned b[2],
                                 const float c[4], int line = __builtin_LINE()) {
  dlc_emu::detail::LaneArgs x;
  x.a = a;
  x.b = b;
  x.c = c;
  x.out = d;
  dlc_emu::detail::collective(dlc_emu::detail::Op::MmaF16, line, x);
}
inline void dlc_mma_m16n8k16_bf16(float d[4], const unsigned a[4], const unsigned b[2],
                                  const float c[4], int line = __builtin_LINE()) {
  dlc_emu::detail::LaneArgs x;
  x.a = a;
  x.b = b;
  x.c = c;
  x.out = d;
  dlc_emu::detail::collective(dlc_emu::detail::Op::MmaBf16, line, x);
}

namespace dlc_emu {
namespace detail {
inline void ldmatrix(unsigned* r, const void* row, int count, bool trans, int line) {
  LaneArgs x;
  x.a = row;
  x.out = r;
  collective(trans ? Op::LdTrans : Op::Ld, line, x, count);
}
}  // namespace detail
}  // namespace dlc_emu

inline void dlc_ldmatrix_x1(unsigned r[1], const void* p, int line = __builtin_LINE()) {
  dlc_emu::detail::ldmatrix(r, p, 1, false, line);
}
inline void dlc_ldmatrix_x2(unsigned r[2], const void* p, int line = __builtin_LINE()) {
  dlc_emu::detail::ldmatrix(r, p, 2, false, line);
}
inline void dlc_ldmatrix_x4(unsigned r[4], const void* p, int line = __builtin_LINE()) {
  dlc_emu::detail::ldmatrix(r, p, 4, false, line);
}
inline void dlc_ldmatrix_x1_trans(unsigned r[1], const void* p, int line = __builtin_LINE()) {
  dlc_emu::detail::ldmatrix(r, p, 1, true, line);
}
inline void dlc_ldmatrix_x2_trans(unsigned r[2], const void* p, int line = __builtin_LINE()) {
  dlc_emu::detail::ldmatrix(r, p, 2, true, line);
}
inline void dlc_ldmatrix_x4_trans(unsigned r[4], const void* p, int line = __builtin_LINE()) {
  dlc_emu::detail::ldmatrix(r, p, 4, true, line);
}

namespace dlc_emu {
namespace detail {
// A vector access of global memory: `bytes` wide, aligned to `bytes`, inside one buffer.
inline void check_vector(const char* what, const void* gmem, unsigned bytes) {
  Runtime& r = rt();
  if (!r.in_kernel) fail("%s<%u> outside a kernel", what, bytes);
  if ((uintptr_t)gmem % bytes != 0)
    fail("%s<%u>: global address %p is not %u-byte aligned", what, bytes, gmem, bytes);
  if (!r.globals.empty() && !in_global(gmem, bytes))
    fail("%s<%u>: [%p, +%u) is not inside one global buffer", what, bytes, gmem, bytes);
}
}  // namespace detail
}  // namespace dlc_emu

template <int BYTES>
inline void dlc_ld_vec(void* regs, const void* gmem) {
  static_assert(BYTES == 2 || BYTES == 4 || BYTES == 8 || BYTES == 16, "dlc_ld_vec width");
  dlc_emu::detail::check_vector("dlc_ld_vec", gmem, BYTES);
  std::memcpy(regs, gmem, BYTES);
}
template <int BYTES>
inline void dlc_st_vec(void* gmem, const void* regs) {
  static_assert(BYTES == 2 || BYTES == 4 || BYTES == 8 || BYTES == 16, "dlc_st_vec width");
  dlc_emu::detail::check_vector("dlc_st_vec", gmem, BYTES);
  std::memcpy(gmem, regs, BYTES);
}

inline void dlc_cp_async_16(void* smem, const void* gmem, int src_bytes) {
  dlc_emu::detail::cp_async(smem, gmem, src_bytes, 16);
}
inline void dlc_cp_async_8(void* smem, const void* gmem, int src_bytes) {
  dlc_emu::detail::cp_async(smem, gmem, src_bytes, 8);
}
inline void dlc_cp_async_4(void* smem, const void* gmem, int src_bytes) {
  dlc_emu::detail::cp_async(smem, gmem, src_bytes, 4);
}
inline void dlc_cp_async_commit() {
  dlc_emu::detail::Runtime& r = dlc_emu::detail::rt();
  if (!r.in_kernel) dlc_emu::detail::fail("dlc_cp_async_commit outside a kernel");
  dlc_emu::detail::Fiber& f = *r.cur;
  for (dlc_emu::detail::Copy& c : f.copies)
    if (c.group == 0) c.group = f.next_group;
  ++f.next_group;  // an empty group counts too
}
template <int N>
inline void dlc_cp_async_wait() {
  static_assert(N >= 0, "dlc_cp_async_wait<N>: N >= 0");
  dlc_emu::detail::Runtime& r = dlc_emu::detail::rt();
  if (!r.in_kernel) dlc_emu::detail::fail("dlc_cp_async_wait outside a kernel");
  dlc_emu::detail::land_groups(*r.cur, (unsigned)N);
}

