// Unified attention ([UA]): one call for a mixed batch of prefill and decode sequences over a paged KV
// cache. A sequence's context lives in fixed-size cache blocks named by its block table; its new tokens
// (the last q_len of the context: 1 for decode, more for a prefill chunk) attend to three parts, each
// computed as an unnormalised (O, max, sum) and merged at the end in the allocation's `merge` stage
// (attention/detail/split_kv.hpp; PASA parts carry their pseudo-average):
//   prefix  the leading shared_blocks blocks (a prefix shared with other sequences: the same cache blocks)
//   unique  the rest of the cached context, before the new tokens
//   causal  the new tokens themselves, causal (new token i sees new tokens 0..i)
// An empty part is left out. Every part runs the chosen engine (fa2, smooth_k or pasa; with its own
// split-KV when splits > 1) under the same allocation.
#pragma once

#include <cstddef>
#include <vector>

#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/inputs/attention_inputs.hpp"

namespace pasa {

// The paged KV cache: num_blocks blocks of block_size tokens; K and V each (num_blocks, Nkv, block_size, D),
// exact values of `format`.
struct PagedCache {
  std::size_t num_blocks = 0, block_size = 16, Nkv = 1, D = 1;
  Format format = format_by_name("fp16");
  std::vector<double> k, v;
};

struct PagedSequence {
  std::size_t q_len = 1;    // new tokens: the last q_len tokens of the context (1: decode)
  std::size_t ctx_len = 1;  // tokens of the sequence in the cache, the new ones included
  std::size_t shared_blocks = 0;          // leading blocks shared with other sequences (the prefix part)
  std::vector<std::size_t> block_table;   // cache block of logical block t, for t < ceil(ctx_len / block_size)
};

struct PagedBatch {
  Tensor q;  // (1, Nq, Σ q_len, D): the new tokens of every sequence, concatenated in sequence order
  PagedCache cache;
  std::vector<PagedSequence> seqs;
  double scale = 0;  // 0: 1/sqrt(D)
};

// InputError naming the sequence and entry: Q's token count ≠ Σ q_len, Nq not a multiple of Nkv, D
// mismatch, cache arrays of the wrong size, block_size = 0, q_len = 0 or > ctx_len, a block table shorter
// than the context needs (a context longer than its table), an entry outside the cache, shared_blocks
// reaching into the new tokens' blocks beyond the cached context, a non-finite Q value. A non-finite K or V
// value is reported (sequence, token, cache block) when unified_attention or the golden reads it.
void validate(const PagedBatch&);

// Sequence s as dense inputs: Q (1, Nq, q_len, D), K/V (1, Nkv, ctx_len, D) gathered through the block
// table, causal (aligned to the end: new token i sees keys j <= i + ctx_len − q_len). The golden of these
// is the exact result of the sequence's part of unified_attention.
AttentionInputs sequence_inputs(const PagedBatch&, std::size_t s);

// O (1, Nq, Σ q_len, D) in the allocation's out format and lse (Nq × Σ q_len). spec.name: fa2, smooth_k or
// pasa; s1 applies within each sequence, s2 within each part.
AttentionOutput unified_attention(const PagedBatch&, const AlgorithmSpec&, int threads = default_threads());

// The golden of the whole batch (every sequence's golden, concatenated like unified_attention's output);
// guaranteed_bits and error_bound are the worst over the sequences.
Golden unified_golden(const PagedBatch&, const GoldenOptions& = {});

}  // namespace pasa
