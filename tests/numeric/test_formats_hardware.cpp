// pasa's casts to the OCP MX element formats against the libraries' own, measured over every float32 bit
// pattern (experiments/gpu/formats_probe.py on the H200 machine: ml_dtypes 0.6.0 on its CPU, torch 2.11 on
// CUDA and CPU; results/hardware/formats/formats_transitions.json). A table lists the patterns where the
// library's output code changes; each code holds up to the next entry. pasa's round() + encode() under the
// library's convention (round.hpp: Convention) must give that code at both ends of every interval and at
// 64 patterns inside it; the exact convention must differ from the library only where
// docs/formats-and-rounding.md says it does.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/numeric/round.hpp"

using namespace pasa;

namespace {

nlohmann::json tables() {
  std::ifstream f(std::string(PASA_SOURCE_DIR) + "/results/hardware/formats/formats_transitions.json");
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

const std::map<std::string, std::string> kPasaName = {{"float4_e2m1fn", "fp4_e2m1"}, {"float6_e2m3fn", "fp6_e2m3"},
                                                      {"float6_e3m2fn", "fp6_e3m2"}, {"float8_e8m0fnu", "e8m0"}};

// pasa's code for the float32 pattern b, or -1 where the result has no pattern (a NaN kept for a format
// without NaN: the exact convention).
int pasa_code(std::uint32_t b, const Format& f, const RoundOptions& o) {
  const double r = round(static_cast<double>(std::bit_cast<float>(b)), f, o);
  if (std::isnan(r) && !f.has_nan()) return -1;
  return static_cast<int>(encode(r, f));
}

// The code the library gives for pattern b (the table's interval holding b).
int table_code(const nlohmann::json& t, std::uint64_t b) {
  const auto& p = t["patterns"];
  std::size_t lo = 0, hi = p.size();
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    if (p[mid].get<std::uint64_t>() <= b) lo = mid;
    else hi = mid;
  }
  return t["codes"][lo].get<int>();
}

}  // namespace

TEST_CASE("ml_dtypes and torch casts: pasa's conventions reproduce every measured code", "[formats][hardware]") {
  const nlohmann::json d = tables();
  CHECK(d["versions"]["ml_dtypes"] == "0.6.0");
  REQUIRE(d["tables"].size() == 6);
  for (const auto& t : d["tables"]) {
    const std::string lib = t["library"], dtype = t["dtype"];
    INFO(lib << " " << t["device"].get<std::string>() << " " << dtype);
    const Format f = format_by_name(kPasaName.at(dtype));
    const RoundOptions o{RoundMode::nearest_even, Overflow::ieee, false, false,
                         lib == "torch" ? Convention::torch : Convention::ml_dtypes};
    const auto& p = t["patterns"];
    REQUIRE(p[0] == 0);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
      const std::uint64_t a = p[i].get<std::uint64_t>();
      const std::uint64_t z = i + 1 < p.size() ? p[i + 1].get<std::uint64_t>() - 1 : 0xFFFFFFFFull;
      const int want = t["codes"][i];
      for (std::uint64_t k = 0; k <= 65; ++k) {
        const std::uint64_t b = k == 0 ? a : k == 65 ? z : a + (z - a) * k / 65;
        const int got = pasa_code(static_cast<std::uint32_t>(b), f, o);
        if (got != want && bad++ < 5) FAIL_CHECK(fmt::format("pattern {:#010x}: library {:#04x}, pasa {:#04x}", b, want, got));
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("the exact convention differs from ml_dtypes and torch only where documented", "[formats][hardware]") {
  const nlohmann::json d = tables();
  for (const auto& t : d["tables"]) {
    const std::string lib = t["library"], dtype = t["dtype"];
    INFO(lib << " " << dtype);
    const Format f = format_by_name(kPasaName.at(dtype));
    const auto& p = t["patterns"];
    // Every interval end and the patterns either side of each: where exact and the library part.
    std::size_t differ = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
      for (const std::int64_t off : {-1, 0, 1}) {
        const std::int64_t b = p[i].get<std::int64_t>() + off;
        if (b < 0 || b > 0xFFFFFFFFll) continue;
        const auto u = static_cast<std::uint32_t>(b);
        const int lib_code = table_code(t, u), exact = pasa_code(u, f, {});
        if (lib_code == exact) continue;
        ++differ;
        const float x = std::bit_cast<float>(u);
        INFO(fmt::format("pattern {:#010x} ({}): library {:#04x}, exact {}", u, x, lib_code, exact));
        if (dtype != "float8_e8m0fnu") {
          CHECK(std::isnan(x));  // fp6 / fp4: ml_dtypes turns NaN into a zero, exact keeps NaN
        } else if (std::fabs(x) > 0x1p-127f && std::fabs(x) < 0x1.8p-127f) {
          CHECK(lib_code == 0x01);  // the bottom band: the libraries round as if code 0 were zero
          CHECK(exact == (x > 0 ? 0x00 : 0xFF));  // (exact: a negative input is NaN)
        } else {
          CHECK(lib == "torch");  // torch: the sign dropped, zero the bottom code
          CHECK((x <= 0.0f || std::isnan(x)));
        }
      }
    }
    CHECK(differ > 0);
  }
}
