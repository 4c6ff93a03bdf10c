// The tensor_core GEMM model (allocation.hpp TensorCore; detail/gemm_tensor_core.cpp) against an independent scalar reference:
// every term's significand as an integer, aligned to the block's largest exponent by integer shifts
// (truncation or round-half-even on the dropped bits), the aligned integers summed exactly, the sum rounded
// once to the accumulator by MPFR — nothing from the model's double-precision kernel or from pasa::round.
// Then each feature on hand-derived test vectors (the probes of experiments/gpu/tc_probe.py, whose expected
// values follow from the model's definition [Fasi et al. 2021; Khattak & Mikaitis 2025]), and the JSON.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>
#include <mpfr.h>
#include <nlohmann/json.hpp>

#include "../support/bits.hpp"
#include "../support/mpfr_round.hpp"
#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/detail/blocked_attention.hpp"
#include "pasa/attention/gemm.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/allocation_json.hpp"

using namespace pasa;

namespace {

using i128 = __int128;

// x = M · 2^X with M an integer (|M| < 2^53).
struct IntVal {
  std::int64_t M = 0;
  int X = 0;
};
IntVal int_of(double x) {
  int e = 0;
  const double f = std::frexp(x, &e);
  return {static_cast<std::int64_t>(std::ldexp(f, 53)), e - 53};
}
int bitlen(unsigned __int128 v) {
  int n = 0;
  while (v) {
    v >>= 1;
    ++n;
  }
  return n;
}
// The exponent the multiplier aligns on: floor(log2 |x|), at least the format's emin (a subnormal operand).
int op_exp(double x, const Format& f) {
  const IntVal v = int_of(x);
  const int e = v.X + bitlen(static_cast<unsigned __int128>(v.M < 0 ? -v.M : v.M)) - 1;
  return std::max(e, f.emin());
}

// sign · |M| · 2^X cut to a multiple of 2^u: trunc toward zero or round half even.
i128 cut_to(i128 M, int X, int u, bool nearest) {
  if (M == 0) return 0;
  const bool neg = M < 0;
  unsigned __int128 a = static_cast<unsigned __int128>(neg ? -M : M);
  unsigned __int128 q;
  if (X >= u) {
    q = a << (X - u);
  } else {
    const int d = u - X;
    if (d >= 127) {
      q = 0;  // |M| < 2^106: below half a unit
    } else {
      q = a >> d;
      const unsigned __int128 rem = a - (q << d), half = static_cast<unsigned __int128>(1) << (d - 1);
      if (nearest && (rem > half || (rem == half && (q & 1)))) ++q;
    }
  }
  return neg ? -static_cast<i128>(q) : static_cast<i128>(q);
}

// MPFR value of S · 2^u (exact at 2400 bits).
void set_scaled(mpfr_t r, i128 S, int u) {
  const bool neg = S < 0;
  unsigned __int128 a = static_cast<unsigned __int128>(neg ? -S : S);
  mpfr_set_ui(r, static_cast<unsigned long>(a >> 64), MPFR_RNDN);
  mpfr_mul_2ui(r, r, 64, MPFR_RNDN);
  mpfr_add_ui(r, r, static_cast<unsigned long>(a & 0xFFFFFFFFFFFFFFFFull), MPFR_RNDN);
  if (neg) mpfr_neg(r, r, MPFR_RNDN);
  mpfr_mul_2si(r, r, u, MPFR_RNDN);
}

// The reference dot product of the tensor-core model (no output rounding: the accumulator's value).
double reference_tc_dot(const TensorCore& tc, const Format& fa, const Format& fb, const StageSpec& acc,
                        const double* a, const double* b, std::size_t k) {
  mpfr_t x, y;
  mpfr_inits2(2400, x, y, nullptr);
  const RoundOptions block_opt{tc.block_round, acc.round.overflow};
  const Format tcf = tc.acc_bits == 0 ? acc.format : custom_format(tc.acc_bits, acc.format.emax);
  const bool unlimited = tc.align_bits == kUnlimitedAlign;
  double c = 0.0, outer = 0.0;
  std::size_t since = 0;
  for (std::size_t t0 = 0; t0 < k; t0 += static_cast<std::size_t>(tc.block)) {
    const std::size_t t1 = std::min(k, t0 + static_cast<std::size_t>(tc.block));
    // terms: (integer significand, exponent of its lsb, alignment exponent)
    struct Term {
      i128 M;
      int X, e;
    };
    std::vector<Term> terms;
    if (tc.acc_in_block && c != 0.0) {
      const IntVal v = int_of(c);
      terms.push_back({v.M, v.X, op_exp(c, tcf)});
    }
    for (std::size_t t = t0; t < t1; ++t) {
      if (a[t] == 0.0 || b[t] == 0.0) continue;
      const IntVal va = int_of(a[t]), vb = int_of(b[t]);
      terms.push_back({static_cast<i128>(va.M) * vb.M, va.X + vb.X, op_exp(a[t], fa) + op_exp(b[t], fb)});
    }
    double block_value = 0.0;
    if (!terms.empty()) {
      if (unlimited) {
        mpfr_set_zero(x, 1);
        for (const Term& tm : terms) {
          set_scaled(y, tm.M, tm.X);
          mpfr_add(x, x, y, MPFR_RNDN);  // exact
        }
      } else {
        int E = terms[0].e;
        for (const Term& tm : terms) E = std::max(E, tm.e);
        const int u = E - tc.align_bits;
        i128 S = 0;
        for (const Term& tm : terms) S += cut_to(tm.M, tm.X, u, tc.align_round == AlignRound::nearest);
        set_scaled(x, S, u);
      }
      block_value = test::mpfr_round_to(x, tcf, block_opt);
    }
    if (tc.acc_in_block) {
      c = block_value;
    } else {
      mpfr_set_d(x, c, MPFR_RNDN);
      mpfr_add_d(x, x, block_value, MPFR_RNDN);  // exact
      c = test::mpfr_round_to(x, tcf, block_opt);
    }
    since += t1 - t0;
    if (tc.promote > 0 && (since == static_cast<std::size_t>(tc.promote) || t1 == k)) {
      mpfr_set_d(x, outer, MPFR_RNDN);
      mpfr_add_d(x, x, c, MPFR_RNDN);
      outer = test::mpfr_round_to(x, acc.format, acc.round);
      c = 0.0;
      since = 0;
    }
  }
  mpfr_clears(x, y, nullptr);
  return tc.promote > 0 ? outer : c;
}

// One dot product through the engine's gemm (1 x 1 output, fp64 output stage: the accumulator's value).
double model_dot(const TensorCore& tc, const Format& fa, const Format& fb, const StageSpec& acc,
                 const std::vector<double>& a, const std::vector<double>& b) {
  GemmSpec g{fa, fb, acc, StageSpec{format_by_name("fp64")}, GemmModel{GemmKind::tensor_core, 16, tc}};
  double c = 0;
  gemm(g, 1, 1, a.size(), a.data(), a.size(), b.data(), 1, &c, 1);
  return c;
}

const Format& F(const char* n) {
  static std::map<std::string, Format> cache;
  auto it = cache.find(n);
  if (it == cache.end()) it = cache.emplace(n, format_by_name(n)).first;
  return it->second;
}

// C = A·B (m × k, k × n, row-major) from gemm, element by element against the reference dot product of each
// row of A with each column of B; `what` names the case in a failure.
void require_reference_gemm(const TensorCore& tc, const Format& f, const StageSpec& acc, std::size_t m,
                            std::size_t n, std::size_t k, const std::vector<double>& A, const std::vector<double>& B,
                            const std::vector<double>& C, const std::string& what) {
  std::vector<double> a(k), b(k);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t t = 0; t < k; ++t) {
        a[t] = A[i * k + t];
        b[t] = B[t * n + j];
      }
      INFO(what << " at " << i << "," << j);
      REQUIRE(C[i * n + j] == reference_tc_dot(tc, f, f, acc, a.data(), b.data(), k));
    }
}

}  // namespace

