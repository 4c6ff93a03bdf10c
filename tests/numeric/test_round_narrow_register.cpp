// The fp16 and bf16 register roundings of the every-op GEMM (numeric/round_narrow_register.hpp) against the
// rounding layer's kernels (round_span, itself checked against MPFR by test_round_mpfr.cpp), on their whole
// domain: every product of two finite fp16 values and every RN32 sum of two finite fp16 values whose fp16
// rounding is finite; every product and RN32 sum of two bf16 values of magnitude <= 2^100 whose bf16
// rounding is <= 2^100 (the reference: the exact product, or the double sum, rounded once by round_span;
// RNbf16(RN64(c + p)) = RNbf16(c + p) [Figueroa 1995]). [long]: every pair (2^32 each); by default every a
// (or c) against a strided sample of b (or p) that keeps every exponent, both signs, ties, subnormal
// products and the overflow edge.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"
#include "pasa/numeric/round_narrow_register.hpp"

using namespace pasa;

#if defined(__AVX512F__) && defined(__AVX512DQ__)
namespace {

// Every finite fp16 value, and a strided subset (stride 1: all): patterns 0..0x7BFF and their negatives.
std::vector<float> fp16_values(unsigned stride) {
  const Format h = format_by_name("fp16");
  std::vector<float> v;
  for (std::uint32_t b = 0; b < 0x7C00; b += stride) {
    v.push_back(static_cast<float>(decode(b, h)));
    v.push_back(static_cast<float>(decode(b | 0x8000, h)));
  }
  v.push_back(65504.0f);  // the largest finite values, whatever the stride
  v.push_back(-65504.0f);
  return v;
}

struct Count {
  std::uint64_t checked = 0, mismatched = 0;
  float first_x = 0, first_y = 0, got = 0, want = 0;
  void note(float x, float y, float g, float w) {
    if (mismatched++ == 0) first_x = x, first_y = y, got = g, want = w;
  }
};

// Compare 16 results with the reference for the arguments xs (the exact float the helper rounds).
// Zeros compare by value: the helpers give +0 for a zero product (see the header: the sign cannot reach
// the GEMM's sums), and an fp16 sum c + p that is zero is +0 in RNE for both.
void compare(const float* args, const float* got, std::size_t n, const float* x, const float* y, Count& c) {
  const Format h = format_by_name("fp16");
  std::vector<float> want(args, args + n);
  round_span(std::span<const float>(want), std::span<float>(want), h);
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isinf(want[i])) continue;  // outside the domain: the GEMM proves it away
    ++c.checked;
    const bool same = std::bit_cast<std::uint32_t>(got[i]) == std::bit_cast<std::uint32_t>(want[i]) ||
                      (got[i] == 0.0f && want[i] == 0.0f);
    if (!same) c.note(x[i], y[i], got[i], want[i]);
  }
}

Count check_products(const std::vector<float>& as, const std::vector<float>& bs) {
  Count c;
  std::vector<float> prod(bs.size() + 16), got(bs.size() + 16), xs(bs.size() + 16);
  std::vector<float> b(bs);
  b.resize((bs.size() + 15) / 16 * 16, 0.0f);
  for (float a : as) {
    const __m512 av = _mm512_set1_ps(a), a13 = _mm512_set1_ps(a * 8192.0f);
    for (std::size_t j = 0; j < b.size(); j += 16) {
      const __m512 bv = _mm512_loadu_ps(b.data() + j);
      _mm512_storeu_ps(prod.data() + j, _mm512_mul_ps(av, bv));  // exact: 22 <= 24 bits
      _mm512_storeu_ps(got.data() + j, fp16_register::product(av, a13, bv));
    }
    std::fill(xs.begin(), xs.end(), a);
    compare(prod.data(), got.data(), bs.size(), xs.data(), b.data(), c);
  }
  return c;
}

Count check_sums(const std::vector<float>& cs, const std::vector<float>& ps) {
  Count c;
  std::vector<float> sum(ps.size() + 16), got(ps.size() + 16), xs(ps.size() + 16);
  std::vector<float> p(ps);
  p.resize((ps.size() + 15) / 16 * 16, 0.0f);
  for (float cv : cs) {
    const __m512 cc = _mm512_set1_ps(cv);
    for (std::size_t j = 0; j < p.size(); j += 16) {
      const __m512 x = _mm512_add_ps(cc, _mm512_loadu_ps(p.data() + j));  // RN32(c + p), as the GEMM forms it
      _mm512_storeu_ps(sum.data() + j, x);
      _mm512_storeu_ps(got.data() + j, fp16_register::sum(x));
    }
    std::fill(xs.begin(), xs.end(), cv);
    compare(sum.data(), got.data(), ps.size(), xs.data(), p.data(), c);
  }
  return c;
}

// Every finite bf16 value of magnitude <= 2^100, strided.
std::vector<float> bf16_values(unsigned stride) {
  std::vector<float> v;
  for (std::uint32_t b = 0; b < 0x7F80; b += stride) {
    const float x = std::bit_cast<float>(b << 16);
    if (x > 0x1p100f) break;
    v.push_back(x);
    v.push_back(-x);
  }
  return v;
}

