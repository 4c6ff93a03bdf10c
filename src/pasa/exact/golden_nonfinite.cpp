// The golden of inputs holding NaN or ±inf: what IEEE 754 arithmetic gives when every operation of
// O = softmax(scale·QKᵀ)·V is carried out on the exact values ([IEEE754] §6.1, §6.2: inf and NaN
// propagation, inf − inf = 0·inf = NaN). Per visible key j of a row (masked keys take no part, as always):
//   s_j = scale·Σ_d q_d k_jd is NaN if a product is NaN (a NaN factor, or 0·inf) or +inf and −inf products
//   meet; else ±inf if a product is infinite; else the exact finite sum.
//   m = max_j s_j. Any NaN score, or any +inf score (then s_j − m = inf − inf), or every score −inf (then
//   −inf − (−inf)) makes the whole row NaN, lse included.
//   Otherwise the keys F with finite scores carry weights p_j > 0 (the exact softmax over F: the golden of
//   the row restricted to F, finite) and the −inf keys weight exp(−inf) = 0. Column d of the output is
//   NaN if some key of F has v_jd = NaN or some −inf key has a non-finite v_jd (0·inf, 0·NaN); else +inf
//   (−inf) if keys of F hold +inf (−inf) in column d and none the other sign (both: NaN); else the finite
//   golden over F. The lse is the finite golden's lse over F.
// Rows that meet no non-finite value are computed as usual (on a copy whose non-finite elements are 0,
// which those rows never read).
#include "pasa/exact/golden_nonfinite.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "pasa/core/assert.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/exact/golden_finite.hpp"

namespace pasa::detail {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Cls { finite, pos_inf, neg_inf, nan };

bool finite_row(const double* x, std::size_t n) {
  return std::all_of(x, x + n, [](double v) { return std::isfinite(v); });
}

// The class of scale·q·k under IEEE arithmetic on the exact values (scale finite and nonzero).
Cls score_class(const double* q, const double* k, std::size_t D, double scale) {
  bool pos = false, neg = false;
  for (std::size_t d = 0; d < D; ++d) {
    const double a = q[d], c = k[d];
    if (std::isnan(a) || std::isnan(c)) return Cls::nan;
    if (std::isinf(a) || std::isinf(c)) {
      if (a == 0 || c == 0) return Cls::nan;  // 0·inf
      (std::signbit(a) != std::signbit(c) ? neg : pos) = true;
    }
  }
  if (pos && neg) return Cls::nan;  // inf − inf
  if (scale < 0) std::swap(pos, neg);
  return pos ? Cls::pos_inf : neg ? Cls::neg_inf : Cls::finite;
}

}  // namespace

Golden golden_with_nonfinite(const AttentionInputs& in_any, const GoldenOptions& opt) {
  AttentionInputs own;  // (rows are gathered from Q, K and V as doubles: a narrow input widened)
  const AttentionInputs& in = wide_inputs(in_any, own, opt.threads);
  const Shape &qs = in.q.shape, &ks = in.k.shape;
  const std::size_t D = qs.D, Sq = qs.S, Skv = ks.S;
  PASA_ASSERT(in.allow_nonfinite);
  // Rows that touch no non-finite value: the finite golden of a copy whose non-finite elements are 0.
  AttentionInputs finite = in;
  finite.allow_nonfinite = false;
  for (Tensor* t : {&finite.q, &finite.k, &finite.v})
    for (double& x : t->data)
      if (!std::isfinite(x)) x = 0;
  Golden g = golden_finite(finite, opt);
  const double scale = in.effective_scale();

  std::vector<int> bits(qs.B * qs.N, 1000);
  std::vector<double> bound(qs.B * qs.N, 0.0);
  std::vector<char> mpfr(qs.B * qs.N, 0);
  parallel_for(qs.B * qs.N, opt.threads, [&](std::size_t w) {
    const std::size_t b = w / qs.N, h = w % qs.N, hk = h / in.group();
    const double* K = in.k.head(b, hk);
    const double* V = in.v.head(b, hk);
    std::vector<char> k_ok(Skv), v_ok(Skv);
    for (std::size_t j = 0; j < Skv; ++j) {
      k_ok[j] = finite_row(K + j * D, D);
      v_ok[j] = finite_row(V + j * D, D);
    }
    std::vector<Cls> cls(Skv);
    for (std::size_t i = 0; i < Sq; ++i) {
      const double* q = in.q.head(b, h) + i * D;
      const std::size_t end = visible_end(in, b, i);
      bool special = !finite_row(q, D);
      std::size_t n_visible = 0;
      for (std::size_t j = 0; j < end; ++j)
        if (visible(in, b, i, j)) {
          ++n_visible;
          special = special || !k_ok[j] || !v_ok[j];
        }
      if (!special || n_visible == 0) continue;  // the finite golden holds (masked rows: 0 and -inf)
      const std::size_t row = (b * qs.N + h) * Sq + i;
      double* o = g.o.data.data() + row * D;
      bool row_nan = false;
      std::vector<std::size_t> F, minus_inf;
      for (std::size_t j = 0; j < end && !row_nan; ++j) {
        if (!visible(in, b, i, j)) continue;
        cls[j] = score_class(q, K + j * D, D, scale);
        if (cls[j] == Cls::nan || cls[j] == Cls::pos_inf) row_nan = true;
        else if (cls[j] == Cls::finite) F.push_back(j);
        else minus_inf.push_back(j);
      }
      if (row_nan || F.empty()) {
        std::fill_n(o, D, kNaN);
        g.lse[row] = kNaN;
        continue;
      }
      // The finite golden over F (q and those keys are finite; non-finite V entries are handled below).
      AttentionInputs sub;
      sub.q = Tensor({1, 1, 1, D}, in.q.format);
      std::copy_n(q, D, sub.q.data.begin());
      sub.k = Tensor({1, 1, F.size(), D}, in.k.format);
      sub.v = Tensor({1, 1, F.size(), D}, in.v.format);
      for (std::size_t f = 0; f < F.size(); ++f)
        for (std::size_t d = 0; d < D; ++d) {
          sub.k.data[f * D + d] = K[F[f] * D + d];
          const double v = V[F[f] * D + d];
          sub.v.data[f * D + d] = std::isfinite(v) ? v : 0;
        }
      sub.scale = in.scale;
      GoldenOptions so = opt;
      so.threads = 1;
      const Golden sg = golden_finite(sub, so);
      bits[w] = std::min(bits[w], sg.guaranteed_bits);
      bound[w] = std::max(bound[w], sg.error_bound);
      mpfr[w] = mpfr[w] || sg.used_mpfr;
      g.lse[row] = sg.lse[0];
      for (std::size_t d = 0; d < D; ++d) {
        bool nan = false, pinf = false, ninf = false;
        for (std::size_t j : F) {
          const double v = V[j * D + d];
          nan = nan || std::isnan(v);
          pinf = pinf || v == kInf;
          ninf = ninf || v == -kInf;
        }
        for (std::size_t j : minus_inf) nan = nan || !std::isfinite(V[j * D + d]);
        o[d] = nan || (pinf && ninf) ? kNaN : pinf ? kInf : ninf ? -kInf : sg.o.data[d];
      }
    }
  });
  for (std::size_t w = 0; w < bits.size(); ++w) {
    g.guaranteed_bits = std::min(g.guaranteed_bits, bits[w]);
    g.error_bound = std::max(g.error_bound, bound[w]);
    g.used_mpfr = g.used_mpfr || mpfr[w];
  }
  return g;
}

}  // namespace pasa::detail
