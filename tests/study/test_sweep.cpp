// pasa-sweep bookkeeping: config validation, grid expansion, CSV, resume, shards, merge, summary. Most
// cases use a small fake backend (deterministic metrics from the case's JSON) so they run in milliseconds;
// the last ones run the real library and compare the CSV with metrics computed directly.
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
#include "support/sweep_tables.hpp"
#include "support/temp_dirs.hpp"

using namespace pasa;
using nlohmann::json;
namespace fs = std::filesystem;

using pasa::test::without_times;

namespace {

json base_config() {
  return json::parse(R"({
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
    b.check_problem = [](const json& p, const std::string& path) {
      if (!p.at("x0").is_number() || p.at("x0").get<double>() < 0) throw InputError(path + "/x0: " + p.at("x0").dump() + " must be >= 0");
    };
    b.check_algorithm = [](const json& a, const std::string& path) {
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

}  // namespace

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

namespace {

// A real sweep small enough for the default test run: (1, 2, 64, 32) inputs; at x0 = 50 the fp16 scores
// (about 50²·32 = 80000) overflow FA-FP16/FP32, at x0 = 10 nothing does.
json tiny_real_config() {
  return json::parse(R"({
    "name": "tiny",
    "problem": {"shape": {"B": 1, "Nq": 2, "Sq": 64, "D": 32}, "format": "fp16", "seed": "$seed",
                "generator": {"kind": "uniform", "x0": "$x0", "am": 0.5}},
    "grid": {"x0": [10, 50]},
    "seeds": [3, 4],
    "algorithms": [
      {"label": "FA-FP32", "name": "fa2", "alloc": "fa_fp32", "s1": 16, "s2": 16},
      {"label": "FA-FP16/FP32", "name": "fa2", "alloc": "fa_fp16_fp32", "s1": 16, "s2": 16},
      {"label": "PASA-FP16", "name": "pasa", "alloc": "pasa_fp16", "s1": 16, "s2": 32, "pasa": {"beta": 0.984497}}
    ]
  })");
}

std::string library_error_of(const json& config) {
  try {
    const SweepConfig cfg = parse_sweep_config(config, "config.json");
    validate_with_backend(cfg, library_backend());
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("sweep config: library checks name the JSON path in the config", "[sweep]") {
  json c = tiny_real_config();
  c["algorithms"][2]["pasa"]["beta"] = 1.5;
  CHECK_THAT(library_error_of(c), Catch::StartsWith("config.json:/algorithms/2/pasa/beta: ") && Catch::Contains("1.5"));
  c = tiny_real_config();
  c["algorithms"][0]["s2"] = 0;
  CHECK_THAT(library_error_of(c), Catch::StartsWith("config.json:/algorithms/0/s2: "));
  c = tiny_real_config();
  c["algorithms"][1]["alloc"] = {{"preset", "fa_fp32"}, {"stages", {{"s", "fp17"}}}};
  CHECK_THAT(library_error_of(c), Catch::StartsWith("config.json:/algorithms/1/alloc/stages/s") && Catch::Contains("fp17"));
  c = tiny_real_config();
  c["problem"]["shape"]["Sq"] = -64;
  CHECK_THAT(library_error_of(c), Catch::StartsWith("config.json:/problem/shape/Sq: "));
  c = tiny_real_config();
  c["problem"]["generator"]["x00"] = 1;
  CHECK_THAT(library_error_of(c), Catch::StartsWith("config.json:/problem/generator/x00: unknown key 'x00' (did you mean 'x0'?)"));
  c = tiny_real_config();
  c["grid"]["a"] = {0.5, -1};
  c["problem"]["generator"]["am"] = "$a";
  CHECK_THAT(library_error_of(c), Catch::StartsWith("config.json:/problem") && Catch::EndsWith("(grid point a=-1, x0=10)"));
  CHECK(library_error_of(tiny_real_config()) == "(no error)");
  CHECK(library_error_of(json::parse(default_sweep_config_text())) == "(no error)");
}

TEST_CASE("sweep: a tiny real sweep CSV holds the library metrics bit for bit", "[sweep]") {
  const SweepConfig cfg = parse_sweep_config(tiny_real_config(), "tiny.json");
  SweepOptions opt;
  opt.out_dir = test::fresh_dir("sweep-real");
  opt.threads = 1;
  run_sweep(cfg, library_backend(), opt);
  const CsvFileLines lines = read_complete_lines(opt.out_dir / "results.csv");
  REQUIRE(lines.lines.size() == 1 + 12);
  const CsvRow header = parse_csv_line(lines.lines[0]);
  auto col = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    REQUIRE(it != header.end());
    return static_cast<std::size_t>(it - header.begin());
  };
  const std::size_t rmse = col("rmse"), nan_pct = col("nan_pct"), max_abs = col("max_abs_err"), over = col("score_overflow");
  bool saw_overflow = false;
  for (std::size_t i = 1; i < lines.lines.size(); ++i) {
    const CsvRow row = parse_csv_line(lines.lines[i]);
    // Recompute this case directly from its recorded problem and algorithm JSON.
    const AttentionInputs in = generate_inputs(problem_from_json(json::parse(row[col("problem_json")]), "t"));
    const Golden g = golden_attention(in);
    const Metrics m = compare_outputs(run_attention(in, algorithm_from_json(json::parse(row[col("algorithm_json")]), "t")).o, g.o,
                                      uniform_baseline(in));
    const ScoreStats ss = score_stats(in, format_by_name("fp16"));
    INFO("case " << row[0] << " " << row[col("algorithm")] << " x0=" << row[col("x0")]);
    CHECK(row[rmse] == csv_number(m.rmse));
    CHECK(row[nan_pct] == csv_number(m.nan_pct));
    CHECK(row[max_abs] == csv_number(m.max_abs_err));
    CHECK(row[col("rmse_uniform_baseline")] == csv_number(m.rmse_uniform_baseline));
    CHECK(row[col("skill")] == csv_number(m.skill));
    CHECK(row[col("rmse_centred")] == csv_number(m.rmse_centred));
    CHECK(row[over] == csv_number(static_cast<double>(ss.overflow)));
    if (row[col("x0")] == "50" && row[col("algorithm")] == "FA-FP16/FP32") {
      CHECK(m.nan_pct == 100.0);  // the headline, small: FA-FP16/FP32 overflows ...
      saw_overflow = true;
    }
    if (row[col("x0")] == "50" && row[col("algorithm")] == "PASA-FP16") CHECK(m.nan_pct == 0.0);  // ... PASA does not
  }
  CHECK(saw_overflow);
}

TEST_CASE("sweep: real CSV metrics are identical for any thread count and shard split", "[sweep]") {
  const SweepConfig cfg = parse_sweep_config(tiny_real_config(), "tiny.json");
  SweepOptions one;
  one.out_dir = test::fresh_dir("sweep-real-1");
  one.threads = 1;
  run_sweep(cfg, library_backend(), one);
  SweepOptions three = one;
  three.out_dir = test::fresh_dir("sweep-real-3");
  three.threads = 3;
  run_sweep(cfg, library_backend(), three);
  CHECK(without_times(three.out_dir / "results.csv") == without_times(one.out_dir / "results.csv"));
  const fs::path shards = test::fresh_dir("sweep-real-shards");
  for (std::size_t i = 0; i < 3; ++i) {
    SweepOptions s;
    s.out_dir = shards;
    s.threads = 2;
    s.shard_index = i;
    s.shard_count = 3;
    run_sweep(cfg, library_backend(), s);
  }
  const fs::path merged = test::fresh_dir("sweep-real-merged");
  merge_sweeps({shards}, merged);
  CHECK(without_times(merged / "results.csv") == without_times(one.out_dir / "results.csv"));
}

TEST_CASE("sweep: problems side by side (jobs, shared slots) give the same table", "[sweep]") {
  const SweepConfig cfg = parse_sweep_config(tiny_real_config(), "tiny.json");
  SweepOptions one;
  one.out_dir = test::fresh_dir("sweep-jobs-1");
  one.threads = 1;
  run_sweep(cfg, library_backend(), one);
  SweepOptions jobs = one;
  jobs.out_dir = test::fresh_dir("sweep-jobs-3");
  jobs.threads = 3;
  jobs.jobs = 3;
  const SweepReport r = run_sweep(cfg, library_backend(), jobs);
  CHECK(r.cases_run == cfg.case_count());
  CHECK(without_times(jobs.out_dir / "results.csv") == without_times(one.out_dir / "results.csv"));
  // Two sweeps at once on two shared slots (as reproduce_paper runs the paper's four), each with its own
  // backend so that nothing is shared but the slots.
  json other = tiny_real_config();
  other["seeds"] = {5};
  const SweepConfig cfg2 = parse_sweep_config(other, "tiny2.json");
  SweepOptions alone = one;
  alone.out_dir = test::fresh_dir("sweep-slots-alone");
  run_sweep(cfg2, library_backend(), alone);
  const auto slots = std::make_shared<CaseSlots>(2);
  SweepOptions a = one, b = one;
  a.out_dir = test::fresh_dir("sweep-slots-a");
  b.out_dir = test::fresh_dir("sweep-slots-b");
  a.threads = b.threads = 2;
  a.slots = b.slots = slots;
  b.priority = 1;
  std::thread tb([&] { run_sweep(cfg2, library_backend(), b); });
  run_sweep(cfg, library_backend(), a);
  tb.join();
  CHECK(without_times(a.out_dir / "results.csv") == without_times(one.out_dir / "results.csv"));
  CHECK(without_times(b.out_dir / "results.csv") == without_times(alone.out_dir / "results.csv"));
  // A failing problem stops the workers and leaves a folder --resume completes.
  FakeBackend fake;
  fake.fail_after = 5;
  const SweepConfig fcfg = parse_sweep_config(base_config(), "fake.json");
  SweepOptions f;
  f.out_dir = test::fresh_dir("sweep-jobs-fail");
  f.threads = f.jobs = 2;
  CHECK_THROWS_WITH(run_sweep(fcfg, fake.backend(), f), "simulated crash");
  fake.fail_after = -1;
  f.resume = true;
  run_sweep(fcfg, fake.backend(), f);
  SweepOptions g;
  g.out_dir = test::fresh_dir("sweep-jobs-fake-1");
  FakeBackend fresh;
  run_sweep(fcfg, fresh.backend(), g);
  CHECK(without_times(f.out_dir / "results.csv") == without_times(g.out_dir / "results.csv"));
}

TEST_CASE("sweep: one backend computes a problem shared by two sweeps once, and only the same problem", "[sweep]") {
  // Sweep 2 holds sweep 1's problems (seed 3, x0 = 10 and 50) and new ones (seed 6; x0 = 30).
  const SweepConfig cfg1 = parse_sweep_config(tiny_real_config(), "tiny.json");
  json c2 = tiny_real_config();
  c2["seeds"] = {3, 6};
  c2["grid"]["x0"] = {10, 30, 50};
  const SweepConfig cfg2 = parse_sweep_config(c2, "tiny2.json");
  const SweepBackend shared = library_backend();
  SweepOptions o1, o2, fresh;
  o1.out_dir = test::fresh_dir("sweep-cache-1");
  o2.out_dir = test::fresh_dir("sweep-cache-2");
  fresh.out_dir = test::fresh_dir("sweep-cache-fresh");
  run_sweep(cfg1, shared, o1);
  run_sweep(cfg2, shared, o2);
  run_sweep(cfg2, library_backend(), fresh);  // the same sweep computed by a new backend: every case fresh
  // Cached or not, sweep 2's metrics are those of a fresh computation, bit for bit.
  CHECK(without_times(o2.out_dir / "results.csv") == without_times(fresh.out_dir / "results.csv"));
  // Rows by (problem JSON, algorithm JSON): a hit repeats sweep 1's row, timing columns included (the
  // timings of the one computation; a second computation would measure its own).
  auto rows_of = [](const fs::path& csv) {
    const CsvFileLines lines = read_complete_lines(csv);
    const CsvRow header = parse_csv_line(lines.lines[0]);
    std::map<std::string, CsvRow> rows;
    for (std::size_t i = 1; i < lines.lines.size(); ++i) {
      const CsvRow r = parse_csv_line(lines.lines[i]);
      CsvRow tail(r.begin() + 5, r.end());  // from the grid axes on: metrics, JSON, timings
      rows[r[r.size() - 4] + r[r.size() - 3]] = tail;
    }
    return rows;
  };
  const auto first = rows_of(o1.out_dir / "results.csv"), second = rows_of(o2.out_dir / "results.csv");
  std::size_t hits = 0, fresh_rows = 0;
  for (const auto& [key, row] : second) {
    const auto it = first.find(key);
    if (it == first.end()) {
      ++fresh_rows;
      continue;
    }
    // Seed 3 at x0 10 and 50: in sweep 1 too (same problem JSON, same algorithm JSON).
    CHECK(row == it->second);
    ++hits;
  }
  CHECK(hits == 2 * 3);              // 2 problems x 3 algorithms
  CHECK(fresh_rows == 6 * 3 - 2 * 3);
  // A miss is computed: seed 6 differs from seed 3 at the same grid point (a cache keyed without the seed
  // would have repeated seed 3's metrics), and x0 = 30 differs from both neighbours.
  std::map<std::string, std::set<std::string>> rmse_by_point_alg;
  {
    const CsvFileLines lines = read_complete_lines(o2.out_dir / "results.csv");
    const CsvRow header = parse_csv_line(lines.lines[0]);
    const std::size_t rmse = static_cast<std::size_t>(std::find(header.begin(), header.end(), "rmse") - header.begin());
    for (std::size_t i = 1; i < lines.lines.size(); ++i) {
      const CsvRow r = parse_csv_line(lines.lines[i]);
      rmse_by_point_alg[r[2] + "/" + r[4]].insert(r[rmse]);
    }
  }
  CHECK(rmse_by_point_alg.size() == 9);
  std::size_t compared = 0;
  for (const auto& [point, values] : rmse_by_point_alg) {
    INFO(point);
    if (!std::isfinite(parse_csv_number(*values.begin()))) continue;  // FA-FP16/FP32 at x0 = 50: NaN for both
    CHECK(values.size() == 2);  // seeds 3 and 6 give different RMSEs at every other point
    ++compared;
  }
  CHECK(compared == 8);
}

TEST_CASE("sweep: a grid over block-scale schemes and scale rules (placeholders in /quant)", "[sweep][block_quant]") {
  json c = tiny_real_config();
  c["grid"] = {{"x0", 10}, {"scheme", {"mxfp8_e4m3", "int8_per_warp"}}, {"rule", {"floor", "rceil"}}};
  c["seeds"] = {3};
  c["algorithms"] = json::parse(R"([{"label": "FA-FP32-Q", "name": "fa2", "alloc": "fa_fp32", "s1": 16, "s2": 16,
      "quant": {"q": {"scheme": "$scheme", "scale_rule": "$rule"}, "k": "$scheme", "v": "mxfp8_e4m3"}}])");
  CHECK(library_error_of(c) == "(no error)");
  const SweepConfig cfg = parse_sweep_config(c, "grid.json");
  SweepOptions opt;
  opt.out_dir = test::fresh_dir("sweep-blocks");
  opt.threads = 1;
  run_sweep(cfg, library_backend(), opt);
  const CsvFileLines lines = read_complete_lines(opt.out_dir / "results.csv");
  REQUIRE(lines.lines.size() == 1 + 4);
  const CsvRow header = parse_csv_line(lines.lines[0]);
  const auto col = static_cast<std::size_t>(std::find(header.begin(), header.end(), "algorithm_json") - header.begin());
  std::set<std::string> seen;
  for (std::size_t i = 1; i < lines.lines.size(); ++i) {
    const AlgorithmSpec s = algorithm_from_json(json::parse(parse_csv_line(lines.lines[i])[col]), "t");
    REQUIRE(s.quant.q_block);
    seen.insert(s.quant.q_block->name + "/" + std::string(scale_rule_name(s.quant.q_block->rule)));
  }
  CHECK(seen == std::set<std::string>{"mxfp8_e4m3/floor", "mxfp8_e4m3/rceil", "int8_per_warp/floor", "int8_per_warp/rceil"});
  c["grid"]["rule"] = {"floor", "flor"};
  CHECK_THAT(library_error_of(c), Catch::Contains("/algorithms/0/quant/q/scale_rule") && Catch::Contains("flor"));
}
