// The golden attention (see golden.hpp). Two paths over the same work items, blocks of kRowBlock query rows
// of one (batch, head), each writing only its own rows, so the result never depends on the thread count:
// - fast: double-double scores, exp and sums with an a posteriori bound per row (derivation below);
// - plain MPFR at precision_bits: used when fast = false, and for any fast block whose bound is < 64 bits
//   or whose magnitudes could leave the double exponent range.
//
// Fast-path bound, per row (u = 2^-53, n visible keys, S = scale):
//   score error   δ_j <= S·dot2_error_bound(D, ‖q‖‖k_j‖) + 9u²|s_j|   (Dot2, then ×scale in dd: 8u² + scale's u²)
//                 + 4u²(|s_j| + |pse_j|) with a position bias ([IFA]: s_j = q·k_j·scale + pse_j, one dd_add);
//                 δ_j = 0 for a key masked by select (its score is the constant select_value, exact)
//   shifted t_j = s_j - m: δ_j + 3u²|t_j| (AccurateDWPlusDW); the error of m itself is a common factor
//   exp(-δm) of every weight and cancels in N/L.  Weight error ε_p <= 1.01·max_j (δ_j + 3u²|t_j|) + kExpDDRelErr
//   over the keys whose weight is kept.
//   N_d = Σ p_j v_jd: Dot2-style with TwoProd(p_hi, v) and p_lo·v rounded. The error terms (TwoSum errors
//   <= n·u·Σp|v|, TwoProd errors and p_lo·v <= 2u·Σp|v|) are summed with 3 additions per step (γ_3n), and
//   p_lo·v itself errs by <= u²|p v|: in all <= (3n(n+2) + n)·u²·Σ p|v| (to first order).
//   L = Σ p_j by dd_add: <= 3n·u²·L.  O = N / L by dd_div: 16u².
//   So |O_hat - O| <= E·Σp|v|/Σp with E = 2.2·ε_p + 1.1·(3n(n+2) + 4n + 16)·u², bits = floor(-log2 E)
//   (the factors 2.2 and 1.1 cover the second-order terms: ε_p, n·u < 2^-30 whenever bits >= 64).
//   Weights with t_j < kExpDDMin (< 2^-916) are dropped: an absolute error < 2^-900·max|v| at most.
// lse = m + log L (evaluated with MPFR at 128 bits from the dd values): its absolute error is at most
// 2·max δ + ε_p + 3n·u² (reported through the same bits, relative to 1 + |lse|).
#include "pasa/exact/golden.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include <fmt/format.h>
#include <mpfr.h>

#include "pasa/numeric/double_double.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/exact/golden_nonfinite.hpp"
#include "pasa/exact/score_rows.hpp"

