// Float span kernels against the scalar round(), over float32 bit patterns. The two are independent
// implementations: round() scales by the quantum with ldexp and takes floor in double; the portable span
// kernel does integer carry tricks on the float's bits and one float addition for subnormals; the F16C path
// uses the CPU's conversion instruction; formats with float's exponent range (bf16, tf32) take a carry-only path. (round() itself is checked against MPFR in test_round_mpfr.cpp.)
// All 2^32 patterns: [long] (minutes; no "^" in test names: ParseAndAddCatchTests cannot parse it). Every 4099th pattern (about a million, prime stride so every
// exponent and low-bit pattern is hit): in the default run.
#include <catch2/catch.hpp>

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <sstream>
#include <vector>

#include "pasa/core/parallel.hpp"
#include "pasa/numeric/round.hpp"

using namespace pasa;

namespace {

struct Mismatches {
  std::atomic<std::uint64_t> count{0};
  std::mutex m;
  std::vector<std::string> first;
  void add(const std::string& what) {
    if (count++ < 5) {
      std::lock_guard<std::mutex> lock(m);
      first.push_back(what);
    }
  }
};

bool same_float(float a, double want) {
  if (std::isnan(want)) return std::isnan(a);
  return std::bit_cast<std::uint64_t>(static_cast<double>(a)) == std::bit_cast<std::uint64_t>(want);
}

// Checks patterns first + k*stride (mod 2^32), k < count, in chunks spread over the threads.
void check_float_patterns(const Format& f, const RoundOptions& o, std::uint64_t stride, std::uint64_t count) {
  constexpr std::uint64_t kChunk = 1 << 18;
  const std::uint64_t chunks = (count + kChunk - 1) / kChunk;
  Mismatches bad;
  parallel_for(chunks, default_threads(), [&](std::size_t c) {
    const std::uint64_t k0 = c * kChunk, n = std::min(kChunk, count - k0);
    std::vector<float> in(n), fast(n), portable(n);
    for (std::uint64_t k = 0; k < n; ++k)
      in[k] = std::bit_cast<float>(static_cast<std::uint32_t>((k0 + k) * stride));
    round_span(in, fast, f, o);
    round_span_portable(in, portable, f, o);
    for (std::uint64_t k = 0; k < n; ++k) {
      const double want = round(static_cast<double>(in[k]), f, o);
      if (!same_float(fast[k], want) || !same_float(portable[k], want)) {
        std::ostringstream s;
        s << std::hexfloat << f.name << " x=" << in[k] << " round()=" << want << " round_span=" << fast[k]
          << " portable=" << portable[k];
        bad.add(s.str());
      }
    }
  });
  for (const auto& s : bad.first) UNSCOPED_INFO(s);
  INFO(f.name << " mode " << round_mode_name(o.mode) << " overflow " << overflow_name(o.overflow) << " flush "
              << o.flush_input << o.flush_output);
  CHECK(bad.count == 0);
}

// tf32 and p=12,emax=127 share float's exponent range with bf16 (the integer-carry fast path of round_span).
const char* const kFormats[] = {"fp16", "bf16", "tf32", "p=12,emax=127", "fp8_e4m3fn", "fp8_e5m2"};

}  // namespace

TEST_CASE("span kernels equal round() on every 4099th float32 pattern", "[round][exhaustive]") {
  const std::uint64_t stride = 4099, count = (std::uint64_t(1) << 32) / stride + 1;
  for (const char* name : kFormats) {
    const Format f = format_by_name(name);
    for (RoundMode m : {RoundMode::nearest_even, RoundMode::nearest_away})  // the branch-free kernels' modes
      for (Overflow ov : {Overflow::ieee, Overflow::saturate})
        for (int flush = 0; flush < 4; ++flush)
          check_float_patterns(f, {m, ov, (flush & 1) != 0, (flush & 2) != 0}, stride, count);
    // Other modes go through round() per element; a smaller sample checks the span loop itself.
    for (RoundMode m : {RoundMode::toward_zero, RoundMode::toward_pos, RoundMode::toward_neg, RoundMode::odd})
      check_float_patterns(f, {m}, 65537, 65536);
  }
}

TEST_CASE("span kernels equal round() on all 4294967296 float32 patterns", "[round][exhaustive][long]") {
  for (const char* name : kFormats) {
    const auto t0 = std::chrono::steady_clock::now();
    for (RoundMode m : {RoundMode::nearest_even, RoundMode::nearest_away})
      check_float_patterns(format_by_name(name), {m}, 1, std::uint64_t(1) << 32);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    WARN(name << ": all 2^32 float32 patterns checked in rne and rna in " << s << " s");
  }
}