TEST_CASE("tensor_core model equals the integer-aligned scalar reference, every feature", "[gemm][tensor_core]") {
  boost::random::mt19937_64 eng(8);
  boost::random::uniform_real_distribution<double> uni(-2.0, 2.0);
  boost::random::uniform_int_distribution<int> spread(-12, 12), pick(0, 1000);
  struct Case {
    const char* in;
    TensorCore tc;
  };
  std::vector<Case> cases;
  for (const char* name : {"h100_fp16", "h100_bf16", "h100_tf32", "h100_e4m3", "h100_e4m3_fast", "h100_e5m2"}) {
    const char* in = std::string(name).find("e4m3") != std::string::npos   ? "fp8_e4m3fn"
                     : std::string(name).find("e5m2") != std::string::npos ? "fp8_e5m2"
                     : std::string(name).find("bf16") != std::string::npos ? "bf16"
                     : std::string(name).find("tf32") != std::string::npos ? "tf32"
                                                                           : "fp16";
    cases.push_back({in, tensor_core_preset(name)});
  }
  // each feature varied on the fp16 model: block sizes, accumulator outside the block, nearest alignment,
  // every normalisation rounding, few and many kept bits (the many: the expansion path), promotion
  for (int block : {1, 3, 8}) cases.push_back({"fp16", TensorCore{block, true, 25}});
  cases.push_back({"fp16", TensorCore{16, false, 25}});
  cases.push_back({"bf16", TensorCore{4, false, 10, AlignRound::nearest, RoundMode::nearest_even}});
  for (RoundMode r : {RoundMode::nearest_even, RoundMode::nearest_away, RoundMode::toward_pos, RoundMode::toward_neg})
    cases.push_back({"fp16", TensorCore{16, true, 25, AlignRound::truncate, r}});
  cases.push_back({"bf16", TensorCore{8, true, 56, AlignRound::truncate, RoundMode::nearest_away}});  // expansions
  cases.push_back({"fp16", TensorCore{16, true, 25, AlignRound::nearest}});
  for (int bits : {0, 5, 49, 56}) cases.push_back({"bf16", TensorCore{8, true, bits}});
  cases.push_back({"fp16", TensorCore{4, true, 20, AlignRound::truncate, RoundMode::toward_zero, 8}});
  cases.push_back({"fp16", TensorCore{8, false, 30, AlignRound::truncate, RoundMode::nearest_even, 0, 12}});
  cases.push_back({"bf16", TensorCore{16, true, kUnlimitedAlign, AlignRound::truncate, RoundMode::nearest_even}});
  cases.push_back({"fp8_e5m2", TensorCore{2, false, kUnlimitedAlign, AlignRound::truncate, RoundMode::toward_zero, 6}});
  const std::size_t m = 3, n = 37;
  for (const Case& cs : cases) {
    const Format& fi = F(cs.in);
    const StageSpec acc{F("fp32")};
    for (std::size_t k : {1, 7, 16, 33, 64, 130}) {
      std::vector<double> A(m * k), B(k * n), C(m * n);
      // exponents spread over 2^24 (half the terms), zeros and subnormals of the input format included
      auto draw = [&] {
        const int r = pick(eng);
        if (r < 30) return 0.0;
        const RoundOptions sat{RoundMode::nearest_even, Overflow::saturate};  // fp8: within range
        if (r < 60) return round(uni(eng) * fi.min_normal(), fi, sat);
        return round(std::ldexp(uni(eng), r < 500 ? spread(eng) : spread(eng) / 6), fi, sat);
      };
      for (double& x : A) x = draw();
      for (double& x : B) x = draw();
      GemmSpec g{fi, fi, acc, StageSpec{F("fp64")}, GemmModel{GemmKind::tensor_core, 16, cs.tc}};
      gemm(g, m, n, k, A.data(), k, B.data(), n, C.data(), n);
      std::ostringstream what;
      what << cs.in << " block " << cs.tc.block << " bits " << cs.tc.align_bits << " acc_in_block "
           << cs.tc.acc_in_block << " promote " << cs.tc.promote << " k " << k;
      require_reference_gemm(cs.tc, fi, acc, m, n, k, A, B, C, what.str());
    }
  }
}

