// The analysis results (β solver rows, error attribution) as CSV tables and JSON objects.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "pasa/analysis/attribution.hpp"
#include "pasa/analysis/beta_binade.hpp"
#include "pasa/analysis/beta_solver.hpp"

namespace pasa {

std::string beta_rows_csv(const std::vector<BetaRow>& rows);
nlohmann::json to_json(const BetaRow& row);
std::string binade_rows_csv(const std::vector<BinadeRow>& rows);  // pasa-beta --rule binade
nlohmann::json to_json(const BinadeRow& row);
nlohmann::json to_json(const StageShare&);
nlohmann::json to_json(const InvarianceView&);
std::string stage_shares_csv(const std::vector<StageShare>&);  // header line + one line per stage

}  // namespace pasa
