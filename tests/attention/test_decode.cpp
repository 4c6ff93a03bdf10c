// Decode-time attention ([IFA]) and split-KV ([UA], flash-decoding): the position bias pse and the select
// mask in the golden (against an independent long-double reference) and in every engine (fp64 == golden),
// what the select value does in each format, split-KV merging for fa2, smooth_k and pasa (fp64 == golden
// for every split count; split = 1 is the engine as is), the merge stage in allocations, and bad inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <boost/random/bernoulli_distribution.hpp>
#include <boost/random/mersenne_twister.hpp>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/analysis/attribution.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/allocation_json.hpp"
#include "support/attention_cases.hpp"
#include "support/direct_attention.hpp"

using namespace pasa;

namespace {

// A decode problem: Sq query rows over a padded KV cache of Skv keys with per-batch lengths, GQA, an
// fp16 pse (B = 1 broadcast when bcast) and a random select mask hiding a share `sel_p` of the keys.
AttentionInputs decode_inputs(std::size_t B, std::size_t Nq, std::size_t Nkv, std::size_t Sq, std::size_t Skv,
                              std::size_t D, std::uint64_t seed, double sel_p = 0.2, bool bcast = false,
                              double x0 = 0, double am = 1) {
  AttentionInputs in;
  in.q = test::uniform_tensor({B, Nq, Sq, D}, x0, am, seed * 7 + 1);
  in.k = test::uniform_tensor({B, Nkv, Skv, D}, x0, am, seed * 7 + 2);
  in.v = test::uniform_tensor({B, Nkv, Skv, D}, 0.5, 1, seed * 7 + 3);
  in.pse = test::uniform_tensor({bcast ? 1 : B, Nq, Sq, Skv}, 0, 2, seed * 7 + 4);
  for (std::size_t b = 0; b < B; ++b) in.mask.kv_len.push_back(Skv - (b * 37) % (Skv / 2));
  boost::random::mt19937_64 eng(seed * 7 + 5);
  boost::random::bernoulli_distribution<double> bern(sel_p);
  in.mask.select.resize(B * Sq * Skv);
  for (auto& x : in.mask.select) x = bern(eng);
  return in;
}

double rmse(const Tensor& o, const Tensor& g) { return compare_outputs(o, g).rmse; }

}  // namespace

TEST_CASE("the golden with pse and a select mask equals a long-double reference", "[decode][golden]") {
  for (bool bcast : {false, true}) {
    AttentionInputs in = decode_inputs(2, 4, 2, 3, 150, 16, bcast ? 3 : 4, 0.3, bcast);
    in.mask.select[5] = 1;  // make sure row (0, 0) has a selected key
    for (bool fast : {true, false}) {
      GoldenOptions opt;
      opt.fast = fast;
      const Golden g = golden_attention(in, opt);
      CHECK(g.guaranteed_bits >= 54);
      double worst = 0;
      for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t h = 0; h < 4; ++h)
          for (std::size_t i = 0; i < 3; ++i) {
            const auto ref = test::direct_row(in, b, h, i);
            for (std::size_t d = 0; d < 16; ++d)
              worst = std::max(worst, static_cast<double>(std::abs(g.o.at(b, h, i, d) - ref[d]) / std::abs(ref[d])));
          }
      INFO("fast = " << fast << ", bcast = " << bcast);
      CHECK(worst < 1e-15);
    }
  }
}

TEST_CASE("pse shifts the lse by a per-row constant and leaves O unchanged", "[decode][golden]") {
  AttentionInputs in = decode_inputs(1, 2, 1, 2, 64, 8, 11, 0.0);
  in.pse.data.assign(in.pse.data.size(), 0.0);
  const Golden g0 = golden_attention(in);
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t j = 0; j < 64; ++j) in.pse.at(0, h, i, j) = 0.25 * static_cast<double>(h + 2 * i + 1);
  const Golden g1 = golden_attention(in);
  CHECK(rmse(g1.o, g0.o) < 1e-16);
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t i = 0; i < 2; ++i)
      CHECK(g1.lse[h * 2 + i] - g0.lse[h * 2 + i] == Approx(0.25 * static_cast<double>(h + 2 * i + 1)).epsilon(1e-14));
}

