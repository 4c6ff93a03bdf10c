// Format descriptors (numeric/format): the built-in formats' extremes as the standards give them
// ([IEEE754] §3.6 for the binary formats, [OCP8] for the fp8 ones), names, aliases and custom formats.
#include <catch2/catch.hpp>

#include <cmath>

#include "pasa/core/error.hpp"
#include "pasa/numeric/format.hpp"

using namespace pasa;

TEST_CASE("format table values match the standards", "[round]") {
  CHECK(format_by_name("fp16").max_finite() == 65504.0);
  CHECK(format_by_name("bf16").max_finite() == 0x1.fep127);
  CHECK(format_by_name("fp8_e4m3fn").max_finite() == 448.0);
  CHECK(format_by_name("fp8_e5m2").max_finite() == 57344.0);
  CHECK(format_by_name("fp16").min_subnormal() == std::ldexp(1.0, -24));
  CHECK(format_by_name("fp8_e4m3fn").min_subnormal() == std::ldexp(1.0, -9));
  CHECK(format_by_name("fp8_e4m3fn").emin() == -6);
  CHECK(format_by_name("fp16").storage_bits() == 16);
  CHECK(format_by_name("fp8_e4m3fn").storage_bits() == 8);
  CHECK(format_by_name("tf32").storage_bits() == 19);
  CHECK(format_by_name("p=11,emax=15") == format_by_name("fp16"));
  CHECK_THROWS_WITH(format_by_name("fp17"), Catch::Contains("fp8_e4m3fn"));
  CHECK_THROWS(format_by_name("p=1,emax=15"));
}

TEST_CASE("fp8_e4m3 is an alias of fp8_e4m3fn; unknown names are InputErrors", "[round]") {
  const Format e4 = format_by_name("fp8_e4m3");
  CHECK(e4.name == "fp8_e4m3fn");
  CHECK(e4 == format_by_name("fp8_e4m3fn"));
  CHECK(e4.specials == Specials::fn);  // OCP E4M3: no infinities [OCP8]
  CHECK_THROWS_AS(format_by_name("fp17"), InputError);
  CHECK_THROWS_AS(format_by_name("p=1,emax=15"), InputError);
  CHECK_THROWS_AS(custom_format(60, 15), InputError);
}

TEST_CASE("a custom format's numbers are reported as written, even beyond int's range", "[round]") {
  // sscanf's %d turned 99999999999999999999 into -1: "p=-1 is outside [2, 53]".
  CHECK_THROWS_WITH(format_by_name("p=99999999999999999999,emax=15"),
                    "format precision p=99999999999999999999 is outside [2, 53]");
  CHECK_THROWS_WITH(format_by_name("p=11,emax=4294967311"), "format emax=4294967311 is outside [1, 1023]");
  CHECK_THROWS_WITH(format_by_name("p=-3,emax=15"), "format precision p=-3 is outside [2, 53]");
  CHECK(format_by_name("p=24,emax=127,subnormals=1") == format_by_name("fp32"));
  CHECK_FALSE(format_by_name("p=11,emax=15,subnormals=0").subnormals);
  for (const char* bad : {"p=11,emax=15,subnormals=2", "p=,emax=15", "p=11,emax=", "p=11", "p=11,emax=15x", "p=+11,emax=15"})
    CHECK_THROWS_WITH(format_by_name(bad), Catch::StartsWith("unknown format"));
}
