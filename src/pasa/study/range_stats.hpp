// Range reduction by PASA's shift, measured per head (the paper's Fig. 5, §3.3.2 and Figs. 11–14):
// the ranges of K and of the shifted keys K' = M·K (Eq. 11, 1/α inside M), of the scores S = Q·Kᵀ (as
// FA-FP16/FP32 stores them, before the 1/α) and of the shifted scores S' = Q·K'ᵀ (Eq. 12, as PASA stores
// them), and how many of each round to ±inf in a format (the overflows that then become NaN). Exact (fp64)
// values of the stored inputs; K' per key block of s2 keys. One implementation behind pasa-attn --ranges,
// pasa-sweep --ranges (ranges.csv), pasa-tables --range-heads and Python's pasa.range_stats.
#pragma once

#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/study/sweep_config.hpp"

namespace pasa {

struct HeadRanges {
  std::size_t batch = 0, head = 0;                      // the query head; K, K' are its KV head's (GQA)
  double k_min = 0, k_max = 0, kp_min = 0, kp_max = 0;  // K and K'
  double s_min = 0, s_max = 0, sp_min = 0, sp_max = 0;  // S = Q·Kᵀ (unscaled) and S' = Q·K'ᵀ
  std::size_t s_overflow = 0, sp_overflow = 0;          // S, S' that round to ±inf in score_format
  std::size_t scores = 0;                               // Sq·Skv, or the visible ones (causal)
};

// Per (batch, query head): the first `heads` query heads of batch 0, or all (batch, head) pairs when
// heads = 0. With a causal mask the scores are the visible ones (`scores` counts them); K' is the shift of
// every key block as PASA computes it. Throws InputError for kv_len, keep and select masks, pse (their
// scores are not QKᵀ alone) and s2 = 0.
std::vector<HeadRanges> range_stats(const AttentionInputs&, double beta, std::size_t s2, const Format& score_format,
                                    std::size_t heads = 0, int threads = 1);

// The columns of one HeadRanges in a CSV table (batch, head, k_min, ..., sp_overflow) and its cells.
CsvRow range_columns();
CsvRow range_cells(const HeadRanges&);
nlohmann::json to_json(const HeadRanges&);

// PASA's β and s2 as a sweep's first `pasa` algorithm has them (the defaults, β of PasaOptions and s2 = 128,
// when it has none): the shift whose range reduction ranges.csv reports.
void sweep_shift(const SweepConfig&, double& beta, std::size_t& s2);

// ranges.csv of a sweep: one row per (grid point, seed, head) of the first `heads` heads of each problem
// (problem_id, grid_point, seed, the grid axes, then range_columns()); no attention is run.
struct RangeTable {
  CsvRow header;
  std::vector<CsvRow> rows;
  std::string text() const;  // CSV
};
RangeTable sweep_ranges(const SweepConfig&, std::size_t heads, int threads);

}  // namespace pasa
