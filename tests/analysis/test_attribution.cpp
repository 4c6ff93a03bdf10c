// Error attribution on constructed cases whose answer is known: one low-precision stage takes the whole
// error; the fp64 allocation has nothing to attribute; PASA's invariance view is neutral when M is exact.
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <span>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include "pasa/analysis/attribution.hpp"
#include "pasa/analysis/beta_solver.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/numeric/round.hpp"

using namespace pasa;

namespace {

// Q, K, V ~ U(x0 − am, x0 + am) (PASA Eq. 17), rounded to fp16.
AttentionInputs uniform_case(Shape sh, double x0, double am, std::uint64_t seed) {
  const Format h = format_by_name("fp16");
  boost::random::mt19937_64 rng(seed);
  boost::random::uniform_real_distribution<double> u(x0 - am, x0 + am);
  AttentionInputs in;
  for (Tensor* t : {&in.q, &in.k, &in.v}) {
    *t = Tensor(sh, h);
    for (double& x : t->data) x = round(u(rng), h);
  }
  return in;
}

// Eq. 19 by hand: ‖O − G‖₂ / ‖G‖₂.
double rel_l2(std::span<const double> o, std::span<const double> g) {
  long double num = 0, den = 0;
  for (std::size_t i = 0; i < o.size(); ++i) {
    num += (long double)(o[i] - g[i]) * (o[i] - g[i]);
    den += (long double)g[i] * g[i];
  }
  return std::sqrt((double)(num / den));
}

const StageShare& row(const std::vector<StageShare>& rows, const std::string& stage) {
  for (const StageShare& r : rows)
    if (r.stage == stage) return r;
  FAIL("no stage " << stage);
  return rows.front();
}

}  // namespace

TEST_CASE("attribution: a single low-precision stage takes the whole error", "[attribution]") {
  const AttentionInputs in = uniform_case({1, 2, 96, 16}, 1.0, 0.5, 7);
  const Golden g = golden_attention(in);
  AlgorithmSpec spec;
  spec.name = "fa2";
  spec.alloc = allocation_preset("fp64");
  spec.s1 = spec.s2 = 32;

  SECTION("stored output in fp16: baseline equals the golden rounded to fp16") {
    spec.alloc.stage("out") = format_by_name("fp16");
    const auto rows = attribute_error(in, spec, g, 2);
    REQUIRE(rows.size() == stage_names().size());
    std::vector<double> rounded(g.o.data.begin(), g.o.data.end());
    for (double& x : rounded) x = round(x, format_by_name("fp16"));
    // Independent reference: the fp64 blocked algorithm is exact to ~1e-16, so its output rounded to fp16
    // is the golden rounded to fp16.
    CHECK(rows[0].rmse_base == Approx(rel_l2(rounded, g.o.data)).epsilon(1e-6));
    CHECK(rows[0].rmse_base > 1e-5);
    CHECK(rows[0].rmse_fp64 < 1e-13);
    for (const StageShare& r : rows) {
      INFO(r.stage);
      if (r.stage == "out") {
        CHECK(r.format == "fp16");
        CHECK(r.share == Approx(1.0).epsilon(1e-8));
        CHECK(r.share_only == Approx(1.0).epsilon(1e-8));
      } else {
        CHECK(r.share == 0.0);
        CHECK(r.share_only == 0.0);
      }
    }
  }

  SECTION("P before the P·V GEMM in fp16") {
    spec.alloc.stage("p") = format_by_name("fp16");
    const auto rows = attribute_error(in, spec, g, 2);
    const StageShare& p = row(rows, "p");
    CHECK(p.rmse_base > 1e-5);
    CHECK(p.rmse_lifted < 1e-13);
    CHECK(p.share == Approx(1.0).epsilon(1e-8));
    CHECK(p.share_only == Approx(1.0).epsilon(1e-8));
  }

  SECTION("two low stages: each view sees both, lifting either leaves the other's error") {
    spec.alloc.stage("p") = format_by_name("fp16");
    spec.alloc.stage("out") = format_by_name("bf16");  // bf16 output rounding dominates fp16 P
    const auto rows = attribute_error(in, spec, g, 2);
    const StageShare& p = row(rows, "p");
    const StageShare& o = row(rows, "out");
    CHECK(o.share_only > p.share_only);
    CHECK(o.share > p.share);
    CHECK(o.share > 0.5);
    CHECK(p.share < 0.5);
    // The "only" runs are exactly the single-stage allocations.
    AlgorithmSpec only_p = spec;
    only_p.alloc.stage("out") = format_by_name("fp64");
    const Metrics m = compare_outputs(run_attention(in, only_p, 2).o, g.o);
    CHECK(p.rmse_only == m.rmse);
    CHECK(o.rmse_lifted == m.rmse);
  }
}

