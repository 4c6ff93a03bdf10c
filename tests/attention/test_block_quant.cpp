// Block-scale schemes on Q, K, V and P (QuantOptions::q_block ... p_block) in every algorithm: a block-scaled
// operand is its elements times their scales (numeric/block_scale.hpp, tested against MPFR and microxcaling
// there), so a run with a scheme on Q, K, V equals the run without one on inputs that are those values; P's
// scheme against a direct computation of one tile; the JSON names every field's path.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/normal_distribution.hpp>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/quantise.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "reference/reference_attention.hpp"
#include "support/bits.hpp"

using namespace pasa;

namespace {

Tensor normal_tensor(Shape sh, double sigma, std::uint64_t seed) {
  Tensor t(sh, format_by_name("fp32"));
  boost::random::mt19937_64 eng(seed);
  boost::random::normal_distribution<double> n01(0.0, 1.0);
  for (double& x : t.data) x = round(sigma * n01(eng), format_by_name("fp16"));
  return t;
}

AttentionInputs inputs(std::size_t Sq, std::size_t Skv, std::size_t D, std::uint64_t seed) {
  AttentionInputs in;
  in.q = normal_tensor({1, 2, Sq, D}, 2.0, seed);
  in.k = normal_tensor({1, 2, Skv, D}, 2.0, seed + 1);
  in.v = normal_tensor({1, 2, Skv, D}, 1.0, seed + 2);
  return in;
}

// t's values block-quantised as the engine does it (Q, K along D; V along the keys), held in fp64 (INT8
// elements times fp32 scales have up to 31 bits).
Tensor quantised(const Tensor& t, const BlockScheme& s, bool operand_b, bool along_rows) {
  Tensor r = t;
  RandomBits rng(0);
  block_quantise_heads(r.data.data(), t.shape.B * t.shape.N, t.shape.S, t.shape.D, s, operand_b, along_rows, &rng);
  r.format = format_by_name("fp64");
  return r;
}

}  // namespace

TEST_CASE("a scheme on Q, K and V is the run on its elements times scales, in every algorithm", "[block_quant]") {
  const AttentionInputs in = inputs(70, 150, 64, 3);
  for (const char* scheme : {"mxfp8_e4m3", "mxfp8_e5m2", "int8_per_warp", "int8_per_thread", "mxint8"}) {
    const BlockScheme s = block_scheme_by_name(scheme);
    AttentionInputs pre = in;
    pre.q = quantised(in.q, s, false, false);
    pre.k = quantised(in.k, s, true, false);
    pre.v = quantised(in.v, s, true, true);
    for (const std::string& name : algorithm_names()) {
      AlgorithmSpec spec;
      spec.name = name;
      spec.alloc = allocation_preset("fa_fp32");
      spec.s1 = 32;
      spec.s2 = 64;
      spec.fdpp.phi = 4;
      // (the plain run takes the quantised values as they are: its q, k, v stages in fp64)
      AlgorithmSpec plain_spec = spec;
      for (Stage st : {Stage::q, Stage::k, Stage::v}) plain_spec.alloc.spec(st).format = format_by_name("fp64");
      const AttentionOutput plain = run_attention(pre, plain_spec, 2);
      spec.quant.q_block = spec.quant.k_block = spec.quant.v_block = s;
      const AttentionOutput blocked = run_attention(in, spec, 2);
      INFO(scheme << " with " << name);
      CHECK(blocked.o.data == plain.o.data);
      CHECK(blocked.lse == plain.lse);
    }
  }
}

TEST_CASE("a scheme on P quantises each tile's rows along the keys after the p stage", "[block_quant]") {
  // One tile of keys (s2 >= Skv) in fp64: O = Q(P)·V / l with P = e^{s - m}, l = sum P (the row sum is taken
  // before P's rounding, as the engines take it), Q(P) P's block-quantised values.
  const AttentionInputs in = inputs(9, 96, 16, 5);
  const BlockScheme s = block_scheme_by_name("mxfp8_e4m3");
  AlgorithmSpec spec;
  spec.name = "fa2";
  spec.alloc = allocation_preset("fp64");
  spec.s1 = 16;
  spec.s2 = 128;
  spec.quant.p_block = s;
  const AttentionOutput out = run_attention(in, spec, 1);
  const double scale = 1 / std::sqrt(16.0);
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t i = 0; i < 9; ++i) {
      std::vector<double> p(96);
      double m = -INFINITY, l = 0;
      for (std::size_t j = 0; j < 96; ++j) {
        double d = 0;
        for (std::size_t c = 0; c < 16; ++c) d += in.q.head(0, h)[i * 16 + c] * in.k.head(0, h)[j * 16 + c];
        p[j] = d * scale;
        m = std::max(m, p[j]);
      }
      for (double& x : p) l += (x = std::exp(x - m));
      const BlockQuantised q = block_quantise(p.data(), 1, 1, 96, s);
      for (std::size_t c = 0; c < 16; ++c) {
        double o = 0;
        for (std::size_t j = 0; j < 96; ++j) o += q.values[j] * in.v.head(0, h)[j * 16 + c];
        CHECK(out.o.head(0, h)[i * 16 + c] == Approx(o / l).epsilon(1e-12).margin(1e-300));
      }
    }
}