// op 0: products, 1: sums. Reference: the exact double (a product of two bf16 values) or the double sum,
// rounded to bf16 by round_span; results beyond 2^100 are outside the domain.
Count check_bf16(const std::vector<float>& as, const std::vector<float>& bs, int op) {
  const Format bf = format_by_name("bf16");
  Count c;
  std::vector<float> b(bs);
  b.resize((bs.size() + 15) / 16 * 16, 0.0f);
  std::vector<float> got(b.size());
  std::vector<double> want(b.size());
  for (float a : as) {
    const __m512 av = _mm512_set1_ps(a), a16 = _mm512_set1_ps(a * 65536.0f);
    for (std::size_t j = 0; j < b.size(); j += 16) {
      const __m512 bv = _mm512_loadu_ps(b.data() + j);
      const __m512 r = op == 0 ? bf16_register::product(av, a16, bv) : bf16_register::sum(_mm512_add_ps(av, bv));
      _mm512_storeu_ps(got.data() + j, r);
    }
    for (std::size_t j = 0; j < b.size(); ++j)
      want[j] = op == 0 ? static_cast<double>(a) * b[j] : static_cast<double>(a) + b[j];
    round_span(std::span<const double>(want), std::span<double>(want), bf);
    for (std::size_t j = 0; j < bs.size(); ++j) {
      if (!(std::fabs(want[j]) <= 0x1p100)) continue;
      ++c.checked;
      if (!(static_cast<double>(got[j]) == want[j])) c.note(a, b[j], got[j], static_cast<float>(want[j]));
    }
  }
  return c;
}

void report(const char* what, const Count& c) {
  INFO(what << ": " << c.mismatched << " of " << c.checked << " differ; first " << c.first_x << " and " << c.first_y
            << ": " << c.got << " instead of " << c.want);
  CHECK(c.checked > 0);
  CHECK(c.mismatched == 0);
}

}  // namespace

TEST_CASE("fp16 register rounding: products and sums of fp16 values, strided sample", "[round]") {
  // Stride 37 (prime): every residue of the 10 fraction bits is reached across exponents; the argument
  // side runs over all 63,488 finite values.
  const std::vector<float> all = fp16_values(1), some = fp16_values(37);
  report("RN16(a·b)", check_products(all, some));
  report("RN16(c + p)", check_sums(all, some));
}

TEST_CASE("bf16 register rounding: products and sums of bf16 values, strided sample", "[round]") {
  const std::vector<float> all = bf16_values(1), some = bf16_values(37);
  report("RNbf16(a·b)", check_bf16(all, some, 0));
  report("RNbf16(c + p)", check_bf16(all, some, 1));
  // subnormal results and ties among them: every pair of small values
  std::vector<float> small;
  for (float x : all)
    if (std::fabs(x) < 0x1p-60f && std::fabs(x) > 0x1p-80f) small.push_back(x);
  const std::vector<float> sub = {0x1p-133f, 0x1.8p-127f, -0x1.fcp-127f, 0x1p-126f, 0x1.02p-126f, -0x1p-120f};
  for (float v : sub) REQUIRE(round(v, format_by_name("bf16")) == v);  // arguments of the domain: bf16 values
  report("RNbf16(a·b), small", check_bf16(small, small, 0));
  report("RNbf16(c + p), subnormal", check_bf16(sub, sub, 1));
}

TEST_CASE("fp16 register rounding: hand-picked edges", "[round]") {
  // Ties in the subnormal range and at the normal boundary, the carry into the next binade, the largest
  // finite results (65504 = 65519.99... rounds down; 65520 rounds to inf, outside the domain).
  const std::vector<float> a = {1.0f, -1.0f, 0.5f, 3.0f, 0x1p-12f, 0x1.ffcp-1f, 0x1.004p+0f, 0x1p-14f, 0x1p-24f, 255.875f, 0.0f, -0.0f};
  const std::vector<float> b = {0x1p-13f, 0x1.8p-23f, 0x1.4p-13f, 0x1.ffcp+15f, 0x1.ffcp-2f, 0x1.004p+0f, -0x1.ffcp-1f, 0x1p-24f, 255.875f, 0.0f, -3.0f};
  const Format h = format_by_name("fp16");
  for (float v : a) REQUIRE(round(v, h) == v);  // arguments of the domain: fp16 values
  for (float v : b) REQUIRE(round(v, h) == v);
  report("RN16(a·b) edges", check_products(a, b));
  report("RN16(c + p) edges", check_sums(a, b));
}

TEST_CASE("fp16 register rounding: every pair of fp16 values", "[round][long]") {
  const std::vector<float> all = fp16_values(1);
  report("RN16(a·b), every pair", check_products(all, all));
  report("RN16(c + p), every pair", check_sums(all, all));
}

TEST_CASE("bf16 register rounding: every pair of bf16 values", "[round][long]") {
  const std::vector<float> all = bf16_values(1);
  report("RNbf16(a·b), every pair", check_bf16(all, all, 0));
  report("RNbf16(c + p), every pair", check_bf16(all, all, 1));
}
#else
TEST_CASE("fp16 register rounding: not built (needs AVX-512F and DQ)", "[round]") {
  WARN("the fp16 register kernels are not compiled in this build; the every-op GEMM uses F16C or round_span");
}
#endif