namespace pasa {

namespace {

constexpr std::size_t kRowBlock = 32;
constexpr int kMinFastBits = 64;
constexpr double kU2 = 0x1p-106;

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

// Bits guaranteed by a relative error bound e: 0 when the bound is >= 1, infinite or NaN (no guarantee).
int bits_of(double e) {
  if (!(e < 1)) return 0;
  return static_cast<int>(std::floor(-std::log2(e)));
}

struct Problem {
  const AttentionInputs& in;
  const GoldenOptions& opt;
  Golden& g;
  DD scale_dd;          // the scale (exact 1/sqrt(D) when in.scale == 0) to ~106 bits
  double max_abs_v = 0;
};

struct BlockResult {
  int bits = 1000;
  double bound = 0;  // the largest relative bound E of the block's rows (bits = floor(-log2 E))
  bool mpfr = false;
};

// Which keys of row i are visible: [0, end) filtered by the boolean mask.
std::size_t visible_keys(const AttentionInputs& in, std::size_t b, std::size_t i, std::vector<unsigned char>& vis) {
  const std::size_t end = visible_end(in, b, i);
  vis.assign(end, 1);
  std::size_t n = end;
  if (!in.mask.keep.empty()) {
    const std::uint8_t* keep = in.mask.keep.data() + (b * in.q.shape.S + i) * in.k.shape.S;
    for (std::size_t j = 0; j < end; ++j)
      if (!keep[j]) {
        vis[j] = 0;
        --n;
      }
  }
  return n;
}

void write_masked_row(Golden& g, std::size_t row, std::size_t d) {
  std::fill_n(g.o.data.data() + row * d, d, 0.0);
  g.lse[row] = -std::numeric_limits<double>::infinity();
}

double lse_from_dd(DD m, DD l) {
  mpfr_t a, b;
  mpfr_inits2(128, a, b, static_cast<mpfr_ptr>(nullptr));
  mpfr_set_d(a, l.hi, MPFR_RNDN);
  mpfr_add_d(a, a, l.lo, MPFR_RNDN);
  mpfr_log(a, a, MPFR_RNDN);
  mpfr_set_d(b, m.hi, MPFR_RNDN);
  mpfr_add_d(b, b, m.lo, MPFR_RNDN);
  mpfr_add(a, a, b, MPFR_RNDN);
  const double r = mpfr_get_d(a, MPFR_RNDN);
  mpfr_clears(a, b, static_cast<mpfr_ptr>(nullptr));
  return r;
}

// Fast double-double path for rows [i0, i1) of (b, h). Returns false (nothing trusted) when a row's bound
// is below kMinFastBits; the caller then redoes the block with MPFR.
bool fast_block(Problem& P, std::size_t b, std::size_t h, std::size_t i0, std::size_t i1, const KeysT& keys,
                BlockResult& res) {
  const AttentionInputs& in = P.in;
  const std::size_t D = in.q.shape.D, Sq = in.q.shape.S, Skv = in.k.shape.S;
  const std::size_t hk = h / in.group();
  const double* V = in.v.head(b, hk);
  std::vector<double> shi(Skv), slo(Skv), nh(D), nc(D), delta(Skv);
  std::vector<DD> p(Skv);
  std::vector<unsigned char> vis;
  for (std::size_t i = i0; i < i1; ++i) {
    const std::size_t row = (b * in.q.shape.N + h) * Sq + i;
    const std::size_t n = visible_keys(in, b, i, vis);
    if (n == 0) {
      write_masked_row(P.g, row, D);
      continue;
    }
    const std::size_t end = vis.size();
    const double* q = in.q.head(b, h) + i * D;
    const double* pse = pse_row(in, b, h, i);
    const std::uint8_t* sel = select_row(in, b, i);
    dot2_scores(q, keys, end, shi.data(), slo.data());
    const double qn = row_norm(q, D);
    DD m{-std::numeric_limits<double>::infinity(), 0};
    for (std::size_t j = 0; j < end; ++j) {
      if (!vis[j]) continue;
      DD s = dd_mul(DD{shi[j], slo[j]}, P.scale_dd);
      delta[j] = std::abs(P.scale_dd.hi) * dot2_error_bound(D, qn * keys.norm[j]) + 9 * kU2 * std::abs(s.hi);
      if (pse) {  // [IFA] q·k·scale + pse: one dd_add (relative error < 3u² of the sum; 4u²(|s| + |pse|) covers it)
        delta[j] += 4 * kU2 * (std::abs(s.hi) + std::abs(pse[j]));
        s = dd_add(s, DD{pse[j], 0});
      }
      if (sel && sel[j]) {  // masked by select: the score IS the constant (exact)
        s = DD{in.mask.select_value, 0};
        delta[j] = 0;
      }
      shi[j] = s.hi;
      slo[j] = s.lo;
      if (dd_less(m, s)) m = s;
    }
    DD l{0, 0};
    double dmax = 0;
    for (std::size_t j = 0; j < end; ++j) {
      p[j] = DD{0, 0};
      if (!vis[j]) continue;
      const DD t = dd_add(DD{shi[j], slo[j]}, dd_neg(m));
      if (t.hi < kExpDDMin) continue;  // < 2^-916 relative to the maximum weight: dropped (see bound)
      dmax = std::max(dmax, delta[j] + 3 * kU2 * std::abs(t.hi));
      p[j] = exp_dd(t);
      l = dd_add(l, p[j]);
    }
    std::fill(nh.begin(), nh.end(), 0.0);
    std::fill(nc.begin(), nc.end(), 0.0);
    for (std::size_t j = 0; j < end; ++j) {
      if (p[j].hi == 0) continue;
      const double ph = p[j].hi, pl = p[j].lo;
      const double* vr = V + j * D;
      for (std::size_t x = 0; x < D; ++x) nc[x] += dot2_step(nh[x], ph, vr[x]) + pl * vr[x];
    }
    double* o = P.g.o.data.data() + row * D;
    for (std::size_t x = 0; x < D; ++x) o[x] = dd_to_double(dd_div(two_sum(nh[x], nc[x]), l));
    P.g.lse[row] = lse_from_dd(m, l);
    const double nd = static_cast<double>(n);
    const double eps_p = 1.01 * dmax + kExpDDRelErr;
    const double E = 2.2 * eps_p + 1.1 * (3 * nd * (nd + 2) + 4 * nd + 16) * kU2;
    res.bound = std::max(res.bound, E);
    res.bits = std::min(res.bits, bits_of(E));
    if (res.bits < kMinFastBits) return false;
  }
  return true;
}

// Plain MPFR evaluation at precision_bits >= 106 (so products of two doubles are exact). Bound, u = 2^-P:
// score error <= S·1.01·D·u·‖q‖‖k‖ + 2u|s| (sum, scale), t: + u|t|, exp: u; N: 2n·u·Σp|v|; L: n·u; div: u.
void mpfr_block(Problem& P, std::size_t b, std::size_t h, std::size_t i0, std::size_t i1, BlockResult& res) {
  const AttentionInputs& in = P.in;
  const mpfr_prec_t prec = P.opt.precision_bits;
  const double u = std::ldexp(1.0, -static_cast<int>(prec));
  const std::size_t D = in.q.shape.D, Sq = in.q.shape.S, Skv = in.k.shape.S;
  const std::size_t hk = h / in.group();
  const double* K = in.k.head(b, hk);
  const double* V = in.v.head(b, hk);
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
    const std::size_t row = (b * in.q.shape.N + h) * Sq + i;
    const std::size_t n = visible_keys(in, b, i, vis);
    if (n == 0) {
      write_masked_row(P.g, row, D);
      continue;
    }
    const double* q = in.q.head(b, h) + i * D;
    const double* pse = pse_row(in, b, h, i);
    const std::uint8_t* sel = select_row(in, b, i);
    const double qn = row_norm(q, D);
    double dmax = 0;
    bool have_max = false;
    for (std::size_t j = 0; j < vis.size(); ++j) {
      if (!vis[j]) continue;
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
      mpfr_sub(s[j], s[j], m, MPFR_RNDN);
      dmax = std::max(dmax, u * std::abs(mpfr_get_d(s[j], MPFR_RNDN)));
      mpfr_exp(s[j], s[j], MPFR_RNDN);
      mpfr_add(l, l, s[j], MPFR_RNDN);
      for (std::size_t x = 0; x < D; ++x) {
        mpfr_mul_d(acc, s[j], V[j * D + x], MPFR_RNDN);
        mpfr_add(num[x], num[x], acc, MPFR_RNDN);
      }
    }
    double* o = P.g.o.data.data() + row * D;
    for (std::size_t x = 0; x < D; ++x) {
      mpfr_div(acc, num[x], l, MPFR_RNDN);
      o[x] = mpfr_get_d(acc, MPFR_RNDN);
    }
    mpfr_log(l, l, MPFR_RNDN);
    mpfr_add(l, l, m, MPFR_RNDN);
    P.g.lse[row] = mpfr_get_d(l, MPFR_RNDN);
    const double nd = static_cast<double>(n);
    const double E = 2.2 * (1.01 * dmax + u) + 1.1 * (3 * nd + 2) * u;
    res.bound = std::max(res.bound, E);
    res.bits = std::min(res.bits, bits_of(E));
  }
  res.mpfr = true;
}

// The fast path needs every product and sum far inside the double exponent range.
bool fast_path_safe(const AttentionInputs& in, double max_abs_v) {
  auto max_abs = [](const Tensor& t) {
    double m = 0;
    for (double x : t.data) m = std::max(m, std::abs(x));
    return m;
  };
  const double bound = 0x1p900;
  const double qk = max_abs(in.q) * max_abs(in.k) * static_cast<double>(in.q.shape.D) + max_abs(in.pse) +
                    std::abs(in.mask.select_value);
  return qk < bound && max_abs_v * static_cast<double>(in.k.shape.S) < bound;
}

}  // namespace

