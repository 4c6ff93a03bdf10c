// The per-tile arithmetic of the blocked engines (blocked_attention.hpp): the row reductions in each
// reduce order, the exponentials of the exp stage, the final division and P's rounding, each under the
// stage's format and the fast paths that give the same bits. Run's setup and the GEMM tiles are in
// blocked_attention.cpp.
#include "pasa/attention/detail/blocked_attention.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numbers>
#include <thread>
#include <type_traits>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/detail/fused_tile.hpp"
#include "pasa/attention/quantise.hpp"
#include "pasa/core/memory.hpp"

namespace pasa::detail {
namespace {

// Whether every x[i] is a float value (NaNs excepted: they fail the comparison), and with `bits` = 11 also
// of at most 11 significant bits (the float's 13 low significand bits zero).
bool floats_only(const double* x, std::size_t n, int bits = 24) {
  const std::uint32_t low = bits == 24 ? 0 : 0x1FFF;
  std::uint32_t bad = 0;  // (an integer or-reduction: GCC vectorises it, not a bool and-reduction)
  for (std::size_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(x[i]);
    bad |= static_cast<std::uint32_t>(static_cast<double>(f) != x[i]) | (std::bit_cast<std::uint32_t>(f) & low);
  }
  return bad == 0;
}

}  // namespace

namespace {

// dst[r] = rnd_acc(dst[r] + src[r]) for the rows: one addition of every row's accumulator.
inline void add_acc(const Run& run, Stage s, double* dst, const double* src, std::size_t rows, RandomBits* rng) {
  run.round_acc_each(s, dst, rows, rng, [&](std::size_t r) { return two_sum(dst[r], src[r]); });
}

// Pairwise order over columns [a, b): dst = x[a] if b − a = 1, else rnd_acc(sum[a, a+h) + sum[a+h, b)) with
// h = (b − a)/2. scratch holds rows values per recursion level.
void pairwise_columns(const Run& run, Stage s, const double* T, std::size_t rows, std::size_t st, std::size_t a,
                      std::size_t b, double* dst, double* scratch, RandomBits* rng) {
  if (b - a == 1) {
    std::copy(T + a * st, T + a * st + rows, dst);
    return;
  }
  const std::size_t h = (b - a) / 2;
  pairwise_columns(run, s, T, rows, st, a, a + h, dst, scratch + rows, rng);
  pairwise_columns(run, s, T, rows, st, a + h, b, scratch, scratch + rows, rng);
  add_acc(run, s, dst, scratch, rows, rng);
}

}  // namespace

namespace {


// The sequential and blocked orders of reduce_columns with a plain RNE fp32 accumulator on float terms
// (T: n columns of rows floats, stride st): every addition a float addition, which is the exact sum rounded
// once to fp32 (IEEE 754 §4.3.1, overflow included), so the same bits as add_acc, with twice the lanes and
// no exact-sum and fold steps. out: the rows' accumulated sums.
void reduce_columns_float(ReduceOrder order, std::size_t k, const float* T, std::size_t rows, std::size_t n,
                          std::size_t st, double* out) {
  thread_local std::vector<float> buffer;
  if (order == ReduceOrder::sequential) k = 1;  // one lane
  buffer.assign(rows * k, 0.0f);                 // a lane with no element holds +0
  float* lanes = buffer.data();
  for (std::size_t l = 0; l < k && l < n; ++l) {
    float* p = lanes + l * rows;
    std::copy(T + l * st, T + l * st + rows, p);
    for (std::size_t c = l + k; c < n; c += k) {
      const float* x = T + c * st;
      for (std::size_t r = 0; r < rows; ++r) p[r] = p[r] + x[r];
    }
  }
  for (std::size_t off = k / 2; off >= 1; off /= 2)
    for (std::size_t l = 0; l < off; ++l) {
      float* p = lanes + l * rows;
      const float* q = lanes + (l + off) * rows;
      for (std::size_t r = 0; r < rows; ++r) p[r] = p[r] + q[r];
    }
  for (std::size_t r = 0; r < rows; ++r) out[r] = lanes[r];
}

// The blocked order with k lanes (K: k known at compile time, so that the lanes live in registers; 0: any k)
// on each row of X (rows × n, stride ld) in float, out[r] = the row's sum; false (out partly written) when
// a term is not a float.
template <std::size_t K>
bool warp_rows(const double* X, std::size_t rows, std::size_t n, std::size_t ld, std::size_t k, double* out) {
  if constexpr (K != 0) k = K;
  thread_local std::vector<float> lane_buffer;
  lane_buffer.resize(k);
  float* p = lane_buffer.data();
  for (std::size_t r = 0; r < rows; ++r) {
    const double* x = X + r * ld;
    if (!floats_only(x, n)) return false;
    float lanes[K == 0 ? 1 : K];
    float* q = K == 0 ? p : lanes;
    std::fill(q, q + k, 0.0f);  // a lane with no element holds +0
    const std::size_t first = std::min(k, n);
    for (std::size_t l = 0; l < first; ++l) q[l] = static_cast<float>(x[l]);
    std::size_t c0 = k;
    for (; c0 + k <= n; c0 += k)
      for (std::size_t l = 0; l < k; ++l) q[l] = q[l] + static_cast<float>(x[c0 + l]);
    for (std::size_t l = 0; c0 + l < n; ++l) q[l] = q[l] + static_cast<float>(x[c0 + l]);
    for (std::size_t off = k / 2; off >= 1; off /= 2)
      for (std::size_t l = 0; l < off; ++l) q[l] = q[l] + q[l + off];
    out[r] = q[0];
  }
  return true;
}

}  // namespace

void reduce_finish(const Run& run, Stage s, ReduceOp op, std::size_t rows, std::size_t n, double* out,
                   RandomBits* rng) {
  const StageSpec& sp = run.stage(s);
  const Reduction& red = sp.reduce;
  if (op == ReduceOp::mean) {  // torch.mean: the sum divided by n in the accumulator
    const double dn = static_cast<double>(n);
    run.round_acc_each(s, out, rows, rng, [&](std::size_t r) { return exact_quotient(out[r], dn); });
  }
  // One rounding to the stage format. With acc = the stage's format the value is already in it, unless it
  // is a lone x[0] of the pairwise order (a sum of one term: no addition has rounded it).
  const bool rounded = op == ReduceOp::mean || n > 1 || red.order != ReduceOrder::pairwise;
  if (!(sp.acc() == sp.format && rounded)) run.round_to(s, out, rows, rng);
}

void reduce_columns(const Run& run, Stage s, ReduceOp op, const double* T, std::size_t rows, std::size_t n,
                    std::size_t st, double* out, RandomBits* rng, const float* Tf) {
  if (n == 0) {
    std::fill(out, out + rows, 0.0);
    return;
  }
  const StageSpec& sp = run.stage(s);
  const Reduction& red = sp.reduce;
  thread_local std::vector<double> buffer;
  if (Tf) {  // float terms, fp32 accumulator (reduce_rows checked both), not pairwise
    reduce_columns_float(red.order, static_cast<std::size_t>(red.width), Tf, rows, n, st, out);
  } else switch (red.order) {
    case ReduceOrder::sequential:  // s = −0; s = rnd_acc(s + x[c]) for every c
      // Every term enters the accumulator by a rounded addition: a first term wider than acc (an fp32 exp
      // summed in fp16) is rounded as it enters, as the hardware's register would hold it (a copy kept it
      // unrounded; the reference emulator caught the difference). −0 is the exact identity of addition
      // (−0 + x = x, signed zeros included), so a first term already in acc enters unchanged.
      std::fill(out, out + rows, -0.0);
      for (std::size_t c = 0; c < n; ++c) add_acc(run, s, out, T + c * st, rows, rng);
      break;
    case ReduceOrder::pairwise: {
      std::size_t depth = 1;
      for (std::size_t m = n; m > 1; m = m - m / 2) ++depth;  // the longer half is the second one
      buffer.resize(rows * depth);
      pairwise_columns(run, s, T, rows, st, 0, n, out, buffer.data(), rng);
      break;
    }
    case ReduceOrder::blocked: {  // the warp pattern: k strided lanes, then the shuffle-down tree
      const std::size_t k = static_cast<std::size_t>(red.width);
      buffer.assign(rows * k, 0.0);  // a lane with no element holds +0
      double* lanes = buffer.data();
      for (std::size_t l = 0; l < k && l < n; ++l) {  // a lane with terms from −0, as the sequential order
        double* p = lanes + l * rows;
        std::fill(p, p + rows, -0.0);
        for (std::size_t c = l; c < n; c += k) add_acc(run, s, p, T + c * st, rows, rng);
      }
      for (std::size_t off = k / 2; off >= 1; off /= 2)
        for (std::size_t l = 0; l < off; ++l) add_acc(run, s, lanes + l * rows, lanes + (l + off) * rows, rows, rng);
      std::copy(lanes, lanes + rows, out);
      break;
    }
  }
  reduce_finish(run, s, op, rows, n, out, rng);
}

void reduce_rows(const Run& run, Stage s, ReduceOp op, const double* X, std::size_t rows, std::size_t n, std::size_t ld,
                 double* out, RandomBits* rng) {
  // Transposed first, so that each step adds one contiguous column to the rows' partial sums.
  const std::size_t st = rows + 1;  // an odd stride: a power-of-two one makes the transposition thrash L1
  const Reduction& red = run.stage(s).reduce;
  if (run.acc_fp32(s) && red.order == ReduceOrder::blocked && red.width >= 8) {
    // The warp pattern row by row, its lanes contiguous: no transposition (the same float additions as
    // reduce_columns_float, in the same order per lane).
    const std::size_t k = static_cast<std::size_t>(red.width);
    const bool floats = k == 32 ? warp_rows<32>(X, rows, n, ld, k, out) : warp_rows<0>(X, rows, n, ld, k, out);
    if (floats) {
      if (n == 0) std::fill(out, out + rows, 0.0);
      else reduce_finish(run, s, op, rows, n, out, rng);
      return;
    }
  }
  if (run.acc_fp32(s) && red.order != ReduceOrder::pairwise) {
    // fp32 accumulator: float terms (NaNs excepted) reduce in float registers (reduce_columns_float).
    thread_local std::vector<float> fbuffer;
    fbuffer.resize(st * n);
    float* t = fbuffer.data();
    bool floats = true;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < n; ++c) {
        const double x = X[r * ld + c];
        const float f = static_cast<float>(x);
        floats &= static_cast<double>(f) == x;
        t[c * st + r] = f;
      }
    if (floats) {
      reduce_columns(run, s, op, nullptr, rows, n, st, out, rng, t);
      return;
    }
  }
  thread_local std::vector<double> buffer;
  buffer.resize(st * n);
  double* t = buffer.data();  // (a plain pointer: every access to a thread_local goes through a TLS lookup)
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < n; ++c) t[c * st + r] = X[r * ld + c];
  reduce_columns(run, s, op, t, rows, n, st, out, rng);
}

