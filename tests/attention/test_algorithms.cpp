// Blocked attention algorithms: fp64 exactness against the golden, PASA β = 0 ≡ FA2, the NaN rows of
// FA-FP16/FP32, PASA-FP16 on the Table 4 cases, thread independence, and the GEMM rounding models.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include <boost/random/bernoulli_distribution.hpp>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/normal_distribution.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>
#include <mpfr.h>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/gemm.hpp"
#include "../support/mpfr_round.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "../support/rel_rmse.hpp"

using namespace pasa;
using test::rel_rmse;

namespace {

// Test inputs in fp16: uniform U(x0 − Am, x0 + Am) (PASA Eq. 17) or hybrid N(x0, 1) + N(0, Am²)·Bernoulli(p)
// (Eq. 18); Q, K, V each from their own stream.
struct Gen {
  bool hybrid = false;
  double x0 = 0, am = 1, p = 0.001;
};

Tensor make_tensor(Shape sh, const Gen& g, std::uint64_t seed) {
  const Format h = format_by_name("fp16");
  Tensor t(sh, h);
  boost::random::mt19937_64 eng(seed);
  boost::random::uniform_real_distribution<double> uni(g.x0 - g.am, g.x0 + g.am);
  boost::random::normal_distribution<double> n01(0.0, 1.0);
  boost::random::bernoulli_distribution<double> bern(g.p);
  for (double& x : t.data) {
    double v = g.hybrid ? g.x0 + n01(eng) : uni(eng);
    if (g.hybrid && bern(eng)) v += g.am * n01(eng);
    x = round(v, h);
  }
  return t;
}

AttentionInputs make_inputs(std::size_t B, std::size_t Nq, std::size_t Nkv, std::size_t Sq, std::size_t Skv,
                            std::size_t D, const Gen& g, std::uint64_t seed) {
  AttentionInputs in;
  in.q = make_tensor({B, Nq, Sq, D}, g, seed * 3 + 1);
  in.k = make_tensor({B, Nkv, Skv, D}, g, seed * 3 + 2);
  in.v = make_tensor({B, Nkv, Skv, D}, g, seed * 3 + 3);
  return in;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.data.size() == b.data.size() && std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(double)) == 0;
}

AlgorithmSpec spec_of(const std::string& name, const std::string& alloc, std::size_t s1 = 64, std::size_t s2 = 64) {
  AlgorithmSpec s;
  s.name = name;
  s.alloc = allocation_preset(alloc);
  s.s1 = s1;
  s.s2 = s2;
  return s;
}

}  // namespace

TEST_CASE("every algorithm in fp64 equals the MPFR golden", "[algorithms]") {
  struct Case {
    const char* what;
    Gen g;
  };
  const Case cases[] = {{"uniform", {false, 0.0, 1.0}},
                        {"hybrid", {true, 0.0, 10.0, 0.01}},
                        {"large bias x0=30", {false, 30.0, 0.5}},
                        {"outliers x0=30", {true, 30.0, 10.0, 0.01}}};
  for (const auto& c : cases) {
    // S not a multiple of the block sizes (tails), GQA (4 query heads on 2 KV heads).
    AttentionInputs in = make_inputs(1, 4, 2, 150, 200, 64, c.g, 7);
    const Golden gold = golden_attention(in);
    for (const auto& name : algorithm_names()) {
      AlgorithmSpec spec = spec_of(name, "fp64", 64, 48);
      const AttentionOutput out = run_attention(in, spec, 2);
      const double e = rel_rmse(out.o, gold.o);
      INFO(c.what << " " << name << " rmse " << e);
      CHECK(e <= 1e-13);
      double lse_err = 0;
      for (std::size_t i = 0; i < out.lse.size(); ++i)
        lse_err = std::max(lse_err, std::fabs(out.lse[i] - gold.lse[i]) / (1 + std::fabs(gold.lse[i])));
      INFO("lse error " << lse_err);
      CHECK(lse_err <= 1e-13);
    }
  }
}

