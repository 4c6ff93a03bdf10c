// mufu_probe.cu: the GPU's multi-function unit (MUFU) approximations of 2^x and 1/x, evaluated through
// inline PTX on float32 bit patterns, and tests of bit-exact models of them.
// Driven by mufu_probe.py (cupy loads the cubin: nvcc -cubin -arch=sm_90 -O3 mufu_probe.cu). Compiled WITHOUT
// -ftz / --use_fast_math on purpose: the helper arithmetic (x * 2^F, floorf, ...) must keep subnormals.
//
// Kernels (all extern "C"; counters are unsigned long long, zeroed by the caller):
//   eval_op(op, base, n, out)        out[i] = bits(op(float(base + i))), op 0 ex2.approx.ftz.f32,
//                                    1 ex2.approx.f32 (no ftz), 2 rcp.approx.ftz.f32
//   eval_list(op, in, n, out)        the same on a list of bit patterns
//   ex2_stats(base, n, meas, c)      meas against RN(2^x) (float64 exp2 rounded to nearest float32):
//                                    ulp-difference histogram, max error in ulps, zero/inf/NaN counts,
//                                    most negative x with a non-zero result, largest x with a finite result
//   ex2_struct(F, mode, c)           all 2^32 inputs: does ex2(x) == ex2(rep(x)), rep(x) = mode(x * 2^F) / 2^F,
//                                    for every normal x whose ulp is finer than 2^-F? (mode 0 floor, 1 ceil,
//                                    2 trunc, 3 round-half-even, 4 round-half-away)
//   ex2_model(F, mode, g, h, use_h, c, ex)  all 2^32 inputs against the model: X = mode(x * 2^F)
//                                    (integer), n = X >> F, k = X mod 2^F, result = g[k] * 2^n (exponent field
//                                    + n; e <= 0 -> +0, e >= 255 -> +inf); with use_h, negative x in
//                                    sign-magnitude instead: T = mode(|x| * 2^F), result h[T mod 2^F] *
//                                    2^-(T >> F); NaN -> NaN, +inf -> +inf, -inf -> +0, |x| < 2^-126 -> 1
//                                    (ftz). Counts and mismatches per category.
//   ex2_table(F, kind, sgn, n, out)  out[k] for x_k = sgn * k * 2^-F: kind 0 measured ex2.approx.ftz,
//                                    1 RN(2^x_k), 2 RZ, 3 RU (from float64 exp2; see the caveat in the README)
//   rcp_stats(base, n, meas, c)      meas against __frcp_rn(x) (correctly rounded), as ex2_stats
//   rcp_struct(F, mode, c)           x in [1, 2): rcp(x) == rcp(rep(x)), rep = mantissa cut to F bits?
//   rcp_model(r, c, ex)              all 2^32 inputs against: rcp(+-1.m * 2^E) = +-r[m] * 2^-E (exponent field
//                                    - E; <= 0 -> +-0), +-0 and subnormals -> +-inf, +-inf -> +-0, NaN -> NaN
#include <stdint.h>
#include <math.h>

#define DEV __device__ __forceinline__