TEST_CASE("tensor_core: a block whose aligned terms sum beyond 2^31 (fp16, bf16, tf32)", "[gemm][tensor_core]") {
  // 16 products of x² with x = 2 − 2^(1−p) (fp16: (2 − 2^-10)²) cut at 2^-25 sum to just below 2^31; the
  // accumulator, x·1 from the first block, aligned to the same exponent adds 2^25·x: the aligned sum needs 32
  // bits (a kernel that adds the terms in int32 must widen here). Rows: the sum positive, negative; columns: a
  // few scalings of B. bf16 and tf32 take the same kernel where their operands stay within its window.
  for (const char* name : {"fp16", "bf16", "tf32"}) {
    const TensorCore tc = tensor_core_preset(std::string(name) == "tf32" ? "h100_tf32" : std::string("h100_") + name);
    const Format& f = F(name);
    const double x = 2 - std::ldexp(1.0, 1 - f.p), x0 = 2 - std::ldexp(1.0, 2 - f.p);
    const StageSpec acc{F("fp32")};
    const std::size_t m = 2, n = 37, blk = static_cast<std::size_t>(tc.block), k = 3 * blk;
    std::vector<double> A(m * k, 0.0), B(k * n, 0.0), C(m * n);
    for (std::size_t i = 0; i < m; ++i) {
      A[i * k] = i == 0 ? x0 : -x0;
      for (std::size_t t = blk; t < k; ++t) A[i * k + t] = i == 0 ? x : -x;
    }
    for (std::size_t j = 0; j < n; ++j) {
      const double s = std::ldexp(1.0, static_cast<int>(j % 5) - 2);  // the same pattern at other exponents
      B[j] = s;
      for (std::size_t t = blk; t < k; ++t) B[t * n + j] = j % 7 == 3 && t == blk + 4 ? 0.5 * s : x * s;
    }
    GemmSpec g{f, f, acc, StageSpec{F("fp64")}, GemmModel{GemmKind::tensor_core, 16, tc}};
    gemm(g, m, n, k, A.data(), k, B.data(), n, C.data(), n);
    require_reference_gemm(tc, f, acc, m, n, k, A, B, C, name);
  }
}

