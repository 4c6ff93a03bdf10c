// A program outside the source tree that uses the installed headers and libraries of every layer: it rounds
// one number and runs one small attention problem against the golden, printing what pasa-round and pasa-attn
// print for the same inputs (tests/packaging/install_consumer.sh compares them).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"

int main() {
  const pasa::Format fp16 = pasa::format_by_name("fp16");
  const double r = pasa::round(0.1, fp16);
  std::printf("round 0.1 fp16 %.17g 0x%04llx\n", r, static_cast<unsigned long long>(pasa::encode(r, fp16)));
  const auto problem = pasa::problem_from_json(
      nlohmann::json::parse(R"({"shape": {"Nq": 2, "Sq": 64, "D": 32}, "seed": 3,
                                "generator": {"kind": "uniform", "x0": 30, "am": 0.5}})"),
      "problem");
  const auto algo = pasa::algorithm_from_json(nlohmann::json::parse(R"({"name": "pasa", "alloc": "pasa_fp16"})"), "algo");
  const pasa::AttentionInputs in = pasa::generate_inputs(problem, 1);
  const pasa::AttentionOutput out = pasa::run_attention(in, algo, 1);
  const pasa::Metrics m = pasa::compare_outputs(out.o, pasa::golden_attention(in).o);
  std::printf("pasa pasa_fp16 rmse %.6e nan %zu\n", m.rmse, m.nan_count);
  return 0;
}
