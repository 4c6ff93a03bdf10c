// Block scaling (numeric/block_scale.hpp) against independent constructions: every scale rule against its
// definition evaluated in MPFR (quotients at 200 bits, fp32 steps as MPFR roundings to 24 bits, the
// scale format's grid enumerated from its definition rather than rounded to), the elements against
// MPFR's one rounding of the exact quotient, the group layouts against SageAttention's index formulas
// written out as its kernels compute them.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <limits>
#include <vector>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <mpfr.h>

#include "pasa/core/error.hpp"
#include "pasa/numeric/block_scale.hpp"
#include "pasa/numeric/gpu_math.hpp"
#include "support/mpfr_round.hpp"

using namespace pasa;
using namespace pasa::test;

namespace {

// The positive values of a scale format by its definition: E8M0 2^-127..2^127; fp8 E4M3FN: subnormals
// m/8·2^-6, normals (1 + m/8)·2^e for e in [-6, 8], 448 the largest (S.1111.111 is NaN); fp32 is handled
// by MPFR directly.
std::vector<double> scale_grid(const std::string& f) {
  std::vector<double> g;
  if (f == "e8m0") {
    for (int e = -127; e <= 127; ++e) g.push_back(std::ldexp(1.0, e));
  } else {
    for (int m = 1; m < 8; ++m) g.push_back(std::ldexp(m / 8.0, -6));
    for (int e = -6; e <= 8; ++e)
      for (int m = 0; m < 8; ++m)
        if (!(e == 8 && m == 7)) g.push_back(std::ldexp(1 + m / 8.0, e));
  }
  return g;
}

struct Mp {
  mpfr_t v;
  explicit Mp(int prec = 200) { mpfr_init2(v, prec); }
  ~Mp() { mpfr_clear(v); }
  Mp(const Mp&) = delete;
  Mp& operator=(const Mp&) = delete;
};

// x rounded to fp32 (subnormals: to a multiple of 2^-149) in MPFR mode rnd.
double fp32_of(const mpfr_t x, mpfr_rnd_t rnd = MPFR_RNDN) {
  if (mpfr_cmpabs_ui_2exp_helper(x, -126) < 0) {
    Mp t;
    mpfr_mul_2si(t.v, x, 149, MPFR_RNDN);
    mpfr_rint(t.v, t.v, rnd);
    return std::ldexp(mpfr_get_d(t.v, MPFR_RNDN), -149);
  }
  Mp y(24);
  mpfr_set(y.v, x, rnd);
  return mpfr_get_d(y.v, MPFR_RNDN);
}

// The smallest grid value >= q (up) or the nearest, ties to the even code (the grid index of an E4M3 /
// E8M0 code is the code's parity), held to [grid.front(), grid.back()].
double on_grid(const mpfr_t q, const std::vector<double>& grid, bool up) {
  if (mpfr_cmp_d(q, grid.front()) <= 0) return grid.front();
  if (mpfr_cmp_d(q, grid.back()) >= 0) return grid.back();
  std::size_t i = 0;
  while (mpfr_cmp_d(q, grid[i + 1]) > 0) ++i;  // grid[i] < q <= grid[i + 1]
  if (up || mpfr_cmp_d(q, grid[i + 1]) == 0) return grid[i + 1];
  Mp mid, t;
  mpfr_set_d(mid.v, grid[i], MPFR_RNDN);
  mpfr_add_d(mid.v, mid.v, grid[i + 1], MPFR_RNDN);
  mpfr_div_2ui(mid.v, mid.v, 1, MPFR_RNDN);
  const int c = mpfr_cmp(q, mid.v);
  // codes: E4M3 subnormal m = 1.. is code m, so grid index i holds code i + 1; E8M0 index i is code i
  const std::size_t code_i = grid.size() == 255 ? i : i + 1;
  return c < 0 ? grid[i] : c > 0 ? grid[i + 1] : (code_i % 2 == 0 ? grid[i] : grid[i + 1]);
}

// The scale by each rule's definition (docs/block-scaling.md), independently of block_scale.cpp.
double reference_scale(double amax, const BlockScheme& s, const ElementSpec& e) {
  if (amax == 0 && s.rule != ScaleRule::sage)
    return s.scale_format == "fp32" ? 0x1p-149 : scale_grid(s.scale_format).front();
  Mp a, q, t;
  mpfr_set_d(a.v, amax, MPFR_RNDN);
  auto pow2 = [&](long k) {  // 2^k held to the scale format's range (NaN above, as OCP MX §6.3)
    const std::vector<double> g = scale_grid(s.scale_format);
    const long lo = std::ilogb(g.front()), hi = std::ilogb(g.back());
    if (k > hi) return std::numeric_limits<double>::quiet_NaN();
    return std::ldexp(1.0, static_cast<int>(std::max(k, lo)));
  };
  const long ex = mpfr_get_exp(a.v) - 1;  // floor(log2 amax): mpfr's exponent is that of [1/2, 1)
  switch (s.rule) {
    case ScaleRule::floor: return pow2(ex - e.emax);
    case ScaleRule::ceil: return pow2((mpfr_cmp_ui_2exp(a.v, 1, ex) == 0 ? ex : ex + 1) - e.emax);
    case ScaleRule::even: {
      Mp r(e.p);  // amax rounded half away to p bits (torchao adds half an ulp of the element's mantissa)
      mpfr_round_ties_away(r.v, a.v, [&](mpfr_ptr out, mpfr_rnd_t rnd) { return mpfr_set(out, a.v, rnd); });
      return pow2(mpfr_get_exp(r.v) - 1 - e.emax);
    }
    case ScaleRule::round_up:
    case ScaleRule::nearest:
    case ScaleRule::rceil:
    case ScaleRule::recip:
    case ScaleRule::sage: {
      if (s.rule == ScaleRule::round_up) {
        mpfr_div_d(q.v, a.v, e.vmax, MPFR_RNDN);  // 200 bits: on the grid only where exact
      } else if (s.rule == ScaleRule::rceil || s.rule == ScaleRule::recip) {
        mpfr_set_d(t.v, 1.0, MPFR_RNDN);
        mpfr_div_d(t.v, t.v, e.vmax, MPFR_RNDN);
        const double r = fp32_of(t.v);
        mpfr_set_d(t.v, static_cast<float>(amax), MPFR_RNDN);
        mpfr_mul_d(t.v, t.v, r, MPFR_RNDN);
        mpfr_set_d(q.v, fp32_of(t.v), MPFR_RNDN);
      } else if (s.rule == ScaleRule::sage && s.divide == Divide::rcp_approx) {
        // one FFMA: fp32(amax)·MUFU.RCP(vmax) + fp32(1e-7), rounded once
        mpfr_set_d(t.v, static_cast<float>(amax), MPFR_RNDN);
        mpfr_mul_d(t.v, t.v, gpu::rcp_approx_ftz(static_cast<float>(e.vmax)), MPFR_RNDN);
        mpfr_add_d(t.v, t.v, static_cast<double>(1e-7f), MPFR_RNDN);
        mpfr_set_d(q.v, fp32_of(t.v), MPFR_RNDN);
      } else {
        mpfr_div_d(t.v, a.v, e.vmax, MPFR_RNDN);
        double v = fp32_of(t.v);
        if (s.rule == ScaleRule::sage) {
          mpfr_set_d(t.v, v, MPFR_RNDN);
          mpfr_add_d(t.v, t.v, static_cast<double>(1e-7f), MPFR_RNDN);
          v = fp32_of(t.v);
        }
        mpfr_set_d(q.v, v, MPFR_RNDN);
      }
      const bool up = s.rule == ScaleRule::round_up || s.rule == ScaleRule::rceil;
      if (s.scale_format == "fp32") return std::max(fp32_of(q.v, up ? MPFR_RNDU : MPFR_RNDN), 0x1p-149);
      return on_grid(q.v, scale_grid(s.scale_format), up);
    }
  }
  return 0;
}

std::vector<double> draw_amax(std::size_t n) {
  boost::random::mt19937 gen(39);
  boost::random::uniform_int_distribution<std::uint32_t> bits(0x00800000u, 0x7f7fffffu);  // normal fp32
  std::vector<double> v = {0.0, 1.0, 448.0, 6.0, 7.5, 127.0, 0.75, 1.5, 3.0, std::ldexp(1.0, -126), std::ldexp(1.0, 127)};
  for (int k = -30; k <= 30; ++k) {  // powers of two, their neighbours, and E4M3 / E8M0 midpoints
    const double p = std::ldexp(1.0, k);
    for (double m : {1.0, 1.0 + 0x1p-23, 2.0 - 0x1p-23, 1.5, 1.0625, 1.9375, 1.96875, 448.0 / 256, 1.8125})
      v.push_back(m * p);
  }
  // amax / vmax exactly on an E8M0 midpoint (1.5·2^k) or an E4M3 one (1.0625, 1.1875), for each element's vmax
  for (double vmax : {448.0, 57344.0, 127.0})
    for (int k = -20; k <= 20; ++k)
      for (double m : {1.5, 1.0625, 1.1875}) v.push_back(m * vmax * std::ldexp(1.0, k));
  while (v.size() < n) v.push_back(static_cast<double>(std::bit_cast<float>(bits(gen))));
  return v;
}

}  // namespace

