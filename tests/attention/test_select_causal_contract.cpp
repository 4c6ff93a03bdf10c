// Regression tests of issue 24, items 2 and 4: the meaning of the select mask and of causal with kv_len,
// the same in the golden and in every algorithm.
// - select: the score of a selected key IS select_value, in the unshifted frame, after scale and pse
//   (it replaces scale·q·k + pse). Engines whose scores are shifted (pasa: S' = S − Inva·S̄'_j per block;
//   smooth_k: S − scale·q·mean(K) per row) write value − shift, fdpp treats a selected score as a score.
//   Before the fix pasa and smooth_k wrote the value into the shifted frame (3.4e-2 and 3.6e-2 on the issue's
//   case) and fdpp gave 0 for a row whose keys were all selected.
// - causal with kv_len: query i of Sq sees key j iff j <= i + (kv_len[b] − Sq) (bottom-right alignment to each
//   sequence's own length, as FlashAttention's varlen kernels); before, the diagonal sat at the padded Skv.
// Every fp64 run is compared with the MPFR golden (relative RMSE <= 1e-13); the golden itself is checked
// against a direct long-double evaluation of the definition, written here with no shared code.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "pasa/attention/algorithm.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/inputs/generators.hpp"
#include "reference/reference_attention.hpp"
#include "support/rel_rmse.hpp"
#include "support/direct_attention.hpp"

using namespace pasa;

namespace {

const char* const kAll[] = {"safe_softmax", "online_softmax", "fa1", "fa2", "pasa", "smooth_k", "fdpp"};
bool splittable(const std::string& a) { return algorithm_info(a).split_kv; }

// The issue's first case: Nq 2, Nkv 1, Sq 4, Skv 256, D 64, uniform x0 1 am 1, select p 0.5.
ProblemSpec issue_case(double value, double p = 0.5) {
  ProblemSpec ps;
  ps.B = 1;
  ps.Nq = 2;
  ps.Nkv = 1;
  ps.Sq = 4;
  ps.Skv = 256;
  ps.D = 64;
  ps.q.x0 = ps.k.x0 = ps.v.x0 = 1;
  ps.q.am = ps.k.am = ps.v.am = 1;
  ps.select_p = p;
  ps.select_value = value;
  return ps;
}

// The issue's second case: Nq 4, Nkv 2, Sq 17, Skv 40, kv_len [29], pse.
ProblemSpec issue_case2(double value, double p = 0.5) {
  ProblemSpec ps;
  ps.B = 1;
  ps.Nq = 4;
  ps.Nkv = 2;
  ps.Sq = 17;
  ps.Skv = 40;
  ps.D = 16;
  ps.kv_len = {29};
  ps.has_pse = true;
  ps.pse.am = 2;
  ps.select_p = p;
  ps.select_value = value;
  ps.seed = 3;
  return ps;
}

AlgorithmSpec fp64_spec(const std::string& name, std::size_t s1, std::size_t s2, std::size_t splits) {
  AlgorithmSpec s;
  s.name = name;
  s.alloc = allocation_preset("fp64");
  s.s1 = s1;
  s.s2 = s2;
  s.splits = splittable(name) ? splits : 1;
  s.fdpp.phi = 2;  // the scores of these inputs (x0 = 1) lie around scale·D = 8: some rows leave (φ + a, φ + b)
  return s;
}

// Every algorithm, split and unsplit, equals the golden in fp64.
void check_all(const AttentionInputs& in, std::size_t s1, std::size_t s2, std::size_t splits, const std::string& what) {
  const Golden g = golden_attention(in);
  for (const char* a : kAll)
    for (std::size_t sp : {std::size_t{1}, splits}) {
      const AttentionOutput o = run_attention(in, fp64_spec(a, s1, s2, sp), 2);
      const double e = test::rel_rmse(o.o, g.o);
      INFO(what << ": " << a << " splits " << sp << ": rel. RMSE " << e);
      CHECK(e <= 1e-13);
    }
}

double golden_vs_direct(const AttentionInputs& in) {
  const Golden g = golden_attention(in);
  double worst = 0;
  for (std::size_t b = 0; b < in.q.shape.B; ++b)
    for (std::size_t h = 0; h < in.q.shape.N; ++h)
      for (std::size_t i = 0; i < in.q.shape.S; ++i) {
        const std::vector<long double> r = test::direct_row(in, b, h, i);
        for (std::size_t d = 0; d < in.q.shape.D; ++d) {
          const long double diff = std::abs(g.o.at(b, h, i, d) - r[d]);
          worst = std::max(worst, static_cast<double>(diff / (1e-300L + std::abs(r[d]) + 1e-3L)));
        }
      }
  return worst;
}

}  // namespace

