#include "pasa/study/paper_tables.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <numeric>
#include <memory>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "pasa/attention/algorithm.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/study/error_model.hpp"
#include "pasa/study/range_stats.hpp"
#include "pasa/study/seed_stats.hpp"

#include "pasa/analysis/beta_solver.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/numeric/format.hpp"

namespace pasa {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Table::text() const {
  std::string out = csv_line(header);
  for (const auto& r : rows) out += csv_line(r);
  return out;
}

// Table 1 of the paper: "precision" is the unit roundoff 2^-p (fp16: 2^-11 = 4.88e-4) and the overflow
// boundary the largest finite value. FP8 is E4M3 (448).
Table table1_formats() {
  struct Printed { const char* ours; const char* label; const char* precision; const char* boundary; };
  const Printed printed[] = {{"fp8_e4m3fn", "FP8", "6.25e-2", "448"},
                             {"fp16", "FP16", "4.88e-4", "65504"},
                             {"bf16", "BF16", "3.906e-3", "3.4e38"},
                             {"fp32", "FP32", "5.96e-8", "3.4e38"}};
  Table t;
  t.header = {"format", "paper_format", "precision", "paper_precision", "overflow_boundary", "paper_overflow_boundary"};
  for (const auto& p : printed) {
    const Format f = format_by_name(p.ours);
    t.rows.push_back({p.ours, p.label, csv_number(f.unit_roundoff()), p.precision, csv_number(f.max_finite()), p.boundary});
  }
  return t;
}

// Table 3 of the paper (fp16, n = 128), printed values transcribed from the paper. The first row's
// optimised β is printed as "0.9" (rounded): its Inva = Inva_r = 8.971 is β = 0.89971...
Table table3_beta() {
  struct Printed { const char *beta0, *inva0, *inva_r0, *rel0, *beta, *inva, *inva_r, *rel; };
  const Printed printed[] = {{"0.9", "9.000", "8.971", "0.32%", "0.9", "8.971", "8.971", "0.0%"},
                             {"1-2^-4", "15.00", "15.00", "0.0%", "0.9375", "15.00", "15.00", "0.0%"},
                             {"1-2^-5", "31.00", "31.25", "0.81%", "0.96899", "31.25", "31.25", "0.0%"},
                             {"1-2^-6", "63.00", "63.50", "0.79%", "0.984497", "63.50", "63.50", "0.0%"},
                             {"0.99", "99.00", "102.2", "3.23%", "0.990311", "102.2", "102.2", "0.0%"},
                             {"0.999", "999.0", "1031", "3.20%", "0.999031", "1031", "1031", "0.0%"}};
  const std::vector<BetaRow> rows = beta_table3(format_by_name("fp16"), 128);
  Table t;
  t.header = {"beta0", "paper_beta0", "inva0", "paper_inva0", "inva_r0", "paper_inva_r0", "rel_err0_pct", "paper_rel_err0",
              "beta", "paper_beta", "inva", "paper_inva", "inva_r", "paper_inva_r", "rel_err_pct", "paper_rel_err"};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const BetaRow& r = rows[i];
    const Printed& p = printed[i];
    t.rows.push_back({csv_number(r.beta0), p.beta0, csv_number(r.inva0), p.inva0, csv_number(r.inva_r0), p.inva_r0,
                      csv_number(100 * r.rel_err0), p.rel0, csv_number(r.beta), p.beta, csv_number(r.inva), p.inva,
                      csv_number(r.inva_r), p.inva_r, csv_number(100 * r.rel_err), p.rel});
  }
  return t;
}

const std::vector<PaperSweep>& paper_sweeps() {
  static const std::vector<PaperSweep> sweeps = {
      {"fig9_uniform_x0", "configs/fig9_uniform_x0.json", "9", "x0"},
      {"fig9_uniform_am", "configs/fig9_uniform_am.json", "9", "Am"},
      {"fig10_hybrid_x0", "configs/fig10_hybrid_x0.json", "10", "x0"},
      {"fig10_hybrid_am", "configs/fig10_hybrid_am.json", "10", "Am"},
  };
  return sweeps;
}

