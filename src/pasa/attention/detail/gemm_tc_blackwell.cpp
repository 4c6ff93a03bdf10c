// The tensor-core model term by term: the engines whose alignment needs more than the loop-per-block path
// knows — block scales, exact groups of products, zeros counted at exponent −126 (TensorCore in
// allocation.hpp). Blackwell's `tcgen05.mma` and sm_120's `mma.sync` [MMA-Sim `simulator/arithmetic.py`,
// commit c785138]:
// - kind::f8f6f4 and the older kinds (`nv_fused_dot_add`): the terms are the accumulator c and the products
//   a_k·b_k, each with an exponent (c: its own, at least −126; a product: e_a + e_b, a subnormal operand at
//   its format's emin, a zero operand or c at −126 when zero_at_emin); E = the largest; each term cut toward
//   zero to a multiple of 2^(E − F); the cut terms added exactly, normalised and cut to fp32 (RZ).
// - kind::mxf8f6f4 (the same with one E8M0 scale per 32 k of each operand): a product's exponent gains
//   e(s_a) + e(s_b) and its value the factor s_a·s_b (a power of two).
// - kind::mxf4 / mxf4nvf4 (`nv_fused_dot_add_with_block_scale`): every 16 products summed exactly first;
//   each group sum times |s_a|·|s_b| is one term, its exponent e(s_a) + e(s_b) whatever the sum's size; F =
//   35; c as above. A ue4m3 scale is taken unsigned, and its exponent is E4M3's (a subnormal at −6).
// NaN or infinite terms (a NaN scale or c): the result is IEEE's sum of the terms, as MMA-Sim's fp64 check.
#include "pasa/attention/detail/gemm_tc_core.hpp"

#include "pasa/attention/detail/gemm_common.hpp"
#include "pasa/numeric/double_double.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <vector>

