// pasa-attribute: which rounding stage of a precision allocation accounts for the error of blocked
// attention on one problem (see src/pasa/attribution.hpp for the two views and their definitions).
#include <cmath>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/analysis/attribution.hpp"
#include "pasa/io/analysis_report.hpp"
#include "pasa/io/csv.hpp"
#include "library_names.hpp"
#include "pasa/core/error.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/study/sweep.hpp"

namespace {

std::string pct(double share) { return std::isfinite(share) ? fmt::format("{:7.1f}%", 100 * share) : "    nan"; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Error attribution: RMSE (PASA Eq. 19) with each stage of the allocation lifted to fp64, and with "
               "only that stage low"};
  std::string problem_path, spec_path, algo = "pasa", alloc = "pasa_fp16", csv_path, json_path;
  std::size_t s1 = 128, s2 = 128;
  double beta = pasa::PasaOptions{}.beta;
  bool invariance = false;
  int threads = pasa::default_threads();
  app.add_option("--problem", problem_path, "problem JSON (the form pasa-attn reads)")->required();
  app.add_option("--spec", spec_path, "algorithm JSON (name, alloc, s1, s2, pasa options); overrides the options below");
  app.add_option("--algorithm", algo, "algorithm name")->capture_default_str();
  app.add_option("--alloc", alloc, "allocation preset")
      ->capture_default_str()
      ->check(pasa_apps::library_name(pasa::allocation_preset));
  app.add_option("--s1", s1, "query block size")->capture_default_str()->check(pasa_apps::unsigned_integer(1));
  app.add_option("--s2", s2, "key/value block size")->capture_default_str()->check(pasa_apps::unsigned_integer(1));
  app.add_option("--beta", beta, "PASA beta (algorithm pasa only)")->capture_default_str()->check(pasa_apps::finite_number());
  app.add_flag("--invariance", invariance, "also the PASA invariance view (given beta, exact M, optimised beta)");
  app.add_option("--threads", threads, "worker threads (results do not depend on it)")
      ->capture_default_str()
      ->check(pasa_apps::thread_count());
  std::string max_memory;
  app.add_option("--max-memory", max_memory, "memory the run may use, e.g. 64G (default: MemAvailable)");
  app.add_option("--csv", csv_path, "write the per-stage table as CSV");
  app.add_option("--json", json_path, "write the per-stage table (and invariance view) as JSON");
  app.set_version_flag("--version", "pasa-attribute " PASA_VERSION);  // the CMake project version, as pasa.__version__
  PASA_CLI_PARSE(app, argc, argv);

  try {
    const pasa::ProblemSpec problem = pasa::problem_from_json(pasa::read_json_file(problem_path), problem_path + ":");
    pasa::AlgorithmSpec spec;
    if (!spec_path.empty()) {
      spec = pasa::algorithm_from_json(pasa::read_json_file(spec_path), spec_path + ":");
    } else {
      // Through the algorithm JSON reader, so that every option is checked as a config's would be.
      nlohmann::json j = {{"name", algo}, {"alloc", alloc}, {"s1", s1}, {"s2", s2}};
      const pasa::AlgorithmInfo* info = pasa::find_algorithm(algo);
      if ((info && info->pasa_options) || app.count("--beta") > 0) j["pasa"] = {{"beta", beta}};
      spec = pasa::algorithm_from_json(j, "command line");
    }
    // Everything checked before the golden is computed: the algorithm against the problem, outputs, memory
    // (inputs, golden, two runs).
    try {
      pasa::validate_case(problem, spec);
    } catch (const pasa::InputError& e) {
      throw pasa::InputError((spec_path.empty() ? std::string("command line: ") : spec_path + ":") + e.what());
    }
    pasa::check_output_paths({{"--csv", csv_path}, {"--json", json_path}});
    pasa::GoldenOptions gcheck;
    gcheck.threads = threads;
    pasa::check_memory(pasa::case_memory_bytes(problem, {spec, spec}, gcheck, true),
                       max_memory.empty() ? 0 : pasa::parse_byte_size(max_memory, "--max-memory"), "this problem",
                       fmt::format("{} threads", threads));
    const pasa::AttentionInputs in = pasa::generate_inputs(problem);
    pasa::GoldenOptions gopt;
    gopt.threads = threads;
    const pasa::Golden golden = pasa::golden_attention(in, gopt);

    // The invariance view first: it rejects a non-PASA algorithm before the long per-stage runs.
    nlohmann::json inv_json;
    std::string inv_line;
    if (invariance) {
      const pasa::InvarianceView v = pasa::invariance_view(in, spec, golden, threads);
      inv_line = fmt::format("invariance: beta {:.8g} (Inva {:.6g}, realised {:.6g}): RMSE {:.4e}; exact M: {:.4e}; "
                             "optimised beta {:.8g}: {:.4e}\n",
                             v.beta, v.inva, v.inva_r, v.rmse, v.rmse_exact_M, v.beta_opt, v.rmse_opt);
      inv_json = pasa::to_json(v);
    }
    const auto rows = pasa::attribute_error(in, spec, golden, threads);
    fmt::print("{} / {}: RMSE {:.4e} (NaN {:.3g}%), all stages fp64 {:.3e}\n", spec.name, spec.alloc.name,
               rows.front().rmse_base, rows.front().nan_pct_base, rows.front().rmse_fp64);
    fmt::print("{:>8} {:>9} | {:>11} {:>8} {:>7} | {:>11} {:>8} {:>7}\n", "stage", "format", "rmse_lifted", "share",
               "NaN%", "rmse_only", "share", "NaN%");
    for (const pasa::StageShare& r : rows)
      fmt::print("{:>8} {:>9} | {:>11.4e} {} {:>7.3g} | {:>11.4e} {} {:>7.3g}\n", r.stage, r.format, r.rmse_lifted,
                 pct(r.share), r.nan_pct_lifted, r.rmse_only, pct(r.share_only), r.nan_pct_only);

    nlohmann::json j = {{"problem", pasa::to_json(problem)}, {"algorithm", pasa::to_json(spec)},
                        {"stages", nlohmann::json::array()}};
    for (const pasa::StageShare& r : rows) j["stages"].push_back(pasa::to_json(r));
    if (invariance) {
      fmt::print("{}", inv_line);
      j["invariance"] = inv_json;
    }
    std::vector<std::pair<std::filesystem::path, std::string>> files;  // both or neither
    if (!csv_path.empty()) files.emplace_back(csv_path, pasa::stage_shares_csv(rows));
    if (!json_path.empty()) files.emplace_back(json_path, j.dump(2) + "\n");
    pasa::write_files_atomic(files);
  } catch (...) {
    return pasa::report_error("pasa-attribute");
  }
  return 0;
}