TEST_CASE("PASA reading options are exact in fp64", "[algorithms]") {
  AttentionInputs in = make_inputs(1, 2, 2, 100, 130, 64, {false, 30.0, 0.5}, 11);
  const Golden gold = golden_attention(in);
  for (bool alpha_in_M : {true, false})
    for (bool m0_zero : {true, false})
      for (const char* form : {"fa2", "printed"}) {
        AlgorithmSpec spec = spec_of("pasa", "fp64", 32, 64);
        spec.pasa.alpha_in_M = alpha_in_M;
        spec.pasa.m0_zero = m0_zero;
        spec.pasa.form = form;
        const double e = rel_rmse(run_attention(in, spec, 2).o, gold.o);
        INFO("alpha_in_M " << alpha_in_M << " m0_zero " << m0_zero << " form " << form << " rmse " << e);
        CHECK(e <= 1e-13);
      }
}

TEST_CASE("masks and fully masked rows match the golden in fp64", "[algorithms]") {
  AttentionInputs in = make_inputs(2, 2, 1, 70, 90, 16, {true, 1.0, 5.0, 0.01}, 5);
  in.mask.causal = true;           // with Sq < Skv: query i sees keys j <= i + 20
  in.mask.kv_len = {90, 33};       // batch 1: only 33 keys
  in.mask.keep.assign(2 * 70 * 90, 1);
  for (std::size_t j = 0; j < 90; ++j) in.mask.keep[(0 * 70 + 5) * 90 + j] = 0;  // batch 0, row 5: nothing
  for (std::size_t j = 0; j < 90; j += 3) in.mask.keep[(1 * 70 + 9) * 90 + j] = 0;
  const Golden gold = golden_attention(in);
  for (const auto& name : algorithm_names()) {
    const AttentionOutput out = run_attention(in, spec_of(name, "fp64", 16, 32), 2);
    INFO(name);
    CHECK(rel_rmse(out.o, gold.o) <= 1e-13);
    for (std::size_t d = 0; d < 16; ++d) CHECK(out.o.at(0, 0, 5, d) == 0.0);  // fully masked row → 0
    CHECK(out.lse[5] == -std::numeric_limits<double>::infinity());
  }
}

TEST_CASE("PASA with beta = 0 is FA2 bit for bit", "[algorithms]") {
  const Gen gens[] = {{false, 0.0, 1.0}, {false, 30.0, 0.5}, {true, 20.0, 100.0, 0.001}, {false, 20.0, 15.0}};
  for (const char* alloc : {"fa_fp16_fp32", "pasa_fp16", "fa_bf16"}) {
    for (const auto& g : gens) {
      AttentionInputs in = make_inputs(1, 2, 2, 160, 200, 64, g, 3);
      in.mask.causal = true;
      AlgorithmSpec fa2 = spec_of("fa2", alloc);
      AlgorithmSpec pasa = spec_of("pasa", alloc);
      pasa.pasa.beta = 0;
      pasa.pasa.alpha_in_M = false;  // with 1/α inside M the scaling moves into K' (a different rounding)
      const AttentionOutput a = run_attention(in, fa2, 2), b = run_attention(in, pasa, 2);
      INFO(alloc << " x0 " << g.x0 << " Am " << g.am);
      CHECK(same_bits(a.o, b.o));
    }
  }
}

namespace {
// Independent of the engine: whether some exact unscaled score of row i (head h, batch 0) reaches 65520,
// from where fp16 holds it as +inf (the row's max is then inf and inf − inf makes the row NaN in FA).
bool fp16_score_overflows(const AttentionInputs& in, std::size_t h, std::size_t i) {
  const std::size_t D = in.q.shape.D, g = in.q.shape.N / in.k.shape.N;
  for (std::size_t j = 0; j < in.k.shape.S; ++j) {
    long double s = 0;  // 64-bit significand: exact for 128 products of fp16 values of this size
    for (std::size_t d = 0; d < D; ++d) s += static_cast<long double>(in.q.at(0, h, i, d)) * in.k.at(0, h / g, j, d);
    if (s >= 65520) return true;
  }
  return false;
}
}  // namespace

