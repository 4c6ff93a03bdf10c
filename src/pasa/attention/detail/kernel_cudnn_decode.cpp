#include "pasa/attention/detail/kernel_cudnn_decode.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <span>
#include <utility>

#include "pasa/attention/gemm.hpp"
#include "pasa/numeric/gpu_math.hpp"
#include "pasa/numeric/round.hpp"

// The mechanism was found on the captures and the probes of experiments/gpu/kernels/cudnn_decode_probe.py
// (docs/kernels.md "cuDNN decode"); every operation is one float32 rounding (-ffp-contract=off), an FFMA is
// std::fma, the MMAs go through the tensor-core model.

namespace pasa::detail {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kLn2 = 0.693147182f, kLog2e = 1.44269504f;

// One CTA's part: the unnormalised O (D), the running max m (log2 units) and l. warps: 1 (knob_3: blocks of
// 64, exp2f) or 4 (knob_35: blocks of 128, MUFU.EX2, a warp per 32-key slice).
struct Part {
  std::vector<double> O;
  float m = -kInf, l = 0;
};

// blocks: the key blocks [b0, b1) the CTA runs, in order; warps 1 takes every 64 keys of [0, Skv).
Part run_part(const GemmSpec& g, const Format& p_fmt, const float* s2, const double* V,
              const std::vector<std::pair<std::size_t, std::size_t>>& blocks, std::size_t D, int warps) {
  auto e2 = [&](float x) { return warps == 1 ? gpu::exp2f(x) : gpu::ex2_approx_ftz(x); };
  std::vector<std::vector<double>> Ow(static_cast<std::size_t>(warps), std::vector<double>(D, 0.0));
  std::array<std::array<float, 4>, 4> st{};  // [warp][thread of the quad]
  std::vector<double> P;
  float m = -kInf;
  bool first = true;
  for (const auto& [b0, b1] : blocks) {
    const std::size_t n = b1 - b0;
    float mn = m;
    for (std::size_t c = 0; c < n; ++c) mn = std::max(mn, s2[b0 + c]);
    const float alpha = first ? 1.0f : e2(m - mn);
    P.assign(n, 0.0);
    std::array<std::array<float, 4>, 4> blk{};
    for (std::size_t c = 0; c < n; ++c) {
      const float p = e2(s2[b0 + c] - mn);
      P[c] = p;
      const std::size_t w = warps == 1 ? 0 : c / 32, t = (c % 8) / 2;
      blk[w][t] += p;
    }
    for (std::size_t w = 0; w < 4; ++w)
      for (std::size_t t = 0; t < 4; ++t) st[w][t] = first ? blk[w][t] : std::fma(alpha, st[w][t], blk[w][t]);
    round_span(std::span<const double>(P), std::span<double>(P), p_fmt, RoundOptions{});  // cvt.rn to V's type
    for (std::size_t w = 0; w < static_cast<std::size_t>(warps); ++w) {
      const std::size_t k0 = warps == 1 ? 0 : std::min(n, 32 * w), k1 = warps == 1 ? n : std::min(n, 32 * w + 32);
      std::vector<double>& o = Ow[w];
      if (!first)
        for (double& x : o) x = static_cast<float>(static_cast<float>(x) * alpha);
      if (k1 > k0) gemm_accumulate(g, 1, D, k1 - k0, P.data() + k0, k1 - k0, V + (b0 + k0) * D, D, o.data(), D);
    }
    m = mn;
    first = false;
  }
  Part r;
  r.m = m;
  auto quad = [&](std::size_t w) { return (st[w][0] + st[w][1]) + (st[w][2] + st[w][3]); };  // xor 1, then 2
  if (warps == 1) {
    r.O = std::move(Ow[0]);
    r.l = quad(0);
  } else {
    r.O.assign(D, 0.0);
    for (std::size_t d = 0; d < D; ++d)
      r.O[d] = (static_cast<float>(Ow[0][d]) + static_cast<float>(Ow[2][d])) +
               (static_cast<float>(Ow[1][d]) + static_cast<float>(Ow[3][d]));
    r.l = (quad(0) + quad(1)) + (quad(2) + quad(3));
  }
  return r;
}

float stats(float l, float m) { return std::fma(gpu::lg2_approx_ftz(l), kLn2, m * kLn2); }

std::vector<std::pair<std::size_t, std::size_t>> key_blocks(std::size_t c0, std::size_t c1, std::size_t bn) {
  std::vector<std::pair<std::size_t, std::size_t>> b;
  for (std::size_t b0 = c0; b0 < c1; b0 += bn) b.emplace_back(b0, std::min(c1, b0 + bn));
  return b;
}

}  // namespace

float cudnn_decode_row(const GemmSpec& g, const Format& p_fmt, const float* s2, const double* V, std::size_t Skv,
                       std::size_t D, double* o, std::size_t splits, DecodePartition partition) {
  if (Skv <= 512 || splits <= 1) {
    const Part p = run_part(g, p_fmt, s2, V, key_blocks(0, Skv, Skv <= 256 ? 64 : 128), D, Skv <= 256 ? 1 : 4);
    const float inv = 1.0f / p.l;
    for (std::size_t d = 0; d < D; ++d) o[d] = static_cast<float>(static_cast<float>(p.O[d]) * inv);
    return stats(p.l, p.m);
  }
  const auto blocks = key_blocks(0, Skv, 128);
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> ctas;
  if (partition == DecodePartition::strided) {
    ctas.resize(std::min(splits, blocks.size()));
    for (std::size_t b = 0; b < blocks.size(); ++b) ctas[b % splits].push_back(blocks[b]);
  } else {
    for (const auto& blk : blocks) ctas.push_back({blk});
  }
  std::vector<Part> parts;
  for (const auto& c : ctas) parts.push_back(run_part(g, p_fmt, s2, V, c, D, 4));
  float M = -kInf;
  for (const Part& p : parts) M = std::max(M, p.m * kLn2);
  float L = 0;
  std::vector<float> acc(D, 0.0f);
  for (const Part& p : parts) {
    const float w = gpu::ex2_approx_ftz((p.m * kLn2 - M) * kLog2e);  // __expf
    L += w * p.l;
    for (std::size_t d = 0; d < D; ++d) acc[d] += w * static_cast<float>(p.O[d]);
  }
  const float inv = 1.0f / L;
  for (std::size_t d = 0; d < D; ++d) o[d] = acc[d] * inv;
  return std::fma(gpu::lg2_approx_ftz(L), kLn2, M);
}

}  // namespace pasa::detail