TEST_CASE("tensor_core register strips equal the reference: every H100 model, edges, windows, inf and NaN",
          "[gemm][tensor_core]") {
  // The strips (gemm_tensor_core.cpp: pairs of rows × 32 columns, int8 or int16 exponent lanes, the FP8
  // models' e8m13 accumulator and promotion, bf16 and tf32 within a window of exponents) element by element
  // against the scalar reference, over shapes that leave a row without its pair and strips and blocks part
  // full; B given as doubles and as floats (the same bits). Draws per format: "edges" (zeros, subnormals,
  // the largest values, both signs; bf16/tf32: this takes the loop-per-block path), "window" (bf16/tf32:
  // operand exponents within [p − 51, 30], so that every product is a normal float on the grid 2^-100 and
  // the strips run, many at the low edge), "outside" (the same one exponent lower: products with bits below
  // 2^-100, which the strips must leave to the loop-per-block path), and "specials" (a few inf and NaN: where
  // IEEE arithmetic's sum is not finite, that value; elsewhere the model's).
  boost::random::mt19937_64 eng(27);
  boost::random::uniform_real_distribution<double> u01(0.0, 1.0);
  boost::random::uniform_int_distribution<int> pick(0, 999);
  struct Case {
    const char *tc, *fa, *fb;
  };
  const std::vector<Case> cases{{"h100_fp16", "fp16", "fp16"},         {"h100_bf16", "bf16", "bf16"},
                                {"h100_tf32", "tf32", "tf32"},         {"h100_e4m3", "fp8_e4m3fn", "fp8_e4m3fn"},
                                {"h100_e4m3_fast", "fp8_e4m3fn", "fp8_e4m3fn"},
                                {"h100_e5m2", "fp8_e5m2", "fp8_e4m3fn"}, {"h100_e5m2_fast", "fp8_e5m2", "fp8_e5m2"}};
  const StageSpec acc{F("fp32")};
  const RoundOptions sat{RoundMode::nearest_even, Overflow::saturate};
  for (const Case& cs : cases)
    for (const char* kind : {"edges", "window", "outside", "specials"}) {
      const Format &fa = F(cs.fa), &fb = F(cs.fb);
      const bool wide = fa.emax > 28;  // bf16, tf32
      if ((std::string(kind) == "window" || std::string(kind) == "outside") && !wide) continue;
      auto draw = [&](const Format& f) {
        const int r = pick(eng);
        const double sign = r % 2 ? -1.0 : 1.0;
        if (r < 250) return 0.0;
        if (std::string(kind) == "specials" && r < 262)
          return r < 256 || !f.has_infinity() ? std::nan("") : sign * HUGE_VAL;
        if (std::string(kind) == "window" || std::string(kind) == "outside") {  // exponents at the edges or between
          const int lo = (f.p - 1 - 50) + (std::string(kind) == "outside" ? -1 : 0);
          const int e = r < 400 ? lo : r < 450 ? 30 : lo + static_cast<int>(u01(eng) * (30 - lo));
          return round(sign * std::ldexp(1.0 + u01(eng), e), f, RoundOptions{RoundMode::toward_zero});
        }
        if (r < 320) return round(sign * u01(eng) * f.min_normal(), f, sat);  // subnormals
        if (r < 360) return round(sign * (1 - u01(eng) / 64) * f.max_finite(), f, sat);
        const int span = f.emax - f.emin();
        return round(sign * std::ldexp(1.0 + u01(eng), f.emin() + static_cast<int>(u01(eng) * span)), f, sat);
      };
      const TensorCore tc = tensor_core_preset(cs.tc);
      GemmSpec g{fa, fb, acc, StageSpec{F("fp64")}, GemmModel{GemmKind::tensor_core, 16, tc}};
      for (std::size_t m : {1u, 3u})
        for (std::size_t k : {1u, 17u, 48u, 130u}) {
          const std::size_t n = 37;
          std::vector<double> A(m * k), B(k * n), C(m * n), C2(m * n, -1.0);
          for (double& x : A) x = draw(fa);
          for (double& x : B) x = draw(fb);
          gemm(g, m, n, k, A.data(), k, B.data(), n, C.data(), n);
          const std::vector<float> Bf(B.begin(), B.end());
          gemm(g, m, n, k, A.data(), k, Bf.data(), n, C2.data(), n);
          std::vector<double> a(k), b(k);
          for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) {
              double ieee = 0.0;
              for (std::size_t t = 0; t < k; ++t) {
                a[t] = A[i * k + t];
                b[t] = B[t * n + j];
                ieee = std::fma(a[t], b[t], ieee);
              }
              INFO(cs.tc << " " << kind << " m " << m << " k " << k << " at " << i << "," << j);
              const double c = C[i * n + j];
              if (std::isnan(ieee)) REQUIRE(std::isnan(c));
              else if (std::isinf(ieee)) REQUIRE(c == ieee);
              else REQUIRE(c == reference_tc_dot(tc, fa, fb, acc, a.data(), b.data(), k));
              REQUIRE(std::bit_cast<std::uint64_t>(C2[i * n + j]) == std::bit_cast<std::uint64_t>(c));
            }
        }
    }
}