TEST_CASE("every scale rule equals its definition, for E8M0, E4M3 and fp32 scales", "[block_scale]") {
  const std::vector<double> amax = draw_amax(4000);
  for (const auto& entry : kScaleRules) {
    for (const char* sf : {"e8m0", "fp8_e4m3fn", "fp32"}) {
      const bool pow2_rule = entry.value == ScaleRule::floor || entry.value == ScaleRule::ceil || entry.value == ScaleRule::even;
      if (pow2_rule && std::string(sf) == "fp32") continue;  // (2^e in fp32: the E8M0 range less one; tested via e8m0)
      for (const char* elem : {"fp8_e4m3fn", "fp8_e5m2", "int8"}) {
        for (Divide dv : {Divide::ieee, Divide::rcp_approx}) {
          if (dv == Divide::rcp_approx && entry.value != ScaleRule::sage) continue;  // (sage's contracted form)
          BlockScheme s = block_scheme_by_name("mxfp8_e4m3");
          s.rule = entry.value;
          s.scale_format = sf;
          s.element = elem;
          s.divide = dv;
          const ElementSpec e = element_spec(s);
          INFO("rule " << entry.name << ", scale format " << sf << ", element " << elem << ", divide " << int(dv));
          for (double a : amax) {
            const double got = block_scale_of(a, s, e), want = reference_scale(a, s, e);
            INFO("amax " << a);
            if (std::isnan(want)) REQUIRE(std::isnan(got));
            else REQUIRE(got == want);
          }
        }
      }
    }
  }
}

