// summary.json of a sweep with one seed: no spread over seeds is known, so every sd, paired
// ratio and interval is null (not sd 0.0 and pairs 0, which read as "no spread" and "no finite pair"), with a
// note saying so; "pairs" counts the seeds where both RMSEs are finite. A fake backend whose RMSE is a known
// function of (x0, seed, k) is the reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pasa/study/sweep.hpp"
#include "pasa/study/sweep_config.hpp"
#include "support/temp_dirs.hpp"

using namespace pasa;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// rmse = k + x0 / 10 + seed / 100; NaN for k = 2 at x0 = 3 (an overflowing algorithm).
SweepBackend fake_backend() {
  SweepBackend b;
  b.algorithm_columns = {"rmse"};
  b.check_problem = [](const json&, const std::string&) {};
  b.check_algorithm = [](const json&, const std::string&) {};
  b.run = [](const PlannedProblem& p, const SweepConfig&, const std::vector<bool>& wanted, int,
             const SweepBackend::Emit& emit) {
    const double x0 = p.problem.at("x0").get<double>(), seed = p.problem.at("seed").get<double>();
    for (std::size_t a = 0; a < wanted.size(); ++a) {
      const double k = p.algorithms[a].at("k").get<double>();
      if (wanted[a]) emit(a, {x0 == 3 && k == 2 ? NAN : k + x0 / 10 + seed / 100}, 0.001, 0.002);
    }
  };
  return b;
}

json summary_of(const std::vector<int>& seeds, const std::string& dir) {
  json c = json::parse(R"({"name": "one", "problem": {"x0": "$x0", "seed": "$seed"}, "grid": {"x0": [1, 3]},
                           "algorithms": [{"label": "A", "k": 1}, {"label": "B", "k": 2}]})");
  c["seeds"] = seeds;
  SweepOptions opt;
  opt.out_dir = test::fresh_dir(dir);
  run_sweep(parse_sweep_config(c, "cfg.json"), fake_backend(), opt);
  std::ifstream f(opt.out_dir / "summary.json");
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

}  // namespace

TEST_CASE("sweep summary: one seed gives null spreads and ratios, with a note", "[sweep]") {
  const json s = summary_of({4}, "sweep-one-seed");
  REQUIRE(s["groups"].size() == 4);
  const json& a1 = s["groups"][0]["metrics"]["rmse"];  // x0 = 1, A: 1 + 0.1 + 0.04
  CHECK(a1["mean"].get<double>() == 1 + 0.1 + 0.04);
  CHECK(a1["min"] == a1["mean"]);
  CHECK(a1["sd"].is_null());
  for (const json& g : s["groups"]) CHECK(g["metrics"]["rmse"]["sd"].is_null());
  REQUIRE(s["paired"].size() == 2);
  const json& p1 = s["paired"][0];  // x0 = 1: one finite pair, too few for a ratio
  CHECK(p1["pairs"] == 1);
  CHECK((p1["ratio_geo_mean"].is_null() && p1["ratio_ci95"].is_null() && p1["ci95_excludes_1"].is_null()));
  CHECK(p1["note"].get<std::string>().find("1 seed with both RMSEs finite") != std::string::npos);
  CHECK(s["paired"][1]["pairs"] == 0);  // x0 = 3: B is NaN
  REQUIRE(s.contains("notes"));
  CHECK(s["notes"][0].get<std::string>().find("one seed") != std::string::npos);
}

TEST_CASE("sweep summary: two seeds give an sd and a ratio, and no note", "[sweep]") {
  const json s = summary_of({4, 6}, "sweep-two-seeds");
  const json& a1 = s["groups"][0]["metrics"]["rmse"];
  // Two values 0.02 apart: sample sd 0.02 / sqrt(2).
  CHECK(a1["sd"].get<double>() == Approx(0.02 / std::sqrt(2.0)).epsilon(1e-9));
  const json& p1 = s["paired"][0];
  CHECK(p1["pairs"] == 2);
  CHECK(p1["ratio_geo_mean"].get<double>() == Approx(std::sqrt((1.14 / 2.14) * (1.16 / 2.16))).epsilon(1e-12));
  CHECK(!p1.contains("note"));
  CHECK(!s.contains("notes"));
}