namespace {

struct ResultTable {
  CsvRow header;
  std::vector<CsvRow> rows;
  fs::path file;
  std::size_t col(const std::string& name) const {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) throw InputError(file.string() + ": no column \"" + name + "\"");
    return static_cast<std::size_t>(it - header.begin());
  }
};

ResultTable read_table(const fs::path& file) {
  const CsvFileLines lines = read_complete_lines(file);
  if (lines.torn || lines.lines.empty()) throw InputError(file.string() + ": incomplete table");
  ResultTable t;
  t.file = file;
  t.header = parse_csv_line(lines.lines[0]);
  for (std::size_t i = 1; i < lines.lines.size(); ++i) {
    t.rows.push_back(parse_csv_line(lines.lines[i]));
    if (t.rows.back().size() != t.header.size())
      throw InputError(fmt::format("{}: line {} has {} fields, the header {}", file.string(), i + 1,
                                   t.rows.back().size(), t.header.size()));
  }
  return t;
}

// The GPU table's FA-FP16/FP32 rows (label fa_fp16_fp32): generator, x0, Am, GPU and emulator NaN %;
// InputError naming file, line and column for a missing column or a field that is not a number.
struct HwRow {
  std::string generator;
  double x0, am, gpu, emu;
};
std::vector<HwRow> read_hardware_rows(const fs::path& file) {
  const ResultTable hw = read_table(file);
  const std::size_t gen = hw.col("generator"), x0 = hw.col("x0"), am = hw.col("Am"), label = hw.col("label"),
                    ng = hw.col("nan_pct_gpu"), ne = hw.col("nan_pct_emu");
  std::vector<HwRow> out;
  for (std::size_t i = 0; i < hw.rows.size(); ++i) {
    const CsvRow& r = hw.rows[i];
    if (r[label] != "fa_fp16_fp32") continue;
    try {
      out.push_back({r[gen], parse_csv_number(r[x0]), parse_csv_number(r[am]), parse_csv_number(r[ng]), parse_csv_number(r[ne])});
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: line {}: {}", file.string(), i + 2, e.what()));
    }
  }
  return out;
}

struct Stats {
  std::size_t n = 0, non_finite = 0;
  double mean = NAN, sd = NAN, min = NAN, max = NAN;
};

// Over the finite values; non-finite ones (an RMSE of an output holding NaN) are counted apart.
Stats stats_of(const std::vector<double>& xs) {
  Stats s;
  std::vector<double> f;
  for (double x : xs) {
    if (std::isfinite(x)) f.push_back(x); else ++s.non_finite;
  }
  s.n = xs.size();
  if (f.empty()) return s;
  double sum = 0;
  for (double x : f) sum += x;
  s.mean = sum / static_cast<double>(f.size());
  double ss = 0;
  for (double x : f) ss += (x - s.mean) * (x - s.mean);
  s.sd = f.size() > 1 ? std::sqrt(ss / static_cast<double>(f.size() - 1)) : 0.0;
  s.min = *std::min_element(f.begin(), f.end());
  s.max = *std::max_element(f.begin(), f.end());
  return s;
}

// Rows of one (grid point, algorithm), in table order.
std::map<std::pair<std::string, std::string>, std::vector<const CsvRow*>> by_point_and_algorithm(const ResultTable& t) {
  std::map<std::pair<std::string, std::string>, std::vector<const CsvRow*>> g;
  const std::size_t gp = t.col("grid_point"), alg = t.col("algorithm");
  for (const auto& r : t.rows) g[{r[gp], r[alg]}].push_back(&r);
  return g;
}

std::vector<double> column_values(const std::vector<const CsvRow*>& rows, std::size_t c) {
  std::vector<double> v;
  for (const CsvRow* r : rows) v.push_back(parse_csv_number((*r)[c]));
  return v;
}

}  // namespace

