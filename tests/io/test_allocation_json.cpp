// Allocations read from and written to JSON (io/allocation_json): round trips, presets with overrides, and
// errors that name the JSON path.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "pasa/attention/allocation.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/allocation_json.hpp"

using namespace pasa;
using nlohmann::json;

TEST_CASE("allocation JSON round trips for every preset", "[allocation]") {
  for (const auto& name : allocation_preset_names()) {
    const Allocation a = allocation_preset(name);
    const json j = to_json(a);
    CHECK(allocation_from_json(j, "/alloc") == a);
    CHECK(allocation_from_json(json::parse(j.dump()), "/alloc") == a);
    CHECK(allocation_from_json(json(name), "/alloc") == a);
  }
}

TEST_CASE("a user allocation in JSON: preset plus overrides", "[allocation]") {
  const json j = json::parse(R"({"preset": "fa_fp16", "name": "fa16_max32",
      "gemm": {"model": "chunked", "chunk": 4},
      "stages": {"max": "fp32", "exp": {"format": "bf16", "round": "rz", "overflow": "saturate"},
                 "s": "p=11,emax=15,subnormals=0"}})");
  const Allocation a = allocation_from_json(j, "/alloc");
  CHECK(a.name == "fa16_max32");
  CHECK(a.gemm.kind == GemmKind::chunked);
  CHECK(a.gemm.chunk == 4);
  CHECK(a.stage("max").name == "fp32");
  CHECK(a.stage("exp").name == "bf16");
  CHECK(a.spec("exp").round.mode == RoundMode::toward_zero);
  CHECK(a.spec("exp").round.overflow == Overflow::saturate);
  CHECK_FALSE(a.stage("s").subnormals);
  CHECK(a.stage("sum").name == "fp16");  // untouched stages keep the preset
  CHECK(allocation_from_json(to_json(a), "/x") == a);
  Allocation b = a;
  b.stage("o") = format_by_name("fp64");  // lifting one stage by name
  CHECK(b.stage("o").name == "fp64");
  CHECK_FALSE(b == a);
}

TEST_CASE("allocation JSON errors name the path", "[allocation]") {
  auto err = [](const char* text) {
    try {
      allocation_from_json(json::parse(text), "cfg.json:/alloc");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(err(R"({"preset": "fa_fp16", "stages": {"maxx": "fp32"}})"),
             Catch::Contains("cfg.json:/alloc/stages/maxx"));
  CHECK_THAT(err(R"({"preset": "fa_fp16", "stages": {"maxx": "fp32"}})"), Catch::Contains("known stages"));
  CHECK_THAT(err(R"({"preset": "fa_fp16", "stages": {"max": "fp17"}})"),
             Catch::Contains("cfg.json:/alloc/stages/max") && Catch::Contains("fp8_e4m3fn"));
  CHECK_THAT(err(R"({"preset": "fa_fp16", "stages": {"exp": {"format": "fp16", "round": "up"}}})"),
             Catch::Contains("/stages/exp/round"));
  CHECK_THAT(err(R"({"preset": "nope"})"), Catch::Contains("/alloc/preset") && Catch::Contains("pasa_fp16"));
  CHECK_THAT(err(R"({"stages": {"max": "fp32"}})"), Catch::Contains("missing"));
  CHECK_THAT(err(R"({"preset": "fp64", "gemm": {"model": "fast"}})"), Catch::Contains("/alloc/gemm/model"));
  CHECK_THAT(err(R"({"preset": "fp64", "gemm": {"chunk": 0}})"), Catch::Contains("/alloc/gemm/chunk"));
  CHECK_THAT(err(R"({"preset": "fp64", "colour": 1})"), Catch::Contains("/alloc/colour"));
  CHECK_THAT(err(R"(42)"), Catch::Contains("cfg.json:/alloc"));
}
