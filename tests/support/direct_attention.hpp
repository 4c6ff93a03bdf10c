// One row of attention in long double from the definitions, sharing no code with the library (not even its
// visibility rule): score = scale·q·k + pse, replaced by the select value where selected (the unshifted
// frame); visible keys j < kv_len, j <= i + kv_len − Sq under causal (aligned to the sequence's length),
// and kept by the boolean keep mask; softmax(score)·V. A row that sees no key is 0.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "pasa/inputs/attention_inputs.hpp"

namespace pasa::test {

inline std::vector<long double> direct_row(const AttentionInputs& in, std::size_t b, std::size_t h, std::size_t i) {
  const std::size_t D = in.q.shape.D, Skv = in.k.shape.S, Sq = in.q.shape.S, hk = h / in.group();
  const std::size_t L = in.mask.kv_len.empty() ? Skv : in.mask.kv_len[b];
  const long double scale = in.scale != 0 ? static_cast<long double>(in.scale)
                                          : 1.0L / std::sqrt(static_cast<long double>(D));
  std::vector<long double> s;
  std::vector<std::size_t> keys;
  for (std::size_t j = 0; j < L; ++j) {
    if (in.mask.causal && static_cast<long double>(j) > static_cast<long double>(i) + L - static_cast<long double>(Sq))
      continue;
    if (!in.mask.keep.empty() && !in.mask.keep[(b * Sq + i) * Skv + j]) continue;
    long double x = 0;
    for (std::size_t d = 0; d < D; ++d) x += static_cast<long double>(in.q.at(b, h, i, d)) * in.k.at(b, hk, j, d);
    x = x * scale + (in.pse.data.empty() ? 0.0L : in.pse.at(in.pse.shape.B == 1 ? 0 : b, h, i, j));
    if (!in.mask.select.empty() && in.mask.select[(b * Sq + i) * Skv + j]) x = in.mask.select_value;
    s.push_back(x);
    keys.push_back(j);
  }
  std::vector<long double> o(D, 0.0L);
  if (s.empty()) return o;
  long double m = s[0], l = 0;
  for (long double x : s) m = std::max(m, x);
  for (std::size_t t = 0; t < s.size(); ++t) {
    const long double w = std::exp(s[t] - m);
    l += w;
    for (std::size_t d = 0; d < D; ++d) o[d] += w * in.v.at(b, hk, keys[t], d);
  }
  for (auto& x : o) x /= l;
  return o;
}

}  // namespace pasa::test