TEST_CASE("FA-FP16/FP32 NaN rows are exactly the rows with an fp16 score of +inf", "[algorithms]") {
  // Uniform (20, 20) and hybrid outliers: some rows overflow (Table 4), most do not.
  for (const Gen& g : {Gen{false, 20.0, 20.0}, Gen{true, 20.0, 100.0, 0.05}}) {
    AttentionInputs in = make_inputs(1, 2, 2, 128, 256, 128, g, 19);
    const AttentionOutput out = run_attention(in, spec_of("fa2", "fa_fp16_fp32"), 2);
    std::size_t nan_rows = 0;
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t i = 0; i < 128; ++i) {
        const bool overflow = fp16_score_overflows(in, h, i);
        std::size_t nans = 0;
        for (std::size_t d = 0; d < 128; ++d) nans += std::isnan(out.o.at(0, h, i, d));
        INFO("head " << h << " row " << i);
        CHECK(nans == (overflow ? 128u : 0u));
        nan_rows += overflow;
      }
    CHECK(nan_rows > 0);
    CHECK(nan_rows < 256);
  }
}

TEST_CASE("PASA-FP16 has no NaN on the Table 4 cases (reduced S)", "[algorithms]") {
  const Gen cases[] = {{false, 30, 0.5}, {false, 20, 15}, {false, 20, 20},
                       {true, 30, 10},   {true, 20, 50},  {true, 20, 100}};
  for (const auto& g : cases) {
    AttentionInputs in = make_inputs(1, 2, 2, 256, 256, 128, g, 23);
    const AttentionOutput fa = run_attention(in, spec_of("fa2", "fa_fp16_fp32", 128, 128), 2);
    const AttentionOutput pa = run_attention(in, spec_of("pasa", "pasa_fp16", 128, 128), 2);
    std::size_t fa_nan = 0, pa_nan = 0;
    for (double x : fa.o.data) fa_nan += std::isnan(x);
    for (double x : pa.o.data) pa_nan += std::isnan(x) || std::isinf(x);
    std::size_t overflow_rows = 0;  // FA's NaN rows: those with an fp16-overflowing score (Table 4's NaN)
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t i = 0; i < 256; ++i) overflow_rows += fp16_score_overflows(in, h, i);
    INFO("hybrid " << g.hybrid << " x0 " << g.x0 << " Am " << g.am << " FA NaN " << fa_nan);
    CHECK(fa_nan == overflow_rows * 128);
    CHECK(pa_nan == 0);
  }
}

TEST_CASE("PASA-FP16 has no NaN on the Table 4 cases at (1,16,1280,128)", "[algorithms][long]") {
  const Gen cases[] = {{false, 30, 0.5}, {false, 20, 15}, {false, 20, 20},
                       {true, 30, 10},   {true, 20, 50},  {true, 20, 100}};
  for (const auto& g : cases) {
    AttentionInputs in = make_inputs(1, 16, 16, 1280, 1280, 128, g, 29);
    const AttentionOutput pa = run_attention(in, spec_of("pasa", "pasa_fp16", 128, 128));
    std::size_t pa_nan = 0;
    for (double x : pa.o.data) pa_nan += std::isnan(x) || std::isinf(x);
    INFO("hybrid " << g.hybrid << " x0 " << g.x0 << " Am " << g.am);
    CHECK(pa_nan == 0);
  }
}

TEST_CASE("results do not depend on the thread count", "[algorithms]") {
  AttentionInputs in = make_inputs(1, 3, 3, 130, 130, 32, {true, 5.0, 20.0, 0.01}, 31);
  for (const auto& name : algorithm_names()) {
    AlgorithmSpec spec = spec_of(name, "pasa_fp16", 32, 32);
    spec.alloc.spec("o").round.mode = RoundMode::stochastic;
    spec.alloc.spec("s").round.mode = RoundMode::stochastic;
    spec.seed = 99;
    INFO(name);
    CHECK(same_bits(run_attention(in, spec, 1).o, run_attention(in, spec, 2).o));
    CHECK(same_bits(run_attention(in, spec, 1).o, run_attention(in, spec, 3).o));
  }
}