void rescale_factors(const Run& run, const double* m_old, const double* m_new, std::size_t rows, double* alpha,
                     RandomBits* rng) {
  run.round_each(Stage::max, alpha, rows, rng, [&](std::size_t r) { return two_sum(m_old[r], -m_new[r]); });
  exp_to_stage(run, alpha, rows, rng);
  for (std::size_t r = 0; r < rows; ++r)
    if (m_old[r] == kNegInf) alpha[r] = 0.0;
}

void rescale_add(const Run& run, Stage s, double* acc, const double* alpha, const double* add, std::size_t rows,
                 std::size_t width, RandomBits* rng) {
  if (run.fusable(s)) {  // the same roundings in one pass
    run.fused(s, [&](auto rnd) {
      for (std::size_t r = 0; r < rows; ++r) {
        const double a = alpha[r];
        double* x = acc + r * width;
        const double* y = add + r * width;
        for (std::size_t d = 0; d < width; ++d) x[d] = rnd(two_sum(rnd(two_prod(a, x[d])), y[d]));
      }
    });
    return;
  }
  if (width == 1) {  // one value per row (l): one call, the same roundings and draws in the same order
    run.round_each(s, acc, rows, rng, [&](std::size_t r) { return two_prod(alpha[r], acc[r]); });
  } else {
    for (std::size_t r = 0; r < rows; ++r) {  // row by row: a constant factor keeps the loop vectorised
      double* x = acc + r * width;
      const double a = alpha[r];
      run.round_each(s, x, width, rng, [&](std::size_t d) { return two_prod(a, x[d]); });
    }
  }
  run.round_each(s, acc, rows * width, rng, [&](std::size_t i) { return two_sum(acc[i], add[i]); });
}