TEST_CASE("decode: every algorithm in fp64 equals the golden with pse, select, kv_len and GQA", "[decode]") {
  for (std::size_t sq : {1, 3}) {
    const AttentionInputs in = decode_inputs(3, 8, 2, sq, 200, 32, 20 + sq);
    const Golden g = golden_attention(in);
    for (const char* name : {"safe_softmax", "online_softmax", "fa1", "fa2", "pasa", "smooth_k"}) {
      INFO(name << ", Sq = " << sq);
      CHECK(rmse(run_attention(in, test::decode_spec(name, "fp64")).o, g.o) < 1e-13);
    }
  }
}

TEST_CASE("select mask: a row whose keys are all selected averages V; the value's format decides", "[decode]") {
  AttentionInputs in = decode_inputs(1, 2, 1, 2, 96, 16, 31, 0.1);
  in.pse.data.clear();
  for (std::size_t j = 0; j < 96; ++j) in.mask.select[j] = 1;  // row i = 0: every key selected
  const Golden g = golden_attention(in);
  // The golden of the all-selected row is the plain mean of V over the row's visible keys.
  const std::size_t n = in.mask.kv_len[0];
  for (std::size_t d = 0; d < 16; ++d) {
    long double mean = 0;
    for (std::size_t j = 0; j < n; ++j) mean += in.v.at(0, 0, j, d);
    CHECK(g.o.at(0, 0, 0, d) == Approx(static_cast<double>(mean / n)).epsilon(1e-15));
  }
  // fa_fp16_fp32 keeps scores in fp32: −1e12 is representable and the row averages V as in the golden.
  const AttentionOutput a = run_attention(in, test::decode_spec("fa2", "fa_fp16_fp32"));
  for (std::size_t d = 0; d < 16; ++d) CHECK(a.o.at(0, 0, 0, d) == Approx(g.o.at(0, 0, 0, d)).epsilon(2e-3));
  // fa_fp16 keeps scores in fp16: −1e12 overflows to −inf, the row sees nothing (output 0, lse −inf) ...
  const AttentionOutput b = run_attention(in, test::decode_spec("fa2", "fa_fp16"));
  for (std::size_t d = 0; d < 16; ++d) CHECK(b.o.at(0, 0, 0, d) == 0.0);
  CHECK(std::isinf(b.lse[0]));
  // ... unless the scale stage saturates: −65504, and the row averages V again.
  AlgorithmSpec sat = test::decode_spec("fa2", "fa_fp16");
  sat.alloc.spec(Stage::scale).round.overflow = Overflow::saturate;
  const AttentionOutput c = run_attention(in, sat);
  for (std::size_t d = 0; d < 16; ++d) CHECK(c.o.at(0, 0, 0, d) == Approx(g.o.at(0, 0, 0, d)).epsilon(2e-3));
  // The other row (some keys selected) is unaffected by the value as long as it underflows in exp.
  CHECK(compare_outputs(b.o, g.o).rows_with_nonfinite == 0);
}

TEST_CASE("split-KV: merged parts equal the golden in fp64 for every split count", "[decode][split]") {
  AttentionInputs in = decode_inputs(2, 4, 2, 2, 301, 16, 41);
  in.mask.causal = true;
  const Golden g = golden_attention(in);
  for (const char* name : {"fa2", "smooth_k", "pasa"})
    for (std::size_t s2 : {16, 64})
      for (std::size_t splits : {1, 2, 3, 5, 64}) {
        INFO(name << ", s2 = " << s2 << ", splits = " << splits);
        const AttentionOutput a = run_attention(in, test::decode_spec(name, "fp64", s2, splits));
        CHECK(rmse(a.o, g.o) < 1e-13);
        for (std::size_t r = 0; r < g.lse.size(); ++r) CHECK(a.lse[r] == Approx(g.lse[r]).epsilon(1e-13));
      }
}

