// Range reduction by PASA's shift, measured per head (the paper's Fig. 5, §3.3.2 and Figs. 11–14):
// the ranges of K and of the shifted keys K' = M·K (Eq. 11, 1/α inside M), of the scores S = Q·Kᵀ (as
// FA-FP16/FP32 stores them, before the 1/α) and of the shifted scores S' = Q·K'ᵀ (Eq. 12, as PASA stores
// them), and how many of each round to ±inf in a format (the overflows that then become NaN). Exact (fp64) values of the stored inputs; K' per key block of s2 keys.
#pragma once

#include <cstddef>
#include <vector>

#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/numeric/format.hpp"

namespace pasa {

struct HeadRanges {
  std::size_t batch = 0, head = 0;
  double k_min = 0, k_max = 0, kp_min = 0, kp_max = 0;  // K and K'
  double s_min = 0, s_max = 0, sp_min = 0, sp_max = 0;  // S = Q·Kᵀ (unscaled) and S' = Q·K'ᵀ
  std::size_t s_overflow = 0, sp_overflow = 0;          // S, S' that round to ±inf in score_format
  std::size_t scores = 0;                               // Sq·Skv
};

// Per (batch, head) of the first `heads` query heads of batch 0 (0: all); throws InputError for masked,
// biased or grouped-query inputs and s2 = 0.
std::vector<HeadRanges> range_stats(const AttentionInputs&, double beta, std::size_t s2, const Format& score_format,
                                    std::size_t heads = 0, int threads = 1);

}  // namespace pasa