double row_max(const double* x, std::size_t n) {
  double m = kNegInf;
  for (std::size_t c = 0; c < n; ++c)
    if (x[c] > m) m = x[c];
  return m;
}

void exp_span(double* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = exp_one(x[i]);
}

// e^x rounded once to a stage of more than 24 bits, where exp_one's ~2 ulp of double cannot decide the
// rounding. Ziv's strategy: exp_dd (relative error < 2^-98) decides it when both ends of an interval of
// ±2^-95·|e^x| around it round alike (rounding is monotone, so e^x, inside, rounds the same); otherwise (e^x
// within 2^-95 of a breakpoint, or outside exp_dd's range) MPFR's e^x, rounded to odd (exp_odd).
double exp_rounded_wide(double x, const StageSpec& sp, RandomBits* rng) {
  DD e{};
  if (x >= -635.0 && x <= 0.5) {
    e = exp_dd(DD{x, 0.0});
    if (sp.format.p == 53 && sp.format.emin() <= -1022 && sp.round.mode == RoundMode::nearest_even) {
      // hi is RN(e^x) unless lo lies within the error bound of ±ulp(hi)/2 (e.hi is normal here).
      const double half_ulp = std::bit_cast<double>((std::bit_cast<std::uint64_t>(e.hi) & 0x7FF0000000000000ull) -
                                                    (53ull << 52));
      if (std::fabs(std::fabs(e.lo) - half_ulp) > 0x1p-95 * e.hi) {
        const bool plain = sp.round.overflow == Overflow::ieee && !sp.round.flush_input && !sp.round.flush_output;
        return plain ? e.hi : round(e.hi, sp.format, sp.round);
      }
    }
    if (sp.round.mode != RoundMode::stochastic) {
      const double w = 0x1p-95 * e.hi;
      const DD below = two_sum(e.hi, e.lo - w), above = two_sum(e.hi, e.lo + w);
      const double r = round_sum(below.hi, below.lo, sp.format, sp.round);
      if (r == round_sum(above.hi, above.lo, sp.format, sp.round)) return r;
      e = exp_odd(x);
    }
  } else {
    e = exp_odd(x);
  }
  return round_sum(e.hi, e.lo, sp.format, sp.round, rng);
}