TEST_CASE("select: the issue's case, every algorithm and value, fp64 = golden", "[select][contract]") {
  for (double value : {-1e12, -20.0, -2.0, 0.0, 3.0}) {
    const AttentionInputs in = generate_inputs(issue_case(value), 1);
    check_all(in, 4, 32, 3, "value " + std::to_string(value));
  }
}

TEST_CASE("select: every key of every row selected gives the mean of V, every algorithm", "[select][contract]") {
  for (double value : {-1e12, -20.0, -2.0, 0.0, 3.0}) {
    AttentionInputs in = generate_inputs(issue_case(value, 1.0), 1);
    // The golden: the plain mean of V over the keys (all weights e^{v − v} = 1).
    const Golden g = golden_attention(in);
    for (std::size_t d = 0; d < in.q.shape.D; ++d) {
      long double mean = 0;
      for (std::size_t j = 0; j < in.k.shape.S; ++j) mean += in.v.at(0, 0, j, d);
      mean /= static_cast<long double>(in.k.shape.S);
      CHECK(std::abs(g.o.at(0, 1, 2, d) - static_cast<double>(mean)) <= 1e-15 * std::abs(static_cast<double>(mean)) + 1e-300);
    }
    check_all(in, 4, 32, 3, "all selected, value " + std::to_string(value));
  }
}

TEST_CASE("select: with kv_len, pse, splits and causal, fp64 = golden", "[select][contract]") {
  for (double value : {-1e12, -20.0, -2.0, 0.0, 3.0})
    for (bool causal : {false, true})
      for (double p : {0.5, 1.0}) {
        ProblemSpec ps = issue_case2(value, p);
        ps.causal = causal;
        const AttentionInputs in = generate_inputs(ps, 1);
        check_all(in, 4, 4, 7, "case 2, value " + std::to_string(value) + (causal ? " causal" : "") + " p " + std::to_string(p));
        CHECK(golden_vs_direct(in) < 1e-15);
      }
}

TEST_CASE("select: the issue's cases in low precision = the reference emulator, bit for bit", "[select][contract]") {
  // The same cases under the presets (fa_fp16_fp32, pasa_fp16): the engines' shifted frames (pasa's
  // value − Inva·S̄'_j, smooth_k's value − scale·q·mean(K)) give the independent emulator's bits, split or not.
  auto same = [](const AttentionOutput& a, const AttentionOutput& b) {
    auto eq = [](double x, double y) {
      return std::isnan(x) ? std::isnan(y) : std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(y);
    };
    for (std::size_t i = 0; i < a.o.data.size(); ++i)
      if (!eq(a.o.data[i], b.o.data[i])) return false;
    for (std::size_t i = 0; i < a.lse.size(); ++i)
      if (!eq(a.lse[i], b.lse[i])) return false;
    return true;
  };
  for (double value : {-1e12, -2.0, 3.0})
    for (int c = 0; c < 3; ++c) {
      ProblemSpec ps = c == 0 ? issue_case(value) : issue_case2(value, c == 2 ? 1.0 : 0.5);
      ps.causal = c == 2;
      const AttentionInputs in = generate_inputs(ps, 1);
      for (const char* a : {"fa2", "pasa", "smooth_k"})
        for (std::size_t sp : {std::size_t{1}, std::size_t{3}}) {
          AlgorithmSpec s = fp64_spec(a, 4, c == 0 ? 32 : 4, sp);
          s.alloc = allocation_preset(std::string(a) == "pasa" ? "pasa_fp16" : "fa_fp16_fp32");
          INFO("case " << c << " value " << value << " " << a << " splits " << sp);
          CHECK(same(run_attention(in, s, 2), reference::reference_attention(in, s)));
        }
    }
}

