// The golden attention's entry points (golden.hpp): golden_attention validates its inputs and options and
// calls the finite golden (golden_finite.cpp) or, where an input holds NaN or ±inf, golden_nonfinite.cpp's
// (which computes its finite rows with the finite golden); golden_bytes estimates the memory they need.
#include "pasa/exact/golden.hpp"

#include <algorithm>
#include <cmath>

#include "pasa/core/memory.hpp"
#include "pasa/exact/golden_finite.hpp"
#include "pasa/exact/golden_internal.hpp"
#include "pasa/exact/golden_nonfinite.hpp"

namespace pasa {

using namespace golden_detail;

std::size_t& golden_held_scores() {
  // 32 rows × 2048 keys: 1 MiB a thread. Recomputing a tile's scores costs its plain fp64 GEMM again, and
  // Dot2 where a pair is not provably exact: +2 % of the golden for fp16 inputs, +22 % for fp32 (one head,
  // Sq 128, Skv 4k-32k, 1 thread, AVX2; docs/golden.md), against 16 bytes per row and key a thread.
  static std::size_t limit = std::size_t{32} * 2048;
  return limit;
}

std::size_t golden_bytes(const Shape& q, const Shape& kv, const GoldenOptions& opt) {
  const std::size_t out = sat_add(sat_product(q.B, q.N, q.S, q.D), sat_product(q.B, q.N, q.S));
  // Per (batch, KV head): the keys' norms and exactness data (KeyInfo, 3 words per key). Per thread (one
  // Scratch of group_rows rows, as golden_attention sizes it: a decode row block of one query head has only
  // kRows): two key-length rows per row (the scaled scores, hi and lo) where held (golden_held_scores), four tile rows per row (a tile's
  // scores and weights), 2D accumulators per row, the visibility flags (one byte per key and row), six tile
  // rows for one row's bounds, exp and keep flags, a tile of keys in strips; on the MPFR path a key-length
  // row of MPFR numbers (limbs + header) and D accumulators. Threads: at most one per work item (batch, KV
  // head, row block).
  const std::size_t G = kv.N == 0 ? 1 : q.N / kv.N;
  const std::size_t wanted = std::min(kGroup, sat_mul(G, std::min(q.S, kRowBlock)));
  const std::size_t rows = std::min(kGroup, (wanted + kRows - 1) / kRows * kRows);
  const std::size_t mp = static_cast<std::size_t>(opt.precision_bits) / 64 + 5;  // 8-byte words per mpfr_t
  const std::size_t keys = sat_mul(sat_product(kv.B, kv.N, kv.S), 3);
  const std::size_t held = sat_mul(rows, kv.S) <= golden_held_scores() ? sat_mul(kv.S, 2) : 0;
  const std::size_t scratch = sat_add(sat_mul(rows, sat_add(held, sat_mul(q.D, 2) + 4 * kKeyTile)),
                                      sat_add(sat_mul(kv.S, (rows + 7) / 8), sat_mul(kKeyTile, sat_add(q.D, 6))));
  const std::size_t per_thread = sat_add(scratch, sat_mul(sat_add(kv.S, q.D), mp));
  const std::size_t blocks = sat_mul(sat_product(q.B, q.N), (q.S + kRowBlock - 1) / kRowBlock);
  const std::size_t items = sat_mul(sat_product(kv.B, kv.N), (q.S + kRowBlock - 1) / kRowBlock);
  const std::size_t t = std::min<std::size_t>(static_cast<std::size_t>(std::max(opt.threads, 1)), items);
  return sat_mul(sizeof(double), sat_add(sat_add(sat_add(out, blocks), keys), sat_mul(per_thread, t)));
}

std::size_t golden_stream_rows(const Shape& q, const Shape& kv, int threads) {
  constexpr std::size_t kChunkBytes = std::size_t{32} << 20;
  const std::size_t pairs = sat_product(q.B, kv.N), pair_rows = sat_mul(kv.N == 0 ? 1 : q.N / kv.N, q.S);
  const std::size_t blocks = (q.S + kRowBlock - 1) / kRowBlock;  // work items per pair
  const std::size_t want = (sat_mul(4, static_cast<std::size_t>(std::max(threads, 1))) + blocks - 1) / blocks;
  const std::size_t fit = std::max<std::size_t>(1, kChunkBytes / std::max<std::size_t>(1, sat_mul(pair_rows, sat_mul(q.D + 1, sizeof(double)))));
  return sat_mul(pair_rows, std::max<std::size_t>(1, std::min({pairs, want, fit})));
}

std::size_t golden_stream_bytes(const Shape& q, const Shape& kv, const GoldenOptions& opt) {
  const std::size_t all = sat_mul(sizeof(double), sat_add(sat_product(q.B, q.N, q.S, q.D), sat_product(q.B, q.N, q.S)));
  const std::size_t chunk = sat_mul(sizeof(double), sat_mul(golden_stream_rows(q, kv, opt.threads), q.D + 1));
  return sat_add(golden_bytes(q, kv, opt) - std::min(all, golden_bytes(q, kv, opt)), chunk);
}

Golden golden_stream(const AttentionInputs& in, const GoldenOptions& opt, const GoldenSink& sink) {
  validate(in, opt.threads);
  check_precision(opt);
  if (in.allow_nonfinite && !detail::all_finite(in)) {
    Golden g = detail::golden_with_nonfinite(in, opt);
    sink(0, g.lse.size(), g.o.data.data(), g.lse.data());
    g.o = Tensor();
    g.lse.clear();
    return g;
  }
  ScratchPool spare;
  return golden_finite_in(in, opt, spare, nullptr, &sink);
}

Golden golden_attention(const AttentionInputs& in, const GoldenOptions& opt) {
  validate(in, opt.threads);
  check_precision(opt);
  if (in.allow_nonfinite && !detail::all_finite(in)) return detail::golden_with_nonfinite(in, opt);
  return detail::golden_finite(in, opt);
}

}  // namespace pasa
