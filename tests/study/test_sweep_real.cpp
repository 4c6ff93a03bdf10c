// Sweeps of the real library: the JSON paths of its checks, its CSV metrics against the metrics computed
// directly, bit for bit for any thread count, shard split and jobs, problems shared by two sweeps, and a
// grid over block-scale schemes (the bookkeeping on a fake backend: test_sweep.cpp).
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
