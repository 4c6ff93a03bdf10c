#include "pasa/inputs/attention_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/core/parallel.hpp"

namespace pasa {

namespace {

std::string shape_str(const Shape& s) { return fmt::format("({}, {}, {}, {})", s.B, s.N, s.S, s.D); }

void check_finite(const Tensor& t, const char* name) {
  for (std::size_t idx = 0; idx < t.size(); ++idx) {
    if (std::isfinite(t.value(idx))) continue;
    const Shape& s = t.shape;
    const std::size_t d = idx % s.D, row = idx / s.D, i = row % s.S, bn = row / s.S;
    throw InputError(fmt::format("{} has a non-finite element {} at (b={}, n={}, s={}, d={}); "
                                 "allow them with --allow-nonfinite (pasa-attn) or \"allow_nonfinite\": true (problem JSON)",
                                 name, t.value(idx), bn / s.N, bn % s.N, i, d));
  }
}

}  // namespace

double AttentionInputs::effective_scale() const {
  return scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(q.shape.D));
}

void validate_shapes(const Shape& q, const Shape& k, const Shape& v) {
  const std::string all = fmt::format("Q {}, K {}, V {}", shape_str(q), shape_str(k), shape_str(v));
  if (q.D == 0 || k.D == 0) throw InputError("head dimension D = 0 (" + all + ")");
  if (q.S == 0 || k.S == 0) throw InputError("empty sequence: Sq and Skv must be >= 1 (" + all + ")");
  if (q.B == 0 || q.N == 0 || k.N == 0) throw InputError("B, Nq and Nkv must be >= 1 (" + all + ")");
  if (!(k == v)) throw InputError("K and V shapes differ (" + all + ")");
  if (q.B != k.B) throw InputError("batch size of Q differs from K/V (" + all + ")");
  if (q.D != k.D) throw InputError("head dimension D of Q differs from K/V (" + all + ")");
  if (q.N % k.N != 0)
    throw InputError(fmt::format("N_q = {} is not a multiple of N_kv = {} (GQA needs it) ({})", q.N, k.N, all));
}

void validate(const AttentionInputs& in, int threads) {
  const Shape &q = in.q.shape, &k = in.k.shape;
  validate_shapes(q, k, in.v.shape);
  const Tensor* ts[] = {&in.q, &in.k, &in.v};
  const char* names[] = {"Q", "K", "V"};
  for (int t = 0; t < 3; ++t)
    if (ts[t]->size() != ts[t]->shape.size())
      throw InputError(fmt::format("{} holds {} values but its shape {} needs {}", names[t], ts[t]->size(),
                                   shape_str(ts[t]->shape), ts[t]->shape.size()));
  if (!std::isfinite(in.scale)) throw InputError(fmt::format("scale must be finite, got {}", in.scale));
  const Mask& m = in.mask;
  if (!m.kv_len.empty()) {
    if (m.kv_len.size() != q.B)
      throw InputError(fmt::format("mask kv_len has {} entries, expected one per batch (B = {})", m.kv_len.size(), q.B));
    for (std::size_t b = 0; b < m.kv_len.size(); ++b)
      if (m.kv_len[b] > k.S)
        throw InputError(fmt::format("mask kv_len[{}] = {} exceeds Skv = {}", b, m.kv_len[b], k.S));
  }
  if (!m.keep.empty() && m.keep.size() != q.B * q.S * k.S)
    throw InputError(fmt::format("boolean mask has {} entries, expected B*Sq*Skv = {}*{}*{} = {}", m.keep.size(),
                                 q.B, q.S, k.S, q.B * q.S * k.S));
  if (!m.select.empty() && m.select.size() != q.B * q.S * k.S)
    throw InputError(fmt::format("select mask has {} entries, expected B*Sq*Skv = {}*{}*{} = {}", m.select.size(),
                                 q.B, q.S, k.S, q.B * q.S * k.S));
  if (!std::isfinite(m.select_value))
    throw InputError(fmt::format("select_value must be finite, got {}", m.select_value));
  if (!in.pse.data.empty()) {
    const Shape& p = in.pse.shape;
    if ((p.B != 1 && p.B != q.B) || p.N != q.N || p.S != q.S || p.D != k.S || in.pse.data.size() != p.size())
      throw InputError(fmt::format("pse has shape {} ({} values), expected (B or 1, Nq, Sq, Skv) = ({} or 1, {}, {}, {})",
                                   shape_str(p), in.pse.data.size(), q.B, q.N, q.S, k.S));
    for (std::size_t idx = 0; idx < in.pse.data.size(); ++idx)  // allow_nonfinite does not cover the bias
      if (!std::isfinite(in.pse.data[idx]))
        throw InputError(fmt::format("pse has a non-finite element {} at (b={}, h={}, i={}, j={})", in.pse.data[idx],
                                     idx / (p.N * p.S * p.D), idx / (p.S * p.D) % p.N, idx / p.D % p.S, idx % p.D));
  }
  if (!in.allow_nonfinite)
    for (int t = 0; t < 3; ++t) {
      // Chunks on the threads; a chunk holding NaN/inf sends the serial scan to name the first one.
      const Tensor& x = *ts[t];
      constexpr std::size_t kChunk = std::size_t{1} << 16;
      std::vector<std::uint8_t> bad((x.size() + kChunk - 1) / kChunk, 0);
      parallel_for(bad.size(), threads, [&](std::size_t c) {
        std::vector<double> buf;
        const std::size_t i0 = c * kChunk, n = std::min(x.size(), (c + 1) * kChunk) - i0;
        const double* v = x.values(i0, n, buf);
        std::uint8_t any = 0;  // (an or-reduction over the chunk: vectorised)
        for (std::size_t i = 0; i < n; ++i) any |= !std::isfinite(v[i]);
        bad[c] = any;
      });
      if (std::find(bad.begin(), bad.end(), 1) != bad.end()) check_finite(*ts[t], names[t]);
    }
}

