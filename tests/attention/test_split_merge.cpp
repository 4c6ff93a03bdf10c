// Split-KV merge models (docs/decode.md): normalised_lse (each
// part's O_t/l_t stored in the partial format and lse_t in the lse format, merged with e^{lse_t − lse}) and
// unnormalised (the parts' accumulators merged as they are). Both equal the golden in fp64 with kv_len,
// causal, select, pse, GQA and empty parts; the normalised model equals the parts run one by one and merged
// by hand in fp32 (an independent composition), and the reference emulator bit for bit.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/random/bernoulli_distribution.hpp>
#include <boost/random/mersenne_twister.hpp>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/io/allocation_json.hpp"
#include "reference/reference_attention.hpp"
#include "support/bits.hpp"
#include "support/attention_cases.hpp"

using namespace pasa;

namespace {

// Decode rows over a padded cache: kv_len per batch, GQA, optional pse and select mask (share sel_p).
AttentionInputs inputs(std::size_t B, std::size_t Nq, std::size_t Nkv, std::size_t Sq, std::size_t Skv,
                       std::size_t D, std::uint64_t seed, bool pse, double sel_p) {
  AttentionInputs in;
  in.q = test::uniform_tensor({B, Nq, Sq, D}, 0, 1, seed * 7 + 1);
  in.k = test::uniform_tensor({B, Nkv, Skv, D}, 0, 1, seed * 7 + 2);
  in.v = test::uniform_tensor({B, Nkv, Skv, D}, 0.5, 1, seed * 7 + 3);
  if (pse) in.pse = test::uniform_tensor({B, Nq, Sq, Skv}, 0, 2, seed * 7 + 4);
  for (std::size_t b = 0; b < B; ++b) in.mask.kv_len.push_back(Skv - (b * 97) % (Skv / 2));
  if (sel_p > 0) {
    boost::random::mt19937_64 eng(seed * 7 + 5);
    boost::random::bernoulli_distribution<double> bern(sel_p);
    in.mask.select.resize(B * Sq * Skv);
    for (auto& x : in.mask.select) x = bern(eng);
  }
  return in;
}

Allocation with_model(Allocation a, MergeModel m) {
  a.spec(Stage::merge).merge.model = m;
  return a;
}

bool all_finite(const AttentionOutput& a) {
  for (double x : a.o.data)
    if (!std::isfinite(x)) return false;
  return true;
}

}  // namespace

TEST_CASE("split merge models: fp64 equals the golden with kv_len, causal, select, pse, GQA and empty parts",
          "[split][merge]") {
  for (int variant = 0; variant < 2; ++variant) {
    AttentionInputs in = inputs(2, 8, 2, 3, 301, 16, 91 + variant, variant == 0, 0.2);
    in.mask.causal = variant == 1;
    // A part whose keys are all selected (scores −1e12, weight e^{−1e12 − lse} = 0), and in every part of
    // batch 1 beyond its kv_len the rows see nothing (lse_t = −∞, no term).
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 32; j < 64; ++j) in.mask.select[i * 301 + j] = 1;
    const Golden g = golden_attention(in);
    for (MergeModel model : {MergeModel::normalised_lse, MergeModel::unnormalised})
      for (const char* name : {"fa2", "smooth_k", "pasa", "fdpp"})
        for (std::size_t splits : {2, 3, 7, 19, 64}) {
          INFO(name << ", model " << merge_model_name(model) << ", splits " << splits << ", variant " << variant);
          AlgorithmSpec s = test::decode_spec(name, with_model(allocation_preset("fp64"), model), 16, splits);
          if (std::string(name) == "fdpp") {  // φ = 0 and a range every score stays inside
            s.fdpp.phi = 0;
            s.fdpp.a = -1e13;
            s.fdpp.b = 700;
          }
          const AttentionOutput a = run_attention(in, s);
          CHECK(all_finite(a));
          CHECK(compare_outputs(a.o, g.o).rmse < 1e-13);
          for (std::size_t r = 0; r < g.lse.size(); ++r) {
            if (std::isinf(g.lse[r])) CHECK(a.lse[r] == g.lse[r]);
            else CHECK(a.lse[r] == Approx(g.lse[r]).epsilon(1e-13));
          }
        }
  }
}

