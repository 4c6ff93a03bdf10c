// pasa-beta: PASA's optimal β (Appendix A–C, Eq. 20–22) for any format and block size; prints the
// Table 3 columns and writes them as CSV / JSON.
#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/analysis/beta_solver.hpp"
#include "pasa/io/analysis_report.hpp"
#include "pasa/io/csv.hpp"
#include "common_options.hpp"
#include "library_names.hpp"
#include "pasa/core/error.hpp"
#include "pasa/numeric/format.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Optimal PASA shift parameter beta (paper Appendix A-C, Eq. 20-22, Table 3)"};
  std::string format_name = "fp16";
  long long n = 128;  // signed, so that a negative value is reported rather than wrapped
  std::vector<double> betas;
  bool table3 = false;
  pasa::BetaOptions opt;
  std::string csv_path, json_path;
  app.add_option("--format", format_name, "format tp the entries of M are rounded to (fp16, bf16, ..., p=..,emax=..)")
      ->capture_default_str()
      ->check(pasa_apps::library_name(pasa::format_by_name));
  app.add_option("--n", n, "block size n = s2 (M is n x n)")->capture_default_str();
  app.add_option("--beta", betas, "initial beta (repeatable)")->check(pasa_apps::finite_number());
  app.add_flag("--table3", table3, "use the paper's Table 3 initial betas (0.9, 1-2^-4, 1-2^-5, 1-2^-6, 0.99, 0.999)");
  app.add_option("--with-sqrt-d", opt.sqrt_d, "round the entries of M = (I - beta/n J)/sqrt(D) (Eq. 10) instead of the unscaled ones")
      ->check(pasa_apps::unsigned_integer(1));
  app.add_option("--tol", opt.tol, "relative change of beta that stops the iteration")->capture_default_str()->check(pasa_apps::finite_number());
  app.add_option("--max-iter", opt.max_iter, "iteration limit")->capture_default_str()->check(pasa_apps::unsigned_integer(1, INT_MAX));
  app.add_option("--csv", csv_path, "write the table as CSV");
  app.add_option("--json", json_path, "write the table as JSON");
  pasa_apps::add_version(app, "pasa-beta");
  PASA_CLI_PARSE(app, argc, argv);

  try {
    const pasa::Format tp = pasa::format_by_name(format_name);
    if (table3) {
      const auto t3 = pasa::table3_initial_betas();
      betas.insert(betas.begin(), t3.begin(), t3.end());
    }
    if (betas.empty()) throw pasa::InputError("give at least one --beta or --table3");
    if (n < 1) throw pasa::InputError(fmt::format("--n {}: the block size must be at least 1", n));
    pasa::check_output_paths({{"--csv", csv_path}, {"--json", json_path}});

    // A β0 the solver cannot start from (in bf16 one of Table 3's rounds M to a singular matrix) is marked in
    // the table and left out of the files; the other rows stand. Only when every row fails is it an error.
    std::vector<pasa::BetaRow> rows;
    std::vector<std::pair<double, std::string>> failed;
    std::vector<std::string> lines;
    for (double b0 : betas) {
      try {
        const pasa::BetaRow r = pasa::solve_beta(b0, static_cast<std::size_t>(n), tp, opt);
        rows.push_back(r);
        lines.push_back(fmt::format("{:>10.6g} {:>10.4g} {:>10.4g} {:>8.3f}% | {:>12.8g} {:>10.4g} {:>10.4g} {:>8.3f}% {:>5}",
                                    r.beta0, r.inva0, r.inva_r0, 100 * r.rel_err0, r.beta, r.inva, r.inva_r,
                                    100 * r.rel_err, r.iterations));
      } catch (const pasa::InputError& e) {
        if (betas.size() == 1) throw;
        failed.emplace_back(b0, e.what());
        lines.push_back(fmt::format("{:>10.6g} {:>10} (no solution: see below)", b0, "-"));
      }
    }
    if (rows.empty()) throw pasa::InputError("no initial beta gave a solution: " + failed.front().second);

    fmt::print("format {}, n = {}{}\n", tp.name, n,
               opt.sqrt_d ? fmt::format(", entries scaled by 1/sqrt({})", opt.sqrt_d) : std::string());
    fmt::print("{:>10} {:>10} {:>10} {:>9} | {:>12} {:>10} {:>10} {:>9} {:>5}\n", "beta0", "Inva", "Inva_r",
               "rel.err", "beta*", "Inva", "Inva_r", "rel.err", "iter");
    for (const std::string& l : lines) fmt::print("{}\n", l);
    for (const auto& [b0, why] : failed) fmt::print("beta0 = {:.6g}: {}\n", b0, why);

    std::vector<std::pair<std::filesystem::path, std::string>> files;  // both or neither
    if (!csv_path.empty()) files.emplace_back(csv_path, pasa::beta_rows_csv(rows));
    if (!json_path.empty()) {
      nlohmann::json j = {{"format", tp.name}, {"n", n}, {"sqrt_d", opt.sqrt_d}, {"tol", opt.tol},
                          {"rows", nlohmann::json::array()}};
      for (const pasa::BetaRow& r : rows) j["rows"].push_back(pasa::to_json(r));
      if (!failed.empty()) {
        j["failed"] = nlohmann::json::array();
        for (const auto& [b0, why] : failed) j["failed"].push_back({{"beta0", b0}, {"error", why}});
      }
      files.emplace_back(json_path, j.dump(2) + "\n");
    }
    pasa::write_files_atomic(files);
  } catch (...) {
    return pasa::report_error("pasa-beta");
  }
  return 0;
}
