#include "pasa/io/format_table.hpp"

#include <cmath>

#include <fmt/format.h>

namespace pasa {

std::vector<FormatTableRow> format_table(const std::vector<Format>& formats) {
  std::vector<FormatTableRow> rows;
  for (const auto& f : formats)
    rows.push_back({f.name, f.p, f.emin(), f.emax, f.min_subnormal(), f.min_normal(), f.max_finite(),
                    f.unit_roundoff()});
  return rows;
}

std::string format_table_text(const std::vector<Format>& formats) {
  // Powers of two are shown as such next to the decimal value: they are what the formats are made of.
  auto pow2 = [](double v) { return fmt::format("{:.4g} (2^{})", v, std::ilogb(v)); };
  std::string s = fmt::format("{:<10} {:>3} {:>6} {:>5}  {:<22} {:<22} {:<12} {}\n", "format", "p", "emin",
                              "emax", "smallest subnormal", "smallest normal", "largest finite",
                              "unit roundoff u");
  for (const auto& r : format_table(formats))
    s += fmt::format("{:<10} {:>3} {:>6} {:>5}  {:<22} {:<22} {:<12.6g} {}\n", r.name, r.p, r.emin, r.emax,
                     pow2(r.min_subnormal), pow2(r.min_normal), r.max_finite, pow2(r.unit_roundoff));
  return s;
}

}  // namespace pasa
