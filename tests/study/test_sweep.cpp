// pasa-sweep bookkeeping: config validation, grid expansion, CSV, resume, shards, merge, summary, on a small
// fake backend (support/sweep_fake.hpp: deterministic metrics from the case's JSON, in milliseconds); the
// real library's sweeps are test_sweep_real.cpp's.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "pasa/attention/algorithm.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/core/error.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/exact/baseline.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/study/paper_tables.hpp"
#include "pasa/study/sweep.hpp"
#include "pasa/study/sweep_config.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "support/sweep_fake.hpp"
#include "support/sweep_tables.hpp"
#include "support/temp_dirs.hpp"

using namespace pasa;
using nlohmann::json;
namespace fs = std::filesystem;

using pasa::test::FakeBackend;
using pasa::test::base_config;
using pasa::test::without_times;


TEST_CASE("sweep config: library-level mistakes stop the sweep before anything runs", "[sweep]") {
  json c = base_config();
  c["grid"]["b"] = {0.5, 1.5};
  c["algorithms"][1]["beta"] = "$b";
  const SweepConfig cfg = parse_sweep_config(c, "cfg.json");
  FakeBackend fake;
  const fs::path dir = test::fresh_dir("sweep-invalid");
  SweepOptions opt;
  opt.out_dir = dir;
  CHECK_THROWS_WITH(run_sweep(cfg, fake.backend(), opt),
                    Catch::StartsWith("cfg.json:/algorithms/1/beta: 1.5 is outside (0, 1) (grid point Am=0.5, b=1.5, x0=1"));
  CHECK(fake.calls == 0);
  CHECK(!fs::exists(dir));
}

TEST_CASE("sweep digest: the mean RMSE over the seeds with a finite RMSE, NaN % over all", "[sweep]") {
  // Seed 8 of (x0 = 2, A) is NaN: its digest line gives seed 7's RMSE alone (the fake backend's formula, not
  // the table) and NaN % 50; (x0 = 3, B) is NaN for every seed: "NaN", 100 %; the others average both seeds.
  const SweepConfig cfg = parse_sweep_config(base_config(), "cfg.json");
  SweepOptions opt;
  opt.out_dir = test::fresh_dir("digest");
  FakeBackend fake;
  fake.nan_seed = 8;
  run_sweep(cfg, fake.backend(), opt);
  const std::string digest = sweep_digest(cfg, opt.out_dir / "results.csv", 100);
  auto line = [&](const std::string& point, const std::string& label) {
    std::istringstream in(digest);
    for (std::string l; std::getline(in, l);)
      if (l.rfind(point + " ", 0) == 0 && l.find(" " + label + " ") != std::string::npos) return l;
    return std::string();
  };
  auto rmse = [](double x0, double am, double seed, double k) { return std::exp(-k) * std::sin(x0 + am * seed) / 3.0 + 1.0; };
  INFO(digest);
  const std::string half = line("Am=0.5, x0=2", "A");
  REQUIRE(!half.empty());
  CHECK(half.find(fmt::format(" {:.3e} ", rmse(2, 0.5, 7, 1))) != std::string::npos);
  CHECK(half.substr(half.size() - 3) == " 50");
  const std::string all = line("Am=0.5, x0=3", "B");
  CHECK(all.find(" NaN ") != std::string::npos);
  CHECK(all.substr(all.size() - 4) == " 100");
  const std::string both = line("Am=0.75, x0=1", "B");
  CHECK(both.find(fmt::format(" {:.3e} ", (rmse(1, 0.75, 7, 2) + rmse(1, 0.75, 8, 2)) / 2)) != std::string::npos);
  CHECK(both.substr(both.size() - 2) == " 0");
}

