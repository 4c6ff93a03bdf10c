// pasa-fdpp's calibration (fdpp_study.hpp, docs/decode.md): the range [x_lo, x_hi] is the 0.005 % and
// 99.995 % quantiles of the scaled scores q·k/√D of the calibration problem (seed 1, B 16, 8 heads, 16 rows,
// D 128), restated here from the documentation and computed on their own (long double dot products,
// nth_element), and each row's fdpp runs with a = x_lo − φ, b = x_hi − φ.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "pasa/inputs/generators.hpp"
#include "pasa/study/fdpp_study.hpp"

using namespace pasa;

TEST_CASE("fdpp study: the calibrated range is the documented quantiles of the scores", "[fdpp]") {
  const std::size_t skv = 64;
  const std::vector<FdppRow> rows = fdpp_study({skv}, 2);
  REQUIRE(rows.size() == 3 * 2 * 3);  // distributions × allocations × φ choices

  ProblemSpec p;  // the uniform calibration problem (PASA Eq. 17, x0 = 0.5, Am = 1; V uniform in [−1, 1])
  p.B = 16;
  p.Nq = p.Nkv = 8;
  p.Sq = 16;
  p.Skv = skv;
  p.D = 128;
  p.seed = 1;
  p.q = p.k = TensorGen{GenKind::uniform, 0.5, 1};
  p.v = TensorGen{GenKind::uniform, 0, 1};
  const AttentionInputs in = generate_inputs(p, 2);
  std::vector<double> s;
  const long double scale = 1.0L / std::sqrt(128.0L);
  for (std::size_t b = 0; b < p.B; ++b)
    for (std::size_t h = 0; h < p.Nq; ++h)
      for (std::size_t i = 0; i < p.Sq; ++i)
        for (std::size_t j = 0; j < skv; ++j) {
          long double dot = 0;
          for (std::size_t d = 0; d < p.D; ++d) dot += static_cast<long double>(in.q.at(b, h, i, d)) * in.k.at(b, h, j, d);
          s.push_back(static_cast<double>(dot * scale));
        }
  // 0.005 % of the scores below x_lo and above x_hi (131072 scores: the 7th smallest and largest).
  const auto tail = static_cast<std::size_t>(std::floor(static_cast<double>(s.size()) * 0.00005));
  std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(tail), s.end());
  const double lo = s[tail];
  std::nth_element(s.begin(), s.end() - 1 - static_cast<std::ptrdiff_t>(tail), s.end());
  const double hi = s[s.size() - 1 - tail];
  std::size_t seen = 0;
  for (const FdppRow& r : rows) {
    if (r.distribution != "uniform") continue;
    ++seen;
    INFO(r.alloc << " phi " << r.phi_choice);
    CHECK(r.x_lo == Approx(lo).epsilon(1e-12));
    CHECK(r.x_hi == Approx(hi).epsilon(1e-12));
    CHECK(r.phi == Approx(r.phi_choice == "lo" ? lo : r.phi_choice == "hi" ? hi : (lo + hi) / 2).epsilon(1e-12));
    CHECK(std::isfinite(r.rmse));
  }
  CHECK(seen == 6);
}