TEST_CASE("attribution: the fp64 allocation has nothing to attribute", "[attribution]") {
  const AttentionInputs in = uniform_case({1, 1, 64, 8}, 20.0, 0.5, 3);
  const Golden g = golden_attention(in);
  for (const char* algo : {"fa2", "pasa"}) {
    AlgorithmSpec spec;
    spec.name = algo;
    spec.alloc = allocation_preset("fp64");
    spec.s1 = spec.s2 = 16;
    const auto rows = attribute_error(in, spec, g, 2);
    for (const StageShare& r : rows) {
      INFO(algo << " " << r.stage);
      CHECK(r.rmse_base < 1e-13);
      CHECK(r.rmse_base == r.rmse_fp64);
      CHECK(r.reduction == 0.0);
      CHECK(r.share == 0.0);
      CHECK(r.share_only == 0.0);
    }
  }
}

TEST_CASE("attribution: a kernel recipe is refused, not reported as 0 % everywhere", "[attribution]") {
  const AttentionInputs in = uniform_case({1, 1, 16, 8}, 0.0, 1.0, 3);
  const Golden g = golden_attention(in);
  AlgorithmSpec spec;
  spec.name = "fa2";
  spec.alloc = allocation_preset("fp64");
  spec.kernel = kernel_recipe("torch_flash_sm90");
  CHECK_THROWS_AS(attribute_error(in, spec, g, 2), InputError);
  CHECK_THROWS_WITH(attribute_error(in, spec, g, 2), Catch::Contains("torch_flash_sm90") &&
                                                         Catch::Contains("no allocation stages"));
}

TEST_CASE("attribution: overflow NaN is attributed to the fp16 score stage", "[attribution]") {
  // x0 = 30, D = 128: every score q·k ≈ 115200 > 65504, so S leaving the GEMM in fp16 (FA-FP16/FP32, PASA
  // Fig. 2) is +inf and the softmax gives NaN (PASA Table 4: 100 %); with S in fp32 nothing overflows.
  const AttentionInputs in = uniform_case({1, 1, 32, 128}, 30.0, 0.5, 5);
  const Golden g = golden_attention(in);
  AlgorithmSpec spec;
  spec.name = "fa2";
  spec.alloc = allocation_preset("fa_fp16_fp32");
  spec.s1 = spec.s2 = 16;
  const auto rows = attribute_error(in, spec, g, 2);
  const StageShare& s = row(rows, "s");
  CHECK(s.nan_pct_base == 100.0);
  CHECK(std::isnan(s.rmse_base));
  CHECK(std::isnan(s.share));
  CHECK(s.nan_pct_lifted == 0.0);
  CHECK(std::isfinite(s.rmse_lifted));
  CHECK(s.nan_pct_only == 100.0);
  for (const StageShare& r : rows)
    if (r.stage != "s") CHECK(r.nan_pct_only == 0.0);
}

