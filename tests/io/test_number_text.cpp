// The library pieces pasa-round is made of: the format table (--list-formats), number parsing and printing.
// Expected values are hand-computed from the format definitions (IEEE 754, OCP FP8) and the paper's Table 1.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "pasa/core/error.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/io/number_text.hpp"
#include "pasa/numeric/round.hpp"

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
  CHECK(row("fp8_e4m3").unit_roundoff == 0.0625);
  CHECK(row("fp16").unit_roundoff == Approx(4.88e-4).epsilon(1e-3));
  CHECK(row("bf16").unit_roundoff == Approx(3.906e-3).epsilon(1e-3));
  CHECK(row("fp32").unit_roundoff == Approx(5.96e-8).epsilon(1e-3));
  CHECK(row("fp8_e4m3").max_finite == 448);
  CHECK(row("fp16").max_finite == 65504);
  CHECK(row("bf16").max_finite == Approx(3.39e38).epsilon(1e-3));
  CHECK(row("fp32").max_finite == std::numeric_limits<float>::max());
  CHECK(row("fp64").max_finite == std::numeric_limits<double>::max());
  CHECK(row("fp64").min_subnormal == std::numeric_limits<double>::denorm_min());
  CHECK(row("fp32").min_subnormal == std::numeric_limits<float>::denorm_min());
  CHECK(row("fp32").min_normal == std::numeric_limits<float>::min());
  CHECK(row("fp8_e5m2").max_finite == 57344);
  CHECK(row("fp8_e5m2").min_subnormal == std::ldexp(1.0, -16));
  CHECK(row("fp8_e4m3").emin == -6);
  CHECK(row("fp8_e4m3").emax == 8);
  CHECK(row("fp16").emin == -14);
  CHECK(row("tf32").p == 11);
  CHECK(row("tf32").emax == 127);
  const std::string text = format_table_text();
  CHECK_THAT(text, Catch::Contains("65504") && Catch::Contains("2^-24") && Catch::Contains("fp8_e5m2"));
}

TEST_CASE("number parsing for pasa-round", "[round][tool]") {
  const auto xs = parse_numbers(" 0.1, -2\n0x1.8p-3\tinf -nan 1e-320 ", "stdin");
  REQUIRE(xs.size() == 6);
  CHECK(xs[0] == 0.1);
  CHECK(xs[1] == -2.0);
  CHECK(xs[2] == 0.1875);
  CHECK(std::isinf(xs[3]));
  CHECK(std::isnan(xs[4]));
  CHECK(xs[5] == 1e-320);
  CHECK(parse_numbers("", "stdin").empty());
  CHECK_THROWS_WITH(parse_numbers("1 2 x3", "stdin"), Catch::Contains("stdin") && Catch::Contains("number 3") &&
                                                          Catch::Contains("x3"));
  CHECK_THROWS_AS(parse_numbers("1e400", "command line"), InputError);
  CHECK_THROWS_AS(parse_numbers("1.5.2", "command line"), InputError);
}

TEST_CASE("printing values and storage bits", "[round][tool]") {
  const Format h = format_by_name("fp16"), e4 = format_by_name("fp8_e4m3"), bf = format_by_name("bf16");
  CHECK(value_text(0.1) == "0.1");
  CHECK(value_text(-0.0) == "-0");
  CHECK(value_text(std::numeric_limits<double>::quiet_NaN()) == "nan");
  CHECK(value_text(-std::numeric_limits<double>::infinity()) == "-inf");
  CHECK(value_text(round(0.1, h)) == "0.0999755859375");  // 1638/16384
  CHECK(bits_text(encode(1.0, h), h) == "0x3c00");
  CHECK(bits_text(encode(-0.0, h), h) == "0x8000");
  CHECK(bits_text(encode(0.3125, e4), e4) == "0x2a");       // 1.25 * 2^-2: exponent field 5, fraction 010
  CHECK(bits_text(encode(1.0, bf), bf) == "0x3f80");
  CHECK(bits_text(encode(1.0, format_by_name("tf32")), format_by_name("tf32")) == "0x1fc00");  // 19 bits
}
