// A sweep's results.csv without its timing columns (the last two: golden_time_s and time_s), the only ones
// outside the bit-identity guarantee: what two runs of the same sweep must agree on.
#pragma once

#include <filesystem>
#include <string>

#include "pasa/io/csv.hpp"

namespace pasa::test {

inline std::string without_times(const std::filesystem::path& csv) {
  std::string out;
  for (const auto& line : read_complete_lines(csv).lines) {
    CsvRow r = parse_csv_line(line);
    r.resize(r.size() - 2);
    out += csv_line(r);
  }
  return out;
}

}  // namespace pasa::test
