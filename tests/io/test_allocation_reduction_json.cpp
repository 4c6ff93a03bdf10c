// Reductions and the exp stage's `via` in allocation JSON: reading, the full form's round trip, presets and
// their _strict names, and errors that name the JSON path and the value.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "pasa/attention/allocation.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/allocation_json.hpp"

using namespace pasa;
using nlohmann::json;

namespace {

std::string err(const char* text) {
  try {
    allocation_from_json(json::parse(text), "cfg.json:/alloc");
  } catch (const InputError& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

}  // namespace

TEST_CASE("reductions read from JSON; a plain format name is the strict model", "[allocation_json]") {
  const Allocation a = allocation_from_json(json::parse(R"({"preset": "fa_fp16_strict", "stages": {
      "sum": {"format": "fp16", "acc": "fp32", "order": "blocked", "width": 32},
      "mean": {"acc": "fp64", "order": "pairwise"},
      "exp": {"format": "fp16", "via": "fp32"}}})"),
                                            "/a");
  CHECK(a.spec(Stage::sum).format == format_by_name("fp16"));
  CHECK(a.spec(Stage::sum).reduce == Reduction{format_by_name("fp32"), ReduceOrder::blocked, 32});
  CHECK(a.spec(Stage::mean).reduce == Reduction{format_by_name("fp64"), ReduceOrder::pairwise, 32});
  CHECK(a.spec(Stage::mean).format == format_by_name("fp16"));  // fields absent keep the preset's
  CHECK(a.spec(Stage::exp).via == ExpVia::fp32);
  CHECK(allocation_from_json(to_json(a), "/x") == a);

  // A plain name over a preset with an fp32 accumulator: accumulate in that format, sequentially.
  const Allocation b = allocation_from_json(json::parse(R"({"preset": "pasa_fp16", "stages": {"sum": "bf16"}})"), "/b");
  CHECK(b.spec(Stage::sum).format == format_by_name("bf16"));
  CHECK(b.spec(Stage::sum).acc() == format_by_name("bf16"));
  CHECK(b.spec(Stage::sum).reduce.order == ReduceOrder::sequential);
  // An object that changes only the format keeps the preset's accumulator.
  const Allocation c = allocation_from_json(json::parse(R"({"preset": "pasa_fp16", "stages": {"sum": {"format": "bf16"}}})"), "/c");
  CHECK(c.spec(Stage::sum).acc() == format_by_name("fp32"));
  CHECK(c.spec(Stage::sum).reduce.order == ReduceOrder::blocked);
}

TEST_CASE("the full form of an allocation with reductions round trips", "[allocation_json]") {
  Allocation a = allocation_preset("pasa_fp16");
  a.name = "mine";
  a.spec(Stage::sum).reduce = Reduction{format_by_name("bf16"), ReduceOrder::pairwise};
  a.spec(Stage::sum).round.mode = RoundMode::toward_zero;
  a.spec(Stage::mean).reduce = Reduction{format_by_name("p=20,emax=40"), ReduceOrder::blocked, 1024};
  a.spec(Stage::exp).via = ExpVia::fp32;
  const json j = to_json(a);
  CHECK(j["stages"]["sum"]["acc"] == "bf16");
  CHECK(j["stages"]["sum"]["order"] == "pairwise");
  CHECK(j["stages"]["mean"]["width"] == 1024);
  CHECK(j["stages"]["exp"]["via"] == "fp32");
  CHECK(j["stages"]["max"] == "fp16");  // plain stages stay plain names
  CHECK(allocation_from_json(j, "/a") == a);
  CHECK(allocation_from_json(json::parse(j.dump()), "/a") == a);
}

