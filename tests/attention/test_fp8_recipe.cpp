// FlashAttention-3's FP8 recipe (QuantOptions): the Hadamard transform against a dense Sylvester matrix, the
// scales against fp32 arithmetic, the quantisation against a table of every E4M3 value (not the rounding
// layer), and the engines with scales, transform and P offset against the MPFR golden in fp64.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/normal_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/quantise.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "../support/rel_rmse.hpp"

using namespace pasa;
using test::rel_rmse;

namespace {

// Every finite E4M3 (OCP "e4m3fn", [OCP8] §5.3) magnitude from its bit fields: bias 7, 3 fraction bits,
// subnormals at exponent field 0, S.1111.111 is NaN (so 448 is the largest).
std::vector<double> e4m3_magnitudes() {
  std::vector<double> v;
  for (int e = 0; e < 16; ++e)
    for (int m = 0; m < 8; ++m) {
      if (e == 15 && m == 7) continue;
      v.push_back(e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10));
    }
  return v;  // increasing
}

// Round to nearest E4M3, ties to the even fraction, saturating at ±448 (from the table, by distance).
double e4m3_reference(long double x) {
  static const std::vector<double> t = e4m3_magnitudes();
  const long double a = std::fabs(x);
  if (a >= 448) return std::copysign(448.0, static_cast<double>(x));
  std::size_t i = 0;
  while (i + 1 < t.size() && t[i + 1] <= a) ++i;  // t[i] <= a < t[i+1]
  const long double lo = t[i], hi = t[i + 1];
  double r;
  if (a - lo < hi - a) r = lo;
  else if (a - lo > hi - a) r = hi;
  else r = i % 2 == 0 ? lo : hi;  // the even fraction: index i = 8·e + m, so m's parity is i's
  return std::copysign(r, static_cast<double>(x));
}

Tensor normal_tensor(Shape sh, double sigma, double outlier, std::uint64_t seed) {
  Tensor t(sh, format_by_name("fp16"));
  boost::random::mt19937_64 eng(seed);
  boost::random::normal_distribution<double> n01(0.0, 1.0);
  boost::random::uniform_real_distribution<double> u(0.0, 1.0);
  for (double& x : t.data) {
    double v = sigma * n01(eng);
    if (u(eng) < 0.01) v += outlier * n01(eng);
    x = round(v, format_by_name("fp16"));
  }
  return t;
}

}  // namespace

TEST_CASE("the random Hadamard transform is H_D·diag(signs)/sqrt(D), orthogonal and reproducible", "[fp8]") {
  for (std::size_t D : {2u, 8u, 64u, 128u}) {
    const std::vector<double> s = hadamard_signs(D, 7);
    CHECK(s == hadamard_signs(D, 7));
    if (D >= 64) CHECK(s != hadamard_signs(D, 8));
    for (double x : s) CHECK(std::fabs(x) == 1.0);
    boost::random::mt19937_64 eng(D);
    boost::random::normal_distribution<double> n01(0.0, 1.0);
    std::vector<double> x(2 * D);
    for (double& v : x) v = n01(eng);
    std::vector<double> y = x;
    hadamard_rows(y.data(), 2, D, s);
    // The dense reference: Sylvester's H[i][j] = (−1)^popcount(i & j), in long double.
    double worst = 0;
    for (std::size_t r = 0; r < 2; ++r)
      for (std::size_t i = 0; i < D; ++i) {
        long double acc = 0;
        for (std::size_t j = 0; j < D; ++j)
          acc += (std::popcount(i & j) % 2 ? -1.0L : 1.0L) * s[j] * x[r * D + j];
        acc /= std::sqrt(static_cast<long double>(D));
        worst = std::max(worst, static_cast<double>(std::fabs(acc - y[r * D + i])));
      }
    INFO("D = " << D);
    CHECK(worst <= 1e-14);
    // Orthogonality: norms and the dot product of the two rows (a score q·k) are kept.
    long double n0 = 0, m0 = 0, d0 = 0, d1 = 0;
    for (std::size_t i = 0; i < D; ++i) {
      n0 += x[i] * x[i];
      m0 += y[i] * y[i];
      d0 += x[i] * x[D + i];
      d1 += y[i] * y[D + i];
    }
    CHECK(std::fabs(static_cast<double>(m0 / n0) - 1) <= 1e-14);
    CHECK(std::fabs(static_cast<double>(d1 - d0)) <= 1e-13 * static_cast<double>(std::sqrt(n0) * D));
  }
  std::vector<double> x(12);
  CHECK_THROWS_AS(hadamard_rows(x.data(), 1, 12, std::vector<double>(12, 1.0)), InputError);
}

