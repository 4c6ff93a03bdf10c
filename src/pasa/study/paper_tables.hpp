// The PASA paper's tables regenerated as CSV, each with the paper's printed value beside ours where the
// paper gives one (README "Reproducing the paper"):
//   Table 1  format ranges (precision = unit roundoff 2^-p, overflow boundary = largest finite value)
//   Table 3  optimal β (the β solver, fp16, n = 128)
//   Table 4  NaN % of FA-FP16/FP32 on the uniform / hybrid benchmarks over many seeds (no golden needed),
//            with percentiles, the prediction interval for one draw and the paper's value's percentile
//   fig9_*.csv, fig10_*.csv  the data behind Figs. 9 and 10 (RMSE over seeds, NaN marks)
//   fig*_paired.csv  paired RMSE ratios between the algorithms with 95 % intervals
//   error_model.csv  the first-order error model next to the measured RMSE (optional)
//   ranges.csv       K, K', S, S' ranges and overflow counts per head at the Table 4 points (optional)
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "pasa/io/csv.hpp"
#include "pasa/study/sweep.hpp"

namespace pasa {

struct Table {
  CsvRow header;
  std::vector<CsvRow> rows;
  std::string text() const;  // CSV
};

Table table1_formats();
Table table3_beta();

// The sweeps behind Figs. 9/10 and Table 4: config files in configs/ (relative to the repository root).
struct PaperSweep {
  std::string name;        // results/<name>.csv, results/sweeps/<name>/
  std::string config;      // configs/<name>.json
  std::string figure;      // "9" or "10"
  std::string varied;      // grid axis on the x axis: "x0" or "Am"
};
const std::vector<PaperSweep>& paper_sweeps();

// Figure data from a finished sweep's table: one row per (x value, algorithm) with RMSE mean / sd / min /
// max over the seeds, mean NaN %, and how many seeds gave a non-finite output (drawn as "NaN" marks).
Table figure_data(const PaperSweep&, const SweepConfig&, const std::filesystem::path& results_csv);

// Paired comparisons on one figure sweep (paired_rmse_ratios, sweep.hpp): per (x0, Am) and pair of
// algorithms, the geometric-mean RMSE ratio over the seeds with its 95 % interval; <name>_paired.csv.
Table paired_data(const PaperSweep&, const SweepConfig&, const std::filesystem::path& results_csv);

// Table 4's six points (each lies on one of the four panels) and the paper's printed NaN % of FA-FP16/FP32.
struct Table4Point {
  const char* dist;
  double x0, am;
  const char* nan;    // as printed, "8.14%"
  const char* sweep;  // the PaperSweep holding the point
};
const std::vector<Table4Point>& table4_points();

// The grid point of a config whose axes named in `values` have those values (other axes: the first match);
// throws InputError naming the config when there is none.
std::size_t grid_point_of(const SweepConfig&, const std::map<std::string, double>& values);

// NaN % of the output of the algorithm labelled `label` at one grid point, for each of `seeds` (in place of
// the config's seeds), WITHOUT the golden: with finite inputs the golden is finite, so Metrics::nan_pct is
// the share of NaN output elements, which needs only the algorithm. The problems and algorithm are run_sweep's
// expansion at those seeds, so the values equal its nan_pct column. Seeds run side by side on `threads`.
std::vector<double> nan_pct_draws(const SweepConfig&, std::size_t grid_point, const std::string& label,
                                  const std::vector<std::uint64_t>& seeds, int threads);
// nan_pct_draws of FA-FP16/FP32 at every Table 4 point, seeds 1..seeds, from the paper sweeps' configs.
std::vector<std::vector<double>> table4_nan_draws(const std::function<SweepConfig(const PaperSweep&)>& config_of,
                                                  std::size_t seeds, int threads);

// Table 4: per point, the spread of FA-FP16/FP32's NaN % over single draws: seeds, mean, sample
// sd, min, 5/50/95th percentiles, max, the 95 % prediction interval for one more draw (seed_stats.hpp), the
// paper's value, its percentile among our draws and whether it lies in the interval. The draws are `draws`
// (one list per table4_points() entry, e.g. table4_nan_draws) or, when empty, the finished figure sweeps'
// FA-FP16/FP32 rows. The PASA-FP16 and FA-FP32 maxima always come from the sweeps. With hardware_csv
// (experiments/gpu/'s hw_attention.csv: the H100 and the emulator on the SAME inputs, drawn by torch on the
// GPU, so not the toolkit's seeds), per row also the GPU's seed count, mean and sd, and the emulator's mean
// on the GPU's inputs (columns left empty without it, or where the file holds no fa_fp16_fp32 case there).
Table table4_nan(const std::function<std::filesystem::path(const PaperSweep&)>& results_csv_of,
                 const std::filesystem::path& hardware_csv = {}, const std::vector<std::vector<double>>& draws = {});

// The first-order error model (error_model.hpp, docs/error-model.md) next to measured RMSE: per sweep, grid
// point and algorithm the model covers, the predicted relative RMSE (PASA Eq. 19) on seeds `seeds` and the
// first `heads` heads (pooled: sqrt(Σ E‖ΔO‖² / Σ ‖O‖²)), its terms one by one (scores, block_mean, p, o + l,
// out: each sqrt(term / Σ ‖O‖²)), and the mean RMSE of that point in the sweep's finished table (`results`,
// over its own seeds and every head). Algorithms the model does not cover are left out.
Table error_model_table(const std::vector<std::pair<SweepConfig, std::filesystem::path>>& sweeps,
                        const std::vector<std::uint64_t>& seeds, std::size_t heads, int threads);

// Range reduction by PASA's shift at the six Table 4 points (range_stats.hpp; the paper's Fig. 5 and
// Figs. 11-14 from the toolkit's own inputs): per head (the first `heads`) of the sweep's first seed, the
// ranges of K, K', S (unscaled) and S', and how many S and S' overflow the sweep's score format.
Table ranges_table(const std::function<SweepConfig(const PaperSweep&)>& config_of, std::size_t heads, int threads);

struct ReproduceOptions {
  std::filesystem::path repo = ".";       // where configs/ is
  std::filesystem::path out = "results";  // tables here, sweeps under out/sweeps/
  int threads = 1;                        // problems run at once (one thread each), shared by the four sweeps
  bool resume = true;                     // keep finished sweeps and rows; run only what is missing
  std::size_t nan_seeds = 50;             // Table 4 over seeds 1..nan_seeds (golden-free); 0: the sweeps' seeds
  // error_model.csv (error_model_table, seeds 1..error_model_seeds) on every panel of Figs. 9/10 (x0 and Am)
  // and the finished sweep folders in error_model_sweeps (config.json + results.csv, e.g.
  // results/pasa_allocations); 0 heads: not written.
  std::size_t error_model_heads = 0;
  std::size_t error_model_seeds = 1;
  std::size_t range_heads = 0;            // ranges.csv (ranges_table) over this many heads; 0: not written
  std::vector<std::filesystem::path> error_model_sweeps;
  std::filesystem::path hardware_csv;     // GPU columns of Table 4 (see table4_nan); empty: none
  std::function<void(const std::string& sweep, const SweepProgress&)> progress;
  std::function<void(const std::string& line)> log;
};
// Runs the four sweeps (library backend) and writes table1.csv, table3.csv, table4.csv and the figure CSVs.
void reproduce_paper(const ReproduceOptions&);

}  // namespace pasa
