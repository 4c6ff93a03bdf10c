// pasa-attribute: which rounding stage of a precision allocation accounts for the error of blocked
// attention on one problem (see src/pasa/attribution.hpp for the two views and their definitions).
#include <algorithm>
#include <cmath>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/analysis/attribution.hpp"
#include "pasa/io/analysis_report.hpp"
#include "pasa/io/csv.hpp"
#include "common_options.hpp"
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
  std::string problem_path, csv_path, json_path, max_memory;
  bool invariance = false;
  int threads = pasa::default_threads();
  pasa_apps::add_problem(app, problem_path)->required();
  pasa_apps::AlgorithmOptions ao;
  ao.add(app, "pasa", "pasa_fp16");
  app.add_flag("--invariance", invariance, "also the PASA invariance view (given beta, exact M, optimised beta)");
  pasa_apps::add_threads(app, threads);
  pasa_apps::add_max_memory(app, max_memory);
  app.add_option("--csv", csv_path, "write the per-stage table as CSV");
  app.add_option("--json", json_path, "write the per-stage table (and invariance view) as JSON");
  pasa_apps::add_version(app, "pasa-attribute");
  PASA_CLI_PARSE(app, argc, argv);

  try {
    const pasa::ProblemSpec problem = pasa::problem_from_json(pasa_apps::read_json_arg(problem_path, "--problem"),
                                                               pasa_apps::json_source(problem_path) + ":");
    const pasa::AlgorithmSpec spec = ao.spec(app);
    // Everything checked before the golden is computed: the algorithm against the problem, outputs, memory
    // (inputs, golden, two runs).
    pasa_apps::validate_case_from(problem, spec, ao.source());
    auto inputs = pasa::problem_input_files(problem, problem_path);
    inputs.insert(inputs.begin(), {{"--problem", problem_path}, {"--algo-json", ao.json_file}});
    pasa::check_output_paths({{"--csv", csv_path}, {"--json", json_path}}, inputs);
    pasa::GoldenOptions gcheck;
    gcheck.threads = threads;
    pasa::check_memory(pasa::case_memory_bytes(problem, {spec, spec}, gcheck, true),
                       pasa_apps::max_memory_bytes(max_memory), "this problem", fmt::format("{} threads", threads));
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
    std::size_t fw = 9;  // the format column fits a block scheme's name (the quantisation stages)
    for (const pasa::StageShare& r : rows) fw = std::max(fw, r.format.size());
    fmt::print("{:>8} {:>{}} | {:>11} {:>8} {:>7} | {:>11} {:>8} {:>7}\n", "stage", "format", fw, "rmse_lifted", "share",
               "NaN%", "rmse_only", "share", "NaN%");
    for (const pasa::StageShare& r : rows)
      fmt::print("{:>8} {:>{}} | {:>11.4e} {} {:>7.3g} | {:>11.4e} {} {:>7.3g}\n", r.stage, r.format, fw, r.rmse_lifted,
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