void exp_to_stage(const Run& run, double* x, std::size_t n, RandomBits* rng) {
  const StageSpec& sp = run.stage(Stage::exp);
  if (sp.via == ExpVia::fp32) {  // CUDA/PyTorch: expf on the float argument, then a cast
    for (std::size_t i = 0; i < n; ++i) x[i] = std::exp(static_cast<float>(x[i]));
  } else if (sp.format.p > 24) {
    for (std::size_t i = 0; i < n; ++i) x[i] = exp_rounded_wide(x[i], sp, rng);
    return;
  } else {
    exp_span(x, n);
  }
  run.round_to(Stage::exp, x, n, rng);
}

void tile_exp(const Run& run, const double* Z, std::size_t rows, std::size_t n, std::size_t ld, const double* shift,
              double* P, RandomBits* rng) {
  for (std::size_t r = 0; r < rows; ++r) {
    const double sh = shift[r] == kNegInf ? 0.0 : shift[r];
    run.round_each(Stage::exp, P + r * ld, n, rng, [&](std::size_t c) { return two_sum(Z[r * ld + c], -sh); });
  }
  const std::size_t count = rows == 0 ? 0 : (rows - 1) * ld + n;
  exp_to_stage(run, P, count, rng);
  if (const int po = run.spec.quant.p_offset; po != 0) {  // [FA3] Max_offset: P = 2^po·e^{x − m}, exact
    for (std::size_t i = 0; i < count; ++i) P[i] = std::ldexp(P[i], po);
    run.round_to(Stage::exp, P, count, rng);  // (the exp stage's overflow and underflow)
  }
}

void write_row(const Run& run, std::size_t b, std::size_t h, std::size_t r, const double* o, double lse,
               AttentionOutput& out) {
  double* dst = out.o.head(b, h) + r * run.D;
  std::copy(o, o + run.D, dst);
  out.lse[(b * run.Nq + h) * run.Sq + r] = lse;
}

// The scaled, masked scores of one tile; returns false when the mask hides the whole tile.
bool tile_logits(const Run& run, const Item& it, std::size_t j0, std::size_t n, std::vector<double>& Z,
                 std::vector<std::uint8_t>& vis, RandomBits* rng) {
  if (!tile_visibility(run, it, j0, j0 + n, vis)) return false;
  Z.resize(it.rows() * n);
  tile_scores(run, it, j0, n, Z.data(), rng);
  tile_scale(run, Z.data(), Z.size(), rng);
  if (run.biased) tile_bias_select(run, it, j0, n, Z.data(), rng);
  if (run.masked) tile_mask(Z.data(), vis, Z.size());
  return true;
}

namespace {
// x[i] = the float quotient a[i]/b (a and b floats); false when one underflows to zero or a subnormal, or
// is not finite.
bool float_quotients(const double* a, double b, double* x, std::size_t n) {
  const float bf = static_cast<float>(b);
  bool normal = true;
  for (std::size_t i = 0; i < n; ++i) {
    const float q = static_cast<float>(a[i]) / bf;
    const float m = std::fabs(q);
    normal &= (m >= 0x1p-126f && m <= 0x1.fffffep127f) || (m == 0.0f && a[i] == 0.0);  // 0/b: exact
    x[i] = q;
  }
  return normal;
}
}  // namespace

