// Sweep configurations: what pasa-sweep runs. A config is a JSON object (schema in README "pasa-sweep"):
// a problem template (ProblemSpec JSON) and algorithm templates (AlgorithmSpec JSON) in which
// string values "$name" are placeholders, a grid giving each placeholder its values, the seeds ("$seed"),
// the golden's precision and the output names. Every case is grid point × seed × algorithm.
//
// Parsing validates everything that can be checked without the library (keys with "did you mean", types,
// ranges, placeholders); validate_with_library() in sweep.hpp then checks every expanded problem and
// algorithm with the library's parsers. Errors read "<source>:<JSON path>: <what>" (json_check.hpp) and nothing runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pasa {

// The largest sweep parse_sweep_config accepts (grid points x seeds x algorithms): the runner keeps every
// row in memory (about 2-4 KB each) and validates every grid point before running; 10^6 cases is weeks of
// computing at the paper's shape.
inline constexpr std::size_t kMaxSweepCases = 1000000;
// The lock file in an output folder (held with flock by the run writing into it).
inline constexpr const char* kSweepLockName = ".pasa-sweep.lock";

struct GridAxis {
  std::string name;                     // placeholder "$name" and CSV column `name`
  std::vector<nlohmann::json> values;   // scalars (numbers, strings, booleans), in sweep order
};

struct AlgorithmEntry {
  std::string label;      // CSV column `algorithm`, e.g. "PASA-FP16"
  nlohmann::json spec;    // AlgorithmSpec JSON with placeholders; "label" removed
};

struct SweepConfig {
  std::string source;                    // file name (or "<built-in default>") for error messages
  std::string name = "sweep";
  nlohmann::json problem;                // template for problem_from_json
  std::vector<GridAxis> grid;            // axes in name order; the last axis varies fastest
  std::vector<std::uint64_t> seeds;
  std::vector<AlgorithmEntry> algorithms;
  int golden_precision_bits = 128;
  std::string score_format = "fp16";     // scores counted as overflowing when |scale·q·k| > its max
  std::string out_dir;                   // outputs.dir (default "sweep-out/<name>"); --out overrides
  std::string csv_name = "results.csv";
  std::string summary_name = "summary.json";
  nlohmann::json raw;                    // the config as written, recorded in the summary

  std::size_t grid_points() const;  // saturating at kTooLarge (core/memory.hpp)
  std::size_t problem_count() const { return grid_points() * seeds.size(); }  // golden computations
  std::size_t case_count() const { return problem_count() * algorithms.size(); }  // CSV rows
};

SweepConfig parse_sweep_config(const nlohmann::json& config, const std::string& source);
SweepConfig load_sweep_config(const std::filesystem::path& file);  // also reports JSON syntax errors
// Built-in default (pasa-sweep without a config): uniform inputs at x0 = 20 and 30, the headline that
// FA-FP16/FP32 overflows to NaN where PASA-FP16 does not, in about a minute on 2 cores.
SweepConfig default_sweep_config();
std::string default_sweep_config_text();

// One (grid point, seed): the golden is computed once for it and shared by all algorithms.
struct PlannedProblem {
  std::size_t index = 0;        // grid_index * seeds + seed_index; case id = index * algorithms + a
  std::size_t grid_index = 0, seed_index = 0;
  std::uint64_t seed = 0;
  std::vector<nlohmann::json> grid_values;  // one per axis
  nlohmann::json problem;                   // placeholders substituted
  std::vector<nlohmann::json> algorithms;   // placeholders substituted
};
PlannedProblem plan_problem(const SweepConfig&, std::size_t index);

// "x0=20, Am=0.5, seed=1" for messages.
std::string describe(const SweepConfig&, const PlannedProblem&);

}  // namespace pasa
