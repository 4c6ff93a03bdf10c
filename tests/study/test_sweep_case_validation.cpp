// Sweep validation checks every (grid point, algorithm) pair as the run will (validate_case), so that a
// sweep never fails part-way for a reason known up front, and --resume never fails the same way forever
//. Each mistake is refused before the output folder exists, naming the file, the JSON
// path and the grid point.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "pasa/core/error.hpp"
#include "pasa/study/sweep.hpp"
#include "pasa/study/sweep_config.hpp"

using namespace pasa;
using nlohmann::json;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// Refused by validation and by run_sweep, which creates nothing.
void refused(const json& config, const std::string& what1, const std::string& what2) {
  const SweepConfig cfg = parse_sweep_config(config, "cfg.json");
  CHECK_THROWS_WITH(validate_with_backend(cfg, library_backend()), Contains(what1) && Contains(what2));
  const fs::path dir = fs::temp_directory_path() / ("pasa-test-sweep-case-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  SweepOptions opt;
  opt.out_dir = dir;
  CHECK_THROWS_AS(run_sweep(cfg, library_backend(), opt), InputError);
  CHECK(!fs::exists(dir));
}

}  // namespace

TEST_CASE("sweep validation: a Hadamard transform over a grid of head dimensions", "[sweep]") {
  const json c = json::parse(R"({
    "problem": {"shape": {"Sq": 8, "D": "$D"}, "seed": "$seed"},
    "grid": {"D": [8, 12]},
    "algorithms": [{"name": "fa2", "alloc": "fa_fp32"},
                   {"name": "fa2", "alloc": "fa_fp8", "quant": {"scales": "tensor", "hadamard": true}}]})");
  refused(c, "cfg.json:/algorithms/1/quant/hadamard", "(grid point D=12)");
}

TEST_CASE("sweep validation: a generator parameter that would give NaN inputs", "[sweep]") {
  const json c = json::parse(R"({
    "problem": {"shape": {"Sq": 8, "D": 8}, "seed": "$seed", "generator": {"kind": "resonance", "wavelength": "$w"}},
    "grid": {"w": [8, 1e-320]},
    "algorithms": [{"name": "fa2", "alloc": "fa_fp32"}]})");
  refused(c, "cfg.json:/problem/generator/wavelength", "(grid point w=");
}

TEST_CASE("sweep validation: tensor-core GEMMs over a grid of stage formats", "[sweep]") {
  const json c = json::parse(R"({
    "problem": {"shape": {"Sq": 8, "D": 8}, "seed": "$seed"},
    "grid": {"f": ["fp16", "fp32", "fp64"]},
    "algorithms": [{"name": "fa2", "alloc": {"preset": "fa_fp32_h100", "stages": {"p": "$f"}}}]})");
  refused(c, "cfg.json:/algorithms/0/alloc", "(grid point f=\"fp64\")");
  // The grid without fp64 passes, and runs.
  json ok = c;
  ok["grid"]["f"] = {"fp16", "fp32"};
  CHECK_NOTHROW(validate_with_backend(parse_sweep_config(ok, "cfg.json"), library_backend()));
}