TEST_CASE("set-up on several threads: inputs rounded in chunks, non-finite inputs named as by one thread",
          "[algorithms]") {
  // fp64 inputs of more than one 65536-element chunk (2 x 560 x 64 = 71680 per tensor) rounded to the q, k,
  // v stages: round toward zero (rounded chunk by chunk on the threads) and stochastic (one stream in tensor
  // order, so on one thread).
  AttentionInputs in = make_inputs(1, 2, 2, 560, 560, 64, {true, 0.0, 3.0, 0.05}, 23);
  boost::random::mt19937_64 eng(5);
  boost::random::uniform_real_distribution<double> jitter(-1e-4, 1e-4);
  for (Tensor* t : {&in.q, &in.k, &in.v}) {
    t->format = format_by_name("fp64");
    for (double& x : t->data) x += jitter(eng);  // values no longer fp16
  }
  for (RoundMode mode : {RoundMode::toward_zero, RoundMode::stochastic})
    for (const char* name : {"fa2", "pasa"}) {
      AlgorithmSpec spec = spec_of(name, std::string(name) == "pasa" ? "pasa_fp16" : "fa_fp16_fp32", 128, 128);
      for (const char* st : {"q", "k", "v"}) spec.alloc.spec(st).round.mode = mode;
      spec.seed = 3;
      INFO(name << ", mode " << static_cast<int>(mode));
      const AttentionOutput one = run_attention(in, spec, 1);
      CHECK(same_bits(one.o, run_attention(in, spec, 2).o));
      CHECK(same_bits(one.o, run_attention(in, spec, 3).o));
    }
  // Two non-finite values in different chunks of K: the error names the first, whatever the threads.
  in.k.data[70000] = std::nan("");
  in.k.data[1000] = INFINITY;
  for (int threads : {1, 2, 3})
    CHECK_THROWS_WITH(run_attention(in, spec_of("fa2", "fa_fp16_fp32"), threads),
                      Catch::Contains("K has a non-finite element inf at (b=0, n=0, s=15, d=40)"));
}

namespace {

// The GEMM referencenamespace {

// The GEMM reference: each model's steps on exact MPFR values (2400 bits hold every sum here exactly),
// each rounding done by MPFR to the accumulator format (precision p, emin/emax, subnormalize), nothing
// rounded through double and nothing from pasa::round.
double gemm_reference(const GemmSpec& g, const std::vector<double>& A, const std::vector<double>& B, std::size_t i,
                      std::size_t j, std::size_t n, std::size_t k) {
  mpfr_t acc, x, prod;
  mpfr_inits2(2400, acc, x, prod, nullptr);
  mpfr_set_zero(acc, 1);
  auto to_acc = [&](mpfr_t v) { mpfr_set_d(v, test::mpfr_round_to(v, g.acc.format, g.acc.round), MPFR_RNDN); };
  const std::size_t step = g.model.kind == GemmKind::chunked ? static_cast<std::size_t>(g.model.chunk) : 1;
  for (std::size_t t0 = 0; t0 < k; t0 += step) {
    mpfr_set_zero(x, 1);
    for (std::size_t t = t0; t < std::min(k, t0 + step); ++t) {
      mpfr_set_d(prod, A[i * k + t], MPFR_RNDN);
      mpfr_mul_d(prod, prod, B[t * n + j], MPFR_RNDN);  // exact
      if (g.model.kind == GemmKind::every_op) to_acc(prod);
      mpfr_add(x, x, prod, MPFR_RNDN);  // exact
    }
    mpfr_add(acc, acc, x, MPFR_RNDN);  // exact
    to_acc(acc);
  }
  const double r = test::mpfr_round_to(acc, g.out.format, g.out.round);
  mpfr_clears(acc, x, prod, nullptr);
  return r;
}

bool same_value(double a, double b) { return std::isnan(a) ? std::isnan(b) : a == b; }

}  // namespace

