// The golden attention (see golden.hpp). Two paths over the same work items, blocks of kRowBlock query rows
// of one (batch, head), each writing only its own rows, so the result never depends on the thread count:
// - fast: double-double scores (exact fp64 ones where provably exact), exp and sums with an a posteriori
//   bound per row (derivation below; how it is computed and why it is fast: docs/golden.md);
// - plain MPFR at precision_bits: used when fast = false, and for any fast block whose bound is < 64 bits
//   or whose magnitudes could leave the double exponent range.
//
// Fast-path bound, per row (u = 2^-53, n visible keys, S = scale):
//   score error   δ_j <= S·dot2_error_bound(D, ‖q‖‖k_j‖) + 9u²|s_j|   (Dot2, then ×scale in dd: 8u² + scale's u²;
//                 kept also where q·k_j is computed exactly in fp64, so that the bits stay those of Dot2)
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
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <fmt/format.h>
#include <mpfr.h>

#include "pasa/numeric/double_double.hpp"
#include "pasa/core/assert.hpp"
#include "pasa/core/compiler.hpp"
#include "pasa/core/cancel.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/exact/golden_nonfinite.hpp"
#include "pasa/exact/exact_scores.hpp"
#include "pasa/exact/score_rows.hpp"

namespace pasa {

namespace {

using namespace exact_scores;

constexpr std::size_t kRowBlock = kGoldenRowBlock;
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

// Bits guaranteed by a relative error bound e·2^-shift: 0 when the bound is >= 1, infinite or NaN (no
// guarantee); at most 999, since 1000 means "no visible key" (golden.hpp) and no double needs more.
// The MPFR path computes its bound in units of 2^-shift (shift = precision_bits - 900 beyond 900 bits), so
// that u = 2^-precision_bits does not underflow to 0 (which gave log2(0) = -inf, cast to INT_MIN).
constexpr int kMaxBits = 999;
int bits_of(double e, int shift = 0) {
  if (!(e < std::ldexp(1.0, shift))) return 0;
  if (e <= 0) return kMaxBits;
  return static_cast<int>(std::min<double>(kMaxBits, std::floor(-std::log2(e)) + shift));
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

// ---- Fast path -------------------------------------------------------------------------------------------
// Rows are computed kGroup at a time (rows of the G query heads of one KV head, all sharing its keys and
// values): one pass over K (in tiles) for their scores and one over V for their outputs (the row-at-a-time
// loop streamed all of K and V per row). Every row's arithmetic is unchanged, element for element and in
// the same order, so the results are bit-identical to the row-at-a-time evaluation (pasa-bench-golden
// checks it against that evaluation, kept there as its baseline).
constexpr std::size_t kRows = kScoreRows;  // rows of one register-blocked GEMM / P·V kernel call
constexpr std::size_t kGroup = 32;   // rows sharing one pass over K (in key tiles) and the scratch buffers
constexpr std::size_t kKeyTile = 256;  // keys per GEMM tile: 256 keys of D = 128 stay in L2 for all rows

// N = Σ_j p_j v_j for rows r < nr (weights ph/pl[r·ld + j], 0 = skipped) into nh/nc[r·d + x], each
// element's sum taken in key order exactly as the row-at-a-time loop did (Dot2-style: TwoProd(p_hi, v),
// TwoSum into nh, the errors and p_lo·v into nc), so the bits are the same; 8 columns of every row are
// held in registers while j runs, so V is read once per 8 columns for all rows, accumulators never.
// With `more`, the sums continue from nh/nc_out (keys taken a tile at a time: the same operations in the
// same order as one call over all keys).
void pv_rows(const double* ph, const double* pl, std::size_t ld, std::size_t nr, const double* V, std::size_t d,
             std::size_t jend, double* nh_out, double* nc_out, bool more = false) {
  const std::size_t d8 = d / 8 * 8;
  for (std::size_t x = 0; x < d8; x += 8) {
    v8d nh[kRows] = {}, nc[kRows] = {};
    if (more)
      for (std::size_t r = 0; r < nr; ++r) {
        std::memcpy(&nh[r], nh_out + r * d + x, sizeof(v8d));
        std::memcpy(&nc[r], nc_out + r * d + x, sizeof(v8d));
      }
    for (std::size_t j = 0; j < jend; ++j) {
      v8d v;
      std::memcpy(&v, V + j * d + x, sizeof v);
      for (std::size_t r = 0; r < kRows; ++r) {
        if (r >= nr) break;
        const double a = ph[r * ld + j];
        if (a == 0) continue;
        const double b = pl[r * ld + j];
        // dot2_step(nh, a, v) + b·v, lane by lane
        const v8d av = {a, a, a, a, a, a, a, a};
        const v8d p = av * v;
        const v8d pe = fms(av, v, p);
        const v8d s = nh[r] + p;
        const v8d bb = s - nh[r];
        const v8d e = (nh[r] - (s - bb)) + (p - bb);
        nh[r] = s;
        nc[r] += (e + pe) + b * v;
      }
    }
    for (std::size_t r = 0; r < nr; ++r) {
      std::memcpy(nh_out + r * d + x, &nh[r], sizeof(v8d));
      std::memcpy(nc_out + r * d + x, &nc[r], sizeof(v8d));
    }
  }
  for (std::size_t x = d8; x < d; ++x)
    for (std::size_t r = 0; r < nr; ++r) {
      double h = more ? nh_out[r * d + x] : 0, c = more ? nc_out[r * d + x] : 0;
      for (std::size_t j = 0; j < jend; ++j) {
        const double a = ph[r * ld + j];
        if (a != 0) c += dot2_step(h, a, V[j * d + x]) + pl[r * ld + j] * V[j * d + x];
      }
      nh_out[r * d + x] = h;
      nc_out[r * d + x] = c;
    }
}

struct RowRef {
  std::size_t h = 0, i = 0;
};

// K and V of one (batch, KV head) as fast_rows reads them: rows [j0, j0 + n) as doubles, n <= kKeyTile
// unless whole() (the rows are in place: any n).
class KvTiles {
 public:
  virtual ~KvTiles() = default;
  virtual const double* keys(std::size_t j0, std::size_t n) = 0;
  virtual const double* values(std::size_t j0, std::size_t n) = 0;
  virtual bool whole() const = 0;
};

// In place in the inputs.
class DenseKv final : public KvTiles {
 public:
  DenseKv(const double* K, const double* V, std::size_t d) : K_(K), V_(V), d_(d) {}
  const double* keys(std::size_t j0, std::size_t) override { return K_ + j0 * d_; }
  const double* values(std::size_t j0, std::size_t) override { return V_ + j0 * d_; }
  bool whole() const override { return true; }

 private:
  const double *K_, *V_;
  std::size_t d_;
};

// Per-thread buffers of a chunk of rows.
struct Scratch {
  std::size_t skv = 0, d = 0, rows = 0;
  std::vector<double> shi, slo, delta, phi, plo, nh, nc, zero, kt;
  std::vector<std::vector<unsigned char>> vis;
  std::vector<double> thi, tlo, ehi, elo;
  std::vector<double> keep;  // 1 for a kept key, else 0
  // rows (<= kGroup, a multiple of kRows): the most rows of one fast_rows call.
  Scratch(std::size_t skv_, std::size_t d_, std::size_t rows_)
      : skv(skv_), d(d_), rows(rows_), shi(rows * skv), slo(rows * skv), delta(rows * skv), phi(rows * skv),
        plo(rows * skv), nh(rows * d), nc(rows * d), zero(d), kt(kKeyTile * d), vis(rows), thi(skv), tlo(skv), ehi(skv),
        elo(skv), keep(skv) {}
};

// Scratch buffers handed from item to item (a long row's buffers are megabytes: allocating them per item
// costs more in page faults than the arithmetic on them), and from part to part of golden_parts. A spare
// serves any call it is large enough for (fast_rows takes its key stride from the scratch, sc.skv); one
// too small is freed when a new one is made, so the pool never holds more than one per thread.
class ScratchPool {
 public:
  std::unique_ptr<Scratch> take(std::size_t skv, std::size_t d, std::size_t rows) {
    std::unique_ptr<Scratch> small;  // (freed outside the lock)
    {
      std::lock_guard<std::mutex> lock(m_);
      for (std::size_t i = free_.size(); i-- > 0;)
        if (free_[i]->d == d && free_[i]->skv >= skv && free_[i]->rows >= rows) {
          std::unique_ptr<Scratch> s = std::move(free_[i]);
          free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
          return s;
        }
      if (!free_.empty()) {
        small = std::move(free_.back());
        free_.pop_back();
      }
    }
    small.reset();
    return std::make_unique<Scratch>(skv, d, rows);
  }
  void give(std::unique_ptr<Scratch> s) {
    std::lock_guard<std::mutex> lock(m_);
    free_.push_back(std::move(s));
  }

 private:
  std::mutex m_;
  std::vector<std::unique_ptr<Scratch>> free_;
};

// Fast double-double path for the rows rows[0, nr) of batch b, all of one KV head, whose keys and values
// kv gives a tile at a time. Writes every row's output and lse and its bound E into bound[r] (-1 for a fully
// masked row). With `build` (a part of golden_parts: K is never held whole), kg is built here tile by tile
// (build == &kg) over all in.k.shape.S keys, and *max_v is set to max |V| over all of them.
void fast_rows(Problem& P, std::size_t b, const RowRef* rows, std::size_t nr,
               const KeyInfo& kg, Scratch& sc, double* bound, KvTiles& kv, KeyInfo* build = nullptr,
               double* max_v = nullptr) {
  const AttentionInputs& in = P.in;
  const std::size_t D = in.q.shape.D, Sq = in.q.shape.S, Skv = sc.skv;
  const double* q[kGroup];
  GridNorm qg[kGroup];
  std::size_t n[kGroup], end[kGroup], jend = 0;
  bool active[kGroup];
  for (std::size_t r = 0; r < sc.rows; ++r) {
    active[r] = false;
    q[r] = sc.zero.data();
    if (r >= nr) continue;
    bound[r] = -1;  // fully masked (no bound) unless computed below
    const std::size_t row = (b * in.q.shape.N + rows[r].h) * Sq + rows[r].i;
    n[r] = visible_keys(in, b, rows[r].i, sc.vis[r]);
    if (n[r] == 0) {
      write_masked_row(P.g, row, D);
      continue;
    }
    active[r] = true;
    q[r] = in.q.head(b, rows[r].h) + rows[r].i * D;
    qg[r] = grid_norm(q[r], D);
    end[r] = sc.vis[r].size();
    jend = std::max(jend, end[r]);
  }
  if (jend == 0 && !build) return;
  // Scores a tile of keys at a time: the plain fp64 GEMM, then Dot2 for the pairs it may not have computed
  // exactly (each score on its own: the tiles change no bit).
  const std::size_t kend = build ? in.k.shape.S : jend;  // (a build takes every key's data)
  for (std::size_t j0 = 0; j0 < kend; j0 += kKeyTile) {
    const double* Kt = kv.keys(j0, std::min(kKeyTile, kend - j0));
    if (build) build->add(Kt, j0, std::min(kKeyTile, kend - j0), D);
    if (j0 >= jend) continue;
    const std::size_t nt = std::min(kKeyTile, jend - j0);
    strip_keys(Kt, D, nt, sc.kt.data());
    for (std::size_t c = 0; c < nr; c += kRows) plain_scores(q + c, sc.kt.data(), D, nt, sc.shi.data() + c * Skv + j0, Skv);
    for (std::size_t r = 0; r < nr; ++r) {
      if (!active[r] || j0 >= end[r]) continue;
      const std::size_t j1 = std::min(end[r], j0 + nt);
      double* shi = sc.shi.data() + r * Skv;
      double* slo = sc.slo.data() + r * Skv;
      const std::vector<unsigned char>& vis = sc.vis[r];
      int inexact = 0;
PASA_IVDEP
      for (std::size_t j = j0; j < j1; ++j) {
        inexact |= !exact_pair(qg[r], kg.grid[j], kg.e[j]);
        slo[j] = 0;
      }
      if (inexact)
        for (std::size_t j = j0; j < j1; ++j)
          if (vis[j] && !exact_pair(qg[r], kg.grid[j], kg.e[j])) {
            const DD s = dot2_pair(q[r], Kt + (j - j0) * D, D);
            shi[j] = s.hi;
            slo[j] = s.lo;
          }
    }
  }
  for (std::size_t r = 0; r < nr; ++r) {  // weights of keys a row does not see (or drops) are 0
    std::fill_n(sc.phi.data() + r * Skv, jend, 0.0);
    std::fill_n(sc.plo.data() + r * Skv, jend, 0.0);
  }
  DD m[kGroup], l[kGroup];
  double dmax[kGroup];
  for (std::size_t r = 0; r < nr; ++r) {
    if (!active[r]) continue;
    const std::size_t h = rows[r].h, i = rows[r].i;
    double* shi = sc.shi.data() + r * Skv;
    double* slo = sc.slo.data() + r * Skv;
    double* delta = sc.delta.data() + r * Skv;
    const std::vector<unsigned char>& vis = sc.vis[r];
    const double* pse = pse_row(in, b, h, i);
    const std::uint8_t* sel = select_row(in, b, i);
    const DD sc_dd = P.scale_dd;
    const double abs_scale = std::abs(P.scale_dd.hi), qn = qg[r].norm;
    // Scaled scores and their error bounds, every key below end (the invisible ones are ignored later).
    for (std::size_t j = 0; j < end[r]; ++j) {
      const DD s = dd_mul(DD{shi[j], slo[j]}, sc_dd);
      delta[j] = abs_scale * dot2_error_bound(D, qn * kg.norm[j]) + 9 * kU2 * std::abs(s.hi);
      shi[j] = s.hi;
      slo[j] = s.lo;
    }
    if (pse)
      for (std::size_t j = 0; j < end[r]; ++j) {
        // [IFA] q·k·scale + pse: one dd_add (relative error < 3u² of the sum; 4u²(|s| + |pse|) covers it)
        delta[j] += 4 * kU2 * (std::abs(shi[j]) + std::abs(pse[j]));
        const DD s = dd_add(DD{shi[j], slo[j]}, DD{pse[j], 0});
        shi[j] = s.hi;
        slo[j] = s.lo;
      }
    if (sel)
      for (std::size_t j = 0; j < end[r]; ++j)
        if (sel[j]) {  // masked by select: the score IS the constant (exact)
          shi[j] = in.mask.select_value;
          slo[j] = 0;
          delta[j] = 0;
        }
    // m: the first visible score that no later one exceeds in (hi, lo) order (what a sequential scan with
    // dd_less keeps): the largest hi first (a vectorised maximum), then the scan over the keys holding it.
    const unsigned char* vr = vis.data();
    double top = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < end[r]; ++j) top = vr[j] && shi[j] > top ? shi[j] : top;
    m[r] = DD{-std::numeric_limits<double>::infinity(), 0};
    for (std::size_t j = 0; j < end[r]; ++j)
      if (vr[j] && shi[j] == top && dd_less(m[r], DD{shi[j], slo[j]})) m[r] = DD{shi[j], slo[j]};
    // Shifted scores t = s − m of the kept keys (visible, t.hi >= kExpDDMin: a smaller weight is
    // < 2^-916 relative to the maximum one and dropped, see the bound); the others get t = 0 and weight 0.
    const DD mneg = dd_neg(m[r]);
    double* keepw = sc.keep.data();
PASA_IVDEP  // (here and below: the scratch rows are distinct vectors, they never overlap)
    for (std::size_t j = 0; j < end[r]; ++j) {
      const DD t = dd_add(DD{shi[j], slo[j]}, mneg);
      const bool keep = (vr[j] != 0) & (t.hi >= kExpDDMin);
      const double dj = delta[j] + 3 * kU2 * std::abs(t.hi);
      delta[j] = keep ? dj : 0.0;  // from here on: the bound of the kept weight's argument
      sc.thi[j] = keep ? t.hi : 0.0;
      sc.tlo[j] = keep ? t.lo : 0.0;
      keepw[j] = keep ? 1.0 : 0.0;
    }
    double dm = 0;
    for (std::size_t j = 0; j < end[r]; ++j) dm = delta[j] > dm ? delta[j] : dm;
    dmax[r] = dm;
    double* phi = sc.phi.data() + r * Skv;
    double* plo = sc.plo.data() + r * Skv;
    exp_dd_n(sc.thi.data(), sc.tlo.data(), sc.ehi.data(), sc.elo.data(), end[r]);
    const double* ehi = sc.ehi.data();
    const double* elo = sc.elo.data();
PASA_IVDEP
    for (std::size_t j = 0; j < end[r]; ++j) {
      phi[j] = keepw[j] != 0 ? ehi[j] : 0.0;
      plo[j] = keepw[j] != 0 ? elo[j] : 0.0;
    }
  }
  // L = Σ_j p_j in key order per row, the rows' dependency chains interleaved (kept weights are > 0).
  for (std::size_t r = 0; r < kGroup; ++r) l[r] = DD{0, 0};
  for (std::size_t j = 0; j < jend; ++j)
    for (std::size_t r = 0; r < nr; ++r) {
      const double ph = sc.phi[r * Skv + j];
      if (ph != 0) l[r] = dd_add(l[r], DD{ph, sc.plo[r * Skv + j]});
    }
  // N = Σ_j p_j v_j for all rows in one pass over V (each row's sum in key order, as before).
  // Register-blocked: 8 columns of all kRows rows stay in registers while j runs over the keys (of all keys
  // at once where V is in place, else of a tile at a time, the sums carried from tile to tile).
  PASA_ASSERT(build == nullptr || !kv.whole());
  const std::size_t vtile = kv.whole() ? std::max<std::size_t>(jend, 1) : kKeyTile;
  double vmax = 0;
  for (std::size_t j0 = 0; j0 < kend; j0 += vtile) {
    const std::size_t cnt = std::min(vtile, kend - j0);
    const double* Vt = kv.values(j0, cnt);
    if (max_v)
      for (std::size_t i = 0; i < cnt * D; ++i) vmax = std::max(vmax, std::abs(Vt[i]));
    if (j0 >= jend) continue;
    for (std::size_t c = 0; c < nr; c += kRows)
      pv_rows(sc.phi.data() + c * Skv + j0, sc.plo.data() + c * Skv + j0, Skv, std::min(kRows, nr - c), Vt, D,
              std::min(cnt, jend - j0), sc.nh.data() + c * D, sc.nc.data() + c * D, j0 > 0);
  }
  if (max_v) *max_v = vmax;
  for (std::size_t r = 0; r < nr; ++r) {
    if (!active[r]) continue;
    const std::size_t row = (b * in.q.shape.N + rows[r].h) * Sq + rows[r].i;
    const double* nh = sc.nh.data() + r * D;
    const double* nc = sc.nc.data() + r * D;
    double* o = P.g.o.data.data() + row * D;
    for (std::size_t x = 0; x < D; ++x) o[x] = dd_to_double(dd_div(two_sum(nh[x], nc[x]), l[r]));
    P.g.lse[row] = lse_from_dd(m[r], l[r]);
    const double nd = static_cast<double>(n[r]);
    const double eps_p = 1.01 * dmax[r] + kExpDDRelErr;
    const double E = 2.2 * eps_p + 1.1 * (3 * nd * (nd + 2) + 4 * nd + 16) * kU2;
    bound[r] = E;
  }
}

// Plain MPFR evaluation at precision_bits >= 106 (so products of two doubles are exact). Bound, u = 2^-P:
// score error <= S·1.01·D·u·‖q‖‖k‖ + 2u|s| (sum, scale), t: + u|t|, exp: u; N: 2n·u·Σp|v|; L: n·u; div: u.
void mpfr_block(Problem& P, std::size_t b, std::size_t h, std::size_t i0, std::size_t i1, BlockResult& res) {
  const AttentionInputs& in = P.in;
  const mpfr_prec_t prec = P.opt.precision_bits;
  const int shift = std::max(0, static_cast<int>(prec) - 900);  // the bound is in units of 2^-shift
  const double u = std::ldexp(1.0, shift - static_cast<int>(prec));
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
    check_cancel();  // a row at 100000 bits takes seconds: stop between rows and keys when asked
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
    res.bound = std::max(res.bound, std::ldexp(E, -shift));
    res.bits = std::min(res.bits, bits_of(E, shift));
  }
  res.mpfr = true;
}

// The fast path needs every product and sum far inside the double exponent range: what decides it, from the
// largest magnitudes of the inputs. merge gives the decision of the union of two problems (golden_parts).
struct FastCheck {
  double q = 0, k = 0, v = 0, pse = 0, select = 0;  // max |q|, |k|, |v|, |pse|; |select_value|
  std::size_t d = 0, skv = 0;
  bool safe() const {
    const double bound = 0x1p900;
    const double qk = q * k * static_cast<double>(d) + pse + select;
    return qk < bound && v * static_cast<double>(skv) < bound;
  }
  void merge(const FastCheck& o) {
    q = std::max(q, o.q), k = std::max(k, o.k), v = std::max(v, o.v), pse = std::max(pse, o.pse);
    select = std::max(select, o.select), d = std::max(d, o.d), skv = std::max(skv, o.skv);
  }
};

FastCheck fast_check(const AttentionInputs& in, double max_abs_k, double max_abs_v) {
  auto max_abs = [](const Tensor& t) {
    double m = 0;
    for (double x : t.data) m = std::max(m, std::abs(x));
    return m;
  };
  return {max_abs(in.q), max_abs_k, max_abs_v, max_abs(in.pse), std::abs(in.mask.select_value), in.q.shape.D, in.k.shape.S};
}

}  // namespace

