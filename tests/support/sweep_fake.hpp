// A sweep backend for the bookkeeping tests (test_sweep.cpp, test_sweep_real.cpp): deterministic metrics from
// the case's JSON, in milliseconds, with a simulated crash and NaN cases on request; and its config.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/study/sweep.hpp"
#include "pasa/study/sweep_config.hpp"

namespace pasa::test {

inline nlohmann::json base_config() {
  return nlohmann::json::parse(R"({
    "name": "fake",
    "problem": {"x0": "$x0", "am": "$Am", "seed": "$seed"},
    "grid": {"x0": [1, 2, 3], "Am": {"from": 0.5, "to": 1.0, "step": 0.25}},
    "seeds": [7, 8],
    "algorithms": [{"label": "A", "k": 1}, {"label": "B", "k": 2, "beta": 0.5}]
  })");
}

// Metrics are smooth functions of (x0, Am, seed, k), so every case has distinct, non-trivial doubles; one
// case (x0 = 3, k = 2) is "overflowing" and reports NaN, like FA-FP16/FP32 does.
struct FakeBackend {
  int calls = 0;          // problems run
  int fail_after = -1;    // throw after this many emitted rows (simulated crash); -1: never
  int emitted = 0;
  double nan_seed = -1;   // also NaN for this seed at x0 = 2, k = 1 (one seed of a grid point overflowing)
  SweepBackend backend() {
    SweepBackend b;
    b.problem_columns = {"score_max"};
    b.algorithm_columns = {"rmse", "nan_pct"};
    b.check_problem = [](const nlohmann::json& p, const std::string& path) {
      if (!p.at("x0").is_number() || p.at("x0").get<double>() < 0) throw InputError(path + "/x0: " + p.at("x0").dump() + " must be >= 0");
    };
    b.check_algorithm = [](const nlohmann::json& a, const std::string& path) {
      if (a.contains("beta") && !(a["beta"].get<double>() > 0 && a["beta"].get<double>() < 1))
        throw InputError(path + "/beta: " + a["beta"].dump() + " is outside (0, 1)");
    };
    b.run = [this](const PlannedProblem& p, const SweepConfig&, const std::vector<bool>& wanted, int,
                   const SweepBackend::Emit& emit) {
      ++calls;
      const double x0 = p.problem.at("x0").get<double>(), am = p.problem.at("am").get<double>();
      const double seed = static_cast<double>(p.problem.at("seed").get<std::uint64_t>());
      for (std::size_t a = 0; a < wanted.size(); ++a) {
        if (!wanted[a]) continue;
        if (fail_after >= 0 && emitted >= fail_after) throw std::runtime_error("simulated crash");
        const double k = p.algorithms[a].at("k").get<double>();
        const bool nan = (x0 == 3 && k == 2) || (seed == nan_seed && x0 == 2 && k == 1);
        const double rmse = nan ? NAN : std::exp(-k) * std::sin(x0 + am * seed) / 3.0 + 1.0;
        emit(a, {x0 * 4096 + am, rmse, std::isnan(rmse) ? 100.0 : 0.0}, 0.001, 0.002);
        ++emitted;
      }
    };
    return b;
  }
};

}  // namespace pasa::test