TEST_CASE("FP8 scales are fp32(amax)·fp32(1/448); quantisation rounds x/scale once to E4M3", "[fp8]") {
  std::vector<double> amaxes = {1.0, 3.14159, 65504.0, 1e-3, 0.1};
  for (int i = 1; i <= 200; ++i) amaxes.push_back(round(0.37 * i * i, format_by_name("fp16")));
  for (double amax : amaxes) {
    const float ref = static_cast<float>(amax) * (1.0f / 448.0f);  // torch: times the fp32 reciprocal
    CHECK(fp8_scale(amax, 448) == static_cast<double>(ref));
  }
  CHECK(fp8_scale(0.0, 448) == 1.0);
  StageSpec e4m3(format_by_name("fp8_e4m3fn"));
  e4m3.round.overflow = Overflow::saturate;
  boost::random::mt19937_64 eng(3);
  boost::random::normal_distribution<double> n01(0.0, 1.0);
  int checked = 0, mismatches = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> x(64);
    double amax = 0;
    for (double& v : x) {
      v = round(std::ldexp(n01(eng), trial % 20 - 10), format_by_name("fp16"));
      amax = std::max(amax, std::fabs(v));
    }
    const double s = fp8_scale(amax, 448);
    std::vector<double> q = x;
    quantise(q.data(), q.size(), s, e4m3);
    for (std::size_t i = 0; i < x.size(); ++i) {
      ++checked;
      if (q[i] != e4m3_reference(static_cast<long double>(x[i]) / s)) ++mismatches;
    }
    // amax maps to 448 (or just below it: the scale is rounded), never beyond
    double qmax = 0;
    for (double v : q) qmax = std::max(qmax, std::fabs(v));
    CHECK(qmax <= 448);
    CHECK(qmax >= 416);
  }
  CHECK(checked == 12800);
  CHECK(mismatches == 0);
  // ties: 1 + 2^-4 lies halfway between 1 and 1.125 (E4M3 has 3 fraction bits): the even one, 1
  std::vector<double> t = {1.0625, 1.1875, -1.0625, 500.0, -1e6};
  quantise(t.data(), t.size(), 1.0, e4m3);
  CHECK(t == std::vector<double>{1.0, 1.25, -1.0, 448.0, -448.0});
}

TEST_CASE("FP8 groups: one scale per tensor, per (batch, head) or per block of rows, from that group's amax",
          "[fp8]") {
  // 3 heads of S = 11 rows × D = 4, blocks of 4 rows (a tail of 3); every head and block with its own
  // magnitude, so that a scale from the wrong group (another head, half a block) is a different number.
  const std::size_t heads = 3, S = 11, D = 4, rows = 4, nb = 3;
  boost::random::mt19937_64 eng(17);
  boost::random::normal_distribution<double> n01(0.0, 1.0);
  std::vector<double> x(heads * S * D);
  for (std::size_t h = 0; h < heads; ++h)
    for (std::size_t i = 0; i < S; ++i)
      for (std::size_t d = 0; d < D; ++d)
        x[(h * S + i) * D + d] = round(std::ldexp(n01(eng), static_cast<int>(2 * h + i)), format_by_name("fp16"));
  StageSpec e4m3(format_by_name("fp8_e4m3fn"));
  e4m3.round.overflow = Overflow::saturate;
  auto amax_of = [&](std::size_t h0, std::size_t h1, std::size_t i0, std::size_t i1) {  // heads × rows, by hand
    double m = 0;
    for (std::size_t h = h0; h < h1; ++h)
      for (std::size_t i = i0; i < i1; ++i)
        for (std::size_t d = 0; d < D; ++d) m = std::max(m, std::fabs(x[(h * S + i) * D + d]));
    return m;
  };
  auto torch_scale = [](double amax) { return static_cast<double>(static_cast<float>(amax) * (1.0f / 448.0f)); };
  for (QuantScale kind : {QuantScale::tensor, QuantScale::head, QuantScale::block}) {
    QuantOptions qo;
    qo.scales = kind;
    std::vector<double> q = x;
    const std::vector<double> scales = quantise_groups(q.data(), heads, S, D, rows, qo, e4m3, nullptr);
    REQUIRE(scales.size() == heads * nb);
    for (std::size_t h = 0; h < heads; ++h)
      for (std::size_t b = 0; b < nb; ++b) {
        const std::size_t i0 = b * rows, i1 = std::min(S, i0 + rows);
        const double want = kind == QuantScale::tensor ? torch_scale(amax_of(0, heads, 0, S))
                            : kind == QuantScale::head ? torch_scale(amax_of(h, h + 1, 0, S))
                                                       : torch_scale(amax_of(h, h + 1, i0, i1));
        INFO(quant_scale_name(kind) << " head " << h << " block " << b);
        CHECK(scales[h * nb + b] == want);
        for (std::size_t i = i0; i < i1; ++i)
          for (std::size_t d = 0; d < D; ++d) {
            const std::size_t at = (h * S + i) * D + d;
            CHECK(q[at] == e4m3_reference(static_cast<long double>(x[at]) / want));
          }
      }
  }
}

