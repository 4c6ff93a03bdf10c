#include "pasa/io/metrics_json.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

namespace pasa {

namespace {
// JSON has no NaN/inf: they are written as the strings "nan", "inf", "-inf".
nlohmann::json num(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}
}  // namespace

nlohmann::json to_json(const Metrics& m) {
  return {{"elements", m.elements},
          {"rows", m.rows},
          {"rmse", num(m.rmse)},
          {"rmse_finite", num(m.rmse_finite)},
          {"nan_count", m.nan_count},
          {"inf_count", m.inf_count},
          {"nan_pct", m.nan_pct},
          {"inf_pct", m.inf_pct},
          {"rows_with_nonfinite", m.rows_with_nonfinite},
          {"rows_with_nonfinite_pct", m.rows_with_nonfinite_pct},
          {"max_abs_err", num(m.max_abs_err)},
          {"max_rel_err", num(m.max_rel_err)},
          {"cosine", num(m.cosine)},
          {"rmse_uniform_baseline", num(m.rmse_uniform_baseline)},
          {"rmse_centred", num(m.rmse_centred)},
          {"skill", num(m.skill)}};
}

nlohmann::json to_json(const ScoreStats& s) {
  return {{"entries", s.entries},
          {"min", num(s.min)},
          {"max", num(s.max)},
          {"min_unscaled", num(s.min_unscaled)},
          {"max_unscaled", num(s.max_unscaled)},
          {"format", s.format},
          {"over_max", s.over_max},
          {"overflow", s.overflow},
          {"over_max_scaled", s.over_max_scaled},
          {"overflow_scaled", s.overflow_scaled}};
}

}  // namespace pasa