DEV float ex2_ftz(float x) { float y; asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
DEV float ex2_full(float x) { float y; asm volatile("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
DEV float rcp_ftz(float x) { float y; asm volatile("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }

DEV float apply_op(int op, float x) { return op == 0 ? ex2_ftz(x) : (op == 1 ? ex2_full(x) : rcp_ftz(x)); }

DEV float round_mode_f(int mode, float t) {
  switch (mode) {
    case 0: return floorf(t);
    case 1: return ceilf(t);
    case 2: return truncf(t);
    case 3: return rintf(t);
    default: return roundf(t);
  }
}
DEV double round_mode_d(int mode, double t) {
  switch (mode) {
    case 0: return floor(t);
    case 1: return ceil(t);
    case 2: return trunc(t);
    case 3: return rint(t);
    default: return round(t);
  }
}

extern "C" __global__ void eval_op(int op, uint32_t base, uint32_t n, uint32_t* out) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = __float_as_uint(apply_op(op, __uint_as_float(base + i)));
}

extern "C" __global__ void eval_list(int op, const uint32_t* in, uint32_t n, uint32_t* out) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = __float_as_uint(apply_op(op, __uint_as_float(in[i])));
}

// ---------------------------------------------------------------------------------------- statistics
// c: [0] unused (the caller knows n), [1] NaN results, [2] +inf results, [3] zero results, [4] subnormal results,
//    [5] compared (reference normal and finite), [6] exact (== reference),
//    [7 .. 7+2*HB] histogram of meas_bits - ref_bits in [-HB, HB], [8+2*HB] below, [9+2*HB] above,
//    [10+2*HB] max |meas - exact| in ulps of the reference (double bits),
//    [11+2*HB] most negative x with a non-zero, non-NaN result (bits, as max over negative bit patterns),
//    [12+2*HB] largest x >= 0 with a finite result (bits), [13+2*HB] bits of x at the max ulp error
#define HB 8
#define NSTAT (14 + 2 * HB)

DEV void stats_common(float x, uint32_t m, float ref, double exact, unsigned int* sh, unsigned long long* c) {
  float y = __uint_as_float(m);
  if (isnan(y)) atomicAdd(&sh[1], 1u);
  else if (isinf(y)) atomicAdd(&sh[2], 1u);
  else if (y == 0.0f) atomicAdd(&sh[3], 1u);
  else if (fabsf(y) < 1.17549435e-38f) atomicAdd(&sh[4], 1u);
  uint32_t xb = __float_as_uint(x);
  if (!isnan(y) && y != 0.0f && !isnan(x) && (xb >> 31)) atomicMax(&c[11 + 2 * HB], (unsigned long long)xb);
  if (!isnan(y) && !isinf(y) && !isnan(x) && !(xb >> 31)) atomicMax(&c[12 + 2 * HB], (unsigned long long)xb);
  if (isnan(x) || isinf(x) || isnan(ref) || isinf(ref) || fabsf(ref) < 1.17549435e-38f) return;
  atomicAdd(&sh[5], 1u);
  uint32_t rb = __float_as_uint(ref);
  long long d = (long long)(m & 0x7fffffffu) - (long long)(rb & 0x7fffffffu);
  if ((m >> 31) != (rb >> 31)) d = 1000000;  // sign differs: far off
  if (d == 0) atomicAdd(&sh[6], 1u);
  int bin = d < -HB ? 2 * HB + 1 : (d > HB ? 2 * HB + 2 : (int)d + HB);
  atomicAdd(&sh[7 + bin], 1u);
  if (!isnan(y) && !isinf(y)) {
    int e;
    frexp(fabs(exact), &e);                   // |exact| in [2^(e-1), 2^e): float ulp 2^(e-24)
    double ulp = ldexp(1.0, e - 24);
    double err = fabs((double)y - exact) / ulp;
    unsigned long long eb = (unsigned long long)__double_as_longlong(err);
    unsigned long long old = atomicMax(&c[10 + 2 * HB], eb);
    if (eb > old) c[13 + 2 * HB] = xb;       // racy but only a witness
  }
}

DEV void flush_shared(unsigned int* sh, unsigned long long* c) {
  __syncthreads();
  for (int j = threadIdx.x; j < 10 + 2 * HB; j += blockDim.x)
    if (j != 0 && sh[j]) atomicAdd(&c[j], (unsigned long long)sh[j]);
}

extern "C" __global__ void ex2_stats(uint32_t base, uint32_t n, const uint32_t* meas, unsigned long long* c) {
  __shared__ unsigned int sh[16 + 2 * HB];
  for (int j = threadIdx.x; j < 16 + 2 * HB; j += blockDim.x) sh[j] = 0;
  __syncthreads();
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float x = __uint_as_float(base + i);
    double exact = exp2((double)x);
    float ref = __double2float_rn(exact);
    if (fabsf(x) < 1.17549435e-38f) { exact = 1.0; ref = 1.0f; }  // ftz input: compare with 2^0
    stats_common(x, meas[i], ref, exact, sh, c);
  }
  flush_shared(sh, c);
}

extern "C" __global__ void rcp_stats(uint32_t base, uint32_t n, const uint32_t* meas, unsigned long long* c) {
  __shared__ unsigned int sh[16 + 2 * HB];
  for (int j = threadIdx.x; j < 16 + 2 * HB; j += blockDim.x) sh[j] = 0;
  __syncthreads();
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float x = __uint_as_float(base + i);
    float ref = __frcp_rn(x);
    double exact = 1.0 / (double)x;
    stats_common(x, meas[i], ref, exact, sh, c);
  }
  flush_shared(sh, c);
}

// ---------------------------------------------------------------------------------------- structure
// c: [0] tested (rep != x), [1] mismatches, [2] mismatches with x < 0, [3] example x bits, [4] ex2(x), [5] ex2(rep)
extern "C" __global__ void ex2_struct(int F, int mode, unsigned long long* c) {
  const float lim = ldexpf(1.0f, 24 - F), sc = ldexpf(1.0f, F), isc = ldexpf(1.0f, -F);
  unsigned long long tested = 0, mism = 0, mneg = 0;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
    uint32_t b = (uint32_t)i;
    float x = __uint_as_float(b);
    float ax = fabsf(x);
    if (!(ax < lim) || ax < 1.17549435e-38f) continue;  // NaN, coarse x, zero and subnormals (ftz) skipped
    float rep = __fmul_rn(round_mode_f(mode, __fmul_rn(x, sc)), isc);
    if (__float_as_uint(rep) == b) continue;
    ++tested;
    uint32_t y = __float_as_uint(ex2_ftz(x)), yr = __float_as_uint(ex2_ftz(rep));
    if (y != yr) {
      ++mism;
      if (b >> 31) ++mneg;
      if (atomicCAS(&c[3], 0ull, (unsigned long long)b | (1ull << 32)) == 0ull) { c[4] = y; c[5] = yr; }
    }
  }
  if (tested) atomicAdd(&c[0], tested);
  if (mism) atomicAdd(&c[1], mism);
  if (mneg) atomicAdd(&c[2], mneg);
}

