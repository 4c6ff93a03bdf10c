#include "pasa/io/analysis_report.hpp"

#include <nlohmann/json.hpp>

#include "pasa/io/csv.hpp"

namespace pasa {

std::string beta_rows_csv(const std::vector<BetaRow>& rows) {
  std::string out = csv_line({"beta0", "inva0", "inva_r0", "rel_err0", "beta", "inva", "inva_r", "rel_err", "iterations"});
  for (const BetaRow& r : rows)
    out += csv_line({csv_number(r.beta0), csv_number(r.inva0), csv_number(r.inva_r0), csv_number(r.rel_err0),
                     csv_number(r.beta), csv_number(r.inva), csv_number(r.inva_r), csv_number(r.rel_err),
                     std::to_string(r.iterations)});
  return out;
}

nlohmann::json to_json(const BetaRow& r) {
  return {{"beta0", r.beta0}, {"inva0", r.inva0}, {"inva_r0", r.inva_r0}, {"rel_err0", r.rel_err0},
          {"beta", r.beta},   {"inva", r.inva},   {"inva_r", r.inva_r},   {"rel_err", r.rel_err},
          {"iterations", r.iterations}};
}

std::string binade_rows_csv(const std::vector<BinadeRow>& rows) {
  std::string out = csv_line({"beta0", "sbar0", "cost0", "beta", "sbar", "cost", "inva", "inva_r"});
  for (const BinadeRow& r : rows)
    out += csv_line({csv_number(r.beta0), csv_number(r.sbar0), csv_number(r.cost0), csv_number(r.beta),
                     csv_number(r.sbar), csv_number(r.cost), csv_number(r.inva), csv_number(r.inva_r)});
  return out;
}

nlohmann::json to_json(const BinadeRow& r) {
  return {{"beta0", r.beta0}, {"sbar0", r.sbar0}, {"cost0", r.cost0}, {"beta", r.beta},
          {"sbar", r.sbar},   {"cost", r.cost},   {"inva", r.inva},   {"inva_r", r.inva_r}};
}

nlohmann::json to_json(const StageShare& r) {
  return {{"stage", r.stage},
          {"format", r.format},
          {"rmse_base", r.rmse_base},
          {"rmse_fp64", r.rmse_fp64},
          {"rmse_lifted", r.rmse_lifted},
          {"reduction", r.reduction},
          {"share", r.share},
          {"rmse_only", r.rmse_only},
          {"share_only", r.share_only},
          {"nan_pct_base", r.nan_pct_base},
          {"nan_pct_lifted", r.nan_pct_lifted},
          {"nan_pct_only", r.nan_pct_only}};
}

nlohmann::json to_json(const InvarianceView& v) {
  return {{"beta", v.beta}, {"inva", v.inva}, {"inva_r", v.inva_r},
          {"rmse", v.rmse}, {"rmse_exact_M", v.rmse_exact_M}, {"beta_opt", v.beta_opt}, {"rmse_opt", v.rmse_opt}};
}

std::string stage_shares_csv(const std::vector<StageShare>& rows) {
  std::string out = csv_line({"stage", "format", "rmse_base", "rmse_fp64", "rmse_lifted", "reduction", "share",
                              "rmse_only", "share_only", "nan_pct_base", "nan_pct_lifted", "nan_pct_only"});
  for (const StageShare& r : rows)
    out += csv_line({r.stage, r.format, csv_number(r.rmse_base), csv_number(r.rmse_fp64), csv_number(r.rmse_lifted),
                     csv_number(r.reduction), csv_number(r.share), csv_number(r.rmse_only), csv_number(r.share_only),
                     csv_number(r.nan_pct_base), csv_number(r.nan_pct_lifted), csv_number(r.nan_pct_only)});
  return out;
}

}  // namespace pasa
