// Allocations as data: presets, JSON round trips, user overrides and errors that name the JSON path.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "pasa/attention/allocation.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/allocation_json.hpp"

using namespace pasa;
using nlohmann::json;

TEST_CASE("allocation presets follow the paper's figures", "[allocation]") {
  const Allocation f1 = allocation_preset("fa_fp32");
  CHECK(f1.stage("q").name == "fp16");
  CHECK(f1.stage("s").name == "fp32");
  CHECK(f1.stage("p").name == "fp16");
  CHECK(f1.stage("qk_acc").name == "fp32");
  CHECK(f1.stage("out").name == "fp16");
  const Allocation f2 = allocation_preset("fa_fp16_fp32");
  CHECK(f2.stage("s").name == "fp16");     // Fig. 2: S leaves the GEMM in fp16
  CHECK(f2.stage("scale").name == "fp32");
  CHECK(f2.stage("exp").name == "fp32");
  const Allocation p = allocation_preset("pasa_fp16");
  for (const auto& name : stage_names()) {
    // The accumulators, and the split-KV combine, which real kernels run in fp32 (docs/decode.md).
    const bool acc = name == "qk_acc" || name == "pv_acc" || name == "merge";
    CHECK(p.stage(name).name == (acc ? "fp32" : "fp16"));
  }
  const Allocation f64 = allocation_preset("fp64");
  for (const auto& name : stage_names()) CHECK(f64.stage(name).name == "fp64");
  CHECK(allocation_preset("pasa_bf16").stage("o").name == "bf16");
  CHECK(allocation_preset("fa_fp8").stage("k").name == "fp8_e4m3fn");
  CHECK(allocation_preset("fa_fp8").spec("k").round.overflow == Overflow::saturate);
  CHECK_THROWS_WITH(allocation_preset("fa_fp12"), Catch::Contains("pasa_fp16"));
}

