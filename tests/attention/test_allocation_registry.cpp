// The registries of allocation.hpp and format.hpp (one table per extension point): every entry's name is
// what the JSON reader accepts, the writer prints and the error messages list, and nothing else is.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "pasa/attention/allocation.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/allocation_json.hpp"
#include "pasa/numeric/format.hpp"

using namespace pasa;
using nlohmann::json;

namespace {

std::string error_of(const json& j) {
  try {
    (void)allocation_from_json(j, "/alloc");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("every stage of kStages: by name, in JSON, in the unknown-stage message", "[registry]") {
  REQUIRE(stage_names().size() == kStageCount);
  const std::string unknown = error_of(json{{"preset", "fa_fp16"}, {"stages", {{"nope", "fp32"}}}});
  CHECK_THAT(unknown, Catch::Contains("/alloc/stages/nope"));
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const Stage s = static_cast<Stage>(i);
    const std::string name(kStages[i].name);
    INFO(name);
    CHECK(stage_name(s) == name);
    CHECK(stage_by_name(name) == s);
    CHECK(stage_names()[i] == name);
    CHECK_THAT(unknown, Catch::Contains(name));
    // A stage set by name in JSON lands on that stage, and the writer names it so.
    const Allocation a = allocation_from_json(json{{"preset", "fp64"}, {"stages", {{name, "bf16"}}}}, "");
    // (merge not given follows o: allocation_from_json)
    const auto set = [&](std::size_t j) { return j == i || (s == Stage::o && j == kStageCount - 1); };
    for (std::size_t j = 0; j < kStageCount; ++j) CHECK(a.stages[j].format.name == (set(j) ? "bf16" : "fp64"));
    const json w = to_json(a)["stages"][name];  // a name, or an object for a stage with more than a format
    CHECK((w.is_string() ? w : w.at("format")) == "bf16");
    CHECK(allocation_from_json(to_json(a), "") == a);
  }
}

TEST_CASE("every GEMM model of kGemmKinds: by name, JSON round trip, the unknown-model message", "[registry]") {
  for (const auto& e : kGemmKinds) {
    INFO(e.name);
    CHECK(gemm_kind_name(e.value) == e.name);
    CHECK(gemm_kind_by_name(e.name) == e.value);
    const Allocation a = allocation_from_json(json{{"preset", "fa_fp16"}, {"gemm", {{"model", e.name}}}}, "");
    CHECK(a.gemm.kind == e.value);
    CHECK(to_json(a)["gemm"]["model"] == std::string(e.name));
    CHECK(allocation_from_json(to_json(a), "") == a);
  }
  const std::string unknown = error_of(json{{"preset", "fa_fp16"}, {"gemm", {{"model", "fused"}}}});
  CHECK_THAT(unknown, Catch::Contains("/alloc/gemm/model") && Catch::Contains("unknown GEMM model \"fused\""));
  for (const auto& e : kGemmKinds) CHECK_THAT(unknown, Catch::Contains(std::string(e.name)));
  CHECK_THROWS_AS(gemm_kind_by_name("Ordered"), InputError);
}

TEST_CASE("the small registries: reduction orders, exp evaluation, merge models, alignment rounding", "[registry]") {
  for (const auto& e : kReduceOrders) CHECK(reduce_order_by_name(reduce_order_name(e.value)) == e.value);
  for (const auto& e : kExpVias) CHECK(exp_via_by_name(exp_via_name(e.value)) == e.value);
  for (const auto& e : kMergeModels) CHECK(merge_model_by_name(merge_model_name(e.value)) == e.value);
  for (const auto& e : kAlignRounds) CHECK(align_round_by_name(align_round_name(e.value)) == e.value);
  CHECK_THROWS_WITH(reduce_order_by_name("tree"), Catch::Contains("sequential, pairwise, blocked"));
  CHECK_THROWS_WITH(merge_model_by_name("lse"), Catch::Contains("normalised_lse, unnormalised"));
  // Every tensor-core model listed is one tensor_core_preset accepts, and the list is the message's.
  for (const auto& n : tensor_core_preset_names()) CHECK_NOTHROW(tensor_core_preset(n));
  CHECK_THROWS_WITH(tensor_core_preset("v100"), Catch::Contains("h100_e5m2_fast, h100_fp16_f16acc, exact"));
}

TEST_CASE("every format of kBuiltinFormats: by name, alias and dtype name, listed in the message", "[registry]") {
  REQUIRE(builtin_formats().size() == kBuiltinFormats.size());
  const std::string known = known_format_names();
  for (std::size_t i = 0; i < kBuiltinFormats.size(); ++i) {
    const FormatEntry& e = kBuiltinFormats[i];
    INFO(e.name);
    const Format f = format_by_name(e.name);
    CHECK(f.name == e.name);
    if (f.ieee_like_grid()) CHECK(f == custom_format(e.p, e.emax, e.subnormals, e.specials));
    CHECK(builtin_formats()[i].name == e.name);
    CHECK_THAT(known, Catch::Contains(std::string(e.name)));
    if (!e.dtype.empty()) {
      CHECK(format_by_name(e.dtype).name == e.name);
      CHECK_THAT(known, Catch::Contains(std::string(e.dtype)));
    }
    if (!e.alias.empty()) CHECK(format_by_name(e.alias).name == e.name);
  }
  CHECK_THROWS_AS(format_by_name(""), InputError);  // (an empty name is no entry's missing alias)
}