Table figure_data(const PaperSweep& sweep, const SweepConfig& cfg, const fs::path& results_csv) {
  const ResultTable t = read_table(results_csv);
  const std::size_t rmse = t.col("rmse"), nan = t.col("nan_pct"), x0 = t.col("x0"), am = t.col("Am"),
                    base = t.col("rmse_uniform_baseline"), skill = t.col("skill");
  Table out;
  // The skill columns come last so that the RMSE columns keep their positions (experiments/plot_figs.sh).
  out.header = {"figure", "x0", "Am", "algorithm", "seeds", "rmse_mean", "rmse_sd", "rmse_min", "rmse_max", "nan_pct_mean",
                "seeds_with_nan", "rmse_uniform_baseline_mean", "skill_mean", "skill_sd", "skill_min", "skill_max"};
  // Grid points in sweep order, algorithms in config order.
  const auto groups = by_point_and_algorithm(t);
  for (std::size_t g = 0; g < cfg.grid_points(); ++g)
    for (const auto& a : cfg.algorithms) {
      const auto it = groups.find({std::to_string(g), a.label});
      if (it == groups.end()) throw InputError(fmt::format("{}: grid point {} of {} is missing", results_csv.string(), g, a.label));
      const auto& rows = it->second;
      const Stats r = stats_of(column_values(rows, rmse));
      const std::vector<double> nans = column_values(rows, nan);
      const Stats n = stats_of(nans);
      const Stats b = stats_of(column_values(rows, base));
      const Stats k = stats_of(column_values(rows, skill));  // over the seeds whose output is finite, as rmse
      std::size_t with_nan = 0;
      for (std::size_t i = 0; i < rows.size(); ++i)
        if (nans[i] > 0 || !std::isfinite(parse_csv_number((*rows[i])[rmse]))) ++with_nan;
      out.rows.push_back({sweep.figure, (*rows[0])[x0], (*rows[0])[am], a.label, std::to_string(rows.size()), csv_number(r.mean),
                          csv_number(r.sd), csv_number(r.min), csv_number(r.max), csv_number(n.mean), std::to_string(with_nan),
                          csv_number(b.mean), csv_number(k.mean), csv_number(k.sd), csv_number(k.min), csv_number(k.max)});
    }
  return out;
}

const std::vector<Table4Point>& table4_points() {
  static const std::vector<Table4Point> points = {
      {"uniform", 30, 0.5, "100%", "fig9_uniform_x0"}, {"uniform", 20, 15, "0.12%", "fig9_uniform_am"},
      {"uniform", 20, 20, "8.14%", "fig9_uniform_am"}, {"hybrid", 30, 10, "100%", "fig10_hybrid_x0"},
      {"hybrid", 20, 50, "0.04%", "fig10_hybrid_am"},  {"hybrid", 20, 100, "1.11%", "fig10_hybrid_am"}};
  return points;
}

std::size_t grid_point_of(const SweepConfig& cfg, const std::map<std::string, double>& values) {
  for (std::size_t g = 0; g < cfg.grid_points(); ++g) {
    const PlannedProblem p = plan_problem(cfg, g * cfg.seeds.size());
    bool match = true;
    for (std::size_t k = 0; k < cfg.grid.size() && match; ++k) {
      const auto it = values.find(cfg.grid[k].name);
      if (it == values.end()) continue;
      match = p.grid_values[k].is_number() && p.grid_values[k].get<double>() == it->second;
    }
    if (match) return g;
  }
  std::string what;
  for (const auto& [k, v] : values) what += (what.empty() ? "" : ", ") + k + " = " + csv_number(v);
  throw InputError(cfg.source + ": no grid point with " + what);
}

