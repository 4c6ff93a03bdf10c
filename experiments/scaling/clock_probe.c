// Why do independent one-thread copies slow down when 16 run at once (run_scaling.sh's "ceiling" part)?
// Three loops that touch no memory beyond a few registers or L1, timed for a fixed amount of work:
//   scalar: a dependent integer multiply-add chain (latency-bound; runs at the core's clock),
//   avx2:   16 independent 256-bit FMA chains (the FMA ports, 256-bit licence),
//   avx512: 16 independent 512-bit FMA chains (512-bit licence).
// Run K copies at once (run_scaling.sh does): if a loop that never leaves the core slows down by the same
// factor as the attention kernels, the loss is the clock (frequency under all-core load, or cores shared
// by the hypervisor), not memory; if only the kernels slow down, it is the memory system.
// Build: cc -O2 -o clock_probe clock_probe.c (x86-64 with AVX-512F; the script builds it where it packs).
// Prints "scalar S avx2 A avx512 Z" in seconds.
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

__attribute__((noinline)) static uint64_t scalar(uint64_t n) {
  uint64_t x = 1;
  for (uint64_t i = 0; i < n; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

#define CHAINS(T, SET1, FMADD, ADD)                                                  \
  T a[16];                                                                           \
  for (int j = 0; j < 16; ++j) a[j] = SET1(1.0f + (float)j * 1e-3f);                 \
  const T m = SET1(0.999999f), c = SET1(1e-7f);                                      \
  for (uint64_t i = 0; i < n; ++i)                                                   \
    for (int j = 0; j < 16; ++j) a[j] = FMADD(a[j], m, c);                           \
  T s = a[0];                                                                        \
  for (int j = 1; j < 16; ++j) s = ADD(s, a[j]);

__attribute__((noinline, target("avx2,fma"))) static float avx2(uint64_t n) {
  CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps)
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

__attribute__((noinline, target("avx512f"))) static float avx512(uint64_t n) {
  CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps)
  return _mm512_reduce_add_ps(s);
}

int main(void) {
  double t0 = now();
  volatile uint64_t r = scalar(2000000000ULL);
  double t1 = now();
  volatile float f = avx2(200000000ULL);
  double t2 = now();
  volatile float g = __builtin_cpu_supports("avx512f") ? avx512(200000000ULL) : 0.0f;
  double t3 = now();
  (void)r, (void)f, (void)g;
  printf("scalar %.3f avx2 %.3f avx512 %.3f\n", t1 - t0, t2 - t1, t3 - t2);
  return 0;
}
