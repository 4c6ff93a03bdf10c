// lg2_probe.cu: MUFU.LG2 (lg2.approx.ftz.f32, what __logf is built on: sass.txt k_fast_logf) on an H100/H200,
// measured over every positive normal float32, and a structural model tested on the GPU against all of them:
//   lg2(2^e · 1.m) == RULE(e + T[m]),  T[m] = lg2(1.m) as measured (e = 0), the sum formed exactly in double,
//   RULE the rounding to float32 (rn, rz, ru, rd): per exponent e the count of inputs where it fails.
// Writes OUT/lg2_table.bin (T as 2^23 uint32 bit patterns) and prints a JSON line per e and rule.
//   nvcc -O3 -arch=sm_90 -o lg2_probe lg2_probe.cu && ./lg2_probe OUT
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

__device__ __forceinline__ float lg2_ftz(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__global__ void table(uint32_t* T) {
  const uint32_t m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= (1u << 23)) return;
  const float x = __uint_as_float(0x3f800000u | m);
  T[m] = __float_as_uint(lg2_ftz(x));
}

// One exponent e (biased 1..254) per launch: counts[rule] mismatches of the model, and a few examples.
__global__ void check(const uint32_t* T, int e_biased, unsigned long long* counts, uint32_t* example) {
  const uint32_t m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= (1u << 23)) return;
  const float x = __uint_as_float((uint32_t(e_biased) << 23) | m);
  const float got = lg2_ftz(x);
  const double s = double(e_biased - 127) + double(__uint_as_float(T[m]));
  const float r[4] = {__double2float_rn(s), __double2float_rz(s), __double2float_ru(s), __double2float_rd(s)};
  for (int k = 0; k < 4; ++k)
    if (__float_as_uint(r[k]) != __float_as_uint(got)) {
      atomicAdd(&counts[k], 1ull);
      example[k] = m;
    }
}

int main(int argc, char** argv) {
  const char* out = argc > 1 ? argv[1] : ".";
  uint32_t *T, *ex;
  unsigned long long* counts;
  cudaMalloc(&T, sizeof(uint32_t) << 23);
  cudaMalloc(&counts, 4 * sizeof(unsigned long long));
  cudaMalloc(&ex, 4 * sizeof(uint32_t));
  table<<<(1u << 23) / 256, 256>>>(T);
  std::vector<uint32_t> h(1u << 23);
  cudaMemcpy(h.data(), T, sizeof(uint32_t) << 23, cudaMemcpyDeviceToHost);
  char path[4096];
  std::snprintf(path, sizeof path, "%s/lg2_table.bin", out);
  FILE* f = std::fopen(path, "wb");
  std::fwrite(h.data(), sizeof(uint32_t), h.size(), f);
  std::fclose(f);
  const char* rules[4] = {"rn", "rz", "ru", "rd"};
  for (int e = 1; e <= 254; ++e) {
    cudaMemset(counts, 0, 4 * sizeof(unsigned long long));
    cudaMemset(ex, 0, 4 * sizeof(uint32_t));
    check<<<(1u << 23) / 256, 256>>>(T, e, counts, ex);
    unsigned long long c[4];
    uint32_t xm[4];
    cudaMemcpy(c, counts, sizeof c, cudaMemcpyDeviceToHost);
    cudaMemcpy(xm, ex, sizeof xm, cudaMemcpyDeviceToHost);
    std::printf("{\"e\": %d", e - 127);
    for (int k = 0; k < 4; ++k) std::printf(", \"%s\": %llu, \"%s_example_m\": %u", rules[k], c[k], rules[k], xm[k]);
    std::printf("}\n");
  }
  return 0;
}
