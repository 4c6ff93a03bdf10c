// pasa-sweep bookkeeping: config validation, grid expansion, CSV, resume, shards, merge, summary. Most
// cases use a small fake backend (deterministic metrics from the case's JSON) so they run in milliseconds;
// the last ones run the real library and compare the CSV with metrics computed directly.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

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

using namespace pasa;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Output folders under the system temp folder, removed when the test program exits.
struct TempDirs {
  std::vector<fs::path> dirs;
  ~TempDirs() {
    std::error_code ec;
    for (const auto& d : dirs) fs::remove_all(d, ec);
  }
};

fs::path fresh_dir(const std::string& tag) {
  static TempDirs temp_dirs;
  static std::atomic<int> counter{0};
  const fs::path d = fs::temp_directory_path() / ("pasa-test-sweep-" + std::to_string(::getpid()) + "-" + tag + "-" + std::to_string(counter++));
  fs::remove_all(d);
  temp_dirs.dirs.push_back(d);
  return d;
}

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
        const double rmse = (x0 == 3 && k == 2) ? NAN : std::exp(-k) * std::sin(x0 + am * seed) / 3.0 + 1.0;
        emit(a, {x0 * 4096 + am, rmse, std::isnan(rmse) ? 100.0 : 0.0}, 0.001, 0.002);
        ++emitted;
      }
    };
    return b;
  }
};

std::string error_of(const json& config) {
  try {
    parse_sweep_config(config, "cfg.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// The table without its timing columns (the only ones outside the bit-identity guarantee).
std::string without_times(const fs::path& csv) {
  std::string out;
  for (const auto& line : read_complete_lines(csv).lines) {
    CsvRow r = parse_csv_line(line);
    r.resize(r.size() - 2);
    out += csv_line(r);
  }
  return out;
}

}  // namespace

TEST_CASE("sweep config: unknown keys are named with a did-you-mean", "[sweep]") {
  json c = base_config();
  c["algoritms"] = c["algorithms"];
  c.erase("algorithms");
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /: unknown key 'algoritms' (did you mean 'algorithms'?)"));
  c = base_config();
  c["golden"] = {{"precison_bits", 128}};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /golden: unknown key 'precison_bits' (did you mean 'precision_bits'?)"));
  c = base_config();
  c["grid"]["x0"] = {{"from", 0}, {"too", 1}, {"step", 1}};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /grid/x0: unknown key 'too' (did you mean 'to'?)"));
}

TEST_CASE("sweep config: wrong types are named with their JSON path", "[sweep]") {
  json c = base_config();
  c["seeds"] = "7";
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /seeds: expected a list of seeds, got string \"7\""));
  c = base_config();
  c["seeds"] = {7, 1.5};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /seeds/1: expected an integer, got number 1.5"));
  c = base_config();
  c["algorithms"][1]["label"] = 3;
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /algorithms/1/label: expected a string"));
  c = base_config();
  c["grid"]["Am"] = {{"from", "a"}, {"to", 1}, {"step", 1}};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /grid/Am/from: expected a number, got string \"a\""));
  c = base_config();
  c["grid"]["x0"] = {1, {{"a", 1}}};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /grid/x0/1: grid values must be numbers, strings or booleans"));
  c = base_config();
  c["problem"] = json::array();
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /problem: expected an object"));
  CHECK_THAT(error_of(json::array()), Catch::StartsWith("cfg.json: /: expected an object"));
}

TEST_CASE("sweep config: impossible values are refused", "[sweep]") {
  json c = base_config();
  c["seeds"] = {7, -1};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /seeds/1: -1 is negative"));
  c = base_config();
  c["seeds"] = {7, 7};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /seeds/1: seed 7 appears twice"));
  c = base_config();
  c["grid"]["Am"]["step"] = 0;
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /grid/Am/step: 0 must be > 0"));
  c = base_config();
  c["grid"]["Am"]["to"] = 0.1;
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /grid/Am/to: 0.1 is below \"from\""));
  c = base_config();
  c["grid"]["x0"] = json::array();
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /grid/x0: the list of values is empty"));
  c = base_config();
  c.erase("seeds");
  c["repeats"] = 0;
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /repeats: 0 must be between 1 and 1000000"));
  c = base_config();
  c["golden"] = {{"precision_bits", 24}};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /golden/precision_bits: 24 is outside [53, 4096]"));
  c = base_config();
  c["score_format"] = "fp17";
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /score_format: ") && Catch::Contains("fp16"));
  c = base_config();
  c["algorithms"] = json::array();
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /algorithms: the list of algorithms is empty"));
  c = base_config();
  c["algorithms"][1]["label"] = "A";
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /algorithms/1/label: label \"A\" is used twice"));
  c = base_config();
  c["outputs"] = {{"csv", "../x.csv"}};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /outputs/csv: \"../x.csv\" must be a plain file name"));
}

