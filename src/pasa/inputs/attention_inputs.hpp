// The inputs of one attention problem: Q (B, Nq, Sq, D), K and V (B, Nkv, Skv, D), a scale and a mask.
// Separate query and KV head counts (GQA: query head h reads KV head h / group()) and separate query and
// KV lengths (cross-attention, decode). Every algorithm and the golden read the same exact input values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pasa/inputs/tensor.hpp"

namespace pasa {

struct Mask {
  // Causal aligned to the end of each sequence's keys (bottom-right, as FlashAttention's varlen kernels and
  // decode): with L = kv_len[b] (Skv without kv_len), key j is visible to query i iff j <= i + (L - Sq).
  // With Sq > L the first Sq - L query rows see nothing (fully masked rows).
  bool causal = false;
  std::vector<std::size_t> kv_len;  // per batch valid KV length (empty: all Skv keys); keys j >= kv_len[b] hidden
  std::vector<std::uint8_t> keep;   // optional boolean (B, Sq, Skv), 1 = visible (empty: all visible)
  // Masking by select, as a decode kernel does it ([IFA]: atten_mask, true = masked): the score of a
  // selected key is REPLACED by select_value (rounded to the engine's score format), the key still takes
  // part in the softmax. Unlike keep/kv_len/causal (the exact masks: the key is absent), the effect of the
  // value is visible: a row whose keys are all selected averages V over them, and a value that overflows
  // the score format becomes −inf. Optional (B, Sq, Skv), 1 = masked (empty: none).
  std::vector<std::uint8_t> select;
  double select_value = -1e12;  // finite; the fp32 constant such kernels write into masked scores
};

// Fully masked rows (no visible key) have a defined result everywhere in pasa: output 0, lse = -inf.
struct AttentionInputs {
  Tensor q, k, v;
  double scale = 0;              // 0 means 1/sqrt(D); the golden then uses the exact 1/sqrt(D), not its double
  Mask mask;
  // Additive position bias [IFA] (pse): the score of key j for query row i is q·k·scale + pse[b, h, i, j].
  // Shape (B or 1, Nq, Sq, Skv) held as a Tensor whose D is Skv (B = 1 broadcasts over the batch); values
  // enter exactly (store them on a format's grid to model an fp16 pse). Empty data: no bias.
  Tensor pse;
  bool allow_nonfinite = false;  // validate() rejects NaN/inf input elements unless this is set

  std::size_t group() const { return k.shape.N == 0 ? 0 : q.shape.N / k.shape.N; }  // N_q / N_kv (GQA)
  double effective_scale() const;  // scale, or the double nearest to 1/sqrt(D)
};

// Throws InputError naming the problem: shape mismatch between Q, K and V, D = 0, empty sequences,
// N_q not a multiple of N_kv, data size != shape, bad mask sizes or kv_len > Skv, a pse of the wrong shape
// or with non-finite values, a non-finite select_value, non-finite scale,
// NaN/inf elements (with their tensor and index) unless allow_nonfinite (scanned on `threads` threads).
void validate(const AttentionInputs&, int threads = 1);
// The shape checks of validate() alone (Q, K, V agree: B, D, K = V, N_q % N_kv; no zeros), for inputs known
// by their shapes before their data are read (.npy headers).
void validate_shapes(const Shape& q, const Shape& k, const Shape& v);

// Q, K and V at their formats' widths where they have one (inputs/tensor.hpp narrowed), on `threads` threads.
void narrow_inputs(AttentionInputs&, int threads = 1);
bool has_narrow(const AttentionInputs&);
// The inputs as doubles for a reader that takes only those: in itself when Q, K and V are wide, else a copy
// with them widened, made in own (the same values, so the same bits downstream).
const AttentionInputs& wide_inputs(const AttentionInputs& in, AttentionInputs& own, int threads = 1);

// The pse row (Skv values) of query row i of head h in batch b, or nullptr without pse.
const double* pse_row(const AttentionInputs&, std::size_t b, std::size_t h, std::size_t i);
// The select mask row (Skv flags, 1 = score replaced by select_value) of query row i in batch b, or nullptr.
const std::uint8_t* select_row(const AttentionInputs&, std::size_t b, std::size_t i);

// Whether key j is visible to query row i of batch b (the three mask kinds combined).
bool visible(const AttentionInputs&, std::size_t b, std::size_t i, std::size_t j);

// The visible keys of a row lie in [0, visible_end(b, i)) (causal and kv_len cut a prefix); the boolean
// keep mask may hide more inside it.
std::size_t visible_end(const AttentionInputs&, std::size_t b, std::size_t i);

}  // namespace pasa
