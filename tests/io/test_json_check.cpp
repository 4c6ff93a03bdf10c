// The one JSON reader (io/json_check): typed reads and name lookups whose errors name the JSON place, and
// unknown keys with "did you mean".
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/numeric/format.hpp"

using namespace pasa;
using nlohmann::json;

namespace {
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("json_check: typed reads name the place and the value", "[json]") {
  const json j = json::parse(R"({"n": 3, "x": 1.5, "s": "a", "b": true, "neg": -2})");
  std::size_t n = 0;
  double x = 0;
  std::string s;
  bool b = false;
  read_size(j, "n", "cfg.json:/o", n);
  read_number(j, "x", "cfg.json:/o", x);
  read_string(j, "s", "cfg.json:/o", s);
  read_bool(j, "b", "cfg.json:/o", b);
  CHECK(n == 3);
  CHECK(x == 1.5);
  CHECK(s == "a");
  CHECK(b);
  std::size_t absent = 7;
  read_size(j, "missing", "cfg.json:/o", absent);
  CHECK(absent == 7);
  CHECK(error_of([&] { read_number(j, "s", "cfg.json:/o", x); }) == "cfg.json:/o/s: expected a number, got string \"a\"");
  CHECK(error_of([&] { read_size(j, "neg", "cfg.json:/o", n); }) ==
        "cfg.json:/o/neg: expected a non-negative integer, got integer -2");
  CHECK(error_of([&] { read_size(j, "n", "cfg.json:/o", n, 4); }) == "cfg.json:/o/n: expected an integer >= 4, got integer 3");
  CHECK(error_of([&] { read_bool(j, "x", "cfg.json:/o", b); }) == "cfg.json:/o/x: expected true or false, got number 1.5");
  CHECK(as_integer(json(3.0), "/i") == 3);
  CHECK(error_of([&] { as_integer(json(3.5), "/i"); }) == "/i: expected an integer, got number 3.5");
  // Beyond int64 the number is shown as written (it read as -1 through the int64 conversion: issue 23).
  CHECK(error_of([&] { as_integer(json::parse("18446744073709551615"), "/i"); }) ==
        "/i: expected an integer below 2^63, got integer 18446744073709551615");
  CHECK(as_integer(json::parse("9223372036854775807"), "/i") == INT64_MAX);
  CHECK(error_of([&] { require_object(json::array(), "cfg.json:"); }) == "cfg.json:/: expected an object, got array");
}

TEST_CASE("json_check: unknown keys suggest the closest allowed one", "[json]") {
  const json j = json::parse(R"({"x00": 1})");
  CHECK(error_of([&] { check_keys(j, {"x0", "am"}, "p.json:/generator"); }) ==
        "p.json:/generator/x00: unknown key 'x00' (did you mean 'x0'?); allowed: x0, am");
  CHECK(error_of([&] { check_keys(json::parse(R"({"zzzz": 1})"), {"x0", "am"}, ""); }) ==
        "/zzzz: unknown key 'zzzz'; allowed: x0, am");
  CHECK(closest_key("wavelenght", {"x0", "wavelength"}) == "wavelength");
}

TEST_CASE("json_check: a name looked up at a place", "[json]") {
  CHECK(as_named(json("fp8_e4m3"), "/f", format_by_name).name == "fp8_e4m3fn");
  const std::string e = error_of([&] { as_named(json("fp17"), "cfg.json:/alloc/stages/max", format_by_name); });
  CHECK_THAT(e, Catch::StartsWith("cfg.json:/alloc/stages/max: unknown format \"fp17\"") && Catch::Contains("fp16"));
  CHECK(error_of([&] { as_named(json(16), "/f", format_by_name); }) == "/f: expected a string, got integer 16");
}