void finish_rows(const Run& run, const Item& it, const std::vector<double>& O, const std::vector<double>& l,
                 const std::vector<double>& m, const std::vector<std::uint8_t>& seen, bool divide,
                 const std::vector<double>* lse_shift, AttentionOutput& out, RandomBits* rng) {
  std::vector<double> row(run.D);
  // An RNE div stage of p <= 11 bits (fp16; bf16 has 8, fp8 4 or 3) on operands of at most 11 bits (O and l in
  // fp16, say): RN_p(RN_fp32(a/b)) = RN_p(a/b), since 24 >= 2·11 + 2 [Figueroa 1995, "When is double rounding
  // innocuous?"], as long as the float quotient is a normal number (all 24 bits); float_quotients checks
  // that. (An fp32 l breaks the premise: then the exact quotient.)
  const StageSpec& div = run.stage(Stage::div);
  const bool narrow_div = div.format.p <= 11 && div.round.mode == RoundMode::nearest_even && !div.round.flush_input &&
                          !div.round.flush_output;
  for (std::size_t r = 0; r < it.rows(); ++r) {
    const std::size_t h = it.head_of(r), i = it.row_of(r);
    if (!seen[r]) {
      std::fill(row.begin(), row.end(), 0.0);
      write_row(run, it.b, h, i, row.data(), kNegInf, out);
      continue;
    }
    const double* o = &O[r * run.D];
    if (divide && run.fusable(Stage::div)) {  // the same rounding in one vectorised loop
      const double lr = l[r];
      const std::size_t D = run.D;
      double* x = row.data();
      if (!run.native(Stage::div) && floats_only(o, D) && static_cast<float>(lr) == lr) {
        // fp32 stage, fp32 operands: a float division is the correctly rounded quotient (IEEE 754 §5.4.1,
        // subnormals and overflow included), the same bits as the exact quotient rounded once, in a
        // quarter of the time (no residual, twice the lanes).
        const float lf = static_cast<float>(lr);
        for (std::size_t d = 0; d < D; ++d) x[d] = static_cast<float>(o[d]) / lf;
      } else {
        run.fused(Stage::div, [&](auto rnd) {
          for (std::size_t d = 0; d < D; ++d) x[d] = rnd(exact_quotient(o[d], lr));
        });
      }
    } else if (divide && narrow_div && floats_only(o, run.D, 11) && floats_only(&l[r], 1, 11) &&
               float_quotients(o, l[r], row.data(), run.D)) {
      run.round_to(Stage::div, row.data(), run.D, rng);
    } else if (divide) {
      run.round_each(Stage::div, row.data(), run.D, rng, [&](std::size_t d) { return exact_quotient(o[d], l[r]); });
    } else {
      std::copy(o, o + run.D, row.begin());
    }
    run.round_to(Stage::out, row.data(), run.D, rng);
    // l carries QuantOptions' 2^p_offset
    double lse = m[r] + std::log(l[r]) - run.spec.quant.p_offset * std::numbers::ln2;
    if (lse_shift) lse += (*lse_shift)[(it.b * run.Nq + h) * run.Sq + i];
    write_row(run, it.b, h, i, row.data(), lse, out);
  }
}

void normalised_output(const Run& run, const Item& it, const std::vector<double>& m, const std::vector<double>& d,
                       const std::vector<std::uint8_t>& seen, AttentionOutput& out, RandomBits* rng,
                       const std::vector<double>& Zrow) {
  const std::size_t rows = it.rows(), S = run.Skv;
  std::vector<double> A(rows * S), O(rows * run.D);
  tile_exp(run, Zrow.data(), rows, S, S, m.data(), A.data(), rng);
  for (std::size_t r = 0; r < rows; ++r)  // Eq. 9
    run.round_each(Stage::div, &A[r * S], S, rng, [&](std::size_t c) { return exact_quotient(A[r * S + c], d[r]); });
  run.round_p(A.data(), rows, S, rng);
  tile_pv(run, it, A.data(), S, 0, S, O.data(), rng);
  finish_rows(run, it, O, d, m, seen, false, nullptr, out, rng);
}

// P rounded to the p stage, then (QuantOptions::p_block) block-quantised along the keys of the tile: the
// values the P·V GEMM takes are its elements times their scales.
void Run::round_p(double* P, std::size_t rows, std::size_t n, RandomBits* rng) const {
  round_to(Stage::p, P, rows * n, rng);
  if (!spec.quant.p_block) return;
  const BlockQuantised pq = block_quantise(P, 1, rows, n, *spec.quant.p_block, false, rng);
  std::copy(pq.values.begin(), pq.values.end(), P);
}

}  // namespace pasa::detail