// r[F] structure of rcp on [1, 2): rep = mode(x * 2^F) / 2^F (mode 2 trunc, 3 round-half-even)
extern "C" __global__ void rcp_struct(int F, int mode, unsigned long long* c) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (1u << 23)) return;
  uint32_t b = 0x3f800000u + i;
  float x = __uint_as_float(b);
  float rep = __fmul_rn(round_mode_f(mode, __fmul_rn(x, ldexpf(1.0f, F))), ldexpf(1.0f, -F));
  if (__float_as_uint(rep) == b) return;
  atomicAdd(&c[0], 1ull);
  uint32_t y = __float_as_uint(rcp_ftz(x)), yr = __float_as_uint(rcp_ftz(rep));
  if (y != yr) {
    atomicAdd(&c[1], 1ull);
    if (atomicCAS(&c[3], 0ull, (unsigned long long)b | (1ull << 32)) == 0ull) { c[4] = y; c[5] = yr; }
  }
}

// ---------------------------------------------------------------------------------------- models
// categories: 0 NaN input, 1 +-inf input, 2 zero or subnormal input, 3 normal result x < 0,
//             4 normal result x >= 0, 5 underflow (model gives 0), 6 overflow (model gives +inf)
// c: [2*cat] inputs, [2*cat+1] mismatches, [14] NaN inputs giving 0x7fffffff, [15] examples stored
// ex: up to 64 triples (x, measured, model)
#define NEX 64
DEV void record(unsigned long long* c, uint32_t* ex, uint32_t x, uint32_t y, uint32_t p) {
  unsigned long long k = atomicAdd(&c[15], 1ull);
  if (k < NEX) { ex[3 * k] = x; ex[3 * k + 1] = y; ex[3 * k + 2] = p; }
}

extern "C" __global__ void ex2_model(int F, int mode, const uint32_t* g, const uint32_t* h, int use_h,
                                     unsigned long long* c, uint32_t* ex) {
  // use_h = 0: two's complement fixed point for every x: X = mode(x * 2^F), result g[X mod 2^F] * 2^(X >> F)
  // use_h = 1: sign-magnitude: x >= 0 as above; x < 0: T = mode(|x| * 2^F), result h[T mod 2^F] * 2^-(T >> F),
  //            h[k] = ex2(-k / 2^F) in (0.5, 1]
  unsigned long long cnt[7] = {0, 0, 0, 0, 0, 0, 0}, mis[7] = {0, 0, 0, 0, 0, 0, 0}, canon = 0;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  const double sc = ldexp(1.0, F);
  const long long mask = (1ll << F) - 1;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
    uint32_t b = (uint32_t)i;
    float x = __uint_as_float(b);
    uint32_t y = __float_as_uint(ex2_ftz(x));
    int cat;
    uint32_t p;
    bool ok;
    if (isnan(x)) {
      cat = 0; p = 0x7fffffffu; ok = isnan(__uint_as_float(y));
      if (y == 0x7fffffffu) ++canon;
    } else if (isinf(x)) {
      cat = 1; p = (b >> 31) ? 0u : 0x7f800000u; ok = (y == p);
    } else if (fabsf(x) < 1.17549435e-38f) {
      cat = 2; p = 0x3f800000u; ok = (y == p);
    } else if (x >= 128.0f) {
      cat = 6; p = 0x7f800000u; ok = (y == p);
    } else if (x < -1000.0f) {
      cat = 5; p = 0u; ok = (y == p);
    } else {
      long long nn, e;
      uint32_t t;
      if (use_h && (b >> 31)) {
        long long T = (long long)round_mode_d(mode, -(double)x * sc);
        nn = -(T >> F);
        t = h[T & mask];
      } else {
        long long X = (long long)round_mode_d(mode, (double)x * sc);
        nn = X >> F;  // arithmetic shift: floor division
        t = g[X & mask];
      }
      e = (long long)(t >> 23) + nn;
      if (e >= 255) { cat = 6; p = 0x7f800000u; }
      else if (e <= 0) { cat = 5; p = 0u; }
      else { cat = (b >> 31) ? 3 : 4; p = (uint32_t)((long long)t + nn * (1ll << 23)); }
      ok = (y == p);
    }
    ++cnt[cat];
    if (!ok) { ++mis[cat]; record(c, ex, b, y, p); }
  }
  for (int j = 0; j < 7; ++j) {
    if (cnt[j]) atomicAdd(&c[2 * j], cnt[j]);
    if (mis[j]) atomicAdd(&c[2 * j + 1], mis[j]);
  }
  if (canon) atomicAdd(&c[14], canon);
}

