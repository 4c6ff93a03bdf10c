// The metrics of outputs against the golden and the uniform-weights baseline without either held whole: the
// golden streamed (golden_stream, a chunk of whole (batch, KV head) pairs at a time), the baseline computed for
// the same rows, both fed to OutputComparison and dropped. A long-context run then keeps its inputs and its
// outputs, not two more fp64 copies of the output (pasa-attn, the sweeps' library backend).
#pragma once

#include <cstddef>
#include <vector>

#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"

namespace pasa {

struct GoldenMetrics {
  std::vector<Metrics> metrics;  // one per output, compare_outputs(outs, golden, baseline) bit for bit
  Golden golden;                 // bound, bits, MPFR use; o and lse only when kept (keep_golden)
  double golden_seconds = 0;     // the golden's own time (the baseline's and the comparison's apart)
  double compare_seconds = 0;    // the baseline's and the comparison's
};

// compare_outputs(outs, golden_attention(in, opt).o, uniform_baseline(in, opt.threads), opt.threads), every
// bit, computed chunk by chunk; with keep_golden the whole golden output and lse are kept in the result too
// (pasa-attn --golden-npy). Validates the inputs (InputError), and the outputs' shapes against Q's.
GoldenMetrics compare_with_golden(const AttentionInputs& in, const std::vector<const Tensor*>& outs,
                                  const GoldenOptions& opt, bool keep_golden = false);
// Memory compare_with_golden needs beyond its inputs and the outputs (golden_stream_bytes, a chunk of the
// baseline; the whole golden with keep_golden).
std::size_t compare_with_golden_bytes(const Shape& q, const Shape& kv, const GoldenOptions& opt, bool keep_golden = false);

}  // namespace pasa
