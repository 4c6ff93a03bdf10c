// pasa-tables: regenerates the PASA paper's Tables 1, 3, 4 and the data behind Figs. 9/10 as CSV in
// results/ (each beside the paper's printed values); experiments/plot_figs.sh then draws the figures.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include "common_options.hpp"
#include "library_names.hpp"
#include "pasa/core/error.hpp"
#include "pasa/study/paper_tables.hpp"
#include "pasa/core/parallel.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Regenerate the PASA paper's tables (1, 3, 4) and the Fig. 9/10 data as CSV"};
  pasa::ReproduceOptions opt;
  opt.threads = pasa::default_threads();
  std::string repo = ".", out = "results";
  std::string hardware;
  bool fresh = false;
  app.add_option("--repo", repo, "repository root holding configs/")->capture_default_str();
  app.add_option("--out", out, "output folder (sweeps under OUT/sweeps/)")->capture_default_str();
  pasa_apps::add_threads(app, opt.threads, "threads inside each case (results do not depend on it)");
  app.add_option("--nan-seeds", opt.nan_seeds,
                 "seeds 1..N for Table 4's NaN % (run without the golden); 0: the sweeps' own seeds")
      ->capture_default_str()->check(pasa_apps::unsigned_integer(0));
  app.add_option("--error-model-heads", opt.error_model_heads,
                 "write error_model.csv: the first-order error model on this many heads next to the measured "
                 "RMSE of every Fig. 9/10 panel; 0: skip")
      ->capture_default_str()->check(pasa_apps::unsigned_integer(0));
  app.add_option("--error-model-seeds", opt.error_model_seeds,
                 "seeds 1..N of each grid point that the error model's prediction pools")
      ->capture_default_str()->check(pasa_apps::unsigned_integer(1));
  app.add_option("--range-heads", opt.range_heads,
                 "write ranges.csv: K, K', S, S' ranges and overflow counts per head at the Table 4 points; 0: skip")
      ->capture_default_str()->check(pasa_apps::unsigned_integer(0));
  std::vector<std::string> em_sweeps;
  app.add_option("--error-model-sweep", em_sweeps, "also a finished sweep folder (config.json, results.csv) in error_model.csv");
  app.add_flag("--fresh", fresh, "refuse to reuse finished sweeps in OUT/sweeps (default: resume them)");
  app.add_option("--hardware", hardware,
                 "GPU-vs-emulator table for Table 4's GPU columns (default: REPO/results/hardware/hw_attention.csv "
                 "when it exists; \"none\": leave them empty)");
  pasa_apps::add_version(app, "pasa-tables");
  PASA_CLI_PARSE(app, argc, argv);
  opt.repo = repo;
  if (hardware.empty()) {
    const std::filesystem::path def = opt.repo / "results" / "hardware" / "hw_attention.csv";
    if (std::filesystem::exists(def)) opt.hardware_csv = def;
  } else if (hardware != "none") {
    opt.hardware_csv = hardware;
  }
  opt.out = out;
  for (const auto& d : em_sweeps) opt.error_model_sweeps.emplace_back(d);
  opt.resume = !fresh;
  opt.log = [](const std::string& s) { std::printf("%s\n", s.c_str()); std::fflush(stdout); };
  if (::isatty(STDERR_FILENO))
    opt.progress = [](const std::string& name, const pasa::SweepProgress& p) {
      std::fprintf(stderr, "\r[pasa-tables] %s: %zu/%zu cases   ", name.c_str(), p.done, p.total);
      if (p.done == p.total) std::fputc('\n', stderr);
    };
  const auto start = std::chrono::steady_clock::now();
  try {
    pasa::reproduce_paper(opt);
  } catch (...) {
    return pasa::report_error("pasa-tables");
  }
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  std::printf("done in %.0f s (%d threads, %.0f CPU-s); tables in %s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), opt.threads,
              seconds(ru.ru_utime) + seconds(ru.ru_stime), out.c_str());
  return 0;
}