TEST_CASE("sweep: an interrupted run resumes to the same table", "[sweep]") {
  const SweepConfig cfg = parse_sweep_config(base_config(), "cfg.json");
  SweepOptions opt;
  opt.out_dir = test::fresh_dir("sweep-full");
  FakeBackend full;
  run_sweep(cfg, full.backend(), opt);
  const std::string expected = without_times(opt.out_dir / "results.csv");
  CHECK(full.calls == 18);  // 9 grid points × 2 seeds

  // Crash after 9 rows: the partial file keeps them, no final table is written.
  SweepOptions opt2 = opt;
  opt2.out_dir = test::fresh_dir("sweep-crash");
  FakeBackend crashing;
  crashing.fail_after = 9;
  CHECK_THROWS_WITH(run_sweep(cfg, crashing.backend(), opt2), "simulated crash");
  const fs::path partial = opt2.out_dir / "results.csv.partial";
  CHECK(!fs::exists(opt2.out_dir / "results.csv"));
  REQUIRE(read_complete_lines(partial).lines.size() == 1 + 9);
  // Tear the last row in the middle, as a kill during write() would.
  fs::resize_file(partial, fs::file_size(partial) - 20);
  CHECK(read_complete_lines(partial).torn);

  // Without --resume the folder is refused; with it only the 36 - 8 missing rows run.
  FakeBackend resumed;
  CHECK_THROWS_WITH(run_sweep(cfg, resumed.backend(), opt2), Catch::Contains("give --resume"));
  opt2.resume = true;
  const SweepReport r = run_sweep(cfg, resumed.backend(), opt2);
  CHECK(r.cases_reused == 8);
  CHECK(r.cases_run == 36 - 8);
  CHECK(resumed.calls == 18 - 4);  // problems 0..3 complete (8 rows), the rest run
  CHECK(without_times(opt2.out_dir / "results.csv") == expected);
  CHECK(!fs::exists(partial));
  // Resuming a finished sweep runs nothing and keeps the table.
  FakeBackend again;
  CHECK(run_sweep(cfg, again.backend(), opt2).cases_run == 0);
  CHECK(again.calls == 0);
  CHECK(without_times(opt2.out_dir / "results.csv") == expected);
}

TEST_CASE("sweep: --resume drops corrupt rows with a warning and completes the folder", "[sweep]") {
  // Issue 23 item 2: rmse=banana, a duplicated row, a torn row (and other damage) in results.csv.partial.
  const SweepConfig cfg = parse_sweep_config(base_config(), "cfg.json");
  SweepOptions clean;
  clean.out_dir = test::fresh_dir("sweep-resume-clean");
  FakeBackend full;
  run_sweep(cfg, full.backend(), clean);
  const std::string expected = without_times(clean.out_dir / "results.csv");

  SweepOptions opt;
  opt.out_dir = test::fresh_dir("sweep-resume-corrupt");
  FakeBackend crashing;
  crashing.fail_after = 9;
  CHECK_THROWS_WITH(run_sweep(cfg, crashing.backend(), opt), "simulated crash");
  const fs::path partial = opt.out_dir / "results.csv.partial";
  const std::vector<std::string> lines = read_complete_lines(partial).lines;
  REQUIRE(lines.size() == 1 + 9);  // header, then cases 0..8 on lines 2..10
  const CsvRow header = parse_csv_line(lines[0]);
  const std::size_t rmse = static_cast<std::size_t>(std::find(header.begin(), header.end(), "rmse") - header.begin());
  std::vector<CsvRow> rows;
  for (std::size_t i = 1; i < lines.size(); ++i) rows.push_back(parse_csv_line(lines[i]));
  REQUIRE(rows[5][0] == "5");
  rows[1][rmse] = "banana";  // line 3
  rows[2][3] = "12345";      // line 4: a seed the plan does not have
  rows[3][0] = "9999";       // line 5: no such case
  rows[4].pop_back();        // line 6: a field short
  CsvRow differing = rows[5];
  differing[rmse] = "0.5";
  std::string text = csv_line(header);
  for (const auto& r : rows) text += csv_line(r);
  text += csv_line(rows[0]);   // line 11: case 0 again, the same text
  text += csv_line(differing); // line 12: case 5 again, another rmse than line 7
  text += "6,3,1,7,B,1,0.";    // line 13: torn
  write_file_atomic(partial, text);

  std::vector<std::string> warnings;
  opt.resume = true;
  opt.warn = [&](const std::string& w) { warnings.push_back(w); };
  FakeBackend resumed;
  const SweepReport r = run_sweep(cfg, resumed.backend(), opt);
  CHECK(r.cases_reused == 4);  // cases 0, 6, 7, 8
  CHECK(r.cases_run == 36 - 4);
  CHECK(without_times(opt.out_dir / "results.csv") == expected);
  CHECK(json::parse(read_file(opt.out_dir / "summary.json"))["groups"] ==
        json::parse(read_file(clean.out_dir / "summary.json"))["groups"]);
  CHECK(!fs::exists(partial));
  std::string all;
  for (const auto& w : warnings) all += w + "\n";
  INFO(all);
  const std::string f = partial.string();
  CHECK(warnings.size() == 8);
  CHECK_THAT(all, Catch::Contains(f + ": line 3: column rmse: \"banana\" is not a number; dropped"));
  CHECK_THAT(all, Catch::Contains(f + ": line 4: column seed is \"12345\", case 2 of the config has"));
  CHECK_THAT(all, Catch::Contains(f + ": line 5: case_id 9999 is not a case of this sweep (it has 36)"));
  CHECK_THAT(all, Catch::Contains(f + ": line 6: " + std::to_string(header.size() - 1) + " fields, the header has"));
  CHECK_THAT(all, Catch::Contains(f + ": line 7: case 5 is on 2 lines that differ"));
  CHECK_THAT(all, Catch::Contains(f + ": line 12: case 5 is on 2 lines that differ"));
  CHECK_THAT(all, Catch::Contains(f + ": line 11: case 0 again (as on " + f + ": line 2)"));
  CHECK_THAT(all, Catch::Contains(f + ": line 13: torn"));

  // A finished folder whose table was damaged and whose summary is gone: --resume reruns the bad row and
  // writes both again.
  const fs::path csv = opt.out_dir / "results.csv";
  std::vector<std::string> done = read_complete_lines(csv).lines;
  CsvRow bad = parse_csv_line(done[7]);
  bad[rmse] = "nan?";
  done[7] = csv_line(bad);
  done[7].pop_back();
  std::string damaged;
  for (const auto& l : done) damaged += l + "\n";
  write_file_atomic(csv, damaged);
  fs::remove(opt.out_dir / "summary.json");
  warnings.clear();
  FakeBackend again;
  const SweepReport r2 = run_sweep(cfg, again.backend(), opt);
  CHECK(r2.cases_run == 1);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains(csv.string() + ": line 8: column rmse: \"nan?\" is not a number"));
  CHECK(without_times(csv) == expected);
  CHECK(fs::exists(opt.out_dir / "summary.json"));
}

