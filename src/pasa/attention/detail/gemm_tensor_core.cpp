// The tensor-core model: the plan of a spec (its checks) and the loop-per-block path; the register strips
// (gemm_tc_hopper.cpp), the term-by-term path of the newer engines (gemm_tc_blackwell.cpp) and the integer
// and TF32-truncating ones (gemm_tc_volta_ampere.cpp) beside it (gemm_tc_core.hpp lists them).
#include "pasa/attention/detail/gemm_tensor_core.hpp"

#include "pasa/attention/detail/gemm_common.hpp"
#include "pasa/attention/detail/gemm_tc_core.hpp"
#include "pasa/numeric/double_double.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace pasa::detail {
namespace {

// The tensor-core model (TensorCore in allocation.hpp) [Fasi et al. 2021; Khattak & Mikaitis 2025]. Per row,
// per block of products: E = the largest exponent of the block's terms (products: e_a + e_b, subnormal operands
// at their format's emin; the accumulator: its own exponent when it is one of the terms), every term scaled by
// 2^(F − E) (exact: a power of two), cut to an integer (trunc: toward zero; nearbyint: nearest even), the
// integers added, the sum scaled back and rounded once to the accumulator. Fast path: the cut terms are
// integers below 2^(F+2) each (|a·b| < 2^(e_a+e_b+2), |c| < 2^(E+1)), so their sum over block + 1 terms is
// exact in double when F + 2 + log2(block + 1) <= 53; otherwise (or with unlimited bits) every cut term goes
// into a floating-point expansion and round_sum rounds the exact sum once.
constexpr std::size_t kW = 64;     // columns per register tile of the tensor-core kernel (4 AVX-512 vectors)

#if defined(__AVX512F__)
// v[0..n) rounded to float in direction R (one rounding of each double), widened back in place (the
// zero-masked forms: GCC 12 warns about the unmasked ones' undefined pass-through operand).
template <int R>
void cvt_rows(double* v, std::size_t n) {
  std::size_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm512_storeu_pd(v + j, _mm512_maskz_cvtps_pd(0xFF, _mm512_maskz_cvt_roundpd_ps(0xFF, _mm512_loadu_pd(v + j),
                                                                                   R | _MM_FROUND_NO_EXC)));
  if (j < n) {
    const __mmask8 m = static_cast<__mmask8>((1u << (n - j)) - 1);
    const __m512d x = _mm512_maskz_loadu_pd(m, v + j);
    _mm512_mask_storeu_pd(v + j, m, _mm512_maskz_cvtps_pd(0xFF, _mm512_maskz_cvt_roundpd_ps(0xFF, x, R | _MM_FROUND_NO_EXC)));
  }
}
#endif

}  // namespace

