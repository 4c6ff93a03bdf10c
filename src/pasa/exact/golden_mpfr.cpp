// The golden's plain MPFR evaluation (golden_internal.hpp): used when GoldenOptions::fast is off, and for
// every block of rows whose fast-path bound is below kMinFastBits or whose magnitudes fail the range test.
#include <algorithm>
#include <cmath>
#include <memory>

#include <mpfr.h>

#include "pasa/core/cancel.hpp"
#include "pasa/exact/golden_internal.hpp"
#include "pasa/exact/score_rows.hpp"

namespace pasa::golden_detail {

namespace {

// RAII array of MPFR numbers of one precision.
class MpVec {
 public:
  MpVec(std::size_t n, mpfr_prec_t prec) : v_(std::make_unique<__mpfr_struct[]>(n)), n_(n) {
    for (std::size_t i = 0; i < n_; ++i) mpfr_init2(&v_[i], prec);
  }
  ~MpVec() {
    for (std::size_t i = 0; i < n_; ++i) mpfr_clear(&v_[i]);
  }
  MpVec(const MpVec&) = delete;
  MpVec& operator=(const MpVec&) = delete;
  mpfr_ptr operator[](std::size_t i) { return &v_[i]; }

 private:
  std::unique_ptr<__mpfr_struct[]> v_;
  std::size_t n_;
};

}  // namespace

// Plain MPFR evaluation at precision_bits >= 106 (so products of two doubles are exact). Bound, u = 2^-P:
// score error <= S·1.01·D·u·‖q‖‖k‖ + 2u|s| (sum, scale), t: + u|t|, exp: u; N: 2n·u·Σp|v|; L: n·u; div: u.
void mpfr_block(Problem& P, std::size_t b, std::size_t h, std::size_t i0, std::size_t i1, BlockResult& res) {
  const AttentionInputs& in = P.in;
  const mpfr_prec_t prec = P.opt.precision_bits;
  const int shift = std::max(0, static_cast<int>(prec) - 900);  // the bound is in units of 2^-shift
  const double u = std::ldexp(1.0, shift - static_cast<int>(prec));
  const std::size_t D = in.q.shape.D, Sq = in.q.shape.S, Skv = in.k.shape.S;
  const std::size_t hk = h / in.group();
  std::vector<double> kbuf, vbuf, qbuf;  // (a narrow input's head as doubles; this path is rare and slow anyway)
  const double* K = in.k.values(in.k.index(b, hk, 0), Skv * D, kbuf);
  const double* V = in.v.values(in.v.index(b, hk, 0), Skv * D, vbuf);
  MpVec s(Skv, prec), num(D, prec), tmp(4, prec);
  mpfr_ptr acc = tmp[0], m = tmp[1], l = tmp[2], scale = tmp[3];
  if (in.scale != 0) {
    mpfr_set_d(scale, in.scale, MPFR_RNDN);
  } else {
    mpfr_set_ui(scale, static_cast<unsigned long>(D), MPFR_RNDN);
    mpfr_rec_sqrt(scale, scale, MPFR_RNDN);
  }
  const double scale_d = std::abs(mpfr_get_d(scale, MPFR_RNDN));
  std::vector<double> knorm(Skv);
  for (std::size_t j = 0; j < Skv; ++j) knorm[j] = row_norm(K + j * D, D);
  std::vector<unsigned char> vis;
  for (std::size_t i = i0; i < i1; ++i) {
    check_cancel();  // a row at 100000 bits takes seconds: stop between rows and keys when asked
    const std::size_t row = (b * in.q.shape.N + h) * Sq + i;
    const std::size_t n = visible_keys(in, b, i, vis);
    if (n == 0) {
      write_masked_row(P.g, row - P.row0, D);
      continue;
    }
    const double* q = in.q.values(in.q.index(b, h, i), D, qbuf);
    const double* pse = pse_row(in, b, h, i);
    const std::uint8_t* sel = select_row(in, b, i);
    const double qn = row_norm(q, D);
    double dmax = 0;
    bool have_max = false;
    for (std::size_t j = 0; j < vis.size(); ++j) {
      if (!vis[j]) continue;
      check_cancel();
      mpfr_set_zero(s[j], 1);
      for (std::size_t x = 0; x < D; ++x) {
        mpfr_set_d(acc, q[x], MPFR_RNDN);
        mpfr_mul_d(acc, acc, K[j * D + x], MPFR_RNDN);  // exact: 106 bits suffice
        mpfr_add(s[j], s[j], acc, MPFR_RNDN);
      }
      mpfr_mul(s[j], s[j], scale, MPFR_RNDN);
      double dj = scale_d * 1.01 * static_cast<double>(D) * u * qn * knorm[j] + 2 * u * std::abs(mpfr_get_d(s[j], MPFR_RNDN));
      if (pse) {  // [IFA] q·k·scale + pse, one rounding
        dj += u * (std::abs(mpfr_get_d(s[j], MPFR_RNDN)) + std::abs(pse[j]));
        mpfr_add_d(s[j], s[j], pse[j], MPFR_RNDN);
      }
      if (sel && sel[j]) {  // masked by select: the score is the constant, exactly
        mpfr_set_d(s[j], in.mask.select_value, MPFR_RNDN);
        dj = 0;
      }
      if (!have_max || mpfr_greater_p(s[j], m)) mpfr_set(m, s[j], MPFR_RNDN);
      have_max = true;
      dmax = std::max(dmax, dj);
    }
    mpfr_set_zero(l, 1);
    for (std::size_t x = 0; x < D; ++x) mpfr_set_zero(num[x], 1);
    for (std::size_t j = 0; j < vis.size(); ++j) {
      if (!vis[j]) continue;
      check_cancel();
      mpfr_sub(s[j], s[j], m, MPFR_RNDN);
      dmax = std::max(dmax, u * std::abs(mpfr_get_d(s[j], MPFR_RNDN)));
      mpfr_exp(s[j], s[j], MPFR_RNDN);
      mpfr_add(l, l, s[j], MPFR_RNDN);
      for (std::size_t x = 0; x < D; ++x) {
        mpfr_mul_d(acc, s[j], V[j * D + x], MPFR_RNDN);
        mpfr_add(num[x], num[x], acc, MPFR_RNDN);
      }
    }
    double* o = P.g.o.data.data() + (row - P.row0) * D;
    for (std::size_t x = 0; x < D; ++x) {
      mpfr_div(acc, num[x], l, MPFR_RNDN);
      o[x] = mpfr_get_d(acc, MPFR_RNDN);
    }
    mpfr_log(l, l, MPFR_RNDN);
    mpfr_add(l, l, m, MPFR_RNDN);
    P.g.lse[row - P.row0] = mpfr_get_d(l, MPFR_RNDN);
    const double nd = static_cast<double>(n);
    const double E = 2.2 * (1.01 * dmax + u) + 1.1 * (3 * nd + 2) * u;
    res.bound = std::max(res.bound, std::ldexp(E, -shift));
    res.bits = std::min(res.bits, bits_of(E, shift));
  }
  res.mpfr = true;
}

}  // namespace pasa::golden_detail
