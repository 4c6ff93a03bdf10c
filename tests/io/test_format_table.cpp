// The format table (io/format_table: the paper's Table 1 with the exponent range, `pasa-round --list-formats`).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "pasa/io/format_table.hpp"
#include "pasa/numeric/format.hpp"

using namespace pasa;

TEST_CASE("format table rows: precision, exponent range, extremes, unit roundoff", "[round][tool]") {
  const auto rows = format_table();
  REQUIRE(rows.size() == builtin_formats().size());
  auto row = [&](const char* name) {
    for (const auto& r : rows)
      if (r.name == name) return r;
    FAIL("no row " << name);
    return rows[0];
  };
  // Paper Table 1: precision (u) 6.25e-2 fp8, 4.88e-4 fp16, 3.906e-3 bf16, 5.96e-8 fp32; overflow boundary
  // 448, 65504, 3.4e38, 3.4e38.
  CHECK(row("fp8_e4m3fn").unit_roundoff == 0.0625);
  CHECK(row("fp16").unit_roundoff == Approx(4.88e-4).epsilon(1e-3));
  CHECK(row("bf16").unit_roundoff == Approx(3.906e-3).epsilon(1e-3));
  CHECK(row("fp32").unit_roundoff == Approx(5.96e-8).epsilon(1e-3));
  CHECK(row("fp8_e4m3fn").max_finite == 448);
  CHECK(row("fp16").max_finite == 65504);
  CHECK(row("bf16").max_finite == Approx(3.39e38).epsilon(1e-3));
  CHECK(row("fp32").max_finite == std::numeric_limits<float>::max());
  CHECK(row("fp64").max_finite == std::numeric_limits<double>::max());
  CHECK(row("fp64").min_subnormal == std::numeric_limits<double>::denorm_min());
  CHECK(row("fp32").min_subnormal == std::numeric_limits<float>::denorm_min());
  CHECK(row("fp32").min_normal == std::numeric_limits<float>::min());
  CHECK(row("fp8_e5m2").max_finite == 57344);
  CHECK(row("fp8_e5m2").min_subnormal == std::ldexp(1.0, -16));
  CHECK(row("fp8_e4m3fn").emin == -6);
  CHECK(row("fp8_e4m3fn").emax == 8);
  CHECK(row("fp16").emin == -14);
  CHECK(row("tf32").p == 11);
  CHECK(row("tf32").emax == 127);
  const std::string text = format_table_text();
  CHECK_THAT(text, Catch::Contains("65504") && Catch::Contains("2^-24") && Catch::Contains("fp8_e5m2"));
}
