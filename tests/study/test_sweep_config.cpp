// Sweep configs (study/sweep_config): validation with JSON paths and "did you mean", grid expansion and
// placeholder substitution.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/study/sweep_config.hpp"

using namespace pasa;
using nlohmann::json;

namespace {

json base_config() {
  return json::parse(R"({
    "name": "fake",
    "problem": {"x0": "$x0", "am": "$Am", "seed": "$seed"},
    "grid": {"x0": [1, 2, 3], "Am": {"from": 0.5, "to": 1.0, "step": 0.25}},
    "seeds": [7, 8],
    "algorithms": [{"label": "A", "k": 1}, {"label": "B", "k": 2, "beta": 0.5}]
  })");
}

std::string error_of(const json& config) {
  try {
    parse_sweep_config(config, "cfg.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("sweep config: unknown keys are named with a did-you-mean", "[sweep]") {
  json c = base_config();
  c["algoritms"] = c["algorithms"];
  c.erase("algorithms");
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/algoritms: unknown key 'algoritms' (did you mean 'algorithms'?)"));
  c = base_config();
  c["golden"] = {{"precison_bits", 128}};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/golden/precison_bits: unknown key 'precison_bits' (did you mean 'precision_bits'?)"));
  c = base_config();
  c["grid"]["x0"] = {{"from", 0}, {"too", 1}, {"step", 1}};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/grid/x0/too: unknown key 'too' (did you mean 'to'?)"));
}

TEST_CASE("sweep config: wrong types are named with their JSON path", "[sweep]") {
  json c = base_config();
  c["seeds"] = "7";
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/seeds: expected a list of seeds, got string \"7\""));
  c = base_config();
  c["seeds"] = {7, 1.5};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/seeds/1: expected a non-negative integer, got number 1.5"));
  c = base_config();
  c["algorithms"][1]["label"] = 3;
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/algorithms/1/label: expected a string"));
  c = base_config();
  c["grid"]["Am"] = {{"from", "a"}, {"to", 1}, {"step", 1}};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/grid/Am/from: expected a number, got string \"a\""));
  c = base_config();
  c["grid"]["x0"] = {1, {{"a", 1}}};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/grid/x0/1: grid values must be numbers, strings or booleans"));
  c = base_config();
  c["problem"] = json::array();
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/problem: expected an object"));
  CHECK_THAT(error_of(json::array()), Catch::StartsWith("cfg.json:/: expected an object"));
}

TEST_CASE("sweep config: impossible values are refused", "[sweep]") {
  json c = base_config();
  c["seeds"] = {7, -1};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/seeds/1: expected a non-negative integer, got integer -1"));
  c = base_config();
  c["seeds"] = {7, 7};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/seeds/1: seed 7 appears twice"));
  c = base_config();
  c["grid"]["Am"]["step"] = 0;
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/grid/Am/step: 0 must be > 0"));
  c = base_config();
  c["grid"]["Am"]["to"] = 0.1;
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/grid/Am/to: 0.1 is below \"from\""));
  c = base_config();
  c["grid"]["x0"] = json::array();
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/grid/x0: the list of values is empty"));
  c = base_config();
  c.erase("seeds");
  c["repeats"] = 0;
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/repeats: 0 must be between 1 and 1000000"));
  c = base_config();
  c["golden"] = {{"precision_bits", 24}};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/golden/precision_bits: 24 is outside [106, 4096]"));
  c = base_config();
  c["score_format"] = "fp17";
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/score_format: ") && Catch::Contains("fp16"));
  c = base_config();
  c["algorithms"] = json::array();
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/algorithms: the list of algorithms is empty"));
  c = base_config();
  c["algorithms"][1]["label"] = "A";
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/algorithms/1/label: label \"A\" is used twice"));
  c = base_config();
  c["outputs"] = {{"csv", "../x.csv"}};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/outputs/csv: \"../x.csv\" must be a plain file name"));
}

TEST_CASE("sweep config: placeholders must match grid axes", "[sweep]") {
  json c = base_config();
  c["problem"]["x0"] = "$x1";
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/problem/x0: placeholder \"$x1\" has no grid axis (did you mean \"x0\"?)"));
  c = base_config();
  c["grid"]["p"] = {0.001};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/grid/p: axis is not used: no \"$p\""));
  c = base_config();
  c["problem"]["seed"] = 1;
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/problem: no \"$seed\" placeholder"));
  c = base_config();
  c["grid"]["seed"] = {1};
  CHECK_THAT(error_of(c), Catch::StartsWith("cfg.json:/grid/seed: \"seed\" is not a grid axis"));
}

TEST_CASE("sweep grid: ranges order and substitution", "[sweep]") {
  json c = base_config();
  c["grid"]["Am"] = {{"from", 0}, {"to", 0.3}, {"step", 0.1}};
  const SweepConfig cfg = parse_sweep_config(c, "cfg.json");
  REQUIRE(cfg.grid.size() == 2);
  CHECK(cfg.grid[0].name == "Am");  // axes in name order; the last one (x0) varies fastest
  CHECK(cfg.grid[0].values == std::vector<json>{0, 0.1, 0.2, 0.3});
  CHECK(cfg.grid_points() == 12);
  CHECK(cfg.case_count() == 12 * 2 * 2);
  const PlannedProblem p = plan_problem(cfg, 2 * 3 + 1);  // grid point 3 (Am = 0.1, x0 = 1), second seed
  CHECK(p.grid_index == 3);
  CHECK(p.seed == 8);
  CHECK(p.problem == json::parse(R"({"x0": 1, "am": 0.1, "seed": 8})"));
  CHECK(p.algorithms[1] == json::parse(R"({"k": 2, "beta": 0.5})"));  // the label is not passed on
  CHECK(describe(cfg, p) == "Am=0.1, x0=1, seed=8");
  c.erase("seeds");
  c["repeats"] = 3;
  CHECK(parse_sweep_config(c, "cfg.json").seeds == std::vector<std::uint64_t>{1, 2, 3});
}
