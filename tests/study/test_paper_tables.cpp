// The paper's tables (study/paper_tables): Table 1 and Table 3 against the printed values; Table 4's standard
// errors and distances on hand-made sweep tables.
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

using namespace pasa;
namespace fs = std::filesystem;

namespace {
// A fresh, empty temporary folder removed at exit.
fs::path fresh_dir(const std::string& tag) {
  struct Cleanup {
    std::vector<fs::path> dirs;
    ~Cleanup() {
      std::error_code ec;
      for (const auto& d : dirs) fs::remove_all(d, ec);
    }
  };
  static Cleanup cleanup;
  const fs::path d = fs::temp_directory_path() / ("pasa-test-tables-" + std::to_string(::getpid()) + "-" + tag);
  fs::remove_all(d);
  cleanup.dirs.push_back(d);
  return d;
}
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

TEST_CASE("paper tables: Table 4 standard errors, distances to the paper, the GPU's own draws", "[sweep]") {
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
  const double se = 0.1 / std::sqrt(3.0);
  CHECK(parse_csv_number(at(2, "nan_pct_mean")) == Approx(9.0).epsilon(1e-14));
  CHECK(parse_csv_number(at(2, "nan_pct_se")) == Approx(se).epsilon(1e-12));
  CHECK(at(2, "paper_nan_pct") == "8.14%");
  CHECK(parse_csv_number(at(2, "paper_distance_se")) == Approx((9.0 - 8.14) / se).epsilon(1e-12));
  CHECK(parse_csv_number(at(5, "paper_distance_se")) == Approx((1.0 - 1.11) / se).epsilon(1e-12));
  CHECK(at(0, "nan_pct_se") == "0");
  CHECK(at(0, "paper_distance_se") == "0");  // 100 % against 100 %: no distance, although SE = 0
  // GPU on its own draws: seeds 8.0, 8.5, 9.0 (sd 0.5); the emulator's mean on the same inputs.
  const double gse = 0.5 / std::sqrt(3.0);
  CHECK(at(2, "gpu_seeds") == "3");
  CHECK(parse_csv_number(at(2, "gpu_nan_pct_mean")) == Approx(8.5).epsilon(1e-14));
  CHECK(parse_csv_number(at(2, "gpu_nan_pct_se")) == Approx(gse).epsilon(1e-12));
  CHECK(parse_csv_number(at(2, "gpu_paper_distance_se")) == Approx((8.5 - 8.14) / gse).epsilon(1e-12));
  CHECK(parse_csv_number(at(2, "emu_on_gpu_inputs_nan_pct_mean")) == Approx(8.6).epsilon(1e-14));
  CHECK(at(1, "gpu_seeds") == "1");  // the single Am = 15 case
  CHECK(at(0, "gpu_nan_pct_mean").empty());
  CHECK(at(4, "gpu_nan_pct_mean").empty());
  // Without the hardware table the GPU columns are empty.
  CHECK(table4_nan(csv_of).rows[2][static_cast<std::size_t>(std::find(t.header.begin(), t.header.end(), "gpu_nan_pct_mean") - t.header.begin())].empty());
  // A torn hardware table (a row shorter than its header) is an error naming the file and the line.
  std::ofstream(hw, std::ios::app) << "uniform,20\n";
  CHECK_THROWS_WITH(table4_nan(csv_of, hw), Catch::Contains("hw_attention.csv") && Catch::Contains("line 8"));
}

