// The paper's tables (study/paper_tables): Table 1 and Table 3 against the printed values; Table 4's spread
// and the paper's percentile on hand-made sweep tables; the golden-free NaN % against a real sweep.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <fmt/format.h>
#include <unistd.h>

#include "pasa/io/csv.hpp"
#include "pasa/study/paper_tables.hpp"
#include "pasa/study/sweep.hpp"
#include "pasa/study/sweep_config.hpp"
#include "support/temp_dirs.hpp"

using namespace pasa;
namespace fs = std::filesystem;

namespace {
}  // namespace

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

TEST_CASE("paper tables: Table 4 spread of single draws, the paper's percentile, the GPU's own draws", "[sweep]") {
  // Hand-made sweep tables holding only the columns Table 4 reads: three seeds of FA-FP16/FP32 at every
  // Table 4 point, NaN % = base + seed offsets {-0.1, 0, +0.1} (sd 0.1, SE 0.1/sqrt(3)).
  const fs::path dir = test::fresh_dir("tables-table4");
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
  // Hardware table (experiments/gpu/'s hw_attention.csv, only the columns read): row 3's point on three GPU
  // seeds (GPU 8.0, 8.5, 9.0; emulator 8.0, 8.5, 9.3), rows that must be ignored (another label at the same
  // point, another generator, another Am).
  const fs::path hw = dir / "hw_attention.csv";
  std::ofstream(hw) << "generator,x0,Am,seed,label,nan_pct_gpu,nan_pct_emu\n"
                       "uniform,20,20,1,fa_fp16_fp32,8,8\nuniform,20,20,2,fa_fp16_fp32,8.5,8.5\n"
                       "uniform,20,20,3,fa_fp16_fp32,9,9.3\nuniform,20,20,1,fa_fp32,50,50\n"
                       "hybrid,20,20,1,fa_fp16_fp32,70,70\nuniform,20,15,4,fa_fp16_fp32,1,1\n";
  const Table t = table4_nan(csv_of, hw);
  REQUIRE(t.rows.size() == 6);
  auto at = [&](std::size_t row, const std::string& name) {
    const auto it = std::find(t.header.begin(), t.header.end(), name);
    REQUIRE(it != t.header.end());
    return t.rows[row][static_cast<std::size_t>(it - t.header.begin())];
  };
  // Spread of single draws: sd 0.1, prediction interval 9 ± t_{2,0.975}·0.1·√(1 + 1/3).
  const double half = 4.3026527297 * 0.1 * std::sqrt(4.0 / 3);
  CHECK(parse_csv_number(at(2, "nan_pct_mean")) == Approx(9.0).epsilon(1e-14));
  CHECK(parse_csv_number(at(2, "nan_pct_sd")) == Approx(0.1).epsilon(1e-12));
  CHECK(parse_csv_number(at(2, "nan_pct_p50")) == Approx(9.0).epsilon(1e-14));
  CHECK(parse_csv_number(at(2, "nan_pct_p5")) == Approx(8.91).epsilon(1e-12));  // 8.9 + 0.1·(2·0.05)
  CHECK(parse_csv_number(at(2, "predict95_lo")) == Approx(9.0 - half).epsilon(1e-9));
  CHECK(parse_csv_number(at(2, "predict95_hi")) == Approx(9.0 + half).epsilon(1e-9));
  CHECK(at(2, "paper_nan_pct") == "8.14%");
  CHECK(at(2, "paper_percentile") == "0");  // below all three draws
  CHECK(at(2, "paper_in_predict95") == "NO");  // 8.14 < 9 − 0.497
  CHECK(at(5, "paper_percentile") == "100");   // 1.11 above 0.9, 1.0, 1.1
  CHECK(at(5, "paper_in_predict95") == "YES");
  CHECK(at(0, "nan_pct_sd") == "0");
  CHECK(at(0, "paper_percentile") == "50");  // 100 % in every draw: a tie with all of them
  CHECK(at(0, "paper_in_predict95") == "YES");
  // GPU on its own draws: seeds 8.0, 8.5, 9.0 (sd 0.5); the emulator's mean on the same inputs.
  CHECK(at(2, "gpu_seeds") == "3");
  CHECK(parse_csv_number(at(2, "gpu_nan_pct_mean")) == Approx(8.5).epsilon(1e-14));
  CHECK(parse_csv_number(at(2, "gpu_nan_pct_sd")) == Approx(0.5).epsilon(1e-12));
  CHECK(parse_csv_number(at(2, "emu_on_gpu_inputs_nan_pct_mean")) == Approx(8.6).epsilon(1e-14));
  CHECK(at(1, "gpu_seeds") == "1");  // the single Am = 15 case
  CHECK(at(0, "gpu_nan_pct_mean").empty());
  CHECK(at(4, "gpu_nan_pct_mean").empty());
  // Draws given (the golden-free run over many seeds) replace the sweeps' rows; the PASA maximum stays theirs.
  std::vector<std::vector<double>> draws = {{100, 100}, {0.1, 0.2}, {8, 8.14, 8.3, 9}, {100, 100}, {0, 0.1}, {1, 2}};
  const Table td = table4_nan(csv_of, {}, draws);
  CHECK(td.rows[2][4] == "4");
  CHECK(td.rows[2][static_cast<std::size_t>(std::find(td.header.begin(), td.header.end(), "paper_percentile") - td.header.begin())] == "37.5");
  CHECK(td.rows[2][static_cast<std::size_t>(std::find(td.header.begin(), td.header.end(), "pasa_fp16_nan_pct_max") - td.header.begin())] == "0");
  draws.pop_back();
  CHECK_THROWS(table4_nan(csv_of, {}, draws));
  // Without the hardware table the GPU columns are empty.
  CHECK(table4_nan(csv_of).rows[2][static_cast<std::size_t>(std::find(t.header.begin(), t.header.end(), "gpu_nan_pct_mean") - t.header.begin())].empty());
  // A torn hardware table (a row shorter than its header) is an error naming the file and the line.
  std::ofstream(hw, std::ios::app) << "uniform,20\n";
  CHECK_THROWS_WITH(table4_nan(csv_of, hw), Catch::Contains("hw_attention.csv") && Catch::Contains("line 8"));
}