// out[k] for x_k = sgn * k * 2^-F (sgn = +1 or -1): kind 0 measured ex2.approx.ftz, 1 RN, 2 RZ, 3 RU of 2^x_k
// from float64 exp2
extern "C" __global__ void ex2_table(int F, int kind, int sgn, uint32_t n, uint32_t* out) {
  uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n) return;
  float x = __fmul_rn((float)k, ldexpf(sgn < 0 ? -1.0f : 1.0f, -F));  // exact for k < 2^24
  if (kind == 0) { out[k] = __float_as_uint(ex2_ftz(x)); return; }
  double e = exp2((double)x);
  float r = kind == 1 ? __double2float_rn(e) : (kind == 2 ? __double2float_rz(e) : __double2float_ru(e));
  out[k] = __float_as_uint(r);
}

// categories: 0 NaN input, 1 +-inf input, 2 zero or subnormal input, 3 normal result, 4 underflow (model +-0)
extern "C" __global__ void rcp_model(const uint32_t* r, unsigned long long* c, uint32_t* ex) {
  unsigned long long cnt[5] = {0, 0, 0, 0, 0}, mis[5] = {0, 0, 0, 0, 0}, canon = 0;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
    uint32_t b = (uint32_t)i;
    float x = __uint_as_float(b);
    uint32_t y = __float_as_uint(rcp_ftz(x));
    uint32_t s = b & 0x80000000u;
    int cat;
    uint32_t p;
    bool ok;
    if (isnan(x)) {
      cat = 0; p = 0x7fffffffu; ok = isnan(__uint_as_float(y));
      if (y == 0x7fffffffu) ++canon;
    } else if (isinf(x)) {
      cat = 1; p = s; ok = (y == p);
    } else if (fabsf(x) < 1.17549435e-38f) {
      cat = 2; p = s | 0x7f800000u; ok = (y == p);
    } else {
      int E = (int)((b >> 23) & 0xff) - 127;
      uint32_t rm = r[b & 0x7fffffu];
      int ef = (int)(rm >> 23) - E;
      if (ef <= 0) { cat = 4; p = s; }
      else { cat = 3; p = s | (uint32_t)((long long)rm - (long long)E * (1ll << 23)); }
      ok = (y == p);
    }
    ++cnt[cat];
    if (!ok) { ++mis[cat]; record(c, ex, b, y, p); }
  }
  for (int j = 0; j < 5; ++j) {
    if (cnt[j]) atomicAdd(&c[2 * j], cnt[j]);
    if (mis[j]) atomicAdd(&c[2 * j + 1], mis[j]);
  }
  if (canon) atomicAdd(&c[14], canon);
}

// cmp_ops(opa, opb, c, ex): all 2^32 inputs, where do two ops differ (e.g. ex2.approx.ftz vs ex2.approx)?
// c: [0] differ, [1] of which the input is zero/subnormal, [2] of which op b's result is subnormal,
//    [3] the others, [4] differ with NaN results on both sides (payload only), [15] examples
extern "C" __global__ void cmp_ops(int opa, int opb, unsigned long long* c, uint32_t* ex) {
  unsigned long long d0 = 0, d1 = 0, d2 = 0, d3 = 0, d4 = 0;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
    uint32_t b = (uint32_t)i;
    float x = __uint_as_float(b);
    uint32_t ya = __float_as_uint(apply_op(opa, x)), yb = __float_as_uint(apply_op(opb, x));
    if (ya == yb) continue;
    ++d0;
    float fb = __uint_as_float(yb);
    if (isnan(__uint_as_float(ya)) && isnan(fb)) ++d4;
    else if (fabsf(x) < 1.17549435e-38f) ++d1;
    else if (fb != 0.0f && fabsf(fb) < 1.17549435e-38f) ++d2;
    else { ++d3; record(c, ex, b, ya, yb); }
  }
  if (d0) atomicAdd(&c[0], d0);
  if (d1) atomicAdd(&c[1], d1);
  if (d2) atomicAdd(&c[2], d2);
  if (d3) atomicAdd(&c[3], d3);
  if (d4) atomicAdd(&c[4], d4);
}