TEST_CASE("split-KV: one split is the engine as is; more stay within the allocation's error", "[decode][split]") {
  const AttentionInputs in = decode_inputs(2, 4, 1, 1, 512, 64, 51, 0.05);
  const Golden g = golden_attention(in);
  for (const char* alloc : {"fa_fp16_fp32", "pasa_fp16", "fa_bf16"}) {
    const std::string name = std::string(alloc).starts_with("pasa") ? "pasa" : "fa2";
    AlgorithmSpec base = test::decode_spec(name, alloc, 64);
    base.splits = 1;
    const AttentionOutput a1 = run_attention(in, base);
    const double e1 = rmse(a1.o, g.o);
    for (std::size_t splits : {2, 4, 8}) {
      INFO(alloc << ", splits = " << splits);
      const AttentionOutput as = run_attention(in, test::decode_spec(name, alloc, 64, splits));
      CHECK(rmse(as.o, g.o) < 3 * e1);
      // The merge rounds in its stage: lifting it to fp64 changes the result, and it stays near the golden.
      AlgorithmSpec lifted = test::decode_spec(name, alloc, 64, splits);
      lifted.alloc.spec(Stage::merge) = StageSpec{format_by_name("fp64")};
      CHECK(rmse(run_attention(in, lifted).o, g.o) < 3 * e1);
    }
  }
}

TEST_CASE("PASA in split form keeps the global recovery: no overflow where the split parts are re-framed",
          "[decode][split]") {
  // Large-mean inputs (PASA Table 4, x0 = 30): FA-FP16/FP32 overflows; PASA-FP16 in 4 parts stays finite and
  // close to the golden, as unsplit PASA does.
  // 8 blocks in 3 parts of 3, 3 and 2 blocks (unequal J_t), and in 4 parts of 2.
  AttentionInputs in = decode_inputs(1, 2, 1, 4, 1024, 128, 61, 0.0, false, 30, 0.5);
  in.pse.data.clear();
  const Golden g = golden_attention(in);
  const Metrics unsplit = compare_outputs(run_attention(in, test::decode_spec("pasa", "pasa_fp16", 128)).o, g.o);
  CHECK(unsplit.nan_count == 0);
  for (std::size_t splits : {3, 4}) {
    INFO("splits = " << splits);
    const Metrics split = compare_outputs(run_attention(in, test::decode_spec("pasa", "pasa_fp16", 128, splits)).o, g.o);
    CHECK(split.nan_count == 0);
    CHECK(split.rmse < 3 * unsplit.rmse);
  }
  CHECK(compare_outputs(run_attention(in, test::decode_spec("fa2", "fa_fp16_fp32", 128, 4)).o, g.o).nan_count > 0);
}

TEST_CASE("the merge stage: every preset merges in fp32 as the kernels store parts", "[decode][alloc]") {
  for (const auto& p : allocation_preset_names()) {
    const Allocation a = allocation_preset(p);
    INFO(p);
    const StageSpec& m = a.spec(Stage::merge);
    CHECK(m.format.name == (p == "fp64" ? "fp64" : "fp32"));
    // fp64, the exact reference, merges unnormalised parts (allocation.cpp with_kernel_merge).
    const char* model = p == "fp64" ? "unnormalised" : "normalised_lse";
    CHECK(m.merge.model == merge_model_by_name(model));
    CHECK(m.partial() == a.spec(Stage::out).format);
    CHECK(m.lse().name == (p == "fp64" ? "fp64" : "fp32"));
    CHECK(to_json(a).at("stages").at("merge").at("model") == model);
    CHECK(allocation_from_json(to_json(a), "") == a);
  }
  // A full allocation written before the merge stage existed: every other stage, merge = o.
  nlohmann::json full = to_json(allocation_preset("fa_fp16_fp32"));
  full["stages"].erase("merge");
  full["stages"]["o"] = "bf16";
  const Allocation a = allocation_from_json(full, "");
  CHECK(a.spec(Stage::merge).format.name == "bf16");
  full["stages"]["merge"] = "fp32";
  const Allocation b = allocation_from_json(full, "");
  CHECK(b.spec(Stage::merge).format.name == "fp32");
  CHECK(to_json(b).at("stages").at("merge") == "fp32");
}