TEST_CASE("sweep: shards merged equal the full run whatever the thread count", "[sweep]") {
  const SweepConfig cfg = parse_sweep_config(base_config(), "cfg.json");
  SweepOptions opt;
  opt.out_dir = test::fresh_dir("sweep-one");
  FakeBackend one;
  run_sweep(cfg, one.backend(), opt);

  const fs::path a = test::fresh_dir("sweep-shard-a"), b = test::fresh_dir("sweep-shard-b"), merged = test::fresh_dir("sweep-merged");
  for (std::size_t i = 0; i < 3; ++i) {
    SweepOptions s;
    s.out_dir = i == 1 ? b : a;  // shards in two folders, as on two machines
    s.shard_index = i;
    s.shard_count = 3;
    s.threads = 3;
    FakeBackend fake;
    const SweepReport r = run_sweep(cfg, fake.backend(), s);
    CHECK(r.csv.filename() == "results.shard-" + std::to_string(i) + "-of-3.csv");
    CHECK(r.summary.empty());
    CHECK(fake.calls == 6);
  }
  CHECK_THROWS_WITH(merge_sweeps({a}, merged), Catch::Contains("shard 1/3 is missing"));
  merge_sweeps({a, b}, merged);
  CHECK(without_times(merged / "results.csv") == without_times(opt.out_dir / "results.csv"));
  CHECK(json::parse(read_file(merged / "summary.json"))["groups"] ==
        json::parse(read_file(opt.out_dir / "summary.json"))["groups"]);

  std::size_t i = 0, n = 0;
  CHECK_THROWS_WITH(parse_shard("3/3", i, n), Catch::Contains("0 <= I < N"));
  parse_shard("2/5", i, n);
  CHECK((i == 2 && n == 5));
}