std::size_t golden_bytes(const Shape& q, const Shape& kv, const GoldenOptions& opt) {
  const std::size_t out = sat_add(sat_product(q.B, q.N, q.S, q.D), sat_product(q.B, q.N, q.S));
  // Per (batch, KV head): the keys' norms and exactness data (KeyInfo, 3 words per key). Per thread (one
  // Scratch of group_rows rows, as golden_attention sizes it: a decode row block of one query head has only
  // kRows): five key-length rows per row (scores hi/lo, bounds, double-double weights), 2D accumulators per
  // row, the visibility flags (one byte per key and row), four key-length rows for exp and the keep flags,
  // a tile of keys in strips; on the MPFR path a key-length row of MPFR numbers (limbs + header) and D
  // accumulators. Threads: at most one per work item (batch, KV head, row block).
  const std::size_t G = kv.N == 0 ? 1 : q.N / kv.N;
  const std::size_t wanted = std::min(kGroup, sat_mul(G, std::min(q.S, kRowBlock)));
  const std::size_t rows = std::min(kGroup, (wanted + kRows - 1) / kRows * kRows);
  const std::size_t mp = static_cast<std::size_t>(opt.precision_bits) / 64 + 5;  // 8-byte words per mpfr_t
  const std::size_t keys = sat_mul(sat_product(kv.B, kv.N, kv.S), 3);
  const std::size_t scratch = sat_add(sat_mul(rows, sat_add(sat_mul(kv.S, 5), sat_mul(q.D, 2))),
                                      sat_add(sat_mul(kv.S, 5 + (rows + 7) / 8), sat_mul(kKeyTile, q.D)));
  const std::size_t per_thread = sat_add(scratch, sat_mul(sat_add(kv.S, q.D), mp));
  const std::size_t blocks = sat_mul(sat_product(q.B, q.N), (q.S + kRowBlock - 1) / kRowBlock);
  const std::size_t items = sat_mul(sat_product(kv.B, kv.N), (q.S + kRowBlock - 1) / kRowBlock);
  const std::size_t t = std::min<std::size_t>(static_cast<std::size_t>(std::max(opt.threads, 1)), items);
  return sat_mul(sizeof(double), sat_add(sat_add(sat_add(out, blocks), keys), sat_mul(per_thread, t)));
}