TEST_CASE("presets: fp32 accumulation, and _strict names for the old model", "[allocation_json]") {
  const auto names = allocation_preset_names();
  for (const char* base : {"fa_fp16", "pasa_fp16", "fa_bf16", "pasa_bf16", "pasa_fp8"}) {
    const std::string strict = std::string(base) + "_strict";
    CHECK(std::find(names.begin(), names.end(), strict) != names.end());
    const Allocation hw = allocation_preset(base);
    for (Stage st : {Stage::sum, Stage::mean}) {
      CHECK(hw.spec(st).acc() == format_by_name("fp32"));
      CHECK(hw.spec(st).reduce.order == ReduceOrder::blocked);
      CHECK(hw.spec(st).reduce.width == 32);
      CHECK(allocation_preset(strict).spec(st).acc() == hw.spec(st).format);
    }
    CHECK(allocation_preset(strict).name == strict);
    CHECK(allocation_from_json(json(strict), "/a") == allocation_preset(strict));
  }
  // Presets whose reductions are already fp32 or wider have no _strict twin.
  for (const char* p : {"fp64", "fa_fp32", "fa_fp16_fp32", "fa_fp32_bf16", "fa_bf16_fp32", "fa_fp8"}) {
    CHECK(allocation_preset(p).spec(Stage::sum).reduce == Reduction{});
    CHECK(allocation_preset(p).spec(Stage::sum).format.p >= 24);
    CHECK_THROWS_WITH(allocation_preset(std::string(p) + "_strict"), Catch::Contains("unknown allocation preset"));
  }
}

TEST_CASE("reduction JSON errors name the path and the value", "[allocation_json]") {
  CHECK_THAT(err(R"({"preset": "fa_fp16", "stages": {"sum": {"order": "tree"}}})"),
             Catch::Contains("cfg.json:/alloc/stages/sum/order") && Catch::Contains("tree") &&
                 Catch::Contains("sequential, pairwise, blocked"));
  CHECK_THAT(err(R"({"preset": "fa_fp16", "stages": {"sum": {"order": "blocked", "width": 24}}})"),
             Catch::Contains("cfg.json:/alloc/stages/sum/width") && Catch::Contains("power of two") &&
                 Catch::Contains("24"));
  CHECK_THAT(err(R"({"preset": "fa_fp16", "stages": {"mean": {"width": 2048}}})"),
             Catch::Contains("/alloc/stages/mean/width") && Catch::Contains("2048"));
  CHECK_THAT(err(R"({"preset": "fa_fp16", "stages": {"mean": {"width": "32"}}})"),
             Catch::Contains("/alloc/stages/mean/width"));
  CHECK_THAT(err(R"({"preset": "fa_fp16", "stages": {"sum": {"acc": "fp24"}}})"),
             Catch::Contains("cfg.json:/alloc/stages/sum/acc") && Catch::Contains("fp24"));
  CHECK_THAT(err(R"({"preset": "fa_fp16", "stages": {"max": {"acc": "fp32"}}})"),
             Catch::Contains("cfg.json:/alloc/stages/max/acc") && Catch::Contains("unknown key"));
  CHECK_THAT(err(R"({"preset": "fa_fp16", "stages": {"sum": {"via": "fp32"}}})"),
             Catch::Contains("cfg.json:/alloc/stages/sum/via") && Catch::Contains("unknown key"));
  CHECK_THAT(err(R"({"preset": "fa_fp16", "stages": {"exp": {"via": "fp16"}}})"),
             Catch::Contains("cfg.json:/alloc/stages/exp/via") && Catch::Contains("exact, fp32"));
  // A width with an order that has no lanes was accepted and ignored: refused, whether the order
  // is given beside it or kept from the preset's stage.
  CHECK(err(R"({"preset": "fa_fp16", "stages": {"sum": {"order": "sequential", "width": 8}}})") ==
        "cfg.json:/alloc/stages/sum/width: a width applies to \"order\": \"blocked\" only; this stage's order is "
        "\"sequential\"");
  CHECK_THAT(err(R"({"preset": "fa_fp16_strict", "stages": {"mean": {"width": 32}}})"),
             Catch::StartsWith("cfg.json:/alloc/stages/mean/width: a width applies to"));
  CHECK_THAT(err(R"({"preset": "fa_fp16", "stages": {"sum": {"order": "pairwise", "width": 32}}})"),
             Catch::Contains("/alloc/stages/sum/width") && Catch::Contains("\"pairwise\""));
  CHECK(err(R"({"preset": "fa_fp16_strict", "stages": {"sum": {"order": "blocked", "width": 8}}})") == "no error");
  CHECK(err(R"({"preset": "fa_fp16", "stages": {"sum": {"width": 18446744073709551615}}})") ==
        "cfg.json:/alloc/stages/sum/width: expected an integer below 2^63, got integer 18446744073709551615");  // was "got -1"
  CHECK_THAT(err(R"({"preset": "pasa_fp16_stric"})"), Catch::Contains("/alloc/preset") && Catch::Contains("pasa_fp16_strict"));
}