TEST_CASE("causal with kv_len: aligned to each sequence's own length", "[causal][contract]") {
  ProblemSpec ps;
  ps.B = 3;
  ps.Nq = 2;
  ps.Nkv = 1;
  ps.Sq = 5;
  ps.Skv = 23;
  ps.D = 8;
  ps.causal = true;
  ps.kv_len = {23, 9, 3};  // full, partial, shorter than Sq (the first 2 rows of batch 2 see nothing)
  ps.seed = 11;
  const AttentionInputs in = generate_inputs(ps, 1);
  // The rule itself: query i sees key j iff j <= i + (L − Sq).
  CHECK(visible_end(in, 1, 4) == 9);
  CHECK(visible_end(in, 1, 0) == 5);
  CHECK(visible_end(in, 2, 1) == 0);
  CHECK(visible_end(in, 2, 2) == 1);
  CHECK(visible_end(in, 0, 0) == 19);
  CHECK(golden_vs_direct(in) < 1e-15);
  const Golden g = golden_attention(in);
  CHECK(g.o.at(2, 0, 0, 0) == 0.0);  // a row that sees nothing
  CHECK(std::isinf(g.lse[(2 * 2 + 0) * 5 + 1]));
  // The last row of a batch sees exactly its kv_len keys: the same output as without causal.
  ProblemSpec nc = ps;
  nc.causal = false;
  const Golden g2 = golden_attention(generate_inputs(nc, 1));
  for (std::size_t d = 0; d < 8; ++d) CHECK(g.o.at(1, 1, 4, d) == g2.o.at(1, 1, 4, d));
  check_all(in, 2, 4, 3, "causal + kv_len");
  // With select and pse as well.
  ps.has_pse = true;
  ps.select_p = 0.3;
  ps.select_value = -2;
  check_all(generate_inputs(ps, 1), 3, 2, 2, "causal + kv_len + pse + select");
}

TEST_CASE("fdpp: which rows a select mask sends to the synchronised scheme", "[select][contract]") {
  // Scores within (φ + a, φ + b) = (−30, 11) for φ = 0: only the selected keys can leave the range. A selected
  // score above it (+20) is a score that would overflow e^{x − φ}: its row is recomputed; one below it
  // (−1e12) only underflows: its row is recomputed only when all its visible keys are selected.
  ProblemSpec ps;
  ps.B = 2;
  ps.Nq = 2;
  ps.Nkv = 1;
  ps.Sq = 3;
  ps.Skv = 40;
  ps.D = 16;
  ps.q.am = ps.k.am = 0.5;
  ps.kv_len = {40, 2};
  ps.select_p = 0.4;
  ps.seed = 9;
  for (double value : {20.0, -1e12}) {
    ps.select_value = value;
    const AttentionInputs in = generate_inputs(ps, 1);
    std::size_t want = 0;
    for (std::size_t b = 0; b < ps.B; ++b)
      for (std::size_t i = 0; i < ps.Sq; ++i) {
        std::size_t visible_keys = 0, selected = 0;
        for (std::size_t j = 0; j < ps.kv_len[b]; ++j) {
          ++visible_keys;
          selected += in.mask.select[(b * ps.Sq + i) * ps.Skv + j];
        }
        const bool recompute = value > 0 ? selected > 0 : selected == visible_keys;
        want += recompute ? ps.Nq : 0;  // every head of the row
      }
    AlgorithmSpec s = fp64_spec("fdpp", 2, 8, 1);
    s.fdpp.phi = 0;
    for (std::size_t splits : {1, 3}) {
      s.splits = splits;
      const AttentionOutput o = run_attention(in, s, 2);
      INFO("value " << value << " splits " << splits);
      CHECK(o.recomputed_rows == want);
      CHECK(test::rel_rmse(o.o, golden_attention(in).o) <= 1e-13);
    }
    CHECK(want > 0);
  }
}

TEST_CASE("pasa: a fully selected row next to a block it does not see (found by the long property run)",
          "[select][contract]") {
  // Sq 2, Skv 34, s1 2, s2 3, causal: row 0 does not see key 33, row 1 does, so the item processes the tail
  // block for both rows. Row 0's frame must not move there (its max sits at −1e12: any move rounds at 1e-4).
  ProblemSpec ps;
  ps.Sq = 2;
  ps.Skv = 34;
  ps.D = 1;
  ps.format = "fp32";
  ps.causal = true;
  ps.select_p = 1;
  ps.select_value = -1e12;
  ps.seed = 510;
  const AttentionInputs in = generate_inputs(ps, 1);
  const Golden g = golden_attention(in);
  for (std::size_t splits : {1, 2})
    for (bool alpha_in_M : {false, true}) {
      AlgorithmSpec s = fp64_spec("pasa", 2, 3, splits);
      s.pasa.beta = 0.5;
      s.pasa.alpha_in_M = alpha_in_M;
      INFO("splits " << splits << " alpha_in_M " << alpha_in_M);
      CHECK(test::rel_rmse(run_attention(in, s, 1).o, g.o) <= 1e-13);
    }
}
