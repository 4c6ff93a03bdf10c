// The layout of a paged-KV problem ([UA], seed 003; attention/unified.hpp runs it): a batch of sequences,
// each with q_len new tokens at the end of a context of ctx_len tokens that lives in cache blocks of
// block_size tokens named by its block table. Decode steps (q_len 1), chunked prefills and fresh prefills
// (q_len = ctx_len) mix in one batch; sequences share a prefix by naming the same cache blocks.
// ProblemSpec::paged holds it (generators.hpp); its values come from ProblemSpec's generators
// (attention/unified.hpp generate_paged says how).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace pasa {

struct PagedSequenceSpec {
  std::size_t q_len = 1;          // new tokens (1: a decode step)
  std::size_t ctx_len = 1;        // tokens in the cache, the new ones included
  std::size_t shared_blocks = 0;  // leading blocks computed as the shared-prefix part (unified.hpp)
  // share_from r (< this sequence's index): its first shared_blocks blocks are sequence r's cache blocks (a
  // generated table only; a given table says itself which blocks are shared).
  std::optional<std::size_t> share_from;
  std::vector<std::size_t> block_table;  // given: one cache block per logical block; empty: generated
};

struct PagedLayout {
  std::size_t block_size = 16;
  std::size_t num_blocks = 0;  // cache blocks; 0: as many as the tables need (given: the largest entry + 1)
  std::vector<PagedSequenceSpec> seqs;

  bool given_tables() const { return !seqs.empty() && !seqs.front().block_table.empty(); }
  std::size_t tokens() const;                    // Σ q_len: the query rows of the batch
  std::size_t max_q_len() const, max_ctx_len() const;
  std::size_t blocks_of(std::size_t s) const;    // ceil(ctx_len / block_size)
};

// Throws InputError for an impossible layout; every message starts with the JSON pointer, in the problem's
// JSON (io/problem_json.hpp), of what is wrong ("/block_size: ...", "/sequences/2/share_from: ...",
// "/sequences/1/block_table/4: ..."): block_size 0, no sequence, q_len 0 or > ctx_len, shared_blocks reaching
// into the new tokens, share_from not an earlier sequence or one with fewer than shared_blocks full blocks,
// share_from without shared_blocks or with a given table, tables given for some sequences only, a given table
// whose length is not ceil(ctx_len / block_size), an entry >= num_blocks, num_blocks below what a generated
// table needs, a cache whose element count overflows (with Nkv and D).
void validate(const PagedLayout&, std::size_t Nkv, std::size_t D);

// The layout with every block table filled in and num_blocks set. A generated table: the cache's blocks in
// the order of a seeded permutation of [0, num_blocks) (Fisher–Yates, Boost's uniform_int_distribution on
// mt19937_64 of the stream "block_table" of `seed`), handed out logical block by logical block, sequence by
// sequence, except the shared blocks of a sequence with share_from, which are its source's. num_blocks 0 is
// the blocks the tables need (spare blocks: a larger num_blocks). Reproducible bit for bit.
PagedLayout resolved(const PagedLayout&, std::uint64_t seed);

}  // namespace pasa