TEST_CASE("the OCP FLOOR rule: X = 2^(floor(log2 amax) - emax_elem), NaN above 2^127", "[block_scale]") {
  BlockScheme s = block_scheme_by_name("mxfp8_e4m3");
  const ElementSpec e = element_spec(s);
  CHECK(e.emax == 8);
  CHECK(block_scale_of(448.0, s, e) == 1.0);  // 448 = 1.75·2^8: X = 2^(8 - 8)
  CHECK(block_scale_of(511.0, s, e) == 1.0);  // (its elements saturate at 448)
  CHECK(block_scale_of(1.0, s, e) == 0x1p-8);
  CHECK(block_scale_of(0x1p135 * 1.5, s, e) == 0x1p127);
  CHECK(std::isnan(block_scale_of(0x1p136, s, e)));
  CHECK(std::isnan(block_scale_of(std::numeric_limits<double>::infinity(), s, e)));
  CHECK(block_scale_of(0.0, s, e) == 0x1p-127);  // an all-zero block: the smallest scale
}

TEST_CASE("elements: one rounding of the exact quotient (MPFR), integers on their own grid", "[block_scale]") {
  boost::random::mt19937 gen(7);
  boost::random::uniform_int_distribution<std::uint32_t> bits(0, 0x7f7fffffu);
  for (const char* scheme : {"mxfp8_e4m3", "mxfp8_e5m2", "int8_per_block", "mxint8", "int4_per_thread"}) {
    for (RoundMode mode : {RoundMode::nearest_even, RoundMode::nearest_away, RoundMode::toward_zero,
                           RoundMode::toward_pos, RoundMode::toward_neg}) {
      BlockScheme s = block_scheme_by_name(scheme);
      s.round = mode;
      s.quotient = Quotient::exact;
      const ElementSpec e = element_spec(s);
      INFO(scheme << " " << round_mode_name(mode));
      for (int i = 0; i < 3000; ++i) {
        const double x = (i % 2 ? -1.0 : 1.0) * static_cast<double>(std::bit_cast<float>(bits(gen) % 0x48000000u));
        const double X = i % 3 == 0 ? std::ldexp(1.0, i % 40 - 20) : static_cast<double>(std::bit_cast<float>(0x3f800000u + bits(gen) % 0x00800000u)) * 0x1p-4;
        Mp q;
        mpfr_set_d(q.v, x, MPFR_RNDN);
        mpfr_div_d(q.v, q.v, X, MPFR_RNDN);
        double want;
        if (e.integer) {  // nearest integer multiple of 2^-frac in the mode, then ±qmax
          Mp k(200);
          mpfr_mul_2si(k.v, q.v, e.frac_bits, MPFR_RNDN);
          Mp r(200);
          switch (mode) {
            case RoundMode::nearest_even: mpfr_rint(r.v, k.v, MPFR_RNDN); break;
            case RoundMode::nearest_away: mpfr_round(r.v, k.v); break;
            case RoundMode::toward_zero: mpfr_trunc(r.v, k.v); break;
            case RoundMode::toward_pos: mpfr_ceil(r.v, k.v); break;
            default: mpfr_floor(r.v, k.v); break;
          }
          const double qmax = std::ldexp(1.0, e.bits - 1) - 1;
          want = std::ldexp(std::clamp(mpfr_get_d(r.v, MPFR_RNDN), -qmax, qmax), -e.frac_bits);
        } else {
          RoundOptions o;
          o.mode = mode;
          o.overflow = Overflow::saturate;
          want = mpfr_round_to(q.v, e.format, o);
        }
        INFO("x " << x << " X " << X);
        REQUIRE(quantise_element(x, X, 1.0, s, e) == want);
      }
    }
  }
}

