// Unified attention ([UA]): one call for a mixed batch of prefill and decode sequences over a paged KV
// cache. A sequence's context lives in fixed-size cache blocks named by its block table; its new tokens
// (the last q_len of the context: 1 for decode, more for a prefill chunk) attend to three parts, each
// computed as an unnormalised (O, max, sum) and merged at the end in the allocation's `merge` stage
// (attention/detail/split_kv.hpp; PASA parts carry their pseudo-average):
//   prefix  the leading shared_blocks blocks (a prefix shared with other sequences: the same cache blocks)
//   unique  the rest of the cached context, before the new tokens
//   causal  the new tokens themselves, causal (new token i sees new tokens 0..i)
// An empty part is left out. Every part runs the chosen engine (fa2 or pasa, the registry's `unified`; with its own
// split-KV when splits > 1) under the same allocation.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

#include <sys/mman.h>

#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/inputs/generators.hpp"

namespace pasa {

// Storage of large arrays: memory asked for transparent huge pages (madvise), so that touching a cache of
// gigabytes takes thousands of page faults instead of hundreds of thousands (each costly in a VM), and
// resize(n) leaves the new elements unset (default-initialised), so that the first touch of each page is the
// writing of its values, by whichever thread writes them (assign(n, x) and resize(n, x) still set them).
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(std::size_t n);
  void deallocate(T* p, std::size_t) noexcept { std::free(p); }
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

// The paged KV cache: num_blocks blocks of block_size tokens; K and V each (num_blocks, Nkv, block_size, D),
// exact values of `format`, stored as floats (4 bytes instead of a double's 8; every format up to fp32 fits:
// fp16, bf16, fp8; validate rejects a wider one). Every slot of a block that a table names, up to the
// sequence's ctx_len, must be set (resize leaves new slots unset, see HugePageAllocator).
struct PagedCache {
  std::size_t num_blocks = 0, block_size = 16, Nkv = 1, D = 1;
  Format format = format_by_name("fp16");
  std::vector<float, HugePageAllocator<float>> k, v;
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

// InputError naming the sequence and entry: Q's token count ≠ Σ q_len, Nq not a multiple of Nkv, D mismatch, a
// cache format wider than fp32, cache arrays of the wrong size, block_size = 0, q_len = 0 or > ctx_len, a block
// table shorter than the context needs (a context longer than its table), an entry outside the cache,
// shared_blocks reaching into the new tokens' blocks beyond the cached context, a non-finite Q value. A
// non-finite K or V value is reported (sequence, token, cache block) when unified_attention or the golden reads
// it (the first in cache order).
void validate(const PagedBatch&);

// Sequence s as dense inputs: Q (1, Nq, q_len, D), K/V (1, Nkv, ctx_len, D) gathered through the block
// table, causal (aligned to the end: new token i sees keys j <= i + ctx_len − q_len). The golden of these
// is the exact result of the sequence's part of unified_attention.
AttentionInputs sequence_inputs(const PagedBatch&, std::size_t s);

// O (1, Nq, Σ q_len, D) in the allocation's out format and lse (Nq × Σ q_len). spec.name: fa2 or pasa; s1
// applies within each sequence, s2 within each part.
// How it runs (the results do not depend on it): fa2 whose k and v stages hold the cache's values as they
// are (the cache format, or plain fp64) reads the cache in place, each K/V tile staged from its blocks
// through the block table, with the work items of all sequences in parallel; otherwise (pasa, which
// pre-processes K; a k or v stage that rounds the cache) each sequence's K and V are gathered into dense
// tensors, one sequence at a time. Without stochastic rounding the G = Nq/Nkv query heads of a KV head form
// one work item (G·s1 rows against each K/V tile); with it each head keeps its own item and random stream.
// Every row's result is that of its own single-head item, bit for bit.
AttentionOutput unified_attention(const PagedBatch&, const AlgorithmSpec&, int threads = default_threads());

// The golden of the whole batch (every sequence's golden, concatenated like unified_attention's output);
// guaranteed_bits and error_bound are the worst over the sequences. Bit for bit golden_attention of each
// sequence's dense causal inputs (sequence_inputs), computed in parts of one KV head and up to 32 new tokens
// (exact/golden.hpp, golden_parts), all parts of all sequences on the threads at once, each reading the keys
// of its KV head that its rows see from the cache a tile at a time (gathered whole only where a part falls
// back on MPFR: memory for one such part per thread).
Golden unified_golden(const PagedBatch&, const GoldenOptions& = {});

// Memory unified_golden needs beyond its batch, in bytes (saturating), for Nq query and Nkv KV heads of
// dimension D, `sequences` sequences of at most max_q new tokens and max_ctx keys, `tokens` new tokens in all.
std::size_t unified_golden_bytes(std::size_t Nq, std::size_t Nkv, std::size_t D, std::size_t sequences, std::size_t max_q,
                                 std::size_t max_ctx, std::size_t tokens, const GoldenOptions& = {});

// A paged problem ("kind": "paged", ProblemSpec::paged, inputs/paged_problem.hpp) as a batch: the layout
// resolved (generated block tables: a seeded permutation of the cache's blocks); Q (1, Nq, Σ q_len, D) the
// tensor the q generator draws for that shape (stream "q", as generate_tensor); the cache's K and V the tensors
// (num_blocks, Nkv, block_size, D) the k and v generators draw (streams "k" and "v": cache block b is batch b,
// so resonance's seq_bias grows along a block), each (block, head) drawn by generate_head and stored as floats.
// Every slot of every block holds a value, so any table (a shared block, a partly filled last block, spare
// blocks) reads defined values. Throws InputError (the problem's messages) before anything is allocated.
PagedBatch generate_paged(const ProblemSpec&, int threads = default_threads());

// What the other problems' metrics need, per sequence on its dense inputs (sequence_inputs) and gathered like
// unified_attention's output: the uniform-weights baseline (exact/baseline.hpp; every row the mean of V over
// the keys it sees) and the score statistics (exact/metrics.hpp; minima, maxima and counts over the sequences).
Tensor unified_baseline(const PagedBatch&, int threads = default_threads());
ScoreStats unified_score_stats(const PagedBatch&, const Format& score_format, int threads = default_threads());

// Everything unified_attention checks of an algorithm before it touches a value, for a paged problem (its
// validate() first): the algorithm runs unified attention (the registry's `unified`: fa2, pasa), no FP8 recipe,
// s1, s2, splits >= 1, and validate_case on the layout of the batch's largest sequence (1, Nq, max q_len, D)
// against (1, Nkv, max ctx_len, D). Messages start with the pointer inside the algorithm JSON ("/name: ...").
// validate_case(ProblemSpec, ...) (algorithm.hpp) calls it for a paged problem.
void validate_unified(const ProblemSpec&, const AlgorithmSpec&);

// Bytes a paged problem needs (core/memory.hpp; saturating): the process base, Q and the cache, and the larger
// of the kernels' phase (the outputs of the algorithms before, a gathered sequence, the engine's buffers) and
// the metrics' (every output, kept for one metrics pass, with the golden, unified_golden_bytes, or with the
// golden's output, the baseline and a gathered sequence).
std::size_t unified_memory_bytes(const ProblemSpec&, const std::vector<AlgorithmSpec>&, const GoldenOptions&);

template <class T>
T* HugePageAllocator<T>::allocate(std::size_t n) {
  constexpr std::size_t huge = std::size_t{1} << 21;  // 2 MiB, x86-64's transparent huge page
  const std::size_t bytes = n * sizeof(T);
  if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
  if (bytes < huge) {
    if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return static_cast<T*>(p);
    throw std::bad_alloc();
  }
  void* p = std::aligned_alloc(huge, (bytes + huge - 1) / huge * huge);
  if (!p) throw std::bad_alloc();
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without huge pages the memory works the same
  return static_cast<T*>(p);
}

}  // namespace pasa
