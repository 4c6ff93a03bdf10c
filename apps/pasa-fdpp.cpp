// pasa-fdpp: the FlashDecoding++ unified-max table (fallback rate and error vs φ, input distribution and
// length; src/pasa/study/fdpp_study.hpp) as CSV.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pasa/core/error.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/study/fdpp_study.hpp"

int main(int argc, char** argv) {
  CLI::App app{"FlashDecoding++ asynchronised softmax: recomputation rate and error vs phi (CSV)"};
  std::vector<std::size_t> lengths = {512, 4096};
  std::string out = "results/decode/fdpp.csv";
  int threads = pasa::default_threads();
  app.add_option("--lengths", lengths, "KV lengths")->capture_default_str();
  app.add_option("--out", out, "CSV file")->capture_default_str();
  app.add_option("--threads", threads, "threads")->capture_default_str();
  app.set_version_flag("--version", "pasa-fdpp " PASA_VERSION);  // the CMake project version, as pasa.__version__
  CLI11_PARSE(app, argc, argv);
  try {
    std::string text = pasa::csv_line(pasa::fdpp_csv_header());
    for (const pasa::FdppRow& r : pasa::fdpp_study(lengths, threads)) {
      text += pasa::csv_line(pasa::fdpp_csv_row(r));
      std::printf("%-9s Skv %5zu %-12s phi=%-3s (%7.3f) in [%.3f, %.3f]: recomputed %5.1f %%, rmse %.3e (fa2 %.3e)\n",
                  r.distribution.c_str(), r.skv, r.alloc.c_str(), r.phi_choice.c_str(), r.phi, r.x_lo, r.x_hi,
                  r.recomputed_pct, r.rmse, r.rmse_fa2);
    }
    pasa::write_file_atomic(out, text);
  } catch (...) {
    return pasa::report_error("pasa-fdpp");
  }
  return 0;
}