TEST_CASE("attribution: PASA invariance view", "[attribution]") {
  const AttentionInputs in = uniform_case({1, 1, 64, 64}, 20.0, 0.5, 11);  // D = 64: α = 8, exact scaling
  const Golden g = golden_attention(in);
  AlgorithmSpec spec;
  spec.name = "pasa";
  spec.alloc = allocation_preset("pasa_fp16");
  spec.s1 = spec.s2 = 32;
  SECTION("β whose rounded M is exact: β* = β and the same output") {
    spec.pasa.beta = 1.0 - 0x1p-5;  // β/32 = 31·2^-10 and (1 − β/32)/8 are fp16 numbers: M exact in fp16
    const InvarianceView v = invariance_view(in, spec, g, 2);
    CHECK(v.inva_r == v.inva);
    CHECK(v.beta_opt == spec.pasa.beta);
    CHECK(v.rmse_opt == v.rmse);
    CHECK(v.rmse_exact_M == v.rmse);
  }
  SECTION("β with a rounded M: β* from the solver, its invariance exact") {
    spec.pasa.beta = 0.99;
    const InvarianceView v = invariance_view(in, spec, g, 2);
    BetaOptions opt;
    opt.sqrt_d = 64;
    CHECK(v.beta_opt == solve_beta(0.99, 32, format_by_name("fp16"), opt).beta);
    CHECK(v.inva_r != v.inva);
    CHECK(std::isfinite(v.rmse_opt));
  }
  SECTION("s1 != s2: M is over a KV block, n = s2 (Eq. 10), its realised invariance Eq. 20-21 by hand") {
    spec.s1 = 16;
    spec.pasa.beta = 0.99;
    const InvarianceView v = invariance_view(in, spec, g, 2);
    // M's entries in fp16 with 1/α = 1/8 inside (alpha_in_M): b = α·fl(β/(nα)), a = α·fl((1 − β/n)/α) + b, and
    // f = b·n/(a(a − b·n)) + (1 − a)/a. The quotients are formed in double, then rounded to fp16 (neither
    // lies near an fp16 midpoint: the double's error cannot change the fp16 value).
    const Format h = format_by_name("fp16");
    const double n = 32, alpha = 8, beta = 0.99;
    const double b = alpha * pasa::round(beta / (n * alpha), h);
    const double a = alpha * pasa::round((1 - beta / n) / alpha, h) + b;
    const double f = b * n / (a * (a - b * n)) + (1 - a) / a;
    CHECK(v.inva == Approx(beta / (1 - beta)).epsilon(1e-14));
    CHECK(v.inva_r == Approx(f).epsilon(1e-12));
    BetaOptions with_alpha;
    with_alpha.sqrt_d = 64;
    CHECK(v.inva_r != Approx(practical_invariance(beta, 16, h, with_alpha)).epsilon(1e-6));
  }
  spec.name = "fa2";
  CHECK_THROWS_AS(invariance_view(in, spec, g, 2), InputError);
}

// Issue 23: attribution lifts one stage at a time to fp64; on a tensor-core allocation (every *_h100 preset)
// and in the FP8 recipe that fed the engine 53-bit operands and ended in "internal error". Lifted GEMMs are
// defined in docs/attribution.md: every preset must attribute, every lifted and "only" run be finite, and
// the all-lifted run be the exact computation (the golden to 1e-13).
TEST_CASE("attribution: every preset, and the FP8 recipe", "[attribution]") {
  const AttentionInputs in = uniform_case({1, 1, 24, 16}, 1.0, 0.5, 5);
  const Golden g = golden_attention(in);
  auto check = [&](const AlgorithmSpec& spec) {
    std::vector<StageShare> rows;
    REQUIRE_NOTHROW(rows = attribute_error(in, spec, g, 1));
    CHECK(rows.front().rmse_fp64 <= 1e-13);
    CHECK(std::isfinite(rows.front().rmse_base));
    for (const StageShare& r : rows) {
      INFO(r.stage);
      CHECK(std::isfinite(r.rmse_lifted));
      CHECK(std::isfinite(r.rmse_only));
    }
  };
  for (const std::string& preset : allocation_preset_names()) {
    INFO(preset);
    AlgorithmSpec spec;
    spec.name = preset.starts_with("pasa") ? "pasa" : "fa2";
    spec.alloc = allocation_preset(preset);
    spec.s1 = spec.s2 = 8;
    check(spec);
  }
  // [FA3, §3.3] on FA3's allocation (docs/fp8.md): block scales, the Hadamard transform, P offset; fa2 and
  // pasa, with the shift after and before quantisation.
  for (const char* preset : {"fa_fp8", "fa_fp8_h100"})
    for (int variant = 0; variant < 3; ++variant) {
      INFO(preset << " with the FP8 recipe, variant " << variant);
      AlgorithmSpec spec;
      spec.name = variant == 0 ? "fa2" : "pasa";
      spec.alloc = allocation_preset(preset);
      spec.s1 = spec.s2 = 8;
      spec.quant.scales = QuantScale::block;
      spec.quant.hadamard = true;
      spec.quant.p_offset = 8;
      spec.quant.shift_first = variant == 2;
      check(spec);
    }
}

