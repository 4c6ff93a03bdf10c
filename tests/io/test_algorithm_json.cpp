// Algorithm specs read from and written to JSON (io/algorithm_json): round trip, defaults, and errors that
// name the JSON path.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/allocation.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/algorithm_json.hpp"

using namespace pasa;

namespace {
AlgorithmSpec spec_of(const std::string& name, const std::string& alloc, std::size_t s1, std::size_t s2) {
  AlgorithmSpec s;
  s.name = name;
  s.alloc = allocation_preset(alloc);
  s.s1 = s1;
  s.s2 = s2;
  return s;
}
}  // namespace

TEST_CASE("algorithm specs read and print as JSON; errors name the path", "[algorithms]") {
  AlgorithmSpec s = spec_of("pasa", "pasa_fp16", 64, 32);
  s.pasa.beta = 0.9375;
  s.pasa.alpha_in_M = false;
  s.pasa.m0_zero = true;
  s.pasa.form = "printed";
  s.seed = 7;
  CHECK(algorithm_from_json(to_json(s), "/a") == s);
  const auto j = nlohmann::json::parse(R"({"name": "fa2", "alloc": {"preset": "fa_fp16", "stages": {"max": "fp32"}}, "s2": 64})");
  const AlgorithmSpec f = algorithm_from_json(j, "/a");
  CHECK(f.s2 == 64);
  CHECK(f.s1 == 128);
  CHECK(f.alloc.stage("max").name == "fp32");
  auto err = [](const char* text) {
    try {
      algorithm_from_json(nlohmann::json::parse(text), "run.json:/algorithm");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(err(R"({"name": "fa3"})"), Catch::Contains("run.json:/algorithm/name") && Catch::Contains("smooth_k"));
  CHECK_THAT(err(R"({"name": "pasa", "pasa": {"beta": 1.0}})"), Catch::Contains("/algorithm/pasa/beta"));
  CHECK_THAT(err(R"({"name": "pasa", "pasa": {"m0": "0"}})"), Catch::Contains("/algorithm/pasa/m0"));
  CHECK_THAT(err(R"({"name": "pasa", "s1": 0})"), Catch::Contains("/algorithm/s1"));
  CHECK_THAT(err(R"({"name": "fa2", "alloc": {"preset": "fa_fp16", "stages": {"mx": "fp32"}}})"),
             Catch::Contains("/algorithm/alloc/stages/mx"));
  // fmax beyond fp32's range made fp32(1/fmax) zero, and fp8_scale then silently used no scaling.
  CHECK_THAT(err(R"({"name": "fa2", "quant": {"scales": "tensor", "fmax": 1e39}})"),
             Catch::StartsWith("run.json:/algorithm/quant/fmax: expected a number in fp32's normal range") &&
                 Catch::EndsWith("got 1e+39"));
  CHECK_THAT(err(R"({"name": "fa2", "quant": {"scales": "tensor", "fmax": 1e-39}})"),
             Catch::StartsWith("run.json:/algorithm/quant/fmax: expected a number in fp32's normal range"));
  CHECK(err(R"({"name": "fa2", "quant": {"scales": "tensor", "fmax": 3.4e38}})") == "no error");
  CHECK(err(R"({"name": "fa2", "quant": {"scales": "tensor", "fmax": 1.2e-38}})") == "no error");
  // The library's own check (what a spec built in code, or by the Python module, meets).
  AlgorithmSpec q = spec_of("fa2", "fa_fp8", 16, 16);
  q.quant.scales = QuantScale::tensor;
  q.quant.fmax = 1e39;
  AttentionInputs in;
  in.q = in.k = in.v = Tensor(Shape{1, 1, 4, 4}, format_by_name("fp16"));
  CHECK_THROWS_WITH(run_attention(in, q, 1), Catch::Contains("/quant/fmax: fmax must lie in fp32's normal range"));
}
