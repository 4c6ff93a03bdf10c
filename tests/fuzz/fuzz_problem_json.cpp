// libFuzzer target: the problem JSON reader (JSON text -> ProblemSpec -> size estimate), and the property
// that what to_json writes reads back as the same problem.
#include "json_round_trip.hpp"
#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/study/sweep.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return pasa_fuzz::json_round_trip(
      data, size, [](const nlohmann::json& j, const std::string& where) { return pasa::problem_from_json(j, where); },
      [](const pasa::ProblemSpec& p) {
        (void)pasa::case_memory_bytes(p, {pasa::AlgorithmSpec{}}, pasa::GoldenOptions{}, true);
      });
}
