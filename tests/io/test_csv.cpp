// CSV lines and numbers (io/csv): quoting and full-precision round trips.
#include <catch2/catch.hpp>

#include <cmath>

#include "pasa/core/error.hpp"
#include "pasa/io/csv.hpp"

using namespace pasa;

TEST_CASE("csv: quoting and full-precision numbers round-trip", "[sweep]") {
  const CsvRow row = {"a", "b,c", "say \"hi\"", "", R"({"x":[1,2]})"};
  const std::string line = csv_line(row);
  CHECK(line == "a,\"b,c\",\"say \"\"hi\"\"\",,\"{\"\"x\"\":[1,2]}\"\n");
  CHECK(parse_csv_line(line.substr(0, line.size() - 1)) == row);
  for (double x : {0.1, 1.0 / 3.0, 6.5504e4, 5e-324, -2.5, 1e300}) CHECK(parse_csv_number(csv_number(x)) == x);
  CHECK(csv_number(NAN) == "nan");
  CHECK(csv_number(-INFINITY) == "-inf");
  CHECK(std::isnan(parse_csv_number("nan")));
  CHECK_THROWS_AS(parse_csv_number("1.5x"), InputError);
}
