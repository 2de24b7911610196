// dlc_emu_warp.h: the third part of the host emulation header (EMU_HEADER is dlc_emu.h,
// dlc_emu_runtime.h and this file, concatenated): what a warp collective computes once its 32
// lanes arrived, following the PTX ISA's fragment layouts. Not meant to be included on its own.

namespace dlc_emu {
namespace detail {

inline float lane_float(const Warp& w, unsigned lane) {
  return *static_cast<const float*>(w.lanes[lane].a);
}

inline float add_f(float a, float b) { return a + b; }

// The device's butterfly: v = f(v, shfl_xor(v, off)) for off = 16, 8, 4, 2, 1.
inline void butterfly(Warp& w, float (*f)(float, float)) {
  float v[32], t[32];
  for (unsigned i = 0; i < 32; ++i) v[i] = lane_float(w, i);
  for (unsigned off = 16; off > 0; off >>= 1) {
    for (unsigned i = 0; i < 32; ++i) t[i] = f(v[i], v[i ^ off]);
    std::memcpy(v, t, sizeof v);
  }
  for (unsigned i = 0; i < 32; ++i) *static_cast<float*>(w.lanes[i].out) = v[i];
}

inline float half_of(unsigned reg, unsigned hi, bool bf16) {
  const unsigned short bits = (unsigned short)(hi ? reg >> 16 : reg & 0xffffu);
  return bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32. With g = lane >> 2 and
// t = lane & 3 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"):
//   A (16x16): a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..], a[2] = A[g][2t+8..], a[3] = A[g+8][2t+8..]
//   B (16x8, k x n): b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g]
//   C, D (16x8): c[0..1] = C[g][2t..2t+1], c[2..3] = C[g+8][2t..2t+1]
// (lower-indexed element in the low 16 bits). Products are exact; the 16 products and C are
// summed in double and rounded to float once.
inline void mma(Warp& w, bool bf16) {
  float A[16][16], B[16][8], C[16][8];
  for (unsigned l = 0; l < 32; ++l) {
    const unsigned g = l >> 2, t = l & 3;
    const unsigned* a = static_cast<const unsigned*>(w.lanes[l].a);
    const unsigned* b = static_cast<const unsigned*>(w.lanes[l].b);
    const float* c = static_cast<const float*>(w.lanes[l].c);
    for (unsigned h = 0; h < 2; ++h) {
      A[g][2 * t + h] = half_of(a[0], h, bf16);
      A[g + 8][2 * t + h] = half_of(a[1], h, bf16);
      A[g][2 * t + 8 + h] = half_of(a[2], h, bf16);
      A[g + 8][2 * t + 8 + h] = half_of(a[3], h, bf16);
      B[2 * t + h][g] = half_of(b[0], h, bf16);
      B[2 * t + 8 + h][g] = half_of(b[1], h, bf16);
      C[g][2 * t + h] = c[h];
      C[g + 8][2 * t + h] = c[2 + h];
    }
  }
  float D[16][8];
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      double s = C[i][j];
      for (unsigned k = 0; k < 16; ++k) s += (double)A[i][k] * (double)B[k][j];
      D[i][j] = (float)s;
    }
  for (unsigned l = 0; l < 32; ++l) {
    const unsigned g = l >> 2, t = l & 3;
    float* d = static_cast<float*>(w.lanes[l].out);
    d[0] = D[g][2 * t];
    d[1] = D[g][2 * t + 1];
    d[2] = D[g + 8][2 * t];
    d[3] = D[g + 8][2 * t + 1];
  }
}

// ldmatrix.sync.aligned.m8n8.x{1,2,4}{,.trans}.shared.b16: lane 8m+i gives the address of row i
// of matrix m (16 bytes, 16-byte aligned). With g = lane >> 2 and t = lane & 3, register m of a
// lane holds M_m[g][2t..2t+1], or with .trans M_m[2t][g] (low half) and M_m[2t+1][g] (high half).
inline void ldmatrix_complete(Warp& w, bool trans) {
  Runtime& r = rt();
  const unsigned this_warp = r.cur->linear / 32;
  unsigned short M[4][8][8];
  for (int m = 0; m < w.count; ++m)
    for (unsigned i = 0; i < 8; ++i) {
      const void* p = w.lanes[m * 8 + i].a;
      if ((uintptr_t)p % 16 != 0)
        fail("%s (line %d): lane %u's row address %p is not 16-byte aligned", op_name(w.op), w.line,
             m * 8 + i, p);
      if (!in_smem(p, 16))
        fail("%s (line %d): lane %u's row address %p is not shared memory", op_name(w.op), w.line,
             m * 8 + i, p);
      for (unsigned o = 0; o < 16; o += 4) {
        const uint32_t* s = shadow_of(static_cast<const unsigned char*>(p) + o);
        if (s == nullptr || *s == 0) continue;
        const unsigned writer = *s & 0xffffu;
        if (*s & kInFlight)
          fail("%s (line %d) reads %p while thread %u's cp.async to it is still in flight (no "
               "dlc_cp_async_wait covers it)",
               op_name(w.op), w.line, p, writer);
        if (writer / 32 != this_warp)
          fail("%s (line %d) reads %p, which thread %u (warp %u) wrote with cp.async, with no "
               "__syncthreads() since it landed",
               op_name(w.op), w.line, p, writer, writer / 32);
      }
      std::memcpy(M[m][i], p, 16);
    }
  for (unsigned l = 0; l < 32; ++l) {
    const unsigned g = l >> 2, t = l & 3;
    unsigned* out = static_cast<unsigned*>(w.lanes[l].out);
    for (int m = 0; m < w.count; ++m) {
      const unsigned lo = trans ? M[m][2 * t][g] : M[m][g][2 * t];
      const unsigned hi = trans ? M[m][2 * t + 1][g] : M[m][g][2 * t + 1];
      out[m] = lo | (hi << 16);
    }
  }
}

inline void complete(Warp& w) {
  switch (w.op) {
    case Op::ShflXor:
    case Op::Shfl: {
      float v[32];
      for (unsigned i = 0; i < 32; ++i) v[i] = lane_float(w, i);
      for (unsigned i = 0; i < 32; ++i) {
        const unsigned arg = (unsigned)w.lanes[i].arg;
        // shfl.sync.bfly: a source lane past 31 reads its own value; shfl.sync.idx: lane mod 32.
        const unsigned j = w.op == Op::ShflXor ? ((i ^ arg) < 32 ? (i ^ arg) : i) : (arg & 31u);
        *static_cast<float*>(w.lanes[i].out) = v[j];
      }
      break;
    }
    case Op::Sum: butterfly(w, &add_f); break;
    case Op::Max: butterfly(w, &dlc_max); break;
    case Op::Min: butterfly(w, &dlc_min); break;
    case Op::MmaF16: mma(w, false); break;
    case Op::MmaBf16: mma(w, true); break;
    case Op::Ld: ldmatrix_complete(w, false); break;
    case Op::LdTrans: ldmatrix_complete(w, true); break;
  }
}

}  // namespace detail
}  // namespace dlc_emu