TEST_CASE("sweep config: placeholders must match grid axes", "[sweep]") {
  json c = base_config();
  c["problem"]["x0"] = "$x1";
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /problem/x0: placeholder \"$x1\" has no grid axis (did you mean \"x0\"?)"));
  c = base_config();
  c["grid"]["p"] = {0.001};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /grid/p: axis is not used: no \"$p\""));
  c = base_config();
  c["problem"]["seed"] = 1;
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /problem: no \"$seed\" placeholder"));
  c = base_config();
  c["grid"]["seed"] = {1};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json: /grid/seed: \"seed\" is not a grid axis"));
}

TEST_CASE("sweep config: library-level mistakes stop the sweep before anything runs", "[sweep]") {
  json c = base_config();
  c["grid"]["b"] = {0.5, 1.5};
  c["algorithms"][1]["beta"] = "$b";
  const SweepConfig cfg = parse_sweep_config(c, "cfg.json");
  FakeBackend fake;
  const fs::path dir = fresh_dir("invalid");
  SweepOptions opt;
  opt.out_dir = dir;
  CHECK_THROWS_WITH(run_sweep(cfg, fake.backend(), opt),
                    Catch::StartsWith("cfg.json: /algorithms/1/beta: 1.5 is outside (0, 1) (grid point Am=0.5, b=1.5, x0=1"));
  CHECK(fake.calls == 0);
  CHECK(!fs::exists(dir));
}

TEST_CASE("sweep grid: ranges order and substitution", "[sweep]") {
  json c = base_config();
  c["grid"]["Am"] = {{"from", 0}, {"to", 0.3}, {"step", 0.1}};
  const SweepConfig cfg = parse_sweep_config(c, "cfg.json");
  REQUIRE(cfg.grid.size() == 2);
  CHECK(cfg.grid[0].name == "Am");  // axes in name order; the last one (x0) varies fastest
  CHECK(cfg.grid[0].values == std::vector<json>{0, 0.1, 0.2, 0.3});
  CHECK(cfg.grid_points() == 12);
  CHECK(cfg.case_count() == 12 * 2 * 2);
  const PlannedProblem p = plan_problem(cfg, 2 * 3 + 1);  // grid point 3 (Am = 0.1, x0 = 1), second seed
  CHECK(p.grid_index == 3);
  CHECK(p.seed == 8);
  CHECK(p.problem == json::parse(R"({"x0": 1, "am": 0.1, "seed": 8})"));
  CHECK(p.algorithms[1] == json::parse(R"({"k": 2, "beta": 0.5})"));  // the label is not passed on
  CHECK(describe(cfg, p) == "Am=0.1, x0=1, seed=8");
  c.erase("seeds");
  c["repeats"] = 3;
  CHECK(parse_sweep_config(c, "cfg.json").seeds == std::vector<std::uint64_t>{1, 2, 3});
}

TEST_CASE("csv: quoting and full-precision numbers round-trip", "[sweep]") {
  const CsvRow row = {"a", "b,c", "say \"hi\"", "", R"({"x":[1,2]})"};
  const std::string line = csv_line(row);
  CHECK(line == "a,\"b,c\",\"say \"\"hi\"\"\",,\"{\"\"x\"\":[1,2]}\"\n");
  CHECK(parse_csv_line(line.substr(0, line.size() - 1)) == row);
  for (double x : {0.1, 1.0 / 3.0, 6.5504e4, 5e-324, -2.5, 1e300}) CHECK(parse_csv_number(csv_number(x)) == x);
  CHECK(csv_number(NAN) == "nan");
  CHECK(csv_number(-INFINITY) == "-inf");
  CHECK(std::isnan(parse_csv_number("nan")));
  CHECK_THROWS_AS(parse_csv_number("1.5x"), InputError);
}

