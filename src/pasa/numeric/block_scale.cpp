#include "pasa/numeric/block_scale.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/numeric/double_double.hpp"
#include "pasa/numeric/gpu_math.hpp"

namespace pasa {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kE8m0Min = -127, kE8m0Max = 127;  // OCP MX v1.0 §5.4.1: E8M0 codes 0..254, 255 NaN

const Format& fp32_format() {
  static const Format f = format_by_name("fp32");
  return f;
}
double to_fp32(DD q) { return round_sum(q.hi, q.lo, fp32_format()); }  // one rounding, to nearest even

// a / b in fp32 as the scheme's kernel divides (a, b fp32 values): once rounded, or RN(a · MUFU.RCP(b))
double fp32_divide(double a, double b, Divide d) {
  if (d == Divide::ieee) return to_fp32(exact_quotient(a, b));
  const float r = gpu::rcp_approx_ftz(static_cast<float>(b));
  return static_cast<double>(static_cast<float>(a) * r);
}

BlockScheme from_entry(const BlockSchemeEntry& e) {
  BlockScheme s;
  s.name = std::string(e.name);
  s.element = std::string(e.element);
  s.frac_bits = e.frac_bits;
  s.scale_format = std::string(e.scale_format);
  s.rule = e.rule;
  s.tensor_scale = e.tensor_scale;
  s.round = e.round;
  s.quotient = e.quotient;
  s.target = e.target;
  s.divide = e.divide;
  s.a = e.a;
  s.b = e.b;
  return s;
}

bool is_e8m0(const BlockScheme& s) { return s.scale_format == "e8m0"; }

// ceil(log2 v) for v > 0 finite.
int ceil_log2(double v) {
  const int k = std::ilogb(v);
  return std::ldexp(1.0, k) == v ? k : k + 1;
}

// 2^e as a scale: E8M0's range [2^-127, 2^127] or the scale format's [min_subnormal, max]; below it the
// smallest scale (torchao clamps to -127; microxcaling too), above it NaN (OCP MX §6.3: the block is NaN).
double pow2_scale(int e, const BlockScheme& s) {
  int lo = kE8m0Min, hi = kE8m0Max;
  if (!is_e8m0(s)) {
    const Format f = format_by_name(s.scale_format);
    lo = std::ilogb(f.min_subnormal());
    hi = f.emax;
  }
  if (e > hi) return kNaN;
  return std::ldexp(1.0, std::max(e, lo));
}

// A positive v rounded to the scale format, up (rceil, round_up) or to nearest even (nearest, recip), then
// held to the format's positive range (torchao: clamp(min=E4M3_EPS, max=448) before the cast).
double to_scale_format(DD v, bool up, const BlockScheme& s) {
  if (!(v.hi > 0)) return pow2_scale(std::numeric_limits<int>::min() / 2, s);
  if (!std::isfinite(v.hi)) return kNaN;
  if (is_e8m0(s)) {
    int e;
    const int k = std::ilogb(v.hi);
    const bool pow2 = std::ldexp(1.0, k) == v.hi;
    if (up) {
      e = pow2 && v.lo <= 0 ? k : k + 1;  // ceil(log2 v); a v just below 2^k (lo < 0) has ceil k
    } else {
      // between 2^k and 2^(k+1): the midpoint 1.5·2^k; a tie goes to the even code (e + 127 even)
      const double mid = 1.5 * std::ldexp(1.0, k);
      if (v.hi < mid || (v.hi == mid && v.lo < 0)) e = k;
      else if (v.hi > mid || v.lo > 0) e = k + 1;
      else e = ((k + 127) % 2 == 0) ? k : k + 1;
    }
    return pow2_scale(e, s);
  }
  const Format f = format_by_name(s.scale_format);
  RoundOptions o;
  o.mode = up ? RoundMode::toward_pos : RoundMode::nearest_even;
  o.overflow = Overflow::saturate;
  const double r = round_sum(v.hi, v.lo, f, o);
  return std::max(r, f.min_subnormal());
}

}  // namespace

