// The golden of finite inputs (golden_finite.hpp): the work items (batch, KV head, block of query rows) on
// the threads, each writing only its own rows (so the result never depends on the thread count); the fast
// path (golden_rows.cpp) where fast_check passes, the plain MPFR path (golden_mpfr.cpp) for a block whose
// fast bound is below kMinFastBits bits, and the result's bits and bound from the blocks'.
#include "pasa/exact/golden_finite.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>

#include <fmt/format.h>
#include <mpfr.h>

#include "pasa/core/assert.hpp"
#include "pasa/core/cancel.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden_internal.hpp"

namespace pasa::golden_detail {

using namespace exact_scores;

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

FastCheck fast_check(const AttentionInputs& in, double max_abs_k, double max_abs_v) {
  auto max_abs = [](const Tensor& t) {
    double m = 0;
    for (double x : t.data) m = std::max(m, std::abs(x));
    return m;
  };
  return {max_abs(in.q), max_abs_k, max_abs_v, max_abs(in.pse), std::abs(in.mask.select_value), in.q.shape.D, in.k.shape.S};
}

void check_precision(const GoldenOptions& opt) {
  if (opt.precision_bits < 106 || opt.precision_bits > 100000)
    throw InputError(fmt::format("golden precision_bits must be in [106, 100000], got {}", opt.precision_bits));
}


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
Golden golden_finite_in(const AttentionInputs& in, const GoldenOptions& opt, ScratchPool& spare, FastCheck* check,
                        const GoldenSink* sink) {
  PASA_ASSERT(detail::all_finite(in));
  PASA_ASSERT(opt.precision_bits >= 106 && opt.precision_bits <= 100000);
  const Shape& qs = in.q.shape;
  // (batch, KV head) pairs held at once: all of them, or golden_stream's chunk (rows of whole pairs)
  const std::size_t pairs = qs.B * in.k.shape.N, pair_rows = in.group() * qs.S;
  const std::size_t chunk_pairs = sink ? golden_stream_rows(qs, in.k.shape, opt.threads) / pair_rows : pairs;
  Golden g;
  g.o = Tensor({1, 1, chunk_pairs * pair_rows, qs.D}, format_by_name("fp64"));
  g.lse.assign(chunk_pairs * pair_rows, 0.0);
  Problem P{in, opt, g, scale_dd(in), 0};
  {  // max |V| per (batch, KV head) on the threads, then the max of those (a max in any order is the same)
    const std::size_t heads = in.v.shape.B * in.v.shape.N, per_head = in.v.shape.S * in.v.shape.D;
    std::vector<double> head_max(heads, 0.0);
    parallel_for(heads, opt.threads, [&](std::size_t h) {
      double mx = 0;
      std::vector<double> buf;
      constexpr std::size_t kChunk = std::size_t{1} << 14;  // (a narrow V read a chunk at a time)
      for (std::size_t i0 = h * per_head; i0 < (h + 1) * per_head; i0 += kChunk) {
        const std::size_t n = std::min(kChunk, (h + 1) * per_head - i0);
        const double* v = in.v.values(i0, n, buf);
        for (std::size_t i = 0; i < n; ++i) mx = std::max(mx, std::abs(v[i]));
      }
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
    if (!in.k.is_narrow()) {
      key_info[bk] = std::make_unique<KeyInfo>(in.k.head(bk / Nkv, bk % Nkv), Skv, D);
      return;
    }
    // A narrow K a tile at a time (KeyInfo::add: the same bits for tiles of a multiple of 8 keys).
    key_info[bk] = std::make_unique<KeyInfo>(Skv);
    std::vector<double> buf;
    const std::size_t at = in.k.index(bk / Nkv, bk % Nkv, 0);
    for (std::size_t j0 = 0; j0 < Skv; j0 += kKeyTile) {
      const std::size_t n = std::min(kKeyTile, Skv - j0);
      key_info[bk]->add(in.k.values(at + j0 * D, n * D, buf), j0, n, D);
    }
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
  const std::size_t items = qs.B * Nkv * blocks;
  std::atomic<std::size_t> items_done{0};
  auto item = [&](std::size_t w) {
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
      InputKv kv(in.k, in.v, b, hk);
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
    if (opt.progress) opt.progress(items_done.fetch_add(1, std::memory_order_relaxed) + 1, items);
  };
  // The items chunk by chunk of whole pairs, in order (the rows of a chunk are contiguous: pair bk holds rows
  // [bk·G·Sq, (bk + 1)·G·Sq)); each item's result does not depend on what else runs (the fast-path decision
  // above is the whole problem's), so a chunked run gives every bit of the whole one.
  for (std::size_t p0 = 0; p0 < pairs; p0 += chunk_pairs) {
    const std::size_t np = std::min(chunk_pairs, pairs - p0);
    P.row0 = p0 * pair_rows;
    parallel_for(np * blocks, opt.threads, [&](std::size_t w) { item(p0 * blocks + w); });
    if (sink) (*sink)(P.row0, np * pair_rows, g.o.data.data(), g.lse.data());
  }
  if (sink) {
    g.o = Tensor();
    g.lse.clear();
  } else {
    g.o.shape = qs;
  }
  g.guaranteed_bits = 1000;
  for (const BlockResult& r : results) {
    g.guaranteed_bits = std::min(g.guaranteed_bits, r.bits);
    g.error_bound = std::max(g.error_bound, r.bound);
    g.used_mpfr = g.used_mpfr || r.mpfr;
  }
  return g;
}

}  // namespace pasa::golden_detail

namespace pasa::detail {

bool all_finite(const AttentionInputs& in) {
  for (const Tensor* t : {&in.q, &in.k, &in.v})
    for (std::size_t i = 0; i < t->size(); ++i)
      if (!std::isfinite(t->value(i))) return false;
  return true;
}

Golden golden_finite(const AttentionInputs& in, const GoldenOptions& opt) {
  golden_detail::ScratchPool spare;  // at most one Scratch per thread, reused from item to item
  return golden_detail::golden_finite_in(in, opt, spare, nullptr);
}

}  // namespace pasa::detail
