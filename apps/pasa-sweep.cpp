// pasa-sweep: runs a JSON sweep (grid × seeds × algorithms) into a CSV table and a JSON summary; with no
// config, a built-in one-minute default that shows FA-FP16/FP32 overflowing where PASA-FP16 does not.
// `pasa-sweep merge DIR...` joins the tables of --shard runs. README "pasa-sweep" documents the schema.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common_options.hpp"
#include "library_names.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/io/output_file.hpp"
#include "pasa/study/range_stats.hpp"
#include "pasa/study/sweep.hpp"
#include "pasa/study/sweep_config.hpp"

namespace {

// One line, rewritten in place: cases done, rate, time left. Only on a terminal (a log file gets none).
void print_progress(const pasa::SweepProgress& p) {
  std::fputs(pasa::sweep_progress_line(p, "pasa-sweep").c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Sweep attention algorithms over a grid of inputs (grid x seeds x algorithms) into CSV + JSON summary"};
  app.require_subcommand(0, 1);
  std::string config_path, out, shard;
  int threads = pasa::default_threads(), jobs = 1;
  bool resume = false, print_default = false;
  app.add_option("config", config_path, "sweep config (JSON), - for stdin; none: the built-in default")
      ->check(CLI::Validator([](std::string& s) { return s == "-" ? std::string() : CLI::ExistingFile(s); }, "FILE or -"));
  app.add_option("--out", out, "output folder (default: the config's outputs.dir, or sweep-out/<name>)");
  pasa_apps::add_threads(app, threads, "threads in all, split between the --jobs problems (results do not depend on it)");
  app.add_option("--jobs", jobs, "problems run side by side, each on max(1, threads / jobs) threads; workers with no problem left help the others (same table)")
      ->capture_default_str()
      ->check(pasa_apps::thread_count());
  std::string max_memory;
  pasa_apps::add_max_memory(app, max_memory);
  app.add_option("--shard", shard, "I/N: run every N-th problem starting at I (0 <= I < N); join with `merge`");
  bool overwrite = false;
  auto* resume_flag = app.add_flag("--resume", resume, "keep the rows already in the output folder and run only the missing cases");
  app.add_flag("--overwrite", overwrite,
               "replace the results already in the output folder (its table and summary) by a new run of every case")
      ->excludes(resume_flag);
  std::size_t range_heads = 0;
  app.add_option("--ranges", range_heads,
                 "also write ranges.csv: K, K', S, S' ranges and overflow counts of the first N heads of each problem")
      ->check(pasa_apps::unsigned_integer(1))
      ->excludes("--shard");
  app.add_flag("--print-default", print_default, "print the built-in default config and exit");

  std::vector<std::string> merge_dirs;
  std::string merge_out;
  auto* merge = app.add_subcommand("merge", "join the shard tables of one sweep (from one or several folders)");
  merge->add_option("dirs", merge_dirs, "folders holding results.shard-I-of-N.csv and config.json")->required();
  merge->add_option("--out", merge_out, "folder for the merged table and summary (default: the first folder)");
  pasa_apps::add_version(app, "pasa-sweep");
  PASA_CLI_PARSE(app, argc, argv);

  try {
    if (merge->parsed()) {
      std::vector<std::filesystem::path> dirs(merge_dirs.begin(), merge_dirs.end());
      const auto r = pasa::merge_sweeps(dirs, merge_out.empty() ? dirs.front() : std::filesystem::path(merge_out));
      std::printf("merged %zu cases into %s (summary %s)\n", r.cases_reused, r.csv.c_str(), r.summary.c_str());
      return 0;
    }
    if (print_default) {
      std::fputs(pasa::default_sweep_config_text().c_str(), stdout);
      return 0;
    }
    // From stdin, names in the config ({"npy": ...}) are relative to the working folder.
    const pasa::SweepConfig cfg = config_path.empty() ? pasa::default_sweep_config()
                                  : config_path == "-" ? pasa::parse_sweep_config(pasa_apps::read_json_arg("-", "config"), "stdin")
                                                       : pasa::load_sweep_config(config_path);
    pasa::SweepOptions opt;
    opt.out_dir = out;
    opt.threads = threads;
    opt.jobs = jobs;
    opt.resume = resume;
    opt.overwrite = overwrite;
    opt.max_memory = pasa_apps::max_memory_bytes(max_memory);
    if (!shard.empty()) pasa::parse_shard(shard, opt.shard_index, opt.shard_count);
    if (::isatty(STDERR_FILENO)) opt.progress = print_progress;
    std::fprintf(stderr, "[pasa-sweep] %s: %zu grid points x %zu seeds x %zu algorithms = %zu cases%s\n", cfg.name.c_str(),
                 cfg.grid_points(), cfg.seeds.size(), cfg.algorithms.size(), cfg.case_count(),
                 opt.shard_count > 1 ? fmt::format(" (shard {}/{})", opt.shard_index, opt.shard_count).c_str() : "");
    if (range_heads > 0)
      pasa::check_not_an_input("--ranges: the table",
                               std::filesystem::path(out.empty() ? cfg.out_dir : out) / "ranges.csv",
                               pasa::sweep_input_files(cfg));
    // The ranges first (no attention: quick), so that inputs they refuse (masks) stop the run before it starts.
    const pasa::RangeTable ranges = range_heads > 0 ? pasa::sweep_ranges(cfg, range_heads, threads) : pasa::RangeTable{};
    const pasa::SweepReport r = pasa::run_sweep(cfg, pasa::library_backend(), opt);
    if (range_heads > 0) {
      pasa::write_file_atomic(r.csv.parent_path() / "ranges.csv", ranges.text());
      std::printf("ranges:  %s\n", (r.csv.parent_path() / "ranges.csv").c_str());
    }
    if (r.already_complete)  // (run_sweep wrote nothing: the folder is as the first run left it)
      std::fprintf(stderr, "[pasa-sweep] %s holds this sweep's complete results: nothing run (--overwrite runs it again)\n",
                   r.csv.parent_path().c_str());
    std::printf("%zu cases run, %zu kept from an earlier run\ntable:   %s\n", r.cases_run, r.cases_reused, r.csv.c_str());
    if (!r.summary.empty()) std::printf("summary: %s\n", r.summary.c_str());
    std::fputs(pasa::sweep_digest(cfg, r.csv).c_str(), stdout);
    return 0;
  } catch (...) {
    return pasa::report_error("pasa-sweep");
  }
}