TEST_CASE("SageAttention2's groups: per-warp and per-thread rows as its kernels index them", "[block_scale]") {
  // triton/quant_per_thread.py: Q's program (off_blk, off_tld) of 8 per WARPQ block reads rows
  // off_blk·WARPQ + arange(WARPQ/8)·8 + off_tld and writes scale off_blk·8 + off_tld; K's (4 per WARPK)
  // rows off_blk·WARPK + arange(WARPK/8)·8 + 2·off_tld (+1), scale off_blk·4 + off_tld.
  const BlockScheme s = block_scheme_by_name("int8_per_thread");
  const std::size_t S = 200, D = 64;
  for (std::size_t blk = 0; blk * 32 < S; ++blk)
    for (std::size_t tld = 0; tld < 8; ++tld)
      for (std::size_t i = 0; i < 4; ++i) {
        const std::size_t r = blk * 32 + i * 8 + tld;
        if (r < S) CHECK(group_of(s.a, S, D, r, 5) == blk * 8 + tld);
      }
  for (std::size_t blk = 0; blk * 64 < S; ++blk)
    for (std::size_t tld = 0; tld < 4; ++tld)
      for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t one : {0u, 1u}) {
          const std::size_t r = blk * 64 + i * 8 + 2 * tld + one;
          if (r < S) CHECK(group_of(s.b, S, D, r, 63) == blk * 4 + tld);
        }
  // quant.py's q_scale holds (S + BLKQ − 1)/BLKQ · (BLKQ/WARPQ) · 8 entries, padded to whole BLKQ blocks: the
  // groups here are those that hold rows, ceil(S/WARPQ) · 8 of them (the padding's scales cover no row)
  CHECK(groups_per_matrix(s.a, S, D) == (S + 31) / 32 * 8);
  CHECK((S + 127) / 128 * (128 / 32) * 8 >= groups_per_matrix(s.a, S, D));
  const BlockScheme w = block_scheme_by_name("int8_per_warp");
  CHECK(groups_per_matrix(w.a, S, D) == (S + 31) / 32);
  CHECK(groups_per_matrix(w.b, S, D) == (S + 63) / 64);
  CHECK(group_of(w.a, S, D, 95, 0) == 2);
}

