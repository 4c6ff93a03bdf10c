// The fused path's exp and row sums (fused_tile.hpp): the exp of a tile with its row sums in the same loop
// where their order allows, the fp16 exp table, and the reductions of the tile's columns.
#include "pasa/attention/detail/fused_tile.hpp"
#include "pasa/attention/detail/fused_lanes.hpp"

#include "pasa/attention/algorithm.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

// (immintrin.h and GCC 12's AVX-512 warnings: fused_lanes.hpp)

namespace pasa::detail {
using namespace fused_lanes;

namespace {
#if defined(__AVX512F__)
// The reduction of stage s accumulates in fp16 (RNE, no flushing) on terms of format `terms` = fp16: then each
// addition is a float addition rounded by F16C, the exact sum rounded once (24 >= 2·11 + 2 [Figueroa 1995];
// a sum below 2^-14 is a multiple of 2^-24 of at most 11 bits, exact in float).
bool acc_fp16(const Run& run, Stage s, const Format& terms) {
  const StageSpec& sp = run.stage(s);
  const RoundOptions& o = sp.round;
  static const Format fp16 = format_by_name("fp16");
  return sp.acc() == fp16 && terms == fp16 && o.mode == RoundMode::nearest_even && o.overflow == Overflow::ieee &&
         !o.flush_input && !o.flush_output;
}

// The k lanes of the blocked order (rows of ld floats, the first w columns used) after their terms: lanes
// that got none hold +0, then the shuffle-down tree, each addition rounded to fp16 when fp16.
void lane_tree(float* lanes, std::size_t k, std::size_t n, std::size_t w, std::size_t ld, bool fp16) {
  for (std::size_t l = n; l < k; ++l) std::fill(lanes + l * ld, lanes + (l + 1) * ld, 0.0f);  // +0: no term
  for (std::size_t off = k / 2; off >= 1; off /= 2)  // the shuffle-down tree
    for (std::size_t l = 0; l < off; ++l)
      for (std::size_t r = 0; r < w; r += 16) {
        const __m512 x = _mm512_add_ps(_mm512_loadu_ps(lanes + l * ld + r), _mm512_loadu_ps(lanes + (l + off) * ld + r));
        _mm512_storeu_ps(lanes + l * ld + r, fp16 ? fp16_16(x) : x);
      }
}
#endif
}  // namespace

namespace {
#if defined(__AVX512F__)
// An fp16 exp stage (RNE): its argument is an fp16 value, so its result is one of 2^16 values, computed once
// per process by the loop's own code (fp16_16(exp16(x, ro_float8)) on every fp16 x, NaNs included) and read
// by the argument's bits: the same bits by construction, a gather instead of two exp_one8 per 16 lanes.
const float* exp_fp16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (std::uint32_t i = 0; i < 65536; i += 16) {
      const __m512i bits = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(i)),
                                            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
      const __m512 x = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(bits));
      _mm512_storeu_ps(t.data() + i, fp16_16(exp16(x, ro_float8)));
    }
    return t;
  }();
  return table.data();
}
#endif
}  // namespace

