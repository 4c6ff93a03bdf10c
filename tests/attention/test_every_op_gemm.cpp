// The every-op GEMM with a narrow accumulator (detail/gemm_float_kernels.cpp: the fp16 register kernel, its F16C fallback, the
// round_span loop for other formats) against a scalar reference written from the model's definition:
// c ← rnd(c + rnd(a·b)) in order over k from +0, each rnd one rounding of the exact value by the rounding
// layer (round_sum of two_prod / two_sum: MPFR-checked in tests/numeric), IEEE arithmetic where a value is
// NaN or inf. Shapes reach every tile of the kernels (1–4 row tiles, 1–4 column vectors, ragged column
// tails, several 64-column panels); values reach subnormal products, ties, the largest finite sums, overflow
// to inf (the bound then sends the GEMM to the F16C fallback), NaN and inf inputs, and signed zeros.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "pasa/attention/gemm.hpp"
#include "pasa/numeric/double_double.hpp"
#include "pasa/numeric/round.hpp"
#include "support/bits.hpp"

using namespace pasa;

namespace {

double rnd(DD x, const Format& f) {
  if (!std::isfinite(x.hi)) return round(x.hi, f);
  return round_sum(x.hi, x.lo, f);
}

// The model, one element at a time.
std::vector<double> reference(const Format& acc, std::size_t m, std::size_t n, std::size_t k, const std::vector<double>& A,
                              const std::vector<double>& B) {
  std::vector<double> C(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double c = 0.0;
      for (std::size_t t = 0; t < k; ++t) {
        const double p = rnd(two_prod(A[i * k + t], B[t * n + j]), acc);
        c = rnd(two_sum(c, p), acc);
      }
      C[i * n + j] = c;
    }
  return C;
}

// A small deterministic generator (SplitMix64 via RandomBits).
struct Gen {
  RandomBits rng;
  explicit Gen(std::uint64_t seed) : rng(seed) {}
  double uniform() { return static_cast<double>(rng.next() >> 11) * 0x1p-53; }
  // value classes: 0 normal around 1, 1 tiny (products in fp16's subnormal range), 2 every exponent of
  // the format, 3 large (sums beyond 65504), 4 class 0 with NaN, inf, ±0 sprinkled in, 5 around 2^-64
  // (products in bf16's subnormal range).
  double value(int cls, const Format& f) {
    double x = 0;
    switch (cls) {
      case 0: x = (uniform() * 2 - 1) * 2; break;
      case 1: x = (uniform() * 2 - 1) * 0x1p-9; break;
      case 2: x = std::ldexp(1 + uniform(), static_cast<int>(rng.next() % static_cast<unsigned>(f.emax - f.emin() + 8)) + f.emin() - 8) * (rng.next() & 1 ? -1 : 1); break;
      case 3: x = (uniform() * 2 - 1) * 300; break;
      case 5: x = (uniform() * 2 - 1) * 0x1p-63; break;
      default: {
        const std::uint64_t r = rng.next() % 40;
        if (r == 0) x = std::numeric_limits<double>::quiet_NaN();
        else if (r == 1) x = std::numeric_limits<double>::infinity();
        else if (r == 2) x = -std::numeric_limits<double>::infinity();
        else if (r == 3) x = -0.0;
        else if (r == 4) x = 0.0;
        else x = (uniform() * 2 - 1) * 2;
      }
    }
    const double v = round(x, f);
    return std::isinf(v) && std::isfinite(x) ? round(std::copysign(f.max_finite(), x), f) : v;
  }
};

struct Case {
  std::size_t m, n, k;
};

// A single non-finite value planted in A or B (after the random fill).
struct Plant {
  bool in_a = true;
  std::size_t at = 0;
  double value = 0;
};

// Runs the three gemm overloads (double B, float B, float A and B) and compares each with the reference.
// cls: the value class of both operands; cls_b (if >= 0) B's own.
void check(const GemmSpec& g, const Case& s, int cls, std::uint64_t seed, int cls_b = -1, const Plant* plant = nullptr) {
  Gen gen(seed);
  std::vector<double> A(s.m * s.k), B(s.k * s.n);
  for (double& x : A) x = gen.value(cls, g.a_format);
  for (double& x : B) x = gen.value(cls_b < 0 ? cls : cls_b, g.b_format);
  if (plant) (plant->in_a ? A : B)[plant->at] = plant->value;
  const std::vector<double> want = reference(g.acc.format, s.m, s.n, s.k, A, B);
  REQUIRE(gemm_uses_floats(g));
  std::vector<float> Af(A.begin(), A.end()), Bf(B.begin(), B.end());
  for (int form = 0; form < 3; ++form) {
    std::vector<double> C(s.m * s.n, -1.0);
    if (form == 0) gemm(g, s.m, s.n, s.k, A.data(), s.k, B.data(), s.n, C.data(), s.n);
    if (form == 1) gemm(g, s.m, s.n, s.k, A.data(), s.k, Bf.data(), s.n, C.data(), s.n);
    if (form == 2) gemm(g, s.m, s.n, s.k, Af.data(), s.k, Bf.data(), s.n, C.data(), s.n);
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < C.size(); ++i)
      if (!test::same_bits(C[i], want[i]) && bad++ == 0) first = i;
    INFO("acc " << g.acc.format.name << ", operands " << g.a_format.name << " x " << g.b_format.name << ", m n k " << s.m
                << " " << s.n << " " << s.k << ", class " << cls << ", form " << form << ": " << bad << " of " << C.size()
                << " differ; first C[" << first / s.n << "][" << first % s.n << "] = " << C[first] << " instead of "
                << want[first]);
    CHECK(bad == 0);
  }
}

