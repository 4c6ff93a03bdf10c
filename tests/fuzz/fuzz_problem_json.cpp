// libFuzzer target: the problem JSON reader (JSON text -> ProblemSpec -> size estimate), and the property
// that what to_json writes reads back as the same problem.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/study/sweep.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  pasa::ProblemSpec p;
  try {
    const nlohmann::json j = pasa::parse_json_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    p = pasa::problem_from_json(j, "fuzz:");
  } catch (const pasa::InputError&) {
    return 0;
  }
  (void)pasa::case_memory_bytes(p, {pasa::AlgorithmSpec{}}, pasa::GoldenOptions{}, true);
  const nlohmann::json back = pasa::to_json(p);
  try {
    if (pasa::to_json(pasa::problem_from_json(back, "to_json:")) != back) std::abort();
  } catch (const pasa::InputError&) {
    std::abort();  // to_json wrote what problem_from_json refuses
  }
  return 0;
}