namespace pasa::detail {

bool tc_term_path(const TensorCore& tc) { return tc.scale != BlockScale::none || tc.group > 0 || tc.zero_at_emin; }

namespace {

// MMA-Sim's exponent of a zero: frexp's, −126 (fp32's emin), in `extract_significand_exponent`.
constexpr int kZeroAtEmin = -126;

// The exponent and unsigned value of one block scale (validated: the engine refuses a value its scale format
// does not hold before it computes anything with it).
struct Scale {
  double value = 1.0;
  int exp = 0;
};
Scale scale_of(double s, BlockScale kind, bool zero_at_emin, const char* operand, std::size_t i, std::size_t b) {
  if (std::isnan(s)) return {s, 0};
  static const Format e4m3 = format_by_name("fp8_e4m3fn");
  if (kind == BlockScale::e8m0) {
    int e = 0;
    const double m = std::frexp(s, &e);
    if (!(s > 0) || m != 0.5 || e - 1 < -127 || e - 1 > 127)
      throw std::invalid_argument(fmt::format("gemm: block scale {}[{}][{}] = {} is not an E8M0 value (2^-127 .. 2^127)",
                                              operand, i, b, s));
    return {s, e - 1};
  }
  const double u = std::fabs(s);  // ue4m3: the sign bit is not read (PTX ISA, mma.block_scale: ue4m3)
  if (round(u, e4m3, RoundOptions{}) != u)
    throw std::invalid_argument(fmt::format("gemm: block scale {}[{}][{}] = {} is not an E4M3 value", operand, i, b, s));
  if (u == 0.0) return {0.0, zero_at_emin ? kZeroAtEmin : kZeroExp};
  return {u, term_exp(u, e4m3.emin())};
}

// x·y, which must be exact (the group sums times their scales; formats of at most 26 bits keep them so)
double exact_product(double x, double y) {
  const double p = x * y;
  if (std::isfinite(p) && std::fma(x, y, -p) != 0.0)
    throw std::invalid_argument("gemm: a group sum times its block scales is not exact in double");
  return p;
}

}  // namespace

void tc_terms(const Plan& p, const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
              std::size_t lda, const double* B, std::size_t ldb, double* C, std::size_t ldc, const double* C0,
              const TcScales* scales) {
  const TensorCore& tc = g.model.tc;
  const Format& tcf = p.tcf;
  const std::size_t block = p.block, promote = p.promote;
  const std::size_t group = static_cast<std::size_t>(tc.group), sblock = static_cast<std::size_t>(tc.scale_block);
  const int F = p.F;
  const bool zero_at_emin = tc.zero_at_emin;
  const int zero_exp = zero_at_emin ? kZeroAtEmin : kZeroExp;
  auto exp_of = [&](double x, int emin) { return x == 0.0 ? zero_exp : term_exp(x, emin); };
  const int ea_min = g.a_format.emin(), eb_min = g.b_format.emin(), ec_min = tcf.emin();
  // The scales, validated and decoded once: A's per (row, k-block), B's per (k-block, column).
  const std::size_t kb = sblock > 0 ? (k + sblock - 1) / sblock : 0;
  std::vector<Scale> sa(scales ? m * kb : 0), sb(scales ? kb * n : 0);
  if (scales)
    for (std::size_t b = 0; b < kb; ++b) {
      for (std::size_t r = 0; r < m; ++r) sa[r * kb + b] = scale_of(scales->a[r * scales->lda + b], tc.scale, zero_at_emin, "A", r, b);
      for (std::size_t j = 0; j < n; ++j) sb[b * n + j] = scale_of(scales->b[b * scales->ldb + j], tc.scale, zero_at_emin, "B", b, j);
    }
  const Scale one{};
  std::vector<double> val(block + 1), ex(block + 4);
  std::vector<int> ex_of(block + 1);
  for (std::size_t r = 0; r < m; ++r) {
    const double* a = A + r * lda;
    for (std::size_t j = 0; j < n; ++j) {
      double c = C0 ? C0[r * ldc + j] : 0.0, outer = 0.0;
      std::size_t since_promotion = 0;
      for (std::size_t t0 = 0; t0 < k; t0 += block) {
        const std::size_t t1 = std::min(k, t0 + block);
        // the block's terms: c (when it is one), then the products or the group sums, with their exponents
        std::size_t nt = 0;
        double ieee = 0.0;
        if (tc.acc_in_block) {
          val[nt] = c;
          ex_of[nt++] = exp_of(c, ec_min);
          ieee += c;
        }
        const std::size_t step = group > 0 ? group : 1;
        for (std::size_t t = t0; t < t1; t += step) {
          const Scale& s0 = scales ? sa[r * kb + t / sblock] : one;
          const Scale& s1 = scales ? sb[(t / sblock) * n + j] : one;
          double v;
          int e;
          if (group > 0) {
            int ne = 0;
            for (std::size_t u = t; u < std::min(t1, t + group); ++u) expansion_add(ex.data(), ne, a[u] * B[u * ldb + j]);
            const DD sum = expansion_to_dd(ex.data(), ne);
            if (sum.lo != 0.0) throw std::invalid_argument("gemm: a group sum of products is not exact in double");
            v = exact_product(exact_product(sum.hi, s0.value), s1.value);
            e = s0.exp + s1.exp;
          } else {
            const double x = a[t], y = B[t * ldb + j];
            v = x * y * s0.value * s1.value;  // (exact: the scales are powers of two; the product has <= 52 bits)
            e = exp_of(x, ea_min) + exp_of(y, eb_min) + s0.exp + s1.exp;
          }
          val[nt] = v;
          ex_of[nt++] = e;
          ieee += v;
        }
        double sum;
        if (!std::isfinite(ieee)) {
          sum = ieee;
        } else {
          int E = kZeroExp;
          for (std::size_t i = 0; i < nt; ++i) E = std::max(E, ex_of[i]);
          int ne = 0;
          for (std::size_t i = 0; i < nt; ++i) {
            if (p.unlimited) {
              if (val[i] != 0.0) expansion_add(ex.data(), ne, val[i]);
              continue;
            }
            // the term cut to a multiple of 2^(E − F) (E clamped so that the power of two is a normal double)
            const int e = std::clamp(E, F - 1000, F + 1000);
            const double q = p.nearest ? std::nearbyint(val[i] * pow2(F - e)) : std::trunc(val[i] * pow2(F - e));
            if (q != 0.0) expansion_add(ex.data(), ne, q * pow2(e - F));
          }
          sum = ne == 0 ? 0.0 : round_sum_dd(expansion_to_dd(ex.data(), ne), tcf, p.block_opt);
        }
        c = tc.acc_in_block ? sum : round_sum_dd(two_sum(c, sum), tcf, p.block_opt);
        since_promotion += t1 - t0;
        if (promote > 0 && (since_promotion == promote || t1 == k)) {  // the CUDA cores' add, in the acc stage
          outer = round_sum_dd(two_sum(outer, c), g.acc.format, g.acc.round);
          c = 0.0;
          since_promotion = 0;
        }
      }
      C[r * ldc + j] = promote > 0 ? outer : c;
    }
  }
}

}  // namespace pasa::detail