TEST_CASE("tensor_core: a bf16 subnormal operand within the window's exponent sums (h100_bf16)",
          "[gemm][tensor_core]") {
  // 1.5·2^-130 (a bf16 subnormal, a subnormal float) × 2^60: the product 1.5·2^-70 alone in its column is the
  // result; the strips read exponents from floats, where a subnormal looks like a zero, so they must leave
  // this GEMM to the loop-per-block path.
  const TensorCore tc = tensor_core_preset("h100_bf16");
  const Format& bf = F("bf16");
  const std::size_t m = 2, n = 33, k = 3;
  std::vector<double> A(m * k, 0.0), B(k * n, 0.0), C(m * n);
  A[0] = 1.5 * 0x1p-130;
  A[k + 1] = 1.0;
  for (std::size_t j = 0; j < n; ++j) {
    B[j] = 0x1p60;
    B[n + j] = 0x1p-20;
  }
  GemmSpec g{bf, bf, StageSpec{F("fp32")}, StageSpec{F("fp64")}, GemmModel{GemmKind::tensor_core, 16, tc}};
  gemm(g, m, n, k, A.data(), k, B.data(), n, C.data(), n);
  for (std::size_t j = 0; j < n; ++j) {
    REQUIRE(C[j] == 1.5 * 0x1p-70);
    REQUIRE(C[n + j] == 0x1p-20);
  }
}

TEST_CASE("tensor_core: a block led by a product with a subnormal operand (h100_fp16)", "[gemm][tensor_core]") {
  // 3·2^-24 (subnormal, at fp16's emin −14) × 1 sets E = −14: the cut is at 2^-39, so the second product,
  // 2^-28·(1 + 2^-3 + 2^-10 + 2^-13), loses its 2^-41; on its own exponent (−23) the cut would keep it, and
  // fp32 (ulp 2^-46 here) would show it.
  // (h100_fp16 runs in the register strips; with rne normalisation, in the per-block loops: the sum is an
  // fp32 value, so both give it)
  for (const RoundMode r : {RoundMode::toward_zero, RoundMode::nearest_even}) {
    TensorCore tc = tensor_core_preset("h100_fp16");
    tc.block_round = r;
    const Format& f16 = F("fp16");
    const StageSpec acc{F("fp32")};
    const std::size_t n = 37, k = 2;
    const std::vector<double> A{3 * 0x1p-24, (1 + 0x1p-10) * 0x1p-14};
    std::vector<double> B(k * n), C(n);
    for (std::size_t j = 0; j < n; ++j) {
      B[j] = 1.0;
      B[n + j] = (1 + 0x1p-3) * 0x1p-14;
    }
    GemmSpec g{f16, f16, acc, StageSpec{F("fp64")}, GemmModel{GemmKind::tensor_core, 16, tc}};
    gemm(g, 1, n, k, A.data(), k, B.data(), n, C.data(), n);
    const double b[] = {1.0, (1 + 0x1p-3) * 0x1p-14};
    const double want = 3 * 0x1p-24 + 0x1p-28 + 0x1p-31 + 0x1p-38;  // exact in fp32: the 2^-41 cut off
    REQUIRE(reference_tc_dot(tc, f16, f16, acc, A.data(), b, k) == want);
    for (std::size_t j = 0; j < n; ++j) REQUIRE(C[j] == want);
  }
}

