// Accuracy metrics of an attention output against the golden, and statistics of the attention scores.
#pragma once

#include <cstddef>
#include <string>
#include <vector>


#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/numeric/double_double.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/inputs/tensor.hpp"

namespace pasa {

struct Metrics {
  std::size_t elements = 0, rows = 0;  // rows = B·N·S output rows of D elements
  // PASA Eq. 19: ‖O − O_golden‖₂ / ‖O_golden‖₂ over the whole output, sums in double-double. NaN/inf output
  // elements are counted, not dropped: rmse is NaN if any element is NaN, else +inf if any is ±inf. A golden
  // exactly zero gives 0 for an output exactly zero (exact), +inf otherwise.
  // Golden elements that are NaN/inf (inputs holding NaN/inf, allow_nonfinite) are exact where the output
  // holds the same special value (left out of every sum and count), and count as NaN elements otherwise.
  double rmse = 0;
  double rmse_finite = 0;      // the same ratio over the finite output elements only (NaN when there are none)
  std::size_t nan_count = 0, inf_count = 0;
  double nan_pct = 0, inf_pct = 0;        // of all elements (PASA Table 4 reports nan_pct)
  std::size_t rows_with_nonfinite = 0;
  double rows_with_nonfinite_pct = 0;     // share of rows containing any NaN/inf
  // Over the finite elements: max |o − g|, max |o − g|/|g| over g ≠ 0, and cos(o, g) (with a zero norm: 1
  // when both o and g are zero, 0 when only one is); all three NaN when no element is finite (cosine 1
  // when every element is a special value the output matches exactly).
  double max_abs_err = 0, max_rel_err = 0, cosine = 0;
  // Against the uniform-weights baseline B (uniform_baseline(): every row the mean of V over its visible
  // keys, the output that ignores the scores). Eq. 19 has little range when V has a large mean (uniform
  // x0 = 20, Am = 0.5, shape (1, 16, 1280, 128): B itself has rmse 1.0e-2), so these say how much of the
  // attention an output keeps:
  //   rmse_uniform_baseline = ‖B − G‖ / ‖G‖        (Eq. 19 of the baseline; depends on the inputs only)
  //   rmse_centred          = ‖(O − B) − (G − B)‖ / ‖G − B‖ = ‖O − G‖ / ‖G − B‖: Eq. 19 of the attention's
  //                           deviation from the row means of V (0 exact, 1 no better than B)
  //   skill                 = 1 − rmse / rmse_uniform_baseline = 1 − rmse_centred (1 exact, 0 no
  //                           information from QKᵀ, < 0 worse than ignoring the scores)
  // rmse_centred and skill follow rmse's NaN/inf rule (NaN if any output element is NaN, else inf/-inf if
  // any is ±inf); with G = B (e.g. V constant along the keys) rmse_centred is 0 (O = G) or inf.
  // All three are NaN when compare_outputs is called without the baseline.
  double rmse_uniform_baseline = 0, rmse_centred = 0, skill = 0;
};

// Throws InputError when the shapes differ. The baseline metrics are NaN when the baseline holds NaN/inf
// where the golden is finite.
Metrics compare_outputs(const Tensor& out, const Tensor& golden, const Tensor& baseline);
// The metrics of several outputs of one problem (the algorithms of a sweep case) against its golden and
// baseline, in one pass over the elements: every output's Metrics is that of compare_outputs(*out, golden,
// baseline) bit for bit, in about the time of one call. Where more than one thread can run it (`threads`,
// or helpers waiting: parallel_width in core/parallel.hpp) each output and the baseline get a pass of their
// own, side by side: the same sums in the same element order, so the same bits.
std::vector<Metrics> compare_outputs(const std::vector<const Tensor*>& outs, const Tensor& golden, const Tensor& baseline,
                                     int threads = 1);
namespace detail {
// Per output, the sums and counts of compare_outputs (metrics.cpp).
struct OutputSums {
  DD err2, gold2, out2, dot;
  std::size_t finite_pairs = 0, exact_specials = 0, nan_count = 0, inf_count = 0, rows_with_nonfinite = 0;
  double max_abs_err = 0, max_rel_err = 0;
};
}  // namespace detail
// compare_outputs of several outputs with the golden and the baseline arriving a block of rows at a time, in
// row order (golden_stream, exact/golden_compare.hpp), so that neither is ever whole: finish() gives
// compare_outputs(outs, golden, baseline, threads) bit for bit (the same sums in the same element order).
class OutputComparison {
 public:
  // Throws InputError when an output's shape is not `shape` (the golden's).
  OutputComparison(std::vector<const Tensor*> outs, const Shape& shape, int threads = 1);
  // Rows [row0, row0 + rows) (row (b·Nq + h)·Sq + i) of the golden and of the baseline, D doubles each; the
  // rows in order from 0, each once (std::logic_error otherwise).
  void add(std::size_t row0, std::size_t rows, const double* golden, const double* baseline);
  // After every row (std::logic_error otherwise).
  std::vector<Metrics> finish() const;

 private:
  std::vector<const Tensor*> outs_;
  Shape shape_;
  int threads_;
  std::vector<detail::OutputSums> sums_;
  DD base2_, gold2_;
  bool base_nonfinite_ = false;
  std::size_t next_row_ = 0;
};
// The same without the baseline metrics (rmse_uniform_baseline, rmse_centred, skill are NaN).
Metrics compare_outputs(const Tensor& out, const Tensor& golden);

struct ScoreStats {
  std::size_t entries = 0;            // visible (unmasked) entries of QKᵀ
  double min = 0, max = 0;            // of scale·QKᵀ over the visible entries (exact scores, rounded to double)
  double min_unscaled = 0, max_unscaled = 0;  // of QKᵀ
  std::string format;                 // the score format the counts below refer to
  // |QKᵀ| > max_finite (the paper's check), and entries that round (RNE) to ±inf/NaN in the format
  // (for fp16: |QKᵀ| >= 65520, the overflow of FA-FP16/FP32); then the same for scale·QKᵀ.
  std::size_t over_max = 0, overflow = 0;
  std::size_t over_max_scaled = 0, overflow_scaled = 0;
};

// Scores are computed as in the golden (double-double, error-free products); the scale is effective_scale().
ScoreStats score_stats(const AttentionInputs&, const Format& score_format, int threads = default_threads());
// Memory score_stats needs beyond its inputs, in bytes (saturating): per thread, one (batch, head) at a time,
// its keys in strips, the scores of a group of rows, one row's padded scratch and the keys' KeyInfo.
std::size_t score_stats_bytes(const Shape& q, const Shape& kv, int threads = default_threads());


}  // namespace pasa