TEST_CASE("sweep: an interrupted run resumes to the same table", "[sweep]") {
  const SweepConfig cfg = parse_sweep_config(base_config(), "cfg.json");
  SweepOptions opt;
  opt.out_dir = fresh_dir("full");
  FakeBackend full;
  run_sweep(cfg, full.backend(), opt);
  const std::string expected = without_times(opt.out_dir / "results.csv");
  CHECK(full.calls == 18);  // 9 grid points × 2 seeds

  // Crash after 9 rows: the partial file keeps them, no final table is written.
  SweepOptions opt2 = opt;
  opt2.out_dir = fresh_dir("crash");
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
  CHECK_THROWS_WITH(run_sweep(cfg, resumed.backend(), opt2), Catch::Contains("pass --resume"));
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

TEST_CASE("sweep: shards merged equal the full run whatever the thread count", "[sweep]") {
  const SweepConfig cfg = parse_sweep_config(base_config(), "cfg.json");
  SweepOptions opt;
  opt.out_dir = fresh_dir("one");
  FakeBackend one;
  run_sweep(cfg, one.backend(), opt);

  const fs::path a = fresh_dir("shard-a"), b = fresh_dir("shard-b"), merged = fresh_dir("merged");
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
  opt.out_dir = fresh_dir("summary");
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
}

TEST_CASE("paper tables: Table 1 and Table 3 agree with the printed values", "[sweep]") {
  // Table 1: our column next to the paper's printed one, equal to the printed digits.
  const Table t1 = table1_formats();
  REQUIRE(t1.rows.size() == 4);
  for (const auto& r : t1.rows) {
    const double ours = parse_csv_number(r[2]), printed = parse_csv_number(r[3]);
    CHECK(ours == Approx(printed).epsilon(5e-3));  // printed with 3-4 digits
    CHECK(parse_csv_number(r[4]) == Approx(parse_csv_number(r[5])).epsilon(2e-2));
  }
  CHECK(t1.rows[1][4] == "65504");
  // Table 3: the optimised β to the printed digits (the first row's is printed as "0.9").
  const Table t3 = table3_beta();
  REQUIRE(t3.rows.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    const std::string& printed = t3.rows[i][9];
    const double digits = static_cast<double>(printed.size() - printed.find('.') - 1);
    CHECK(std::fabs(parse_csv_number(t3.rows[i][8]) - std::stod(printed)) <= 0.5 * std::pow(10.0, -digits) + 1e-12);
  }
  CHECK(t3.rows[3][9] == "0.984497");
}

TEST_CASE("paper tables: Table 4 standard errors and distances to the paper and the GPU", "[sweep]") {
  // Hand-made sweep tables holding only the columns Table 4 reads: three seeds of FA-FP16/FP32 at every
  // Table 4 point, NaN % = base + seed offsets {-0.1, 0, +0.1} (sd 0.1, SE 0.1/sqrt(3)).
  const fs::path dir = fresh_dir("table4");
  struct Point { const char* sweep; double x0, am, base; };
  const Point pts[] = {{"fig9_uniform_x0", 30, 0.5, 100}, {"fig9_uniform_am", 20, 15, 0.12},  {"fig9_uniform_am", 20, 20, 9.0},
                       {"fig10_hybrid_x0", 30, 10, 100},  {"fig10_hybrid_am", 20, 50, 0.04}, {"fig10_hybrid_am", 20, 100, 1.0}};
  std::map<std::string, std::string> text;
  for (const auto& p : pts)
    for (int seed = 1; seed <= 3; ++seed) {
      const double nan = p.base == 100 ? 100 : p.base + 0.1 * (seed - 2);
      text[p.sweep] += fmt::format("{},{},{},FA-FP16/FP32,{}\n", seed, p.x0, p.am, csv_number(nan));
      text[p.sweep] += fmt::format("{},{},{},PASA-FP16,0\n", seed, p.x0, p.am);
    }
  for (const auto& [name, body] : text) {
    fs::create_directories(dir / name);
    std::ofstream(dir / name / "results.csv") << "seed,x0,Am,algorithm,nan_pct\n" << body;
  }
  auto csv_of = [&](const PaperSweep& s) { return dir / s.name / "results.csv"; };
  // GPU: row 3 only, on the same seeds.
  auto gpu = [](int no) {
    std::map<std::string, double> g;
    if (no == 3) g = {{"1", 8.85}, {"2", 8.9}, {"3", 9.1}};  // ours 8.9, 9.0, 9.1: differences 0.05, 0.1, 0
    return g;
  };
  const Table t = table4_nan(csv_of, gpu);
  REQUIRE(t.rows.size() == 6);
  auto at = [&](std::size_t row, const std::string& name) {
    const auto it = std::find(t.header.begin(), t.header.end(), name);
    REQUIRE(it != t.header.end());
    return t.rows[row][static_cast<std::size_t>(it - t.header.begin())];
  };
  const double se = 0.1 / std::sqrt(3.0);
  CHECK(parse_csv_number(at(2, "nan_pct_mean")) == Approx(9.0).epsilon(1e-14));
  CHECK(parse_csv_number(at(2, "nan_pct_se")) == Approx(se).epsilon(1e-12));
  CHECK(at(2, "paper_nan_pct") == "8.14%");
  CHECK(parse_csv_number(at(2, "paper_distance_se")) == Approx((9.0 - 8.14) / se).epsilon(1e-12));
  CHECK(parse_csv_number(at(5, "paper_distance_se")) == Approx((1.0 - 1.11) / se).epsilon(1e-12));
  CHECK(at(0, "nan_pct_se") == "0");
  CHECK(at(0, "paper_distance_se") == "0");  // 100 % against 100 %: no distance, although SE = 0
  // GPU, paired by seed: differences (0.05, 0.1, 0), mean 0.05, sd 0.05: sqrt(3) standard errors.
  const double m = 0.05, sd = 0.05;
  CHECK(parse_csv_number(at(2, "gpu_nan_pct_mean")) == Approx((8.85 + 8.9 + 9.1) / 3).epsilon(1e-14));
  CHECK(parse_csv_number(at(2, "gpu_distance_se")) == Approx(m / (sd / std::sqrt(3.0))).epsilon(1e-10));
  CHECK(at(1, "gpu_nan_pct_mean").empty());
  CHECK(table4_nan(csv_of).rows[2][static_cast<std::size_t>(std::find(t.header.begin(), t.header.end(), "gpu_distance_se") - t.header.begin())].empty());
  // A GPU table missing one of our seeds is an error naming the row and the seed.
  CHECK_THROWS_WITH(table4_nan(csv_of, [](int no) { return no == 3 ? std::map<std::string, double>{{"1", 9.0}} : std::map<std::string, double>{}; }),
                    Catch::Contains("row 3") && Catch::Contains("seed 2"));
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
  CHECK_THAT(library_error_of(c), Catch::StartsWith("config.json: /algorithms/2/pasa/beta: ") && Catch::Contains("1.5"));
  c = tiny_real_config();
  c["algorithms"][0]["s2"] = 0;
  CHECK_THAT(library_error_of(c), Catch::StartsWith("config.json: /algorithms/0/s2: "));
  c = tiny_real_config();
  c["algorithms"][1]["alloc"] = {{"preset", "fa_fp32"}, {"stages", {{"s", "fp17"}}}};
  CHECK_THAT(library_error_of(c), Catch::StartsWith("config.json: /algorithms/1/alloc/stages/s") && Catch::Contains("fp17"));
  c = tiny_real_config();
  c["problem"]["shape"]["Sq"] = -64;
  CHECK_THAT(library_error_of(c), Catch::StartsWith("config.json: /problem/shape/Sq: "));
  c = tiny_real_config();
  c["problem"]["generator"]["x00"] = 1;
  CHECK_THAT(library_error_of(c), Catch::StartsWith("config.json: /problem/generator: unknown key 'x00' (did you mean 'x0'?)"));
  c = tiny_real_config();
  c["grid"]["a"] = {0.5, -1};
  c["problem"]["generator"]["am"] = "$a";
  CHECK_THAT(library_error_of(c), Catch::StartsWith("config.json: /problem") && Catch::EndsWith("(grid point a=-1, x0=10)"));
  CHECK(library_error_of(tiny_real_config()) == "(no error)");
  CHECK(library_error_of(json::parse(default_sweep_config_text())) == "(no error)");
}

TEST_CASE("sweep: a tiny real sweep CSV holds the library metrics bit for bit", "[sweep]") {
  const SweepConfig cfg = parse_sweep_config(tiny_real_config(), "tiny.json");
  SweepOptions opt;
  opt.out_dir = fresh_dir("real");
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
  one.out_dir = fresh_dir("real-1");
  one.threads = 1;
  run_sweep(cfg, library_backend(), one);
  SweepOptions three = one;
  three.out_dir = fresh_dir("real-3");
  three.threads = 3;
  run_sweep(cfg, library_backend(), three);
  CHECK(without_times(three.out_dir / "results.csv") == without_times(one.out_dir / "results.csv"));
  const fs::path shards = fresh_dir("real-shards");
  for (std::size_t i = 0; i < 3; ++i) {
    SweepOptions s;
    s.out_dir = shards;
    s.threads = 2;
    s.shard_index = i;
    s.shard_count = 3;
    run_sweep(cfg, library_backend(), s);
  }
  const fs::path merged = fresh_dir("real-merged");
  merge_sweeps({shards}, merged);
  CHECK(without_times(merged / "results.csv") == without_times(one.out_dir / "results.csv"));
}
