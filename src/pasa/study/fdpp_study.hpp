// FlashDecoding++'s unified max φ ([FD++, §3], Fig. 5 argument): how often the asynchronised softmax must
// fall back to the synchronised scheme, and its error against the golden, as functions of φ, the input
// distribution and the sequence length. The range [x_lo, x_hi] holding 99.99 % of the scaled scores is
// measured on a calibration problem (seed 1, 16 query rows per head); the evaluation problem (seed 2, decode:
// one query row) runs fdpp with a = x_lo − φ, b = x_hi − φ, so a row is recomputed exactly when one of its
// scores leaves the calibrated range, whatever φ; φ then sets the magnitude of e^{x − φ}.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "pasa/core/parallel.hpp"

namespace pasa {

struct FdppRow {
  std::string distribution;  // uniform, hybrid, resonance
  std::size_t skv = 0;
  std::string alloc;
  std::string phi_choice;    // lo (φ = x_lo), mid, hi (φ = x_hi)
  double phi = 0, x_lo = 0, x_hi = 0;
  double recomputed_pct = 0;  // rows recomputed, percent of all rows
  double rmse = 0, nan_pct = 0;          // fdpp against the golden
  double rmse_fa2 = 0, nan_pct_fa2 = 0;  // fa2 under the same allocation
};

// The whole table: 3 distributions × the lengths × allocations (fa_fp16_fp32, fa_fp16) × 3 φ choices.
std::vector<FdppRow> fdpp_study(const std::vector<std::size_t>& lengths, int threads = default_threads());
// The peak memory of fdpp_study, in bytes (saturating, core/memory.hpp); InputError for a length of 0.
std::size_t fdpp_study_bytes(const std::vector<std::size_t>& lengths, int threads = default_threads());

std::vector<std::string> fdpp_csv_header();
std::vector<std::string> fdpp_csv_row(const FdppRow&);

}  // namespace pasa
