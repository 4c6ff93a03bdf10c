// Attention scores q_i·k_j of one (batch, head) in double-double, shared by the golden and the score
// statistics. Products are error-free (FMA TwoProd) and summed Dot2-style (Ogita, Rump & Oishi 2005):
// TwoSum on the running sum, the rounding errors summed separately, then renormalised with TwoSum.
// Bound (|s_hat - q·k| <= dot2_error_bound(D, Σ|q_d k_d|)): the 2D error terms sum to at most
// (D+1)·u·(1+u)^(D+1)·Σ|q_d k_d|, and their plain summation errs by γ_2D times that, so the error is below
// 2.1·D·(D+1)·u²·Σ|q_d k_d| (u = 2^-53, D < 2^20). For fp16/bf16/fp8 inputs the result is even exact when
// no product underflows and the sum stays below 2^52 ulps of the smallest product's grid.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "pasa/numeric/double_double.hpp"
#include "pasa/inputs/tensor.hpp"

namespace pasa {

inline double dot2_error_bound(std::size_t d, double abs_dot) {
  const double u2 = 0x1p-106;
  return 2.1 * static_cast<double>(d) * static_cast<double>(d + 1) * u2 * abs_dot;
}

// K of head (b, h) transposed to (D, Skv), so the inner loop runs over keys (vectorises), plus the
// Euclidean norm of every key (for the Cauchy-Schwarz bound Σ|q_d k_d| <= ‖q‖‖k‖; the norms are
// computed in double and enlarged by 1% to cover their own rounding).
struct KeysT {
  std::size_t skv = 0, d = 0;
  std::vector<double> kt, norm;
  KeysT(const Tensor& k, std::size_t b, std::size_t h) : skv(k.shape.S), d(k.shape.D), kt(skv * d), norm(skv) {
    const double* src = k.head(b, h);
    for (std::size_t j = 0; j < skv; ++j) {
      double n2 = 0;
      for (std::size_t x = 0; x < d; ++x) {
        kt[x * skv + j] = src[j * d + x];
        n2 += src[j * d + x] * src[j * d + x];
      }
      norm[j] = 1.01 * std::sqrt(n2);
    }
  }
};

inline double row_norm(const double* q, std::size_t d) {
  double n2 = 0;
  for (std::size_t x = 0; x < d; ++x) n2 += q[x] * q[x];
  return 1.01 * std::sqrt(n2);
}

// hi[j] + lo[j] = q·k_j (within the bound above) for j in [0, end); hi/lo must hold `end` entries.
inline void dot2_scores(const double* q, const KeysT& keys, std::size_t end, double* hi, double* lo) {
  for (std::size_t j = 0; j < end; ++j) hi[j] = lo[j] = 0;
  for (std::size_t x = 0; x < keys.d; ++x) {
    const double qx = q[x];
    const double* kr = keys.kt.data() + x * keys.skv;
    for (std::size_t j = 0; j < end; ++j) lo[j] += dot2_step(hi[j], qx, kr[j]);
  }
  for (std::size_t j = 0; j < end; ++j) {
    const DD r = two_sum(hi[j], lo[j]);
    hi[j] = r.hi;
    lo[j] = r.lo;
  }
}

}  // namespace pasa
