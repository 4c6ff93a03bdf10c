// The golden attention: O = softmax(scale·QKᵀ + pse, masked)·V and lse = log Σ exp(scale·QKᵀ + pse) over the
// visible keys (a key masked by select has the score select_value instead, see Mask), from the exact input values, rounded to double only at the end. Every accuracy figure in pasa is
// measured against it. With scale = 0 the exact 1/sqrt(D) is used (not its double).
// Fully masked rows (no visible key): O = 0 and lse = -inf.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/inputs/tensor.hpp"

namespace pasa {

struct GoldenOptions {
  int precision_bits = 128;       // MPFR working precision of the plain path (and of the fast path's fallback)
  int threads = default_threads();
  // Fast path: exact-product double-double dot products, double-double exp and accumulation, with an a
  // posteriori error bound per block of rows; a block whose bound is below 64 bits is redone with MPFR.
  bool fast = true;
  // Called after each work item (batch, KV head, block of query rows) of the finite golden with the items
  // done so far and their count, from the worker threads (so it must be thread-safe and quick): how a long
  // run reports its progress (pasa-attn on a terminal). Empty: not called. Not called by the paths for
  // non-finite inputs or by golden_parts; nothing computed depends on it.
  std::function<void(std::size_t done, std::size_t total)> progress = {};
};

struct Golden {
  Tensor o;                 // (B, Nq, Sq, D), format fp64
  std::vector<double> lse;  // (B, Nq, Sq), natural log; -inf for fully masked rows
  // Before the final rounding to double, every element satisfies
  //   |O_computed - O_exact| <= 2^-guaranteed_bits · Σ_j p_j |v_jd| / Σ_j p_j   (+ 2^-900·max|v_d|)
  // with p_j the exact softmax weights of the row: a relative bound whenever the V column has one sign,
  // otherwise relative to the weighted mean of |V|; and |lse_computed - lse_exact| <= 2^-guaranteed_bits
  // ·(1 + |lse|). guaranteed_bits >= 54 means the stored doubles are faithful roundings (one-signed V).
  // 1000 means no visible key anywhere (all results exactly 0 / -inf).
  int guaranteed_bits = 0;
  // The bound itself: the largest relative error bound E of any row (2^-guaranteed_bits >= E > 2^-(bits+1));
  // 0 when no key is visible anywhere.
  double error_bound = 0;
  bool used_mpfr = false;   // some block (or all, fast = false) was computed by the plain MPFR path
};

// Memory golden_attention needs beyond its inputs (output, lse, per-thread row buffers and MPFR numbers),
// in bytes, saturating at kTooLarge (core/memory.hpp).
std::size_t golden_bytes(const Shape& q, const Shape& kv, const GoldenOptions& = {});

// Validates the inputs (InputError). Inputs holding NaN/inf (allowed by in.allow_nonfinite) get what IEEE 754
// arithmetic on the exact values gives (golden_nonfinite.cpp states it row by row: NaN rows where a score
// is NaN or +inf, ±inf/NaN columns where V holds them, the finite golden elsewhere). Deterministic: the
// result does not depend on options.threads.
Golden golden_attention(const AttentionInputs&, const GoldenOptions& = {});

// Rows [row0, row0 + rows) of the golden's output (row (b·Nq + h)·Sq + i, D doubles each, in the layout of
// Golden::o) and their lse, as golden_stream hands them over; the pointers are valid during the call only.
using GoldenSink = std::function<void(std::size_t row0, std::size_t rows, const double* o, const double* lse)>;
// golden_attention without its whole output alive at once: the rows go to `sink` in order, a chunk of whole
// (batch, KV head) pairs at a time (golden_stream_rows rows), every bit as golden_attention gives them; the
// returned Golden has the bound, bits and MPFR use, and an empty o and lse. Inputs holding NaN/inf
// (allow_nonfinite) are computed whole and handed over in one call. For metrics over outputs too large to
// keep a second fp64 copy of (compare_with_golden, exact/golden_compare.hpp).
Golden golden_stream(const AttentionInputs&, const GoldenOptions&, const GoldenSink& sink);
// The rows golden_stream holds at once: whole (batch, KV head) pairs, enough of them for 4 work items per
// thread, at most 32 MiB of output unless one pair is larger (then one pair).
std::size_t golden_stream_rows(const Shape& q, const Shape& kv, int threads);
// Memory golden_stream needs beyond its inputs (golden_bytes with a chunk of rows instead of the output).
std::size_t golden_stream_bytes(const Shape& q, const Shape& kv, const GoldenOptions& = {});
// Rows [j0, j0 + n) of part p's K (values = false) or V (values = true), as doubles into out (n × D).
using GoldenRows = std::function<void(std::size_t p, bool values, std::size_t j0, std::size_t n, double* out)>;

// The goldens of many small problems side by side, e.g. the (sequence, KV head, block of query rows) parts of
// a paged batch (unified_golden): opt.threads parts at a time, each computed on one thread (a finer split
// than golden_attention's threads over one problem's items, with no barrier between parts). Part p:
// fill(p, in) writes its Q, scale and mask and the shapes of its K and V, (1, 1, Skv, D), with B = 1 (`in`
// is a thread's, reused from part to part); kv_rows gives its keys and values. Where the fast path's range test
// passes whatever K and V hold (|k|, |v| <= kv_bound) and the part has at most 32 query rows, they are read a
// tile of keys at a time and never held whole (no gathered copy streams through memory); otherwise they
// are gathered whole. kv_rows must give finite values (not scanned again here: the caller checks them as
// it copies them); it and fill may throw, which ends the call. Parts with the same group[p] share one
// fast-path decision, that of their union (its largest |q|, |k|, |v|, |pse| and longest key range): where
// the parts of a group are (KV head, block of 32 query rows) pieces of one problem, each with the keys its
// rows can see, every part's result is bit for bit its rows of golden_attention of that problem (rows are
// computed one by one, golden_rows.cpp), and its bits, bound and MPFR use are that problem's over its rows.
std::vector<Golden> golden_parts(std::size_t parts, const std::vector<std::size_t>& group,
                                 const std::function<void(std::size_t, AttentionInputs&)>& fill,
                                 const GoldenRows& kv_rows, double kv_bound, const GoldenOptions& = {});

// The most scores (rows × keys) a thread of the golden keeps between its two passes over the keys; a longer
// group of rows computes its scores twice instead (the same bits). Tests set it to check that both ways
// agree; nothing else should change it.
std::size_t& golden_held_scores();

// Rows of query a golden_attention work item (and a part of golden_parts) computes together: one block.
inline constexpr std::size_t kGoldenRowBlock = 32;

}  // namespace pasa