GemmSpec spec(const char* acc, const char* a, const char* b) {
  GemmSpec g;
  g.a_format = format_by_name(a);
  g.b_format = format_by_name(b);
  g.acc = StageSpec(format_by_name(acc));
  g.out = g.acc;
  g.model = GemmModel{GemmKind::every_op};
  return g;
}

const Case kShapes[] = {{1, 1, 1},   {4, 64, 128}, {5, 17, 9},   {3, 100, 33}, {2, 48, 64},
                        {7, 130, 20}, {9, 31, 1},  {4, 65, 129}, {13, 64, 7}, {8, 129, 64}};

// One row a against the columns b, −b and 0 (k = a.size()), the kernel against the scalar reference.
void check_row(const GemmSpec& g, const std::vector<double>& a, const std::vector<double>& b) {
  const std::size_t k = a.size();
  std::vector<double> B(k * 3);  // 3 columns: b, −b, 0
  for (std::size_t t = 0; t < k; ++t) B[t * 3] = b[t], B[t * 3 + 1] = -b[t], B[t * 3 + 2] = 0;
  const std::vector<double> want = reference(g.acc.format, 1, 3, k, a, B);
  std::vector<double> C(3);
  gemm(g, 1, 3, k, a.data(), k, B.data(), 3, C.data(), 3);
  for (int j = 0; j < 3; ++j) {
    INFO("a[0] " << a[0] << " b[0] " << b[0] << " column " << j << ": " << C[j] << " instead of " << want[j]);
    CHECK(test::same_bits(C[j], want[j]));
  }
}
}  // namespace

TEST_CASE("every-op GEMM, fp16 accumulator: every tile, value class and overload", "[gemm]") {
  std::uint64_t seed = 1;
  for (const Case& s : kShapes)
    for (int cls = 0; cls < 5; ++cls) check(spec("fp16", "fp16", "fp16"), s, cls, seed++);
  // NaN or inf in one operand only (each must keep the GEMM out of the register kernel by itself), many or
  // one, anywhere in the vectorised and the scalar parts of the bound's passes.
  for (const Case& s : {Case{4, 64, 40}, Case{3, 20, 200}}) {
    check(spec("fp16", "fp16", "fp16"), s, 4, seed++, 0);
    check(spec("fp16", "fp16", "fp16"), s, 0, seed++, 4);
  }
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const Plant& p : {Plant{true, 3, inf}, Plant{true, 40 + 17, -inf}, Plant{true, 2 * 40 + 39, nan},
                         Plant{false, 5, -inf}, Plant{false, 17 * 64 + 30, nan}, Plant{false, 39 * 64 + 63, inf}})
    check(spec("fp16", "fp16", "fp16"), {4, 64, 40}, 0, seed++, -1, &p);
  // Operands whose values are fp16 values (fp8) take the register kernel too; bf16 ones the fallback.
  for (const char* op : {"fp8_e4m3fn", "fp8_e5m2"})
    for (int cls : {0, 2, 4}) check(spec("fp16", op, "fp16"), {6, 70, 40}, cls, seed++);
  for (int cls : {0, 2, 4}) check(spec("fp16", "bf16", "fp8_e4m3fn"), {6, 70, 40}, cls, seed++);
}

