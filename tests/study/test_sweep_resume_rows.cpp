// --resume's check of each row read back, column by column and shard by shard: a row of another
// shard and a row whose last column (time_s) is not a number are dropped with a warning and their cases run
// again, so the resumed shards merge into the uninterrupted run's table. A small fake backend (metrics are
// smooth functions of the case) keeps it to milliseconds.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pasa/io/csv.hpp"
#include "pasa/io/output_file.hpp"
#include "pasa/study/sweep.hpp"
#include "pasa/study/sweep_config.hpp"
#include "support/sweep_tables.hpp"
#include "support/temp_dirs.hpp"

using namespace pasa;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json config() {
  return json::parse(R"({
    "name": "resume_rows",
    "problem": {"x0": "$x0", "seed": "$seed"},
    "grid": {"x0": [1, 2, 3, 4]},
    "seeds": [7, 8],
    "algorithms": [{"label": "A", "k": 1}, {"label": "B", "k": 2}]
  })");
}

struct Fake {
  int fail_after = -1;  // throw after this many rows (a crash); -1: never
  int emitted = 0;
  SweepBackend backend() {
    SweepBackend b;
    b.problem_columns = {"score_max"};
    b.algorithm_columns = {"rmse"};
    b.check_problem = [](const json&, const std::string&) {};
    b.check_algorithm = [](const json&, const std::string&) {};
    b.run = [this](const PlannedProblem& p, const SweepConfig&, const std::vector<bool>& wanted, int,
                   const SweepBackend::Emit& emit) {
      const double x0 = p.problem.at("x0").get<double>();
      const double seed = static_cast<double>(p.problem.at("seed").get<std::uint64_t>());
      for (std::size_t a = 0; a < wanted.size(); ++a) {
        if (!wanted[a]) continue;
        if (fail_after >= 0 && emitted >= fail_after) throw std::runtime_error("simulated crash");
        const double k = p.algorithms[a].at("k").get<double>();
        emit(a, {x0 * 100 + seed, std::exp(-k) * std::sin(x0 * seed) + 2}, 0.001, 0.002);
        ++emitted;
      }
    };
    return b;
  }
};

fs::path partial_file(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".partial") return e.path();
  FAIL("no partial file in " << dir.string());
  return {};
}

std::size_t column(const CsvRow& header, const std::string& name) {
  for (std::size_t c = 0; c < header.size(); ++c)
    if (header[c] == name) return c;
  FAIL("no column " << name);
  return 0;
}

// Case ids of a table, in its order.
std::vector<std::size_t> case_ids(const fs::path& csv) {
  const std::vector<std::string> lines = read_complete_lines(csv).lines;
  std::vector<std::size_t> ids;
  for (std::size_t i = 1; i < lines.size(); ++i) ids.push_back(std::stoull(parse_csv_line(lines[i])[0]));
  return ids;
}

}  // namespace