TEST_CASE("normalised_lse merge: the parts run one by one, stored, and merged in fp32 by hand give the same bits",
          "[split][merge]") {
  // 256 keys in 4 parts of 64 (s2 = 32): each part is the unsplit engine on its keys with the partial format
  // as output format (O_t = out(div(O/l)), lse_t = m + log l), then lse_t rounded to fp32 and the combine
  // of FA2's combine kernel in float arithmetic: L = max lse_t, s = Σ e^{lse_t − L}, lse = L + log s,
  // O = Σ e^{lse_t − lse}·O_t, cast to the output format.
  const std::size_t Skv = 256, D = 32, parts = 4, n = Skv / parts;
  AttentionInputs in = inputs(1, 4, 1, 1, Skv, D, 17, false, 0.0);
  in.mask.kv_len.clear();
  for (const char* partial : {"fp16", "fp32"}) {
    Allocation alloc = allocation_preset("fa_fp16_fp32");
    alloc.spec(Stage::merge).merge.partial = format_by_name(partial);
    const AttentionOutput split = run_attention(in, test::decode_spec("fa2", alloc, 32, parts));
    Allocation part_alloc = allocation_preset("fa_fp16_fp32");
    part_alloc.spec(Stage::out).format = format_by_name(partial);
    std::vector<AttentionOutput> outs;
    for (std::size_t t = 0; t < parts; ++t) {
      AttentionInputs pin = in;
      pin.k = Tensor({1, 1, n, D}, in.k.format);
      pin.v = Tensor({1, 1, n, D}, in.v.format);
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t d = 0; d < D; ++d) {
          pin.k.at(0, 0, j, d) = in.k.at(0, 0, t * n + j, d);
          pin.v.at(0, 0, j, d) = in.v.at(0, 0, t * n + j, d);
        }
      pin.scale = in.effective_scale();  // the full problem's 1/sqrt(D)
      outs.push_back(run_attention(pin, test::decode_spec("fa2", part_alloc, 32, 1)));
    }
    for (std::size_t h = 0; h < 4; ++h) {
      INFO("partial " << partial << ", head " << h);
      std::vector<float> lse(parts);
      float L = -INFINITY;
      for (std::size_t t = 0; t < parts; ++t) {
        lse[t] = static_cast<float>(outs[t].lse[h]);
        L = std::max(L, lse[t]);
      }
      float s = 0;
      for (std::size_t t = 0; t < parts; ++t) {
        const float e = static_cast<float>(std::exp(static_cast<double>(lse[t] - L)));
        s = t == 0 ? e : s + e;
      }
      const float total = L + static_cast<float>(std::log(static_cast<double>(s)));
      CHECK(split.lse[h] == static_cast<double>(total));
      std::vector<float> O(D, 0.0f);
      for (std::size_t t = 0; t < parts; ++t) {
        const float w = static_cast<float>(std::exp(static_cast<double>(lse[t] - total)));
        for (std::size_t d = 0; d < D; ++d) {
          const float term = w * static_cast<float>(outs[t].o.at(0, h, 0, d));
          O[d] = t == 0 ? term : O[d] + term;
        }
      }
      std::size_t equal = 0;
      for (std::size_t d = 0; d < D; ++d)
        equal += split.o.at(0, h, 0, d) == round(static_cast<double>(O[d]), format_by_name("fp16"));
      CHECK(equal == D);
    }
  }
}

