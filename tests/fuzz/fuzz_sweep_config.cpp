// libFuzzer target: the sweep config reader and its validation with the library (every expanded problem
// and algorithm, the size check), as pasa-sweep runs it before creating anything.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/study/sweep.hpp"
#include "pasa/study/sweep_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const pasa::SweepBackend backend = pasa::library_backend();
  try {
    const nlohmann::json j = pasa::parse_json_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    const pasa::SweepConfig cfg = pasa::parse_sweep_config(j, "fuzz");
    // Validation visits every grid point (about 10 us each, 10x that under ASan): a config of up to 10^6
    // cases is legitimate but would only report slowness, so the large ones stop at the parse.
    if (cfg.case_count() <= 2000) pasa::validate_with_backend(cfg, backend);
  } catch (const pasa::InputError&) {
  }
  return 0;
}