TEST_CASE("attribution: the merge stage is examined only with split-KV", "[decode][split]") {
  const AttentionInputs in = decode_inputs(1, 2, 1, 1, 256, 32, 71, 0.0);
  const Golden g = golden_attention(in);
  AlgorithmSpec s = test::decode_spec("fa2", "fa_fp16", 32, 4);
  s.alloc.spec(Stage::merge) = StageSpec{format_by_name("fp8_e4m3fn")};  // a merge coarse enough to dominate
  for (const StageShare& r : attribute_error(in, s, g, 1))
    if (r.stage == "merge") CHECK(r.share > 0.5);
  s.splits = 1;
  for (const StageShare& r : attribute_error(in, s, g, 1))
    if (r.stage == "merge") CHECK(r.rmse_lifted == r.rmse_base);
}

TEST_CASE("decode: bad inputs are errors naming what is wrong", "[decode][errors]") {
  const AttentionInputs good = decode_inputs(2, 4, 2, 1, 64, 8, 81);
  auto fails = [&](AttentionInputs in, const std::string& what) {
    INFO(what);
    CHECK_THROWS_WITH(golden_attention(in), Catch::Contains(what));
    CHECK_THROWS_WITH(run_attention(in, test::decode_spec("fa2", "fp64")), Catch::Contains(what));
  };
  AttentionInputs in = good;
  in.pse.shape.D = 63;
  in.pse.data.resize(in.pse.shape.size());
  fails(in, "pse has shape");
  in = good;
  in.pse.shape.B = 3;
  in.pse.data.resize(in.pse.shape.size());
  fails(in, "pse has shape");
  in = good;
  in.pse.data[7] = std::nan("");
  fails(in, "pse has a non-finite element");
  in = good;
  in.mask.select.pop_back();
  fails(in, "select mask has 127 entries");
  in = good;
  in.mask.select_value = -INFINITY;
  fails(in, "select_value must be finite");
  in = good;
  in.mask.kv_len[1] = 65;
  fails(in, "kv_len[1] = 65 exceeds Skv = 64");
  CHECK_THROWS_WITH(run_attention(good, test::decode_spec("fa1", "fp64", 32, 2)), Catch::Contains("split-KV needs fa2"));
  CHECK_THROWS_WITH(run_attention(good, test::decode_spec("fa2", "fp64", 32, 0)), Catch::Contains("splits must be at least 1"));
  CHECK_THROWS_WITH(algorithm_from_json(nlohmann::json{{"name", "fa1"}, {"splits", 2}}, "/a"),
                    Catch::Contains("/a/splits"));
  CHECK(algorithm_from_json(nlohmann::json{{"name", "pasa"}, {"splits", 3}}, "").splits == 3);
}

namespace {

AlgorithmSpec fdpp_spec(const std::string& alloc, double phi, double a, double b, std::size_t splits = 1) {
  AlgorithmSpec s = test::decode_spec("fdpp", alloc, 32, splits);
  s.fdpp = FdppOptions{phi, a, b};
  return s;
}

// The largest visible, unselected score x of every row (long double, from the definition).
std::vector<long double> row_max_scores(const AttentionInputs& in) {
  std::vector<long double> mx;
  const std::size_t D = in.q.shape.D;
  for (std::size_t bb = 0; bb < in.q.shape.B; ++bb)
    for (std::size_t h = 0; h < in.q.shape.N; ++h)
      for (std::size_t i = 0; i < in.q.shape.S; ++i) {
        long double m = -INFINITY;
        for (std::size_t j = 0; j < in.k.shape.S; ++j) {
          if (!visible(in, bb, i, j)) continue;
          if (!in.mask.select.empty() && in.mask.select[(bb * in.q.shape.S + i) * in.k.shape.S + j]) continue;
          long double x = 0;
          for (std::size_t d = 0; d < D; ++d)
            x += static_cast<long double>(in.q.at(bb, h, i, d)) * in.k.at(bb, h / in.group(), j, d);
          x = x / std::sqrt(static_cast<long double>(D)) + (in.pse.data.empty() ? 0.0L : in.pse.at(bb, h, i, j));
          m = std::max(m, x);
        }
        mx.push_back(m);
      }
  return mx;
}

}  // namespace

