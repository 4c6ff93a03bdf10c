// Capture folders (io/capture_folder.hpp, issue 26): a model's Q, K, V read as a problem ({"capture": ...}),
// by layer and head with GQA kept, the index checked before the data, and every algorithm in fp64 equal to
// the golden on a captured problem.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/allocation.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/capture_folder.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"
#include "pasa/study/sweep_config.hpp"
#include "../support/rel_rmse.hpp"

using namespace pasa;
namespace fs = std::filesystem;

namespace {

// Deterministic float32 values (as a model's would be): a simple LCG, spread over [-3, 3].
std::vector<double> values(std::size_t n, std::uint64_t seed) {
  std::vector<double> v(n);
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (double& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>((static_cast<double>(s >> 11) * 0x1p-53 - 0.5) * 6.0);
  }
  return v;
}

struct Layer {
  std::size_t B = 1, Nq = 4, Nkv = 2, S = 12, D = 8;
  std::vector<double> q, k, v;
};

// A folder as pasa_capture writes it: layer 0 float32 (GQA 4 on 2, causal), layer 1 float16 (2 on 2).
fs::path write_capture(const std::string& name, std::vector<Layer>& layers) {
  const fs::path d = fs::temp_directory_path() / ("pasa_capture_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  layers.assign(2, Layer{});
  layers[1].Nq = 2;
  layers[1].B = 2;  // heads are read batch by batch
  nlohmann::json idx = {{"pasa_capture", 1}, {"model", "test model"}, {"layers", nlohmann::json::array()}};
  for (std::size_t i = 0; i < 2; ++i) {
    Layer& l = layers[i];
    const NpyDtype dt = i == 0 ? NpyDtype::f32 : NpyDtype::f16;
    l.q = values(l.B * l.Nq * l.S * l.D, 10 * i + 1);
    l.k = values(l.B * l.Nkv * l.S * l.D, 10 * i + 2);
    l.v = values(l.B * l.Nkv * l.S * l.D, 10 * i + 3);
    if (dt == NpyDtype::f16)
      for (auto* t : {&l.q, &l.k, &l.v}) round_span(*t, *t, format_by_name("fp16"));
    const std::string p = "layer00" + std::to_string(i);
    write_npy(d / (p + "_q.npy"), make_npy(l.q, {l.B, l.Nq, l.S, l.D}, dt));
    write_npy(d / (p + "_k.npy"), make_npy(l.k, {l.B, l.Nkv, l.S, l.D}, dt));
    write_npy(d / (p + "_v.npy"), make_npy(l.v, {l.B, l.Nkv, l.S, l.D}, dt));
    idx["layers"].push_back({{"name", "blocks." + std::to_string(i) + ".attn"},
                             {"q", p + "_q.npy"}, {"k", p + "_k.npy"}, {"v", p + "_v.npy"},
                             {"dtype", i == 0 ? "float32" : "float16"},
                             {"shape", {{"B", l.B}, {"Nq", l.Nq}, {"Nkv", l.Nkv}, {"Sq", l.S}, {"Skv", l.S}, {"D", l.D}}},
                             {"scale", i == 0 ? 0.25 : 0.3}, {"causal", i == 0}});
  }
  std::ofstream(d / "index.json") << idx.dump(1);
  return d;
}

void rewrite_index(const fs::path& d, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(std::ifstream(d / "index.json"));
  edit(j);
  std::ofstream(d / "index.json") << j.dump(1);
}

// Head h of every batch of a (B, N, S, D) array, as a (B, 1, S, D) array.
std::vector<double> head_of(const std::vector<double>& a, std::size_t N, std::size_t S, std::size_t D, std::size_t h) {
  std::vector<double> r;
  for (std::size_t b = 0; b * N * S * D < a.size(); ++b)
    r.insert(r.end(), a.begin() + (b * N + h) * S * D, a.begin() + (b * N + h + 1) * S * D);
  return r;
}

}  // namespace

TEST_CASE("Capture folder: a layer and head as a problem, GQA kept, scale and causal from the index", "[capture]") {
  std::vector<Layer> ls;
  const fs::path d = write_capture("read", ls);
  const fs::path base = d.parent_path();
  using nlohmann::json;
  // Query head 3 of layer 0 reads KV head 3 / 2 = 1.
  ProblemSpec p = problem_from_json(json::parse(R"({"capture": {"dir": "read", "layer": 0, "head": 3}})"), "x.json:", base);
  CHECK((p.B == 1 && p.Nq == 1 && p.Nkv == 1 && p.Sq == 12 && p.Skv == 12 && p.D == 8));
  CHECK(p.scale == 0.25);
  CHECK(p.causal);
  CHECK(p.format == "fp32");
  const Layer& l = ls[0];
  AttentionInputs in = generate_inputs(p);
  CHECK(in.q.data == head_of(l.q, 4, 12, 8, 3));
  CHECK(in.k.data == head_of(l.k, 2, 12, 8, 1));
  CHECK(in.v.data == head_of(l.v, 2, 12, 8, 1));
  CHECK(in.mask.causal);
  CHECK(in.scale == 0.25);
  // Head 1 reads KV head 0.
  p = problem_from_json(json::parse(R"({"capture": {"dir": "read", "layer": 0, "head": 1}})"), "x.json:", base);
  CHECK(generate_inputs(p).k.data == head_of(l.k, 2, 12, 8, 0));
  // kv_head 1: query heads 2 and 3 on one KV head.
  p = problem_from_json(json::parse(R"({"capture": {"dir": "read", "layer": 0, "kv_head": 1}})"), "x.json:", base);
  CHECK((p.Nq == 2 && p.Nkv == 1));
  in = generate_inputs(p);
  std::vector<double> q23 = head_of(l.q, 4, 12, 8, 2), q3 = head_of(l.q, 4, 12, 8, 3);
  q23.insert(q23.end(), q3.begin(), q3.end());
  CHECK(in.q.data == q23);
  CHECK(in.k.data == head_of(l.k, 2, 12, 8, 1));
  // The whole layer; format given: values rounded to fp16 (nearest even).
  p = problem_from_json(json::parse(R"({"capture": {"dir": "read", "layer": 0}, "format": "fp16", "seed": 3})"), "x.json:", base);
  CHECK((p.Nq == 4 && p.Nkv == 2 && p.format == "fp16"));
  in = generate_inputs(p);
  std::vector<double> q16 = l.q;
  round_span(q16, q16, format_by_name("fp16"));
  CHECK(in.q.data == q16);
  CHECK(in.q.data != l.q);  // the float32 values are not all fp16 values
  // Layer 1: float16, not causal, its own scale; to_json reads back to the same problem.
  p = problem_from_json(json::parse(R"({"capture": {"dir": "read", "layer": 1, "head": 0}})"), "x.json:", base);
  CHECK((p.format == "fp16" && !p.causal && p.scale == 0.3 && p.B == 2));
  const ProblemSpec back = problem_from_json(to_json(p), "back:");
  CHECK(generate_inputs(back).q.data == head_of(ls[1].q, 2, 12, 8, 0));
  CHECK(to_json(back) == to_json(p));
  CHECK(generate_inputs(back).v.data == head_of(ls[1].v, 2, 12, 8, 0));
  p = problem_from_json(json::parse(R"({"capture": {"dir": "read", "layer": 1, "head": 1}})"), "x.json:", base);
  in = generate_inputs(p);
  CHECK((in.q.shape == Shape{2, 1, 12, 8} && in.q.data == head_of(ls[1].q, 2, 12, 8, 1)));
  CHECK(in.k.data == head_of(ls[1].k, 2, 12, 8, 1));
}

TEST_CASE("Capture folder: a sweep config's relative dir is its folder's, layer and head as grid axes", "[capture]") {
  std::vector<Layer> ls;
  const fs::path d = write_capture("sweep", ls);
  std::ofstream(d.parent_path() / "cfg.json") << R"({"problem": {"capture": {"dir": "sweep", "layer": "$layer",
    "head": "$head"}, "seed": "$seed"}, "grid": {"layer": [0, 1], "head": [1]}, "seeds": [0],
    "algorithms": [{"name": "fa2", "alloc": "fp64"}]})";
  const SweepConfig cfg = load_sweep_config(d.parent_path() / "cfg.json");
  CHECK(cfg.problem["capture"]["dir"] == d.lexically_normal().string());
  const PlannedProblem pp = plan_problem(cfg, 1);  // layer 1, head 1
  const ProblemSpec p = problem_from_json(pp.problem, "/problem");
  CHECK((p.capture.layer == 1 && p.capture.head == std::optional<std::size_t>(1) && p.format == "fp16"));
  CHECK(generate_inputs(p).q.data == head_of(ls[1].q, 2, 12, 8, 1));
}