TEST_CASE("tensor_core with unlimited bits is the exact sum rounded once per block", "[gemm][tensor_core]") {
  // One block holding all k products: the exact dot product rounded once (MPFR), in every mode.
  boost::random::mt19937_64 eng(9);
  boost::random::uniform_real_distribution<double> uni(-2.0, 2.0);
  boost::random::uniform_int_distribution<int> spread(-30, 30);
  for (RoundMode r : {RoundMode::nearest_even, RoundMode::nearest_away, RoundMode::toward_zero, RoundMode::toward_pos,
                      RoundMode::toward_neg})
    for (int rep = 0; rep < 50; ++rep) {
      const std::size_t k = 64;
      std::vector<double> a(k), b(k);
      for (std::size_t t = 0; t < k; ++t) {
        a[t] = round(std::ldexp(uni(eng), spread(eng)), F("bf16"));
        b[t] = round(std::ldexp(uni(eng), spread(eng)), F("bf16"));
      }
      mpfr_t s, p;
      mpfr_inits2(2400, s, p, nullptr);
      mpfr_set_zero(s, 1);
      for (std::size_t t = 0; t < k; ++t) {
        mpfr_set_d(p, a[t], MPFR_RNDN);
        mpfr_mul_d(p, p, b[t], MPFR_RNDN);
        mpfr_add(s, s, p, MPFR_RNDN);
      }
      const double want = test::mpfr_round_to(s, F("fp32"), RoundOptions{r});
      mpfr_clears(s, p, nullptr);
      const TensorCore tc{static_cast<int>(k), true, kUnlimitedAlign, AlignRound::truncate, r};
      REQUIRE(model_dot(tc, F("bf16"), F("bf16"), StageSpec{F("fp32")}, a, b) == want);
    }
}