bool fused_exp(const Run& run, FusedBuffers& ft, std::size_t n, const double* shift, double* rowsum, RandomBits* rng) {
  const std::size_t rows = ft.rows, w = ft.w, ld = ft.ld, count = n * ld;
  float* t = ft.t.data();
  double* sh = ft.shift.data();
  for (std::size_t r = 0; r < rows; ++r) sh[r] = shift[r] == kNegInf ? 0.0 : shift[r];
  const StageSpec& sp = run.stage(Stage::exp);
  const Kind kind = kind_of(sp);
  ft.p_done = false;
  // The argument rounded once (two_sum + sticky_fold, then a float conversion for fp32 as round_each's fused
  // form does, else ro_float and the narrow rounding), exp_one in double, its rounding (round_to of the exp
  // stage). fp16 in RNE: the narrow rounding of the float by the F16C conversion (IEEE's, as round_span's).
#if defined(__AVX512F__)
  const bool fp16 = is_fp16(sp);
  if (float_arguments(run)) {
    float* shf = ft.shiftf.data();
    for (std::size_t r = 0; r < w; ++r) shf[r] = static_cast<float>(sh[r]);
    // The row sums in the same loop where reduce_columns would take float terms (an fp32 accumulator, the
    // sequential or blocked order: lane c mod k of each row gets term c, the first by a copy), and P rounded
    // in it where p is fp32 (nothing to do) or fp16 (F16C); the sums go through reduce_finish.
    const Reduction& red = run.stage(Stage::sum).reduce;
    const bool sum16 = acc_fp16(run, Stage::sum, sp.format);
    const bool sum = rowsum && (run.acc_fp32(Stage::sum) || sum16) && red.order != ReduceOrder::pairwise;
    const StageSpec& p = run.stage(Stage::p);
    const bool p16 = is_fp16(p);
    const std::size_t k = red.order == ReduceOrder::sequential ? 1 : static_cast<std::size_t>(red.width);
    if (sum) ft.lanes.resize(k * ld);
    float* lanes = ft.lanes.data();
    const float* table = fp16 ? exp_fp16_table() : nullptr;
    for (std::size_t c = 0; c < n; ++c) {
      float* x = t + c * ld;
      // No lane without a row sum: ft.lanes may be empty then (and offsetting its null data() is undefined).
      float* lane = sum ? lanes + (c % k) * ld : nullptr;
      for (std::size_t r = 0; r < w; r += 16) {
        const __m512 z = _mm512_loadu_ps(x + r), s = _mm512_loadu_ps(shf + r);
        const __m512 e = kind == Kind::fp32
                             ? exp16(_mm512_sub_ps(z, s), [](__m512d v) { return _mm512_cvtpd_ps(v); })
                             : _mm512_i32gather_ps(_mm512_cvtepu16_epi32(_mm512_cvtps_ph(_mm512_sub_ps(z, s), kRne)),
                                                   table, 4);
        if (sum) {
          const __m512 add = c < k ? e : _mm512_add_ps(_mm512_loadu_ps(lane + r), e);
          _mm512_storeu_ps(lane + r, sum16 && c >= k ? fp16_16(add) : add);
        }
        _mm512_storeu_ps(x + r, sum && p16 ? fp16_16(e) : e);
      }
    }
    if (!sum) return false;
    lane_tree(lanes, k, n, w, ld, sum16);
    for (std::size_t r = 0; r < rows; ++r) rowsum[r] = lanes[r];
    reduce_finish(run, Stage::sum, ReduceOp::sum, rows, n, rowsum, rng);
    ft.p_done = kind_of(p) == Kind::fp32 || p16;
    return true;
  }
  if (kind == Kind::fp32 || fp16) {
    for (std::size_t c = 0; c < n; ++c) {
      float* x = t + c * ld;
      for (std::size_t r = 0; r < w; r += 8) {
        const __m512d z = _mm512_cvtps_pd(_mm256_loadu_ps(x + r)), s = _mm512_loadu_pd(sh + r);
        if (kind == Kind::fp32) {
          const __m512d a = folded_difference(z, s);
          _mm256_storeu_ps(x + r, _mm512_cvtpd_ps(exp_one8(_mm512_cvtps_pd(_mm512_cvtpd_ps(a)))));
        } else {
          const __m256 a = ro_float_sum8(z, negated(s));
          const __m512d e = exp_one8(_mm512_cvtps_pd(fp16_8(a)));
          _mm256_storeu_ps(x + r, fp16_8(ro_float8(e)));
        }
      }
    }
    return false;
  }
  for (std::size_t c = 0; c < n; ++c) {
    float* x = t + c * ld;
    for (std::size_t r = 0; r < w; r += 8)
      _mm256_storeu_ps(x + r, ro_float_sum8(_mm512_cvtps_pd(_mm256_loadu_ps(x + r)), negated(_mm512_loadu_pd(sh + r))));
  }
  round_floats(sp, t, count);
  for (std::size_t i = 0; i < count; i += 8) _mm256_storeu_ps(t + i, ro_float8(exp_one8(_mm512_cvtps_pd(_mm256_loadu_ps(t + i)))));
  round_floats(sp, t, count);
#else
  (void)run, (void)t, (void)count, (void)kind, (void)rowsum, (void)rng, (void)w, (void)float_arguments;
#endif
  return false;
}

void fused_exp_sum(const Run& run, FusedBuffers& ft, std::size_t n, const double* shift, double* rowsum, RandomBits* rng) {
  if (!fused_exp(run, ft, n, shift, rowsum, rng))
    fused_reduce(run, Stage::sum, ReduceOp::sum, run.stage(Stage::exp).format, ft, n, rowsum, rng);
}

void fused_reduce(const Run& run, Stage s, ReduceOp op, const Format& terms, FusedBuffers& ft, std::size_t n, double* out,
                  RandomBits* rng) {
  const std::size_t rows = ft.rows, w = ft.w, ld = ft.ld;
  const Reduction& red = run.stage(s).reduce;
  if (run.acc_fp32(s) && red.order != ReduceOrder::pairwise) {
    // reduce_rows' float forms (the same float additions in the same order per row and lane)
    reduce_columns(run, s, op, nullptr, rows, n, ld, out, rng, ft.t.data());
    return;
  }
#if defined(__AVX512F__)
  if (acc_fp16(run, s, terms) && red.order != ReduceOrder::pairwise) {
    const std::size_t k = red.order == ReduceOrder::sequential ? 1 : static_cast<std::size_t>(red.width);
    ft.lanes.resize(k * ld);
    float* lanes = ft.lanes.data();
    const float* t = ft.t.data();
    for (std::size_t c = 0; c < n; ++c) {
      float* lane = lanes + (c % k) * ld;
      for (std::size_t r = 0; r < w; r += 16) {
        const __m512 e = _mm512_loadu_ps(t + c * ld + r);
        _mm512_storeu_ps(lane + r, c < k ? e : fp16_16(_mm512_add_ps(_mm512_loadu_ps(lane + r), e)));
      }
    }
    lane_tree(lanes, k, n, w, ld, true);
    for (std::size_t r = 0; r < rows; ++r) out[r] = lanes[r];
    reduce_finish(run, s, op, rows, n, out, rng);
    return;
  }
#else
  (void)terms, (void)w;
#endif
  ft.wide.assign(ft.t.begin(), ft.t.begin() + static_cast<std::ptrdiff_t>(n * ld));  // reduce_rows' transposition
  reduce_columns(run, s, op, ft.wide.data(), rows, n, ld, out, rng);
}

}  // namespace pasa::detail