TEST_CASE("GEMM models round each step once, every mode, against MPFR", "[algorithms][gemm]") {
  const std::size_t m = 5, n = 67, k = 23;  // exercises the 4×64 register tiles and their edges
  boost::random::mt19937_64 eng(5);
  boost::random::uniform_real_distribution<double> uni(-3.0, 3.0);
  boost::random::uniform_int_distribution<int> spread(-14, 6);
  const Format fo = format_by_name("fp16");
  for (const char* in_fmt : {"fp16", "fp32", "bf16", "fp64"})
    for (const char* acc_fmt : {"fp32", "fp16", "bf16", "p=15,emax=15", "fp64"})
      for (RoundMode mode : {RoundMode::nearest_even, RoundMode::toward_zero, RoundMode::toward_pos,
                             RoundMode::toward_neg, RoundMode::odd})
        for (GemmKind kind : {GemmKind::ordered, GemmKind::every_op, GemmKind::chunked}) {
          const Format fi = format_by_name(in_fmt), fa = format_by_name(acc_fmt);
          std::vector<double> A(m * k), B(k * n), C(m * n);
          // Magnitudes spread over 2^20 so that sums cancel and carry bits below the accumulator's precision.
          for (double& x : A) x = round(std::ldexp(uni(eng), spread(eng)), fi);
          for (double& x : B) x = round(std::ldexp(uni(eng), spread(eng)), fi);
          const StageSpec acc{fa, RoundOptions{mode}}, out{fo, RoundOptions{mode}};
          GemmSpec g{fi, fi, acc, out, GemmModel{kind, 4}};
          gemm(g, m, n, k, A.data(), k, B.data(), n, C.data(), n);
          for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) {
              INFO(in_fmt << " acc " << acc_fmt << " mode " << round_mode_name(mode) << " model "
                          << static_cast<int>(kind) << " at " << i << "," << j);
              REQUIRE(same_value(C[i * n + j], gemm_reference(g, A, B, i, j, n, k)));
            }
        }
}

TEST_CASE("GEMM: the double-rounding cases", "[algorithms][gemm]") {
  // Each value by hand and by MPFR's single rounding of the exact result (gemm_reference).
  const Format fp16 = format_by_name("fp16"), fp32 = format_by_name("fp32"), bf16 = format_by_name("bf16");
  auto check = [](const GemmSpec& g, std::vector<double> A, std::vector<double> B, double by_hand) {
    double c = 0;
    gemm(g, 1, 1, A.size(), A.data(), A.size(), B.data(), 1, &c, 1);
    INFO("model " << static_cast<int>(g.model.kind) << " acc " << g.acc.format.name << " engine " << c);
    CHECK(c == by_hand);
    CHECK(gemm_reference(g, A, B, 0, 0, 1, A.size()) == by_hand);
  };
  // fp32 RZ accumulator, fp16 operands: 256·256 + 2^-24·(−2^-24) = 65536 − 2^-48, RZ: 65536 − 2^-8 (through
  // double: 65536).
  const StageSpec rz32{fp32, RoundOptions{RoundMode::toward_zero}};
  for (GemmKind kind : {GemmKind::ordered, GemmKind::chunked})
    check(GemmSpec{fp16, fp16, rz32, rz32, GemmModel{kind, 16}}, {256, 0x1p-24}, {256, -0x1p-24}, 65535.99609375);
  // chunked, RNE fp32 accumulator, fp16 inputs: 64 + 2^-17 + 2^-18 − 2^-48 is below the fp32 midpoint
  // 64 + 3·2^-18 (which RN to double reaches, and which ties to 64 + 2^-16).
  const StageSpec rne32{fp32, {}};
  check(GemmSpec{fp16, fp16, rne32, rne32, GemmModel{GemmKind::chunked, 16}}, {8, 0x1p-9, 0x1p-9, 0x1p-24},
        {8, 0x1p-8, 0x1p-9, -0x1p-24}, 64 + 0x1p-17);
  // fp32 operands into a bf16 RNE accumulator: 1 + 3·2^-8 − 2^-60 is below bf16's midpoint: 1 + 2^-7
  // (through double: the tie 1 + 3·2^-8, to even 1.015625).
  const StageSpec rneb{bf16, {}};
  check(GemmSpec{fp32, fp32, rneb, rneb, GemmModel{GemmKind::chunked, 16}}, {1, 3 * 0x1p-8, 0x1p-30}, {1, 1, -0x1p-30},
        1.0078125);
  // fp64 operands, fp32 RZ accumulator: (1 + 2^-30)(1 − 2^-30) = 1 − 2^-60, whose double is 1 (the product's low
  // part −2^-60 decides): RZ 1 − 2^-24.
  const Format fp64 = format_by_name("fp64");
  for (GemmKind kind : {GemmKind::ordered, GemmKind::chunked, GemmKind::every_op})
    check(GemmSpec{fp64, fp64, rz32, rz32, GemmModel{kind, 16}}, {1 + 0x1p-30}, {1 - 0x1p-30}, 1 - 0x1p-24);
}