Plan plan_of(const GemmSpec& g) {
  const TensorCore& tc = g.model.tc;
  if (tc.block < 1) throw std::logic_error("gemm: tensor_core block must be >= 1");
  if (tc.promote < 0 || (tc.promote > 0 && tc.promote % tc.block != 0))
    throw std::logic_error("gemm: tensor_core promote must be 0 or a multiple of block");
  if (g.a_format.p > kTensorCoreMaxOperandBits || g.b_format.p > kTensorCoreMaxOperandBits)
    throw std::invalid_argument("gemm: the tensor_core model needs operands of at most 26 bits (products exact in "
                                "double); got " + g.a_format.name + " x " + g.b_format.name);
  if (g.acc.round.mode == RoundMode::stochastic || tc.block_round == RoundMode::stochastic ||
      tc.block_round == RoundMode::odd)
    throw std::invalid_argument(
        "gemm: the tensor_core model takes rne, rna, rz, ru or rd (no stochastic or odd "
        "rounding); got " +
        round_mode_name(g.acc.round.mode) + " accumulation, " + round_mode_name(tc.block_round) + " block_round");
  if (tc.acc_bits != 0 && (tc.acc_bits < 2 || tc.acc_bits > 53))
    throw std::logic_error("gemm: tensor_core acc_bits must be 0 or 2..53");
  if (tc.operand_bits != 0 && (tc.operand_bits < 2 || tc.operand_bits > 24))
    throw std::logic_error("gemm: tensor_core operand_bits must be 0 or 2..24");
  if (tc.operand_bits != 0 && (!float_exact(g.a_format) || !float_exact(g.b_format)))
    throw std::invalid_argument("gemm: tensor_core operand_bits cuts fp32 operands; got " + g.a_format.name + " x " +
                                g.b_format.name);
  if (tc.group < 0 || (tc.group > 0 && tc.block % tc.group != 0))
    throw std::logic_error("gemm: tensor_core group must be 0 or divide block");
  if ((tc.scale == BlockScale::none) != (tc.scale_block == 0) || tc.scale_block < 0 ||
      (tc.group > 0 && tc.scale_block > 0 && tc.scale_block % tc.group != 0))
    throw std::logic_error("gemm: tensor_core scale_block must be > 0 exactly with a block scale (a multiple of group)");
  if (tc.group > 0 && !tc_group_exact(g.a_format, g.b_format, tc.group))
    throw std::invalid_argument("gemm: a tensor_core model with group " + std::to_string(tc.group) +
                                " sums its products exactly in double, which " + g.a_format.name + " x " +
                                g.b_format.name + " products do not allow (fp4, fp6 or E4M3 operands)");
  if (tc.scale == BlockScale::ue4m3 && tc.group == 0)
    throw std::logic_error("gemm: tensor_core ue4m3 block scales need group > 0 (kind::mxf4nvf4)");
  if (tc.integer != TcInteger::off && (tc.scale != BlockScale::none || tc.group != 0 || tc.promote != 0 ||
                                       tc.operand_bits != 0))
    throw std::logic_error("gemm: the integer tensor_core takes no scales, groups, promotion or operand_bits");
  const Format& af = g.acc.format;
  Plan p{};
  p.tcf = tc.acc_bits == 0 ? af : custom_format(tc.acc_bits, af.emax, af.subnormals, af.specials);
  p.block_opt = g.acc.round;
  p.block_opt.mode = tc.block_round;
  p.unlimited = tc.align_bits == kUnlimitedAlign;
  p.F = p.unlimited ? 0 : tc.align_bits;
  int log2_terms = 0;
  while ((1 << log2_terms) < tc.block + 1) ++log2_terms;
  p.fast = !p.unlimited && p.F + 2 + log2_terms <= 53;
  p.nearest = tc.align_round == AlignRound::nearest;
  // Float lanes (twice as many) where every product of the operands is an exact normal float (fp16, fp8:
  // p_a + p_b <= 24, products within [2^-126, 2^127)) and the scaled products, integers below 2^(F+2), add
  // up in int32 over groups of 2^(29 − F) products without overflow.
  const Format &fa = g.a_format, &fb = g.b_format;
  const double min_product = fa.min_subnormal() * fb.min_subnormal();
  const double max_product = fa.max_finite() * fb.max_finite();
  p.float_lanes = p.fast && !p.nearest && p.F <= 25 && float_exact(fa) && float_exact(fb) && fa.p + fb.p <= 24 &&
                  min_product >= 0x1p-126 && max_product < 0x1p127;
  p.group = p.float_lanes ? std::size_t{1} << (29 - p.F) : 0;
  p.block = static_cast<std::size_t>(tc.block);
  p.promote = static_cast<std::size_t>(tc.promote);
  // The register strips (tc_rz_strips): float lanes, every operand a normal float (the exponents read from
  // the floats), the block's sum rounded toward zero into an accumulator of at most 24 bits with fp32's
  // exponent range, IEEE overflow and no flushing (then the float conversion toward zero, cut to P bits, is
  // that one rounding: IEEE 754 §5.4.2), the promotion (if any) the fp32 RNE add. Formats whose products
  // may leave float's normal range (bf16) take them as a Window: where the operands at hand stay within it.
  const Format& tcf = p.tcf;
  p.window = !p.float_lanes && p.fast && !p.nearest && p.F >= 2 && p.F <= 25 && float_exact(fa) && float_exact(fb) &&
             fa.p + fb.p <= 24;
  const bool normal_floats = fa.min_subnormal() >= 0x1p-126 && fb.min_subnormal() >= 0x1p-126;
  p.strips = ((p.float_lanes && normal_floats) || p.window) && tcf.p <= 24 && tcf.emax == 127 && tcf.subnormals &&
             tcf.specials == Specials::ieee && p.block_opt.overflow == Overflow::ieee && !p.block_opt.flush_input &&
             !p.block_opt.flush_output && p.block_opt.mode == RoundMode::toward_zero && tc.acc_in_block &&
             p.block <= (std::size_t{1} << (29 - p.F)) && (p.promote == 0 || native(g.acc, fp32())) &&
             (tcf.p == 24 || tcf.p == 14) &&  // (fp32 and the FP8 models' e8m13: tc_rz_strips' P)
             tc.operand_bits == 0 && !tc_term_path(tc) && tc.integer == TcInteger::off;
  return p;
}