TEST_CASE("sweep --resume: a row of another shard is dropped, and the shards still merge", "[sweep]") {
  const SweepConfig cfg = parse_sweep_config(config(), "cfg.json");  // 4 x0 × 2 seeds = 8 problems, 16 cases
  SweepOptions full;
  full.out_dir = test::fresh_dir("resume-rows-full");
  Fake f0;
  run_sweep(cfg, f0.backend(), full);

  // Shard 0/2 complete in one folder; shard 1/2 crashes after 3 rows in another.
  const fs::path a = test::fresh_dir("resume-rows-shard0"), b = test::fresh_dir("resume-rows-shard1");
  SweepOptions s0;
  s0.out_dir = a, s0.shard_index = 0, s0.shard_count = 2;
  Fake f1;
  const SweepReport r0 = run_sweep(cfg, f1.backend(), s0);
  SweepOptions s1 = s0;
  s1.out_dir = b, s1.shard_index = 1;
  Fake crashing;
  crashing.fail_after = 3;
  CHECK_THROWS_WITH(run_sweep(cfg, crashing.backend(), s1), "simulated crash");
  const fs::path partial = partial_file(b);
  // Shard 0's first row (case 0: problem 0, shard 0's) appended to shard 1's partial file.
  const std::vector<std::string> shard0 = read_complete_lines(r0.csv).lines;
  REQUIRE(parse_csv_line(shard0[1])[0] == "0");
  std::string text;
  for (const std::string& l : read_complete_lines(partial).lines) text += l + "\n";
  text += shard0[1] + "\n";
  write_file_atomic(partial, text);

  std::vector<std::string> warnings;
  s1.resume = true;
  s1.warn = [&](const std::string& w) { warnings.push_back(w); };
  Fake resumed;
  SweepReport r1;
  REQUIRE_NOTHROW(r1 = run_sweep(cfg, resumed.backend(), s1));
  std::string all;
  for (const auto& w : warnings) all += w + "\n";
  INFO(all);
  CHECK(r1.cases_reused == 3);
  CHECK(r1.cases_run == 8 - 3);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains(partial.string() + ": line 5: case_id 0 belongs to another shard than 1/2"));
  // Every case of shard 1's table is a case of problems 1, 3, 5, 7.
  for (std::size_t id : case_ids(r1.csv)) CHECK((id / 2) % 2 == 1);
  const fs::path merged = test::fresh_dir("resume-rows-merged");
  REQUIRE_NOTHROW(merge_sweeps({a, b}, merged));
  CHECK(test::without_times(merged / "results.csv") == test::without_times(full.out_dir / "results.csv"));
}

TEST_CASE("sweep --resume: every column is checked, the last one (time_s) too", "[sweep]") {
  const SweepConfig cfg = parse_sweep_config(config(), "cfg.json");
  SweepOptions full;
  full.out_dir = test::fresh_dir("resume-rows-clean");
  Fake f0;
  run_sweep(cfg, f0.backend(), full);

  SweepOptions opt;
  opt.out_dir = test::fresh_dir("resume-rows-times");
  Fake crashing;
  crashing.fail_after = 6;
  CHECK_THROWS_WITH(run_sweep(cfg, crashing.backend(), opt), "simulated crash");
  const fs::path partial = partial_file(opt.out_dir);
  const std::vector<std::string> lines = read_complete_lines(partial).lines;
  REQUIRE(lines.size() == 1 + 6);
  const CsvRow header = parse_csv_line(lines[0]);
  REQUIRE(header.back() == "time_s");
  const std::size_t golden_time = column(header, "golden_time_s");
  std::vector<CsvRow> rows;
  for (std::size_t i = 1; i < lines.size(); ++i) rows.push_back(parse_csv_line(lines[i]));
  rows[1].back() = "abc";            // line 3: time_s, the last column
  rows[3][golden_time] = "-";        // line 5: golden_time_s, the one before it
  std::string text = csv_line(header);
  for (const auto& r : rows) text += csv_line(r);
  write_file_atomic(partial, text);

  std::vector<std::string> warnings;
  opt.resume = true;
  opt.warn = [&](const std::string& w) { warnings.push_back(w); };
  Fake resumed;
  SweepReport r;
  REQUIRE_NOTHROW(r = run_sweep(cfg, resumed.backend(), opt));
  std::string all;
  for (const auto& w : warnings) all += w + "\n";
  INFO(all);
  CHECK(r.cases_reused == 4);
  CHECK(r.cases_run == 16 - 4);
  REQUIRE(warnings.size() == 2);
  CHECK_THAT(all, Catch::Contains(partial.string() + ": line 3: column time_s: \"abc\" is not a number; dropped"));
  CHECK_THAT(all, Catch::Contains(partial.string() + ": line 5: column golden_time_s: \"-\" is not a number; dropped"));
  // The table holds only numbers in the timing columns, and the uninterrupted run's values elsewhere.
  const std::vector<std::string> done = read_complete_lines(r.csv).lines;
  REQUIRE(done.size() == 1 + 16);
  for (std::size_t i = 1; i < done.size(); ++i) {
    const CsvRow row = parse_csv_line(done[i]);
    CHECK_NOTHROW(parse_csv_number(row.back()));
    CHECK_NOTHROW(parse_csv_number(row[golden_time]));
  }
  CHECK(test::without_times(r.csv) == test::without_times(full.out_dir / "results.csv"));
}
