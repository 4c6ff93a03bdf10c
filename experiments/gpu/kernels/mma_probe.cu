// mma_probe.cu: one warp per case runs a chain of mma.sync m16n8k32 instructions (D = A·B + C, D fed back as
// C) on a 16 x 8 tile, K = 32·nk, with FP8 (e4m3 / e5m2, f32 accumulator) or INT8 (s8, s32 accumulator,
// with and without .satfinite) operands. Driven by mma_probe.py (CuPy). Fragment layouts: PTX ISA, "Matrix
// Fragments for mma.m16n8k32" (8-bit types): groupID = lane / 4, tig = lane % 4;
//   A (16 x 32, row-major)  a_i, i = 0..15 (4 registers of 4 bytes): row = groupID (+8 for i in 4..7, 12..15),
//                           col = tig·4 + (i & 3) (+16 for i >= 8)
//   B (32 x 8, column)      b_i, i = 0..7 (2 registers): row = tig·4 + (i & 3) (+16 for i >= 4), col = groupID
//   C, D (16 x 8)           c_i, i = 0..3: row = groupID (+8 for i >= 2), col = tig·2 + (i & 1)
// Memory: A per case nk x 16 x 32 bytes (row-major), Bt per case nk x 8 x 32 bytes (B transposed: column j's
// 32 k values contiguous), C0 and D per case 16 x 8 (row-major) of float or int.
#include <cstdint>

__device__ __forceinline__ unsigned pack4(const unsigned char* p) {
  return (unsigned)p[0] | ((unsigned)p[1] << 8) | ((unsigned)p[2] << 16) | ((unsigned)p[3] << 24);
}

template <int KIND>  // 0: e4m3, 1: e5m2, 2: s8, 3: s8 .satfinite
__device__ void run(const unsigned char* A, const unsigned char* Bt, const void* C0, void* D, int nk) {
  const int w = blockIdx.x, lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  const unsigned char* a = A + (unsigned long long)w * nk * 16 * 32;
  const unsigned char* b = Bt + (unsigned long long)w * nk * 8 * 32;
  unsigned c[4];
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i >= 2 ? 8 : 0), col = t * 2 + (i & 1);
    c[i] = ((const unsigned*)C0)[(unsigned long long)w * 128 + row * 8 + col];
  }
  for (int q = 0; q < nk; ++q) {
    const unsigned char* aq = a + q * 16 * 32;
    const unsigned char* bq = b + q * 8 * 32;
    unsigned ra[4], rb[2];
    // a_i for i = 4r .. 4r+3 share a register: r = 0: (g, tig·4 ..), 1: (g+8, ..), 2: (g, .. +16), 3: (g+8, .. +16)
    ra[0] = pack4(aq + g * 32 + t * 4);
    ra[1] = pack4(aq + (g + 8) * 32 + t * 4);
    ra[2] = pack4(aq + g * 32 + t * 4 + 16);
    ra[3] = pack4(aq + (g + 8) * 32 + t * 4 + 16);
    rb[0] = pack4(bq + g * 32 + t * 4);
    rb[1] = pack4(bq + g * 32 + t * 4 + 16);
    if (KIND == 0)
      asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3]) : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
    else if (KIND == 1)
      asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3]) : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
    else if (KIND == 2)
      asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3]) : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
    else
      asm volatile("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3]) : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
  }
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i >= 2 ? 8 : 0), col = t * 2 + (i & 1);
    ((unsigned*)D)[(unsigned long long)w * 128 + row * 8 + col] = c[i];
  }
}

extern "C" __global__ void mma_e4m3(const unsigned char* A, const unsigned char* Bt, const void* C0, void* D, int nk) { run<0>(A, Bt, C0, D, nk); }
extern "C" __global__ void mma_e5m2(const unsigned char* A, const unsigned char* Bt, const void* C0, void* D, int nk) { run<1>(A, Bt, C0, D, nk); }
extern "C" __global__ void mma_s8(const unsigned char* A, const unsigned char* Bt, const void* C0, void* D, int nk) { run<2>(A, Bt, C0, D, nk); }
extern "C" __global__ void mma_s8_sat(const unsigned char* A, const unsigned char* Bt, const void* C0, void* D, int nk) { run<3>(A, Bt, C0, D, nk); }
