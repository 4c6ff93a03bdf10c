// encode_span (the bit-field encoder at memory speed) against encode() (which rounds to check): on every
// pattern of the formats up to 16 bits, on random values of the wider ones, on the neighbours of all of them
// (which are not values of the format), on signed zeros, infinities, NaNs and subnormal doubles; both input
// types and every output width that holds the format; the index of the first non-value in a span.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"

using namespace pasa;

namespace {

std::optional<std::uint64_t> encode_or_nothing(double x, const Format& f) {
  try {
    return encode(x, f);
  } catch (const std::domain_error&) {
    return std::nullopt;
  }
}

// Values of f and their neighbours in double (non-values for p < 53), specials included.
std::vector<double> candidates(const Format& f) {
  std::vector<double> v = {0.0, -0.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::denorm_min(), -std::numeric_limits<double>::denorm_min(),
                           1e-310, f.max_finite(), -f.max_finite(), f.min_subnormal(), f.min_normal(),
                           f.max_finite() * 2, f.min_subnormal() / 2, f.min_subnormal() * 1.5,
                           f.max_finite() + std::ldexp(1.0, f.emax - f.p + 1)};  // fp8_e4m3fn: 480, its NaN pattern
  if (f.storage_bits() <= 16) {
    for (std::uint64_t b = 0; b < (std::uint64_t(1) << f.storage_bits()); ++b) {
      try {
        v.push_back(decode(b, f));
      } catch (const std::domain_error&) {
      }
    }
  } else {
    std::mt19937_64 gen(17);
    std::normal_distribution<double> n(0, 1);
    std::uniform_int_distribution<int> e(f.emin() - f.p - 2, f.emax + 1);
    for (int i = 0; i < 20000; ++i) v.push_back(round(std::ldexp(n(gen), e(gen)), f));
  }
  const std::size_t values = v.size();
  for (std::size_t i = 0; i < values; ++i) {
    if (!std::isfinite(v[i])) continue;
    v.push_back(std::nextafter(v[i], 1e308));
    v.push_back(std::nextafter(v[i], -1e308));
  }
  return v;
}

template <class In, class Out>
void check(const Format& f, const std::vector<double>& xs) {
  std::vector<In> good;
  std::vector<std::uint64_t> expect;
  std::vector<In> bad;
  for (double x : xs) {
    const In xi = static_cast<In>(x);
    if (!(static_cast<double>(xi) == x || std::isnan(x))) continue;  // not held by In
    const auto e = encode_or_nothing(static_cast<double>(xi), f);
    if (e) {
      good.push_back(xi);
      expect.push_back(*e);
    } else {
      bad.push_back(xi);
    }
  }
  std::vector<Out> out(good.size());
  REQUIRE(encode_span(std::span<const In>(good), std::span<Out>(out), f) == good.size());
  for (std::size_t i = 0; i < good.size(); ++i) {
    INFO(f.name << ": " << static_cast<double>(good[i]));
    REQUIRE(static_cast<std::uint64_t>(out[i]) == expect[i]);
  }
  // Non-values, each placed among values (in the first, a later and the last chunk), is found at its index.
  std::mt19937 gen(3);
  const std::size_t stride = bad.size() / 2000 + 1;  // about 2000 of them, spread over the candidates
  for (std::size_t k = 0; k < bad.size(); k += stride) {
    std::vector<In> span(good.begin(), good.begin() + std::min<std::size_t>(good.size(), 3000));
    const std::size_t at = std::uniform_int_distribution<std::size_t>(0, span.size())(gen);
    span.insert(span.begin() + static_cast<std::ptrdiff_t>(at), bad[k]);
    std::vector<Out> o(span.size());
    INFO(f.name << ": non-value " << static_cast<double>(bad[k]) << " at " << at);
    REQUIRE(encode_span(std::span<const In>(span), std::span<Out>(o), f) == at);
  }
}

}  // namespace

TEST_CASE("encode_span equals encode on values, neighbours and specials", "[round][encode]") {
  for (const char* name : {"fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2", "p=5,emax=7,subnormals=0", "p=3,emax=3",
                           "tf32", "fp32", "fp64", "p=20,emax=1023"}) {
    const Format f = format_by_name(name);
    const std::vector<double> xs = candidates(f);
    check<double, std::uint64_t>(f, xs);
    check<float, std::uint64_t>(f, xs);
    if (f.storage_bits() <= 32) {
      check<double, std::uint32_t>(f, xs);
      check<float, std::uint32_t>(f, xs);
    }
    if (f.storage_bits() <= 16) {
      check<double, std::uint16_t>(f, xs);
      check<float, std::uint16_t>(f, xs);
    }
    if (f.storage_bits() <= 8) {
      check<double, std::uint8_t>(f, xs);
      check<float, std::uint8_t>(f, xs);
    }
  }
}

TEST_CASE("encode_span refuses an output narrower than the format", "[round][encode]") {
  std::vector<double> x(3, 1.0);
  std::vector<std::uint8_t> o(3);
  CHECK_THROWS_AS(encode_span(std::span<const double>(x), std::span<std::uint8_t>(o), format_by_name("fp16")),
                  std::invalid_argument);
}