TEST_CASE("Capture folder: errors name the file, the JSON path and the value", "[capture]") {
  std::vector<Layer> ls;
  const fs::path d = write_capture("errors", ls);
  const fs::path base = d.parent_path();
  using nlohmann::json;
  auto err = [&](const std::string& text) {
    try {
      (void)problem_from_json(json::parse(text), "x.json:", base);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layer": 2}})"),
             Catch::Contains("x.json:/capture/layer") && Catch::Contains("holds layers 0 to 1"));
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layer": 0, "head": 4}})"),
             Catch::Contains("x.json:/capture/head") && Catch::Contains("Nq = 4"));
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layer": 0, "kv_head": 2}})"),
             Catch::Contains("x.json:/capture/kv_head") && Catch::Contains("Nkv = 2"));
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layer": 0, "head": 0, "kv_head": 0}})"), Catch::Contains("not both"));
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layer": 0}, "shape": {"D": 8}})"),
             Catch::Contains("x.json:/shape") && Catch::Contains("capture gives"));
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layer": 0}, "scale": 1})"), Catch::Contains("x.json:/scale"));
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layr": 0}})"), Catch::Contains("did you mean 'layer'"));
  CHECK_THAT(err(R"({"capture": {"dir": "nowhere", "layer": 0}})"),
             Catch::Contains("x.json:/capture/dir") && Catch::Contains("no such capture folder"));
  // The index is checked before any data are read: a shape that disagrees with the .npy header.
  rewrite_index(d, [](nlohmann::json& j) { j["layers"][1]["shape"]["D"] = 16; });
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layer": 0}})"),
             Catch::Contains("/layers/1") && Catch::Contains("layer001_q.npy") && Catch::Contains("differs from the index"));
  rewrite_index(d, [](nlohmann::json& j) { j["layers"][1]["shape"]["D"] = 8; j["layers"][0]["scale"] = -1; });
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layer": 1}})"),
             Catch::Contains("index.json:/layers/0/scale") && Catch::Contains("> 0"));
  rewrite_index(d, [](nlohmann::json& j) { j["layers"][0]["scale"] = 0.25; j["layers"][0]["q"] = "../x.npy"; });
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layer": 1}})"), Catch::Contains("/layers/0/q") && Catch::Contains("inside"));
  rewrite_index(d, [](nlohmann::json& j) { j["layers"][0]["q"] = "layer000_q.npy"; j["layers"][0]["dtype"] = "int8"; });
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layer": 1}})"), Catch::Contains("/layers/0/dtype"));
  rewrite_index(d, [](nlohmann::json& j) { j["layers"][0]["dtype"] = "float32"; j["layers"][0]["shape"]["Nkv"] = 3; });
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layer": 1}})"), Catch::Contains("not a multiple of Nkv = 3"));
  rewrite_index(d, [](nlohmann::json& j) { j["layers"][0]["shape"]["Nkv"] = 2; j["pasa_capture"] = 2; });
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layer": 1}})"), Catch::Contains("version 2 unknown"));
  rewrite_index(d, [](nlohmann::json& j) { j["pasa_capture"] = 1; });
  CHECK(err(R"({"capture": {"dir": "errors", "layer": 1}})") == "no error");
  // A non-finite value in the data.
  std::vector<double> bad = ls[0].q;
  bad[5] = std::nan("");
  write_npy(d / "layer000_q.npy", make_npy(bad, {1, 4, 12, 8}, NpyDtype::f32));
  CHECK_THAT(err(R"({"capture": {"dir": "errors", "layer": 0}})"),
             Catch::Contains("layer000_q.npy") && Catch::Contains("(b=0, head=0, s=0, d=5)"));
}

TEST_CASE("every algorithm in fp64 equals the MPFR golden on a captured problem", "[capture][algorithms]") {
  std::vector<Layer> ls;
  const fs::path d = write_capture("golden", ls);
  for (const char* sel : {R"("layer": 0)", R"("layer": 0, "head": 2)", R"("layer": 1, "kv_head": 1)"}) {
    const ProblemSpec p = problem_from_json(
        nlohmann::json::parse(std::string(R"({"format": "fp64", "capture": {"dir": ")") + d.string() + "\", " + sel + "}}"),
        "x.json:");
    const AttentionInputs in = generate_inputs(p);
    const Golden gold = golden_attention(in);
    for (const auto& name : algorithm_names()) {
      AlgorithmSpec spec;
      spec.name = name;
      spec.alloc = allocation_preset("fp64");
      spec.s1 = 8;  // blocks smaller than S = 12: tails and several blocks
      spec.s2 = 5;
      const AttentionOutput out = run_attention(in, spec, 2);
      const double e = test::rel_rmse(out.o, gold.o);
      INFO(sel << " " << name << " rmse " << e);
      CHECK(e <= 1e-13);
    }
  }
}
