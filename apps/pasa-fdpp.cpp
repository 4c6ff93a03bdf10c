// pasa-fdpp: the FlashDecoding++ unified-max table (fallback rate and error vs φ, input distribution and
// length; src/pasa/study/fdpp_study.hpp) as CSV.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "common_options.hpp"
#include "library_names.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/study/fdpp_study.hpp"

int main(int argc, char** argv) {
  CLI::App app{"FlashDecoding++ asynchronised softmax: recomputation rate and error vs phi (CSV)"};
  std::vector<std::size_t> lengths = {512, 4096};
  std::string out = "results/decode/fdpp.csv";
  int threads = pasa::default_threads();
  std::string max_memory;
  app.add_option("--lengths", lengths, "KV lengths")->capture_default_str()->check(pasa_apps::unsigned_integer(1));
  app.add_option("--out", out, "CSV file")->capture_default_str();
  pasa_apps::add_threads(app, threads);
  pasa_apps::add_max_memory(app, max_memory);
  pasa_apps::add_version(app, "pasa-fdpp");
  PASA_CLI_PARSE(app, argc, argv);
  try {
    if (lengths.empty()) throw pasa::InputError("--lengths: give at least one KV length");
    pasa::check_output_paths({{"--out", out}});
    pasa::check_memory(pasa::fdpp_study_bytes(lengths, threads),
                       max_memory.empty() ? 0 : pasa::parse_byte_size(max_memory, "--max-memory"), "this study",
                       "KV lengths up to " + std::to_string(*std::max_element(lengths.begin(), lengths.end())));
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