// The probes of experiments/gpu/tc_probe.py, with the values the model's definition gives (and the H100
// gave: results/hardware/tc_probe_summary.csv).
TEST_CASE("tensor_core features on the probe vectors", "[gemm][tensor_core]") {
  const StageSpec fp32{F("fp32")};
  const TensorCore h16 = tensor_core_preset("h100_fp16");
  auto dot16 = [&](const TensorCore& tc, std::vector<double> a, std::vector<double> b) {
    return model_dot(tc, F("fp16"), F("fp16"), fp32, a, b);
  };
  SECTION("25 bits kept below the largest exponent sum, truncated toward zero") {
    // {+1, −1, y}: the pair cancels; y survives cut to multiples of 2^-25.
    CHECK(dot16(h16, {1, -1, 0x1p-12}, {1, 1, 0x1p-13}) == 0x1p-25);
    CHECK(dot16(h16, {1, -1, 0x1p-13}, {1, 1, 0x1p-13}) == 0.0);
    CHECK(dot16(h16, {1, -1, 1.75 * 0x1p-12}, {1, 1, 0x1p-12}) == 1.5 * 0x1p-24);
    CHECK(dot16(h16, {1, -1, -1.75 * 0x1p-12}, {1, 1, 0x1p-12}) == -1.5 * 0x1p-24);
    // 1.5·1.5 = 2.25 has exponent sum 0 (normalised: 1): the cut stays at 2^-25
    CHECK(dot16(h16, {1.5, -1.5, 0x1p-12}, {1.5, 1.5, 0x1p-13}) == 0x1p-25);
    TensorCore near = h16;
    near.align_round = AlignRound::nearest;
    CHECK(dot16(near, {1, -1, 1.75 * 0x1p-12}, {1, 1, 0x1p-12}) == 2 * 0x1p-24);
  }
  SECTION("16 products per block; the accumulator is aligned with them") {
    for (std::size_t j : {2u, 15u, 16u, 40u}) {
      std::vector<double> a(64, 0.0), b(64, 0.0);
      a[0] = 1, b[0] = 1, a[1] = -1, b[1] = 1, a[j] = 0x1p-14, b[j] = 0x1p-14;
      CHECK(dot16(h16, a, b) == (j < 16 ? 0.0 : 0x1p-28));
    }
    std::vector<double> a(64, 0.0), b(64, 0.0);  // y first, the pair in a later block
    a[0] = 0x1p-14, b[0] = 0x1p-14, a[20] = 1, b[20] = 1, a[21] = -1, b[21] = 1;
    CHECK(dot16(h16, a, b) == 0.0);  // y aligned with the pair as the accumulator: dropped
    TensorCore outside = h16;
    outside.acc_in_block = false;
    CHECK(dot16(outside, a, b) == 0x1p-28);
  }
  SECTION("tf32: 8 products per block (the H100's, docs/tensor-cores.md)") {
    const TensorCore t32 = tensor_core_preset("h100_tf32");
    for (std::size_t j : {2u, 7u, 8u, 20u}) {
      std::vector<double> a(32, 0.0), b(32, 0.0);
      a[0] = 1, b[0] = 1, a[1] = -1, b[1] = 1, a[j] = 0x1p-14, b[j] = 0x1p-14;
      CHECK(model_dot(t32, F("tf32"), F("tf32"), fp32, a, b) == (j < 8 ? 0.0 : 0x1p-28));
    }
  }
  SECTION("the block's sum rounded toward zero into fp32") {
    CHECK(dot16(h16, {1, -0x1p-12}, {1, 0x1p-13}) == 1 - 0x1p-24);  // 1 − 2^-25 → RZ
    CHECK(dot16(h16, {-1, 0x1p-12}, {1, 0x1p-13}) == -1 + 0x1p-24);
    TensorCore rne = h16;
    rne.block_round = RoundMode::nearest_even;
    CHECK(dot16(rne, {1, -0x1p-12}, {1, 0x1p-13}) == 1.0);  // a tie: to even
  }
  SECTION("FP8: 13 bits, blocks of 32, promotion to fp32 every 128 products") {
    const TensorCore e4 = tensor_core_preset("h100_e4m3"), fast = tensor_core_preset("h100_e4m3_fast");
    const Format& f8 = F("fp8_e4m3fn");
    auto dot8 = [&](const TensorCore& tc, const std::vector<double>& a, const std::vector<double>& b) {
      return model_dot(tc, f8, f8, fp32, a, b);
    };
    CHECK(dot8(e4, {256, -256, 8}, {256, 256, 1}) == 8.0);  // 2^16 · 2^-13: kept (13 bits)
    CHECK(dot8(e4, {256, -256, 4}, {256, 256, 1}) == 0.0);  // 2^16 · 2^-14: dropped
    // 8 + 9 + 2^-10: aligned to 2^3, 2^-10 is kept (13 bits); the sum 17 + 2^-10 needs 15 significant bits
    // and is cut to 14 (e8m13): 17; with the full fp32 accumulator it stays
    CHECK(dot8(e4, {4, 4, 0x1p-5}, {2, 2.25, 0x1p-5}) == 17.0);
    TensorCore wide = e4;
    wide.acc_bits = 0;
    CHECK(dot8(wide, {4, 4, 0x1p-5}, {2, 2.25, 0x1p-5}) == 17.0 + 0x1p-10);
    std::vector<double> a(256, 0.0), b(256, 0.0);
    a[0] = 0x1p-6, b[0] = 0x1p-6;                        // y = 2^-12
    a[130] = 256, b[130] = 256, a[131] = -256, b[131] = 256;  // the pair after the promotion at 128
    CHECK(dot8(e4, a, b) == 0x1p-12);
    CHECK(dot8(fast, a, b) == 0.0);
    std::swap(a[130], a[40]), std::swap(b[130], b[40]), std::swap(a[131], a[41]), std::swap(b[131], b[41]);
    CHECK(dot8(e4, a, b) == 0.0);  // within the first 128: absorbed
  }
}