TEST_CASE("fa2 and pasa in fp64 with the FP8 recipe's scales, transform and P offset equal the golden", "[fp8]") {
  AttentionInputs in;
  in.q = normal_tensor({1, 2, 150, 64}, 1.0, 20.0, 11);
  in.k = normal_tensor({1, 2, 200, 64}, 1.0, 20.0, 12);
  in.v = normal_tensor({1, 2, 200, 64}, 1.0, 20.0, 13);
  const Golden gold = golden_attention(in);
  for (const char* name : {"fa2", "pasa"})
    for (QuantScale sc : {QuantScale::none, QuantScale::tensor, QuantScale::head, QuantScale::block})
      for (int variant : {0, 1, 2}) {  // plain, Hadamard, PASA's shift before quantisation
        const bool had = variant == 1;
        if (variant == 2 && (std::string(name) != "pasa" || sc == QuantScale::none)) continue;
        AlgorithmSpec spec;
        spec.name = name;
        spec.alloc = allocation_preset("fp64");
        spec.quant.shift_first = variant == 2;
        spec.s1 = 64;
        spec.s2 = 48;
        spec.quant.scales = sc;
        spec.quant.hadamard = had;
        spec.quant.p_offset = 8;
        const AttentionOutput out = run_attention(in, spec, 2);
        const double e = rel_rmse(out.o, gold.o);
        double lse_err = 0;
        for (std::size_t i = 0; i < out.lse.size(); ++i)
          lse_err = std::max(lse_err, std::fabs(out.lse[i] - gold.lse[i]) / (1 + std::fabs(gold.lse[i])));
        INFO(name << " scales " << quant_scale_name(sc) << " variant " << variant << ": rmse " << e << ", lse " << lse_err);
        CHECK(e <= 1e-13);
        CHECK(lse_err <= 1e-13);
      }
}

TEST_CASE("FP8 recipe: scales make FA-FP8 and PASA-FP8 invariant to the inputs' magnitude", "[fp8]") {
  // Q·2^-12 and K·2^12 have the same scores; a plain E4M3 cast flushes the small Q to zero, while with scales
  // (fp32(amax)/448 is then exactly 2^∓12 times the original scale) the quantised values and the descale
  // product s_q·s_k are those of the original inputs: the outputs are the same bits.
  AttentionInputs in;
  in.q = normal_tensor({1, 1, 256, 128}, 1.0, 20.0, 21);
  in.k = normal_tensor({1, 1, 256, 128}, 1.0, 20.0, 22);
  in.v = normal_tensor({1, 1, 256, 128}, 1.0, 20.0, 23);
  AttentionInputs small = in;
  for (double& x : small.q.data) x = std::ldexp(x, -12);
  for (double& x : small.k.data) x = std::ldexp(x, 12);
  small.q.format = small.k.format = format_by_name("fp32");
  small.scale = in.effective_scale();
  for (const char* name : {"fa2", "pasa"}) {
    AlgorithmSpec spec;
    spec.name = name;
    spec.alloc = allocation_preset("fa_fp8_h100");  // FA3's stages: fp32 but Q, K, V, P (PASA: K') in E4M3
    spec.quant.p_offset = 8;
    const AttentionOutput plain = run_attention(small, spec, 2), plain_ref = run_attention(in, spec, 2);
    INFO(name);
    CHECK(plain.o.data != plain_ref.o.data);  // without scales the magnitude matters
    for (QuantScale sc : {QuantScale::tensor, QuantScale::head, QuantScale::block})
      for (int variant : {0, 1, 2}) {  // plain, Hadamard, PASA's shift before quantisation
        if (variant == 2 && std::string(name) != "pasa") continue;
        spec.quant.scales = sc;
        spec.quant.hadamard = variant == 1;
        spec.quant.shift_first = variant == 2;
        INFO(quant_scale_name(sc) << " variant " << variant);
        CHECK(run_attention(small, spec, 2).o.data == run_attention(in, spec, 2).o.data);
      }
  }
}

TEST_CASE("the FP8 recipe reads and prints as JSON; errors name the path", "[fp8]") {
  const auto j = nlohmann::json::parse(
      R"({"name": "pasa", "alloc": "pasa_fp8_h100", "quant": {"scales": "block", "hadamard": true, "hadamard_seed": 5, "p_offset": 8, "shift_first": true}})");
  const AlgorithmSpec s = algorithm_from_json(j, "cfg");
  CHECK(s.quant.scales == QuantScale::block);
  CHECK(s.quant.hadamard);
  CHECK(s.quant.hadamard_seed == 5);
  CHECK(s.quant.p_offset == 8);
  CHECK(s.quant.fmax == 448);
  CHECK(s.quant.shift_first);
  CHECK(algorithm_from_json(to_json(s), "again") == s);
  auto fails = [](const char* text, const char* needle) {
    try {
      algorithm_from_json(nlohmann::json::parse(text), "cfg");
      FAIL("accepted " << text);
    } catch (const InputError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  };
  fails(R"({"name": "fa1", "quant": {"scales": "head"}})", "/quant");
  fails(R"({"name": "fa2", "quant": {"scales": "row"}})", "/quant/scales");
  fails(R"({"name": "fa2", "quant": {"p_offset": 2.5}})", "/quant/p_offset");
  fails(R"({"name": "fa2", "quant": {"fmax": 0}})", "/quant/fmax");
  fails(R"({"name": "fa2", "quant": {"scales": "block", "shift_first": true}})", "/quant/shift_first");
  fails(R"({"name": "pasa", "quant": {"shift_first": true}})", "/quant/shift_first");
}