TEST_CASE("block schemes in JSON: names, overrides, the round trip, and errors at their path", "[block_quant]") {
  const nlohmann::json j = nlohmann::json::parse(R"({"name": "fa1", "quant": {"q": "mxfp8_e4m3",
      "k": {"scheme": "int8_per_thread", "scale_rule": "floor", "round": "rne"}, "p": {"scheme": "mxfp8_e5m2", "cols": 16}}})");
  const AlgorithmSpec s = algorithm_from_json(j, "");
  REQUIRE(s.quant.q_block);
  CHECK(s.quant.q_block->name == "mxfp8_e4m3");
  CHECK(s.quant.k_block->rule == ScaleRule::floor);
  CHECK(s.quant.k_block->round == RoundMode::nearest_even);
  CHECK(s.quant.p_block->a.cols == 16);
  CHECK_FALSE(s.quant.v_block);
  CHECK(algorithm_from_json(to_json(s), "") == s);
  auto fails = [](const char* text) {
    try {
      algorithm_from_json(nlohmann::json::parse(text), "/algorithms/0");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(fails(R"({"name": "fa2", "quant": {"k": {"scheme": "int8_per_thread", "scale_rule": "flor"}}})"),
             Catch::Contains("/algorithms/0/quant/k/scale_rule") && Catch::Contains("rceil"));
  CHECK_THAT(fails(R"({"name": "fa2", "quant": {"v": "mxfp9"}})"), Catch::Contains("/algorithms/0/quant/v") && Catch::Contains("mxfp4"));
  CHECK_THAT(fails(R"({"name": "fa2", "quant": {"q": {"scheme": "mxfp8_e4m3", "scale_format": "e9"}}})"),
             Catch::Contains("/algorithms/0/quant/q/scale_format"));
  CHECK_THAT(fails(R"({"name": "fa2", "quant": {"q": {"scheme": "mxfp8_e4m3", "colz": 3}}})"),
             Catch::Contains("/algorithms/0/quant/q/colz") && Catch::Contains("cols"));
  CHECK_THAT(fails(R"({"name": "fa2", "quant": {"scales": "block", "q": "mxfp8_e4m3"}})"), Catch::Contains("/quant/scales"));
  CHECK_THAT(fails(R"({"name": "fa1", "quant": {"scales": "block"}})"), Catch::Contains("/algorithms/0/quant"));
}

TEST_CASE("schemes on Q, K, V and P equal the reference emulator's restatement, bit for bit", "[block_quant]") {
  const AttentionInputs in = inputs(20, 75, 32, 9);
  for (const char* alloc : {"fa_fp16_fp32", "pasa_fp16", "fa_bf16"})
    for (const char* name : {"safe_softmax", "online_softmax", "fa1", "fa2", "pasa", "smooth_k"}) {
      AlgorithmSpec spec;
      spec.name = name;
      spec.alloc = allocation_preset(alloc);
      spec.s1 = 8;
      spec.s2 = 32;
      spec.quant.q_block = block_scheme_by_name("int8_per_thread");
      spec.quant.k_block = block_scheme_by_name("mxfp8_e4m3");
      spec.quant.v_block = block_scheme_by_name("fp8_per_token_head");
      BlockScheme p = block_scheme_by_name("mxfp8_e5m2");
      p.a.cols = 16;
      p.rule = ScaleRule::rceil;
      spec.quant.p_block = p;
      INFO(name << " under " << alloc);
      CHECK(test::first_difference(run_attention(in, spec, 2), reference::reference_attention(in, spec)) == "");
    }
}