TEST_CASE("attribution: lifted GEMMs on a tensor-core allocation", "[attribution]") {
  const AttentionInputs in = uniform_case({1, 1, 24, 64}, 1.0, 0.5, 9);
  const Golden g = golden_attention(in);
  AlgorithmSpec spec;
  spec.name = "fa2";
  spec.alloc = allocation_preset("fa_fp32_h100");
  spec.alloc.spec(Stage::out) = StageSpec{format_by_name("fp64")};  // (an fp16 output would hide the GEMMs' models)
  spec.s1 = spec.s2 = 8;
  const std::vector<StageShare> rows = attribute_error(in, spec, g, 1);
  auto rmse = [&](const AlgorithmSpec& s) { return compare_outputs(run_attention(in, s, 1).o, g.o).rmse; };
  const std::size_t pv = static_cast<std::size_t>(GemmId::pv), qk = static_cast<std::size_t>(GemmId::qk);
  // p in fp64 cannot enter the tensor core, as the run itself says; lifted, the P·V GEMM runs ordered (its
  // accumulator as allocated) and the Q·Kᵀ GEMM keeps the H100 model.
  AlgorithmSpec up = spec;
  up.alloc.spec(Stage::p) = StageSpec{format_by_name("fp64")};
  CHECK_THROWS_AS(run_attention(in, up, 1), InputError);
  up.alloc.gemm_override[pv] = GemmModel(GemmKind::ordered);
  CHECK(row(rows, "p").rmse_lifted == rmse(up));
  AlgorithmSpec both = up;
  both.alloc.gemm = GemmModel(GemmKind::ordered);
  CHECK(rmse(both) != row(rows, "p").rmse_lifted);  // (the H100 model of Q·Kᵀ matters here)
  // The accumulator lifted: that GEMM exact (ordered in fp64), the other one as allocated.
  AlgorithmSpec acc = spec;
  acc.alloc.spec(Stage::qk_acc) = StageSpec{format_by_name("fp64")};
  acc.alloc.gemm_override[qk] = GemmModel(GemmKind::ordered);
  CHECK(row(rows, "qk_acc").rmse_lifted == rmse(acc));
  // A lifted q stage leaves the inputs as they are (fp16): the engine takes them, its model stays.
  AlgorithmSpec uq = spec;
  uq.alloc.spec(Stage::q) = StageSpec{format_by_name("fp64")};
  CHECK(row(rows, "q").rmse_lifted == rmse(uq));
}

TEST_CASE("attribution: block-scale schemes are quantisation stages of their own", "[attribution]") {
  const AttentionInputs in = uniform_case({1, 1, 40, 64}, 0.0, 1.0, 11);
  const Golden g = golden_attention(in);
  AlgorithmSpec spec;
  spec.name = "fa2";
  spec.alloc = allocation_preset("fa_fp32");
  spec.s1 = spec.s2 = 16;
  spec.quant.q_block = block_scheme_by_name("int8_per_block");
  spec.quant.p_block = block_scheme_by_name("mxfp8_e4m3");
  const std::vector<StageShare> rows = attribute_error(in, spec, g, 1);
  auto rmse = [&](const AlgorithmSpec& s) { return compare_outputs(run_attention(in, s, 1).o, g.o).rmse; };
  AlgorithmSpec exact = spec;
  for (const std::string& s : stage_names()) exact.alloc.spec(s) = StageSpec{format_by_name("fp64")};
  exact.quant = QuantOptions{};
  for (const char* name : {"q_block", "p_block"}) {
    INFO(name);
    const StageShare& r = row(rows, name);
    const bool q = std::string(name) == "q_block";
    CHECK(r.format == (q ? "int8_per_block" : "mxfp8_e4m3"));
    AlgorithmSpec lifted = spec;  // the scheme removed
    (q ? lifted.quant.q_block : lifted.quant.p_block) = std::nullopt;
    CHECK(r.rmse_lifted == rmse(lifted));
    AlgorithmSpec only = exact;  // that scheme alone on the exact run
    (q ? only.quant.q_block : only.quant.p_block) = q ? spec.quant.q_block : spec.quant.p_block;
    CHECK(r.rmse_only == rmse(only));
    CHECK(r.rmse_fp64 == rmse(exact));
    CHECK(r.rmse_only > 10 * r.rmse_fp64);  // (INT8 Q and an E4M3 P cost far more than the fp64 floor)
  }
  for (const StageShare& r : rows) CHECK(r.stage != "k_block");  // (no scheme, no row)
}