TEST_CASE("every preset runs every algorithm with an error its formats explain", "[algorithms]") {
  // Benign inputs (no overflow anywhere): the error must be of the order of the allocation's coarsest
  // format, i.e. far below 1 and far above the fp64 level for the low-precision presets.
  AttentionInputs in = make_inputs(1, 2, 1, 96, 112, 32, {false, 0.0, 1.0}, 41);
  const Golden gold = golden_attention(in);
  for (const auto& preset : allocation_preset_names())
    for (const auto& name : algorithm_names()) {
      const AttentionOutput out = run_attention(in, spec_of(name, preset, 32, 48), 2);
      const double e = rel_rmse(out.o, gold.o);
      const double u = allocation_preset(preset).stage("p").unit_roundoff();  // the coarsest stage in every preset
      INFO(preset << " " << name << " rmse " << e);
      CHECK(std::isfinite(e));
      CHECK(e <= 16 * u);
      if (preset != "fp64") CHECK(e >= 1e-7);
    }
}

TEST_CASE("run_attention refuses a block size of 0", "[algorithms]") {
  AttentionInputs in = make_inputs(1, 1, 1, 8, 8, 4, {}, 1);
  AlgorithmSpec bad = spec_of("fa2", "fp64");
  bad.s2 = 0;
  CHECK_THROWS_AS(run_attention(in, bad), InputError);
}

TEST_CASE("PASA runs bf16 inputs in fp16 when asked (paper 2.2)", "[algorithms]") {
  AttentionInputs in = make_inputs(1, 2, 2, 64, 96, 32, {false, 2.0, 1.0}, 43);
  const Format bf16 = format_by_name("bf16");
  for (Tensor* t : {&in.q, &in.k, &in.v}) {
    for (double& x : t->data) x = round(x, bf16);
    t->format = bf16;
  }
  AlgorithmSpec converted = spec_of("pasa", "pasa_bf16", 32, 32);
  AlgorithmSpec as_fp16 = spec_of("pasa", "pasa_fp16", 32, 32);
  as_fp16.alloc.name = converted.alloc.name;
  CHECK(same_bits(run_attention(in, converted, 2).o, run_attention(in, as_fp16, 2).o));
  AlgorithmSpec kept = converted;
  kept.pasa.bf16_to_fp16 = false;
  const Tensor o_kept = run_attention(in, kept, 2).o;
  CHECK_FALSE(same_bits(o_kept, run_attention(in, converted, 2).o));
  for (double x : o_kept.data) CHECK(round(x, bf16) == x);  // stored in bf16 when not converted
}
