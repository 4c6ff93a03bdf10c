// The golden's pieces shared by its translation units, private to exact/ (golden.hpp is the interface):
// golden_finite.cpp (the work items, the fast-path decision and the MPFR fallback per block), golden_rows.cpp
// (the fast path on a group of rows), golden_mpfr.cpp (the plain MPFR evaluation), golden_parts.cpp
// (golden_parts) and golden.cpp (golden_attention, golden_bytes). Includes flow one way: golden.cpp ->
// golden_nonfinite.hpp -> golden_finite.hpp; every .cpp of the golden -> this header.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "pasa/exact/exact_scores.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/numeric/double_double.hpp"

namespace pasa::golden_detail {

constexpr std::size_t kRowBlock = kGoldenRowBlock;
constexpr int kMinFastBits = 64;
constexpr double kU2 = 0x1p-106;
constexpr std::size_t kRows = exact_scores::kScoreRows;  // rows of one register-blocked GEMM / P·V kernel call
constexpr std::size_t kGroup = 32;   // rows sharing one pass over K (in key tiles) and the scratch buffers
constexpr std::size_t kKeyTile = 256;  // keys per GEMM tile: 256 keys of D = 128 stay in L2 for all rows

// Bits guaranteed by a relative error bound e·2^-shift: 0 when the bound is >= 1, infinite or NaN (no
// guarantee); at most 999, since 1000 means "no visible key" (golden.hpp) and no double needs more.
// The MPFR path computes its bound in units of 2^-shift (shift = precision_bits - 900 beyond 900 bits), so
// that u = 2^-precision_bits does not underflow to 0 (which gave log2(0) = -inf, cast to INT_MIN).
constexpr int kMaxBits = 999;
inline int bits_of(double e, int shift = 0) {
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
  std::size_t row0 = 0;  // the first row g holds (golden_stream: a chunk's; else 0): row r is g's r - row0
};

struct BlockResult {
  int bits = 1000;
  double bound = 0;  // the largest relative bound E of the block's rows (bits = floor(-log2 E))
  bool mpfr = false;
};

// Which keys of row i are visible: [0, end) filtered by the boolean mask; returns their number.
std::size_t visible_keys(const AttentionInputs& in, std::size_t b, std::size_t i, std::vector<unsigned char>& vis);
void write_masked_row(Golden& g, std::size_t row, std::size_t d);

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

// Of the run's tensors, wide or narrow: in place when wide, else decoded a tile (at most kKeyTile keys)
// at a time into two buffers of its own.
class InputKv final : public KvTiles {
 public:
  InputKv(const Tensor& K, const Tensor& V, std::size_t b, std::size_t hk)
      : K_(K), V_(V), at_(K.index(b, hk, 0)), d_(K.shape.D) {}
  const double* keys(std::size_t j0, std::size_t n) override { return tile(K_, kbuf_, j0, n); }
  const double* values(std::size_t j0, std::size_t n) override { return tile(V_, vbuf_, j0, n); }
  bool whole() const override { return !K_.is_narrow() && !V_.is_narrow(); }

 private:
  const double* tile(const Tensor& t, std::vector<double>& buf, std::size_t j0, std::size_t n) {
    PASA_ASSERT(!t.is_narrow() || n <= kKeyTile);
    return t.values(at_ + j0 * d_, n * d_, buf);
  }
  const Tensor &K_, &V_;
  std::size_t at_, d_;
  std::vector<double> kbuf_, vbuf_;
};

// Per-thread buffers of a group of rows. Whole key rows (skv entries per row) only where a value must wait
// for the row maximum: the visibility flags, and the scaled scores (hi, lo) while they fit the budget of
// golden_held_scores() (`held`); a longer row recomputes them in pass 2 from the keys (the same operations
// on the same values, so the same bits: golden_rows.cpp), so that a thread's buffers stop growing with Skv.
// Everything else is one tile of kKeyTile keys, so that it stays in L1/L2 while the tile's keys and values
// do (golden_rows.cpp).
struct Scratch {
  std::size_t skv = 0, d = 0, rows = 0;
  bool held = true;                        // shi and slo hold rows × skv scores
  std::vector<double> shi, slo;            // rows × skv (held): q·k·scale (before pse and select), hi and lo
  std::vector<double> ths, tls, phi, plo;  // rows × kKeyTile: a tile's raw scores, then its scores; its weights
  std::vector<double> nh, nc, zero, kt;    // rows × d accumulators; d zeros; a tile of keys in strips
  std::vector<double> qrows;               // rows × d: the rows of a narrow Q as doubles
  std::vector<std::vector<unsigned char>> vis;
  std::vector<double> delta, thi, tlo, ehi, elo, keep;  // kKeyTile each: one row's tile (keep: 1 kept, 0 not)
  // rows (<= kGroup, a multiple of kRows): the most rows of one fast_rows call.
  Scratch(std::size_t skv_, std::size_t d_, std::size_t rows_)
      : skv(skv_), d(d_), rows(rows_), held(rows * skv <= golden_held_scores()), shi(held ? rows * skv : 0),
        slo(held ? rows * skv : 0), ths(rows * kKeyTile), tls(rows * kKeyTile), phi(rows * kKeyTile),
        plo(rows * kKeyTile), nh(rows * d), nc(rows * d), zero(d), kt(kKeyTile * d), qrows(rows * d), vis(rows),
        delta(kKeyTile), thi(kKeyTile), tlo(kKeyTile), ehi(kKeyTile), elo(kKeyTile), keep(kKeyTile) {}
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
// (build == &kg) over all in.k.shape.S keys, and *max_v is set to max |V| over all of them (golden_rows.cpp).
void fast_rows(Problem& P, std::size_t b, const RowRef* rows, std::size_t nr, const exact_scores::KeyInfo& kg,
               Scratch& sc, double* bound, KvTiles& kv, exact_scores::KeyInfo* build = nullptr, double* max_v = nullptr);

// Plain MPFR evaluation of rows [i0, i1) of head h in batch b at P.opt.precision_bits (golden_mpfr.cpp).
void mpfr_block(Problem& P, std::size_t b, std::size_t h, std::size_t i0, std::size_t i1, BlockResult& res);

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

FastCheck fast_check(const AttentionInputs& in, double max_abs_k, double max_abs_v);

// The scale (the exact 1/sqrt(D) when in.scale == 0) to ~106 bits.
DD scale_dd(const AttentionInputs& in);

// InputError unless opt.precision_bits is in [106, 100000].
void check_precision(const GoldenOptions& opt);

// golden_finite (golden_finite.hpp) with its scratch buffers from `spare` (shared by the parts of
// golden_parts), reporting what decided its fast path in *check (when opt.fast).
// With `sink`, the output goes to it chunk by chunk (golden_stream) and the returned o and lse are empty.
Golden golden_finite_in(const AttentionInputs& in, const GoldenOptions& opt, ScratchPool& spare, FastCheck* check,
                        const GoldenSink* sink = nullptr);

}  // namespace pasa::golden_detail
