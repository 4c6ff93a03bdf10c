// The PASA paper's tables regenerated as CSV, each with the paper's printed value beside ours where the
// paper gives one (README "Reproducing the paper"):
//   Table 1  format ranges (precision = unit roundoff 2^-p, overflow boundary = largest finite value)
//   Table 3  optimal β (the β solver, fp16, n = 128)
//   Table 4  NaN % of FA-FP16/FP32 on the uniform / hybrid benchmarks (from the Fig. 9/10 sweeps), with
//            the distance to the paper's value in standard errors of the seed mean
//   fig9_*.csv, fig10_*.csv  the data behind Figs. 9 and 10 (RMSE over seeds, NaN marks)
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

// Table 4 from the finished figure sweeps (each of its six points lies on one of the four panels): per row
// the seed mean of FA-FP16/FP32's NaN %, its standard error (sd / sqrt(seeds)), min, max, the paper's
// value and (mean − paper) / SE. With hardware_csv (experiments/gpu/'s hw_attention.csv: the H100 and the
// emulator on the SAME inputs, drawn by torch on the GPU, so not the toolkit's seeds), per row also the GPU's
// seed mean, its SE, its distance to the paper, and the emulator's seed mean on the GPU's inputs (columns
// left empty without it, or where the file holds no fa_fp16_fp32 case at that point).
Table table4_nan(const std::function<std::filesystem::path(const PaperSweep&)>& results_csv_of,
                 const std::filesystem::path& hardware_csv = {});

struct ReproduceOptions {
  std::filesystem::path repo = ".";       // where configs/ is
  std::filesystem::path out = "results";  // tables here, sweeps under out/sweeps/
  int threads = 1;                        // problems run at once (one thread each), shared by the four sweeps
  bool resume = true;                     // keep finished sweeps and rows; run only what is missing
  std::filesystem::path hardware_csv;     // GPU columns of Table 4 (see table4_nan); empty: none
  std::function<void(const std::string& sweep, const SweepProgress&)> progress;
  std::function<void(const std::string& line)> log;
};
// Runs the four sweeps (library backend) and writes table1.csv, table3.csv, table4.csv and the figure CSVs.
void reproduce_paper(const ReproduceOptions&);

}  // namespace pasa
