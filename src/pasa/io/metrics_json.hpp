// Metrics and ScoreStats (exact/metrics.hpp) as JSON objects (NaN and infinities as strings).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "pasa/exact/metrics.hpp"

namespace pasa {

nlohmann::json to_json(const Metrics&);
nlohmann::json to_json(const ScoreStats&);

}  // namespace pasa