TEST_CASE("NVFP4's two levels as torchao's nvfp4_quantize computes them in fp32", "[block_scale]") {
  BlockScheme s;
  try {
    s = block_scheme_by_name("nvfp4");
    element_spec(s);
  } catch (const InputError&) {
    WARN("fp4_e2m1 not in the format registry yet");
    return;
  }
  boost::random::mt19937 gen(11);
  boost::random::uniform_int_distribution<std::uint32_t> bits(0x30000000u, 0x41000000u);
  std::vector<double> x(4 * 64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i % 3 ? 1.0 : -1.0) * std::bit_cast<float>(bits(gen));
  const BlockQuantised q = block_quantise(x.data(), 1, 4, 64, s);
  float amax_t = 0;
  for (double v : x) amax_t = std::max(amax_t, std::fabs(static_cast<float>(v)));
  const float st = amax_t / (448.0f * 6.0f);  // per_tensor_amax_to_scale
  CHECK(q.tensor_scale == st);
  const std::vector<double> grid = scale_grid("fp8_e4m3fn");
  for (std::size_t b = 0; b < 16; ++b) {
    float amax = 0;
    for (std::size_t j = 0; j < 16; ++j) amax = std::max(amax, std::fabs(static_cast<float>(x[b * 16 + j])));
    const float scaled = (amax / 6.0f) / st;  // block_scale_fp32 / per_tensor_scale
    Mp m;
    mpfr_set_d(m.v, scaled, MPFR_RNDN);
    const double sb = on_grid(m.v, grid, false);  // clamp(E4M3_EPS, 448).to(float8_e4m3fn)
    CHECK(q.scales[b] == sb);
    const float recip = (1.0f / st) / static_cast<float>(sb);
    for (std::size_t j = 0; j < 16; ++j) {
      const float y = static_cast<float>(x[b * 16 + j]) * recip;
      const float c = std::clamp(y, -6.0f, 6.0f);
      // E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6; nearest, ties to the even code
      const double g[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
      double best = 0;
      for (int k = 0; k < 8; ++k) {
        const double d = std::fabs(std::fabs(c) - g[k]), db = std::fabs(std::fabs(c) - best);
        if (d < db || (d == db && k % 2 == 0)) best = g[k];
      }
      CHECK(q.elements[b * 16 + j] == std::copysign(best, c));
    }
  }
}

TEST_CASE("block schemes: the registry, overrides and refusals", "[block_scale]") {
  CHECK_THROWS_WITH(block_scheme_by_name("mxfp9"), Catch::Contains("mxfp8_e4m3") && Catch::Contains("int4_per_thread"));
  CHECK_THROWS_WITH(scale_rule_by_name("flor", "/quant/q/scale_rule: "), Catch::Contains("/quant/q/scale_rule") && Catch::Contains("rceil"));
  BlockScheme s = block_scheme_by_name("mxfp8_e4m3");
  s.scale_format = "e9m0";
  CHECK_THROWS_WITH(validate_block_scheme(s, "/quant/k/"), Catch::Contains("/quant/k/scale_format"));
  s = block_scheme_by_name("int8_per_thread");
  s.a.threads = 3;
  CHECK_THROWS_WITH(validate_block_scheme(s, "x: "), Catch::Contains("a/threads"));
  for (const auto& e : kBlockSchemes) CHECK(block_scheme_by_name(e.name).name == e.name);
}

TEST_CASE("the quotient conventions: fp32(x / X) and fp32(x · fp32(1/X)) first, then the element", "[block_scale]") {
  // Quotients a hair off a midpoint of the element grid (fp32_div: the fp32 quotient lands on it) and exact
  // midpoints through an inexact reciprocal (fp32_recip: the product lands beside it), against the
  // definitions in MPFR.
  const double deltas[] = {0x1p-30, -0x1p-30, 0.0};
  for (const char* scheme : {"int8_per_block", "mxfp8_e4m3", "nvfp4"}) {
    BlockScheme s = block_scheme_by_name(scheme);
    s.tensor_scale = false;
    s.divide = Divide::ieee;  // (the IEEE division's convention; Triton's x·MUFU.RCP: tests/python/test_sage_recipes.py)
    const ElementSpec e = element_spec(s);
    for (RoundMode mode : {RoundMode::nearest_even, RoundMode::nearest_away}) {
      s.round = mode;
      RoundOptions o;
      o.mode = mode;
      o.overflow = Overflow::saturate;
      auto element_of = [&](double q) {  // the element rounding of an fp32 value q, by definition
        Mp m;
        mpfr_set_d(m.v, q, MPFR_RNDN);
        if (!e.integer) return mpfr_round_to(m.v, e.format, o);
        Mp r;
        mpfr_mul_2si(m.v, m.v, e.frac_bits, MPFR_RNDN);
        if (mode == RoundMode::nearest_even) mpfr_rint(r.v, m.v, MPFR_RNDN);
        else mpfr_round(r.v, m.v);
        const double qmax = std::ldexp(1.0, e.bits - 1) - 1;
        return std::ldexp(std::clamp(mpfr_get_d(r.v, MPFR_RNDN), -qmax, qmax), -e.frac_bits);
      };
      // midpoints of the element grid: k + 1/2 (integers, times 2^-frac), or between neighbouring values
      std::vector<double> mids;
      if (e.integer) {
        for (int k = 0; k < 60; ++k) mids.push_back(std::ldexp(k + 0.5, -e.frac_bits));
      } else {
        std::vector<double> g;
        for (std::uint64_t b = 0; b < (std::uint64_t{1} << (e.format.storage_bits() - 1)); ++b) {
          const double v = decode(b, e.format);
          if (std::isfinite(v)) g.push_back(v);
        }
        std::sort(g.begin(), g.end());
        for (std::size_t i = 0; i + 1 < g.size(); ++i) mids.push_back((g[i] + g[i + 1]) / 2);
      }
      std::size_t differ_div = 0, differ_recip = 0;
      for (double mid : mids)
        for (double X : {0.25, 1.0, 3.0, 0.3, 7.0, 1.0 / 3}) {
          const double Xf = static_cast<float>(X);
          for (double d : deltas) {
            const double x = (mid + d) * Xf;
            Mp q;
            mpfr_set_d(q.v, x, MPFR_RNDN);
            mpfr_div_d(q.v, q.v, Xf, MPFR_RNDN);
            const double div32 = fp32_of(q.v);
            mpfr_set_d(q.v, 1.0, MPFR_RNDN);
            mpfr_div_d(q.v, q.v, Xf, MPFR_RNDN);
            const double r32 = fp32_of(q.v);
            mpfr_set_d(q.v, x, MPFR_RNDN);
            mpfr_mul_d(q.v, q.v, r32, MPFR_RNDN);
            const double mul32 = fp32_of(q.v);
            s.quotient = Quotient::fp32_div;
            const double got_div = quantise_element(x, Xf, 1.0, s, e);
            s.quotient = Quotient::fp32_recip;
            const double got_recip = quantise_element(x, Xf, 1.0, s, e);
            s.quotient = Quotient::exact;
            const double exact = quantise_element(x, Xf, 1.0, s, e);
            INFO(scheme << " " << round_mode_name(mode) << " x " << x << " X " << Xf);
            REQUIRE(got_div == element_of(div32));
            REQUIRE(got_recip == element_of(mul32));
            differ_div += got_div != exact;
            differ_recip += got_recip != exact;
          }
        }
      CHECK(differ_div > 0);  // (the conventions are not the exact quotient's here)
      CHECK(differ_recip > 0);
    }
  }
}

TEST_CASE("SageAttention's quotients: add-half-and-truncate and x · fp32(vmax / amax)", "[block_scale]") {
  // fp32_div_half (triton/quant_per_block.py:43-45): trunc(fp32(fp32(x / X) ± 0.5)); recip_of_amax (fused.cu
  // :169-184, :399-415): fp32(x · fp32(vmax / amax)) then the element rounding; both against MPFR definitions.
  BlockScheme s = block_scheme_by_name("int8_per_block");
  s.divide = Divide::ieee;
  const ElementSpec e = element_spec(s);
  std::mt19937_64 g(39);
  std::size_t differ_rna = 0;
  for (int i = 0; i < 20000; ++i) {
    const double X = static_cast<float>(std::ldexp(1.0 + static_cast<double>(g() >> 11) * 0x1p-53, -static_cast<int>(g() % 20)));
    // quotients near k + 1/2 (a hair below: where the fp32 addition rounds up to k + 1)
    const double k = static_cast<double>(g() % 127), below = std::ldexp(1.0, -static_cast<int>(22 + g() % 6));
    const double x = static_cast<float>((i % 2 ? k + 0.5 - below : (static_cast<double>(g() >> 11) * 0x1p-53) * 127) * X) *
                     (g() % 2 ? 1 : -1);
    Mp q;
    mpfr_set_d(q.v, x, MPFR_RNDN);
    mpfr_div_d(q.v, q.v, X, MPFR_RNDN);
    const double f = fp32_of(q.v);
    mpfr_set_d(q.v, f, MPFR_RNDN);
    mpfr_add_d(q.v, q.v, f >= 0 ? 0.5 : -0.5, MPFR_RNDN);
    const double h = fp32_of(q.v);
    const double want = std::clamp(std::trunc(h), -127.0, 127.0);
    INFO("x " << x << " X " << X);
    REQUIRE(quantise_element(x, X, 1.0, s, e) == want);
    differ_rna += want != std::clamp(std::round(f), -127.0, 127.0);
  }
  CHECK(differ_rna > 0);  // (the fp32 addition rounds some quotients just below k + 1/2 up)
  BlockScheme v = block_scheme_by_name("fp8_per_channel");
  v.divide = Divide::ieee;
  const ElementSpec ev = element_spec(v);
  CHECK(ev.vmax == 448.0);
  for (int i = 0; i < 5000; ++i) {
    const double amax = static_cast<float>(std::ldexp(1.0 + static_cast<double>(g() >> 11) * 0x1p-53, static_cast<int>(g() % 30) - 15));
    const double x = static_cast<float>(amax * (static_cast<double>(g() >> 11) * 0x1p-53));
    Mp q;
    mpfr_set_d(q.v, 448.0, MPFR_RNDN);
    mpfr_div_d(q.v, q.v, amax, MPFR_RNDN);
    const double r = fp32_of(q.v);
    mpfr_set_d(q.v, x, MPFR_RNDN);
    mpfr_mul_d(q.v, q.v, r, MPFR_RNDN);
    RoundOptions o;
    o.overflow = Overflow::saturate;
    const double want = round(fp32_of(q.v), ev.format, o);
    REQUIRE(quantise_element(x, 1.0, 1.0, v, ev, nullptr, amax) == want);
  }
  // an all-zero channel: r = 448 / 0 = inf, 0 · inf = NaN elements (the kernel's NaN output)
  CHECK(std::isnan(quantise_element(0.0, 1.0, 1.0, v, ev, nullptr, 0.0)));
}