std::string_view scale_rule_name(ScaleRule r) { return enum_name(kScaleRules, r); }

ScaleRule scale_rule_by_name(std::string_view name, const std::string& where) {
  if (auto r = enum_by_name(kScaleRules, name)) return *r;
  throw InputError(fmt::format("{}unknown scale rule \"{}\"; known: {}", where, name, enum_names_joined(kScaleRules)));
}
Grouping grouping_by_name(std::string_view name, const std::string& where) {
  if (auto r = enum_by_name(kGroupings, name)) return *r;
  throw InputError(fmt::format("{}unknown grouping \"{}\"; known: {}", where, name, enum_names_joined(kGroupings)));
}
Quotient quotient_by_name(std::string_view name, const std::string& where) {
  if (auto r = enum_by_name(kQuotients, name)) return *r;
  throw InputError(fmt::format("{}unknown quotient \"{}\"; known: {}", where, name, enum_names_joined(kQuotients)));
}

std::string known_block_scheme_names() {
  std::string s;
  for (const auto& e : kBlockSchemes) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

BlockScheme block_scheme_by_name(std::string_view name) {
  for (const auto& e : kBlockSchemes)
    if (e.name == name) return from_entry(e);
  throw InputError(fmt::format("unknown block-scale scheme \"{}\"; known: {}", name, known_block_scheme_names()));
}

ElementSpec element_spec(const BlockScheme& s) {
  ElementSpec e;
  if (s.element == "int8" || s.element == "int4") {
    e.integer = true;
    e.bits = s.element == "int8" ? 8 : 4;
    e.frac_bits = s.frac_bits;
    const double qmax = std::ldexp(1.0, e.bits - 1) - 1;  // symmetric: ±127, ±7
    e.vmax = s.target > 0 ? s.target : std::ldexp(qmax, -e.frac_bits);
    e.emax = std::ilogb(e.vmax);
    e.p = e.bits - 1;
    return e;
  }
  e.format = format_by_name(s.element);
  e.vmax = e.format.max_finite();
  e.emax = e.format.emax;
  e.p = e.format.p;
  if (s.target > 0) {  // amax maps to the target, not to the element's largest value
    e.vmax = s.target;
    e.emax = std::ilogb(s.target);
  }
  return e;
}

void validate_block_scheme(const BlockScheme& s, const std::string& where) {
  try {
    element_spec(s);
  } catch (const InputError& err) {
    throw InputError(fmt::format("{}element: {}", where, err.what()));
  }
  if (!is_e8m0(s)) {
    try {
      format_by_name(s.scale_format);
    } catch (const InputError& err) {
      throw InputError(fmt::format("{}scale_format: \"{}\" is neither e8m0 nor a format: {}", where, s.scale_format, err.what()));
    }
  }
  if (s.frac_bits < 0 || s.frac_bits > 16 || (s.frac_bits != 0 && s.element != "int8" && s.element != "int4"))
    throw InputError(fmt::format("{}frac_bits: {} (integer elements only, 0 to 16)", where, s.frac_bits));
  for (const GroupLayout* g : {&s.a, &s.b}) {
    const char* which = g == &s.a ? "a" : "b";
    if (g->group == Grouping::block && g->cols == 0)
      throw InputError(fmt::format("{}{}/cols: blocks need a length of at least 1", where, which));
    if (g->group == Grouping::thread && !(g->threads == 1 || g->threads == 2 || g->threads == 4 || g->threads == 8))
      throw InputError(fmt::format("{}{}/threads: per-thread groups deal the rows of every 8 to 1, 2, 4 or 8 groups "
                                   "(mma.sync's fragments), got {}", where, which, g->threads));
    if (g->group == Grouping::thread && (g->rows == 0 || g->rows % 8 != 0))
      throw InputError(fmt::format("{}{}/rows: per-thread tiles are whole multiples of 8 rows, got {}", where, which, g->rows));
  }
  if (!(s.target >= 0) || !std::isfinite(s.target))
    throw InputError(fmt::format("{}target: {} (the value amax maps to: positive and finite, or 0 for the element's "
                                 "largest)", where, s.target));
  if (s.round == RoundMode::stochastic && s.quotient != Quotient::exact)
    throw InputError(fmt::format("{}round: stochastic element rounding needs the exact quotient", where));
}

double fp32_recip_scale(double amax, double vmax) {
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0;
  // torch's `tensor / python_number` multiplies by the fp32 reciprocal (checked on the H100: 32 of 32 scales)
  const float s = static_cast<float>(amax) * static_cast<float>(1.0 / vmax);
  return s > 0 && std::isfinite(s) ? static_cast<double>(s) : 1.0;
}

double tensor_scale_of(double amax_t, const BlockScheme& s, const ElementSpec& e) {
  if (!(amax_t > 0) || !std::isfinite(amax_t)) return 1.0;
  const double vscale = is_e8m0(s) ? std::ldexp(1.0, kE8m0Max) : format_by_name(s.scale_format).max_finite();
  // torchao per_tensor_amax_to_scale: amax.float() / (F8E4M3_MAX * F4_E2M1_MAX), one fp32 division
  const double t = to_fp32(exact_quotient(static_cast<float>(amax_t), vscale * e.vmax));
  return t > 0 ? t : 1.0;
}

double block_scale_of(double amax, const BlockScheme& s, const ElementSpec& e, double st) {
  if (std::isnan(amax) || std::isinf(amax)) return kNaN;
  // (the sage rule is its formula at 0 too: 0 / 127. + 1e-7, the scale of an all-zero or padding group)
  if (amax == 0 && s.rule != ScaleRule::sage) return pow2_scale(std::numeric_limits<int>::min() / 2, s);
  switch (s.rule) {
    case ScaleRule::floor:
    case ScaleRule::ceil:
    case ScaleRule::even: {
      const double a = st == 1.0 ? amax : amax / st;
      const int k = std::ilogb(a);
      int e2 = k;
      if (s.rule == ScaleRule::ceil) e2 = ceil_log2(a);
      // torchao EVEN: amax's fraction rounded half up to the element's p − 1 bits; a carry out is the binade above
      if (s.rule == ScaleRule::even && a >= (2.0 - std::ldexp(1.0, -e.p)) * std::ldexp(1.0, k)) e2 = k + 1;
      return pow2_scale(e2 - e.emax, s);
    }
    case ScaleRule::round_up: {
      DD q = exact_quotient(amax, e.vmax);
      if (st != 1.0) q = exact_quotient(q.hi, st);  // (two-level: amax / vmax / st)
      return to_scale_format(q, true, s);
    }
    case ScaleRule::rceil:
    case ScaleRule::recip:
    case ScaleRule::nearest:
    case ScaleRule::sage: {
      double v;
      if (s.rule == ScaleRule::rceil || s.rule == ScaleRule::recip) {  // fp32(fp32(amax) · fp32(1/vmax))
        const double r = to_fp32(exact_quotient(1.0, e.vmax));
        const DD p = two_prod(round(amax, fp32_format()), r);
        v = round_sum(p.hi, p.lo, fp32_format());
      } else if (s.rule == ScaleRule::sage && s.divide == Divide::rcp_approx) {
        // quant_per_thread.py:41 `tl.max(tl.abs(x)) / 127. + 0.0000001`: Triton's division is div.full.f32,
        // a·MUFU.RCP(b), and ptxas contracts that product with the add into one FFMA: fp32(amax·rcp(vmax) +
        // 1e-7) rounded once (every Q and K scale of the 128 SA2 cases captured on the H200,
        // results/hardware/sage/; the two-rounding form differs in a third of them)
        const double r = gpu::rcp_approx_ftz(static_cast<float>(e.vmax));
        const double p = round(amax, fp32_format()) * r;
        const DD t = two_sum(p, static_cast<double>(1e-7f));  // (p exact: two fp32 factors)
        v = round_sum(t.hi, t.lo, fp32_format());
      } else {
        // fp32(amax / vmax), amax in fp32 as the kernels hold it (x.float(): torchao, SageAttention's loads)
        v = fp32_divide(round(amax, fp32_format()), e.vmax, s.divide);
        if (s.rule == ScaleRule::sage) {              // (IEEE division: no contraction) ... / 127. + 0.0000001
          const DD t = two_sum(v, static_cast<double>(1e-7f));
          v = round_sum(t.hi, t.lo, fp32_format());
        }
      }
      if (st != 1.0) v = to_fp32(exact_quotient(v, st));  // torchao nvfp4_quantize: block_scale_fp32 / per_tensor_scale
      return to_scale_format({v, 0.0}, s.rule == ScaleRule::rceil, s);
    }
  }
  return kNaN;
}

double quantise_element(double x, double X, double st, const BlockScheme& s, const ElementSpec& e, RandomBits* rng,
                        double amax) {
  if (std::isnan(X) || std::isnan(x)) return kNaN;
  DD q;
  switch (s.quotient) {
    case Quotient::fp32_div_half: {
      // quant_per_block.py:43-45: x_int8 = x / scale; x_int8 += 0.5 * where(x_int8 >= 0, 1, -1) (both fp32)
      const double f = fp32_divide(x, X * st, s.divide);
      const DD h = two_sum(f, f >= 0 ? 0.5 : -0.5);
      q = {round_sum(h.hi, h.lo, fp32_format()), 0.0};
      break;
    }
    case Quotient::recip_of_amax: {
      // fused.cu :399 recp_scale = scale_max / s_amax_val, :415 x · recp_scale (:169-184 for int8)
      const double r = fp32_divide(e.vmax, round(amax, fp32_format()), s.divide);
      const DD p = two_prod(round(x, fp32_format()), r);
      q = {round_sum(p.hi, p.lo, fp32_format()), 0.0};
      break;
    }
    case Quotient::exact: q = exact_quotient(x, X * st); break;
    case Quotient::fp32_div: q = {fp32_divide(x, X * st, s.divide), 0.0}; break;
    case Quotient::fp32_recip: {
      // torchao: x * (1.0 / scale), two-level x * ((1.0 / per_tensor_scale) / scale), each step in fp32
      const double r = st == 1.0 ? fp32_divide(1.0, X, s.divide)
                                 : to_fp32(exact_quotient(to_fp32(exact_quotient(1.0, st)), X));
      const DD p = two_prod(x, r);
      q = {round_sum(p.hi, p.lo, fp32_format()), 0.0};
      break;
    }
  }
  RoundOptions o;
  o.mode = s.round;
  o.overflow = s.saturate ? Overflow::saturate : Overflow::ieee;
  if (!e.integer) return std::isfinite(q.hi) ? round_sum(q.hi, q.lo, e.format, o, rng) : round(q.hi, e.format, o, rng);
  // Integers k·2^-frac: the quotient scaled so that the integer grid is the 2^-7 grid of p=8,emax=1, all of
  // whose values below 1 (|k| <= 127) are subnormals one quantum apart: one rounding in every mode, then the
  // symmetric saturation of OCP MX §5.2 / SageAttention's int8 (±127, ±7).
  // a NaN quotient of a finite x (0 · rcp(0) of an all-zero group under Divide::rcp_approx) converts to 0, as
  // PTX's float-to-integer cvt does with NaN (Triton's .to(tl.int8), cvt.rni.sat.s8.f32)
  if (std::isnan(q.hi)) return 0.0;
  static const Format grid = custom_format(8, 1);
  const int shift = e.frac_bits - 7;
  o.overflow = Overflow::saturate;
  const double g = std::isfinite(q.hi) ? round_sum(std::ldexp(q.hi, shift), std::ldexp(q.lo, shift), grid, o, rng)
                                       : round(q.hi, grid, o, rng);
  const double qmax = std::ldexp(1.0, e.bits - 1) - 1;
  const double k = std::clamp(std::ldexp(g, 7), -qmax, qmax);
  return std::ldexp(k, -e.frac_bits);
}

std::size_t groups_per_matrix(const GroupLayout& g, std::size_t R, std::size_t C) {
  auto cdiv = [](std::size_t a, std::size_t b) { return b == 0 ? 1 : (a + b - 1) / b; };
  switch (g.group) {
    case Grouping::tensor: return 1;
    case Grouping::row: return R;
    case Grouping::column: return C;
    case Grouping::block: return R * cdiv(C, g.cols);
    case Grouping::tile: return cdiv(R, g.rows) * cdiv(C, g.cols);
    case Grouping::thread: return cdiv(R, g.rows) * static_cast<std::size_t>(g.threads) * cdiv(C, g.cols);
  }
  return 1;
}

std::size_t group_of(const GroupLayout& g, std::size_t R, std::size_t C, std::size_t r, std::size_t c) {
  const std::size_t cols = g.cols == 0 ? C : g.cols, rows = g.rows == 0 ? R : g.rows;
  const std::size_t nbc = (C + cols - 1) / cols;
  switch (g.group) {
    case Grouping::tensor: return 0;
    case Grouping::row: return r;
    case Grouping::column: return c;
    case Grouping::block: return r * nbc + c / cols;
    case Grouping::tile: return (r / rows) * nbc + c / cols;
    case Grouping::thread: {
      // SageAttention triton/quant_per_thread.py: Q (A operand, 8 groups) takes rows 8i + t of each WARPQ
      // rows (lines 27-32: offs_n = off_blk·BLK + arange(BLK/8)·8 + off_tld), the rows groupID = lane/4 and
      // groupID + 8 of mma.sync's A fragment; K (B operand, 4 groups) rows 8i + 2t and 8i + 2t + 1 (lines
      // 54-55, 75-76), the columns (lane % 4)·2 and +1 of its B fragment.
      const auto t = static_cast<std::size_t>(g.threads);
      const std::size_t thread = (r % 8) / (8 / t);
      return ((r / rows) * t + thread) * nbc + c / cols;
    }
  }
  return 0;
}

BlockQuantised block_quantise(const double* x, std::size_t matrices, std::size_t R, std::size_t C, const BlockScheme& s,
                              bool operand_b, RandomBits* rng) {
  validate_block_scheme(s);
  const GroupLayout& g = operand_b ? s.b : s.a;
  const ElementSpec e = element_spec(s);
  const std::size_t G = groups_per_matrix(g, R, C), n = matrices * R * C;
  const std::size_t total_groups = g.group == Grouping::tensor ? 1 : matrices * G;
  BlockQuantised out;
  out.groups_per_matrix = G;
  // amax per group, NaN if any value is NaN (torch.amax returns NaN then)
  std::vector<double> amax(total_groups, 0.0);
  double amax_t = 0;
  auto gid = [&](std::size_t i) {
    if (g.group == Grouping::tensor) return std::size_t{0};
    const std::size_t m = i / (R * C), rc = i % (R * C);
    return m * G + group_of(g, R, C, rc / C, rc % C);
  };
  for (std::size_t i = 0; i < n; ++i) {
    const double a = std::fabs(x[i]);
    double& m = amax[gid(i)];
    m = (std::isnan(a) || std::isnan(m)) ? kNaN : std::max(m, a);
    amax_t = (std::isnan(a) || std::isnan(amax_t)) ? kNaN : std::max(amax_t, a);
  }
  out.tensor_scale = s.tensor_scale ? tensor_scale_of(amax_t, s, e) : 1.0;
  out.scales.resize(total_groups);
  for (std::size_t k = 0; k < total_groups; ++k) out.scales[k] = block_scale_of(amax[k], s, e, out.tensor_scale);
  out.values.resize(n);
  out.elements.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double X = out.scales[gid(i)];
    const double el = quantise_element(x[i], X, out.tensor_scale, s, e, rng, amax[gid(i)]);
    out.elements[i] = el;
    out.values[i] = el * (X * out.tensor_scale);  // exact: every registered scheme's product fits 53 bits
  }
  return out;
}

}  // namespace pasa
