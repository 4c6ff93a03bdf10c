// The random signs of the FP8 recipe's Hadamard transform: quantise.hpp promises one draw of
// RandomBits(seed) per sign, its top bit, so a seed gives the same transform everywhere; the signs are then
// fair coin flips (half of them −1), which is what makes the transform spread an outlier over every lane.
// The reference is an independent SplitMix64 (Steele, Lea, Flood 2014; RandomBits's generator) written here.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "pasa/attention/quantise.hpp"

using namespace pasa;

namespace {

std::vector<double> reference_signs(std::size_t D, std::uint64_t seed) {
  std::uint64_t state = seed;
  std::vector<double> s(D);
  for (double& x : s) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x = (z & (1ull << 63)) != 0 ? -1.0 : 1.0;  // the top bit
  }
  return s;
}

}  // namespace

TEST_CASE("Hadamard signs: the top bit of one SplitMix64 draw per sign, half of them negative", "[fp8]") {
  for (std::uint64_t seed : {1ull, 7ull, 0x5EEDull})
    for (std::size_t D : {8u, 64u, 128u, 4096u}) {
      INFO("seed " << seed << ", D " << D);
      const std::vector<double> s = hadamard_signs(D, seed);
      CHECK(s == reference_signs(D, seed));
    }
  // Fair signs: over 4096 of them the share of −1 is 1/2 within 5 standard deviations (5·sqrt(4096)/2 = 160).
  for (std::uint64_t seed : {1ull, 2ull, 3ull}) {
    std::size_t neg = 0;
    for (double x : hadamard_signs(4096, seed)) neg += x < 0;
    INFO("seed " << seed << ": " << neg << " of 4096 negative");
    CHECK(neg > 2048 - 160);
    CHECK(neg < 2048 + 160);
  }
}
