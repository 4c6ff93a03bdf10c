// Rounding throughput: a 64M-element float32 array rounded (RNE, out of place) to fp16, bf16, tf32, fp8_e4m3fn
// and fp8_e5m2 with 1 and 2 threads, against two baselines timed in the same run, interleaved with it:
// - memcpy of the same array (rounding reads and writes as many bytes as memcpy);
// - the usual bf16 RNE bit trick, a plain loop of our own compiled with the same flags (what CPFloat's and
//   PyTorch's float -> bf16 conversions do): (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000, NaNs kept.
// Goals: fp16/bf16 >= 0.75x memcpy, fp8 >= 0.5x; bf16 and tf32 >= the bit-trick rate.
// Values are spread over each format's whole range: random signs and significands, exponents uniform
// from two binades below the smallest subnormal to two above the largest finite (so subnormals, underflow
// to zero and overflow all occur).
#include <algorithm>
#include <climits>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <boost/random/mersenne_twister.hpp>
#include <fmt/format.h>

#include "../apps/library_names.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/numeric/round.hpp"

namespace {

std::vector<float> spread_values(const pasa::Format& f, std::size_t n, std::uint64_t seed) {
  std::vector<float> xs(n);
  const int lo = std::max(f.emin() - f.p - 1, -149), hi = std::min(f.emax + 2, 127);
  pasa::parallel_for(64, pasa::default_threads(), [&](std::size_t part) {
    boost::random::mt19937_64 g(seed + part);
    for (std::size_t i = part * n / 64; i < (part + 1) * n / 64; ++i) {
      const std::uint64_t r = g();
      const int e = lo + static_cast<int>((r >> 32) % static_cast<std::uint64_t>(hi - lo + 1));
      const float m = 1.0f + static_cast<float>(r & 0x7FFFFF) * 0x1p-23f;
      xs[i] = std::ldexp((r >> 31) & 1 ? -m : m, e);
    }
  });
  return xs;
}

// Seconds of one run of f(begin, end) on `threads` contiguous blocks of [0, n).
template <class F>
double seconds(std::size_t n, int threads, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  pasa::parallel_for(static_cast<std::size_t>(threads), threads, [&](std::size_t t) {
    f(t * n / threads, (t + 1) * n / threads);
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The baseline: float -> bf16 -> float by the carry trick (RNE; a NaN is kept as it is, since the carry
// could turn its payload into inf). Overflow goes to inf and subnormals round on float's grid, as IEEE says.
void bf16_bit_trick(const float* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(in[i]);
    const std::uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    out[i] = std::bit_cast<float>((u & 0x7fffffffu) > 0x7f800000u ? u : r);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Rounding throughput against memcpy of the same float32 array"};
  std::size_t n = std::size_t(64) << 20;
  int reps = 5;
  std::string max_memory;
  app.add_option("-n,--elements", n, "array length")->capture_default_str()->check(pasa_apps::unsigned_integer(1));
  app.add_option("--reps", reps, "timed repetitions (best is kept)")
      ->capture_default_str()
      ->check(pasa_apps::unsigned_integer(1, INT_MAX));
  app.add_option("--max-memory", max_memory, "memory the run may use, e.g. 64G (default: MemAvailable)");
  app.set_version_flag("--version", "pasa-bench-round " PASA_VERSION);  // the CMake project version, as pasa.__version__
  PASA_CLI_PARSE(app, argc, argv);
  try {
  // Size first: the input and output float32 arrays.
  pasa::check_memory(pasa::sat_mul(2 * sizeof(float), n), max_memory.empty() ? 0 : pasa::parse_byte_size(max_memory, "--max-memory"),
                     "this benchmark", fmt::format("{} float32 elements in and out", n));

  std::vector<float> out(n);
  std::memset(out.data(), 0, n * sizeof(float));  // fault the pages in before timing
  fmt::print("{} float32 elements ({} MiB in, {} MiB out), best of {}\n", n, n * 4 >> 20, n * 4 >> 20, reps);
  fmt::print("{:<10} {:>7}  {:>12}  {:>13}  {:>8}  {:>15}  {:>9}\n", "format", "threads", "round elem/s",
             "memcpy elem/s", "/memcpy", "bit trick elem/s", "/trick");
  bool met = true;
  for (const char* name : {"fp16", "bf16", "tf32", "fp8_e4m3fn", "fp8_e5m2"}) {
    const pasa::Format f = pasa::format_by_name(name);
    const std::vector<float> in = spread_values(f, n, 1);
    for (int threads : {1, 2}) {
      // memcpy and rounding alternate, so that both see the same (shared, noisy) machine; best of reps.
      double t_copy = 1e30, t_round = 1e30, t_trick = 1e30;
      for (int r = 0; r < reps; ++r) {
        t_copy = std::min(t_copy, seconds(n, threads, [&](std::size_t b, std::size_t e) {
          std::memcpy(out.data() + b, in.data() + b, (e - b) * sizeof(float));
        }));
        t_trick = std::min(t_trick, seconds(n, threads, [&](std::size_t b, std::size_t e) {
          bf16_bit_trick(in.data() + b, out.data() + b, e - b);
        }));
        t_round = std::min(t_round, seconds(n, threads, [&](std::size_t b, std::size_t e) {
          pasa::round_span(std::span<const float>(in).subspan(b, e - b), std::span<float>(out).subspan(b, e - b), f);
        }));
      }
      const bool float_range = f.emax == 127;  // bf16, tf32: the issue-11 goal against the bit trick
      const bool ok = float_range ? t_round <= t_trick : t_round <= t_copy / (f.p > 8 ? 0.75 : 0.5);
      met = met && ok;
      fmt::print("{:<10} {:>7}  {:>12.4g}  {:>13.4g}  {:>7.2f}x  {:>15.4g}  {:>8.2f}x  goal {} {}\n", name, threads,
                 n / t_round, n / t_copy, t_copy / t_round, n / t_trick, t_trick / t_round,
                 float_range ? ">= 1.00x trick" : (f.p > 8 ? ">= 0.75x memcpy" : ">= 0.50x memcpy"),
                 ok ? "met" : "NOT met");
    }
  }
  fmt::print("all goals: {}\n", met ? "met" : "NOT met");
  return 0;
  } catch (...) {
    return pasa::report_error("pasa-bench-round");
  }
}