std::vector<double> nan_pct_draws(const SweepConfig& cfg, std::size_t grid_point, const std::string& label,
                                  const std::vector<std::uint64_t>& seeds, int threads) {
  const auto alg = std::find_if(cfg.algorithms.begin(), cfg.algorithms.end(), [&](const AlgorithmEntry& a) { return a.label == label; });
  if (alg == cfg.algorithms.end()) throw InputError(cfg.source + ": no algorithm labelled \"" + label + "\"");
  if (grid_point >= cfg.grid_points()) throw InputError(fmt::format("{}: grid point {} of {}", cfg.source, grid_point, cfg.grid_points()));
  const std::size_t a = static_cast<std::size_t>(alg - cfg.algorithms.begin());
  // The same expansion as run_sweep's with these seeds: plan_problem of a copy whose seed list is `seeds`.
  SweepConfig c = cfg;
  c.seeds = seeds;
  std::vector<double> out(seeds.size());
  // Seeds side by side, one thread each (the inputs are generated on one thread anyway); every value is the
  // same whatever the thread count (generators and algorithms are).
  std::atomic<std::size_t> next{0};
  std::mutex m;
  std::exception_ptr error;
  auto work = [&] {
    for (std::size_t i; (i = next++) < seeds.size();) {
      try {
        const PlannedProblem p = plan_problem(c, grid_point * seeds.size() + i);
        const AttentionInputs in = generate_inputs(problem_from_json(p.problem, "/problem"), 1);
        const AttentionOutput o = run_attention(in, algorithm_from_json(p.algorithms[a], "/algorithms/" + std::to_string(a)), 1);
        // Metrics::nan_pct with a finite golden (these generators' inputs): NaN output elements / all.
        std::size_t nan = 0;
        for (double x : o.o.data) nan += std::isnan(x) ? 1 : 0;
        out[i] = 100.0 * static_cast<double>(nan) / static_cast<double>(o.o.data.size());
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
        next = seeds.size();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min<int>(threads, static_cast<int>(seeds.size())); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return out;
}

namespace {

double percent_value(const std::string& printed) {  // "8.14%" -> 8.14
  return parse_csv_number(printed.substr(0, printed.find('%')));
}

constexpr const char* kFa16 = "FA-FP16/FP32";

}  // namespace

std::vector<std::vector<double>> table4_nan_draws(const std::function<SweepConfig(const PaperSweep&)>& config_of,
                                                  std::size_t seeds, int threads) {
  std::vector<std::uint64_t> list(seeds);
  for (std::size_t i = 0; i < seeds; ++i) list[i] = i + 1;
  std::vector<std::vector<double>> draws;
  for (const Table4Point& p : table4_points()) {
    const PaperSweep& sweep = *std::find_if(paper_sweeps().begin(), paper_sweeps().end(), [&](const PaperSweep& s) { return s.name == p.sweep; });
    const SweepConfig cfg = config_of(sweep);
    draws.push_back(nan_pct_draws(cfg, grid_point_of(cfg, {{"x0", p.x0}, {"Am", p.am}}), kFa16, list, threads));
  }
  return draws;
}

Table table4_nan(const std::function<fs::path(const PaperSweep&)>& results_csv_of, const fs::path& hardware_csv,
                 const std::vector<std::vector<double>>& draws) {
  if (!draws.empty() && draws.size() != table4_points().size())
    throw std::logic_error("table4_nan: one list of draws per Table 4 point");
  Table out;
  out.header = {"no", "distribution", "x0", "Am", "seeds", "nan_pct_mean", "nan_pct_sd", "nan_pct_min", "nan_pct_p5",
                "nan_pct_p50", "nan_pct_p95", "nan_pct_max", "predict95_lo", "predict95_hi", "paper_nan_pct",
                "paper_percentile", "paper_in_predict95", "gpu_seeds", "gpu_nan_pct_mean", "gpu_nan_pct_sd",
                "emu_on_gpu_inputs_nan_pct_mean", "overflow", "paper_overflow", "pasa_fp16_nan_pct_max", "fa_fp32_nan_pct_max",
                "predict95_method"};
  // The H100 on its own (torch) draws, FA-FP16/FP32 = label fa_fp16_fp32: GPU and emulator NaN % per seed.
  std::optional<std::vector<HwRow>> hw;
  if (!hardware_csv.empty()) hw = read_hardware_rows(hardware_csv);
  for (std::size_t no = 0; no < table4_points().size(); ++no) {
    const Table4Point& p = table4_points()[no];
    const PaperSweep& sweep = *std::find_if(paper_sweeps().begin(), paper_sweeps().end(), [&](const PaperSweep& s) { return s.name == p.sweep; });
    const fs::path csv = results_csv_of(sweep);
    const ResultTable t = read_table(csv);
    const std::size_t x0 = t.col("x0"), am = t.col("Am"), alg = t.col("algorithm"), nan = t.col("nan_pct");
    std::map<std::string, std::vector<double>> nan_by_alg;
    for (const auto& r : t.rows)
      if (parse_csv_number(r[x0]) == p.x0 && parse_csv_number(r[am]) == p.am) nan_by_alg[r[alg]].push_back(parse_csv_number(r[nan]));
    if (nan_by_alg[kFa16].empty())
      throw InputError(fmt::format("{}: no {} rows at x0 = {}, Am = {} (Table 4 needs them)", csv.string(), kFa16, p.x0, p.am));
    // The paper's value is one draw from its own generator: it is compared with the spread of single draws
    // (percentiles, the prediction interval), not with the standard error of our mean.
    const std::vector<double>& ours = draws.empty() ? nan_by_alg[kFa16] : draws[no];
    const SeedSpread s = seed_spread(ours, /*nonnegative=*/true);  // a percentage: skewed near 0
    const double paper = percent_value(p.nan);
    std::vector<std::string> gpu_cols(4);  // seeds, mean, sd, emulator mean
    if (hw) {
      std::vector<double> g, e;
      for (const HwRow& r : *hw)
        if (r.generator == p.dist && r.x0 == p.x0 && r.am == p.am) {
          g.push_back(r.gpu);
          e.push_back(r.emu);
        }
      if (!g.empty()) {
        const Stats gs = stats_of(g);
        gpu_cols = {std::to_string(gs.n), csv_number(gs.mean), csv_number(gs.sd), csv_number(stats_of(e).mean)};
      }
    }
    auto max_of = [&](const char* label) {
      const auto& v = nan_by_alg[label];
      return v.empty() ? std::string("") : csv_number(*std::max_element(v.begin(), v.end()));
    };
    const bool inside = paper >= s.predict_lo && paper <= s.predict_hi;
    out.rows.push_back({std::to_string(no + 1), p.dist, csv_number(p.x0), csv_number(p.am), std::to_string(s.n), csv_number(s.mean),
                        csv_number(s.sd), csv_number(s.min), csv_number(s.p5), csv_number(s.p50), csv_number(s.p95),
                        csv_number(s.max), csv_number(s.predict_lo), csv_number(s.predict_hi), p.nan,
                        csv_number(percentile_rank(ours, paper)), inside ? "YES" : "NO", gpu_cols[0], gpu_cols[1], gpu_cols[2],
                        gpu_cols[3], s.max > 0 ? "YES" : "NO", "YES", max_of("PASA-FP16"), max_of("FA-FP32"),
                        s.predict_empirical ? "empirical_2.5_97.5" : "normal"});
  }
  return out;
}

Table paired_data(const PaperSweep& sweep, const SweepConfig& cfg, const fs::path& results_csv) {
  const ResultTable t = read_table(results_csv);
  const nlohmann::json pairs = paired_rmse_ratios(cfg, t.header, t.rows);
  Table out;
  out.header = {"figure", "x0", "Am", "numerator", "denominator", "pairs", "ratio_geo_mean", "ratio_ci95_lo", "ratio_ci95_hi",
                "ci95_excludes_1"};
  for (const auto& c : pairs) {
    const bool has = !c["ratio_geo_mean"].is_null();
    out.rows.push_back({sweep.figure, c["params"].at("x0").dump(), c["params"].at("Am").dump(), c["numerator"].get<std::string>(),
                        c["denominator"].get<std::string>(), c["pairs"].dump(),
                        has ? csv_number(c["ratio_geo_mean"].get<double>()) : "", has ? csv_number(c["ratio_ci95"][0].get<double>()) : "",
                        has ? csv_number(c["ratio_ci95"][1].get<double>()) : "", has ? (c["ci95_excludes_1"].get<bool>() ? "YES" : "NO") : ""});
  }
  return out;
}

Table error_model_table(const std::vector<std::pair<SweepConfig, fs::path>>& sweeps, const std::vector<std::uint64_t>& seeds,
                        std::size_t heads, int threads) {
  Table out;
  out.header = {"sweep", "distribution", "x0", "Am", "algorithm", "predicted_seeds", "predicted_heads", "predicted_rmse",
                "measured_rmse_mean", "measured_seeds", "measured_over_predicted", "pred_scores", "pred_block_mean",
                "pred_p", "pred_o_l", "pred_out", "max_score_shift", "max_block_shift"};
  for (const auto& [cfg0, csv] : sweeps) {
    const ResultTable t = read_table(csv);
    const auto groups = by_point_and_algorithm(t);
    const std::size_t rmse = t.col("rmse");
    SweepConfig cfg = cfg0;
    cfg.seeds = seeds;
    for (std::size_t g = 0; g < cfg.grid_points(); ++g) {
      // Predicted terms pooled over the seeds (sums of E‖ΔO‖² and of ‖O‖²), per algorithm.
      std::vector<ErrorPrediction> pred(cfg.algorithms.size());
      std::vector<std::string> gap(cfg.algorithms.size());
      std::vector<AlgorithmSpec> specs;
      PlannedProblem first;
      for (std::size_t si = 0; si < seeds.size(); ++si) {
        const PlannedProblem p = plan_problem(cfg, g * seeds.size() + si);
        if (si == 0) first = p;
        if (specs.empty())
          for (std::size_t a = 0; a < cfg.algorithms.size(); ++a) {
            specs.push_back(algorithm_from_json(p.algorithms[a], "/algorithms/" + std::to_string(a)));
            gap[a] = error_model_gap(specs[a]);
          }
        if (std::all_of(gap.begin(), gap.end(), [](const std::string& x) { return !x.empty(); })) break;
        const AttentionInputs in = generate_inputs(problem_from_json(p.problem, "/problem"), threads);
        for (std::size_t a = 0; a < specs.size(); ++a) {
          if (!gap[a].empty()) continue;
          const ErrorPrediction e = predict_error(in, specs[a].alloc, error_model_options(specs[a], heads), threads);
          ErrorPrediction& acc = pred[a];
          acc.scores += e.scores, acc.block_mean += e.block_mean, acc.p += e.p, acc.o += e.o, acc.l += e.l, acc.out += e.out;
          acc.norm2 += e.norm2, acc.rows += e.rows, acc.overflow = acc.overflow || e.overflow;
          acc.max_score_shift = std::max(acc.max_score_shift, e.max_score_shift);
          acc.max_block_shift = std::max(acc.max_block_shift, e.max_block_shift);
        }
      }
      const nlohmann::json& gen = first.problem.at("generator");
      for (std::size_t a = 0; a < cfg.algorithms.size(); ++a) {
        if (!gap[a].empty()) continue;
        const std::string& label = cfg.algorithms[a].label;
        const auto it = groups.find({std::to_string(g), label});
        std::string measured, mseeds, ratio;
        if (it != groups.end()) {
          const Stats m = stats_of(column_values(it->second, rmse));
          measured = m.non_finite > 0 ? "NaN" : csv_number(m.mean);
          mseeds = std::to_string(m.n);
          if (m.non_finite == 0 && !pred[a].overflow) ratio = csv_number(m.mean / pred[a].rel_rmse());
        }
        const ErrorPrediction& e = pred[a];
        auto term = [&](double v) { return e.overflow ? std::string("inf") : csv_number(e.rel_rmse_of(v)); };
        out.rows.push_back({cfg.name, gen.at("kind").get<std::string>(), gen.at("x0").dump(), gen.at("am").dump(), label,
                            std::to_string(seeds.size()), std::to_string(heads), term(e.total()), measured, mseeds, ratio,
                            term(e.scores), term(e.block_mean), term(e.p), term(e.o + e.l), term(e.out),
                            csv_number(e.max_score_shift), csv_number(e.max_block_shift)});
      }
    }
  }
  return out;
}

Table ranges_table(const std::function<SweepConfig(const PaperSweep&)>& config_of, std::size_t heads, int threads) {
  Table out;
  out.header = {"no", "distribution", "x0", "Am", "seed", "head", "k_min", "k_max", "kp_min", "kp_max", "s_min", "s_max",
                "sp_min", "sp_max", "scores", "s_overflow", "sp_overflow"};
  for (std::size_t no = 0; no < table4_points().size(); ++no) {
    const Table4Point& p = table4_points()[no];
    const PaperSweep& sweep = *std::find_if(paper_sweeps().begin(), paper_sweeps().end(), [&](const PaperSweep& s) { return s.name == p.sweep; });
    SweepConfig cfg = config_of(sweep);
    const std::size_t g = grid_point_of(cfg, {{"x0", p.x0}, {"Am", p.am}});
    const PlannedProblem pp = plan_problem(cfg, g * cfg.seeds.size());  // the first seed
    double beta = 0;  // PASA-FP16's β and s2 from the config (its first `pasa` algorithm)
    std::size_t s2 = 0;
    sweep_shift(cfg, beta, s2);
    const AttentionInputs in = generate_inputs(problem_from_json(pp.problem, "/problem"), threads);
    for (const HeadRanges& r : range_stats(in, beta, s2, format_by_name(cfg.score_format), heads, threads))
      out.rows.push_back({std::to_string(no + 1), p.dist, csv_number(p.x0), csv_number(p.am), std::to_string(pp.seed),
                          std::to_string(r.head), csv_number(r.k_min), csv_number(r.k_max), csv_number(r.kp_min),
                          csv_number(r.kp_max), csv_number(r.s_min), csv_number(r.s_max), csv_number(r.sp_min),
                          csv_number(r.sp_max), std::to_string(r.scores), std::to_string(r.s_overflow), std::to_string(r.sp_overflow)});
  }
  return out;
}

void reproduce_paper(const ReproduceOptions& opt) {
  auto log = [&](const std::string& s) {
    if (opt.log) opt.log(s);
  };
  // Every config read and validated before anything is written (a mistake in the last one must not leave
  // the first tables behind).
  const SweepBackend backend = library_backend();
  for (const PaperSweep& s : paper_sweeps()) validate_with_backend(load_sweep_config(opt.repo / s.config), backend);
  if (!opt.hardware_csv.empty()) read_hardware_rows(opt.hardware_csv);  // read again for Table 4, after the sweeps
  std::error_code ec;
  fs::create_directories(opt.out / "sweeps", ec);
  if (ec) throw InputError((opt.out / "sweeps").string() + ": cannot create the output folder: " + ec.message());
  write_file_atomic(opt.out / "table1.csv", table1_formats().text());
  log("table1.csv: format ranges");
  write_file_atomic(opt.out / "table3.csv", table3_beta().text());
  log("table3.csv: optimal beta");

  auto config_of = [&](const PaperSweep& s) { return load_sweep_config(opt.repo / s.config); };
  auto results_of = [&](const PaperSweep& s) { return opt.out / "sweeps" / s.name / "results.csv"; };
  // The four sweeps run side by side on one set of slots (opt.threads problems at once, one thread each):
  // a sweep's last problems overlap the next sweep's first ones, so no core waits for the end of a sweep,
  // and the parts of a case that run on one thread (inputs, metrics) never leave a core idle. Lower
  // priority for earlier sweeps: they finish in order, and a problem shared with an earlier sweep (Fig.
  // 9's x0 = 20, Am = 0.5) is found in the backend's results instead of computed again. Every table is the
  // same bits as with the sweeps one after another (sweep.hpp, "Determinism").
  one_malloc_arena();  // before the threads below allocate anything
  keep_freed_memory();
  const auto slots = std::make_shared<CaseSlots>(opt.threads);
  std::mutex log_m;
  std::exception_ptr error;
  std::vector<std::thread> runs;
  for (std::size_t i = 0; i < paper_sweeps().size(); ++i)
    runs.emplace_back([&, i] {
      const PaperSweep& s = paper_sweeps()[i];
      try {
        const SweepConfig cfg = config_of(s);
        SweepOptions so;
        so.out_dir = opt.out / "sweeps" / s.name;
        so.threads = opt.threads;
        so.slots = slots;
        so.priority = static_cast<int>(i);
        so.resume = opt.resume;
        if (opt.progress) so.progress = [&](const SweepProgress& p) {
          std::lock_guard<std::mutex> lock(log_m);
          opt.progress(s.name, p);
        };
        const SweepReport r = run_sweep(cfg, backend, so);
        write_file_atomic(opt.out / (s.name + ".csv"), figure_data(s, cfg, r.csv).text());
        write_file_atomic(opt.out / (s.name + "_paired.csv"), paired_data(s, cfg, r.csv).text());
        std::lock_guard<std::mutex> lock(log_m);
        log(fmt::format("{}: {} cases run, {} kept from an earlier run", s.name, r.cases_run, r.cases_reused));
      } catch (...) {
        std::lock_guard<std::mutex> lock(log_m);
        if (!error) error = std::current_exception();
      }
    });
  for (auto& t : runs) t.join();
  if (error) std::rethrow_exception(error);
  if (opt.error_model_heads > 0) {
    std::vector<std::pair<SweepConfig, fs::path>> sweeps;
    for (const PaperSweep& s : paper_sweeps()) sweeps.emplace_back(config_of(s), results_of(s));
    for (const fs::path& d : opt.error_model_sweeps)
      sweeps.emplace_back(parse_sweep_config(read_json_file(d / "config.json"), (d / "config.json").string()), d / "results.csv");
    std::vector<std::uint64_t> seeds(opt.error_model_seeds);
    std::iota(seeds.begin(), seeds.end(), std::uint64_t{1});
    write_file_atomic(opt.out / "error_model.csv", error_model_table(sweeps, seeds, opt.error_model_heads, opt.threads).text());
    log(fmt::format("error_model.csv: first-order error model (seeds 1-{}, {} heads) next to the measured RMSE",
                    opt.error_model_seeds, opt.error_model_heads));
  }
  if (opt.range_heads > 0) {
    write_file_atomic(opt.out / "ranges.csv", ranges_table(config_of, opt.range_heads, opt.threads).text());
    log(fmt::format("ranges.csv: K, K', S, S' ranges and overflow counts at the Table 4 points ({} heads, first seed)", opt.range_heads));
  }
  // Table 4 over opt.nan_seeds seeds, without the golden (nan_pct_draws); 0: the sweeps' own seeds.
  const auto draws = opt.nan_seeds > 0 ? table4_nan_draws(config_of, opt.nan_seeds, opt.threads) : std::vector<std::vector<double>>{};
  write_file_atomic(opt.out / "table4.csv", table4_nan(results_of, opt.hardware_csv, draws).text());
  log(fmt::format("table4.csv: NaN percentages of FA-FP16/FP32 over {} seeds{}", opt.nan_seeds > 0 ? std::to_string(opt.nan_seeds) : "the sweeps'",
                  opt.hardware_csv.empty() ? std::string(" (no GPU columns)") : ", GPU columns from " + opt.hardware_csv.string()));
}

}  // namespace pasa