TEST_CASE("FlashDecoding++: fp64 equals the golden, asynchronised or recomputed, any split count", "[decode][fdpp]") {
  const AttentionInputs in = decode_inputs(2, 4, 2, 2, 300, 16, 91);
  const Golden g = golden_attention(in);
  for (std::size_t splits : {1, 3, 8}) {
    INFO("splits = " << splits);
    const AttentionOutput wide = run_attention(in, fdpp_spec("fp64", 0.5, -700, 700, splits));
    CHECK(wide.recomputed_rows == 0);
    CHECK(rmse(wide.o, g.o) < 1e-13);
    const AttentionOutput narrow = run_attention(in, fdpp_spec("fp64", 0.5, -1, 1, splits));
    CHECK(narrow.recomputed_rows == 16);
    CHECK(rmse(narrow.o, g.o) < 1e-13);
    for (std::size_t r = 0; r < g.lse.size(); ++r) CHECK(wide.lse[r] == Approx(g.lse[r]).epsilon(1e-13));
  }
  // The recomputed rows are exactly those with a score at or above φ + b (b between the rows' maxima).
  std::vector<long double> mx = row_max_scores(in);
  std::vector<long double> sorted = mx;
  std::sort(sorted.begin(), sorted.end());
  const double b = static_cast<double>((sorted[7] + sorted[8]) / 2) - 0.3;
  std::size_t expect = 0;
  for (long double m : mx) expect += m - 0.3L >= b;
  CHECK(expect == 8);
  const AttentionOutput some = run_attention(in, fdpp_spec("fp64", 0.3, -700, b));
  CHECK(some.recomputed_rows == expect);
  CHECK(rmse(some.o, g.o) < 1e-13);
}

TEST_CASE("FlashDecoding++: b guards the exp format; the fp16 row sum needs more", "[decode][fdpp]") {
  // Scores near 8 (q, k ~ U(0.5, 1.5), D = 64): with φ = -6, e^{x − φ} ≈ e^{14} > 65504 overflows an fp16
  // exp stage unless b = 11 sends the rows to the recomputation.
  AttentionInputs in = decode_inputs(1, 2, 1, 1, 128, 64, 95, 0.0, false, 1, 0.5);
  in.pse.data.clear();
  const Golden g = golden_attention(in);
  const AttentionOutput unguarded = run_attention(in, fdpp_spec("fa_fp16", -6, -30, 40));
  CHECK(unguarded.recomputed_rows == 0);
  CHECK(compare_outputs(unguarded.o, g.o).rows_with_nonfinite == 2);
  const AttentionOutput guarded = run_attention(in, fdpp_spec("fa_fp16", -6, -30, 11));
  CHECK(guarded.recomputed_rows == 2);
  CHECK(compare_outputs(guarded.o, g.o).rows_with_nonfinite == 0);
  CHECK(compare_outputs(guarded.o, g.o).rmse < 2e-3);
  // With φ = -2 every e^{x − φ} ≈ e^{10} fits fp16 and no row leaves the range, but the fp16 row sum of 128
  // such terms (≈ 2.8e6) overflows, and so do P·V and O: with fp16 sum/pv/o stages, n·e^b·max|V| must fit,
  // not only e^b (with those three stages in fp32 it is fine).
  const AttentionOutput sum16 = run_attention(in, fdpp_spec("fa_fp16", -2, -30, 11));
  CHECK(sum16.recomputed_rows == 0);
  CHECK(compare_outputs(sum16.o, g.o).rows_with_nonfinite == 2);
  AlgorithmSpec sum32 = fdpp_spec("fa_fp16", -2, -30, 11);
  sum32.alloc.spec(Stage::sum) = StageSpec{format_by_name("fp32")};
  sum32.alloc.spec(Stage::o) = StageSpec{format_by_name("fp32")};
  sum32.alloc.spec(Stage::pv) = StageSpec{format_by_name("fp32")};
  CHECK(compare_outputs(run_attention(in, sum32).o, g.o).rmse < 2e-3);
  CHECK_THROWS_WITH(algorithm_from_json(nlohmann::json{{"name", "fdpp"}, {"fdpp", {{"a", 2}, {"b", 1}}}}, "/x"),
                    Catch::Contains("/x/fdpp: expected a < b"));
  CHECK(algorithm_from_json(nlohmann::json{{"name", "fdpp"}, {"fdpp", {{"phi", -3}}}}, "").fdpp.phi == -3);
}