void dgemm_tensor_core(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                       std::size_t lda, const float* B, std::size_t ldb, double* C, std::size_t ldc) {
  const Plan p = plan_of(g);
  if (tc_run_strips(p, g, m, n, k, A, lda, B, ldb, C, ldc)) return;
  thread_local std::vector<double> db_buffer;
  db_buffer.resize(k * n);
  double* db = db_buffer.data();
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < n; ++j) db[t * n + j] = B[t * ldb + j];
  dgemm_tensor_core(g, m, n, k, A, lda, db, n, C, ldc);
}

void dgemm_tensor_core(const GemmSpec& g, std::size_t m, std::size_t n, std::size_t k, const double* A,
                       std::size_t lda, const double* B, std::size_t ldb, double* C, std::size_t ldc,
                       const double* C0, const TcScales* scales) {
  const Plan p = plan_of(g);
  const TensorCore& tc = g.model.tc;
  if (scales != nullptr && tc.scale == BlockScale::none)
    throw std::logic_error("dgemm_tensor_core: block scales for a model without them");
  if (tc.integer != TcInteger::off) return tc_integer(g, m, n, k, A, lda, B, ldb, C, ldc, C0);
  if (tc.operand_bits > 0) {  // (the cut operands, then the model on them)
    thread_local std::vector<double> a_cut, b_cut;
    tc_cut_operands(g, m, n, k, A, lda, B, ldb, a_cut, b_cut);
    A = a_cut.data(), lda = k, B = b_cut.data(), ldb = n;
  }
  if (tc_term_path(tc)) return tc_terms(p, g, m, n, k, A, lda, B, ldb, C, ldc, C0, scales);
  if (C0 == nullptr && tc_run_strips(p, g, m, n, k, A, lda, B, ldb, C, ldc)) return;
  const Format& af = g.acc.format;
  const Format& tcf = p.tcf;
  const RoundOptions& block_opt = p.block_opt;
  const bool unlimited = p.unlimited, fast = p.fast, nearest = p.nearest, float_lanes = p.float_lanes;
  const int F = p.F;
  const std::size_t group = p.group, block = p.block, promote = p.promote;
  const int ea_min = g.a_format.emin(), eb_min = g.b_format.emin(), ec_min = tcf.emin();
  // An fp32 accumulator with IEEE overflow and no flushing: the hardware conversion double → float in the
  // block's rounding direction is that one rounding (IEEE 754 §5.4.2; overflow as §7.4, as pasa::round's ieee)
  [[maybe_unused]] const bool native_fp32 = tcf == fp32() && block_opt.overflow == Overflow::ieee &&
                                           !block_opt.flush_input && !block_opt.flush_output;
  thread_local std::vector<float> bf_buf, sf_buf;
  thread_local std::vector<std::int32_t> i32_buf;
  bf_buf.resize(float_lanes ? k * n : 0);
  sf_buf.resize(n);
  i32_buf.resize(n);
  float* bf = bf_buf.data();
  float* sf = sf_buf.data();
  std::int32_t* i32 = i32_buf.data();
  if (float_lanes)
    for (std::size_t t = 0; t < k; ++t)
      for (std::size_t j = 0; j < n; ++j) bf[t * n + j] = static_cast<float>(B[t * ldb + j]);

  thread_local std::vector<int> eb_buf, e_buf;
  thread_local std::vector<double> c_buf, outer_buf, sum_buf, scale_buf, ex_buf;
  thread_local std::vector<std::int64_t> isum_buf;
  thread_local std::vector<double> unscale_buf;
  isum_buf.resize(n);
  unscale_buf.resize(n);
  double* unscale = unscale_buf.data();
  std::int64_t* isum = isum_buf.data();
  eb_buf.resize(k * n);
  e_buf.resize(n);
  c_buf.resize(n);
  outer_buf.resize(n);
  sum_buf.resize(n);
  scale_buf.resize(n);
  ex_buf.resize(2 * block + 4);
  int* eb = eb_buf.data();
  thread_local std::vector<int> ea_buf;
  ea_buf.resize(block);
  int* ea_blk = ea_buf.data();  // the exponents of the row's operands in the current block
  int* E = e_buf.data();
  double* c = c_buf.data();
  double* outer = outer_buf.data();
  double* sum = sum_buf.data();
  double* scale = scale_buf.data();
  double* ex = ex_buf.data();
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < n; ++j) eb[t * n + j] = term_exp(B[t * ldb + j], eb_min);
  // Rows of B with an inf or NaN: a block that meets one takes the expansion path (below).
  thread_local std::vector<std::uint8_t> b_row_finite_buf;
  b_row_finite_buf.assign(k, 1);
  std::uint8_t* b_row_finite = b_row_finite_buf.data();
  for (std::size_t t = 0; t < k; ++t)
    for (std::size_t j = 0; j < n; ++j) b_row_finite[t] &= eb[t * n + j] != kHugeExp;
  auto cut = [nearest](double x) { return nearest ? std::nearbyint(x) : std::trunc(x); };
  auto round_into_acc = [&](double* v) {  // the block values, rounded once to the accumulator
#if defined(__AVX512F__)
    if (native_fp32) {
      switch (block_opt.mode) {
        case RoundMode::toward_zero: cvt_rows<_MM_FROUND_TO_ZERO>(v, n); return;
        case RoundMode::nearest_even: cvt_rows<_MM_FROUND_TO_NEAREST_INT>(v, n); return;
        case RoundMode::toward_pos: cvt_rows<_MM_FROUND_TO_POS_INF>(v, n); return;
        case RoundMode::toward_neg: cvt_rows<_MM_FROUND_TO_NEG_INF>(v, n); return;
        default: break;
      }
    }
#endif
    round_span(std::span<const double>(v, n), std::span<double>(v, n), tcf, block_opt);
  };
  for (std::size_t r = 0; r < m; ++r) {
    const double* a = A + r * lda;
    double* out = C + r * ldc;
    if (C0) std::copy(C0 + r * ldc, C0 + r * ldc + n, c);  // (read before row r is written: C0 may be C)
    else std::fill(c, c + n, 0.0);
    std::fill(outer, outer + n, 0.0);
    std::size_t since_promotion = 0;
    for (std::size_t t0 = 0; t0 < k; t0 += block) {
      const std::size_t t1 = std::min(k, t0 + block);
      for (std::size_t j = 0; j < n; ++j) E[j] = tc.acc_in_block ? term_exp(c[j], ec_min) : kZeroExp;
      for (std::size_t t = t0; t < t1; ++t) ea_blk[t - t0] = term_exp(a[t], ea_min);
      // kW columns at a time, their running maxima held in registers over the block's products
      std::size_t jw = 0;
      for (; jw + kW <= n; jw += kW) {
        int e[kW];
        for (std::size_t w = 0; w < kW; ++w) e[w] = E[jw + w];
        for (std::size_t t = t0; t < t1; ++t) {
          const int ea = ea_blk[t - t0];
          const int* ebt = eb + t * n + jw;
          for (std::size_t w = 0; w < kW; ++w) e[w] = std::max(e[w], ea + ebt[w]);
        }
        for (std::size_t w = 0; w < kW; ++w) E[jw + w] = e[w];
      }
      for (std::size_t t = t0; t < t1; ++t) {
        const int ea = ea_blk[t - t0];
        const int* ebt = eb + t * n;
        for (std::size_t j = jw; j < n; ++j) E[j] = std::max(E[j], ea + ebt[j]);
      }
      // 2^(F − E), E clamped so that the power of two is a normal double (an all-zero block has E = kZeroExp;
      // a huge E only where a term is not finite and IEEE's value is taken below)
      for (std::size_t j = 0; j < n; ++j) {
        const int e = std::clamp(E[j], F - (float_lanes ? 100 : 1000), F + (float_lanes ? 100 : 1000));
        scale[j] = pow2(F - e);
        unscale[j] = pow2(e - F);
      }
      // The fast path converts every scaled term to an integer, which C++ leaves undefined for an inf or NaN
      // (a non-finite operand, inf·0, or a product of finite operands past 2^1000): a block with one takes the
      // expansion path, which gives the same value for every finite column (the same cut terms, summed
      // exactly) and whose non-finite columns ieee_where_not_finite overwrites with IEEE's value.
      bool tame = true;
      for (std::size_t j = 0; j < n; ++j) tame = tame && E[j] < 1000;
      for (std::size_t t = t0; t < t1; ++t) tame = tame && ea_blk[t - t0] != kHugeExp && b_row_finite[t];
      if (fast && tame) {
        // integers below 2^(F+2) each: int64 conversion truncates toward zero (vectorised), the sum is exact
        auto to_int = [nearest](double x) {
          return static_cast<std::int64_t>(nearest ? std::nearbyint(x) : x);
        };
        if (nearest) {
          for (std::size_t j = 0; j < n; ++j) isum[j] = tc.acc_in_block ? to_int(c[j] * scale[j]) : 0;
          for (std::size_t t = t0; t < t1; ++t) {
            const double at = a[t];
            const double* bt = B + t * ldb;
            for (std::size_t j = 0; j < n; ++j) isum[j] += to_int(at * bt[j] * scale[j]);
          }
        } else if (float_lanes) {
          for (std::size_t j = 0; j < n; ++j) {
            isum[j] = tc.acc_in_block ? static_cast<std::int64_t>(c[j] * scale[j]) : 0;
            sf[j] = static_cast<float>(scale[j]);  // a power of two within float's range (E clamped above)
          }
          for (std::size_t g0 = t0; g0 < t1; g0 += group) {
            const std::size_t g1 = std::min(t1, g0 + group);
            // kW columns at a time, their int32 sums and scales held in registers over the group's products
            std::size_t jc = 0;
            for (; jc + kW <= n; jc += kW) {
              std::int32_t acc[kW] = {};
              float sc[kW];
              for (std::size_t w = 0; w < kW; ++w) sc[w] = sf[jc + w];
              for (std::size_t t = g0; t < g1; ++t) {
                const float at = static_cast<float>(a[t]);
                const float* bt = bf + t * n + jc;
                for (std::size_t w = 0; w < kW; ++w) acc[w] += static_cast<std::int32_t>(at * bt[w] * sc[w]);
              }
              for (std::size_t w = 0; w < kW; ++w) isum[jc + w] += acc[w];
            }
            if (jc < n) {
              std::fill(i32 + jc, i32 + n, 0);
              for (std::size_t t = g0; t < g1; ++t) {
                const float at = static_cast<float>(a[t]);
                const float* bt = bf + t * n;
                for (std::size_t j = jc; j < n; ++j) i32[j] += static_cast<std::int32_t>(at * bt[j] * sf[j]);
              }
              for (std::size_t j = jc; j < n; ++j) isum[j] += i32[j];
            }
          }
        } else {
          for (std::size_t j = 0; j < n; ++j)
            isum[j] = tc.acc_in_block ? static_cast<std::int64_t>(c[j] * scale[j]) : 0;
          for (std::size_t t = t0; t < t1; ++t) {
            const double at = a[t];
            const double* bt = B + t * ldb;
            for (std::size_t j = 0; j < n; ++j) isum[j] += static_cast<std::int64_t>(at * bt[j] * scale[j]);
          }
        }
        for (std::size_t j = 0; j < n; ++j) sum[j] = static_cast<double>(isum[j]) * unscale[j];  // exact
        round_into_acc(sum);
      } else {
        for (std::size_t j = 0; j < n; ++j) {
          int ne = 0;
          auto add = [&](double x) {
            if (unlimited) expansion_add(ex, ne, x);
            else if (const double q = cut(x * scale[j]); q != 0.0) expansion_add(ex, ne, q / scale[j]);
          };
          if (tc.acc_in_block) add(c[j]);
          for (std::size_t t = t0; t < t1; ++t) add(a[t] * B[t * ldb + j]);
          sum[j] = ne == 0 ? 0.0 : round_sum_dd(expansion_to_dd(ex, ne), tcf, block_opt);
        }
      }
      if (tc.acc_in_block) std::copy(sum, sum + n, c);
      else
        for (std::size_t j = 0; j < n; ++j) c[j] = round_sum_dd(two_sum(c[j], sum[j]), tcf, block_opt);
      since_promotion += t1 - t0;
      if (promote > 0 && (since_promotion == promote || t1 == k)) {  // the CUDA cores' add, in the acc stage
        for (std::size_t j = 0; j < n; ++j) {
          outer[j] = round_sum_dd(two_sum(outer[j], c[j]), af, g.acc.round);
          c[j] = 0.0;
        }
        since_promotion = 0;
      }
    }
    const double* result = promote > 0 ? outer : c;
    for (std::size_t j = 0; j < n; ++j) out[j] = result[j];
  }
  ieee_where_not_finite(m, n, k, A, lda, B, ldb, C, ldc);
}

}  // namespace pasa::detail
