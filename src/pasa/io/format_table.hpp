// The paper's Table 1 (range and precision of each format), with the exponent range and the smallest
// values added: what `pasa-round --list-formats` prints. Reads only the Format descriptors ([PASA, Table 1]).
#pragma once

#include <string>
#include <vector>

#include "pasa/numeric/format.hpp"

namespace pasa {

struct FormatTableRow {
  std::string name;
  int p, emin, emax;
  double min_subnormal, min_normal, max_finite, unit_roundoff;
};
std::vector<FormatTableRow> format_table(const std::vector<Format>& formats = builtin_formats());
std::string format_table_text(const std::vector<Format>& formats = builtin_formats());  // aligned columns

}  // namespace pasa
