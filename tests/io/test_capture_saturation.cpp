// A capture read in a narrower format than its own saturates to that format, as the generators
// store their draws: a float32 model value beyond fp16's range (an outlier activation of 1e5) becomes
// ±65504, not inf, so the problem runs. The reference is pasa's own rounding with Overflow::saturate.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "pasa/inputs/generators.hpp"
#include "pasa/io/capture_folder.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"
#include "support/temp_dirs.hpp"

using namespace pasa;
namespace fs = std::filesystem;

TEST_CASE("capture folder: float32 values beyond the asked format saturate to it", "[capture]") {
  const std::size_t S = 4, D = 4;
  // Q holds values beyond fp16's largest finite 65504 (65520 is where round-to-nearest goes to inf).
  std::vector<double> q(S * D), k(S * D), v(S * D);
  for (std::size_t i = 0; i < q.size(); ++i) {
    q[i] = static_cast<float>(0.25 * static_cast<double>(i) - 1.5);
    k[i] = static_cast<float>(0.125 * static_cast<double>(i % 7) - 0.5);
    v[i] = static_cast<float>(0.5 - 0.0625 * static_cast<double>(i));
  }
  q[1] = 1e5, q[6] = -1e5, q[9] = 65520, q[12] = 70000.5f;
  const fs::path base = test::fresh_dir("capture-saturation"), d = base / "cap";
  fs::create_directories(d);
  write_npy(d / "q.npy", make_npy(q, {1, 1, S, D}, NpyDtype::f32));
  write_npy(d / "k.npy", make_npy(k, {1, 1, S, D}, NpyDtype::f32));
  write_npy(d / "v.npy", make_npy(v, {1, 1, S, D}, NpyDtype::f32));
  const nlohmann::json idx = {
      {"pasa_capture", 1}, {"model", "outliers"},
      {"layers", {{{"name", "l0"}, {"q", "q.npy"}, {"k", "k.npy"}, {"v", "v.npy"}, {"dtype", "float32"},
                   {"shape", {{"B", 1}, {"Nq", 1}, {"Nkv", 1}, {"Sq", S}, {"Skv", S}, {"D", D}}},
                   {"scale", 0.5}, {"causal", false}}}}};
  std::ofstream(d / "index.json") << idx.dump(1);

  RoundOptions sat;
  sat.overflow = Overflow::saturate;
  for (const char* name : {"fp16", "fp8_e4m3", "bf16"}) {
    INFO(name);
    const Format f = format_by_name(name);
    std::vector<double> want(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) want[i] = round(q[i], f, sat);
    const CapturedQKV c = load_capture(read_capture_index(d, ""), CaptureSelection{}, name, "");
    CHECK(c.q.data == want);
    for (double x : c.q.data) CHECK(std::isfinite(x));
    // The same through a problem ({"capture": ...} with a format), which then runs.
    const ProblemSpec p = problem_from_json(
        nlohmann::json::parse(std::string(R"({"capture": {"dir": "cap", "layer": 0}, "format": ")") + name + "\"}"),
        "x.json:", base);
    AttentionInputs in;
    REQUIRE_NOTHROW(in = generate_inputs(p));
    CHECK(in.q.data == want);
  }
  // In fp16 the outliers are ±65504.
  const CapturedQKV c = load_capture(read_capture_index(d, ""), CaptureSelection{}, "fp16", "");
  CHECK(c.q.data[1] == 65504);
  CHECK(c.q.data[6] == -65504);
  CHECK(c.q.data[9] == 65504);
}
