// The GEMM entry point of the front ends (study/hardware_compare.hpp batched_gemm, gemm_model_by_name,
// h100_gemm_model; pasa-gemm and pasa.gemm call them): against MPFR-rounded dot products (the ordered model one
// rounding per step, the "exact" tensor-core model one rounding per block of 16), and the model chosen by
// input format as the _h100 presets choose it.
#include <catch2/catch.hpp>

#include <mpfr.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "pasa/attention/allocation.hpp"
#include "pasa/attention/gemm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/numeric/round.hpp"
#include "pasa/study/hardware_compare.hpp"
#include "support/mpfr_round.hpp"

using namespace pasa;

namespace {

// Operands on a format's grid, wide-ranging (so that alignment and cancellation matter).
std::vector<double> draw(std::size_t n, const Format& f, std::mt19937_64& eng) {
  std::normal_distribution<double> nd(0, 1);
  std::uniform_int_distribution<int> ex(-6, 6);
  std::vector<double> v(n);
  for (double& x : v) x = round(std::ldexp(nd(eng), ex(eng)), f);
  return v;
}

// C[q][i][j] with an MPFR accumulator rounded to `acc` after every `group` exact products (group 1: the
// ordered model; 16: the exact tensor-core model), then to `out`: written from the models' definitions
// (attention/gemm.hpp, allocation.hpp TensorCore "exact"), not from the library's code.
std::vector<double> reference(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const std::vector<double>& A,
                              const std::vector<double>& B, std::size_t group, const Format& acc, const Format& out) {
  std::vector<double> C(batch * m * n);
  mpfr_t s, p;
  mpfr_init2(s, 4096);
  mpfr_init2(p, 256);
  for (std::size_t q = 0; q < batch; ++q)
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        double a = 0;  // the accumulator, a value of acc
        for (std::size_t t0 = 0; t0 < k; t0 += group) {
          mpfr_set_d(s, a, MPFR_RNDN);
          for (std::size_t t = t0; t < std::min(k, t0 + group); ++t) {
            mpfr_set_d(p, A[(q * m + i) * k + t], MPFR_RNDN);
            mpfr_mul_d(p, p, B[(q * k + t) * n + j], MPFR_RNDN);  // exact: 256 bits hold the product
            mpfr_add(s, s, p, MPFR_RNDN);                          // exact: 4096 bits hold the sum
          }
          a = test::mpfr_round_to(s, acc, RoundOptions{});
        }
        C[(q * m + i) * n + j] = round(a, out);  // a is a double: RNE to `out` once
      }
  mpfr_clears(s, p, nullptr);
  return C;
}

bool same_bits(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i] && std::signbit(x[i]) == std::signbit(y[i]))) return false;
  return true;
}

}  // namespace

TEST_CASE("batched_gemm: the ordered and exact tensor-core models equal MPFR-rounded dot products", "[gemm][frontend]") {
  std::mt19937_64 eng(25);
  const Format f16 = format_by_name("fp16"), bf16 = format_by_name("bf16"), f32 = format_by_name("fp32");
  const std::size_t batch = 2, m = 5, n = 6, k = 67;
  for (const Format& in : {f16, bf16}) {
    const std::vector<double> A = draw(batch * m * k, in, eng), B = draw(batch * k * n, in, eng);
    for (const Format& acc : {f32, f16}) {
      for (const Format& out : {f32, f16}) {
        CAPTURE(in.name, acc.name, out.name);
        const GemmSpec ordered{in, in, StageSpec{acc}, StageSpec{out}, gemm_model_by_name("ordered", in, "t")};
        CHECK(same_bits(batched_gemm(ordered, batch, m, n, k, A, B), reference(batch, m, n, k, A, B, 1, acc, out)));
      }
      const GemmSpec exact{in, in, StageSpec{f32}, StageSpec{f16}, gemm_model_by_name("exact", in, "t")};
      CHECK(same_bits(batched_gemm(exact, batch, m, n, k, A, B), reference(batch, m, n, k, A, B, 16, f32, f16)));
    }
  }
  // The reference must be able to tell the models apart (else the checks above prove little).
  const std::vector<double> A = draw(m * k, f16, eng), B = draw(k * n, f16, eng);
  const GemmSpec ordered{f16, f16, StageSpec{f16}, StageSpec{f32}, GemmModel{}};
  CHECK_FALSE(same_bits(batched_gemm(ordered, 1, m, n, k, A, B), reference(1, m, n, k, A, B, 16, f16, f32)));
}

TEST_CASE("The GEMM model by input format is the _h100 presets' model", "[gemm][frontend]") {
  for (const char* preset : {"fa_fp16_h100", "fa_bf16_h100", "fa_fp8_h100", "pasa_fp8_h100"}) {
    const Allocation a = allocation_preset(preset);
    CAPTURE(preset);
    CHECK(h100_gemm_model(a.spec(Stage::q).format) == a.gemm);
    CHECK(gemm_model_by_name("h100", a.spec(Stage::q).format, "--gemm") == a.gemm);
  }
  // fp8 inputs get the FP8 model (block 32, 13 alignment bits, 14-bit block sums), not the fp16 one.
  const GemmModel e4 = h100_gemm_model(format_by_name("fp8_e4m3fn"));
  CHECK(e4.tc == tensor_core_preset("h100_e4m3"));
  CHECK_FALSE(e4.tc == tensor_core_preset("h100_fp16"));
  CHECK(h100_gemm_model(format_by_name("fp8_e5m2")).tc == tensor_core_preset("h100_e5m2"));
  CHECK(h100_gemm_model(format_by_name("tf32")).tc == tensor_core_preset("h100_tf32"));
  CHECK_THROWS_WITH(h100_gemm_model(format_by_name("fp32")), Catch::Contains("no H100 tensor-core model for fp32"));
  CHECK_THROWS_WITH(gemm_model_by_name("orderd", format_by_name("fp16"), "--model"),
                    Catch::Contains("--model: unknown GEMM model \"orderd\"") && Catch::Contains("h100_e4m3"));
  CHECK(gemm_model_by_name(R"({"model": "chunked", "chunk": 4})", format_by_name("fp16"), "m") ==
        GemmModel{GemmKind::chunked, 4});
}