TEST_CASE("merge models differ where the parts are stored narrow; unnormalised is today's model by name",
          "[split][merge]") {
  const AttentionInputs in = inputs(1, 8, 2, 1, 1024, 64, 23, false, 0.0);
  const Golden g = golden_attention(in);
  const Allocation base = allocation_preset("fa_fp16_fp32");
  const AttentionOutput norm = run_attention(in, test::decode_spec("fa2", base, 64, 16));
  const AttentionOutput unnorm = run_attention(in, test::decode_spec("fa2", with_model(base, MergeModel::unnormalised), 64, 16));
  CHECK(norm.o.data != unnorm.o.data);
  // fp32 partials and lse, fp32 merge: both stay at the unsplit error.
  const double e1 = compare_outputs(run_attention(in, test::decode_spec("fa2", base, 64, 1)).o, g.o).rmse;
  Allocation wide = base;
  wide.spec(Stage::merge).merge.partial = format_by_name("fp32");
  CHECK(compare_outputs(run_attention(in, test::decode_spec("fa2", wide, 64, 16)).o, g.o).rmse < 1.5 * e1);
  CHECK(compare_outputs(unnorm.o, g.o).rmse < 1.5 * e1);
  // The partial format matters: fp8 partials are far worse than fp16 ones.
  Allocation coarse = base;
  coarse.spec(Stage::merge).merge.partial = format_by_name("fp8_e4m3fn");
  CHECK(compare_outputs(run_attention(in, test::decode_spec("fa2", coarse, 64, 16)).o, g.o).rmse > 10 * e1);
  // ... and so does the lse format (bf16: each weight e^{lse_t − lse} off by up to 2^-6 relative; measured
  // 1.9x the unsplit error).
  Allocation lse16 = base;
  lse16.spec(Stage::merge).merge.lse = format_by_name("bf16");
  CHECK(compare_outputs(run_attention(in, test::decode_spec("fa2", lse16, 64, 16)).o, g.o).rmse > 1.5 * e1);
}

TEST_CASE("merge descriptor in JSON: model, partial and lse; errors name the path", "[split][merge][alloc]") {
  const nlohmann::json j = {{"preset", "fa_fp16_fp32"},
                            {"stages", {{"merge", {{"model", "unnormalised"}, {"partial", "fp32"}, {"lse", "bf16"}}}}}};
  const Allocation a = allocation_from_json(j, "/alloc");
  CHECK(a.spec(Stage::merge).merge.model == MergeModel::unnormalised);
  CHECK(a.spec(Stage::merge).partial().name == "fp32");
  CHECK(a.spec(Stage::merge).lse().name == "bf16");
  CHECK(a.spec(Stage::merge).format.name == "fp32");
  CHECK(allocation_from_json(to_json(a), "") == a);
  // A format name changes the arithmetic and keeps the descriptor.
  const Allocation b = allocation_from_json({{"preset", "fa_fp16_fp32"}, {"stages", {{"merge", "fp16"}}}}, "");
  CHECK(b.spec(Stage::merge).format.name == "fp16");
  CHECK(b.spec(Stage::merge).partial().name == "fp16");
  CHECK(b.spec(Stage::merge).lse().name == "fp32");
  // Overriding o moves the merge arithmetic with it and keeps the descriptor.
  const Allocation c = allocation_from_json({{"preset", "fa_fp16_fp32"}, {"stages", {{"o", "bf16"}}}}, "");
  CHECK(c.spec(Stage::merge).format.name == "bf16");
  CHECK(c.spec(Stage::merge).lse().name == "fp32");
  CHECK_THROWS_WITH(allocation_from_json({{"preset", "fp64"}, {"stages", {{"merge", {{"model", "raw"}}}}}}, "/a"),
                    Catch::Contains("/a/stages/merge/model") && Catch::Contains("normalised_lse"));
  CHECK_THROWS_WITH(allocation_from_json({{"preset", "fp64"}, {"stages", {{"merge", {{"partial", "fp13"}}}}}}, "/a"),
                    Catch::Contains("/a/stages/merge/partial"));
  CHECK_THROWS_WITH(allocation_from_json({{"preset", "fp64"}, {"stages", {{"o", {{"model", "unnormalised"}}}}}}, "/a"),
                    Catch::Contains("model"));
}