namespace {

bool all_finite(const AttentionInputs& in) {
  for (const Tensor* t : {&in.q, &in.k, &in.v})
    if (!std::all_of(t->data.begin(), t->data.end(), [](double x) { return std::isfinite(x); })) return false;
  return true;
}

void check_precision(const GoldenOptions& opt) {
  if (opt.precision_bits < 106 || opt.precision_bits > 100000)
    throw InputError(fmt::format("golden precision_bits must be in [106, 100000], got {}", opt.precision_bits));
}

}  // namespace

Golden golden_attention(const AttentionInputs& in, const GoldenOptions& opt) {
  validate(in, opt.threads);
  check_precision(opt);
  if (in.allow_nonfinite && !all_finite(in)) return detail::golden_with_nonfinite(in, opt);
  return detail::golden_finite(in, opt);
}

namespace {

// The scale (the exact 1/sqrt(D) when in.scale == 0) to ~106 bits.
DD scale_dd(const AttentionInputs& in) {
  mpfr_t x, tmp;
  mpfr_inits2(256, x, tmp, static_cast<mpfr_ptr>(nullptr));
  if (in.scale != 0) {
    mpfr_set_d(x, in.scale, MPFR_RNDN);
  } else {
    mpfr_set_ui(x, static_cast<unsigned long>(in.q.shape.D), MPFR_RNDN);
    mpfr_rec_sqrt(x, x, MPFR_RNDN);
  }
  DD r;
  r.hi = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(tmp, x, r.hi, MPFR_RNDN);
  r.lo = mpfr_get_d(tmp, MPFR_RNDN);
  mpfr_clears(x, tmp, static_cast<mpfr_ptr>(nullptr));
  return r;
}

// golden_finite with its scratch buffers from `spare` (shared by the parts of golden_parts), reporting what
// decided its fast path in *check (when opt.fast).
Golden golden_finite_in(const AttentionInputs& in, const GoldenOptions& opt, ScratchPool& spare, FastCheck* check) {
  PASA_ASSERT(all_finite(in));
  PASA_ASSERT(opt.precision_bits >= 106 && opt.precision_bits <= 100000);
  const Shape& qs = in.q.shape;
  Golden g;
  g.o = Tensor(qs, format_by_name("fp64"));
  g.lse.assign(qs.B * qs.N * qs.S, 0.0);
  Problem P{in, opt, g, scale_dd(in), 0};
  {  // max |V| per (batch, KV head) on the threads, then the max of those (a max in any order is the same)
    const std::size_t heads = in.v.shape.B * in.v.shape.N, per_head = in.v.shape.S * in.v.shape.D;
    std::vector<double> head_max(heads, 0.0);
    parallel_for(heads, opt.threads, [&](std::size_t h) {
      double mx = 0;
      for (std::size_t i = h * per_head; i < (h + 1) * per_head; ++i) mx = std::max(mx, std::abs(in.v.data[i]));
      head_max[h] = mx;
    });
    for (double x : head_max) P.max_abs_v = std::max(P.max_abs_v, x);
  }
  const std::size_t blocks = (qs.S + kRowBlock - 1) / kRowBlock;
  std::vector<BlockResult> results(qs.B * qs.N * blocks);
  const std::size_t G = in.group(), Nkv = in.k.shape.N, Skv = in.k.shape.S, D = qs.D;
  // What the fast path needs of every key, once per (batch, KV head), with max |K| on the way.
  std::vector<std::unique_ptr<KeyInfo>> key_info(opt.fast ? qs.B * Nkv : 0);
  parallel_for(key_info.size(), opt.threads, [&](std::size_t bk) {
    key_info[bk] = std::make_unique<KeyInfo>(in.k.head(bk / Nkv, bk % Nkv), Skv, D);
  });
  double max_abs_k = 0;
  for (const auto& ki : key_info) max_abs_k = std::max(max_abs_k, ki->max_abs);
  const FastCheck fc = opt.fast ? fast_check(in, max_abs_k, P.max_abs_v) : FastCheck{};
  if (check) *check = fc;
  const bool fast = opt.fast && fc.safe();
  // One work item per (batch, KV head, row block): the G = Nq/Nkv query heads of a KV head share its keys
  // and values (decode: one row per head), and the fast path computes up to kGroup of their rows together. Each
  // (head, row block) result is what the row-at-a-time evaluation gives (the same bits, and the same MPFR
  // fallback decision per (head, row block)); the split only decides what runs together.
  // Rows per fast_rows call: G·kRowBlock at most (one row per head in decode), rounded up to whole kernels.
  const std::size_t group_rows = std::min(kGroup, (G * std::min(qs.S, kRowBlock) + kRows - 1) / kRows * kRows);
  parallel_for(qs.B * Nkv * blocks, opt.threads, [&](std::size_t w) {
    const std::size_t blk = w % blocks, bk = w / blocks, b = bk / Nkv, hk = bk % Nkv;
    const std::size_t i0 = blk * kRowBlock, i1 = std::min(qs.S, i0 + kRowBlock);
    check_cancel();
    std::vector<double> bound;
    if (fast) {
      const KeyInfo& kg = *key_info[bk];
      std::unique_ptr<Scratch> scratch = spare.take(Skv, D, group_rows);  // (no fresh pages per item)
      std::vector<RowRef> rows;
      for (std::size_t h = hk * G; h < (hk + 1) * G; ++h)
        for (std::size_t i = i0; i < i1; ++i) rows.push_back({h, i});
      bound.assign(rows.size(), 0.0);
      DenseKv kv(in.k.head(b, hk), in.v.head(b, hk), D);
      for (std::size_t c = 0; c < rows.size(); c += group_rows)
        fast_rows(P, b, rows.data() + c, std::min(group_rows, rows.size() - c), kg, *scratch, bound.data() + c, kv);
      spare.give(std::move(scratch));
    }
    for (std::size_t h = hk * G; h < (hk + 1) * G; ++h) {
      BlockResult r;
      if (fast)
        for (std::size_t i = i0; i < i1; ++i) {
          const double E = bound[(h - hk * G) * (i1 - i0) + (i - i0)];
          if (E < 0) continue;  // fully masked row
          r.bound = std::max(r.bound, E);
          r.bits = std::min(r.bits, bits_of(E));
        }
      if (!fast || r.bits < kMinFastBits) {
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

}  // namespace

namespace detail {

Golden golden_finite(const AttentionInputs& in, const GoldenOptions& opt) {
  ScratchPool spare;  // at most one Scratch per thread, reused from item to item
  return golden_finite_in(in, opt, spare, nullptr);
}

}  // namespace detail

namespace {

// A part's K and V through golden_parts' kv_rows, a tile at a time into two buffers of kKeyTile rows.
class PartKv final : public KvTiles {
 public:
  PartKv(const GoldenRows& rows, std::size_t part, double* kbuf, double* vbuf)
      : rows_(rows), part_(part), kbuf_(kbuf), vbuf_(vbuf) {}
  const double* keys(std::size_t j0, std::size_t n) override {
    PASA_ASSERT(n <= kKeyTile);
    rows_(part_, false, j0, n, kbuf_);
    return kbuf_;
  }
  const double* values(std::size_t j0, std::size_t n) override {
    PASA_ASSERT(n <= kKeyTile);
    rows_(part_, true, j0, n, vbuf_);
    return vbuf_;
  }
  bool whole() const override { return false; }

 private:
  const GoldenRows& rows_;
  std::size_t part_;
  double *kbuf_, *vbuf_;
};

// The fast path of a part (B = 1, one KV head, one block of rows), its keys and values read a tile at a
// time (fast_rows with a build: the same bits as golden_finite's). False where golden_finite would not keep
// it (its fast-path test fails, or a head's rows have a bound below kMinFastBits bits): the caller then
// computes the part from its gathered K and V. Only called where the test passes with every |k| and |v| at
// their bound, so that no value can leave the double range here.
bool streamed_part(const AttentionInputs& in, const GoldenOptions& opt, ScratchPool& spare, KvTiles& kv, Golden& g,
                   FastCheck& check) {
  const Shape& qs = in.q.shape;
  const std::size_t G = qs.N, Sq = qs.S, Skv = in.k.shape.S, D = qs.D;
  g.o = Tensor(qs, format_by_name("fp64"));
  g.lse.assign(G * Sq, 0.0);
  Problem P{in, opt, g, scale_dd(in), 0};
  const std::size_t group_rows = std::min(kGroup, (G * std::min(Sq, kRowBlock) + kRows - 1) / kRows * kRows);
  std::vector<RowRef> rows;
  for (std::size_t h = 0; h < G; ++h)
    for (std::size_t i = 0; i < Sq; ++i) rows.push_back({h, i});
  std::vector<double> bound(rows.size(), 0.0);
  KeyInfo kg(Skv);
  double max_v = 0;
  std::unique_ptr<Scratch> scratch = spare.take(Skv, D, group_rows);
  for (std::size_t c = 0; c < rows.size(); c += group_rows)  // (the first call builds kg and finds max |V|)
    fast_rows(P, 0, rows.data() + c, std::min(group_rows, rows.size() - c), kg, *scratch, bound.data() + c, kv,
              c == 0 ? &kg : nullptr, c == 0 ? &max_v : nullptr);
  spare.give(std::move(scratch));
  mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);  // (lse_from_dd's constants; see golden_finite_in)
  check = fast_check(in, kg.max_abs, max_v);
  if (!check.safe()) return false;
  g.guaranteed_bits = 1000;
  for (std::size_t h = 0; h < G; ++h) {  // golden_finite_in's BlockResult of each (head, block)
    BlockResult r;
    for (std::size_t i = 0; i < Sq; ++i) {
      const double E = bound[h * Sq + i];
      if (E < 0) continue;  // fully masked row
      r.bound = std::max(r.bound, E);
      r.bits = std::min(r.bits, bits_of(E));
    }
    if (r.bits < kMinFastBits) return false;
    g.guaranteed_bits = std::min(g.guaranteed_bits, r.bits);
    g.error_bound = std::max(g.error_bound, r.bound);
  }
  return true;
}

}  // namespace

std::vector<Golden> golden_parts(std::size_t parts, const std::vector<std::size_t>& group,
                                 const std::function<void(std::size_t, AttentionInputs&)>& fill, const GoldenRows& kv_rows,
                                 double kv_bound, const GoldenOptions& opt) {
  check_precision(opt);
  if (group.size() != parts)
    throw InputError(fmt::format("golden_parts: {} group entries for {} parts", group.size(), parts));
  std::vector<Golden> out(parts);
  std::vector<FastCheck> checks(parts);
  ScratchPool spare;  // shared by all parts: at most one Scratch per thread
  struct Buffers {    // a thread's, reused by its next part
    AttentionInputs in;
    std::vector<double> kt, vt;  // key tiles of the streamed path
  };
  Spares<Buffers> spare_buffers;
  auto compute = [&](std::size_t p, const GoldenOptions& o) {
    std::unique_ptr<Buffers> buf = spare_buffers.take();
    AttentionInputs& in = buf->in;
    fill(p, in);
    const Shape &qs = in.q.shape, &ks = in.k.shape;
    PASA_ASSERT(qs.B == 1 && ks.B == 1 && ks.N == 1 && ks.D == qs.D && in.v.shape == ks);
    // The streamed path where the fast-path test passes whatever K and V hold (|k|, |v| <= kv_bound).
    bool done = false;
    if (o.fast && qs.S <= kRowBlock && fast_check(in, kv_bound, kv_bound).safe()) {
      buf->kt.resize(kKeyTile * qs.D);
      buf->vt.resize(kKeyTile * qs.D);
      PartKv kv(kv_rows, p, buf->kt.data(), buf->vt.data());
      done = streamed_part(in, o, spare, kv, out[p], checks[p]);
    }
    if (!done) {  // K and V gathered whole, then golden_finite's way (its MPFR fallback per head)
      in.k.data.resize(ks.size());
      in.v.data.resize(ks.size());
      kv_rows(p, false, 0, ks.S, in.k.data.data());
      kv_rows(p, true, 0, ks.S, in.v.data.data());
      in.allow_nonfinite = true;  // (shapes, masks and bias checked; Q, K and V finite by contract: no pass over them)
      validate(in, 1);
      in.allow_nonfinite = false;
      out[p] = golden_finite_in(in, o, spare, &checks[p]);
    }
    spare_buffers.give(std::move(buf));
  };
  GoldenOptions one = opt;
  one.threads = 1;
  parallel_for(parts, opt.threads, [&](std::size_t p) { compute(p, one); });
  if (!opt.fast) return out;
  // A group whose union fails the fast-path test is computed with MPFR throughout, as golden_attention of the
  // union would: its parts that passed the test alone are redone so (the others already were).
  std::vector<std::size_t> ids(group);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<FastCheck> unions(ids.size());
  auto slot = [&](std::size_t p) { return static_cast<std::size_t>(std::lower_bound(ids.begin(), ids.end(), group[p]) - ids.begin()); };
  for (std::size_t p = 0; p < parts; ++p) unions[slot(p)].merge(checks[p]);
  std::vector<std::size_t> redo;
  for (std::size_t p = 0; p < parts; ++p)
    if (checks[p].safe() && !unions[slot(p)].safe()) redo.push_back(p);
  GoldenOptions plain = one;
  plain.fast = false;
  parallel_for(redo.size(), opt.threads, [&](std::size_t i) { compute(redo[i], plain); });
  return out;
}

}  // namespace pasa
