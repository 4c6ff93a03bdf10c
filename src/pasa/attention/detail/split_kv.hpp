// Split-KV ("flash-decoding") for the engines with an unnormalised running output (fa2, smooth_k, pasa):
// the keys a work item sees are cut into `splits` parts at s2-block boundaries, each part runs the engine's
// block loop from a fresh state and returns (unnormalised O, max m, sum l) — and, for PASA, its
// pseudo-average F and block count J — and the parts are merged in the allocation's `merge` stage
// ([UA]: "merged at the end"; the flash-decoding reduction) as its MergeSpec's model says.
// normalised_lse (the presets; what flash-decoding kernels store): each part's O_t/l_t rounded to div, then
// to the partial format, and lse_t = m_t (+ Inva·F_t for PASA) + log l_t rounded to the lse format; then
//   L = max_t lse_t,  s = Σ_t e^{lse_t − L},  lse = L + log s,  O = Σ_t e^{lse_t − lse}·O_t
// (each step one rounding to merge; a part whose row saw no key has lse_t = −∞ and no term), and the result
// handed on normalised: l = 1, m = lse (F = 0), so the final O/l is a rounding to div only.
// unnormalised (the model the presets used before normalised_lse; the parts' accumulators merged unrounded):
//   PASA only:  F = (Σ_t J_t·F_t)/J,  m_t ← m_t + Inva·(F_t − F)   (each part re-framed to the global
//               pseudo-average, Eq. 13–15: a part's max is relative to Inva·F_t)
//   M = max_t m_t,  a_t = e^{m_t − M} (0 for a part whose row saw no key),
//   l = Σ_t a_t·l_t,  O = Σ_t a_t·O_t   (in part order, every product and sum rounded once to merge),
// then the engine's final division (div) and output cast (out); lse = M (+ Inva·F) + log l.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "pasa/attention/detail/blocked_attention.hpp"

namespace pasa::detail {

// One part's state for the rows of a work item.
struct Partial {
  std::vector<double> m, l, O;     // rows; rows; rows × D (unnormalised)
  std::vector<std::uint8_t> seen;  // rows: the row saw a key in this part
  std::vector<double> F;           // PASA: pseudo-average of the part's block means (its frame is Inva·F)
  std::size_t blocks = 0;          // PASA: blocks the part processed (J_t)
  Partial(std::size_t rows, std::size_t D, double m0)
      : m(rows, m0), l(rows, 0.0), O(rows * D, 0.0), seen(rows, 0), F(rows, 0.0) {}
};

// The key ranges [j_begin, j_end) of the parts of an item: the blocks up to the last key any of its rows
// sees, cut into run.spec.splits parts of ceil(blocks / splits) blocks (fewer parts when there are fewer
// blocks). Boundaries are multiples of s2 (the last one is min(Skv, ...)), so the tiles are the unsplit ones.
std::vector<std::pair<std::size_t, std::size_t>> split_ranges(const Run& run, const Item& it);

// Merges the parts into `out` (m, l, O, seen; with pasa = true also F, re-framing as above; inva = the
// engine's Inva, rounded to mean) under the merge stage's MergeSpec. Every operation is one rounding to the
// merge stage (the stored parts: to their partial and lse formats).
void merge_partials(const Run& run, const std::vector<Partial>& parts, bool pasa, double inva, Partial& out,
                    RandomBits* rng);

}  // namespace pasa::detail
