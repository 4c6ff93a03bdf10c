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
  const Format h = format_by_name("fp16"), e4 = format_by_name("fp8_e4m3fn"), bf = format_by_name("bf16");
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