TEST_CASE("paper tables: NaN % without the golden equals the sweep's nan_pct column", "[sweep]") {
  // A small partial-overflow case like Table 4 row 3: uniform x0 = 20, Am = 20, D = 128 (scores up to
  // 40²·128 > 65504 for a few pairs), so FA-FP16/FP32 gives some NaN rows and not all.
  const nlohmann::json c = nlohmann::json::parse(R"({
    "name": "nan", "problem": {"shape": {"B": 1, "Nq": 2, "Sq": 64, "D": 128}, "format": "fp16", "seed": "$seed",
                               "generator": {"kind": "uniform", "x0": 20, "am": "$Am"}},
    "grid": {"Am": [15, 20]}, "seeds": [1, 2, 3],
    "algorithms": [{"label": "FA-FP32", "name": "fa2", "alloc": "fa_fp32", "s1": 16, "s2": 16},
                   {"label": "FA-FP16/FP32", "name": "fa2", "alloc": "fa_fp16_fp32", "s1": 16, "s2": 16}]})");
  const SweepConfig cfg = parse_sweep_config(c, "nan.json");
  SweepOptions opt;
  opt.out_dir = test::fresh_dir("tables-nan-sweep");
  run_sweep(cfg, library_backend(), opt);
  const CsvFileLines lines = read_complete_lines(opt.out_dir / "results.csv");
  const CsvRow header = parse_csv_line(lines.lines[0]);
  const auto col = [&](const char* n) { return static_cast<std::size_t>(std::find(header.begin(), header.end(), n) - header.begin()); };
  std::map<std::pair<std::string, std::string>, std::string> sweep_nan;  // (Am, seed) of FA-FP16/FP32
  for (std::size_t i = 1; i < lines.lines.size(); ++i) {
    const CsvRow r = parse_csv_line(lines.lines[i]);
    if (r[col("algorithm")] == "FA-FP16/FP32") sweep_nan[{r[col("Am")], r[col("seed")]}] = r[col("nan_pct")];
  }
  const std::size_t g20 = grid_point_of(cfg, {{"Am", 20}});
  CHECK(g20 == 1);
  const std::vector<double> d = nan_pct_draws(cfg, g20, "FA-FP16/FP32", {1, 2, 3}, 2);
  bool partial = false;
  for (std::size_t s = 0; s < 3; ++s) {
    CHECK(csv_number(d[s]) == sweep_nan.at({"20", std::to_string(s + 1)}));
    partial = partial || (d[s] > 0 && d[s] < 100);
  }
  CHECK(partial);  // the case must exercise a partial NaN count
  // One seed alone, at another position in the list and on one thread: the same value.
  CHECK(nan_pct_draws(cfg, g20, "FA-FP16/FP32", {3}, 1)[0] == d[2]);
  CHECK(nan_pct_draws(cfg, grid_point_of(cfg, {{"Am", 15}}), "FA-FP16/FP32", {2}, 1)[0] ==
        parse_csv_number(sweep_nan.at({"15", "2"})));
  CHECK_THROWS_WITH(nan_pct_draws(cfg, g20, "FA-FP8", {1}, 1), Catch::Contains("nan.json") && Catch::Contains("FA-FP8"));
  CHECK_THROWS_WITH(grid_point_of(cfg, {{"Am", 7}}), Catch::Contains("nan.json") && Catch::Contains("Am = 7"));
}