TEST_CASE("every-op GEMM, bf16 accumulator over bf16 values: every tile and value class", "[gemm]") {
  // The register kernel (bf16 or fp8 operands, the loose bound holds), the round_span loop otherwise
  // (class 2 reaches 2^127: the bound fails; NaN/inf; fp16 operands are not bf16 values).
  std::uint64_t seed = 500;
  for (const Case& s : kShapes)
    for (int cls : {0, 1, 2, 3, 4, 5}) check(spec("bf16", "bf16", "bf16"), s, cls, seed++);
  for (int cls : {0, 5}) check(spec("bf16", "fp8_e4m3fn", "bf16"), {6, 70, 40}, cls, seed++);
  check(spec("bf16", "bf16", "bf16"), {4, 64, 40}, 5, seed++, 0);  // subnormal products times values near 1
}

TEST_CASE("every-op GEMM, other narrow accumulators", "[gemm]") {
  std::uint64_t seed = 100;
  for (const char* acc : {"bf16", "fp8_e5m2", "fp8_e4m3fn"})
    for (const Case& s : {Case{5, 70, 33}, Case{4, 64, 16}})
      for (int cls : {0, 2, 4}) check(spec(acc, "fp16", "fp16"), s, cls, seed++);
  for (int cls : {0, 2, 4}) check(spec("bf16", "bf16", "bf16"), {5, 70, 33}, cls, seed++);
}

TEST_CASE("every-op GEMM, fp16 accumulator at the edge of the bound", "[gemm]") {
  // k = 1: 65504·1 = 65504 (the bound holds, the register kernel's largest result); 65504·1 + a tiny second
  // term (the bound fails by an ulp: the fallback, same bits); products that round to 65504 and to inf; a sum
  // that reaches exactly 65520 (inf) and one that stays at 65504.
  const GemmSpec g = spec("fp16", "fp16", "fp16");
  struct Row {
    std::vector<double> a, b;
  };
  const Row rows[] = {{{65504}, {1}},           {{65504, 1}, {1, 0x1p-24}}, {{255.875}, {255.875}},
                      {{256}, {255.875}},        {{32752, 16}, {1, 1}},      {{32752, 8}, {1, 1}},
                      {{-65504, 1}, {1, -16}},   {{0x1p-14, 0x1p-24}, {0x1p-11, 0x1p-1}}};
  for (const Row& r : rows) check_row(g, r.a, r.b);
}

TEST_CASE("every-op GEMM, bf16 accumulator at the edge of the bound", "[gemm]") {
  // The register kernel needs every operand, product and sum at most 2^100: an operand of 2^120 with tiny
  // partners (small products), a product of 2^120 followed by a small one, sums near 2^100, subnormal sums.
  const GemmSpec g = spec("bf16", "bf16", "bf16");
  struct Row {
    std::vector<double> a, b;
  };
  const Row rows[] = {{{0x1p120, 1}, {0x1p-130, 1}},       {{0x1p60, 1}, {0x1p60, 1}},
                      {{0x1p50, 0x1p50}, {0x1p49, 0x1p49}}, {{0x1p-70, -0x1p-64}, {0x1p-63, 0x1.8p-63}},
                      {{0x1p-133, 3}, {1, 0x1p-133}}};
  for (const Row& r : rows) check_row(g, r.a, r.b);
}