void narrow_inputs(AttentionInputs& in, int threads) {
  for (Tensor* t : {&in.q, &in.k, &in.v}) *t = narrowed(std::move(*t), threads);
}

bool has_narrow(const AttentionInputs& in) { return in.q.is_narrow() || in.k.is_narrow() || in.v.is_narrow(); }

const AttentionInputs& wide_inputs(const AttentionInputs& in, AttentionInputs& own, int threads) {
  if (!has_narrow(in)) return in;
  own = in;  // (every other field as it is; a narrow tensor's copy shares its storage)
  own.q = widened(in.q, threads);
  own.k = widened(in.k, threads);
  own.v = widened(in.v, threads);
  return own;
}

const double* pse_row(const AttentionInputs& in, std::size_t b, std::size_t h, std::size_t i) {
  if (in.pse.data.empty()) return nullptr;
  return in.pse.head(in.pse.shape.B == 1 ? 0 : b, h) + i * in.pse.shape.D;
}

const std::uint8_t* select_row(const AttentionInputs& in, std::size_t b, std::size_t i) {
  if (in.mask.select.empty()) return nullptr;
  return in.mask.select.data() + (b * in.q.shape.S + i) * in.k.shape.S;
}

std::size_t visible_end(const AttentionInputs& in, std::size_t b, std::size_t i) {
  const std::size_t sq = in.q.shape.S, skv = in.k.shape.S;
  const std::size_t len = in.mask.kv_len.empty() ? skv : in.mask.kv_len[b];
  std::size_t end = len;
  if (in.mask.causal) {
    // Aligned to the sequence's own length (bottom-right, as varlen kernels do): j <= i + (len - Sq)  <=>
    // j < i + 1 + len - Sq, computed without unsigned wrap-around.
    const std::size_t lim = (i + 1 + len >= sq) ? i + 1 + len - sq : 0;
    end = std::min(end, lim);
  }
  return end;
}

bool visible(const AttentionInputs& in, std::size_t b, std::size_t i, std::size_t j) {
  if (j >= visible_end(in, b, i)) return false;
  if (in.mask.keep.empty()) return true;
  return in.mask.keep[(b * in.q.shape.S + i) * in.k.shape.S + j] != 0;
}

}  // namespace pasa