TEST_CASE("tensor_core in JSON and the _h100 presets", "[gemm][tensor_core][json]") {
  using nlohmann::json;
  const Allocation a = allocation_from_json(
      json::parse(R"({"preset": "fa_fp16_fp32", "gemm": {"model": "tensor_core", "tensor_core": "h100_fp16"}})"), "");
  CHECK(a.gemm.kind == GemmKind::tensor_core);
  CHECK(a.gemm.tc == tensor_core_preset("h100_fp16"));
  const Allocation h = allocation_preset("fa_fp16_fp32_h100");
  CHECK(h.gemm == a.gemm);
  CHECK(h.stages == allocation_preset("fa_fp16_fp32").stages);
  CHECK(allocation_preset("pasa_bf16_h100").gemm.tc == tensor_core_preset("h100_bf16"));
  CHECK(allocation_preset("fa_fp8_h100").gemm.tc == tensor_core_preset("h100_e4m3"));
  CHECK(allocation_preset("fa_fp16_fp32").gemm.kind == GemmKind::ordered);  // the plain presets keep theirs
  // spelled out, overriding a named model; and back through to_json
  const Allocation s = allocation_from_json(
      json::parse(R"({"preset": "fa_bf16", "gemm": {"model": "tensor_core", "tensor_core": "h100_e5m2",
                      "block": 16, "align_bits": "unlimited", "block_round": "rne", "promote": 64, "acc_bits": 14,
                      "acc_in_block": false, "align_round": "nearest"}})"),
      "");
  const TensorCore want{16, false, kUnlimitedAlign, AlignRound::nearest, RoundMode::nearest_even, 64, 14};
  CHECK(s.gemm.tc == want);
  CHECK(allocation_from_json(to_json(s), "") == s);
  auto fails = [](const char* text, const char* where) {
    try {
      allocation_from_json(json::parse(text), "/alloc");
    } catch (const InputError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(where) != std::string::npos);
      return true;
    }
    return false;
  };
  CHECK(fails(R"({"preset": "fa_fp16", "gemm": {"model": "tensor_core", "align_bits": 61}})", "/alloc/gemm/align_bits"));
  CHECK(fails(R"({"preset": "fa_fp16", "gemm": {"model": "tensor_core", "tensor_core": "v100"}})", "v100"));
  CHECK(fails(R"({"preset": "fa_fp16", "gemm": {"model": "tensor_core", "promote": 20}})", "/alloc/gemm/promote"));
  CHECK(fails(R"({"preset": "fa_fp16", "gemm": {"model": "tensor_core", "block_round": "sr"}})", "block_round"));
  CHECK(fails(R"({"preset": "fa_fp16", "gemm": {"model": "tensor_core", "block_round": "odd"}})", "got \"ro\""));
  CHECK(allocation_from_json(json::parse(R"({"preset": "fa_fp16", "gemm": {"model": "tensor_core",
                                             "block_round": "rna"}})"),
                             "")
            .gemm.tc.block_round == RoundMode::nearest_away);
  CHECK(fails(R"({"preset": "fa_fp16", "gemm": {"block": 8}})", "need \"model\": \"tensor_core\""));
}

TEST_CASE("tensor_core on the fused path: K and V packed once per thread and head, for one run only",
          "[gemm][tensor_core]") {
  // The fused path packs a head's K and V blocks for the strips once per thread and keeps them for the
  // head's next items (fused_tile.cpp tc_block), keyed by the run (Run::serial) and the head; past 2^20
  // elements of K a head's blocks are packed tile by tile. Each run must equal the general path of the same
  // GEMMs (an all-zero position bias selects it without changing a value, as in test_reference_emulator),
  // also a run of the same shape after another run in the same thread (the same head, and likely the same
  // addresses, as the previous run's).
  auto inputs = [](std::size_t Sq, std::size_t Skv, std::size_t D, std::uint64_t seed) {
    ProblemSpec ps;
    ps.Sq = Sq;
    ps.Skv = Skv;
    ps.D = D;
    ps.seed = seed;
    ps.q = ps.k = TensorGen{GenKind::uniform, 0.5, 1.0};
    ps.v = TensorGen{GenKind::uniform, 0.0, 1.0};
    return generate_inputs(ps);
  };
  auto general = [](AttentionInputs in) {
    in.pse = Tensor({in.q.shape.B, in.q.shape.N, in.q.shape.S, in.k.shape.S}, format_by_name("fp16"));
    return in;
  };
  for (const char* preset : {"fa_fp16_fp32_h100", "fa_bf16_fp32_h100"}) {
    AlgorithmSpec spec;
    spec.name = "fa2";
    spec.alloc = allocation_preset(preset);
    spec.s1 = spec.s2 = 32;
    INFO(preset);
    {
      const AttentionInputs a = inputs(64, 96, 32, 1), b = inputs(64, 96, 32, 2);
      const detail::Run run(b, spec);
#if defined(__AVX512F__)  // (the register strips, and so this path, are AVX-512 only)
      CHECK(run.float_tiles);  // (the fused path, with the tensor-core GEMMs through their own kernels)
#else
      (void)run;
#endif
      const AttentionOutput b_first = run_attention(b, spec, 1);
      run_attention(a, spec, 1);  // its head's blocks left in this thread's buffers
      const AttentionOutput b_again = run_attention(b, spec, 1);
      CHECK(test::count_differing(b_first, b_again) == 0);
      CHECK(test::count_differing(b_again, run_attention(general(b), spec, 1)) == 0);
    }
    {  // 16400 × 64 > 2^20 elements of K: packed tile by tile
      const AttentionInputs c = inputs(16, 16400, 64, 3);
      CHECK(test::count_differing(run_attention(c, spec, 1), run_attention(general(c), spec, 1)) == 0);
    }
  }
}