std::size_t golden_bytes(const Shape& q, const Shape& kv, const GoldenOptions& opt) {
  const std::size_t out = sat_add(sat_product(q.B, q.N, q.S, q.D), sat_product(q.B, q.N, q.S));
  // Per thread (one block of kRowBlock rows at a time): the transposed keys and their norms (KeysT), five
  // key-length rows (scores hi/lo, bounds, double-double weights) and, on the MPFR path, a key-length row of
  // MPFR numbers (limbs + header) as well as D accumulators.
  const std::size_t mp = static_cast<std::size_t>(opt.precision_bits) / 64 + 5;  // 8-byte words per mpfr_t
  const std::size_t per_thread = sat_add(sat_product(kv.S, kv.D + 6), sat_mul(sat_add(kv.S, q.D), mp));
  const std::size_t blocks = sat_mul(sat_product(q.B, q.N), (q.S + kRowBlock - 1) / kRowBlock);
  const std::size_t t = std::min<std::size_t>(static_cast<std::size_t>(std::max(opt.threads, 1)), blocks);
  return sat_mul(sizeof(double), sat_add(sat_add(out, blocks), sat_mul(per_thread, t)));
}

Golden golden_attention(const AttentionInputs& in, const GoldenOptions& opt) {
  validate(in);
  if (opt.precision_bits < 106 || opt.precision_bits > 100000)
    throw InputError(fmt::format("golden precision_bits must be in [106, 100000], got {}", opt.precision_bits));
  if (in.allow_nonfinite)
    for (const Tensor* t : {&in.q, &in.k, &in.v})
      if (!std::all_of(t->data.begin(), t->data.end(), [](double x) { return std::isfinite(x); }))
        return detail::golden_with_nonfinite(in, opt);
  const Shape& qs = in.q.shape;
  Golden g;
  g.o = Tensor(qs, format_by_name("fp64"));
  g.lse.assign(qs.B * qs.N * qs.S, 0.0);
  Problem P{in, opt, g, {}, 0};
  {
    mpfr_t x, tmp;
    mpfr_inits2(256, x, tmp, static_cast<mpfr_ptr>(nullptr));
    if (in.scale != 0) {
      mpfr_set_d(x, in.scale, MPFR_RNDN);
    } else {
      mpfr_set_ui(x, static_cast<unsigned long>(qs.D), MPFR_RNDN);
      mpfr_rec_sqrt(x, x, MPFR_RNDN);
    }
    P.scale_dd.hi = mpfr_get_d(x, MPFR_RNDN);
    mpfr_sub_d(tmp, x, P.scale_dd.hi, MPFR_RNDN);
    P.scale_dd.lo = mpfr_get_d(tmp, MPFR_RNDN);
    mpfr_clears(x, tmp, static_cast<mpfr_ptr>(nullptr));
  }
  for (double x : in.v.data) P.max_abs_v = std::max(P.max_abs_v, std::abs(x));
  const bool fast = opt.fast && fast_path_safe(in, P.max_abs_v);
  const std::size_t blocks = (qs.S + kRowBlock - 1) / kRowBlock;
  std::vector<BlockResult> results(qs.B * qs.N * blocks);
  // One work item per (batch, KV head, row block): the G = Nq/Nkv query heads of a KV head share its
  // transposed keys (decode: one row per head, so the transposition would otherwise dominate). Each
  // (head, row block) result is computed as on its own; the split only decides what runs together.
  const std::size_t G = in.group(), Nkv = in.k.shape.N;
  parallel_for(qs.B * Nkv * blocks, opt.threads, [&](std::size_t w) {
    const std::size_t blk = w % blocks, bk = w / blocks, b = bk / Nkv, hk = bk % Nkv;
    const std::size_t i0 = blk * kRowBlock, i1 = std::min(qs.S, i0 + kRowBlock);
    std::unique_ptr<KeysT> keys;
    if (fast) keys = std::make_unique<KeysT>(in.k, b, hk);
    for (std::size_t h = hk * G; h < (hk + 1) * G; ++h) {
      BlockResult r;
      if (!fast || !fast_block(P, b, h, i0, i1, *keys, r)) {
        r = BlockResult{};
        mpfr_block(P, b, h, i0, i1, r);
      }
      results[(b * qs.N + h) * blocks + blk] = r;
    }
    // MPFR caches constants (log 2 for the lse and the exp tables) per thread; parallel_for's threads end
    // with the call, so free them here (LeakSanitizer reports them otherwise).
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
  });
  g.guaranteed_bits = 1000;
  for (const BlockResult& r : results) {
    g.guaranteed_bits = std::min(g.guaranteed_bits, r.bits);
    g.error_bound = std::max(g.error_bound, r.bound);
    g.used_mpfr = g.used_mpfr || r.mpfr;
  }
  return g;
}

}  // namespace pasa