namespace {

// Engine against the reference emulator: the count of output values and lse that differ in their bits.
std::size_t differing(const AttentionInputs& in, const AlgorithmSpec& s) {
  return test::count_differing(run_attention(in, s), reference::reference_attention(in, s));
}

}  // namespace

TEST_CASE("split merge models: the engine equals the reference emulator bit for bit", "[split][merge][refemu]") {
  // Tails (Skv = 70 with s2 = 8), GQA, causal + kv_len + a keep mask hiding a row and a key; a mean of 2 so
  // that the parts' maxima and frames differ.
  AttentionInputs in;
  in.q = test::uniform_tensor({2, 4, 3, 8}, 2, 1, 5);
  in.k = test::uniform_tensor({2, 2, 70, 8}, 2, 1, 6);
  in.v = test::uniform_tensor({2, 2, 70, 8}, 0, 1, 7);
  in.mask.causal = true;
  in.mask.kv_len = {70, 36};
  in.mask.keep.assign(2 * 3 * 70, 1);
  for (std::size_t j = 0; j < 70; ++j) in.mask.keep[2 * 70 + j] = 0;  // batch 0, row 2: nothing visible
  for (std::size_t i = 0; i < 3; ++i) in.mask.keep[(3 + i) * 70] = 0;  // batch 1: key 0 hidden
  struct Case {
    const char *alg, *preset, *partial, *lse, *merge;
    MergeModel model;
    RoundMode mode;
  };
  const Case cases[] = {
      {"fa2", "fa_fp16_fp32", "fp16", "fp32", "fp32", MergeModel::normalised_lse, RoundMode::nearest_even},
      {"fa2", "fa_fp16_fp32", "fp32", "fp32", "fp32", MergeModel::normalised_lse, RoundMode::nearest_even},
      {"fa2", "fa_fp16", "bf16", "fp16", "fp16", MergeModel::normalised_lse, RoundMode::toward_zero},
      {"fa2", "fa_bf16", "fp8_e4m3fn", "bf16", "bf16", MergeModel::normalised_lse, RoundMode::odd},
      {"smooth_k", "fa_fp16_fp32", "fp16", "fp32", "fp16", MergeModel::normalised_lse, RoundMode::toward_pos},
      {"pasa", "pasa_fp16", "fp16", "fp32", "fp16", MergeModel::normalised_lse, RoundMode::nearest_even},
      {"pasa", "pasa_fp16", "fp16", "fp32", "fp32", MergeModel::normalised_lse, RoundMode::toward_neg},
      {"fa2", "fa_fp16_fp32", "fp16", "fp32", "fp16", MergeModel::unnormalised, RoundMode::nearest_even},
      {"fa2", "fa_bf16", "fp16", "fp32", "bf16", MergeModel::unnormalised, RoundMode::toward_zero},
      {"pasa", "pasa_fp16", "fp16", "fp32", "fp16", MergeModel::unnormalised, RoundMode::nearest_even},
  };
  for (const Case& c : cases)
    for (std::size_t splits : {1, 2, 3, 16}) {
      Allocation a = allocation_preset(c.preset);
      StageSpec& m = a.spec(Stage::merge);
      m.format = format_by_name(c.merge);
      m.round.mode = c.mode;
      m.merge = MergeSpec{c.model, format_by_name(c.partial), format_by_name(c.lse)};
      AlgorithmSpec s = test::decode_spec(c.alg, a, 8, splits);
      s.s1 = 2;
      INFO(c.alg << " " << c.preset << " model " << merge_model_name(c.model) << " partial " << c.partial << " lse "
                 << c.lse << " merge " << c.merge << "/" << round_mode_name(c.mode) << ", splits " << splits);
      CHECK(differing(in, s) == 0);
    }
}