TEST_CASE("sweep: summary aggregates over seeds", "[sweep]") {
  json c = base_config();
  c["seeds"] = {1, 2, 5};
  const SweepConfig cfg = parse_sweep_config(c, "cfg.json");
  SweepOptions opt;
  opt.out_dir = test::fresh_dir("sweep-summary");
  FakeBackend fake;
  run_sweep(cfg, fake.backend(), opt);
  const json s = json::parse(read_file(opt.out_dir / "summary.json"));
  CHECK(s["config"] == c);
  CHECK(s["toolkit"]["version"] == PASA_VERSION);
  CHECK(s["machine"]["cores"].get<int>() >= 1);
  // Group of grid point 1 (Am = 0.5, x0 = 2), algorithm A (k = 1): rmse = e^-1 sin(2 + 0.5 seed)/3 + 1.
  const json& g = s["groups"][2];
  REQUIRE(g["algorithm"] == "A");
  CHECK(g["params"] == json::parse(R"({"Am": 0.5, "x0": 2})"));
  std::vector<double> v;
  for (double seed : {1.0, 2.0, 5.0}) v.push_back(std::exp(-1.0) * std::sin(2 + 0.5 * seed) / 3.0 + 1.0);
  const double mean = (v[0] + v[1] + v[2]) / 3;
  const double sd = std::sqrt(((v[0] - mean) * (v[0] - mean) + (v[1] - mean) * (v[1] - mean) + (v[2] - mean) * (v[2] - mean)) / 2);
  CHECK(g["metrics"]["rmse"]["mean"].get<double>() == Approx(mean).epsilon(1e-14));
  CHECK(g["metrics"]["rmse"]["sd"].get<double>() == Approx(sd).epsilon(1e-12));
  CHECK(g["metrics"]["rmse"]["min"].get<double>() == *std::min_element(v.begin(), v.end()));
  CHECK(g["metrics"]["rmse"]["max"].get<double>() == *std::max_element(v.begin(), v.end()));
  // x0 = 3, algorithm B: NaN in every seed, counted and not averaged.
  const json& nan_group = s["groups"][5];
  REQUIRE(nan_group["algorithm"] == "B");
  CHECK(nan_group["metrics"]["rmse"]["non_finite"] == 3);
  CHECK(nan_group["metrics"]["rmse"]["mean"].is_null());
  CHECK(nan_group["metrics"]["nan_pct"]["mean"] == 100.0);
  // Paired ratios: grid point 1, A / B per seed, geometric mean and t interval on the logs.
  const json& pr = s["paired"];
  REQUIRE(pr.size() == cfg.grid_points());  // one pair (A, B) per grid point
  const json& pc = pr[1];
  CHECK(pc["params"] == json::parse(R"({"Am": 0.5, "x0": 2})"));
  CHECK((pc["numerator"] == "A" && pc["denominator"] == "B" && pc["metric"] == "rmse" && pc["pairs"] == 3));
  std::vector<double> logs;
  for (double seed : {1.0, 2.0, 5.0}) {
    const double sn = std::sin(2 + 0.5 * seed) / 3.0;
    logs.push_back(std::log((std::exp(-1.0) * sn + 1.0) / (std::exp(-2.0) * sn + 1.0)));
  }
  const double lm = (logs[0] + logs[1] + logs[2]) / 3;
  const double lsd = std::sqrt(((logs[0] - lm) * (logs[0] - lm) + (logs[1] - lm) * (logs[1] - lm) + (logs[2] - lm) * (logs[2] - lm)) / 2);
  const double half = 4.3026527297 * lsd / std::sqrt(3.0);  // t_{2, 0.975}
  CHECK(pc["ratio_geo_mean"].get<double>() == Approx(std::exp(lm)).epsilon(1e-13));
  CHECK(pc["ratio_ci95"][0].get<double>() == Approx(std::exp(lm - half)).epsilon(1e-9));
  CHECK(pc["ratio_ci95"][1].get<double>() == Approx(std::exp(lm + half)).epsilon(1e-9));
  CHECK(pc["ci95_excludes_1"] == (lm - half > 0 || lm + half < 0));
  // x0 = 3: B is NaN on every seed, so no pair is left.
  CHECK((pr[2]["pairs"] == 0 && pr[2]["ratio_geo_mean"].is_null() && pr[2]["ci95_excludes_1"].is_null()));
}
