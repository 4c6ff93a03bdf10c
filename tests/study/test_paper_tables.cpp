// The paper's tables (study/paper_tables): Table 1 and Table 3 against the printed values.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "pasa/io/csv.hpp"
#include "pasa/study/paper_tables.hpp"

using namespace pasa;

TEST_CASE("paper tables: Table 1 and Table 3 agree with the printed values", "[sweep]") {
  // Table 1: our column next to the paper's printed one, equal to the printed digits.
  const Table t1 = table1_formats();
  REQUIRE(t1.rows.size() == 4);
  for (const auto& r : t1.rows) {
    const double ours = parse_csv_number(r[2]), printed = parse_csv_number(r[3]);
    CHECK(ours == Approx(printed).epsilon(5e-3));  // printed with 3-4 digits
    CHECK(parse_csv_number(r[4]) == Approx(parse_csv_number(r[5])).epsilon(2e-2));
  }
  CHECK(t1.rows[1][4] == "65504");
  // Table 3: the optimised β to the printed digits (the first row's is printed as "0.9").
  const Table t3 = table3_beta();
  REQUIRE(t3.rows.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    const std::string& printed = t3.rows[i][9];
    const double digits = static_cast<double>(printed.size() - printed.find('.') - 1);
    CHECK(std::fabs(parse_csv_number(t3.rows[i][8]) - std::stod(printed)) <= 0.5 * std::pow(10.0, -digits) + 1e-12);
  }
  CHECK(t3.rows[3][9] == "0.984497");
}
