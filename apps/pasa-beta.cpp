// pasa-beta: PASA's optimal β (Appendix A–C, Eq. 20–22) for any format and block size; prints the
// Table 3 columns and writes them as CSV / JSON. --rule binade: the β that puts the stored row mean S̄' at the
// top of its binade for inputs of a known score mean (beta_binade.hpp, docs/beta.md); the paper's rule stays
// the default.
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

namespace {

// --rule binade: one row per initial β (beta_binade.hpp).
int binade(const std::vector<double>& betas, std::size_t n, const pasa::Format& tp, const pasa::BinadeOptions& bo,
           const pasa::BetaOptions& opt, const std::string& csv_path, const std::string& json_path) {
  if (bo.score_mean == 0) throw pasa::InputError("--rule binade needs --score-mean (|S̄|/α of the inputs, > 0)");
  std::vector<pasa::BinadeRow> rows;
  for (double b0 : betas) rows.push_back(pasa::binade_beta(b0, n, tp, bo, opt));
  fmt::print("format {}, n = {}{}, binade rule for |S̄|/α = {} (spread {})\n", tp.name, n,
             opt.sqrt_d ? fmt::format(", entries scaled by 1/sqrt({})", opt.sqrt_d) : std::string(), bo.score_mean,
             bo.spread);
  fmt::print("{:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}\n", "beta0", "Sbar'", "cost",
             "beta", "Sbar'", "cost", "Inva", "Inva_r", "cost/cost0");
  for (const pasa::BinadeRow& r : rows)
    fmt::print("{:>10.8g} {:>10.5g} {:>10.4g} | {:>10.8g} {:>10.5g} {:>10.4g} {:>10.4g} {:>10.4g} {:>9.3f}\n", r.beta0,
               r.sbar0, r.cost0, r.beta, r.sbar, r.cost, r.inva, r.inva_r, r.cost / r.cost0);
  std::vector<std::pair<std::filesystem::path, std::string>> files;
  if (!csv_path.empty()) files.emplace_back(csv_path, pasa::binade_rows_csv(rows));
  if (!json_path.empty()) {
    nlohmann::json j = {{"format", tp.name}, {"n", n},           {"sqrt_d", opt.sqrt_d}, {"rule", "binade"},
                        {"score_mean", bo.score_mean}, {"spread", bo.spread}, {"window", bo.window}, {"max_mismatch", bo.max_mismatch},
                        {"rows", nlohmann::json::array()}};
    for (const pasa::BinadeRow& r : rows) j["rows"].push_back(pasa::to_json(r));
    files.emplace_back(json_path, j.dump(2) + "\n");
  }
  pasa::write_files_atomic(files);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Optimal PASA shift parameter beta (paper Appendix A-C, Eq. 20-22, Table 3)"};
  std::string format_name = "fp16";
  long long n = 128;  // signed, so that a negative value is reported rather than wrapped
  std::vector<double> betas;
  bool table3 = false;
  pasa::BetaOptions opt;
  std::string csv_path, json_path;
  std::string rule = "paper";
  pasa::BinadeOptions bo;
  bo.score_mean = 0;
  app.add_option("--format", format_name, "format tp the entries of M are rounded to (fp16, bf16, ..., p=..,emax=..)")
      ->capture_default_str()
      ->check(pasa_apps::library_name(pasa::format_by_name, pasa_apps::format_names()));
  app.add_option("--n", n, "block size n = s2 (M is n x n)")->capture_default_str();
  app.add_option("--beta", betas, "initial beta (repeatable)")->check(pasa_apps::finite_number());
  app.add_flag("--table3", table3, "use the paper's Table 3 initial betas (0.9, 1-2^-4, 1-2^-5, 1-2^-6, 0.99, 0.999)");
  app.add_option("--with-sqrt-d", opt.sqrt_d, "round the entries of M = (I - beta/n J)/sqrt(D) (Eq. 10) instead of the unscaled ones")
      ->check(pasa_apps::unsigned_integer(1));
  app.add_option("--tol", opt.tol, "relative change of beta that stops the iteration")->capture_default_str()->check(pasa_apps::finite_number());
  app.add_option("--max-iter", opt.max_iter, "iteration limit")->capture_default_str()->check(pasa_apps::unsigned_integer(1, INT_MAX));
  app.add_option("--rule", rule, "paper: Inva_r = Inva (Eq. 22, Table 3); binade: S̄' at the top of its binade for --score-mean (docs/beta.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"paper", "binade"}));
  CLI::Option* binade_opts[4];
  binade_opts[0] = app.add_option("--score-mean", bo.score_mean, "binade rule: |S̄|/α, the inputs' scaled block-mean score (x0^2*sqrt(D) for entries of mean x0)")
      ->check(pasa_apps::finite_number());
  binade_opts[1] = app.add_option("--spread", bo.spread, "binade rule: relative spread of |S̄|/α over rows and blocks to hold for")
      ->capture_default_str()
      ->check(pasa_apps::finite_number());
  binade_opts[2] = app.add_option("--window", bo.window, "binade rule: search 1-beta within a factor of this of 1-beta0")
      ->capture_default_str()
      ->check(pasa_apps::finite_number());
  binade_opts[3] = app.add_option("--max-mismatch", bo.max_mismatch, "binade rule: largest |Inva_r - Inva|/Inva a candidate may realise")
      ->capture_default_str()
      ->check(pasa_apps::finite_number());
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
    if (rule == "binade") return binade(betas, static_cast<std::size_t>(n), tp, bo, opt, csv_path, json_path);
    for (const CLI::Option* o : binade_opts)
      if (o->count() > 0) throw pasa::InputError(o->get_name() + " is an option of --rule binade");

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
