// The tile seam's contract (attention/detail/tile_ops.hpp): for a run that takes the fused float path, every
// operation of FusedTileOps gives the bits of GeneralTileOps' — operation by operation, not only at the end
// of an algorithm — and the same draws from the random stream. The general side runs on the same inputs
// plus an all-zero position bias, which keeps it off the fused path (fused_tiles excludes a bias) without
// changing a value: the tile operations compared here never add the bias (bias_select is not called).
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/detail/blocked_attention.hpp"
#include "pasa/attention/detail/pasa_attention.hpp"
#include "pasa/attention/detail/tile_ops.hpp"
#include "support/attention_cases.hpp"
#include "support/bits.hpp"

using namespace pasa;
using namespace pasa::detail;

namespace {

struct TileCase {
  std::string algorithm, preset;
  bool causal = false;
  bool stochastic_sum = false;  // the sum stage in stochastic rounding: the draws must match too
};

// Values that differ in their bits between the two sides, after one operation ("" when none).
std::string differ(const char* what, const std::vector<double>& a, const std::vector<double>& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!test::same_bits(a[i], b[i]))
      return std::string(what) + "[" + std::to_string(i) + "]: fused " + std::to_string(a[i]) + ", general " +
             std::to_string(b[i]);
  return "";
}

}  // namespace

TEST_CASE("tile ops: the fused implementation gives the general one's bits operation by operation", "[tiles]") {
  // Rows not a multiple of 16 (GQA items of 2 heads × 9 rows), a tail block (Skv = 70, s2 = 32), scores
  // around 2 so that the exp and sums see a range of values.
  const std::size_t B = 1, Nq = 4, Nkv = 2, Sq = 9, Skv = 70, D = 24;
  const std::vector<TileCase> cases = {
      {"fa2", "fa_fp16_fp32"}, {"fa2", "fa_fp16_fp32", true}, {"fa2", "fa_fp32"},     {"fa2", "fa_fp16"},
      {"fa2", "fa_bf16_fp32"}, {"pasa", "pasa_fp16"},         {"pasa", "pasa_fp16", true},
      {"fa2", "fa_fp16_fp32", false, true},
  };
  std::size_t compared = 0;
  for (const TileCase& tc : cases)
    for (const bool scale : {true, false}) {
      INFO(tc.algorithm << " " << tc.preset << (tc.causal ? " causal" : "") << (tc.stochastic_sum ? " sum SR" : "")
                        << (scale ? " scaled" : " unscaled"));
      AttentionInputs in;
      in.q = test::uniform_tensor({B, Nq, Sq, D}, 0.5, 1, 11);
      in.k = test::uniform_tensor({B, Nkv, Skv, D}, 0.5, 1, 12);
      in.v = test::uniform_tensor({B, Nkv, Skv, D}, 0, 1, 13);
      in.mask.causal = tc.causal;
      AttentionInputs general = in;
      general.pse = Tensor({B, Nq, Sq, Skv}, format_by_name("fp16"));  // all +0
      AlgorithmSpec spec = test::decode_spec(tc.algorithm, tc.preset, 32);
      spec.s1 = Sq;  // one item per KV head: the two heads' rows together
      if (tc.stochastic_sum) spec.alloc.spec(Stage::sum).round.mode = RoundMode::stochastic;
      Run fr(in, spec), gr(general, spec);
      if (tc.algorithm == "pasa") {
        pasa_prepare(fr, 1);
        pasa_prepare(gr, 1);
      }
      REQUIRE(!gr.float_tiles);
#if defined(__AVX512F__)  // the fused path exists only there (fused_tile.cpp)
      CHECK(fr.float_tiles);
#endif
      if (!fr.float_tiles) continue;
      const std::vector<Item> items = make_items(fr);
      for (std::size_t i = 0; i < items.size(); ++i) {
        const Item& it = items[i];
        const std::size_t rows = it.rows();
        RandomBits rf = item_stream(spec, i), rg = item_stream(spec, i);
        FusedTileOps f(fr, it, &rf);
        GeneralTileOps g(gr, it, &rg);
        REQUIRE(f.rows() == rows);
        std::vector<double> Of(rows * D, 0.0), Og(rows * D, 0.0), alpha(rows);
        for (std::size_t j0 = 0, tile = 0; j0 < Skv; j0 += spec.s2, ++tile) {
          const std::size_t n = std::min(spec.s2, Skv - j0);
          const bool open = f.open(j0, n);
          REQUIRE(open == g.open(j0, n));
          if (!open) continue;
          f.scores(scale);
          g.scores(scale);
          std::vector<double> a(rows), b(rows);
          f.row_mean(a.data());
          g.row_mean(b.data());
          CHECK(differ("row_mean", a, b).empty());
          if (fr.masked) {
            f.mask();
            g.mask();
          }
          f.row_max(a.data());
          g.row_max(b.data());
          CHECK(differ("row_max", a, b).empty());
          const std::vector<double> shift = b;  // the rows' maxima (−inf: a row that sees nothing yet)
          f.probabilities(shift.data(), a.data());
          g.probabilities(shift.data(), b.data());
          CHECK(differ("rowsum", a, b).empty());
          f.pv();
          g.pv();
          const double* pf = f.pv_values();
          const double* pg = g.pv_values();
          CHECK(differ("pv", std::vector<double>(pf, pf + rows * D), std::vector<double>(pg, pg + rows * D)).empty());
          for (std::size_t r = 0; r < rows; ++r) alpha[r] = (tile + r) % 3 == 0 ? 0.0 : (r % 2 ? 1.0 : 0.5);
          f.accumulate(Of.data(), alpha.data());
          g.accumulate(Og.data(), alpha.data());
          CHECK(differ("O", Of, Og).empty());
          ++compared;
        }
        CHECK(rf.next() == rg.next());  // the same draws taken
      }
    }
#if defined(__AVX512F__)
  CHECK(compared > 0);
#else
  CHECK(compared == 0);  // without AVX-512 no run takes the fused path: there is nothing to compare
#endif
}
