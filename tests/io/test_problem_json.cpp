// Problems read from and written to JSON (io/problem_json): round trip, per-tensor generator overrides,
// errors with the JSON path and "did you mean".
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/problem_json.hpp"

using namespace pasa;

TEST_CASE("problem JSON: round trip, per-tensor overrides and errors with paths", "[generators]") {
  const auto j = nlohmann::json::parse(R"({
    "shape": {"B": 2, "Nq": 4, "Nkv": 2, "Sq": 8, "D": 16},
    "format": "bf16", "causal": true, "seed": 3, "kv_len": [8, 5],
    "generator": {"kind": "uniform", "x0": 20, "am": 0.5},
    "k": {"am": 2},
    "v": {"kind": "hybrid", "x0": 0, "am": 10}
  })");
  const ProblemSpec p = problem_from_json(j, "p.json:");
  CHECK(p.Skv == 8);
  CHECK(p.Nkv == 2);
  CHECK(p.q.x0 == 20);
  CHECK(p.k.x0 == 20);
  CHECK(p.k.am == 2);
  CHECK(p.v.kind == GenKind::hybrid);
  CHECK(p.v.p == 0.001);
  const ProblemSpec back = problem_from_json(to_json(p), "");
  CHECK(to_json(back) == to_json(p));
  CHECK(generate_inputs(back).k.data == generate_inputs(p).k.data);

  auto err = [](const char* text) {
    try {
      problem_from_json(nlohmann::json::parse(text), "p.json:");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(err(R"({"generator": {"x00": 1}})"),
             Catch::Contains("p.json:/generator") && Catch::Contains("'x00'") && Catch::Contains("did you mean 'x0'"));
  CHECK_THAT(err(R"({"shap": {}})"), Catch::Contains("did you mean 'shape'"));
  CHECK_THAT(err(R"({"q": {"am": "big"}})"), Catch::Contains("p.json:/q/am: expected a number"));
  CHECK_THAT(err(R"({"q": {"kind": "gauss"}})"), Catch::Contains("/q/kind") && Catch::Contains("uniform, hybrid"));
  CHECK_THAT(err(R"({"shape": {"Nq": 3, "Nkv": 2}})"), Catch::Contains("not a multiple"));
  CHECK_THAT(err(R"({"shape": {"D": 0}})"), Catch::Contains("zero"));
  CHECK_THAT(err(R"({"format": "fp17"})"), Catch::Contains("fp17"));
  CHECK_THAT(err(R"({"v": {"p": 2}})"), Catch::Contains("p.json:/v/p: must lie in [0, 1]"));
  CHECK(closest_key("wavelenght", {"x0", "wavelength"}) == "wavelength");
  CHECK(closest_key("zzzzzz", {"x0", "am"}).empty());
}

TEST_CASE("problem JSON: an error about one element names its pointer, not the root", "[generators]") {
  auto err = [](const char* text) {
    try {
      problem_from_json(nlohmann::json::parse(text), "p.json:");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // These read "p.json:/: problem kv_len[1] = ..." before.
  CHECK(err(R"({"shape": {"B": 2, "Sq": 8}, "kv_len": [8, 9]})") == "p.json:/kv_len/1: problem kv_len[1] = 9 exceeds Skv = 8");
  CHECK(err(R"({"shape": {"B": 2, "Sq": 8}, "kv_len": [8]})") == "p.json:/kv_len: problem kv_len has 1 entries, expected B = 2");
  CHECK_THAT(err(R"({"shape": {"Sq": 8, "Skv": 0}})"), Catch::StartsWith("p.json:/shape/Skv: problem shape has a zero"));
  CHECK_THAT(err(R"({"shape": {"B": 0}})"), Catch::StartsWith("p.json:/shape/B: "));
  CHECK_THAT(err(R"({"shape": {"Nq": 3, "Nkv": 2}})"), Catch::StartsWith("p.json:/shape/Nkv: problem shape: Nq = 3 is not"));
  CHECK_THAT(err(R"({"format": "fp17"})"), Catch::StartsWith("p.json:/format: problem format 'fp17'"));
  CHECK_THAT(err(R"({"shape": {"B": 4294967296, "Nq": 4294967296, "Sq": 4294967296}})"),
             Catch::StartsWith("p.json:/shape: problem shape") && Catch::EndsWith("its element count overflows"));
  CHECK_THAT(err(R"({"select": {"p": 2}})"), Catch::StartsWith("p.json:/select/p: "));
  CHECK_THAT(err(R"({"k": {"am": -1}})"), Catch::StartsWith("p.json:/k/am: "));
  // Read inside a larger document (a sweep's "problem"): under that place.
  try {
    problem_from_json(nlohmann::json::parse(R"({"shape": {"Sq": 4}, "kv_len": [5]})"), "cfg.json:/problem");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) == "cfg.json:/problem/kv_len/0: problem kv_len[0] = 5 exceeds Skv = 4");
  }
}
